"""nl's memory operations: DMA between HBM and SBUF (nl.load, nl.store,
nl.load_transpose2d) and the masks that cut a partial last tile; language.py
re-exports them."""
from __future__ import annotations

from . import language as nl
from . import tracer
from .scalar import ENGINE as SCALAR_ENGINE, dyn_dma
from .tensor import Mask, Tensor, isa_dtype, new_tile
from .tracer import fail


def _dma(dst, src, engine="sync", mode="direct"):
    t = tracer.current()
    if dst.shape != src.shape and dst.elements_per_partition() * dst.shape[0] != \
            src.elements_per_partition() * src.shape[0]:
        fail(f"DMA shapes differ: {list(src.shape)} -> {list(dst.shape)}")
    floats = ("fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2")
    if dst.dtype != src.dtype and not (dst.dtype in floats and src.dtype in floats):
        fail(f"DMA converts between float types only: {src.dtype} -> {dst.dtype} (cast with nl.copy on chip)")
    if "psum" in (dst.space, src.space):
        fail("DMA to or from PSUM is not allowed: copy the tile to SBUF first")
    idx = len(t.dmas)
    dst_ap, src_ap = dst.ap(), src.ap()
    t.dmas.append((dst_ap, src_ap, mode))
    src_region, dst_region = src.region(), dst.region()
    dyn = dyn_dma(dst, src, dst_region, src_region)
    if dyn is not None:
        # an offset computed on the device: the DMA starts from the engine
        # holding the scalar
        if mode != "direct":
            fail("scalar_offset on a transposing or indirect DMA is not supported by the simulator yet")
        text, reads, writes = dyn
        t.emit(SCALAR_ENGINE, f"dma_copy desc=d{idx} {text}", reads=reads, writes=writes, dma=idx)
        return
    ins = t.emit(engine, f"dma_copy desc=d{idx}", reads=[src_region], writes=[dst_region], dma=idx)
    if mode == "direct" and dst.space == "sbuf" and src.space == "hbm" and dst.dtype == src.dtype and \
            not t.recording:
        t.note_load(dst.alloc, dst_ap, dst_region, src_ap, src_region, ins.index)


STORE_ENGINE = "gpsimd"


def _masked_rows(view, mask, what):
    """Rows of an HBM view a masked load/store moves; an index past the end
    is an error unless the mask cuts it off."""
    rows = view.shape[0]
    if mask is None:
        if view.overrun:
            fail(view.overrun)
        return rows
    if not isinstance(mask, Mask):
        fail(f"{what}: mask= takes an index comparison such as (i * 128 + ix < n)")
    keep = mask.leading_rows(view.rows_wanted or rows)
    if keep > rows:
        fail(view.overrun)
    return keep


def load(src, dtype=None, mask=None, **kw):
    """HBM -> a new SBUF tile of the same shape (partition dimension first).
    With a mask on the first axis only the rows it keeps are moved."""
    if not isinstance(src, Tensor) or src.space != "hbm":
        fail("nl.load reads an HBM tensor (a kernel argument or nl.shared_hbm array)")
    rows = _masked_rows(src, mask, "nl.load")
    shape = src.shape if len(src.shape) > 1 else (src.shape[0], 1)
    shape = ((src.rows_wanted or shape[0]),) + tuple(shape[1:])
    tile = new_tile("sbuf", shape, src.dtype, f"nl.load {list(src.shape)}")
    if rows == 0:
        return tile
    src2 = src if len(src.shape) > 1 else Tensor("hbm", src.dtype, (src.shape[0], 1), (src.strides[0], 1),
                                                 src.offset, src.name)
    src2.dyn = getattr(src, "dyn", None)
    _dma(tile[0:rows] if rows != shape[0] else tile, src2[0:rows] if rows != src2.shape[0] else src2)
    pristine = rows == shape[0] and getattr(src2, "dyn", None) is None
    tile.loaded_by = tracer.current().instrs[-1] if pristine else None
    tile.loaded_from = src2 if pristine else None
    if dtype is not None and isa_dtype(dtype) != src.dtype:
        return nl.copy(tile, dtype=dtype)
    return tile


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
    if not isinstance(dst, Tensor) or dst.space != "hbm":
        fail("nl.store writes an HBM tensor")
    rows = _masked_rows(dst, mask, "nl.store")
    if rows == 0:
        return
    if rows != dst.shape[0] or (dst.rows_wanted and value.shape[0] != rows):
        dst, value = dst[0:rows], value[0:rows]
    value.materialize()
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
