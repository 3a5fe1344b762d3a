"""Run the hand-written example programs (examples/programs/*.nsasm) on the
simulated NeuronCore through `neuronsim run`, check their outputs against
NumPy/torch references, and print each run's timing summary.  Writes the
traces and summaries to build/examples/.  (Build first: scripts/setup.sh.)"""
import os
import pathlib
import subprocess
import sys

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("NSIM_BUILD_DIR", ROOT / "build"))
CLI = BUILD / "bin" / "neuronsim"
OUT = BUILD / "examples"
OUT.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(2026)


def bf16(a):
    return torch.tensor(a).bfloat16().float().numpy()


def run(name, inputs, outputs):
    args = [str(CLI), "run", str(ROOT / "examples" / "programs" / f"{name}.nsasm"),
            "--summary", str(OUT / f"{name}.summary.json"), "--trace", str(OUT / f"{name}.trace.json")]
    for k, v in inputs.items():
        np.save(OUT / f"{name}.{k}.npy", v)
        args += ["--input", f"{k}={OUT / f'{name}.{k}.npy'}"]
    for k in outputs:
        args += ["--output", f"{k}={OUT / f'{name}.out.{k}.npy'}"]
    print(f"\n=== {name} ===", flush=True)
    r = subprocess.run(args, capture_output=True, text=True)
    print(r.stdout, end="")
    if r.returncode:
        print(r.stderr, file=sys.stderr)
        sys.exit(r.returncode)
    return {k: np.load(OUT / f"{name}.out.{k}.npy") for k in outputs}


x = rng.standard_normal((128, 512)).astype(np.float32)
w = (rng.standard_normal((128, 128)) * 0.1).astype(np.float32)
y = run("matmul_gelu", {"x": x, "w": w}, ["y"])["y"]
ref = bf16(torch.nn.functional.gelu(torch.tensor(bf16(w).T @ bf16(x))).numpy())
err = np.abs(y - ref).max()
print(f"y[0, :4] = {np.array2string(y[0, :4], precision=4)}   max |y - torch| = {err:.2e}")
assert err < 0.05

s = rng.standard_normal((128, 256)).astype(np.float32)
o = run("softmax_rows", {"x": s}, ["y", "yt"])
ref = torch.softmax(torch.tensor(s), dim=1).numpy()
err = np.abs(o["y"] - ref).max()
print(f"row sums = {o['y'].sum(1)[:3]}   max |softmax - torch| = {err:.2e}")
assert err < 1e-5 and np.array_equal(o["yt"], o["y"][:32, :32].T)

x = (rng.standard_normal((128, 1024)) * 2 + 3).astype(np.float32)
mv = run("layer_stats", {"x": x}, ["mv"])["mv"]
err = max(np.abs(mv[:, 0] - x.mean(1)).max(), np.abs(mv[:, 1] - x.var(1)).max())
print(f"mean, var of row 0 = {mv[0]}   max |(mean, var) - numpy| = {err:.2e}")
assert err < 1e-4

s4 = rng.standard_normal((128, 256)).astype(np.float32)
y4 = run("softmax_v4", {"x": s4}, ["y"])["y"]
err = np.abs(y4 - torch.softmax(torch.tensor(s4), dim=1).numpy()).max()
print(f"trn3 VectorE exponential: max |softmax - torch| = {err:.2e}")
assert err < 1e-5


x = rng.standard_normal((64, 256)).astype(np.float32)
o = run("dynamic_row", {"x": x, "idx": np.array([[3]], np.int32)}, ["out", "r"])
print(f"r = {int(o['r'][0, 0])}   rows {8 * 7}..{8 * 7 + 7} of x copied: {np.array_equal(o['out'], x[56:64])}")
assert int(o["r"][0, 0]) == 7 and np.array_equal(o["out"], x[56:64])

xl = rng.standard_normal((1, 4)).astype(np.float32)
o = run("dynamic_loop", {"n": np.array([[5]], np.int32), "x": xl}, ["y"])
print(f"a run-time loop of n = 5 iterations: y == 5 * x: {np.allclose(o['y'], 5 * xl)}")
assert np.allclose(o["y"], 5 * xl)

# router scores with many equal values (rounded to quarters): the experts
# picked for tied scores are the ones CPU torch.topk picks
sc = (np.round(rng.standard_normal((128, 64)) * 2) / 4).astype(np.float32)
o = run("router_topk", {"scores": sc}, ["top", "expert"])
tv, ti = torch.topk(torch.tensor(sc), 8, dim=1)
same = np.array_equal(o["expert"].astype(np.int64), ti.numpy()) and np.array_equal(o["top"], tv.numpy())
print(f"token 0 experts {o['expert'][0].tolist()}   same experts and order as CPU torch.topk: {same}")
assert same

print(f"\ntraces (open in ui.perfetto.dev or chrome://tracing) and summaries: {OUT}")
