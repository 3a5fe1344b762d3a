"""nki.isa's VectorE instructions that write under a condition:
tensor_copy_predicated and range_select.  isa.py re-exports them.

The C validator judges dtypes, shapes and memories (its refusal is an
NKIError at the kernel line); this module turns NKI's arguments into the
instruction's fields and names what the tracer must know: every such
instruction reads its dst too, since elements it does not select keep their
values."""
from __future__ import annotations

import numpy as np

from . import language as nl
from . import tracer
from .dtype_keys import int_imm
from .isa import _needs, _tile_arg
from .tensor import Tensor, isa_dtype, new_tile

_FP32_MIN = float(np.finfo(np.float32).min)   # range_select's fill, fixed by the hardware


def _immediate(value, dtype, what, name):
    """A number as the instruction's immediate: an integer of an integer
    dtype's range exactly (int_imm), else fp32."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        tracer.fail(f"nisa.{what}: {name} is a tile or a number known while tracing, got {value!r}")
    return (int_imm(value, dtype) if isinstance(value, int) else None) or repr(float(value))


def tensor_copy_predicated(dst=None, src=None, predicate=None, reverse_pred=False, name=None, **kw):
    """dst = src where predicate (uint8/16/32) is nonzero -- zero with
    reverse_pred -- and unchanged elsewhere; src a tile of dst's dtype and
    shape, or a number (SDK nki.isa.tensor_copy_predicated, VectorE)."""
    if kw:
        tracer.fail(f"nisa.tensor_copy_predicated: unexpected argument(s) {', '.join(sorted(kw))}")
    what = "tensor_copy_predicated"
    d, p = _tile_arg(dst, what, "dst"), _tile_arg(predicate, what, "predicate")
    reads = [p.region(), d.region()]
    if isinstance(src, Tensor):
        s = _tile_arg(src, what, "src")
        reads.append(s.region())
        src_text = s.ap()
    else:
        src_text = _immediate(src, d.dtype, what, "src")
    flags = " reverse_pred" if reverse_pred else ""
    tracer.current().emit("vector", f"copy_predicated dst={d.ap()} src={src_text} pred={p.ap()}{flags}",
                          reads=reads, writes=[d.region()])
    return dst


def range_select(*args, on_true_tile=None, comp_op0=None, comp_op1=None, bound0=None, bound1=None,
                 reduce_cmd=None, reduce_res=None, reduce_op=None, range_start=0, on_false_value=_FP32_MIN,
                 dst=None, dtype=None, name=None, mask=None, **kw):
    """NeuronCore-v3+, VectorE: with i = range_start + the free index, dst =
    on_true_tile where comp_op0(i, bound0[p]) and comp_op1(i, bound1[p]),
    else FP32_MIN (the only fill the hardware has); reduce_res[P, 1] (given)
    = each row's max (SDK nki.isa.range_select).  dst first (NKI 0.8) or the
    result returned (the older form, dtype= its dtype).  Reductions kept in
    VectorE's registers across instructions (reduce_cmd reduce /
    load_reduce, or reduce_res left out to read later) are not supported yet."""
    what = "nisa.range_select"
    if kw or mask is not None:
        tracer.fail(f"{what}: unexpected argument(s) {', '.join(sorted(kw) + (['mask'] if mask is not None else []))}")
    if len(args) > 1 or (args and dst is not None):
        tracer.fail(f"{what}(dst, on_true_tile=..., ...): the other arguments by keyword")
    dst = args[0] if args else dst
    _needs("range_select", what)
    cmd = reduce_cmd if reduce_cmd is not None else "reset_reduce"
    if cmd not in ("reset_reduce", "idle"):
        tracer.fail(f"{what} reduce_cmd={cmd}: reductions kept in VectorE's registers across instructions are "
                    "not supported by the simulator yet (reset_reduce with reduce_res is)")
    if reduce_op is not None and nl.op_name(reduce_op) != "max":
        tracer.fail(f"{what}: reduce_op is maximum (the only reduction the instruction has), got {reduce_op!r}")
    # as an fp32 value: -3.4028235e38 (nkilib's attention_bwd writes it so)
    # rounds to FP32_MIN
    with np.errstate(over="ignore"):               # a value past fp32 becomes -inf: refused
        fill = float(np.float32(on_false_value))
    if fill != _FP32_MIN:
        tracer.fail(f"{what}: on_false_value is FP32_MIN (-3.4028235e+38), the only fill the hardware has; "
                    f"got {on_false_value!r}")
    if isinstance(range_start, bool) or not isinstance(range_start, int):
        tracer.fail(f"{what}: range_start is an int known while tracing, got {range_start!r}")
    x = _tile_arg(on_true_tile, "range_select", "on_true_tile")
    lo, hi = _tile_arg(bound0, "range_select", "bound0"), _tile_arg(bound1, "range_select", "bound1")
    if dst is None:
        out = new_tile("sbuf", x.shape, isa_dtype(dtype) if dtype is not None else x.dtype, "range_select result")
    else:
        out = _tile_arg(dst, "range_select", "dst")
    reads, writes, red = [x.region(), lo.region(), hi.region()], [out.region()], ""
    if reduce_res is not None:
        r = _tile_arg(reduce_res, "range_select", "reduce_res")
        red = f" reduce_dst={r.ap()}"
        writes.append(r.region())
    ins = tracer.current().emit(
        "vector", f"range_select dst={out.ap()} src={x.ap()} bound0={lo.ap()} bound1={hi.ap()} "
                  f"cmp0={nl.op_name(comp_op0)} cmp1={nl.op_name(comp_op1)} range_start={range_start}{red}",
        reads=reads, writes=writes)
    if dst is None:
        out.made_by = ins
    return out


def where(condition, x, y, dtype=None):
    """nl.where: the result has the broadcast shape of the tiles among
    condition, x and y and dtype (else x's or y's); y fills it, then x is
    copied over it where the condition is nonzero -- a uint8 0 / 1
    predicate made from it, exact for any dtype (nisa.tensor_copy_predicated)."""
    c = nl._operand(condition)
    if not isinstance(c, Tensor):
        tracer.fail("nl.where: condition is a tile")
    tiles = [nl._operand(v) for v in (x, y) if isinstance(v, Tensor)]
    if any(t.space == "hbm" for t in tiles):
        tracer.fail("nl.where: x and y are on-chip tiles or numbers")
    try:
        shape = tuple(int(n) for n in np.broadcast_shapes(c.shape, *(t.shape for t in tiles)))
    except ValueError:
        tracer.fail(f"nl.where: shapes {[list(t.shape) for t in [c] + tiles]} do not broadcast")
    dt = isa_dtype(dtype) if dtype is not None else next((t.dtype for t in tiles), "fp32")
    out = new_tile("sbuf", shape, dt, "nl.where result")
    if isinstance(y, Tensor):
        nl._assign(out, nl.copy(nl._expand(y, shape), dtype=dt))
    else:
        nl._memset(out, y)
    pred = nl._tensor_scalar(nl._expand(c, shape), 0.0, "not_equal", "uint8")
    src = x
    if isinstance(x, Tensor):
        src = nl._expand(x, shape)
        if src.dtype != dt or src.shape != out.shape or src.strides != out.strides:
            src = nl.copy(src, dtype=dt)
    tensor_copy_predicated(dst=out, src=src, predicate=pred)
    return out


def select_reduce(dst=None, predicate=None, on_true=None, on_false=None, reduce_res=None, reduce_cmd=None,
                  reduce_op=None, reverse_pred=False, name=None, **kw):
    """dst = on_true where predicate (negated by reverse_pred), else on_false
    (a number or a [P, 1] column); with reduce_cmd reset_reduce, reduce_res
    [P, 1] = each row's max of dst (SDK nki.isa.select_reduce).  Lowered to
    a fill with on_false, tensor_copy_predicated and a max reduction.
    Reductions kept in VectorE's registers across instructions (reduce_cmd
    reduce / load_reduce) are not supported yet."""
    what = "nisa.select_reduce"
    if kw:
        tracer.fail(f"{what}: unexpected argument(s) {', '.join(sorted(kw))}")
    cmd = getattr(reduce_cmd, "name", reduce_cmd) or "idle"
    if cmd not in ("reset_reduce", "idle"):
        tracer.fail(f"{what} reduce_cmd={cmd}: reductions kept in VectorE's registers across instructions are not "
                    "supported by the simulator yet (reset_reduce and idle are)")
    if reduce_op is not None and nl.op_name(reduce_op) != "max":
        tracer.fail(f"{what}: reduce_op is maximum (the only reduction it has), got {reduce_op!r}")
    out = _tile_arg(dst, "select_reduce", "dst")
    x = _tile_arg(on_true, "select_reduce", "on_true")
    p = _tile_arg(predicate, "select_reduce", "predicate")
    if p.dtype not in ("int8", "uint8", "int16", "uint16"):
        tracer.fail(f"{what}: predicate is an int8 / uint8 / int16 / uint16 tile, got {p.dtype}")
    if x.dtype in ("int32", "uint32"):
        tracer.fail(f"{what}: on_true of {x.dtype} (the SDK: any dtype but tfloat32, int32, uint32)")
    if isinstance(on_false, Tensor):
        f = _tile_arg(on_false, "select_reduce", "on_false")
        if f.nparts != x.nparts or f.elements_per_partition() != 1:
            tracer.fail(f"{what}: on_false is a number or a [{x.nparts}, 1] column, got {list(f.shape)}")
        nl._assign(out, nl.copy(nl._expand(f, out.shape), dtype=out.dtype))
    else:
        nl._memset(out, on_false)
    tensor_copy_predicated(dst=out, src=x, predicate=p, reverse_pred=reverse_pred)
    if cmd == "reset_reduce" and reduce_res is not None:
        r = _tile_arg(reduce_res, "select_reduce", "reduce_res")
        if r.nparts != x.nparts or r.elements_per_partition() != 1:
            tracer.fail(f"{what}: reduce_res is a [{x.nparts}, 1] column, got {list(r.shape)}")
        nl._assign(r, nl.max(out, list(range(1, len(out.shape))), dtype=r.dtype, keepdims=True))
    return out


_SCAN_START = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "max": float("-inf"), "min": float("inf")}


def tensor_scalar_cumulative(dst=None, src=None, op0=None, op1=None, imm0=None, imm1=None, reduce_cmd=None,
                             name=None, **kw):
    """dst[:, i] = reg = op1(op0(src[:, i], imm0), reg) along the free
    elements, reg starting at op1's identity (reduce_cmd reset_reduce) or
    imm1 (load_reduce) (SDK nki.isa.tensor_scalar_cumulative).  Lowered to
    a tensor_scalar and the ISA's tensor_tensor_scan, in fp32.  reduce_cmd
    reduce (a register left by an earlier instruction) is not supported."""
    what = "nisa.tensor_scalar_cumulative"
    from .isa import tensor_tensor_scan
    if kw:
        tracer.fail(f"{what}: unexpected argument(s) {', '.join(sorted(kw))}")
    cmd = getattr(reduce_cmd, "name", reduce_cmd) or "reset_reduce"
    acc = nl.op_name(op1) if op1 is not None else None
    if acc not in _SCAN_START:
        tracer.fail(f"{what}: op1 is add, subtract, multiply, maximum or minimum, got {op1!r}")
    if cmd == "reset_reduce":
        start = _SCAN_START[acc]
    elif cmd == "load_reduce":
        if imm1 is None:
            tracer.fail(f"{what} reduce_cmd=load_reduce: the start value is imm1")
        start = imm1
    else:
        tracer.fail(f"{what} reduce_cmd={cmd}: a register kept from an earlier instruction is not supported by "
                    "the simulator yet (reset_reduce and load_reduce are)")
    out = _tile_arg(dst, "tensor_scalar_cumulative", "dst")
    x = _tile_arg(src, "tensor_scalar_cumulative", "src")
    for t, role in ((x, "src"), (out, "dst")):
        if t.dtype in ("int32", "uint32", "tf32"):
            tracer.fail(f"{what}: {role} of {t.dtype} (the SDK: int32 / uint32 are not supported)")
    y = nl._tensor_scalar(x, imm0, nl.op_name(op0), "fp32") if op0 is not None else nl.copy(x, dtype="fp32")
    flat = (x.shape[0], x.elements_per_partition())
    y = y if len(y.shape) == 2 else y.reshape(flat)
    zeros = nl.zeros(flat, dtype=nl.float32, buffer=nl.sbuf)
    res = tensor_tensor_scan(data0=y, data1=zeros, initial=start, op0=acc, op1="add", dtype="fp32")
    nl._assign(out, nl.copy(res if res.shape == out.shape else res.reshape(out.shape), dtype=out.dtype))
    return out
