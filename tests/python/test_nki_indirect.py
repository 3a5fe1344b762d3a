"""Indirect DMAs and the constructs public kernels use around them: an HBM
tensor indexed by a tile of row numbers and `.ap(vector_offset=)` (the ISA's
gather / scatter DMAs; nki-samples resize_nearest), nisa.dma_compute and
dma_copy(dst_rmw_op=) (the add / gather_add / scatter_add DMAs; nki-library
topk_reduce), nl.where and two-way broadcasts (select_and_scatter), each
against NumPy."""
import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl


@pytest.mark.parametrize("P,rows", [(1, 5), (100, 300), (128, 129)])
def test_an_hbm_tensor_indexed_by_a_tile_is_a_gather(P, rows):
    """data[b, idx, i_f] with idx a [P, 1] int32 tile: partition p gets row
    idx[p] (the ISA's gather DMA); a mask cuts the rows moved."""
    C = 24

    @nki.jit
    def k(data, index):
        out = nl.ndarray((2, 128, C), dtype=data.dtype, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:index.shape[0], 0:C]
        idx = nl.load(index)
        for b in nl.affine_range(2):
            got = nl.load(data[b, idx, jf], mask=(ip < P - 1))
            nl.store(out[b, ip, jf], value=got, mask=(ip < P - 1))
        return out
    rng = np.random.default_rng(P)
    data = rng.standard_normal((2, rows, C)).astype(np.float32)
    index = rng.integers(0, rows, (P, 1)).astype(np.int32)
    got = k(data, index)
    for b in range(2):
        np.testing.assert_array_equal(got[b, :P - 1], data[b, index[:P - 1, 0]])


def test_a_gather_index_outside_the_table_is_an_index_error():
    @nki.jit
    def k(data, index):
        out = nl.ndarray((4, 8), dtype=data.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(data[nl.load(index), nl.arange(8)[None, :]]))
        return out
    data = np.zeros((6, 8), np.float32)
    with pytest.raises(IndexError, match="index"):
        k(data, np.array([[0], [5], [6], [1]], np.int32))


def test_where_broadcasts_and_selects_exactly():
    """nl.where(mask [P, W, 3, 3], iota of 3 * y + z [1, 1, 3, 3], 9) --
    select_and_scatter's step: integers kept exact (no fp32 round trip),
    a one-partition tile broadcast across partitions, free axes of size 1
    widened."""
    @nki.jit
    def k(x):
        P, W = x.shape[0], x.shape[1]
        out = nl.ndarray((P, W, 3, 3), dtype=nl.uint32, buffer=nl.shared_hbm)
        win = nl.mgrid[0:P, 0:W, 0:3, 0:3]
        lin = nisa.iota(3 * win.y + win.z + 16777217, dtype=nl.uint32)      # > 2^24: fp32 would round
        m = nl.greater(nl.load(x), 0.0, dtype=nl.int8)
        nl.store(out, value=nl.where(m, lin, 9, dtype=nl.uint32))
        return out
    x = np.random.default_rng(1).standard_normal((64, 5, 3, 3)).astype(np.float32)
    lin = (3 * np.arange(3)[:, None] + np.arange(3)[None, :] + 16777217).astype(np.uint32)
    np.testing.assert_array_equal(k(x), np.where(x > 0, lin[None, None], 9).astype(np.uint32))


def test_binary_broadcasts_both_ways():
    """[P, W, 1, 1] against [1, 1, 3, 3] (NumPy's rule) -- select_and_scatter's nl.equal."""
    @nki.jit
    def k(a, b):
        out = nl.ndarray((a.shape[0], a.shape[1], 3, 3), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(a), nl.load(b)))
        return out
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((16, 4, 1, 1)).astype(np.float32), rng.standard_normal((1, 1, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(k(a, b), a + b, rtol=1e-6)


def test_vector_offset_gathers_and_scatters():
    """The SDK's dma_copy examples: src=data.ap(pattern=[[F, P], [1, F]],
    vector_offset=idx, indirect_dim=0) gathers rows, the same on dst
    scatters them; nl.store into a tile-indexed view scatters too."""
    @nki.jit
    def gather(data, indices):
        P, F = indices.shape[0], data.shape[1]
        output = nl.ndarray((P, F), dtype=data.dtype, buffer=nl.shared_hbm)
        idx = nl.ndarray((P, 1), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=indices)
        dst = nl.ndarray((P, F), dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=dst, src=data.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0))
        nisa.dma_copy(dst=output, src=dst)
        return output

    @nki.jit
    def scatter(src_data, indices, rows):
        P, F = src_data.shape
        output = nl.ndarray((rows, F), dtype=src_data.dtype, buffer=nl.shared_hbm)
        zero = nl.zeros((rows, F), dtype=src_data.dtype)
        nl.store(output, value=zero)
        src = nl.load(src_data)
        idx = nl.load(indices)
        nisa.dma_copy(dst=output.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0), src=src)
        return output

    @nki.jit
    def store_scatter(src_data, indices, rows):
        P, F = src_data.shape
        output = nl.ndarray((rows, F), dtype=src_data.dtype, buffer=nl.shared_hbm)
        nl.store(output, value=nl.zeros((rows, F), dtype=src_data.dtype))
        nl.store(output[nl.load(indices), nl.arange(F)[None, :]], value=nl.load(src_data))
        return output

    rng = np.random.default_rng(3)
    data = rng.standard_normal((300, 40)).astype(np.float32)
    idx = rng.integers(0, 300, (128, 1)).astype(np.uint32)
    np.testing.assert_array_equal(gather(data, idx), data[idx[:, 0]])
    rows = rng.permutation(120)[:96].astype(np.int32)[:, None]
    src = rng.standard_normal((96, 40)).astype(np.float32)
    want = np.zeros((120, 40), np.float32)
    want[rows[:, 0]] = src
    np.testing.assert_array_equal(scatter(src, rows, 120), want)
    np.testing.assert_array_equal(store_scatter(src, rows, 120), want)


def test_dma_compute_adds_in_the_dma_engines():
    """SDK nki.isa.dma_compute: dst = srcs[0] + srcs[1] + ... (nl.add,
    scales 1.0); with vector_offset, the gather read-modify-write (SBUF +=
    HBM rows, nki-library's topk_reduce) and the scatter one (HBM rows +=
    SBUF); dma_copy(dst_rmw_op=nl.add) is the same add."""
    @nki.jit
    def direct(a, b, c):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        ta, tb = nl.load(a), nl.load(b)
        acc = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_compute(dst=acc, srcs=[ta, tb, c], reduce_op=nl.add)     # fp32: a copy, two adds
        nisa.dma_copy(dst=acc, src=ta, dst_rmw_op=nl.add)                  # acc += a
        nl.store(out, value=acc)
        return out

    @nki.jit
    def gather_rmw(table, index):
        T, K = index.shape
        out = nl.ndarray((T, table.shape[1]), dtype=table.dtype, buffer=nl.shared_hbm)
        idx = nl.load(index)
        acc = nl.ndarray((T, table.shape[1]), dtype=table.dtype, buffer=nl.sbuf)
        for k in range(K):
            src = table.ap(pattern=[[table.shape[1], T], [1, table.shape[1]]], vector_offset=idx[:, k:k + 1],
                           indirect_dim=0)
            if k == 0:
                nisa.dma_copy(dst=acc[:, :], src=src)
            else:
                nisa.dma_compute(dst=acc[:, :], srcs=[src, acc[:, :]], reduce_op=nl.add, unique_indices=True)
        nl.store(out, value=acc)
        return out

    @nki.jit
    def scatter_rmw(base, data, index):
        out = nl.ndarray(base.shape, dtype=base.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(base))
        idx = nl.load(index)
        view = out.ap(pattern=[[base.shape[1], data.shape[0]], [1, base.shape[1]]], vector_offset=idx,
                      indirect_dim=0)
        nisa.dma_compute(dst=view, srcs=[view, nl.load(data)], reduce_op=nl.add)
        return out

    rng = np.random.default_rng(4)
    a, b, c = (rng.standard_normal((96, 40)).astype(np.float32) for _ in range(3))
    np.testing.assert_allclose(direct(a, b, c), a + b + c + a, rtol=1e-6, atol=1e-6)
    table = rng.standard_normal((200, 48)).astype(np.float32)
    index = rng.integers(0, 200, (64, 3)).astype(np.int32)
    np.testing.assert_allclose(gather_rmw(table, index), table[index].sum(axis=1), rtol=1e-5, atol=1e-5)
    base = rng.standard_normal((100, 16)).astype(np.float32)
    data = rng.standard_normal((32, 16)).astype(np.float32)
    rows = rng.permutation(100)[:32].astype(np.int32)[:, None]
    want = base.copy()
    want[rows[:, 0]] += data
    np.testing.assert_allclose(scatter_rmw(base, data, rows), want, rtol=1e-6)


@pytest.mark.parametrize("dst_in", ["sbuf", "hbm"])
def test_dma_compute_into_bf16_rounds_once(dst_in):
    """SDK nki.isa.dma_compute: sources cast to fp32, summed, the sum cast to
    dst's dtype once (nki-library's qkv fused_add: three bf16 sources). The
    values are chosen so that rounding after each add would differ."""
    import ml_dtypes

    @nki.jit
    def k(a, b, c):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        if dst_in == "sbuf":
            acc = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_compute(dst=acc, srcs=[nl.load(a), nl.load(b), c], reduce_op=nl.add)
            nl.store(out, value=acc)
        else:
            nisa.dma_compute(dst=out, srcs=[a, b, c], reduce_op=nl.add)
        return out
    bf = ml_dtypes.bfloat16
    a = np.full((16, 8), 256.0, np.float32).astype(bf)
    b = np.full((16, 8), 1.0, np.float32).astype(bf)          # 256 + 1 rounds back to 256 in bf16
    c = np.full((16, 8), 1.0, np.float32).astype(bf)
    got = np.asarray(k(a, b, c), np.float32)
    np.testing.assert_array_equal(got, np.full((16, 8), 258.0, np.float32))   # one rounding: 258 exactly


def test_dma_compute_refuses_what_it_cannot_do_exactly():
    import ml_dtypes

    def kernel(**kw):
        @nki.jit
        def k(a, b, c):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            acc = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_compute(dst=acc, srcs=[nl.load(a), nl.load(b), nl.load(c)], **kw)
            nl.store(out, value=acc)
            return out
        return k
    y = np.zeros((8, 8), np.float32)
    with pytest.raises(nki.NKIError, match="reduce_op is nl.add"):
        kernel(reduce_op=nl.maximum)(y, y, y)
    with pytest.raises(nki.NKIError, match="scales other than 1.0"):
        kernel(reduce_op=nl.add, scales=[1.0, 2.0, 1.0])(y, y, y)


def test_oob_mode_skip_drops_the_rows_whose_index_leaves_the_tensor():
    """SDK nki.isa.dma_copy / dma_compute oob_mode.skip: "Silently skips any
    operations involving out-of-bounds indices" -- on a gather the row's
    destination keeps what it held, on a scatter nothing is written for it,
    on the gather read-modify-write nothing is added; with the default
    oob_mode.error the same index is an IndexError (nki-library's MoE
    kernels mark unused slots with an index past the table)."""
    F = 24

    @nki.jit
    def gather(data, indices, skip):
        P = indices.shape[0]
        out = nl.ndarray((P, F), dtype=data.dtype, buffer=nl.shared_hbm)
        idx = nl.load(indices)
        dst = nl.full((P, F), -1.0, dtype=data.dtype)
        nisa.dma_copy(dst=dst, src=data.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0),
                      oob_mode=nisa.oob_mode.skip if skip else nisa.oob_mode.error)
        nl.store(out, value=dst)
        return out

    @nki.jit
    def scatter(src_data, indices, rows):
        P = src_data.shape[0]
        out = nl.ndarray((rows, F), dtype=src_data.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.zeros((rows, F), dtype=src_data.dtype))
        nisa.dma_copy(dst=out.ap(pattern=[[F, P], [1, F]], vector_offset=nl.load(indices), indirect_dim=0),
                      src=nl.load(src_data), oob_mode=nisa.oob_mode.skip)
        return out

    @nki.jit
    def gather_add(table, indices):
        P = indices.shape[0]
        out = nl.ndarray((P, F), dtype=table.dtype, buffer=nl.shared_hbm)
        acc = nl.full((P, F), 0.5, dtype=table.dtype)
        src = table.ap(pattern=[[F, P], [1, F]], vector_offset=nl.load(indices), indirect_dim=0)
        nisa.dma_compute(dst=acc, srcs=[src, acc], reduce_op=nl.add, oob_mode=nisa.oob_mode.skip)
        nl.store(out, value=acc)
        return out

    rng = np.random.default_rng(11)
    data = rng.standard_normal((50, F)).astype(np.float32)
    idx = rng.integers(0, 50, (64, 1)).astype(np.int32)
    idx[::5] = 50                                # one past the end
    idx[1::7] = -3
    keep = (idx[:, 0] >= 0) & (idx[:, 0] < 50)
    want = np.where(keep[:, None], data[np.clip(idx[:, 0], 0, 49)], -1.0).astype(np.float32)
    np.testing.assert_array_equal(gather(data, idx, True), want)
    with pytest.raises(IndexError, match="outside the 50 rows"):
        gather(data, idx, False)
    np.testing.assert_array_equal(gather_add(data, idx), np.where(keep[:, None], want + 0.5, 0.5))
    rows = rng.permutation(40)[:32].astype(np.int32)[:, None]
    rows[3], rows[9] = 40, 1 << 20
    src = rng.standard_normal((32, F)).astype(np.float32)
    want = np.zeros((40, F), np.float32)
    ok = rows[:, 0] < 40
    want[rows[ok, 0]] = src[ok]
    np.testing.assert_array_equal(scatter(src, rows, 40), want)


def test_vector_offset_rows_count_from_the_offset():
    """With offset=, a vector_offset view's rows count from the offset: an
    LNC 2 kernel scatters into its core's half of a [2T, H] tensor with
    offset T*H and indices below T (nki-library's MX shard-on-block MoE);
    an index past the rows left after the offset is the IndexError."""
    T, H = 64, 16

    @nki.jit
    def k(src, idx):
        out = nl.ndarray((2 * T, H), dtype=src.dtype, buffer=nl.shared_hbm)
        nl.store(out[0:T, :], value=nl.zeros((T, H), dtype=src.dtype))
        nl.store(out[T:2 * T, :], value=nl.zeros((T, H), dtype=src.dtype))
        view = out.ap(pattern=[[H, 32], [1, H]], offset=T * H, vector_offset=nl.load(idx), indirect_dim=0)
        nisa.dma_copy(dst=view, src=nl.load(src))
        return out
    rng = np.random.default_rng(8)
    src = rng.standard_normal((32, H)).astype(np.float32)
    rows = rng.permutation(T)[:32].astype(np.int32)[:, None]
    want = np.zeros((2 * T, H), np.float32)
    want[T + rows[:, 0]] = src
    np.testing.assert_array_equal(k(src, rows), want)
    rows[5] = T                                   # one past the core's half
    with pytest.raises(IndexError, match=f"outside the {T} rows"):
        k(src, rows)
