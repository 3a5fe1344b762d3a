"""nki.isa instructions that move data across partitions or copy under a
predicate (nc_stream_shuffle, ...), each against a NumPy form of the SDK's
documented semantics, across quadrant and tile boundaries."""
import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl


def _shuffled(x, mask, dst):
    """SDK semantics: dst partition 32q + i = x partition 32q + mask[i]; 255 keeps dst's."""
    out = dst.copy()
    for p in range(out.shape[0]):
        m = mask[p % 32]
        if m != 255:
            out[p] = x[p // 32 * 32 + m]
    return out


@pytest.mark.parametrize("P", [1, 31, 32, 33, 64, 96, 127, 128])
@pytest.mark.parametrize("F", [1, 129])
def test_stream_shuffle_matches_numpy_in_place(P, F):
    rng = np.random.default_rng(P * 1000 + F)
    # entry i may read partition m of every quadrant that has a partition i: m below the last one's size
    last = {i: min(32, P - (max(q for q in range(4) if 32 * q + i < P) if i < P else 0) * 32) for i in range(32)}
    mask = [int(m) % last[i] if rng.random() > 0.2 else 255 for i, m in enumerate(rng.integers(0, 32, 32))]

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        a = nl.load(x)
        nisa.nc_stream_shuffle(dst=a, src=a, shuffle_mask=mask)
        nl.store(out, value=a)
        return out
    x = rng.standard_normal((P, F)).astype(np.float32)
    np.testing.assert_array_equal(k(x), _shuffled(x, mask, x))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.float16])
def test_stream_shuffle_moves_values_exactly(dtype):
    """One dtype in and out: integers above 2^24 come through unchanged."""
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(dst=b, src=nl.load(x), shuffle_mask=[31 - i for i in range(32)])
        nl.store(out, value=b)
        return out
    x = (np.arange(128 * 8).reshape(128, 8) + (1 << 30 if np.dtype(dtype).kind in "iu" else 0)).astype(dtype)
    np.testing.assert_array_equal(k(x), _shuffled(x, [31 - i for i in range(32)], x))


def test_stream_shuffle_broadcasts_one_partition_into_another_quadrant():
    """SDK example 2 and nkilib's moe_cte_utils: a one-partition src, mask
    all zeros, into 32 partitions starting at another quadrant."""
    @nki.jit
    def k(x):
        out = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
        b = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(b, value=-1.0)
        a = nl.load(x)
        nisa.nc_stream_shuffle(dst=b[64:96, :], src=a[0:1, :], shuffle_mask=[0] * 32)
        nl.store(out, value=b)
        return out
    x = np.random.default_rng(3).standard_normal((1, 40)).astype(np.float32)
    want = np.full((128, 40), -1.0, np.float32)
    want[64:96] = x[0]
    np.testing.assert_array_equal(k(x), want)


def test_stream_shuffle_refusals_name_the_kernel_line():
    """The validator's rules (SDK): start partitions by active quadrants,
    partitions the mask reads inside src, same dtype, a 32-entry mask."""
    def kernel(dst_lo, src_lo, n, mask, dt=nl.float32):
        @nki.jit
        def k(x):
            out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
            a = nl.load(x)
            b = nl.ndarray((128, 8), dtype=dt, buffer=nl.sbuf)
            nisa.nc_stream_shuffle(dst=b[dst_lo:dst_lo + n, :], src=a[src_lo:src_lo + n, :], shuffle_mask=mask)
            nl.store(out, value=a)
            return out
        return k
    x = np.zeros((128, 8), np.float32)
    ident = list(range(32))
    kernel(32, 0, 32, ident)(x)                                  # one quadrant: any quadrant start
    with pytest.raises(nki.NKIError, match=r"test_nki_partition_ops.py:\d+.*multiple of 64"):
        kernel(32, 0, 64, ident)(x)                              # two quadrants: 0 or 64
    with pytest.raises(nki.NKIError, match="reads src partition 20; src has 16"):
        kernel(0, 0, 16, [20] + ident[1:])(x)
    with pytest.raises(nki.NKIError, match="src fp32|moves data as it is"):
        kernel(0, 0, 32, ident, nl.bfloat16)(x)
    with pytest.raises(nki.NKIError, match="32 entries"):
        kernel(0, 0, 32, ident[:31])(x)


@pytest.mark.parametrize("P,F", [(1, 1), (127, 129), (128, 513), (33, 255)])
def test_tensor_copy_predicated_keeps_unselected_elements(P, F):
    """SDK nki.isa.tensor_copy_predicated: dst = src where the predicate
    holds (not, with reverse_pred), unchanged elsewhere; src a tile or a number."""
    @nki.jit
    def k(x, y, m):
        out = nl.ndarray((2,) + x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        a, pr = nl.load(y), nl.load(m)
        nisa.tensor_copy_predicated(dst=a, src=nl.load(x), predicate=pr)
        nl.store(out[0], value=a)
        b = nl.load(x)
        nisa.tensor_copy_predicated(dst=b, src=-2.5, predicate=pr, reverse_pred=True)
        nl.store(out[1], value=b)
        return out
    rng = np.random.default_rng(P + F)
    x, y = (rng.standard_normal((P, F)).astype(np.float32) for _ in range(2))
    m = (rng.random((P, F)) < 0.4).astype(np.uint8)
    out = k(x, y, m)
    np.testing.assert_array_equal(out[0], np.where(m != 0, x, y))
    np.testing.assert_array_equal(out[1], np.where(m != 0, x, np.float32(-2.5)))


def test_tensor_copy_predicated_integers_exact_and_refusals():
    @nki.jit
    def k(x, m):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        a = nl.load(x)
        nisa.tensor_copy_predicated(dst=a, src=(1 << 30) + 3, predicate=nl.load(m))
        nl.store(out, value=a)
        return out
    x = np.arange(64 * 8, dtype=np.int32).reshape(64, 8) + (1 << 29)
    m = (np.arange(64 * 8).reshape(64, 8) % 3 == 0).astype(np.uint16)
    np.testing.assert_array_equal(k(x, m), np.where(m != 0, (1 << 30) + 3, x))
    with pytest.raises(nki.NKIError, match="pred.*uint8, uint16 or uint32"):
        k(x, m.astype(np.float32))

    @nki.jit
    def cast(x, m):
        out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        a = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy_predicated(dst=a, src=nl.load(x), predicate=nl.load(m))
        nl.store(out, value=a)
        return out
    with pytest.raises(nki.NKIError, match="does not cast"):
        cast(x.astype(np.float32), m)


def _range_select_ref(x, lo, hi, start, cmp0, cmp1):
    i = (start + np.arange(x.shape[1], dtype=np.float32))[None, :]
    sel = np.where(cmp0(i, lo) & cmp1(i, hi), x.astype(np.float32), np.finfo(np.float32).min)
    return sel, sel.max(1, keepdims=True)


@pytest.mark.parametrize("P,F,start", [(1, 1, 0), (127, 129, 5), (128, 513, 1000), (33, 257, -40)])
@pytest.mark.parametrize("ops", [(np.greater_equal, np.less), (np.greater, np.less_equal), (np.equal, np.less)])
def test_range_select_matches_the_sdk_numpy_semantics(P, F, start, ops):
    """nkilib attention's form: dst first, bounds [P, 1] fp32, reduce_res the row max."""
    cmp0, cmp1 = ops

    @nki.jit
    def k(x, lo, hi):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        mx = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.range_select(d, on_true_tile=nl.load(x), comp_op0=cmp0, comp_op1=cmp1, bound0=nl.load(lo),
                          bound1=nl.load(hi), reduce_op=nl.maximum, reduce_res=r, range_start=start,
                          on_false_value=nl.fp32.min)
        nl.store(out, value=d)
        nl.store(mx, value=r)
        return out, mx
    rng = np.random.default_rng(P * F)
    x = rng.standard_normal((P, F)).astype(np.float32)
    lo = rng.integers(start - 5, start + F, (P, 1)).astype(np.float32)
    hi = lo + rng.integers(0, 64, (P, 1)).astype(np.float32)
    out, mx = k(x, lo, hi)
    want, wmx = _range_select_ref(x, lo, hi, start, cmp0, cmp1)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(mx, wmx)


def test_range_select_fills_minus_inf_in_bf16_and_declines_what_it_lacks():
    """SDK note: FP32_MIN becomes -inf in a 16-bit dst.  NeuronCore-v3+ only;
    reductions kept across instructions decline by name."""
    def kernel(cmd=None, fill=float(np.finfo(np.float32).min)):
        @nki.jit
        def k(x, lo, hi):
            out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
            d = nisa.range_select(on_true_tile=nl.load(x), comp_op0=nl.greater_equal, comp_op1=nl.less,
                                  bound0=nl.load(lo), bound1=nl.load(hi), range_start=0, dtype=nl.bfloat16,
                                  reduce_cmd=cmd, on_false_value=fill)
            nl.store(out, value=d)
            return out
        return k
    x = np.ones((4, 16), np.float32)
    lo, hi = np.full((4, 1), 2, np.float32), np.full((4, 1), 5, np.float32)
    out = np.asarray(kernel()(x, lo, hi), np.float32)
    assert (out[:, 2:5] == 1).all() and np.isneginf(out[:, :2]).all() and np.isneginf(out[:, 5:]).all()
    with pytest.raises(nki.NKIError, match="registers across instructions"):
        kernel(nisa.reduce_cmd.reduce)(x, lo, hi)
    # written as a decimal (nkilib's attention_bwd): FP32_MIN once rounded to fp32
    np.testing.assert_array_equal(np.asarray(kernel(fill=-3.4028235e38)(x, lo, hi), np.float32), out)
    with pytest.raises(nki.NKIError, match="on_false_value is FP32_MIN"):
        kernel(fill=0.0)(x, lo, hi)
    with pytest.raises(nki.NKIError, match="on_false_value is FP32_MIN"):
        kernel(fill=-3.5e38)(x, lo, hi)
    with pytest.raises(nki.NKIError, match="NeuronCore-v3"):
        nki.Kernel(kernel().func, "trn1")(x, lo, hi)


@pytest.mark.parametrize("shape", [(16, 3, 128), (1, 129, 32), (128, 2, 127), (2, 3, 4, 16), (16, 1, 5, 128)])
@pytest.mark.parametrize("from_hbm", [True, False])
def test_dma_transpose_3d_and_4d_permutations(shape, from_hbm):
    """SDK nki.isa.dma_transpose: 3-D [2, 1, 0], 4-D [3, 1, 2, 0] -- the
    first and last axes swap, the middle ones stay -- from HBM or SBUF."""
    perm = (2, 1, 0) if len(shape) == 3 else (3, 1, 2, 0)

    @nki.jit
    def k(x):
        out = nl.ndarray(tuple(x.shape[a] for a in perm), dtype=x.dtype, buffer=nl.shared_hbm)
        d = nl.ndarray(out.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(d, x if from_hbm else nl.load(x), axes=perm)
        nl.store(out, value=d)
        return out
    x = (np.arange(np.prod(shape)) % 2039).astype(np.float16).reshape(shape)
    np.testing.assert_array_equal(k(x), x.transpose(perm))


def test_dma_transpose_refuses_other_permutations():
    @nki.jit
    def k(x):
        out = nl.ndarray((4, 3, 2), dtype=x.dtype, buffer=nl.shared_hbm)
        d = nl.ndarray((4, 3, 2), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(d, x, axes=(2, 0, 1))
        nl.store(out, value=d)
        return out
    with pytest.raises(nki.NKIError, match=r"permutation is \(2, 1, 0\)"):
        k(np.zeros((2, 3, 4), np.float16))


def test_nc_matmul_dst_positional_with_operands_by_keyword():
    """nc_matmul(dst, stationary=..., moving=...) (nkilib attention TKG):
    the one positional argument is dst.  It was once taken for the
    stationary operand and the result left unwritten."""
    @nki.jit
    def k(a, b):
        out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, stationary=nl.load(a), moving=nl.load(b))
        nl.store(out, value=nl.copy(ps))
        return out
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 128)).astype(np.float32), rng.standard_normal((64, 32)).astype(np.float32)
    np.testing.assert_allclose(k(a, b), a.T @ b, rtol=1e-4, atol=1e-4)


def test_isa_elementwise_pairs_operands_of_different_shapes_in_order():
    """nisa.tensor_tensor walks access patterns: [P, 8] with [P, 2, 4]
    pairs element k with element k (no NumPy broadcasting); dst first with
    data= by keyword is the NKI 0.8 form."""
    @nki.jit
    def k(x, y):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        a = nl.load(x)
        nisa.tensor_tensor(a, a, nl.load(y), op=nl.subtract)
        r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(d, data=a, op0=nl.multiply, operand0=1.0, reduce_op=nl.add, reduce_res=r)
        nl.store(out, value=d)
        return out
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((16, 2, 4)).astype(np.float32)
    np.testing.assert_allclose(k(x, y), x - y.reshape(16, 8), rtol=1e-6)


def test_tiles_placed_by_address_share_their_bytes_and_no_other_tile_lands_there():
    """SDK nl.ndarray(address=(partition, byte)): nkilib's attention CTE
    puts 8 PSUM tiles on 4 banks (k % 4) and SbufManager places SBUF tiles.
    Tiles at one address are one storage; the tracer's own tiles keep out."""
    @nki.jit
    def k(a, b):
        out = nl.ndarray((8, a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        ps = [nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum, address=(0, (i % 4) * 2048))
              for i in range(8)]
        sa = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf, address=(0, 0))
        nisa.dma_copy(sa, a)
        for i in range(8):
            bi = nl.load(b) * float(i + 1)         # tracer-placed tiles beside the fixed ones
            nisa.nc_matmul(ps[i], stationary=sa, moving=bi)
            nl.store(out[i], value=nl.copy(ps[i]))
        alias = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf, address=(0, 0))   # sa's bytes
        back = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(back, value=alias)
        first = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(first, value=nl.copy(ps[0]))       # ps[0]'s bank last held ps[4]'s result
        return out, back, first
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((32, 16)).astype(np.float32)
    (out, back, first), r = nki.simulate(k, a, b)
    want = np.stack([(a.T @ b) * (i + 1) for i in range(8)])
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(back, a)
    np.testing.assert_allclose(first, want[4], rtol=1e-4, atol=1e-4)
    assert "psum:fp32[0:64]+2048" in r.program and "psum:fp32[0:64]+6144" in r.program


def _sum_of_copies(tiles):
    """The sum of PSUM tiles, each copied to SBUF (inside a kernel)."""
    acc = nl.copy(tiles[0])
    for p in tiles[1:]:
        acc = nl.add(acc, nl.copy(p))
    return acc


def test_placed_tiles_hold_their_bytes_only_while_alive():
    """A sub-kernel that places PSUM tiles in every bank (nki-library's
    rmsnorm_tkg / qkv_tkg / mlp inside transformer_tkg, each with banks of
    its own choosing) does not keep the tracer's own PSUM tiles out of those
    banks for the rest of the kernel -- the NKI compiler allocates around
    the placements by live range -- while a tile of the tracer's alive
    during a placed tile's life keeps clear of its bytes."""
    @nki.jit
    def k(a, b):
        out = nl.ndarray((3, a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        sa, sb = nl.load(a), nl.load(b)
        # phase 1: the kernel's own placements in all 8 banks
        placed = [nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum, address=(0, i * 2048))
                  for i in range(8)]
        for i, p in enumerate(placed):
            nisa.nc_matmul(p, stationary=sa, moving=sb)
        nl.store(out[0], value=_sum_of_copies(placed))
        # phase 2: tiles of the tracer's, 8 alive at once
        mine = [nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum) for _ in range(8)]
        for i, p in enumerate(mine):
            nisa.nc_matmul(p, stationary=sa, moving=nl.multiply(sb, float(i + 1)))
        nl.store(out[1], value=_sum_of_copies(mine))
        # phase 3: a tracer tile alive across a placement in bank 5
        early = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(early, stationary=sa, moving=sb)
        late = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum, address=(0, 5 * 2048))
        nisa.nc_matmul(late, stationary=sa, moving=nl.multiply(sb, 100.0))
        nl.store(out[2], value=nl.add(nl.copy(early), nl.copy(late)))
        return out
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((32, 16)).astype(np.float32)
    got, r = nki.simulate(k, a, b)
    base = a.T @ b
    np.testing.assert_allclose(got[0], 8 * base, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(got[1], 36 * base, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(got[2], 101 * base, rtol=1e-4, atol=1e-3)


def test_a_placed_tile_read_before_written_keeps_its_predecessors_bytes():
    """Tiles at one address are one storage: a tile placed where an earlier
    one was and read before written sees what that one left, so the bytes
    stay held between the two though neither is alive there."""
    @nki.jit
    def k(a, b):
        out = nl.ndarray((2, a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        sa, sb = nl.load(a), nl.load(b)
        first = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum, address=(0, 0))
        nisa.nc_matmul(first, stationary=sa, moving=sb)
        del first
        mine = [nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum) for _ in range(7)]
        for i, p in enumerate(mine):
            nisa.nc_matmul(p, stationary=sa, moving=nl.multiply(sb, float(i + 2)))
        nl.store(out[0], value=_sum_of_copies(mine))
        again = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum, address=(0, 0))
        nl.store(out[1], value=nl.copy(again))
        return out
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((32, 16)).astype(np.float32)
    got = k(a, b)
    base = a.T @ b
    np.testing.assert_allclose(got[0], 35 * base, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(got[1], base, rtol=1e-4, atol=1e-4)


def test_an_address_outside_the_memory_is_an_error():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.psum, address=(0, 16384))
        nl.store(out, value=nl.copy(t))
        return out
    with pytest.raises(nki.NKIError, match=r"address=\(0, 16384\).*outside PSUM"):
        k(np.zeros((4, 4), np.float32))


def _local_gather_ref(src, index, E, valid):
    """The SDK's numpy semantics (test_nki_isa_local_gather.py), E elements per index."""
    P = src.shape[0]
    flat = src.reshape(P, -1)
    out = np.empty((P, valid * E), src.dtype)
    for c in range(P // 16):
        idx = index[16 * c:16 * c + 16].flatten(order="F")[:valid].astype(np.int64)
        for j, at in enumerate(idx):
            out[16 * c:16 * c + 16, j * E:(j + 1) * E] = flat[16 * c:16 * c + 16, at:at + E]
    return out


@pytest.mark.parametrize("P,F,cols,E,valid", [(128, 512, 4, 4, 64), (16, 1, 1, 1, None), (32, 129, 3, 1, 47),
                                             (128, 257, 2, 32, 5), (48, 64, 8, 2, 128)])
def test_local_gather_matches_the_sdk_numpy_semantics(P, F, cols, E, valid):
    @nki.jit
    def k(src, index):
        n = valid if valid is not None else 16 * index.shape[1]
        out = nl.ndarray((src.shape[0], n * E), dtype=src.dtype, buffer=nl.shared_hbm)
        g = nisa.local_gather(nl.load(src), nl.load(index), E, valid)
        nl.store(out, value=g)
        return out
    rng = np.random.default_rng(P + F + E)
    src = rng.standard_normal((P, F)).astype(np.float32)
    index = rng.integers(0, F - E + 1, (P, cols)).astype(np.uint16)
    n = valid if valid is not None else 16 * cols
    np.testing.assert_array_equal(k(src, index), _local_gather_ref(src, index, E, n))


def test_local_gather_dst_first_and_refusals():
    @nki.jit
    def k(src, index):
        out = nl.ndarray((src.shape[0], 32), dtype=src.dtype, buffer=nl.shared_hbm)
        d = nl.ndarray((src.shape[0], 32), dtype=src.dtype, buffer=nl.sbuf)
        nisa.local_gather(d, nl.load(src), nl.load(index), num_elem_per_idx=1)
        nl.store(out, value=d)
        return out
    src = np.arange(32 * 40, dtype=np.int32).reshape(32, 40)
    index = (np.arange(32 * 2).reshape(32, 2) % 40).astype(np.uint16)
    np.testing.assert_array_equal(k(src, index), _local_gather_ref(src, index, 1, 32))
    with pytest.raises(nki.NKIError, match="uint16"):
        k(src, index.astype(np.int32))
    with pytest.raises(nki.NKIError, match="whole GpSimd cores"):
        k(src[:24], index[:24])
    with pytest.raises(Exception, match="local_gather: index 50"):
        k(src, np.full((32, 2), 50, np.uint16))


def test_dma_transpose_of_4_byte_elements_from_hbm_is_a_strided_copy():
    """The transpose mode moves 2-byte elements (SDK: a hwdge transpose's
    constraint); nkilib's topk_reduce transposes an int32 column from HBM,
    which lowers to a strided copy (one descriptor per element)."""
    @nki.jit
    def k(x):
        out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
        d = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=d, src=x)
        nl.store(out, value=d)
        return out
    x = np.arange(40 * 3, dtype=np.int32).reshape(40, 3)
    np.testing.assert_array_equal(k(x), x.T)

    @nki.jit
    def from_sbuf(x):
        out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
        d = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=d, src=nl.load(x))
        nl.store(out, value=d)
        return out
    with pytest.raises(nki.NKIError, match="2-byte elements"):
        from_sbuf(x)


@pytest.mark.parametrize("P,F", [(1, 1), (16, 16), (31, 7), (32, 32)])
def test_nc_transpose_on_vector_engine_any_dtype(P, F):
    """SDK nisa.nc_transpose(engine=vector): VectorE transposes up to 32 x 32
    of any dtype (nkilib's MoE TKG transposes uint16 expert indices)."""
    @nki.jit
    def k(x):
        out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
        d = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.nc_transpose(dst=d, data=nl.load(x), engine=nisa.vector_engine)
        nl.store(out, value=d)
        return out
    x = (np.arange(P * F) * 7 % 65535).astype(np.uint16).reshape(P, F)
    out, r = nki.simulate(k, x)
    np.testing.assert_array_equal(out, x.T)
    assert "nc_transpose" in r.program.split(".engine vector")[1].split(".engine")[0]
