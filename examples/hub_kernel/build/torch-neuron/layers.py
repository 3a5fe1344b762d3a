"""Layers for the Kernels library's kernelize: each replaces the forward of a
module of the same signature (stateless: the replaced module's own
parameters are read).

RMSNorm replaces Transformers' `use_kernel_forward_from_hub("RMSNorm")`
modules (LlamaRMSNorm and the like: `weight`, `variance_epsilon`).
SiluAndMul replaces a module whose forward(x) computes
silu(x[..., :d]) * x[..., d:]."""
import torch

from ._ops import rms_norm, silu_and_mul_op


class RMSNorm(torch.nn.Module):
    has_backward = True
    can_torch_compile = True

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return rms_norm(hidden_states, self.weight, self.variance_epsilon)


class SiluAndMul(torch.nn.Module):
    has_backward = True
    can_torch_compile = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return silu_and_mul_op(x)
