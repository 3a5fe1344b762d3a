"""nl's TensorE operations: matmul (placed into PSUM when its destination
is known: assignment, +=, nisa.nc_matmul), transpose, and partition
broadcasts (broadcast_to), which the hardware compiler also puts on TensorE.
language.py re-exports them."""
from __future__ import annotations

from . import language as nl
from . import tracer
from .tensor import NKI_NAMES, Tensor, hbm_tensor, new_tile
from .tracer import fail

MATMUL_DTYPES = ("fp8_e4m3", "fp8_e4m3fn", "fp8_e5m2", "bf16", "fp16", "fp32")

def matmul(x, y, transpose_x=False, **kw):
    """x^T @ y on TensorE into PSUM (fp32): x [K, M] stationary, y [K, N]
    moving, K on the partitions; with transpose_x=False, x is [M, K] and is
    transposed on TensorE first."""
    x, y, M, N = matmul_operands(x, y, transpose_x)
    # storage only when the result is used as a value: assigned into a PSUM
    # tile (x[...] = nisa.nc_matmul(...), psum += ...) it is written there
    # straight away, as the compiler writes it, and takes no PSUM of its own
    # (a kernel placing its PSUM itself may hold every bank)
    return pending_result([(x, y, None)], M, N)


def pending_result(passes, M, N):
    """A [M, N] fp32 PSUM result of matmul passes [(stationary, moving,
    perf)], storage deferred until it is used or assigned (_place_matmul)."""
    out = Tensor("psum", "fp32", (M, N), (0, 1))
    out.pending = passes
    return out


def perf_mode(value):
    """nc_matmul's perf_mode as the ISA's: None (off) or "double_row" (the
    SDK's matmul_perf_mode.double_row; its own tests also write
    "double_row_gen3").  Others are refused by name, not dropped."""
    v = getattr(value, "value", value)
    if v in (None, "none", 0):
        return None
    if v in ("double_row", "double_row_gen3"):
        return "double_row"
    fail(f"nisa.nc_matmul perf_mode={value!r}: none or double_row")


def double_row_passes(stationary, moving):
    """nc_matmul(perf_mode=double_row) operands as the ISA's passes: the
    contraction is split between the partitions and a first free dimension
    of 2 (SDK nki.isa.nc_matmul: stationary [K, 2, M], moving [K, 2, N] for
    a contraction of 2K), which TensorE does as two K-deep passes at half
    the time each (the ISA's perf=double_row: "K effectively 256 in BF16
    K=128 time"); returns ([(stationary half, moving half, perf)] x 2, M, N)."""
    stationary, moving = nl._operand(stationary), nl._operand(moving)
    for name, t in (("stationary", stationary), ("moving", moving)):
        if not isinstance(t, Tensor) or len(t.shape) != 3 or t.shape[1] != 2:
            fail(f"nisa.nc_matmul perf_mode=double_row: {name} is [K, 2, free] (the contraction split between the "
                 f"partitions and a first free dimension of 2), got {getattr(t, 'shape', t)!r}")
        if t.dtype not in ("fp8_e4m3", "fp8_e4m3fn", "fp8_e5m2"):
            fail(f"nisa.nc_matmul perf_mode=double_row: {name} must be float8 (float8_e4m3 / float8_e5m2), "
                 f"not {NKI_NAMES.get(t.dtype, t.dtype)}")
    passes = []
    for half in (0, 1):
        x, y, M, N = matmul_operands(stationary[:, half, :], moving[:, half, :], transpose_x=True)
        passes.append((x, y, "double_row"))
    return passes, M, N


def matmul_operands(x, y, transpose_x=False):
    """(stationary [K, M], moving [K, N], M, N) as TensorE takes them, with
    nl.matmul's checks; nothing placed yet."""
    x, y = nl._operand(x), nl._operand(y)
    ops = []
    for name, t in (("stationary", x), ("moving", y)):
        if not isinstance(t, Tensor):
            fail(f"matmul {name} operand must be a tile")
        if t.dtype not in MATMUL_DTYPES:
            fail(f"matmul {name} dtype {NKI_NAMES.get(t.dtype, t.dtype)} is not allowed on TensorE "
                 f"(float8_e4m3, float8_e4m3fn, float8_e5m2, bfloat16, float16, tfloat32, float32)")
        if t.space == "psum":
            # TensorE reads SBUF only (SDK nki.isa.nc_matmul); a PSUM operand
            # -- an nc_transpose result passed on, as flash attention's
            # backward does -- is copied out first, as the compiler does
            # for nl.matmul(transpose_x=False) below
            t = nl.copy(t)
        if t.space != "sbuf":
            fail(f"matmul {name} operand must be in SBUF, not {t.space.upper()}")
        ops.append(t)
    x, y = ops
    if not transpose_x:
        x = transpose(x)
        x = nl.copy(x)
    K, M = x.shape[0], x.elements_per_partition()
    if y.shape[0] != K:
        fail(f"matmul contraction sizes differ: stationary has {K} partitions, moving {y.shape[0]}")
    N = y.elements_per_partition()
    if M > nl.tile_size.gemm_stationary_fmax:
        fail(f"matmul stationary free size {M} exceeds {nl.tile_size.gemm_stationary_fmax}")
    if N > nl.tile_size.gemm_moving_fmax:
        fail(f"matmul moving free size {N} exceeds {nl.tile_size.gemm_moving_fmax}")
    return x, y, M, N


def _place_matmul(res, dst=None, accumulate=False):
    """accumulate None: NKI's accumulation groups -- the first matmul into a
    PSUM region overwrites it, later ones into the same region add, until
    something else reads or writes those bytes."""
    passes = res.pending
    res.pending = None
    if dst is None and res.alloc is None:
        # storage deferred (see matmul): the result is wanted as a value
        tile = new_tile("psum", res.shape, "fp32", "nl.matmul result")
        res.alloc, res.strides = tile.alloc, tile.strides
    for k, (x, y, perf) in enumerate(passes):
        emit_matmul(x, y, dst or res, accumulate if k == 0 else True, perf=perf)
    if dst is not None and res.alloc is None and dst.shape == res.shape:
        # written into dst: used again, the result is what dst holds
        res.alloc, res.strides, res.offset, res.part0, res.pax = dst.alloc, dst.strides, dst.offset, dst.part0, dst.pax


def emit_matmul(x, y, dst, accumulate=False, scales=None, perf=None):
    """stationary x, moving y (matmul_operands) into the PSUM tile dst;
    scales: (stationary scale, moving scale) of MX operands (isa_mx.py);
    perf: the ISA's perf mode of both instructions (double_row_passes)."""
    if dst.space != "psum":
        fail("a matmul result goes to PSUM")
    # accumulation groups are per region: matmuls interleaved over several
    # column ranges of one PSUM tile each accumulate into their own (nkilib's
    # MLP / MoE down projections loop over the contraction outside them)
    # (only the tile's own groups can overlap its bytes: live tiles never
    # share addresses)
    region, t = dst.region(), tracer.current()
    groups = dst.alloc.open_groups
    if accumulate is None:
        accumulate = region in groups
    if groups and not (len(groups) == 1 and region in groups):
        groups = dst.alloc.open_groups = {g for g in groups if g == region or not tracer.overlaps(g, region)}
    if region not in groups:
        if dst.alloc.id in t.fixed:
            t.close_groups(region, keep=dst.alloc)
        groups.add(region)
        t.open_regions.add(dst.alloc)
    xs, ys = scales or (None, None)
    pm = f" perf={perf}" if perf else ""
    t.emit("tensor", f"load_stationary stationary={x.ap()}" + (f" scale={xs.ap()}" if xs else "") + pm,
           reads=[x.region()] + ([xs.region()] if xs else []))
    acc = " accumulate" if accumulate else ""
    t.emit("tensor", f"multiply_moving dst={dst.ap()} moving={y.ap()}{acc}" +
           (f" moving_scale={ys.ap()}" if ys else "") + pm,
           reads=[y.region()] + ([ys.region()] if ys else []) + ([dst.region()] if accumulate else []),
           writes=[dst.region()])


def transpose(x, dtype=None, **kw):
    """[P, F] -> [F, P] on TensorE (into PSUM), P, F <= 128."""
    x = nl._operand(x)
    P, F = x.shape[0], x.elements_per_partition()
    if P > 128 or F > 128:
        fail(f"nl.transpose of [{P}, {F}]: both sizes must be <= 128")
    out = new_tile("psum", (F, P), "fp32" if x.dtype == "fp32" else x.dtype, "nl.transpose result")
    tracer.current().emit("tensor", f"nc_transpose dst={out.ap()} src={x.ap()}", reads=[x.region()],
                          writes=[out.region()])
    return out


def _unchanged_load_source(tile):
    """The HBM view an nl.load filled `tile` from, when nothing has written
    the tile since; else None."""
    view, ins = getattr(tile, "loaded_from", None), tile.loaded_by
    if view is None or ins is None or tile.space != "sbuf":
        return None
    # nothing has written the tile's allocation since that load (decided the
    # same way in both tracing passes)
    return view if tracer.current().last_write.get(tile.alloc.id) == ins.index else None


# a partition broadcast stays in PSUM while at most this many PSUM banks
# (of 8) are held by live tiles, leaving the rest to matmuls
PSUM_BROADCAST_BANKS = 4


def _broadcast_in_psum(src, F):
    """Whether [1, F] -> [P, F] lands in PSUM and stays there: an fp32 row
    that fits one bank, while PSUM has room.  The hardware compiler does it
    this way: the published Mamba profiles (SDK nki/guides/tutorials/
    fused_mamba.rst, figures mamba_v1_profile, mamba_v2) show TensorE
    instructions and PSUM filling for the kernel's B/C broadcasts and no
    copies back to SBUF -- VectorE reads the broadcast from PSUM, where a
    tensor_tensor with one PSUM and one SBUF input runs at N, not 2N."""
    t = tracer.current()
    if src.dtype != "fp32" or F * 4 > t.psum.bank:
        return False
    return t.choose(lambda: t.psum_banks_in_use() < PSUM_BROADCAST_BANKS)


def _ones_row():
    """A [1, 128] fp32 row of ones, set once per kernel (a compiler constant)
    and kept for every later partition broadcast."""
    t = tracer.current()
    if getattr(t, "ones_row", None) is None:
        t.ones_row = nl.full((1, 128), 1.0, "fp32")
    return t.ones_row


def broadcast_to(src, shape, **kw):
    """A [1, F] tile across partitions: [P, F] (TensorE multiplies a ones
    column by it, as partition broadcasts are done on the hardware); or a
    [P, 1] tile along the free dimension (a per-partition scalar times ones)."""
    src = nl._operand(src)
    P, F = int(shape[0]), 1
    for d in shape[1:]:
        F *= int(d)
    if src.shape[0] == P and src.elements_per_partition() == 1:
        ones_ = nl.full((P, F), 1.0, src.dtype)
        return nl._tensor_scalar(ones_, src, "multiply")
    if src.shape[0] != 1 or src.elements_per_partition() != F:
        fail(f"broadcast_to {list(shape)} from {list(src.shape)}: only [1, F] -> [P, F] and [P, 1] -> [P, F]")
    view = _unchanged_load_source(src)
    if src.dtype not in MATMUL_DTYPES and (view is None or len(view.shape) != 2):
        # integers TensorE cannot take (a matmul would round them through
        # fp32): the row goes to internal HBM and one DMA with partition
        # stride 0 brings it to every partition, as below, exact
        t = tracer.current()
        view = hbm_tensor(t.unique("broadcast_row"), (1, F), src.dtype)
        t.tensors[view.name] = view
        nl._dma(view, src)
    elif _broadcast_in_psum(src, F):
        return matmul(_ones_row()[:, 0:P], src, transpose_x=True)
    if view is not None and len(view.shape) == 2:
        # the row still holds what a DMA brought from HBM: one more DMA reads
        # that HBM row into every partition (partition stride 0), off the
        # compute engines, as DMA engines replicate data
        out = new_tile("sbuf", (P, F), src.dtype, "broadcast_to result")
        nl._dma(out, Tensor("hbm", view.dtype, (P, F), (0, view.strides[1]), view.offset, view.name))
        return out
    ones_ = nl.full((1, P), 1.0, src.dtype if src.dtype in ("fp32", "bf16", "fp16") else "fp32")
    out = new_tile("sbuf", (P, F), src.dtype, "broadcast_to result")
    for f0 in range(0, F, nl.tile_size.gemm_moving_fmax):
        f1 = f0 + nl.tile_size.gemm_moving_fmax if f0 + nl.tile_size.gemm_moving_fmax < F else F
        ps = matmul(ones_, src[:, f0:f1], transpose_x=True)
        nl._assign(out[:, f0:f1], nl.copy(ps, dtype=src.dtype))
    return out
