"""NKI constructs as the NKI compiler accepts them (issue 40's first work
item), each in the style the compiler's own output and the public kernels
use, against NumPy: masks on any axis (load, store, dma_copy) including
accesses whose unmasked range would leave the tensor, affine predicates
comparing two index expressions, PSUM tiles passed to matmul, single
elements loaded as [1, 1] tiles."""
import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl


@pytest.mark.parametrize("H, W", [(1, 1), (127, 129), (128, 128), (129, 257), (255, 513)])
def test_free_axis_masks_cut_the_last_tile_on_every_axis(H, W):
    """Rows and columns in tiles of [128, 128]; the last tile of each axis
    partial, cut by a mask on the partition axis and one on the free axis;
    the unmasked index range runs past both ends."""
    @nki.jit
    def double(x):
        out = nl.ndarray((H, W), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range((H + 127) // 128):
            for j in nl.affine_range((W + 127) // 128):
                ip = nl.arange(128)[:, None]
                jf = nl.arange(128)[None, :]
                m = (i * 128 + ip < H) & (j * 128 + jf < W)
                t = nl.load(x[i * 128 + ip, j * 128 + jf], mask=m)
                nl.store(out[i * 128 + ip, j * 128 + jf], value=nl.multiply(t, 2.0), mask=m)
        return out
    x = np.random.default_rng(H * 1000 + W).standard_normal((H, W)).astype(np.float32)
    np.testing.assert_array_equal(double(x), 2 * x)


def test_masked_dma_copy_on_free_axes_and_lower_bounds():
    """nisa.dma_copy(mask=...) moves the box the mask keeps, on any axis, an
    upper and a lower bound on one axis included; slices that would run past
    the tensor's free-axis end are cut by the mask (nki-samples vision.py's
    pooling windows); what the mask leaves out stays as it was."""
    H, W = 40, 50

    @nki.jit
    def window(x):
        out = nl.ndarray((128, 16, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 16, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=-1.0)
        i_p = nl.arange(128)[:, None, None]
        i_h = nl.arange(16)[None, :, None] + 32
        i_w = nl.arange(16)[None, None, :] + 40
        nisa.dma_copy(src=x[0:128, 32:48, 40:56], dst=t[:, 0:16, 0:16],
                      mask=(i_p < 100) & (i_h < H) & (i_w < W) & (i_w >= 42))
        nisa.dma_copy(dst=out, src=t)
        return out
    x = np.random.default_rng(0).standard_normal((128, H, W)).astype(np.float32)
    want = np.full((128, 16, 16), -1.0, np.float32)
    want[:100, :8, 2:10] = x[:100, 32:40, 42:50]
    np.testing.assert_array_equal(window(x), want)

    @nki.jit
    def unmasked(x):
        t = nl.ndarray((128, 16, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(src=x[0:128, 32:48, 40:56], dst=t)
        return t
    with pytest.raises(nki.NKIError, match="slice 32:48 on axis 1 is outside"):
        unmasked(x)


def test_affine_select_compares_two_index_expressions():
    """A causal mask written i_q >= i_k (flash attention's form), the same
    as i_q - i_k >= 0."""
    @nki.jit
    def causal(s):
        out = nl.ndarray(s.shape, dtype=s.dtype, buffer=nl.shared_hbm)
        i_q = nl.arange(128)[:, None]
        i_k = nl.arange(128)[None, :]
        t = nisa.affine_select(pred=(i_q >= i_k), on_true_tile=nl.load(s), on_false_value=-9984.0)
        nl.store(out, value=t)
        return out
    s = np.random.default_rng(1).standard_normal((128, 128)).astype(np.float32)
    np.testing.assert_array_equal(causal(s), np.where(np.tril(np.ones((128, 128), bool)), s, np.float32(-9984.0)))


def test_psum_operand_to_matmul_is_copied_to_sbuf_first():
    """nc_matmul(nc_transpose(x), y): the transpose's PSUM result as the
    stationary operand (flash attention backward's dV step)."""
    @nki.jit
    def mm(x, y):
        out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        xt = nisa.nc_transpose(nl.load(x))
        nl.store(out, value=nl.copy(nisa.nc_matmul(xt, nl.load(y))))
        return out
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 256)).astype(np.float32)
    np.testing.assert_allclose(mm(x, y), x @ y, rtol=1e-4, atol=1e-4)


def test_single_element_loads_as_a_one_by_one_tile():
    @nki.jit
    def pick(x, s):
        out = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        v = nl.load(s[1, 2])                       # a [1, 1] tile
        b = nl.broadcast_to(v, (128, 1))
        nl.store(out, value=nl.multiply(nl.load(x), b))
        return out
    x = np.ones((128, 8), np.float32)
    s = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(pick(x, s), x * 6.0)


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_rounding_to_integers(name, dtype):
    fn, ref = getattr(nl, name), getattr(np, name)

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=getattr(nl, dtype), buffer=nl.shared_hbm)
        nl.store(out, value=fn(nl.load(a), dtype=getattr(nl, dtype)))
        return out
    x = (np.random.default_rng(3).standard_normal((128, 64)) * 10).astype(np.float32)
    x[0, :8] = [2.0, -2.0, 0.5, -0.5, 0.0, 1e7 + 0.5, -1e7 - 0.5, 16777216.0]
    np.testing.assert_array_equal(k(x), ref(x).astype(dtype))


def test_broadcasts_numpy_style():
    """A [P] column against [P, F] (flash attention's m_buffer[:, 0]), size-1
    free axes against larger ones (vision.py's pooling windows), and a
    scalar divided by a tile."""
    @nki.jit
    def k(a, b, c):
        o1 = nl.ndarray((128, 96), dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 4, 3, 3), dtype=nl.float32, buffer=nl.shared_hbm)
        o3 = nl.ndarray((128, 96), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        col = nl.load(b)[:, 0]                     # a [128] column
        nl.store(o1, value=nl.multiply(t, col))
        nl.store(o2, value=nl.maximum(nl.load(c)[:, :, 0:1, 0:1], nl.load(c)))
        nl.store(o3, value=1.0 / t)
        return o1, o2, o3
    rng = np.random.default_rng(4)
    a = rng.random((128, 96), dtype=np.float32) + 0.5
    b = rng.random((128, 3), dtype=np.float32)
    c = rng.standard_normal((128, 4, 3, 3)).astype(np.float32)
    o1, o2, o3 = k(a, b, c)
    np.testing.assert_array_equal(o1, a * b[:, :1])
    np.testing.assert_array_equal(o2, np.maximum(c[:, :, :1, :1], c))
    np.testing.assert_allclose(o3, 1.0 / a, rtol=1e-6)


def test_index_grid_axes_out_of_tensor_order_transpose_the_access():
    """out[b, i * 128 + if, ip] with ip (grid axis 0, the value's partitions)
    on the tensor's last axis: a transposing store, as nki-samples'
    fused_self_attn_for_SD_small_head_size writes its [d, q] result into a
    [q, d] output (it used to be stored untransposed)."""
    @nki.jit
    def store_t(x):
        out = nl.ndarray((1, 256, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(64)[:, None]
        jf = nl.arange(128)[None, :]
        for i in nl.affine_range(2):
            t = nl.load(x[ip, i * 128 + jf])                 # [64, 128]
            nl.store(out[0, i * 128 + jf, ip], value=t)     # out[0, q, d] = t[d, q]
        return out
    x = np.random.default_rng(5).standard_normal((64, 256)).astype(np.float32)
    np.testing.assert_array_equal(store_t(x)[0], x.T)


def test_low_precision_per_partition_scalars_are_widened():
    """A bf16 [P, 1] column as a tensor_scalar operand or an activation bias:
    the engines take fp32 scalars, so it is copied to fp32 first."""
    @nki.jit
    def k(x, c):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        t, col = nl.load(x), nl.load(c)
        y = nl.multiply(t, col)
        z = nisa.activation(op=nl.exp, data=y, bias=col)
        nl.store(out, value=nl.copy(z, dtype=nl.float32))
        return out
    import ml_dtypes
    rng = np.random.default_rng(6)
    x = rng.random((128, 32), dtype=np.float32).astype(ml_dtypes.bfloat16)
    c = rng.random((128, 1), dtype=np.float32).astype(ml_dtypes.bfloat16)
    xf, cf = x.astype(np.float32), c.astype(np.float32)
    y = (xf * cf).astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_allclose(k(x, c), np.exp(y + cf), rtol=2e-2)


def test_activation_reduce_and_remainders():
    """nisa.activation_reduce (and activation with reduce_op / reduce_res,
    reset_reduce): the activated tile and its row sums in one ScalarE
    instruction; nl.mod / nl.fmod as NumPy's mod / fmod; a reduction kept
    in ScalarE's registers across instructions is declined by name."""
    @nki.jit
    def k(x):
        o1 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        o3 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        o4 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        o5 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        e = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=e, op=nl.exp, data=t, reduce_op=nl.add, reduce_res=s, scale=0.5)
        s2 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.exp, data=t, reduce_op=nl.add, reduce_res=s2,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce, scale=0.5)
        nl.store(o1, value=e)
        nl.store(o2, value=s)
        nl.store(o3, value=s2)
        nl.store(o4, value=nl.mod(t, 3.0))
        nl.store(o5, value=nl.fmod(t, 3.0))
        return o1, o2, o3, o4, o5
    x = np.random.default_rng(7).uniform(-8, 8, (128, 64)).astype(np.float32)
    e, s, s2, m, f = k(x)
    np.testing.assert_allclose(e, np.exp(0.5 * x), rtol=2e-6)
    np.testing.assert_allclose(s[:, 0], np.exp(0.5 * x).sum(1), rtol=1e-5)
    np.testing.assert_array_equal(s, s2)
    np.testing.assert_allclose(m, np.mod(x, 3.0), atol=1e-5)
    np.testing.assert_allclose(f, np.fmod(x, 3.0), atol=1e-5)

    @nki.jit
    def chained(x):
        t = nl.load(x)
        e = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.exp, data=t, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reduce)
        return x
    with pytest.raises(nki.NKIError, match="reduce_cmd=reduce: reductions kept in ScalarE's registers"):
        chained(x)


def test_columns_stay_two_dimensional_and_psum_feeds_affine_select():
    """t[:, i] of a tile is its [P, 1] column (flash attention indexes
    l_buffer[:, i][:, 0]); an affine_select on a matmul's PSUM result reads
    it through SBUF (GpSimd has no PSUM port)."""
    @nki.jit
    def k(q, kt):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        col = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        s = nl.matmul(nl.load(q), nl.load(kt), transpose_x=True)       # PSUM [128, 128]
        i_q, i_k = nl.arange(128)[:, None], nl.arange(128)[None, :]
        m = nisa.affine_select(pred=(i_q >= i_k), on_true_tile=s, on_false_value=-9984.0)
        nl.store(out, value=m)
        c = m[:, 3]
        assert tuple(c.shape) == (128, 1) and tuple(c[:, 0].shape) == (128, 1)
        nl.store(col, value=c[:, 0])
        return out, col
    rng = np.random.default_rng(8)
    q, kt = rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 128)).astype(np.float32)
    want = np.where(np.tril(np.ones((128, 128), bool)), q.T @ kt, np.float32(-9984.0))
    got, col = k(q, kt)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(col[:, 0], want[:, 3], rtol=1e-4, atol=1e-4)


def test_block_arrays_larger_than_sbuf_are_allocated_block_by_block():
    """nl.ndarray((32, 7, nl.par_dim(128), 1024), buffer=nl.sbuf) -- 28 MiB,
    far beyond SBUF -- of which each loop iteration touches one block: each
    block is a tile of its own, live from first touch to last use, as the
    compiler allocates it; a PSUM block array beyond the 8 banks likewise
    (and nl.zeros fills each block as it is made).  (Live blocks beyond
    PSUM's banks spill to SBUF: test_nki_direct_alloc.py.)"""
    @nki.jit
    def k(x):
        out = nl.ndarray((32 * 7 * 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        big = nl.ndarray((32, 7, nl.par_dim(128), 1024), dtype=nl.float32, buffer=nl.sbuf)
        acc = nl.zeros((12, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.psum)
        for i in nl.affine_range(32):
            for j in nl.affine_range(7):
                r = (i * 7 + j) * 128
                big[i, j, :, 0:64] = nl.load(x[r:r + 128, :])
                blk = big[i, j]
                acc_b = acc[(i * 7 + j) // 19]            # 12 blocks, one live at a time
                acc_b[...] = nl.add(acc_b, blk[:, 0:64])
                nl.store(out[r:r + 128, :], value=nl.multiply(acc_b, 1.0))
        return out
    x = np.random.default_rng(9).standard_normal((32 * 7 * 128, 64)).astype(np.float32)
    got = k(x)
    want = x.reshape(224, 128, 64).copy()
    for n in range(1, 224):
        if n % 19:
            want[n] += want[n - 1]
    np.testing.assert_allclose(got, want.reshape(-1, 64), rtol=1e-5, atol=1e-5)

    @nki.jit
    def across(x):
        big = nl.ndarray((32, 7, nl.par_dim(128), 1024), dtype=nl.float32, buffer=nl.sbuf)
        big[0:2, 0, :, :] = 0.0
        return x
    with pytest.raises(nki.NKIError, match="allocated block by block: a view across blocks"):
        across(x)


@pytest.mark.parametrize("engine", ["vector", "gpsimd"])
def test_scalar_tensor_tensor(engine):
    """(data op0 operand0) op1 operand1 in one instruction, a number or a
    [P, 1] column as operand0, both operand orders; against NumPy in fp32."""
    @nki.jit
    def k(x, c, y):
        o1 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        t, col, u = nl.load(x), nl.load(c), nl.load(y)
        a = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=a, data=t, op0=nl.multiply, operand0=col, op1=nl.add, operand1=u,
                                  engine=getattr(nisa.engine, engine))
        b = nisa.scalar_tensor_tensor(data=t, op0=nl.subtract, operand0=2.0, reverse0=True, op1=nl.divide,
                                      operand1=u, reverse1=True, engine=getattr(nisa.engine, engine))
        nl.store(o1, value=a)
        nl.store(o2, value=b)
        return o1, o2
    rng = np.random.default_rng(10)
    x, y = rng.standard_normal((128, 96)).astype(np.float32), rng.random((128, 96), dtype=np.float32) + 1
    c = rng.standard_normal((128, 1)).astype(np.float32)
    o1, o2 = k(x, c, y)
    np.testing.assert_allclose(o1, x * c + y, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(o2, y / (2.0 - x), rtol=1e-5)
    _, res = nki.simulate(k, x, c, y)
    assert res.program.count("scalar_tensor_tensor") == 2


@pytest.mark.parametrize("op, ref", [("add", np.sum), ("maximum", np.max)])
def test_tensor_partition_reduce(op, ref):
    @nki.jit
    def k(x):
        out = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        r = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(r, getattr(nl, op), nl.load(x))
        nl.store(out, value=r)
        return out
    x = np.random.default_rng(11).standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_allclose(k(x), ref(x, axis=0, keepdims=True), rtol=1e-5, atol=1e-5)


def test_single_element_stores_from_a_one_by_one_tile():
    @nki.jit
    def k(x):
        out = nl.ndarray((3, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[0:3, 0:4], value=nl.multiply(nl.load(x), 0.0))
        nl.store(out[1, 2], value=nl.sum(nl.load(x)[0:1, :], axis=1))
        return out
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    want = np.zeros((3, 4), np.float32)
    want[1, 2] = x[0].sum()
    np.testing.assert_array_equal(k(x), want)
