"""Ops composed from native kernels (aten/pointwise/composite.cpp, aten/pointwise/activation.cpp):
equal, trace, count_nonzero, addbmm, linalg_cross, glu, prelu -- against
CPU PyTorch, natively (no CPU fallback), across tile-boundary sizes."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuronsim
from nsim_util import assert_native_matches

NEURON = torch.device("neuron")


native = assert_native_matches


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("n", [1, 127, 129, 257])
def test_composites(dtype, n):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, 6, generator=g).to(dtype)
    y = x.clone()
    native(torch.equal, x, y)
    y[-1, -1] = 7
    native(torch.equal, x, y)
    native(torch.equal, x, x[:, :5])
    native(torch.trace, x)
    native(lambda t: torch.count_nonzero(t.relu(), 1), x)
    b1, b2 = torch.randn(3, n, 5, generator=g).to(dtype), torch.randn(3, 5, 4, generator=g).to(dtype)
    m = torch.randn(n, 4, generator=g).to(dtype)
    native(lambda a, b, c: torch.addbmm(a, b, c, beta=0.5, alpha=2), m, b1, b2)
    native(lambda a, b, c: torch.addbmm(a, b, c, beta=0), m.fill_(float("nan")), b1, b2)
    a3, b3 = torch.randn(n, 3, generator=g).to(dtype), torch.randn(1, 3, generator=g).to(dtype)
    native(lambda a, b: torch.linalg.cross(a, b), a3, b3)
    native(lambda a, b: torch.cross(a.t(), b.t().expand(3, n), dim=0), a3, b3)
    native(lambda t: F.glu(t, 1), x)
    native(lambda t, w: F.prelu(t, w), x, torch.rand(6, generator=g).to(dtype))


def test_nan_never_equal():
    x = torch.tensor([1.0, float("nan")])
    native(torch.equal, x, x.clone())


def test_bad_arguments_raise_as_cpu():
    with pytest.raises(RuntimeError):
        torch.linalg.cross(torch.randn(4, 2, device=NEURON), torch.randn(4, 2, device=NEURON))
    with pytest.raises(RuntimeError):
        F.glu(torch.randn(3, 5, device=NEURON), 1)


def test_clamp_out_and_batch_norm_with_update():
    g = torch.Generator().manual_seed(9)
    x = torch.randn(5, 129, generator=g)
    native(lambda t: torch.clamp(t, -0.5, 0.25, out=torch.empty_like(t)), x)
    xb = torch.randn(4, 3, 5, 5, generator=g)
    rm, rv = torch.zeros(3), torch.ones(3)
    rmn, rvn = rm.to(NEURON), rv.to(NEURON)
    before = torch_neuronsim.stats()["cpu_fallbacks"]
    got = torch.ops.aten._batch_norm_with_update(xb.to(NEURON), None, None, rmn, rvn, 0.1, 1e-5)
    assert torch_neuronsim.stats()["cpu_fallbacks"] == before
    want = torch.ops.aten._batch_norm_with_update(xb, None, None, rm, rv, 0.1, 1e-5)
    for a, b in zip(got[:3], want[:3]):
        torch.testing.assert_close(a.cpu(), b)
    torch.testing.assert_close(rmn.cpu(), rm)
    torch.testing.assert_close(rvn.cpu(), rv)
