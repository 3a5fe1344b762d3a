"""nki.isa's instructions that move data across partitions inside an engine:
VectorE's quadrant shuffle (nc_stream_shuffle).  isa.py re-exports them.

The C validator judges shapes, dtypes and start partitions (its refusal is an
NKIError at the kernel line); this module only turns NKI's arguments into
the instruction's fields."""
from __future__ import annotations

import operator

from . import language as nl
from . import tracer
from .tensor import Tensor

_QUADRANT = 32     # partitions of one VectorE reshape bank (isa.h ISA_QUADRANT)
_KEEP = 255        # a mask entry that leaves the output partition as it was


def _on_chip(x, what, name):
    x = nl._operand(x)
    if not isinstance(x, Tensor):
        tracer.fail(f"nisa.{what}: {name} is a tile in SBUF or PSUM, got {type(x).__name__}")
    return x


def nc_stream_shuffle(dst=None, src=None, shuffle_mask=None, name=None, **kw):
    """dst's partition i of each 32-partition quadrant = src's partition
    shuffle_mask[i] of the same quadrant (255: dst's partition unchanged);
    one VectorE instruction, in place allowed (SDK nki.isa.nc_stream_shuffle).
    dst is read too: partitions the mask keeps hold their values."""
    if kw:
        tracer.fail(f"nisa.nc_stream_shuffle: unexpected argument(s) {', '.join(sorted(kw))}")
    s, d = _on_chip(src, "nc_stream_shuffle", "src"), _on_chip(dst, "nc_stream_shuffle", "dst")
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
