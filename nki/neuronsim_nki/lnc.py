"""LNC=2: a kernel launched as kernel[2] (or over nl.spmd_dim(n, nl.nc(2)))
on NeuronCore-v3 and later runs on the two physical cores of a logical core
at once, each with its own program_id, sharing HBM.  Each core's program is
traced on its own; the two run in one simulated timeline as a paired core
(neuronsim.run_multi), where nisa.sendrecv and nisa.core_barrier reach the
other core through `peer` semaphore updates and DMAs.

Sources: SDK nki/api/nki/__init__.py (jit: "The LNC degree can be set at the
callsite using bracket syntax: kernel[lnc](args)"), nki/api/nki/isa/__init__.py
(sendrecv, core_barrier), nki/guides/nki_simulator.rst ("For LNC2 kernels
(kernel[2]) ... two Python threads that execute the kernel concurrently, each
with its own program_id. Input arrays use shared_hbm buffers")."""
from __future__ import annotations

import math

from neuronsim import ENGINES, FEATURES, target_info

from . import tracer
from .tensor import Tensor
from .tracer import fail

# semaphores of the peer protocol, the same ids in both cores' programs
# (after the engine and DMA-completion ones: tracer.DMA_SEM0 + DMA_POOL)
PEER_SEM0 = tracer.DMA_SEM0 + tracer.DMA_POOL
BARRIER_SEM = PEER_SEM0
MAX_PIPES = 32                         # sendrecv pipe ids 0..31: two semaphores each


def pipe_sems(pipe):
    """(ready, data) semaphores of a sendrecv pipe."""
    return PEER_SEM0 + 1 + 2 * pipe, PEER_SEM0 + 2 + 2 * pipe


# ---------------------------------------------------------------- launch

def core_of(grid):
    """The LNC=2 placement of a launch grid on a NeuronCore-v3+ target: a
    function from an instance's grid index to its core, or None when the
    launch runs on one core.  An nl.spmd_dim(n, nl.nc(2)) axis puts instance
    i of that axis on core i % 2; a launch of exactly 2 instances
    (kernel[2], NKI 0.8's LNC bracket) puts one on each core."""
    if not grid:
        return None
    for axis, g in enumerate(grid):
        c = getattr(g, "cores", 1)
        if c > 2:
            fail(f"nl.nc({c}): a logical core has at most 2 physical cores (LNC=2)")
        if c == 2:
            return lambda idx, a=axis: idx[a] % 2
    if math.prod(int(g) for g in grid) == 2:
        return lambda idx: sum(idx)          # the one axis of size 2
    return None


def is_pair(target, grid):
    return "peer" in target_info(target)["features"] and core_of(grid) is not None


def check_pair(name, t0, ins0, outs0, t1, ins1, outs1):
    """What both cores' programs must agree on to run as one pair: the
    arguments, the returned shared_hbm arrays (by creation order) and their
    synchronization points."""
    if [t.name for t, _ in ins0] != [t.name for t, _ in ins1]:
        fail(f"{name}: under LNC=2 the two cores bound the kernel's arguments differently")
    if len(outs0) != len(outs1) or any(getattr(a, "hbm_key", None) != getattr(b, "hbm_key", None) or
                                       a.shape != b.shape or a.dtype != b.dtype for a, b in zip(outs0, outs1)):
        fail(f"{name}: under LNC=2 both cores must return the same shared_hbm arrays")
    if t0.pipes != t1.pipes or t0.barriers != t1.barriers:
        fail(f"{name}: under LNC=2 the cores disagree on their synchronization (core_barrier {t0.barriers} vs "
             f"{t1.barriers}; sendrecv per pipe {dict(t0.pipes)} vs {dict(t1.pipes)}): it would deadlock")


def aim_sends(t0, p0, t1, p1):
    """The two cores' programs with each sendrecv's DMA writing the peer's
    dst tile where the peer allocated it.  Each core is traced on its own,
    so the cores' tiles may lie at different SBUF addresses (a kernel that
    takes a different path on each core, as nkilib's sequence-sharded
    attention does); a traced send names its own dst's address until the
    peer's is known here."""
    def aim(program, t_from, t_to):
        lines = program.split("\n")
        for key, (ap, idx) in t_from.recv_at.items():
            peer_ap = t_to.recv_at[key][0]
            if peer_ap == ap:
                continue
            head = f".dma d{idx} direct dst={ap} "
            for i, line in enumerate(lines):
                if line.startswith(head):
                    lines[i] = f".dma d{idx} direct dst={peer_ap} " + line[len(head):]
                    break
            else:
                raise AssertionError(f"sendrecv descriptor d{idx} not in the program")
        return "\n".join(lines)
    return aim(p0, t0, t1), aim(p1, t1, t0)


# --------------------------------------------------------- instructions

def _current_pair(what):
    t = tracer.current()
    if "peer" not in t.features:
        fail(f"{what} needs NeuronCore-v{FEATURES['peer']} or newer ({t.target} is "
             f"NeuronCore-v{t.core_version})")
    if t.lnc_rank is None:
        fail(f"{what} runs between the two cores of an LNC=2 launch: call the kernel as kernel[2](...)")
    return t


def sync_point(t, engine, text, reads=(), writes=(), dma=None, after=()):
    """An instruction of the cores' synchronization (LNC=2 here, the
    collectives' ranks in collectives.py): kept in order behind the one
    before it -- every core meets its synchronization points in the same
    order -- and behind `after`."""
    ins = t.emit(engine, text, reads=reads, writes=writes, dma=dma)
    if not t.recording:
        if t.last_peer is not None:
            ins.deps.add(t.last_peer)
        ins.deps.update(after)
    t.last_peer = ins
    return ins


def not_in_loop(t, what):
    """`what` pairs its transfers across the ranks by their count while
    tracing, which a run-time loop's body, traced once, does not give."""
    if t.dyn_loops:
        fail(f"{t.dyn_loops[-1].line}: {what} inside a run-time loop is not supported by the simulator yet "
             "(nisa.core_barrier and nisa.sendrecv are)")


def loop_opens(t, loop):
    """What the peer protocol has counted when a run-time loop starts."""
    loop.peer_counts0 = (t.barriers, dict(t.pipes))


def loop_closes(t, loop):
    """A run-time loop's body ends: the signals each iteration's core
    barriers and sendrecvs wait for, counted while tracing, are taken off
    this core's semaphores (after the body's last synchronisation, before
    the loop's fence; the peer's increments may already be in for the next
    iteration -- adding and taking off commute), so the body's waits hold
    in every iteration and the code after the loop counts on from where the
    loop began.  Both cores must run the loop the same number of times, as
    on the device."""
    barriers0, pipes0 = loop.peer_counts0
    takes = []
    if t.barriers > barriers0:
        takes.append((BARRIER_SEM, t.barriers - barriers0))
    for pipe, n in sorted(t.pipes.items()):
        if n > pipes0.get(pipe, 0):
            ready, data = pipe_sems(pipe)
            takes += [(ready, n - pipes0.get(pipe, 0)), (data, n - pipes0.get(pipe, 0))]
    for sem, n in takes:
        sync_point(t, t.last_peer.engine, f"sem_signal sem={sem} op=sub value={n}")
    t.barriers, t.pipes = barriers0, pipes0


def _engine_name(engine, default):
    e = getattr(engine, "name", engine)
    if e in (None, "unknown"):
        return default
    if e not in ENGINES:
        fail(f"engine {engine!r}")
    if e == "tensor":
        fail("the peer protocol's semaphores are not TensorE's to update: use gpsimd, vector, scalar or sync")
    return e


def core_barrier(data, cores=(0, 1), engine=None, name=None):
    """Both cores of the pair wait here until the other has arrived: each
    updates the other's barrier semaphore once every earlier write to `data`
    has landed, then waits for the other's update.  Only `engine` waits."""
    t = _current_pair("nisa.core_barrier")
    if tuple(cores) != (0, 1):
        fail(f"nisa.core_barrier cores={tuple(cores)}: only (0, 1), the two cores of an LNC=2 pair")
    # the SDK asks for shared HBM; nki-library's MX shard-on-I kernel passes
    # an SBUF tile (its block index), which then orders the barrier behind
    # this core's writes to it
    if not isinstance(data, Tensor) or data.space not in ("hbm", "sbuf"):
        fail("nisa.core_barrier data=: the shared HBM tensor (or an SBUF tile) the cores synchronize on")
    e = _engine_name(engine, "gpsimd")
    t.barriers += 1
    t.min_semaphores = max(t.min_semaphores, BARRIER_SEM + 1)
    region = data.region()
    sync_point(t, e, f"sem_signal sem={BARRIER_SEM} op=add value=1 peer", reads=[region])
    sync_point(t, e, f"sem_wait sem={BARRIER_SEM} cond=is_ge value={t.barriers}", writes=[region])


GPSIMD_DMA_LIMIT = {4: 1024, 2: 512, 1: 256}     # bytes per partition, by element size


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=None, name=None):
    """Sends src into the other core's dst and receives the other core's src
    into dst.  On each core: tell the peer its dst may be written (after
    every earlier access to it), wait for the peer's word, DMA src into the
    peer's dst (aim_sends gives its address), tell the peer the data landed,
    wait for the peer's data.  Operations on one pipe_id complete in order."""
    from .dtype_keys import SIZES as DTYPE_SIZES
    t = _current_pair("nisa.sendrecv")
    for what, x in (("src", src), ("dst", dst)):
        if not isinstance(x, Tensor) or x.space != "sbuf":
            fail(f"nisa.sendrecv {what}: an SBUF tile")
    if src.dtype != dst.dtype or tuple(src.shape) != tuple(dst.shape):
        fail(f"nisa.sendrecv: src and dst differ ({list(src.shape)} {src.dtype} vs {list(dst.shape)} {dst.dtype})")
    ranks = (int(send_to_rank), int(recv_from_rank))
    if any(r not in (0, 1) for r in ranks):
        fail(f"nisa.sendrecv: send_to_rank / recv_from_rank are 0 or 1 under LNC=2, got {ranks}")
    peer = 1 - t.lnc_rank
    if ranks != (peer, peer):
        fail(f"nisa.sendrecv on core {t.lnc_rank}: it exchanges with the other core (send_to_rank = "
             f"recv_from_rank = {peer}), got {ranks}")
    if not isinstance(pipe_id, int) or not 0 <= pipe_id < MAX_PIPES:
        fail(f"nisa.sendrecv pipe_id={pipe_id!r}: an int in [0, {MAX_PIPES})")
    mode = getattr(dma_engine, "name", dma_engine) or "dma"
    if mode not in ("dma", "gpsimd_dma"):
        fail(f"nisa.sendrecv dma_engine={dma_engine!r}: nisa.dma_engine.dma or .gpsimd_dma")
    if mode == "gpsimd_dma":
        esz = DTYPE_SIZES[src.dtype]
        per_part = src.elements_per_partition() * esz
        if per_part > GPSIMD_DMA_LIMIT[min(esz, 4)]:
            fail(f"nisa.sendrecv with gpsimd_dma moves at most {GPSIMD_DMA_LIMIT[min(esz, 4)]} bytes per "
                 f"partition of {src.dtype}, got {per_part}")
    e = "gpsimd" if mode == "gpsimd_dma" else "sync"
    n = t.pipes.get(pipe_id, 0) + 1
    t.pipes[pipe_id] = n
    # the k-th sendrecv on the pipe as traced: both cores trace theirs in the
    # same order, so it pairs the two (n, the semaphore count, starts again
    # after a run-time loop; this does not)
    k = t.pipe_calls.get(pipe_id, 0) + 1
    t.pipe_calls[pipe_id] = k
    ready, data = pipe_sems(pipe_id)
    t.min_semaphores = max(t.min_semaphores, data + 1)
    dst_region, src_region = dst.region(), src.region()
    dst_ap, src_ap = dst.ap(), src.ap()
    idx = t.add_dma(dst_ap, src_ap, "direct")
    t.recv_at[(pipe_id, k)] = (dst_ap, idx)        # the peer's send is aimed here (aim_sends)
    sync_point(t, e, f"sem_signal sem={ready} op=add value=1 peer", writes=[dst_region])
    sync_point(t, e, f"sem_wait sem={ready} cond=is_ge value={n}")
    sync_point(t, e, f"dma_copy desc=d{idx} peer", reads=[src_region], dma=idx)
    sync_point(t, e, f"sem_signal sem={data} op=add value=1 peer")
    sync_point(t, e, f"sem_wait sem={data} cond=is_ge value={n}", writes=[dst_region])
    return dst


class dma_engine:
    """sendrecv's transfer mechanism: the core's DMA engines (default) or
    GpSimd's internal DMA for small SBUF-to-SBUF swaps."""
    dma = "dma"
    gpsimd_dma = "gpsimd_dma"
