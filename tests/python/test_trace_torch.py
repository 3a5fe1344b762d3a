"""Traces and profiling from PyTorch: torch_neuronsim.profile() and ranges
over a small model's forward, MFU and HBM bytes of a matmul at peak, the
trace budget, NEURON_RT_INSPECT_ENABLE on the main example, and the legacy
autograd profiler's simulated device times."""
import bisect
import json
import os
import subprocess
import sys

import pytest
import torch

import torch_neuronsim
from trace_util import ENGINE_TRACKS, ROOT, decode_raw, read_pftrace


class TinyMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(256, 512)
        self.l2 = torch.nn.Linear(512, 128)

    def forward(self, x):
        return torch.softmax(self.l2(torch.nn.functional.gelu(self.l1(x))), dim=-1)


def test_small_model_forward_trace(tmp_path, tmp_path_factory):
    torch.manual_seed(0)
    model = TinyMLP().to("neuron")
    x = torch.randn(64, 256, device="neuron")
    trace, summary = tmp_path / "fwd.pftrace", tmp_path / "fwd.json"
    with torch_neuronsim.profile(trace, summary=summary):
        with torch_neuronsim.profile_range("forward"):
            y = model(x)
    ref = TinyMLP()
    ref.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    torch.testing.assert_close(y.cpu(), ref(x.cpu()), rtol=1e-4, atol=1e-5)
    assert '"TensorE"' in decode_raw(trace)
    d = read_pftrace(trace, tmp_path_factory)
    s = json.loads(summary.read_text())
    assert s["program_count"] >= 4
    # one track per engine (idle ones too) and per DMA queue used, each once
    names = list(d.tracks.values())
    assert len(names) == len(set(names))
    assert set(ENGINE_TRACKS.values()) <= set(names) and "DMA queue 0" in names
    for eng, track in ENGINE_TRACKS.items():
        assert d.busy_ps(track) == s[f"{eng}_engine_active_time_ps"], eng
    # ATen op slices enclose the engine slices below them
    ops = d.on("Programs (PyTorch ops)")
    assert {"aten::addmm", "aten::gelu", "aten::_softmax"} & {o["name"] for o in ops}
    assert all(o["name"].startswith("aten::") for o in ops)
    for eng_track in ENGINE_TRACKS.values():
        for sl in d.on(eng_track):
            assert any(o["start"] <= sl["start"] and sl["end"] <= o["end"] for o in ops), sl
    # the range spans every program run inside it
    (rng,) = d.on("Ranges (depth 0)")
    assert rng["name"] == "forward"
    assert rng["start"] <= min(o["start"] for o in ops) and max(o["end"] for o in ops) <= rng["end"]
    # the summary's programs table names the ops
    labels = {p["label"] for p in s["programs"]}
    assert labels == {o["name"] for o in ops}
    assert sum(p["count"] for p in s["programs"]) == s["program_count"] == len(ops)


def test_mfu_hbm_bytes_and_the_matmul_at_peak(tmp_path):
    """A 4096^3 bf16 matmul runs at ~94% of TensorE peak: the summary shows
    that MFU, computed as model FLOPs / (time x peak), and HBM bytes equal to
    what its DMAs moved (the inputs read once, the output written once)."""
    script = tmp_path / "mm.py"
    script.write_text(f"""
import json, torch, torch_neuronsim
n = 4096
a = torch.ones(n, n, dtype=torch.bfloat16, device="neuron")
b = torch.ones(n, n, dtype=torch.bfloat16, device="neuron")
torch_neuronsim.reset_stats()
with torch_neuronsim.profile(None, summary={str(tmp_path / 's.json')!r}, detail="program"):
    c = a @ b
st = torch_neuronsim.stats()
print(json.dumps({{"sim_ns": st["kernel_time_ns"], "flops": st["matmul_flops"],
                  "v": float(c[0, 0].float().cpu())}}))
""")
    env = dict(os.environ, NEURON_SIM="1", NEURON_SIM_LAUNCH_OVERHEAD_US="0")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr.decode()
    info = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert info["v"] == 4096.0
    s = json.loads((tmp_path / "s.json").read_text())
    n = 4096
    assert s["model_flops"] == 2 * n ** 3 == info["flops"]
    peak = s["peak_flops_per_second"]
    assert s["mfu_estimated_percent"] == pytest.approx(100 * s["model_flops"] / (s["total_time"] * peak), rel=1e-5)
    # independently: FLOPs over the plugin's simulated time at the published peak
    independent = 100 * 2 * n ** 3 / (info["sim_ns"] * 1e-9 * 2 * 128 * 128 * 2.4e9)
    assert s["mfu_estimated_percent"] == pytest.approx(independent, rel=1e-3)
    assert 88 < s["mfu_estimated_percent"] < 100
    # HBM bytes are what the DMAs moved (every transfer is HBM<->SBUF here):
    # the output written once, the operands read at least once each (the
    # kernel re-streams operand blocks it cannot keep in SBUF)
    assert s["hbm_read_bytes"] + s["hbm_write_bytes"] == s["dma_transfer_total_bytes"]
    assert s["hbm_write_bytes"] == n * n * 2
    assert s["hbm_read_bytes"] >= 2 * n * n * 2 and s["hbm_read_bytes"] % (n * n * 2) == 0
    assert s["tensor_engine_active_time_percent"] <= 100


def test_trace_budget_bounds_the_file(tmp_path, tmp_path_factory):
    x = torch.randn(128, 64, device="neuron")
    trace = tmp_path / "budget.pftrace"
    with torch_neuronsim.profile(trace, max_mb=1):
        for _ in range(1500):
            x = torch.relu(x * 1.0001 + 0.001)
    size = trace.stat().st_size
    assert size <= 1 << 20
    d = read_pftrace(trace, tmp_path_factory)
    notes = [n for n, _ in d.instants]
    # detail degrades in steps and the whole run stays covered
    assert "trace budget: per-program slices from here on" in notes
    assert "trace budget: engine utilization per 1 ms from here on" in notes
    assert not any(n.startswith("trace budget reached:") for n in notes)
    assert any("instruction" in s["args"] for s in d.on("VectorE"))
    assert any("busy_ps" in s["args"] for s in d.on("VectorE"))
    assert d.counters["VectorE busy %"]
    # an empty profile is a small, valid file (running out of budget is
    # covered by tests/sim/test_traces.cc)
    with torch_neuronsim.profile(tmp_path / "tiny.pftrace", max_mb=1, detail="utilization"):
        pass
    assert (tmp_path / "tiny.pftrace").stat().st_size < 4096


def test_profile_api_errors(tmp_path):
    with pytest.raises(ValueError, match="give a trace path"):
        with torch_neuronsim.profile():
            pass
    with pytest.raises(ValueError, match="detail="):
        with torch_neuronsim.profile(tmp_path / "t.pftrace", detail="ops"):
            pass
    with pytest.raises(RuntimeError, match="cannot create trace"):
        with torch_neuronsim.profile(tmp_path / "missing" / "t.pftrace"):
            pass
    with torch_neuronsim.profile(tmp_path / "a.pftrace"):
        with pytest.raises(RuntimeError, match="already being written"):
            with torch_neuronsim.profile(tmp_path / "b.pftrace"):
                pass
    assert not torch_neuronsim.profiler.is_active()


def test_autograd_profiler_shows_simulated_device_time():
    x = torch.randn(256, 256, device="neuron")
    w = torch.randn(256, 256, device="neuron")
    torch.mm(x, w)
    torch_neuronsim.reset_stats()
    with torch.autograd.profiler.profile(use_device="neuron") as prof:
        torch.mm(x, w)
    (mm,) = [e for e in prof.key_averages() if e.key == "aten::mm"]
    native = torch_neuronsim.stats()["native_ops"]["aten::mm"]
    # the launch overhead (15 us) plus the program's simulated time, in whole us
    want_us = 15 + native["simulated_ps"] / 1e6
    assert abs(mm.self_device_time_total - want_us) <= 1.0


def test_inspect_env_traces_the_main_example(tmp_path, tmp_path_factory):
    out = tmp_path / "inspect"
    env = dict(os.environ, NEURON_SIM="1", NEURON_RT_INSPECT_ENABLE="1", NEURON_RT_INSPECT_OUTPUT_DIR=str(out))
    r = subprocess.run([sys.executable, "-W", "ignore", str(ROOT / "examples" / "llama_generate.py"),
                        "--tokens", "2", "--layers", "1"], capture_output=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    (trace,) = out.glob("neuronsim_*.pftrace")
    (summary,) = out.glob("neuronsim_*_summary.json")
    assert b"NEURON_RT_INSPECT_ENABLE: writing" in r.stderr
    d = read_pftrace(trace, tmp_path_factory)
    s = json.loads(summary.read_text())
    ops = d.on("Programs (PyTorch ops)")
    assert len(ops) == s["program_count"] > 100
    assert {"aten::mm", "aten::mul", "aten::copy_"} <= {o["name"] for o in ops}
    for eng, track in ENGINE_TRACKS.items():
        assert d.busy_ps(track) == s[f"{eng}_engine_active_time_ps"], eng
    # every engine slice sits inside the ATen op that launched its program
    starts = sorted((o["start"], o["end"]) for o in ops)
    for sl in d.on("TensorE"):
        i = bisect.bisect_right(starts, (sl["start"], float("inf"))) - 1
        assert starts[i][0] <= sl["start"] and sl["end"] <= starts[i][1]
    assert d.process_of[ops[0]["uuid"]] == "NeuronCore 0"


def test_torch_profiler_shows_each_ops_device_time(tmp_path):
    """torch.profiler (the Kineto path) with the PrivateUse1 activity: each
    program the device ran is a kernel event linked to its op, lasting the
    program's simulated time (runtime/kineto.cpp)"""
    import json
    from torch.profiler import ProfilerActivity, profile
    x = torch.randn(256, 256, device="neuron")
    w = torch.randn(256, 256, device="neuron")
    torch.mm(x, w).relu()
    torch_neuronsim.reset_stats()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(2):
            torch.mm(x, w).relu()
    native = torch_neuronsim.stats()["native_ops"]
    rows = {e.key: e for e in prof.key_averages()}
    for op in ("aten::mm", "aten::relu"):
        want_us = native[op]["simulated_ps"] / 1e6               # two calls, launch overhead excluded
        assert rows[op].count == 2 and abs(rows[op].self_device_time_total - want_us) <= 0.01, op
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    kernels = [e for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"] if e.get("cat") == "kernel"]
    assert sorted(e["name"] for e in kernels) == ["aten::mm", "aten::mm", "aten::relu", "aten::relu"]
    # each stream's kernels in order, none overlapping
    kernels.sort(key=lambda e: e["ts"])
    assert all(a["ts"] + a["dur"] <= b["ts"] + 1e-3 for a, b in zip(kernels, kernels[1:]))
    # a CPU-only session records nothing on the device side
    with profile(activities=[ProfilerActivity.CPU]) as cpu_only:
        torch.mm(x, w)
    assert all(e.self_device_time_total == 0 for e in cpu_only.key_averages())
