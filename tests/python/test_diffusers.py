"""Diffusers pipelines on `neuron` (issue 39): Stable Diffusion 1.x, SDXL,
PixArt-alpha, Flux, Flux2-klein and QwenImage from the tiny component sizes
of diffusers' own tests (examples/diffusers_pipelines.py builds them, nothing
downloaded), eager and compiled as diffusers' Neuron tests compile them, under
NEURON_STRICT=1: the image matches the CPU's, no CPU fallback, no node of a
compiled graph left to run eagerly; Diffusers takes its Neuron paths."""
import sys
from pathlib import Path

import pytest
import torch

import torch_neuronsim

pytest.importorskip("diffusers")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import diffusers_pipelines as dp  # noqa: E402


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    monkeypatch.setenv("NEURON_STRICT", "1")
    dp.quiet()


def test_diffusers_sees_torchneuron():
    """its checks for TorchNeuron (package metadata, torch.neuron) pass, so its
    Neuron code paths run"""
    from diffusers.utils import is_torch_neuronx_available
    from diffusers.utils.torch_utils import get_device, maybe_adjust_dtype_for_device
    assert is_torch_neuronx_available() and get_device() == "neuron"
    assert maybe_adjust_dtype_for_device(torch.int64, torch.device("neuron")) == torch.int32


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("name", list(dp.PIPELINES))
def test_pipeline_matches_cpu(name, mode):
    torch._dynamo.reset()
    r = dp.compare(name, compile=mode == "compiled")
    assert r["fallbacks"] == 0, r["fallback_ops"]
    assert r["eager_nodes"] == 0
    assert dp.close_enough(r), r
    if mode == "compiled":
        assert r["graphs"] >= 2


@pytest.mark.parametrize("name", ["sdxl", "flux"])
def test_bfloat16_pipeline_is_as_close_to_float32_as_the_cpus(name):
    """diffusers' Neuron tests run in bf16: neuron's bf16 image is as close to
    the float32 image as the CPU's bf16 image is"""
    r = dp.compare(name, dtype=torch.bfloat16)
    assert r["fallbacks"] == 0, r["fallback_ops"]
    assert dp.close_enough(r), r


def test_tensor_parallel_on_two_ranks_matches_one_process():
    """Flux's and QwenImage's transformers sharded over two NeuronCores by
    diffusers' own tensor-parallel path (its Neuron pre-shard backend): each
    rank holds part of the weights; the images match the CPU pipeline's"""
    import os
    import subprocess
    script = Path(__file__).resolve().parents[2] / "examples" / "diffusers_tp.py"
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", str(script),
                        "flux", "qwenimage"], capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, NEURON_SIM="1", NEURON_STRICT="1", OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = [line for line in r.stdout.splitlines() if line.startswith("| flux") or line.startswith("| qwenimage")]
    assert len(rows) == 2 and not any("MISMATCH" in line for line in rows), r.stdout
