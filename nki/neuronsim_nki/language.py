"""nki.language on the simulator: the tile-level surface kernels use (load,
store, ndarray/zeros, elementwise math, reductions, matmul, transpose,
index expressions, dtypes; loops and the launch grid are in control.py).
Each call traces instructions into the current kernel (see tracer.py)."""
from __future__ import annotations

import inspect

from neuronsim import ACTIVATIONS, ALU_OPS, FLOAT_DTYPES, INT_ALU_OPS

try:
    # NumPy then knows "bfloat16" and the float8 names, so host arrays take
    # nl.bfloat16 as a dtype (np.zeros(shape, dtype=nl.bfloat16)), as test
    # harnesses written for NKI do
    import ml_dtypes  # noqa: F401
except ImportError:
    pass

from . import tracer
from .dtype_keys import int_imm, isa_key
from .indexing import Index
from .masking import MASKED_OUT, MaskedResult, compute_masks
from .tensor import NKI_NAMES, DType, Tensor, isa_dtype, new_tile
from .tracer import fail
from .classes import NKIObject  # noqa: F401  (nl.NKIObject)
# loops, registers and launch-grid queries live in control.py
from .control import (WHILE_LOOP_LIMIT, VirtualRegister, _static_int, affine_range, finfo, fori_loop, nc,  # noqa: F401
                      num_programs, program_id, program_ndim, range_, sequential_range, spmd_dim, static_range,
                      while_loop)
from .runtime_loops import dynamic_range  # noqa: F401,E402

# ------------------------------------------------------------ dtypes, buffers

float32, bfloat16, float16, tfloat32 = DType("float32"), DType("bfloat16"), DType("float16"), DType("tfloat32")
int32, uint32, int16, uint16, int8, uint8 = (DType(n) for n in ("int32", "uint32", "int16", "uint16", "int8",
                                                                 "uint8"))
float8_e4m3, float8_e5m2, float8_e4m3fn = DType("float8_e4m3"), DType("float8_e5m2"), DType("float8_e4m3fn")
# named for kernels that mention them; a tensor of one is refused (tensor.UNSUPPORTED_DTYPES)
float8_e8m0fnu, float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4 = (
    DType(n) for n in ("float8_e8m0fnu", "float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4"))
bool_ = uint8
fp32 = finfo(float32)              # the older nl.fp32 (.min, .max, ...)

sbuf, psum, hbm, shared_hbm, private_hbm = "sbuf", "psum", "hbm", "shared_hbm", "private_hbm"


class tile_size:
    pmax = 128
    psum_fmax = 512
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    psum_partition_bytes = 16384
    total_available_sbuf_size = 229376
    bn_stats_fmax = 512


class _ParDim(int):
    """A shape entry marked as the partition dimension."""


def par_dim(n):
    """Marks a shape's partition dimension (it must be the first one here)."""
    return _ParDim(n)


def arange(*args):
    if len(args) == 1:
        return Index(args[0])
    start, stop = args[0], args[1]
    step = args[2] if len(args) > 2 else 1
    return Index((stop - start + step - 1) // step, start, step)


class _Grid(tuple):
    """nl.mgrid's index expressions, one per axis: unpacked (i_p, i_f =
    nl.mgrid[...]) or by name, .p for the partition axis and .x, .y, .z for
    the free axes after it."""

    def _axis(self, k, name):
        if k >= len(self):
            raise AttributeError(f"a {len(self)}-axis nl.mgrid has no .{name}")
        return self[k]

    p = property(lambda self: self._axis(0, "p"))
    x = property(lambda self: self._axis(1, "x"))
    y = property(lambda self: self._axis(2, "y"))
    z = property(lambda self: self._axis(3, "z"))


class _MGrid:
    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        out = []
        for ax, k in enumerate(key):
            lo, hi = k.start or 0, k.stop
            out.append(Index(hi - lo, lo, k.step or 1, ax, len(key)))
        return _Grid(out) if len(out) > 1 else out[0]


def shared_constant(constant, dtype=None, **kw):
    """An HBM tensor holding `constant` in the program itself, as the
    compiler embeds constants: read it with nl.load like an input.
    constant: array-like, or the path of a .npy file (nkilib's top-k writes
    its rotation matrices to such files), read as data only."""
    import os

    import numpy as np

    import neuronsim
    from .tensor import hbm_tensor
    if isinstance(constant, (str, os.PathLike)):
        path = os.fspath(constant)
        if not os.path.isfile(path):
            fail(f"nl.shared_constant({path!r}): not a regular file")
        try:
            constant = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            fail(f"nl.shared_constant({path!r}): not a .npy array file ({e})")
    arr = np.asarray(constant)
    if dtype is not None:
        dt = isa_dtype(dtype)
    else:
        from . import _np_isa_dtype
        dt = _np_isa_dtype(arr.dtype)
        if dt is None:
            fail(f"nl.shared_constant: NumPy dtype {arr.dtype} has no device type; pass dtype=")
    if arr.ndim == 0:
        arr = arr.reshape(1, 1)
    t = tracer.current()
    ht = hbm_tensor(t.unique("constant"), arr.shape, dt)
    try:
        data = neuronsim.to_device(arr if dt not in ("bf16",) else arr.astype(np.float32), dt)
    except neuronsim.NeuronSimError as e:
        fail(f"nl.shared_constant: {e}")
    t.constants.append((ht, data))
    return ht


def shared_identity_matrix(n, dtype="uint8", dst=None, **kw):
    """An [n, n] identity matrix in SBUF (nl.uint8 by default), n <= 128:
    loaded once per size and dtype from a constant the program embeds and
    kept for the rest of the kernel, as the compiler shares identity
    matrices; with dst=, copied there."""
    import numpy as np
    size = _static_int(n)
    if size is None or not 1 <= size <= 128:
        fail(f"nl.shared_identity_matrix({n!r}): a size from 1 to 128 (the partitions of an SBUF tile)")
    dt = isa_dtype(dtype)
    made = tracer.current().__dict__.setdefault("identity_matrices", {})
    tile = made.get((size, dt))
    if tile is None:
        tile = made[(size, dt)] = load(shared_constant(np.eye(size, dtype=np.float32), dtype=dt))
    if dst is None:
        return tile
    _assign(dst, tile)
    return dst


def ds(start, size):
    """nl.ds(start, size): the slice start:start + size (a "dynamic slice"
    whose start may be a loop variable)."""
    return slice(start, start + size)


mgrid = _MGrid()


# ---------------------------------------------------------------- creation

from .creation import _fits_whole, _memset, _space, empty_like, full, ndarray, ones, zeros, zeros_like  # noqa: E402,F401


# ------------------------------------------------------------------ memory

from .memory import STORE_ENGINE, _cut, _dma, _indirect, load, load_transpose2d, masked_box, store  # noqa: E402,F401


# -------------------------------------------------------------- elementwise

# NKI / NumPy operator names that differ from the ISA's ALU names; every
# other name is taken as is when the ISA's ALU table (neuronsim.ALU_OPS) has it
# (np.sum: the add reduction, as kernels pass it for reduce_op=)
_ALU_ALIASES = {"maximum": "max", "minimum": "min", "amax": "max", "amin": "min", "sum": "add", "true_divide": "divide",
                "power": "pow", "equal": "is_equal", "greater": "is_gt", "greater_equal": "is_ge",
                "less": "is_lt", "less_equal": "is_le"}


def op_name(op):
    """nl.add / np.add / 'add' -> the ISA ALU operator."""
    name = getattr(op, "__name__", None) or str(op)
    alu = _ALU_ALIASES.get(name, name)
    if alu not in ALU_OPS:
        fail(f"unsupported operator {op!r}")
    return alu


def _result_dtype(*xs, dtype=None):
    if dtype is not None:
        return isa_dtype(dtype)
    dts = [x.dtype for x in xs if isinstance(x, Tensor)]
    return "fp32" if "fp32" in dts or not dts else dts[0]


def _operand(x):
    if isinstance(x, MaskedResult):
        # used as a value: a tile of the full shape, the positions the mask
        # kept written (the rest undefined, as NKI leaves them)
        whole = new_tile("sbuf", x.full, x.tile.dtype, "masked result")
        _assign(whole, x)
        return whole
    if isinstance(x, Tensor):
        x.materialize()
        if x.space == "hbm":
            fail("compute operands must be on chip: nl.load the HBM tensor first")
        if x.pax != 0:
            fail(f"a tile with block dimensions before its partition axis ({list(x.shape)}): index a block "
                 "first (t[i])")
    return x


def _binary(x, y, op, dtype=None, engine="vector", in_order=False):
    """x <op> y elementwise.  in_order (nki.isa's instructions): operands of
    different shapes but the same partitions and elements per partition pair
    their elements in order, as the instruction walks access patterns."""
    x, y = _operand(x), _operand(y)
    alu = op if isinstance(op, str) and op in ALU_OPS else op_name(op)
    t = tracer.current()
    if isinstance(x, Tensor) and isinstance(y, Tensor):
        if x.shape != y.shape and not (in_order and x.shape[0] == y.shape[0] and
                                       x.elements_per_partition() == y.elements_per_partition()):
            # [P, 1] (or a [P] column) broadcast along the free dimension: a
            # per-partition scalar
            if y.shape in ((x.shape[0], 1), (x.shape[0],)) and len(x.shape) > 1:
                return _tensor_scalar(x, y, alu, dtype)
            if x.shape in ((y.shape[0], 1), (y.shape[0],)) and len(y.shape) > 1 and \
                    alu in ("add", "multiply", "max", "min"):
                return _tensor_scalar(y, x, alu, dtype)
            # size-1 free axes against larger ones (NumPy's rule): the
            # smaller operand read with stride 0 along them, as access
            # patterns broadcast
            wide = _free_broadcast(x, y)
            if wide is not None:
                return _binary(*wide, op, dtype, engine)
            # a [1, F] row against [P, F]: broadcast across partitions first
            # (NumPy's rule, which nl arithmetic follows), as broadcast_to does
            if len(x.shape) == len(y.shape) and x.shape[1:] == y.shape[1:] and 1 in (x.shape[0], y.shape[0]):
                if y.shape[0] == 1:
                    y = _operand(broadcast_to(y, x.shape))
                else:
                    x = _operand(broadcast_to(x, y.shape))
                return _binary(x, y, op, dtype, engine)
            # both ways ([1, 1, 3, 3] against [P, W, 1, 1]): the one-partition
            # operand across partitions, then the free axes
            if len(x.shape) == len(y.shape) and x.shape[0] != y.shape[0] and 1 in (x.shape[0], y.shape[0]):
                if y.shape[0] == 1:
                    y = _partition_broadcast(y, x.shape[0])
                else:
                    x = _partition_broadcast(x, y.shape[0])
                return _binary(x, y, op, dtype, engine)
            fail(f"operand shapes {list(x.shape)} and {list(y.shape)} differ")
        dt = _result_dtype(x, y, dtype=dtype)
        key = (engine, "tensor_tensor", alu, isa_key(dt), x.shape, x.ap(), y.ap(), (x.alloc.id, y.alloc.id))
        out = t.reuse(key)
        if out is not None:
            return out
        out = new_tile("sbuf", x.shape, dt, f"{alu} result")
        out.made_by = t.emit(engine, f"tensor_tensor dst={out.ap()} src0={x.ap()} src1={y.ap()} op={alu}",
                             reads=[x.region(), y.region()], writes=[out.region()])
        t.remember(key, out.made_by, out)
        return out
    if isinstance(x, Tensor):
        return _tensor_scalar(x, float(y), alu, dtype)
    if isinstance(y, Tensor):
        return _tensor_scalar(y, float(x), alu, dtype, reverse=True)
    fail("an elementwise operation needs at least one tile")


def _free_broadcast(x, y):
    """(x, y) as views of one shape when they differ only in size-1 free
    axes of on-chip tiles (the partition axes equal), else None."""
    if len(x.shape) != len(y.shape) or x.shape[0] != y.shape[0] or x.pax or y.pax or \
            "hbm" in (x.space, y.space):
        return None
    shape = []
    for a, b in zip(x.shape[1:], y.shape[1:]):
        if a != b and 1 not in (a, b):
            return None
        shape.append(a if b == 1 else b)
    shape = (x.shape[0], *shape)
    return _widen(x, shape), _widen(y, shape)


def _widen(t, shape):
    """Tile t read as `shape`: its size-1 free axes with stride 0 (NumPy's
    broadcasting, as access patterns do it; the partitions equal)."""
    strides = [t.strides[0]] + [0 if n == 1 and m != 1 else st
                                for st, n, m in zip(t.strides[1:], t.shape[1:], shape[1:])]
    return Tensor(t.space, t.dtype, shape, strides, t.offset, t.name, t.alloc, t.part0)


def _partition_broadcast(t, P):
    """A 1-partition tile [1, *F] across P partitions, [P, *F]: broadcast_to
    on its elements as a row, then its free shape back."""
    F = t.elements_per_partition()
    row = t if len(t.shape) == 2 else t.reshape((1, F))
    out = _operand(broadcast_to(row, (P, F)))
    return out if len(t.shape) == 2 else out.reshape((P, *t.shape[1:]))


def _expand(t, shape):
    """Tile t broadcast to `shape` (same rank): across partitions from one,
    along free axes of size 1."""
    t = _operand(t)
    if len(t.shape) != len(shape) or any(n != m and n != 1 for n, m in zip(t.shape, shape)):
        fail(f"a {list(t.shape)} operand does not broadcast to {list(shape)}")
    if t.shape[0] != shape[0]:
        t = _partition_broadcast(t, shape[0])
    return t if tuple(t.shape) == tuple(shape) else _widen(t, tuple(shape))


def _scalar_column(s):
    """A per-partition scalar (or activation scale / bias) tile as the
    engines take it, fp32 in SBUF (the ISA's tensor_scalar / activation):
    another dtype, or a PSUM column, is copied there first, as the
    compiler does."""
    s = _operand(s)
    return s if s.dtype == "fp32" and s.space == "sbuf" else copy(s, dtype="fp32")


def _tensor_scalar(x, s, alu, dtype=None, reverse=False):
    t = tracer.current()
    dt = _result_dtype(x, dtype=dtype)
    allocs = (x.alloc.id,)
    if isinstance(s, Tensor):
        if s.shape[0] != x.shape[0] or s.elements_per_partition() != 1:
            fail(f"a per-partition scalar is a [{x.shape[0]}, 1] tile, got {list(s.shape)}")
        s = _scalar_column(s)
        sv = s.ap()
        allocs += (s.alloc.id,)
    else:
        # the integer-only operations take an integer immediate
        sv = (int_imm(s, x.dtype) if alu in INT_ALU_OPS else None) or repr(float(s))
    rev = " reverse0" if reverse else ""
    key = ("vector", "tensor_scalar", alu, isa_key(dt), x.shape, x.ap(), sv, rev, allocs)
    out = t.reuse(key)
    if out is not None:
        return out
    out = new_tile("sbuf", x.shape, dt, f"{alu} result")
    reads = [x.region()] + ([s.region()] if isinstance(s, Tensor) else [])
    out.made_by = t.emit("vector", f"tensor_scalar dst={out.ap()} src={x.ap()} op0={alu} scalar0={sv}{rev}",
                         reads=reads, writes=[out.region()])
    t.remember(key, out.made_by, out)
    return out


def add(x, y, dtype=None, **kw):
    return _binary(x, y, "add", dtype)


def subtract(x, y, dtype=None, **kw):
    return _binary(x, y, "subtract", dtype)


def multiply(x, y, dtype=None, **kw):
    return _binary(x, y, "multiply", dtype)


def divide(x, y, dtype=None, **kw):
    return _binary(x, y, "divide", dtype)


def maximum(x, y, dtype=None, **kw):
    return _binary(x, y, "max", dtype)


def mod(x, y, dtype=None, **kw):
    """x mod y, the remainder taking y's sign (NumPy's mod)."""
    return _binary(x, y, "mod", dtype)


def fmod(x, y, dtype=None, **kw):
    """x fmod y, the remainder taking x's sign (C's fmod)."""
    return _binary(x, y, "fmod", dtype)


def minimum(x, y, dtype=None, **kw):
    return _binary(x, y, "min", dtype)


def equal(x, y, dtype=None, **kw):
    """1 where x == y, else 0 (elementwise; also a comparison operator name)."""
    return _binary(x, y, "is_equal", dtype)


def not_equal(x, y, dtype=None, **kw):
    return _binary(x, y, "not_equal", dtype)


def greater(x, y, dtype=None, **kw):
    return _binary(x, y, "is_gt", dtype)


def greater_equal(x, y, dtype=None, **kw):
    return _binary(x, y, "is_ge", dtype)


def less(x, y, dtype=None, **kw):
    return _binary(x, y, "is_lt", dtype)


def less_equal(x, y, dtype=None, **kw):
    return _binary(x, y, "is_le", dtype)


def power(x, y, dtype=None, **kw):
    return _binary(x, y, "pow", dtype)


def _activation(func, x, dtype=None, scale=1.0, bias=None, reduce_op=None, reduce_res=None, any_dtype=False):
    """dst = func(x * scale + bias) on ScalarE; with reduce_op, the
    activated values also reduced along the free axes into reduce_res
    ([P, 1]) by the same instruction (the ISA's reduce / reduce_dst).
    any_dtype: nisa.activation, whose data "can be in any valid NKI data
    type" (SDK: the engine casts it to fp32); nl's functions take floats."""
    x = _operand(x)
    if not isinstance(x, Tensor):
        fail(f"nl.{func} takes a tile")
    if not any_dtype and (x.dtype not in FLOAT_DTYPES or x.dtype == "tf32"):
        fail(f"nl.{func} (ScalarE activation) takes float tiles, not {NKI_NAMES.get(x.dtype, x.dtype)}")
    scale = _scalar_column(scale) if isinstance(scale, Tensor) else scale
    bias = _scalar_column(bias) if isinstance(bias, Tensor) else bias
    out = new_tile("sbuf", x.shape, _result_dtype(x, dtype=dtype), f"{func} result")
    reads = [x.region()]
    sc = repr(float(scale)) if not isinstance(scale, Tensor) else None
    if isinstance(scale, Tensor):          # a per-partition scale [P, 1]
        if scale.shape[0] != x.shape[0] or scale.elements_per_partition() != 1:
            fail(f"an activation scale tile is [{x.shape[0]}, 1], got {list(scale.shape)}")
        sc = scale.ap()
        reads.append(scale.region())
    b = "0.0"
    if isinstance(bias, Tensor):
        b = bias.ap()
        reads.append(bias.region())
    elif bias is not None:
        b = repr(float(bias))
    red, writes = "", [out.region()]
    if reduce_op is not None:
        if not isinstance(reduce_res, Tensor) or reduce_res.space == "hbm":
            fail("an activation's reduce_op needs reduce_res=, a [P, 1] tile in SBUF or PSUM")
        red = f" reduce={op_name(reduce_op)} reduce_dst={reduce_res.ap()}"
        writes.append(reduce_res.region())
    out.made_by = tracer.current().emit("scalar", f"activation dst={out.ap()} src={x.ap()} func={func} "
                                        f"scale={sc} bias={b}{red}", reads=reads, writes=writes)
    return out


def _unary(func):
    def f(x, dtype=None, **kw):
        return _activation(func, x, dtype)
    f.__name__ = func
    return f


# NKI's names for ISA activations where they differ (nl.copy is a tensor
# copy, not the identity activation); nl.<name> exists for every activation
# of the ISA's table (neuronsim.ACTIVATIONS)
ACT_FROM_NKI = {"copy": "identity", "gelu_apprx_tanh": "gelu_tanh", "gelu_dx": "gelu_backward",
                "gelu_apprx_sigmoid_dx": "gelu_apprx_sigmoid_backward", "silu_dx": "silu_backward",
                "erf_dx": "erf_backward"}
for _func in ACTIVATIONS:
    _name = next((k for k, v in ACT_FROM_NKI.items() if v == _func and k != "copy"), _func)
    if _func != "identity":
        globals()[_name] = _unary(_func)
del _func, _name


def negative(x, dtype=None, **kw):
    return _binary(x, -1.0, "multiply", dtype)


def _round_down(x, alu):
    """x minus its remainder by 1 on VectorE (float): with `mod` (the
    remainder taking the divisor's sign) that is floor(x), with `fmod` (the
    dividend's sign) trunc(x) -- exact, the remainder being representable."""
    x = _operand(x)
    xf = x if x.dtype in ("fp32", "bf16", "fp16") else copy(x, dtype="fp32")
    return _binary(xf, _tensor_scalar(xf, 1.0, alu), "subtract")


def floor(x, dtype=None, **kw):
    """The largest integer <= x, element-wise (VectorE: x - (x mod 1)); in
    dtype when given (an integer dtype holds it exactly)."""
    out = _round_down(x, "mod")
    return copy(out, dtype=dtype) if dtype is not None else out


def trunc(x, dtype=None, **kw):
    """x rounded toward zero, element-wise (VectorE: x - fmod(x, 1))."""
    out = _round_down(x, "fmod")
    return copy(out, dtype=dtype) if dtype is not None else out


def ceil(x, dtype=None, **kw):
    """The smallest integer >= x, element-wise: -floor(-x)."""
    out = negative(_round_down(negative(_operand(x)), "mod"))
    return copy(out, dtype=dtype) if dtype is not None else out


def copy(x, dtype=None, engine="vector", **kw):
    """A copy of x (cast to dtype) on VectorE, or on ScalarE / GpSimd when
    `engine` says so (tensor_copy runs on those three; GpSimd cannot reach
    PSUM)."""
    x = _operand(x)
    if engine not in ("vector", "scalar", "gpsimd"):
        fail(f"tensor_copy runs on the vector, scalar or gpsimd engine, not {engine!r}")
    if engine == "gpsimd" and x.space == "psum":
        fail("tensor_copy on GpSimd cannot read PSUM (copy it on the vector or scalar engine)")
    out = new_tile("sbuf", x.shape, isa_dtype(dtype) if dtype is not None else x.dtype, "nl.copy result")
    out.made_by = tracer.current().emit(engine, f"tensor_copy dst={out.ap()} src={x.ap()}", reads=[x.region()],
                                        writes=[out.region()])
    return out


def _retarget_load(dst, value):
    """`tile[...] = nl.load(x)`: the load writes `dst` directly when nothing
    has used its fresh tile yet (it is the last instruction traced)."""
    t = tracer.current()
    ins = value.loaded_by
    if ins is None or dst.space != "sbuf" or dst.shape != value.shape or dst.dtype != value.dtype:
        return False
    if not t.instrs or t.instrs[-1] is not ins:
        return False
    t.retract_last()
    dst_ap, dst_region = _placed_for(t, ins, dst, value)
    d = t.dmas[ins.dma]
    t.dmas[ins.dma] = (dst_ap, d[1], d[2])
    t.emit("sync", ins.text, reads=ins.reads, writes=[dst_region], dma=ins.dma)
    value.loaded_by = None
    return True


def _retarget_compute(dst, value):
    """`tile[...] = <computation>`: the instruction that made the fresh
    tile writes `dst` itself when nothing has used the tile yet (it is the
    last instruction traced) -- no copy, as the compiler places a result
    where it is assigned; compute engines cast on output at no cost (the
    published nki.isa pages), so the destination's dtype may differ."""
    t = tracer.current()
    ins = value.made_by
    if dst.space not in ("sbuf", "psum") or dst.shape[0] != value.shape[0] or \
            dst.elements_per_partition() != value.elements_per_partition() or \
            (dst.space == "psum" and ins.engine == "gpsimd"):
        return False
    old = f"dst={value.ap()}"
    if not t.instrs or t.instrs[-1] is not ins or not ins.writes or ins.writes[0] != value.region() or \
            old not in ins.text:
        return False
    t.retract_last()
    dst_ap, dst_region = _placed_for(t, ins, dst, value)
    t.emit(ins.engine, ins.text.replace(old, f"dst={dst_ap}", 1), reads=ins.reads,
           writes=[dst_region] + ins.writes[1:], dma=ins.dma)
    value.made_by = None
    return True


def _placed_for(t, ins, dst, value):
    """dst's access pattern and region for the taken-back instruction ins,
    re-emitted to write dst instead of the fresh tile `value`.  A spilled
    dst comes back here (a DMA of its own, before ins), with the tiles ins
    reads pinned -- their addresses are in its text, so making room for dst
    must not move them -- and value's storage given up first (nothing
    writes it now).  The re-emitted instruction is the one the first
    tracing pass counted: falling back to a copy here would put the passes'
    instruction counts, and with them every later tile's last use, out of
    step."""
    a = value.alloc
    if not t.recording and a is not None and a.free is not None and a.free.alive and a.id not in t.fixed:
        t.pinned.discard(a.id)
        t.live.pop(a.id, None)
        a.free()
    t.pinned.update(r.alloc_id for r in ins.reads if isinstance(r, tracer.Region))
    return dst.ap(), dst.region()


class _LoopReduce:
    """What nl.loop_reduce returns: `dst[...] = nl.loop_reduce(x, op=...)`
    makes the assignment dst = dst <op> x (the destination is the other
    operand, accumulated over the loop's iterations)."""

    def __init__(self, x, alu, dtype):
        self.x, self.alu, self.dtype = x, alu, dtype

    def __getattr__(self, name):
        fail("nl.loop_reduce's result is assigned into its destination tile "
             "(t[...] = nl.loop_reduce(x, op=..., loop_indices=[i])), not used as a value")


def loop_reduce(x, op, loop_indices=None, dtype=None, mask=None, **kw):
    """dst = dst <op> x over the iterations of loop_indices (see _LoopReduce)."""
    return _LoopReduce(_operand(x), op_name(op), dtype)


def _assign(dst, value):
    if value is MASKED_OUT:
        return
    if isinstance(value, MaskedResult):
        _assign(value.target(dst), value.tile)
        return
    if isinstance(value, _LoopReduce):
        x = value.x
        if isinstance(x, Tensor) and x.pending is not None:
            x = x.materialize() or x
        out = _binary(dst, x, value.alu, value.dtype or dst.dtype)
        _assign(dst, out)
        return
    if isinstance(value, Tensor) and value.loaded_by is not None and _retarget_load(dst, value):
        return
    if isinstance(value, Tensor) and value.made_by is not None and _retarget_compute(dst, value):
        return
    if isinstance(value, Tensor):
        if value.pending is not None and dst.space == "psum":
            _place_matmul(value, dst, accumulate=False)
            return
        value.materialize()
        if value.region() == dst.region() and value.shape == dst.shape:
            return
        tracer.current().emit("vector", f"tensor_copy dst={dst.ap()} src={value.ap()}", reads=[value.region()],
                              writes=[dst.region()])
    else:
        _memset(dst, value)


def _iadd(acc, value):
    if value is MASKED_OUT:
        return acc
    if isinstance(value, MaskedResult):
        _iadd(value.target(acc), value.tile)
        return acc
    if isinstance(value, Tensor) and value.pending is not None and acc.space == "psum":
        # onto what the tile holds; a tile nothing has written yet starts an
        # accumulation group instead (the first matmul overwrites, the next
        # add), as the compiler starts one for `psum[...] += nc_matmul(...)`
        # into a fresh PSUM tile (nki-samples allocated_fused_linear.py)
        fresh = acc.alloc.id not in tracer.current().last_write
        _place_matmul(value, acc, accumulate=None if fresh else True)
        return acc
    value = _operand(value)
    t = tracer.current()
    if isinstance(value, Tensor):
        t.emit("vector", f"tensor_tensor dst={acc.ap()} src0={acc.ap()} src1={value.ap()} op=add",
               reads=[acc.region(), value.region()], writes=[acc.region()])
    else:
        t.emit("vector", f"tensor_scalar dst={acc.ap()} src={acc.ap()} op0=add scalar0={float(value)!r}",
               reads=[acc.region()], writes=[acc.region()])
    return acc


# --------------------------------------------------------------- reductions

def _reduce(op, x, axis, dtype=None, keepdims=False, negate=False):
    x = _operand(x)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    nd = len(x.shape)
    mask = 0
    for a in axes:
        a = a % nd
        if a == 0:
            fail("reducing along the partition dimension is not an engine reduction "
                 "(transpose, or use a matmul with a ones vector)")
        mask |= 1 << (a - 1)
    kept = [d if (i == 0 or not (mask >> (i - 1)) & 1) else 1 for i, d in enumerate(x.shape)]
    out = new_tile("sbuf", kept, _result_dtype(x, dtype=dtype), f"nl.{op} result")
    neg = " negate" if negate else ""
    out.made_by = tracer.current().emit("vector", f"tensor_reduce dst={out.ap()} src={x.ap()} op={op} "
                                        f"axes={mask}{neg}", reads=[x.region()], writes=[out.region()])
    if keepdims:
        return out
    keep = [i for i in range(nd) if i == 0 or not (mask >> (i - 1)) & 1]
    shape, strides = [x.shape[i] for i in keep], [out.strides[i] for i in keep]
    if len(shape) == 1:
        shape, strides = [shape[0], 1], [strides[0], 1]
    # the kept axes' own strides: reducing inner axes (2 and 4 of 5) leaves
    # axes whose strides are not the first ones of the result tile
    view = Tensor(out.space, out.dtype, shape, strides, out.offset, None, out.alloc, out.part0)
    view.made_by = out.made_by
    return view


def sum(x, axis, dtype=None, keepdims=False, **kw):  # noqa: A001
    return _reduce("add", x, axis, dtype, keepdims)


def max(x, axis, dtype=None, keepdims=False, **kw):  # noqa: A001
    return _reduce("max", x, axis, dtype, keepdims)


def min(x, axis, dtype=None, keepdims=False, **kw):  # noqa: A001
    return _reduce("min", x, axis, dtype, keepdims)


def prod(x, axis, dtype=None, keepdims=False, **kw):
    return _reduce("multiply", x, axis, dtype, keepdims)


def mean(x, axis, dtype=None, keepdims=False, **kw):
    s = _reduce("add", x, axis, "fp32", keepdims)
    n = 1
    for a in (axis if isinstance(axis, (tuple, list)) else (axis,)):
        n *= x.shape[a]
    return _tensor_scalar(s, 1.0 / n, "multiply", dtype)


# ------------------------------------------------------------------- matmul

# TensorE's share of nl (matmul, transpose, partition broadcasts) lives in tensor_engine.py
from .tensor_engine import (MATMUL_DTYPES, PSUM_BROADCAST_BANKS, _broadcast_in_psum, _ones_row,  # noqa: E402,F401
                            _place_matmul, _unchanged_load_source, broadcast_to, matmul, transpose)


def static_cast(input_data, dtype, **kw):
    """nl.static_cast(data, dtype): a scalar or array cast to dtype.  On the
    host (NumPy arrays, as kernel test harnesses use it) the array in that
    dtype -- bf16 / fp8 through ml_dtypes when it is installed, those types
    having no NumPy dtype of their own; inside a kernel, a tile copied with a
    cast (tensor_copy)."""
    import numpy as np
    dt = isa_dtype(dtype)
    if isinstance(input_data, Tensor):
        return copy(input_data, dtype=dt)
    if isinstance(input_data, (bool, int, float, np.generic)):
        return int(input_data) if dt.startswith(("int", "uint")) else float(input_data)
    arr = np.asarray(input_data)
    npdt = {"fp32": np.float32, "fp16": np.float16, "int32": np.int32, "int16": np.int16, "int8": np.int8,
            "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32}.get(dt)
    if npdt is not None:
        return arr.astype(npdt)
    try:
        import ml_dtypes
    except ImportError:
        fail(f"nl.static_cast of a host array to {NKI_NAMES.get(dt, dt)}: NumPy has no such dtype; install "
             "ml_dtypes, or pass a torch tensor of that dtype")
    ext = {"bf16": ml_dtypes.bfloat16, "fp8_e4m3": ml_dtypes.float8_e4m3, "fp8_e4m3fn": ml_dtypes.float8_e4m3fn,
           "fp8_e5m2": ml_dtypes.float8_e5m2}
    if dt not in ext:
        fail(f"nl.static_cast to {dt!r} on the host is not supported")
    return arr.astype(ext[dt])


def device_print(*a, **k):
    pass



def where(condition, x, y, dtype=None, **kw):
    """x where condition is nonzero, else y (tiles broadcast as NumPy
    does, or numbers): y written first, then x copied over it under the
    condition (VectorE copy_predicated; isa_predicated.where)."""
    from .isa_predicated import where as _where
    return _where(condition, x, y, dtype)


# the rest of the SDK's nki.language: bitwise / logical operations, var,
# all (kept out of this module's globals, __getattr__), softmax, rms_norm,
# expand_dims, buffer predicates, no_reorder
from .language_more import (MemoryRegion, NkiTensor, bitwise_and, bitwise_or, bitwise_xor,  # noqa: E402,F401,A004
                            bypass, expand_dims, invert, is_hbm, is_on_chip, is_psum, is_sbuf, left_shift,
                            logical_and, logical_not, logical_or, logical_xor, no_reorder, right_shift, rms_norm,
                            softmax, var)
from .language_more import DECLINED, all as _more_all  # noqa: E402

_package = __name__.rsplit(".", 1)[0]
# compute calls take mask= (masking.py); loads and stores (memory.py)
# read their masks themselves
for _name, _fn in list(globals().items()):
    if inspect.isfunction(_fn) and not _name.startswith("_") and \
            _fn.__module__ in (__name__, _package + ".tensor_engine", _package + ".language_more") and \
            ("mask" in inspect.signature(_fn).parameters or "kw" in inspect.signature(_fn).parameters):
        globals()[_name] = compute_masks(_fn)
del _name, _fn, _package
_all = compute_masks(_more_all)


def __getattr__(name):
    """nl.bool (NKI 0.8+), nl.range (control.range_) and nl.all, kept out of
    this module's globals so the builtins stay; else a documented nki.language
    name the simulator does not provide yet."""
    if name == "bool":
        return bool_
    if name == "range":
        return range_
    if name == "all":
        return _all
    if name.startswith("__"):
        raise AttributeError(name)
    why = DECLINED.get(name)
    raise tracer.NKIError(f"nki.language.{name} is not supported by the simulator" +
                          (f": {why}" if why else " yet (docs/nki.md lists what is)"))
