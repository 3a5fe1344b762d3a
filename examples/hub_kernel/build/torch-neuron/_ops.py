"""The NKI kernels as PyTorch operators (torch_neuronx.nki_op): one
torch.library custom op each, with a backward, so a model using them trains
and torch.compile keeps each call as one node of the graph."""
import torch
from torch_neuronx import nki_op

from ._nki import rms_norm_kernel, silu_and_mul_kernel

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _check(name, *tensors):
    """the kernels take neuron tensors of the dtypes above; anything else is
    refused by name rather than computed wrongly"""
    for t in tensors:
        if t.dtype not in FLOAT_DTYPES:
            raise TypeError(f"neuronsim_layers.{name}: dtype {t.dtype} is not supported "
                            f"(supported: float32, bfloat16, float16)")
        if t.device.type not in ("neuron", "meta"):
            raise ValueError(f"neuronsim_layers.{name}: expects tensors on the neuron device, got {t.device}")


@nki_op("neuronsim_layers::rms_norm", mutates_args={})
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Llama's RMSNorm over the last dimension of x, of any leading shape."""
    _check("rms_norm", x, weight)
    if weight.shape != (x.shape[-1],):
        raise ValueError(f"neuronsim_layers.rms_norm: weight of shape {tuple(weight.shape)} "
                         f"for rows of {x.shape[-1]} elements")
    rows = x.reshape(-1, x.shape[-1]).contiguous()
    if rows.numel() == 0:
        return torch.empty(x.shape, dtype=torch.promote_types(x.dtype, weight.dtype), device=x.device)
    return rms_norm_kernel(rows, weight.reshape(1, -1).contiguous(), eps).reshape(x.shape)


def _rms_norm_reference(x, weight, eps):
    h = x.float()
    return weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def _rms_norm_setup(ctx, inputs, output):
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _rms_norm_backward(ctx, grad):
    # the backward differentiates the reference formula on the device: the
    # same function the forward kernel computes
    x, weight = ctx.saved_tensors
    with torch.enable_grad():
        xx, ww = x.detach().requires_grad_(), weight.detach().requires_grad_()
        gx, gw = torch.autograd.grad(_rms_norm_reference(xx, ww, ctx.eps), (xx, ww), grad)
    return gx, gw, None


rms_norm.register_autograd(_rms_norm_backward, setup_context=_rms_norm_setup)


@nki_op("neuronsim_layers::silu_and_mul", mutates_args={})
def silu_and_mul_op(x: torch.Tensor) -> torch.Tensor:
    """silu(x[..., :d]) * x[..., d:] for x of [..., 2d]."""
    _check("silu_and_mul", x)
    if x.shape[-1] % 2:
        raise ValueError(f"neuronsim_layers.silu_and_mul: the last dimension ({x.shape[-1]}) must be even")
    d = x.shape[-1] // 2
    rows = x.reshape(-1, 2 * d).contiguous()
    if rows.numel() == 0:
        return torch.empty(*x.shape[:-1], d, dtype=x.dtype, device=x.device)
    return silu_and_mul_kernel(rows).reshape(*x.shape[:-1], d)


def _silu_and_mul_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _silu_and_mul_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    with torch.enable_grad():
        xx = x.detach().requires_grad_()
        d = xx.shape[-1] // 2
        (gx,) = torch.autograd.grad(torch.nn.functional.silu(xx[..., :d]) * xx[..., d:], (xx,), grad)
    return gx


silu_and_mul_op.register_autograd(_silu_and_mul_backward, setup_context=_silu_and_mul_setup)


def silu_and_mul(out: torch.Tensor, x: torch.Tensor) -> None:
    """the activation kernels' function form: writes silu(x[..., :d]) * x[..., d:] into out"""
    out.copy_(silu_and_mul_op(x))
