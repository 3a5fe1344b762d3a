"""torch_neuronsim.nki: NKI kernels on the simulated `neuron` device.

The frontend is neuronsim.nki (no torch needed); here it is reachable from
the torch package.  A kernel called with `neuron` tensors runs on their
device like a native op; with NumPy arrays it returns NumPy arrays."""
import sys

import neuronsim.nki as _nki

globals().update({name: getattr(_nki, name) for name in _nki.__all__})
__all__ = list(_nki.__all__)
sys.modules[__name__ + ".language"] = _nki.language
sys.modules[__name__ + ".isa"] = _nki.isa
