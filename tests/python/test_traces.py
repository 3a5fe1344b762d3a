"""Traces from `neuronsim run`: Perfetto traces decoded by an independent
reader and their agreement with the summary, the Chrome JSON twin,
determinism, per-program detail, and the trace tools (summary, diff, errors).
The PyTorch side is in test_trace_torch.py."""
import json
import subprocess

import numpy as np
import pytest
from nsim_util import run
from trace_util import ENGINE_TRACKS, ROOT, decode_raw, read_pftrace

EX = ROOT / "examples" / "programs"


def matmul_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, 512)).astype(np.float32),
            "w": (rng.standard_normal((128, 128)) * 0.1).astype(np.float32)}


def slow_variant(tmp_path):
    """matmul_gelu with TensorE held up 400 cycles before its matmul."""
    text = (EX / "matmul_gelu.nsasm").read_text()
    slow = tmp_path / "matmul_gelu_slow.nsasm"
    slow.write_text(text.replace("    load_stationary", "    nop cycles=400\n    load_stationary", 1))
    return slow


def test_cli_pftrace_decodes_and_matches_the_summary(neuronsim, tmp_path, tmp_path_factory):
    trace, summary = tmp_path / "t.pftrace", tmp_path / "s.json"
    run(neuronsim, EX / "matmul_gelu.nsasm", matmul_inputs(), tmp_path,
        extra=["--trace", str(trace), "--summary", str(summary)])
    raw = decode_raw(trace)
    assert '"TensorE"' in raw and '"multiply_moving"' in raw
    d = read_pftrace(trace, tmp_path_factory)
    s = json.loads(summary.read_text())
    # one track per engine and DMA queue the program uses, each once
    names = list(d.tracks.values())
    assert len(names) == len(set(names))
    assert {"TensorE", "ScalarE", "SyncE", "DMA queue 0", "DMA queue 1"} <= set(names)
    # slices per engine add up to the summary's busy time, exactly in ps and
    # within a nanosecond per slice on the ns timestamps
    for eng, track in ENGINE_TRACKS.items():
        want = s[f"{eng}_engine_active_time_ps"]
        assert d.busy_ps(track) == want, eng
        ns = sum(x["end"] - x["start"] for x in d.on(track))
        assert abs(ns * 1000 - want) <= 1000 * (len(d.on(track)) + 1), eng
        # a track's slices never overlap (Perfetto nests overlapping slices)
        sl = sorted(d.on(track), key=lambda x: x["args"]["index"])
        assert all(a["end"] <= b["start"] for a, b in zip(sl, sl[1:])), eng
    # DMA slices carry the HBM bytes the summary counts
    dma = [x for x in d.slices if x["track"].startswith("DMA queue")]
    assert len(dma) == s["dma_transfer_count"]
    assert sum(x["args"]["hbm_read_bytes"] for x in dma) == s["hbm_read_bytes"]
    assert sum(x["args"]["hbm_write_bytes"] for x in dma) == s["hbm_write_bytes"]
    assert sum(x["args"]["bytes"] for x in dma) == s["dma_transfer_total_bytes"]
    mm = [x for x in d.on("TensorE") if x["name"] == "multiply_moving"]
    assert len(mm) == 1 and mm[0]["args"]["flops"] == s["model_flops"] == 2 * 128 * 128 * 512
    assert "multiply_moving" in mm[0]["args"]["instruction"]
    prog = d.on("Programs (PyTorch ops)")
    assert [p["name"] for p in prog] == ["matmul_gelu.nsasm"]
    assert prog[0]["args"]["duration_ps"] == s["total_time_ps"]
    # counters: chip HBM bandwidth (GB/s x ns = bytes), SBUF/PSUM allocation
    # back to 0 at the end
    # a step function (repeated values left out): integrated, the bytes
    hbm = d.counters["HBM read GB/s"]
    assert hbm[-1][1] == 0
    assert sum(v * (t1 - t0) for (t0, v), (t1, _) in zip(hbm, hbm[1:])) == \
        pytest.approx(s["hbm_read_bytes"], rel=0.01)
    assert d.counters["SBUF allocated bytes"][0][1] > 0 and d.counters["SBUF allocated bytes"][-1][1] == 0
    assert d.counters["PSUM allocated bytes"][0][1] == 128 * 512 * 4
    device = dict(d.instants)["device"]
    assert device["target"] == "trn2" and device["peak_flops_per_second"] > 0


def test_chrome_json_has_the_same_content(neuronsim, tmp_path, tmp_path_factory):
    ins = matmul_inputs(3)
    run(neuronsim, EX / "matmul_gelu.nsasm", ins, tmp_path, extra=["--trace", str(tmp_path / "t.pftrace")])
    run(neuronsim, EX / "matmul_gelu.nsasm", ins, tmp_path, extra=["--trace", str(tmp_path / "t.json")])
    d = read_pftrace(tmp_path / "t.pftrace", tmp_path_factory)
    ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    tid_name = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
    x = [e for e in ev if e["ph"] == "X"]
    assert len(x) == len(d.slices)
    for track in set(tid_name.values()):
        mine = [e for e in x if tid_name.get((e["pid"], e["tid"])) == track]
        theirs = d.on(track)
        assert sorted(e["name"] for e in mine) == sorted(s["name"] for s in theirs), track
        # microseconds with 6 decimals: picoseconds survive
        assert sum(round(e["dur"] * 1e6) for e in mine) == sum(s["args"]["duration_ps"] for s in theirs)


def test_traces_are_deterministic_and_program_detail_aggregates(neuronsim, tmp_path, tmp_path_factory):
    ins = matmul_inputs(4)
    paths = []
    for i in range(2):
        paths.append(tmp_path / f"t{i}.pftrace")
        run(neuronsim, EX / "matmul_gelu.nsasm", ins, tmp_path, extra=["--trace", str(paths[-1])])
    assert paths[0].read_bytes() == paths[1].read_bytes()
    agg, summary = tmp_path / "agg.pftrace", tmp_path / "s.json"
    run(neuronsim, EX / "matmul_gelu.nsasm", ins, tmp_path,
        extra=["--trace", str(agg), "--trace-detail", "program", "--summary", str(summary)])
    d = read_pftrace(agg, tmp_path_factory)
    s = json.loads(summary.read_text())
    assert agg.stat().st_size < paths[0].stat().st_size
    for eng, track in ENGINE_TRACKS.items():
        sl = d.on(track)
        assert len(sl) <= 1
        assert sum(x["args"]["busy_ps"] for x in sl) == s[f"{eng}_engine_active_time_ps"]


def test_trace_cli_errors(neuronsim, tmp_path):
    def call(*args):
        return subprocess.run([str(neuronsim), *args], capture_output=True, timeout=120)
    r = call("run", str(EX / "matmul_gelu.nsasm"), "--trace-detail", "everything")
    assert r.returncode == 2 and b"--trace-detail 'everything'" in r.stderr
    _, r = run(neuronsim, EX / "matmul_gelu.nsasm", matmul_inputs(), tmp_path,
               extra=["--trace", str(tmp_path / "no" / "dir" / "t.pftrace")], check=False)
    assert r.returncode == 1 and b"cannot create trace" in r.stderr
    junk = tmp_path / "junk.pftrace"
    junk.write_bytes(b"\x0a\xff\xff\x01abc")
    r = call("trace", "summary", str(junk))
    assert r.returncode == 1 and b"truncated packet" in r.stderr
    (tmp_path / "bad.json").write_text("{not json")
    r = call("trace", "summary", str(tmp_path / "bad.json"))
    assert r.returncode == 1 and b"not valid JSON" in r.stderr
    r = call("trace", "summary", str(tmp_path / "missing.pftrace"))
    assert r.returncode == 1 and b"No such file" in r.stderr


def test_trace_tools_summary_and_diff(neuronsim, tmp_path):
    trace, summary = tmp_path / "t.pftrace", tmp_path / "s.json"
    run(neuronsim, EX / "matmul_gelu.nsasm", matmul_inputs(), tmp_path,
        extra=["--trace", str(trace), "--summary", str(summary)])
    r = subprocess.run([str(neuronsim), "trace", "summary", str(trace)], capture_output=True, timeout=120)
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr.decode()
    assert "mfu_estimated_percent" in out and "tensor:multiply_moving" in out and "matmul_gelu.nsasm" in out
    # the trace and the summary agree on every metric both carry
    r = subprocess.run([str(neuronsim), "trace", "diff", str(summary), str(trace), "--fail-above", "0.001"],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()
    assert "tensor_engine_active_time_ps" in r.stdout.decode()
    # a slower variant (TensorE stalls 400 cycles): the diff shows where and fails
    other = tmp_path / "slow.json"
    run(neuronsim, slow_variant(tmp_path), matmul_inputs(), tmp_path, extra=["--summary", str(other)])
    r = subprocess.run([str(neuronsim), "trace", "diff", str(summary), str(other), "--fail-above", "1"],
                       capture_output=True, timeout=120)
    out = r.stdout.decode()
    assert r.returncode == 1 and "changed by" in out, out
    assert "tensor:nop" in out and "only in B" in out


def test_utilization_detail_keeps_busy_time_and_hbm_bytes(neuronsim, tmp_path, tmp_path_factory):
    trace, summary = tmp_path / "u.pftrace", tmp_path / "s.json"
    run(neuronsim, EX / "matmul_gelu.nsasm", matmul_inputs(5), tmp_path,
        extra=["--trace", str(trace), "--trace-detail", "utilization", "--summary", str(summary)])
    d = read_pftrace(trace, tmp_path_factory)
    assert not d.slices
    s = json.loads(summary.read_text())
    for eng, track in ENGINE_TRACKS.items():
        c = d.counters.get(f"{track} busy %", [])
        busy_ps = sum(v / 100 * (t1 - t0) * 1000 for (t0, v), (t1, _) in zip(c, c[1:]))
        assert busy_ps == pytest.approx(s[f"{eng}_engine_active_time_ps"], abs=1), eng
    r = subprocess.run([str(neuronsim), "trace", "summary", str(trace)], capture_output=True, timeout=120)
    assert r.returncode == 0 and b"hbm_read_bytes" in r.stdout and b"163,840" in r.stdout
