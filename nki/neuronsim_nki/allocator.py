"""SBUF / PSUM byte ranges per partition: first (next) fit over a sorted
free list, PSUM by bank, ranges a kernel placed itself taken out
(reserve).  The tracer (tracer.Trace) and its replay (placement.py) each
keep one per memory."""
from __future__ import annotations

import bisect

from . import tracer


class Allocator:
    """First fit over per-partition byte ranges; PSUM by 2 KiB bank."""

    def __init__(self, space, capacity, bank=None):
        self.space, self.capacity, self.bank = space, capacity, bank
        self.free = [(0, capacity)]
        self.cursor = 0     # next fit: a freed region is reused last, which
                            # buffers loads ahead the way a compiler's
                            # multi-buffering does

    def rounded(self, size):
        """Bytes per partition an allocation of `size` takes: whole PSUM
        banks, or 64-byte units of SBUF."""
        size = max(size, 1)
        return -(-size // self.bank) * self.bank if self.bank else (size + 63) // 64 * 64

    def alloc(self, size, what, avoid=()):
        off = self.try_alloc(size, what, avoid=avoid)
        if off is None:
            tracer.fail(self.overflow(size, what, avoid))
        return off

    def overflow(self, size, what, avoid=()):
        size = self.rounded(size)
        used = self.capacity - sum(n for _, n in self.free)
        unit = "banks" if self.bank else "bytes per partition"
        have = (used // self.bank, self.capacity // self.bank) if self.bank else (used, self.capacity)
        placed = ""
        if avoid:
            held = self.capacity - sum(n for _, n in _without([(0, self.capacity)], avoid, self.bank))
            placed = (f", and {held // self.bank if self.bank else held} {unit} held during the tile's life by "
                      "tiles the kernel placed itself (address=)")
        return (f"{what}: {self.space.upper()} overflow: {size} more bytes per partition needed, "
                f"{have[0]} of {have[1]} {unit} in use{placed}")

    def try_alloc(self, size, what, banks=1, avoid=()):
        """The offset of `size` bytes per partition, or None when no free
        range holds them.  PSUM: `banks` consecutive banks at most (a tile
        with block dimensions takes one bank per block).  avoid: (offset,
        size) ranges the tile must not overlap although they are free now
        (tiles the kernel places itself later in the new tile's life)."""
        if self.bank and size > self.bank * banks:
            tracer.fail(f"{what}: {size} bytes per partition do not fit a PSUM bank ({self.bank} bytes: "
                 f"at most {self.bank // 4} fp32 elements per partition)")
        size = self.rounded(size)
        free, cursor = _without(self.free, avoid, self.bank) if avoid else self.free, self.cursor
        # blocks ending past the cursor first, then the rest, each by offset
        # (the list is sorted, so their ends increase)
        first = 0
        while first < len(free) and free[first][0] + free[first][1] <= cursor:
            first += 1
        for i in [*range(first, len(free)), *range(first)]:
            off, n = free[i]
            start = off if off >= cursor or off + n <= cursor else cursor
            if off + n - start < size:
                start = off
            if off + n - start >= size:
                self._carve(start, size)
                self.cursor = start + size
                return start
        return None

    def _carve(self, start, size):
        """Takes [start, start + size), inside one free block, out of it."""
        free = self.free
        i = bisect.bisect_right(free, (start, float("inf"))) - 1
        off, n = free[i]
        pieces = []
        if start > off:
            pieces.append((off, start - off))
        if start + size < off + n:
            pieces.append((start + size, off + n - start - size))
        free[i:i + 1] = pieces

    def reserve(self, off, size):
        """Takes [off, off + size) out of the free list, wherever it is free
        (the kernel placed tiles there itself: nl.ndarray(address=))."""
        end, out = off + size, []
        for o, n in self.free:
            if o + n <= off or o >= end:
                out.append((o, n))
                continue
            if o < off:
                out.append((o, off - o))
            if o + n > end:
                out.append((end, o + n - end))
        self.free = out

    def release(self, off, size):
        """The free list stays sorted by offset with neighbours merged."""
        size = self.rounded(size)
        free = self.free
        i = bisect.bisect_left(free, (off, size))
        if i < len(free) and off + size == free[i][0]:
            size += free[i][1]
            del free[i]
        if i > 0 and free[i - 1][0] + free[i - 1][1] == off:
            free[i - 1] = (free[i - 1][0], free[i - 1][1] + size)
        else:
            free.insert(i, (off, size))


def _without(free, avoid, bank=None):
    """The free blocks with the `avoid` ranges taken out (for PSUM, whole
    banks: a tile takes whole banks, so a bank a placed tile touches is not
    free for one)."""
    cut = []
    for off, n in avoid:
        if bank:
            off, n = off // bank * bank, -(-(off + n) // bank) * bank - off // bank * bank
        cut.append((off, off + n))
    cut.sort()
    out = []
    for off, n in free:
        start, end = off, off + n
        for c0, c1 in cut:
            if c1 <= start or c0 >= end:
                continue
            if c0 > start:
                out.append((start, c0 - start))
            start = max(start, c1)
            if start >= end:
                break
        if start < end:
            out.append((start, end - start))
    return out


class FixedPlan:
    """What the first pass learnt of the tiles a kernel placed itself
    (nl.ndarray(address=)): per memory, each distinct range and when tiles
    placed there are alive (from creation to last use, in first-pass
    instruction counts; a placed tile read before it is written holds the
    bytes from the previous tile there on, whose contents it takes over).
    A tile the allocator places keeps clear of a range only while a placed
    tile there is alive during its own life --
    as the NKI compiler's allocator works around the kernel's placements by
    live range -- not for the whole kernel: nki-library's transformer_tkg
    runs sub-kernels that each place PSUM tiles in banks of their own
    choosing, which together cover every bank."""

    def __init__(self, trace):
        spans = {}
        for aid, space, _size, _banks, now, _what, _off in (e for e in trace.alloc_log if len(e) > 1):
            if aid not in trace.fixed:
                continue
            rng = (trace.fixed[aid], trace.fixed_size[aid])
            seq = trace.use_seq.get(aid)
            lives = spans.setdefault(space, {}).setdefault(rng, [])
            start = now
            if aid in trace.fixed_read_first and lives:
                # read before written: it takes over what the previous tile
                # at these bytes left there, so the bytes stay held between
                start = lives[-1][0]
            lives.append((start, seq[-1] if seq else now))
        self.spans = {space: [(rng, _merged(iv)) for rng, iv in sorted(by.items())] for space, by in spans.items()}
        self.alloc_at, self.uses = trace.alloc_at, trace.uses
        self.memo = {}

    def avoid(self, aid, space):
        """The placed ranges of `space` alive during allocation aid's life."""
        key = (aid, space)
        hit = self.memo.get(key)
        if hit is None:
            t0 = self.alloc_at.get(aid)
            t1 = max(self.uses.get(aid, -1), t0 if t0 is not None else -1)
            hit = tuple(rng for rng, iv in self.spans.get(space, ())
                        if t0 is None or _overlaps(iv, t0, t1))
            self.memo[key] = hit
        return hit


def _merged(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _overlaps(merged, t0, t1):
    """Does [t0, t1] meet one of the sorted disjoint intervals?"""
    i = bisect.bisect_right(merged, (t1, float("inf"))) - 1
    return i >= 0 and merged[i][1] >= t0
