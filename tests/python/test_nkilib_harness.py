"""bench/nkilib_plugin.py, the stand-ins through which nki-library's own
test harness runs its simulation mode on neuronsim (bench/nkilib_tests.py
runs the library's tests; the library is not in this repository, so its
tests are not run here).  Each check in a fresh interpreter: the plugin
installs import names."""
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(code):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT / "bench"), "PATH": "/usr/bin:/bin"}, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_cpu_simulate_runs_a_kernel_on_one_core_and_as_an_lnc2_pair():
    out = _run("""
        import numpy as np
        import nkilib_plugin
        import nki_cpu_simulator.nki as nki
        import nki_cpu_simulator.nki.language as nl
        import nki_cpu_simulator.nki.isa as nisa
        import nki_cpu_simulator.nki.language.dtypes
        import nki_cpu_simulator.nki.builtin
        import neuronsim_nki

        def double(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            rows = x.shape[0] // nl.num_programs(0) if nl.num_programs(0) > 1 else x.shape[0]
            p = nl.program_id(0) if nl.num_programs(0) > 1 else 0
            t = nl.load(x[p * rows:(p + 1) * rows, :])
            nl.store(out[p * rows:(p + 1) * rows, :], value=nl.multiply(t, 2.0))
            return out
        x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8) % 7
        one = nki.cpu_simulate(double)[1](x=x)
        two = nki.cpu_simulate(double)[2](x=x)
        assert np.array_equal(one, 2 * x) and np.array_equal(two, 2 * x)
        assert nki.jit is neuronsim_nki.jit and nl.add is neuronsim_nki.language.add
        print("ok")
    """)
    assert out.strip() == "ok"


def test_neuron_dtypes_stand_in_casts_what_the_tests_cast_and_refuses_packed_mx():
    out = _run("""
        import numpy as np, ml_dtypes
        import nkilib_plugin
        import neuron_dtypes as dt
        a = dt.static_cast(np.array([1.0, 2.5, 3.1]), dt.bfloat16)
        assert a.dtype == ml_dtypes.bfloat16 and a.astype(np.float32)[1] == 2.5
        assert dt.sizeinbytes(np.float32) == 4 and dt.sizeinbytes(dt.bfloat16) == 2
        assert dt.is_float_type(np.dtype(ml_dtypes.bfloat16)) and not dt.is_float_type(np.dtype(np.int32))
        try:
            dt.static_cast(np.zeros(4), dt.float4_e2m1fn_x4)
        except NotImplementedError as e:
            assert "not public" in str(e)
        else:
            raise AssertionError("packed MX cast accepted")
        print("ok")
    """)
    assert out.strip() == "ok"


def test_the_runner_reads_pytest_summaries():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import nkilib_tests
    finally:
        sys.path.pop(0)
    assert nkilib_tests.summary("38 passed, 14 skipped in 27.71s") == {"passed": 38, "skipped": 14}
    assert nkilib_tests.summary("1 failed, 2 errors in 3s") == {"failed": 1, "error": 2}
    assert nkilib_tests.summary("no tests ran in 0.70s") == {}
