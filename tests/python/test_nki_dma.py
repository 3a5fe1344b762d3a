"""How the NKI frontend places DMAs the way the hardware compiler does: which
sequencer triggers a transfer (nisa.dma_copy engine= / dge_mode=, stores on
the second DGE instance of NeuronCore-v3+), and which tiles go when SBUF
overflows (the most reused stay, room is contiguous).  Each against NumPy,
each placement checked in the program and its effect in the timing."""
import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl

RNG = np.random.default_rng(15)


def stream_of(program, desc_prefix="dma_copy"):
    """{engine: [dma_copy lines]} of a program's engine streams."""
    streams, engine = {}, None
    for line in program.splitlines():
        if line.startswith(".engine "):
            engine = line.split()[1]
        elif engine and line.strip().startswith(desc_prefix):
            streams.setdefault(engine, []).append(line.strip())
    return streams


@nki.jit
def column_matmul(lhsT, rhs, store_engine):
    """out[128, N] = lhsT^T @ rhs one 512-column tile at a time, every K tile
    of the column loaded, the result stored before the next column: the
    shape of the SDK tutorial's matmul v3 (its store waits for the column's
    last matmul while the next column's loads could already run)."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    stat = []
    for k in range(K // 128):
        s = nl.ndarray((128, M), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=lhsT[k * 128:(k + 1) * 128, :])
        stat.append(s)
    for n in nl.affine_range(N // 512):
        cols = []
        for k in range(K // 128):
            m = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=m, src=rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
            cols.append(m)
        acc = nl.ndarray((M, 512), dtype=nl.float32, buffer=nl.psum)
        for k in range(K // 128):
            nisa.nc_matmul(acc, stat[k], cols[k])
        res = nl.ndarray((M, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(res, acc)
        nisa.dma_copy(dst=out[:, n * 512:(n + 1) * 512], src=res, engine=store_engine)
    return out


def test_stores_go_from_the_scalar_dge_on_v3_and_free_the_loads_queue():
    """NeuronCore-v3+ has two hardware DGE instances, driven by the Sync and
    Scalar sequencers (SDK nki/deep-dives/nki-dge.rst): left to the
    compiler, a store goes from Scalar, so the next column's loads on Sync
    do not wait behind it -- TensorE stays busier than with every DMA on
    Sync.  trn1 (descriptors made before the run) keeps them on Sync."""
    lhsT = RNG.random((1024, 128), dtype=np.float32)
    rhs = RNG.random((1024, 4096), dtype=np.float32)
    want = lhsT.T @ rhs
    got, free = nki.simulate(column_matmul, lhsT, rhs, None)
    np.testing.assert_allclose(got, want, rtol=1e-4)
    streams = stream_of(free.program)
    assert len(streams["scalar"]) == 8 and len(streams["sync"]) == 8 + 8 * 8
    got, held = nki.simulate(column_matmul, lhsT, rhs, nisa.engine.sync)
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert "scalar" not in stream_of(held.program)
    assert free.latency_us < held.latency_us
    assert free.engine_active_percent["tensor"] > held.engine_active_percent["tensor"] + 5

    column_matmul._target = "trn1"        # traced only: one runtime (trn2) per process
    try:
        program = column_matmul.trace(lhsT, rhs, None)[0]
    finally:
        column_matmul._target = None
    assert "scalar" not in stream_of(program)


@pytest.mark.parametrize("engine,mode,match", [
    (nisa.engine.gpsimd, nisa.dge_mode.hwdge, "only nisa.engine.sync or nisa.engine.scalar"),
    (nisa.engine.sync, nisa.dge_mode.swdge, "GpSimd makes the descriptors"),
    (nisa.engine.tensor, None, "triggered by nisa.engine.sync, scalar or gpsimd"),
    (None, "fastest", "dge_mode='fastest'"),
])
def test_dma_copy_engine_and_dge_mode_are_checked(engine, mode, match):
    @nki.jit
    def copy(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, engine=engine, dge_mode=mode)
        nisa.dma_copy(dst=out, src=t)
        return out
    with pytest.raises(nki.NKIError, match=match):
        nki.simulate(copy, np.zeros((128, 64), np.float32))


def test_dma_copy_honours_engine_and_dge_mode():
    @nki.jit
    def copy(a, load_engine, mode):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, engine=load_engine, dge_mode=mode)
        nisa.dma_copy(dst=out, src=t, engine=nisa.engine.sync)
        return out
    a = RNG.random((128, 64), dtype=np.float32)
    for eng, mode, where in ((nisa.engine.scalar, nisa.dge_mode.hwdge, "scalar"),
                             (None, nisa.dge_mode.swdge, "gpsimd"),
                             (nisa.engine.gpsimd, None, "gpsimd"),
                             (nisa.unknown_engine, nisa.dge_mode.none, "sync")):
        got, res = nki.simulate(copy, a, eng, mode)
        np.testing.assert_array_equal(got, a)
        assert len(stream_of(res.program).get(where, ())) >= 1, (eng, mode)
    copy._target = "trn1"
    try:
        with pytest.raises(nki.NKIError, match=r"dge_mode=hwdge needs NeuronCore-v3 or newer \(trn1"):
            nki.simulate(copy, a, nisa.engine.scalar, nisa.dge_mode.hwdge)
    finally:
        copy._target = None


def test_dma_copy_dst_rmw_op_adds_in_the_dma_engines():
    """dst_rmw_op=nl.add: dst += src, the DMA engines' read-modify-write
    (the ISA's add DMA); other operators are refused by name."""
    def kernel(op):
        @nki.jit
        def accumulate(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            t = nl.load(a)
            nl.store(out, value=t)
            nisa.dma_copy(dst=out, src=t, dst_rmw_op=op)
            nisa.dma_copy(dst=out, src=t, dst_rmw_op=op)
            return out
        return accumulate
    a = np.random.default_rng(0).standard_normal((128, 8)).astype(np.float32)
    got, r = nki.simulate(kernel(np.add), a)
    np.testing.assert_allclose(got, 3 * a, rtol=1e-6)
    assert r.program.count(" add dst=hbm(") == 2
    with pytest.raises(nki.NKIError, match="dst_rmw_op is nl.add"):
        nki.simulate(kernel(np.maximum), a)


@nki.jit
def reused_and_streamed(lhsT, rhs):
    """A blocked matmul whose two operand blocks do not fit SBUF together:
    2 x 48 stationary tiles (512 B per partition each) reused by every
    block of rhs, 2 x 48 moving tiles (2 KiB) per block: 240 KiB > 224."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    stat = [[None] * (K // 128) for _ in range(M // 128)]
    for bm in range(M // 128):
        for k in range(K // 128):
            stat[bm][k] = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=stat[bm][k], src=lhsT[k * 128:(k + 1) * 128, bm * 128:(bm + 1) * 128])
    for n in nl.affine_range(N // 1024):
        mov = [[None] * (K // 128) for _ in range(2)]
        for bn in range(2):
            for k in range(K // 128):
                mov[bn][k] = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
                c0 = n * 1024 + bn * 512
                nisa.dma_copy(dst=mov[bn][k], src=rhs[k * 128:(k + 1) * 128, c0:c0 + 512])
        for bm in range(M // 128):
            for bn in range(2):
                acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
                for k in range(K // 128):
                    nisa.nc_matmul(acc, stat[bm][k], mov[bn][k])
                res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(res, acc)
                c0 = n * 1024 + bn * 512
                nisa.dma_copy(dst=out[bm * 128:(bm + 1) * 128, c0:c0 + 512], src=res)
    return out


def test_spilling_keeps_the_most_reused_tiles_and_makes_contiguous_room():
    """The stationary block (used by every rhs block) stays: each of its
    tiles is loaded once, the rhs tiles are loaded again for the second
    stationary tile that uses them -- evicting what has the fewest uses
    left, a whole contiguous window at a time (tracer.room).  The published
    matmul v4 profile moves the bytes this does (CALIBRATION C-11: MBU
    42.55% over 28.42 ms, v3 43.87% over 28.20 ms); evicting by furthest
    next use alone loads stationary tiles again in every block."""
    K, M, N = 48 * 128, 256, 2048
    lhsT = RNG.random((K, M), dtype=np.float32)
    rhs = RNG.random((K, N), dtype=np.float32)
    got, res = nki.simulate(reused_and_streamed, lhsT, rhs)
    np.testing.assert_allclose(got, lhsT.T @ rhs, rtol=1e-4)
    loads = [line for line in res.program.splitlines() if line.startswith(".dma ")]
    assert sum("src=hbm(lhsT)" in line for line in loads) == 2 * 48
    rhs_loads = sum("src=hbm(rhs)" in line for line in loads)
    assert 2 * 2 * 48 < rhs_loads <= 2 * 2 * 2 * 48      # loaded again, at most once per use
    assert not any(line.startswith(".tensor spill") for line in res.program.splitlines())
