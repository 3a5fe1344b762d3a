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


def _pair_positions(row, vals, descending=False, none=-1):
    """The positions nc_find_index8 (ascending) / nc_match_replace8
    (descending, SDK) pair with vals: each value takes its first occurrence
    not taken by an earlier one"""
    pos, taken = [none] * len(vals), set()
    for j in (reversed(range(len(vals))) if descending else range(len(vals))):
        hit = next((e for e in np.flatnonzero(row == vals[j]) if e not in taken), None)
        if hit is not None:
            pos[j] = int(hit)
            taken.add(int(hit))
    return pos


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
    x[0, N // 2] = x[0, N - 1] = 9.0            # a tie: both kept, each paired with its own position
    vals, pos = _max8_and_positions(x)
    ref = _top8(x)
    np.testing.assert_array_equal(vals, ref)
    want = np.array([_pair_positions(x[p], ref[p]) for p in range(P)])
    np.testing.assert_array_equal(pos.astype(np.int64), want)
    assert list(pos[0, :2]) == [N // 2, N - 1]


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
    with pytest.raises(nki.NKIError, match="or arguments, whole"):
        k(np.zeros((128, 8), np.float32), np.zeros((128, 8), np.float32))


@pytest.mark.parametrize("N", [1, 127, 128, 129, 513])
@pytest.mark.parametrize("reduce_op, ref", [("add", np.sum), ("maximum", np.max)])
def test_tensor_scalar_reduce_writes_values_and_their_reduction(N, reduce_op, ref):
    """SDK nki.isa.tensor_scalar_reduce: tensor_scalar with one operator,
    and the reduce of its result along the free axis, one instruction."""
    @nki.jit
    def k(x, c):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
        r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=d, data=nl.load(x), op0=nl.multiply, operand0=nl.load(c),
                                  reduce_op=getattr(nl, reduce_op), reduce_res=r)
        nl.store(out, value=d)
        nl.store(red, value=r)
        return out, red
    rng = np.random.default_rng(N)
    x = rng.standard_normal((128, N)).astype(np.float32)
    c = rng.standard_normal((128, 1)).astype(np.float32)
    out, red = k(x, c)
    np.testing.assert_allclose(out, x * c, rtol=1e-6)
    np.testing.assert_allclose(red[:, 0], ref(x * c, axis=1), rtol=1e-5, atol=1e-5)
    _, res = nki.simulate(k, x, c)
    assert res.program.count("tensor_scalar_reduce") == 1


def test_tensor_scalar_reduce_costs_one_more_min_ii_than_tensor_scalar():
    """HW cost model: tensor_scalar max(MIN_II, N); tensor_scalar_reduce
    max(MIN_II, N) + MIN_II -- never less."""
    import neuronsim
    chip = neuronsim.chip_info("trn2")

    def run(fused):
        @nki.jit
        def k(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            t = nl.load(x)
            for i in range(16):          # distinct scalars: nothing to reuse
                if fused:
                    r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.multiply, operand0=2.0 + i, reduce_op=nl.add,
                                              reduce_res=r)
                else:
                    nisa.tensor_scalar(dst=d, data=t, op0=nl.multiply, operand0=2.0 + i)
            nl.store(out, value=d)
            return out
        return nki.simulate(k, np.ones((128, 2048), np.float32))[1]
    a, b = run(False), run(True)
    min_ii_us = chip["min_ii"] / chip["clock_mhz"]["vector"]
    assert 16 * min_ii_us * 0.99 <= b.latency_us - a.latency_us <= 16 * min_ii_us * 1.5


@pytest.mark.parametrize("N", [8, 129, 513])
def test_match_replace8_pairs_duplicates_in_reverse_and_replaces_them(N):
    """SDK nki.isa.nc_match_replace8, including its worked example: data
    [1, 2, 3, 4, 8 x 7], vals [3, 8 x 7] -> dst_idx [2, 10, 9, 8, 7, 6, 5, 4]."""
    @nki.jit
    def k(x, v):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        at = nl.ndarray((x.shape[0], 8), dtype=nl.uint32, buffer=nl.shared_hbm)
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        i = nl.ndarray((x.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.nc_match_replace8(d, nl.load(x), nl.load(v), -5.0, dst_idx=i)
        nl.store(out, value=d)
        nl.store(at, value=i)
        return out, at
    rng = np.random.default_rng(N)
    x = rng.integers(0, 6, (128, N)).astype(np.float32)
    v = x[:, [0, 0, 1, 2, 3, 3, 3, 4]].copy()
    v[5, 2] = 100.0                                # in no row: left alone, position all ones
    if N >= 11:
        x[0, :11] = [1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]
        x[0, 11:] = 0
        v[0] = [3, 8, 8, 8, 8, 8, 8, 8]
    out, at = k(x, v)
    want_x, want_at = x.copy(), np.zeros((128, 8), np.int64)
    for p in range(128):
        pos = _pair_positions(x[p], v[p], descending=True, none=0xFFFFFFFF)
        want_at[p] = pos
        for q in pos:
            if q != 0xFFFFFFFF:
                want_x[p, q] = -5.0
    np.testing.assert_array_equal(at.astype(np.int64), want_at)
    np.testing.assert_array_equal(out, want_x)
    if N >= 11:
        assert list(at[0]) == [2, 10, 9, 8, 7, 6, 5, 4]


@pytest.mark.parametrize("op, ref", [("abs", np.abs), ("square", np.square), ("relu", lambda v: np.maximum(v, 0)),
                                     ("reciprocal", np.reciprocal)])
def test_unary_alu_operators_in_tensor_scalar(op, ref):
    """SDK nki.api.shared, "Arithmetic Unary" ALU operators: they apply to
    the data and ignore the operand (nkilib's rmsnorm_quant passes
    op0=nl.abs, operand0=0.0 to tensor_scalar_reduce)."""
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=d, data=nl.load(x), op0=getattr(nl, op), operand0=0.0, reduce_op=nl.maximum,
                                  reduce_res=r)
        nl.store(out, value=d)
        nl.store(red, value=r)
        return out, red
    x = np.random.default_rng(11).standard_normal((128, 96)).astype(np.float32) + 0.01
    out, red = k(x)
    np.testing.assert_allclose(out, ref(x), rtol=1e-6)
    np.testing.assert_allclose(red[:, 0], ref(x).max(axis=1), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e4m3"])
def test_fp8_results_come_back_as_float32_values(dtype):
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=getattr(nl, dtype), buffer=nl.shared_hbm)
        nl.store(out, value=nl.copy(nl.load(x), dtype=getattr(nl, dtype)))
        return out
    x = np.array([[0.1, 1.0, 300.0, 500.0, -2.5, 17.0, 0.0, -0.0, 247.0]] * 128, np.float32)
    out = k(x)
    assert out.dtype == np.float32
    # ties to even: 0.1 -> 0.1015625, 17 -> 16.  e4m3fn (max 448, saturating as the engines cast):
    # 300 -> 288, 500 -> 448; NKI's float8_e4m3 (IEEE-like, max 240): past 248 infinity
    big = [288.0, 448.0] if dtype == "float8_e4m3fn" else [np.inf, np.inf]
    np.testing.assert_array_equal(out[0], [0.1015625, 1.0, *big, -2.5, 16.0, 0.0, -0.0, 240.0])


def test_ap_with_dtype_reinterprets_a_tiles_bytes():
    """tensor.ap(pattern, dtype=) on chip reads the tile's bytes as another
    dtype (nkilib's rmsnorm_quant stores an fp32 scale as 4 fp8 bytes)."""
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 2), dtype=nl.uint16, buffer=nl.shared_hbm)
        t = nl.load(x)                                        # [128, 1] fp32
        nisa.dma_copy(dst=out, src=t.ap(pattern=[[2, 128], [1, 2]], dtype=nl.uint16))
        return out
    x = np.random.default_rng(12).standard_normal((128, 1)).astype(np.float32)
    np.testing.assert_array_equal(k(x), x.view(np.uint16).reshape(128, 2))



def test_shared_constant_from_an_npy_file(tmp_path):
    eye = np.eye(16, dtype=np.float32) * 3
    path = tmp_path / "c.npy"
    np.save(path, eye)

    @nki.jit
    def k(x):
        out = nl.ndarray((16, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(x), nl.load(nl.shared_constant(str(path)))))
        return out
    x = np.ones((16, 16), np.float32)
    np.testing.assert_array_equal(k(x), x + eye)

    @nki.jit
    def missing(x):
        nl.shared_constant(str(tmp_path))            # a directory
        return x
    with pytest.raises(nki.NKIError, match="not a regular file"):
        missing(x)


def test_an_instruction_the_isa_refuses_names_the_kernel_line():
    """The C validator judges; its refusal comes back as an NKIError at the
    kernel line that traced the instruction (fp32 moving with bf16
    stationary: the matmul pairs fp32 only with fp32)."""
    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        p = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=nl.load(a), moving=nl.load(b))   # the line
        nl.store(out, value=nl.copy(p))
        return out
    import ml_dtypes
    a = np.ones((128, 128), ml_dtypes.bfloat16)
    b = np.ones((128, 64), np.float32)
    import inspect
    line = next(i for i, s in enumerate(inspect.getsourcelines(k.func)[0]) if "# the line" in s) + \
        inspect.getsourcelines(k.func)[1]
    with pytest.raises(nki.NKIError, match=rf"test_nki_library_ops.py:{line}: the simulator's ISA refuses"):
        k(a, b)


def test_accumulation_groups_are_per_psum_region():
    """Matmuls into two column ranges of one PSUM tile, interleaved, the
    contraction loop outside (nkilib's MLP / MoE down projection): each range
    accumulates its own sum.  (With one group per tile, every return to a
    range restarted it: a silent wrong value, found on nkilib's MoE TKG.)"""
    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        p = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        for kk in range(3):
            lhs = nl.load(a[kk * 128:(kk + 1) * 128, :])
            for j in range(2):
                nisa.nc_matmul(dst=p[:, j * 64:(j + 1) * 64], stationary=lhs,
                               moving=nl.load(b[kk * 128:(kk + 1) * 128, j * 64:(j + 1) * 64]))
        nl.store(out, value=nl.copy(p))
        return out
    rng = np.random.default_rng(13)
    a = rng.standard_normal((384, 128)).astype(np.float32)
    b = rng.standard_normal((384, 128)).astype(np.float32)
    np.testing.assert_allclose(k(a, b), a.T @ b, rtol=1e-4, atol=1e-4)


def test_nonzero_with_count_on_the_gpsimd_core_rows():
    """SDK nki.isa.nonzero_with_count: partitions 0, 16, .., 112 only; the
    positions (+index_offset), padding_val, then the count; other partitions
    of dst untouched.  NeuronCore-v3+ (the validator refuses trn1)."""
    @nki.jit
    def k(x):
        out = nl.ndarray((128, x.shape[1] + 1), dtype=nl.int32, buffer=nl.shared_hbm)
        d = nl.ndarray((128, x.shape[1] + 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(d, value=7)
        nisa.nonzero_with_count(d, nl.load(x), index_offset=100, padding_val=-3)
        nl.store(out, value=d)
        return out
    rng = np.random.default_rng(14)
    x = (rng.random((128, 40)) < 0.2).astype(np.float32)
    out = k(x)
    for p in range(128):
        if p % 16:
            assert (out[p] == 7).all()
            continue
        nz = np.flatnonzero(x[p])
        want = np.full(41, -3)
        want[:len(nz)], want[-1] = nz + 100, len(nz)
        np.testing.assert_array_equal(out[p], want)
    with pytest.raises(nki.NKIError, match="NeuronCore-v3"):
        nki.Kernel(k.func, "trn1")(x)


def test_scalar_offset_read_from_an_sbuf_tile_and_linear_ap_offsets():
    """SDK nki-aps.rst: scalar_offset= a (1, 1) SBUF tensor, read at run time,
    moves the access by value * prod(shape[indirect_dim + 1:]); an on-chip
    .ap(offset=) counts elements from the tensor's start, partitions first
    (nkilib's cross_entropy picks each row's target logit this way)."""
    @nki.jit
    def k(logits, targets):
        N, V = logits.shape
        out = nl.ndarray((N, 1), dtype=logits.dtype, buffer=nl.shared_hbm)
        tg = nl.load(targets)                                   # [N, 1] int32
        got = nl.ndarray((N, 1), dtype=logits.dtype, buffer=nl.sbuf)
        flat = logits.reshape((N * V,))
        for r in range(N):
            nisa.dma_copy(dst=got[r:r + 1, :],
                          src=flat.ap(pattern=[[V, 1], [1, 1]], offset=r * V,
                                      scalar_offset=tg.ap(pattern=[[1, 1], [1, 1]], offset=r)))
        nl.store(out, value=got)
        return out
    rng = np.random.default_rng(15)
    logits = rng.standard_normal((16, 50)).astype(np.float32)
    targets = rng.integers(0, 50, (16, 1)).astype(np.int32)
    np.testing.assert_array_equal(k(logits, targets)[:, 0], logits[np.arange(16), targets[:, 0]])


def test_an_integer_partition_index_keeps_a_partition_dimension_of_one():
    @nki.jit
    def k(x):
        out = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(t, value=0.0)
        nisa.dma_copy(dst=t[5, :], src=x[...])
        nl.store(out, value=nl.add(t[5, :], 1.0))
        return out
    x = np.arange(12, dtype=np.float32).reshape(1, 12)
    np.testing.assert_array_equal(k(x), x + 1)


def test_dma_oob_skip_drops_a_transfer_its_run_time_offset_moves_out():
    """SDK nisa.dma_copy: oob_mode.skip skips "the DMA transfer for a given
    dynamic address ... when it is out of bound" (nkilib's indexed_flatten
    writes rows at offsets read on the device, an invalid one dropped);
    without it the same offset is a run-time IndexError-like fault."""
    def kernel(skip):
        @nki.jit
        def k(x, offs):
            R, F = x.shape
            out = nl.ndarray((4 * R, F), dtype=x.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=nl.full((4 * R, F), -1.0, dtype=x.dtype))
            o = nl.load(offs)                                     # [1, R] int32 row offsets
            for r in range(R):
                nisa.dma_copy(dst=out.ap(pattern=[[F, 1], [1, F]], offset=0,
                                         scalar_offset=o.ap(pattern=[[1, 1], [1, 1]], offset=r), indirect_dim=0),
                              src=nl.load(x[r:r + 1, :]),
                              oob_mode=nisa.oob_mode.skip if skip else nisa.oob_mode.error)
            return out
        return k
    x = np.arange(3 * 5, dtype=np.float32).reshape(3, 5)
    offs = np.array([[7, 100000, 2]], np.int32)                  # row 1 lands far outside: dropped
    out = kernel(True)(x, offs)
    want = np.full((12, 5), -1.0, np.float32)
    want[7], want[2] = x[0], x[2]
    np.testing.assert_array_equal(out, want)
    with pytest.raises(Exception, match="reaches past the edges"):
        kernel(False)(x, offs)


def test_tensor_scalar_reduce_declines_register_chaining_and_negation():
    """reduce_cmd / reduce_init / reduce_res_negate were once swallowed by
    **kw (a silent wrong value for a chained reduction); now named."""
    def kernel(**extra):
        @nki.jit
        def k(x):
            out = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
            r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar_reduce(data=nl.load(x), op0=nl.multiply, operand0=2.0, reduce_op=nl.add,
                                      reduce_res=r, **extra)
            nl.store(out, value=r)
            return out
        return k
    x = np.ones((8, 4), np.float32)
    np.testing.assert_array_equal(kernel(reduce_cmd=nisa.reduce_cmd.reset_reduce)(x), np.full((8, 1), 8.0))
    with pytest.raises(nki.NKIError, match="reduce_cmd=reduce"):
        kernel(reduce_cmd=nisa.reduce_cmd.reduce)(x)
    with pytest.raises(nki.NKIError, match="reduce_res_negate"):
        kernel(reduce_res_negate=True)(x)


def test_ap_with_dtype_reinterprets_an_hbm_tensors_bytes():
    """SDK nki-aps.rst .ap(dtype=) on HBM (nkilib's topk_reduce reads int32
    indices stored in a bf16 buffer): pattern and offset in elements of the
    new dtype, bounds the tensor's bytes."""
    @nki.jit
    def k(x):
        out = nl.ndarray((x.shape[0], x.shape[1] // 2), dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray((x.shape[0], x.shape[1] // 2), dtype=nl.int32, buffer=nl.sbuf)
        half = x.shape[1] // 2
        nisa.dma_copy(dst=t, src=x.ap(pattern=[[half, x.shape[0]], [1, half]], offset=0, dtype=nl.int32))
        nl.store(out, value=t)
        return out
    x = np.arange(8 * 6, dtype=np.uint16).reshape(8, 6) * 1001
    np.testing.assert_array_equal(k(x), x.view(np.int32))

    @nki.jit
    def past(x):
        out = nl.ndarray((1, 4), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x.ap(pattern=[[4, 1], [1, 4]], offset=23, dtype=nl.int32))
        return out
    with pytest.raises(nki.NKIError, match="outside"):
        past(x)
