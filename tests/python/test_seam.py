"""The seam between the plugin and the simulator is physical: one runtime
library per process, exporting exactly the public headers' API, used by
the torch plugin, the Python bindings and the CLI alike."""
import pathlib
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch

import neuronsim
import torch_neuronsim

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "sim" / "python" / "neuronsim" / "lib" / "libneuronsim.so"
PLUGIN = ROOT / "backend" / "python" / "torch_neuronsim" / "lib" / "libtorch_neuronsim.so"
HEADERS = [ROOT / "include" / "neuronsim" / h for h in ("isa.h", "runtime.h")]


def _exported(lib):
    if not shutil.which("nm"):
        pytest.skip("nm (binutils) is not installed")
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], check=True, capture_output=True,
                         text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def _declared():
    names = set()
    for h in HEADERS:
        text = re.sub(r"/\*.*?\*/", "", h.read_text(), flags=re.S)
        names |= set(re.findall(r"\b((?:isa|nsim)_\w+)\s*\(", text))
        names |= set(re.findall(r"extern\s+const\s+\w+\s+(\w+)\s*\[", text))
    return names


def test_runtime_library_exports_exactly_the_public_api():
    exported, declared = _exported(RUNTIME), _declared()
    assert exported - declared == set(), "exported but not in a public header"
    assert declared - exported == set(), "declared in a public header but not exported"
    assert not any(n.startswith(("dm_", "trc_", "npy_", "nsim_cli")) for n in exported)


def test_plugin_exports_only_its_own_entry_points_and_links_the_runtime():
    exported = _exported(PLUGIN)
    assert exported and all(n.startswith("neuron_") for n in exported), sorted(
        n for n in exported if not n.startswith("neuron_"))[:10]
    needed = subprocess.run(["objdump", "-p", str(PLUGIN)], check=True, capture_output=True,
                            text=True).stdout
    assert re.search(r"NEEDED\s+libneuronsim\.so", needed)


def test_cli_links_the_runtime_library():
    cli = ROOT / "build" / "bin" / "neuronsim"
    if not cli.exists():
        pytest.skip("no build/bin/neuronsim")
    needed = subprocess.run(["objdump", "-p", str(cli)], check=True, capture_output=True, text=True).stdout
    assert re.search(r"NEEDED\s+libneuronsim\.so", needed)


def _loaded_runtimes():
    maps = pathlib.Path("/proc/self/maps").read_text().splitlines()
    return {line.split()[-1] for line in maps if line.endswith("libneuronsim.so")}


def test_torch_and_nki_share_one_runtime():
    from torch_neuronsim import nki
    import torch_neuronsim.nki.language as nl

    @nki.jit
    def add(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(a), nl.load(b)))
        return out

    x = torch.ones(128, 256, device="neuron")
    assert len(_loaded_runtimes()) == 1
    # one device memory view: the bindings see the plugin's tensors
    assert neuronsim.running_target() == torch_neuronsim.target()
    before = neuronsim.memory_allocated()
    assert before == torch_neuronsim._lib.neuron_device_memory_in_use() and before >= x.numel() * 4
    y = torch.ones(1024, 1024, device="neuron")
    assert neuronsim.memory_allocated() - before >= y.numel() * 4
    # an NKI run on NumPy joins that runtime (no second one, nothing closed)
    a = np.full((128, 256), 2.0, np.float32)
    np.testing.assert_array_equal(add(a, a), 2 * a)
    assert len(_loaded_runtimes()) == 1
    assert neuronsim.memory_allocated() == torch_neuronsim._lib.neuron_device_memory_in_use()
    torch.testing.assert_close(add(x, x).cpu(), 2 * x.cpu())    # and the plugin's tensors are intact
    # a second target cannot be started under the plugin's runtime
    other = next(t for t in neuronsim.TARGETS if t != torch_neuronsim.target())
    with pytest.raises(neuronsim.NeuronSimError, match="already runs"):
        neuronsim.init(other)
    del y


def test_nki_frontend_and_bindings_never_import_torch():
    """The NKI frontend (nki/) and the bindings (sim/python) sit below the
    plugin: they run without torch, and torch tensors reach a kernel only
    through the convention torch_neuronsim.nki registers -- which the
    frontend imports when the first torch tensor reaches a kernel (torch is
    the caller's by then), never before."""
    import subprocess
    import sys
    code = ("import sys, numpy as np\n"
            "import neuronsim, neuronsim_nki as nki, neuronsim_nki.language as nl\n"
            "@nki.jit\n"
            "def add(a, b):\n"
            "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
            "    nl.store(out, value=nl.add(nl.load(a), nl.load(b)))\n"
            "    return out\n"
            "a = np.ones((128, 64), np.float32)\n"
            "assert (add(a, a) == 2).all()\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n"
            "import torch\n"
            "assert 'torch_neuronsim.nki' not in sys.modules\n"
            "r = add(torch.ones(128, 64), torch.ones(128, 64))\n"
            "print(type(r).__name__, bool((r == 2).all()), 'torch_neuronsim.nki' in sys.modules)\n")
    env = dict(__import__("os").environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["Tensor", "True", "True"], r.stdout


def _calls_between_files(archive):
    """{object file: {object files whose functions or data it uses}} of a
    static library, from its symbol tables"""
    if not shutil.which("nm"):
        pytest.skip("nm (binutils) is not installed")
    out = subprocess.run(["nm", "-A", str(archive)], check=True, capture_output=True, text=True).stdout
    defs, uses = {}, {}
    for line in out.splitlines():
        where, _, rest = line.partition(": ") if ": " in line else line.rpartition(":")
        member = where.split(":")[-1]
        parts = rest.split()
        if len(parts) == 3 and parts[1] in "TDBR":
            defs[parts[2]] = member
        elif len(parts) == 2 and parts[0] == "U":
            uses.setdefault(member, set()).add(parts[1])
        uses.setdefault(member, set())
    return {m: {defs[s] for s in used if s in defs and defs[s] != m} for m, used in uses.items()}


def _cycles(graph):
    seen, on, order, cycles = set(), [], {}, []

    def visit(v):
        seen.add(v)
        order[v] = len(on)
        on.append(v)
        for w in sorted(graph.get(v, ())):
            if w in order:
                cycles.append(on[order[w]:] + [w])
            elif w not in seen:
                visit(w)
        on.pop()
        del order[v]
    for v in sorted(graph):
        if v not in seen:
            visit(v)
    return cycles


@pytest.mark.parametrize("layer", ["isa", "sim"])
def test_no_two_files_of_a_layer_call_each_other_round(layer):
    """isa/ and sim/ are layered inside too: no file calls into one that
    (through others) calls back (the runtime's state and the validator's
    operand checks sit in files of their own for that)"""
    archive = ROOT / "build" / "lib" / f"libnsim_{layer}.a"
    if not archive.exists():
        pytest.skip(f"no {archive}")
    graph = _calls_between_files(archive)
    assert len(graph) >= 5
    assert not _cycles(graph), _cycles(graph)
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}})   # the check finds a cycle
