"""nki.isa's DMA instructions: dma_copy (engine and DGE choice, masks,
oob_mode) and dma_transpose (the engines' transpose mode, or a strided copy
for other element widths).  isa.py re-exports them."""
from __future__ import annotations

import math

from neuronsim import FEATURES, FLOAT_DTYPES

from .dtype_keys import SIZES

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
        # dst op= src in the DMA engines (the SDK's dma_compute, read-modify-write)
        if nl.op_name(dst_rmw_op) != "add":
            fail(f"nisa.dma_copy: dst_rmw_op is nl.add (the DMA engines' only operation), got {dst_rmw_op!r}")
        if mask is not None:
            fail("nisa.dma_copy: dst_rmw_op with a mask is not supported by the simulator yet")
        return dma_compute(dst=dst, srcs=[dst, src], reduce_op=dst_rmw_op, oob_mode=oob_mode)
    # oob_mode.skip: a transfer its run-time offset (scalar_offset read on
    # the device) moves out of the tensor is dropped, not an error, as is
    # a row whose run-time index (vector_offset) leaves it; a static access
    # is checked while tracing either way
    skip = getattr(oob_mode, "name", oob_mode) == "skip"
    # vector indirection (a tile of row numbers): the ISA's gather / scatter
    # DMA, its engine chosen as any DMA's below
    indirect = [v for v in (src, dst) if v.gather is not None]
    if len(indirect) > 1:
        fail("nisa.dma_copy: one side indexed by a tile, not both")
    if not indirect and (mask is not None or dst.overrun or src.overrun):
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
    if indirect:
        scatter = indirect[0] is dst
        nl._indirect(dst if scatter else src, src if scatter else dst, mask, "nisa.dma_copy",
                     "scatter" if scatter else "gather", e, oob_skip=skip)
        return dst
    nl._dma(dst, src, engine=e, oob_skip=skip)
    return whole


def _same_view(a, b):
    """a and b are one view of the same bytes (dma_compute's `dst` among
    its sources): compared by what defines a view, without touching its
    storage (region() / ap() record uses)."""
    return a is b or (a.space == b.space and a.name == b.name and a.alloc is b.alloc and a.offset == b.offset and
                      a.part0 == b.part0 and a.shape == b.shape and a.strides == b.strides and
                      a.gather is b.gather)


def dma_compute(dst=None, srcs=None, reduce_op=None, scales=None, unique_indices=True, oob_mode=None, name=None,
                **kw):
    """dst = srcs[0] + srcs[1] + ... in the DMA engines (SDK
    nki.isa.dma_compute: fp32 inside, nl.add and scales of 1.0 only), as the
    ISA's read-modify-write DMAs: add (dst += src), gather_add (SBUF dst +=
    HBM rows picked by a vector_offset index: the SDK's gather RMW) and
    scatter_add (HBM rows picked by the index += SBUF data: scatter RMW).
    A dst that is not among the sources is first a copy of the first one.
    The ISA's add rounds to dst's dtype after each source: where that would
    round a narrower-than-fp32 dst more than once, the sum is made in an
    fp32 buffer of dst's memory and cast into dst once, as the SDK's single
    fp32 pass does (one DMA more than the engines' pipelined pass)."""
    what = "nisa.dma_compute"
    if kw:
        fail(f"{what}: unexpected argument(s) {', '.join(sorted(kw))}")
    if not isinstance(dst, Tensor) or not isinstance(srcs, (list, tuple)) or not 1 <= len(srcs) <= 16 or \
            not all(isinstance(x, Tensor) for x in srcs):
        fail(f"{what}(dst, srcs=[1 to 16 tensors], reduce_op=nl.add)")
    if reduce_op is None or nl.op_name(reduce_op) != "add":
        fail(f"{what}: reduce_op is nl.add (the only one the DMA engines have), got {reduce_op!r}")
    if scales is not None and any(float(x) != 1.0 for x in scales):
        fail(f"{what}: scales other than 1.0 are not supported (the SDK: all must be 1.0)")
    skip = getattr(oob_mode, "name", oob_mode) == "skip"
    if "psum" in (dst.space, *(x.space for x in srcs)):
        fail(f"{what}: DMA to or from PSUM is not allowed: copy the tile to SBUF first")
    indexed = [x for x in (dst, *srcs) if x.gather is not None]
    if indexed:
        if not unique_indices:
            fail(f"{what}: unique_indices=False (repeated rows) is not supported (the SDK: not yet either)")
        if len(srcs) != 2 or not any(_same_view(dst, x) for x in srcs):
            fail(f"{what} with vector_offset: two sources, one of them dst itself (read-modify-write)")
        other = srcs[1] if _same_view(dst, srcs[0]) else srcs[0]
        if dst.gather is not None:          # scatter RMW: HBM[idx] += SBUF
            if other.space != "sbuf":
                fail(f"{what}: a scatter read-modify-write adds SBUF data into the indexed HBM rows")
            nl._indirect(dst, other, None, what, "scatter_add", "gpsimd", oob_skip=skip)
        else:                                                 # gather RMW: SBUF += HBM[idx]
            if dst.space != "sbuf" or other.gather is None:
                fail(f"{what}: a gather read-modify-write adds indexed HBM rows into an SBUF dst")
            nl._indirect(other, dst, None, what, "gather_add", "gpsimd", oob_skip=skip)
        return dst
    rest = list(srcs)
    inplace = next((k for k, x in enumerate(rest) if _same_view(dst, x)), None)
    roundings = len(rest) - 1
    if inplace is not None:
        rest.pop(inplace)
    else:
        roundings += rest[0].dtype != dst.dtype
    floats = all(x.dtype in FLOAT_DTYPES for x in (dst, *srcs))
    for x in srcs:
        if x.dtype != dst.dtype and not floats:
            fail(f"{what}: a {x.dtype} source added into a {dst.dtype} dst (the DMA engines add floats of any "
                 "types, integers of one type)")
    acc = dst
    if roundings > 1 and dst.dtype != "fp32":
        acc = _fp32_buffer(dst, what)
        rest = list(srcs)
        inplace = None
    if inplace is None:
        nl._dma(acc, rest.pop(0), engine="sync", oob_skip=skip)
    for x in rest:
        nl._dma(acc, x, engine="sync", mode="add")
    if acc is not dst:
        nl._dma(dst, acc, engine="sync")
    return dst


def _fp32_buffer(dst, what):
    """an fp32 buffer shaped like dst, in its memory (SBUF or HBM scratch)"""
    if dst.space == "sbuf":
        if dst.pax != 0:
            fail(f"{what}: an SBUF dst whose partition axis is not first")
        return new_tile("sbuf", dst.shape, "fp32", f"{what} fp32 sum")
    return nl.ndarray(dst.shape, dtype=nl.float32, buffer=nl.private_hbm)


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
