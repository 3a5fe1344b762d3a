"""NKI surface that published kernels use and the frontend used to lack
(issue 15's list): one test per name, each checked against NumPy."""
import sys

import numpy as np
import pytest

import neuronsim_nki as nki
from nsim_util import nki_run
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl
import neuronsim_nki.typing as nt


def _add_kernel():
    @nki.jit
    def add(a: nt.tensor, b: nt.tensor[128, 512]):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(a), nl.load(b)))
        return out
    return add


def test_typing_annotations_are_accepted():
    a = np.arange(128 * 512, dtype=np.float32).reshape(128, 512)
    np.testing.assert_array_equal(_add_kernel()(a, a), 2 * a)
    assert repr(nt.mutable_tensor[(128, 512), nl.float32]).startswith("nki.typing.mutable_tensor[")


def test_nki_trace_decorates_like_jit():
    @nki.trace
    def neg(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.negative(nl.load(a)))
        return out
    a = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(neg(a), -a)


def test_neuronxcc_typing_and_trace_resolve_under_nki_run(tmp_path, neuronsim):
    script = tmp_path / "k.py"
    script.write_text(
        "import numpy as np\n"
        "from neuronxcc import nki\n"
        "from neuronxcc.nki import trace\n"
        "import neuronxcc.nki.typing as nt\n"
        "import neuronxcc.nki.language as nl\n"
        "@trace\n"
        "def k(a: nt.tensor):\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    nl.store(out, value=nl.exp(nl.load(a)))\n"
        "    return out\n"
        "a = np.zeros((128, 8), np.float32)\n"
        "assert (k(a) == 1).all()\n"
        "print('ok')\n")
    r = nki_run(neuronsim, script)
    assert "ok" in r.stdout and "latency us" in r.stdout


@pytest.mark.parametrize("eng", [nisa.unknown_engine, nisa.vector_engine, nisa.gpsimd_engine, nisa.scalar_engine,
                                 nisa.engine.vector])
def test_engine_values_are_accepted_as_engine_arguments(eng):
    @nki.jit
    def copy(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        c = nisa.tensor_copy(t, engine=eng)
        nl.store(out, value=c)
        return out
    a = np.arange(128 * 16, dtype=np.float32).reshape(128, 16)
    np.testing.assert_array_equal(copy(a), a)


def test_isa_reciprocal():
    @nki.jit
    def recip(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.reciprocal(nl.load(a)))
        return out
    a = np.random.default_rng(1).uniform(0.5, 4.0, (128, 32)).astype(np.float32)
    np.testing.assert_allclose(recip(a), 1 / a, rtol=1e-6)


def test_ds_is_a_dynamic_slice():
    @nki.jit
    def halves(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            t = nl.load(a[nl.ds(i * 64, 64), :])
            nl.store(out[nl.ds(i * 64, 64), :], value=nl.multiply(t, 3.0))
        return out
    a = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    np.testing.assert_array_equal(halves(a), 3 * a)
    assert nl.ds(5, 3) == slice(5, 8)


def test_mgrid_results_have_p_and_x():
    @nki.jit
    def tp(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i = nl.mgrid[0:128, 0:64]
        t = nl.load(a[i.p, i.x])
        nl.store(out[i.p, i.x], value=t)
        return out
    a = np.random.default_rng(2).standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(tp(a), a)
    with pytest.raises(AttributeError, match="no .y"):
        nl.mgrid[0:4, 0:4].y


def test_benchmark_latency_percentile():
    k = nki.benchmark(iters=5)(_add_kernel())
    a = np.ones((128, 512), np.float32)
    k(a, a)
    p99 = k.benchmark_result.nc_latency.get_latency_percentile(99)
    assert p99 > 0 and p99 == k.result.latency_us


def test_kwargs_kernels_get_their_keywords():
    @nki.jit
    def scaled(a, **kwargs):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        if kwargs.get("bias") is not None:
            t = nl.add(t, nl.load(kwargs["bias"]))
        nl.store(out, value=nl.multiply(t, kwargs["scale"]))
        return out
    a = np.ones((128, 16), np.float32)
    b = np.full((128, 16), 2.0, np.float32)
    np.testing.assert_array_equal(scaled(a, scale=4.0, bias=b), 12 * a)
    np.testing.assert_array_equal(scaled(a, scale=0.5), 0.5 * a)


def test_varargs_kernels_get_their_arguments():
    @nki.jit
    def total(*xs):
        out = nl.ndarray(xs[0].shape, dtype=xs[0].dtype, buffer=nl.shared_hbm)
        acc = nl.load(xs[0])
        for x in xs[1:]:
            acc = nl.add(acc, nl.load(x))
        nl.store(out, value=acc)
        return out
    a = np.ones((128, 4), np.float32)
    np.testing.assert_array_equal(total(a, a, a), 3 * a)


def test_partition_broadcast_lowering():
    """[1, F] -> [P, F]: an fp32 row that fits a PSUM bank is broadcast by
    TensorE into PSUM and read from there (no copy back: the published Mamba
    profiles); a longer row fresh from HBM is one more DMA reading that row
    into every partition (partition stride 0); a longer row changed on chip
    since its load goes through TensorE and back to SBUF."""
    @nki.jit
    def bcast(a, row):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        r = nl.load(row)
        nl.store(out, value=nl.multiply(nl.load(a), r.broadcast_to(a.shape)))
        return out

    @nki.jit
    def bcast_changed(a, row):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        r = nl.load(row)
        r2 = nl.add(r, 1.0)
        nl.store(out, value=nl.multiply(nl.load(a), r2.broadcast_to(a.shape)))
        return out
    rng = np.random.default_rng(3)
    for F in (256, 1024):
        a = rng.standard_normal((128, F)).astype(np.float32)
        row = rng.standard_normal((1, F)).astype(np.float32)
        y, res = nki.simulate(bcast, a, row)
        np.testing.assert_allclose(y, a * row, rtol=1e-6)
        tt = [ln for ln in res.program.splitlines() if ln.strip().startswith("tensor_tensor")]
        if F == 256:
            assert res.stats["matmul_instructions"] == 1 and "tensor_copy" not in res.program
            assert len(tt) == 1 and "psum:" in tt[0]
        else:
            assert res.stats["matmul_instructions"] == 0 and "[0x128]" in res.program
        y2, res2 = nki.simulate(bcast_changed, a, row)
        np.testing.assert_allclose(y2, a * (row + 1), rtol=1e-5)
        assert res2.stats["matmul_instructions"] > 0
        assert ("tensor_copy" in res2.program) == (F > 512)


def test_identical_computations_are_done_once():
    """An elementwise instruction identical to an earlier one whose operands
    and result are unchanged is not traced again (the compiler's CSE / loop-
    invariant code motion: SDK fused_mamba.rst, profile mamba_v2); an operand
    written in between makes it run again; a kernel writing into a result it
    got twice is traced without reuse, so every tile keeps its own value."""
    @nki.jit
    def invariant(a, b):
        out = nl.ndarray((4, 128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        for i in nl.affine_range(4):
            xy = nisa.tensor_tensor(x, y, op=nl.multiply)       # invariant in i
            s = nisa.tensor_scalar(xy, np.add, float(i))
            nl.store(out[i], value=s)
        return out

    @nki.jit
    def operand_changes(a, b):
        out = nl.ndarray((2, 128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        for i in nl.static_range(2):
            xy = nisa.tensor_tensor(x, y, op=nl.multiply)
            nl.store(out[i], value=xy)
            x[...] = nl.add(x, 1.0)
        return out

    @nki.jit
    def writes_result(a, b):
        out = nl.ndarray((2, 128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        p = nl.multiply(x, y)
        q = nl.multiply(x, y)
        q[...] = nl.add(q, 1.0)
        nl.store(out[0], value=p)
        nl.store(out[1], value=q)
        return out
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 128, 64)).astype(np.float32)
    y, res = nki.simulate(invariant, a, b)
    np.testing.assert_allclose(y, np.stack([a * b + i for i in range(4)]), rtol=1e-6)
    assert res.program.count("tensor_tensor ") == 1 and res.program.count("tensor_scalar ") == 4
    y, res = nki.simulate(operand_changes, a, b)
    np.testing.assert_allclose(y, np.stack([a * b, (a + 1) * b]), rtol=1e-6)
    assert res.program.count("tensor_tensor ") == 2
    y, res = nki.simulate(writes_result, a, b)
    np.testing.assert_allclose(y, np.stack([a * b, a * b + 1]), rtol=1e-6)
    assert res.program.count("op=multiply") == 2


def test_bn_stats_and_bn_aggr_are_the_published_instructions():
    """nisa.bn_stats writes (count, mean, variance*count) of the even then the
    odd elements (the published layout) with one VectorE instruction;
    bn_aggr combines any number of them into (mean, variance); results
    assigned into a tile are computed there (no copy); both take dst first
    in the 0.8 form, as does tensor_tensor_scan."""
    @nki.jit
    def stats(a):
        out = nl.ndarray((128, 12), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        st = nl.ndarray((128, 12), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(2):
            st[:, j * 6:(j + 1) * 6] = nisa.bn_stats(x[:, j * 512:(j + 1) * 512], dtype=nl.float32)
        nl.store(out, value=st)
        return out

    @nki.jit
    def mean_var(a):
        out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        st = nl.ndarray((128, 12), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(2):
            nisa.bn_stats(st[:, j * 6:(j + 1) * 6], x[:, j * 512:(j + 1) * 512])      # 0.8: dst first
        mv = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(mv, st)
        nl.store(out, value=mv)
        return out

    @nki.jit
    def scan(a, b):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        h = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(h, nl.load(a), nl.load(b), 0.0, np.multiply, np.add)
        nl.store(out, value=h)
        return out
    rng = np.random.default_rng(6)
    a = (rng.standard_normal((128, 1024)) * 3 + 1).astype(np.float32)
    y, res = nki.simulate(stats, a)
    for j in range(2):
        part = a[:, j * 512:(j + 1) * 512].astype(np.float64)
        for h in range(2):
            e = part[:, h::2]
            got = y[:, j * 6 + h * 3:j * 6 + h * 3 + 3]
            np.testing.assert_allclose(got[:, 0], e.shape[1])
            np.testing.assert_allclose(got[:, 1], e.mean(1), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(got[:, 2], e.var(1) * e.shape[1], rtol=1e-5)
    assert res.program.count("bn_stats ") == 2 and "tensor_copy" not in res.program
    y, res = nki.simulate(mean_var, a)
    np.testing.assert_allclose(y[:, 0], a.astype(np.float64).mean(1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y[:, 1], a.astype(np.float64).var(1), rtol=1e-5)
    assert res.program.count("bn_aggr ") == 1 and "tensor_copy" not in res.program
    u, v = rng.random((2, 128, 64)).astype(np.float32)
    ref = np.zeros_like(u)
    acc = np.zeros(128, np.float32)
    for i in range(64):
        acc = u[:, i] * acc + v[:, i]
        ref[:, i] = acc
    np.testing.assert_allclose(nki.simulate(scan, u, v)[0], ref, rtol=1e-5)

    @nki.jit
    def too_wide(a):
        out = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.bn_stats(nl.load(a)))
        return out
    with pytest.raises(nki.NKIError, match="at most 512"):
        nki.simulate(too_wide, a)


def test_independent_iterations_are_interleaved(monkeypatch):
    """The traced instructions are list-scheduled (the compiler's scheduler:
    schedule.py, after the Mamba v2 profile's 99.63% VectorE): chains of
    dependent VectorE instructions from independent loop iterations are
    interleaved, so VectorE does not idle for each result (each one's
    pipeline tail overlaps another iteration's work instead of being waited
    out: less VectorE active time for the same work); same values."""
    import neuronsim_nki.tracer as tracer

    @nki.jit
    def chains(a):
        out = nl.ndarray((8, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        xs = [nl.load(a[i]) for i in range(8)]
        for i in nl.affine_range(8):
            x = xs[i]
            y = nl.multiply(x, 2.0)
            z = nl.add(y, x)
            w = nl.multiply(z, z)
            nl.store(out[i], value=nl.subtract(w, y))
        return out
    a = np.random.default_rng(7).random((8, 128, 512), dtype=np.float32)
    y1, r1 = nki.simulate(chains, a)
    monkeypatch.setattr(tracer, "SCHEDULE", False)
    y0, r0 = nki.simulate(chains, a)
    ref = (3 * a) ** 2 - 2 * a
    np.testing.assert_allclose(y1, ref, rtol=1e-5)
    np.testing.assert_array_equal(y1, y0)
    assert r1.latency_us < r0.latency_us
    assert r1.stats["engine_busy_ps"]["vector"] < r0.stats["engine_busy_ps"]["vector"]


def test_loop_reduce_accumulates_into_its_destination():
    @nki.jit
    def total(a):
        out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            t = nl.load(a[:, i, :])
            acc[0:128, 0:64] = nl.loop_reduce(t, op=np.add, loop_indices=[i], dtype=nl.float32)
        nl.store(out, value=acc)
        return out
    a = np.random.default_rng(4).standard_normal((128, 4, 64)).astype(np.float32)
    np.testing.assert_allclose(total(a), a.sum(axis=1), rtol=1e-5, atol=1e-5)

    @nki.jit
    def misuse(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        r = nl.loop_reduce(nl.load(a), op=np.add, loop_indices=[0])
        nl.store(out, value=r.shape)
        return out
    with pytest.raises(nki.NKIError, match="assigned into its destination"):
        misuse(np.ones((128, 4), np.float32))


def test_spmd_dim_over_logical_cores():
    @nki.jit
    def add(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        rows = slice(i * 128, (i + 1) * 128)
        nl.store(out[rows, :], value=nl.add(nl.load(a[rows, :]), nl.load(b[rows, :])))
        return out
    a = np.arange(256 * 8, dtype=np.float32).reshape(256, 8)
    # one instance per core on each of 2 cores: 2 instances of 128 rows
    np.testing.assert_array_equal(add[nl.spmd_dim(1, nl.nc(2)), 1](a, a), 2 * a)
    with pytest.raises(nki.NKIError, match="nl.nc"):
        nl.spmd_dim(2, 2)


def test_reducing_interleaved_axes_keeps_the_others_strides():
    """nl.sum over axes 2 and 4 of a 5-axis grid view (the average-pool
    tutorial's pooling windows): the kept axes 1 and 3 keep their strides."""
    @nki.jit
    def avgpool(x, k):
        c, h, w = x.shape
        out = nl.ndarray((c, h // k, w // k), dtype=x.dtype, buffer=nl.shared_hbm)
        i0, i1, i2, i3, i4 = nl.mgrid[0:c, 0:h // k, 0:k, 0:w // k, 0:k]
        t = nl.load(x)
        nl.store(out, value=nl.sum(t[i0, k * i1 + i2, k * i3 + i4], axis=[2, 4]) / (k * k))
        return out
    x = np.arange(2 * 6 * 6, dtype=np.float32).reshape(2, 6, 6)
    want = x.reshape(2, 3, 2, 3, 2).mean(axis=(2, 4))
    np.testing.assert_allclose(avgpool(x, 2), want, rtol=1e-6)


def test_shared_constant_is_embedded_in_the_program():
    w = np.linspace(-1, 1, 128 * 32, dtype=np.float32).reshape(128, 32)

    @nki.jit
    def scale(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        c = nl.shared_constant(w)
        nl.store(out, value=nl.multiply(nl.load(a), nl.load(c)))
        return out
    a = np.random.default_rng(5).standard_normal((128, 32)).astype(np.float32)
    y, res = nki.simulate(scale, a)
    np.testing.assert_array_equal(y, a * w)
    assert " const fp32 [128,32] data=" in res.program


def test_tensor_copy_runs_on_the_engine_it_names():
    @nki.jit
    def copy_on(a, eng):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(out, value=nisa.tensor_copy(t, engine=eng))
        return out
    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    for eng, busy in ((nisa.scalar_engine, "scalar"), (nisa.gpsimd_engine, "gpsimd"), (nisa.vector_engine, "vector")):
        y, res = nki.simulate(copy_on, a, eng)
        np.testing.assert_array_equal(y, a)
        assert res.stats["engine_busy_ps"][busy] > 0, eng
    with pytest.raises(nki.NKIError, match="not 'tensor'"):
        copy_on(a, nisa.tensor_engine)


def test_nl_arithmetic_broadcasts_a_row_across_partitions():
    """nl arithmetic between [P, F] and [1, F] broadcasts the row across the
    partitions first (NumPy's rule), either operand order."""
    @nki.jit
    def k(a, r):
        out = nl.ndarray((2, 128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
        x, row = nl.load(a), nl.load(r)
        nl.store(out[0], value=nl.multiply(x, row))
        nl.store(out[1], value=nl.subtract(row, x))
        return out
    rng = np.random.default_rng(8)
    a, r = rng.random((128, 1024), dtype=np.float32), rng.random((1, 1024), dtype=np.float32)
    y, _ = nki.simulate(k, a, r)
    np.testing.assert_allclose(y[0], a * r, rtol=1e-6)
    np.testing.assert_allclose(y[1], r - a, rtol=1e-6)


def test_static_cast_on_host_arrays_and_tiles():
    """nl.static_cast casts a host array (as kernel harnesses use it) or,
    inside a kernel, a tile; host bf16 needs ml_dtypes, refused by name
    without it."""
    a = np.array([[1.7, -2.2]], np.float64)
    h = nl.static_cast(a, nl.float16)
    assert h.dtype == np.float16 and np.array_equal(h, a.astype(np.float16))
    assert nl.static_cast(3.9, nl.int32) == 3

    @nki.jit
    def to_int(x):
        out = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.static_cast(nl.load(x), nl.int32))
        return out
    x = np.array([[1.0, 2.0, -3.0, 4.0]] * 128, np.float32)
    np.testing.assert_array_equal(nki.simulate(to_int, x)[0], x.astype(np.int32))
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        with pytest.raises(nki.NKIError, match="install ml_dtypes"):
            nl.static_cast(a, nl.bfloat16)


def test_nl_range_is_a_static_range():
    """nl.range: the NKI compiler's frontend reads any `<module>.range` as
    Python's range (KLR's checkName), unrolled at trace time -- its index is
    a Python int (nki-library's mxfp_load_utils indexes lists with it)."""
    seen = []

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        cols = [slice(0, 2), slice(2, 4)]
        for j in nl.range(2):
            seen.append(type(j))
            nl.store(out[:, cols[j]], value=nl.multiply(nl.load(a[:, cols[j]]), float(j + 1)))
        return out
    a = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    got = nki.simulate(k, a)[0]
    np.testing.assert_array_equal(got, a * np.array([1, 1, 2, 2], np.float32))
    assert set(seen) == {int} and list(nl.range(1, 7, 3)) == [1, 4]


def test_program_ndim_and_finfo():
    """nl.program_ndim() is the launch grid's rank (0 without a grid);
    nl.finfo gives float limits, bf16 included (as numpy.finfo would)."""
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(a), float(nl.program_ndim())))
        return out
    a = np.zeros((128, 4), np.float32)
    assert (nki.simulate(k, a)[0] == 0).all()
    assert (k[2, 1](a) == 2).all()
    assert nl.finfo(nl.float32).max == float(np.finfo(np.float32).max)
    assert nl.finfo(nl.float16).min == float(np.finfo(np.float16).min)
    assert nl.finfo(nl.bfloat16).max == float.fromhex("0x1.fep127") and nl.finfo(nl.bfloat16).eps == 2.0 ** -7
    with pytest.raises(nki.NKIError, match="a float dtype"):
        nl.finfo(nl.int32)


def test_mask_cuts_a_combined_partition_index_past_the_end():
    """`in[i_p + i_k, i_f]` with `mask=(i_p < rows)` in a partial last tile
    (nki-samples contributed/maxpooling.py): the rows past the end are not
    moved, the ones inside are; a missing mask is still an error."""
    k = 3

    @nki.jit
    def window_max(x):
        h, w = x.shape
        h_out = h - (k - 1)
        out = nl.ndarray((h_out, w), dtype=x.dtype, buffer=nl.shared_hbm)
        for t in nl.affine_range((h + 127) // 128):
            i_p, i_k, i_f = nl.mgrid[0:128, 0:k, 0:w]
            rows = nl.load(x[t * 128 + i_p + i_k, i_f], mask=(t * 128 + i_p < h_out))
            m = nl.max(rows, axis=[1])
            i_o, i_g = nl.mgrid[0:128, 0:w]
            nl.store(out[t * 128 + i_o, i_g], value=m, mask=(t * 128 + i_o < h_out))
        return out

    x = np.random.default_rng(3).standard_normal((200, 16)).astype(np.float32)
    ref = np.stack([x[i:i + k].max(0) for i in range(200 - (k - 1))])
    np.testing.assert_array_equal(window_max(x), ref)

    @nki.jit
    def unmasked(x):
        out = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p, i_k, i_f = nl.mgrid[0:128, 0:k, 0:16]
        nl.store(out, value=nl.max(nl.load(x[72 + i_p + i_k, i_f]), axis=[1]))
        return out
    with pytest.raises(nki.NKIError, match=r"index on axis 0 reaches \[72, 201\], outside \[0, 200\)"):
        unmasked(x)


def test_psum_tile_with_block_dimensions_takes_a_bank_per_block():
    """nl.ndarray((B, nl.par_dim(M), F), buffer=nl.psum): each block is a
    whole PSUM bank (2 KiB per partition), an accumulation target of its
    own, even when F is smaller; B blocks take B of the 8 banks."""
    @nki.jit
    def blocks(lhsT, rhs):
        K, M = lhsT.shape
        out = nl.ndarray((M, 4 * 256), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((4, nl.par_dim(M), 256), dtype=nl.float32, buffer=nl.psum)
        a = nl.load(lhsT)
        for b in nl.affine_range(4):
            for kk in nl.affine_range(2):        # two accumulating matmuls per block
                nisa.nc_matmul(dst=acc[b], stationary=a, moving=nl.load(rhs[:, kk, b * 256:(b + 1) * 256]))
        for b in nl.affine_range(4):
            s = nl.ndarray((M, 256), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=s, src=acc[b])
            nl.store(out[:, b * 256:(b + 1) * 256], value=s)
        return out
    rng = np.random.default_rng(5)
    lhsT = rng.standard_normal((128, 64)).astype(np.float32)
    rhs = rng.standard_normal((128, 2, 1024)).astype(np.float32)
    got, res = nki.simulate(blocks, lhsT, rhs)
    np.testing.assert_allclose(got, lhsT.T @ (rhs[:, 0] + rhs[:, 1]), rtol=1e-4, atol=1e-4)
    dsts = {line.split("dst=")[1].split()[0] for line in res.program.splitlines() if "multiply_moving" in line}
    offsets = sorted(int(d.split("+")[1].split("{")[0]) if "+" in d else 0 for d in dsts)
    assert offsets == [0, 2048, 4096, 6144]

    @nki.jit
    def too_big(a):
        return nl.ndarray((2, nl.par_dim(128), 1024), dtype=nl.float32, buffer=nl.psum)
    with pytest.raises(nki.NKIError, match=r"PSUM block of 4096 bytes per partition does not fit a bank"):
        too_big(np.zeros((2, 2), np.float32))


def test_dma_transpose_from_hbm_and_from_sbuf():
    """nisa.dma_transpose (dst-first and returning forms): a DMA in the
    engines' transpose mode; values as NumPy's .T, at the published share of
    the copy rate (the C++ timing test checks the rates); NeuronCore-v2 and
    4-byte dtypes are refused by name."""
    @nki.jit
    def both(x):
        A, B = x.shape
        out = nl.ndarray((B, A), dtype=x.dtype, buffer=nl.shared_hbm)
        out2 = nl.ndarray((B, A), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((B, A), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(t, x)                      # HBM -> SBUF
        nl.store(out, value=t)
        s = nl.load(x)
        nl.store(out2, value=nisa.dma_transpose(s, axes=(1, 0)))   # SBUF -> SBUF
        return out, out2
    import torch
    import torch_neuronsim.nki  # noqa: F401  (bf16 as CPU torch tensors)
    x = torch.randn(128, 96).to(torch.bfloat16)
    (a, b), res = nki.simulate(both, x)
    want = x.float().numpy().T
    np.testing.assert_array_equal(np.asarray(a, np.float32), want)
    np.testing.assert_array_equal(np.asarray(b, np.float32), want)
    assert sum(".dma" in line and " transpose " in line for line in res.program.splitlines()) == 2

    with pytest.raises(nki.NKIError, match="2-byte elements"):
        nki.simulate(both, np.zeros((128, 96), np.float32))
    both._target = "trn1"
    with pytest.raises(nki.NKIError, match=r"dma_transpose needs NeuronCore-v3 or newer \(trn1"):
        nki.simulate(both, x)


def test_nc_n_gather_within_partitions():
    """nisa.nc_n_gather (dst-first and returning forms): each partition
    gathers from its own flattened elements at uint32 positions, on GpSimd;
    an index past a row is a runtime fault naming it."""
    @nki.jit
    def gather(x, idx):
        out = nl.ndarray(idx.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        out2 = nl.ndarray(idx.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        data, i = nl.load(x), nl.load(idx)
        g = nl.ndarray(idx.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.nc_n_gather(g, data, i)
        nl.store(out, value=g)
        nl.store(out2, value=nisa.nc_n_gather(data, i))
        return out, out2
    rng = np.random.default_rng(11)
    x = rng.standard_normal((128, 8, 32)).astype(np.float32)       # free dims flattened: 256 per row
    idx = rng.integers(0, 256, (128, 48)).astype(np.uint32)
    (a, b), res = nki.simulate(gather, x, idx)
    want = np.take_along_axis(x.reshape(128, 256), idx.astype(np.int64), axis=1)
    np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(b, want)
    assert res.engine_active_percent["gpsimd"] > 0
    idx[3, 7] = 300
    with pytest.raises(Exception, match=r"indices\[3, 7\] = 300 outside the 256 elements"):
        gather(x, idx)
    with pytest.raises(nki.NKIError, match="indices are uint32, not int32"):
        gather(x, idx.astype(np.int32))
