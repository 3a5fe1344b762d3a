"""nl's memory operations: DMA between HBM and SBUF (nl.load, nl.store,
nl.load_transpose2d) and the masks that cut a partial last tile; language.py
re-exports them."""
from __future__ import annotations

import math

import numpy as np

from neuronsim import FLOAT_DTYPES

from . import language as nl
from . import tracer
from .scalar import ENGINE as SCALAR_ENGINE, dyn_dma
from .indexing import Mask
from .masking import MaskedResult
from .tensor import Tensor, isa_dtype, new_tile
from .tracer import fail


def _dma(dst, src, engine="sync", mode="direct", oob_skip=False):
    """One DMA; oob_skip: a run-time offset that moves it out of its tensor
    drops it (nisa oob_mode.skip)."""
    t = tracer.current()
    # (a view indexed down to one element, t[0, 0], has shape (): one element)
    if dst.shape != src.shape and math.prod(dst.shape) != math.prod(src.shape):
        fail(f"DMA shapes differ: {list(src.shape)} -> {list(dst.shape)}")
    floats = tuple(d for d in FLOAT_DTYPES if d != "tf32")
    if dst.dtype != src.dtype and mode != "direct" and not (dst.dtype in floats and src.dtype in floats):
        fail(f"a {mode} DMA converts between float types only: {src.dtype} -> {dst.dtype} (cast with nl.copy "
             "on chip)")
    if "psum" in (dst.space, src.space):
        fail("DMA to or from PSUM is not allowed: copy the tile to SBUF first")
    # operands first: placing them may bring a spilled tile back (a DMA of
    # its own); this descriptor's index is taken when it is added
    dst_ap, src_ap = dst.ap(), src.ap()
    src_region, dst_region = src.region(), dst.region()
    dyn = dyn_dma(dst, src, dst_region, src_region, oob_skip)
    idx = t.add_dma(dst_ap, src_ap, mode)
    if dyn is not None:
        # an offset computed on the device: the DMA starts from the engine
        # holding the scalar
        if mode != "direct":
            fail("scalar_offset on a transposing or indirect DMA is not supported by the simulator yet")
        text, reads, writes = dyn
        t.emit(SCALAR_ENGINE, f"dma_copy desc=d{idx} {text}", reads=reads, writes=writes, dma=idx)
        return
    # an add reads its destination back (read-modify-write)
    reads = [src_region, dst_region] if mode == "add" else [src_region]
    ins = t.emit(engine, f"dma_copy desc=d{idx}", reads=reads, writes=[dst_region], dma=idx)
    if mode == "direct" and dst.space == "sbuf" and src.space == "hbm" and dst.dtype == src.dtype and \
            not t.recording:
        t.note_load(dst.alloc, dst_ap, dst_region, src_ap, src_region, ins.index)


STORE_ENGINE = "gpsimd"


def masked_box(view, mask, what):
    """(box, full): per axis of an access through `view`, the (lo, hi) the
    DMA moves -- all of it, or what the mask keeps (Mask.box) -- and the
    shape the kernel asked for.  An index past an axis end is an error
    unless the mask cuts it off."""
    full = [view.wanted.get(a, n) for a, n in enumerate(view.shape)]
    if isinstance(mask, (bool, np.bool_)):
        # a condition on loop indices, which are ints while tracing (the
        # compiler sees `(2 * i + g) * 128 < n` as an expression): true keeps
        # the whole access, false drops it
        if not mask:
            return [(0, 0) for _ in view.shape], full
        mask = None
    if mask is None:
        if view.overrun:
            fail(view.overrun)
        return [(0, n) for n in view.shape], full
    if not isinstance(mask, Mask):
        fail(f"{what}: mask= takes an index comparison such as (i * 128 + ix < n)")
    box = mask.box(full)
    for (lo, hi), n in zip(box, view.shape):
        if hi > n:
            fail(view.overrun)
    return box, full


def _cut(view, box):
    """view restricted to box (no copy): a view of its own, which no longer
    runs past the tensor's end."""
    if not view.overrun and all(lo == 0 and hi == n for (lo, hi), n in zip(box, view.shape)):
        return view
    return view[tuple(slice(lo, hi) for lo, hi in box)]


def _empty(box):
    return any(hi <= lo for lo, hi in box)


def load(src, dtype=None, mask=None, **kw):
    """HBM -> a new SBUF tile of the shape asked for (partition dimension
    first).  Under a mask only the positions it keeps are moved (on any
    axis); an index past the tensor's end must be cut off by the mask."""
    if not isinstance(src, Tensor) or src.space != "hbm":
        fail("nl.load reads an HBM tensor (a kernel argument or nl.shared_hbm array)")
    if len(src.shape) == 1:       # a vector loads as a column: one element per partition
        col = Tensor("hbm", src.dtype, (src.shape[0], 1), (src.strides[0], 1), src.offset, src.name)
        col.dyn, col.wanted, col.overrun = getattr(src, "dyn", None), dict(src.wanted), src.overrun
        src = col
    elif not src.shape:           # a single element: a [1, 1] tile
        src = Tensor("hbm", src.dtype, (1, 1), (1, 1), src.offset, src.name)
    if src.gather is not None:
        tile = _indirect(src, None, mask, "nl.load")
        return tile if dtype is None or isa_dtype(dtype) == src.dtype else nl.copy(tile, dtype=dtype)
    box, full = masked_box(src, mask, "nl.load")
    tile = new_tile("sbuf", full, src.dtype, f"nl.load {list(src.shape)}")
    if _empty(box):
        return tile
    whole = all(lo == 0 and hi == n for (lo, hi), n in zip(box, full))
    dyn = getattr(src, "dyn", None)
    part = _cut(src, box)
    part.dyn = dyn
    _dma(_cut(tile, box), part)
    pristine = whole and dyn is None
    tile.loaded_by = tracer.current().instrs[-1] if pristine else None
    tile.loaded_from = src if pristine else None
    if dtype is not None and isa_dtype(dtype) != src.dtype:
        return nl.copy(tile, dtype=dtype)
    return tile


def _indirect(table, other, mask, what, mode="gather", engine="sync", oob_skip=False):
    """An indirect DMA over an HBM view indexed by a tile (Tensor._gathered,
    .ap(vector_offset=)), one of the ISA's: gather (dst row p = table row
    index[p]) into `other`, a tile -- a new one when None --, gather_add
    (+= instead), scatter (`other`'s row p to table row index[p]) or
    scatter_add.  A mask cuts the rows (and free positions) moved.
    oob_skip (NKI oob_mode.skip): a row whose index leaves the table is not
    moved, where it is otherwise a fault."""
    scatter = mode.startswith("scatter")
    idx = nl._operand(table.gather)
    P = idx.shape[0]
    shape = (P, *table.shape[1:])
    if other is None:
        other = new_tile("sbuf", shape, table.dtype, f"{what} gather {list(shape)}")
    if other.shape[0] != P or other.elements_per_partition() != table.elements_per_partition():
        fail(f"{what}: {'a scatter from' if scatter else 'a gather into'} {list(other.shape)} of rows "
             f"{list(shape)} (one per index)")
    if other.space == "psum":
        fail(f"{what}: DMA to or from PSUM is not allowed: copy the tile to SBUF first")
    box = [(0, n) for n in shape]
    if mask is not None:
        box = mask.box(list(shape)) if isinstance(mask, Mask) else \
            (box if mask else [(0, 0)] * len(shape))
    if _empty(box):
        return other
    rows, free = box[0], box[1:]
    whole_free = all(lo == 0 and hi == n for (lo, hi), n in zip(free, shape[1:]))
    part = other[rows[0]:rows[1]] if whole_free else _cut(other if tuple(other.shape) == shape else
                                                           other.reshape(shape), box)
    tab = table if whole_free else table[(slice(None),) + tuple(slice(lo, hi) for lo, hi in free)]
    index = idx[rows[0]:rows[1]]
    t = tracer.current()
    # the adds read their destination back
    table_ap, table_region, rows_ap, rows_region = tab.ap(), tab.region(), part.ap(), part.region()
    indexed = f"{table_ap} index={index.ap()}" + (" oob=skip" if oob_skip else "")
    index_region = index.region()
    if scatter:
        n = t.add_dma(indexed, rows_ap, mode)
        reads = [rows_region, index_region] + ([table_region] if mode == "scatter_add" else [])
        t.emit(engine, f"dma_copy desc=d{n}", reads=reads, writes=[table_region], dma=n)
    else:
        n = t.add_dma(rows_ap, indexed, mode)
        reads = [table_region, index_region] + ([rows_region] if mode == "gather_add" else [])
        t.emit(engine, f"dma_copy desc=d{n}", reads=reads, writes=[rows_region], dma=n)
    return other


def load_transpose2d(src, dtype=None, mask=None, **kw):
    """HBM [A, B] -> an SBUF tile [B, A] (B <= 128): the DMA walks the source
    by columns, so it moves elements one descriptor each -- slow, as a
    transposing DMA is on the hardware."""
    if not isinstance(src, Tensor) or src.space != "hbm" or len(src.shape) != 2:
        fail("nl.load_transpose2d reads a 2-D HBM tensor")
    if mask is not None:
        fail("nl.load_transpose2d with a mask is not supported yet")
    A, B = src.shape
    view = Tensor("hbm", src.dtype, (B, A), (src.strides[1], src.strides[0]), src.offset, src.name)
    tile = new_tile("sbuf", (B, A), src.dtype, f"nl.load_transpose2d {list(src.shape)}")
    _dma(tile, view)
    if dtype is not None and isa_dtype(dtype) != src.dtype:
        return nl.copy(tile, dtype=dtype)
    return tile


def store(dst, value, mask=None, **kw):
    """value -> HBM; under a mask only the positions it keeps (any axis)."""
    if not isinstance(dst, Tensor) or dst.space != "hbm":
        fail("nl.store writes an HBM tensor")
    if isinstance(value, MaskedResult):
        value = nl._operand(value)          # a result computed under mask=
    if dst.gather is not None:
        # rows addressed by a tile of row numbers: a scatter DMA
        if not isinstance(value, Tensor):
            fail("nl.store: value= is a tile")
        value = nl._operand(value)
        value = nl.copy(value) if value.space == "psum" else value
        nl._indirect(dst, value, mask, "nl.store", "scatter", engine=STORE_ENGINE)
        return
    if not dst.shape:             # a single element, from a [1, 1] tile
        dst = Tensor("hbm", dst.dtype, (1, 1), (1, 1), dst.offset, dst.name)
    box, full = masked_box(dst, mask, "nl.store")
    if _empty(box):
        return
    if not isinstance(value, Tensor):
        fail("nl.store: value= is a tile")
    value.materialize()
    if list(dst.shape) != full or any(lo or hi != n for (lo, hi), n in zip(box, dst.shape)):
        if len(value.shape) != len(full):
            fail(f"nl.store under a mask: value {list(value.shape)} and destination {full} differ in rank")
        value, dst = _cut(value, box), _cut(dst, box)
    if value.space == "psum":
        value = nl.copy(value)
    if value.dtype != dst.dtype:
        value = nl.copy(value, dtype=dst.dtype)
    # stores are triggered from GpSimd's queue, loads from SyncE's: the
    # published Mamba profiles (SDK fused_mamba.rst, mamba_v2 and
    # mamba_v1_profile_4k_chan) show the output stores on qGpSimdIO0 and the
    # loads on qSyncIO0, so a store waiting for its data does not hold up
    # the next loads behind it
    _dma(dst, value, engine=STORE_ENGINE)
