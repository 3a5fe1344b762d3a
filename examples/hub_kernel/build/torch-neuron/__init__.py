"""neuronsim-layers: NKI kernels for RMSNorm and SiLU-and-mul in the layout of
a Hugging Face Hub kernel repository (build/torch-neuron), loadable with the
Kernels library (`get_kernel`, `get_local_kernel`, `kernelize`,
Transformers' `use_kernels`)."""
from . import layers
from ._ops import rms_norm, silu_and_mul, silu_and_mul_op

__all__ = ["layers", "rms_norm", "silu_and_mul", "silu_and_mul_op"]
