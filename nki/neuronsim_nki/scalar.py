"""nki.isa.scalar_load / scalar_store and NkiScalar: an integer computed on
the device at run time, held in a register of the sync engine's sequencer.

scalar_load reads a 1x1 int32 tile into a register (reg_load); arithmetic on
scalars is traced into reg_alu instructions (32-bit, wrapping: "100000 *
100000 yields 1410065408"); scalar_store writes a register back to a 1x1
tile (reg_store); a scalar given as scalar_offset= of an HBM access pattern
moves a DMA's offset at run time (dma_copy dyn=).  Registers are freed when
their scalar is no longer referenced.

Not supported (refused by name): int64 scalars, comparisons used as values,
a scalar as a loop bound (a register loaded with nisa.register_load is one:
runtime_loops.py), a scalar used where a value known while tracing is
needed (an index, a shape), a scalar offset on an on-chip operand.

Source: SDK nki/deep-dives/nki-scalar.rst, nki.isa.scalar_load /
scalar_store / NkiScalar reference pages (Neuron SDK 2.34 docs)."""
from __future__ import annotations

import weakref

from . import tracer
from .tensor import Tensor, new_tile
from .tracer import fail

ENGINE = "sync"                  # scalars live in SyncE's sequencer: dynamic DMAs start there
NREGS = 64                       # HW: each sequencer has 64 x 32-bit registers
INT32 = (-(1 << 31), (1 << 31) - 1)


def _region(reg, engine=ENGINE):
    """A register (of `engine`'s sequencer) as a region, so instructions
    order by what they read and write."""
    return ("reg", engine, 0, 1, 4 * reg, 4 * reg + 4)


def _alloc(t):
    used = t.scalar_regs
    for r in range(NREGS):
        if r not in used:
            used.add(r)
            return r
    fail(f"more than {NREGS} NkiScalars alive at once: the sync engine's sequencer has {NREGS} registers")


class NkiScalar:
    """One int32 computed on the device; usable in +, -, * (with ints or
    other scalars), as scalar_offset= of an HBM access pattern, and in
    nisa.scalar_store."""

    def __init__(self, t, reg):
        self.trace, self.reg, self.dtype = t, reg, "int32"
        weakref.finalize(self, t.scalar_regs.discard, reg)

    def __repr__(self):
        return f"NkiScalar(reg={self.reg})"

    def _alu(self, op, other, reverse=False):
        t = tracer.current()
        if t is not self.trace:
            fail("an NkiScalar belongs to the kernel trace that loaded it")
        out = NkiScalar(t, _alloc(t))
        if isinstance(other, NkiScalar):
            a, b = (other, self) if reverse else (self, other)
            t.emit(ENGINE, f"reg_alu reg={out.reg} op={op} a={a.reg} b={b.reg}",
                   reads=[_region(a.reg), _region(b.reg)], writes=[_region(out.reg)])
            return out
        if isinstance(other, bool) or not isinstance(other, int):
            fail(f"NkiScalar {op} {other!r}: an int or another NkiScalar")
        if not INT32[0] <= other <= INT32[1]:
            fail(f"NkiScalar {op} {other}: the immediate must fit in 32 bits")
        t.emit(ENGINE, f"reg_alu reg={out.reg} op={op} a={self.reg} imm={other}",
               reads=[_region(self.reg)], writes=[_region(out.reg)])
        if reverse and op == "subtract":          # k - s = -(s - k)
            return out * -1
        return out

    def __add__(self, o):
        return self._alu("add", o)

    __radd__ = __add__

    def __sub__(self, o):
        return self._alu("subtract", o)

    def __rsub__(self, o):
        return self._alu("subtract", o, reverse=True)

    def __mul__(self, o):
        return self._alu("multiply", o)

    __rmul__ = __mul__

    def __neg__(self):
        return self * -1

    def _compare(self, o):
        fail("comparing NkiScalars: NKI traces the comparison but its result cannot be used as a value; "
             "compare values known while tracing, or loop on a loaded register (`while reg:`)")

    __lt__ = __le__ = __gt__ = __ge__ = _compare

    def __eq__(self, o):
        return self._compare(o)

    def __ne__(self, o):
        return self._compare(o)

    __hash__ = object.__hash__

    def _static(self, *a):
        fail("an NkiScalar's value is computed on the device at run time: it cannot be used as an index, a "
             "shape, a condition or a loop bound here; use it as scalar_offset= of an access pattern, in "
             "+, -, * or in nisa.scalar_store")

    __index__ = __int__ = __bool__ = __float__ = _static


def _one_int32(x, what, unsigned_ok=False):
    if not isinstance(x, Tensor) or x.space not in ("sbuf", "hbm"):
        fail(f"{what}: a 1x1 tensor in SBUF or HBM, got {x!r}")
    n = 1
    for d in x.shape:
        n *= d
    if n != 1:
        fail(f"{what}: a 1x1 tensor, got shape {list(x.shape)}")
    if x.dtype == "int64":
        fail(f"{what}: int64 scalars are not supported by the simulator yet (int32 are)")
    if x.dtype != "int32" and not (unsigned_ok and x.dtype == "uint32"):
        fail(f"{what}: nl.int32 (unsigned dtypes are not accepted: use the signed dtype), got {x.dtype}")


def scalar_load(src, unsigned_ok=False):
    """The int32 in a 1x1 tile (SBUF, or HBM through a DMA) as an NkiScalar.
    unsigned_ok: a uint32 is taken too (a tensor given as scalar_offset=; its
    bits in the register, an offset past 2^31 then negative and caught by the
    DMA's bounds check, never wrapped silently)."""
    from . import language as nl
    t = tracer.current()
    _one_int32(src, "nisa.scalar_load" if not unsigned_ok else "tensor.ap(scalar_offset=)", unsigned_ok)
    if src.space == "hbm":
        tile = new_tile("sbuf", (1, 1), src.dtype, "scalar_load staging")
        nl._dma(tile, src.reshape((1, 1)) if len(src.shape) != 2 else src)
        src = tile
    out = NkiScalar(t, _alloc(t))
    t.emit(ENGINE, f"reg_load reg={out.reg} src={src.ap()}", reads=[src.region()], writes=[_region(out.reg)])
    return out


def scalar_store(dst, value):
    """Writes an NkiScalar into a 1x1 int32 tile (SBUF, or HBM through a DMA)."""
    from . import language as nl
    t = tracer.current()
    if not isinstance(value, NkiScalar):
        fail("nisa.scalar_store(dst, value): value must be an NkiScalar (a Python int stores nothing on the "
             "device: use nisa.memset for a constant)")
    _one_int32(dst, "nisa.scalar_store")
    tile = dst if dst.space == "sbuf" else new_tile("sbuf", (1, 1), "int32", "scalar_store staging")
    t.emit(ENGINE, f"reg_store dst={tile.ap()} reg={value.reg}", reads=[_region(value.reg)],
           writes=[tile.region()])
    if tile is not dst:
        nl._dma(dst.reshape((1, 1)) if len(dst.shape) != 2 else dst, tile)
    return dst


def dyn_dma(dst, src, dst_region, src_region, oob_skip=False):
    """For a DMA with a scalar offset on one side: (its dyn= field, what it
    reads, what it writes) -- the scalar's register, and the whole tensor on
    the moved side, whose offset is known only at run time; oob_skip drops
    a transfer the offset moves out of the tensor.  None without."""
    dd, sd = getattr(dst, "dyn", None), getattr(src, "dyn", None)
    if dd is None and sd is None:
        return None
    if dd is not None and sd is not None:
        fail("a DMA with a scalar_offset on both sides is not supported by the simulator yet")
    view, (scalar, stride), side = (dst, dd, 0) if dd is not None else (src, sd, 1)
    from .dtype_keys import SIZES as DTYPE_SIZES
    step = stride * DTYPE_SIZES[view.dtype]
    if not INT32[0] <= step <= INT32[1]:
        fail(f"scalar_offset: a step of {step} bytes does not fit the DMA's 32-bit offset field")
    whole = tracer.current().tensors.get(view.name, view).region()
    skip = ",1" if oob_skip else ""
    return (f"dyn={scalar.reg},{step},{side}{skip}", [_region(scalar.reg), whole if side else src_region],
            [dst_region if side else whole])
