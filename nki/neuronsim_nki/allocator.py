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

    def alloc(self, size, what):
        off = self.try_alloc(size, what)
        if off is None:
            tracer.fail(self.overflow(size, what))
        return off

    def overflow(self, size, what):
        size = self.rounded(size)
        used = self.capacity - sum(n for _, n in self.free)
        unit = "banks" if self.bank else "bytes per partition"
        have = (used // self.bank, self.capacity // self.bank) if self.bank else (used, self.capacity)
        return (f"{what}: {self.space.upper()} overflow: {size} more bytes per partition needed, "
                f"{have[0]} of {have[1]} {unit} in use")

    def try_alloc(self, size, what, banks=1):
        """The offset of `size` bytes per partition, or None when no free
        range holds them.  PSUM: `banks` consecutive banks at most (a tile
        with block dimensions takes one bank per block)."""
        if self.bank and size > self.bank * banks:
            tracer.fail(f"{what}: {size} bytes per partition do not fit a PSUM bank ({self.bank} bytes: "
                 f"at most {self.bank // 4} fp32 elements per partition)")
        size = self.rounded(size)
        free, cursor = self.free, self.cursor
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
                # carve [start, start + size) out of the block
                pieces = []
                if start > off:
                    pieces.append((off, start - off))
                if start + size < off + n:
                    pieces.append((start + size, off + n - start - size))
                free[i:i + 1] = pieces
                self.cursor = start + size
                return start
        return None

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
