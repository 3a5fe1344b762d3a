"""nisa.nc_matmul(perf_mode=double_row): the FP8 contraction split between
the partitions and a first free dimension of 2 (SDK nki.isa.nc_matmul,
"Layout"; its own test test_nki_isa_nc_matmul.py::test_double_row_gen3
writes perf_mode="double_row_gen3"), done as the ISA's two half-time
passes; against NumPy."""
import ml_dtypes as mld
import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl


def _fp8(shape, seed, dtype=mld.float8_e5m2):
    return np.random.default_rng(seed).uniform(-4, 4, shape).astype(dtype)


@pytest.mark.parametrize("M,N,mode", [(1, 512, "double_row_gen3"), (128, 512, nisa.matmul_perf_mode.double_row),
                                      (77, 129, "double_row")])
def test_double_row_contracts_over_partitions_and_the_pair(M, N, mode):
    @nki.jit
    def k(a, b):
        out = nl.ndarray((a.shape[2], b.shape[2]), dtype=nl.float32, buffer=nl.shared_hbm)
        at = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        bt = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=at, src=a)
        nisa.dma_copy(dst=bt, src=b)
        nl.store(out, value=nisa.nc_matmul(at, bt, perf_mode=mode))
        return out
    a, b = _fp8((128, 2, M), 1), _fp8((128, 2, N), 2)
    got, r = nki.simulate(k, a, b)
    want = np.einsum("kli,klj->ij", a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    assert r.program.count("perf=double_row") == 4          # two passes, each a load and a multiply


def test_double_row_takes_the_time_of_one_pass_of_half_the_contraction():
    """Two K=128 passes at half the time each: a 256-deep FP8 contraction
    in the TensorE time of a 128-deep bf16 one (SDK trainium2 arch guide:
    "K effectively 256 in BF16 K=128 time")."""
    def kernel(double):
        @nki.jit
        def k(a, b):
            out = nl.ndarray((a.shape[-1], b.shape[-1]), dtype=nl.float32, buffer=nl.shared_hbm)
            at = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
            bt = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=at, src=a)
            nisa.dma_copy(dst=bt, src=b)
            ps = nl.ndarray((a.shape[-1], b.shape[-1]), dtype=nl.float32, buffer=nl.psum)
            for _ in range(8):
                nisa.nc_matmul(ps, at, bt, perf_mode="double_row" if double else None)
            nl.store(out, value=nl.copy(ps))
            return out
        return k
    a2, b2 = _fp8((128, 2, 128), 3), _fp8((128, 2, 512), 4)
    a1, b1 = a2[:, 0, :].astype(mld.bfloat16), b2[:, 0, :].astype(mld.bfloat16)
    _, r2 = nki.simulate(kernel(True), a2, b2)
    _, r1 = nki.simulate(kernel(False), a1, b1)
    busy = lambda r: r.cores[0]["engine_busy_ps"]["tensor"]        # noqa: E731
    assert busy(r2) == pytest.approx(busy(r1), abs=16)     # ps: per-instruction rounding


def test_double_row_refusals_name_what_is_wrong():
    def kernel(mode, a_dtype=nl.float8_e5m2, pair=2):
        @nki.jit
        def k(a, b):
            out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
            at = nl.ndarray((128, pair, 4), dtype=a_dtype, buffer=nl.sbuf)
            bt = nl.ndarray((128, pair, 8), dtype=nl.float8_e5m2, buffer=nl.sbuf)
            nisa.memset(at, 0.0)
            nisa.memset(bt, 0.0)
            nl.store(out, value=nisa.nc_matmul(at, bt, perf_mode=mode))
            return out
        return k
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(nki.NKIError, match="must be float8"):
        kernel("double_row", nl.bfloat16)(x, x)
    with pytest.raises(nki.NKIError, match=r"\[K, 2, free\]"):
        kernel("double_row", pair=3)(x, x)
    with pytest.raises(nki.NKIError, match="perf_mode='fast': none or double_row"):
        kernel("fast")(x, x)
    with pytest.raises(nki.NKIError, match="double_row is not supported on trn1"):
        nki.Kernel(kernel("double_row").func, "trn1")(x, x)


def test_a_grid_subscript_after_block_indices():
    """t[b, i_p, i_f] on a tile with block dimensions (nki-samples'
    double_row_matmul indexes its lhsT blocks so)."""
    @nki.jit
    def k(x):
        out = nl.ndarray((2, 128, 2, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((2, nl.par_dim(128), 256), dtype=x.dtype, buffer=nl.sbuf)
        for b in nl.affine_range(2):
            t[b] = nl.load(x[b])
        i_p, i_two, i_m = nl.mgrid[0:128, 0:2, 0:64]
        for b in nl.affine_range(2):
            nl.store(out[b], value=nl.copy(t[b, i_p, 128 + i_two * 64 + i_m]))
        return out
    x = np.random.default_rng(5).standard_normal((2, 128, 256)).astype(np.float32)
    np.testing.assert_array_equal(k(x), x[:, :, 128:].reshape(2, 128, 2, 64))
