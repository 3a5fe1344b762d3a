"""Our own kernels written the NKI 0.8 way (dst-first nisa calls, buffers
as objects, nl.fori_loop) next to the same kernels in the older style, each
checked against NumPy."""
import numpy as np

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl

RNG = np.random.default_rng(8)


@nki.jit
def add_rows_v08(a, b):
    """out = a + b over row tiles of 128, dst-first calls in a fori_loop."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape

    def body(i):
        ta = nl.ndarray((128, cols), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, cols), dtype=a.dtype, buffer=nl.sbuf)
        tc = nl.ndarray((128, cols), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=tb, src=b[i * 128:(i + 1) * 128, :])
        nisa.tensor_tensor(tc, ta, tb, nl.add)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=tc)
    nl.fori_loop(0, rows // 128, body)
    return out


@nki.jit
def add_rows_old(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        ta = nl.load(a[i * 128:(i + 1) * 128, :])
        tb = nl.load(b[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nisa.tensor_tensor(ta, tb, op=nl.add))
    return out


@nki.jit
def matmul_v08(lhsT, rhs):
    """out[M, N] = lhsT^T @ rhs, K accumulated in PSUM over a fori_loop."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)

    def body(k):
        s = nl.ndarray((128, M), dtype=lhsT.dtype, buffer=nl.sbuf)
        m = nl.ndarray((128, N), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=lhsT[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=m, src=rhs[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(acc, s, m)
    nl.fori_loop(0, K // 128, body)
    res = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(res, acc)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit
def softmax_v08(x):
    """Row softmax with dst-first activation / tensor_reduce / tensor_scalar."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    P, F = x.shape
    t = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    mx = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(mx, nl.maximum, t, axis=1, negate=True)
    e = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(e, nl.exp, t, bias=mx)
    s = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(s, nl.add, e, axis=1)
    r = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(r, s)
    y = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(y, e, nl.multiply, r)
    nisa.dma_copy(dst=out, src=y)
    return out


def test_add_v08_and_old_style_match_numpy():
    a = RNG.standard_normal((512, 256)).astype(np.float32)
    b = RNG.standard_normal((512, 256)).astype(np.float32)
    np.testing.assert_array_equal(add_rows_v08(a, b), a + b)
    np.testing.assert_array_equal(add_rows_old(a, b), a + b)


def test_matmul_v08_matches_numpy():
    lhsT = RNG.standard_normal((512, 128)).astype(np.float16)
    rhs = RNG.standard_normal((512, 512)).astype(np.float16)
    want = lhsT.astype(np.float32).T @ rhs.astype(np.float32)
    np.testing.assert_allclose(matmul_v08(lhsT, rhs), want, rtol=2e-3, atol=2e-2)


def test_softmax_v08_matches_numpy():
    x = RNG.standard_normal((128, 384)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(softmax_v08(x), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_fori_loop_refuses_bounds_it_cannot_know():
    import pytest

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.fori_loop(0, 2.5, lambda i: None)
        return out
    with pytest.raises(nki.NKIError, match="upper=2.5"):
        k(np.ones((128, 4), np.float32))
