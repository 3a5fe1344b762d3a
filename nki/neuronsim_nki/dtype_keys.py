"""Tables keyed by ISA dtype names ('fp32', 'bf16') that a tensor's .dtype
and nl's dtypes can index.

A tensor's .dtype (tensor.TensorDType) equals both its ISA name and its NKI
name, but hashes as the NKI name, as nl's dtypes do: a kernel's own dict
keyed by nl.float8_e4m3 must find t.dtype (nki-library's kernel_helpers
looks up the fp8 range so).  An object cannot hash as both names, so the
frontend's ISA-keyed tables take the key's `.isa` (the plain ISA name) before
hashing."""
from __future__ import annotations

import neuronsim


def isa_key(dtype):
    """The plain ISA name of a TensorDType / nl dtype; anything else as is."""
    return getattr(dtype, "isa", dtype)


class IsaKeyed(dict):
    """A dict keyed by ISA dtype names, indexable by any dtype object."""
    __slots__ = ()

    def __getitem__(self, key):
        return dict.__getitem__(self, isa_key(key))

    def __setitem__(self, key, value):
        dict.__setitem__(self, isa_key(key), value)

    def __contains__(self, key):
        return dict.__contains__(self, isa_key(key))

    def get(self, key, default=None):
        return dict.get(self, isa_key(key), default)


# bytes per element, from the library
SIZES = IsaKeyed(neuronsim.DTYPE_SIZES)


def int_imm(value, dtype):
    """The ISA's integer immediate (I32) text for `value` into integer
    dtype `dtype`: the dtype's bits (uint32 past 2^31 as the int32 of the
    same bits; the engines store an integer immediate by truncation), exact
    where an fp32 immediate rounds past 2^24.  None when dtype is not an
    integer type or value is not an integer of its range."""
    import numpy as np
    npt = neuronsim.DTYPES.get(isa_key(dtype))
    if npt is None or not np.issubdtype(npt, np.integer) or isinstance(value, bool):
        return None
    try:
        v = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    info = np.iinfo(npt)
    if v != value or not info.min <= v <= info.max:
        return None
    return str(v - (1 << 32) if v >= 1 << 31 else v)
