"""nki.isa on the simulator: engine instructions by name.  Each accepts the
documented form with a destination (dst=...) and, where NKI had one, the
older form that returns a new tile."""
from __future__ import annotations

import enum
import functools
import inspect
import os

from neuronsim import ACTIVATIONS, FEATURES, target_info

from . import language as nl
from . import tensor_engine as _te
from . import tracer
from .tensor import Tensor, isa_dtype, new_tile
from .tracer import fail
from .masking import compute_masks


def _needs(feature, what):
    """the kernel's target has `feature` (isa_features.def), else the error
    naming the first core with it"""
    t = tracer.current()
    if feature not in t.features:
        fail(f"{what} needs NeuronCore-v{FEATURES[feature]} or newer ({t.target} is NeuronCore-v{t.core_version})")


def _ret(dst, out):
    if dst is None:
        return out
    nl._assign(dst, out)
    return dst


def _dst_first(when, takes_kw=False):
    """NKI 0.8 puts dst first in every nisa call (nisa.activation(dst, op,
    data), nisa.tensor_tensor(dst, data1, data2, op), ...); the older form
    returns the result.  `when(args)` tells the new form from the positional
    arguments -- or the first argument is a tile while the function's own
    first parameter comes by keyword (nisa.tensor_scalar_reduce(dst,
    data=...)); then dst moves to its keyword and the rest keep their order."""
    def wrap(fn):
        first = next(iter(inspect.signature(fn).parameters))

        @functools.wraps(fn)
        def call(*args, **kw):
            if args and ((when(args, kw) if takes_kw else when(args)) or
                         (first in kw and first != "dst" and isinstance(args[0], Tensor))):
                if "dst" in kw:
                    fail(f"nisa.{fn.__name__}: dst given twice (first argument and dst=)")
                return fn(*args[1:], dst=args[0], **kw)
            return fn(*args, **kw)
        return call
    return wrap


def _scalar_field(value, x, what, reads, widen=True):
    """The text of a per-partition scalar field: a number, or a [P, 1]
    column over x's partitions -- fp32 in SBUF, as the engines take it,
    unless widen is False -- whose region joins reads."""
    if not isinstance(value, Tensor):
        return repr(float(value))
    s = nl._scalar_column(value) if widen else nl._operand(value)
    if s.nparts != x.nparts or s.elements_per_partition() != 1:
        fail(f"{what} is a number or a [{x.nparts}, 1] column, got {list(s.shape)}")
    reads.append(s.region())
    return s.ap()


def _tile_arg(x, what, name):
    """Argument `name` of nisa.`what` as an on-chip tile, else the error."""
    x = nl._operand(x)
    if not isinstance(x, Tensor):
        fail(f"nisa.{what}: {name} is a tile in SBUF or PSUM, got {type(x).__name__}")
    return x


def _tiles(args, n):
    return len(args) >= n and all(isinstance(a, Tensor) for a in args[:n])


def nc_matmul(*args, stationary=None, moving=None, dst=None, accumulate=None, is_transpose=False, **kw):
    """dst[M, N] (+)= stationary[K, M]^T @ moving[K, N] on TensorE.

    Forms: nc_matmul(dst, stationary, moving) and keywords (dst= given: the
    result goes there; accumulate None follows NKI's accumulation groups --
    the first matmul into a PSUM tile overwrites it, the next ones add, until
    another instruction uses the tile); nc_matmul(stationary, moving) returns
    a new PSUM tile."""
    # positional arguments fill what the keywords leave open, dst first
    # when stationary / moving come by keyword (nc_matmul(dst, stationary=, moving=))
    if len(args) == 3:
        dst, stationary, moving = args
    elif len(args) == 2:
        if moving is not None:
            dst, stationary = args
        else:
            stationary, moving = args
    elif len(args) == 1:
        if stationary is not None:
            dst = args[0]
        else:
            stationary = args[0]
    perf = _te.perf_mode(kw.pop("perf_mode", None))
    if is_transpose and "pe_transpose" in tracer.current().features:
        if perf:
            fail("nisa.nc_matmul: is_transpose with perf_mode=double_row")
        return _transpose_mode(stationary, moving, dst)
    if perf:
        passes, M, N = _te.double_row_passes(stationary, moving)
    elif dst is None:
        return nl.matmul(stationary, moving, transpose_x=True)
    else:
        x, y, M, N = _te.matmul_operands(stationary, moving, transpose_x=True)
        passes = [(x, y, None)]
    if dst is None:                     # a result used as a value (double_row)
        return _te.pending_result(passes, M, N)
    # straight into dst: no PSUM tile of its own (a kernel placing its PSUM
    # tiles itself may leave no room for one)
    if isinstance(dst, Tensor) and dst.space == "psum" and \
            (dst.shape[0] != M or dst.elements_per_partition() != N):
        fail(f"nisa.nc_matmul: dst {list(dst.shape)} does not hold the [{M}, {N}] result")
    for k, (x, y, pm) in enumerate(passes):
        _te.emit_matmul(x, y, dst, accumulate if k == 0 else True, perf=pm)
    return dst


def _transpose_mode(stationary, moving, dst):
    """nc_matmul(is_transpose=True) on NeuronCore-v3+: TensorE's transpose
    mode (SDK nki.isa.nc_matmul), a bit-exact transpose of stationary in its
    own dtype (the moving operand is the identity it is given) -- the
    ISA's TensorE nc_transpose.  On NeuronCore-v2 the flag only labels an
    ordinary matmul for the profiler."""
    x, y = nl._operand(stationary), nl._operand(moving)
    if not isinstance(x, Tensor) or not isinstance(y, Tensor):
        fail("nisa.nc_matmul(is_transpose=True): stationary and moving are tiles")
    K = x.shape[0]
    if y.shape[0] != K or y.elements_per_partition() != K:
        fail(f"nisa.nc_matmul(is_transpose=True): moving is the [{K}, {K}] identity for a stationary of {K} "
             f"partitions, got {list(y.shape)}")
    if dst is None:
        return nl.transpose(x)
    return nc_transpose(data=x, dst=dst, engine="tensor")


class engine:
    """Where an instruction runs (engine= of nisa calls); unknown_engine lets
    the compiler choose.  nisa.vector_engine etc. are these members.
    `values`: the numbers NKI's enums give their members (the SDK's API
    reference, nki/api/nki/isa), which kernels may pass instead."""
    unknown = "unknown"
    tensor = "tensor"
    vector = "vector"
    scalar = "scalar"
    gpsimd = "gpsimd"
    dma = "dma"
    sync = "sync"
    values = {0: "unknown", 1: "tensor", 2: "scalar", 3: "gpsimd", 4: "dma", 5: "vector", 6: "sync"}


class dge_mode:
    """Who makes a DMA's descriptors (SDK nki/deep-dives/nki-dge.rst): the
    compiler's choice, the runtime before the run (none), GpSimd (swdge) or
    the hardware DGE blocks the Sync and Scalar sequencers drive (hwdge,
    NeuronCore-v3+)."""
    unknown = "unknown"
    swdge = "swdge"
    hwdge = "hwdge"
    none = "none"
    values = {0: "unknown", 1: "swdge", 2: "hwdge", 3: "none"}


class oob_mode:
    error = "error"
    skip = "skip"
    values = {0: "error", 1: "skip"}


class reduce_cmd:
    """The VectorE/ScalarE accumulator commands of reducing instructions."""
    idle = "idle"
    reset = "reset"
    reset_reduce = "reset_reduce"
    reduce = "reduce"
    load_reduce = "load_reduce"
    values = {0: "idle", 1: "reset", 2: "reduce", 3: "reset_reduce", 4: "load_reduce"}


class matmul_perf_mode:
    """nc_matmul's perf_mode: none, or double_row (FP8 on NeuronCore-v3+:
    the contraction split over the partitions and a free dimension of 2,
    done at twice the rate)."""
    none = "none"
    double_row = "double_row"


class nc_version(enum.IntEnum):
    """NeuronCore generations (gen2: Trn1/Inf2, gen3: Trn2, gen4: Trn3), one
    per core version of the ISA's target table."""
    gen2 = 2
    gen3 = 3
    gen4 = 4


def get_nc_version():
    """The NeuronCore generation of the kernel being traced (outside a
    kernel: of the default target, NEURON_PLATFORM_TARGET_OVERRIDE or trn2)."""
    t = tracer._current
    version = t.core_version if t is not None else \
        target_info(os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2"))["core_version"]
    return nc_version(version)


def get_nc_sub_version():
    """The silicon revision within the generation: 0 (the simulator models
    each generation's first)."""
    return 0


unknown_engine, tensor_engine, vector_engine = engine.unknown, engine.tensor, engine.vector
scalar_engine, gpsimd_engine = engine.scalar, engine.gpsimd


@_dst_first(lambda a: _tiles(a, 2))
def reciprocal(data=None, dst=None, dtype=None, **kw):
    """dst = 1 / data on VectorE (tensor_scalar: 1.0 divided by each element)."""
    return _ret(dst, nl._tensor_scalar(data, 1.0, "divide", dtype, True))


@_dst_first(lambda a: _tiles(a, 2))
def nc_transpose(data=None, dst=None, engine=None, **kw):
    """dst[F, P] = data[P, F]^T; on TensorE into a PSUM dst straight away
    (nkilib's transposes into its own PSUM banks), else through nl.transpose."""
    e = getattr(engine, "name", engine)
    x = nl._operand(data)
    if not isinstance(x, Tensor):
        fail("nisa.nc_transpose: data is a tile")
    P, F = x.shape[0], x.elements_per_partition()
    # VectorE when asked, or left open for a tile TensorE cannot take (an
    # integer dtype) that fits VectorE's 32 x 32 (SDK: the compiler picks
    # the engine by the input)
    vector = e == "vector" or (e in (None, "unknown") and x.dtype not in _te.MATMUL_DTYPES and P <= 32 and F <= 32)
    if vector or (isinstance(dst, Tensor) and dst.space == "psum" and e in (None, "unknown", "tensor")):
        limit = 32 if vector else 128
        if P > limit or F > limit:
            fail(f"nisa.nc_transpose of [{P}, {F}] on {'VectorE' if vector else 'TensorE'}: each at most {limit}")
        out = dst if dst is not None else new_tile("sbuf", (F, P), x.dtype, "nc_transpose result")
        if out.shape[0] != F or out.elements_per_partition() != P:
            fail(f"nisa.nc_transpose of [{P}, {F}] into a [{F}, {P}] dst, got {list(out.shape)}")
        ins = tracer.current().emit("vector" if vector else "tensor", f"nc_transpose dst={out.ap()} src={x.ap()}",
                                    reads=[x.region()], writes=[out.region()])
        if dst is None:
            out.made_by = ins
        return out
    return _ret(dst, nl.transpose(data))


@_dst_first(lambda a: _tiles(a, 3))
def tensor_tensor(data1=None, data2=None, op=None, dst=None, dtype=None, **kw):
    return _ret(dst, nl._binary(data1, data2, op, dtype, in_order=True))


@_dst_first(lambda a: _tiles(a, 2))
def tensor_scalar(data=None, op0=None, operand0=None, reverse0=False, op1=None, operand1=None, reverse1=False,
                  dst=None, dtype=None, **kw):
    out = nl._tensor_scalar(data, operand0, nl.op_name(op0), dtype, reverse0)
    if op1 is not None:
        out = nl._tensor_scalar(out, operand1, nl.op_name(op1), dtype, reverse1)
    return _ret(dst, out)


@_dst_first(lambda a: _tiles(a, 2))
def tensor_scalar_reduce(data=None, op0=None, operand0=None, reduce_op=None, reduce_res=None, reverse0=False,
                         dst=None, dtype=None, mask=None, reduce_cmd=None, reduce_init=None,
                         reduce_res_negate=False, **kw):
    """dst = data <op0> operand0, and reduce_res[P, 1] = reduce_op of those
    values along the free axis, in one VectorE instruction (fp32 inside),
    max(MIN_II, N) + MIN_II cycles as the published cost model has it;
    operand0 a number or a [P, 1] column.  Reductions kept in VectorE's
    registers across instructions (reduce_cmd reduce / load_reduce) and
    reduce_res_negate decline by name."""
    if mask is not None:
        fail("nisa.tensor_scalar_reduce with a mask is not supported by the simulator yet")
    if reduce_cmd not in (None, "reset_reduce") or reduce_init is not None:
        fail(f"nisa.tensor_scalar_reduce reduce_cmd={reduce_cmd}: reductions kept in VectorE's registers across "
             "instructions are not supported by the simulator yet (reset_reduce is)")
    if reduce_res_negate:
        fail("nisa.tensor_scalar_reduce reduce_res_negate=True is not supported by the simulator yet")
    x = nl._operand(data)
    if not isinstance(x, Tensor) or x.space == "hbm":
        fail("nisa.tensor_scalar_reduce: data is a tile in SBUF or PSUM")
    if not isinstance(reduce_res, Tensor) or reduce_res.space == "hbm" or reduce_res.nparts != x.nparts or \
            reduce_res.elements_per_partition() != 1:
        fail(f"nisa.tensor_scalar_reduce: reduce_res is a [{x.nparts}, 1] tile in SBUF or PSUM")
    reads = [x.region()]
    sv = _scalar_field(operand0, x, "nisa.tensor_scalar_reduce: operand0", reads)
    out = new_tile("sbuf", x.shape, isa_dtype(dtype) if dtype is not None else
                   (dst.dtype if isinstance(dst, Tensor) else x.dtype), "tensor_scalar_reduce result")
    rev = " reverse0" if reverse0 else ""
    out.made_by = tracer.current().emit(
        "vector", f"tensor_scalar_reduce dst={out.ap()} src={x.ap()} op0={nl.op_name(op0)} scalar0={sv}{rev} "
                  f"reduce={nl.op_name(reduce_op)} reduce_dst={reduce_res.ap()}",
        reads=reads, writes=[out.region(), reduce_res.region()])
    return _ret(dst, out)


@_dst_first(lambda a: _tiles(a, 2))
def scalar_tensor_tensor(data=None, op0=None, operand0=None, op1=None, operand1=None, reverse0=False,
                         reverse1=False, dst=None, dtype=None, engine=None, **kw):
    """dst = (data <op0> operand0) <op1> operand1 in one VectorE (or GpSimd)
    instruction, costed as a tensor_tensor (SDK: "approximately the same
    latency as a regular tensor_tensor"); operand0 a number or a [P, 1]
    column, operand1 a tile of data's size; each step in fp32."""
    x, y = nl._operand(data), nl._operand(operand1)
    if not isinstance(x, Tensor) or not isinstance(y, Tensor):
        fail("nisa.scalar_tensor_tensor: data and operand1 are tiles")
    if x.nparts != y.nparts or x.elements_per_partition() != y.elements_per_partition():
        fail(f"nisa.scalar_tensor_tensor: data {list(x.shape)} and operand1 {list(y.shape)} differ in size")
    eng = "gpsimd" if getattr(engine, "name", engine) == "gpsimd" else "vector"
    if eng == "gpsimd" or (x.space == "psum" and y.space == "psum"):
        # GpSimd has no PSUM port, and VectorE reads at most one PSUM operand
        x = nl.copy(x) if x.space == "psum" and eng == "gpsimd" else x
        y = nl.copy(y) if y.space == "psum" else y
    reads = [x.region(), y.region()]
    sv = _scalar_field(operand0, x, "nisa.scalar_tensor_tensor: operand0", reads)
    out = new_tile("sbuf", x.shape, isa_dtype(dtype) if dtype is not None else
                   (dst.dtype if isinstance(dst, Tensor) else x.dtype), "scalar_tensor_tensor result")
    flags0, flags1 = " reverse0" if reverse0 else "", " reverse1" if reverse1 else ""
    out.made_by = tracer.current().emit(
        eng, f"scalar_tensor_tensor dst={out.ap()} src={x.ap()} op0={nl.op_name(op0)} scalar0={sv}{flags0} "
             f"src1={y.ap()} op1={nl.op_name(op1)}{flags1}", reads=reads, writes=[out.region()])
    return _ret(dst, out)


def tensor_partition_reduce(*args, op=None, data=None, dst=None, dtype=None, **kw):
    """dst[1, F] = op over the partitions of data[P, F] on GpSimd
    (tensor_partition_reduce(dst, op, data), or (op, data) returning it)."""
    rest = list(args)
    if rest and isinstance(rest[0], Tensor):
        dst = rest.pop(0)
    for name, v in zip(("op", "data"), rest):
        if name == "op":
            op = v
        else:
            data = v
    x = nl._operand(data)
    if not isinstance(x, Tensor):
        fail("nisa.tensor_partition_reduce: data is a tile")
    if x.space == "psum":
        x = nl.copy(x)                  # GpSimd has no PSUM port
    out = new_tile("sbuf", (1, *x.shape[1:]) if len(x.shape) > 1 else (1, 1),
                   isa_dtype(dtype) if dtype is not None else x.dtype, "tensor_partition_reduce result")
    out.made_by = tracer.current().emit("gpsimd", f"tensor_partition_reduce dst={out.ap()} src={x.ap()} "
                                                  f"op={nl.op_name(op)}", reads=[x.region()], writes=[out.region()])
    return _ret(dst, out)


@_dst_first(lambda a: isinstance(a[0], Tensor))
def activation(op=None, data=None, bias=None, scale=1.0, dst=None, dtype=None, reduce_op=None, reduce_res=None,
               reduce_cmd=None, **kw):
    """dst = op(data * scale + bias) on ScalarE.  reduce_op with reduce_res
    and reduce_cmd reset_reduce (or left out): the activated values reduced
    along the free axes into reduce_res by the same instruction.  Keeping
    the reduction in the engine's registers across instructions (reduce_cmd
    reduce / reset / idle with a reduce_op) is not modelled yet."""
    func = _act_func(op)
    if reduce_op is not None or reduce_res is not None:
        cmd = reduce_cmd if reduce_cmd is not None else "reset_reduce"
        if cmd != "reset_reduce" or reduce_op is None or reduce_res is None:
            fail(f"nisa.activation reduce_cmd={cmd}: reductions kept in ScalarE's registers across instructions "
                 "are not supported by the simulator yet (reduce_op with reduce_res and reduce_cmd=reset_reduce "
                 "are)")
    if dtype is None and isinstance(dst, Tensor):
        dtype = dst.dtype                  # computed in fp32, cast once into dst's dtype
    return _ret(dst, nl._activation(func, data, dtype, scale, bias, reduce_op, reduce_res, any_dtype=True))


def _act_func(op):
    name = getattr(op, "__name__", str(op))
    func = nl.ACT_FROM_NKI.get(name, name)      # NKI's name, else the ISA's
    if func not in ACTIVATIONS:
        fail(f"unsupported activation {op!r} (the ISA has {', '.join(ACTIVATIONS)})")
    return func


@_dst_first(lambda a: isinstance(a[0], Tensor))
def activation_reduce(op=None, data=None, reduce_op=None, reduce_res=None, bias=None, scale=1.0, dst=None,
                      dtype=None, **kw):
    """dst = op(data * scale + bias), and reduce_res[P, 1] = reduce_op of the
    activated values along the free axes, in one ScalarE instruction
    (activation_reduce(dst, op, data, ...) or the older form returning the
    result)."""
    if reduce_op is None or reduce_res is None:
        fail("nisa.activation_reduce needs reduce_op= and reduce_res=")
    return _ret(dst, nl._activation(_act_func(op), data, dtype, scale, bias, reduce_op, reduce_res))


def exponential(dst=None, src=None, max_value=0.0, reduce_res=None, reduce_cmd=None, reduce_init=0.0, **kw):
    """NKI 0.8 exponential (NeuronCore-v4 and newer, VectorE): dst =
    exp(src - max_value), max_value a number or a [P, 1] tile; with
    reduce_res (reduce_cmd reset_reduce, or idle) also the row sums.  One
    VectorE instruction.  Accumulating across instructions (reduce_cmd
    reduce / load_reduce) is not supported yet."""
    _needs("exponential", "nisa.exponential")
    if reduce_cmd not in (None, "idle", "reset_reduce", "reset"):
        fail(f"nisa.exponential reduce_cmd={reduce_cmd!r}: accumulating across instructions is not "
             "supported by the simulator yet (reset_reduce / idle are)")
    x = nl._operand(src)
    if not isinstance(dst, Tensor) or not isinstance(x, Tensor):
        fail("nisa.exponential(dst, src, max_value=0.0, reduce_res=None): dst and src are tiles")
    reads = [x.region()]
    mv = _scalar_field(max_value, x, "nisa.exponential max_value", reads, widen=False)
    writes = [dst.region()]
    red = ""
    if reduce_res is not None:
        if reduce_res.nparts != x.nparts or reduce_res.elements_per_partition() != 1:
            fail(f"nisa.exponential reduce_res is a [{x.nparts}, 1] tile")
        red = f" reduce_dst={reduce_res.ap()}"
        writes.append(reduce_res.region())
    tracer.current().emit("vector", f"exponential dst={dst.ap()} src={x.ap()} max={mv}{red}", reads=reads,
                          writes=writes)
    return dst


def _neg(v):
    """-v for an immediate or a [P, 1] tile (negated on VectorE)."""
    return nl._tensor_scalar(nl._operand(v), -1.0, "multiply", "fp32") if isinstance(v, Tensor) else -float(v)


def activate2(dst=None, op=None, data=None, imm0=0.0, imm1=0.0, op0=None, op1=None, relu_param=0.0,
              reverse0=False, reverse1=False, reduce_op=None, reduce_res=None, reduce_cmd=None, **kw):
    """NKI 0.8 activate2 (NeuronCore-v4 and newer, ScalarE): op((data op0
    imm0) op1 imm1) for the six published (op0, op1) pairs.  ScalarE's
    activation instruction computes func(data * scale + bias), which is each
    of them: one instruction, the activation's cost."""
    _needs("activate2", "nisa.activate2")
    if reduce_op is not None or reduce_res is not None:
        fail("nisa.activate2 with a reduction is not supported by the simulator yet")
    if float(relu_param) != 0.0:
        fail("nisa.activate2 relu_param is not supported by the simulator yet")
    n0 = "bypass" if op0 is None else nl.op_name(op0)
    n1 = "bypass" if op1 is None else nl.op_name(op1)
    if n0 == "bypass" and (n1 != "bypass" or reverse0):
        fail("nisa.activate2: op1 and reverse0 need op0")
    if n1 == "bypass" and reverse1:
        fail("nisa.activate2: reverse1 needs op1")
    scale, bias = 1.0, 0.0
    if n0 == "multiply":
        scale = imm0
    elif n0 == "add":
        bias = imm0
    elif n0 == "subtract":                 # data - imm0, or imm0 - data reversed
        scale, bias = (-1.0, imm0) if reverse0 else (1.0, _neg(imm0))
    elif n0 != "bypass":
        fail(f"nisa.activate2 op0 {n0}: multiply, add, subtract or bypass")
    if n1 != "bypass":
        if n0 != "multiply" or n1 not in ("add", "subtract"):
            fail(f"nisa.activate2 (op0, op1) = ({n0}, {n1}): the published pairs are (multiply, add), "
                 "(multiply, subtract), (multiply|add|subtract|bypass, bypass)")
        if n1 == "add":
            bias = imm1
        elif reverse1:                     # imm1 - data * imm0
            scale, bias = _neg(imm0), imm1
        else:
            bias = _neg(imm1)
    return activation(op=op, data=data, bias=bias, scale=scale, dst=dst)


@_dst_first(lambda a: isinstance(a[0], Tensor))
def tensor_reduce(op=None, data=None, axis=None, dst=None, dtype=None, negate=False, keepdims=False, **kw):
    alu = nl.op_name(op)
    return _ret(dst, nl._reduce(alu, data, axis, dtype, keepdims, negate))


@_dst_first(lambda a, kw: _tiles(a, 2) or (_tiles(a, 1) and "src" in kw), takes_kw=True)
def tensor_copy(src=None, dst=None, dtype=None, engine=None, **kw):
    """dst = src on the engine= it names (unknown / None: VectorE)."""
    where = "vector" if engine in (None, "unknown") else engine
    return _ret(dst, nl.copy(src, dtype=dtype, engine=where))


def memset(dst=None, value=0.0, shape=None, dtype=None, **kw):
    if dst is None:
        dst = new_tile("sbuf", shape, isa_dtype(dtype), "nisa.memset result")
    nl._memset(dst, value)
    return dst


@_dst_first(lambda a: _tiles(a, 3))
def nc_n_gather(data=None, indices=None, dst=None, name=None, **kw):
    """dst[p, j] = data[p, indices[p, j]] on GpSimd: each partition gathers
    from its own elements (data's free dims flattened) at uint32 positions;
    everything in SBUF, dst keeps data's dtype and takes indices' shape.
    nc_n_gather(dst, data, indices) or nc_n_gather(data, indices) returning
    a new tile.  Its cost is not published: costed as a GpSimd copy of the
    gathered elements."""
    if kw:
        fail(f"nisa.nc_n_gather: {', '.join(sorted(kw))} is not supported")
    x, idx = nl._operand(data), nl._operand(indices)
    if not isinstance(x, Tensor) or not isinstance(idx, Tensor) or x.space != "sbuf" or idx.space != "sbuf":
        fail("nisa.nc_n_gather gathers from an SBUF tile at the positions of an SBUF tile of indices")
    if idx.dtype != "uint32":
        fail(f"nisa.nc_n_gather: indices are uint32, not {idx.dtype}")
    if x.nparts != idx.nparts:
        fail(f"nisa.nc_n_gather: data and indices span the same partitions ({x.nparts} vs {idx.nparts})")
    out = dst if dst is not None else new_tile("sbuf", idx.shape, x.dtype, "nc_n_gather result")
    if out.space != "sbuf" or out.dtype != x.dtype or out.nparts != idx.nparts or \
            out.elements_per_partition() != idx.elements_per_partition():
        fail(f"nisa.nc_n_gather: dst is an SBUF tile of {x.dtype} shaped like indices {list(idx.shape)}, "
             f"got {out.space} {list(out.shape)} {out.dtype}")
    tracer.current().emit("gpsimd", f"nc_n_gather dst={out.ap()} src={x.ap()} indices={idx.ap()}",
                          reads=[x.region(), idx.region()], writes=[out.region()])
    return out


def _scan_dst_first(a, kw):
    """tensor_tensor_scan(dst, data0, data1, initial, op0, op1) -- not the
    older (data0, data1, initial, op0, op1), whose fourth is an operator."""
    if not _tiles(a, 3):
        return False
    if len(a) >= 4:
        return not (callable(a[3]) or isinstance(a[3], str))
    # three tiles: the new form when initial comes by keyword (the older
    # form's third positional is initial itself)
    return "initial" in kw


@_dst_first(_scan_dst_first, takes_kw=True)
def tensor_tensor_scan(data0=None, data1=None, initial=0.0, op0=None, op1=None, dst=None, dtype=None,
                       reverse0=False, reverse1=False, **kw):
    """result[:, i] = (data0[:, i] <op0> result[:, i-1]) <op1> data1[:, i],
    from `initial` (a number or a [P, 1] tile), on VectorE."""
    if reverse0 or reverse1:
        tracer.fail("tensor_tensor_scan with reverse operands is not supported yet")
    x, y = nl._operand(data0), nl._operand(data1)
    if not isinstance(x, Tensor) or not isinstance(y, Tensor) or x.shape != y.shape:
        tracer.fail("tensor_tensor_scan takes two tiles of the same shape")
    a0, a1 = nl.op_name(op0 or nl.multiply), nl.op_name(op1 or nl.add)
    out = new_tile("sbuf", x.shape, nl._result_dtype(x, y, dtype=dtype), "tensor_tensor_scan result")
    reads = [x.region(), y.region()]
    if isinstance(initial, Tensor):
        init = nl._operand(initial)
        if init.nparts != x.shape[0] or init.elements_per_partition() != 1:
            tracer.fail(f"tensor_tensor_scan initial is a number or a [{x.shape[0]}, 1] tile")
        iv = init.ap()
        reads.append(init.region())
    else:
        iv = repr(float(initial))
    out.made_by = tracer.current().emit("vector", f"tensor_tensor_scan dst={out.ap()} src0={x.ap()} "
                                        f"src1={y.ap()} op0={a0} op1={a1} initial={iv}", reads=reads,
                                        writes=[out.region()])
    return _ret(dst, out)


_CMP = {"<": "is_lt", "<=": "is_le", ">": "is_gt", ">=": "is_ge"}


def _affine_fields(coef, offset, sizes, what, broadcast=False):
    """base/pmul/mul fields from an affine form over grid axes 0 (partition),
    1, 2, ...; broadcast: a grid axis the expression leaves out has size 1
    (nisa.iota(nl.arange(512)[None, :]) is a [1, 512] tile, SDK
    test_nki_isa_iota.py)."""
    axes = sorted(sizes)
    if broadcast and axes:
        axes = list(range(axes[-1] + 1))
    if not axes or axes[0] != 0:
        fail(f"{what}: the expression needs the partition index (grid axis 0)")
    free = axes[1:]
    if len(free) > 4 or free != list(range(1, len(free) + 1)):
        fail(f"{what}: use consecutive grid axes 1.. for the free dimensions (at most 4)")
    mul = ",".join(str(coef.get(a, 0)) for a in free) or "0"
    return f"base={offset} pmul={coef.get(0, 0)} mul={mul}", [sizes.get(a, 1) for a in axes]


def _pattern_view(t, pattern, what):
    """A [P, num_w, .., num_x] view of tile t for an access pattern
    [[step_w, num_w], ..., [step_x, num_x]] (NKI 0.8 iota / affine_select):
    the pattern's sizes split t's free elements in order."""
    if not isinstance(t, Tensor) or t.space == "hbm":
        fail(f"{what}: dst and on_true_tile are on-chip tiles")
    try:
        steps = [int(st) for st, _ in pattern]
        nums = [int(n) for _, n in pattern]
    except (TypeError, ValueError):
        fail(f"{what}: pattern is a list of [step, num] pairs, got {pattern!r}")
    if not 1 <= len(nums) <= 4 or min(nums) < 1:
        fail(f"{what}: pattern has 1 to 4 [step, num] pairs with num >= 1, got {pattern!r}")
    total = int(__import__("math").prod(nums))
    if total != t.elements_per_partition():
        fail(f"{what}: the pattern covers {total} elements per partition, the tile has "
             f"{t.elements_per_partition()}")
    dims = [d for d in t.free_dims() if d[1] > 1]
    if len(dims) > 1 or (dims and dims[0][0] != 1):
        fail(f"{what}: the tile's free elements must be contiguous to take a pattern")
    strides, acc = [], 1
    for n in reversed(nums):
        strides.insert(0, acc)
        acc *= n
    return Tensor(t.space, t.dtype, (t.nparts, *nums), (0, *strides), t.offset, None, t.alloc, t.part0), steps


def _pattern_fields(steps, offset, channel_multiplier):
    return f"base={int(offset)} pmul={int(channel_multiplier)} mul={','.join(str(s) for s in steps)}"


def iota(*args, expr=None, dtype=None, dst=None, mask=None, pattern=None, offset=0, channel_multiplier=0, **kw):
    """The values of an index expression, e.g. nisa.iota(i_p * 4 + i_f,
    dtype=nl.int32), on GpSimd; or the NKI 0.8 form iota(dst, pattern,
    offset=0, channel_multiplier=0): dst[c, w, z, y, x] = offset +
    c * channel_multiplier + w * step_w + ... + x * step_x."""
    if args and isinstance(args[0], Tensor) or pattern is not None:
        if args and isinstance(args[0], Tensor):
            dst, rest = args[0], list(args[1:])
        else:
            rest = list(args)
        pattern = rest.pop(0) if rest and pattern is None else pattern
        offset = rest.pop(0) if rest else offset
        channel_multiplier = rest.pop(0) if rest else channel_multiplier
        if dst is None or pattern is None:
            fail("nisa.iota(dst, pattern, offset=0, channel_multiplier=0): dst and pattern are needed")
        if dst.space != "sbuf":
            fail("nisa.iota writes SBUF")
        view, steps = _pattern_view(dst, pattern, "nisa.iota")
        tracer.current().emit("gpsimd", f"iota dst={view.ap()} {_pattern_fields(steps, offset, channel_multiplier)}",
                              writes=[view.region()])
        return dst
    if args:
        expr = args[0]
        if len(args) > 1:
            dtype = args[1]
    from .indexing import affine_form
    coef, offset, sizes = affine_form(expr)
    fields, shape = _affine_fields(coef, offset, sizes, "nisa.iota", broadcast=True)
    out = new_tile("sbuf", shape, isa_dtype(dtype) if dtype is not None else "int32", "nisa.iota result")
    tracer.current().emit("gpsimd", f"iota dst={out.ap()} {fields}", writes=[out.region()])
    return _ret(dst, out)


def affine_select(*args, pred=None, on_true_tile=None, on_false_value=None, dtype=None, dst=None, mask=None,
                  pattern=None, channel_multiplier=0, cmp_op=None, offset=0, **kw):
    """on_true_tile where an affine predicate over the tile's indices holds
    (e.g. i_q - i_k >= 0 for a causal mask), on_false_value elsewhere; GpSimd.
    NKI 0.8 form: affine_select(dst, pattern, channel_multiplier,
    on_true_tile, on_false_value, cmp_op=nl.equal, offset=0), the predicate
    cmp_op(offset + c * channel_multiplier + sum(step * index), 0)."""
    if args and isinstance(args[0], Tensor) or pattern is not None:
        names = ["pattern", "channel_multiplier", "on_true_tile", "on_false_value", "cmp_op", "offset"]
        vals = dict(pattern=pattern, channel_multiplier=channel_multiplier, on_true_tile=on_true_tile,
                    on_false_value=on_false_value, cmp_op=cmp_op, offset=offset)
        rest = list(args)
        if rest and isinstance(rest[0], Tensor):
            dst = rest.pop(0)
        for n, v in zip(names, rest):
            vals[n] = v
        if dst is None or vals["pattern"] is None or vals["on_true_tile"] is None or vals["on_false_value"] is None:
            fail("nisa.affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, "
                 "cmp_op=nl.equal, offset=0): dst, pattern, on_true_tile and on_false_value are needed")
        src = nl._operand(vals["on_true_tile"])
        if src.space != "sbuf" or dst.space != "sbuf":
            fail("nisa.affine_select reads and writes SBUF")
        if src.nparts != dst.nparts:
            fail(f"nisa.affine_select: dst has {dst.nparts} partitions, on_true_tile {src.nparts}")
        cmp = nl.op_name(vals["cmp_op"] if vals["cmp_op"] is not None else "is_equal")
        if cmp not in _CMP.values() and cmp not in ("is_equal", "not_equal"):
            fail(f"nisa.affine_select cmp_op {vals['cmp_op']!r}: a comparison (nl.equal, nl.greater_equal, ...)")
        dview, steps = _pattern_view(dst, vals["pattern"], "nisa.affine_select")
        sview, _ = _pattern_view(src, vals["pattern"], "nisa.affine_select")
        fields = _pattern_fields(steps, vals["offset"], vals["channel_multiplier"])
        tracer.current().emit("gpsimd", f"affine_select dst={dview.ap()} src={sview.ap()} cmp={cmp} {fields} "
                              f"fill={float(vals['on_false_value'])!r}", reads=[sview.region()],
                              writes=[dview.region()])
        return dst
    if args:
        pred = args[0]
        on_true_tile = args[1] if len(args) > 1 else on_true_tile
        on_false_value = args[2] if len(args) > 2 else on_false_value
    from .indexing import Mask, affine_form
    if not isinstance(pred, Mask) or len(pred.terms) != 1:
        fail("nisa.affine_select takes one comparison of an index expression with an integer")
    expr, op, bound = pred.terms[0]
    from .indexing import GridExpr, Index, as_int
    if isinstance(bound, (Index, GridExpr)):
        # i_q >= i_k: the same predicate as i_q - i_k >= 0
        expr, bound = GridExpr.of(expr) - bound, 0
    if op not in _CMP or as_int(bound) is None:
        fail(f"nisa.affine_select predicate {op!r} {bound!r}: <, <=, > or >= an integer or an index expression")
    bound = as_int(bound)
    coef, offset, sizes = affine_form(expr)
    fields, shape = _affine_fields(coef, offset - bound, sizes, "nisa.affine_select")
    src = nl._operand(on_true_tile)
    if isinstance(src, Tensor) and src.space == "psum":
        # GpSimd cannot read PSUM: a matmul result is copied out first (VectorE)
        src = nl.copy(src)
    if list(src.shape) != shape and src.nparts * src.elements_per_partition() != \
            shape[0] * int(__import__("math").prod(shape[1:])):
        fail(f"nisa.affine_select: predicate over {shape}, tile {list(src.shape)}")
    out = new_tile("sbuf", src.shape, isa_dtype(dtype) if dtype is not None else src.dtype, "affine_select result")
    fill = float(on_false_value)
    tracer.current().emit("gpsimd", f"affine_select dst={out.ap()} src={src.ap()} cmp={_CMP[op]} {fields} "
                          f"fill={fill!r}", reads=[src.region()], writes=[out.region()])
    return _ret(dst, out)


# documented nki.isa names the simulator refuses, and why
_DECLINED = {**{n: "the simulator has no device random-number generator"
                for n in ("rng", "rand2", "dropout", "set_rng_seed", "rand_set_state", "rand_get_state")},
             "sequence_bounds": "a GpSimd instruction the simulator's ISA does not have",
             "topk": "a GpSimd instruction the simulator's ISA does not have"}


def __getattr__(name):
    """A documented nki.isa instruction the simulator does not provide."""
    if name.startswith("__"):
        raise AttributeError(name)
    why = _DECLINED.get(name)
    raise tracer.NKIError(f"nki.isa.{name} is not supported by the simulator" +
                          (f": {why}" if why else " yet (docs/nki.md lists what is)"))


# LNC=2 (NeuronCore-v3+): the two cores of a logical core (lnc.py)
from .lnc import core_barrier, dma_engine, sendrecv  # noqa: E402,F401

# per-partition statistics, top-8 selection and nonzero positions (isa_stats.py)
from .isa_stats import (bn_aggr, bn_stats, max8, nc_find_index8, nc_match_replace8,  # noqa: E402,F401
                        nonzero_with_count)

# the DMA engines: copies and transposes (isa_dma.py)
from .isa_dma import dma_compute, dma_copy, dma_transpose  # noqa: E402,F401

# data moved across partitions inside an engine (isa_partition.py)
from .isa_partition import local_gather, nc_stream_shuffle  # noqa: E402,F401

# writes under a condition (isa_predicated.py)
from .isa_predicated import (range_select, select_reduce, tensor_copy_predicated,  # noqa: E402,F401
                             tensor_scalar_cumulative)

# MX data: nc_matmul_mx and quantize_mx (isa_mx.py)
from .isa_mx import nc_matmul_mx, quantize_mx  # noqa: E402,F401

# nki.isa.constants (the enums above, as a module of their own)
from . import isa_constants as constants  # noqa: E402,F401

# run-time integers in sequencer registers (scalar.py), and registers whose
# values are known while tracing (isa_registers.py)
from .scalar import NkiScalar, scalar_load, scalar_store  # noqa: E402,F401
from .isa_registers import (VirtualRegister, register_alloc, register_load,  # noqa: E402,F401
                            register_move, register_store)


# ------------------------------------------------- NKI enum values as numbers

_ENUM_ARGS = {"engine": engine, "dge_mode": dge_mode, "oob_mode": oob_mode, "reduce_cmd": reduce_cmd}


def _enum_arguments(fn):
    """fn taking engine= / dge_mode= / oob_mode= / reduce_cmd= also as the
    numbers NKI's enums carry (nkilib passes dge_mode=3 for none)."""
    params = set(inspect.signature(fn).parameters)
    if not params & set(_ENUM_ARGS) and "kw" not in params:
        return fn

    @functools.wraps(fn)
    def call(*args, **kw):
        if not kw:
            return fn(*args)
        for k, cls in _ENUM_ARGS.items():
            v = kw.get(k)
            if isinstance(v, int) and not isinstance(v, bool):
                if v not in cls.values:
                    fail(f"nisa.{fn.__name__}: {k}={v} is no nki.isa.{cls.__name__} value "
                         f"({', '.join(f'{n}={m}' for n, m in cls.values.items())})")
                kw[k] = cls.values[v]
            elif isinstance(v, enum.Enum):
                kw[k] = v.name
        return fn(*args, **kw)
    return call


# (dma_copy reads its mask= itself, as the loads and stores do)
_OWN_MASKS = ("dma_copy",)

for _name, _fn in list(globals().items()):
    if inspect.isfunction(_fn) and not _name.startswith("_") and _name not in ("get_nc_version",
                                                                               "get_nc_sub_version"):
        _params = inspect.signature(_fn).parameters
        if _name not in _OWN_MASKS and ("mask" in _params or "kw" in _params):
            _fn = compute_masks(_fn)
        globals()[_name] = _enum_arguments(_fn)
del _name, _fn, _params
