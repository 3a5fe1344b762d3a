"""nki.language's tensor creation: nl.ndarray / zeros / ones / full /
zeros_like / empty_like on HBM, SBUF and PSUM -- placed by the tracer
(tracer.Trace.allocate), by the kernel (address=), or by nki.compiler
direct allocation (compiler.py); arrays with block dimensions too large
for their memory block by block (tensor.BlockArray).  Re-exported by
language.py."""
from __future__ import annotations

import math
import operator

from .dtype_keys import SIZES, int_imm

from . import tracer
from .compiler import Direct
from .control import declaration_key
from .tensor import BlockArray, hbm_tensor, isa_dtype, new_tile, tile_bytes
from .tracer import fail
# (language.py defines these before it imports this module)
from .language import _ParDim, hbm, private_hbm, psum, sbuf, shared_hbm


def _space(buffer):
    b = getattr(buffer, "name", buffer)
    if b in (sbuf, "sbuf"):
        return "sbuf"
    if b in (psum, "psum"):
        return "psum"
    if b in (hbm, shared_hbm, private_hbm, "hbm"):
        return "hbm"
    fail(f"unknown buffer {buffer!r} (nl.sbuf, nl.psum, nl.shared_hbm)")


def ndarray(shape, dtype, buffer=sbuf, name="", **kw):
    dt = isa_dtype(dtype)
    space = _space(buffer)
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    pax = next((i for i, d in enumerate(shape) if isinstance(d, _ParDim)), 0)
    t = tracer.current()
    if space == "hbm":
        # under an SPMD grid every instance's n-th HBM ndarray is the same tensor
        key = t.hbm_calls
        t.hbm_calls += 1
        if key in t.shared:
            out = t.shared[key]
            if out.shape != shape or out.dtype != dt:
                fail(f"SPMD instances create different HBM tensors ({list(out.shape)} vs {list(shape)})")
            return out
        out = hbm_tensor(t.unique(name or "out"), shape, dt)
        out.hbm_key = key
        out.private = getattr(buffer, "name", buffer) == private_hbm
        out.hbm_buffer = {private_hbm: private_hbm, hbm: hbm}.get(getattr(buffer, "name", buffer), shared_hbm)
        t.tensors[out.name] = out
        t.shared[key] = out
        return out
    what = name or f"{space} tile {list(map(int, shape))}"
    if isinstance(buffer, Direct) and not t.force_auto:
        # nki.compiler direct allocation: every logical block where the
        # kernel's function puts it (compiler.py), one placement per
        # declaration inside a device loop (control.declaration_key)
        key = declaration_key()
        if key is not None:
            buffer = t.direct_decls.setdefault(key, buffer)
        if pax > 0:
            return BlockArray(space, tuple(int(d) for d in shape), dt, what, pax, place=buffer)
        return new_tile(space, shape, dt, what, 0, address=buffer.place((), *tile_bytes(shape, dt, 0), what),
                        direct=True)
    address = kw.pop("address", None)
    if address is not None:
        # the kernel places the tile itself (SDK nl.ndarray address=(start
        # partition, byte offset)): its bytes, shared with any other tile
        # placed over them (nkilib's SbufManager, attention's PSUM banks)
        try:
            part0, byte = (0, operator.index(address)) if not isinstance(address, (tuple, list)) else \
                (operator.index(address[0]), operator.index(address[1]))
        except (TypeError, IndexError):
            fail(f"{what}: address= is (start partition, byte offset), ints known while tracing; got {address!r}")
        if pax > 0 and not _fits_whole(space, shape, dt, pax):
            fail(f"{what}: address= on an array whose blocks do not fit {space.upper()} side by side")
        return new_tile(space, shape, dt, what, pax, address=(part0, byte))
    if pax > 0 and not _fits_whole(space, shape, dt, pax):
        return BlockArray(space, tuple(int(d) for d in shape), dt, what, pax)
    return new_tile(space, shape, dt, what, pax)


def _fits_whole(space, shape, dt, pax):
    """An array with block dimensions fits its memory laid out whole (the
    blocks side by side in each partition; PSUM: a bank per block); else it
    is allocated block by block (tensor.BlockArray)."""
    t = tracer.current()
    blocks, per_block = math.prod(int(d) for d in shape[:pax]), tile_bytes(shape, dt, pax)[1]
    if space == "psum":
        return blocks * -(-per_block // t.psum.bank) <= t.geometry[1] // t.psum.bank
    return blocks * per_block <= t.geometry[0]


def zeros(shape, dtype, buffer=sbuf, name="", **kw):
    return full(shape, 0.0, dtype, buffer, name)


def ones(shape, dtype, buffer=sbuf, name="", **kw):
    return full(shape, 1.0, dtype, buffer, name)


def full(shape, fill_value, dtype, buffer=sbuf, name="", **kw):
    t = ndarray(shape, dtype, buffer, name)
    if t.space == "hbm":
        fail("nl.full / nl.zeros on HBM: fill a tile and nl.store it")
    if isinstance(t, BlockArray):
        t.fill = fill_value               # each block filled when it is made
        return t
    _memset(t, fill_value)
    return t


def zeros_like(a, dtype=None, buffer=None, name="", **kw):
    return zeros(a.shape, dtype or a.dtype, buffer or a.buffer, name)


def empty_like(a, dtype=None, buffer=None, name="", **kw):
    return ndarray(a.shape, dtype or a.dtype, buffer or a.buffer, name)


def _memset(t, value):
    """t = value; an integer of an integer tile's range exactly (int_imm)"""
    v = int_imm(value, t.dtype) or repr(float(value))
    tracer.current().emit("vector", f"memset dst={t.ap()} value={v}", writes=[t.region()])


