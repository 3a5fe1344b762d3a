"""nki.collectives: all_reduce, all_gather, reduce_scatter, all_to_all and
the collective permutes across ranks, each rank a NeuronCore of one chip.

A kernel using them is launched over ranks with simulate_ranks(kernel, n,
...): rank r's program is traced with rank_id() = r and runs on core r, all
ranks in one simulated timeline (neuronsim.run_multi), each with its own
arguments and outputs (per_rank([...]) gives each rank its own value).
An LNC=2 launch (simulate_ranks(kernel[2], n, ...)) puts rank r on the
paired cores 2r and 2r + 1; each physical core's collective meets the core
of the same index in the other ranks (nki-library's transformer_tkg: each
core all-reduces its own SBUF shard, or both cores the same shared HBM
tensor), so n ranks of LNC=2 take 2n cores of the chip.

How a collective runs here (ranks on one chip share its HBM): every rank of
the replica group copies its source into its slot of a staging buffer in
HBM, then tells each other rank of the group (a remote semaphore update);
once it has heard from all of them it builds its destination from the
slots -- a DMA for the gathers and permutes, loads and VectorE arithmetic in
rank order for the reductions (so every rank gets bit-identical results).
Semaphore updates between two cores arrive in the order they were sent, so
one counting semaphore serves all collectives of a kernel.

Not supported: all_gather_v / all_to_all_v (their counts are read from a
device tensor at run time), priority levels (accepted, no effect), ranks on
other chips (NeuronLink; the torch.distributed backend's subject).

Sources: SDK nki/api/nki/collectives/__init__.py and nki.collectives.rst;
nki-library test/integration/nkilib/experimental/collectives/test_collectives.py
shows the launch (ReplicaGroup([list(range(n))]), per-rank inputs)."""
from __future__ import annotations

import collections
import math

from . import tracer
from .control import VirtualRegister
from .lnc import MAX_PIPES, PEER_SEM0, sync_point
from .tensor import Tensor, hbm_tensor
from .tracer import NKIError, fail

CC_SEM = PEER_SEM0 + 1 + 2 * MAX_PIPES     # the ranks' arrival count (after the LNC=2 ones)
COLS = 2048                                 # elements per partition of a reduction tile


class ReplicaGroup:
    """ReplicaGroup([[0, 1], [2, 3]]): disjoint groups of ranks; a
    collective runs within the group of each rank."""

    def __init__(self, groups=None, *args, **kw):
        groups = kw.pop("replica_groups", groups)
        if kw or args:
            raise NKIError("ReplicaGroup(groups): a list of lists of ranks")
        try:
            self.groups = [[int(r) for r in g] for g in groups]
        except TypeError:
            raise NKIError(f"ReplicaGroup({groups!r}): a list of lists of ranks") from None
        seen = [r for g in self.groups for r in g]
        if not self.groups or any(not g for g in self.groups) or len(seen) != len(set(seen)) or min(seen) < 0:
            raise NKIError(f"ReplicaGroup({self.groups}): non-empty groups of distinct non-negative ranks")

    def group_of(self, rank):
        return next((g for g in self.groups if rank in g), None)

    def __repr__(self):
        return f"ReplicaGroup({self.groups})"


class PerRank:
    """per_rank([v0, v1, ...]): an argument of simulate_ranks that takes
    value v_r on rank r."""

    def __init__(self, values):
        self.values = list(values)


def per_rank(values):
    return PerRank(values)


# ---------------------------------------------------------------- launch

def simulate_ranks(kernel, ranks, *args, trace=None, **kwargs):
    """Runs `kernel` on `ranks` ranks of one chip: rank r on core r, or,
    for an LNC=2 launch (kernel[2]), on the paired cores 2r and 2r + 1,
    each of which meets the same core of the other ranks in a collective.
    Returns ([rank 0's outputs, rank 1's, ...], KernelResult) -- the
    result's .cores and .programs hold each core's stats and program."""
    import neuronsim

    from . import Kernel, _in_place, _pair_bindings, _split_outputs, _values, assemble
    from .lnc import is_pair
    k0 = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    if not isinstance(ranks, int) or ranks < 1:
        raise NKIError(f"simulate_ranks: ranks is a positive int, got {ranks!r}")
    pair = bool(k0.grid) and is_pair(k0.target, k0.grid)
    if k0.grid and not pair:
        raise NKIError(f"simulate_ranks: launch grids per rank other than an LNC=2 launch (kernel[2]) are not "
                       f"supported by the simulator yet (got kernel[{', '.join(map(str, k0.grid))}])")
    width = 2 if pair else 1
    cores = neuronsim.chip_info(k0.target)["cores"]
    if ranks * width > cores:
        raise NKIError(f"simulate_ranks: {ranks} ranks{' of LNC=2' if pair else ''} need {ranks * width} "
                       f"NeuronCores, and a {k0.target} chip has {cores}; ranks on other chips (NeuronLink) "
                       "are not simulated")
    for v in list(args) + list(kwargs.values()):
        if isinstance(v, PerRank) and len(v.values) != ranks:
            raise NKIError(f"per_rank: {len(v.values)} values for {ranks} ranks")

    def pick(v, r):
        return v.values[r] if isinstance(v, PerRank) else v
    traced = []                     # core r * width + c: rank r's core c
    for r in range(ranks):
        rank_args = tuple(pick(a, r) for a in args), {n: pick(v, r) for n, v in kwargs.items()}
        for c in range(width):
            k = Kernel(k0.func, k0._target, k0.grid)
            k._core = c if pair else None
            k._rank = (r, ranks)
            traced.append(k._trace_full(*rank_args))
    calls = [t.cc_log for t, *_ in traced]
    if any(c != calls[0] for c in calls):
        raise NKIError(f"{k0.func.__name__}: the ranks made different collective calls "
                       f"({' vs '.join(str(c) for c in calls)}): they would wait for each other forever")
    programs, inputs, outputs, read_back, aliases, per_rank_outs = [], {}, {}, {}, [], []
    for r in range(ranks):
        first = traced[r * width]
        t, _, ins, outs, multi = first
        if pair:
            p0, p1, made, written, al = _pair_bindings(k0.func.__name__, first, traced[r * width + 1])
            programs += [p0, p1]
        else:
            made, written = _split_outputs(ins, outs)
            programs.append(first[1])
            al = [{}]
        # every buffer of the rank gets the rank's suffix but the staging,
        # which all ranks share
        for c in range(width):
            own = {x.name for x, _ in traced[r * width + c][2]} | set(made) | set(written)
            own |= traced[r * width + c][0].shared_external - traced[r * width + c][0].cc_staging
            al_c = {n: f"{n}@{r}" for n in own}
            al_c.update({n: f"{b}@{r}" for n, b in al[c].items()})
            aliases.append(al_c)
        inputs.update({f"{n}@{r}": v for n, v in k0._device_inputs(ins).items()})
        outputs.update({f"{n}@{r}": spec for n, spec in made.items()})
        read_back.update({f"{n}@{r}": spec for n, spec in written.items()})
        for tc, *_ in traced[r * width:(r + 1) * width]:
            for name in tc.cc_staging:
                outputs[name] = (tc.tensors[name].shape, tc.tensors[name].dtype)
        per_rank_outs.append((ins, outs, multi))
    res = neuronsim.run_multi([assemble(p) for p in programs], inputs, outputs, aliases=aliases,
                              read_back=read_back, target=k0.target, label=k0.func.__name__, trace=trace,
                              standalone=True)
    result = k0._result(res.cores, programs[0], trace, None)
    result.programs = programs
    # an argument written in place is updated in place when it is the
    # rank's own (per_rank); one array given to every rank keeps its value
    # and each rank's result is an array of its own
    seen = collections.Counter(id(a) for ins, _, _ in per_rank_outs for _, a in ins)
    for ins, outs, multi in per_rank_outs:
        shared = [x.name for x, a in ins if seen[id(a)] > 1 and any(o.name == x.name for o in outs)]
        if multi is None and shared:
            raise NKIError(f"simulate_ranks: {k0.func.__name__} writes its argument {shared[0]} in place and "
                           "every rank was given the same array: give each rank its own with per_rank([...])")
    values = [_in_place(_values(res.outputs, outs, multi, f"@{r}"),
                        [(x, a if seen[id(a)] == 1 else None) for x, a in ins], outs, multi)
              for r, (ins, outs, multi) in enumerate(per_rank_outs)]
    return values, result


# ------------------------------------------------------------ the calls

def rank_id(name=None):
    """This rank's id, in a register (known while tracing)."""
    return VirtualRegister(_trace("rank_id").cc_rank)


def _trace(what):
    t = tracer.current()
    if t.cc_rank is None:
        fail(f"nki.collectives.{what} runs across ranks: launch the kernel with "
             "nki.collectives.simulate_ranks(kernel, ranks, ...)")
    return t


def _group(t, what, replica_group, srcs=()):
    """This rank's group; logs the call (every rank must make the same)."""
    if not isinstance(replica_group, ReplicaGroup):
        fail(f"nki.collectives.{what}: replica_group= takes a ReplicaGroup, got {replica_group!r}")
    _log(t, what, replica_group.groups, srcs)
    g = replica_group.group_of(t.cc_rank)
    if g is None:
        fail(f"nki.collectives.{what}: rank {t.cc_rank} is in no group of {replica_group}")
    if max(g) >= t.cc_world:
        fail(f"nki.collectives.{what}: {replica_group} names rank {max(g)} of a {t.cc_world}-rank launch")
    return g


def _log(t, what, spec, srcs):
    t.cc_log.append((what, tuple(tuple(g) for g in spec),
                     tuple(tuple(s.shape) for s in srcs if isinstance(s, Tensor))))


def _as_2d(x, what):
    """An HBM tensor as [rows, columns]; an SBUF tile as it is (2-D)."""
    if not isinstance(x, Tensor) or x.space not in ("hbm", "sbuf"):
        fail(f"nki.collectives: {what} must be HBM or SBUF tensors, got {x!r}")
    if x.space == "sbuf":
        if len(x.shape) != 2:
            fail(f"nki.collectives: SBUF {what} are 2-D tiles (partitions, one free dimension)")
        return x
    rows = x.shape[0] if x.shape else 1
    return x.reshape((rows, math.prod(x.shape[1:]) if len(x.shape) > 1 else 1))


def _core_of_rank(t, rank):
    """The core (run) this core meets in `rank`: the rank's own, or under
    LNC=2 the rank's core of the same index as this one."""
    return rank if t.lnc_rank is None else 2 * rank + t.lnc_rank


def _stage(t, what, group, srcs):
    """Every rank of `group` puts its sources into its slots of a staging
    buffer per source, tells the others, and waits to hear from all of
    them.  Returns the staging buffers as [len(group), rows, cols] views."""
    from .lnc import not_in_loop
    not_in_loop(t, what)
    from . import language as nl
    call = len(t.cc_log) - 1                  # the call _group / _permute logged
    me = group.index(t.cc_rank)
    stages, moves = [], []
    for i, s in enumerate(srcs):
        s2 = _as_2d(s, "sources")
        rows, cols = s2.shape
        name = f"cc{call}_{'_'.join(map(str, group))}_{i}" + ("" if t.lnc_rank is None else f"_c{t.lnc_rank}")
        st = t.tensors.get(name)
        if st is None:
            st = hbm_tensor(name, (len(group) * rows, cols), s.dtype)
            t.tensors[name] = st
            t.cc_staging.add(name)
        nl._dma(st[me * rows:(me + 1) * rows, :], s2)
        moves.append(t.instrs[-1])
        stages.append(st.reshape((len(group), rows, cols)))
    regions = [st.region() for st in stages]
    for r in group:
        if r != t.cc_rank:
            sync_point(t, "sync", f"sem_signal sem={CC_SEM} op=add value=1 remote rank={_core_of_rank(t, r)}",
                       reads=regions, after=moves)
    t.cc_expected += len(group) - 1
    if len(group) > 1:
        sync_point(t, "sync", f"sem_wait sem={CC_SEM} cond=is_ge value={t.cc_expected}", writes=regions)
    t.min_semaphores = max(t.min_semaphores, CC_SEM + 1)
    return stages


def _reduce_op(op, what):
    name = getattr(op, "__name__", op)
    if name not in ("add", "minimum", "maximum"):
        fail(f"nki.collectives.{what}: op is nl.add, nl.minimum or nl.maximum, got {op!r}")
    from . import language as nl
    return getattr(nl, name)


def _reduce_into(dst, stage, cols, row0, op):
    """dst[:, :] = op over the slots of rows [row0, row0 + dst rows), in slot
    order, a tile of 128 rows x COLS columns at a time."""
    from . import isa as nisa
    from . import language as nl
    n = stage.shape[0]
    d2 = _as_2d(dst, "destinations")
    for r0 in range(0, d2.shape[0], 128):
        r1 = min(r0 + 128, d2.shape[0])
        for c0 in range(0, cols, COLS):
            c1 = min(c0 + COLS, cols)
            acc = nl.load(stage[0, row0 + r0:row0 + r1, c0:c1])
            for j in range(1, n):
                acc = op(acc, nl.load(stage[j, row0 + r0:row0 + r1, c0:c1]))
            if d2.space == "hbm":
                nl.store(d2[r0:r1, c0:c1], value=acc)
            else:
                nisa.tensor_copy(dst=d2[r0:r1, c0:c1], src=acc)


def _check_lists(what, srcs, dsts):
    if not isinstance(srcs, (list, tuple)) or not isinstance(dsts, (list, tuple)) or len(srcs) != len(dsts) \
            or not srcs:
        fail(f"nki.collectives.{what}: srcs= and dsts= are lists of tensors of the same length")
    spaces = {x.space for x in list(srcs) + list(dsts) if isinstance(x, Tensor)}
    if len(spaces) > 1:
        fail(f"nki.collectives.{what}: all tensors on HBM or all on SBUF, not a mix")
    if "sbuf" in spaces and len(srcs) > 1:
        fail(f"nki.collectives.{what}: coalesced (several tensors) only on HBM")


def all_reduce(srcs, dsts, replica_group, op, priority=None, name=None):
    """dsts[i] = op over the group's srcs[i] (rank order)."""
    t = _trace("all_reduce")
    _check_lists("all_reduce", srcs, dsts)
    group = _group(t, "all_reduce", replica_group, srcs)
    f = _reduce_op(op, "all_reduce")
    for s, d in zip(srcs, dsts):
        if tuple(s.shape) != tuple(d.shape) or s.dtype != d.dtype:
            fail(f"nki.collectives.all_reduce: src {list(s.shape)} {s.dtype} and dst {list(d.shape)} {d.dtype} differ")
    for stage, d in zip(_stage(t, "all_reduce", group, srcs), dsts):
        _reduce_into(d, stage, stage.shape[2], 0, f)


def reduce_scatter(srcs, dsts, replica_group, collective_dim, op, priority=None, name=None):
    """dsts[i] = (op over the group's srcs[i]) rows [g*R/n, (g+1)*R/n) for the
    rank's position g in the group."""
    t = _trace("reduce_scatter")
    _check_lists("reduce_scatter", srcs, dsts)
    if collective_dim != 0:
        fail("nki.collectives.reduce_scatter: collective_dim 0 only")
    group = _group(t, "reduce_scatter", replica_group, srcs)
    f = _reduce_op(op, "reduce_scatter")
    n, me = len(group), group.index(t.cc_rank)
    for s, d in zip(srcs, dsts):
        if s.shape[0] % n or (s.shape[0] // n, *s.shape[1:]) != tuple(d.shape):
            fail(f"nki.collectives.reduce_scatter: src {list(s.shape)} splits into {n} chunks of dim 0; "
                 f"dst is {list(d.shape)}")
    for stage, d in zip(_stage(t, "reduce_scatter", group, srcs), dsts):
        chunk = stage.shape[1] // n
        _reduce_into(d, stage, stage.shape[2], me * chunk, f)


def all_gather(srcs, dsts, replica_group, collective_dim, priority=None, name=None):
    """dsts[i] = the group's srcs[i] concatenated along collective_dim (0;
    SBUF tiles also 1), rank order."""
    from . import language as nl
    t = _trace("all_gather")
    _check_lists("all_gather", srcs, dsts)
    group = _group(t, "all_gather", replica_group, srcs)
    n = len(group)
    sbuf = srcs[0].space == "sbuf"
    if collective_dim not in ((0, 1) if sbuf else (0,)):
        fail(f"nki.collectives.all_gather: collective_dim {collective_dim} ({'0 or 1 on SBUF' if sbuf else '0 on HBM'})")
    for s, d in zip(srcs, dsts):
        want = list(s.shape)
        want[collective_dim] *= n
        if list(d.shape) != want:
            fail(f"nki.collectives.all_gather: dst {list(d.shape)}, expected {want}")
    for stage, d in zip(_stage(t, "all_gather", group, srcs), dsts):
        rows, cols = stage.shape[1], stage.shape[2]
        if not sbuf:
            nl._dma(_as_2d(d, "destinations"), stage.reshape((n * rows, cols)))
            continue
        for j in range(n):
            part = d[j * rows:(j + 1) * rows, :] if collective_dim == 0 else d[:, j * cols:(j + 1) * cols]
            nl._dma(part, stage[j, :, :])


def all_to_all(srcs, dsts, replica_group, collective_dim, priority=None, name=None):
    """Chunk j of dim 0 of each rank's src goes to the group's j-th rank,
    which puts it at chunk (sender's position) of its dst."""
    from . import language as nl
    t = _trace("all_to_all")
    _check_lists("all_to_all", srcs, dsts)
    if collective_dim != 0:
        fail("nki.collectives.all_to_all: collective_dim 0 only")
    group = _group(t, "all_to_all", replica_group, srcs)
    n, me = len(group), group.index(t.cc_rank)
    for s, d in zip(srcs, dsts):
        if s.shape[0] % n or tuple(s.shape) != tuple(d.shape):
            fail(f"nki.collectives.all_to_all: src and dst of one shape, dim 0 a multiple of {n}; "
                 f"got {list(s.shape)} and {list(d.shape)}")
    for stage, d in zip(_stage(t, "all_to_all", group, srcs), dsts):
        chunk, d2 = stage.shape[1] // n, _as_2d(d, "destinations")
        for j in range(n):
            nl._dma(d2[j * chunk:(j + 1) * chunk, :], stage[j, me * chunk:(me + 1) * chunk, :])


def _permute(what, srcs, dsts, pairs):
    """Each (source, target) pair moves the source rank's src into the
    target's dst; every rank named in a pair takes part."""
    from . import language as nl
    t = _trace(what)
    _check_lists(what, srcs, dsts)
    if len(srcs) != 1:
        fail(f"nki.collectives.{what}: one tensor per list (coalesced permutes are not supported)")
    if any(x.space not in ("hbm", "sbuf") for x in list(srcs) + list(dsts)):
        fail(f"nki.collectives.{what}: tensors on HBM or in SBUF")
    pairs = [(int(a), int(b)) for a, b in pairs]
    _log(t, what, pairs, srcs)
    ranks = sorted({r for p in pairs for r in p})
    if max(ranks) >= t.cc_world:
        fail(f"nki.collectives.{what}: pairs name rank {max(ranks)} of a {t.cc_world}-rank launch")
    if len({b for _, b in pairs}) != len(pairs):
        fail(f"nki.collectives.{what}: a rank receives from at most one source ({pairs})")
    if t.cc_rank not in ranks:
        return
    if tuple(srcs[0].shape) != tuple(dsts[0].shape) or srcs[0].dtype != dsts[0].dtype:
        fail(f"nki.collectives.{what}: src and dst differ")
    stage = _stage(t, what, ranks, srcs)[0]
    frm = next((a for a, b in pairs if b == t.cc_rank), None)
    if frm is not None:
        nl._dma(_as_2d(dsts[0], "destinations"), stage[ranks.index(frm), :, :])


def collective_permute(srcs, dsts, source_target_pairs, priority=None, name=None):
    _permute("collective_permute", srcs, dsts, source_target_pairs)


def _ring(t, what, replica_group):
    g = _group(t, what, replica_group)
    return [(g[i], g[(i + 1) % len(g)]) for i in range(len(g))]


def _channels(what, by_channel, channel_ids):
    if list(channel_ids) != list(range(len(channel_ids))) or len(by_channel) != len(channel_ids):
        fail(f"nki.collectives.{what}: channel_ids are 0, 1, ... one per channel list")


def collective_permute_implicit(srcs_by_channel, dsts_by_channel, replica_group, channel_ids=(0,), priority=None,
                                name=None):
    """Each rank sends to its successor in the group's ring, per channel."""
    t = _trace("collective_permute_implicit")
    _channels("collective_permute_implicit", srcs_by_channel, channel_ids)
    pairs = _ring(t, "collective_permute_implicit", replica_group)
    for srcs, dsts in zip(srcs_by_channel, dsts_by_channel):
        _permute("collective_permute_implicit", srcs, dsts, pairs)


def collective_permute_implicit_reduce(srcs0_by_channel, srcs1_by_channel, dsts_by_channel, replica_group, op,
                                       channel_ids=(0,), priority=None, name=None):
    """op(srcs0, srcs1) on each rank, sent to its successor in the ring."""
    from . import language as nl
    t = _trace("collective_permute_implicit_reduce")
    _channels("collective_permute_implicit_reduce", srcs0_by_channel, channel_ids)
    f = _reduce_op(op, "collective_permute_implicit_reduce")
    pairs = _ring(t, "collective_permute_implicit_reduce", replica_group)
    for s0, s1, dsts in zip(srcs0_by_channel, srcs1_by_channel, dsts_by_channel):
        if len(s0) != 1 or len(s1) != 1:
            fail("nki.collectives.collective_permute_implicit_reduce: one tensor per channel")
        a, b = _as_2d(s0[0], "sources"), _as_2d(s1[0], "sources")
        tmp = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.private_hbm)
        for r0 in range(0, a.shape[0], 128):
            r1 = min(r0 + 128, a.shape[0])
            for c0 in range(0, a.shape[1], COLS):
                c1 = min(c0 + COLS, a.shape[1])
                nl.store(tmp[r0:r1, c0:c1], value=f(nl.load(a[r0:r1, c0:c1]), nl.load(b[r0:r1, c0:c1])))
        _permute("collective_permute_implicit_reduce", [tmp], [_as_2d(dsts[0], "destinations")], pairs)


def collective_permute_implicit_current_processing_rank_id(iteration_id, replica_group, channel_id=0, name=None):
    """The rank whose data this rank holds after `iteration_id` ring steps:
    its own at 0, then its predecessors'."""
    t = _trace("collective_permute_implicit_current_processing_rank_id")
    g = _group(t, "collective_permute_implicit_current_processing_rank_id", replica_group)
    it = int(iteration_id)          # a loaded register has no value while tracing: refused there
    return VirtualRegister(g[(g.index(t.cc_rank) - it) % len(g)])


def all_gather_v(*args, **kw):
    fail("nki.collectives.all_gather_v: its counts come from a metadata tensor read at run time and size its "
         "transfers, which the simulator's DMAs cannot take from a register; use all_gather")


def all_to_all_v(*args, **kw):
    fail("nki.collectives.all_to_all_v: its counts come from a metadata tensor read at run time and size its "
         "transfers, which the simulator's DMAs cannot take from a register; use all_to_all")
