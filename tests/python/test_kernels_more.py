"""Native kernels beyond elementwise and matmul: row-wise ops (reductions,
softmax, layer_norm), DMA copies and casts, index ops, fills, comparisons and
selects, attention, int64 arithmetic.  Values against CPU PyTorch; the
covered calls must run without any CPU fallback."""
import math

import pytest
import torch
import torch.nn.functional as F

import torch_neuronsim

NEURON = torch.device("neuron")
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
       torch.float16: dict(rtol=1e-3, atol=1e-3)}


def dev(v):
    if isinstance(v, torch.Tensor):
        return v.to(NEURON)
    if isinstance(v, (list, tuple)):
        return type(v)(dev(e) for e in v)
    if isinstance(v, dict):
        return {k: dev(e) for k, e in v.items()}
    return v


def native(fn, *args, exact=False, tol=None, **kw):
    """fn on CPU and on neuron: same values, dtype and shape, zero fallbacks"""
    want = fn(*args, **kw)
    torch_neuronsim.reset_stats()
    got = fn(*dev(args), **dev(kw))
    s = torch_neuronsim.stats()
    assert s["cpu_fallbacks"] == 0, s["fallback_ops"]
    outs = got if isinstance(got, tuple) else (got,)
    wants = want if isinstance(want, tuple) else (want,)
    for g, w in zip(outs, wants):
        assert g.device.type == "neuron" and g.dtype == w.dtype and g.shape == w.shape, (g, w)
        if exact:
            torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0, equal_nan=True)
        else:
            torch.testing.assert_close(g.cpu(), w, **(tol or TOL.get(w.dtype, {})), equal_nan=True)
    return got


DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# last dims: one element, odd, several 128-row tiles of rows
SHAPES = [(1,), (7, 1), (3, 77), (300, 129), (2, 5, 64)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_reductions_and_softmax(shape, dtype):
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(shape, generator=g).to(dtype)
    sum_tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else None
    native(lambda t: t.sum(-1), x, tol=sum_tol)
    native(lambda t: t.mean(-1, keepdim=True), x, tol=sum_tol)
    native(lambda t: t.sum(0), x, tol=sum_tol)
    native(lambda t: t.amax(-1), x, exact=True)
    native(lambda t: t.amin(0), x, exact=True)
    native(lambda t: t.argmax(-1), x, exact=True)
    native(lambda t: t.max(dim=-1), x, exact=True)
    native(lambda t: t.argmin(-1), x, exact=True)
    native(lambda t: t.min(dim=0), x, exact=True)
    native(lambda t: t.softmax(-1), x)
    native(lambda t: t.softmax(0), x)
    native(lambda t: t.log_softmax(-1), x, tol=dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else None)
    native(lambda t: t.sum(), x, tol=dict(rtol=1e-4, atol=1e-3) if dtype == torch.float32 else None)
    native(lambda t: t.sum(-1, dtype=torch.float32), x, tol=dict(rtol=1e-4, atol=1e-4))


def test_long_flat_reduction_takes_two_passes():
    x = torch.randn(300 * 77)
    native(lambda t: t.sum(), x, tol=dict(rtol=1e-4, atol=1e-3))
    native(lambda t: t.amax(), x, exact=True)
    native(lambda t: t.mean(), x.bfloat16())


@pytest.mark.parametrize("cols", [40000, 151936, 50257])
def test_argmax_of_rows_longer_than_sbuf_in_two_passes(cols):
    """greedy decoding's argmax over a vocabulary: chunks' max and arg, then
    the arg of the chunks (the row padded with -inf / +inf when no chunk
    size divides it); the first occurrence wins, as on CPU"""
    g = torch.Generator().manual_seed(cols)
    x = torch.randn(3, cols, generator=g)
    x[0, 7] = x[0, cols - 5] = 9.0                   # a tie across chunks: the first
    x[1, cols // 2] = x[1, cols // 2 + 1] = -9.0
    for f in (torch.argmax, torch.argmin):
        native(lambda t: f(t, -1), x, exact=True)
        native(lambda t: f(t, 1, keepdim=True), x, exact=True)
    native(lambda t: torch.max(t, -1), x, exact=True)
    native(lambda t: torch.argmax(t), x, exact=True)
    native(lambda t: torch.argmax(t, 0), x.t().contiguous()[:, :2], exact=True)


@pytest.mark.parametrize("cols", [10, 1000, 40000])
def test_argmax_of_a_row_with_nan_is_its_first_nan(cols):
    x = torch.randn(4, cols)
    x[1, cols - 1] = x[1, cols // 3] = float("nan")
    x[2, :] = float("nan")
    x[3, 1] = float("inf")
    for f in (torch.argmax, torch.argmin):
        native(lambda t: f(t, -1), x, exact=True)
    native(lambda t: torch.max(t, -1), x, exact=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm(dtype):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 130, 96, generator=g).to(dtype)
    w, b = torch.randn(96, generator=g).to(dtype), torch.randn(96, generator=g).to(dtype)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    native(lambda t, ww, bb: F.layer_norm(t, [96], ww, bb), x, w, b, tol=tol)
    native(lambda t: torch.native_layer_norm(t, [96], None, None, 1e-5), x, tol=tol)
    native(lambda t: F.layer_norm(t, [130, 96]), x, tol=tol)
    native(lambda t, ww: F.rms_norm(t, [96], ww, 1e-6), x, w, tol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool])
def test_copies_views_and_casts(dtype):
    x = (torch.randn(3, 40, 50) * 100).to(dtype)
    native(lambda t: t.transpose(0, 2).contiguous(), x, exact=True)
    native(lambda t: t[:, ::3, 1:].contiguous(), x, exact=True)
    native(lambda t: t[0:1].expand(5, 40, 50).contiguous(), x, exact=True)
    native(lambda t: t.reshape(-1)[: 4097 * 3].clone(), x, exact=True)
    if dtype.is_floating_point:
        native(lambda t: t.to(torch.float16), x, exact=True)
        native(lambda t: t.float(), x, exact=True)
    y = torch.zeros(4, 6, dtype=dtype)
    yd = y.to(NEURON)
    yd[:, 2:4] = x[0, :4, :2].to(NEURON)
    y[:, 2:4] = x[0, :4, :2]
    assert torch.equal(yd.cpu(), y)


def test_overlapping_copy_goes_through_a_buffer():
    z = torch.arange(12.).reshape(3, 4)
    zd = z.to(NEURON)
    zd[1:].copy_(zd[:-1].clone())
    z[1:].copy_(z[:-1].clone())
    assert torch.equal(zd.cpu(), z)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_index_ops(dtype):
    g = torch.Generator().manual_seed(5)
    w = (torch.randn(50, 16, generator=g) * 50).to(dtype)
    i = torch.randint(0, 50, (300,), generator=g)
    native(lambda t, j: t.index_select(0, j), w, i, exact=True)
    native(lambda t, j: t.index_select(1, j), w, torch.tensor([1, 5, 5]), exact=True)
    if dtype.is_floating_point:
        native(lambda j, t: F.embedding(j, t), i.view(3, 100), w, exact=True)
    native(lambda t, j: torch.gather(t, 1, j), w, torch.randint(0, 16, (50, 4), generator=g), exact=True)
    native(lambda t, j: torch.gather(t, 0, j), w, torch.randint(0, 50, (7, 16), generator=g), exact=True)
    src = (torch.randn(3, 16, generator=g) * 9).to(dtype)
    native(lambda t, j, s: t.index_copy(0, j, s), w, torch.tensor([49, 0, 7]), src, exact=True)
    c = torch.zeros(1, 2, 16, 8, dtype=dtype)
    kv = (torch.randn(1, 2, 3, 8, generator=g) * 9).to(dtype)
    cd = c.to(NEURON)
    cd.index_copy_(2, torch.tensor([4, 5, 6]).to(NEURON), kv.to(NEURON))
    c.index_copy_(2, torch.tensor([4, 5, 6]), kv)
    assert torch.equal(cd.cpu(), c)


def test_out_of_range_index_is_an_error_not_a_corruption():
    w = torch.randn(50, 16)
    wd = w.to(NEURON)
    for bad in ([50], [-1]):
        with pytest.raises(IndexError, match="index out of range in self"):
            wd.index_select(0, torch.tensor(bad).to(NEURON)).cpu()
    with pytest.raises(IndexError, match="index 60 is out of bounds for dimension 0 with size 50"):
        wd.index_copy_(0, torch.tensor([3, 60]).to(NEURON), torch.ones(2, 16).to(NEURON))
    assert torch.equal(wd.cpu(), w)


def test_cat_arange_and_fills():
    a, b = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    native(lambda x, y: torch.cat([x, y], 1), a, b, exact=True)
    native(lambda x, y: torch.cat([x, y.bfloat16()], -1), a, a, exact=True)
    native(lambda x: torch.cat([x, x, x]), torch.arange(5), exact=True)
    # 2 * 128 * 2048 + 5: a last tile of exactly 128 full rows plus a tail
    for args in [(5, 1000, 3), (300001,), (7.,), (2, 9), (2 * 128 * 2048 + 5,)]:
        want = torch.arange(*args)
        torch_neuronsim.reset_stats()
        got = torch.arange(*args, device=NEURON)
        assert torch_neuronsim.stats()["cpu_fallbacks"] == 0
        assert torch.equal(got.cpu(), want) and got.dtype == want.dtype
    for shape, v, dt in [((3, 1000), 0, torch.float32), ((5, 7), 2.5, torch.bfloat16),
                         ((300001,), -7, torch.int64), ((9,), True, torch.bool),
                         ((3,), 2**40 + 3, torch.int64), ((4,), -5, torch.int8),
                         ((2 * 128 * 2048 + 5,), 1.25, torch.float32)]:
        torch_neuronsim.reset_stats()
        got = torch.full(shape, v, dtype=dt, device=NEURON)
        assert torch_neuronsim.stats()["cpu_fallbacks"] == 0
        assert torch.equal(got.cpu(), torch.full(shape, v, dtype=dt))
    x = torch.randn(4, 6)
    xd = x.to(NEURON)
    xd[:, 1:3].fill_(0.5)
    x[:, 1:3].fill_(0.5)
    assert torch.equal(xd.cpu(), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_comparisons_where_masked_fill(dtype):
    g = torch.Generator().manual_seed(9)
    a, b = torch.randn(5, 7, generator=g).to(dtype), torch.randn(7, generator=g).to(dtype)
    a[0, 0] = float("nan")
    for f in (torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge):
        native(f, a, b, exact=True)
        native(lambda x: f(x, 0.5), a, exact=True)
    m = a > 0
    native(torch.where, m, a, b, exact=True)
    native(lambda c, x: torch.where(c, x, 0.0), m, a, exact=True)
    native(lambda x, c: x.masked_fill(c, float("-inf")), a, m, exact=True)
    native(lambda x, c: x.masked_fill(c[0], 3.0), a, m, exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", ["plain", "causal", "float_mask", "bool_mask", "scale", "gqa", "cross"])
def test_scaled_dot_product_attention(case, dtype):
    g = torch.Generator().manual_seed(11)
    q = torch.randn(2, 4, 9, 16, generator=g).to(dtype)
    kv_heads = 2 if case == "gqa" else 4
    s = 9 if case == "causal" else 11
    k = torch.randn(2, kv_heads, s, 16, generator=g).to(dtype)
    v = torch.randn(2, kv_heads, s, 16, generator=g).to(dtype)
    kw = {"causal": dict(is_causal=True), "float_mask": dict(attn_mask=torch.randn(9, s, generator=g).to(dtype)),
          "bool_mask": dict(attn_mask=torch.rand(2, 1, 9, s, generator=g) > 0.3), "scale": dict(scale=0.3),
          "gqa": dict(enable_gqa=True)}.get(case, {})
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    native(lambda *t, **k2: F.scaled_dot_product_attention(*t, **k2), q, k, v, tol=tol, **kw)


def test_int64_arithmetic_is_exact():
    a = torch.tensor([0, 5, -3, 2**31 - 1, -2**31, 2**40 + 7, -2**40, 2**32 - 1, 123456789012])
    b = torch.tensor([1, -9, 3, 1, -1, 2**33, 5, 1, -987654321])
    native(torch.add, a, b, exact=True)
    native(torch.sub, a, b, exact=True)
    native(lambda x: x + 7, a, exact=True)
    native(lambda x: x - 2**35, a, exact=True)
    native(lambda x, y: x[:, None] + y[None, :], a, b, exact=True)
    in32 = a[(a >= -2**31) & (a < 2**31)]        # wider values: see test_int64_to_float_rounds_like_cpu
    native(lambda x: x.float(), in32, exact=True)
    native(lambda x: x.bfloat16(), in32, exact=True)
    g = torch.Generator().manual_seed(1)
    r = torch.randint(-2**62, 2**62, (5000,), generator=g)
    s = torch.randint(-2**62, 2**62, (5000,), generator=g)
    native(torch.add, r, s, exact=True)
    native(torch.sub, r, s, exact=True)


def test_in_place_and_out_forms():
    a, b = torch.randn(5, 4), torch.randn(4)
    ad = a.to(NEURON)
    torch_neuronsim.reset_stats()
    ad += b.to(NEURON)
    ad *= 2
    ad -= 1
    ad /= 3
    o = torch.empty(0, device=NEURON)
    torch.add(a.to(NEURON), b.to(NEURON), out=o)
    i = torch.arange(5).to(NEURON)
    i += 3
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0
    assert torch.equal(ad.cpu(), ((a + b) * 2 - 1) / 3)
    assert torch.equal(o.cpu(), a + b)
    assert torch.equal(i.cpu(), torch.arange(3, 8))


OPINFO = ["sum", "mean", "amax", "amin", "argmax", "softmax", "log_softmax", "nn.functional.layer_norm",
          "where", "eq", "ne", "lt", "le", "gt", "ge", "masked_fill", "cat", "index_select", "gather",
          "index_copy", "nn.functional.embedding", "nn.functional.scaled_dot_product_attention",
          "addcmul", "lerp", "baddbmm", "var", "std", "tril", "triu", "isin", "cumsum", "all", "any",
          "bitwise_and", "bitwise_not", "logical_not", "max:reduction_no_dim", "argmin",
          "min:reduction_with_dim", "max:reduction_with_dim", "nn.functional.rms_norm", "index_put", "topk", "isnan", "sort",
          "scatter", "scatter_add", "index_add"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", OPINFO)
def test_opinfo_samples(name, dtype):
    """PyTorch's own OpInfo samples (scalars, empty, broadcast, non-contiguous):
    native where covered, the fallback elsewhere, always CPU's values."""
    from torch.testing._internal.common_methods_invocations import op_db
    base, _, variant = name.partition(":")
    info = [o for o in op_db if o.name == base and o.variant_test_name == variant][0]
    if dtype not in info.supported_dtypes("cpu"):
        pytest.skip(f"{name}: no CPU {dtype}")
    n = 0
    for sample in info.sample_inputs("cpu", dtype):
        if name == "nn.functional.scaled_dot_product_attention" and sample.kwargs.get("dropout_p", 0):
            continue
        want = info.op(sample.input, *sample.args, **sample.kwargs)
        got = info.op(dev(sample.input), *dev(sample.args), **dev(sample.kwargs))
        tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
        if name in ("topk", "sort"):
            # tied values may come in either index order (PyTorch does not
            # specify it): the values must match and the indices point at them
            torch.testing.assert_close(got[0].cpu(), want[0], equal_nan=True, **tol)
            dim = (sample.args[1] if len(sample.args) > 1 else sample.kwargs.get("dim", -1)) if name == "topk" \
                else (sample.args[0] if sample.args and isinstance(sample.args[0], int) else sample.kwargs.get("dim", -1))
            if sample.input.dim():
                torch.testing.assert_close(sample.input.gather(dim, got[1].cpu()), got[0].cpu(), equal_nan=True)
        elif isinstance(want, tuple):
            for g, w in zip(got, want):
                torch.testing.assert_close(g.cpu(), w, equal_nan=True, **tol, msg=lambda m: f"{sample}: {m}")
        else:
            torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol, msg=lambda m: f"{sample}: {m}")
        n += 1
    assert n > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_scatter_family_accumulates_repeats_natively(dtype):
    """scatter_add / index_add / index_put(accumulate=True) add every repeat
    of an index (DMA scatter_add, rows in order), scatter writes; all native."""
    g = torch.Generator().manual_seed(5)

    def rnd(*shape):
        t = torch.randn(*shape, generator=g) * 4
        return t.to(dtype) if dtype.is_floating_point else t.round().to(dtype)

    x = rnd(5, 7)
    idx = torch.randint(0, 7, (5, 9), generator=g)
    idx[:, :3] = 2                                         # repeats
    rows = torch.tensor([4, 0, 4, 4])
    src, src4 = rnd(5, 9), rnd(4, 7)
    cases = [
        (lambda a, i, b: a.scatter_add(1, i, b), idx, src),
        (lambda a, i, b: a.scatter_add(0, i, b), idx[:, :7].remainder(5), src),
        # (alpha != 1 multiplies first: int32 multiply is not native yet)
        (lambda a, i, b: a.index_add(0, i, b, alpha=2 if dtype.is_floating_point else 1), rows, src4),
        (lambda a, i, b: a.index_put((i,), b, accumulate=True), rows, src4),
        (lambda a, i, b: torch.zeros_like(a).scatter_add_(1, i, b), idx, src),
    ]
    for k, (f, i, b) in enumerate(cases):
        want = f(x, i, b)
        torch_neuronsim.reset_stats()
        got = f(x.to(NEURON), i.to(NEURON), b.to(NEURON))
        s = torch_neuronsim.stats()
        assert s["cpu_fallbacks"] == 0, (k, s["fallback_ops"])
        if dtype == torch.int32:
            assert torch.equal(got.cpu(), want), k
        else:
            tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=0.25)
            torch.testing.assert_close(got.cpu(), want, **tol)
    # scatter (no reduce) with distinct targets per row, src and value forms
    uidx = torch.stack([torch.randperm(7, generator=g)[:4] for _ in range(5)])
    for f in (lambda a, i, b: a.scatter(1, i, b), lambda a, i, b: a.scatter(1, i, 3)):
        torch_neuronsim.reset_stats()
        got = f(x.to(NEURON), uidx.to(NEURON), src.to(NEURON))
        assert torch_neuronsim.stats()["cpu_fallbacks"] == 0
        assert torch.equal(got.cpu(), f(x, uidx, src))


def test_scatter_out_of_range_is_an_error_and_leaves_self_alone():
    x = torch.zeros(3, 4, device=NEURON)
    for bad in (4, -1, 100):
        with pytest.raises(RuntimeError, match="is out of bounds for dimension 1 with size 4"):
            x.scatter_add(1, torch.tensor([[0, bad]], device=NEURON), torch.ones(1, 2, device=NEURON))
    assert torch.equal(x.cpu(), torch.zeros(3, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape,dim", [((3, 5), -1), ((4, 100), -1), ((2, 4096), -1), ((2, 5000), 1),
                                       ((3, 33000), -1), ((70, 7), 0), ((130, 300), -1), ((2, 3, 65), 1)])
def test_sort_bitonic_matches_cpu_stable_with_nan_inf_ties(dtype, shape, dim):
    """Rows of any length up to 2^19 (one partition per row up to 4096, then
    rows spread over partitions with a relayout through HBM): values and
    stable indices equal CPU's, NaN last (first descending), +-inf and ties."""
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(*shape, generator=g).to(dtype)
    flat = x.view(-1)
    flat[5:9] = 1.0                                            # ties
    flat[10], flat[11], flat[2] = float("inf"), -float("inf"), float("nan")
    flat[-1] = float("nan")
    for desc in (False, True):
        torch_neuronsim.reset_stats()
        gv, gi = torch.sort(x.to(NEURON), dim=dim, descending=desc, stable=True)
        s = torch_neuronsim.stats()
        assert s["cpu_fallbacks"] == 0, s["fallback_ops"]
        wv, wi = torch.sort(x, dim=dim, descending=desc, stable=True)
        assert torch.equal(gv.cpu().nan_to_num(7.0), wv.nan_to_num(7.0))
        assert torch.equal(gi.cpu(), wi)


def test_topk_beyond_64_and_with_nan_through_sort():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 1000, generator=g)
    x[1, 17] = float("nan")
    for k, largest in ((100, True), (300, False), (5, True)):
        torch_neuronsim.reset_stats()
        gv, gi = torch.topk(x.to(NEURON), k, largest=largest)
        assert torch_neuronsim.stats()["cpu_fallbacks"] == 0
        wv, wi = torch.topk(x, k, largest=largest)
        assert torch.equal(gv.cpu().nan_to_num(7.0), wv.nan_to_num(7.0))
        assert torch.equal(x.gather(1, gi.cpu()).nan_to_num(7.0), wv.nan_to_num(7.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_scalar_comparisons_round_the_scalar_to_the_tensor_dtype(dtype):
    """PyTorch compares x <op> s at x's dtype: s rounded to it (0.1 on bf16
    is 0.10009765625), out-of-range scalars becoming inf."""
    x = torch.tensor([0.1, 0.2, 0.10009765625, float("nan"), 1e30, 65504, -1e38]).to(dtype)
    torch_neuronsim.reset_stats()
    for s in (0.1, 0.1000000014901161, 0.2, float("nan"), float("inf"), 1e40, 3, 1e5, -1e39):
        for op in ("le", "eq", "gt", "ne", "lt", "ge"):
            assert torch.equal(getattr(x.to(NEURON), op)(s).cpu(), getattr(x, op)(s)), (s, op)
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0


@pytest.mark.parametrize("src", [torch.float32, torch.bfloat16, torch.float16])
def test_float_to_int_casts_match_cpu(src):
    """Truncation toward zero; NaN / out-of-int32 values as CPU PyTorch gives
    them (INT32_MIN, narrower types its low bits); bool is x != 0; int64
    exact for every value (both words beyond int32, INT64_MIN for NaN,
    infinities and |x| >= 2^63), all native."""
    vals = [1.7, -1.7, 0.0, 3e9, -2.5, float("nan"), 2147483520.0, -2147483648.0, 255.9, -129.3,
            65535.5, 1e20, -0.3, float("inf"), -float("inf")]
    x = torch.tensor(vals).to(src)
    for dt in (torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.int64):
        torch_neuronsim.reset_stats()
        got = x.to(NEURON).to(dt)
        fb = torch_neuronsim.stats()["cpu_fallbacks"]
        assert torch.equal(got.cpu(), x.to(dt)), dt
        assert fb == 0, dt
    small = torch.tensor([1.5, -2.7, 100.0, -0.0, 60000.0]).to(src)
    torch_neuronsim.reset_stats()
    assert torch.equal(small.to(NEURON).long().cpu(), small.long())
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.int8, torch.uint8])
def test_small_integer_arithmetic_is_native_and_wraps(dtype):
    """add/sub/mul/maximum/minimum on int32 and narrower types (VectorE's
    exact integer ALU, wrapping like PyTorch), with broadcasting, Python-int
    operands, mixed bool, and true division / float scalars into float."""
    g = torch.Generator().manual_seed(9)
    info = torch.iinfo(dtype)
    a = torch.randint(info.min, info.max, (6, 9), generator=g).to(dtype)
    b = torch.randint(max(info.min, -7), min(info.max, 7), (9,), generator=g).to(dtype)
    b[b == 0] = 1
    fs = [lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, torch.maximum, torch.minimum,
          lambda x, y: x * 3, lambda x, y: x + 1, lambda x, y: x / y, lambda x, y: x / 2,
          lambda x, y: x * 2.5, lambda x, y: x + torch.ones_like(y, dtype=torch.bool)]
    for k, f in enumerate(fs):
        torch_neuronsim.reset_stats()
        got = f(a.to(NEURON), b.to(NEURON))
        assert torch_neuronsim.stats()["cpu_fallbacks"] == 0, (k, torch_neuronsim.stats()["fallback_ops"])
        assert torch.equal(got.cpu(), f(a, b)), k


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.int8, torch.uint8])
def test_small_integer_compare_neg_abs_clamp(dtype):
    """Comparisons (tensor and Python-int operands, wrapped into the dtype as
    CPU PyTorch does), neg, abs (wrapping at the minimum) and clamp on the
    exact integer ALU."""
    info = torch.iinfo(dtype)
    g = torch.Generator().manual_seed(2)
    x = torch.randint(info.min, info.max, (5, 8), generator=g).to(dtype)
    x[0, :2] = torch.tensor([info.min, info.max], dtype=dtype)
    y = torch.randint(info.min, info.max, (8,), generator=g).to(dtype)
    lo, hi = (1, 3) if dtype == torch.uint8 else (-3, 3)
    fs = [lambda t: t == 3, lambda t: t < y.to(t.device), lambda t: t >= 2**40, lambda t: t != 2**32 + 5,
          lambda t: t > 0, lambda t: -t, torch.abs, lambda t: t.clamp(lo, hi), lambda t: t.clamp(min=lo),
          lambda t: torch.where(t > 0, t, torch.zeros_like(t))]
    for k, f in enumerate(fs):
        torch_neuronsim.reset_stats()
        got = f(x.to(NEURON))
        assert torch_neuronsim.stats()["cpu_fallbacks"] == 0, (k, torch_neuronsim.stats()["fallback_ops"])
        assert torch.equal(got.cpu(), f(x)), k


def test_int64_to_float_rounds_like_cpu():
    """int64 -> float: one rounding of the 64-bit value for every value,
    natively (the kernel rounds to odd at 32 bits first, so large values do
    not round twice), always CPU's value."""
    g = torch.Generator().manual_seed(4)
    small = torch.randint(-2**31, 2**31, (2000,), generator=g)
    big = torch.randint(-2**62, 2**62, (2000,), generator=g)
    for x in (small, big):
        torch_neuronsim.reset_stats()
        got = x.to(NEURON).float()
        assert torch_neuronsim.stats()["cpu_fallbacks"] == 0
        assert torch.equal(got.cpu(), x.float())


def test_tensors_larger_than_sbuf():
    """Operands bigger than the whole SBUF (trn2: 128 x 224 KiB = 28 MiB)
    stream through it in tiles: values still CPU's."""
    g = torch.Generator().manual_seed(21)
    x = torch.randn(8192, 1024, generator=g)                    # 32 MiB
    native(lambda t: t.softmax(-1), x)
    native(lambda t: t.sum(-1), x, tol=dict(rtol=1e-4, atol=1e-4))
    native(lambda t: t.t().contiguous(), x, exact=True)
    a = torch.randn(256, 4096, generator=g).bfloat16()
    b = torch.randn(4096, 4096, generator=g).bfloat16()        # 32 MiB
    want = (a.float() @ b.float()).bfloat16()   # CPU's bf16 GEMM is slow; same values
    torch_neuronsim.reset_stats()
    got = a.to(NEURON) @ b.to(NEURON)
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0
    torch.testing.assert_close(got.cpu(), want, rtol=2e-2, atol=1e-1)


def test_integer_and_bool_ops_generation_loops_use():
    g = torch.Generator().manual_seed(2)
    a = torch.randint(-2**62, 2**62, (1000,), generator=g)
    b = torch.randint(-2**62, 2**62, (1000,), generator=g)
    native(torch.mul, a, b, exact=True)                       # exact mod 2^64
    native(lambda x: x * -300000, a, exact=True)
    native(lambda x, y: x * y, a[:3], torch.tensor(True), exact=True)
    native(lambda x, y: x * y, torch.tensor(True), torch.tensor(False), exact=True)
    for f in (torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge):
        native(f, a, b, exact=True)
        native(lambda x: f(x, 5), a, exact=True)
    native(lambda x: 1 - x, a, exact=True)
    m = torch.rand(1000, generator=g) > 0.5
    native(torch.where, m, a, b, exact=True)
    native(lambda x, c: x.masked_fill(c, 0), a, m, exact=True)
    native(lambda x, c: x & c, torch.tensor([1, 1, 0, 3]), torch.tensor([True, False, True, True]), exact=True)
    native(lambda x: ~x, a, exact=True)
    native(lambda x: ~x, m, exact=True)
    native(lambda x: x.long(), m, exact=True)
    native(lambda x: x.bool(), a, exact=True)
    native(lambda x: x.int(), a, exact=True)
    native(lambda x: x.sum(), m, exact=True)
    native(lambda x: x.all(), m, exact=True)
    native(lambda x: x.any(), torch.zeros(5, dtype=torch.bool), exact=True)
    native(lambda x: x.max(), a, exact=True)
    native(lambda x: x.min(), a[:7], exact=True)
    native(lambda x, t: torch.isin(x, t), torch.tensor([[3, 5, 7, 0]]), torch.tensor([5, 0]), exact=True)
    native(lambda x: x.cumsum(-1), torch.tensor([[0, 1, 1, 0, 1, 1, 1, 1, 1, 1]]), exact=True)
    native(lambda x: x.cumsum(0), a[:37], exact=True)
    x = torch.randn(5, 6, 7, generator=g)
    native(lambda t, i: t[i], x, torch.tensor([4, -1, 0]), exact=True)
    native(lambda t, i, j: t[i, j], x, torch.tensor([4, -1, 0]), torch.tensor([[1], [5]]), exact=True)


def test_device_timeline_names_each_program_by_its_aten_op():
    torch_neuronsim.reset_stats()
    a = torch.randn(64, 64).to(NEURON)
    s = (a @ a).relu().sum()
    tl = torch_neuronsim.device_timeline()
    assert [r["op"] for r in tl] == ["aten::mm", "aten::relu", "aten::sum"]
    assert all(r["end_ps"] > r["start_ps"] for r in tl)
    assert all(x["end_ps"] <= y["start_ps"] for x, y in zip(tl, tl[1:]))   # one stream, in order
    st = torch_neuronsim.stats()
    assert sum(r["end_ps"] - r["start_ps"] for r in tl) // 1000 == pytest.approx(st["kernel_time_ns"], abs=3)
    assert tl[0]["engine_busy_ps"]["tensor"] > 0 and tl[1]["engine_busy_ps"]["tensor"] == 0
    assert torch_neuronsim.timeline_dropped() == 0
    assert float(s.cpu()) == pytest.approx(float((a.cpu() @ a.cpu()).relu().sum()), rel=1e-4)


INT_OPINFO = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "eq", "ne", "lt", "ge", "cumsum",
              "isin", "cat", "index_select", "masked_fill", "add", "sub", "mul", "where", "sum", "any", "all"]


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("name", INT_OPINFO)
def test_opinfo_samples_integer(name, dtype):
    """integer and bool samples: native where covered (int64 exactly, on word
    pairs), the counted fallback elsewhere, always CPU's values"""
    from torch.testing._internal.common_methods_invocations import op_db
    info = [o for o in op_db if o.name == name and o.variant_test_name == ""][0]
    if dtype not in info.supported_dtypes("cpu"):
        pytest.skip(f"{name}: no CPU {dtype}")
    n = 0
    for sample in info.sample_inputs("cpu", dtype):
        want = info.op(sample.input, *sample.args, **sample.kwargs)
        got = info.op(dev(sample.input), *dev(sample.args), **dev(sample.kwargs))
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, msg=lambda m: f"{sample}: {m}")
        n += 1
    assert n > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_index_put_writes_rows_in_place(dtype):
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(6, 5, generator=g) * 9).to(dtype)
    i, j = torch.tensor([4, -1, 0]), torch.tensor([1, 2, 2])
    v = (torch.randn(3, 5, generator=g) * 9).to(dtype)
    for idx, val in (((i,), v), ((i,), torch.tensor(3).to(dtype)), ((i, j), v[:, 0])):
        want = x.clone()
        want[idx] = val
        got = x.to(NEURON)
        torch_neuronsim.reset_stats()
        got[tuple(t.to(NEURON) for t in idx)] = val.to(NEURON)
        assert torch_neuronsim.stats()["cpu_fallbacks"] == 0
        assert torch.equal(got.cpu(), want)
    xd = x.to(NEURON)
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 0 with size 6"):
        xd[torch.tensor([9]).to(NEURON)] = v[:1].to(NEURON)
        xd.cpu()
    assert torch.equal(xd.cpu(), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_topk_and_isnan(dtype):
    g = torch.Generator().manual_seed(12)
    x = torch.randn(3, 100, generator=g).to(dtype)
    for k, largest, dim in ((5, True, -1), (1, True, -1), (7, False, -1), (0, True, -1), (3, True, 0)):
        native(lambda t: torch.topk(t, k, dim=dim, largest=largest), x, exact=True)
    native(torch.isnan, torch.tensor([0.0, float("nan"), float("inf")]).to(dtype), exact=True)
    native(lambda t: torch.sort(t[:, :40], dim=-1), x, exact=True)
    native(lambda t: torch.sort(t[:, :40], dim=-1, descending=True, stable=True), x, exact=True)
    # NaN inputs (PyTorch orders NaN above everything) and k > 64 take the counted fallback
    y = x.clone()
    y[0, 3] = float("nan")
    torch.testing.assert_close(torch.topk(y.to(NEURON), 4)[0].cpu(), torch.topk(y, 4)[0], equal_nan=True)


# ------------------------------------------- integer extremes (issue 38)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
@pytest.mark.parametrize("shape", [(1,), (127,), (3, 129), (2, 257), (513, 2), ()])
def test_integer_argmax_max_and_abs_are_exact_and_native(dtype, shape):
    """CLIP's argmax over token ids, T5's int64 abs: compared as base-2^16
    digits, every width exact (the extremes of the type and ties: the first
    occurrence, as on CPU), no CPU fallback"""
    info = torch.iinfo(dtype)
    x = torch.randint(info.min, info.max, shape, generator=torch.Generator().manual_seed(len(shape)),
                      dtype=torch.int64).to(dtype)
    if x.numel() > 2:
        flat = x.view(-1)
        flat[0], flat[1], flat[-1] = info.min, info.max, info.max
    xn = x.to(NEURON)
    torch_neuronsim.reset_stats()
    for d in ([None] + list(range(x.dim()))):
        for keepdim in (False, True):
            kw = {} if d is None else {"dim": d, "keepdim": keepdim}
            for op in ("argmax", "argmin"):
                want, got = getattr(x, op)(**kw), getattr(xn, op)(**kw).cpu()
                assert torch.equal(got, want) and got.shape == want.shape, (op, d, keepdim)
            dims = () if d is None else d
            for op in ("amax", "amin"):
                want, got = getattr(x, op)(dims, keepdim), getattr(xn, op)(dims, keepdim).cpu()
                assert torch.equal(got, want) and got.dtype == want.dtype, (op, d, keepdim)
            if d is not None:
                for op in ("max", "min"):
                    (wv, wi), (gv, gi) = getattr(x, op)(d, keepdim), getattr(xn, op)(d, keepdim)
                    assert torch.equal(gv.cpu(), wv) and torch.equal(gi.cpu(), wi), (op, d, keepdim)
    assert torch.equal(xn.max().cpu(), x.max()) and torch.equal(xn.min().cpu(), x.min())
    if x.dim() == 2:                           # a transposed view: rows of the reduction are strided
        for d in (0, 1):
            assert torch.equal(xn.t().argmax(d).cpu(), x.t().argmax(d))
            assert torch.equal(xn.t().amin(d, True).cpu(), x.t().amin(d, True))
    if dtype != torch.uint8:
        assert torch.equal(xn.abs().cpu(), x.abs())
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0
    m = xn.max()                              # a result of its own: writing self leaves it
    xn.zero_()
    assert torch.equal(m.cpu(), x.max())
