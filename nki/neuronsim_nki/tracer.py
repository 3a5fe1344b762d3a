"""The NKI kernel compiler: a kernel's Python body runs once against tracing
tensors; every operation becomes an instruction with the memory regions it
reads and writes; dependencies between engines become semaphores; the
result is an .nsasm program the simulator runs.

Scheduling rules (why, in short):
- each engine runs its instructions in program order; results on one engine
  need no semaphore for later instructions on the same engine;
- a compute instruction that another engine depends on is followed by a
  sem_signal on its engine's semaphore (ids 0-4): signals land in order, so
  "engine E's semaphore >= k" means E's k-th signalled instruction is done;
- DMA transfers complete out of order, so each takes a semaphore from a pool
  (ids 5..): transfer i signals pool slot i mod P, and the issuing engine
  first waits until that slot's previous transfer finished;
- SBUF and PSUM are allocated when a tile is created and freed when the
  last Python reference to it goes; dependencies are tracked by address, so
  a reused region waits for the readers of its previous tile.
"""
from __future__ import annotations

import heapq
import math
import re
import collections
import os
import sys
import weakref

from neuronsim import ENGINES, TARGETS, chip_info, target_info

from .dtype_keys import SIZES

from .allocator import Allocator
from .placement import BUCKET, BUCKET_HBM, Placement, Region, address_token  # noqa: F401
from .schedule import schedule
from .spilling import Spilling

ENGINE_ID = {e: i for i, e in enumerate(ENGINES)}
# semaphores: one per engine (its signals), then DMA_POOL completion slots
DMA_POOL = 128
DMA_SEM0 = len(ENGINES)


class NKIError(Exception):
    """An error in a kernel, with the kernel source line that caused it."""


_current = None        # the Trace being built


def current():
    if _current is None:
        raise NKIError("this NKI operation is only valid inside a kernel called through nki.jit")
    return _current


_abspaths = {}


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def kernel_line(trace=None):
    """'file.py:LINE' of the kernel code that made the call: the innermost
    frame outside this package -- a library kernel's own helper file
    (nkilib's subkernels) rather than the jitted wrapper that called it --
    as long as the kernel's source file is on the stack (frames walked
    directly: inspect.stack() reads source and is slow)."""
    t = trace or _current
    files = t.source_files if t else set()
    f = sys._getframe(1)
    first_outside = None
    while f is not None:
        name = f.f_code.co_filename
        known = _abspaths.get(name)
        if known is None:
            known = _abspaths[name] = (os.path.abspath(name), os.path.basename(name))
        if first_outside is None and not known[0].startswith(_PACKAGE_DIR):
            first_outside = f"{known[1]}:{f.f_lineno}"
        if known[0] in files:
            return first_outside
        f = f.f_back
    return "<kernel>"


def fail(msg):
    raise NKIError(f"{kernel_line()}: {msg}")


class Allocation:
    """A tile's storage: partitions [0, nparts), bytes [offset, offset+size)."""

    def __init__(self, space, nparts, offset, size, name):
        self.space, self.nparts, self.offset, self.size, self.name = space, nparts, offset, size, name
        self.open_groups = set()   # PSUM regions matmul accumulation groups are writing
        self.spilled = None        # while evicted: its spill tensor's name, or its source (Trace.spill);
                                   # PSUM: ("psum", its SBUF copy's offset or None) (Trace.psum_spill)
        self.dtype = "fp32"        # what a PSUM tile holds (copied as such when it is spilled)
        self.groups_away = ()      # a spilled PSUM tile's open accumulation groups, relative to it
        # (source AP, source region, dst AP head, dst AP dims, byte offset, loading
        # instruction index) of the DMA that filled all of it from HBM (see note_load)
        self.source = None


class Instr:
    __slots__ = ("engine", "text", "reads", "writes", "line", "dma", "deps", "signal", "index", "pruned", "ordered")

    def __init__(self, engine, text, reads, writes, line, dma=None):
        self.engine, self.text, self.reads, self.writes, self.line, self.dma = \
            engine, text, reads, writes, line, dma
        self.deps, self.signal, self.index, self.pruned = set(), 0, -1, None
        self.ordered = False       # traced under nki.compiler.no_reorder(): keeps program order (schedule.py)




DIVERGED = ("the kernel took a different path in its second tracing pass "
            "(does it depend on something other than its arguments?)")
SCHEDULE = True          # list-schedule the traced instructions (schedule.py)
CSE_WINDOW = 64          # results kept for reuse after the kernel drops them
_LABEL = re.compile("\0([0-9]+):(top|exit)\0")   # a run-time loop's branch target (program)


def settings():
    """what a trace depends on besides the kernel, its target and its
    arguments (Kernel's trace cache keys by it)"""
    return (SCHEDULE, CSE_WINDOW, DMA_POOL, BUCKET, BUCKET_HBM)


def overlaps(a, b):
    """Regions: (space, key, p_lo, p_hi, b_lo, b_hi)."""
    return a[0] == b[0] and a[1] == b[1] and a[2] < b[3] and b[2] < a[3] and a[4] < b[5] and b[4] < a[5]


class Trace(Placement, Spilling):
    """One tracing pass.  Tiles get their storage by liveness, as a compiler
    would: a first pass (last_use None, capacity unbounded) records the last
    instruction that touches each tile; the second frees a tile's region as
    soon as that instruction is traced (and, failing that, when Python drops
    the tile), so capacity errors mean the live tiles do not fit."""

    def __init__(self, target, source_files, last_use=None, choices=None, cse=True, use_seq=None,
                 fixed_plan=None):
        if target not in TARGETS:
            raise NKIError(f"unknown target {target!r} ({', '.join(TARGETS)})")
        self.target = target
        self.chip = chip_info(target)
        self.dma_queues = self.chip["dma_queues"]
        geo = target_info(target)
        self.features = geo["features"]        # what the target's core has (asked per instruction)
        self.core_version = geo["core_version"]
        sbuf, psum, banks = geo["sbuf_partition_bytes"], geo["psum_partition_bytes"], geo["psum_banks"]
        self.recording = last_use is None
        scale = 1 << 20 if self.recording else 1
        self.sbuf = Allocator("sbuf", sbuf * scale)
        self.psum = Allocator("psum", psum * scale, psum // banks)
        self.geometry = (sbuf, psum, psum // banks)
        # tiles the kernel placed itself (nl.ndarray(address=)): allocation id
        # -> its byte offset, and per memory the ranges they take (recorded
        # by the first pass, kept from every other tile by the second); the
        # first pass puts them past its unbounded room (FIXED_BASE), so they
        # overlap each other as they will and no other tile
        self.fixed = {}
        self.direct = []                       # first pass: the direct allocations' (id, space, partitions, bytes, what)
        self.force_auto = False                # nki.compiler.force_auto_alloc: direct allocations ignored
        self.loop_stack = []                   # device loops being traced (control._DeviceRange)
        self.no_reorder = 0                    # of them, loops under nki.compiler.no_reorder()
        self.direct_decls = {}                 # declaration in device loops -> its placement (language.ndarray)
        self.fixed_size = {}                   # allocation id -> bytes per partition of a placed tile
        self.fixed_seen = set()                # first pass: allocations accessed so far
        self.fixed_read_first = set()          # first pass: placed tiles read before written
        self.fixed_plan = fixed_plan           # the first pass's allocator.FixedPlan (second pass)
        # the first pass's allocations and drops in the order they happened
        # (see replay): (id, space, bytes per partition, banks, instruction
        # count, what, first-pass offset) for an allocation, (id,) for a
        # tile Python dropped
        self.alloc_log = []
        self.last_use = last_use or {}
        # lowering choices the first pass made from its view of the machine
        # (e.g. room in PSUM), replayed in order by the second so both
        # passes trace the same instructions
        self.choices = [] if self.recording else list(choices or ())
        self.n_choices = 0
        # common subexpressions (see reuse): key -> (instruction index,
        # weak reference to the result tile); allocations handed out twice;
        # whether the kernel then wrote one of them (the first pass is run
        # again without reuse)
        self.cse = cse
        self.cse_results = {}
        self.cse_keep = collections.OrderedDict()   # the latest results, kept for reuse
        self.cse_shared = set()
        self.cse_broken = False
        self.uses = {}
        # allocation id -> the instruction counts at which it is used, in
        # order: recorded by the first pass, read by the second to spill the
        # tile needed furthest ahead (see make_room)
        self.use_seq = {} if self.recording else (use_seq or {})
        self.n_allocs = 0
        self.live = {}                         # allocation id -> weak reference, while in SBUF / PSUM
        self.live_by_end = []                  # heap of (last use, allocation id): release_dead's order
        self.source_files = source_files
        self.instrs, self.dmas, self.tensors = [], [], {}
        self.constants = []                    # (HBM tensor, its bytes): nl.shared_constant
        # address bucket -> [(instr, region, is_write)], reads and writes apart:
        # a read conflicts only with writes, so it never scans the reads
        # (a kernel reads its inputs tens of thousands of times)
        self.history = ({}, {})      # (reads, writes)
        self.spaces = {}             # (space, key) -> the number of its first bucket
        self.names = set()
        self.grid, self.grid_index = (), ()     # SPMD launch grid and this instance
        self.grid_explicit = False             # launched as kernel[grid](...)
        self.shared = {}                       # (n-th nl.ndarray on HBM) -> tensor, across instances
        self.hbm_calls = 0
        self.open_regions = weakref.WeakSet()  # allocations with an open accumulation group
        self.last_write = {}                   # allocation id -> index of the last instruction writing it
        # SBUF spilling (second pass, traced as written: see make_room)
        self.spills = []                       # (HBM tensor name, partitions, bytes each, scratch offset)
        # nl.shared_hbm arrays the kernel made and did not return, which the
        # cores of an LNC=2 pair share: bound from outside like an output
        self.shared_external = set()
        # LNC=2 (lnc.py): this program's core in the pair (None: one core),
        # its core_barrier count and per-pipe sendrecv counts, and each
        # sendrecv's destination (pipe, n) -> SBUF address, checked across cores
        self.lnc_rank = None
        self.barriers = 0
        self.pipes = {}
        self.recv_at = {}
        self.pipe_calls = {}                   # pipe -> sendrecvs traced on it (pairs them across cores)
        self.last_peer = None                  # the latest instruction of the peer protocol
        # nki.collectives (collectives.py): this program's rank and the
        # launch's rank count (None: not a rank launch), the calls made, the
        # staging buffers all ranks share, the arrivals waited for so far
        self.cc_rank = self.cc_world = None
        self.cc_log = []
        self.cc_staging = set()
        self.cc_expected = 0
        self.scalar_regs = set()               # sync-sequencer registers NkiScalars hold (scalar.py)
        # run-time loops (runtime_loops.py): the points where they fence,
        # test and branch back, as (instruction count, kind, loop); the
        # loops open now; where each allocation was made (first pass)
        self.marks = []
        self.dyn_loops = []
        self.while_loops = {}                  # (kernel frame, line) -> its open `while reg:` loop
        self.alloc_at = {}
        self.min_semaphores = 0                # what the peer protocol's semaphore ids need
        self.scratch = 0                       # bytes of internal HBM the spills take
        self.spill_bytes = [0, 0]              # bytes spilled to HBM, bytes reloaded (from there or the source)
        # instructions traced minus the kernel's own, as the first pass counted
        # them: spill / reload DMAs added, loads taken back (see spill)
        self.n_spill_instrs = 0
        self.pinned = set()                    # allocations the instruction being traced uses
        self.n_copies = 0                      # SBUF copies of spilled PSUM tiles made (spilling.py)
        self.away = weakref.WeakValueDictionary()   # allocation id -> a spilled allocation

    def unique(self, base):
        name, k = base, 1
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def allocate(self, space, nparts, bytes_per_partition, what, banks=1):
        if nparts > 128:
            fail(f"{what}: partition dimension {nparts} exceeds the 128 partitions (nl.tile_size.pmax)")
        alloc = self.sbuf if space == "sbuf" else self.psum
        if not self.recording:
            self.release_dead()
        off = self.room_for(alloc, bytes_per_partition, what, banks, aid=self.n_allocs)
        a = Allocation(space, nparts, off, bytes_per_partition, what)
        a.id = self.n_allocs
        self.n_allocs += 1
        if self.recording:
            self.alloc_at[a.id] = len(self.instrs)
            self.alloc_log.append((a.id, space, bytes_per_partition, banks, len(self.instrs), what, off))
            a.free = weakref.finalize(a, self._dropped, a.id, alloc, off, bytes_per_partition)
        else:
            a.free = weakref.finalize(a, alloc.release, off, bytes_per_partition)
        self.add_live(a)
        return a

    def add_dma(self, dst_ap, src_ap, mode):
        """Adds a DMA descriptor and returns its index.  Callers place the
        operands (ap(), region()) first: placing one may bring a spilled
        tile back with a DMA of its own, and an index taken before that
        names the reload's descriptor instead of this one."""
        self.dmas.append((dst_ap, src_ap, mode))
        return len(self.dmas) - 1

    def avoid(self, aid, space):
        """The ranges of `space` that tiles the kernel placed itself hold
        at some point of allocation aid's life (the first pass's record):
        aid's tile must keep clear of them."""
        if self.fixed_plan is None or aid is None or aid < 0:
            return ()
        return self.fixed_plan.avoid(aid, space)

    def allocate_fixed(self, space, part0, nparts, offset, bytes_per_partition, what, direct=False):
        """Storage the kernel placed itself: partitions [part0, part0 +
        nparts), bytes [offset, offset + size) of each (SDK nl.ndarray
        address=(partition, byte offset), as nkilib's SbufManager and its
        PSUM buffers use it).  Tiles placed at the same bytes share them;
        no other tile is put there while one of them lives (FixedPlan), and
        none of them is freed or spilled.
        direct: placed by nki.compiler direct allocation, whose tiles over
        the same bytes must not be alive at once (check_lifetimes)."""
        cap = self.geometry[0] if space == "sbuf" else self.geometry[1]
        if part0 < 0 or part0 + nparts > 128 or offset < 0 or offset + bytes_per_partition > cap:
            fail(f"{what}: address=({part0}, {offset}) places partitions [{part0}, {part0 + nparts}) bytes "
                 f"[{offset}, {offset + bytes_per_partition}) outside {space.upper()} (128 partitions of {cap} "
                 "bytes)")
        base = (self.sbuf if space == "sbuf" else self.psum).capacity if self.recording else 0
        a = Allocation(space, part0 + nparts, base + offset, bytes_per_partition, what)
        a.id = self.n_allocs
        self.n_allocs += 1
        self.fixed[a.id] = offset
        self.fixed_size[a.id] = bytes_per_partition
        if self.recording:
            self.alloc_log.append((a.id, space, bytes_per_partition, 1, len(self.instrs), what, base + offset))
            if direct:
                self.direct.append((a.id, space, part0, part0 + nparts, offset, offset + bytes_per_partition, what))
        a.free = None
        return a

    def check_lifetimes(self):
        """First pass, kernel traced: two directly allocated tiles (see
        compiler.py) over common bytes whose live ranges -- first to last
        instruction using them -- overlap would overwrite each other; the
        NKI compiler refuses such a kernel ("lifetime conflict"), and so
        does this.  Ranges meeting at one instruction (a read of one tile
        and a write of the other) are fine: an instruction reads before it
        writes."""
        spans = []
        for aid, space, p0, p1, b0, b1, what in self.direct:
            seq = self.use_seq.get(aid)
            if seq:
                spans.append((seq[0], seq[-1], space, p0, p1, b0, b1, what))
        spans.sort(key=lambda s: (s[0], s[1]))
        active = []
        for s in spans:
            active = [x for x in active if x[1] > s[0]]
            for x in active:
                if x[2] == s[2] and x[3] < s[4] and s[3] < x[4] and x[5] < s[6] and s[5] < x[6]:
                    where = lambda k: self.instrs[k].line if k < len(self.instrs) else "<kernel>"  # noqa: E731
                    raise NKIError(
                        f"{where(s[0])}: lifetime conflict (direct allocation): {s[7]} takes {s[2].upper()} "
                        f"partitions [{s[3]}, {s[4]}) bytes [{s[5]}, {s[6]}) while {x[7]} there is still "
                        f"used (at {where(x[1])}); give the tensor more physical tiles "
                        "(num_free_tiles / num_bank_tiles) or other addresses")
            active.append(s)

    def _dropped(self, aid, alloc, off, size):
        """First pass: Python dropped allocation aid's last tile."""
        alloc.release(off, size)
        self.alloc_log.append((aid,))

    def choose(self, decide):
        """The first pass's decide() for this lowering choice, the same
        answer in the second pass."""
        if self.recording:
            self.choices.append(bool(decide()))
            return self.choices[-1]
        k, self.n_choices = self.n_choices, self.n_choices + 1
        if k >= len(self.choices):
            raise NKIError(DIVERGED)
        return self.choices[k]

    def reuse(self, key):
        """The result tile of an earlier instruction identical to the one
        about to be traced (key: engine, operation, result dtype and shape,
        operand access patterns and allocations), when neither its operands
        nor its result have been written since -- then the result is already
        there and the instruction is not traced again.  This is what the
        hardware compiler's common-subexpression / loop-invariant code motion
        does: the published Mamba v2 profile (SDK nki/guides/tutorials/
        fused_mamba.rst, figure mamba_v2) has VectorE busy ~6N cycles per
        (channel tile, state) where the kernel source asks for 8N at the
        published costs -- the 2N of delta*u, whose operands are loaded once
        outside the state loop, is done once per channel tile."""
        if not self.cse:
            return None
        hit = self.cse_results.get(key)
        out = None
        if hit is not None:
            index, ref = hit
            out = ref()
            # (a tile the kernel placed itself may share its bytes with
            # another, whose writes this bookkeeping does not see)
            if out is not None and (self.last_write.get(out.alloc.id) != index or
                                    any(self.last_write.get(a, -1) > index for a in key[-1]) or
                                    out.alloc.id in self.fixed or any(a in self.fixed for a in key[-1])):
                out = None
        if not self.choose(lambda: out is not None):
            return None
        if out is None:
            raise NKIError(DIVERGED)
        self.cse_shared.add(out.alloc.id)
        return out

    def remember(self, key, ins, out):
        """Records instruction ins, whose fresh result is out, for reuse."""
        if self.cse:
            self.cse_results[key] = (ins.index, weakref.ref(out))
            # the latest CSE_WINDOW results stay at hand after the kernel
            # drops them (a value recomputed in the next iteration of an
            # outer loop, as in Mamba v3's state loop around its sequence
            # tiles); their tiles live on only if reused
            self.cse_keep[id(out)] = out
            if len(self.cse_keep) > CSE_WINDOW:
                self.cse_keep.popitem(last=False)

    def psum_banks_in_use(self):
        """PSUM banks held by live tiles (the first pass frees a tile only
        when Python drops it, so it never sees fewer in use than the second)."""
        return (self.psum.capacity - sum(n for _, n in self.psum.free)) // self.psum.bank

    def touch(self, a):
        """An instruction being traced uses allocation a."""
        if self.recording:
            now = len(self.instrs)
            self.uses[a.id] = now
            seq = self.use_seq.setdefault(a.id, [])
            if not seq or seq[-1] != now:
                seq.append(now)
        self.access(a)

    def access(self, a):
        """Allocation a's address is about to be used: a spilled tile comes
        back first, and it stays until the instruction is traced.  A tile
        made before a run-time loop and used in it stays allocated until the
        loop ends: the body runs again from its start."""
        for loop in self.dyn_loops:
            if a.id < loop.first_alloc:
                loop.keep[a.id] = a
        if self.recording:
            return
        if a.spilled is not None:
            self.reload(a)
        self.pinned.add(a.id)

    def add_live(self, a):
        self.live[a.id] = weakref.ref(a)
        heapq.heappush(self.live_by_end, (self.last_use.get(a.id, -1), a.id))

    def release_dead(self):
        """Frees the regions of tiles whose last instruction has been traced
        (counted as the first pass counted: without spill DMAs), in order of
        their last use."""
        now = len(self.instrs) - self.n_spill_instrs
        freed, heap = False, self.live_by_end
        while heap and heap[0][0] < now:
            _, aid = heapq.heappop(heap)
            a = self.live.pop(aid, lambda: None)()
            if a is not None and a.free.alive:
                a.free()
                freed = True
        if freed and self.away:
            self.prefetch(now)

    def emit(self, engine, text, reads=(), writes=(), dma=None, closes_groups=True, spill=False):
        """spill: a spill or reload DMA, which moves a tile's bytes without
        changing its value (no write to the kernel's eyes) while the
        instruction that needed it is still being traced."""
        # the source line only goes into the program the second pass writes
        ins = Instr(engine, text, list(reads), list(writes), kernel_line(self), dma)
        if self.no_reorder:
            ins.ordered = True
        if not spill:
            if self.away:            # tiles are spilled: reload them as soon as room frees
                self.release_dead()  # (this instruction's operands stay: still pinned)
            if self.n_spill_instrs and not self.recording:
                self.check_resident(ins)
            self.pinned.clear()
        if closes_groups and not text.startswith(("multiply_moving", "load_stationary")):
            for r in ins.reads + ins.writes:
                if r[0] == "psum":
                    self.close_groups(r)
        for r in ins.writes if not spill else ():
            if isinstance(r, Region):
                self.last_write[r.alloc_id] = len(self.instrs)
                if r.alloc_id in self.cse_shared:
                    self.cse_broken = True       # a reused result written in place
        if self.recording:
            # a placed tile first read before written relies on what an
            # earlier tile at its bytes left there (FixedPlan)
            for r in ins.reads:
                if isinstance(r, Region) and r.alloc_id in self.fixed and r.alloc_id not in self.fixed_seen:
                    self.fixed_read_first.add(r.alloc_id)
            self.fixed_seen.update(r.alloc_id for r in ins.reads + ins.writes if isinstance(r, Region))
            # the liveness pass only needs each instruction's position (and
            # the accumulation groups above); dependencies are the second's
            ins.pruned = None
            ins.index = len(self.instrs)
            self.instrs.append(ins)
            return ins
        self.link(ins)
        return ins

    def mark(self, kind, loop):
        """A point of run-time loop `loop` (runtime_loops.py) after the
        instructions traced so far: "fence" (the engines drain and meet;
        the loop's top), "check" (leave the loop unless its condition
        holds), "back" (drain, branch to the top; the loop's exit follows).
        A result traced before it is not reused after it: the loop may run
        its body any number of times, or none."""
        self.marks.append((len(self.instrs), kind, loop))
        self.cse_results.clear()

    def close_groups(self, region, keep=None):
        """Anything but a matmul touching PSUM bytes ends the accumulation
        groups writing them (a matmul into a tile the kernel placed itself
        ends those of the other tiles at its bytes: `keep` is its own)."""
        for a in list(self.open_regions):
            if a is keep:
                continue
            a.open_groups = {g for g in a.open_groups if not overlaps(g, region)}
            if not a.open_groups:
                self.open_regions.discard(a)

    def check_resident(self, ins):
        """Once tiles have been spilled: every SBUF / PSUM operand of
        instruction ins must still lie in its tile's storage -- an address
        taken before a spill or reload moved the tile would read or write
        another tile's bytes, a silent wrong value.  An internal error
        instead (the kernel is not at fault)."""
        for r in ins.reads + ins.writes:
            if not isinstance(r, Region) or r.alloc_id in self.fixed:
                continue
            ref = self.live.get(r.alloc_id)
            a = ref() if ref is not None else None
            if a is None or a.offset is None or not (a.offset <= r[4] and r[5] <= a.offset + max(a.size, 1)):
                raise NKIError(f"{ins.line}: internal error in the simulator's tracer: an operand of "
                               f"'{ins.text.split()[0]}' lies where its tile no longer is (moved by a spill or "
                               "reload); please report this kernel")

    def retract_last(self):
        """Takes back the last instruction (to re-emit it changed): its
        accesses leave the history and those it had pruned return."""
        ins = self.instrs.pop()
        for r in ins.writes:
            # what it wrote is not there any more (reuse and broadcast checks)
            if isinstance(r, Region) and self.last_write.get(r.alloc_id) == ins.index:
                self.last_write[r.alloc_id] = -1
        pruned, added = ins.pruned or ((), ())
        for b, entry in added:
            hist = self.history[entry[2]]
            hist[b] = [h for h in hist[b] if h is not entry]
        for b, entry in pruned:
            self.history[entry[2]].setdefault(b, []).append(entry)
        return ins

    # ------------------------------------------------------------ program

    def program(self, inputs, outputs):
        """The .nsasm text: tensor table, DMA descriptors, engine streams.

        A run-time loop's marks (see mark) cut the instructions into
        epochs: every engine meets at a fence that zeroes the semaphores
        this program counts with, so each epoch counts its signals and DMA
        completions from 0, waits for nothing of an earlier epoch (the
        fence came after it) and ends with SyncE waiting for its DMAs.
        Instructions are scheduled within their epoch."""
        n_dma = len(self.dmas)
        pool = min(DMA_POOL, max(n_dma, 1))
        info = self.chip
        items, prev = [], 0
        for pos, kind, loop in self.marks + [(len(self.instrs), None, None)]:
            chunk = self.instrs[prev:pos]
            items += schedule(chunk, info) if SCHEDULE else chunk
            if kind is not None:
                items.append((kind, loop))
            prev = pos
        epoch_of, epoch, dma_base = {}, 0, {}
        for it in items:
            if type(it) is tuple:
                epoch += it[0] in ("fence", "back")
                continue
            epoch_of[id(it)] = epoch
            if it.dma is not None and epoch not in dma_base:
                dma_base[epoch] = it.dma if epoch else 0
        needs_signal = set()
        for ins in items:
            if type(ins) is not tuple:
                for d in ins.deps:
                    if d.dma is None and d.engine != ins.engine and epoch_of.get(id(d)) == epoch_of[id(ins)]:
                        needs_signal.add(d)
        count = dict.fromkeys(ENGINES, 0)
        for ins in items:
            if type(ins) is tuple:
                if ins[0] in ("fence", "back"):
                    count = dict.fromkeys(ENGINES, 0)
            elif ins in needs_signal:
                count[ins.engine] += 1
                ins.signal = count[ins.engine]
        streams = {e: [] for e in ENGINES}
        waited = {e: {} for e in ENGINES}          # what each engine has already waited for
        dma_gen = {}
        labels = {}                                # (loop id, "top" / "exit", engine) -> instruction index
        nq = self.dma_queues
        sems = DMA_SEM0 + pool                     # the semaphores a fence zeroes: the engines' and the pool's

        def drain():
            for slot, gen in sorted(dma_gen.items()):
                if waited["sync"].get(DMA_SEM0 + slot, 0) < gen:
                    streams["sync"].append(f"    sem_wait sem={DMA_SEM0 + slot} cond=is_ge value={gen}")
        epoch = 0
        for ins in items:
            if type(ins) is tuple:
                kind, loop = ins
                if kind == "fence":
                    drain()
                    for e in ENGINES:
                        labels[(id(loop), "top", e)] = len(streams[e])
                        streams[e].append(f"    fence sems={sems}   ; {loop.line}")
                elif kind == "check":
                    for e in ENGINES:
                        streams[e].append(f"    branch to=\0{id(loop)}:exit\0 {loop.exit_when}   ; {loop.line}")
                else:
                    drain()
                    for e in ENGINES:
                        streams[e].append(f"    branch to=\0{id(loop)}:top\0   ; {loop.line}")
                        labels[(id(loop), "exit", e)] = len(streams[e])
                if kind in ("fence", "back"):
                    epoch += 1
                    waited = {e: {} for e in ENGINES}
                    dma_gen = {}
                continue
            eng = ins.engine
            out, seen = streams[eng], waited[eng]
            base = dma_base.get(epoch, 0)
            need = {}
            for d in ins.deps:
                if epoch_of.get(id(d)) != epoch:
                    continue                     # a fence has come between
                if d.dma is not None:
                    key, val = DMA_SEM0 + (d.dma - base) % pool, (d.dma - base) // pool + 1
                elif d.engine != eng:
                    key, val = ENGINE_ID[d.engine], d.signal
                else:
                    continue
                if need.get(key, 0) < val:
                    need[key] = val
            if ins.dma is not None:
                slot = (ins.dma - base) % pool
                gen = (ins.dma - base) // pool
                if gen and need.get(DMA_SEM0 + slot, 0) < gen:
                    need[DMA_SEM0 + slot] = gen
                dma_gen[slot] = gen + 1
            for key in sorted(need) if len(need) > 1 else need:
                val = need[key]
                if seen.get(key, 0) < val:
                    out.append(f"    sem_wait sem={key} cond=is_ge value={val}")
                    seen[key] = val
            if ins.dma is not None:
                out.append(f"    {ins.text} queue={ins.dma % nq} sem={DMA_SEM0 + (ins.dma - base) % pool} value=1"
                           f"   ; {ins.line}")
            else:
                out.append(f"    {ins.text}   ; {ins.line}")
            if ins.signal:
                out.append(f"    sem_signal sem={ENGINE_ID[eng]} op=add value=1")
        # the kernel ends when every transfer has landed
        drain()
        if labels:
            for e in ENGINES:
                streams[e] = [_LABEL.sub(lambda m: str(labels[(int(m.group(1)), m.group(2), e)]), x)
                              if "\0" in x else x for x in streams[e]]
        def decl(name, kind, dtype, shape, extra=""):
            return f".tensor {name} {kind} {dtype} [{','.join(map(str, shape))}]{extra}"
        tensors = [decl(t.name, "input", t.dtype, t.shape) for t in inputs]
        # an argument the kernel returns stays an input (written in place)
        args = {i.name for i in inputs}
        tensors += [decl(t.name, "output", t.dtype, t.shape) for t in outputs if t.name not in args]
        # HBM arrays the kernel made for itself (not returned): its own scratch
        declared = {x.name for x in list(inputs) + list(outputs)} | self.shared_external
        scratch = self.scratch
        for name, x in self.tensors.items():
            if name not in declared:
                off = (scratch + 63) // 64 * 64
                tensors.append(decl(name, "internal", x.dtype, x.shape, f" offset={off}"))
                scratch = off + SIZES[x.dtype] * math.prod(x.shape)
        tensors += [decl(n, "output", self.tensors[n].dtype, self.tensors[n].shape)
                    for n in sorted(self.shared_external)]
        tensors += [decl(n, "internal", "uint8", (nparts, size), f" offset={off}")
                    for n, nparts, size, off in self.spills]
        tensors += [decl(t.name, "const", t.dtype, t.shape, f" data={data.hex()}") for t, data in self.constants]
        lines = [f"; generated by neuronsim_nki from {', '.join(sorted(self.source_files))} (do not edit)"]
        if any(self.spill_bytes):
            # read back by profile_json.py (the profiler's spill_save_bytes / spill_reload_bytes)
            lines.append(f"; spill_save_bytes={self.spill_bytes[0]} spill_reload_bytes={self.spill_bytes[1]}")
        lines += [f".target {self.target}", f".semaphores {max(DMA_SEM0 + pool, self.min_semaphores)}",
                  f".scratch {scratch}"] + tensors
        for i, d in enumerate(self.dmas):
            lines.append(f".dma d{i} {d[2]} dst={d[0]} src={d[1]}")
        for e in ENGINES:
            if streams[e] or e == "sync":
                lines.append(f"\n.engine {e}")
                lines += streams[e]
                lines.append("    end")
        return "\n".join(lines) + "\n"
