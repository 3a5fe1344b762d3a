"""nki.isa's DMA instructions: dma_copy (engine and DGE choice, masks,
oob_mode) and dma_transpose (the engines' transpose mode, or a strided copy
for other element widths).  isa.py re-exports them."""
from __future__ import annotations

import math

from neuronsim import DTYPE_SIZES as SIZES, FEATURES

from . import language as nl
from . import tracer
from .isa import _dst_first, _needs, _tiles
from .tensor import Tensor, new_tile
from .tracer import fail


def dma_copy(dst=None, src=None, priority=None, oob_mode=None, dge_mode=None, engine=None, name=None,
             mask=None, dst_rmw_op=None):
    """dst = src by the DMA engines.  engine= picks the sequencer that
    triggers it (sync, scalar, gpsimd; hwdge: sync or scalar only, swdge:
    gpsimd).  Left to the compiler, a load goes from Sync and, on
    NeuronCore-v3+, a store from Scalar: each has a hardware DGE instance
    there (SDK nki-dge.rst: "Each TRN2 NeuronCore has two DGE instances",
    driven by the Sync and Scalar sequencers), so a store waiting for its
    result does not hold up the loads queued behind it -- the published
    matmul v3 profile (TensorE 99.85% active while DMA is 99.73%) needs the
    next column's loads to run while a finished tile waits to be stored."""
    if not isinstance(dst, Tensor) or not isinstance(src, Tensor):
        fail("nisa.dma_copy takes dst= and src= tensors")
    if dst_rmw_op is not None:
        fail("nisa.dma_copy: dst_rmw_op= (a read-modify-write DMA) is not supported by the simulator yet")
    # oob_mode.skip: a transfer its run-time offset (scalar_offset read on
    # the device) moves out of the tensor is dropped, not an error; a
    # static access is checked while tracing either way
    skip = getattr(oob_mode, "name", oob_mode) == "skip"
    if mask is not None or dst.overrun or src.overrun:
        # the positions the mask keeps, on any axis, of views of one shape
        full = [[v.wanted.get(a, n) for a, n in enumerate(v.shape)] for v in (src, dst)]
        if full[0] != full[1]:
            fail(f"nisa.dma_copy with a mask: src {full[0]} and dst {full[1]} differ in shape")
        box = None
        for view in (src, dst):             # each view's end checked against what the mask keeps
            b, _ = nl.masked_box(view, mask, "nisa.dma_copy")
            box = b if box is None else [(max(a[0], c[0]), min(a[1], c[1])) for a, c in zip(box, b)]
        if any(hi <= lo for lo, hi in box):
            return dst
        whole = dst
        dst, src = nl._cut(dst, box), nl._cut(src, box)
    else:
        whole = dst
    t = tracer.current()
    dge = "dge" in t.features
    mode = getattr(dge_mode, "name", dge_mode) or "unknown"
    if mode not in ("unknown", "none", "swdge", "hwdge"):
        fail(f"nisa.dma_copy dge_mode={dge_mode!r}: nisa.dge_mode.unknown, none, swdge or hwdge")
    if mode in ("swdge", "hwdge") and not dge:
        fail(f"nisa.dma_copy dge_mode={mode} needs NeuronCore-v{FEATURES['dge']} or newer ({t.target} has its "
             "descriptors made before the run: dge_mode none)")
    e = getattr(engine, "name", engine)
    if e in (None, "unknown", "dma"):
        store = dst.space == "hbm" and src.space == "sbuf"
        e = "gpsimd" if mode == "swdge" else "scalar" if dge and store else "sync"
    elif e not in ("sync", "scalar", "gpsimd"):
        fail(f"nisa.dma_copy engine={engine!r}: a DMA is triggered by nisa.engine.sync, scalar or gpsimd")
    if mode == "hwdge" and e == "gpsimd":
        fail("nisa.dma_copy dge_mode=hwdge: only nisa.engine.sync or nisa.engine.scalar drive the DGE hardware")
    if mode == "swdge" and e != "gpsimd":
        fail(f"nisa.dma_copy dge_mode=swdge: GpSimd makes the descriptors, not engine={e}")
    nl._dma(dst, src, engine=e, oob_skip=skip)
    return whole


@_dst_first(lambda a: _tiles(a, 2))
def dma_transpose(src=None, dst=None, axes=None, dtype=None, dge_mode=None, priority=None, oob_mode=None,
                  name=None, **kw):
    """The DMA engines' transpose mode (published: up to 90% of the copy
    rate from HBM, 50% SBUF to SBUF on trn2), with the SDK's permutations:
    2-D [1, 0], 3-D [2, 1, 0], 4-D [3, 1, 2, 0] -- the first and last axes
    swap, the middle ones stay.  NeuronCore-v3 and later, 2-byte dtypes, an
    HBM or SBUF source and an SBUF destination holding the permuted shape's
    partitions and elements.  dma_transpose(dst, src) or the older
    dma_transpose(src) returning a new tile.  Indirect sources (gather
    transposes) are not supported yet."""
    perms = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}
    if not isinstance(src, Tensor) or len(src.shape) not in perms:
        fail("nisa.dma_transpose: a 2-D, 3-D or 4-D source tile (indirect sources are not supported by the "
             "simulator yet)")
    perm = perms[len(src.shape)]
    if axes is not None and tuple(axes) != perm:
        fail(f"nisa.dma_transpose: axes {tuple(axes)} on a {len(src.shape)}-D source (the SDK's permutation "
             f"is {perm})")
    if kw:
        fail(f"nisa.dma_transpose: {', '.join(sorted(kw))} is not supported by the simulator yet")
    _needs("dma_transpose", "nisa.dma_transpose")
    shape = tuple(src.shape[a] for a in perm)
    out = dst if dst is not None else new_tile("sbuf", shape, src.dtype, "dma_transpose result")
    if out.space != "sbuf" or out.shape[0] != shape[0] or out.elements_per_partition() != math.prod(shape[1:]) \
            or out.dtype != src.dtype:
        fail(f"nisa.dma_transpose: the destination is an SBUF tile {list(shape)} of {src.dtype} (or its "
             f"partitions and elements), got {out.space} {list(out.shape)} {out.dtype}")
    if SIZES[src.dtype] != 2:
        # the engines' transpose mode takes 2-byte elements (SDK: a hwdge
        # transpose's constraint); other widths from HBM are a strided copy
        # through the permuted view, one descriptor per element run, as
        # the compiler's descriptors would walk it
        if getattr(dge_mode, "name", dge_mode) == "hwdge" or src.space != "hbm" or getattr(src, "dyn", None):
            fail(f"nisa.dma_transpose of {src.dtype}: the DMA transpose mode moves 2-byte elements (bf16, fp16, "
                 "int16, uint16); other widths are transposed from HBM only (no run-time offset), without "
                 "dge_mode=hwdge")
        view = Tensor("hbm", src.dtype, shape, tuple(src.strides[a] for a in perm), src.offset, src.name)
        nl._dma(out, view)
        return out
    nl._dma(out, src, mode="transpose")
    return out
