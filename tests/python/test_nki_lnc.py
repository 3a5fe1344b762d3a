"""Kernel HBM arrays, LNC=2 launches (kernel[2] on NeuronCore-v3+: two
physical cores as one logical core), nki.isa sendrecv / core_barrier and
nki.collectives -- each against NumPy.  Sources: SDK nki/api/nki/__init__.py
(jit: "The LNC degree can be set at the callsite using bracket syntax:
kernel[lnc](args)"), nki/api/nki/isa/__init__.py (sendrecv, core_barrier),
nki/guides/nki_simulator.rst ("For LNC2 kernels (kernel[2]) ... each with its
own program_id. Input arrays use shared_hbm buffers")."""
import numpy as np
import pytest

import neuronsim_nki as nki
from nsim_util import nki_run
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl


def test_hbm_arrays_a_kernel_keeps_to_itself_live_in_its_scratch():
    @nki.jit
    def k(a):
        tmp = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        priv = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.private_hbm)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(tmp, value=nl.load(a))
        nl.store(priv, value=nl.multiply(nl.load(tmp), 3.0))
        nl.store(out, value=nl.add(nl.load(priv), 1.0))
        return out
    a = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    out, r = nki.simulate(k, a)
    np.testing.assert_allclose(out, a * 3 + 1, rtol=1e-6)
    assert "internal fp32 [128,64]" in r.program


def test_kernel_2_runs_one_instance_on_each_core_of_the_pair():
    @nki.jit
    def add(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        rows = slice(i * 128, (i + 1) * 128)
        nl.store(out[rows, :], value=nl.add(nl.load(a[rows, :]), nl.load(b[rows, :])))
        return out
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((256, 512)).astype(np.float32) for _ in range(2))
    out, r = nki.simulate(add[2], a, b)
    np.testing.assert_allclose(out, a + b, rtol=1e-6)
    assert len(r.cores) == 2 and len(r.programs) == 2
    # each core moves its half: a third of the bytes each way per core
    assert r.cores[0]["hbm_read_bytes"] == r.cores[1]["hbm_read_bytes"] == 2 * 128 * 512 * 4
    # NeuronCore-v2 has no LNC=2: there the two instances run one after another
    # (one runtime per process runs one target, so only the placement is checked)
    from neuronsim_nki import lnc
    assert lnc.is_pair("trn2", (2,)) and not lnc.is_pair("trn1", (2,))
    # so do four instances on trn2; the pair takes less than one core doing both halves
    _, r4 = nki.simulate(nki.jit(add.func)[2, 2], np.vstack([a, a]), np.vstack([b, b]))
    assert len(r4.cores) == 1
    _, r2 = nki.simulate(nki.jit(add.func)[1], a[:128], b[:128])
    assert r.latency_us < 2 * r2.latency_us


def test_spmd_dim_over_nc2_splits_instances_by_core():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        rows = slice(i * 128, (i + 1) * 128)
        nl.store(out[rows, :], value=nl.multiply(nl.load(a[rows, :]), float(i + 1)))
        return out
    a = np.ones((512, 8), np.float32)
    out, r = nki.simulate(k[nl.spmd_dim(2, nl.nc(2))], a)
    np.testing.assert_array_equal(out[:, 0], np.repeat([1, 2, 3, 4], 128))
    assert len(r.cores) == 2
    # core 0 ran instances 0 and 2, core 1 ran 1 and 3
    assert r.cores[0]["dma_transfers"] == r.cores[1]["dma_transfers"] == 4


def test_sendrecv_exchanges_tiles_between_the_cores():
    @nki.jit
    def swap(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        me = nl.program_id(0)
        other = 1 - me
        rows = slice(me * 128, (me + 1) * 128)
        mine = nl.load(a[rows, :])
        got = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=mine, dst=got, send_to_rank=other, recv_from_rank=other, pipe_id=0)
        # each core stores what the other sent into its own half
        nl.store(out[rows, :], value=nl.add(got, 1.0))
        return out
    a = np.random.default_rng(2).standard_normal((256, 64)).astype(np.float32)
    out, r = nki.simulate(swap[2], a)
    np.testing.assert_allclose(out[:128], a[128:] + 1, rtol=1e-6)
    np.testing.assert_allclose(out[128:], a[:128] + 1, rtol=1e-6)
    assert "peer" in r.programs[0] and "peer" in r.programs[1]


def test_sendrecv_repeated_on_one_pipe_stays_in_order():
    @nki.jit
    def ring(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        me = nl.program_id(0)
        rows = slice(me * 128, (me + 1) * 128)
        acc = nl.load(a[rows, :])
        for step in range(3):
            got = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
            nisa.sendrecv(src=acc, dst=got, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=1,
                          dma_engine=nisa.dma_engine.gpsimd_dma)
            acc = nl.add(acc, got)
        nl.store(out[rows, :], value=acc)
        return out
    a = np.random.default_rng(3).standard_normal((256, 32)).astype(np.float32)
    x, y = a[:128].astype(np.float64), a[128:].astype(np.float64)
    for _ in range(3):
        x, y = x + y, y + x
    out = ring[2](a)
    np.testing.assert_allclose(out[:128], x, rtol=1e-5)
    np.testing.assert_allclose(out[128:], y, rtol=1e-5)


def test_core_barrier_makes_the_other_cores_hbm_writes_visible():
    @nki.jit
    def halves(a):
        shared = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        me = nl.program_id(0)
        rows = slice(me * 128, (me + 1) * 128)
        nisa.dma_copy(dst=shared[rows, :], src=nl.multiply(nl.load(a[rows, :]), 2.0))
        nisa.core_barrier(data=shared, cores=(0, 1))
        # now read the other core's half
        o = slice((1 - me) * 128, (2 - me) * 128)
        nl.store(out[rows, :], value=nl.load(shared[o, :]))
        return out
    a = np.random.default_rng(4).standard_normal((256, 64)).astype(np.float32)
    out = halves[2](a)
    np.testing.assert_allclose(out[:128], 2 * a[128:], rtol=1e-6)
    np.testing.assert_allclose(out[128:], 2 * a[:128], rtol=1e-6)


def test_peer_operations_outside_an_lnc2_launch_are_refused_by_name():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.core_barrier(data=out, cores=(0, 1))
        nl.store(out, value=nl.load(a))
        return out
    a = np.ones((128, 4), np.float32)
    with pytest.raises(nki.NKIError, match=r"kernel\[2\]"):
        k(a)
    with pytest.raises(nki.NKIError, match="NeuronCore-v3"):
        nki.jit(k.func, target="trn1")[2].trace(a)        # traced only: no trn1 runtime needed
    with pytest.raises(nki.NKIError, match=r"cores=\(0, 2\)"):
        nki.jit(lambda a: nisa.core_barrier(data=a, cores=(0, 2)))[2](a)


def test_a_sendrecv_only_one_core_makes_is_refused_before_it_deadlocks():
    @nki.jit
    def lopsided(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        if nl.program_id(0) == 0:
            nisa.sendrecv(src=t, dst=t, send_to_rank=1, recv_from_rank=1, pipe_id=0)
        nl.store(out, value=t)
        return out
    with pytest.raises(nki.NKIError, match="disagree on their synchronization"):
        lopsided[2](np.ones((128, 4), np.float32))


@nki.jit
def swap(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    rows = slice(me * 128, (me + 1) * 128)
    got = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=nl.load(a[rows, :]), dst=got, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    nl.store(out[rows, :], value=got)
    return out

def test_lnc2_runs_are_deterministic_and_traced_per_core(tmp_path):
    a = np.arange(256 * 16, dtype=np.float32).reshape(256, 16)
    o1, r1 = nki.simulate(swap[2], a, trace=tmp_path / "lnc.pftrace")
    o2, r2 = nki.simulate(swap[2], a)
    np.testing.assert_array_equal(o1, o2)
    np.testing.assert_array_equal(o1, np.vstack([a[128:], a[:128]]))
    assert [c["total_ps"] for c in r1.cores] == [c["total_ps"] for c in r2.cores]
    assert (tmp_path / "lnc.pftrace").stat().st_size > 0


CLI_KERNELS = '''
import numpy as np
import nki, nki.language as nl, nki.isa as nisa, nki.collectives as ncc
from nki.collectives import ReplicaGroup

SWAP_SOURCE
@nki.jit
def allsum(x, replica_group):
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=src, src=x)
    ncc.all_reduce(srcs=[src], dsts=[dst], replica_group=replica_group, op=nl.add)
    nisa.dma_copy(dst=out, src=dst)
    return out

a = np.arange(256 * 8, dtype=np.float32).reshape(256, 8)
o = swap[2](a)
assert (o[:128] == a[128:]).all() and (o[128:] == a[:128]).all()
outs, _ = nki.simulate_ranks(allsum, 2, nki.per_rank([a, 2 * a]), ReplicaGroup([[0, 1]]))
assert all((x == 3 * a).all() for x in outs)
print("lnc ok")
'''


def test_neuronsim_nki_run_takes_lnc2_and_collective_kernels(tmp_path, neuronsim):
    import inspect
    script = tmp_path / "k.py"
    script.write_text(CLI_KERNELS.replace("SWAP_SOURCE", inspect.getsource(swap.func)))
    r = nki_run(neuronsim, script)
    assert "lnc ok" in r.stdout
    # the report has a row per simulated kernel, with its latency and engine activity
    rows = [line for line in r.stdout.splitlines() if line.startswith(("swap", "allsum"))]
    assert len(rows) == 2 and all(float(line.split()[2]) > 0 for line in rows)


def test_sendrecv_lands_where_the_peer_put_its_dst():
    """Each core is traced on its own; a kernel that takes a different path
    on each core (nkilib's sequence-sharded attention TKG) may put its
    sendrecv dst at different SBUF addresses.  The send goes to the peer's."""
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        me = nl.program_id(0)
        rows = slice(me * 128, (me + 1) * 128)
        extra = []
        if me == 1:                       # core 1 holds more tiles first
            extra = [nl.load(a[0:128, :]) for _ in range(3)]
        mine = nl.load(a[rows, :])
        got = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=mine, dst=got, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
        res = nl.add(got, 1.0)
        for x in extra:
            res = nl.add(res, nl.multiply(x, 0.0))
        nl.store(out[rows, :], value=res)
        return out
    a = np.random.default_rng(5).standard_normal((256, 64)).astype(np.float32)
    out, r = nki.simulate(k[2], a)
    np.testing.assert_allclose(out[:128], a[128:] + 1, rtol=1e-6)
    np.testing.assert_allclose(out[128:], a[:128] + 1, rtol=1e-6)
    def send_dst(program):
        """where the core's peer DMA writes (in the other core's SBUF)"""
        lines = program.splitlines()
        desc = next(ln.split("desc=")[1].split()[0] for ln in lines if "dma_copy" in ln and " peer" in ln)
        return next(ln.split(" dst=")[1].split()[0] for ln in lines if ln.startswith(f".dma {desc} "))
    assert send_dst(r.programs[0]) != send_dst(r.programs[1])    # the cores' dst tiles differ
