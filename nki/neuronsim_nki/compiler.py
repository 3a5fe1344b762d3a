"""nki.compiler (neuronxcc.nki.compiler): direct allocation and the kernel
decorators that steer the NKI compiler.

Direct allocation (SDK "NKI Direct Allocation Developer Guide" and the
nki.compiler.sbuf / .psum API pages): an on-chip tensor declared with
buffer=ncc.sbuf.alloc(func) / ncc.sbuf.mod_alloc(...) (PSUM: ncc.psum.*)
has its logical blocks -- the dimensions before nl.par_dim -- placed where
the kernel says instead of where the compiler's allocator would put them:
func(block index, partitions, bytes per partition) gives (start partition,
byte address), for PSUM (bank, start partition, byte address in the bank).
Logical blocks that land on the same physical tile share its bytes, which
is how a kernel writes double buffering itself.  The compiler refuses a
kernel in which two tiles over the same bytes must be alive at once
("lifetime conflict"); so does the tracer (Trace.check_lifetimes), which
would otherwise give the silent overwrite the hardware would.

One difference, on purpose: the SDK refuses a kernel that mixes direct and
automatic allocation (or calls an API that makes implicit tiles, such as a
TensorE transpose's identity).  Here tiles the kernel did not place are put
around the ones it did, as with nl.ndarray(address=), so such a kernel runs.
"""
from __future__ import annotations

import math
import operator

from . import tracer
from .tracer import fail

# SDK sbuf.alloc: the start partition a tile of n partitions may take
# (64 < n: 0; 32 < n <= 64: 0 or 64; n <= 32: a quadrant)
_START_PARTITIONS = ((64, (0,)), (32, (0, 64)), (0, (0, 32, 64, 96)))


class Direct:
    """buffer= of a directly allocated tensor: `name` is its memory (what
    nl.ndarray reads from any buffer), `func` the kernel's placement."""

    def __init__(self, space, func, what):
        if not callable(func):
            fail(f"ncc.{space}.alloc(func): func must be callable (block index, partitions, bytes per "
                 f"partition) -> location; got {func!r}")
        self.name, self.func, self.what = space, func, what

    def __repr__(self):
        return f"<nki.compiler {self.what}>"

    def place(self, index, nparts, fbytes, what):
        """(start partition, byte offset in the memory's partition) of the
        logical block `index` (a tuple, () for a tensor without block
        dimensions) of `nparts` partitions and `fbytes` bytes each."""
        t = tracer.current()
        # by keyword, as the SDK calls it (allocated_attention.py binds its
        # bank map first with functools.partial)
        loc = self.func(idx=tuple(index), pdim_size=nparts, fdim_size=fbytes)
        n = 2 if self.name == "sbuf" else 3
        try:
            loc = tuple(operator.index(v) for v in loc)
        except TypeError:
            loc = None
        if loc is None or len(loc) != n:
            fail(f"{what}: the {self.what} function must return {n} integers "
                 f"({'start partition, byte address' if n == 2 else 'bank, start partition, byte address'})")
        if self.name == "psum":
            bank, part0, byte = loc
            nbanks, size = t.geometry[1] // t.psum.bank, t.psum.bank
            if not 0 <= bank < nbanks:
                fail(f"{what}: PSUM bank {bank} is not one of the {nbanks} banks")
            if byte < 0 or byte + fbytes > size:
                fail(f"{what}: bytes [{byte}, {byte + fbytes}) per partition leave its "
                     f"PSUM bank ({size} bytes): a PSUM tile does not span banks")
            byte += bank * size
        else:
            part0, byte = loc
        allowed = next(starts for above, starts in _START_PARTITIONS if nparts > above)
        if part0 not in allowed:
            fail(f"{what}: start partition {part0} for a tile of {nparts} partitions; "
                 f"it must be one of {', '.join(map(str, allowed))}")
        return part0, byte


def _modulo(base, tiles, scale, index, what):
    """SDK modulo_allocate_func (test_sbuf_modulo_alloc.py), to the letter:
    the block index taken modulo `tiles` axis by axis (() means one tile;
    zip pairs the shorter of the two, as kernels rely on when they give a
    tile count for a tensor without block dimensions), linearized over
    `tiles`, times scale, plus base."""
    tiles = tuple(tiles) if tiles else (1,) * len(index)
    if any(not isinstance(n, int) or n < 1 for n in tiles):
        fail(f"{what}: tile counts {tiles!r} must be positive integers")
    flat = 0
    for d, (i, n) in enumerate(zip(index, tiles)):
        flat += (i % n) * math.prod(tiles[d + 1:])
    return base + flat * scale


class _Memory:
    """ncc.sbuf / ncc.psum: the memory's direct-allocation calls; as a
    buffer= itself it is automatic allocation (SDK: nki.compiler.sbuf is
    an alias of nki.compiler.sbuf.auto_alloc())."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<nki.compiler.{self.name}>"

    def auto_alloc(self):
        """The compiler allocates the tensor (the same as buffer=nl.sbuf / nl.psum)."""
        return self.name

    def alloc(self, func):
        """Each logical block where func(block index, partitions, bytes per
        partition) says: (start partition, byte address) for SBUF, (bank,
        start partition, byte address) for PSUM."""
        return Direct(self.name, func, f"{self.name}.alloc")

    def mod_alloc(self, *, base_addr=0, base_partition=0, num_par_tiles=(), num_free_tiles=(), base_bank=None,
                  num_bank_tiles=()):
        """Modulo allocation (SDK test_sbuf_modulo_alloc.py /
        test_psum_modulo_alloc.py): block i goes to physical tile i modulo
        num_*_tiles; SBUF tiles sit side by side from base_addr, PSUM tiles
        one bank each from base_bank."""
        what = f"{self.name}.mod_alloc"
        if self.name == "sbuf" and (base_bank is not None or num_bank_tiles):
            fail("ncc.sbuf.mod_alloc: base_bank / num_bank_tiles are PSUM's (ncc.psum.mod_alloc)")
        if self.name == "psum" and base_bank is None:
            fail("ncc.psum.mod_alloc: base_bank is required")

        def func(idx, pdim_size, fdim_size):
            part = _modulo(base_partition, num_par_tiles, pdim_size, idx, what)
            byte = _modulo(base_addr, num_free_tiles, fdim_size, idx, what)
            if self.name == "sbuf":
                return part, byte
            return _modulo(base_bank, num_bank_tiles, 1, idx, what), part, byte
        return Direct(self.name, func, what)


sbuf = _Memory("sbuf")
psum = _Memory("psum")


def _decorator(mark):
    """A kernel decorator usable bare or called (@d, @d(...)), above or
    below @nki.jit: it marks the kernel's function with `mark` (None:
    nothing to record)."""
    def decorate(func=None, **_options):
        def apply(f):
            target = getattr(f, "func", f)       # a Kernel (above @nki.jit), else the function
            if mark is not None:
                setattr(target, mark, True)
            return f
        return apply if func is None else apply(func)
    return decorate


# The compiler's middle-end passes (loop fusion, layout changes) are not
# what the tracer does to a kernel, which it traces as written; marking a
# kernel so changes nothing here.
skip_middle_end_transformations = _decorator(None)
# The stack allocator is one more automatic placement policy; the tracer
# places automatically allocated tiles by their live ranges either way.
enable_stack_allocator = _decorator(None)
# Direct allocations in the kernel are ignored: every tile placed by the tracer.
force_auto_alloc = _decorator("_nki_force_auto_alloc")


class multi_buffer:
    """ncc.multi_buffer(factor): the directives= of a loop asking for
    `factor` buffers of its tiles.  The tracer gives a loop's tiles as many
    buffers as their live ranges let fit, so the factor is a hint it does
    not need."""

    def __init__(self, factor=2):
        if not isinstance(factor, int) or factor < 1:
            fail(f"ncc.multi_buffer(factor): a positive integer; got {factor!r}")
        self.factor = factor


class no_reorder:
    """ncc.no_reorder(): the directives= of a loop whose operations keep
    their program order -- no instruction of it is moved past another on
    its engine (the tracer's scheduler, schedule.py, otherwise lets VectorE
    and ScalarE run independent work early)."""
    keeps_order = True


def is_forced_auto(func):
    return bool(getattr(func, "_nki_force_auto_alloc", False))


__all__ = ["sbuf", "psum", "skip_middle_end_transformations", "enable_stack_allocator", "force_auto_alloc",
           "multi_buffer", "no_reorder"]
