"""nki.isa's instructions that summarize each partition: VectorE's
statistics pair bn_stats / bn_aggr and top-8 group max8 / nc_find_index8 /
nc_match_replace8, and GpSimd's nonzero_with_count.  isa.py re-exports them."""
from __future__ import annotations

from . import language as nl
from . import tracer
from .isa import _dst_first, _ret, _tiles
from .tensor import Tensor, isa_dtype, new_tile


def _stats(name, data, n_out, dtype, dst, what):
    """One VectorE statistics instruction from data [P, ...] into a fresh
    [P, n_out] tile (or straight into dst when it has that shape)."""
    x = nl._operand(data)
    if not isinstance(x, Tensor):
        tracer.fail(f"nisa.{name} takes a tile")
    P = x.shape[0]
    # published: the result takes the input's dtype unless dtype= (or dst) says
    dt = isa_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else x.dtype)
    if dst is not None and (dst.shape[0] != P or dst.elements_per_partition() != n_out or dst.dtype != dt):
        out = new_tile("sbuf", (P, n_out), dt, what)
    else:
        out = dst if dst is not None else new_tile("sbuf", (P, n_out), dt, what)
    t = tracer.current()
    ins = t.emit("vector", f"{name} dst={out.ap()} src={x.ap()}", reads=[x.region()], writes=[out.region()])
    if out is dst:
        return dst
    out.made_by = ins
    return _ret(dst, out)


@_dst_first(lambda a: _tiles(a, 2))
def bn_stats(data=None, dtype=None, dst=None, **kw):
    """Per-partition statistics of up to bn_stats_fmax (512) elements, six
    values: (count, mean, variance * count) of the even-indexed elements,
    then of the odd-indexed ones (the published layout, meant for bn_aggr);
    one VectorE instruction, max(MIN_II, N) cycles."""
    x = nl._operand(data)
    n = x.elements_per_partition() if isinstance(x, Tensor) else 0
    if n > nl.tile_size.bn_stats_fmax:
        tracer.fail(f"bn_stats over {n} elements per partition: at most {nl.tile_size.bn_stats_fmax}")
    return _stats("bn_stats", x, 6, dtype, dst, "bn_stats result")


@_dst_first(lambda a: _tiles(a, 2))
def bn_aggr(data=None, dtype=None, dst=None, **kw):
    """[P, 3k] (count, mean, variance * count) triples -- one or more
    bn_stats results side by side -> [P, 2]: the mean and variance of
    everything they summarize; one VectorE instruction, max(MIN_II,
    13 * (N / 3)) cycles."""
    st = nl._operand(data)
    n = st.elements_per_partition() if isinstance(st, Tensor) else 0
    if n < 3 or n % 3:
        tracer.fail(f"bn_aggr takes bn_stats results ((count, mean, variance*count) triples), got {n} "
                    "elements per partition")
    return _stats("bn_aggr", st, 2, dtype, dst, "bn_aggr result")


def _eight_of(name, x, dst, dtype, default_dtype, what):
    """The [P, 8] result tile of max8 / nc_find_index8 over x (8 to 16384
    elements per partition, as the published instructions take): dst when
    it has that shape and dtype, else a fresh tile."""
    if not isinstance(x, Tensor):
        tracer.fail(f"nisa.{name} takes a tile")
    n = x.elements_per_partition()
    if not 8 <= n <= 16384:
        tracer.fail(f"nisa.{name} over {n} elements per partition: 8 to 16384")
    dt = isa_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else default_dtype)
    P = x.shape[0]
    if dst is not None and dst.shape[0] == P and dst.elements_per_partition() == 8 and dst.dtype == dt:
        return dst
    return new_tile("sbuf", (P, 8), dt, what)


@_dst_first(lambda a: _tiles(a, 2))
def max8(src=None, dtype=None, dst=None, mask=None, **kw):
    """[P, 8]: the 8 largest values of each partition of src, largest first
    (read as fp32, written in dst's dtype -- src's by default); one VectorE
    instruction, N cycles (N: src's elements per partition, 8 to 16384)."""
    if mask is not None:
        tracer.fail("nisa.max8 with a mask is not supported by the simulator yet")
    x = nl._operand(src)
    out = _eight_of("max8", x, dst, dtype, getattr(x, "dtype", None), "max8 result")
    ins = tracer.current().emit("vector", f"max8 dst={out.ap()} src={x.ap()}", reads=[x.region()],
                                writes=[out.region()])
    if out is dst:
        return dst
    out.made_by = ins
    return _ret(dst, out)


@_dst_first(lambda a: _tiles(a, 3))
def nc_find_index8(data=None, vals=None, dtype=None, dst=None, mask=None, **kw):
    """[P, 8] uint32 (or uint16): where in each partition of data each of
    that partition's 8 vals first occurs (all ones when it does not); one
    VectorE instruction, N cycles (N: data's elements per partition)."""
    if mask is not None:
        tracer.fail("nisa.nc_find_index8 with a mask is not supported by the simulator yet")
    x, v = nl._operand(data), nl._operand(vals)
    if not isinstance(v, Tensor) or v.elements_per_partition() != 8 or v.shape[0] != getattr(x, "shape", (0,))[0]:
        tracer.fail("nisa.nc_find_index8: vals holds 8 values for each partition of data")
    out = _eight_of("nc_find_index8", x, dst, dtype, "uint32", "nc_find_index8 result")
    if out.dtype not in ("uint16", "uint32"):
        tracer.fail(f"nisa.nc_find_index8 writes uint16 or uint32 positions, not {out.dtype}")
    ins = tracer.current().emit("vector", f"nc_find_index8 dst={out.ap()} data={x.ap()} vals={v.ap()}",
                                reads=[x.region(), v.region()], writes=[out.region()])
    if out is dst:
        return dst
    out.made_by = ins
    return _ret(dst, out)


@_dst_first(lambda a: _tiles(a, 3))
def nc_match_replace8(data=None, vals=None, imm=0.0, dst_idx=None, dst=None, dtype=None, **kw):
    """dst = data with the first occurrence of each of each partition's 8
    vals replaced by imm (a value given twice takes two occurrences, the
    SDK's reverse-order pairing); dst_idx (optional, [P, 8] uint16/uint32):
    where they were.  One VectorE instruction, N cycles (not published: as
    nc_find_index8)."""
    x, v = nl._operand(data), nl._operand(vals)
    if not isinstance(x, Tensor) or x.space == "hbm":
        tracer.fail("nisa.nc_match_replace8: data is a tile in SBUF or PSUM")
    n = x.elements_per_partition()
    if not 8 <= n <= 16384:
        tracer.fail(f"nisa.nc_match_replace8 over {n} elements per partition: 8 to 16384")
    if not isinstance(v, Tensor) or v.elements_per_partition() != 8 or v.shape[0] != x.shape[0]:
        tracer.fail("nisa.nc_match_replace8: vals holds 8 values for each partition of data")
    dt = isa_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else x.dtype)
    out = dst if dst is not None and dst.shape[0] == x.shape[0] and dst.elements_per_partition() == n and \
        dst.dtype == dt else new_tile("sbuf", x.shape, dt, "nc_match_replace8 result")
    reads, writes, idx = [x.region(), v.region()], [out.region()], ""
    if dst_idx is not None:
        if not isinstance(dst_idx, Tensor) or dst_idx.dtype not in ("uint16", "uint32") or \
                dst_idx.shape[0] != x.shape[0] or dst_idx.elements_per_partition() != 8:
            tracer.fail(f"nisa.nc_match_replace8: dst_idx is a [{x.shape[0]}, 8] uint16 or uint32 tile")
        idx = f" dst_idx={dst_idx.ap()}"
        writes.append(dst_idx.region())
    ins = tracer.current().emit("vector", f"nc_match_replace8 dst={out.ap()} data={x.ap()} vals={v.ap()} "
                                          f"imm={float(imm)!r}{idx}", reads=reads, writes=writes)
    if out is dst:
        return dst
    out.made_by = ins
    return _ret(dst, out)


@_dst_first(lambda a: _tiles(a, 2))
def nonzero_with_count(src=None, index_offset=0, padding_val=-1, dst=None, **kw):
    """NeuronCore-v3+, GpSimd: on partitions 0, 16, .., 112 of src (each
    GpSimd core reads the first of its 16), dst's row = the positions of the
    nonzero elements plus index_offset, padding_val up to src's length, then
    their count; dst [P, N + 1], an integer tile, its other partitions left
    as they were (SDK nki.isa.nonzero_with_count)."""
    x = nl._operand(src)
    if not isinstance(x, Tensor) or x.space == "hbm":
        tracer.fail("nisa.nonzero_with_count: src is a tile in SBUF or PSUM")
    if not isinstance(dst, Tensor) or dst.space == "hbm":
        tracer.fail("nisa.nonzero_with_count: dst= is a tile in SBUF or PSUM (it writes some partitions only)")
    for name, v in (("index_offset", index_offset), ("padding_val", padding_val)):
        if isinstance(v, bool) or not isinstance(v, int):
            tracer.fail(f"nisa.nonzero_with_count: {name} is an int known while tracing, got {v!r}")
    t = tracer.current()
    t.emit("gpsimd", f"nonzero_with_count dst={dst.ap()} src={x.ap()} index_offset={index_offset} "
                     f"padding_val={padding_val}", reads=[x.region(), dst.region()], writes=[dst.region()])
    return dst
