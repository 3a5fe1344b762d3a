"""NKI kernels on the simulator: for each kernel in tests/nki and each
target, simulated latency, per-engine active time and the host seconds to
trace and simulate it.  Usage: python3 bench/nki_kernels.py [TARGET ...] (default:
every target of the ISA's target table)"""
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "nki"))

import sample_kernels as kernels  # noqa: E402  (not `kernels`: the Kernels library's import name)
import matmul_stages  # noqa: E402

import neuronsim_nki as nki  # noqa: E402
from neuronsim import ENGINES, TARGETS  # noqa: E402


def cases():
    rng = np.random.default_rng(0)
    f32, f16 = np.float32, np.float16

    def r(*shape, dt=f32):
        return rng.standard_normal(shape).astype(dt)
    yield "tensor_add 128x512", kernels.tensor_add, (r(128, 512), r(128, 512))
    yield "softmax 128x384", kernels.softmax_rows, (r(128, 384),)
    yield "rmsnorm 512x1024", kernels.rmsnorm, (r(512, 1024), r(1024))
    yield "layernorm 512x1024", kernels.layernorm, (r(512, 1024), r(1, 1024), r(1, 1024))
    yield "transpose 512x512", kernels.transpose_2d, (r(512, 512),)
    yield "attention d64 256x512", kernels.attention_fwd, (r(64, 256), r(64, 512), r(512, 64), 0.125)
    yield "selective_scan 128x64", kernels.selective_scan, (r(128, 64), np.abs(r(128, 64)) * 0.1,
                                                             -np.abs(r(128, 1)), r(1, 64), r(1, 64))
    yield "selective_scan_isa 128x2048", kernels.selective_scan_isa, (r(128, 2048), np.abs(r(128, 2048)) * 0.1,
                                                                   -np.abs(r(128, 1)), r(1, 2048), r(1, 2048))
    a, b = r(1024, 1024, dt=f16), r(1024, 2048, dt=f16)
    for k in matmul_stages.STAGES:
        yield f"{k.__name__} 1024x1024x2048", k, (a, b)


def main(targets):
    print(f"{'kernel':34s} {'target':6s} {'sim us':>9s} " +
          " ".join(f"{e:>7s}" for e in ENGINES) + f" {'host s':>7s}")
    for name, kernel, args in cases():
        for target in targets:
            kernel._target = target
            t0 = time.perf_counter()
            _, res = nki.simulate(kernel, *args)
            host = time.perf_counter() - t0
            act = " ".join(f"{res.engine_active_percent[e]:6.1f}%" for e in ENGINES)
            print(f"{name:34s} {target:6s} {res.latency_us:9.2f} {act} {host:7.2f}")
        kernel._target = None


if __name__ == "__main__":
    unknown = [t for t in sys.argv[1:] if t not in TARGETS]
    if unknown:
        raise SystemExit(f"bench/nki_kernels.py: unknown target {unknown[0]!r} ({', '.join(TARGETS)})")
    main(sys.argv[1:] or list(TARGETS))
