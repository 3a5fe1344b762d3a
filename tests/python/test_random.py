"""Random numbers on the device (GpSimd's seeded XORWOW generators):
uniform_, normal_ (so rand/randn on `neuron`) and multinomial run as device
programs with zero CPU fallbacks, follow their distributions, repeat under
the same generator state, and reject bad input with CPU PyTorch's errors."""
import math
import os
import subprocess
import sys

import pytest
import torch

import torch_neuronsim

NEURON = torch.device("neuron")
FLOATS = [torch.float32, torch.bfloat16, torch.float16]


def no_fallbacks():
    s = torch_neuronsim.stats()
    assert s["cpu_fallbacks"] == 0, s["fallback_ops"]
    return s


def ks_uniform(x, lo, hi):
    """Kolmogorov-Smirnov distance of samples x from U[lo, hi)"""
    x = ((x.double().flatten() - lo) / (hi - lo)).sort().values
    n = x.numel()
    i = torch.arange(1, n + 1, dtype=torch.float64)
    return max((i / n - x).max().item(), (x - (i - 1) / n).max().item())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1,), (1000, 37), (3, 128 * 1024 + 5)])
def test_uniform_is_uniform_on_the_range(dtype, shape):
    torch_neuronsim.reset_stats()
    x = torch.empty(shape, device=NEURON, dtype=dtype).uniform_(-2.0, 3.0)
    s = no_fallbacks()
    assert s["native_ops"]["aten::uniform_"]["count"] == 1
    c = x.cpu().float()
    assert c.min() >= -2.0 and c.max() <= 3.0
    if c.numel() >= 1000:
        # KS critical value at 1e-4 is ~2.0/sqrt(n); bf16 rounding adds ~0.4% steps
        slack = 2.0 / math.sqrt(c.numel()) + (0.01 if dtype != torch.float32 else 0.0)
        assert ks_uniform(c, -2.0, 3.0) < slack


@pytest.mark.parametrize("dtype", FLOATS)
def test_normal_moments_and_tails(dtype):
    torch_neuronsim.reset_stats()
    x = torch.empty(400_000, device=NEURON, dtype=dtype).normal_(1.5, 2.0)
    no_fallbacks()
    c = x.cpu().double()
    assert abs(c.mean().item() - 1.5) < 0.02
    assert abs(c.std().item() - 2.0) < 0.02
    z = (c - 1.5) / 2.0
    assert abs((z.abs() < 1).double().mean().item() - 0.6827) < 0.005
    assert abs((z.abs() < 2).double().mean().item() - 0.9545) < 0.003
    assert torch.isfinite(c).all()


def test_rand_randn_follow_manual_seed_and_generators():
    torch_neuronsim.reset_stats()
    torch.manual_seed(11)
    a = torch.randn(64, 33, device=NEURON)
    b = torch.rand(1000, device=NEURON)
    torch.manual_seed(11)
    a2 = torch.randn(64, 33, device=NEURON)
    b2 = torch.rand(1000, device=NEURON)
    assert torch.equal(a.cpu(), a2.cpu()) and torch.equal(b.cpu(), b2.cpu())
    c = torch.randn(64, 33, device=NEURON)             # the stream moved on
    assert not torch.equal(a.cpu(), c.cpu())
    g1 = torch.Generator(device=NEURON).manual_seed(3)
    g2 = torch.Generator(device=NEURON).manual_seed(3)
    u1 = torch.rand(500, device=NEURON, generator=g1)
    u2 = torch.rand(500, device=NEURON, generator=g2)
    assert torch.equal(u1.cpu(), u2.cpu())
    no_fallbacks()


def test_non_contiguous_target_is_filled_in_place():
    base = torch.zeros(8, 10, device=NEURON)
    view = base[:, ::2]
    torch_neuronsim.reset_stats()
    view.uniform_(5.0, 6.0)
    no_fallbacks()
    c = base.cpu()
    assert ((c[:, ::2] >= 5) & (c[:, ::2] <= 6)).all()
    assert (c[:, 1::2] == 0).all()


def test_bad_ranges_raise_like_cpu():
    x = torch.empty(4, device=NEURON)
    with pytest.raises(RuntimeError, match="from=3 > to=1"):
        x.uniform_(3.0, 1.0)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        x.normal_(0.0, -1.0)


def chi2_ok(counts, probs, n):
    exp = probs * n
    keep = exp > 0
    chi2 = (((counts[keep] - exp[keep]) ** 2) / exp[keep]).sum().item()
    dof = int(keep.sum().item()) - 1
    return chi2 < dof + 6 * math.sqrt(2 * dof) + 10


@pytest.mark.parametrize("dtype", FLOATS)
def test_multinomial_with_replacement_follows_probabilities(dtype):
    g = torch.Generator().manual_seed(0)
    w = torch.rand(3, 50, generator=g)
    w[:, 7] = 0.0
    w[1, 20:] = 0.0                              # trailing zero weights
    n = 20000
    torch_neuronsim.reset_stats()
    s = torch.multinomial(w.to(dtype).to(NEURON), n, replacement=True)
    no_fallbacks()
    assert s.dtype == torch.int64 and s.shape == (3, n)
    s = s.cpu()
    for r in range(3):
        probs = w[r].to(dtype).double() / w[r].to(dtype).double().sum()
        counts = torch.bincount(s[r], minlength=50).double()
        assert counts[probs == 0].sum() == 0
        assert chi2_ok(counts, probs, n), r


def test_multinomial_one_sample_per_row_and_1d():
    torch_neuronsim.reset_stats()
    p = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0.0, 0.0]], device=NEURON)
    s = torch.multinomial(p, 1).cpu()
    assert s.shape == (2, 1) and s[0, 0] == 2 and s[1, 0] in (0, 1)
    one = torch.multinomial(torch.tensor([0.0, 3.0, 0.0], device=NEURON), 4, replacement=True).cpu()
    assert one.shape == (4,) and (one == 1).all()
    no_fallbacks()


def test_multinomial_without_replacement():
    g = torch.Generator().manual_seed(1)
    w = torch.rand(4, 30, generator=g)
    w[:, :10] = 0.0
    torch_neuronsim.reset_stats()
    s = torch.multinomial(w.to(NEURON), 20, replacement=False).cpu()
    no_fallbacks()
    for r in range(4):
        assert len(set(s[r].tolist())) == 20 and (s[r] >= 10).all()
    # more samples than positive weights: the positive ones, then zero-weight
    # categories (CPU PyTorch does the same rather than raising)
    s = torch.multinomial(torch.tensor([0.0, 1.0, 0.0, 2.0], device=NEURON), 3).cpu()
    assert set(s[:2].tolist()) == {1, 3} and s[2].item() in (0, 2)
    # first draws follow the weights: a dominant category comes first
    w2 = torch.ones(2000, 5)
    w2[:, 3] = 1000.0
    first = torch.multinomial(w2.to(NEURON), 2).cpu()[:, 0]
    assert (first == 3).double().mean() > 0.98


def test_multinomial_is_repeatable_under_manual_seed():
    p = torch.rand(5, 100, device=NEURON)
    torch.manual_seed(42)
    a = torch.multinomial(p, 7, replacement=True).cpu()
    torch.manual_seed(42)
    b = torch.multinomial(p, 7, replacement=True).cpu()
    assert torch.equal(a, b)


@pytest.mark.parametrize("w,n,repl,msg", [
    ([0.5, -1.0], 1, True, "probability tensor contains either `inf`, `nan` or element < 0"),
    ([0.5, float("nan")], 1, True, "probability tensor contains either `inf`, `nan` or element < 0"),
    ([0.5, float("inf")], 1, True, "probability tensor contains either `inf`, `nan` or element < 0"),
    ([0.0, 0.0], 1, True, "invalid multinomial distribution \\(sum of probabilities <= 0\\)"),
    ([0.5, 0.5], 3, False, "cannot sample n_sample > prob_dist.size"),
    ([0.5, 0.5], 0, True, "cannot sample n_sample <= 0 samples"),
])
def test_multinomial_errors_match_cpu(w, n, repl, msg):
    cpu = torch.tensor(w)
    with pytest.raises(RuntimeError, match=msg):
        torch.multinomial(cpu, n, replacement=repl)
    with pytest.raises(RuntimeError, match=msg):
        torch.multinomial(cpu.to(NEURON), n, replacement=repl)


def test_trn1_cannot_seed_its_prng_and_falls_back():
    code = ("import torch, torch_neuronsim; torch.manual_seed(0);"
            "x = torch.rand(100, device='neuron'); s = torch_neuronsim.stats();"
            "print(torch_neuronsim.target(), s['fallback_ops'].get('aten::uniform_', 0),"
            " float(x.cpu().min()) >= 0)")
    env = dict(os.environ, NEURON_PLATFORM_TARGET_OVERRIDE="trn1", NEURON_SIM="1")
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["trn1", "1", "True"], r.stdout
