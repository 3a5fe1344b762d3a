"""Products and scans composed from native kernels (aten/reduction/scan.cpp)
against CPU PyTorch over the tile boundaries (1, 127, 128, 129, 255, 257,
513 on the scanned dim), every dim of a 3-D tensor, NaN / infinities /
ties, in fp32 / bf16 / fp16, natively (no CPU fallback)."""
import pytest
import torch

import torch_neuronsim
from nsim_util import assert_native_matches

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
SIZES = [1, 127, 128, 129, 255, 257, 513]


def data(n, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    # factors near 1 keep a 513-long running product finite
    return (1 + torch.randn(3, n, generator=g) * 0.05).to(dtype)


def close(fn, x, rtol, atol, exact=False):
    """fn natively against CPU's fn (exact: against fn in float64 rounded
    to x's dtype -- CPU's bf16 / fp16 prod multiplies in the dtype and is
    8-13% off the true product of 255 factors near 1)"""
    before = torch_neuronsim.stats()["cpu_fallbacks"]
    got = fn(x.to("neuron"))
    assert torch_neuronsim.stats()["cpu_fallbacks"] == before, "ran on the CPU"
    want = fn(x.double()).to(x.dtype) if exact else fn(x)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(g.cpu(), w, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", SIZES)
def test_scans_across_tile_boundaries(n, dtype):
    """fp32 combines in a tree where CPU runs a sequential double
    accumulator: a few ulps per doubling step"""
    x = data(n, dtype, n)
    rtol = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2, torch.float16: 2e-3}[dtype]
    close(lambda t: torch.cumprod(t, 1), x, rtol, 1e-5)
    close(lambda t: torch.prod(t, 1), x, rtol, 1e-5, exact=True)
    close(lambda t: torch.logcumsumexp(t * 30, 1), x, rtol, 1e-5)
    assert_native_matches(lambda t: torch.cummax(t, 1), x)
    assert_native_matches(lambda t: torch.cummin(t, 1), x)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dim_and_special_values(dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(5, 6, 7, generator=g).to(dtype)
    x[1, 2, 3] = float("nan")
    x[2, 0, 1] = float("inf")
    x[3, 4, 0] = -float("inf")
    x[0, 1, :] = 2.0                      # ties: CPU's index moves to the last
    for d in range(3):
        assert_native_matches(lambda t: torch.cummax(t, d), x)
        assert_native_matches(lambda t: torch.cummin(t, d), x)
        assert_native_matches(lambda t: torch.cumprod(t, d), x)
        assert_native_matches(lambda t: torch.logcumsumexp(t, d), x)
        close(lambda t: torch.prod(t, d, keepdim=True), x, None, None, exact=True)
    close(torch.prod, x, None, None, exact=True)
    inf = torch.tensor([-float("inf"), -float("inf"), 1.0, float("inf"), float("inf"), 2.0], dtype=dtype)
    assert_native_matches(lambda t: torch.logcumsumexp(t, 0), inf)


def test_scalars_empty_and_dtypes():
    assert_native_matches(lambda t: torch.cummax(t, 0), torch.tensor(3.0))
    assert_native_matches(lambda t: torch.logcumsumexp(t, 0), torch.tensor(3.0))
    assert_native_matches(lambda t: torch.prod(t, 0), torch.zeros(0, 4))
    assert_native_matches(lambda t: torch.prod(t, 1, dtype=torch.float32), torch.randn(4, 5).bfloat16())
    assert_native_matches(lambda t: torch.zeros(3, 4, device=t.device).fill_(t), torch.tensor(2.5))


def test_results_are_new_tensors():
    """a scan or product over a dim of one element is a copy, never the input"""
    x = torch.randn(3, 1).to("neuron")
    for fn in (lambda t: t.cumprod(1), lambda t: t.prod(1), lambda t: t.logcumsumexp(1), lambda t: t.prod(1, True)):
        y = fn(x)
        assert not y._is_view() and y.data_ptr() != x.data_ptr()
    s = torch.tensor(2.0).to("neuron")
    assert s.logcumsumexp(0).data_ptr() != s.data_ptr()
    with pytest.raises(IndexError):
        s.cumprod(3)
