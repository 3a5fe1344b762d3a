"""nki.isa's registers: register_alloc / register_move / register_load /
register_store.  A register holds a value known while tracing until
register_load reads one from device memory; from then on it is a run-time
register, the same sequencer register on every engine, which
nl.dynamic_range and `while reg:` loop on (runtime_loops.py).  isa.py
re-exports these."""
from __future__ import annotations

from . import language as nl
from . import tracer
from .runtime_loops import Reg, alloc_reg, load_reg, set_reg
from .tensor import Tensor
from .tracer import fail

VirtualRegister = nl.VirtualRegister


def register_alloc(x=None):
    """A register holding x (0 if not given), or the value of the 1-element
    tensor x read at run time."""
    if isinstance(x, Tensor):
        r = VirtualRegister(0)
        return register_load(r, x)
    v = nl._static_int(x if x is not None else 0)
    if v is None:
        fail(f"nisa.register_alloc({x!r}): an int, a register or a 1-element tensor")
    return VirtualRegister(v)


def _runtime(reg):
    """reg's run-time register number, made on first use."""
    if reg.reg is None:
        reg.reg = alloc_reg(tracer.current(), reg)
    return reg.reg


def register_move(dst, src):
    """dst = src (an int or another register)."""
    if not isinstance(dst, VirtualRegister):
        fail("nisa.register_move(dst, src): dst a register (nisa.register_alloc)")
    if isinstance(src, VirtualRegister) and src.reg is not None:
        set_reg(tracer.current(), _runtime(dst), Reg(src.reg))
        return dst
    v = nl._static_int(src)
    if v is None:
        fail("nisa.register_move(dst, src): src an int or a register")
    t = tracer.current()
    if dst.reg is not None or t.dyn_loops:
        # inside a run-time loop the move runs every iteration: a run-time register
        set_reg(t, _runtime(dst), v)
    dst.value = v
    return dst


def register_load(dst, src, **kw):
    """dst = the scalar in the 1-element tensor src (SBUF or HBM), read on
    the device: a run-time register from here on."""
    if not isinstance(dst, VirtualRegister):
        fail("nisa.register_load(dst, src): dst a register (nisa.register_alloc)")
    if not isinstance(src, Tensor):
        fail(f"nisa.register_load(dst, src): src a 1-element tensor, got {src!r}")
    load_reg(tracer.current(), _runtime(dst), src)
    return dst


def register_store(dst, src, **kw):
    """Writes a register's value into a 1-element int32 tensor: a memset of
    a value known while tracing, else SyncE's copy of the run-time register."""
    if not isinstance(dst, Tensor):
        fail("nisa.register_store(dst, src): dst a 1-element tensor")
    if isinstance(src, VirtualRegister) and src.reg is not None:
        from .runtime_loops import sync_scalar
        from .scalar import scalar_store
        return scalar_store(dst, sync_scalar(src))
    v = nl._static_int(src)
    if v is None or dst.space == "hbm":
        fail("nisa.register_store(dst, src): dst an on-chip tile, src a register or int")
    nl._memset(dst, v)
    return dst
