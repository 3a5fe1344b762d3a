"""Losses, norms and min / max reductions composed from native kernels
(aten/nn/loss.cpp, aten/optim/optim.cpp's norms, aten/reduction/reduce.cpp's out=
forms) against CPU PyTorch, natively (no CPU fallback), with CPU's errors."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuronsim
from nsim_util import assert_native_matches

NEURON = torch.device("neuron")
DTYPES = [torch.float32, torch.bfloat16]


native = assert_native_matches


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_pointwise_losses(dtype, reduction):
    g = torch.Generator().manual_seed(0)
    x, t = torch.randn(37, 129, generator=g).to(dtype), torch.randn(37, 129, generator=g).to(dtype)
    p, y = torch.rand(37, 129, generator=g).to(dtype), torch.rand(37, 129, generator=g).to(dtype)
    p[0, :3] = torch.tensor([0.0, 1.0, 1e-30])                 # log(0) clamped at -100
    w = torch.rand(129, generator=g).to(dtype)
    native(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction), p, y)
    native(lambda a, b, c: F.binary_cross_entropy(a, b, c, reduction=reduction), p, y, w.expand(37, 129))
    for beta in (0.0, 0.5, 2.0):
        native(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=beta), x, t)
        if beta > 0:
            native(lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=beta), x, t)
    native(lambda a, b: F.mse_loss(a, b, reduction=reduction), x, t)


def test_empty_mean_losses_are_nan_as_cpu():
    e = torch.zeros(0, 3)
    native(lambda a, b: F.mse_loss(a, b), e, e)
    native(lambda a, b: F.smooth_l1_loss(a, b), e, e)


def test_binary_cross_entropy_rejects_inputs_outside_0_1():
    for bad in (1.5, -0.1, float("nan")):
        x = torch.tensor([0.5, bad])
        with pytest.raises(RuntimeError, match="between 0 and 1"):
            F.binary_cross_entropy(x.to(NEURON), torch.ones(2, device=NEURON))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss_2d(reduction):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 5, 7, 9, generator=g).log_softmax(1)
    t = torch.randint(0, 5, (3, 7, 9), generator=g)
    t[0, 0, :4] = -100
    w = torch.rand(5, generator=g)
    native(lambda a, b: F.nll_loss(a, b, reduction=reduction), x, t)
    native(lambda a, b, c: F.nll_loss(a, b, c, reduction=reduction, ignore_index=2), x, t.clamp(min=0), w)
    native(lambda a, b: F.cross_entropy(a, b, reduction=reduction), x, t)
    with pytest.raises(IndexError):
        F.nll_loss(x.to(NEURON), torch.full((3, 7, 9), 5, device=NEURON))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_norms(dtype):
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(6, 33, generator=g).to(dtype), torch.randn(6, 33, generator=g).to(dtype)
    for p in (0.0, 1.0, 2.0, 3.0, 1.5, float("inf"), -float("inf")):
        native(lambda a: torch.norm(a, p, 1), x)
        native(lambda a, b: torch.dist(a, b, p), x, y)
    native(lambda a: torch.linalg.vector_norm(a, 1 / 3), x.abs())
    native(lambda a: torch.renorm(a, 2, 0, 1.0), x)
    native(lambda a: torch.renorm(a, 1, 1, 0.5), x)
    with pytest.raises(RuntimeError):
        torch.renorm(x.to(NEURON), -1, 0, 1.0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_min_max_out_forms(dtype):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, 130, generator=g).to(dtype)
    x[1, 7] = float("nan")
    native(lambda a: torch.aminmax(a), x)
    native(lambda a: torch.aminmax(a, dim=1, keepdim=True), x)
    native(lambda a: torch.amax(a, 1, out=torch.empty(0, dtype=a.dtype, device=a.device)), x)
    native(lambda a: torch.amin(a, (0, 1), out=torch.empty(0, dtype=a.dtype, device=a.device)), x)


def test_pow_scalar_exponent_in_the_dtype():
    """CPU rounds a pow exponent to the tensor's dtype (bf16's -2.7 is
    -2.703125); 1/3 (not an fp32 number) ran on the CPU before."""
    x = torch.rand(1000, generator=torch.Generator().manual_seed(4)) * 3
    for e in (1 / 3, -2.7, 0.1, 7.3):
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            native(lambda a: a.pow(e), x.to(dt))
