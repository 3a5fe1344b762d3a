"""Matrix products on TensorE (mm, bmm, addmm and what decomposes into
them: matmul, linear, @): values against CPU PyTorch over dtypes and shape
classes, zero fallbacks where covered, and simulated time against TensorE's
peak (never faster, a big GEMM within 15%)."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import neuronsim
import torch_neuronsim

NEURON = torch.device("neuron")
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
       torch.float16: dict(rtol=2e-3, atol=2e-3)}

# (M, K, N): one element; partial tiles; K over several 128-row tiles and
# not a multiple; N over several 512-column blocks; M over several 128-row
# tiles and over two super-tiles of 8 (a^T re-prepared while multiplying)
SHAPES = [(1, 1, 1), (4, 8, 5), (1, 300, 70), (130, 300, 600), (127, 129, 513),
          (2100, 200, 130), (64, 1000, 1030)]


def _native(fn, *args):
    torch_neuronsim.reset_stats()
    out = fn(*args)
    s = torch_neuronsim.stats()
    assert s["cpu_fallbacks"] == 0, s["fallback_ops"]
    assert s["native_ops"], s
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_mm_layouts(shape, dtype):
    """a @ b with a and b each row-major or transposed (a transposed view is
    read K-major; W.t() is read by rows and turned round on TensorE)."""
    m, k, n = shape
    g = torch.Generator().manual_seed(m * 7 + k * 3 + n)
    a = torch.randn(m, k, generator=g).to(dtype)
    b = torch.randn(k, n, generator=g).to(dtype)
    want = (a.float() @ b.float())
    for at in (False, True):
        for bt in (False, True):
            da = a.t().contiguous().to(NEURON).t() if at else a.to(NEURON)
            db = b.t().contiguous().to(NEURON).t() if bt else b.to(NEURON)
            got = _native(torch.mm, da, db)
            assert got.dtype == dtype and got.shape == (m, n)
            torch.testing.assert_close(got.cpu().float(), want, **TOL[dtype],
                                       msg=lambda s: f"a^T={at} b^T={bt}: {s}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_addmm_bmm_matmul(dtype):
    g = torch.Generator().manual_seed(1)
    lin = torch.nn.Linear(200, 300).to(dtype)
    x = torch.randn(2, 7, 200, generator=g).to(dtype)
    got = _native(lin.to(NEURON), x.to(NEURON))
    torch.testing.assert_close(got.cpu(), lin.cpu()(x), **TOL[dtype])
    assert "aten::addmm" in torch_neuronsim.stats()["native_ops"]
    # addmm with beta=0 ignores the bias; bias as [1, N]
    a, b, c = (torch.randn(5, 9, generator=g).to(dtype), torch.randn(9, 4, generator=g).to(dtype),
               torch.randn(1, 4, generator=g).to(dtype))
    got = _native(torch.addmm, c.to(NEURON), a.to(NEURON), b.to(NEURON))
    torch.testing.assert_close(got.cpu(), torch.addmm(c, a, b), **TOL[dtype])
    got = _native(lambda *t: torch.addmm(*t, beta=0), c.to(NEURON), a.to(NEURON), b.to(NEURON))
    torch.testing.assert_close(got.cpu(), a @ b, **TOL[dtype])
    # batched, with a broadcast batch and attention's q @ k^T
    q = torch.randn(2, 4, 33, 16, generator=g).to(dtype)
    kk = torch.randn(2, 4, 40, 16, generator=g).to(dtype)
    got = _native(lambda x, y: x @ y.transpose(-1, -2), q.to(NEURON), kk.to(NEURON))
    torch.testing.assert_close(got.cpu(), q @ kk.transpose(-1, -2), **TOL[dtype])
    w = torch.randn(16, 24, generator=g).to(dtype)
    got = _native(torch.matmul, q.to(NEURON), w.to(NEURON))
    torch.testing.assert_close(got.cpu(), q @ w, **TOL[dtype])
    a3, b3 = torch.randn(3, 17, 40, generator=g).to(dtype), torch.randn(3, 40, 130, generator=g).to(dtype)
    got = _native(torch.bmm, a3.to(NEURON), b3.to(NEURON))
    torch.testing.assert_close(got.cpu(), torch.bmm(a3, b3), **TOL[dtype])


def test_empty_and_uncovered_cases_fall_back_correctly():
    e = torch.randn(0, 5)
    assert torch.mm(e.to(NEURON), torch.randn(5, 3).to(NEURON)).shape == (0, 3)
    z = torch.mm(torch.randn(4, 0).to(NEURON), torch.randn(0, 3).to(NEURON))
    assert torch.equal(z.cpu(), torch.zeros(4, 3))
    # mixed dtypes are an error on CPU too; integer mm goes to the fallback
    i = torch.randint(-5, 5, (6, 7))
    j = torch.randint(-5, 5, (7, 2))
    assert torch.equal(torch.mm(i.to(NEURON), j.to(NEURON)).cpu(), i @ j)
    # alpha != 1
    a, b, c = torch.randn(3, 4), torch.randn(4, 5), torch.randn(3, 5)
    got = torch.addmm(c.to(NEURON), a.to(NEURON), b.to(NEURON), alpha=0.5, beta=2)
    torch.testing.assert_close(got.cpu(), torch.addmm(c, a, b, alpha=0.5, beta=2))


def test_autograd_through_linear():
    lin = torch.nn.Linear(20, 10)
    x = torch.randn(4, 20, requires_grad=True)
    lin(x).square().sum().backward()
    dl = torch.nn.Linear(20, 10).to(NEURON)
    dl.load_state_dict(lin.state_dict())
    dx = x.detach().to(NEURON).requires_grad_()
    dl(dx).square().sum().backward()
    torch.testing.assert_close(dx.grad.cpu(), x.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(dl.weight.grad.cpu(), lin.weight.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", ["mm", "bmm", "addmm", "matmul", "nn.functional.linear"])
def test_opinfo_samples(name, dtype):
    from torch.testing._internal.common_methods_invocations import op_db
    info = [o for o in op_db if o.name == name and o.variant_test_name == ""][0]
    n = 0
    for sample in info.sample_inputs("cpu", dtype):
        want = info.op(sample.input, *sample.args, **sample.kwargs)
        conv = lambda v: v.to(NEURON) if isinstance(v, torch.Tensor) else v
        got = info.op(conv(sample.input), *[conv(a) for a in sample.args],
                      **{k: conv(v) for k, v in sample.kwargs.items()})
        torch.testing.assert_close(got.cpu(), want, **TOL[dtype], msg=lambda m: f"{sample}: {m}")
        n += 1
    assert n > 0


def _sim_time(code, target="trn2"):
    env = dict(os.environ, NEURON_PLATFORM_TARGET_OVERRIDE=target, NEURON_SIM_MODE="timing")
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True,
                       env=env, timeout=900)
    assert r.returncode == 0, r.stderr
    return [float(v) for v in r.stdout.split()]


def test_4096_cubed_bf16_is_within_15_percent_of_tensore_peak():
    """2 x 4096^3 flops at TensorE's bf16 peak (128x128 MACs per cycle at
    2.4 GHz on trn2) take 1.748 ms: the kernel may not be faster and should
    be within 15%.  Timing mode: the same time without computing values."""
    code = ("import torch, torch_neuronsim\n"
            "a = torch.empty(4096, 4096, dtype=torch.bfloat16, device='neuron')\n"
            "torch_neuronsim.reset_stats()\n"
            "c = a @ a\n"
            "s = torch_neuronsim.stats()\n"
            "assert s['cpu_fallbacks'] == 0\n"
            "print(s['native_ops']['aten::mm']['simulated_ps'], s['matmul_flops'])\n")
    ps, flops = _sim_time(code)
    peak_ps = 4096 ** 3 / (128 * 128) / 2.4e9 * 1e12
    assert flops == 2 * 4096 ** 3
    assert ps >= peak_ps
    assert ps <= 1.15 * peak_ps, ps / peak_ps


@pytest.mark.parametrize("target", neuronsim.TARGETS)
def test_small_matmuls_never_beat_peak(target):
    code = ("import torch, torch_neuronsim\n"
            "for m, k, n in [(128, 128, 512), (512, 1024, 512), (1, 4096, 4096)]:\n"
            "    a = torch.empty(m, k, device='neuron'); b = torch.empty(k, n, device='neuron')\n"
            "    torch_neuronsim.reset_stats(); a @ b\n"
            "    print(torch_neuronsim.stats()['kernel_time_ns'], m, k, n)\n")
    v = _sim_time(code, target)
    ghz = neuronsim.chip_info(target)["clock_mhz"]["tensor"] / 1000
    for ns, m, k, n in zip(v[0::4], v[1::4], v[2::4], v[3::4]):
        # fp32 runs at 1/4 rate; a TensorE pass covers 128 rows and columns
        peak_ns = 4 * ((m + 127) // 128) * ((k + 127) // 128) * n / ghz
        assert ns >= peak_ns, (m, k, n, ns, peak_ns)


def test_weight_layout_cache_sees_every_write():
    """x @ W.t() reuses a K-major copy of W until W's memory is written:
    in-place ops, `.data` aliases, partial fills and new storage all count."""
    lin = torch.nn.Linear(64, 48)
    x = torch.randn(5, 64)
    dl = torch.nn.Linear(64, 48).to(NEURON)
    dl.load_state_dict(lin.state_dict())
    check = lambda: torch.testing.assert_close(dl(x.to(NEURON)).cpu(), lin(x), rtol=1e-4, atol=1e-4)
    check()
    torch_neuronsim.reset_stats()
    check()
    assert "aten::copy_" not in torch_neuronsim.stats()["native_ops"]   # the cached layout
    with torch.no_grad():
        lin.weight.add_(1.0)
        dl.weight.add_(1.0)
    check()
    lin.weight.data.mul_(0.5)
    dl.weight.data.mul_(0.5)
    check()
    lin.weight.data[0].fill_(3.0)
    dl.weight.data[0].fill_(3.0)
    check()
    w2 = torch.randn(48, 64)
    lin.weight.data = w2
    dl.weight.data = w2.to(NEURON)
    check()


def test_weight_layout_cache_sees_a_storage_given_new_memory():
    """FSDP2's unsharded parameters: the storage is freed (resized to
    nothing) and given memory again, then written once -- as many writes as
    the cached copy saw, on another allocation of the same StorageImpl.  A
    fresh process, so which blocks the allocator hands out is the same
    every run (the cases where the stale copy was used before the fix)."""
    code = textwrap.dedent("""
        import torch, torch_neuronsim
        n, k = 37, 53
        x = torch.randn(5, k)
        w = torch.randn(n, k).to("neuron")           # one write
        (x.to("neuron") @ w.t()).cpu()               # the layout is cached
        for _ in range(6):
            st = w.untyped_storage()
            st.resize_(0)                            # the block goes back to the cache...
            hold = torch.empty(n * k, device="neuron")   # ...and another tensor takes it
            st.resize_(n * k * 4)                    # another block
            w3 = torch.randn(n, k)
            with torch.no_grad():
                w.copy_(w3)                          # one write, again
            print(((x.to("neuron") @ w.t()).cpu() - x @ w3.t()).abs().max().item())
            del hold
    """)
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, NEURON_SIM="1"), timeout=900)
    assert r.returncode == 0, r.stderr
    errors = [float(v) for v in r.stdout.split()]
    assert len(errors) == 6 and max(errors) < 1e-4, errors


def test_weight_layout_cache_can_be_turned_off():
    code = ("import torch, torch_neuronsim\n"
            "x = torch.randn(5, 64, device='neuron'); w = torch.randn(48, 64, device='neuron')\n"
            "x @ w.t(); torch_neuronsim.reset_stats(); x @ w.t()\n"
            "print(torch_neuronsim.stats()['native_ops']['aten::mm']['simulated_ps'])\n")
    on = _sim_time(code)[0]
    env_off = dict(os.environ, NEURON_SIM_WEIGHT_LAYOUT_CACHE="0")
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True,
                       env=env_off, timeout=300)
    assert r.returncode == 0, r.stderr
    off = float(r.stdout.split()[-1])
    assert off > on        # without the cache every call turns W round on TensorE


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_k_too_long_for_one_program_is_split_and_summed_in_fp32(dtype):
    """TRL's chunked log-prob backward: acc.addmm_(grad, w_chunk) with a
    32768-wide vocab chunk outgrew SBUF and raised; K is split until each
    part's program fits, the parts summed in fp32, rounded once"""
    g = torch.Generator().manual_seed(0)
    m, k, n = 129, 72000 if dtype == torch.bfloat16 else 40000, 130
    a, b = torch.randn(m, k, generator=g).to(dtype), torch.randn(k, n, generator=g).to(dtype)
    acc = torch.randn(m, n, generator=g).to(dtype)
    want = (acc.float() + a.float() @ b.float())
    an, bn = a.to(NEURON), b.to(NEURON)
    torch_neuronsim.reset_stats()
    prod = (an @ bn).float().cpu()
    s = torch_neuronsim.stats()
    assert s["native_ops"]["aten::mm"]["count"] >= 2            # the K parts' products, then their sum
    torch_neuronsim.reset_stats()
    got = acc.to(NEURON).addmm_(an, bn).float().cpu()
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0 == s["cpu_fallbacks"]
    tol = dict(rtol=1e-5, atol=1e-3) if dtype == torch.float32 else dict(rtol=1e-2, atol=2.0)
    torch.testing.assert_close(got, want, **tol)
    torch.testing.assert_close(prod, a.float() @ b.float(), **tol)
