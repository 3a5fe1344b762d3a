"""The profile summary JSON (neuronsim_nki.profile_json): written by
nki.benchmark(profile_json=...), nki.profile and `neuronsim nki run
--profile-json`, with the hardware profiler's Summary field names and units,
its values those of the simulated run."""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.language as nl
from neuronsim import ENGINES

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "nki"))
import sample_kernels as kernels  # noqa: E402  (not `kernels`: the Kernels library's import name)


def _matmul():
    @nki.jit
    def mm(lhsT, rhs):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        acc += nl.matmul(nl.load(lhsT), nl.load(rhs), transpose_x=True)
        nl.store(out, value=nl.copy(acc))
        return out
    return mm


def test_benchmark_writes_the_summary_of_its_run(tmp_path):
    rng = np.random.default_rng(0)
    a, b = rng.random((128, 128), dtype=np.float32), rng.random((128, 512), dtype=np.float32)
    k = nki.benchmark(iters=5, profile_json=str(tmp_path / "mm.json"))(_matmul())
    np.testing.assert_allclose(k(a, b), a.T @ b, rtol=1e-4)
    doc = json.loads((tmp_path / "mm.json").read_text())
    assert doc == k.profile_summary
    r, s = k.result, doc["summary"]
    assert doc["kernel"] == "mm" and doc["target"] == "trn2" and doc["simulated"] is True
    assert abs(s["total_time"] - r.latency_us * 1e-6) < 1e-15
    assert s["hbm_read_bytes"] == r.hbm_read_bytes == (128 * 128 + 128 * 512) * 4
    assert s["hbm_write_bytes"] == r.hbm_write_bytes == 128 * 512 * 4
    assert s["hardware_flops"] == 2 * 128 * 128 * 512 and s["matmul_instruction_count"] >= 1
    assert s["spill_save_bytes"] == s["spill_reload_bytes"] == 0
    for e in ENGINES:
        assert s[f"{e}_engine_active_time_percent"] == r.engine_active_percent[e]
        assert 0 <= s[f"{e}_engine_active_time"] <= s["total_time"]
    assert s["tensor_engine_instruction_count"] >= 1
    assert 0 < s["hfu_estimated_percent"] < 100
    assert s["dma_active_time_percent"] == r.dma_active_percent and s["dma_transfer_count"] == 3


def _spilling():
    return kernels.spilling_sum(True)


def test_profile_writes_the_documented_artifacts_and_counts_spill_traffic(tmp_path):
    """nki.profile as NKI documents it (working_directory made if missing,
    save_neff_name, save_trace_name, profile_nth, num_execs, overwrite):
    the program, one trace per profiled execution (STEM.ntff for the first,
    STEM_exec_N.ntff after) and one summary each in json_reports/.  A
    kernel whose live tiles do not fit spills: the summary counts the bytes
    stored to HBM and read back, as the profiler's spill_save_bytes and
    spill_reload_bytes."""
    work = tmp_path / "prof"
    k = nki.profile(working_directory=str(work), save_neff_name="cus.neff", save_trace_name="custom.ntff",
                    num_execs=20, profile_nth=10)(_spilling())
    a = np.random.default_rng(0).random((128, 512 * 120), dtype=np.float32)
    np.testing.assert_allclose(k(a), a.reshape(128, 120, 512).sum(1) * 2, rtol=1e-5)
    assert (work / "cus.neff").read_text() == k.result.program
    assert (work / "custom_exec_10.ntff").stat().st_size > 0 and (work / "custom_exec_20.ntff").stat().st_size > 0
    reports = sorted(p.name for p in (work / "json_reports").iterdir())
    assert reports == ["custom_exec_10.json", "custom_exec_20.json"]
    s = json.loads((work / "json_reports" / "custom_exec_10.json").read_text())["summary"]
    spills = [line for line in k.result.program.splitlines() if line.startswith(".tensor spill")]
    assert spills
    # each spilled tile (2 KiB x 128 partitions) is stored once and read back once
    assert s["spill_save_bytes"] == s["spill_reload_bytes"] == len(spills) * 128 * 2048
    assert s["hbm_write_bytes"] == 128 * 512 * 4 + s["spill_save_bytes"]
    with pytest.raises(nki.NKIError, match="cus.neff exists .*overwrite=True"):
        k(a)
    nki.profile(working_directory=str(work), save_neff_name="cus.neff", save_trace_name="custom.ntff",
                num_execs=20, profile_nth=10, overwrite=True)(_spilling())(a)
    one = tmp_path / "one"
    nki.profile(working_directory=str(one))(_matmul())(np.ones((128, 128), np.float32), np.ones((128, 512), np.float32))
    assert {p.name for p in one.iterdir()} == {"file.neff", "profile.ntff", "json_reports"}
    assert (one / "json_reports" / "profile.json").exists()


def test_measured_kernels_launch_on_a_grid(tmp_path):
    """nki.benchmark(kernel)[grid](...) launches like the kernel does and
    records on the wrapper (test harnesses read bench[grid]'s result from
    bench)."""
    @nki.jit
    def add(a, b):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(a), nl.load(b)))
        return out
    bench = nki.benchmark(iters=4)(add)
    a = np.ones((128, 64), np.float32)
    launch = bench[2]
    np.testing.assert_array_equal(launch(a, a), 2 * a)
    assert len(bench.benchmark_result.latencies_us) == 4 and bench.result.latency_us > 0
    assert launch.benchmark_result is bench.benchmark_result


def test_nki_run_profile_json_holds_every_kernel_run(tmp_path, neuronsim):
    script = tmp_path / "k.py"
    script.write_text(
        "import numpy as np\n"
        "import nki\n"
        "import nki.language as nl\n"
        "@nki.jit\n"
        "def scale(a):\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    nl.store(out, value=nl.multiply(nl.load(a), 3.0))\n"
        "    return out\n"
        "scale(np.ones((128, 64), np.float32))\n"
        "scale(np.ones((64, 32), np.float32))\n")
    out = tmp_path / "prof.json"
    r = subprocess.run([str(neuronsim), "nki", "run", "--profile-json", str(out), str(script)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert [x["kernel"] for x in doc["runs"]] == ["scale", "scale"]
    assert [x["summary"]["hbm_read_bytes"] for x in doc["runs"]] == [128 * 64 * 4, 64 * 32 * 4]
    bad = subprocess.run([str(neuronsim), "nki", "run", "--profile-json", str(tmp_path / "no" / "x.json"),
                          str(script)], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "no directory" in bad.stderr
