// aten/nn/resample.cpp -- resampling composed from the native kernels:
// bicubic (2-D) and trilinear (3-D) upsampling, and grid_sampler (2-D and
// 3-D; bilinear / nearest, zeros / border / reflection padding).
//
// Upsampling follows aten/nn/pool.cpp's linear resize: CPU's source indices
// and weights per output position computed on the host (ATen/native/
// UpSample.h), the data gathered by index_select along one dim at a time
// and mixed on VectorE at fp32, innermost dim first as CPU's nested sums.
// grid_sampler's coordinates come from the grid, a device tensor: CPU's
// unnormalize / clip / reflect arithmetic runs elementwise on the device,
// each corner is a gather of flat positions, an out-of-bounds corner adds
// nothing (zeros padding).  fp32 only: CPU's bf16 / fp16 kernels round
// intermediate steps to the dtype (1-3 ulps off a single rounding on 2-8%
// of the resized elements, and grid positions moved), so those run on the
// CPU, counted.
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/pointwise/math.h"
#include "aten/nn/pool.h"
#include "ops.def"

#include <ATen/native/UpSample.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/where.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/grid_sampler_2d_ops.h>
#include <ATen/ops/grid_sampler_3d_ops.h>
#include <ATen/ops/upsample_bicubic2d_ops.h>
#include <ATen/ops/upsample_trilinear3d_ops.h>

#include <array>
#include <vector>

namespace neuron {

namespace {

// ---- bicubic and trilinear upsampling ---------------------------------------------

// dim `from_end` of x resized by CPU's cubic convolution (A = -0.75): each
// output mixes the four sources around its source coordinate (indices
// clamped to the edge), in CPU's order
at::Tensor cubic_dim(const at::Tensor &x, int64_t from_end, int64_t out, bool align, std::optional<double> scale)
{
	int64_t d = x.dim() - from_end, in = x.size(d);
	float ratio = at::native::area_pixel_compute_scale<float>(in, out, align, scale);
	std::array<std::vector<int64_t>, 4> idx;
	std::array<std::vector<float>, 4> w;
	for (int64_t o = 0; o < out; o++) {
		float real = at::native::area_pixel_compute_source_index<float>(ratio, o, align, /*cubic=*/true);
		int64_t i;
		float t;
		at::native::guard_index_and_lambda(real, in, i, t);
		float c[4];
		at::native::get_cubic_upsample_coefficients<float>(c, t);
		for (int k = 0; k < 4; k++) {
			idx[k].push_back(std::min(std::max<int64_t>(i - 1 + k, 0), in - 1));
			w[k].push_back(c[k]);
		}
	}
	std::vector<int64_t> shape(from_end, 1);
	shape[0] = out;
	at::Tensor r;
	for (int k = 0; k < 4; k++) {
		at::Tensor term = x.index_select(d, longs(idx[k], x)).mul(floats(w[k], shape, x));
		r = k ? r.add(term) : term;
	}
	return r;
}

at::Tensor &upsample_bicubic2d_out(const at::Tensor &x, at::IntArrayRef size, bool align, std::optional<double> sh,
				   std::optional<double> sw, at::Tensor &out)
{
	if (!float_input(x) || x.scalar_type() != at::kFloat || x.dim() != 4 || size.size() != 2 || x.numel() == 0)
		return declined;
	at::native::upsample_2d_common_check(x.sizes(), size);
	at::Tensor r = cubic_dim(cubic_dim(as_fp32(x), 1, size[1], align, sw), 2, size[0], align, sh);
	return composite_out(out, { &x }, cast_back(r, x.scalar_type()));
}

at::Tensor &upsample_trilinear3d_out(const at::Tensor &x, at::IntArrayRef size, bool align, std::optional<double> sd,
				     std::optional<double> sh, std::optional<double> sw, at::Tensor &out)
{
	if (!float_input(x) || x.scalar_type() != at::kFloat || x.dim() != 5 || size.size() != 3 || x.numel() == 0)
		return declined;
	at::native::upsample_3d_common_check(x.sizes(), size);
	at::Tensor r = as_fp32(x);
	const std::optional<double> scales[3] = { sw, sh, sd };
	for (int64_t k = 1; k <= 3; k++) {
		Linear l = linear_dim(r, k, size[3 - k], align, scales[k - 1], at::kFloat);
		r = l.x0.mul(l.w0).add(l.x1.mul(l.w1));
	}
	return composite_out(out, { &x }, cast_back(r, x.scalar_type()));
}

// ---- grid_sampler --------------------------------------------------------------------

enum { kBilinear = 0, kNearest = 1 };
enum { kZeros = 0, kBorder = 1, kReflection = 2 };

// CPU's reflect_coordinates: c mirrored into [low, high] / 2 (twice the
// bounds given, as CPU's); a zero span is 0
at::Tensor reflect(const at::Tensor &c, int64_t twice_low, int64_t twice_high)
{
	if (twice_low == twice_high)
		return at::zeros_like(c);
	double lo = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
	at::Tensor a = c.sub(lo).abs();
	at::Tensor extra = a.fmod(span), flips = a.div(span).floor();
	at::Tensor even = flips.fmod(2.0).eq(0);
	return at::where(even, extra.add(lo), extra.neg().add(span + lo));
}

// CPU's grid_sampler_compute_source_index of normalized coordinates g for
// a dim of `size`: unnormalized, then clipped (border) or reflected and
// clipped (reflection); a NaN there (an infinity reflects to NaN) clips to
// 0, as CPU's vectorized clip does
at::Tensor source_index(const at::Tensor &g, int64_t size, int64_t padding, bool align)
{
	at::Tensor c = align ? g.add(1.0).div(2.0).mul((double)(size - 1)) : g.add(1.0).mul((double)size).sub(1.0).div(2.0);
	if (padding == kZeros)
		return c;
	if (padding == kReflection)
		c = align ? reflect(c, 0, 2 * (size - 1)) : reflect(c, -1, 2 * size - 1);
	at::Tensor clipped = at::clamp(c, 0.0, (double)(size - 1));
	return at::where(c.ne(c), scalar_like(0.0, c), clipped);
}

// x [N, C, S] (S the flattened spatial dims) at the corner (coordinates
// per spatial dim, [N, P] fp32, the extents in `sizes`) weighted by w: 0
// where the corner is outside
at::Tensor corner(const at::Tensor &x, const std::vector<at::Tensor> &at_, const std::vector<int64_t> &sizes,
		  const at::Tensor &w)
{
	at::Tensor inside, flat;
	for (size_t k = 0; k < at_.size(); k++) {
		at::Tensor c = at_[k];
		at::Tensor ok = c.ge(0.0).bitwise_and(c.le((double)(sizes[k] - 1)));
		inside = k ? inside.bitwise_and(ok) : ok;
		at::Tensor cc = at::clamp(at::where(c.ne(c), scalar_like(0.0, c), c), 0.0, (double)(sizes[k] - 1));
		flat = k ? flat.mul((double)sizes[k]).add(cc) : cc;
	}
	int64_t N = x.size(0), C = x.size(1), P = flat.size(1);
	at::Tensor idx = integral_float_to_int64(flat).view({ N, 1, P }).expand({ N, C, P });
	at::Tensor v = x.gather(2, idx);
	return at::where(inside.view({ N, 1, P }), v.mul(w.view({ N, 1, P })), scalar_like(0.0, v));
}

// grid_sampler of nd = 2 or 3 spatial dims: input [N, C, spatial...], grid
// [N, out..., nd] (x first, as CPU reads it); bilinear / nearest
at::Tensor grid_sample(const at::Tensor &input, const at::Tensor &grid, int64_t mode, int64_t padding, bool align,
		       int64_t nd)
{
	/* fp32 only: CPU's bf16 / fp16 kernels round every coordinate step to
	 * the dtype (half the samples moved by an ulp of position) */
	if (!float_input(input) || input.scalar_type() != at::kFloat || grid.scalar_type() != at::kFloat ||
	    input.device() != grid.device() || input.dim() != nd + 2 ||
	    grid.dim() != nd + 2 || grid.size(-1) != nd || grid.size(0) != input.size(0) ||
	    (mode != kBilinear && mode != kNearest) || padding < kZeros || padding > kReflection || input.numel() == 0 ||
	    grid.numel() == 0 || input.size(2) >= (1 << 20) || input.numel() / input.size(1) >= (1 << 24))
		return {};
	/* CPU's 3-D sampler is the scalar code (a NaN clips to size - 1, a
	 * NaN corner falls outside as an integer): non-finite 3-D grids run there */
	if (nd == 3 && !peek_cpu(grid.abs().lt(kInf).all()).item<bool>())
		return {};
	int64_t N = input.size(0), C = input.size(1);
	std::vector<int64_t> sizes(input.sizes().begin() + 2, input.sizes().end());   // D, H, W
	std::vector<int64_t> out_shape{ N, C };
	out_shape.insert(out_shape.end(), grid.sizes().begin() + 1, grid.sizes().end() - 1);
	at::Tensor x = as_fp32(input).reshape({ N, C, -1 });
	at::Tensor g = as_fp32(grid).reshape({ N, -1, nd });
	std::vector<at::Tensor> src(nd);   // in input dim order: src[k] for sizes[k]
	for (int64_t k = 0; k < nd; k++)
		src[k] = source_index(g.select(2, nd - 1 - k), sizes[k], padding, align);
	at::Tensor r;
	if (mode == kNearest) {
		std::vector<at::Tensor> at_;
		for (const at::Tensor &c : src)
			at_.push_back(c.round());   /* nearbyint: half to even */
		r = corner(x, at_, sizes, at::ones_like(src[0]));
	} else {
		std::vector<at::Tensor> lo(nd), frac(nd);
		for (int64_t k = 0; k < nd; k++) {
			lo[k] = src[k].floor();
			frac[k] = src[k].sub(lo[k]);
		}
		/* corners in CPU's order (nw, ne, sw, se; then the back plane), each
		 * weight the product of (1 - frac) or frac per dim */
		for (int64_t bits = 0; bits < (1 << nd); bits++) {
			std::vector<at::Tensor> at_(nd);
			at::Tensor w;
			for (int64_t k = 0; k < nd; k++) {
				bool up = (bits >> (nd - 1 - k)) & 1;
				at_[k] = up ? lo[k].add(1.0) : lo[k];
				at::Tensor f = up ? frac[k] : frac[k].neg().add(1.0);
				w = k ? w.mul(f) : f;
			}
			at::Tensor term = corner(x, at_, sizes, w);
			r = bits ? r.add(term) : term;
		}
		if (padding == kZeros) {   /* CPU's weights of a non-finite coordinate are NaN, and so is the sample */
			at::Tensor finite;
			for (int64_t k = 0; k < nd; k++) {
				at::Tensor f = src[k].abs().lt(kInf);
				finite = k ? finite.bitwise_and(f) : f;
			}
			int64_t P = finite.size(1);
			r = at::where(finite.view({ N, 1, P }), r, scalar_like(kNaN, r));
		}
	}
	return cast_back(r.view(out_shape), input.scalar_type());
}

at::Tensor grid_sampler_2d(const at::Tensor &input, const at::Tensor &grid, int64_t mode, int64_t padding, bool align)
{
	return grid_sample(input, grid, mode, padding, align, 2);   /* undefined: declined */
}

at::Tensor grid_sampler_3d(const at::Tensor &input, const at::Tensor &grid, int64_t mode, int64_t padding, bool align)
{
	return grid_sample(input, grid, mode, padding, align, 3);   /* undefined: declined */
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_RESAMPLE)

}  // namespace neuron
