"""nki.collectives across ranks (simulate_ranks: rank r on core r of one
chip), each against NumPy.  The kernels are written as the nki-library's
collectives tests write theirs (src / dst in shared_hbm, ReplicaGroup of
lists).  Sources: SDK nki/api/nki/collectives/__init__.py,
nki-library test/integration/nkilib/experimental/collectives/test_collectives.py."""
import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.collectives as ncc
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl
from neuronsim_nki.collectives import ReplicaGroup


def _inputs(n, shape, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(n)]


def _hbm_kernel(call, out_shape=None):
    @nki.jit
    def k(input, replica_group):
        src = nl.ndarray(input.shape, dtype=input.dtype, buffer=nl.shared_hbm, name="src")
        shape = out_shape(input.shape) if out_shape else input.shape
        dst = nl.ndarray(shape, dtype=input.dtype, buffer=nl.shared_hbm, name="dst")
        out = nl.ndarray(shape, dtype=input.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=src, src=input)
        call(src, dst, replica_group)
        nisa.dma_copy(dst=out, src=dst)
        return out
    return k


@pytest.mark.parametrize("op,ref", [(nl.add, np.add), (nl.maximum, np.maximum), (nl.minimum, np.minimum)])
def test_all_reduce_gives_every_rank_the_same_reduction(op, ref):
    k = _hbm_kernel(lambda s, d, g: ncc.all_reduce(dsts=[d], srcs=[s], op=op, replica_group=g))
    xs = _inputs(4, (256, 300))
    outs, r = nki.simulate_ranks(k, 4, nki.per_rank(xs), ReplicaGroup([[0, 1, 2, 3]]))
    want = ref(ref(ref(xs[0], xs[1]), xs[2]), xs[3])
    for o in outs:
        np.testing.assert_array_equal(o, want)      # rank order, bit-identical on every rank
    assert len(r.cores) == 4 and all(c["total_ps"] > 0 for c in r.cores)


def test_all_reduce_within_each_replica_group():
    k = _hbm_kernel(lambda s, d, g: ncc.all_reduce(dsts=[d], srcs=[s], op=nl.add, replica_group=g))
    xs = _inputs(4, (128, 64), seed=1)
    outs, _ = nki.simulate_ranks(k, 4, nki.per_rank(xs), ReplicaGroup([[0, 2], [1, 3]]))
    np.testing.assert_allclose(outs[0], xs[0] + xs[2], rtol=1e-6)
    np.testing.assert_allclose(outs[2], xs[0] + xs[2], rtol=1e-6)
    np.testing.assert_allclose(outs[1], xs[1] + xs[3], rtol=1e-6)


def test_all_gather_concatenates_in_rank_order():
    k = _hbm_kernel(lambda s, d, g: ncc.all_gather(dsts=[d], srcs=[s], replica_group=g, collective_dim=0),
                    lambda sh: (sh[0] * 2, sh[1]))
    xs = _inputs(2, (64, 32), seed=2)
    outs, _ = nki.simulate_ranks(k, 2, nki.per_rank(xs), ReplicaGroup([[0, 1]]))
    for o in outs:
        np.testing.assert_array_equal(o, np.vstack(xs))


def test_reduce_scatter_gives_each_rank_its_chunk_of_the_sum():
    k = _hbm_kernel(lambda s, d, g: ncc.reduce_scatter(dsts=[d], srcs=[s], op=nl.add, replica_group=g,
                                                         collective_dim=0),
                    lambda sh: (sh[0] // 2, sh[1]))
    xs = _inputs(2, (256, 48), seed=3)
    outs, _ = nki.simulate_ranks(k, 2, nki.per_rank(xs), ReplicaGroup([[0, 1]]))
    total = xs[0] + xs[1]
    np.testing.assert_allclose(outs[0], total[:128], rtol=1e-6)
    np.testing.assert_allclose(outs[1], total[128:], rtol=1e-6)


def test_all_to_all_exchanges_chunks():
    k = _hbm_kernel(lambda s, d, g: ncc.all_to_all(dsts=[d], srcs=[s], replica_group=g, collective_dim=0))
    xs = _inputs(3, (6, 5), seed=4)
    outs, _ = nki.simulate_ranks(k, 3, nki.per_rank(xs), ReplicaGroup([[0, 1, 2]]))
    for me in range(3):
        want = np.vstack([xs[j][2 * me:2 * me + 2] for j in range(3)])
        np.testing.assert_array_equal(outs[me], want)


def test_collective_permute_and_the_implicit_ring():
    pairs = [(0, 1), (1, 2), (2, 0)]
    k = _hbm_kernel(lambda s, d, g: ncc.collective_permute(srcs=[s], dsts=[d], source_target_pairs=pairs))
    xs = _inputs(3, (128, 16), seed=5)
    outs, _ = nki.simulate_ranks(k, 3, nki.per_rank(xs), None)
    for a, b in pairs:
        np.testing.assert_array_equal(outs[b], xs[a])
    ring = _hbm_kernel(lambda s, d, g: ncc.collective_permute_implicit(srcs_by_channel=[[s]], dsts_by_channel=[[d]],
                                                                      replica_group=g))
    outs, _ = nki.simulate_ranks(ring, 3, nki.per_rank(xs), ReplicaGroup([[0, 1, 2]]))
    for me in range(3):
        np.testing.assert_array_equal(outs[me], xs[(me - 1) % 3])


def test_ring_permute_between_sbuf_tiles():
    """nkilib's fgcc / fg_allgather pass SBUF tiles to
    collective_permute_implicit (SDK: NkiTensor sources and destinations)."""
    @nki.jit
    def k(a, replica_group):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        src = nl.load(a)
        dst = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        ncc.collective_permute_implicit(srcs_by_channel=[[src]], dsts_by_channel=[[dst]], replica_group=replica_group)
        nl.store(out, value=dst)
        return out
    xs = _inputs(4, (128, 16), seed=9)
    outs, _ = nki.simulate_ranks(k, 4, nki.per_rank(xs), ReplicaGroup([[0, 1, 2, 3]]))
    for me in range(4):
        np.testing.assert_array_equal(outs[me], xs[(me - 1) % 4])


def test_ring_reduce_and_the_rank_it_is_processing():
    @nki.jit
    def k(a, b, replica_group):
        s0 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        s1 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        d = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=s0, src=a)
        nisa.dma_copy(dst=s1, src=b)
        ncc.collective_permute_implicit_reduce(srcs0_by_channel=[[s0]], srcs1_by_channel=[[s1]],
                                               dsts_by_channel=[[d]], replica_group=replica_group, op=nl.add)
        who = ncc.collective_permute_implicit_current_processing_rank_id(iteration_id=1,
                                                                         replica_group=replica_group)
        nl.store(out, value=nl.add(nl.load(d), float(int(who))))
        return out
    xs, ys = _inputs(4, (128, 8), seed=6), _inputs(4, (128, 8), seed=7)
    g = ReplicaGroup([[0, 1, 2, 3]])
    outs, _ = nki.simulate_ranks(k, 4, nki.per_rank(xs), nki.per_rank(ys), g)
    for me in range(4):
        prev = (me - 1) % 4
        np.testing.assert_allclose(outs[me], xs[prev] + ys[prev] + prev, rtol=1e-6)


def test_rank_id_selects_the_rank_slice_through_scalar_offset():
    @nki.jit
    def rank_id_kernel(in_tensor):
        _, H, W = in_tensor.shape
        out = nl.ndarray((H, W), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
        rank_id = ncc.rank_id()
        nisa.dma_copy(dst=out, src=in_tensor.ap(pattern=[[W, H], [1, W]], scalar_offset=rank_id, indirect_dim=0))
        return out
    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    outs, _ = nki.simulate_ranks(rank_id_kernel, 2, x)
    np.testing.assert_array_equal(outs[0], x[0])
    np.testing.assert_array_equal(outs[1], x[1])


def test_sbuf_all_gather_along_the_free_dimension():
    @nki.jit
    def k(a, replica_group):
        out = nl.ndarray((a.shape[0], 2 * a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        got = nl.ndarray((a.shape[0], 2 * a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        ncc.all_gather(srcs=[t], dsts=[got], replica_group=replica_group, collective_dim=1)
        nl.store(out, value=got)
        return out
    xs = _inputs(2, (128, 40), seed=8)
    outs, _ = nki.simulate_ranks(k, 2, nki.per_rank(xs), ReplicaGroup([[0, 1]]))
    for o in outs:
        np.testing.assert_array_equal(o, np.hstack(xs))


def test_collective_misuse_is_refused_by_name():
    k = _hbm_kernel(lambda s, d, g: ncc.all_reduce(dsts=[d], srcs=[s], op=nl.add, replica_group=g))
    x = np.ones((128, 8), np.float32)
    with pytest.raises(nki.NKIError, match="simulate_ranks"):
        k(x, ReplicaGroup([[0]]))
    with pytest.raises(nki.NKIError, match="names rank 4"):
        nki.simulate_ranks(k, 2, x, ReplicaGroup([[0, 4]]))
    with pytest.raises(nki.NKIError, match="9 NeuronCores, and a trn2 chip has 8"):
        nki.simulate_ranks(k, 9, x, ReplicaGroup([list(range(9))]))
    with pytest.raises(nki.NKIError, match="5 ranks of LNC=2 need 10 NeuronCores"):
        nki.simulate_ranks(k[2], 5, x, ReplicaGroup([list(range(5))]))
    with pytest.raises(nki.NKIError, match="other than an LNC=2 launch"):
        nki.simulate_ranks(k[3], 2, x, ReplicaGroup([[0, 1]]))
    with pytest.raises(nki.NKIError, match="run time"):
        ncc.all_gather_v([x], [x], None, None)

    @nki.jit
    def uneven(a, replica_group):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        if int(ncc.rank_id()) == 0:
            ncc.all_reduce(dsts=[out], srcs=[a], op=nl.add, replica_group=replica_group)
        return out
    with pytest.raises(nki.NKIError, match="different collective calls"):
        nki.simulate_ranks(uneven, 2, x, ReplicaGroup([[0, 1]]))


def test_rank_launches_are_deterministic():
    k = _hbm_kernel(lambda s, d, g: ncc.all_reduce(dsts=[d], srcs=[s], op=nl.add, replica_group=g))
    xs = _inputs(2, (128, 64), seed=9)
    a = nki.simulate_ranks(k, 2, nki.per_rank(xs), ReplicaGroup([[0, 1]]))
    b = nki.simulate_ranks(k, 2, nki.per_rank(xs), ReplicaGroup([[0, 1]]))
    for x, y in zip(a[0], b[0]):
        np.testing.assert_array_equal(x, y)
    assert [c["total_ps"] for c in a[1].cores] == [c["total_ps"] for c in b[1].cores]


def _lnc2_sb2sb_kernel():
    """transformer_tkg's _sb2sb_all_reduce_gather: each core all-reduces its
    own SBUF shard with the same core of the other ranks, then the pair
    swaps shards (sendrecv) so both hold the whole reduced tile."""
    @nki.jit
    def k(x, replica_group):
        prg, half = nl.program_id(0), x.shape[1] // 2
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        mine = nl.ndarray((x.shape[0], half), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=mine, src=x[:, nl.ds(prg * half, half)])
        reduced = nl.ndarray(mine.shape, dtype=x.dtype, buffer=nl.sbuf)
        ncc.all_reduce(dsts=[reduced], srcs=[mine], op=nl.add, replica_group=replica_group)
        whole = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=whole[:, nl.ds(prg * half, half)], src=reduced)
        nisa.sendrecv(src=reduced, dst=whole[:, nl.ds((1 - prg) * half, half)], send_to_rank=1 - prg,
                      recv_from_rank=1 - prg, pipe_id=0)
        rows = x.shape[0] // 2
        nisa.dma_copy(dst=out[nl.ds(prg * rows, rows), :], src=whole[nl.ds(prg * rows, rows), :])
        return out
    return k


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_lnc2_ranks_reduce_per_core_shards_and_swap_them(ranks):
    k = _lnc2_sb2sb_kernel()
    xs = _inputs(ranks, (128, 96), seed=20 + ranks)
    outs, r = nki.simulate_ranks(k[2], ranks, nki.per_rank(xs), ReplicaGroup([list(range(ranks))]))
    want = xs[0].copy()
    for x in xs[1:]:
        want = want + x
    for o in outs:
        np.testing.assert_allclose(o, want, rtol=1e-6)
    assert len(r.cores) == len(r.programs) == 2 * ranks
    assert all("remote rank=" not in p or ranks > 1 for p in r.programs)
    # core c of rank r signals core c of the other ranks: runs 2q + c
    for run, p in enumerate(r.programs):
        signalled = {int(w.split("=")[1]) for w in p.split() if w.startswith("rank=")}
        assert signalled == {2 * q + run % 2 for q in range(ranks) if q != run // 2}


def test_lnc2_ranks_all_reduce_a_shared_hbm_tensor_on_both_cores():
    """transformer_tkg's HBM path: both cores of a rank write halves of one
    shared HBM tensor, meet at a core barrier, and both all-reduce it; the
    other ranks' partial sums come in per core and the rank's result is
    whole."""
    @nki.jit
    def k(x, replica_group):
        prg, rows = nl.program_id(0), x.shape[0] // 2
        part = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="part")
        red = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="red")
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[nl.ds(prg * rows, rows), :])
        nisa.activation(dst=t, data=t, op=nl.exp)
        nisa.dma_copy(dst=part[nl.ds(prg * rows, rows), :], src=t)
        nisa.core_barrier(data=part, cores=(0, 1))
        ncc.all_reduce(dsts=[red], srcs=[part], op=nl.add, replica_group=replica_group)
        nisa.dma_copy(dst=t, src=red[nl.ds(prg * rows, rows), :])
        nisa.dma_copy(dst=out[nl.ds(prg * rows, rows), :], src=t)
        return out
    xs = _inputs(3, (256, 40), seed=30)
    outs, r = nki.simulate_ranks(k[2], 3, nki.per_rank(xs), ReplicaGroup([[0, 1, 2]]))
    want = sum(np.exp(x) for x in xs)
    for o in outs:
        np.testing.assert_allclose(o, want, rtol=2e-6)
    # the same program and inputs: identical values and cycles
    outs2, r2 = nki.simulate_ranks(k[2], 3, nki.per_rank(xs), ReplicaGroup([[0, 1, 2]]))
    assert [c["total_ps"] for c in r.cores] == [c["total_ps"] for c in r2.cores]
    assert all(np.array_equal(a, b) for a, b in zip(outs, outs2))


def test_ranks_update_their_own_arguments_in_place():
    @nki.jit
    def k(a, replica_group):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        red = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        ncc.all_reduce(dsts=[red], srcs=[t], op=nl.add, replica_group=replica_group)
        nisa.dma_copy(dst=a, src=red)
        return a
    xs = _inputs(2, (64, 16), seed=40)
    mine = [x.copy() for x in xs]
    outs, _ = nki.simulate_ranks(k, 2, nki.per_rank(mine), ReplicaGroup([[0, 1]]))
    for o, m in zip(outs, mine):
        assert o is m                          # the rank's own array, updated
        np.testing.assert_allclose(m, xs[0] + xs[1], rtol=1e-6)
    shared = xs[0].copy()
    outs, _ = nki.simulate_ranks(k, 2, shared, ReplicaGroup([[0, 1]]))
    np.testing.assert_array_equal(shared, xs[0])   # one array for both ranks: each result is its own
    for o in outs:
        np.testing.assert_allclose(o, 2 * xs[0], rtol=1e-6)
