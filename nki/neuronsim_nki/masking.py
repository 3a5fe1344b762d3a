"""Masks on compute instructions (NKI mask=): a condition on loop indices
alone (a Python bool while tracing) runs the instruction or skips it; a
predicate on the index grid (indexing.Mask) cuts every operand of the
instruction's shape to the positions the mask keeps, so the instruction
computes and writes only those -- the rest of its destination keeps its
values, and an operand whose unmasked range would run past its tile is
never read there.  Loads, stores and dma_copy read their masks themselves
(memory.py, isa_dma.py)."""
from __future__ import annotations

import functools

import numpy as np

from .indexing import Mask
from .tracer import fail


class MaskedOut:
    """What a compute call under a false mask= gives: nothing was done.
    Assigning it (x[...] = nisa.activation(..., mask=False)) or adding it
    (acc += ...) leaves the target as it was; any other use is an error."""

    def __repr__(self):
        return "<result of an instruction its mask= turned off>"


MASKED_OUT = MaskedOut()


class MaskedResult:
    """A returning compute call's result under a grid mask: the tile of
    the positions the mask keeps (`box` of the full shape).  Assigned
    (x[...] = nl.exp(t, mask=m)), it writes those positions of x only."""

    def __init__(self, tile, box, full):
        self.tile, self.box, self.full = tile, box, tuple(full)
        self.shape = self.full

    def __repr__(self):
        return f"<masked result {list(self.full)}: {self.box}>"

    def target(self, dst):
        """dst cut to the kept positions."""
        from .memory import _cut
        if tuple(dst.shape) != self.full:
            fail(f"a masked result of shape {list(self.full)} assigned into {list(dst.shape)}")
        return _cut(dst, self.box)


def _cut_operand(t, ref_shape, box):
    """Operand t of an instruction over ref_shape, cut to box: an operand
    of the instruction's shape on every axis, a per-partition one ([P, 1],
    [P]) on the partitions; anything else as it is."""
    from .memory import _cut
    from .tensor import Tensor
    if not isinstance(t, Tensor) or t.space == "hbm":
        return t
    if tuple(t.shape) == tuple(ref_shape):
        return _cut(t, box)
    if t.shape and t.shape[0] == ref_shape[0] and all(n == 1 for n in t.shape[1:]):
        return _cut(t, [box[0]] + [(0, n) for n in t.shape[1:]])
    return t


# calls whose operands do not share one index grid (TensorE's stationary
# [K, M], moving [K, N], dst [M, N]; transposes; partition moves; DMA
# computes; nl.where's broadcasts): a mask there is refused, not guessed at
_NOT_ELEMENTWISE = ("nc_matmul", "matmul", "nc_transpose", "transpose", "dma_transpose", "dma_compute",
                    "nc_stream_shuffle", "local_gather", "where")


def _grid_masked(fn, args, kw, m):
    """The call with its operands cut to the mask's box: the box is taken
    over the largest on-chip operand (the instruction's iteration space:
    the input of a reduction, dst of an elementwise instruction)."""
    from .tensor import Tensor
    if fn.__name__ in _NOT_ELEMENTWISE:
        fail(f"{fn.__name__} with a mask on index expressions is not supported by the simulator yet")
    tiles = [v for v in list(args) + list(kw.values()) if isinstance(v, Tensor) and v.space != "hbm"]
    dst = kw.get("dst")
    if not tiles:
        fail("mask= on an instruction without a tile operand")
    order = ([dst] if isinstance(dst, Tensor) and dst.space != "hbm" else []) + tiles
    ref = max(order, key=lambda t: (len(t.shape), t.shape[0] * t.elements_per_partition()))
    full = list(ref.shape)
    box = m.box(full)
    if any(hi <= lo for lo, hi in box):
        return dst if dst is not None else MASKED_OUT
    if all(lo == 0 and hi == n for (lo, hi), n in zip(box, full)):
        return fn(*args, **kw)              # the mask keeps everything
    cut = {id(t): _cut_operand(t, full, box) for t in tiles}
    out = fn(*[cut.get(id(a), a) for a in args], **{k: cut.get(id(v), v) for k, v in kw.items()})
    back = {id(c): t for t in tiles for c in [cut[id(t)]]}
    if id(out) in back:                     # the call returned its (cut) dst
        return back[id(out)]
    if not isinstance(out, Tensor):
        return out
    # the result's own full shape and box: an axis the instruction kept has
    # the box's extent, one it reduced (a [P, 1] result) is whole
    if len(out.shape) != len(full):
        fail(f"a masked call whose result {list(out.shape)} has another rank than its operands {full}")
    kept = [n == hi - lo for n, (lo, hi) in zip(out.shape, box)]
    rfull = [m if k else n for k, n, m in zip(kept, out.shape, full)]
    rbox = [b if k else (0, n) for k, b, n in zip(kept, box, out.shape)]
    if all(lo == 0 and hi == n for (lo, hi), n in zip(rbox, rfull)):
        return out
    return MaskedResult(out, rbox, rfull)


def compute_masks(fn):
    """fn, a compute call, with NKI's mask= (see the module's doc)."""
    @functools.wraps(fn)
    def call(*args, **kw):
        m = kw.get("mask")
        if m is None:
            return fn(*args, **kw)
        if isinstance(m, (bool, np.bool_)):
            if not m:
                return kw["dst"] if kw.get("dst") is not None else MASKED_OUT
            del kw["mask"]
            return fn(*args, **kw)
        if isinstance(m, Mask):
            kw = dict(kw)
            del kw["mask"]
            if m.never:
                return kw["dst"] if kw.get("dst") is not None else MASKED_OUT
            return _grid_masked(fn, args, kw, m)
        fail(f"mask= is a comparison of index expressions (i * 128 + ip < n) or a condition on loop indices, "
             f"got {m!r}")
    return call
