"""Mixture-of-experts routers on `neuron`: the integer steps Transformers'
default experts path runs (sort of expert ids, floor_divide / remainder /
div's rounding modes for token indices, histc for tokens per expert,
cumsum to int32 offsets) as native kernels matching CPU PyTorch, and the MoE
and state-space architectures forward and greedy-generate like the CPU with
zero fallbacks under NEURON_STRICT=1."""
import os
import subprocess
import sys

import pytest
import torch

import torch_neuronsim

NEURON = torch.device("neuron")
HERE = os.path.dirname(os.path.abspath(__file__))
SWEEP = os.path.join(HERE, "..", "..", "bench", "model_sweep.py")


def native(fn, *args):
    """fn on CPU and on neuron: identical values and dtype, no fallback"""
    want = fn(*args)
    torch_neuronsim.reset_stats()
    got = fn(*[a.to(NEURON) if isinstance(a, torch.Tensor) else a for a in args])
    assert torch_neuronsim.stats()["fallback_ops"] == {}
    wants, gots = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    for g, w in zip(gots, wants):
        assert g.device.type == "neuron" and g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0, equal_nan=True)


G = torch.Generator().manual_seed(0)
I64 = torch.randint(-(1 << 62), 1 << 62, (300,), generator=G)
I64[:5] = torch.tensor([0, -1, 1, -(1 << 63), (1 << 63) - 1])
I32 = torch.randint(-100000, 100000, (300,), dtype=torch.int32, generator=G)
SIGNED = torch.randint(1, 50, (300,), dtype=torch.int32, generator=G) * torch.tensor([1, -1], dtype=torch.int32).repeat(150)
F32 = torch.randn(300, generator=G) * 10


@pytest.mark.parametrize("c", [1, 2, 3, 7, 100, 1 << 15])
def test_int64_floor_divide_and_remainder_by_a_constant_are_exact(c):
    native(lambda t: t // c, I64)
    native(lambda t: t % c, I64)
    for mode in ("floor", "trunc"):
        native(lambda t: torch.div(t, c, rounding_mode=mode), I64)


def test_narrow_int_and_float_division_modes():
    for mode in (None, "floor", "trunc"):
        native(lambda a, b: torch.div(a, b, rounding_mode=mode), I32, SIGNED)
        native(lambda a, b: torch.div(a, b, rounding_mode=mode), F32, torch.randn(300, generator=G))
    native(lambda a, b: a % b, I32, SIGNED)
    native(lambda a: a // -3, I32)
    native(lambda a: a // 0.1, F32)                   # 1 // 0.1 is 9 on CPU, not 10
    native(lambda a, z: a // z, F32, torch.zeros(300))   # +-inf, nan
    native(lambda a, b: a % b, F32, torch.randn(300, generator=G))
    native(torch.floor, F32)
    native(torch.floor, F32.bfloat16())
    native(lambda a, lo, hi: a.clamp(lo, hi), F32, torch.randn(300, generator=G) - 1, torch.randn(300, generator=G) + 1)


def test_integer_division_by_zero_raises_like_the_cpu():
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        I32.to(NEURON) // 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        I32.to(NEURON) % torch.zeros(300, dtype=torch.int32).to(NEURON)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8, torch.bool])
def test_integer_sort_is_stable_and_exact(dtype):
    """an LSD radix sort of 16-bit digits over the stable bitonic kernel"""
    if dtype == torch.bool:
        x = torch.rand(3, 33, generator=G) > 0.5
    elif dtype == torch.int64:
        x = torch.randint(-(1 << 62), 1 << 62, (3, 300), generator=G)
        x[0, :4] = torch.tensor([-(1 << 63), (1 << 63) - 1, 0, -1])
        x[1] = torch.randint(0, 8, (300,), generator=G)                     # expert ids: many ties
    else:
        info = torch.iinfo(dtype)
        x = torch.randint(max(info.min, -(1 << 20)), min(info.max, 1 << 20), (3, 129), generator=G).to(dtype)
    for desc in (False, True):
        native(lambda t: tuple(torch.sort(t, dim=-1, descending=desc, stable=True)), x)
    native(lambda t: tuple(torch.sort(t, dim=0, stable=True)), x.t().contiguous())


def test_histc_counts_like_the_cpu():
    ids = torch.randint(0, 8, (64,), dtype=torch.int32, generator=G)
    native(lambda t: torch.histc(t, bins=8, min=0, max=7), ids.float())
    native(lambda t: torch.histc(t, bins=10, min=-2, max=2), F32 / 10)            # outside: not counted
    native(lambda t: torch.histc(t, bins=13), F32)                                # the data's range
    native(lambda t: torch.histc(t, bins=10, min=-1, max=1), (F32 / 10).bfloat16())
    # integers (CPU PyTorch refuses them; a router sends int32 on accelerators): as their fp32 values
    torch_neuronsim.reset_stats()
    got = torch.histc(ids.to(NEURON), bins=8, min=0, max=7).cpu()
    assert torch_neuronsim.stats()["fallback_ops"] == {}
    assert got.dtype == torch.int32 and torch.equal(got, torch.histc(ids.float(), bins=8, min=0, max=7).int())
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histc(F32.to(NEURON), bins=0)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32])
def test_cumsum_to_int32_offsets(dtype):
    x = torch.randint(0, 20, (7, 37), generator=G).to(dtype)
    for out in (None, torch.int32, torch.int64):
        native(lambda t: torch.cumsum(t, 1, dtype=out), x)


# afmoe's tiny config initialises its router to zeros: every expert score
# ties, so it picks CPU's experts only if topk breaks ties as CPU does
MOE = ["mixtral", "qwen3_moe", "gpt_oss", "qwen2_moe", "olmoe", "deepseek_v2", "phimoe", "granitemoe", "jetmoe",
       "afmoe"]
# state-space and hybrid models: depthwise causal conv1d, the SSM scan's
# masks (tril of bool), softplus; Llama-4's complex rotary embedding
SSM = ["mamba", "falcon_mamba", "falcon_h1", "mamba2", "jamba", "llama4_text"]


@pytest.mark.parametrize("arch", MOE + SSM)
def test_architecture_matches_the_cpu_with_zero_fallbacks(arch):
    """bench/model_sweep.py's tiny config of the architecture: logits of an
    8-token prompt and 4 greedy tokens, CPU against neuron, NEURON_STRICT=1"""
    r = subprocess.run([sys.executable, SWEEP, arch], capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, NEURON_SIM="1", NEURON_STRICT="1", PYTHONWARNINGS="ignore"))
    assert r.returncode == 0, r.stderr[-2000:]
    import json
    res = json.loads(r.stdout[r.stdout.index("{"):])
    assert res["status"] == "match" and not res.get("fallbacks"), res


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_mm_runs_as_native_matmuls(dtype):
    """torch._grouped_mm (a MoE's experts in one call): its decomposition
    into one TensorE matmul per group, rows past the last offset untouched
    by any group"""
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(10, 8, generator=g).to(dtype), torch.randn(3, 8, 16, generator=g).to(dtype)
    offs = torch.tensor([3, 7, 10], dtype=torch.int32)
    want = torch._grouped_mm(a, b, offs=offs)
    torch_neuronsim.reset_stats()
    got = torch._grouped_mm(a.to(NEURON), b.to(NEURON), offs=offs.to(NEURON))
    assert torch_neuronsim.stats()["fallback_ops"] == {}
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4 if dtype == torch.float32 else 2e-2, atol=1e-4)
    a3 = torch.randn(3, 4, 8, generator=g).to(dtype)
    torch.testing.assert_close(torch._grouped_mm(a3.to(NEURON), b.to(NEURON)).cpu(), torch._grouped_mm(a3, b),
                               rtol=1e-4 if dtype == torch.float32 else 2e-2, atol=1e-4)
