"""Helpers for running programs through `neuronsim run` from tests: random
inputs made from a program's tensor table, outputs read back as NumPy."""
import importlib.util
import pathlib
import re
import subprocess

import numpy as np

NP_DTYPES = {"fp32": np.float32, "fp16": np.float16, "int32": np.int32, "int16": np.int16,
             "int8": np.int8, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
             "bool": np.bool_}
# dtypes NumPy lacks travel as float32 (exactly representable after rounding)
WIDE = {"bf16", "fp8_e4m3", "fp8_e4m3fn", "fp8_e5m2", "tf32"}


def tensors(text):
    """[(name, kind, dtype, shape)] from a program's .tensor lines."""
    out = []
    for m in re.finditer(r"^\s*\.tensor\s+(\S+)\s+(\S+)\s+(\S+)\s+\[([0-9,]*)\]", text, re.M):
        shape = tuple(int(d) for d in m.group(4).split(",") if d)
        out.append((m.group(1), m.group(2), m.group(3), shape))
    return out


def random_input(dtype, shape, rng, low=-2.0, high=2.0):
    if dtype in NP_DTYPES and np.issubdtype(NP_DTYPES[dtype], np.integer):
        info = np.iinfo(NP_DTYPES[dtype])
        return rng.integers(max(info.min, -100), min(info.max, 100), size=shape,
                            endpoint=True).astype(NP_DTYPES[dtype])
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    a = rng.uniform(low, high, size=shape).astype(np.float32)
    return a.astype(NP_DTYPES.get(dtype, np.float32))


def run(cli, prog_path, inputs, tmp, extra=(), check=True):
    """Runs PROG with {name: array}; returns ({output name: array}, CompletedProcess)."""
    tmp = pathlib.Path(tmp)
    text = pathlib.Path(prog_path).read_text() if str(prog_path).endswith(".nsasm") else ""
    args = [str(cli), "run", str(prog_path)]
    for name, arr in inputs.items():
        f = tmp / f"in_{name}.npy"
        np.save(f, arr)
        args += ["--input", f"{name}={f}"]
    outs = [t for t in tensors(text) if t[1] == "output"]
    for name, *_ in outs:
        args += ["--output", f"{name}={tmp / ('out_' + name + '.npy')}"]
    r = subprocess.run(args + list(extra), capture_output=True, timeout=600)
    if check:
        assert r.returncode == 0, r.stderr.decode()
    result = {}
    if r.returncode == 0:
        for name, *_ in outs:
            result[name] = np.load(tmp / f"out_{name}.npy")
    return result, r


def load_bench(name):
    """bench/NAME.py as a module (the bench scripts are not a package)"""
    path = pathlib.Path(__file__).resolve().parents[2] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def assert_native_matches(fn, *args):
    """fn on `neuron` copies of the tensor arguments (others passed as they
    are) runs with no CPU fallback and matches fn on the CPU (NaN equal to
    NaN; tuples element by element, bools by equality)."""
    import torch
    import torch_neuronsim
    dev = torch.device("neuron")
    before = torch_neuronsim.stats()["cpu_fallbacks"]
    got = fn(*[a.to(dev) if isinstance(a, torch.Tensor) else a for a in args])
    assert torch_neuronsim.stats()["cpu_fallbacks"] == before, "ran on the CPU"
    want = fn(*args)
    if not isinstance(want, (torch.Tensor, tuple)):
        assert got == want
        return
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(g.cpu(), w, equal_nan=True)


def nki_run(neuronsim, script, *args):
    """`neuronsim nki run SCRIPT ARGS...`: the finished process, asserted to
    have exited 0 (its stderr the message otherwise)."""
    r = subprocess.run([str(neuronsim), "nki", "run", *map(str, args), str(script)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r
