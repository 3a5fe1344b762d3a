"""`neuronsim run` from the outside: values, the printed summary, the summary
JSON, the Chrome trace, modes, and errors as exit status 1 with a message."""
import json
import pathlib
import subprocess

import numpy as np
import torch

from neuronsim import ENGINES
from nsim_util import run

EX = pathlib.Path(__file__).resolve().parents[2] / "examples" / "programs"


def matmul_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, 512)).astype(np.float32),
            "w": (rng.standard_normal((128, 128)) * 0.1).astype(np.float32)}


def test_run_matmul_gelu_values_summary_and_trace(neuronsim, tmp_path):
    ins = matmul_inputs()
    summary, trace = tmp_path / "s.json", tmp_path / "t.json"
    res, r = run(neuronsim, EX / "matmul_gelu.nsasm", ins, tmp_path,
                 extra=["--summary", str(summary), "--trace", str(trace)])
    x = torch.tensor(ins["x"]).bfloat16().float()
    w = torch.tensor(ins["w"]).bfloat16().float()
    want = torch.nn.functional.gelu(w.T @ x).bfloat16().float().numpy()
    np.testing.assert_allclose(res["y"], want, rtol=8e-3, atol=1e-3)
    out = r.stdout.decode()
    assert "simulated time" in out and "tensor  engine" in out and "TFLOPS" in out

    s = json.loads(summary.read_text())
    for key in ("total_time", "neuroncore_cycle_count", "mfu_estimated_percent",
                "mbu_estimated_percent", "hbm_read_bytes", "hbm_write_bytes",
                "dma_transfer_count", "tensor_engine_active_time_percent",
                "scalar_engine_instruction_count", "matmul_instruction_count"):
        assert key in s, key
    assert s["matmul_instruction_count"] == 1
    assert s["hbm_read_bytes"] == (128 * 512 + 128 * 128) * 2
    assert s["hbm_write_bytes"] == 128 * 512 * 2
    assert 0 < s["total_time"] < 1e-3
    assert 0 < s["mfu_estimated_percent"] <= 100
    # on-chip traffic, by hand: DMA writes x, w into SBUF and reads y out;
    # the matmul reads w (load_stationary) and x, writes PSUM; the
    # activation reads PSUM (fp32) and writes y (bf16) to SBUF
    x_b, w_b, y_b, ps_b = 128 * 512 * 2, 128 * 128 * 2, 128 * 512 * 2, 128 * 512 * 4
    assert s["sbuf_write_bytes"] == x_b + w_b + y_b
    assert s["sbuf_read_bytes"] == y_b + w_b + x_b
    assert s["psum_write_bytes"] == ps_b and s["psum_read_bytes"] == ps_b
    assert 0 < s["dma_active_time_percent"] <= 100
    # the per-opcode table adds up to the engine figures
    ops = s["opcodes"]
    assert sum(o["instruction_count"] for o in ops) == s["instruction_count"]
    for eng in ENGINES:
        busy_ns = sum(o["instruction_time_ns"] for o in ops if o["engine"] == eng)
        want_ns = s[f"{eng}_engine_active_time_percent"] / 100 * s["total_time"] * 1e9
        assert abs(busy_ns - want_ns) <= 1e-3 * max(want_ns, 1.0), eng
        assert sum(o["instruction_count"] for o in ops if o["engine"] == eng) == \
            s[f"{eng}_engine_instruction_count"]
    mm = [o for o in ops if o["opcode"] == "multiply_moving"]
    assert len(mm) == 1 and mm[0]["engine"] == "tensor" and mm[0]["instruction_count"] == 1

    t = json.loads(trace.read_text())
    names = {e["args"]["name"] for e in t["traceEvents"] if e.get("name") == "thread_name"}
    assert {"TensorE", "ScalarE", "SyncE", "DMA queue 0", "DMA queue 1"} <= names
    slices = [e for e in t["traceEvents"] if e.get("ph") == "X"]
    assert any(e["name"] == "multiply_moving" for e in slices)
    assert any(e.get("cat") == "dma" for e in slices)
    assert all(e["dur"] >= 0 for e in slices)
    hbm = [e for e in t["traceEvents"] if e.get("cat") == "counter" and e["name"].startswith("HBM")]
    assert {e["name"] for e in hbm} == {"HBM read GB/s", "HBM write GB/s"}
    # read/write binned over the run, a step function (repeats left out):
    # integrated, the bytes add up to the summary's
    rd = sorted((e["ts"], e["args"]["value"]) for e in hbm if "read" in e["name"])
    total_read = sum(v * (t1 - t0) * 1e3 for (t0, v), (t1, _) in zip(rd, rd[1:]))
    assert abs(total_read - s["hbm_read_bytes"]) <= 0.01 * s["hbm_read_bytes"]


def test_modes_agree(neuronsim, tmp_path):
    ins = matmul_inputs(1)
    times = {}
    for mode in ("full", "timing", "functional"):
        summary = tmp_path / f"{mode}.json"
        res, _ = run(neuronsim, EX / "matmul_gelu.nsasm", ins, tmp_path,
                     extra=["--mode", mode, "--summary", str(summary)])
        times[mode] = json.loads(summary.read_text())["total_time"]
        if mode == "functional":
            full = np.load(tmp_path / "out_y.npy")
    assert times["full"] == times["timing"] > 0
    assert times["functional"] == 0


def test_run_errors_exit_1_with_messages(neuronsim, tmp_path):
    ins = matmul_inputs()
    np.save(tmp_path / "x.npy", ins["x"])
    np.save(tmp_path / "bad.npy", ins["x"][:, :10])
    base = [str(neuronsim), "run", str(EX / "matmul_gelu.nsasm")]

    def call(*args):
        return subprocess.run(base + list(args), capture_output=True, timeout=60)

    r = call("--input", f"x={tmp_path / 'x.npy'}")
    assert r.returncode == 1 and b"input tensor 'w' needs --input w=FILE.npy" in r.stderr
    r = call("--input", f"x={tmp_path / 'bad.npy'}", "--input", f"w={tmp_path / 'x.npy'}")
    assert r.returncode == 1 and b"shape does not match tensor 'x'" in r.stderr
    r = call("--input", f"q={tmp_path / 'x.npy'}")
    assert r.returncode == 1 and b"no input tensor of that name" in r.stderr
    r = call("--input", f"x={tmp_path / 'missing.npy'}")
    assert r.returncode == 1
    assert call("--mode", "warp").returncode == 2
    assert call("--input", "novalue").returncode == 2

    dead = tmp_path / "dead.nsasm"
    dead.write_text(".target trn2\n.semaphores 1\n.engine vector\nsem_wait sem=0 value=1\nend\n")
    r = subprocess.run([str(neuronsim), "run", str(dead)], capture_output=True, timeout=60)
    assert r.returncode == 1
    assert b"NSIM_TIMEOUT" in r.stderr and b"deadlock" in r.stderr

    wrong = tmp_path / "t1.nsasm"
    wrong.write_text(".target trn1\n")
    r = subprocess.run([str(neuronsim), "run", str(wrong), "--target", "trn2"], capture_output=True,
                       timeout=60)
    assert r.returncode == 1 and b"built for trn1" in r.stderr


def test_every_example_runs(neuronsim, tmp_path, examples):
    from nsim_util import random_input, tensors
    rng = np.random.default_rng(5)
    for prog in examples:
        text = prog.read_text()
        ins = {n: random_input(dt, shape, rng) for n, kind, dt, shape in tensors(text)
               if kind == "input"}
        if "ids" in ins:
            ins["ids"] = np.array([3, 7, 999, 0], dtype=np.int32)
        if prog.name == "dynamic_row.nsasm":     # a row block inside x
            ins["idx"] = np.array([[3]], dtype=np.int32)
        if prog.name == "dynamic_loop.nsasm":    # the loop's trip count
            ins["n"] = np.array([[5]], dtype=np.int32)
        if prog.name == "token_reduce.nsasm":    # rows of table[64, 32]
            ins["ix"] = rng.integers(0, 64, (16, 2)).astype(np.int32)
        res, r = run(neuronsim, prog, ins, tmp_path)
        assert r.returncode == 0, (prog.name, r.stderr)
