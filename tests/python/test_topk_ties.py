"""topk and the unstable sort on `neuron` break ties exactly as CPU PyTorch
does: GpSimd's topk instruction runs the CPU's selection algorithm (heap
select when 64k <= n, else nth_element and a sort of the first k - 1;
std::sort for the unstable sort).  Rows full of equal values in every size
class those algorithms branch on (insertion sorts up to 3 and 16, the
partitions, the heap select, the depth limit), NaN, sorted=False, every
dtype the kernel takes, int64 within int32 range, and a dim that is not
the last; values and indices identical, no CPU fallback."""
import pytest
import torch

import torch_neuronsim

NEURON = torch.device("neuron")


def same(fn, x):
    """fn(x) on CPU and on neuron: identical values and indices, natively"""
    want = fn(x)
    torch_neuronsim.reset_stats()
    got = fn(x.to(NEURON))
    assert torch_neuronsim.stats()["fallback_ops"] == {}
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0, equal_nan=True)


def ties(shape, levels, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, levels, shape, generator=g).to(dtype)


SIZES = [1, 2, 3, 4, 16, 17, 33, 64, 65, 200, 640, 3000]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("levels", [1, 2, 5])
def test_topk_ties_pick_cpus_positions(n, levels):
    x = ties((130, n), levels, torch.float32, n * 10 + levels)
    for k in sorted({min(n, 2), 1, min(n, 8), min(n, 47), n}):
        for largest in (True, False):
            same(lambda t: torch.topk(t, k, dim=1, largest=largest), x)
    same(lambda t: torch.topk(t, min(n, 3), dim=1, sorted=False), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int32, torch.int16, torch.int8,
                                   torch.uint8, torch.int64])
def test_topk_ties_in_every_dtype(dtype):
    x = ties((40, 300), 3, dtype, 7)
    same(lambda t: torch.topk(t, 4, dim=1), x)        # heap path (4 * 64 <= 300)
    same(lambda t: torch.topk(t, 30, dim=1, largest=False), x)   # nth_element path


def test_topk_nan_ranks_largest_like_the_cpu():
    x = ties((8, 100), 3, torch.float32, 3)
    x[0, 5] = x[0, 50] = x[3, 0] = float("nan")
    for k in (1, 2, 10, 100):
        same(lambda t: torch.topk(t, k, dim=1), x)
        same(lambda t: torch.topk(t, k, dim=1, largest=False), x)


def test_topk_along_a_leading_dim():
    x = ties((64, 5, 3), 2, torch.float32, 11)
    same(lambda t: torch.topk(t, 6, dim=0), x)


def test_router_with_equal_scores_picks_cpus_experts():
    """a zero-initialised router: every token's scores tie after softmax"""
    logits = torch.zeros(32, 64)
    same(lambda t: torch.topk(torch.softmax(t, dim=-1), 8, dim=-1), logits)


@pytest.mark.parametrize("n", [2, 3, 16, 17, 100, 2000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64, torch.bool])
def test_unstable_sort_leaves_ties_as_the_cpu(n, dtype):
    x = ties((9, n), 2 if dtype == torch.bool else 3, dtype, n)
    for desc in (False, True):
        same(lambda t: torch.sort(t, dim=1, descending=desc), x)
        same(lambda t: torch.sort(t, dim=0, descending=desc), x)
    same(lambda t: (torch.argsort(t, dim=1),), x)


def test_stable_sort_stays_stable():
    x = ties((4, 500), 2, torch.float32, 1)
    same(lambda t: torch.sort(t, dim=1, stable=True), x)


def test_int64_beyond_int32_still_sorts():
    x = torch.tensor([[1 << 40, 3, -(1 << 40), 3, 0]])
    got = torch.topk(x.to(NEURON), 3, dim=1)
    want = torch.topk(x, 3, dim=1)
    assert torch.equal(got[0].cpu(), want[0])   # values exact; ties of larger ints may order differently


@pytest.mark.parametrize("n,rows", [(32000, 1), (151936, 2), (50000, 3)])
def test_rows_longer_than_a_partition_still_break_ties_as_the_cpu(n, rows):
    """a vocabulary-sized row (top-p sampling sorts one): laid over several
    partitions and ranked whole by one GpSimd topk (span)"""
    x = ties((rows, n), 5, torch.float32, n)
    same(lambda t: torch.sort(t, dim=1, descending=True), x)
    same(lambda t: torch.topk(t, 50, dim=1), x)
    same(lambda t: torch.topk(t, 7, dim=1, largest=False), x)
    xi = ties((1, n), 3, torch.int32, n + 1)
    same(lambda t: torch.sort(t, dim=1), xi)
