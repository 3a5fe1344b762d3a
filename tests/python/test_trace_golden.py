"""Golden traces: small programs give byte-identical Perfetto traces run after
run (timestamps are simulated), and a checked-in trace per program catches a
timing change.  The golden file is compared by its decoded content -- every
slice (track, name, start, end, arguments) and counter sample -- not its
bytes: the same content interned differently (a longer opcode table) is the
same trace.  NSIM_UPDATE_GOLDEN=1 rewrites the files after an intended
change (review the printed differences first)."""
import os
import shutil
import subprocess

import numpy as np
import pytest

from nsim_util import run, tensors, random_input
from trace_util import ROOT, read_pftrace

GOLDEN = ROOT / "tests" / "golden"
EX = ROOT / "examples" / "programs"
PROGRAMS = ["matmul_gelu", "pipeline_fp8", "softmax_rows"]


def inputs_for(prog):
    rng = np.random.default_rng(0)
    return {n: random_input(dt, shape, rng) for n, kind, dt, shape in tensors(prog.read_text())
            if kind == "input"}


def content(path, tmp_path_factory):
    """what a trace says, independent of its encoding"""
    d = read_pftrace(path, tmp_path_factory)
    key = (lambda s: (s["track"], s["start"], s["name"]))
    return ([(s["track"], s["name"], s["start"], s["end"], s["args"]) for s in sorted(d.slices, key=key)],
            d.counters)


def first_difference(a, b, tmp_path_factory):
    """The first slice or counter sample that differs, in words (None: same)."""
    da, db = read_pftrace(a, tmp_path_factory), read_pftrace(b, tmp_path_factory)
    key = (lambda s: (s["track"], s["start"], s["name"]))
    sa, sb = sorted(da.slices, key=key), sorted(db.slices, key=key)
    for x, y in zip(sa, sb):
        if (x["track"], x["name"], x["start"], x["end"], x["args"]) != \
           (y["track"], y["name"], y["start"], y["end"], y["args"]):
            return (f"{x['track']}: {x['name']} [{x['start']}, {x['end']}] ns "
                    f"became {y['name']} [{y['start']}, {y['end']}] ns on {y['track']}")
    if len(sa) != len(sb):
        return f"{len(sa)} slices became {len(sb)}"
    if da.counters != db.counters:
        return "counter samples differ"
    return None


@pytest.mark.parametrize("name", PROGRAMS)
def test_golden_trace(name, neuronsim, tmp_path, tmp_path_factory):
    prog = EX / f"{name}.nsasm"
    traces = []
    for i in range(2):
        traces.append(tmp_path / f"run{i}.pftrace")
        run(neuronsim, prog, inputs_for(prog), tmp_path, extra=["--trace", str(traces[-1])])
    assert traces[0].read_bytes() == traces[1].read_bytes(), "two runs gave different traces"
    golden = GOLDEN / f"{name}.pftrace"
    same = golden.exists() and content(golden, tmp_path_factory) == content(traces[0], tmp_path_factory)
    if os.environ.get("NSIM_UPDATE_GOLDEN") == "1" and not same:
        if golden.exists():
            print(f"{name}: {first_difference(golden, traces[0], tmp_path_factory)}")
        shutil.copyfile(traces[0], golden)
        same = True
    assert golden.exists(), f"{golden} missing: run with NSIM_UPDATE_GOLDEN=1"
    if not same:
        why = first_difference(golden, traces[0], tmp_path_factory) or "the content differs"
        pytest.fail(f"{name}: the trace changed from {golden.relative_to(ROOT)}: {why}. If intended, "
                    "rerun with NSIM_UPDATE_GOLDEN=1 and commit the new golden file.")


def test_golden_catches_a_timing_regression(neuronsim, tmp_path, tmp_path_factory):
    """The same program with TensorE held up 400 cycles no longer matches its
    golden trace, and the difference names the first slice that moved."""
    text = (EX / "matmul_gelu.nsasm").read_text()
    slow = tmp_path / "matmul_gelu.nsasm"
    slow.write_text(text.replace("    load_stationary", "    nop cycles=400\n    load_stationary", 1))
    trace = tmp_path / "slow.pftrace"
    run(neuronsim, slow, inputs_for(EX / "matmul_gelu.nsasm"), tmp_path, extra=["--trace", str(trace)])
    golden = GOLDEN / "matmul_gelu.pftrace"
    assert content(golden, tmp_path_factory) != content(trace, tmp_path_factory)
    why = first_difference(golden, trace, tmp_path_factory)
    assert why and "became" in why, why
    # the tool's diff flags the time it added
    r = subprocess.run([str(neuronsim), "trace", "diff", str(golden), str(trace), "--fail-above", "5"],
                       capture_output=True, timeout=120)
    assert r.returncode == 1 and b"total_time" in r.stdout

