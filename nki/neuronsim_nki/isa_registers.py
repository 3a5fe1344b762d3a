"""nki.isa's registers whose values are known while tracing:
register_alloc / register_move / register_store (a register loaded from
device memory, register_load, would drive run-time control flow, which the
ISA does not have).  isa.py re-exports them."""
from __future__ import annotations

from . import language as nl
from .tensor import Tensor
from .tracer import fail

VirtualRegister = nl.VirtualRegister


def register_alloc(x=None):
    """A register holding x (0 if not given)."""
    v = nl._static_int(x if x is not None else 0)
    if v is None:
        fail(f"nisa.register_alloc({x!r}): an int")
    return VirtualRegister(v)


def register_move(dst, src):
    """dst = src (an int or another register)."""
    v = nl._static_int(src)
    if not isinstance(dst, VirtualRegister) or v is None:
        fail("nisa.register_move(dst, src): dst a register, src an int or register")
    dst.value = v
    return dst


def register_load(dst, src, **kw):
    fail("nisa.register_load: a register loaded from device memory drives run-time control flow, which "
         "the simulator's ISA does not have (registers set while tracing -- register_alloc / register_move "
         "-- are supported)")


def register_store(dst, src, **kw):
    """Writes a register's value into a [1, 1] int32 tile (a memset)."""
    v = nl._static_int(src)
    if v is None or not isinstance(dst, Tensor) or dst.space == "hbm":
        fail("nisa.register_store(dst, src): dst an on-chip tile, src a register or int")
    nl._memset(dst, v)
    return dst
