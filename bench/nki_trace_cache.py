"""Host time of NKI kernel calls: the first call traces (and simulates),
the second takes the program from the kernel's trace cache.  For each kernel
of tests/nki (and, given the nki-samples directory, the matrix-multiplication
tutorial's tiled kernel at C-01's full shape, 8192x4096x8192 bf16 on trn1),
prints the first call's trace time and total time, the second call's trace
time (the cache lookup) and total time, and the second trace's share of the
first.  Usage: python3 bench/nki_trace_cache.py [NKI_SAMPLES_DIR]
Timing mode (NEURON_SIM_MODE=timing unless set): values are not computed."""
import os
import pathlib
import sys
import time

import numpy as np

os.environ.setdefault("NEURON_SIM_MODE", "timing")
ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import neuronsim_nki as nki  # noqa: E402
import nki_kernels  # noqa: E402


def timed_calls(kernel, args, target):
    """(first trace s, first call s, second trace s, second call s)"""
    k = nki.Kernel(kernel.func, target)
    spent = []
    real = k._traced

    def traced(a, kw):
        t0 = time.perf_counter()
        out = real(a, kw)
        spent.append(time.perf_counter() - t0)
        return out
    k._traced = traced
    calls = []
    for _ in range(2):
        t0 = time.perf_counter()
        k.simulate(*args)
        calls.append(time.perf_counter() - t0)
    assert k.traces_made == 1
    return spent[0], calls[0], spent[1], calls[1]


def cases(samples):
    for name, kernel, args in nki_kernels.cases():
        yield name, kernel, args, "trn2"
    if samples:
        import fidelity
        mod = fidelity.load_module(fidelity.need([samples], fidelity.MM_FILE, "nki-samples"))
        rng = np.random.default_rng(0)
        K, M, N = 8192, 4096, 8192
        a, b = fidelity.bf16((K, M), rng), fidelity.bf16((K, N), rng)
        import torch_neuronsim.nki  # noqa: F401  (torch CPU bf16 tensors as arguments)
        yield "C-01 nki_matmul_tiled_ 8192x4096x8192", mod.nki_matmul_tiled_, (a, b), "trn1"


def main():
    samples = sys.argv[1] if len(sys.argv) > 1 else None
    print(f"{'kernel':40s} {'target':6s} {'trace 1 s':>9s} {'call 1 s':>9s} {'trace 2 s':>9s} "
          f"{'call 2 s':>9s} {'trace 2/1':>9s}")
    for name, kernel, args, target in cases(samples):
        t1, c1, t2, c2 = timed_calls(kernel, args, target)
        print(f"{name:40s} {target:6s} {t1:9.3f} {c1:9.3f} {t2:9.5f} {c2:9.3f} {100 * t2 / t1:8.2f}%")


if __name__ == "__main__":
    main()
