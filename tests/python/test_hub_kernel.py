"""The example Hub kernel repository (examples/hub_kernel: NKI kernels for
RMSNorm and SiLU-and-mul in `build/torch-neuron`) through the Kernels
library: loaded and digest-verified by `get_local_kernel`, its functions
against CPU PyTorch across tile boundaries, Transformers' `use_kernels`
replacing a Llama's RMSNorm (logits, a training step, a compiled graph), and
`kernelize` on a SiLU-and-mul module (issue 39)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import torch_neuronsim

kernels = pytest.importorskip("kernels")
transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
REPO = ROOT / "examples" / "hub_kernel"
VARIANT = REPO / "build" / "torch-neuron"


@pytest.fixture(scope="module")
def hub():
    return kernels.get_local_kernel(REPO)


def rms_ref(x, w, eps):
    h = x.float()
    return w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def test_metadata_digest_is_current_and_verified(hub):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "hub_kernel_metadata.py"), "--check", str(VARIANT)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    from kernels._rust import Metadata
    from kernels.digest import DigestVerificationResult, verify_digest
    md = Metadata.read_from_file(VARIANT / "metadata.json")
    assert str(md.backend.backend_type) == "neuron" and md.python_depends == ["nki"]
    assert isinstance(verify_digest(VARIANT, metadata=md, location=None, cache=False),
                      DigestVerificationResult.Success)
    assert {"rms_norm", "silu_and_mul", "layers"} <= set(dir(hub))


def test_a_changed_file_fails_the_digest(tmp_path):
    """a kernel whose files differ from its metadata's digest is refused by the loader"""
    import shutil
    copy = tmp_path / "repo"
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "build" / "torch-neuron" / "_nki.py", "a") as f:
        f.write("\n# edited\n")
    with pytest.raises(Exception, match="digest|modified"):
        kernels.get_local_kernel(copy)


# rows and row lengths on both sides of the 128-partition tile and of the
# kernels' 2048-column chunk
SHAPES = [(1, 1), (127, 129), (129, 128), (257, 2049), (513, 64), (3, 5, 255)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_rms_norm_matches_cpu(hub, shape, dtype):
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(*shape, generator=g).to(dtype)
    w = (1 + 0.1 * torch.randn(shape[-1], generator=g)).to(dtype)
    got = hub.rms_norm(x.to("neuron"), w.to("neuron"), 1e-5).cpu()
    want = rms_ref(x, w, 1e-5)
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2, rtol=1e-2)
    torch.testing.assert_close(got, want, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_silu_and_mul_matches_cpu(hub, shape, dtype):
    g = torch.Generator().manual_seed(7 + sum(shape))
    x = torch.randn(*shape[:-1], 2 * shape[-1], generator=g).to(dtype)
    out = torch.empty(*shape, dtype=dtype, device="neuron")
    hub.silu_and_mul(out, x.to("neuron"))
    want = F.silu(x[..., :shape[-1]]) * x[..., shape[-1]:]
    tol = dict(atol=1e-6, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(out.cpu(), want, **tol)


@pytest.mark.parametrize("seed", [0, 5])
def test_mixed_dtypes_promote_as_torch_does(hub, seed):
    # fp32 out, but the normalised row is rounded to bf16 before the weight
    # multiplies it (as Llama's RMSNorm does): an fp32 rsqrt or mean a rounding
    # off torch's may round that row to the neighbouring bf16 value, so the
    # tolerance is one bf16 ulp of the row, 2^-7 of it at most (seed 5 has
    # such an element)
    g = torch.Generator().manual_seed(seed)
    x, w = torch.randn(130, 96, generator=g).bfloat16(), torch.randn(96, generator=g)
    got = hub.rms_norm(x.to("neuron"), w.to("neuron"), 1e-6).cpu()
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, rms_ref(x, w, 1e-6), atol=1e-5, rtol=2.0 ** -7)


def test_empty_and_refused_inputs(hub):
    e = hub.rms_norm(torch.empty(0, 64, device="neuron"), torch.ones(64, device="neuron"), 1e-6)
    assert e.shape == (0, 64)
    with pytest.raises(TypeError, match="float64"):
        hub.rms_norm(torch.ones(4, 8, dtype=torch.float64, device="neuron"),
                     torch.ones(8, dtype=torch.float64, device="neuron"), 1e-6)
    with pytest.raises(ValueError, match="weight of shape"):
        hub.rms_norm(torch.ones(4, 8, device="neuron"), torch.ones(9, device="neuron"), 1e-6)
    with pytest.raises(ValueError, match="must be even"):
        hub.silu_and_mul_op(torch.ones(4, 7, device="neuron"))
    with pytest.raises(ValueError, match="neuron device"):
        hub.rms_norm(torch.ones(4, 8), torch.ones(8), 1e-6)


# ------------------------------------------------- Transformers' use_kernels
def tiny_llama(dtype=torch.float32, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=200, hidden_size=96, intermediate_size=160, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).to(dtype)


def kernel_norms(model, hub):
    fwd = hub.layers.RMSNorm.forward
    norms = [m for m in model.modules() if type(m).__name__ == "LlamaRMSNorm"]
    return sum(getattr(m.forward, "__func__", None) is fwd for m in norms), len(norms)


def with_kernels(cpu_model, training=False):
    import copy
    from transformers import KernelConfig
    dev = copy.deepcopy(cpu_model).to("neuron")
    dev.train(training)
    dev.set_use_kernels(True, KernelConfig({"RMSNorm": f"{REPO}:RMSNorm"}, use_local_kernel=True))
    return dev


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_use_kernels_replaces_llamas_rmsnorm_and_logits_match(hub, dtype, monkeypatch):
    monkeypatch.setenv("NEURON_STRICT", "1")
    cpu = tiny_llama(dtype).eval()
    dev = with_kernels(cpu)
    assert kernel_norms(dev, hub) == (5, 5)
    ids = torch.randint(0, 200, (2, 19), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want, got = cpu(ids).logits, dev(ids.to("neuron")).logits.cpu()
    tol = dict(atol=2e-5, rtol=1e-4) if dtype == torch.float32 else dict(atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(got, want, **tol)


def test_use_kernels_in_training_mode_gives_the_cpus_gradients(hub):
    cpu = tiny_llama().train()
    dev = with_kernels(cpu, training=True)
    assert kernel_norms(dev, hub) == (5, 5)
    ids = torch.randint(0, 200, (2, 17), generator=torch.Generator().manual_seed(4))
    cpu(ids, labels=ids).loss.backward()
    dev(ids.to("neuron"), labels=ids.to("neuron")).loss.backward()
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, atol=2e-5, rtol=1e-4, msg=name)


def test_use_kernels_under_torch_compile_keeps_each_norm_one_node(hub, monkeypatch):
    monkeypatch.setenv("NEURON_STRICT", "1")
    from torch_neuronsim.compile import neuron_backend
    cpu = tiny_llama().eval()
    dev = with_kernels(cpu)
    nodes = []

    def backend(gm, example_inputs):
        nodes.extend(n.target for n in gm.graph.nodes if n.op == "call_function")
        return neuron_backend(gm, example_inputs)

    ids = torch.randint(0, 200, (1, 23), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        got = torch.compile(dev, backend=backend)(ids.to("neuron")).logits.cpu()
        want = cpu(ids).logits
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)
    assert sum(t is torch.ops.neuronsim_layers.rms_norm.default for t in nodes) == 5


def test_kernelize_replaces_a_silu_and_mul_module(hub):
    from kernels import LocalLayerRepository, Mode, kernelize, use_kernel_forward_from_hub, use_kernel_mapping

    @use_kernel_forward_from_hub("SiluAndMul")
    class SiluAndMul(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            d = x.shape[-1] // 2
            return F.silu(x[..., :d]) * x[..., d:]

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.act, self.down = torch.nn.Linear(48, 2 * 130), SiluAndMul(), torch.nn.Linear(130, 48)

        def forward(self, x):
            return self.down(self.act(self.up(x)))

    torch.manual_seed(6)
    cpu = MLP()
    dev = MLP()
    dev.load_state_dict(cpu.state_dict())
    dev = dev.to("neuron")
    layer = LocalLayerRepository(repo_path=REPO, layer_name="SiluAndMul")
    with use_kernel_mapping({"SiluAndMul": {"neuron": {Mode.INFERENCE: layer}}}):
        kernelize(dev, mode=Mode.INFERENCE)
    assert dev.act.forward.__func__ is hub.layers.SiluAndMul.forward
    x = torch.randn(3, 129, 48)
    torch.testing.assert_close(dev(x.to("neuron")).cpu(), cpu(x), atol=1e-5, rtol=1e-5)


def test_the_example_script_runs_unmodified():
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "use_kernels_llama.py"), "--via", "mapping"],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, NEURON_SIM="1", NEURON_STRICT="1"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "5 of 5" in r.stdout and r.stdout.strip().endswith("OK")
