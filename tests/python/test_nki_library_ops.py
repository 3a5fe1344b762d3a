"""Instructions and forms the public NKI library (aws-neuron/nki-library)
uses in its top-k, max, MoE and MLP kernels: nisa.max8 and
nisa.nc_find_index8 (SDK API reference), DMA copies that cast between any
dtypes, tile reshapes, nl.shared_identity_matrix and tensor_copy(dst,
src=...) -- each against NumPy, across the tile-boundary sizes."""
import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl

try:
    import ml_dtypes
except ImportError:          # bf16 cases need it
    ml_dtypes = None


def _top8(x):
    """max8's result per row: the 8 largest as fp32, largest first"""
    return -np.sort(-x.astype(np.float32), axis=1)[:, :8]


@nki.jit
def _max8_and_positions(x):
    P, N = x.shape
    vals = nl.ndarray((P, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    pos = nl.ndarray((P, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    t = nl.load(x)
    top = nl.ndarray((P, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.max8(dst=top, src=t)
    at = nl.ndarray((P, 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_find_index8(dst=at, data=t, vals=top)
    nl.store(vals, value=top)
    nl.store(pos, value=at)
    return vals, pos


@pytest.mark.parametrize("P", [1, 127, 128])
@pytest.mark.parametrize("N", [8, 127, 128, 129, 255, 257, 513, 16384])
def test_max8_and_find_index8_match_numpy(P, N):
    rng = np.random.default_rng(N + P)
    x = rng.standard_normal((P, N)).astype(np.float32)
    x[0, N // 2] = x[0, N - 1] = 9.0            # a tie: both kept, the first position found twice
    vals, pos = _max8_and_positions(x)
    ref = _top8(x)
    np.testing.assert_array_equal(vals, ref)
    want = np.array([[np.flatnonzero(x[p] == v)[0] for v in ref[p]] for p in range(P)])
    np.testing.assert_array_equal(pos.astype(np.int64), want)
    assert list(pos[0, :2]) == [N // 2, N // 2]


@pytest.mark.skipif(ml_dtypes is None, reason="bf16 host arrays need ml_dtypes")
def test_max8_reads_bf16_and_returns_the_source_dtype_by_default():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.max8(src=nl.load(x)))
        return out
    x = np.random.default_rng(3).standard_normal((128, 300)).astype(ml_dtypes.bfloat16)
    out = k(x)
    np.testing.assert_array_equal(np.asarray(out, np.float32), _top8(x))
    _, res = nki.simulate(k, x)
    assert "max8 dst=sbuf:bf16" in res.program


def test_find_index8_uint16_and_the_not_found_sentinel():
    @nki.jit
    def k(x, v):
        out = nl.ndarray((128, 8), dtype=nl.uint16, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.nc_find_index8(data=nl.load(x), vals=nl.load(v), dtype=nl.uint16))
        return out
    rng = np.random.default_rng(4)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    v = x[:, [5, 0, 63, 7, 7, 1, 2, 3]].copy()
    v[:, 3] = 1e6                                  # in no row
    out = k(x, v)
    want = np.tile(np.array([5, 0, 63, 0xFFFF, 7, 1, 2, 3], dtype=np.uint16), (128, 1))
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("N", [7, 16385])
def test_max8_refuses_sizes_the_instruction_does_not_take(N):
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.max8(src=nl.load(x)))
        return out
    with pytest.raises(nki.NKIError, match="8 to 16384"):
        k(np.zeros((128, N), np.float32))


def test_max8_costs_n_vector_cycles():
    """SDK nki.isa.max8: N engine cycles; 8192 more elements per
    partition take 8192 more VectorE cycles (at least) -- and the
    timing never beats that."""
    def busy(n):
        x = np.random.default_rng(n).standard_normal((128, n)).astype(np.float32)
        _, res = nki.simulate(_max8_and_positions, x)
        return res
    a, b = busy(1024), busy(1024 + 8192)
    import neuronsim
    mhz = neuronsim.chip_info("trn2")["clock_mhz"]["vector"]
    extra_us = 2 * 8192 / mhz                      # max8 and nc_find_index8 each read N more
    grown = b.latency_us - a.latency_us
    assert extra_us <= grown < 2.5 * extra_us


@pytest.mark.parametrize("dst_dtype, src_dtype", [("uint32", "float32"), ("int32", "float32"),
                                                  ("float32", "int32"), ("int16", "int32")])
def test_dma_copy_casts_between_any_dtypes(dst_dtype, src_dtype):
    """SDK nki.isa.dma_copy: "A cast will happen if the src and dst have
    different dtype" (through fp32, as the engines cast)."""
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=getattr(nl, dst_dtype), buffer=nl.shared_hbm)
        t = nl.load(x)
        nisa.dma_copy(dst=out, src=t)
        return out
    x = (np.arange(128 * 40).reshape(128, 40) % 3000).astype(src_dtype)
    out = k(x)
    assert out.dtype == np.dtype(dst_dtype)
    np.testing.assert_array_equal(out, x.astype(dst_dtype))


def test_a_tile_reshapes_its_free_dimensions():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)                               # [128, 128]
        r = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=nl.maximum, data=t.reshape((128, 4, 32)), axis=2)
        nl.store(out, value=r)
        return out
    x = np.random.default_rng(5).standard_normal((128, 128)).astype(np.float32)
    np.testing.assert_array_equal(k(x), x.reshape(128, 4, 32).max(axis=2))

    @nki.jit
    def bad(x):
        t = nl.load(x)
        t.reshape((64, 256))
        return x
    with pytest.raises(nki.NKIError, match="keeps its partition dimension"):
        bad(x)


def test_shared_identity_matrix_is_an_sbuf_tile_loaded_once():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        eye = nl.shared_identity_matrix(128, dtype=nl.float32)
        again = nl.shared_identity_matrix(n=128, dtype=nl.float32)
        p = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=nl.load(x), moving=again)      # x^T @ I
        nl.store(out, value=nl.add(nl.copy(p), eye))
        return out
    x = np.random.default_rng(6).standard_normal((128, 128)).astype(np.float32)
    np.testing.assert_allclose(k(x), x.T + np.eye(128, dtype=np.float32), rtol=1e-6, atol=1e-6)
    _, res = nki.simulate(k, x)
    assert res.program.count(" const ") == 1

    @nki.jit
    def u8():
        out = nl.ndarray((16, 16), dtype=nl.uint8, buffer=nl.shared_hbm)
        nl.store(out, value=nl.shared_identity_matrix(16))
        return out
    np.testing.assert_array_equal(u8(), np.eye(16, dtype=np.uint8))


def test_tensor_copy_takes_dst_first_with_src_by_keyword():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(d, src=nl.load(x), engine=nisa.vector_engine)
        nl.store(out, value=d)
        return out
    x = np.random.default_rng(7).standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(k(x), x)


@nki.jit
def _scale_into(x, out):
    """nkilib's output-argument form (rope_hf): writes `out`, returns it"""
    nl.store(out, value=nl.multiply(nl.load(x), 3.0))
    return out


def test_a_returned_argument_is_written_in_place():
    x = np.random.default_rng(8).standard_normal((128, 64)).astype(np.float32)
    out = np.full_like(x, 7.0)
    got = _scale_into(x, out)
    assert got is out                                   # the argument itself, as on the device
    np.testing.assert_allclose(out, 3.0 * x, rtol=1e-6)
    _, res = nki.simulate(_scale_into, x, np.zeros_like(x))
    assert ".tensor out input" in res.program and ".tensor out output" not in res.program


def test_a_returned_argument_under_lnc2_and_for_torch_tensors():
    torch = pytest.importorskip("torch")
    import torch_neuronsim.nki  # noqa: F401
    x = np.random.default_rng(9).standard_normal((128, 64)).astype(np.float32)
    out = np.zeros_like(x)
    got = nki.Kernel(_scale_into.func, "trn2")[2](x, out)
    assert got is out
    np.testing.assert_allclose(out, 3.0 * x, rtol=1e-6)
    tx, tout = torch.from_numpy(x.copy()), torch.zeros(128, 64)
    r = _scale_into(tx, tout)
    assert r is tout
    torch.testing.assert_close(tout, 3.0 * tx)


def test_a_view_of_an_argument_is_not_returnable():
    @nki.jit
    def k(x, out):
        nl.store(out[0:64], value=nl.load(x[0:64]))
        return out[0:64]
    with pytest.raises(nki.NKIError, match="or arguments whole"):
        k(np.zeros((128, 8), np.float32), np.zeros((128, 8), np.float32))
