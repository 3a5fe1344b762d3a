"""NkiTensor's view methods (SDK nki.language.NkiTensor, NKI 0.5: "zero-cost
tensor layout transformations"): permute, broadcast, expand_dim,
squeeze_dim, reshape_dim, flatten_dims, rearrange, slice, select,
get_pattern, is_contiguous, is_indirect.  Each returns a new view -- shape,
strides and offset over the same storage -- and moves no data.  On chip the
partition dimension stays first (the SDK's constraint); tiles with block
dimensions before their partition dimension are refused by name.

Tensor inherits TensorViews; the methods build views with type(self), so
this module does not import tensor.py."""
from __future__ import annotations

import math

from .tracer import fail


class TensorViews:
    __slots__ = ()

    # ------------------------------------------------------------ helpers

    def _view_of(self, what, shape, strides, offset=None):
        """A view of this tensor's storage (tile: its allocation, first
        partition and partition count) with another free layout."""
        if getattr(self, "gather", None) is not None or getattr(self, "dyn", None) is not None:
            fail(f"tensor.{what}: the view is indirect (vector_offset / scalar_offset); view the tensor first, "
                 "then index it")
        self.materialize()
        off = self.offset if offset is None else offset
        if self.space == "hbm":
            return type(self)("hbm", self.dtype, tuple(shape), tuple(strides), off, self.name)
        return type(self)(self.space, self.dtype, tuple(shape), tuple(strides), off, self.name, self.alloc,
                          self.part0, 0)

    def _dim(self, what, dim, extra=0):
        """dim as an index of this view (extra: one past the end allowed);
        on chip, never the partition dimension"""
        n = len(self.shape) + extra
        if isinstance(dim, bool) or not isinstance(dim, int) or not -n <= dim < n:
            fail(f"tensor.{what}: dim {dim!r} of a {len(self.shape)}-D tensor")
        dim %= n
        if self.space != "hbm":
            if self.pax != 0:
                fail(f"tensor.{what}: a tile whose partition dimension is not first (block dimensions before "
                     "nl.par_dim): index its block first")
            if dim == 0:
                fail(f"tensor.{what}: dim 0 of an on-chip tensor is its partition dimension, which stays first")
        return dim

    # ------------------------------------------------------------ queries

    def get_pattern(self):
        """[[stride, count], ...] per dimension, as .ap(pattern=) takes it:
        on chip the first pair walks the partitions ([elements per
        partition, partitions])."""
        if self.space == "hbm":
            return [[int(st), int(n)] for st, n in zip(self.strides, self.shape)]
        if self.pax != 0:
            fail("tensor.get_pattern: a tile whose partition dimension is not first (block dimensions before "
                 "nl.par_dim): index its block first")
        return [[self.elements_per_partition(), self.shape[0]],
                *([int(st), int(n)] for st, n in zip(self.strides[1:], self.shape[1:]))]

    def is_contiguous(self):
        """Whether the view covers its storage row-major without gaps (on
        chip over the free dimensions of each partition)."""
        acc = 1
        skip = None if self.space == "hbm" else self.pax        # the partition dimension
        for d in range(len(self.shape) - 1, -1, -1):
            if d != skip and self.shape[d] != 1 and self.strides[d] != acc:
                return False
            acc *= self.shape[d] if d != skip else 1
        return True

    def is_indirect(self):
        """Whether the view is addressed indirectly (vector_offset /
        scalar_offset read on the device)."""
        return getattr(self, "gather", None) is not None or getattr(self, "dyn", None) is not None

    # ------------------------------------------------------------ views

    def permute(self, dims):
        """Dimensions in the order dims (a permutation; on chip dims[0] is 0)."""
        dims = tuple(dims)
        if sorted(dims) != list(range(len(self.shape))):
            fail(f"tensor.permute({dims}): a permutation of range({len(self.shape)})")
        if self.space != "hbm" and dims[0] != 0:
            fail(f"tensor.permute({dims}): an on-chip tensor keeps its partition dimension first")
        return self._view_of("permute", [self.shape[d] for d in dims], [self.strides[d] for d in dims])

    def broadcast(self, dim, size):
        """A size-1 dimension repeated `size` times (stride 0)."""
        dim = self._dim("broadcast", dim)
        if self.shape[dim] != 1 or int(size) < 1:
            fail(f"tensor.broadcast({dim}, {size}): dimension {dim} has size {self.shape[dim]}, not 1")
        shape, strides = list(self.shape), list(self.strides)
        shape[dim], strides[dim] = int(size), 0
        return self._view_of("broadcast", shape, strides)

    def expand_dim(self, dim):
        """A new size-1 dimension at position dim."""
        dim = self._dim("expand_dim", dim, 1)
        shape, strides = list(self.shape), list(self.strides)
        shape.insert(dim, 1)
        strides.insert(dim, 0)
        return self._view_of("expand_dim", shape, strides)

    def squeeze_dim(self, dim):
        """Dimension dim (of size 1) removed."""
        dim = self._dim("squeeze_dim", dim)
        if self.shape[dim] != 1:
            fail(f"tensor.squeeze_dim({dim}): dimension {dim} has size {self.shape[dim]}, not 1")
        if len(self.shape) == 2 and self.space != "hbm":
            fail("tensor.squeeze_dim: an on-chip tensor keeps a free dimension")
        return self._view_of("squeeze_dim", self.shape[:dim] + self.shape[dim + 1:],
                             self.strides[:dim] + self.strides[dim + 1:])

    def reshape_dim(self, dim, shape):
        """Dimension dim split into `shape` (one entry may be -1)."""
        shape = [int(s) for s in shape]
        trivial = len(shape) == 1
        dim = self._dim("reshape_dim", dim) if not (trivial and self.space != "hbm" and dim == 0) else 0
        n = self.shape[dim]
        if shape.count(-1) > 1 or any(s < 1 and s != -1 for s in shape):
            fail(f"tensor.reshape_dim({dim}, {tuple(shape)}): sizes >= 1, at most one -1")
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            if known == 0 or n % known:
                fail(f"tensor.reshape_dim({dim}, {tuple(shape)}): {n} does not split so")
            shape[shape.index(-1)] = n // known
        if math.prod(shape) != n:
            fail(f"tensor.reshape_dim({dim}, {tuple(shape)}): the sizes multiply to {math.prod(shape)}, not {n}")
        st, inner = [], self.strides[dim]
        for s in reversed(shape):
            st.insert(0, inner)
            inner *= s
        return self._view_of("reshape_dim", self.shape[:dim] + tuple(shape) + self.shape[dim + 1:],
                             self.strides[:dim] + tuple(st) + self.strides[dim + 1:])

    def flatten_dims(self, start_dim, end_dim):
        """Dimensions start_dim..end_dim (inclusive, contiguous in memory)
        merged into one."""
        a = self._dim("flatten_dims", start_dim)
        b = end_dim % len(self.shape) if isinstance(end_dim, int) and -len(self.shape) <= end_dim < len(self.shape) \
            else None
        if b is None or b < a:
            fail(f"tensor.flatten_dims({start_dim}, {end_dim}): end_dim at or after start_dim")
        dims = [d for d in range(a, b + 1) if self.shape[d] != 1]
        for outer, inner in zip(dims, dims[1:]):
            if self.strides[outer] != self.strides[inner] * self.shape[inner]:
                fail(f"tensor.flatten_dims({start_dim}, {end_dim}): dimensions {a}..{b} are not contiguous in "
                     "memory (a permuted or strided view)")
        stride = self.strides[dims[-1]] if dims else 1
        return self._view_of("flatten_dims", self.shape[:a] + (math.prod(self.shape[a:b + 1]),) + self.shape[b + 1:],
                             self.strides[:a] + (stride,) + self.strides[b + 1:])

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes=None):
        """einops-style: src_pattern names this view's dimensions (a tuple
        of names splits one), dst_pattern orders (and groups, merging) the
        names; fixed_sizes gives split sizes."""
        fixed = dict(fixed_sizes or {})
        src, dst = list(src_pattern), list(dst_pattern)
        if len(src) != len(self.shape):
            fail(f"tensor.rearrange: {len(src)} source names for a {len(self.shape)}-D tensor")
        group = lambda g: list(g) if isinstance(g, (tuple, list)) else [g]   # noqa: E731
        names = [n for g in src for n in group(g)]
        if sorted(names) != sorted(n for g in dst for n in group(g)) or len(set(names)) != len(names):
            fail(f"tensor.rearrange: {src_pattern} and {dst_pattern} must name the same dimensions once each")
        v = self
        for d in range(len(src) - 1, -1, -1):          # split groups, last first: earlier dims keep their index
            g = group(src[d])
            if len(g) > 1:
                v = v.reshape_dim(d, tuple(fixed.get(n, -1) for n in g))
        order = [names.index(n) for g in dst for n in group(g)]
        v = v.permute(tuple(order)) if order != list(range(len(order))) else v
        pos = 0
        for g in dst:                                   # merge groups
            k = len(group(g))
            if k > 1:
                v = v.flatten_dims(pos, pos + k - 1)
            pos += 1
        return v

    def slice(self, dim, start, end, step=1):
        """Elements start..end-1 (by step) of dimension dim: t[:, start:end:step]."""
        n = len(self.shape)
        if isinstance(dim, bool) or not isinstance(dim, int) or not -n <= dim < n:
            fail(f"tensor.slice: dim {dim!r} of a {n}-D tensor")
        if not 0 <= start < end <= self.shape[dim % n] or int(step) < 1:
            fail(f"tensor.slice({dim}, {start}, {end}, {step}): 0 <= start < end <= {self.shape[dim % n]}, step >= 1")
        return self[(slice(None),) * (dim % n) + (slice(start, end, step),)]

    def select(self, dim, index):
        """Index `index` of dimension dim (an integer), as t[..., index, ...]."""
        n = len(self.shape)
        if isinstance(dim, bool) or not isinstance(dim, int) or not -n <= dim < n:
            fail(f"tensor.select: dim {dim!r} of a {n}-D tensor")
        return self[(slice(None),) * (dim % n) + (index,)]
