"""The math functions composed from native kernels (aten/pointwise/math.cpp, and
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
    reflection next to negative integers); polygamma for x > 0 as CPU's
    (x <= 0 below)"""
    x = torch.cat([values(7), torch.tensor([-10.999994, -0.000001, -5.5, 9.999, 1e17, 0.9999, 2.0001])])
    check(torch.digamma, x.to(dtype))
    check(torch.lgamma, x.to(dtype))
    pos = values(8).abs().add(0.01)
    pos = pos[pos.isfinite()]
    for n in (0, 1, 2, 3, 4):
        check(lambda t: torch.polygamma(n, t), pos.to(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_polygamma_of_negative_x(dtype):
    """polygamma(n >= 1, x <= 0) by reflection: as close to a float64
    evaluation as CPU's (whose zeta sums the cancelling terms in double);
    next to half-integers, where cot(pi x) is 0, too; the poles give CPU's
    +-inf (orders >= 2); order 1 at a pole (CPU's finite rounding artifact)
    runs on the CPU, counted"""
    x = torch.cat([torch.linspace(-9, 0, 2001), torch.tensor([-4.5, -0.5, -2.0000002, -1.9999998, -1e-6])])
    x = x.to(dtype)
    x = x[x != x.floor()]
    for n in (1, 2, 3, 4, 7):
        before = torch_neuronsim.stats()["cpu_fallbacks"]
        got = torch.polygamma(n, x.to(NEURON)).cpu()
        assert torch_neuronsim.stats()["cpu_fallbacks"] == before, "ran on the CPU"
        ref = torch.polygamma(n, x.double())
        rtol = 1e-5 if dtype == torch.float32 else None
        torch.testing.assert_close(got.double(), ref.to(dtype).double(), rtol=rtol or 1.6e-2, atol=0.0)
        # and CPU's own value wherever that is itself that close to float64
        # (next to a pole CPU's order-1 reflection is off by up to 170%)
        want = torch.polygamma(n, x)
        own = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}[dtype]
        fair = (want.double() - ref).abs() <= own * ref.abs()
        torch.testing.assert_close(got[fair], want[fair], rtol=2e-5 if rtol else None, atol=1e-5 if rtol else None)
    poles = torch.tensor([0.0, -1.0, -3.0, -8.0], dtype=dtype)
    for n in (2, 3):
        check(lambda t: torch.polygamma(n, t), poles)


def test_arange_float_steps():
    """arange with a fractional start or step (mvlgamma builds one) on the
    device: CPU's element count, values within an ulp of CPU's double
    evaluation"""
    for args in [(-2.5, 0.5, 0.5), (0, 1, 0.1), (1, 7, 1.5), (0.0, 3.0, 0.3), (5.0, -5.0, -0.7), (0.0, 0.0, 0.1)]:
        for dtype in DTYPES:
            before = torch_neuronsim.stats()["cpu_fallbacks"]
            got = torch.arange(*args, dtype=dtype, device=NEURON).cpu()
            assert torch_neuronsim.stats()["cpu_fallbacks"] == before, "ran on the CPU"
            torch.testing.assert_close(got, torch.arange(*args, dtype=dtype))
    x = values(9).abs().add(3.0)
    x = x[x.isfinite()][:500]
    for p in (1, 3, 5):
        check(lambda t: torch.mvlgamma(t, p), x)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.int8, torch.uint8], ids=str)
def test_shifts_and_bitwise_with_python_ints(dtype):
    """<<, >> (and the in-place forms) on VectorE's integer ALU; counts
    outside [0, width) give 0 (or -1 for >> of a negative) as CPU's; a
    Python int operand of & | ^ stays on the device"""
    g = torch.Generator().manual_seed(5)
    info = torch.iinfo(dtype)
    a = torch.randint(info.min, info.max, (777,), generator=g, dtype=torch.int64).to(dtype)
    s = torch.randint(0, 2 * info.bits, (777,), generator=g, dtype=torch.int64).to(dtype)
    for fn in (lambda x: x >> 3, lambda x: x << 5, lambda x: x & 0x5A, lambda x: x | 3, lambda x: x ^ 0x7F):
        check(fn, a)
    check(lambda x, y: x >> y, a, s)
    check(lambda x, y: x << y, a, s)
    check(lambda x, y: x.clone().__irshift__(y), a, s)
    check(lambda x: x.clone().__ilshift__(2), a)


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
