"""What TorchNeuron code imports works in an ordinary Python process (issue
39): `nki` (NKI 0.7+), `neuronxcc.nki`, `torch_neuronx` with its package
metadata, @nki.jit kernels on `neuron` tensors, and @nki_op custom operators
(eager: one trace per signature; autograd; one node of a compiled graph's
program).  Installed packages of those names are never shadowed."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_neuronsim


def run_python(code, env=None, python=sys.executable, cwd=None):
    e = dict(os.environ, NEURON_SIM="1")
    e.update(env or {})
    r = subprocess.run([python, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300,
                       env=e, cwd=cwd)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_imports_resolve_in_an_ordinary_process(tmp_path):
    out = run_python("""
        import importlib.metadata as md, sys
        import nki, nki.language as nl, nki.isa as nisa, nki.typing
        import neuronxcc.nki.language as nl2
        from neuronxcc import nki as nki2
        import neuronsim_nki
        assert nki is neuronsim_nki and nki2 is nki and nl2 is nl and nisa is neuronsim_nki.isa
        assert 'torch' not in sys.modules            # the NKI names need no torch
        print(md.version('torch-neuronx'), md.version('torch_neuronx'), md.version('nki'))
        import torch_neuronx
        from torch_neuronx import nki_op, nki as tnki
        print(torch_neuronx.__version__, callable(nki_op), tnki.jit is nki.jit)
    """, cwd=tmp_path)
    meta, mod = out.split("\n")[:2]
    tv = torch.__version__.split("+")[0]
    assert meta.split() == [f"{tv}+neuronsim", f"{tv}+neuronsim", "0.8.0+neuronsim"]
    assert mod.split() == [f"{tv}+neuronsim", "True", "True"]


def test_a_jit_kernel_on_neuron_tensors_matches_numpy(tmp_path):
    out = run_python("""
        import numpy as np, torch
        import nki, nki.language as nl

        @nki.jit
        def scaled_add(a, b, s):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, value=nl.add(nl.multiply(nl.load(a), s), nl.load(b)))
            return out
        a, b = np.random.rand(128, 300).astype(np.float32), np.random.rand(128, 300).astype(np.float32)
        r = scaled_add(torch.from_numpy(a).to('neuron'), torch.from_numpy(b).to('neuron'), 2.0)
        print(r.device, np.allclose(r.cpu().numpy(), a * 2.0 + b, rtol=1e-6, atol=1e-6))
    """, cwd=tmp_path)
    assert out.split() == ["neuron:0", "True"]


def test_installed_packages_are_never_shadowed(tmp_path):
    """a distribution named nki installed in a scratch venv: `import nki` and
    its metadata are that package's; the stand-ins that remain still work"""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    pkg = os.path.join(site, "nki")
    os.makedirs(pkg)
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write("REAL = True\n")
    dist = os.path.join(site, "nki-9.9.0.dist-info")
    os.makedirs(dist)
    with open(os.path.join(dist, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: nki\nVersion: 9.9.0\n")
    out = run_python("""
        import importlib.metadata as md, importlib.util
        import nki
        print(getattr(nki, 'REAL', False), md.version('nki'), importlib.util.find_spec('nki.language') is None)
        import torch_neuronx
        print(torch_neuronx.__version__.endswith('+neuronsim'))
    """, python=str(venv / "bin" / "python"), cwd=tmp_path)
    assert out.split() == ["True", "9.9.0", "True", "True"]


def test_the_stand_ins_can_be_turned_off(tmp_path):
    out = run_python("""
        import importlib.util, importlib.metadata as md
        print(importlib.util.find_spec('nki') is None, importlib.util.find_spec('torch_neuronx') is None)
        try:
            md.version('torch-neuronx')
        except md.PackageNotFoundError:
            print('no-metadata')
    """, env={"NEURONSIM_STANDINS": "0"}, cwd=tmp_path)
    assert out.split() == ["True", "True", "no-metadata"]


def test_an_unnamed_distribution_listing_does_not_see_the_stand_ins():
    """pip and friends list every distribution: the stand-ins answer only
    when asked by name"""
    import importlib.metadata as md
    names = {d.metadata["Name"] for d in md.distributions()}
    assert "torch-neuronx" not in names
    assert md.version("torch-neuronx").endswith("+neuronsim")


# --------------------------------------------------------------- @nki_op
def _rms_ref(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


@pytest.fixture(scope="module")
def rmsnorm():
    """an NKI RMSNorm as a custom op with a backward, as the TorchNeuron guide
    writes one (from torch_neuronx import nki_op)"""
    from torch_neuronx import nki_op
    import nki
    import nki.language as nl

    @nki.jit
    def rmsnorm_kernel(x, w):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        n, d = x.shape
        wt = nl.load(w)
        for i in nl.affine_range((n + 127) // 128):
            ip = i * 128 + nl.arange(128)[:, None]
            jf = nl.arange(d)[None, :]
            xt = nl.load(x[ip, jf], mask=(ip < n))
            r = nl.rsqrt(nl.add(nl.multiply(nl.sum(nl.multiply(xt, xt), axis=[1]), 1.0 / d), 1e-6))
            nl.store(out[ip, jf], value=nl.multiply(nl.multiply(xt, r), wt.broadcast_to((128, d))), mask=(ip < n))
        return out

    @nki_op("nsimtest_standins::rmsnorm", mutates_args={})
    def op(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return rmsnorm_kernel(x, w.view(1, -1))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, g):
        x, w = ctx.saved_tensors
        with torch.enable_grad():
            xx, ww = x.detach().requires_grad_(), w.detach().requires_grad_()
            return torch.autograd.grad(_rms_ref(xx, ww), (xx, ww), g)

    op.register_autograd(backward, setup_context=setup_context)
    op.kernel = rmsnorm_kernel
    return op


def test_nki_op_compiles_once_per_signature(rmsnorm):
    x, w = torch.randn(200, 64), torch.randn(64)
    X, W = x.to("neuron"), w.to("neuron")
    before = rmsnorm.kernel.traces_made
    for _ in range(3):
        y = rmsnorm(X, W)
    torch.testing.assert_close(y.cpu(), _rms_ref(x, w), rtol=1e-4, atol=1e-4)
    assert rmsnorm.kernel.traces_made == before + 1          # traced on the first call only
    rmsnorm(torch.randn(100, 64).to("neuron"), W)                    # another shape: traced again
    assert rmsnorm.kernel.traces_made == before + 2


def test_nki_op_trains_a_tiny_model_as_the_cpu_does(rmsnorm):
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self, norm):
            super().__init__()
            self.up, self.down = torch.nn.Linear(32, 64), torch.nn.Linear(64, 8)
            self.w = torch.nn.Parameter(torch.ones(64) + 0.1 * torch.randn(64))
            self.norm = norm

        def forward(self, x):
            return self.down(self.norm(torch.relu(self.up(x)), self.w))

    cpu = Net(_rms_ref)
    dev = Net(rmsnorm)
    dev.load_state_dict(cpu.state_dict())
    dev.to("neuron")
    x, t = torch.randn(130, 32), torch.randn(130, 8)
    for model, xs, ts in ((cpu, x, t), (dev, x.to("neuron"), t.to("neuron"))):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(xs), ts).backward()
            opt.step()
    for (name, a), (_, b) in zip(cpu.named_parameters(), dev.named_parameters()):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=1e-4, atol=1e-4, msg=name)


def test_nki_op_is_one_node_of_a_compiled_graphs_program(rmsnorm):
    x, w = torch.randn(200, 64), torch.randn(64)
    X, W = x.to("neuron"), w.to("neuron")
    seen = []

    def count(gm, example_inputs):
        seen.append([n.target for n in gm.graph.nodes if n.op == "call_function"])
        from torch_neuronsim.compile import neuron_backend
        return neuron_backend(gm, example_inputs)

    def f(x, w):
        return rmsnorm(x * 2.0, w) + 1.0
    c = torch.compile(f, backend=count)
    c(X, W)
    torch_neuronsim.reset_stats()
    r = c(X, W)
    s = torch_neuronsim.stats()
    torch.testing.assert_close(r.cpu(), _rms_ref(x * 2.0, w) + 1.0, rtol=1e-4, atol=1e-4)
    assert sum(t is torch.ops.nsimtest_standins.rmsnorm.default for t in seen[0]) == 1
    assert s["programs_executed"] == 1 and s["compile"]["fallback_node_runs"] == 0 and s["cpu_fallbacks"] == 0


def test_set_model_name_labels_the_graphs_compiled_after_it(tmp_path):
    """torch_neuronx.neuron_dynamo_backend.set_model_name, as diffusers' Neuron
    tests call it before compiling each pipeline component: the graphs
    compiled after it carry the name (here on the device timeline)"""
    out = run_python("""
        import torch
        from torch_neuronx.neuron_dynamo_backend import set_model_name
        import torch_neuronsim
        set_model_name("sdxl_unet")
        f = torch.compile(lambda x: (x * 2).sum(), backend="neuron")
        torch_neuronsim.reset_stats()
        f(torch.ones(4, device="neuron"))
        f(torch.ones(4, device="neuron"))
        print(torch_neuronsim.device_timeline()[-1]["op"])
        try:
            set_model_name(3)
        except TypeError as e:
            print("TypeError")
    """, cwd=tmp_path)
    label, err = out.split("\n")[:2]
    assert label.startswith("sdxl_unet: compiled graph ") and err == "TypeError"
