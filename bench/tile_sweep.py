"""Every kernel family on `neuron` against the CPU across tile boundaries.

    python3 bench/tile_sweep.py [--families matmul,conv,...] [--dtypes float32,bfloat16,...]
                                [--quick] [--seed 0] [--limit N] [--match TEXT] [--jobs 1]
                                [--timeout 60] [--json out.json] [--list]

Each family (`FAMILIES`: matmul, conv, sdpa, softmax, norm, reduce, index, cat,
topk_sort, unary, binary, compare, where, clamp, intops) has variants (one op
or one way of calling it), each with dimensions swept over SIZES = 1, 2, 127,
128, 129, 255, 256, 257, 511, 513 (SBUF's 128 partitions, PSUM's 512-column
banks, and the sizes either side), the dtypes it takes among float32 /
bfloat16 / float16 / int32 / int64, operand layouts and parameters (kernel
size, stride, padding, dim, keepdim, mask kind, ...).  A case is one variant
at one shape, dtype, layout and parameters (`cases`):

- full sweep: per variant the --quick cases, then every size on each
  dimension with the others at the variant's small `base`, every dtype with
  every layout, then a sample of the cross product drawn with --seed, up to
  BUDGET cases (all of it when smaller).  A shape whose cost (MACs or
  elements, `Variant.cost`) is over CAP is never drawn.
- --quick (tests/python/test_tile_sweep.py): per variant six shapes whose
  every dimension takes each of QUICK_SIZES = 127, 128, 129, 255, 257, 513 once
  (dimension j of shape r is QUICK_SIZES[(r + j) % 6]); a shape over
  QUICK_CAP is split into one shape per dimension, that dimension at its
  value and the others at `base`.  Dtypes, layouts and parameters are cycled
  over them, more shapes repeated when a variant has more dtypes or layouts
  than six.  Fixed: no seed.

Layouts (one letter per tensor operand; `make`): C contiguous, T the last two
dims stored transposed (`x.t()` of a contiguous tensor), L channels-last
(conv2d input and weight), S every other element of a twice as wide tensor
(`[..., ::2]`; the skipped elements are NaN, or 10^6 for integers, so a kernel
reading them shows), O a storage offset of one element, X expanded (stride 0)
from size 1 along dim 0 (the batch for bmm and attention's heads), and for a
second operand of elementwise ops R a row [1, C], K a column [R, 1], Z a 0-dim
tensor, N a Python scalar (broadcasting).  Inputs are drawn from a generator
seeded by the case id and --seed, so a case reproduces by its id.

Each case runs on the CPU and on `neuron` (its inputs moved as the same views
of copies of their storages, bench/opinfo.py's `to_device`) and the results
must agree in structure, dtype, shape and values (`compare`): integer and bool
exactly; float32 within rtol 1e-4 / atol 1e-4, bfloat16 and float16 within
1.6e-2 / 1.6e-2, atol multiplied by max(1, largest finite |CPU output|,
sqrt(K) for a contraction over K); NaN where the CPU has NaN.  A values
mismatch is a match (column fp64) when neuron is as close to the op evaluated
in float64 as the CPU is.  topk / sort: values identical, indices in range
and pointing at those values (`input.gather(dim, indices) == values`), each
index once per row; a stable sort's indices identical.  The plugin's CPU
fallback counter is read around the neuron run: a case is *native* when it
used no fallback.  A case the CPU rejects is "cpu_error" (not run).

Crash safety: cases run in worker processes (--jobs, OMP_NUM_THREADS=1), one
at a time; a worker killed by a signal records "crash" for its case, one
running longer than --timeout seconds is killed ("timeout"), and a fresh
worker carries on.  The table goes to stdout, progress to stderr.
"""
import argparse
import collections
import itertools
import json
import math
import os
import pathlib
import random
import signal
import sys
import time
import zlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import opinfo  # noqa: E402  (to_device, to_cpu, _first_line)
import workers  # noqa: E402  (the crash-safe worker processes)

SIZES = (1, 2, 127, 128, 129, 255, 256, 257, 511, 513)
QUICK_SIZES = (127, 128, 129, 255, 257, 513)
DTYPES = ("float32", "bfloat16", "float16", "int32", "int64")
FLOAT = ("float32", "bfloat16", "float16")
INT = ("int32", "int64")
ALL = FLOAT + INT
BUDGET = 1500         # cases per variant in the full sweep
MAX_SHAPES = 1000     # the full sweep's shapes per variant: the whole cross product up to this many
CAP = 2e8             # largest cost (MACs / elements) drawn in the full sweep
QUICK_CAP = 3e7       # ... in --quick
TOL = {"float32": (1e-4, 1e-4), "float64": (1e-4, 1e-4), "bfloat16": (1.6e-2, 1.6e-2),
       "float16": (1.6e-2, 1.6e-2)}

torch = F = None      # imported by the worker (`_load_torch`); the parent needs neither


def _load_torch():
    global torch, F
    if torch is None:
        import torch as t
        import torch.nn.functional as f
        torch, F = t, f
    return torch


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


# -- the cases -----------------------------------------------------------------------------------
def case_id(c):
    dims = " ".join(f"{k}={v}" for k, v in c["dims"].items())
    params = "".join(f" {k}={v}" for k, v in c["params"].items())
    return f"{c['family']}/{c['op']} {dims} {c['dtype']} {c['layout']}{params}"


def _case(v, dims, dtype, layout, params):
    d, p = dict(dims), dict(params)
    if v.fix:
        v.fix(d, p)
    c = {"family": v.family, "op": v.op, "dims": d, "dtype": dtype, "layout": layout, "params": p}
    c["id"] = case_id(c)
    return c


def _cycle(v, i):
    """The I-th combination of V's parameters, each cycled on its own."""
    return {k: opts[i % len(opts)] for k, opts in v.params.items()}


def _split(v, dims, cap):
    """[DIMS] when V costs at most CAP there, else one shape per dimension
    (that dimension at its value, the others at V's base)."""
    if v.cost(dims, _cycle(v, 0)) <= cap:
        return [dims]
    out = []
    for k in v.dims:
        d = dict(v.base)
        d[k] = dims[k]
        out.append(d)
    return out


def quick_cases(v, dtypes):
    shapes = []
    for r in range(len(QUICK_SIZES)):
        dims = {k: QUICK_SIZES[(r + j) % len(QUICK_SIZES)] for j, k in enumerate(v.dims)}
        shapes += _split(v, dims, QUICK_CAP)
    nd, nl = len(dtypes), len(v.layouts)
    n = max(len(shapes), nd * nl, *(len(o) for o in v.params.values()), 1)
    return [_case(v, shapes[i % len(shapes)], dtypes[i % nd], v.layouts[(i // nd) % nl],
                  _cycle(v, i + i // len(shapes))) for i in range(n)]


def full_cases(v, dtypes, seed, budget=BUDGET):
    """V's --quick cases; every size on each dimension (the others at V's
    base); every dtype with every layout; then the cross product of the
    sizes (all of it up to MAX_SHAPES shapes, else a sample drawn with SEED;
    never a shape over CAP): with every dtype, layout and parameters when
    that makes at most BUDGET cases, else in passes over the shapes, each
    with a dtype, layout and parameters drawn, until BUDGET cases."""
    out = {}

    def add(c):
        out.setdefault(c["id"], c)
    for c in quick_cases(v, dtypes):
        add(c)
    i = 0
    for k in v.dims:                              # every size on every dimension
        for s in SIZES:
            d = dict(v.base)
            d[k] = s
            if v.cost(d, _cycle(v, i)) <= CAP:
                add(_case(v, d, dtypes[i % len(dtypes)], v.layouts[i % len(v.layouts)], _cycle(v, i)))
            i += 1
    mid = {k: (129, 257, 127, 255)[j % 4] for j, k in enumerate(v.dims)}
    mid = _split(v, mid, CAP)[0]
    for j, (dt, lay) in enumerate(itertools.product(dtypes, v.layouts)):     # every dtype x layout
        add(_case(v, mid, dt, lay, _cycle(v, j)))
    rng = random.Random(f"{seed}:{v.key}")
    if len(SIZES) ** len(v.dims) <= MAX_SHAPES:
        shapes = [dict(zip(v.dims, t)) for t in itertools.product(SIZES, repeat=len(v.dims))]
    else:
        shapes = [{k: rng.choice(SIZES) for k in v.dims} for _ in range(MAX_SHAPES)]
    rng.shuffle(shapes)
    combos = len(dtypes) * len(v.layouts) * math.prod(len(o) for o in v.params.values())
    if len(shapes) * combos + len(out) <= budget:     # small enough: all of it
        keys = list(v.params)
        for d in shapes:
            for dt, lay, *vals in itertools.product(dtypes, v.layouts, *v.params.values()):
                p = dict(zip(keys, vals))
                if v.cost(d, p) <= CAP:
                    add(_case(v, d, dt, lay, p))
        return list(out.values())
    for _ in range(combos):                       # passes over the shapes
        grew = False
        for d in shapes:
            if len(out) >= budget:
                return list(out.values())
            p = {k: rng.choice(o) for k, o in v.params.items()}
            if v.cost(d, p) > CAP:
                continue
            n = len(out)
            add(_case(v, d, rng.choice(dtypes), rng.choice(v.layouts), p))
            grew |= len(out) > n
        if not grew:
            break
    return list(out.values())


def cases(families=None, dtypes=None, quick=False, seed=0, limit=None, match=None):
    """The cases of FAMILIES (default all) in DTYPES (default all), --quick's
    or the full sweep's (seeded by SEED), at most LIMIT per family (its
    variants' lists interleaved, their first cases first), those whose id
    contains one of MATCH's strings."""
    fams = families or FAMILIES
    unknown = set(fams) - set(FAMILIES)
    if unknown:
        raise SystemExit(f"tile_sweep: no such family: {', '.join(sorted(unknown))} (have {', '.join(FAMILIES)})")
    out = []
    for fam in fams:
        lists = []
        for v in VARIANTS:
            if v.family != fam:
                continue
            dts = [d for d in v.dtypes if dtypes is None or d in dtypes]
            if not dts:
                continue
            cs = quick_cases(v, dts) if quick else full_cases(v, dts, seed)
            if match:
                cs = [c for c in cs if any(m in c["id"] for m in match)]
            lists.append(cs)
        merged = [c for group in itertools.zip_longest(*lists) for c in group if c is not None]
        out += merged[:limit] if limit else merged
    return out


# -- one case, in a worker ----------------------------------------------------------------------------
def _gen(c, seed):
    return torch.Generator().manual_seed(zlib.crc32(c["id"].encode()) + 1000003 * seed)


def build(c, seed=0):
    _load_torch()
    v = VARIANT[f"{c['family']}/{c['op']}"]
    return v.build(c["dims"], c["params"], c["dtype"], c["layout"], _gen(c, seed))


def tolerance(case_dtype, out_dtype):
    pairs = [TOL[n] for n in (case_dtype, out_dtype) if n in TOL]
    return (max(p[0] for p in pairs), max(p[1] for p in pairs)) if pairs else (0.0, 0.0)


def _name(dtype):
    return str(dtype).replace("torch.", "")


def _at(t, flat):
    idx = [int(i) for i in torch.unravel_index(torch.tensor(flat), t.shape)] if t.dim() else []
    return idx, t.reshape(-1)[flat].item()


def compare(want, got, case_dtype, K=None, exact=False, where="out"):
    """None when GOT (neuron's, on the CPU) matches WANT (the CPU's), else
    (one-line reason, max |error| or None)."""
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return f"{where}: {type(got).__name__}, expected {type(want).__name__} of {len(want)}", None
        for i, (w, g) in enumerate(zip(want, got)):
            r = compare(w, g, case_dtype, K, exact, f"{where}[{i}]")
            if r:
                return r
        return None
    if not isinstance(want, torch.Tensor):
        return None if got == want else (f"{where}: {got!r}, expected {want!r}", None)
    if not isinstance(got, torch.Tensor):
        return f"{where}: {type(got).__name__}, expected a tensor", None
    if got.dtype != want.dtype:
        return f"{where}: dtype {_name(got.dtype)}, expected {_name(want.dtype)}", None
    if got.shape != want.shape:
        return f"{where}: shape {list(got.shape)}, expected {list(want.shape)}", None
    if want.numel() == 0:
        return None
    if not want.is_floating_point() or exact:
        w, g = want.reshape(-1), got.reshape(-1)
        bad = (w != g) & ~(w.isnan() & g.isnan()) if want.is_floating_point() else w != g
        if not bool(bad.any()):
            return None
        n = int(bad.sum())
        first = int(bad.nonzero()[0])
        idx, gv = _at(got, first)
        err = float((g.double() - w.double()).abs()[bad].nan_to_num(float("inf")).max()) if want.dtype != torch.bool \
            else None
        return (f"{where}: {n}/{w.numel()} elements differ, first at {idx}: {gv!r}, expected {_at(want, first)[1]!r}",
                err)
    rtol, atol = tolerance(case_dtype, _name(want.dtype))
    w, g = want.double().reshape(-1), got.double().reshape(-1)
    fin = w[torch.isfinite(w)].abs()
    scale = max(1.0, float(fin.max()) if fin.numel() else 1.0, math.sqrt(K) if K else 1.0)
    atol *= scale
    nan_bad = w.isnan() != g.isnan()
    inf_bad = (w.isinf() | g.isinf()) & (w != g) & ~(w.isnan() | g.isnan())
    both = torch.isfinite(w) & torch.isfinite(g)
    err = torch.where(both, (g - w).abs(), torch.zeros_like(w))
    bad = nan_bad | inf_bad | (err > atol + rtol * w.abs())
    if not bool(bad.any()):
        return None
    n = int(bad.sum())
    maxerr = float(err.max())
    worst = int(torch.where(bad, torch.where(nan_bad | inf_bad, torch.full_like(err, math.inf), err),
                            torch.full_like(err, -1.0)).argmax())
    idx, gv = _at(got, worst)
    return (f"{where}: {n}/{w.numel()} out of tolerance (rtol {rtol:g}, atol {atol:.3g}); max |err| {maxerr:.3g}; "
            f"worst at {idx}: {gv!r}, expected {_at(want, worst)[1]!r}", maxerr)


def check_sorted(b, x, want, got, case_dtype):
    """topk / sort: values identical to the CPU's, indices in range, pointing
    at the values, once per row; a stable sort's indices the CPU's."""
    r = compare(want[0], got[0], case_dtype, exact=True, where="values")
    if r:
        return r
    wi, gi = want[1], got[1]
    if gi.dtype != wi.dtype or gi.shape != wi.shape:
        return f"indices: {_name(gi.dtype)}{list(gi.shape)}, expected {_name(wi.dtype)}{list(wi.shape)}", None
    if gi.numel() == 0:
        return None
    n = x.shape[b.dim]
    if bool(((gi < 0) | (gi >= n)).any()):
        return f"indices: out of range [0, {n}): {gi.min().item()}..{gi.max().item()}", None
    picked = x.gather(b.dim, gi)
    r = compare(got[0], picked, case_dtype, exact=True, where="x.gather(indices) vs values")
    if r:
        return r
    s = gi.sort(dim=b.dim).values
    if bool((s.diff(dim=b.dim) == 0).any()):
        return "indices: an index repeats within a row", None
    if b.stable:
        return compare(wi, gi, case_dtype, where="indices (stable sort)")
    return None


def _fallbacks():
    import torch_neuronsim
    s = torch_neuronsim.stats()
    return s["cpu_fallbacks"], s["fallback_ops"]


def _wide(v):
    if isinstance(v, torch.Tensor) and v.is_floating_point():
        return v.to(torch.float64)
    return v


def fp64_referee(b, want, got):
    """A reason when neuron's float outputs are no further from the op
    evaluated in float64 than the CPU's are (max |error|, NaN at the same
    places), else None."""
    ws = list(want) if isinstance(want, (tuple, list)) else [want]
    gs = list(got) if isinstance(got, (tuple, list)) else [got]
    if not all(isinstance(w, torch.Tensor) and w.is_floating_point() and isinstance(g, torch.Tensor)
               and g.dtype == w.dtype and g.shape == w.shape for w, g in zip(ws, gs)):
        return None
    try:
        ref = b.fn(*[_wide(a) for a in b.args])
    except Exception:  # noqa: BLE001
        return None
    rs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    errs = []
    for w, g, r in zip(ws, gs, rs):
        r = r.double()
        ea, eb = (w.double() - r).abs(), (g.double() - r).abs()
        if not torch.equal(ea.isnan(), eb.isnan()):
            return None
        ea, eb = ea.nan_to_num(0.0), eb.nan_to_num(0.0)
        if w.numel() and float(eb.max()) > float(ea.max()):
            return None
        errs.append((float(ea.max()) if w.numel() else 0.0, float(eb.max()) if w.numel() else 0.0))
    return "neuron as close to float64 as the CPU (max |err| " + \
        ", ".join(f"neuron {e[1]:.3g} / CPU {e[0]:.3g}" for e in errs) + ")"


def run_case(c, seed=0):
    """The record of case C: status match / mismatch / error / cpu_error /
    harness, reason, max_err, fallbacks and the ops that fell back."""
    _load_torch()
    rec = {k: c[k] for k in ("id", "family", "op", "dims", "dtype", "layout", "params")}
    t0 = time.monotonic()
    try:
        b = build(c, seed)
        dev = opinfo.to_device(b.args, "neuron")
    except Exception as e:  # noqa: BLE001
        rec.update(status="harness", reason=f"making the inputs: {opinfo._first_line(e)}", fallbacks=None,
                   fallback_ops=[])
        return rec
    n0, ops0 = _fallbacks()
    try:
        got = opinfo.to_cpu(b.fn(*dev))
    except Exception as e:  # noqa: BLE001
        got = e
    n1, ops1 = _fallbacks()
    rec.update(fallbacks=n1 - n0, fallback_ops=sorted(k for k, v in ops1.items() if v > ops0.get(k, 0)))
    try:
        want = b.fn(*b.args)
    except Exception as e:  # noqa: BLE001
        rec.update(status="cpu_error", reason=f"CPU raised {opinfo._first_line(e)}"
                   + ("" if isinstance(got, Exception) else "; neuron did not"))
        return rec
    if isinstance(got, Exception):
        rec.update(status="error", reason=opinfo._first_line(got))
        return rec
    if b.check == "close":
        why = compare(want, got, c["dtype"], b.K)
        if why:
            referee = fp64_referee(b, want, got)
            if referee:
                rec.update(status="match", fp64=True, reason=f"{referee}; {why[0]}", max_err=why[1])
                return rec
    else:
        why = check_sorted(b, b.args[0], want, got, c["dtype"])
    rec.update(status="mismatch" if why else "match", reason=why[0] if why else None,
               max_err=why[1] if why else None, seconds=round(time.monotonic() - t0, 3))
    return rec


def worker_main(seed):
    """Cases on stdin (one JSON line each), records on the original stdout
    (one JSON line each: ready / result); anything the ops print goes to stderr."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    import warnings
    warnings.simplefilter("ignore")
    _load_torch()
    import torch_neuronsim  # noqa: F401
    torch.set_num_threads(1)
    out.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        c = json.loads(line)
        try:
            rec = run_case(c, seed)
        except Exception as e:  # noqa: BLE001  (this script's own failure)
            rec = {k: c[k] for k in ("id", "family", "op", "dims", "dtype", "layout", "params")}
            rec.update(status="harness", reason=opinfo._first_line(e), fallbacks=None, fallback_ops=[])
        out.write(json.dumps({"result": rec}) + "\n")


# -- workers ---------------------------------------------------------------------------------------------
RECYCLE_RSS = 4 << 30   # a worker's host memory only grows (large cases leave it resident): replaced past 4 GiB


class Worker(workers.WorkerProcess):
    """A worker process running one case at a time; `run(case)` returns its
    record, "crash" when the process died, "timeout" when it took too long
    (the process is then replaced; so is one past RECYCLE_RSS)."""

    def __init__(self, seed=0):
        super().__init__(pathlib.Path(__file__).resolve(), ["--seed", str(seed)], name="tile_sweep")

    def run(self, c, timeout):
        if self.proc is not None and self.proc.poll() is not None:
            self.stop()                     # died between cases
        if self.proc is None:
            self.start()
        t0 = time.monotonic()
        self.send(c)                        # a dead worker: recorded as the crash it is, below
        msg = self.get(timeout)
        if isinstance(msg, dict) and "result" in msg:
            if self.rss() > RECYCLE_RSS:
                self.stop()                 # a fresh worker for the next case
            return msg["result"]
        rec = {k: c[k] for k in ("id", "family", "op", "dims", "dtype", "layout", "params")}
        if msg == "timeout":
            self.stop()
            rec.update(status="timeout", reason=f"no result after {timeout:g} s")
        else:
            self.proc.wait()
            rc = self.proc.returncode
            tail = self.stderr_tail()
            self.stop()
            try:
                sig = signal.Signals(-rc).name if rc < 0 else f"exit {rc}"
            except ValueError:
                sig = f"signal {-rc}"
            rec.update(status="crash", reason=sig + (f": {tail}" if tail else ""))
        rec.update(fallbacks=None, fallback_ops=[], seconds=round(time.monotonic() - t0, 3))
        return rec


def run_cases(cs, jobs=1, timeout=60.0, seed=0, progress=None):
    """The records of cases CS (in order), run in JOBS workers.
    PROGRESS(index, record) is called after each."""
    results = workers.run_pool(cs, lambda: Worker(seed), lambda w, c: w.run(c, timeout), jobs, progress)
    return [r for r in results if r is not None]


# -- the report -------------------------------------------------------------------------------------------
RUN = ("match", "mismatch", "error", "crash", "timeout")


def failing(records):
    return [r for r in records if r["status"] not in ("match", "cpu_error")]


def table(records):
    rows = collections.defaultdict(collections.Counter)
    variants = collections.defaultdict(set)
    for r in records:
        for name in (r["family"], "total"):
            rows[name][r["status"]] += 1
            rows[name]["native"] += r["status"] in RUN and r.get("fallbacks") == 0
            rows[name]["fp64"] += bool(r.get("fp64"))
            variants[name].add(r["op"] if name != "total" else f"{r['family']}/{r['op']}")
    lines = [f"{'family':10} {'variants':>8} {'cases':>6} {'pass%':>6} {'mismatch':>8} {'error':>6} {'crash':>6} "
             f"{'timeout':>7} {'native%':>7} {'fp64':>5} {'cpu_err':>7} {'harness':>7}"]
    for name in [f for f in FAMILIES if f in rows] + ["total"]:
        c = rows[name]
        run = sum(c[s] for s in RUN)
        pct = lambda n: f"{100.0 * n / run:.1f}" if run else "-"  # noqa: E731
        lines.append(f"{name:10} {len(variants[name]):8d} {run:6d} {pct(c['match']):>6} {c['mismatch']:8d} "
                     f"{c['error']:6d} {c['crash']:6d} {c['timeout']:7d} {pct(c['native']):>7} {c['fp64']:5d} "
                     f"{c['cpu_error']:7d} {c['harness']:7d}")
    lines.append("cases = run (match + mismatch + error + crash + timeout); pass% = matches / run; native% = run "
                 "with zero CPU fallbacks; fp64 = matches out of tolerance where neuron is as close to float64 as "
                 "the CPU; cpu_err = rejected by the CPU (not run); harness = inputs this script could not make")
    bad = failing(records)
    if bad:
        lines.append("")
        lines.append(f"failing cases ({len(bad)}): family/op dims dtype layout params: status: reason")
        for r in sorted(bad, key=lambda r: (FAMILIES.index(r["family"]), r["op"], r["status"], r["id"])):
            lines.append(f"  {r['id']}: {r['status']}: {r['reason']}")
    fb = collections.Counter(o for r in records for o in r.get("fallback_ops") or ())
    if fb:
        lines.append("")
        lines.append("CPU fallbacks: cases using each op's fallback:")
        lines.append("  " + ", ".join(f"{o} {n}" for o, n in fb.most_common()))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", help="comma-separated, of: " + "; ".join(f"{k} ({v})" for k, v in FAMILY_DOC.items()))
    ap.add_argument("--dtypes", help=f"comma-separated, of: {','.join(DTYPES)} (default all)")
    ap.add_argument("--quick", action="store_true", help="the CI subset (tests/python/test_tile_sweep.py)")
    ap.add_argument("--seed", type=int, default=0, help="draws the full sweep's sample and the inputs")
    ap.add_argument("--limit", type=int, help="at most N cases per family")
    ap.add_argument("--match", help="comma-separated: only cases whose id contains one of these")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    ap.add_argument("--json", help="write the records here")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        return worker_main(a.seed)
    dtypes = a.dtypes.split(",") if a.dtypes else None
    if dtypes and set(dtypes) - set(DTYPES):
        raise SystemExit(f"tile_sweep: dtypes are among {','.join(DTYPES)}")
    cs = cases(a.families.split(",") if a.families else None, dtypes, a.quick, a.seed, a.limit,
               a.match.split(",") if a.match else None)
    if a.list:
        for c in cs:
            print(c["id"])
        print(f"{len(cs)} cases", file=sys.stderr)
        return 0
    t0 = time.monotonic()
    per_family = collections.Counter(c["family"] for c in cs)
    seen = collections.defaultdict(collections.Counter)

    def progress(i, r):
        st = seen[r["family"]]
        st[r["status"]] += 1
        if r["status"] not in ("match", "cpu_error"):
            print(f"  {r['status']}: {r['id']}: {r['reason']}"[:400], file=sys.stderr, flush=True)
        if sum(st.values()) == per_family[r["family"]]:
            print(f"[{time.monotonic() - t0:6.0f}s] {r['family']}: {sum(st.values())} cases "
                  + " ".join(f"{k}={v}" for k, v in sorted(st.items())), file=sys.stderr, flush=True)

    print(f"tile_sweep: {len(cs)} cases", file=sys.stderr, flush=True)
    records = run_cases(cs, a.jobs, a.timeout, a.seed, progress)
    secs = time.monotonic() - t0
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "seconds": round(secs, 1), "records": records}, f, indent=1)
    print(table(records))
    print(f"\n{len(records)} cases in {secs:.0f} s")
    return 1 if failing(records) else 0


if __name__ == "__main__":
    sys.exit(main())
