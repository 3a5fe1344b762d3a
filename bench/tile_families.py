"""The tile-boundary sweep's families (bench/tile_sweep.py): how each op's
inputs are made (values, layouts: transposed, strided, expanded, offset,
broadcast) and which variants of every kernel family run, over which
dims, dtypes and parameters.  Imported by tile_sweep.py; torch is loaded
in the worker (`load_torch`), never in the sweep's parent process.
"""
import itertools
import math

SIZES = (1, 2, 127, 128, 129, 255, 256, 257, 511, 513)
DTYPES = ("float32", "bfloat16", "float16", "int32", "int64")
FLOAT = ("float32", "bfloat16", "float16")
INT = ("int32", "int64")
ALL = FLOAT + INT

torch = F = None      # set by load_torch in the worker


def load_torch():
    """torch and torch.nn.functional, imported on first use"""
    global torch, F
    if torch is None:
        import torch as t
        import torch.nn.functional as f
        torch, F = t, f
    return torch, F


# -- inputs -----------------------------------------------------------------------
def values(shape, dtype, g, kind="normal"):
    """A CPU tensor of SHAPE and DTYPE (a name) drawn from G.  KIND: normal
    (randn; integers in [-100, 100)), wide (randn * 4), pos (> 0), nonzero
    (|x| >= 0.5; integers 1..49 either sign), small (integers -3..3, as any
    dtype: equal values are common), bool, shift (integers 0..7)."""
    dt = getattr(torch, dtype)
    isint = not dt.is_floating_point and dt != torch.bool
    shape = tuple(shape)
    if dt == torch.bool or kind == "bool":
        return torch.rand(shape, generator=g) < 0.5
    if kind == "small":
        return torch.randint(-3, 4, shape, generator=g).to(dt)
    if kind == "shift":
        return torch.randint(0, 8, shape, generator=g).to(dt)
    if isint:
        if kind == "pos":
            return torch.randint(1, 100, shape, generator=g, dtype=dt)
        if kind == "nonzero":
            v = torch.randint(1, 50, shape, generator=g, dtype=dt)
            return torch.where(torch.rand(shape, generator=g) < 0.5, -v, v)
        return torch.randint(-100, 100, shape, generator=g, dtype=dt)
    x = torch.randn(shape, generator=g)
    if kind == "wide":
        x = x * 4
    elif kind == "pos":
        x = x.abs() + 0.1
    elif kind == "nonzero":
        x = torch.where(x < 0, x - 0.5, x + 0.5)
    return x.to(dt)


def _sentinel(dt):
    if dt == torch.bool:
        return True
    return float("nan") if dt.is_floating_point else 10 ** 6


def relayout(t, code):
    """T (a tensor with the values wanted) stored the way CODE says (module
    docstring); X is made by `make`, as its values repeat."""
    if code == "C" or t.dim() == 0:
        return t
    if code == "T":
        return t.transpose(-1, -2).contiguous().transpose(-1, -2) if t.dim() >= 2 else t
    if code == "L":
        if t.dim() == 4:
            return t.contiguous(memory_format=torch.channels_last)
        return relayout(t, "T")
    if code == "S":
        big = torch.full(t.shape[:-1] + (2 * t.shape[-1],), _sentinel(t.dtype), dtype=t.dtype)
        big[..., ::2] = t
        return big[..., ::2]
    if code == "O":
        flat = torch.full((t.numel() + 3,), _sentinel(t.dtype), dtype=t.dtype)
        flat[1:1 + t.numel()] = t.reshape(-1)
        return flat[1:1 + t.numel()].view(t.shape)
    raise ValueError(f"layout {code!r}")


def make(shape, dtype, code="C", g=None, kind="normal"):
    shape = tuple(shape)
    if code == "X" and len(shape) >= 1:
        return values((1,) + shape[1:], dtype, g, kind).expand(shape)
    return relayout(values(shape, dtype, g, kind), code)


def operand(shape, dtype, code, g, kind="normal"):
    """A second operand of SHAPE [R, C] for elementwise ops: CODE may also
    broadcast it (R row, K column, Z 0-dim) or make it a Python scalar (N)."""
    if code == "R":
        return make((1,) + tuple(shape[1:]), dtype, "C", g, kind)
    if code == "K":
        return make(tuple(shape[:-1]) + (1,), dtype, "C", g, kind)
    if code == "Z":
        return make((), dtype, "C", g, kind)
    if code == "N":
        v = values((), dtype, g, kind)
        return bool(v) if v.dtype == torch.bool else v.item()
    return make(shape, dtype, code, g, kind)


class Built:
    """What a case runs: FN(*ARGS) on either device; K, a contraction's length
    (scales atol); CHECK: close (values), topk / sort (`check_sorted`), with
    DIM its dimension."""

    def __init__(self, fn, args, K=None, check="close", dim=None, stable=False):
        self.fn, self.args, self.K, self.check, self.dim, self.stable = fn, args, K, check, dim, stable


# -- the families -------------------------------------------------------------------
class Variant:
    """One op (or way of calling it) of a family: DIMS swept over SIZES,
    DTYPES, LAYOUTS (strings of layout letters, one per tensor operand),
    PARAMS {name: options}, BUILD(dims, params, dtype, layout, generator)
    -> Built, COST(dims, params) (MACs or elements), BASE {dim: size} for the
    others while one dimension is swept, FIX(dims, params) making a drawn
    combination valid (clipping a kernel size to the input and so on)."""

    def __init__(self, family, op, dims, dtypes, layouts, build, params=None, cost=None, base=None, fix=None):
        self.family, self.op, self.dims, self.dtypes, self.layouts = family, op, tuple(dims), tuple(dtypes), \
            tuple(layouts)
        self.build, self.params = build, dict(params or {})
        self.cost = cost or (lambda d, p: math.prod(d.values()))
        self.base = {k: (base or {}).get(k, 33) for k in self.dims}
        self.fix = fix

    @property
    def key(self):
        return f"{self.family}/{self.op}"


VARIANTS = []
FAMILY_DOC = {}


def variant(family, op, dims, dtypes, layouts, params=None, cost=None, base=None, fix=None):
    def reg(build):
        VARIANTS.append(Variant(family, op, dims, dtypes, layouts, build, params, cost, base, fix))
        return build
    return reg


# matmul / linear / bmm / addmm ------------------------------------------------------
FAMILY_DOC["matmul"] = "mm, matmul (3-D @ 2-D, batched, broadcast batch), linear, bmm, addmm"
MM_LAYOUTS = ("CC", "TC", "CT", "TT", "SC", "CS", "XC", "CX", "OO")
MM_BASE = dict(B=3, M=33, K=65, N=17)


def _mm_cost(d, p):
    """MACs, and 16 per element of the operands and the result (a case's
    memory stays under about 50 MB)."""
    B, M, K, N = d.get("B", 2), d["M"], d["K"], d["N"]
    return B * M * K * N + 16 * B * (M * K + K * N + M * N)


@variant("matmul", "mm", "MKN", ALL, MM_LAYOUTS, base=MM_BASE, cost=_mm_cost)
def _mm(d, p, dt, lay, g):
    a = make((d["M"], d["K"]), dt, lay[0], g)
    b = make((d["K"], d["N"]), dt, lay[1], g)
    return Built(torch.mm, (a, b), K=d["K"])


@variant("matmul", "matmul", "MKN", ALL, MM_LAYOUTS, params={"form": ["3x2", "3x3", "3x3b"]}, base=MM_BASE,
         cost=_mm_cost)
def _matmul(d, p, dt, lay, g):
    M, K, N = d["M"], d["K"], d["N"]
    a = make((2, M, K), dt, lay[0], g)
    b = make({"3x2": (K, N), "3x3": (2, K, N), "3x3b": (1, K, N)}[p["form"]], dt, lay[1], g)
    return Built(torch.matmul, (a, b), K=K)


@variant("matmul", "linear", "MKN", ALL, MM_LAYOUTS, params={"bias": [True, False]}, base=MM_BASE, cost=_mm_cost)
def _linear(d, p, dt, lay, g):
    M, K, N = d["M"], d["K"], d["N"]
    x = make((M, K), dt, lay[0], g)
    w = make((N, K), dt, lay[1], g)          # T: W stored K-major (as W.t() of a [K, N] tensor)
    b = make((N,), dt, "C", g) if p["bias"] else None
    return Built(F.linear, (x, w, b), K=K)


@variant("matmul", "bmm", "BMKN", ALL, MM_LAYOUTS, base=MM_BASE, cost=_mm_cost)
def _bmm(d, p, dt, lay, g):
    a = make((d["B"], d["M"], d["K"]), dt, lay[0], g)
    b = make((d["B"], d["K"], d["N"]), dt, lay[1], g)
    return Built(torch.bmm, (a, b), K=d["K"])


@variant("matmul", "addmm", "MKN", ALL, MM_LAYOUTS, base=MM_BASE, cost=_mm_cost,
         params={"bias": ["row", "full", "col"], "beta_alpha": ["1,1", "0.5,2", "0,1"]})
def _addmm(d, p, dt, lay, g):
    M, K, N = d["M"], d["K"], d["N"]
    a = make((M, K), dt, lay[0], g)
    b = make((K, N), dt, lay[1], g)
    c = make({"row": (N,), "full": (M, N), "col": (M, 1)}[p["bias"]], dt, "C", g)
    beta, alpha = (float(v) for v in p["beta_alpha"].split(","))
    if dt in INT:
        beta, alpha = int(beta) if beta == int(beta) else 2, int(alpha)
    return Built(lambda c, a, b: torch.addmm(c, a, b, beta=beta, alpha=alpha), (c, a, b), K=K)


# convolution ---------------------------------------------------------------------------
FAMILY_DOC["conv"] = "conv1d, depthwise conv1d, conv2d: channels, length / spatial, kernel, stride, padding"


def _conv_fix(spatial):
    def fix(d, p):
        if p["pad"] == "same":
            p["stride"] = 1
        n = min(d[s] for s in spatial)
        pad = 0 if p["pad"] == "same" else p["pad"]
        if p["pad"] != "same":
            p["k"] = max(1, min(p["k"], n + 2 * pad))
    return fix


def _conv_out(n, p):
    if p["pad"] == "same":
        return n
    return (n + 2 * p["pad"] - p["k"]) // p["stride"] + 1


CONV_PARAMS = {"k": [3, 1, 2, 5], "stride": [1, 2, 3], "pad": [1, 0, "same", 2], "bias": [True, False]}


@variant("conv", "conv1d", ("Cin", "Cout", "L"), FLOAT, ("C", "T", "S", "O"), params=CONV_PARAMS,
         base=dict(Cin=5, Cout=6, L=33), fix=_conv_fix(["L"]),
         cost=lambda d, p: 2 * d["Cout"] * d["Cin"] * p["k"] * _conv_out(d["L"], p))
def _conv1d(d, p, dt, lay, g):
    x = make((2, d["Cin"], d["L"]), dt, lay, g)          # T: [N, L, C] transposed (channels last)
    w = make((d["Cout"], d["Cin"], p["k"]), dt, "C", g)
    b = make((d["Cout"],), dt, "C", g) if p["bias"] else None
    return Built(lambda x, w, b: F.conv1d(x, w, b, stride=p["stride"], padding=p["pad"]), (x, w, b),
                 K=d["Cin"] * p["k"])


@variant("conv", "conv1d_depthwise", ("C", "L"), FLOAT, ("C", "T", "S", "O"), params=CONV_PARAMS,
         base=dict(C=5, L=33), fix=_conv_fix(["L"]),
         cost=lambda d, p: 2 * d["C"] * p["k"] * _conv_out(d["L"], p))
def _conv1d_dw(d, p, dt, lay, g):
    x = make((2, d["C"], d["L"]), dt, lay, g)
    w = make((d["C"], 1, p["k"]), dt, "C", g)
    b = make((d["C"],), dt, "C", g) if p["bias"] else None
    return Built(lambda x, w, b: F.conv1d(x, w, b, stride=p["stride"], padding=p["pad"], groups=x.shape[1]),
                 (x, w, b), K=p["k"])


@variant("conv", "conv2d", ("Cin", "Cout", "H", "W"), FLOAT, ("C", "L", "S", "O"), params=CONV_PARAMS,
         base=dict(Cin=3, Cout=4, H=17, W=17), fix=_conv_fix(["H", "W"]),
         cost=lambda d, p: (d["Cout"] * d["Cin"] * p["k"] ** 2 + 16 * (d["Cout"] + d["Cin"])) * d["H"] * d["W"])
def _conv2d(d, p, dt, lay, g):
    x = make((1, d["Cin"], d["H"], d["W"]), dt, lay, g)
    w = make((d["Cout"], d["Cin"], p["k"], p["k"]), dt, "L" if lay == "L" else "C", g)
    b = make((d["Cout"],), dt, "C", g) if p["bias"] else None
    return Built(lambda x, w, b: F.conv2d(x, w, b, stride=p["stride"], padding=p["pad"]), (x, w, b),
                 K=d["Cin"] * p["k"] ** 2)


# scaled_dot_product_attention -------------------------------------------------------------
FAMILY_DOC["sdpa"] = "F.scaled_dot_product_attention: no mask, causal, bool mask, float mask; q / kv lengths, head_dim"
SDPA_BASE = dict(Lq=33, Lkv=65, D=16)
HEADS = 2


def _qkv(shape, dt, code, g, is_q):
    B, H, L, D = shape
    if code == "T":                                  # [B, L, H, D] viewed as [B, H, L, D]
        return make((B, L, H, D), dt, "C", g).transpose(1, 2)
    if code == "X":                                  # k, v shared by the heads (expanded)
        return make(shape, dt, "C", g) if is_q else make((B, 1, L, D), dt, "C", g).expand(shape)
    return make(shape, dt, code, g)


def _sdpa_variant(op, mask):
    params = {"mask_shape": ["2d", "4d", "1h"]} if mask in ("bool", "float") else {}

    @variant("sdpa", op, ("Lq", "Lkv", "D"), FLOAT, ("C", "T", "X", "S", "O"), params=params, base=SDPA_BASE,
             cost=lambda d, p: HEADS * (2 * d["Lq"] * d["Lkv"] * d["D"] + 16 * d["Lq"] * d["Lkv"]))
    def build(d, p, dt, lay, g):
        Lq, Lkv, D = d["Lq"], d["Lkv"], d["D"]
        q = _qkv((1, HEADS, Lq, D), dt, lay, g, True)
        k = _qkv((1, HEADS, Lkv, D), dt, lay, g, False)
        v = _qkv((1, HEADS, Lkv, D), dt, lay, g, False)
        m = None
        if mask in ("bool", "float"):
            shape = {"2d": (Lq, Lkv), "4d": (1, HEADS, Lq, Lkv), "1h": (1, 1, Lq, Lkv)}[p["mask_shape"]]
            if mask == "bool":
                m = torch.rand(shape, generator=g) < 0.7
                diag = torch.arange(Lkv) == (torch.arange(Lq) % Lkv)[:, None]   # no row all False
                m = m | diag
            else:
                m = make(shape, dt, "C", g)
        causal = mask == "causal"
        return Built(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal),
                     (q, k, v, m), K=D)
    return build


for _op, _mask in (("sdpa", None), ("sdpa_causal", "causal"), ("sdpa_bool_mask", "bool"),
                   ("sdpa_float_mask", "float")):
    _sdpa_variant(_op, _mask)


# softmax, log_softmax; layer_norm, rms_norm --------------------------------------------------
FAMILY_DOC["softmax"] = "softmax, log_softmax along dim -1 / 0, with dtype=float32"
FAMILY_DOC["norm"] = "F.layer_norm, F.rms_norm over the last dim, with and without weight"
ROW_LAYOUTS = ("C", "T", "S", "X", "O")


def _softmax_variant(op):
    @variant("softmax", op, ("R", "C"), FLOAT, ROW_LAYOUTS, params={"dim": [-1, 0], "dtype": [None, "float32"]})
    def build(d, p, dt, lay, g):
        x = make((d["R"], d["C"]), dt, lay, g, "wide")
        fn = getattr(torch, op)
        out = getattr(torch, p["dtype"]) if p["dtype"] else None
        return Built(lambda x: fn(x, p["dim"], dtype=out), (x,))
    return build


_softmax_variant("softmax")
_softmax_variant("log_softmax")


@variant("norm", "layer_norm", ("R", "C"), FLOAT, ROW_LAYOUTS, params={"affine": [True, False]})
def _layer_norm(d, p, dt, lay, g):
    C = d["C"]
    x = make((d["R"], C), dt, lay, g, "wide")
    w, b = (make((C,), dt, "C", g), make((C,), dt, "C", g)) if p["affine"] else (None, None)
    return Built(lambda x, w, b: F.layer_norm(x, (C,), w, b, eps=1e-5), (x, w, b))


@variant("norm", "rms_norm", ("R", "C"), FLOAT, ROW_LAYOUTS, params={"weight": [True, False], "eps": [None, 1e-5]})
def _rms_norm(d, p, dt, lay, g):
    C = d["C"]
    x = make((d["R"], C), dt, lay, g, "wide")
    w = make((C,), dt, "C", g) if p["weight"] else None
    return Built(lambda x, w: F.rms_norm(x, (C,), w, eps=p["eps"]), (x, w))


# reductions ------------------------------------------------------------------------------------
FAMILY_DOC["reduce"] = "sum, mean, amax, amin, argmax, var along dim 0, 1, both and all, keepdim"
RED_DIMS = [1, 0, "all", "both"]


def _red_dim(v):
    return {"all": None, "both": (0, 1)}.get(v, v)


def _reduce_variant(op, dtypes, params):
    @variant("reduce", op, ("R", "C"), dtypes, ROW_LAYOUTS, params=params)
    def build(d, p, dt, lay, g):
        x = make((d["R"], d["C"]), dt, lay, g)
        dim, keep = _red_dim(p["dim"]), p["keepdim"]
        if op in ("sum", "mean"):
            fn = (lambda x: getattr(torch, op)(x)) if dim is None else \
                (lambda x: getattr(torch, op)(x, dim, keepdim=keep))
        elif op in ("amax", "amin"):
            fn = lambda x: getattr(torch, op)(x, () if dim is None else dim, keepdim=keep)  # noqa: E731
        elif op == "argmax":
            fn = lambda x: torch.argmax(x, dim, keepdim=keep)  # noqa: E731
        else:
            fn = lambda x: torch.var(x, dim, correction=p["correction"], keepdim=keep)  # noqa: E731
        return Built(fn, (x,))
    return build


_reduce_variant("sum", ALL, {"dim": RED_DIMS, "keepdim": [False, True]})
_reduce_variant("mean", FLOAT, {"dim": RED_DIMS, "keepdim": [False, True]})
_reduce_variant("amax", ALL, {"dim": RED_DIMS, "keepdim": [False, True]})
_reduce_variant("amin", ALL, {"dim": RED_DIMS, "keepdim": [False, True]})
_reduce_variant("argmax", ALL, {"dim": [1, 0, "all"], "keepdim": [False, True]})
_reduce_variant("var", FLOAT, {"dim": RED_DIMS, "keepdim": [False, True], "correction": [1, 0]})


# indexing -----------------------------------------------------------------------------------------
FAMILY_DOC["index"] = "x[idx] (rows, cols, pairs, masks), gather, scatter / scatter_add, index_select, " \
                      "index_add, index_put (accumulate or not), setitem"
IDX_LAYOUTS = ("C", "T", "S", "O", "X")


def _idx(n, high, g, dtype="int64", unique=False):
    if unique:
        return torch.randperm(high, generator=g)[:n].to(getattr(torch, dtype))
    return torch.randint(0, high, (n,), generator=g).to(getattr(torch, dtype))


@variant("index", "index_select", ("R", "C", "N"), ALL, IDX_LAYOUTS,
         params={"dim": [0, 1], "idx_dtype": ["int64", "int32"]})
def _index_select(d, p, dt, lay, g):
    x = make((d["R"], d["C"]), dt, lay, g)
    i = _idx(d["N"], x.shape[p["dim"]], g, p["idx_dtype"])
    return Built(lambda x, i: torch.index_select(x, p["dim"], i), (x, i))


@variant("index", "getitem", ("R", "C", "N"), ALL, IDX_LAYOUTS,
         params={"mode": ["rows", "cols", "pair", "mask", "rowmask"]})
def _getitem(d, p, dt, lay, g):
    R, C, N = d["R"], d["C"], d["N"]
    x = make((R, C), dt, lay, g)
    mode = p["mode"]
    if mode == "rows":
        return Built(lambda x, i: x[i], (x, _idx(N, R, g)))
    if mode == "cols":
        return Built(lambda x, i: x[:, i], (x, _idx(N, C, g)))
    if mode == "pair":
        return Built(lambda x, i, j: x[i, j], (x, _idx(N, R, g), _idx(N, C, g)))
    if mode == "mask":
        return Built(lambda x, m: x[m], (x, torch.rand(R, C, generator=g) < 0.5))
    return Built(lambda x, m: x[m], (x, torch.rand(R, generator=g) < 0.5))


@variant("index", "gather", ("R", "C", "N"), ALL, IDX_LAYOUTS, params={"dim": [1, 0]})
def _gather(d, p, dt, lay, g):
    R, C, N = d["R"], d["C"], d["N"]
    x = make((R, C), dt, lay, g)
    if p["dim"] == 1:
        i = torch.randint(0, C, (R, N), generator=g)
    else:
        i = torch.randint(0, R, (N, C), generator=g)
    return Built(lambda x, i: torch.gather(x, p["dim"], i), (x, i))


@variant("index", "scatter", ("R", "C", "N"), ALL, ("C", "T", "S", "O"),
         params={"dim": [1, 0], "reduce": [None, "add"]})
def _scatter(d, p, dt, lay, g):
    R, C, N = d["R"], d["C"], d["N"]
    x = make((R, C), dt, lay, g)
    if p["reduce"] == "add":              # duplicates summed
        i = torch.randint(0, C, (R, N), generator=g) if p["dim"] == 1 else torch.randint(0, R, (N, C), generator=g)
        src = make(i.shape, dt, "C", g)
        return Built(lambda x, i, s: torch.scatter_add(x, p["dim"], i, s), (x, i, src))
    # each position written once (which of two writes wins is unspecified)
    if p["dim"] == 1:
        i = torch.rand(R, C, generator=g).argsort(dim=1)[:, :min(N, C)]
    else:
        i = torch.rand(R, C, generator=g).argsort(dim=0)[:min(N, R)]
    src = make(i.shape, dt, "C", g)
    return Built(lambda x, i, s: torch.scatter(x, p["dim"], i, s), (x, i, src))


@variant("index", "index_add", ("R", "C", "N"), ALL, ("C", "T", "S", "O"),
         params={"dim": [0, 1], "alpha": [1, 2]})
def _index_add(d, p, dt, lay, g):
    R, C, N = d["R"], d["C"], d["N"]
    x = make((R, C), dt, lay, g)
    i = _idx(N, x.shape[p["dim"]], g)
    src = make((N, C) if p["dim"] == 0 else (R, N), dt, "C", g)
    return Built(lambda x, i, s: torch.index_add(x, p["dim"], i, s, alpha=p["alpha"]), (x, i, src))


@variant("index", "index_put", ("R", "C", "N"), ALL, ("C", "T", "S", "O"),
         params={"accumulate": [False, True], "values": ["full", "bcast"], "ndx": [1, 2]})
def _index_put(d, p, dt, lay, g):
    R, C, N = d["R"], d["C"], d["N"]
    x = make((R, C), dt, lay, g)
    acc = p["accumulate"]
    if p["ndx"] == 1:
        i = (_idx(N, R, g) if acc else _idx(min(N, R), R, g, unique=True),)
        v = make((i[0].numel(), C) if p["values"] == "full" else (C,), dt, "C", g)
    else:
        lin = torch.randint(0, R * C, (N,), generator=g) if acc else torch.randperm(R * C, generator=g)[:N]
        i = (lin // C, lin % C)
        v = make((lin.numel(),) if p["values"] == "full" else (1,), dt, "C", g)
    return Built(lambda x, v, *i: torch.index_put(x, i, v, accumulate=acc), (x, v) + i)


@variant("index", "setitem", ("R", "C", "N"), ALL, ("C", "T", "S", "O"), params={"mode": ["rows", "cols"]})
def _setitem(d, p, dt, lay, g):
    R, C, N = d["R"], d["C"], d["N"]
    x = make((R, C), dt, lay, g)
    if p["mode"] == "rows":
        i = _idx(min(N, R), R, g, unique=True)
        v = make((i.numel(), C), dt, "C", g)

        def fn(x, i, v):
            y = x.clone()
            y[i] = v
            return y
    else:
        i = _idx(min(N, C), C, g, unique=True)
        v = make((R, i.numel()), dt, "C", g)

        def fn(x, i, v):
            y = x.clone()
            y[:, i] = v
            return y
    return Built(fn, (x, i, v))


# cat ---------------------------------------------------------------------------------------------
FAMILY_DOC["cat"] = "torch.cat of 2 or 3 tensors along dim 0 / 1"


@variant("cat", "cat", ("A", "B", "C"), ALL, ("CC", "TC", "CT", "SS", "XC", "OC", "TS"),
         params={"dim": [0, 1], "n": [2, 3]})
def _cat(d, p, dt, lay, g):
    A, B, C = d["A"], d["B"], d["C"]
    shp = (lambda n: (n, C)) if p["dim"] == 0 else (lambda n: (C, n))
    ts = [make(shp(A), dt, lay[0], g), make(shp(B), dt, lay[1], g)]
    if p["n"] == 3:
        ts.append(make(shp(1), dt, "C", g))
    return Built(lambda *ts: torch.cat(ts, p["dim"]), tuple(ts))


# topk, sort ----------------------------------------------------------------------------------------
FAMILY_DOC["topk_sort"] = "topk (k swept, largest / smallest), sort (descending, stable) along dim -1 / 0"


def _topk_fix(d, p):
    """k <= the size along dim: that size grows to k (k keeps its value)."""
    n = "C" if p["dim"] == -1 else "R"
    d[n] = max(d[n], d["K"])


@variant("topk_sort", "topk", ("K", "R", "C"), ALL, ROW_LAYOUTS, params={"dim": [-1, 0], "largest": [True, False]},
         fix=_topk_fix, cost=lambda d, p: d["R"] * d["C"])
def _topk(d, p, dt, lay, g):
    x = make((d["R"], d["C"]), dt, lay, g)
    return Built(lambda x: torch.topk(x, d["K"], p["dim"], largest=p["largest"]), (x,), check="topk", dim=p["dim"])


@variant("topk_sort", "sort", ("R", "C"), ALL, ROW_LAYOUTS,
         params={"dim": [-1, 0], "descending": [False, True], "stable": [False, True]})
def _sort(d, p, dt, lay, g):
    x = make((d["R"], d["C"]), dt, lay, g)
    return Built(lambda x: torch.sort(x, dim=p["dim"], descending=p["descending"], stable=p["stable"]), (x,),
                 check="sort", dim=p["dim"], stable=p["stable"])


# elementwise ---------------------------------------------------------------------------------------
FAMILY_DOC["unary"] = "activations and math functions"
FAMILY_DOC["binary"] = "arithmetic with broadcasting (rows, columns, 0-dim, Python scalars)"
FAMILY_DOC["compare"] = "eq, ne, lt, le, gt, ge"
FAMILY_DOC["where"] = "torch.where with broadcast condition / operands"
FAMILY_DOC["clamp"] = "clamp with scalar and tensor bounds"
FAMILY_DOC["intops"] = "bitwise and / or / xor / not, shifts, floor_divide, remainder, fmod"
EW_LAYOUTS = ("C", "T", "S", "X", "O")
UNARY = {   # name: (fn, dtypes, input kind)
    "relu": (lambda x: torch.relu(x), ALL, "wide"),
    "gelu": (lambda x: F.gelu(x), FLOAT, "wide"),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), FLOAT, "wide"),
    "silu": (lambda x: F.silu(x), FLOAT, "wide"),
    "sigmoid": (lambda x: torch.sigmoid(x), FLOAT, "wide"),
    "tanh": (lambda x: torch.tanh(x), FLOAT, "wide"),
    "softplus": (lambda x: F.softplus(x), FLOAT, "wide"),
    "elu": (lambda x: F.elu(x), FLOAT, "wide"),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), FLOAT, "wide"),
    "mish": (lambda x: F.mish(x), FLOAT, "wide"),
    "hardtanh": (lambda x: F.hardtanh(x), FLOAT, "wide"),
    "exp": (lambda x: torch.exp(x), FLOAT, "normal"),
    "expm1": (lambda x: torch.expm1(x), FLOAT, "normal"),
    "log": (lambda x: torch.log(x), FLOAT, "pos"),
    "log1p": (lambda x: torch.log1p(x), FLOAT, "pos"),
    "sqrt": (lambda x: torch.sqrt(x), FLOAT, "pos"),
    "rsqrt": (lambda x: torch.rsqrt(x), FLOAT, "pos"),
    "reciprocal": (lambda x: torch.reciprocal(x), FLOAT, "nonzero"),
    "sin": (lambda x: torch.sin(x), FLOAT, "wide"),
    "cos": (lambda x: torch.cos(x), FLOAT, "wide"),
    "erf": (lambda x: torch.erf(x), FLOAT, "normal"),
    "floor": (lambda x: torch.floor(x), FLOAT, "wide"),
    "abs": (lambda x: torch.abs(x), ALL, "normal"),
    "neg": (lambda x: torch.neg(x), ALL, "normal"),
    "sign": (lambda x: torch.sign(x), ALL, "normal"),
    "square": (lambda x: torch.square(x), ALL, "normal"),
}
for _name, (_fn, _dts, _kind) in UNARY.items():
    def _unary(d, p, dt, lay, g, fn=_fn, kind=_kind):
        return Built(fn, (make((d["R"], d["C"]), dt, lay, g, kind),))
    variant("unary", _name, ("R", "C"), _dts, EW_LAYOUTS)(_unary)

BIN_LAYOUTS = ("CC", "TC", "CT", "SS", "XC", "CR", "CK", "CZ", "CN", "OO", "TR")
BINARY = {  # name: (fn, dtypes, kind of a, kind of b)
    "add": (lambda a, b: a + b, ALL, "normal", "normal"),
    "sub": (lambda a, b: a - b, ALL, "normal", "normal"),
    "mul": (lambda a, b: a * b, ALL, "normal", "normal"),
    "div": (lambda a, b: a / b, ALL, "normal", "nonzero"),
    "div_floor": (lambda a, b: torch.div(a, b, rounding_mode="floor"), ALL, "wide", "nonzero"),
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=2), ALL, "normal", "normal"),
    "maximum": (lambda a, b: torch.maximum(a, b) if isinstance(b, torch.Tensor) else torch.clamp(a, min=b),
                ALL, "normal", "normal"),
    "minimum": (lambda a, b: torch.minimum(a, b) if isinstance(b, torch.Tensor) else torch.clamp(a, max=b),
                ALL, "normal", "normal"),
    "pow": (lambda a, b: torch.pow(a, b), ALL, "pos", "shift"),
}
COMPARE = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
           "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}
INTOPS = {  # name: (fn, kind of a, kind of b or None)
    "bitwise_and": (lambda a, b: a & b, "normal", "normal"),
    "bitwise_or": (lambda a, b: a | b, "normal", "normal"),
    "bitwise_xor": (lambda a, b: a ^ b, "normal", "normal"),
    "bitwise_not": (lambda a: ~a, "normal", None),
    "lshift": (lambda a, b: a << b, "normal", "shift"),
    "rshift": (lambda a, b: a >> b, "normal", "shift"),
    "floor_divide": (lambda a, b: torch.floor_divide(a, b), "normal", "nonzero"),
    "remainder": (lambda a, b: torch.remainder(a, b), "normal", "nonzero"),
    "fmod": (lambda a, b: torch.fmod(a, b), "normal", "nonzero"),
}


def _binary(fn, ka, kb):
    def build(d, p, dt, lay, g):
        shape = (d["R"], d["C"])
        a = make(shape, dt, lay[0], g, ka)
        if kb is None:
            return Built(fn, (a,))
        return Built(fn, (a, operand(shape, dt, lay[1], g, kb)))
    return build


for _name, (_fn, _dts, _ka, _kb) in BINARY.items():
    if _name == "pow":
        # a float exponent for floats (the 'shift' kind gives integers 0..7 for both)
        def _pow(d, p, dt, lay, g):
            shape = (d["R"], d["C"])
            a = make(shape, dt, lay[0], g, "pos" if dt in FLOAT else "small")    # integers: no overflow
            b = operand(shape, dt, lay[1], g, "normal" if dt in FLOAT else "shift")
            if isinstance(b, int):
                b = abs(b) % 8
            return Built(torch.pow, (a, b))
        variant("binary", _name, ("R", "C"), _dts, BIN_LAYOUTS)(_pow)
    else:
        variant("binary", _name, ("R", "C"), _dts, BIN_LAYOUTS)(_binary(_fn, _ka, _kb))
for _name, _fn in COMPARE.items():
    variant("compare", _name, ("R", "C"), ALL, BIN_LAYOUTS)(_binary(_fn, "small", "small"))
for _name, (_fn, _ka, _kb) in INTOPS.items():
    variant("intops", _name, ("R", "C"), INT, EW_LAYOUTS if _kb is None else BIN_LAYOUTS)(_binary(_fn, _ka, _kb))


@variant("where", "where", ("R", "C"), ALL, ("CCC", "TTC", "RCC", "KRC", "CCN", "CNN", "SSS", "XCC", "OCO", "CZC"))
def _where(d, p, dt, lay, g):
    shape = (d["R"], d["C"])
    cond = operand(shape, "bool", lay[0], g, "bool")
    return Built(torch.where, (cond, operand(shape, dt, lay[1], g), operand(shape, dt, lay[2], g)))


@variant("clamp", "clamp", ("R", "C"), ALL, EW_LAYOUTS, params={"bounds": ["both", "min", "max", "tensor", "tmin"]})
def _clamp(d, p, dt, lay, g):
    x = make((d["R"], d["C"]), dt, lay, g, "wide")
    lo, hi = (-0.5, 0.7) if dt in FLOAT else (-20, 30)
    b = p["bounds"]
    if b in ("tensor", "tmin"):
        r = make((1, d["C"]), dt, "C", g, "wide").abs()
        if b == "tmin":
            return Built(lambda x, lo: torch.clamp(x, min=lo), (x, -r))
        return Built(lambda x, lo, hi: torch.clamp(x, lo, hi), (x, -r, r))
    kw = {"both": dict(min=lo, max=hi), "min": dict(min=lo), "max": dict(max=hi)}[b]
    return Built(lambda x: torch.clamp(x, **kw), (x,))


FAMILIES = list(dict.fromkeys(v.family for v in VARIANTS))
VARIANT = {v.key: v for v in VARIANTS}
