"""nki.isa's MX instructions (NeuronCore-v4): nc_matmul_mx on TensorE and
quantize_mx on VectorE.  MX data tiles hold four fp8 / fp4 values per
element (nl.float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4), their
uint8 scales one per group of 8 partitions x 4 values, in the group's own
SBUF quadrant.  The layout and shape rules are the ISA's (isa/validate_mx.c
checks them and names the kernel line); the semantics are in
device_model/ops_mx.c.  isa.py re-exports them."""
from __future__ import annotations

from . import tensor_engine as _te
from . import tracer
from .isa import _needs, _tile_arg
from .tensor import Tensor
from .tracer import fail

MX_DTYPES = ("fp8_e4m3_x4", "fp8_e5m2_x4", "fp4_e2m1_x4")


def _sbuf_tile(x, what, name, dtypes=None):
    """argument `name` of nisa.`what`, an SBUF tile (of one of dtypes)"""
    x = _tile_arg(x, what, name)
    if x.space != "sbuf":
        fail(f"nisa.{what}: {name} is an SBUF tile, not {x.space.upper()}")
    if dtypes and x.dtype not in dtypes:
        fail(f"nisa.{what}: {name} is {x.dtype} (takes {', '.join(dtypes)})")
    return x


def nc_matmul_mx(dst=None, stationary=None, moving=None, stationary_scale=None, moving_scale=None,
                 tile_position=None, tile_size=None, accumulate=None, name=None):
    """dst[M, N] (+)= dequant(stationary)[4K, M]^T @ dequant(moving)[4K, N]
    on TensorE: MX data with its scales, the contraction the K partitions x
    the four values of each element (SDK nki.isa.nc_matmul_mx).  accumulate
    None follows NKI's accumulation groups as nc_matmul does.  tile_position
    / tile_size (row tiling) place the matmul in the array; the simulator
    computes the same values and times it as a whole-array matmul."""
    _needs("mx", "nisa.nc_matmul_mx")
    x = _sbuf_tile(stationary, "nc_matmul_mx", "stationary", MX_DTYPES)
    y = _sbuf_tile(moving, "nc_matmul_mx", "moving", MX_DTYPES)
    xs = _sbuf_tile(stationary_scale, "nc_matmul_mx", "stationary_scale")
    ys = _sbuf_tile(moving_scale, "nc_matmul_mx", "moving_scale")
    if not isinstance(dst, Tensor) or dst.space != "psum":
        fail("nisa.nc_matmul_mx: dst is a PSUM tile")
    M, N = x.elements_per_partition(), y.elements_per_partition()
    if dst.shape[0] != M or dst.elements_per_partition() != N:
        fail(f"nisa.nc_matmul_mx: dst {list(dst.shape)} does not hold the [{M}, {N}] result")
    _te.emit_matmul(x, y, dst, accumulate, scales=(xs, ys))
    return dst


def quantize_mx(dst=None, src=None, dst_scale=None, name=None):
    """dst (fp8 x4) and dst_scale (uint8) = src (bf16 / fp16) quantized per
    group of 8 partitions x 4 elements on VectorE (SDK nki.isa.quantize_mx;
    the scale is the API reference's, twice the OCP sample algorithm's)."""
    _needs("mx", "nisa.quantize_mx")
    x = _sbuf_tile(src, "quantize_mx", "src")
    d = _sbuf_tile(dst, "quantize_mx", "dst")
    sc = _sbuf_tile(dst_scale, "quantize_mx", "dst_scale")
    tracer.current().emit("vector", f"quantize_mx dst={d.ap()} src={x.ap()} scale={sc.ap()}",
                          reads=[x.region()], writes=[d.region(), sc.region()])
    return dst
