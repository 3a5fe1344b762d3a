"""take / put, bucketize / searchsorted (aten/indexing/select.cpp) against CPU
PyTorch, natively, with CPU's errors."""
import pytest
import torch

import torch_neuronsim
from nsim_util import assert_native_matches

NEURON = torch.device("neuron")


native = assert_native_matches


@pytest.mark.parametrize("n", [1, 127, 129, 513])
def test_take_put(n):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, 3, generator=g)
    i = torch.randint(-3 * n, 3 * n, (7, 5), generator=g)
    native(torch.take, x, i)
    native(lambda t, j, s: t.clone().put_(j, s), x, i[0], torch.randn(5, generator=g))
    native(lambda t, j, s: t.clone().put_(j, s, accumulate=True), x, i.flatten(), torch.randn(35, generator=g))
    with pytest.raises(IndexError, match="out of range"):
        torch.take(x.to(NEURON), torch.tensor([3 * n], device=NEURON))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("right", [False, True])
def test_searches(dtype, right):
    g = torch.Generator().manual_seed(3)
    b = torch.randn(129, generator=g).sort().values.to(dtype)
    v = torch.cat([torch.randn(300, generator=g), b[:20].float(), torch.tensor([float("nan"), float("inf")])]).to(dtype)
    native(lambda s, t: torch.bucketize(t, s, right=right), b, v)
    native(lambda s, t: torch.bucketize(t, s, right=right, out_int32=True), b, v)
    seq = torch.randn(4, 33, generator=g).sort().values.to(dtype)
    vals = torch.randn(4, 9, generator=g).to(dtype)
    native(lambda s, t: torch.searchsorted(s, t, right=right), seq, vals)
    perm = torch.randn(4, 33, generator=g).argsort()
    native(lambda s, t, p: torch.searchsorted(s, t, side="right" if right else "left", sorter=p),
           seq.gather(1, perm.argsort()), vals, perm)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_scatter_and_index_reduce(reduce, include_self, dtype):
    """through a dense slot per source element: duplicates, untouched
    positions, NaN, a src larger than the index"""
    g = torch.Generator().manual_seed(11)
    self_ = torch.randn(5, 129, generator=g).to(dtype)
    src = torch.randn(6, 257, generator=g).to(dtype)
    src[0, 3] = float("nan")
    idx = torch.randint(0, 129, (4, 200), generator=g)
    native(lambda s, i, x: s.scatter_reduce(1, i, x, reduce, include_self=include_self), self_, idx, src)
    native(lambda s, i, x: s.scatter_reduce(0, i[:, :5] % 5, x, reduce, include_self=include_self), self_, idx, src)
    # index_reduce's bf16 mean runs on the CPU (it accumulates in bf16 there)
    if reduce != "sum" and not (reduce == "mean" and dtype != torch.float32):
        source = torch.randn(5, 300, generator=g).to(dtype)
        ii = torch.randint(0, 129, (300,), generator=g)
        native(lambda s, i, x: s.index_reduce(1, i, x, reduce, include_self=include_self), self_, ii, source)


@pytest.mark.parametrize("n", [1, 127, 129, 513])
def test_masked_select_and_nonzero(n):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(3, n, generator=g)
    m = torch.rand(n, generator=g) > 0.5
    native(torch.masked_select, x, m)
    native(lambda t: torch.nonzero_static(t > 0, size=n), x)
    native(lambda t: torch.nonzero_static(t > 0, size=2, fill_value=-7), x)
    native(torch.nonzero, torch.tensor(3.0))
    native(torch.nonzero, torch.tensor(0.0))
    with pytest.raises(RuntimeError, match="single memory location"):
        xd = x.to(NEURON)
        torch.masked_select(xd, torch.ones_like(xd, dtype=torch.bool), out=xd.view(-1))


@pytest.mark.parametrize("n", [1, 129, 513])
def test_masked_scatter(n):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(4, n, generator=g)
    m = torch.rand(n, generator=g) > 0.3
    src = torch.randn(4 * n, generator=g)
    native(lambda t, k, s: t.clone().masked_scatter_(k, s), x, m, src)
    with pytest.raises(RuntimeError):
        x.to(NEURON).masked_scatter_(torch.ones(n, dtype=torch.bool, device=NEURON), src[:1].to(NEURON))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32], ids=str)
def test_index_ops_on_scalars_fills_masks_and_products(dtype):
    """0-dim selves as CPU's one-element rows; index_fill_ (negative
    indices from the end, CPU's IndexError past the ends); bool-mask
    index_put through the native nonzero; an int32 gather index; the legacy
    scatter(reduce=) and prod reductions into positions"""
    g = torch.Generator().manual_seed(0)
    s, i1 = torch.tensor(2.5).to(dtype), torch.tensor([0])
    assert_native_matches(lambda t, i: torch.index_select(t, 0, i), s, i1)
    assert_native_matches(lambda t, i, v: t.index_copy(0, i, v), s, i1, torch.tensor(7.0).to(dtype))
    assert_native_matches(lambda t, i, v: t.index_add(0, i, v, alpha=2), s, i1, torch.tensor(7.0).to(dtype))
    assert_native_matches(lambda t, i: t.index_fill(0, i, -8.5), s, i1)
    x = torch.randn(10, 5, generator=g).mul(4).to(dtype)
    assert_native_matches(lambda t, i: t.index_fill(1, i, -2.0), x, torch.tensor([0, -1, 2, 0]))
    assert_native_matches(lambda t, i, v: t.index_fill(0, i, v), x, torch.tensor([3, 1]), torch.tensor(4.0).to(dtype))
    for bad in ([0, 5], [-6]):
        with pytest.raises(IndexError, match="out of bounds"):
            x.to("neuron").index_fill(1, torch.tensor(bad, device="neuron"), 1.0)
    idx = torch.randint(0, 10, (5, 5), generator=g)
    assert_native_matches(lambda t, i: torch.gather(t, 0, i), x, idx.int())
    m = torch.tensor([True, True, False, True, False])
    assert_native_matches(lambda t, mm, v: t.index_put((mm,), v), x[:5], m, torch.arange(5.0).to(dtype))
    assert_native_matches(lambda t, mm, v: t.index_put((mm,), v, accumulate=True), x[:5], m, torch.arange(5.0).to(dtype))
    assert_native_matches(lambda t, mm: t.index_put((mm,), torch.tensor(9, device=t.device).to(dtype)), x, x > 0)
    if dtype.is_floating_point:
        src = torch.randn(5, 5, generator=g).to(dtype)
        assert_native_matches(lambda t, i, v: t.scatter(0, i, v, reduce="add"), x, idx, src)
        assert_native_matches(lambda t, i, v: t.scatter(0, i, v, reduce="multiply"), x, idx, src)
        for inc in (True, False):
            assert_native_matches(lambda t, i, v: t.scatter_reduce(0, i, v, "prod", include_self=inc), x, idx, src)
            assert_native_matches(lambda t, i, v: t.index_reduce(0, i, v, "prod", include_self=inc), x,
                                  torch.tensor([1, 3, 1, 0, 9]), src)
        assert_native_matches(lambda t, i, v: t.index_reduce(0, i, v, "prod"), s, i1, torch.tensor(3.0).to(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("reduce", ["max", "min", "sum", "mean", "prod"])
def test_segment_reduce(reduce, dtype):
    """CPU's segment_reduce: initial folded into every segment (empty ones
    keep it; NaN for an empty mean without), lengths or offsets; bf16
    against float64 (CPU sums bf16 segments in bf16: 4% off over 77
    elements); other axes and bad lengths run on the CPU, counted"""
    g = torch.Generator().manual_seed(9)
    d = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]).to(dtype)
    x2 = torch.randn(129, 3, generator=g).to(dtype)
    for init in (None, 10.0, -10.0):
        native(lambda x, l: torch.segment_reduce(x, reduce, lengths=l, initial=init), d, torch.tensor([0, 1, 2, 2]))
        native(lambda x, o: torch.segment_reduce(x, reduce, offsets=o, initial=init), d, torch.tensor([0, 0, 1, 3, 5]))
        fn = (lambda x, l: torch.segment_reduce(x, reduce, lengths=l, initial=init))
        lengths = torch.tensor([0, 50, 1, 0, 77, 1])
        before = torch_neuronsim.stats()["cpu_fallbacks"]
        got = fn(x2.to(NEURON), lengths.to(NEURON)).cpu()
        assert torch_neuronsim.stats()["cpu_fallbacks"] == before
        exact = dtype == torch.bfloat16 or reduce == "prod"   # CPU's products of 77 factors round 77 times
        want = fn(x2.double(), lengths).to(dtype) if exact else fn(x2, lengths)
        torch.testing.assert_close(got, want, equal_nan=True, rtol=1.6e-2, atol=1e-2 if dtype == torch.bfloat16 else 1e-5)
    before = torch_neuronsim.stats()["cpu_fallbacks"]
    with pytest.raises(RuntimeError):
        torch.segment_reduce(d.to(NEURON), reduce, lengths=torch.tensor([1, 1], device=NEURON))
    assert torch_neuronsim.stats()["cpu_fallbacks"] == before + 1


def test_in_place_shapes_and_index_types_raise_as_cpu():
    a = torch.ones(3, dtype=torch.int32, device=NEURON)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        a.bitwise_and_(torch.ones(2, 3, dtype=torch.int32, device=NEURON))
    assert a.shape == (3,)
    with pytest.raises(IndexError, match="int64"):
        torch.zeros(5, device=NEURON).index_fill_(0, torch.tensor([1], dtype=torch.int32, device=NEURON), 1.0)


def test_narrow_copy_checks_as_cpu():
    """a non-negative dim past the last is CPU's RuntimeError (wrapping
    would give IndexError); starts and lengths as CPU checks them"""
    x = torch.randn(10, 5, 20)
    native(lambda t: torch.narrow_copy(t, 1, -2, 2), x)
    native(lambda t: torch.narrow_copy(t, 2, 5, 3), x)
    for args, err in [((3, 0, 0), RuntimeError), ((-4, 0, 0), IndexError), ((1, 6, 0), IndexError),
                      ((1, 2, 4), RuntimeError)]:
        with pytest.raises(err):
            torch.narrow_copy(x.to(NEURON), *args)
        with pytest.raises(err):
            torch.narrow_copy(x, *args)
