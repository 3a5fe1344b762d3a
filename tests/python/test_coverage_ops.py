"""Ops the Transformers architectures need beyond the core set: complex64
as real pairs (the complex form of rotary embeddings: view_as_complex,
polar, complex products, view_as_real), log1p / expm1 / softplus with their
small-argument accuracy, tril / triu on masks, .out forms, eye, flip, a
number to a tensor power, indexing off the leading dims, triangular solves
-- against CPU PyTorch with zero fallbacks."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuronsim

NEURON = torch.device("neuron")


def on_both(fn, *args):
    want = fn(*args)
    torch_neuronsim.reset_stats()
    got = fn(*[a.to(NEURON) for a in args])
    assert torch_neuronsim.stats()["fallback_ops"] == {}
    assert got.device.type == "neuron" and got.dtype == want.dtype and got.shape == want.shape
    return got.cpu(), want


def rope(xq, freqs):
    fc = torch.polar(torch.ones_like(freqs), freqs) * 1.0
    x = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    return torch.view_as_real(x * fc[None, None]).flatten(3).type_as(xq)


def test_complex_rotary_embedding():
    g = torch.Generator().manual_seed(0)
    got, want = on_both(rope, torch.randn(1, 4, 8, 16, generator=g), torch.randn(8, 8, generator=g))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("other", ["complex", "real tensor", "float", "complex number"])
def test_complex_products(other):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(5, 3, dtype=torch.complex64, generator=g)
    b = {"complex": torch.randn(5, 3, dtype=torch.complex64, generator=g),
         "real tensor": torch.randn(5, 3, generator=g)}.get(other)
    if b is None:
        k = 2.5 if other == "float" else (1 + 2j)
        got, want = on_both(lambda t: t * k, a)
    else:
        got, want = on_both(lambda s, t: s * t, a, b)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    got, want = on_both(torch.view_as_real, a)
    assert torch.equal(got, want)


SPECIAL = torch.tensor([0.0, 1e-8, -1e-8, 1e-30, 3e-4, -3e-4, 80.0, 100.0, -100.0, -1.0, 30.0,
                        float("inf"), float("-inf"), float("nan")])


@pytest.mark.parametrize("name", ["log1p", "expm1", "softplus", "softplus beta 2"])
def test_log1p_expm1_softplus_keep_small_arguments(name):
    x = torch.cat([torch.randn(300, generator=torch.Generator().manual_seed(2)) * 5, SPECIAL])
    fn = {"log1p": lambda t: torch.log1p(t.clamp(min=-0.999)), "expm1": torch.expm1, "softplus": F.softplus,
          "softplus beta 2": lambda t: F.softplus(t, beta=2.0, threshold=10.0)}[name]
    got, want = on_both(fn, x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.bool, torch.int32, torch.uint8, torch.int16, torch.bfloat16])
def test_tril_triu_of_masks_and_integers(dtype):
    x = (torch.randn(3, 7, 9, generator=torch.Generator().manual_seed(3)) * 5).to(dtype)
    for k in (-1, 0, 2):
        for fn in (torch.tril, torch.triu):
            got, want = on_both(lambda t: fn(t, k), x)
            assert torch.equal(got, want)


X = torch.randn(3, 5, 7, generator=torch.Generator().manual_seed(4))
CLOSE = dict(rtol=1e-5, atol=1e-5)


def put(index, value):
    def fn(t):
        t = t.clone()
        t[index(t)] = value(t) if callable(value) else value
        return t
    return fn


CASES = {
    "exp out": (lambda t: torch.exp(t, out=torch.empty_like(t)), CLOSE),
    "log out": (lambda t: torch.log(t.abs(), out=torch.empty_like(t)), CLOSE),
    "sum out": (lambda t: torch.sum(t, dim=1, out=torch.empty(3, 7, device=t.device)), CLOSE),
    "eye": (lambda t: torch.eye(4, 6, device=t.device), None),
    "eye bf16": (lambda t: torch.eye(5, device=t.device, dtype=torch.bfloat16), None),
    "flip": (lambda t: torch.flip(t, [0, 2]), None),
    "2 ** x": (lambda t: torch.pow(2, t), CLOSE),
    "0.5 ** -arange": (lambda t: torch.pow(0.5, -torch.arange(8.0, device=t.device)), CLOSE),
    "x[:, list]": (lambda t: t[:, [-1, 0]], None),
    "x[..., [-2], :]": (lambda t: t[..., [-2], :], None),
    "x[:, i, j]": (lambda t: t[:, torch.tensor([0, 2], device=t.device), torch.tensor([1, 3], device=t.device)], None),
    "x[i, :, j]": (lambda t: t[torch.tensor([0, 2], device=t.device), :, torch.tensor([1, 3], device=t.device)], None),
    "x[:, 3] = 0": (put(lambda t: (slice(None), 3), 0.0), None),
    "x[:, list] = T": (put(lambda t: (slice(None), [1, 4]), lambda t: torch.ones(3, 2, 7, device=t.device) * 5), None),
    "x[:, :, i] = 2": (put(lambda t: (slice(None), slice(None), torch.tensor([0, 6], device=t.device)), 2.0), None),
    "1 - x": (lambda t: 1 - t, None),
    "2.5 - x bf16": (lambda t: 2.5 - t.bfloat16(), None),
    "layer_norm weight only": (lambda t: F.layer_norm(t, [7], (torch.arange(7.0, device=t.device) / 3 - 1), None), CLOSE),
    "layer_norm bias only": (lambda t: F.layer_norm(t, [7], None, (torch.arange(7.0, device=t.device) / 3 - 1)), CLOSE),
}


@pytest.mark.parametrize("v", [0, 1, 2])
def test_bool_masks_against_numbers_logical_not_and_one_sided_clamps(v):
    m = torch.rand(3, 5, generator=torch.Generator().manual_seed(8)) > 0.5
    for fn in (lambda t: t == v, lambda t: t != v, torch.logical_not,
               lambda t: torch.logical_not(t, out=torch.empty(3, 5, dtype=torch.bool, device=t.device))):
        got, want = on_both(fn, m)
        assert torch.equal(got, want)
    for fn in (lambda t: t.clamp_min(0.1 * v), lambda t: t.clamp_max(0.1 * v), torch.logical_not,
               lambda t: torch.clamp_min(t, 0.2, out=torch.empty(3, 5, 7, device=t.device))):
        got, want = on_both(fn, X)
        assert torch.equal(got, want)


def test_int64_negation_and_max_min_are_exact():
    g = torch.Generator().manual_seed(7)
    a = torch.randint(-(1 << 40), 1 << 40, (50,), generator=g)
    b = torch.randint(-(1 << 40), 1 << 40, (50,), generator=g)
    b[:5] = a[:5]
    for fn in (lambda x, y: -x, torch.maximum, torch.minimum):
        got, want = on_both(fn, a, b)
        assert torch.equal(got, want)


@pytest.mark.parametrize("name", list(CASES))
def test_out_forms_factories_flips_and_indexing_off_the_leading_dims(name):
    fn, tol = CASES[name]
    got, want = on_both(fn, X)
    if tol:
        torch.testing.assert_close(got, want, **tol)
    else:
        assert torch.equal(got, want)


@pytest.mark.parametrize("upper,unit,left", [(False, False, True), (False, True, True), (True, False, True),
                                             (True, True, True), (False, False, False)])
def test_triangular_solve_by_substitution(upper, unit, left):
    g = torch.Generator().manual_seed(5)
    A = torch.randn(2, 3, 16, 16, generator=g).tril() + 4 * torch.eye(16)
    A = A.transpose(-1, -2) if upper else A
    B = torch.randn(2, 3, 16, 5, generator=g)
    B = B if left else B.transpose(-1, -2)
    got, want = on_both(lambda a, b: torch.linalg.solve_triangular(a, b, upper=upper, unitriangular=unit, left=left),
                        A, B)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_tensor_to_tensor_power():
    """ALiBi's slopes (BLOOM): a 0-dim base to int32 powers; mixed signs"""
    got, want = on_both(torch.pow, torch.full((), 0.7071), torch.arange(1, 9, dtype=torch.int32))
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
    got, want = on_both(torch.pow, torch.tensor([-2., -2., 0., 0., 3., 2.]), torch.tensor([3., 2., 0., -1., .5, 10.]))
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0)


def test_log_sigmoid_forward_and_backward():
    x = torch.cat([torch.randn(64) * 10, torch.tensor([0., -0., 100., -100., 1e-8])])
    got, want = on_both(F.logsigmoid, x)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    a, b = x.clone().requires_grad_(), x.to(NEURON).requires_grad_()
    F.logsigmoid(a).mul(torch.linspace(-1, 1, x.numel())).sum().backward()
    w = torch.linspace(-1, 1, x.numel()).to(NEURON)
    torch_neuronsim.reset_stats()
    F.logsigmoid(b).mul(w).sum().backward()
    assert torch_neuronsim.stats()["fallback_ops"] == {}
    torch.testing.assert_close(b.grad.cpu(), a.grad, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("where", ["device", "cpu"])
def test_masked_fill_with_a_0dim_tensor(where):
    """CPM-Ant: masked_fill(score, mask, torch.scalar_tensor(-inf, device=...))"""
    g = torch.Generator().manual_seed(3)
    s, m = torch.randn(2, 3, 4, generator=g), torch.rand(2, 1, 4, generator=g) > 0.5
    v = torch.scalar_tensor(float("-inf"))
    if where == "cpu":
        got, want = on_both(lambda s, m: torch.masked_fill(s, m, v), s, m)
    else:
        got, want = on_both(torch.masked_fill, s, m, v)
    torch.testing.assert_close(got, want)
    t, tn = s.clone(), s.to(NEURON)
    t.masked_fill_(m, torch.tensor(2.0))
    tn.masked_fill_(m.to(NEURON), torch.tensor(2.0).to(NEURON))
    torch.testing.assert_close(tn.cpu(), t)


def test_comparisons_of_int64_with_int32():
    """CPM-Ant: an int64 position row < an int32 length column"""
    got, want = on_both(lambda a, b: a < b, torch.arange(10)[None, :].repeat(2, 1),
                        torch.tensor([3, 7], dtype=torch.int32)[:, None])
    assert torch.equal(got, want)
    got, want = on_both(lambda a, b: a >= b, torch.tensor([1, -5, 9], dtype=torch.int32),
                        torch.tensor([1, -(1 << 40), 10]))
    assert torch.equal(got, want)


@pytest.mark.parametrize("case", ["bool 2-d", "int 3-d", "float", "none", "all"])
def test_nonzero_and_where_of_one_argument(case):
    g = torch.Generator().manual_seed(4)
    t = {"bool 2-d": torch.rand(5, 7, generator=g) > 0.6,
         "int 3-d": torch.randint(0, 3, (4, 3, 5), generator=g),
         "float": torch.tensor([0., 1., -0., -2., float("nan")]),
         "none": torch.zeros(3, 3),
         "all": torch.ones(2, 2, dtype=torch.int64)}[case]
    got, want = on_both(torch.nonzero, t)
    assert torch.equal(got, want)
    want_t = torch.where(t)
    torch_neuronsim.reset_stats()
    got_t = torch.where(t.to(NEURON))
    assert torch_neuronsim.stats()["fallback_ops"] == {}
    assert all(torch.equal(a.cpu(), b) for a, b in zip(got_t, want_t))


@pytest.mark.parametrize("args", [(8, -8, -1.0), (-5, 5, 1), (-100000, 100000, 7), (-10, -1, 1)])
def test_int64_arange_crossing_zero(args):
    """each element's high word is its own sign (XLNet's relative positions)"""
    torch_neuronsim.reset_stats()
    got = torch.arange(*args, dtype=torch.int64, device=NEURON)
    as_float = got.float()
    assert torch_neuronsim.stats()["fallback_ops"] == {}
    want = torch.arange(*args, dtype=torch.int64)
    assert torch.equal(got.cpu(), want) and torch.equal(as_float.cpu(), want.float())
