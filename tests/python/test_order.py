"""Order statistics composed from the native stable sort
(aten/reduction/order.cpp) against CPU PyTorch, values and indices, over the tile
boundaries, with NaN and heavy ties; where CPU's choice among equal
elements is its algorithm's accident (kthvalue ties, a repeated mode of a
row longer than 16, an all-NaN nanmedian row) the call runs on the CPU,
counted."""
import pytest
import torch

import torch_neuronsim
from nsim_util import assert_native_matches

SIZES = [1, 127, 128, 129, 255, 257, 513]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64]


def rows(n, dtype, seed, ties=False):
    g = torch.Generator().manual_seed(seed)
    if ties or not dtype.is_floating_point:
        return torch.randint(-3, 3, (4, n), generator=g).to(dtype)
    x = torch.randn(4, n, generator=g).to(dtype)
    if n > 3:
        x[1, 2] = float("nan")
    return x


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", SIZES)
def test_median_unique_across_tiles(n, dtype):
    x = rows(n, dtype, n)
    assert_native_matches(lambda t: torch.median(t, 1), x)
    assert_native_matches(lambda t: torch.median(t, 0, keepdim=True), x)
    assert_native_matches(torch.median, x)
    if dtype.is_floating_point:
        assert_native_matches(lambda t: torch.nanmedian(t, 1), x)
        assert_native_matches(torch.nanmedian, x)
    assert_native_matches(lambda t: torch.unique(t, return_inverse=True, return_counts=True), x)
    assert_native_matches(lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True), x)


@pytest.mark.parametrize("n", SIZES)
def test_kthvalue_and_mode_without_ties(n):
    x = torch.randn(4, n, generator=torch.Generator().manual_seed(n))
    for k in sorted({1, (n + 1) // 2, n}):
        assert_native_matches(lambda t: torch.kthvalue(t, k, 1), x)
    assert_native_matches(lambda t: torch.mode(t, 1), x)


def test_median_ties_take_cpus_index():
    """CPU's median breaks ties by index: the stable order's choice"""
    for n in (5, 16, 17, 100, 257):
        assert_native_matches(lambda t: torch.median(t, 1), rows(n, torch.float32, n, ties=True))
        assert_native_matches(lambda t: torch.nanmedian(t, 1), rows(n, torch.float32, n, ties=True))
    assert_native_matches(lambda t: torch.mode(t, 1), rows(16, torch.int32, 3, ties=True))


def test_ambiguous_ties_run_on_the_cpu():
    for fn, x in [(lambda t: torch.kthvalue(t, 3, 1), rows(33, torch.float32, 1, ties=True)),
                  (lambda t: torch.mode(t, 1), rows(33, torch.float32, 2, ties=True)),
                  (lambda t: torch.nanmedian(t, 1), torch.full((2, 4), float("nan")))]:
        before = torch_neuronsim.stats()["cpu_fallbacks"]
        got = fn(x.to("neuron"))
        assert torch_neuronsim.stats()["cpu_fallbacks"] > before
        want = fn(x)
        torch.testing.assert_close(got.values.cpu(), want.values, equal_nan=True)
        assert torch.equal(got.indices.cpu(), want.indices)


def test_nan_rows_and_scalars():
    nan = float("nan")
    x = torch.tensor([[1.0, nan, 3.0, nan], [2.0, 2.0, 1.0, 1.0], [nan, 0.0, -1.0, 5.0]])
    assert_native_matches(lambda t: torch.median(t, 1), x)
    assert_native_matches(lambda t: torch.nanmedian(t, 1), x)
    assert_native_matches(lambda t: torch.kthvalue(t, 4, 1), x[[2]])   # one NaN: the largest, untied
    assert_native_matches(lambda t: torch.unique(t, return_inverse=True, return_counts=True), x)
    s = torch.tensor(2.5)
    for fn in (torch.median, torch.nanmedian, lambda t: torch.median(t, 0), lambda t: torch.mode(t, 0),
               lambda t: torch.kthvalue(t, 1, 0), torch.unique):
        assert_native_matches(fn, s)


def test_nan_ties_at_k_run_on_the_cpu():
    """two NaNs at k: which one CPU's quickselect returns is its own"""
    x = torch.tensor([[1.0, float("nan"), float("nan"), float("nan"), 0.0]])
    before = torch_neuronsim.stats()["cpu_fallbacks"]
    got = torch.kthvalue(x.to("neuron"), 3, 1)
    assert torch_neuronsim.stats()["cpu_fallbacks"] == before + 1
    assert torch.equal(got.indices.cpu(), torch.kthvalue(x, 3, 1).indices)
