"""Spilling, as the hardware compiler does it: when the live SBUF tiles do
not fit, tiles go to HBM (or nowhere, when a load brought them and they
are unchanged) and come back before or at their next use, chosen from
every tile's remaining uses, which the first tracing pass recorded; when
the live PSUM tiles do not fit, tiles go to SBUF the same way.  Trace
(tracer.py) takes these methods from Spilling."""
from __future__ import annotations

import bisect
import weakref

from .dtype_keys import SIZES

from . import tracer
from .allocator import _without
from .placement import Region


# PSUM tiles are copied out to SBUF and back by this engine (SDK
# trainium2_arch.rst: TensorE results need "ScalarE/VectorE to evict the
# transposed output from PSUM back to SBUF"; DMAs do not read PSUM since
# NKI 0.3, nki/migration)
PSUM_SPILL_ENGINE = "vector"


class Spilling:
    def room_for(self, alloc, size, what, banks=1, aid=None):
        """The offset of `size` bytes per partition in `alloc` (at most
        `banks` PSUM banks) for allocation aid: free room clear of the
        kernel's placed tiles alive meanwhile, else room made by spilling."""
        avoid = self.avoid(aid, alloc.space)
        off = alloc.try_alloc(size, what, banks, avoid)
        return off if off is not None else self.make_room(alloc, size, what, banks, avoid)

    def make_room(self, alloc, size, what, banks=1, avoid=()):
        """SBUF full: as the hardware compiler does (the published Mamba
        profiles show its qSyncSpillReload / qScalarSpillReload DMA queues,
        SDK nki/guides/tutorials/fused_mamba.rst), live tiles go to HBM to
        free `size` contiguous bytes per partition -- the window room()
        picks from every tile's remaining uses (the whole program is known,
        as it is to a compiler: the first pass recorded every use), which
        keeps a loop's working set from thrashing as least-recently-used
        would; a copy of
        what a load brought costs no store (see note_load); a spilled tile
        returns before its next use (prefetch) or at it (access).  Only in
        the second pass of a kernel traced as written: with results kept for
        reuse an overflow means tracing again without them (Kernel.trace).
        PSUM full: tiles of one bank go to SBUF the same way (psum_spill).
        banks: PSUM banks the new tile may take."""
        if self.recording or self.cse:
            tracer.fail(alloc.overflow(size, what, avoid))
        now = len(self.instrs) - self.n_spill_instrs
        psum = alloc is self.psum
        best = self.room(size, now, (lambda a: a.size <= alloc.bank) if psum else (lambda a: True), alloc, avoid)
        if best is None:
            tracer.fail(alloc.overflow(size, what, avoid) + " (no tile left to spill: the instruction's own operands "
                        "do not fit)")
        for a in best[1]:
            self.psum_spill(a) if psum else self.spill(a)
        off = alloc.try_alloc(size, what, banks, avoid)
        if off is None:
            tracer.fail(alloc.overflow(size, what, avoid))
        return off

    def room(self, size, now, may_evict, alloc=None, avoid=()):
        """(The soonest next use among them, the resident tiles) to evict
        for `size` contiguous bytes per partition, or None: those of the
        window of SBUF whose tiles have the fewest uses left (what evicting
        them costs in loads again), then whose soonest-needed tile is needed
        furthest ahead, then the fewest bytes, then the lowest address.
        Windows rather than tile by tile: a tile needs one contiguous range,
        and evicting scattered small tiles frees bytes but no room.  Fewest
        uses first: a compiler keeps the data a loop reuses most on chip and
        streams the rest -- the published matmul v4 profile (SDK
        kernel-optimization tutorial, CALIBRATION C-11: MBU 42.55% over
        28.42 ms against v3's 43.87% over 28.20 ms) moves 97.7% of v3's
        bytes: its lhsT block stays while its rhs block, too big to keep
        with it, is loaded again for each lhsT tile that uses it.  Furthest
        next use alone evicts the lhsT tiles (needed later in each block,
        but in every block) and loads them again and again."""
        alloc = alloc or self.sbuf
        size = alloc.rounded(size)
        inf = float("inf")
        # (ranges in `avoid` are neither free nor to be made free)
        segs = [(off, off + n, None, inf, 0) for off, n in (_without(alloc.free, avoid, alloc.bank) if avoid
                                                             else alloc.free)]
        for aid, ref in self.live.items():
            a = ref()
            if a is None or a.space != alloc.space or a.offset is None:
                continue
            end = a.offset + alloc.rounded(a.size)
            if aid in self.pinned or not may_evict(a):
                segs.append((a.offset, end, False, 0, 0))
                continue
            seq = self.use_seq.get(aid, ())
            k = bisect.bisect_left(seq, now)
            segs.append((a.offset, end, a, seq[k] if k < len(seq) else inf, len(seq) - k))
        segs.sort(key=lambda g: g[0])
        best, n, most = None, len(segs), inf      # most: the best window's uses so far
        for i in range(n):
            start = segs[i][0]
            if segs[i][2] is False:
                continue
            end, soon, nbytes, uses, j = start, inf, 0, 0, i
            while j < n and end - start < size and uses <= most:
                s0, s1, a, nu, ul = segs[j]
                if a is False or s0 > end:
                    break                   # not evictable, or not tracked
                if a is not None:
                    soon, nbytes, uses = min(soon, nu), nbytes + s1 - s0, uses + ul
                end, j = s1, j + 1
            if end - start < size or not nbytes or uses > most:
                continue
            key = (-uses, soon, -nbytes, -start)
            if best is None or key > best[0]:
                best, most = (key, i, j), uses
        if best is None:
            return None
        return best[0][1], [g[2] for g in segs[best[1]:best[2]] if g[2] is not None]

    def next_use(self, aid, now):
        """The first-pass instruction count of allocation aid's next use at
        or after now (infinity: none)."""
        seq = self.use_seq.get(aid, ())
        k = bisect.bisect_left(seq, now)
        return seq[k] if k < len(seq) else float("inf")

    def _spill_dma(self, dst, src, reads, writes):
        w = writes[0]
        if w[0] == "hbm":
            self.spill_bytes[0] += w[5] - w[4]
        else:
            self.spill_bytes[1] += (w[5] - w[4]) * (w[3] - w[2])
        idx = self.add_dma(dst, src, "direct")
        self.emit("sync", f"dma_copy desc=d{idx}", reads, writes, dma=idx, spill=True)
        self.n_spill_instrs += 1

    def _spill_aps(self, a, name):
        sb = f"sbuf:uint8[0:{a.nparts}]" + (f"+{a.offset}" if a.offset else "") + f"{{1x{a.size}}}"
        hbm = f"hbm({name}):uint8[{a.size}x{a.nparts}]{{1x{a.size}}}"
        return sb, hbm, Region(("sbuf", 0, 0, a.nparts, a.offset, a.offset + a.size), a.id), \
            ("hbm", name, 0, 1, 0, a.nparts * a.size)

    def note_load(self, a, dst_ap, dst_region, src_ap, src_region, index):
        """A DMA (instruction `index`) filled all of allocation a from HBM:
        while nothing else writes it, evicting it needs no spill store -- it
        is loaded again from the same place, as a compiler rematerializes a
        value it can recompute."""
        if dst_region[2] != 0 or dst_region[3] != a.nparts or dst_region[4] != a.offset or \
                dst_region[5] - dst_region[4] < a.size:
            return
        head, dims = dst_ap[:dst_ap.index("]") + 1], dst_ap[dst_ap.index("{"):]
        a.source = (src_ap, src_region, head, dims, dst_region[4] - a.offset, index)

    def spill(self, a):
        """Tile a's bytes to an HBM tensor of its own (or nowhere, when it
        still holds what one load brought: see note_load); its SBUF is freed."""
        self._not_in_loop("SBUF")
        if self.pristine(a):
            last = self.instrs[-1] if self.instrs else None
            if last is not None and last.index == a.source[5] and last.dma == len(self.dmas) - 1 and \
                    not (self.marks and self.marks[-1][0] > last.index):
                # loaded by the instruction just traced and not used yet: the
                # compiler would not load it now at all -- take the load and
                # its descriptor back (DMA numbers stay dense); it is loaded
                # when it is needed, still a copy of its source
                self.retract_last()
                self.dmas.pop()
                self.n_spill_instrs -= 1
                self.last_write[a.id] = a.source[5]
            self._evict(a, a.source)
            return
        name = self.unique("spill")
        off = (self.scratch + 63) // 64 * 64
        self.spills.append((name, a.nparts, a.size, off))
        self.scratch = off + a.nparts * a.size
        sb, hbm, reg, hreg = self._spill_aps(a, name)
        self._spill_dma(hbm, sb, [reg], [hreg])
        self._evict(a, name)

    def _evict(self, a, where):
        """a's SBUF is freed; `where` says how it comes back: its spill
        tensor's name, or its source (note_load's tuple) to load again."""
        a.free.detach()
        self.sbuf.release(a.offset, a.size)
        self.live.pop(a.id, None)
        a.spilled, a.offset = where, None
        self.away[a.id] = a

    # ------------------------------------------------------------ PSUM

    def _not_in_loop(self, what):
        """Spills and reloads are traced where the need arises; in a run-time
        loop they would run every iteration (or, with no iteration, never)
        while the tile's place changed once, so they are refused."""
        if self.dyn_loops:
            from .tracer import fail
            fail(f"{what} overflow around a run-time loop ({self.dyn_loops[-1].line}): the simulator does not "
                 "spill or reload tiles inside one; the tiles live in and across the loop must fit")

    def psum_spill(self, a):
        """PSUM tile a (one bank at most) to an SBUF copy of its bytes, by
        PSUM_SPILL_ENGINE in its own dtype (a copy the engine does not
        round); its PSUM is freed.  The copy is an SBUF tile like any other
        (no uses of its own: the first to go to HBM when SBUF is short).  A
        tile nothing has written yet needs no copy.  Its open accumulation
        groups are kept, relative to the tile, and reopen where it comes
        back (psum_reload): a matmul continuing the group adds onto the
        partial sums, as it would have."""
        self._not_in_loop("PSUM")
        copy = None
        if a.id in self.last_write:
            off = self.room_for(self.sbuf, a.size, a.name, aid=a.id)
            copy = tracer.Allocation("sbuf", a.nparts, off, a.size, f"{a.name} (PSUM spill)")
            self.n_copies += 1
            copy.id = -self.n_copies          # no id of the first pass's: no recorded uses
            copy.free = weakref.finalize(copy, self.sbuf.release, off, a.size)
            self.live[copy.id] = weakref.ref(copy)      # evictable; never freed as dead
            self._psum_copy(a, a.offset, copy, out=True)
        a.groups_away = {(g[2], g[3], g[4] - a.offset, g[5] - a.offset) for g in a.open_groups}
        a.open_groups = set()
        self.open_regions.discard(a)
        a.free.detach()
        self.psum.release(a.offset, a.size)
        self.live.pop(a.id, None)
        a.spilled, a.offset = ("psum", copy), None
        self.away[a.id] = a

    def psum_reload(self, a):
        """Spilled PSUM tile a back into PSUM (its SBUF copy back from HBM
        first if it went there), the copy freed."""
        off = self.room_for(self.psum, a.size, a.name, aid=a.id)
        copy = a.spilled[1]
        self.away.pop(a.id, None)
        a.spilled, a.offset = None, off
        a.free = weakref.finalize(a, self.psum.release, off, a.size)
        self.add_live(a)
        if copy is not None:
            self.pinned.add(a.id)
            if copy.spilled is not None:
                self.reload(copy)
            self._psum_copy(a, off, copy, out=False)
            self.live.pop(copy.id, None)
            copy.free()
        a.open_groups = {Region(("psum", 0, p0, p1, off + lo, off + hi), a.id) for p0, p1, lo, hi in a.groups_away}
        if a.open_groups:
            self.open_regions.add(a)

    def _psum_copy(self, a, psum_off, copy, out):
        """The engine copy of PSUM tile a's bytes (at psum_off) to its SBUF
        copy, or back (out False): as a.dtype elements, so the value is
        copied, not converted."""
        n = a.size // SIZES[a.dtype]
        ps = Region(("psum", 0, 0, a.nparts, psum_off, psum_off + a.size), a.id)
        sb = Region(("sbuf", 0, 0, a.nparts, copy.offset, copy.offset + a.size), copy.id)
        ap = lambda space, off: f"{space}:{a.dtype}[0:{a.nparts}]" + (f"+{off}" if off else "") + f"{{1x{n}}}"  # noqa: E731
        src, dst = (ps, sb) if out else (sb, ps)
        text = f"tensor_copy dst={ap(dst[0], dst[4])} src={ap(src[0], src[4])}"
        self.emit(PSUM_SPILL_ENGINE, text, [src], [dst], closes_groups=False, spill=True)
        self.n_spill_instrs += 1

    def reload(self, a, off=None):
        """A spilled tile back into SBUF (at `off`, else wherever there is room)."""
        self._not_in_loop("SBUF")
        if a.space == "psum":
            return self.psum_reload(a)
        if off is None:
            off = self.room_for(self.sbuf, a.size, a.name, aid=a.id)
        self.away.pop(a.id, None)
        name, a.spilled, a.offset = a.spilled, None, off
        a.free = weakref.finalize(a, self.sbuf.release, off, a.size)
        self.add_live(a)
        if isinstance(name, tuple):       # loaded again from its source
            src_ap, src_region, head, dims, rel, _ = name
            byte = off + rel
            reg = Region(("sbuf", 0, 0, a.nparts, off, off + a.size), a.id)
            self._spill_dma(head + (f"+{byte}" if byte else "") + dims, src_ap, [src_region], [reg])
            return
        sb, hbm, reg, hreg = self._spill_aps(a, name)
        self._spill_dma(sb, hbm, [hreg], [reg])

    def pristine(self, a):
        """Allocation a still holds what one load brought (evicting it
        needs no store)."""
        return a.source is not None and self.last_write.get(a.id) == a.source[5]

    def prefetch(self, now):
        """Tiles evicted as copies of what a load brought (see note_load)
        come back as early as they can: the one needed soonest is loaded
        again now, into free room or in place of resident copies needed
        later -- the load then overlaps the work before its use, as a
        compiler pipelines its loads instead of issuing each at its use.  A
        tile spilled with a store comes back at its use only (brought back
        early it tends to be evicted again: a store and a reload for
        nothing), and so does one that would be needed later than every
        resident tile.  Not inside a run-time loop: a reload there would run
        every iteration, or never."""
        if self.dyn_loops:
            return
        while self.away:
            u, aid = min(((self.next_use(i, now), i) for i, x in list(self.away.items())
                          if x.space == "sbuf" and isinstance(x.spilled, tuple)), default=(float("inf"), None))
            a = self.away.get(aid)
            if a is None or u == float("inf"):
                return
            if not any(self.next_use(i, now) > u for i, ref in self.live.items()
                       if i not in self.pinned and getattr(ref(), "space", None) == "sbuf"):
                return
            avoid = self.avoid(a.id, "sbuf")
            off = self.sbuf.try_alloc(a.size, a.name, avoid=avoid)
            if off is None:
                best = self.room(a.size, now, self.pristine, avoid=avoid)
                if best is None or best[0] <= u:
                    return              # only for tiles needed later than a
                for t in best[1]:
                    self.spill(t)
                off = self.sbuf.alloc(a.size, a.name, avoid)
            self.reload(a, off)

