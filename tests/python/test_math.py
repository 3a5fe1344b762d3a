"""The math functions composed from native kernels (neuron_math.cpp, and
ScalarE's arctan / tan) against CPU PyTorch: random values over a wide
range plus every special value (signed zeros, infinities, NaN, the ends
of each function's domain, the overflow edges), in fp32 / bf16 / fp16,
natively (no CPU fallback)."""
import pytest
import torch

import torch_neuronsim

NEURON = torch.device("neuron")
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
SPECIAL = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1.0, -1.0, 0.5, -0.5, 1e-30, -1e-30, 1e-8,
           0.999999, -0.999999, 1.0000001, 9.0, 9.01, 4095.9, 4096.0, 1e5, 88.0, -88.0, 127.9, 128.0, -149.5,
           -160.0, 2.5e38]


def values(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.cat([torch.randn(3000, generator=g) * 3, torch.tensor(SPECIAL),
                      torch.rand(500, generator=g) * 2 - 1, torch.randn(500, generator=g) * 100])


def check(fn, *args):
    before = torch_neuronsim.stats()["cpu_fallbacks"]
    got = fn(*[a.to(NEURON) for a in args]).cpu()
    assert torch_neuronsim.stats()["cpu_fallbacks"] == before, "ran on the CPU"
    torch.testing.assert_close(got, fn(*args), equal_nan=True)


UNARY = ["asin", "acos", "atan", "tan", "sinh", "cosh", "asinh", "acosh", "atanh", "exp2", "sinc", "logit",
         "nan_to_num"]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", UNARY)
def test_unary_matches_cpu(name, dtype):
    x = values(1)
    if name in ("sinh", "cosh"):
        # CPU's vectorized sinh / cosh give inf from 88.7 on, its scalar
        # path (and neuron) the finite value up to 89.4: left out
        x = x[~((x.abs() > 88.7) & (x.abs() < 89.5))]
    check(getattr(torch, name), x.to(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("fn", [torch.atan2, torch.hypot, torch.copysign, torch.heaviside, torch.special.xlog1py,
                                torch.logical_and, torch.logical_or, torch.logical_xor, torch.nextafter],
                         ids=lambda f: f.__name__)
def test_binary_matches_cpu(fn, dtype):
    check(fn, values(2).to(dtype), values(3).to(dtype))


def test_atan2_signed_zeros_and_infinities():
    z = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), float("nan")])
    pairs = torch.cartesian_prod(z, z)
    check(torch.atan2, pairs[:, 0].contiguous(), pairs[:, 1].contiguous())
    # the sign of a zero result too
    got = torch.atan2(pairs[:, 0].to(NEURON), pairs[:, 1].to(NEURON)).cpu()
    want = torch.atan2(pairs[:, 0], pairs[:, 1])
    assert torch.equal(torch.signbit(got[want == 0]), torch.signbit(want[want == 0]))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_logit_eps_clamps_in_the_dtype(dtype):
    """CPU clamps to eps and 1 - eps rounded to the tensor's dtype (bf16's
    1 - 1e-6 is 1: logit(2.5) is inf there)."""
    check(lambda t: torch.logit(t, 1e-6), values(4).to(dtype))
    check(lambda t: torch.logit(t, 0.25), values(5).to(dtype))


def test_nan_to_num_given_values():
    check(lambda t: torch.nan_to_num(t, 1.0, 2.0, -3.0), values(6))


def test_exp2_is_exact_on_integers_and_subnormals():
    x = torch.arange(-149, 128, dtype=torch.float32)
    got = torch.exp2(x.to(NEURON)).cpu()
    assert torch.equal(got, torch.exp2(x))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gamma_functions(dtype):
    """digamma and lgamma as CPU's algorithms (recurrence, series,
    reflection next to negative integers); polygamma natively for x > 0
    (orders >= 1: CPU sums in double where the terms cancel for x <= 0)"""
    x = torch.cat([values(7), torch.tensor([-10.999994, -0.000001, -5.5, 9.999, 1e17, 0.9999, 2.0001])])
    check(torch.digamma, x.to(dtype))
    check(torch.lgamma, x.to(dtype))
    pos = values(8).abs().add(0.01)
    pos = pos[pos.isfinite()]
    for n in (0, 1, 2, 3, 4):
        check(lambda t: torch.polygamma(n, t), pos.to(dtype))


@pytest.mark.parametrize("dtype", DTYPES + [torch.int32], ids=str)
def test_fmod_is_exact(dtype):
    """VectorE's fmod ALU (C's fmod: exact, the dividend's sign); an integer
    divisor of zero is CPU's ZeroDivisionError"""
    g = torch.Generator().manual_seed(12)
    if dtype == torch.int32:
        a = torch.randint(-1000, 1000, (3000,), generator=g, dtype=dtype)
        b = torch.randint(1, 50, (3000,), generator=g, dtype=dtype) * (torch.randint(0, 2, (3000,), generator=g) * 2 - 1).int()
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            torch.fmod(a.to(NEURON), torch.zeros_like(b).to(NEURON))
    else:
        a, b = (values(13) * 30).to(dtype), values(14).to(dtype)
    got = torch.fmod(a.to(NEURON), b.to(NEURON)).cpu()
    want = torch.fmod(a, b)
    assert torch.equal(got.nan_to_num(7) if dtype != torch.int32 else got, want.nan_to_num(7) if dtype != torch.int32 else want)
