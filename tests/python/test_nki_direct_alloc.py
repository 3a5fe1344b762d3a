"""nki.compiler direct allocation (SDK "NKI Direct Allocation Developer
Guide", nki.compiler.sbuf / .psum API pages, test_sbuf_modulo_alloc.py) and
the compiler-style constructs that come with it in the public kernels: the
output-argument convention, masks that are conditions on loop indices,
declarations inside device loops, no_reorder, nc_matmul(is_transpose=True);
and PSUM spilling (the attention tutorial's v3-v8)."""
import functools
import re

import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.compiler as ncc
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl


def _offsets(program, space):
    """Byte offsets of `space` operands in a program's text."""
    return {int(m or 0) for m in re.findall(space + r":\w+\[\d+:\d+\](?:\+(\d+))?", program)}


@pytest.mark.parametrize("B,tiles", [(1, 1), (4, 2), (5, 3), (8, 8)])
@pytest.mark.parametrize("F", [1, 128, 257])
def test_sbuf_mod_alloc_places_blocks_modulo_and_computes_right(B, tiles, F):
    """Block i at base + (i % tiles) * block bytes (the SDK's table); the
    kernel reads every block back right after writing it, so blocks sharing
    a tile never overlap in time."""
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((B, nl.par_dim(x.shape[1]), F), dtype=x.dtype,
                       buffer=ncc.sbuf.mod_alloc(base_addr=512, num_free_tiles=(tiles,)))
        for i in nl.affine_range(B):
            t[i] = nl.load(x[i])
            nl.store(out[i], value=nl.exp(t[i]))
        return out
    x = np.random.default_rng(B * 10 + F).standard_normal((B, 96, F)).astype(np.float32)
    got, r = nki.simulate(k, x)
    np.testing.assert_allclose(got, np.exp(x), rtol=1e-5, atol=1e-6)
    placed = {512 + (i % tiles) * F * 4 for i in range(B)}
    assert placed <= _offsets(r.program, "sbuf")


def test_psum_mod_alloc_and_alloc_by_keyword_place_banks():
    """ncc.psum.mod_alloc(base_bank, num_bank_tiles) gives a bank per
    block modulo the count; ncc.psum.alloc calls its function by keyword
    (idx=, pdim_size=, fdim_size=), as allocated_attention.py relies on
    with functools.partial."""
    def bank_of(bank_map, idx, pdim_size, fdim_size):
        assert (pdim_size, fdim_size) == (32, 64)
        return bank_map[idx], 0, 0

    @nki.jit
    def k(a, b):
        out = nl.ndarray((4, a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        sa = nl.ndarray(a.shape, dtype=a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        sb = nl.ndarray(b.shape, dtype=b.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=256))
        sa[...] = nl.load(a)
        sb[...] = nl.load(b)
        ps = nl.ndarray((4, nl.par_dim(a.shape[1]), b.shape[1]), dtype=nl.float32,
                        buffer=ncc.psum.mod_alloc(base_bank=2, num_bank_tiles=(2,)))
        other = nl.ndarray((2, nl.par_dim(a.shape[1]), b.shape[1]), dtype=nl.float32,
                           buffer=ncc.psum.alloc(functools.partial(bank_of, bank_map={(0,): 6, (1,): 7})))
        res = nl.ndarray((nl.par_dim(a.shape[1]), b.shape[1]), dtype=nl.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=1024))
        for i in nl.affine_range(4):
            ps[i] = nisa.nc_matmul(sa, sb)
            res[...] = nl.multiply(ps[i], float(i + 1))
            nl.store(out[i], value=res)
        for j in nl.affine_range(2):
            other[j] = nisa.nc_matmul(sa, sb)
        return out
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((64, 16)).astype(np.float32)
    got, r = nki.simulate(k, a, b)
    np.testing.assert_allclose(got, np.stack([(a.T @ b) * (i + 1) for i in range(4)]), rtol=1e-4, atol=1e-4)
    assert {2 * 2048, 3 * 2048, 6 * 2048, 7 * 2048} <= _offsets(r.program, "psum")


def test_a_lifetime_conflict_is_refused():
    """The guide's example: eight logical tiles on two physical ones, all
    alive when the second loop starts -- the compiler's lifetime conflict;
    a silent overwrite otherwise."""
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((8, nl.par_dim(128), 64), dtype=x.dtype,
                       buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
        for i in nl.affine_range(8):
            t[i] = nl.load(x[i])
        for i in nl.affine_range(8):
            nl.store(out[i], value=nl.exp(t[i]))
        return out
    with pytest.raises(nki.NKIError, match=r"test_nki_direct_alloc.py:\d+: lifetime conflict \(direct allocation\)"):
        k(np.zeros((8, 128, 64), np.float32))


def test_two_tensors_over_common_bytes_alive_at_once_are_refused():
    """The guide's other example: t1's base inside t0's tiles."""
    @nki.jit
    def k(x):
        out = nl.ndarray((2,) + x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t0 = nl.ndarray(x.shape, dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        t1 = nl.ndarray(x.shape, dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=x.shape[1] * 2))
        t0[...] = nl.load(x)
        t1[...] = nl.load(x)
        nl.store(out[0], value=t0)
        nl.store(out[1], value=t1)
        return out
    with pytest.raises(nki.NKIError, match="lifetime conflict"):
        k(np.zeros((128, 512), np.float32))


def test_placement_errors_name_what_is_wrong():
    def bad_partition(idx, pdim_size, fdim_size):
        return 32, 0

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=ncc.sbuf.alloc(bad_partition))
        t[...] = nl.load(x)
        nl.store(out, value=t)
        return out
    with pytest.raises(nki.NKIError, match="start partition 32 for a tile of 128 partitions; it must be one of 0"):
        k(np.zeros((128, 4), np.float32))

    @nki.jit
    def k2(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=8))
        nl.store(out, value=nl.copy(t))
        return out
    with pytest.raises(nki.NKIError, match="PSUM bank 8 is not one of the 8 banks"):
        k2(np.zeros((128, 4), np.float32))
    with pytest.raises(nki.NKIError, match="base_bank is required"):
        ncc.psum.mod_alloc(base_addr=0)


def test_a_declaration_in_a_device_loop_is_placed_once():
    """allocated_attention.py bumps a Python address counter in an
    affine_range body: the compiler traces the body once, so every
    iteration's tensor lands where the first one did; a Python range (or
    static_range) body runs per iteration there too, and declares anew."""
    def kernel(loop):
        @nki.jit
        def k(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            addr = 0
            for i in loop(x.shape[0]):
                t = nl.ndarray(x.shape[1:], dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=addr))
                addr += x.shape[2] * 4
                t[...] = nl.load(x[i])
                nl.store(out[i], value=t)
            return out
        return k
    x = np.random.default_rng(0).standard_normal((6, 128, 32)).astype(np.float32)
    for loop, want in ((nl.affine_range, {0}), (nl.sequential_range, {0}), (nl.static_range, {128 * i for i in range(6)})):
        got, r = nki.simulate(kernel(loop), x)
        np.testing.assert_array_equal(got, x)
        assert _offsets(r.program, "sbuf") == want, loop.__name__


def test_force_auto_alloc_ignores_direct_allocation():
    def kernel():
        def k(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            t = nl.ndarray((4, nl.par_dim(128), 8), dtype=x.dtype,
                           buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(1,)))
            for i in nl.affine_range(4):
                t[i] = nl.load(x[i])
            for i in nl.affine_range(4):
                nl.store(out[i], value=t[i])
            return out
        return k
    x = np.random.default_rng(1).standard_normal((4, 128, 8)).astype(np.float32)
    with pytest.raises(nki.NKIError, match="lifetime conflict"):
        nki.jit(kernel())(x)
    np.testing.assert_array_equal(ncc.force_auto_alloc(nki.jit(kernel()))(x), x)
    np.testing.assert_array_equal(nki.jit(ncc.force_auto_alloc(kernel()))(x), x)


def test_an_output_argument_kernel_writes_in_place_and_returns_none():
    """The older convention (SDK test_sbuf_modulo_alloc.py: nki.simulate_kernel(kernel, a, b))."""
    @nki.trace
    def k(a, out):
        nl.store(out, value=nl.multiply(nl.load(a), 2.0))
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.zeros_like(a)
    assert nki.simulate_kernel(k, a, b) is None
    np.testing.assert_array_equal(b, a * 2)

    @nki.trace
    def nothing(a, out):
        nl.load(a)
    with pytest.raises(nki.NKIError, match="returned nothing and wrote none of its arguments"):
        nothing(a, b)


def test_masks_on_loop_indices_alone_run_or_skip():
    """mask=((2 * i + g) * 128 < n) (allocated_fused_linear.py) is a Python
    bool while tracing: false skips the load, the compute and the store --
    even one whose index lies past the tensor -- and leaves targets as
    they were; true runs them whole."""
    @nki.jit
    def k(x):
        n = x.shape[0]
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:128, 0:x.shape[1]]
        acc = nl.zeros((128, x.shape[1]), dtype=x.dtype)
        for i in nl.affine_range(2):
            t = nl.load(x[i * 128 + ip, jf], mask=(i * 128 < n))
            acc[...] = nl.add(acc, t, mask=(i * 128 < n))
            acc[...] = nisa.activation(op=nl.exp, data=acc, mask=(jf < 4) & (i * 128 < n) & False)
            nl.store(out[i * 128 + ip, jf], value=acc, mask=(i * 128 < n))
        return out
    x = np.random.default_rng(4).standard_normal((128, 16)).astype(np.float32)
    np.testing.assert_allclose(k(x), x, rtol=0, atol=0)


def test_no_reorder_keeps_program_order_on_each_engine():
    """Without it the scheduler lets VectorE run the second chain's first
    step before the first chain's dependent ones; with
    directives=ncc.no_reorder() the body's instructions stay in order."""
    def kernel(directives):
        @nki.jit
        def k(x):
            out = nl.ndarray((4,) + x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            a = nl.load(x)
            for i in nl.sequential_range(4, directives=directives):
                y = nisa.tensor_scalar(a, nl.multiply, float(i + 1), engine=nisa.vector_engine)
                y = nisa.tensor_scalar(y, nl.add, 1.0, engine=nisa.vector_engine)
                nl.store(out[i], value=y)
            return out
        return k
    x = np.random.default_rng(2).standard_normal((128, 64)).astype(np.float32)
    order = {}
    for name, d in (("free", None), ("ordered", ncc.no_reorder())):
        got, r = nki.simulate(kernel(d), x)
        np.testing.assert_allclose(got, np.stack([x * (i + 1) + 1 for i in range(4)]), rtol=1e-6)
        # each instruction's text ends with the kernel line that traced it
        order[name] = [int(ln.rsplit(":", 1)[1]) for ln in r.program.splitlines()
                       if ln.strip().startswith("tensor_scalar")]
    mul, add = min(order["ordered"]), max(order["ordered"])
    assert order["ordered"] == [mul, add] * 4
    assert sorted(order["free"]) == sorted(order["ordered"]) and order["free"] != order["ordered"]


def test_nc_matmul_transpose_mode():
    """is_transpose=True: NeuronCore-v3+ transposes bit-exactly in the
    input dtype (the PSUM dst is fp16 here); on NeuronCore-v2 it is an
    ordinary matmul with the identity, fp32 out (traced only: the process
    runs one target)."""
    def k(x):
        out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
        ident = nl.shared_constant(np.identity(x.shape[0], dtype=np.int8), dtype=x.dtype)
        i = nl.load(ident)
        a = nl.load(x)
        dt = x.dtype if nisa.get_nc_version() >= nisa.nc_version.gen3 else nl.float32
        ps = nl.ndarray((x.shape[1], x.shape[0]), dtype=dt, buffer=nl.psum)
        ps[...] = nisa.nc_matmul(a, i, is_transpose=True)
        nl.store(out, value=nl.copy(ps, dtype=x.dtype))
        return out
    x = np.random.default_rng(3).standard_normal((64, 32)).astype(np.float16)
    got, r = nki.simulate(nki.jit(k, target="trn2"), x)
    np.testing.assert_array_equal(got, x.T)
    assert "nc_transpose" in r.program and "multiply_moving" not in r.program
    program = nki.Kernel(k, "trn1").trace(x)[0]
    assert "multiply_moving" in program and "nc_transpose" not in program


def test_accumulating_into_a_fresh_psum_tile_starts_a_group():
    """`res[0] += nisa.nc_matmul(...)` into a tile nothing wrote
    (allocated_fused_linear.py) overwrites first, then adds -- never adds
    onto what an earlier tile left in the bank."""
    @nki.jit
    def k(a, b):
        out = nl.ndarray((2, a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        sa, sb = nl.load(a), nl.load(b)
        for r in nl.affine_range(2):
            res = nl.ndarray((1, nl.par_dim(a.shape[1]), b.shape[1]), dtype=nl.float32,
                             buffer=ncc.psum.mod_alloc(base_bank=7, num_bank_tiles=(1,)))
            for m in nl.affine_range(3):
                res[0] += nisa.nc_matmul(sa, sb)
            nl.store(out[r], value=nl.copy(res[0]))
        return out
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((64, 16)).astype(np.float32)
    np.testing.assert_allclose(k(a, b), np.stack([3 * (a.T @ b)] * 2), rtol=1e-4, atol=1e-4)


def _psum_spill_copies(program):
    return [ln for ln in program.splitlines() if ln.strip().startswith("tensor_copy") and "psum:" in ln]


def test_psum_tiles_beyond_the_banks_spill_to_sbuf_and_come_back():
    """The attention tutorial's v3: every Q.K^T block of a row of tiles
    stays in PSUM until the softmax reads it -- more than its 8 banks.  As
    the compiler does, tiles go to SBUF (a VectorE copy in their dtype,
    exact) and come back before their next use."""
    @nki.jit
    def k(q, kt):
        n = kt.shape[1] // 128
        out = nl.ndarray((n, 128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        sq, sk = nl.load(q), nl.load(kt)
        qk = nl.ndarray((n, nl.par_dim(128), 128), dtype=nl.float32, buffer=nl.psum)
        for j in nl.affine_range(n):
            qk[j] = nisa.nc_matmul(sq, sk[:, nl.ds(j * 128, 128)])
        for j in nl.affine_range(n):
            nl.store(out[j], value=nl.exp(qk[j]))
        return out
    rng = np.random.default_rng(7)
    q, kt = rng.standard_normal((64, 128)).astype(np.float32) * .1, rng.standard_normal((64, 12 * 128)).astype(np.float32) * .1
    got, r = nki.simulate(k, q, kt)
    want = np.stack([np.exp(q.T @ kt[:, j * 128:(j + 1) * 128]) for j in range(12)])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert len(_psum_spill_copies(r.program)) >= 2 * 4      # at least 4 of the 12 went out and came back


def test_an_accumulation_group_continues_across_a_psum_spill():
    """Ten accumulators over three K steps (nc_matmul(dst, ...): NKI's
    accumulation groups) with eight banks: a tile spilled in the middle of
    its group adds its later matmuls onto the partial sum it comes back
    with -- not an overwrite."""
    @nki.jit
    def k(a, b):
        out = nl.ndarray((10, a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        accs = [nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum) for _ in range(10)]
        for s in range(3):
            sa = nl.load(a[s * 32:(s + 1) * 32])
            sb = nl.load(b[s * 32:(s + 1) * 32])
            for j in range(10):
                nisa.nc_matmul(accs[j], sa, sb)
        for j in range(10):
            nl.store(out[j], value=nl.copy(accs[j]))
        return out
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((96, 64)).astype(np.float32), rng.standard_normal((96, 128)).astype(np.float32)
    got, r = nki.simulate(k, a, b)
    np.testing.assert_allclose(got, np.stack([a.T @ b] * 10), rtol=1e-4, atol=1e-4)
    assert _psum_spill_copies(r.program)


# --------------------------------------------------- masks on compute

@pytest.mark.parametrize("n", [1, 127, 128, 129, 255, 257])
def test_compute_masks_cut_the_instruction_to_the_positions_kept(n):
    """mask= on compute (nki-samples' older kernels: a partial last tile):
    the instruction computes and writes only what the mask keeps -- dst
    keeps its values elsewhere; free-axis masks too."""
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:128, 0:x.shape[1]]
        for i in nl.affine_range((x.shape[0] + 127) // 128):
            rows = (i * 128 + ip < x.shape[0])
            t = nl.load(x[i * 128 + ip, jf], mask=rows)
            acc = nl.full((128, x.shape[1]), -1.0, dtype=x.dtype)
            acc[ip, jf] = nl.exp(t, mask=rows & (jf < 5))                      # returning form
            nisa.tensor_scalar(dst=acc[ip, jf], data=acc[ip, jf], op0=nl.add, operand0=1.0,
                               mask=rows & (jf >= 3))                           # dst form
            nl.store(out[i * 128 + ip, jf], value=acc, mask=rows)
        return out
    x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
    want = np.full_like(x, -1.0)
    want[:, :5] = np.exp(x[:, :5])
    want[:, 3:] += 1.0
    np.testing.assert_allclose(k(x), want, rtol=1e-5, atol=1e-6)


def test_a_masked_reduction_reduces_only_what_the_mask_keeps():
    @nki.jit
    def k(x):
        out = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
        r = nl.full((x.shape[0], 1), 0.0, dtype=x.dtype)
        r[...] = nl.max(nl.load(x), axis=1, keepdims=True, mask=(jf < 6))
        nl.store(out, value=r)
        return out
    x = np.random.default_rng(1).standard_normal((64, 16)).astype(np.float32)
    np.testing.assert_allclose(k(x), x[:, :6].max(axis=1, keepdims=True), rtol=1e-6)


def test_a_masked_reduction_into_dst_reduces_only_what_the_mask_keeps():
    """nisa.tensor_reduce(dst=[P, 1], data=[P, F], mask=(jf < 6)): the box is
    the data's (the iteration space), not dst's; TensorE calls with an index
    mask are refused rather than guessed at."""
    @nki.jit
    def k(x):
        out = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
        r = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=nl.add, data=nl.load(x), axis=1, mask=(jf < 6))
        nl.store(out, value=r)
        return out
    x = np.random.default_rng(2).standard_normal((64, 16)).astype(np.float32)
    np.testing.assert_allclose(k(x), x[:, :6].sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)

    @nki.jit
    def mm(a):
        out = nl.ndarray((a.shape[1], a.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:a.shape[1], 0:a.shape[1]]
        t = nl.load(a)
        nl.store(out, value=nl.copy(nisa.nc_matmul(t, t, mask=(ip < 8))))
        return out
    with pytest.raises(nki.NKIError, match="nc_matmul with a mask on index expressions is not supported"):
        mm(np.zeros((32, 16), np.float32))


def test_masked_and_assigned_results_stay_usable_as_values():
    """A masked reduction used as a value has the reduction's shape; a
    matmul result assigned into a PSUM tile and used again reads that
    tile; nl.where refuses an index mask rather than ignoring it."""
    @nki.jit
    def k(x, a):
        out = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
        mm = nl.ndarray((a.shape[1], a.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
        r = nl.max(nl.load(x), axis=1, keepdims=True, mask=(ip < 32) & (jf < 6))
        nl.store(out, value=nl.multiply(r, 2.0), mask=(nl.arange(x.shape[0])[:, None] < 32))
        t = nl.load(a)
        ps = nl.ndarray((a.shape[1], a.shape[1]), dtype=nl.float32, buffer=nl.psum)
        res = nisa.nc_matmul(t, t)
        ps[...] = res
        nl.store(mm, value=nl.copy(res))
        return out, mm
    rng = np.random.default_rng(3)
    x, a = rng.standard_normal((64, 16)).astype(np.float32), rng.standard_normal((32, 16)).astype(np.float32)
    got, mm = k(x, a)
    np.testing.assert_allclose(got[:32], 2 * x[:32, :6].max(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(mm, a.T @ a, rtol=1e-4, atol=1e-4)

    @nki.jit
    def w(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
        t = nl.load(x)
        nl.store(out, value=nl.where(t, t, 0.0, mask=(ip < 4)))
        return out
    with pytest.raises(nki.NKIError, match="where with a mask on index expressions is not supported"):
        w(x)
