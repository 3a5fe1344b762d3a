"""Tracing tensors: HBM tensors and SBUF/PSUM tiles as access patterns, NKI
indexing (indexing.py: integers, slices, nl.arange index expressions), their .nsasm
operand text and memory regions."""
from __future__ import annotations

import math

from . import tracer
from .dtype_keys import SIZES, IsaKeyed

from .tensor_views import TensorViews
from .tracer import fail

# NKI dtype names -> ISA dtype names
DTYPE_ALIASES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "int32": "int32", "uint32": "uint32",
                 "int16": "int16", "uint16": "uint16", "int8": "int8", "uint8": "uint8", "tfloat32": "fp32",
                 # float8_e4m3: IEEE-like (240 the largest finite, infinities);
                 # float8_e4m3fn: no infinities, 448 (isa_dtype.def)
                 "float8_e4m3": "fp8_e4m3", "float8_e5m2": "fp8_e5m2", "float8_e4m3fn": "fp8_e4m3fn",
                 # MX data: four values packed per element (isa_mx.py)
                 "float8_e4m3fn_x4": "fp8_e4m3_x4", "float8_e5m2_x4": "fp8_e5m2_x4",
                 "float4_e2m1fn_x4": "fp4_e2m1_x4"}
NKI_NAMES = IsaKeyed({v: k for k, v in DTYPE_ALIASES.items() if k != "tfloat32"})
# NKI dtypes the simulator has no storage for: named, so kernels can refer
# to them (dict keys, comparisons), refused when a tensor would take one
UNSUPPORTED_DTYPES = {
    "float8_e8m0fnu": "the MX shared-scale exponent type; MX scales are uint8 here, which the SDK accepts too",
}


def isa_dtype(dt):
    """NKI dtype (nl.float32, 'float32', numpy dtype, our 'fp32') -> ISA name."""
    if dt is None:
        return None
    if isinstance(dt, DType):
        if dt.isa is None:
            fail(f"dtype {dt} ({UNSUPPORTED_DTYPES[str(dt)]}) is not supported by the simulator yet")
        return dt.isa
    name = getattr(dt, "name", None)
    if name is None and isinstance(dt, type):          # np.float32 and friends
        try:
            import numpy as np
            name = np.dtype(dt).name
        except TypeError:
            name = None
    name = name or str(dt)
    name = {"float": "float32", "int": "int32"}.get(name, name)
    if name in DTYPE_ALIASES:
        return DTYPE_ALIASES[name]
    if name in SIZES:
        return name
    fail(f"unsupported dtype {dt!r}")


class DType(str):
    """nl.float32 and friends: compare equal to their NKI name and to the
    ISA name our tensors carry."""

    def __new__(cls, nki_name):
        obj = super().__new__(cls, nki_name)
        obj.isa = DTYPE_ALIASES.get(nki_name)     # None: one of UNSUPPORTED_DTYPES
        return obj

    def __eq__(self, other):
        return str.__eq__(self, other) or (self.isa is not None and isinstance(other, str) and
                                           str.__eq__(other, self.isa))

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        # as the name: NumPy finds "bfloat16" among the names ml_dtypes registers
        return str.__hash__(self)


class TensorDType(str):
    """A tensor's .dtype: the ISA name ('fp32') as its value -- what the
    program text and f-strings use -- and NKI's name ('float32') under
    str(), as NKI's dtypes print (nkilib compares str(t.dtype) ==
    str(nl.float32)); equal to both, and to the nl dtype.  It hashes as the
    NKI name, as the nl dtype does, so a kernel's dict keyed by nl dtypes
    finds it; the frontend's ISA-keyed tables take .isa (dtype_keys.py)."""

    def __str__(self):
        return self.nki

    def __format__(self, spec):
        return format(str.__str__(self), spec)

    def __repr__(self):
        return repr(self.nki)

    def __eq__(self, other):
        if str.__eq__(self, other) is True:          # the ISA name: the tracer's own comparisons
            return True
        if isinstance(other, DType):
            return other.isa is not None and str.__eq__(self, other.isa)
        return isinstance(other, str) and str.__eq__(other, self.nki)

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return str.__hash__(self.nki)


_TENSOR_DTYPES = IsaKeyed()


def tensor_dtype(isa_name):
    """The TensorDType of an ISA dtype name (one object per name)."""
    t = _TENSOR_DTYPES.get(isa_name)
    if t is None:
        t = _TENSOR_DTYPES[isa_name] = TensorDType(isa_name)
        t.isa = str.__str__(t)
        t.nki = NKI_NAMES.get(t.isa, t.isa)
    return t


def whole_view(view, tensor):
    """HBM view covers all of tensor's elements in its order (tensor itself,
    or a reshape of it)."""
    return view is tensor or (not view.offset and math.prod(view.shape) == math.prod(tensor.shape) and
                               view.is_contiguous())


# index expressions, masks and subscript normalization live in indexing.py
from .indexing import GridExpr, Index, _permuted_grid, as_int, normalize  # noqa: E402


class Tensor(TensorViews):
    """A view: HBM (name, element offset, strides) or a tile (allocation,
    first partition, element offset in the partition, free strides); the
    SDK's view methods (permute, slice, rearrange, ...) in tensor_views.py."""

    def __init__(self, space, dtype, shape, strides, offset=0, name=None, alloc=None, part0=0, pax=0):
        self.space, self.shape, self.strides = space, tuple(shape), tuple(strides)
        self.dtype = tensor_dtype(dtype)
        self.offset, self.name, self.alloc, self.part0 = offset, name, alloc, part0
        self.pax = pax                 # a tile's partition axis (> 0: block dims before nl.par_dim)
        self.pending = None            # a matmul not yet placed (see language.matmul)
        self.loaded_by = None          # the DMA that filled this fresh tile (language.load)
        self.made_by = None            # the compute instruction that wrote this fresh tile
        self.loaded_from = None        # and the HBM view it read
        self.wanted = {}               # axis -> size asked for where an index ran past its end
        self.overrun = None            # (allowed under a mask that cuts it off: the message otherwise)
        self.gather = None             # HBM rows picked by this [P, 1] index tile (_gathered, vector_offset)

    @property
    def rows_wanted(self):
        return self.wanted.get(0)

    @property
    def base_tensor(self):
        """The tensor itself, when it is whole.  nki-library's TensorView
        has .base_tensor (the tensor it wraps), and its MX MoE paths read
        .base_tensor of a kernel argument too, in code that takes either:
        a whole tensor is its own base.  Of part of a tensor it is refused
        by name: the SDK's NkiTensor does not define it there."""
        if self.space == "hbm":
            root = tracer.current().tensors.get(self.name, self) if tracer._current else self
            whole = whole_view(self, root)
        else:
            whole = (self.is_contiguous() and self.part0 == 0 and self.offset == 0 and
                     self.nparts == self.alloc.nparts and
                     self.elements_per_partition() * SIZES[self.dtype] == self.alloc.size)
        if not whole:
            fail(f".base_tensor of a view of part of a tensor ({list(self.shape)}): the SDK's NkiTensor defines "
                 "no base tensor; nki-library's TensorView does (wrap the tensor in it)")
        return self

    @property
    def buffer(self):
        """nl.sbuf / nl.psum, or the HBM buffer the tensor was made in:
        nl.hbm for kernel arguments (the SDK's MXFP tutorial asserts it),
        else the one nl.ndarray was given (views: their tensor's)."""
        if self.space != "hbm":
            return self.space
        root = tracer.current().tensors.get(self.name, self) if tracer._current else self
        return getattr(root, "hbm_buffer", "hbm")

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"<nki {self.space} tensor {self.name or ''} {self.dtype}{list(self.shape)}>"

    def _grid_view(self, key):
        """Subscripts that are index-grid expressions (nl.mgrid): the view's
        dimensions are the grid's axes in order, each walking the tensor with
        the combined stride of its terms."""
        key = key if isinstance(key, tuple) else (key,)
        if len(key) != len(self.shape):
            fail(f"{len(key)} grid subscripts for a tensor of rank {len(self.shape)}")
        pax = getattr(self, "pax", 0)
        if self.space != "hbm" and pax and all(isinstance(k, int) for k in key[:pax]):
            # t[block, i_p, i_f] on a tile with block dimensions: the block
            # first, then the grid over it (nki-samples' double_row_matmul)
            return self[key[:pax]]._grid_view(key[pax:])
        dims, offset, part0, over = {}, self.offset, self.part0, None
        first = min((g for k in key if isinstance(k, (Index, GridExpr)) for g, _, _ in k.terms()[0]), default=None)
        for ax, k in enumerate(key):
            if isinstance(k, int):
                terms, off = [], k
            elif isinstance(k, (Index, GridExpr)):
                terms, off = k.terms()
            else:
                fail("mixing index-grid expressions with slices is not supported")
            lo = hi = off
            for _, st, n in terms:
                lo, hi = lo + min(0, st * (n - 1)), hi + max(0, st * (n - 1))
            if lo < 0 or hi >= self.shape[ax]:
                msg = f"index on axis {ax} reaches [{lo}, {hi}], outside [0, {self.shape[ax]})"
                terms = self._clamp_rows(ax, terms, off, lo, hi, first, msg)
                over = (next(n for g, _, n in k.terms()[0] if g == first), msg)
            if self.space != "hbm" and ax == 0:
                if len(terms) != 1 or terms[0][1] != 1:
                    fail("a tile's partition index must be a contiguous nl.arange range")
                part0 += off
                g, _, n = terms[0]
                dims[g] = ("p", n)
                continue
            offset += off * self.strides[ax]
            for g, st, n in terms:
                if g in dims:
                    fail("one index-grid axis used on two tensor axes is not supported")
                dims[g] = (st * self.strides[ax], n)
        order = sorted(dims)
        if self.space != "hbm" and self.pax != 0:
            fail("index a block of a tile with block dimensions before using index grids on it")
        if self.space != "hbm" and dims[order[0]][0] != "p":
            fail("the partition index must come from the first axis of the index grid")
        shape = [dims[g][1] for g in order]
        strides = [0 if dims[g][0] == "p" else dims[g][0] for g in order]
        view = Tensor(self.space, self.dtype, shape, strides, offset, self.name, self.alloc, part0)
        if over:
            view.wanted, view.overrun = {0: over[0]}, over[1]
        return view

    def _clamp_rows(self, ax, terms, off, lo, hi, first, msg):
        """An HBM grid view whose first axis runs past the end along the
        view's first (partition) grid axis, as `in[i_p + i_k, i_f]` does in a
        partial last tile: the view keeps the rows that lie inside, and
        load/store check that the mask cuts off the rest (as for slices)."""
        row = [t for t in terms if t[0] == first]
        if self.space != "hbm" or ax != 0 or lo < 0 or len(row) != 1 or row[0][1] <= 0:
            fail(msg)
        g, st, n = row[0]
        inside = (self.shape[0] - 1 - (hi - st * (n - 1))) // st + 1
        if inside < 1:
            fail(msg)
        return [(g, st, inside) if t[0] == first else t for t in terms]

    def __getitem__(self, key):
        if getattr(self, "dyn", None) is not None:
            fail("a view with a run-time scalar_offset is used whole (index the tensor before .ap(...))")
        from .scalar import NkiScalar
        if any(isinstance(k, NkiScalar) for k in (key if isinstance(key, tuple) else (key,))):
            fail("an NkiScalar indexes a tensor only at run time: pass it as .ap(pattern, scalar_offset=...)")
        self.materialize()
        keys = key if isinstance(key, tuple) else (key,)
        if self.space == "hbm" and any(isinstance(k, Tensor) for k in keys):
            return self._gathered(keys)
        if any(isinstance(k, GridExpr) for k in keys) or _permuted_grid(keys):
            return self._grid_view(key)
        over = []
        axes = normalize(key, self.shape, over if self.space == "hbm" else None)
        shape, strides, offset, part0, pax = [], [], self.offset, self.part0, 0
        for ax, (start, step, size, keep) in enumerate(axes):
            if self.space != "hbm" and ax == self.pax:
                if step != 1:
                    fail("a tile's partition dimension takes contiguous ranges only")
                # an integer picks one partition, which stays a dimension of
                # size 1: a tile always has its partition dimension
                keep = True
                part0 += start
                pax = len(shape)
            else:
                offset += start * self.strides[ax]
            if keep:
                shape.append(size)
                strides.append(self.strides[ax] * step)
        if self.space != "hbm" and len(shape) == 1 and len(self.shape) > 1 and pax == 0:
            # a tile keeps a free axis: t[:, i] is the [P, 1] column (the
            # shape NKI gives it, which t[:, i][:, 0] and broadcasts rely on)
            shape.append(1)
            strides.append(1)
        view = Tensor(self.space, self.dtype, shape, strides, offset, self.name, self.alloc, part0, pax)
        if over:
            kept = [ax for ax, (_, _, _, keep) in enumerate(axes) if keep]
            view.wanted = {kept.index(ax): size for ax, size, _ in over}
            view.overrun = over[0][2]
        return view

    def __setitem__(self, key, value):
        from . import language as nl
        dst = self[key]
        nl._assign(dst, value)

    def _vector_offset_ap(self, pattern, offset, dtype, kw):
        """tensor.ap(pattern=[[row stride, P], free pairs...], offset=,
        vector_offset=idx, indirect_dim=d) on HBM (SDK nki.isa.dma_copy,
        "vector indirection"): partition p reads or writes row idx[p] of
        dimension d counted from offset -- the ISA's gather / scatter DMA,
        whose table is the rows of that dimension from offset on that lie
        whole in the tensor, with the pattern's free pairs (an LNC 2 kernel
        scatters into its core's half of a tensor so: nki-library's MX
        shard-on-block MoE)."""
        idx, dim = kw.pop("vector_offset"), int(kw.pop("indirect_dim", 0))
        if kw:
            fail(f"tensor.ap: {', '.join(sorted(kw))} with vector_offset is not supported by the simulator yet")
        if self.space != "hbm":
            fail("tensor.ap(vector_offset=...): the tensor indexed is in HBM")
        if not 0 <= dim < len(self.shape):
            fail(f"tensor.ap: indirect_dim {dim} of a {len(self.shape)}-D tensor")
        if pattern is None or len(pattern) < 2:
            fail("tensor.ap(vector_offset=...) needs pattern=[[row stride, partitions], [stride, count], ...]")
        idx = _index_tile(idx, "tensor.ap(vector_offset=)")
        (_, parts), free = pattern[0], list(pattern[1:])
        if int(parts) != idx.shape[0]:
            fail(f"tensor.ap(vector_offset=): the pattern walks {parts} partitions, the index has {idx.shape[0]}")
        rows, stride = self.shape[dim], self.strides[dim]
        if offset and stride > 0 and (dtype is None or SIZES[isa_dtype(dtype)] == SIZES[self.dtype]):
            try:
                pairs = [(int(st), int(n)) for st, n in free]
            except (TypeError, ValueError):
                fail(f"tensor.ap: pattern is a list of [stride, count] pairs, got {pattern!r}")
            base = self.offset + int(offset)
            reach = sum(max(0, st * (n - 1)) for st, n in pairs)
            rows = (self.storage_elems() - 1 - reach - base) // stride + 1
            if rows < 1:
                fail(f"tensor.ap(vector_offset=): offset {offset} leaves no row of dimension {dim} in {self.name}")
        view = self._explicit_ap([[stride, rows]] + free, offset, dtype, {})
        view.gather = idx
        return view

    def _gathered(self, keys):
        """hbm[b, idx, i_f] with idx a [P, 1] int32 / uint32 tile: row
        idx[p] of the indexed axis for partition p -- an indirect (gather)
        DMA's source (nl.load reads it; nki-samples resize_nearest).  The
        view covers the whole indexed axis as its rows (the ISA's gather
        table: src row = index[p]); `gather` holds the index tile."""
        from .language import arange
        at = [k for k, v in enumerate(keys) if isinstance(v, Tensor)]
        if len(at) > 1 or Ellipsis in keys:
            fail("an HBM tensor indexed by a tile takes one index tile and no `...`")
        idx = _index_tile(keys[at[0]], "an HBM tensor indexed by a tile")
        if any(getattr(k, "axis", None) == 0 and getattr(k, "ndim", 1) > 1 for k in keys if isinstance(k, Index)):
            fail("an HBM tensor indexed by a tile: the tile gives the partitions; the other subscripts index "
                 "free axes")
        rows = self.shape[at[0]]
        view = self[tuple(arange(rows)[:, None] if k == at[0] else v for k, v in enumerate(keys))]
        if view.shape[0] != rows:
            fail("an HBM tensor indexed by a tile: the indexed axis must stay the view's first")
        view.gather = idx
        return view

    # -------------------------------------------------------------- operands

    def materialize(self):
        if self.pending is not None:
            from . import language as nl
            nl._place_matmul(self)

    def free_dims(self):
        """(stride, size) of the free dims, in elements (kept per geometry:
        ap() and region() ask for them on every instruction traced)."""
        memo = self.__dict__.get("_free_dims")       # a view's geometry never changes
        if memo is not None:
            return memo
        if self.space == "hbm":
            dims = [(s, n) for s, n in zip(self.strides[1:], self.shape[1:])] or [(1, 1)]
        else:
            dims = [(s, n) for a, (s, n) in enumerate(zip(self.strides, self.shape)) if a != self.pax] or [(1, 1)]
        self._free_dims = dims
        return dims

    @property
    def nparts(self):
        return self.shape[self.pax] if self.shape else 1

    def ap(self, pattern=None, offset=None, dtype=None, **kw):
        """ap(): the operand's .nsasm access pattern (used by the tracer).
        ap(pattern=[[stride, count], ...], offset=None): NKI 0.8's explicit
        access pattern over the tensor's storage, a new view (as
        torch.as_strided): on HBM the pairs are element strides over the
        tensor; on chip the first pair is the partitions ([row size, count]:
        consecutive partitions) and the rest walk each partition's bytes
        from the view's start (+ offset elements)."""
        if pattern is not None or offset is not None or dtype is not None or kw:
            return self._explicit_ap(pattern, offset, dtype, kw)
        self.materialize()
        if self.overrun:
            fail(self.overrun)          # an index past the end reaches an access without a mask
        dims, esz = self._geometry()[:2]
        if self.space == "hbm":
            rows = self.shape[0] if self.shape else 1
            pstride = self.strides[0] if self.shape else 1
            off = f"+{self.offset * esz}" if self.offset else ""
            return f"hbm({self.name}):{self.dtype}[{pstride}x{rows}]{off}{{{dims}}}"
        t = tracer.current()
        t.access(self.alloc)
        if t.recording:                   # the address is the replay's to choose (Trace.replay)
            off = tracer.address_token(self.alloc.id, self.offset * esz)
        else:
            byte = self.alloc.offset + self.offset * esz
            off = f"+{byte}" if byte else ""
        return f"{self.space}:{self.dtype}[{self.part0}:{self.part0 + self.nparts}]{off}{{{dims}}}"

    def storage_elems(self):
        """Elements of the whole HBM tensor this view lies in."""
        full = tracer.current().tensors.get(self.name, self)
        n = 1
        for d in full.shape:
            n *= d
        return n

    def _explicit_ap(self, pattern, offset, dtype, kw):
        if "vector_offset" in kw:
            return self._vector_offset_ap(pattern, offset, dtype, kw)
        if "scalar_offset" in kw:
            # a register known while tracing (nki.collectives.rank_id, a
            # register_alloc value) moves the view by that many steps of the
            # tensor's dimension indirect_dim
            so, dim = kw.pop("scalar_offset"), kw.pop("indirect_dim", 0)
            if self.space != "hbm":
                fail("tensor.ap(scalar_offset=...): on HBM tensors")
            from .scalar import NkiScalar, scalar_load
            if isinstance(so, Tensor):
                # a (1, 1) SBUF tensor (SDK nki-aps.rst): its value, read at
                # run time, into a register as nisa.scalar_load reads it
                so = scalar_load(so, unsigned_ok=True)
            elif getattr(so, "reg", None) is not None and not isinstance(so, NkiScalar):
                # a register loaded from device memory (runtime_loops.py):
                # SyncE's copy of it
                from .runtime_loops import sync_scalar
                so = sync_scalar(so)
            if isinstance(so, NkiScalar):
                # computed on the device: the DMA moves by it at run time
                if not 0 <= int(dim) < len(self.shape):
                    fail(f"tensor.ap: indirect_dim {dim} of a {len(self.shape)}-D tensor")
                if kw:
                    fail(f"tensor.ap: {', '.join(sorted(kw))} is not supported by the simulator yet")
                view = self._explicit_ap(pattern, offset, dtype, {})
                view.dyn = (so, self.strides[int(dim)])
                return view
            v = getattr(so, "value", so)
            if isinstance(v, bool) or not isinstance(v, int):
                fail(f"tensor.ap(scalar_offset={so!r}): only offsets known while tracing (an int, a register "
                     "holding one); an offset read from device memory needs run-time addressing")
            if not 0 <= int(dim) < len(self.shape):
                fail(f"tensor.ap: indirect_dim {dim} of a {len(self.shape)}-D tensor")
            if not 0 <= v < self.shape[int(dim)]:
                fail(f"tensor.ap: scalar_offset {v} outside dimension {dim} of size {self.shape[int(dim)]}")
            offset = (int(offset) if offset is not None else 0) + v * self.strides[int(dim)]
            if pattern is None:
                fail("tensor.ap(scalar_offset=...) needs pattern=")
        if kw:
            fail(f"tensor.ap: {', '.join(sorted(kw))} (indirect access) is not supported by the simulator yet")
        dt = isa_dtype(dtype) if dtype is not None else self.dtype
        try:
            pairs = [(int(st), int(n)) for st, n in pattern]
        except (TypeError, ValueError):
            fail(f"tensor.ap: pattern is a list of [stride, count] pairs, got {pattern!r}")
        if not pairs or len(pairs) > 5 or min(n for _, n in pairs) < 1:
            fail(f"tensor.ap: 1 to 5 [stride, count] pairs with count >= 1, got {pattern!r}")
        self.materialize()
        if self.space == "hbm":
            # dtype= reads the tensor's bytes as another dtype (SDK
            # nki-aps.rst): pattern and offset count elements of it
            old, esz = SIZES[self.dtype], SIZES[dt]
            if (self.offset * old) % esz:
                fail(f"tensor.ap(dtype={dt}): the view starts at byte {self.offset * old}, not a {dt} element")
            base = self.offset * old // esz + (int(offset) if offset is not None else 0)
            n_elems = self.storage_elems() * old // esz
            lo = base + sum(min(0, st * (n - 1)) for st, n in pairs)
            hi = base + sum(max(0, st * (n - 1)) for st, n in pairs)
            if lo < 0 or hi >= n_elems:
                fail(f"tensor.ap {pattern!r} (offset {base}) reaches {dt} elements [{lo}, {hi}] outside "
                     f"{self.name}'s {n_elems}")
            return Tensor("hbm", dt, tuple(n for _, n in pairs), tuple(st for st, _ in pairs), base, self.name)
        (pst, parts), free = pairs[0], pairs[1:]
        # on chip, dtype= reads the tile's bytes as another dtype: the
        # pattern and offset count elements of that dtype
        old, esz = SIZES[self.dtype], SIZES[dt]
        if (self.offset * old) % esz or (self.elements_per_partition() * old) % esz:
            fail(f"tensor.ap(dtype={dt}): the view's bytes do not split into {dt} elements")
        row = self.elements_per_partition() * old // esz
        # offset= counts elements from the tensor's start, partitions first
        # (SDK nki-aps.rst): past a partition's row it moves to later ones
        shift, rel = divmod(int(offset), row) if offset is not None else (0, 0)
        part0 = self.part0 + shift
        base = self.offset * old // esz + rel
        if shift < 0 or parts > 128 - part0 or (parts > 1 and pst != row):
            fail(f"tensor.ap {pattern!r} (offset {offset}): the first pair walks the partitions ([{row}, count], "
                 f"at most {128 - part0} from partition {part0})")
        if len(free) > 4:
            fail("tensor.ap: at most 4 free dimensions on chip")
        lo = base + sum(min(0, st * (n - 1)) for st, n in free)
        hi = base + sum(max(0, st * (n - 1)) for st, n in free)
        if lo < 0 or (hi + 1) * esz > self.alloc.size:
            fail(f"tensor.ap {pattern!r} (offset {base}) reaches bytes [{lo * esz}, {(hi + 1) * esz}) "
                 f"outside the tile's {self.alloc.size} bytes per partition")
        if part0 + parts > self.alloc.nparts:
            fail(f"tensor.ap {pattern!r} (offset {offset}): partitions [{part0}, {part0 + parts}) leave the tile's "
                 f"{self.alloc.nparts}")
        free = free or [(1, 1)]
        return Tensor(self.space, dt, (parts, *(n for _, n in free)), (0, *(st for st, _ in free)), base,
                      None, self.alloc, part0)

    def _geometry(self):
        """(free dims as access-pattern text, element size, first byte, end
        byte) of the view -- from the start of the HBM tensor, or of the
        tile's allocation -- kept per view: a view's geometry never
        changes, and ap() / region() ask for it on every instruction traced."""
        memo = self.__dict__.get("_geo")
        if memo is not None:
            return memo
        esz = SIZES[self.dtype]
        lo = hi = self.offset
        for s, n in self.free_dims() if self.space != "hbm" else zip(self.strides, self.shape):
            ext = s * (n - 1)
            lo, hi = lo + min(0, ext), hi + max(0, ext)
        self._geo = (",".join(f"{s}x{n}" for s, n in self.free_dims()), esz, lo * esz, (hi + 1) * esz)
        return self._geo

    def region(self):
        """(space, key, p_lo, p_hi, b_lo, b_hi): what the operand touches."""
        _, _, lo, hi = self._geometry()
        if self.space == "hbm":
            return ("hbm", self.name, 0, 1, lo, hi)
        tracer.current().touch(self.alloc)
        base = self.alloc.offset
        return tracer.Region((self.space, 0, self.part0, self.part0 + self.nparts, base + lo, base + hi),
                             self.alloc.id)

    def elements_per_partition(self):
        n = 1
        for a, d in enumerate(self.shape):
            if a != (self.pax if self.space != "hbm" else 0):
                n *= d
        return n

    # ------------------------------------------------------------ operators

    def _bin(self, other, op, reverse=False):
        from . import language as nl
        return nl._binary(other, self, op) if reverse else nl._binary(self, other, op)

    def __add__(self, o):
        return self._bin(o, "add")

    def __radd__(self, o):
        return self._bin(o, "add", True)

    def __sub__(self, o):
        return self._bin(o, "subtract")

    def __rsub__(self, o):
        return self._bin(o, "subtract", True)

    def __mul__(self, o):
        return self._bin(o, "multiply")

    def __rmul__(self, o):
        return self._bin(o, "multiply", True)

    def __truediv__(self, o):
        return self._bin(o, "divide")

    def __rtruediv__(self, o):
        return self._bin(o, "divide", True)

    def __iadd__(self, o):
        from . import language as nl
        return nl._iadd(self, o)

    def __neg__(self):
        return self._bin(-1.0, "multiply")

    def reshape(self, shape):
        """The same elements seen with another shape: a contiguous HBM
        tensor, or a tile whose free elements are contiguous in each
        partition -- its partition dimension stays first and the same size
        (NKI reshapes a tile's free dimensions only)."""
        shape = tuple(int(d) for d in shape)
        n = 1
        for d in shape:
            n *= d
        if n != self.elements_per_partition() * (self.shape[self.pax] if self.shape else 1):
            fail(f"reshape {list(self.shape)} -> {list(shape)}: the element count differs")
        onchip = self.space != "hbm"
        if onchip and (self.pax != 0 or not shape or shape[0] != self.shape[0]):
            fail(f"reshape {list(self.shape)} -> {list(shape)}: a tile keeps its partition dimension "
                 f"({self.shape[self.pax]}) first and reshapes its free dimensions only")
        contiguous, acc = True, 1
        for ax in range(len(self.shape) - 1, 0 if onchip else -1, -1):
            contiguous &= self.shape[ax] == 1 or self.strides[ax] == acc
            acc *= self.shape[ax]
        if not contiguous:
            fail("reshape of a strided view is not supported")
        strides, acc = [0] * len(shape), 1
        for ax in range(len(shape) - 1, 0 if onchip else -1, -1):
            strides[ax] = acc
            acc *= shape[ax]
        if onchip:
            self.materialize()
            return Tensor(self.space, self.dtype, shape, strides, self.offset, self.name, self.alloc, self.part0, 0)
        return Tensor("hbm", self.dtype, shape, strides, self.offset, self.name)

    def view(self, dtype):
        """The same bytes read as another dtype (SDK NkiTensor.view): the
        last dimension's size scales by the ratio of the dtype sizes; it must
        be contiguous (nkilib views SBUF tiles of MX weights as their x4
        type after loading them as bytes)."""
        dt = isa_dtype(dtype)
        if dt == self.dtype:
            return self
        old, new = SIZES[self.dtype], SIZES[dt]
        last = len(self.shape) - 1
        if last < 0 or (self.space != "hbm" and last == self.pax):
            fail(f"tensor.view({NKI_NAMES.get(dt, dt)}): a view scales the last free dimension; "
                 f"this {list(self.shape)} tensor has none")
        if self.shape[last] != 1 and self.strides[last] != 1:
            fail(f"tensor.view({NKI_NAMES.get(dt, dt)}): the last dimension must be contiguous")
        free = [ax for ax in range(last) if self.space == "hbm" or ax != self.pax]
        if (self.shape[last] * old) % new or (self.offset * old) % new or \
                any((self.strides[ax] * old) % new for ax in free):
            fail(f"tensor.view({NKI_NAMES.get(dt, dt)}): {list(self.shape)} {NKI_NAMES.get(self.dtype, self.dtype)} "
                 f"does not split into {new}-byte elements")
        shape = self.shape[:last] + (self.shape[last] * old // new,)
        strides = tuple(self.strides[ax] * old // new if ax in free else self.strides[ax] for ax in range(last)) + (1,)
        if self.space == "hbm":
            return Tensor("hbm", dt, shape, strides, self.offset * old // new, self.name)
        self.materialize()
        return Tensor(self.space, dt, shape, strides, self.offset * old // new, self.name, self.alloc, self.part0,
                      self.pax)

    def broadcast_to(self, shape):
        from . import language as nl
        return nl.broadcast_to(self, shape)


class BlockArray:
    """An on-chip array with block dimensions before its partition axis,
    nl.ndarray((B0, B1, nl.par_dim(P), F...)), too large for its memory as a
    whole: as the NKI compiler allocates it, each block is a tile of its
    own, made when the kernel first touches it and freed after its last use
    (tracer liveness), so only the live blocks must fit.  Blocks are
    indexed by integers (loop indices are integers while tracing):
    a[i, j] is block (i, j), a[i, j, ...] a view of it."""

    def __init__(self, space, shape, dtype, what, pax, place=None):
        self.space, self.shape, self.dtype, self.what, self.pax = space, tuple(shape), tensor_dtype(dtype), what, pax
        self.blocks = {}
        self.place = place                 # nki.compiler direct allocation (compiler.Direct), else None
        self.fill = None                   # nl.full / nl.zeros: the value a new block starts with

    ndim = property(lambda self: len(self.shape))

    def __repr__(self):
        return f"<nki {self.space} block array {self.dtype}{list(self.shape)}, {len(self.blocks)} blocks made>"

    def block(self, index):
        b = self.blocks.get(index)
        if b is None:
            what = f"{self.what} block {list(index)}"
            address = None
            if self.place is not None:
                address = self.place.place(index, *tile_bytes(self.shape, self.dtype, self.pax), what)
            b = self.blocks[index] = new_tile(self.space, self.shape[self.pax:], self.dtype, what,
                                              address=address, direct=self.place is not None)
            if self.fill is not None:
                from . import language as nl
                nl._memset(b, self.fill)
        return b

    def _split(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis for k in key[:self.pax]):
            fail(f"{self.what}: index its block dimensions first (a[i, j, ...])")
        index = []
        for ax, k in enumerate(key[:self.pax]):
            v = as_int(k)
            if v is None or not -self.shape[ax] <= v < self.shape[ax]:
                fail(f"{self.what}: block index {k!r} on axis {ax}: an integer in [0, {self.shape[ax]}) "
                     "(the array is allocated block by block: a view across blocks is not supported)")
            index.append(v % self.shape[ax])
        if len(index) < self.pax:
            fail(f"{self.what}: {len(index)} block indices for {self.pax} block dimensions")
        return tuple(index), key[self.pax:]

    def __getitem__(self, key):
        index, rest = self._split(key)
        b = self.block(index)
        return b[rest] if rest else b

    def __setitem__(self, key, value):
        from . import language as nl
        nl._assign(self[key], value)


def _index_tile(idx, what):
    """A gather / scatter's index: a [P, 1] int32 / uint32 tile on chip."""
    if not isinstance(idx, Tensor) or idx.space == "hbm" or idx.dtype not in ("int32", "uint32") or \
            idx.elements_per_partition() != 1:
        fail(f"{what}: the index is a [P, 1] int32 / uint32 tile on chip (one row per partition), got {idx!r}")
    return idx


def tile_bytes(shape, dtype, pax):
    """(partitions, bytes per partition) of one block of an on-chip array
    whose partition axis is `pax`."""
    size = SIZES[dtype]
    for d in shape[pax + 1:]:
        size *= int(d)
    return int(shape[pax]), size


def new_tile(space, shape, dtype, what="tile", pax=0, address=None, direct=False):
    """A tile; pax > 0 puts block dimensions before the partition axis
    (nl.ndarray((B, nl.par_dim(128), F))): each partition holds the blocks
    one after another.  address: (start partition, byte offset) the kernel
    chose (Trace.allocate_fixed), else the tracer places it; direct: placed
    by nki.compiler direct allocation (its lifetime checked)."""
    shape = tuple(int(d) for d in shape)
    if not shape:
        shape = (1,)
    nparts = shape[pax]
    free = 1
    strides = [0] * len(shape)
    t = tracer.current()
    banks = 1
    for ax in range(len(shape) - 1, -1, -1):
        if ax == pax:
            continue
        if space == "psum" and ax == pax - 1:
            # PSUM blocks (nl.ndarray((B, nl.par_dim(128), F), buffer=nl.psum)):
            # one bank each, so every block is a whole accumulation target
            bank = t.psum.bank // SIZES[dtype]
            if free > bank:
                fail(f"{what}: a PSUM block of {free * SIZES[dtype]} bytes per partition does not fit a "
                     f"bank ({t.psum.bank} bytes)")
            free, banks = bank, math.prod(shape[:pax])
        strides[ax] = free
        free *= shape[ax]
    if address is not None:
        alloc = t.allocate_fixed(space, address[0], nparts, address[1], free * SIZES[dtype], what, direct)
        return Tensor(space, dtype, shape, strides, 0, None, alloc, address[0], pax)
    alloc = t.allocate(space, nparts, free * SIZES[dtype], what, banks)
    alloc.dtype = dtype
    return Tensor(space, dtype, shape, strides, 0, None, alloc, 0, pax)


def hbm_tensor(name, shape, dtype):
    shape = tuple(int(d) for d in shape)
    strides, acc = [0] * len(shape), 1
    for ax in range(len(shape) - 1, -1, -1):
        strides[ax] = acc
        acc *= shape[ax]
    return Tensor("hbm", dtype, shape, strides, 0, name)
