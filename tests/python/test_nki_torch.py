"""NKI kernels called with `neuron` torch tensors: they run on the device like
a native op (stream time, stats, traces)."""
import pathlib
import sys

import neuronsim
import torch

import torch_neuronsim
from torch_neuronsim import nki
from nsim_util import nki_run

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "nki"))
import sample_kernels as kernels  # noqa: E402  (not `kernels`: the Kernels library's import name)


def test_kernel_on_neuron_tensors_runs_like_an_op(tmp_path):
    a = torch.randn(128, 512, device="neuron")
    b = torch.randn(128, 512, device="neuron")
    torch_neuronsim.reset_stats()
    with torch_neuronsim.profile(tmp_path / "k.pftrace", summary=tmp_path / "k.json"):
        c = kernels.tensor_add(a, b)
    assert c.device.type == "neuron" and c.dtype == torch.float32
    torch.testing.assert_close(c.cpu(), a.cpu() + b.cpu(), rtol=0, atol=0)
    st = torch_neuronsim.stats()
    assert st["native_ops"]["nki::tensor_add"]["count"] == 1 and st["cpu_fallbacks"] == 0
    assert '"label": "nki::tensor_add"' in (tmp_path / "k.json").read_text()
    # the same kernel with NumPy gives the same simulated time, plus the NEFF
    # start-up and tear-down of a standalone execution (in torch, the
    # plugin's stream charges its launch overhead instead)
    _, res = nki.simulate(kernels.tensor_add, a.cpu().numpy(), b.cpu().numpy())
    chip = neuronsim.chip_info(kernels.tensor_add.target)
    assert st["native_ops"]["nki::tensor_add"]["simulated_ps"] + chip["exec_startup_ps"] + \
        chip["exec_teardown_ps"] == res.stats["total_ps"]


def test_bf16_matmul_kernel_on_neuron_tensors():
    x = torch.randn(256, 256, dtype=torch.bfloat16, device="neuron")
    w = torch.randn(256, 512, dtype=torch.bfloat16, device="neuron")
    y = kernels.matmul_tiled(x, w)
    ref = x.cpu().float().T @ w.cpu().float()
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.cpu().float(), ref, rtol=1e-2, atol=1e-2 * ref.abs().max().item())
    import torch_neuronsim.nki.language as nl
    assert nl.tile_size.pmax == 128


def test_bf16_cpu_tensors_run_on_the_simulator():
    """NumPy has no bf16: CPU torch bf16 tensors are kernel arguments too
    (simulated like NumPy arrays; CPU bf16 tensors back)."""
    a = torch.randn(128, 512).bfloat16()
    b = torch.randn(128, 512).bfloat16()
    c = kernels.tensor_add(a, b)
    assert c.device.type == "cpu" and c.dtype == torch.bfloat16
    torch.testing.assert_close(c, (a.float() + b.float()).bfloat16(), rtol=0, atol=0)
    out, res = nki.simulate(kernels.tensor_add, a, b)
    assert res.latency_us > 0 and out.dtype.name == "float32"
    # mixing CPU and neuron tensors in one call is refused by name
    import pytest
    with pytest.raises(nki.NKIError, match="one kind per call"):
        kernels.tensor_add(a.to("neuron"), b)


def test_nki_op_registers_a_custom_operator_with_autograd():
    """@nki_op("lib::name", mutates_args={}) makes a function calling NKI
    kernels a PyTorch custom operator (torch.ops.lib.name), on `neuron` and
    CPU tensors; register_autograd gives it a backward (here another
    kernel), as the SDK's pytorch-native-overview.rst describes."""
    import neuronsim_nki.language as nl

    @nki.jit
    def scale(x, s):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.multiply(nl.load(x), s))
        return out

    @nki.nki_op("nsimtest::triple", mutates_args={})
    def triple(x: torch.Tensor) -> torch.Tensor:
        return scale(x, 3.0)

    @triple.register_fake
    def _(x):
        return torch.empty_like(x)

    def backward(ctx, grad):
        return scale(grad.contiguous(), 3.0)

    triple.register_autograd(backward)
    x = torch.randn(128, 64, device="neuron")
    torch.testing.assert_close(torch.ops.nsimtest.triple(x).cpu(), x.cpu() * 3, rtol=1e-6, atol=1e-6)
    xc = torch.randn(128, 64, requires_grad=True)
    y = triple(xc)
    y.sum().backward()
    torch.testing.assert_close(y.detach(), xc.detach() * 3, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(xc.grad, torch.full_like(xc, 3.0))


def test_torch_neuronx_nki_op_resolves_under_nki_run(tmp_path, neuronsim):
    """`from torch_neuronx import nki_op, nki` (the SDK's example) works
    unmodified under `neuronsim nki run`."""
    script = tmp_path / "op.py"
    script.write_text(
        "import torch\n"
        "from torch_neuronx import nki_op, nki\n"
        "import nki.language as nl\n"
        "@nki.jit\n"
        "def my_kernel(x):\n"
        "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    nl.store(out, value=nl.exp(nl.load(x)))\n"
        "    return out\n"
        "@nki_op('nsimtest2::my_op', mutates_args={})\n"
        "def my_op(x: torch.Tensor) -> torch.Tensor:\n"
        "    return my_kernel(x)\n"
        "x = torch.randn(128, 64, device='neuron')\n"
        "assert torch.allclose(my_op(x).cpu(), x.cpu().exp(), rtol=1e-5, atol=1e-6)\n"
        "print('ok')\n")
    r = nki_run(neuronsim, script)
    assert "ok" in r.stdout
