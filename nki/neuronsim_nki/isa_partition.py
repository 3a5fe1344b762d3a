"""nki.isa's instructions that move data across partitions inside an engine:
VectorE's quadrant shuffle (nc_stream_shuffle) and GpSimd's gather with the
indices its 16-partition cores share (local_gather).  isa.py re-exports them.

The C validator judges shapes, dtypes and start partitions (its refusal is an
NKIError at the kernel line); this module only turns NKI's arguments into
the instruction's fields."""
from __future__ import annotations

import operator

from . import tracer
from .isa import _tile_arg
from .tensor import Tensor, new_tile

_QUADRANT = 32     # partitions of one VectorE reshape bank (isa.h ISA_QUADRANT)
_KEEP = 255        # a mask entry that leaves the output partition as it was


def nc_stream_shuffle(dst=None, src=None, shuffle_mask=None, name=None, **kw):
    """dst's partition i of each 32-partition quadrant = src's partition
    shuffle_mask[i] of the same quadrant (255: dst's partition unchanged);
    one VectorE instruction, in place allowed (SDK nki.isa.nc_stream_shuffle).
    dst is read too: partitions the mask keeps hold their values."""
    if kw:
        tracer.fail(f"nisa.nc_stream_shuffle: unexpected argument(s) {', '.join(sorted(kw))}")
    s, d = _tile_arg(src, "nc_stream_shuffle", "src"), _tile_arg(dst, "nc_stream_shuffle", "dst")
    try:
        mask = [operator.index(m) for m in shuffle_mask]
    except TypeError:
        tracer.fail(f"nisa.nc_stream_shuffle: shuffle_mask is a list of {_QUADRANT} ints known while tracing, "
                    f"got {shuffle_mask!r}")
    if len(mask) != _QUADRANT or any(not (0 <= m < _QUADRANT or m == _KEEP) for m in mask):
        tracer.fail(f"nisa.nc_stream_shuffle: shuffle_mask has {_QUADRANT} entries, each a partition 0..31 of "
                    f"the quadrant or {_KEEP} (keep), got {mask!r}")
    tracer.current().emit("vector", f"nc_stream_shuffle dst={d.ap()} src={s.ap()} mask={','.join(map(str, mask))}",
                          reads=[s.region(), d.region()], writes=[d.region()])
    return dst


def local_gather(*args, src_buffer=None, index=None, num_elem_per_idx=1, num_valid_indices=None, dst=None,
                 name=None, **kw):
    """GpSimd, per 16-partition core: the core's index partitions flattened
    partitions first (uint16), the first num_valid_indices of them; each of
    its partitions gathers num_elem_per_idx contiguous elements of its own at
    each index: dst[p, j * E + e] = src_buffer[p, idx[j] + e] (the SDK's
    numpy semantics).  local_gather(dst, src_buffer, index, ...) or the
    older form returning a new [P, valid * E] tile."""
    what = "nisa.local_gather"
    if kw:
        tracer.fail(f"{what}: unexpected argument(s) {', '.join(sorted(kw))}")
    if len(args) >= 3 and all(isinstance(a, Tensor) for a in args[:3]):
        dst, args = args[0], args[1:]
    given = dict(zip(("src_buffer", "index", "num_elem_per_idx", "num_valid_indices"), args))
    src_buffer, index = given.get("src_buffer", src_buffer), given.get("index", index)
    num_elem_per_idx = given.get("num_elem_per_idx", num_elem_per_idx)
    num_valid_indices = given.get("num_valid_indices", num_valid_indices)
    s, ix = _tile_arg(src_buffer, "local_gather", "src_buffer"), _tile_arg(index, "local_gather", "index")
    for nm, v in (("num_elem_per_idx", num_elem_per_idx), ("num_valid_indices", num_valid_indices)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            tracer.fail(f"{what}: {nm} is an int known while tracing, got {v!r}")
    valid = num_valid_indices if num_valid_indices is not None else 16 * ix.elements_per_partition()
    if dst is None:
        out = new_tile("sbuf", (s.shape[0], valid * num_elem_per_idx), s.dtype, "local_gather result")
    else:
        out = _tile_arg(dst, "local_gather", "dst")
    text = f"local_gather dst={out.ap()} src={s.ap()} index={ix.ap()} elem_per_idx={num_elem_per_idx}"
    if num_valid_indices is not None:
        text += f" valid={num_valid_indices}"
    ins = tracer.current().emit("gpsimd", text, reads=[s.region(), ix.region()], writes=[out.region()])
    if dst is None:
        out.made_by = ins
    return out
