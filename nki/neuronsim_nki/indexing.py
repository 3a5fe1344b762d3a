"""NKI indexing while tracing: index expressions over nl.arange / nl.mgrid
(Index, GridExpr, their affine forms), masks that bound them, and the
normalization of subscripts (integers, slices, expressions) into per-axis
(start, step, size, keep).  tensor.py applies them to views."""
from __future__ import annotations

import numpy as np

import operator

from .tracer import fail


class _Comparable:
    """Comparisons of index expressions make predicates: masks
    (`mask=(i * 128 + ix < n)` for a partial last tile) and affine_select's
    conditions (`i_q - i_k >= 0`)."""

    def __lt__(self, k):
        return Mask(self, "<", k)

    def __le__(self, k):
        return Mask(self, "<=", k)

    def __gt__(self, k):
        return Mask(self, ">", k)

    def __ge__(self, k):
        return Mask(self, ">=", k)


def as_int(k):
    """k as a Python int when it is an integer (int, NumPy integer, a
    register value known while tracing), else None."""
    if isinstance(k, bool):
        return None
    if isinstance(k, int):
        return k
    try:
        return operator.index(k)
    except TypeError:
        return None


class Index(_Comparable):
    """An affine index over one tensor axis: start + stride * arange(size),
    laid along output axis `axis` of an index grid (nl.arange(n)[:, None] is
    axis 0 of a 2-D grid)."""

    def __init__(self, size, start=0, stride=1, axis=None, ndim=1):
        self.size, self.start, self.stride, self.axis, self.ndim = size, start, stride, axis, ndim

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        axes = [i for i, k in enumerate(key) if k is None]
        if len(key) - len(axes) != 1:
            fail("index expressions take [:, None] / [None, :] style subscripts")
        axis = [i for i, k in enumerate(key) if k is not None][0]
        return Index(self.size, self.start, self.stride, axis, len(key))

    def _affine(self, scale=1, shift=0):
        return Index(self.size, self.start * scale + shift, self.stride * scale, self.axis, self.ndim)

    def terms(self):
        return [(self.axis if self.axis is not None else 0, self.stride, self.size)], self.start

    def __add__(self, k):
        if isinstance(k, (Index, GridExpr)):
            return GridExpr.of(self) + k
        if as_int(k) is None:
            fail("only integers and index expressions can be added to an index expression")
        return self._affine(1, as_int(k))

    __radd__ = __add__

    def __sub__(self, k):
        if isinstance(k, (Index, GridExpr)):
            return GridExpr.of(self) + (k * -1)
        return self.__add__(-k)

    def __rsub__(self, k):
        return GridExpr.of(self) * -1 + k

    def __neg__(self):
        return self._affine(-1, 0)

    def __mul__(self, k):
        if as_int(k) is None:
            fail("index expressions scale by integers only")
        return self._affine(as_int(k), 0)

    __rmul__ = __mul__


class GridExpr(_Comparable):
    """An affine combination of several axes of one index grid, e.g.
    i_f1 * F2 + i_f2 from nl.mgrid: one tensor axis walked as several
    access-pattern dimensions."""

    def __init__(self, terms, offset=0):
        self._terms, self.offset = list(terms), offset

    @staticmethod
    def of(x):
        t, off = x.terms()
        return GridExpr(t, off)

    def terms(self):
        return self._terms, self.offset

    def __add__(self, k):
        if as_int(k) is not None:
            return GridExpr(self._terms, self.offset + as_int(k))
        if isinstance(k, (Index, GridExpr)):
            t, off = k.terms()
            return GridExpr(self._terms + t, self.offset + off)
        fail("index expressions add integers and index expressions only")

    __radd__ = __add__

    def __mul__(self, k):
        if as_int(k) is None:
            fail("index expressions scale by integers only")
        k = as_int(k)
        return GridExpr([(a, s * k, n) for a, s, n in self._terms], self.offset * k)

    __rmul__ = __mul__

    def __sub__(self, k):
        if as_int(k) is not None:
            return self + (-as_int(k))
        return self + (k * -1)

    def __rsub__(self, k):
        return (self * -1) + k

    def __neg__(self):
        return self * -1


def affine_form(expr):
    """An index expression as {grid axis: coefficient}, offset, {grid axis: size}."""
    if isinstance(expr, Index):
        expr = GridExpr.of(expr)
    if not isinstance(expr, GridExpr):
        fail(f"expected an index expression over nl.arange / nl.mgrid, got {expr!r}")
    coef, sizes = {}, {}
    for a, st, n in expr.terms()[0]:
        coef[a] = coef.get(a, 0) + st
        sizes[a] = n
    return coef, expr.offset, sizes


class Mask:
    """A predicate on index expressions, as NKI's mask= arguments take."""

    never = False                  # anded with a false condition: keeps nothing

    def __init__(self, index, op, bound):
        self.terms = [(index, op, bound)]

    def __and__(self, other):
        m = Mask.__new__(Mask)
        if isinstance(other, (bool, np.bool_)):
            # a condition on loop indices alone, an int comparison while
            # tracing ((2 * i + g) * 128 < n)
            m.terms, m.never = list(self.terms), self.never or not other
            return m
        if not isinstance(other, Mask):
            return NotImplemented
        m.terms, m.never = self.terms + other.terms, self.never or other.never
        return m

    __rand__ = __and__

    def box(self, sizes):
        """The positions an access of shape `sizes` keeps under the mask, as
        per axis (lo, hi): each term bounds one axis of the index grid (axis
        a of the grid is axis a of the access), `start + stride *
        nl.arange(n)` compared with an integer, from above or below; terms
        combine with &."""
        if self.never:
            return [(0, 0) for _ in sizes]
        box = [[0, n] for n in sizes]
        flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
        for idx, op, bound in self.terms:
            b = as_int(bound)
            if b is None:
                fail(f"a mask compares an index expression with an integer, not {bound!r}")
            coef, off, _ = affine_form(idx)
            axes = [a for a, c in coef.items() if c]
            if len(axes) != 1:
                fail("each mask term bounds one index axis (start + stride * nl.arange(n) < bound)")
            a, c = axes[0], coef[axes[0]]
            if a >= len(sizes):
                fail(f"a mask on axis {a} of the index grid, for an access of rank {len(sizes)}")
            if c < 0:
                c, off, b, op = -c, -off, -b, flip[op]
            # c * k + off OP b, c > 0
            if op == "<":
                box[a][1] = min(box[a][1], -(-(b - off) // c))
            elif op == "<=":
                box[a][1] = min(box[a][1], (b - off) // c + 1)
            elif op == ">":
                box[a][0] = max(box[a][0], (b - off) // c + 1)
            else:
                box[a][0] = max(box[a][0], -(-(b - off) // c))
        out = []
        for (lo, hi), n in zip(box, sizes):
            lo = min(max(lo, 0), n)
            out.append((lo, max(lo, min(hi, n))))
        return out


def _permuted_grid(keys):
    """The subscripts are index-grid axes taken out of order -- out[i, ip, if]
    with if on tensor axis 1 and ip (grid axis 0) on axis 2: the view's
    dimensions follow the grid's axes (a transposing access), as in
    _grid_view."""
    if len(keys) < 2:
        return False
    axes = [k.axis for k in keys if type(k) is Index and k.axis is not None and k.ndim > 1]
    return len(axes) > 1 and axes != sorted(axes) and all(
        isinstance(k, (Index, int)) and not isinstance(k, bool) for k in keys)


def normalize(key, shape, overrun=None):
    """Subscripts -> per axis (start, stride, size, keep): keep False for an
    integer (the axis is dropped)."""
    key = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in key):
        i = [j for j, k in enumerate(key) if k is Ellipsis][0]
        fill = len(shape) - (len(key) - 1)
        key = key[:i] + (slice(None),) * max(fill, 0) + key[i + 1:]
    if len(key) > len(shape):
        fail(f"{len(key)} subscripts for a tensor of rank {len(shape)}")
    out = []
    for ax, k in enumerate(key):
        n = shape[ax]
        if isinstance(k, Index):
            lo, hi = k.start, k.start + k.stride * (k.size - 1)
            msg = f"index on axis {ax} reaches [{min(lo, hi)}, {max(lo, hi)}], outside [0, {n})"
            if overrun is not None and k.stride > 0 and 0 <= lo < n <= hi:
                # an axis may run past the end under a mask: keep what lies
                # inside, remember what was asked (the DMA checks the mask)
                overrun.append((ax, k.size, msg))
                out.append((k.start, k.stride, (n - lo + k.stride - 1) // k.stride, True))
                continue
            if overrun is not None and k.stride > 0 and lo >= n:
                # wholly past the end: nothing inside, which only a mask
                # keeping nothing there lets through (a false condition on
                # loop indices: allocated_fused_linear's last tiles)
                overrun.append((ax, k.size, msg))
                out.append((0, k.stride, 0, True))
                continue
            if min(lo, hi) < 0 or max(lo, hi) >= n:
                fail(msg)
            out.append((k.start, k.stride, k.size, True))
        elif isinstance(k, slice):
            lo, hi, st = k.indices(n)
            if st <= 0:
                fail("negative slice steps are not supported")
            size = max(0, (hi - lo + st - 1) // st)
            if k.stop is not None and k.stop > n:
                msg = f"slice {k.start}:{k.stop} on axis {ax} is outside [0, {n})"
                start = k.start if k.start is not None else 0
                if overrun is None or not 0 <= start < n:
                    fail(msg)
                overrun.append((ax, (k.stop - start + st - 1) // st, msg))
            out.append((lo, st, size, True))
        elif isinstance(k, int):
            if not -n <= k < n:
                fail(f"index {k} on axis {ax} is outside [0, {n})")
            out.append((k % n, 1, 1, False))
        else:
            fail(f"unsupported subscript {k!r} (integers, slices and nl.arange expressions)")
    for ax in range(len(key), len(shape)):
        out.append((0, 1, shape[ax], True))
    return out
