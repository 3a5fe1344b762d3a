"""Run-time loops: nl.dynamic_range with a bound held in a register, and
`while reg:` on a register loaded from device memory (nisa.register_load).

"The NKI compiler compiles such dynamic looping constructs to branching
instructions executed by engine sequencers" (SDK nki.isa.register_alloc).
Here the body is traced once and every engine runs the same skeleton:

    (drain)  fence          <- the loop's top: every engine meets here
             branch to=exit unless the condition holds
             ... body ...
             (counter += step)
    (drain)  branch to=top
    exit:

A drain is SyncE waiting for the DMAs of the instructions before it, so at
the fence nothing is in flight; the fence zeroes the semaphores the program
counts with, so the body's semaphore counts hold in every iteration and the
code after the loop starts counting afresh (tracer.Trace.program cuts the
instructions into epochs at these points).  The iterations do not overlap:
what the body's last instructions do is done before the next iteration
starts.

Registers: a register the loop tests is held in the same sequencer register
on every engine ("Each engine sequencer (Tensor/Scalar/Vector/GpSimd/Sync
Engine) within a NeuronCore maintains its own set of physical registers",
same page), so nisa.register_load / register_move on a run-time register
are traced on every engine.  The loop index of nl.dynamic_range is an
NkiScalar (scalar.py) usable as scalar_offset= and in arithmetic.

Not supported (refused by name): a run-time register as a condition other
than `while reg:` (an `if`), breaking out of a run-time loop, collectives
inside one (nisa.core_barrier and nisa.sendrecv are: lnc.loop_closes), spilling
SBUF or PSUM inside one, and timing-only runs of a kernel with one (the
branch depends on data that mode does not compute)."""
from __future__ import annotations

import linecache
import re
import sys
import weakref

from neuronsim import ENGINES

from . import tracer
from .tracer import fail

from .scalar import INT32


def _region(engine, reg):
    """Register reg of `engine`'s sequencer as a region."""
    from .scalar import _region as reg_region
    return reg_region(reg, engine)


def alloc_reg(t, owner):
    """A register number free on every engine, held until `owner` is dropped."""
    from .scalar import _alloc
    r = _alloc(t)
    weakref.finalize(owner, t.scalar_regs.discard, r)
    return r


def emit_all(t, text, reads_of=lambda e: (), writes_of=lambda e: ()):
    """The register instruction `text` traced on every engine."""
    for e in ENGINES:
        t.emit(e, text, reads=list(reads_of(e)), writes=list(writes_of(e)))


def set_reg(t, reg, value):
    """reg = value on every engine: an int, or another run-time register (Reg)."""
    if not isinstance(value, Reg):
        if not INT32[0] <= value <= INT32[1]:
            fail(f"a register holds a 32-bit integer, got {value}")
        emit_all(t, f"reg_alu reg={reg} op=multiply a={reg} imm=0", lambda e: [_region(e, reg)],
                 lambda e: [_region(e, reg)])
        if value:
            emit_all(t, f"reg_alu reg={reg} op=add a={reg} imm={value}", lambda e: [_region(e, reg)],
                     lambda e: [_region(e, reg)])
    else:
        emit_all(t, f"reg_alu reg={reg} op=add a={value} imm=0", lambda e: [_region(e, value)],
                 lambda e: [_region(e, reg)])


def load_reg(t, reg, src):
    """reg = the int32 in tile src (1 element; SBUF, or HBM through SBUF) on every engine."""
    from . import language as nl
    from .scalar import _one_int32
    from .tensor import new_tile
    _one_int32(src, "nisa.register_load")
    if src.space == "hbm":
        tile = new_tile("sbuf", (1, 1), src.dtype, "register_load staging")
        nl._dma(tile, src.reshape((1, 1)) if len(src.shape) != 2 else src)
        src = tile
    elif len(src.shape) != 2:
        src = src.reshape((1, 1))
    emit_all(t, f"reg_load reg={reg} src={src.ap()}", lambda e: [src.region()], lambda e: [_region(e, reg)])


class Loop:
    """One run-time loop being traced: its exit condition (branch fields),
    the source line, where its body starts, and the allocations its body
    uses (kept until it ends)."""

    def __init__(self, t, exit_when, site, tested=None):
        self.exit_when, self.line = exit_when, f"{site[0].rsplit('/', 1)[-1]}:{site[1]}"
        self.tested = tested                 # the register `while` tests (its number stays reserved)
        self.keep = {}                     # allocation id -> allocation made before the loop, used in it
        self.first_alloc = t.n_allocs
        from .lnc import loop_opens
        loop_opens(t, self)
        t.mark("fence", self)
        t.mark("check", self)
        self.start = len(t.instrs)
        t.dyn_loops.append(self)

    def close(self, t):
        """The body is traced: branch back to the top, the exit after."""
        from .lnc import loop_closes
        loop_closes(t, self)
        t.mark("back", self)
        if t.dyn_loops and t.dyn_loops[-1] is self:
            t.dyn_loops.pop()
        if t.recording:
            # a tile made before the loop and used in its body (self.keep,
            # tracer.access) is used in every iteration: alive until the loop ends
            now = len(t.instrs)
            for aid in self.keep:
                if t.uses.get(aid, -1) < now:
                    t.uses[aid] = now
                    t.use_seq.setdefault(aid, []).append(now)
        self.keep.clear()


def _site():
    """(file, line, frame) of the kernel code that called into the package."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(tracer._PACKAGE_DIR):
        f = f.f_back
    return (f.f_code.co_filename, f.f_lineno, f) if f is not None else ("<kernel>", 0, None)


class DynamicRange:
    """nl.dynamic_range(start, stop, step) with a bound in a run-time
    register: a device loop whose index is an NkiScalar."""

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step

    def __iter__(self):
        from .scalar import NkiScalar
        t = tracer.current()
        site = _site()
        index = NkiScalar.__new__(NkiScalar)
        index.trace, index.dtype = t, "int32"
        index.reg = alloc_reg(t, index)
        set_reg(t, index.reg, _operand(self.start))
        stop = _operand(self.stop)
        if not isinstance(stop, Reg):
            exit_when = f"a={index.reg} cond=is_ge imm={stop}"
        else:
            bound = _Held()
            bound.reg = alloc_reg(t, bound)
            set_reg(t, bound.reg, stop)      # Python's range reads its bound once
            exit_when = f"a={index.reg} cond=is_ge b={bound.reg}"
        loop = Loop(t, exit_when, site)
        try:
            yield index
        except GeneratorExit:
            return              # left early: check_closed reports it (or the exception that left shows)
        emit_all(t, f"reg_alu reg={index.reg} op=add a={index.reg} imm={self.step}",
                 lambda e: [_region(e, index.reg)], lambda e: [_region(e, index.reg)])
        loop.close(t)
        del loop


class _Held:
    """Holds a register number for as long as the loop needs it."""


class Reg(int):
    """A run-time register's number (an int that is not a value)."""


def _operand(v):
    """An int, or the register number (Reg) of a run-time register."""
    from .control import VirtualRegister
    if isinstance(v, VirtualRegister):
        return v.value if v.reg is None else Reg(v.reg)
    if isinstance(v, bool) or not isinstance(v, int):
        fail(f"nl.dynamic_range bounds: ints or registers (nisa.register_alloc), got {v!r}")
    return v


def dynamic_range(start, stop=None, step=1):
    """nl.dynamic_range: "The loop runs on device with dynamic bounds"; step
    "must be a compile-time positive integer".  Bounds known while tracing
    run as a static range (the same iterations); a bound in a register
    loaded from device memory makes a run-time loop."""
    from .control import VirtualRegister
    if stop is None:
        start, stop = 0, start
    if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
        fail(f"nl.dynamic_range step={step!r}: a positive int known while tracing")
    if not any(isinstance(v, VirtualRegister) and v.reg is not None for v in (start, stop)):
        return range(_operand(start), _operand(stop), step)
    return DynamicRange(start, stop, step)


def while_test(reg):
    """`while reg:` on a run-time register: the first test opens a device
    loop (true: trace the body), the test at the end of the body closes it
    (false: the traced body is the loop's)."""
    t = tracer.current()
    file, line, frame = _site()
    key = (id(frame), line)
    open_loops = t.while_loops
    loop = open_loops.pop(key, None)
    if loop is not None:
        if reg is not loop.tested and reg.reg != loop.tested.reg:
            # the body rebound the name to another register: the loop's test reads the first
            set_reg(t, loop.tested.reg, Reg(reg.reg))
        loop.close(t)
        return False
    text = linecache.getline(file, line).strip()
    if not _WHILE_REG.match(text):
        fail(f"{file.rsplit('/', 1)[-1]}:{line}: a register loaded from device memory tested as a condition "
             f"({text!r}): only `while reg:` loops are supported (the simulator's device branches are loops)")
    open_loops[key] = Loop(t, f"a={reg.reg} cond=is_equal imm=0", (file, line), tested=reg)
    return True


_WHILE_REG = re.compile(r"while\s+[A-Za-z_][\w.]*\s*:")


def run_while(reg, body_fun):
    """nl.while_loop(reg, body_fun) on a run-time register: the device loop
    runs body_fun while reg is non-zero; what the body returns (an int or a
    register) is the next condition, moved into reg."""
    t = tracer.current()
    file, line, _ = _site()
    loop = Loop(t, f"a={reg.reg} cond=is_equal imm=0", (file, line))
    nxt = body_fun(reg)
    cond = _operand(nxt)
    if cond != reg.reg or not isinstance(cond, Reg):
        set_reg(t, reg.reg, cond)
    loop.close(t)
    return reg


def sync_scalar(reg):
    """A loaded register as an NkiScalar: SyncE's copy of it (scalar_offset=, register_store)."""
    from .scalar import NkiScalar
    s = NkiScalar.__new__(NkiScalar)
    s.trace, s.reg, s.dtype = tracer.current(), reg.reg, "int32"
    s.held = reg                          # the register's number stays reserved while this is used
    return s


def check_closed(t):
    """At the end of a trace: a run-time loop still open was left by break / return."""
    if t.dyn_loops:
        fail(f"{t.dyn_loops[-1].line}: a run-time loop was left before its condition was tested again (break, "
             "return): the device loop runs until its register says stop")
