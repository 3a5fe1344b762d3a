"""Where a trace's instructions land: the address buckets and access
history that give each instruction its dependencies (link), and the replay
that turns a first tracing pass into the program without running the kernel
body again (tiles placed by live range).  Trace (tracer.py) takes these
methods from Placement."""
from __future__ import annotations

import heapq
import re

from .allocator import FixedPlan

BUCKET = 4096            # bytes of a partition (SBUF / PSUM)
BUCKET_HBM = 1 << 18     # HBM: a tile's rows span megabytes of a big tensor


class Region(tuple):
    """(space, key, p_lo, p_hi, b_lo, b_hi) of an on-chip tile, remembering
    which allocation it lies in (not part of its value: allocations reuse
    addresses, and conflicts are by address)."""


    def __new__(cls, value, alloc_id):
        r = super().__new__(cls, value)
        r.alloc_id = alloc_id
        return r


_TOKEN = re.compile("\0([0-9]+),([0-9]+)\0")


def address_token(alloc_id, rel):
    """An on-chip operand's byte offset in a first-pass instruction's text:
    allocation alloc_id's address (chosen by Trace.replay) plus rel."""
    return f"\0{alloc_id},{rel}\0"


def _offset_text(byte):
    return f"+{byte}" if byte else ""



class Placement:
    """Trace's dependency history and second-pass replay (see tracer.Trace)."""

    def link(self, ins, shift=None):
        """Appends instruction ins with a dependency on every earlier
        access that conflicts with one of its own (one of the two writes),
        found through the address buckets the regions span (a bucket holds
        one space and key, so only the ranges are compared).  An access to
        exactly a region ins writes then leaves the history: it is ordered
        before ins, and later accesses will depend on ins.  shift:
        allocation id -> how far Trace.replay moved it (the history keeps
        (p_lo, p_hi, b_lo, b_hi) where they are now)."""
        deps = ins.deps
        reads_h, writes_h = self.history
        sp = self.spaces
        accesses = []
        for rs, is_w in ((ins.reads, False), (ins.writes, True)):
            for r in rs:
                d = shift[r.alloc_id] if shift is not None and type(r) is Region else 0
                lo, hi = r[4] + d, r[5] + d
                # its address buckets: BUCKET bytes of a partition, or
                # BUCKET_HBM bytes of an HBM tensor, numbered apart per
                # (space, key) (sp: (space, key) -> base number)
                size = BUCKET_HBM if r[0] == "hbm" else BUCKET
                base = sp.get((r[0], r[1]))
                if base is None:
                    base = sp[(r[0], r[1])] = len(sp) << 40
                end = hi if hi > lo else lo + 1
                accesses.append(((r[2], r[3], lo, hi), is_w, range(base + lo // size, base + (end - 1) // size + 1)))
        # what retract_last needs to take ins back (nothing takes back a
        # replayed instruction)
        keep_log = shift is None
        pruned, added = [], []
        for r, is_w, bs in accesses:
            p0, p1, lo, hi = r
            for b in bs:
                for hist in ((writes_h, reads_h) if is_w else (writes_h,)):
                    lst = hist.get(b)
                    if not lst:
                        continue
                    covered = False
                    for h in lst:
                        g = h[1]
                        if g[0] < p1 and p0 < g[1] and g[2] < hi and lo < g[3]:
                            deps.add(h[0])
                            if is_w and p0 <= g[0] and g[1] <= p1 and lo <= g[2] and g[3] <= hi:
                                covered = True
                    if covered:
                        keep = []
                        for h in lst:
                            g = h[1]
                            if p0 <= g[0] and g[1] <= p1 and lo <= g[2] and g[3] <= hi:
                                if keep_log:
                                    pruned.append((b, h))
                            else:
                                keep.append(h)
                        hist[b] = keep
        for r, w, bs in accesses:
            entry = (ins, r, w)
            hist = self.history[w]
            for b in bs:
                lst = hist.get(b)
                if lst is None:
                    hist[b] = [entry]
                else:
                    lst.append(entry)
                if keep_log:
                    added.append((b, entry))
        ins.pruned = (pruned, added) if keep_log else None
        ins.index = len(self.instrs)
        self.instrs.append(ins)

    # ------------------------------------------------------------ replay

    def replayable(self):
        """The first pass can become the program without running the kernel
        again: one core, one rank, results reused (nothing to spill)."""
        return self.recording and self.cse and self.lnc_rank is None and self.cc_rank is None and \
            self.last_peer is None and not self.scalar_regs and not self.marks

    def replay(self):
        """Turns this first pass into what the second would trace, without
        running the kernel body again: the allocations and drops it logged
        are made again in the same order with the real capacities, freeing
        each tile once its last instruction is behind (as the second pass's
        allocate() does), which gives every tile the address the second
        pass would give it; then the instructions get their addresses and
        their dependencies in program order.  False (and this trace left
        as it was) when a tile does not fit: then the second pass runs, and
        spills or reports the overflow."""
        sbuf_cap, psum_cap, bank = self.geometry
        alloc = type(self.sbuf)            # tracer.Allocator
        allocators = {"sbuf": alloc("sbuf", sbuf_cap), "psum": alloc("psum", psum_cap, bank)}
        base, shift, freed, heap, size_of = {}, {}, set(), [], {}

        plan = FixedPlan(self) if self.fixed else None

        def release(aid):
            if aid in self.fixed:
                return
            if aid not in freed:
                freed.add(aid)
                space, size = size_of[aid]
                allocators[space].release(base[aid], size)
        for ev in self.alloc_log:
            if len(ev) == 1:
                release(ev[0])
                continue
            aid, space, size, banks, now, what, first_off = ev
            if aid in self.fixed:
                base[aid], shift[aid] = self.fixed[aid], self.fixed[aid] - first_off
                continue
            while heap and heap[0][0] < now:
                release(heapq.heappop(heap)[1])
            off = allocators[space].try_alloc(size, what, banks, plan.avoid(aid, space) if plan else ())
            if off is None:
                return False
            base[aid], shift[aid], size_of[aid] = off, off - first_off, (space, size)
            heapq.heappush(heap, (self.uses.get(aid, -1), aid))

        def text(s):
            return _TOKEN.sub(lambda m: _offset_text(base[int(m.group(1))] + int(m.group(2))), s) \
                if "\0" in s else s
        instrs, self.instrs, self.history, self.recording = self.instrs, [], ({}, {}), False
        for ins in instrs:
            # (the regions keep their first-pass addresses: past here only
            # their sizes count, schedule.py's)
            ins.text = text(ins.text)
            self.link(ins, shift)
        self.dmas = [(text(d), text(src), mode) for d, src, mode in self.dmas]
        return True
