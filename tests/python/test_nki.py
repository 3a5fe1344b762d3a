"""NKI kernels on the simulator (issue 8, first part): the Python bindings to
the C API, the kernel tracer on tutorial-style kernels against NumPy, and
errors that name the kernel's source line."""
import os
import pathlib
import sys

import numpy as np
import pytest

import neuronsim
import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "nki"))
import sample_kernels as kernels  # noqa: E402  (not `kernels`: the Kernels library's import name)


def test_bindings_run_a_program_and_report_assembler_errors(tmp_path):
    text = (ROOT / "examples" / "programs" / "softmax_rows.nsasm").read_text()
    x = np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32)
    r = neuronsim.run(text, {"x": x}, {"y": ((128, 256), "fp32"), "yt": ((32, 32), "fp32")},
                      trace=tmp_path / "t.pftrace")
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(r.outputs["y"], e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(r.outputs["yt"], r.outputs["y"][:32, :32].T)
    assert r.stats["total_ps"] > 0 and r.stats["engine_busy_ps"]["scalar"] > 0
    assert (tmp_path / "t.pftrace").stat().st_size > 0
    with pytest.raises(neuronsim.NeuronSimError, match="line 3.*unknown instruction 'bogus'"):
        neuronsim.assemble(".target trn2\n.engine vector\n    bogus\n")
    with pytest.raises(neuronsim.NeuronSimError, match="input tensor|x"):
        neuronsim.run(text, {}, {"y": ((128, 256), "fp32"), "yt": ((32, 32), "fp32")})


@pytest.mark.parametrize("kernel", ["tensor_add", "tensor_add_isa"])
def test_tensor_add(kernel):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 512)).astype(np.float32)
    b = rng.standard_normal((128, 512)).astype(np.float32)
    c, res = nki.simulate(getattr(kernels, kernel), a, b)
    np.testing.assert_array_equal(c, a + b)
    assert res.hbm_read_bytes == 2 * a.nbytes and res.hbm_write_bytes == a.nbytes
    assert 0 < res.latency_us < 50 and res.engine_active_percent["vector"] > 0
    # the documented call: NumPy in, NumPy out; deterministic timing
    np.testing.assert_array_equal(getattr(kernels, kernel)(a, b), a + b)
    assert getattr(kernels, kernel).last_result.latency_us == res.latency_us


@pytest.mark.parametrize("K,M,N,dtype", [(128, 128, 512, np.float32), (256, 256, 1024, np.float16),
                                         (1024, 512, 2048, np.float16)])
def test_matmul_tiled_matches_numpy(K, M, N, dtype):
    """The largest case needs 272 DMAs (the semaphore pool wraps) and reuses
    SBUF and PSUM tiles across iterations."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((K, M)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    c, res = nki.simulate(kernels.matmul_tiled, a, b)
    ref = a.astype(np.float32).T @ b.astype(np.float32)
    tol = 1e-5 if dtype == np.float32 else 2e-3
    assert c.dtype == dtype
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=tol, atol=tol * np.abs(ref).max())
    assert res.stats["matmul_flops"] == 2 * K * M * N


def test_softmax_kernel():
    x = np.random.default_rng(3).standard_normal((128, 384)).astype(np.float32)
    y, _ = nki.simulate(kernels.softmax_rows, x)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=2e-5, atol=1e-7)


# ----------------------------------------------------------------- errors

def line_of(fn, text):
    src, start = __import__("inspect").getsourcelines(fn)
    return start + next(i for i, l in enumerate(src) if text in l)


def test_partition_over_128_names_the_line():
    @nki.jit
    def k(a):
        t = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.sbuf)  # too many partitions
        return t
    with pytest.raises(nki.NKIError, match=rf"test_nki.py:{line_of(k.func, 'too many')}: .*partition dimension "
                                           r"256 exceeds the 128"):
        nki.simulate(k, np.zeros((4, 4), np.float32))


def test_sbuf_overflow_names_the_line():
    # one instruction whose own operands do not fit: spilling cannot help
    @nki.jit
    def k(a):
        x = nl.zeros((128, 30000), dtype=nl.float32, buffer=nl.sbuf)   # 117 KiB per partition
        y = nl.zeros((128, 30000), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.add(x, y)   # x, y and the result: 351 KiB
        return total
    with pytest.raises(nki.NKIError, match=rf"test_nki.py:{line_of(k.func, '351 KiB')}: .*SBUF overflow.*"
                                           r"no tile left to spill"):
        nki.simulate(k, np.zeros((4, 4), np.float32))


@pytest.mark.parametrize("scaled", [False, True])
def test_sbuf_spills_live_tiles_to_hbm_and_reloads_them(scaled):
    """More live tiles than SBUF holds: those needed furthest ahead go to
    HBM and come back when next used, as the hardware compiler's spill /
    reload DMA queues in the published Mamba profiles (fused_mamba.rst)
    show; values are unchanged.  A tile that still holds what one load
    brought is not stored: it is loaded again from its source
    (rematerialized) -- or, not used yet, loaded only when room frees; one
    written since is spilled to a tensor of its own."""
    k = kernels.spilling_sum(scaled)
    a = np.random.default_rng(0).random((128, 512 * 120), dtype=np.float32)
    got, res = nki.simulate(k, a, check_races=True)
    np.testing.assert_allclose(got, a.reshape(128, 120, 512).sum(1) * (2 if scaled else 1), rtol=1e-5)
    assert res.races == []
    spills = [line for line in res.program.splitlines() if line.startswith(".tensor spill")]
    extra = res.stats["dma_transfers"] - (120 + 1)
    if scaled:
        # each spilled tile is written out once and read back once
        assert spills and all(" internal uint8 [128,2048] " in line for line in spills)
        assert extra == 2 * len(spills)
    else:
        # nothing stored: the loads whose tiles would be evicted before any
        # use are issued later, when room frees, so each tile is loaded once
        assert not spills and extra == 0


def test_spilled_operands_and_results_keep_their_values():
    """SBUF thrashing: seven [.., 16384] fp32 tiles in room for three.  nkilib's
    RoPE_sbuf in this shape came out wrong (4 in 5 elements) in two ways, both
    fixed: a store of a tile that had to be reloaded first named the
    reload's DMA descriptor (the index was taken before the operand was
    placed), and a result assigned into a spilled tile (`nisa.tensor_tensor(dst,
    ...)`) was re-emitted with operand addresses a reload had just moved.
    Operands are now checked to lie in their tiles whenever tiles have moved."""
    F = 16384

    @nki.jit
    def k(x, c, s):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        xin = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        xout = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        cs = nl.ndarray(c.shape, dtype=c.dtype, buffer=nl.sbuf)
        sn = nl.ndarray(s.shape, dtype=s.dtype, buffer=nl.sbuf)
        nki.isa.dma_copy(dst=xin, src=x)
        nki.isa.dma_copy(dst=cs, src=c)
        nki.isa.dma_copy(dst=sn, src=s)
        odd = nl.ndarray((32, F), dtype=x.dtype, buffer=nl.sbuf)
        nki.isa.tensor_copy(dst=odd, src=xin[32:, :])
        ec, oc, es, os_ = (nl.ndarray((32, F), dtype=x.dtype, buffer=nl.sbuf) for _ in range(4))
        nki.isa.tensor_tensor(ec, xin[:32, :], cs, nl.multiply)
        nki.isa.tensor_tensor(oc, odd, cs, nl.multiply)
        nki.isa.tensor_tensor(es, xin[:32, :], sn, nl.multiply)
        nki.isa.tensor_tensor(os_, odd, sn, nl.multiply)
        nki.isa.tensor_tensor(xout[:32, :], ec, os_, nl.subtract)
        nki.isa.tensor_tensor(xout[32:, :], oc, es, nl.add)
        nki.isa.dma_copy(dst=out, src=xout)
        return out
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, F)).astype(np.float32)
    c, s = (rng.standard_normal((32, F)).astype(np.float32) for _ in range(2))
    got, res = nki.simulate(k, x, c, s, check_races=True)
    np.testing.assert_array_equal(got, np.concatenate([x[:32] * c - x[32:] * s, x[32:] * c + x[:32] * s]))
    assert res.races == [] and any(line.startswith(".tensor spill") for line in res.program.splitlines())
    descs = [line.split("desc=")[1].split()[0] for line in res.program.splitlines() if "dma_copy desc=" in line]
    assert len(descs) == len(set(descs))          # each descriptor issued once


def test_psum_bank_overflow_and_bank_count():
    @nki.jit
    def big(a):
        return nl.zeros((128, 1024), nl.float32, buffer=nl.psum)  # 4 KiB per partition
    with pytest.raises(nki.NKIError, match=rf"test_nki.py:{line_of(big.func, '4 KiB')}: .*do not fit a PSUM "
                                           r"bank \(2048 bytes"):
        nki.simulate(big, np.zeros((4, 4), np.float32))

    @nki.jit
    def many(a):
        out = nl.ndarray((9, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        keep = [nl.full((128, 512), float(i), nl.float32, buffer=nl.psum) for i in range(9)]
        for i, p in enumerate(keep):                # all nine live at once: PSUM spills (test_nki_direct_alloc)
            nl.store(out[i], value=nl.copy(p))
        return out
    got = many(np.zeros((4, 4), np.float32))
    np.testing.assert_array_equal(got, np.arange(9, dtype=np.float32)[:, None, None] * np.ones((1, 128, 512)))


def test_a_bool_array_binds_as_nl_bool_stored_as_uint8():
    """SDK nki.api.shared.rst: "boolean stored as uint8" (nl.bool_); the
    SDK's own tests pass np.bool_ predicates, nki-library's transformer_tkg
    test its attention mask."""
    @nki.jit
    def k(m, x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(m.shape, dtype=nl.bool_, buffer=nl.sbuf)
        nki.isa.dma_copy(dst=t, src=m)
        f = nl.ndarray(m.shape, dtype=nl.float32, buffer=nl.sbuf)
        nki.isa.tensor_copy(dst=f, src=t)
        nl.store(out, value=nl.multiply(nl.load(x), f))
        return out
    rng = np.random.default_rng(7)
    m, x = rng.random((128, 33)) > 0.5, rng.standard_normal((128, 33)).astype(np.float32)
    np.testing.assert_array_equal(k(m, x), np.where(m, x, 0.0))


def test_a_dma_of_one_element_indexed_down_to_it():
    """t[0, 0] <- s[1, 0]: views indexed to one element on both sides
    (nkilib's attention_cte loads its attention sink so); it was an
    IndexError inside the tracer."""
    @nki.jit
    def k(s):
        out = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        nki.isa.memset(t, 0.0)
        nki.isa.dma_copy(dst=t[0, 0], src=s[1, 0])
        nki.isa.dma_copy(dst=t[2, 0], src=s[0, 2])
        nki.isa.dma_copy(dst=out, src=t)
        return out
    s = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    np.testing.assert_array_equal(k(s).ravel(), [4, 0, 3, 0])


def test_dtype_and_operand_errors():
    @nki.jit
    def dma_psum(a):
        p = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nki.isa.dma_copy(dst=out, src=p)
        return out
    with pytest.raises(nki.NKIError, match="DMA to or from PSUM is not allowed"):
        nki.simulate(dma_psum, np.zeros((4, 4), np.float32))

    @nki.jit
    def returns_tile(a):
        return nl.load(a)
    with pytest.raises(nki.NKIError, match="must return the HBM tensors"):
        nki.simulate(returns_tile, np.zeros((4, 4), np.float32))

    @nki.jit
    def oob(a):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a[0:256, 0:64]))
        return out
    with pytest.raises(nki.NKIError, match=r"slice 0:256 on axis 0 is outside \[0, 128\)"):
        nki.simulate(oob, np.zeros((128, 64), np.float32))


def test_profile_and_benchmark_decorators(tmp_path):
    a = np.ones((128, 512), np.float32)
    prof = nki.profile(working_directory=str(tmp_path / "p"), save_trace_name="add.pftrace")(kernels.tensor_add)
    np.testing.assert_array_equal(prof(a, a), 2 * a)
    assert (tmp_path / "p" / "add.pftrace").stat().st_size > 0 and prof.result.trace.endswith("add.pftrace")
    bench = nki.benchmark(warmup=1, iters=3)(kernels.tensor_add)
    bench(a, a)
    lat = bench.benchmark_result.latencies_us
    assert len(lat) == 3 and len(set(lat)) == 1 and bench.benchmark_result.percentile(50) == lat[0]
    # the sample kernels' perf mode: nki.benchmark(kernel, save_neff_name=, save_trace_name=)(...)
    neff, ntff = tmp_path / "file.neff", tmp_path / "profile.ntff"
    nki.benchmark(kernels.tensor_add, save_neff_name=str(neff), save_trace_name=str(ntff))(a, a)
    assert neff.read_text().startswith("; generated by neuronsim_nki") and ntff.stat().st_size > 0


# ------------------------------------------------------------ race detector

def test_race_detector_is_quiet_on_correct_programs():
    from neuronsim_nki.race import find_races
    for prog in sorted((ROOT / "examples" / "programs").glob("*.nsasm")):
        assert find_races(prog.read_text()) == [], prog.name
    rng = np.random.default_rng(4)
    for kernel, args in ((kernels.tensor_add, (np.ones((128, 64), np.float32),) * 2),
                         (kernels.matmul_tiled, (rng.standard_normal((512, 256)).astype(np.float16),
                                                 rng.standard_normal((512, 1024)).astype(np.float16))),
                         (kernels.softmax_rows, (np.ones((64, 128), np.float32),))):
        _, res = nki.simulate(kernel, *args, check_races=True)
        assert res.races == [], kernel.__name__


def test_race_detector_finds_a_removed_dependency():
    from neuronsim_nki.race import find_races
    a = np.ones((256, 128), np.float16)
    b = np.ones((256, 512), np.float16)
    _, res = nki.simulate(kernels.matmul_tiled, a, b)
    lines = res.program.splitlines()
    start = lines.index(".engine tensor")
    # TensorE's first wait: for the DMA that loads its first stationary tile
    i = next(j for j in range(start, len(lines)) if lines[j].strip().startswith("sem_wait"))
    races = find_races("\n".join(lines[:i] + lines[i + 1:]))
    assert races, "the removed wait went unnoticed"
    src, _ = __import__("inspect").getsourcelines(kernels.matmul_tiled.func)
    first = __import__("inspect").getsourcelines(kernels.matmul_tiled.func)[1]
    load_line = first + next(k for k, l in enumerate(src) if "lhsT_tile[...] = nl.load" in l)
    mm_line = first + next(k for k, l in enumerate(src) if "nl.matmul(" in l)
    text = str(races[0])
    assert f"sample_kernels.py:{load_line}" in text and f"sample_kernels.py:{mm_line}" in text, text
    assert "sbuf" in text and "not ordered" in text
    # the command-line form exits 1 on it
    import subprocess
    bad = pathlib.Path(__import__("tempfile").mkdtemp()) / "bad.nsasm"
    bad.write_text("\n".join(lines[:i] + lines[i + 1:]))
    r = subprocess.run([sys.executable, "-m", "neuronsim_nki.race", str(bad)], capture_output=True, timeout=120)
    assert r.returncode == 1 and b"not ordered" in r.stdout


# ------------------------------------------------------------ more kernels

def test_rmsnorm_layernorm_transpose_match_numpy():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 256)).astype(np.float32)     # 2 full row tiles + 44 rows
    g = rng.standard_normal(256).astype(np.float32)
    y, r = nki.simulate(kernels.rmsnorm, x, g, check_races=True)
    np.testing.assert_allclose(y, x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6) * g, rtol=1e-5, atol=1e-5)
    assert r.races == []
    x = rng.standard_normal((256, 512)).astype(np.float32)
    g2 = rng.standard_normal((1, 512)).astype(np.float32)
    b2 = rng.standard_normal((1, 512)).astype(np.float32)
    y, r = nki.simulate(kernels.layernorm, x, g2, b2, check_races=True)
    mu = x.mean(1, keepdims=True)
    ref = (x - mu) / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + 1e-5) * g2 + b2
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    assert r.races == []
    x = rng.standard_normal((256, 384)).astype(np.float32)
    y, r = nki.simulate(kernels.transpose_2d, x, check_races=True)
    np.testing.assert_array_equal(y, x.T)
    assert r.races == []


def test_matmul_tutorial_stages_get_faster():
    """Each documented optimization of the matmul tutorial makes the kernel
    faster on the simulator; the printed table reports TensorE utilization."""
    import matmul_stages as ms
    rng = np.random.default_rng(6)
    K, M, N = 1024, 1024, 2048
    a = rng.standard_normal((K, M)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    ref = a.astype(np.float32).T @ b.astype(np.float32)
    lat = []
    for kernel in ms.STAGES:
        c, r = nki.simulate(kernel, a, b)
        np.testing.assert_allclose(c.astype(np.float32), ref, rtol=2e-3, atol=2e-3 * np.abs(ref).max())
        assert r.stats["matmul_flops"] == 2 * K * M * N
        lat.append(r.latency_us)
        print(f"{kernel.__name__}: {r.latency_us:.1f} us, TensorE {r.engine_active_percent['tensor']:.1f}%")
    assert all(b < a for a, b in zip(lat, lat[1:])), lat


def test_nki_run_resolves_neuron_imports(neuronsim, tmp_path):
    import subprocess
    script = tmp_path / "add_kernel.py"
    script.write_text('''
import numpy as np
from neuronxcc import nki
import neuronxcc.nki.language as nl
import nki as nki_new
import nki.isa as nisa


@nki.jit
def nki_tensor_add_kernel(a_input, b_input):
    a_tile = nl.load(a_input)
    b_tile = nl.load(b_input)
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    nl.store(c_output, value=nl.add(a_tile, b_tile))
    return c_output


if __name__ == "__main__":
    import sys
    assert nki_new is nki and nisa is nki.isa and sys.argv[1:] == ["extra"]
    a = np.ones((4, 3), dtype=np.float16)
    c = nki_tensor_add_kernel(a, a)
    assert np.allclose(c, 2 * a)
    print("ok")
''')
    r = subprocess.run([str(neuronsim), "nki", "run", str(script), "--target", "trn1", "extra"],
                       capture_output=True, timeout=300)
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr.decode()
    assert "ok" in out and "nki_tensor_add_kernel" in out and "trn1" in out
    # outside `nki run` the names resolve through the stand-ins of any
    # process (test_standins.py), unless they are turned off
    r = subprocess.run([sys.executable, "-c", "import neuronxcc"], capture_output=True, timeout=60,
                       env=dict(os.environ, NEURONSIM_STANDINS="0"))
    assert r.returncode != 0
    r = subprocess.run([str(neuronsim), "nki", "run", str(tmp_path / "missing.py")], capture_output=True, timeout=60)
    assert r.returncode == 1 and b"no such file" in r.stderr


def test_fused_attention_and_selective_scan_match_numpy():
    rng = np.random.default_rng(7)
    d, Sq, Sk = 64, 256, 512
    q = rng.standard_normal((d, Sq)).astype(np.float32)
    k = rng.standard_normal((d, Sk)).astype(np.float32)
    v = rng.standard_normal((Sk, d)).astype(np.float32)
    o, r = nki.simulate(kernels.attention_fwd, q, k, v, 0.125, check_races=True)
    s = (q.T @ k) * 0.125
    p = np.exp(s - s.max(1, keepdims=True))
    np.testing.assert_allclose(o, (p / p.sum(1, keepdims=True)) @ v, rtol=1e-4, atol=1e-5)
    assert r.races == [] and r.stats["matmul_flops"] == 2 * d * Sq * Sk + 2 * Sq * Sk * d

    ch, L = 128, 64
    u = rng.standard_normal((ch, L)).astype(np.float32)
    dl = rng.uniform(0.01, 0.2, (ch, L)).astype(np.float32)
    A = -rng.uniform(0.5, 2, (ch, 1)).astype(np.float32)
    B = rng.standard_normal((1, L)).astype(np.float32)
    C = rng.standard_normal((1, L)).astype(np.float32)
    h, ref = np.zeros(ch), np.zeros((ch, L))
    for t in range(L):
        h = np.exp(dl[:, t] * A[:, 0]) * h + dl[:, t] * B[0, t] * u[:, t]
        ref[:, t] = C[0, t] * h
    lat = {}
    for kernel in (kernels.selective_scan, kernels.selective_scan_isa):
        y, r = nki.simulate(kernel, u, dl, A, B, C, check_races=True)
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
        assert r.races == []
        lat[kernel.__name__] = r.latency_us
    # one scan instruction beats a per-step loop of three (the kernels' own
    # time: without the NEFF start-up and tear-down both pay)
    chip = neuronsim.chip_info(nki.jit(lambda: None).target)
    neff_us = (chip["exec_startup_ps"] + chip["exec_teardown_ps"]) / 1e6
    assert lat["selective_scan_isa"] - neff_us < (lat["selective_scan"] - neff_us) / 3


def test_instruction_dtype_rules():
    @nki.jit
    def int_matmul(a, b):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.matmul(nl.load(a), nl.load(b), transpose_x=True)  # int32 operands
        nl.store(out, value=nl.copy(acc))
        return out
    ones = np.ones((128, 128), np.int32)
    with pytest.raises(nki.NKIError, match=rf"test_nki.py:{line_of(int_matmul.func, 'int32 operands')}: "
                                           r"matmul stationary dtype int32 is not allowed on TensorE"):
        nki.simulate(int_matmul, ones, ones)

    @nki.jit
    def int_exp(a):
        out = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.exp(nl.load(a)))
        return out
    with pytest.raises(nki.NKIError, match=r"nl.exp \(ScalarE activation\) takes float tiles, not int32"):
        nki.simulate(int_exp, ones)


def test_spmd_grid_and_matmul_accumulation_groups():
    rng = np.random.default_rng(8)
    a = rng.standard_normal((256, 1024)).astype(np.float16)
    b = rng.standard_normal((256, 1024)).astype(np.float16)
    c = kernels.add_spmd[2, 2](a, b)
    np.testing.assert_array_equal(c, a + b)
    lhsT = rng.standard_normal((384, 128)).astype(np.float32)
    rhs = rng.standard_normal((384, 256)).astype(np.float32)
    out, res = nki.simulate(kernels.matmul_isa_groups, lhsT, rhs, check_races=True)
    ref = lhsT.T @ rhs
    np.testing.assert_allclose(out[0], ref, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(out[1], ref, rtol=1e-4, atol=1e-3)   # not 2x: the group restarted
    assert res.races == []
    mm = [l for l in res.program.splitlines() if "multiply_moving" in l]
    assert sum("accumulate" in l for l in mm) == 4 and len(mm) == 6


def test_block_dimensions_before_par_dim():
    """nl.ndarray((B, nl.par_dim(128), F)): blocks side by side in each
    partition, addressed t[b] (as NKI kernels keep per-tile state)."""
    @nki.jit
    def blocks(x):
        B = x.shape[0] // 128
        acc = nl.zeros((B, nl.par_dim(128), x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
        for rep in nl.sequential_range(3):
            for b in nl.affine_range(B):
                acc[b, 0:128, :] += nl.load(x[b * 128:(b + 1) * 128, :])
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for b in nl.affine_range(B):
            nl.store(out[b * 128:(b + 1) * 128, :], value=acc[b, 0:128, :])
        return out
    x = np.random.default_rng(11).standard_normal((384, 96)).astype(np.float32)
    y, res = nki.simulate(blocks, x, check_races=True)
    np.testing.assert_allclose(y, 3 * x, rtol=1e-6)
    assert res.races == []

    @nki.jit
    def unindexed(x):
        t = nl.zeros((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        return nl.exp(t)  # a whole block tile as an operand
    with pytest.raises(nki.NKIError, match=rf"test_nki.py:{line_of(unindexed.func, 'whole block')}: .*index a "
                                           r"block first"):
        nki.simulate(unindexed, np.zeros((4, 4), np.float32))


def test_masks_on_a_partial_last_tile():
    x = np.random.default_rng(9).standard_normal((300, 64)).astype(np.float32)
    y, res = nki.simulate(kernels.scale_rows_masked, x, check_races=True)
    np.testing.assert_array_equal(y, 2 * x)
    assert res.hbm_read_bytes == x.nbytes and res.hbm_write_bytes == x.nbytes and res.races == []

    @nki.jit
    def unmasked(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:128, 0:x.shape[1]]
        for i in nl.affine_range(3):
            nl.store(out[i * 128 + ip, jf], value=nl.load(x[i * 128 + ip, jf]))  # no mask
        return out
    with pytest.raises(nki.NKIError, match=rf"test_nki.py:{line_of(unmasked.func, 'no mask')}: index on axis 0 "
                                           r"reaches \[256, 383\], outside \[0, 300\)"):
        nki.simulate(unmasked, x)


def test_index_grid_access_patterns():
    x = np.arange(6 * 3 * 4, dtype=np.float32).reshape(6, 12)
    y, res = nki.simulate(kernels.swap_free_axes, x, 3, 4, check_races=True)
    np.testing.assert_array_equal(y, x.reshape(6, 3, 4).transpose(0, 2, 1).reshape(6, 12))
    assert res.races == []


def test_unsupported_names_say_so_and_activation_takes_a_scale_tile():
    import neuronsim_nki.isa as nisa
    with pytest.raises(nki.NKIError, match="nki.isa.sequence_bounds is not supported by the simulator: a GpSimd "
                                           "instruction the simulator's ISA does not have"):
        nisa.sequence_bounds
    with pytest.raises(nki.NKIError, match="nki.isa.not_an_instruction is not supported by the simulator yet"):
        nisa.not_an_instruction
    with pytest.raises(nki.NKIError, match="nki.language.affine_select is not supported"):
        nl.affine_select

    @nki.jit
    def exp_scaled(x, s):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.activation(op=nl.exp, data=nl.load(x), scale=nl.load(s)))
        return out
    x = np.random.default_rng(10).standard_normal((128, 64)).astype(np.float32)
    s = np.linspace(-1, 1, 128, dtype=np.float32).reshape(128, 1)
    y, _ = nki.simulate(exp_scaled, x, s)
    np.testing.assert_allclose(y, np.exp(x * s), rtol=1e-5)


def test_affine_select_and_iota():
    s = np.random.default_rng(12).standard_normal((128, 256)).astype(np.float32)
    (y, keys), res = nki.simulate(kernels.causal_mask, s, check_races=True)
    q, k = np.meshgrid(np.arange(128), np.arange(256), indexing="ij")
    np.testing.assert_array_equal(y, np.where(q - k >= 0, s, -9984.0))
    np.testing.assert_array_equal(keys, k.astype(np.float32))
    assert res.races == [] and "affine_select" in res.program and "iota" in res.program


def test_load_transpose2d():
    @nki.jit
    def lt(x):
        out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load_transpose2d(x))
        return out
    x = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    y, res = nki.simulate(lt, x)
    np.testing.assert_array_equal(y, x.T)
    # element by element: slower than the same bytes loaded straight
    _, straight = nki.simulate(kernels.tensor_add, x.T.copy(), x.T.copy())
    assert res.latency_us > straight.latency_us


def test_kernel_history_is_bounded():
    import neuronsim_nki as nk
    import neuronsim_nki.language as nl

    @nk.jit
    def copy(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        return out

    saved = nk.Kernel.history
    nk.Kernel.history = type(saved)(maxlen=3)
    try:
        runs = nk.Kernel.runs
        a = np.ones((128, 64), np.float32)
        for _ in range(5):
            np.testing.assert_array_equal(copy(a), a)
        assert len(nk.Kernel.history) == 3 and nk.Kernel.runs == runs + 5
    finally:
        nk.Kernel.history = saved
    assert saved.maxlen == nk.HISTORY_LIMIT


def _sample_cases():
    """Kernels of tests/nki with arguments: every construct the samples use
    (loops, masks, accumulation groups, results reused, block dimensions)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import nki_kernels
    return list(nki_kernels.cases())


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_second_pass_replay_gives_the_program_running_the_kernel_again_gives(target, monkeypatch):
    """Trace.replay (the second tracing pass made from the first's log,
    without running the kernel body again) places every tile where the
    second pass run as before would and writes the same program text, byte
    for byte, source lines included."""
    for name, kernel, args in _sample_cases():
        progs = []
        for replay in (True, False):
            monkeypatch.setattr(nki, "REPLAY", replay)
            progs.append(nki.Kernel(kernel.func, target).trace(*args)[0])
        assert progs[0] == progs[1], name


def test_replay_steps_aside_when_tiles_must_spill(monkeypatch):
    """A first pass whose live tiles do not fit is not replayed (the second
    pass runs the kernel again and spills); its program is the one tracing
    without replay gives."""
    k = kernels.spilling_sum(True)
    a = np.zeros((128, 512 * 120), np.float32)
    replays = []
    real = nki.tracer.Trace.replay
    monkeypatch.setattr(nki.tracer.Trace, "replay", lambda self: replays.append(real(self)) or replays[-1])
    with_replay = nki.Kernel(k.func).trace(a)[0]
    assert replays and not any(replays)
    monkeypatch.setattr(nki, "REPLAY", False)
    assert nki.Kernel(k.func).trace(a)[0] == with_replay and ".tensor spill" in with_replay


def test_trace_cache_and_prints_once(capsys):
    """A second call with the same shapes, dtypes and other arguments takes
    the traced program from the kernel's cache; another shape traces again.
    What the kernel prints while tracing shows once per trace."""
    @nki.jit
    def k(a):
        print("tracing", a.shape)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.multiply(nl.load(a), 2.0))
        return out
    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    np.testing.assert_array_equal(k(a), a * 2)
    np.testing.assert_array_equal(k(a + 1), (a + 1) * 2)
    assert k.traces_made == 1
    assert capsys.readouterr().out.count("tracing") == 1
    k(a[:, :32].copy())
    assert k.traces_made == 2
