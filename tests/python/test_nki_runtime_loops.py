"""Run-time loops in NKI kernels (runtime_loops.py): nl.dynamic_range with a
bound read on the device, and `while reg:` on a register loaded with
nisa.register_load -- "The NKI compiler compiles such dynamic looping
constructs to branching instructions executed by engine sequencers" (SDK
nki.isa.register_alloc).  The body is traced once; the iterations run on
the device, as many as the data says."""
import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl
from neuronsim_nki.tracer import NKIError

RNG = np.random.default_rng(7)


def count_tile(n):
    """The [1, 1] int32 count n copied into SBUF (inside a kernel)."""
    c = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=n)
    return c


def loaded(n):
    """A register holding the count n, read on the device (inside a kernel)."""
    r = nisa.register_alloc()
    nisa.register_load(r, count_tile(n))
    return r


@nki.jit
def repeat_add(a, n):
    """acc = n * a: a loop of n[0, 0] iterations, each loading a."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    r = loaded(n)
    acc = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(acc, value=0.0)
    for _ in nl.dynamic_range(0, r, 1):
        t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_dynamic_range_runs_as_many_iterations_as_the_register_says(n):
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    out = repeat_add(a, np.array([[n]], np.int32))
    np.testing.assert_allclose(out, n * a, rtol=1e-6, atol=1e-6)


def test_one_program_serves_every_trip_count():
    """The trip count is data: the second call reuses the first's program."""
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    before = repeat_add.traces_made
    repeat_add(a, np.array([[3]], np.int32))
    repeat_add(a, np.array([[4]], np.int32))
    assert repeat_add.traces_made - before <= 1
    prog = repeat_add.trace(a, np.array([[3]], np.int32))[0]
    assert "branch to=" in prog and "fence sems=" in prog


@nki.jit
def row_blocks_plus_one(a, n):
    """out[rows of block i] = a[rows of block i] + 1 for the first n[0, 0]
    blocks of 128 rows, the block found at run time (scalar_offset= an SBUF
    value the loop advances), as nki-library's dynamic_elementwise_add."""
    m, h = a.shape
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    r = loaded(n)
    start = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=start, value=0)
    for _ in nl.dynamic_range(r):
        t = nl.ndarray((128, h), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a.ap(pattern=[[h, 128], [1, h]], offset=0, scalar_offset=start, indirect_dim=0))
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out.ap(pattern=[[h, 128], [1, h]], offset=0, scalar_offset=start, indirect_dim=0), src=t)
        nisa.tensor_scalar(dst=start, data=start, op0=nl.add, operand0=128)
    return out


@pytest.mark.parametrize("n", [0, 1, 3])
def test_loop_moves_its_dma_by_a_value_it_advances(n):
    a = RNG.standard_normal((384, 32)).astype(np.float32)
    out = row_blocks_plus_one(a, np.array([[n]], np.int32))
    np.testing.assert_allclose(out[:128 * n], a[:128 * n] + 1, rtol=1e-6)


@nki.jit
def count_down(a, n):
    """`while reg:` as nki-library's MoE kernels write it: acc += a while the
    condition tile, decremented in the body and loaded again, is non-zero."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    cond = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=cond, src=n)
    acc = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(acc, value=0.0)
    t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    reg = nisa.register_alloc()
    nisa.register_load(reg, cond)
    while reg:
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
        nisa.tensor_scalar(dst=cond, data=cond, op0=nl.subtract, operand0=1)
        nisa.register_load(reg, cond)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("n", [0, 1, 4])
def test_while_on_a_loaded_register(n):
    a = RNG.standard_normal((64, 16)).astype(np.float32)
    np.testing.assert_allclose(count_down(a, np.array([[n]], np.int32)), n * a, rtol=1e-6, atol=1e-6)


def test_loop_programs_have_no_races():
    a = RNG.standard_normal((384, 32)).astype(np.float32)
    out, _ = row_blocks_plus_one.simulate(a, np.array([[2]], np.int32), check_races=True)
    np.testing.assert_allclose(out[:256], a[:256] + 1, rtol=1e-6)


def test_cycles_grow_with_iterations_and_repeat_exactly():
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    lat = [repeat_add.simulate(a, np.array([[k]], np.int32))[1].latency_us for k in (1, 2, 4, 4)]
    assert lat[0] < lat[1] < lat[2] and lat[2] == lat[3]


def test_register_used_as_an_if_is_refused():
    @nki.jit
    def k(n):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        c = count_tile(n)
        reg = nisa.register_alloc()
        nisa.register_load(reg, c)
        if reg:
            nisa.memset(dst=c, value=1)
        nisa.dma_copy(dst=out, src=c)
        return out
    with pytest.raises(NKIError, match="only `while reg:` loops"):
        k(np.array([[1]], np.int32))


def test_leaving_a_run_time_loop_early_is_refused():
    @nki.jit
    def k(a, n):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        c = count_tile(n)
        reg = nisa.register_alloc()
        nisa.register_load(reg, c)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        for _ in nl.dynamic_range(reg):
            nisa.dma_copy(dst=t, src=a)
            break
        nisa.dma_copy(dst=out, src=t)
        return out
    with pytest.raises(NKIError, match="left before its condition was tested again"):
        k(np.ones((4, 4), np.float32), np.array([[1]], np.int32))


def test_a_loaded_register_has_no_value_while_tracing():
    @nki.jit
    def k(n):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        c = count_tile(n)
        reg = nisa.register_alloc()
        nisa.register_load(reg, c)
        for _ in range(reg):
            pass
        return out
    with pytest.raises(NKIError, match="has no value while tracing"):
        k(np.array([[1]], np.int32))


def test_static_bounds_are_a_static_range():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        acc = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(acc, value=0.0)
        t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        for _ in nl.dynamic_range(3):
            nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
        nisa.dma_copy(dst=out, src=acc)
        return out
    a = RNG.standard_normal((8, 8)).astype(np.float32)
    np.testing.assert_allclose(k(a), 3 * a, rtol=1e-6)
    assert "branch" not in k.trace(a)[0]


def test_register_store_of_a_loaded_register():
    @nki.jit
    def k(n):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        c = count_tile(n)
        reg = nisa.register_alloc(c)          # register_alloc of a tensor loads it
        r2 = nisa.register_alloc(0)
        nisa.register_move(r2, reg)
        d = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.register_store(d, r2)
        nisa.dma_copy(dst=out, src=d)
        return out
    assert int(k(np.array([[-123456]], np.int32))[0, 0]) == -123456


@nki.jit
def while_loop_halving(a, n):
    """nl.while_loop on a loaded register: the body returns the next condition."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    c = count_tile(n)
    acc = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=a)
    r = nisa.register_alloc()
    nisa.register_load(r, c)

    def body(reg):
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.multiply, operand0=0.5)
        nisa.tensor_scalar(dst=c, data=c, op0=nl.subtract, operand0=1)
        nxt = nisa.register_alloc()
        nisa.register_load(nxt, c)
        return nxt
    nl.while_loop(r, body)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("n", [0, 3])
def test_nl_while_loop_on_a_loaded_register(n):
    a = RNG.standard_normal((32, 8)).astype(np.float32)
    np.testing.assert_allclose(while_loop_halving(a, np.array([[n]], np.int32)), a * 0.5 ** n, rtol=1e-6)


@nki.jit
def fori_rows(a, n):
    """nl.fori_loop with a loaded upper bound: body_fun(i), i an NkiScalar
    moving the DMAs (row i of a into row i of out, doubled)."""
    m, h = a.shape
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    c = count_tile(n)
    r = nisa.register_alloc()
    nisa.register_load(r, c)

    def body(i):
        t = nl.ndarray((1, h), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a.ap(pattern=[[h, 1], [1, h]], offset=0, scalar_offset=i, indirect_dim=0))
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out.ap(pattern=[[h, 1], [1, h]], offset=0, scalar_offset=i, indirect_dim=0), src=t)
    nl.fori_loop(1, r, body)
    return out


def test_nl_fori_loop_with_a_loaded_bound():
    a = RNG.standard_normal((6, 16)).astype(np.float32)
    out = fori_rows(a, np.array([[5]], np.int32))
    np.testing.assert_allclose(out[1:5], 2 * a[1:5], rtol=1e-6)


@nki.jit
def lnc_exchange(a, n):
    """LNC=2, both cores loop n times: each adds its half of a into acc,
    publishes acc in shared HBM, meets the other core (core_barrier), adds
    the other core's published acc into tot, and meets it again before the
    next write.  out[my rows] = (1 + 2 + .. + n) * a[the other core's rows]
    only if every iteration's barriers hold."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    shared = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    rows, other = slice(me * 128, (me + 1) * 128), slice((1 - me) * 128, (2 - me) * 128)
    c = count_tile(n)
    r = nisa.register_alloc(c)
    mine = nl.ndarray((128, a.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[rows, :])
    acc = nl.ndarray((128, a.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    tot = nl.ndarray((128, a.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(acc, value=0.0)
    nisa.memset(tot, value=0.0)
    for _ in nl.dynamic_range(r):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=mine, op=nl.add)
        nisa.dma_copy(dst=shared[rows, :], src=acc)
        nisa.core_barrier(data=shared, cores=(0, 1))
        t = nl.ndarray((128, a.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=shared[other, :])
        nisa.tensor_tensor(dst=tot, data1=tot, data2=t, op=nl.add)
        nisa.core_barrier(data=shared, cores=(0, 1))
    nisa.core_barrier(data=shared, cores=(0, 1))     # after the loop the barrier count goes on
    nisa.dma_copy(dst=out[rows, :], src=tot)
    return out


@pytest.mark.parametrize("n", [0, 1, 3])
def test_core_barriers_inside_a_run_time_loop(n):
    a = RNG.standard_normal((256, 32)).astype(np.float32)
    out = lnc_exchange[2](a, np.array([[n]], np.int32))
    k = n * (n + 1) / 2
    np.testing.assert_allclose(out[:128], k * a[128:], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[128:], k * a[:128], rtol=1e-5, atol=1e-5)


@nki.jit
def lnc_ping_pong(a, n):
    """LNC=2, n iterations of: acc += what the other core sent last, then
    send acc (nisa.sendrecv, one pipe).  After n iterations core c holds
    acc_n, with acc_k = a_c + acc_{k-1} of the other core: checked against
    the same recurrence in NumPy."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    rows = slice(me * 128, (me + 1) * 128)
    r = loaded(n)
    mine = nl.ndarray((128, a.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[rows, :])
    acc = nl.ndarray((128, a.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    got = nl.ndarray((128, a.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(got, value=0.0)
    for _ in nl.dynamic_range(r):
        nisa.tensor_tensor(dst=acc, data1=mine, data2=got, op=nl.add)
        nisa.sendrecv(src=acc, dst=got, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    nisa.sendrecv(src=mine, dst=acc, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)   # after the loop
    nisa.tensor_tensor(dst=acc, data1=acc, data2=got, op=nl.add)
    nisa.dma_copy(dst=out[rows, :], src=acc)
    return out


@pytest.mark.parametrize("n", [0, 1, 4])
def test_sendrecv_inside_a_run_time_loop(n):
    a = RNG.standard_normal((256, 16)).astype(np.float32)
    halves = [a[:128], a[128:]]
    got = [np.zeros_like(halves[0]), np.zeros_like(halves[0])]
    for _ in range(n):
        acc = [halves[c] + got[c] for c in (0, 1)]
        got = [acc[1], acc[0]]
    want = np.concatenate([halves[1] + got[0], halves[0] + got[1]])
    np.testing.assert_allclose(lnc_ping_pong[2](a, np.array([[n]], np.int32)), want, rtol=1e-5, atol=1e-5)


@nki.jit
def nested_loops(a, n, m):
    """A run-time loop inside another: acc = n * m * a, the inner bound read
    on the device each outer iteration."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ro = loaded(n)
    mt = count_tile(m)
    acc = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(acc, value=0.0)
    t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    for _ in nl.dynamic_range(ro):
        ri = nisa.register_alloc()
        nisa.register_load(ri, mt)
        for _ in nl.dynamic_range(ri):
            nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("n, m", [(0, 3), (2, 0), (2, 3)])
def test_nested_run_time_loops(n, m):
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    out = nested_loops(a, np.array([[n]], np.int32), np.array([[m]], np.int32))
    np.testing.assert_allclose(out, n * m * a, rtol=1e-5, atol=1e-6)


def test_scalar_offset_a_loaded_register():
    """A loaded register as scalar_offset= moves the DMA at run time (SyncE's copy)."""
    @nki.jit
    def k(a, n):
        out = nl.ndarray((1, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
        r = loaded(n)
        t = nl.ndarray((1, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a.ap(pattern=[[a.shape[1], 1], [1, a.shape[1]]], offset=0, scalar_offset=r,
                                      indirect_dim=0))
        nisa.dma_copy(dst=out, src=t)
        return out
    a = RNG.standard_normal((6, 8)).astype(np.float32)
    for row in (0, 4):
        np.testing.assert_array_equal(k(a, np.array([[row]], np.int32)), a[row:row + 1])


@nki.jit
def count_down_rebinding(a, n):
    """`while reg:` whose body binds the name to a new register each time."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    cond = count_tile(n)
    acc = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(acc, value=0.0)
    t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    reg = nisa.register_alloc(cond)
    while reg:
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
        nisa.tensor_scalar(dst=cond, data=cond, op0=nl.subtract, operand0=1)
        reg = nisa.register_alloc(cond)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("n", [0, 3])
def test_while_whose_body_rebinds_its_register(n):
    a = RNG.standard_normal((8, 8)).astype(np.float32)
    np.testing.assert_allclose(count_down_rebinding(a, np.array([[n]], np.int32)), n * a, rtol=1e-6, atol=1e-6)


def test_comparing_a_loaded_register_is_refused():
    @nki.jit
    def k(n):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        reg = loaded(n)
        while reg != 0:
            pass
        return out
    with pytest.raises(NKIError, match="comparing a register loaded from device memory"):
        k(np.array([[1]], np.int32))


def test_code_after_a_loop_has_no_false_races():
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    out, _ = repeat_add.simulate(a, np.array([[2]], np.int32), check_races=True)
    np.testing.assert_allclose(out, 2 * a, rtol=1e-6)
