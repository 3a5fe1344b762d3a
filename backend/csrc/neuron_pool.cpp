// neuron_pool.cpp -- pooling, unpooling, resampling and padding composed
// from the native kernels: avg_pool2d, max_pool2d_with_indices (and its
// backward), adaptive average (2-D, 3-D) / max pooling, max_unpool2d / 3d,
// nearest and (bi)linear upsampling, replication / reflection padding,
// im2col, channel_shuffle.
//
// The index arithmetic is CPU PyTorch's own (ATen/native/Pool.h,
// UpSample.h: output shapes, shape checks with their errors, source indices
// and interpolation weights, computed on the host for the output's
// positions, then uploaded); the data moves on the device: windows are
// strided views of the (padded) input reduced by the row kernels, an
// interpolation gathers rows with index_select and mixes them on VectorE at
// fp32, adaptive averages are two matmuls with averaging matrices on
// TensorE, an unpool is a scatter.  Results round once to the dtype; a max
// pool's index is the first maximum of the window, or its first NaN (CPU:
// the last NaN), padding never chosen.
#include "neuron_kernels.h"
#include "neuron_ops.h"
#include "neuron_pool.h"

#include <ATen/native/Pool.h>
#include <ATen/native/UpSample.h>
#include <ATen/native/im2col_shape_check.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/full.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/_adaptive_avg_pool2d_ops.h>
#include <ATen/ops/_adaptive_avg_pool3d_ops.h>
#include <ATen/ops/channel_shuffle_ops.h>
#include <ATen/ops/im2col_ops.h>
#include <ATen/ops/reflection_pad1d_ops.h>
#include <ATen/ops/replication_pad1d_ops.h>
#include <ATen/ops/replication_pad2d_ops.h>
#include <ATen/ops/_upsample_nearest_exact1d_ops.h>
#include <ATen/ops/_upsample_nearest_exact2d_ops.h>
#include <ATen/ops/adaptive_max_pool2d_ops.h>
#include <ATen/ops/avg_pool2d_ops.h>
#include <ATen/ops/max_pool2d_with_indices_backward_ops.h>
#include <ATen/ops/max_pool2d_with_indices_ops.h>
#include <ATen/ops/max_unpool2d_ops.h>
#include <ATen/ops/max_unpool3d_ops.h>
#include <ATen/ops/upsample_bilinear2d_ops.h>
#include <ATen/ops/upsample_linear1d_ops.h>
#include <ATen/ops/upsample_nearest1d_ops.h>
#include <ATen/ops/upsample_nearest2d_ops.h>
#include <ATen/ops/upsample_nearest3d_ops.h>

#include <cmath>
#include <limits>
#include <vector>

namespace neuron {

bool float_input(const at::Tensor &x) { return is_float_neuron(x) && at::isFloatingType(x.scalar_type()); }

at::Tensor longs(const std::vector<int64_t> &v, const at::Tensor &like)
{
	return at::tensor(v, at::TensorOptions().dtype(at::kLong)).to(like.device());
}

at::Tensor floats(const std::vector<float> &v, at::IntArrayRef shape, const at::Tensor &like)
{
	return at::tensor(v, at::TensorOptions().dtype(at::kFloat)).view(shape).to(like.device());
}

// CPU's linear interpolation indices and weights of one dim, the weights
// in `dt` as CPU keeps them (linear1d rounds them to bf16 / fp16, bilinear2d
// keeps fp32 ones): x gathered at i0 and i1
template <class T>
void linear_weights(int64_t in, int64_t out, bool align, std::optional<double> scale, std::vector<int64_t> &i0,
		    std::vector<int64_t> &i1, std::vector<float> &w0, std::vector<float> &w1)
{
	float ratio = at::native::area_pixel_compute_scale<float>(in, out, align, scale);
	for (int64_t o = 0; o < out; o++) {
		int64_t a, b;
		T l0, l1;
		at::native::compute_source_index_and_lambda<T, float>(a, b, l0, l1, ratio, o, in, out, align);
		i0.push_back(a);
		i1.push_back(b);
		w0.push_back((float)l0);
		w1.push_back((float)l1);
	}
}

Linear linear_dim(const at::Tensor &x, int64_t from_end, int64_t out, bool align, std::optional<double> scale,
		  at::ScalarType dt)
{
	int64_t d = x.dim() - from_end, in = x.size(d);
	std::vector<int64_t> i0, i1;
	std::vector<float> w0, w1;
	if (dt == at::kBFloat16)
		linear_weights<c10::BFloat16>(in, out, align, scale, i0, i1, w0, w1);
	else if (dt == at::kHalf)
		linear_weights<c10::Half>(in, out, align, scale, i0, i1, w0, w1);
	else
		linear_weights<float>(in, out, align, scale, i0, i1, w0, w1);
	std::vector<int64_t> shape(from_end, 1);
	shape[0] = out;
	return { x.index_select(d, longs(i0, x)), x.index_select(d, longs(i1, x)), floats(w0, shape, x),
		 floats(w1, shape, x) };
}

namespace {

// x [..., H, W] (3-D or 4-D) as [B, H, W], B the leading dims' product
at::Tensor planes(const at::Tensor &x) { return x.reshape({ -1, x.size(-2), x.size(-1) }); }

// ---- average and max pooling --------------------------------------------------

struct Pool2d {
	int64_t kH, kW, sH, sW, pH, pW, dH, dW, H, W, oH, oW;
};

// kernel / stride / padding / dilation as CPU reads them (one value or
// two; stride empty: the kernel), the output size, CPU's shape check
bool pool2d_geometry(const at::Tensor &x, at::IntArrayRef k, at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d,
		     bool ceil, Pool2d &g)
{
	auto two = [](at::IntArrayRef a, int64_t dflt, int64_t &h, int64_t &w) {
		if (a.empty()) {
			h = w = dflt;
			return true;
		}
		if (a.size() != 1 && a.size() != 2)
			return false;
		h = a[0];
		w = a.size() == 2 ? a[1] : a[0];
		return true;
	};
	if ((x.dim() != 3 && x.dim() != 4) || !two(k, 0, g.kH, g.kW) || k.empty())
		return false;
	if (!two(s, 0, g.sH, g.sW) || !two(p, 0, g.pH, g.pW) || !two(d, 1, g.dH, g.dW))
		return false;
	if (s.empty()) {
		g.sH = g.kH;
		g.sW = g.kW;
	}
	if (g.kH <= 0 || g.kW <= 0 || g.sH <= 0 || g.sW <= 0 || g.dH <= 0 || g.dW <= 0)
		return false;
	g.H = x.size(-2);
	g.W = x.size(-1);
	g.oH = at::native::pooling_output_shape<int64_t>(g.H, g.kH, g.pH, g.sH, g.dH, ceil);
	g.oW = at::native::pooling_output_shape<int64_t>(g.W, g.kW, g.pW, g.sW, g.dW, ceil);
	at::native::pool2d_shape_check(x, g.kH, g.kW, g.sH, g.sW, g.pH, g.pW, g.dH, g.dW, x.size(-3), g.H, g.W, g.oH,
				       g.oW, at::MemoryFormat::Contiguous);
	return true;
}

// the windows [B, oH, oW, kH, kW] of x [B, H, W] padded with `fill` (on every
// side far enough for the last window)
at::Tensor windows(const at::Tensor &x, const Pool2d &g, double fill)
{
	int64_t needH = (g.oH - 1) * g.sH + (g.kH - 1) * g.dH + 1, needW = (g.oW - 1) * g.sW + (g.kW - 1) * g.dW + 1;
	int64_t bH = std::max<int64_t>(0, needH - g.H - g.pH), bW = std::max<int64_t>(0, needW - g.W - g.pW);
	at::Tensor xp = at::constant_pad_nd(x, { g.pW, bW, g.pH, bH }, fill).contiguous();
	int64_t Wp = xp.size(2), HWp = xp.size(1) * Wp;
	return xp.as_strided({ xp.size(0), g.oH, g.oW, g.kH, g.kW }, { HWp, g.sH * Wp, g.sW, g.dH * Wp, g.dW });
}

// CPU's avg_pool2d divisor per output position (divisor_override, or the
// window clipped to the padded input, or to the input without padding)
at::Tensor avg_divisors(const Pool2d &g, bool count_include_pad, std::optional<int64_t> divisor, const at::Tensor &like)
{
	std::vector<float> v((size_t)(g.oH * g.oW));
	for (int64_t oh = 0; oh < g.oH; oh++)
		for (int64_t ow = 0; ow < g.oW; ow++) {
			int64_t hs = oh * g.sH - g.pH, ws = ow * g.sW - g.pW;
			int64_t he = std::min(hs + g.kH, g.H + g.pH), we = std::min(ws + g.kW, g.W + g.pW);
			int64_t pool = (he - hs) * (we - ws);
			hs = std::max<int64_t>(hs, 0);
			ws = std::max<int64_t>(ws, 0);
			he = std::min(he, g.H);
			we = std::min(we, g.W);
			int64_t n = divisor ? *divisor : count_include_pad ? pool : (he - hs) * (we - ws);
			v[(size_t)(oh * g.oW + ow)] = (float)n;
		}
	return floats(v, { g.oH, g.oW }, like);
}

at::Tensor &avg_pool2d_out(const at::Tensor &x, at::IntArrayRef k, at::IntArrayRef s, at::IntArrayRef p, bool ceil,
			   bool count_include_pad, std::optional<int64_t> divisor, at::Tensor &out)
{
	Pool2d g;
	if (!float_input(x) || (divisor && *divisor == 0) || !pool2d_geometry(x, k, s, p, {}, ceil, g) ||
	    x.numel() == 0)
		return declined;
	at::Tensor w = windows(as_fp32(planes(x)), g, 0.0);
	at::Tensor r = w.sum({ 3, 4 }).div(avg_divisors(g, count_include_pad, divisor, x));
	std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - 2);
	shape.push_back(g.oH);
	shape.push_back(g.oW);
	return composite_out(out, { &x }, cast_back(r.view(shape), x.scalar_type()));
}

// the flat input index (h * W + w) of window element k (kh * kW + kw) of
// every output position, with the first in-bounds element where k falls in
// the padding (the window's maximum is then -inf: CPU keeps its first
// in-bounds index)
at::Tensor flat_index(const at::Tensor &k, const Pool2d &g, const at::Tensor &like)
{
	std::vector<int64_t> bh((size_t)g.oH), bw((size_t)g.oW), fh((size_t)g.oH), fw((size_t)g.oW);
	auto first_in = [](int64_t start, int64_t dil) { return start >= 0 ? start : start + ((-start + dil - 1) / dil) * dil; };
	for (int64_t o = 0; o < g.oH; o++) {
		bh[(size_t)o] = o * g.sH - g.pH;
		fh[(size_t)o] = first_in(bh[(size_t)o], g.dH);
	}
	for (int64_t o = 0; o < g.oW; o++) {
		bw[(size_t)o] = o * g.sW - g.pW;
		fw[(size_t)o] = first_in(bw[(size_t)o], g.dW);
	}
	at::Tensor kf = k.to(at::kFloat), kh = kf.div(g.kW).floor();
	at::Tensor kw = kf.sub(kh.mul(g.kW));
	at::Tensor h = kh.mul(g.dH).to(at::kLong).add(longs(bh, like).view({ g.oH, 1 }));
	at::Tensor w = kw.mul(g.dW).to(at::kLong).add(longs(bw, like).view({ 1, g.oW }));
	at::Tensor inside = h.ge(0).logical_and(h.lt(g.H)).logical_and(w.ge(0)).logical_and(w.lt(g.W));
	at::Tensor first = longs(fh, like).view({ g.oH, 1 }).mul(g.W).add(longs(fw, like).view({ 1, g.oW }));
	return at::where(inside, h.mul(g.W).add(w), first);
}

std::tuple<at::Tensor &, at::Tensor &> max_pool2d_with_indices_out(const at::Tensor &x, at::IntArrayRef k,
								    at::IntArrayRef s, at::IntArrayRef p,
								    at::IntArrayRef d, bool ceil, at::Tensor &out,
								    at::Tensor &indices)
{
	Pool2d g;
	if (!float_input(x) || !pool2d_geometry(x, k, s, p, d, ceil, g) || x.numel() == 0 || !out.is_privateuseone() ||
	    !indices.is_privateuseone() || indices.scalar_type() != at::kLong || out.scalar_type() != x.scalar_type())
		return declined;
	at::Tensor w = windows(planes(x), g, -std::numeric_limits<double>::infinity());
	at::Tensor flat = w.reshape({ w.size(0), g.oH, g.oW, g.kH * g.kW });
	auto [v, kidx] = flat.max(3);
	std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - 2);
	shape.push_back(g.oH);
	shape.push_back(g.oW);
	composite_out(out, { &x }, v.view(shape));
	composite_out(indices, { &x }, flat_index(kidx, g, x).view(shape));
	return { out, indices };
}

// d input = the output gradient added at each window's chosen index
at::Tensor &max_pool2d_backward_out(const at::Tensor &grad, const at::Tensor &x, at::IntArrayRef, at::IntArrayRef,
				    at::IntArrayRef, at::IntArrayRef, bool, const at::Tensor &indices,
				    at::Tensor &grad_input)
{
	if (!float_input(grad) || !float_input(x) || !indices.is_privateuseone() || indices.scalar_type() != at::kLong ||
	    grad.sizes() != indices.sizes() || x.dim() < 3 || grad.dim() != x.dim())
		return declined;
	at::Tensor gx = planes(x);
	int64_t B = gx.size(0);
	at::Tensor r = at::zeros({ B, gx.size(1) * gx.size(2) }, x.options().dtype(at::kFloat));
	r = r.scatter_add(1, indices.reshape({ B, -1 }), as_fp32(grad).reshape({ B, -1 }));
	return composite_out(grad_input, { &grad, &x }, cast_back(r.view(x.sizes()), x.scalar_type()));
}

// ---- adaptive pooling ----------------------------------------------------------

// CPU's adaptive windows: [floor(o in / out), ceil((o + 1) in / out))
void adaptive_window(int64_t o, int64_t in, int64_t out, int64_t &start, int64_t &end)
{
	start = (o * in) / out;
	end = ((o + 1) * in + out - 1) / out;
}

// the [out, in] averaging matrix of one dim (1 / window length on the window)
at::Tensor averaging(int64_t in, int64_t out, const at::Tensor &like)
{
	std::vector<float> v((size_t)(in * out), 0.0f);
	for (int64_t o = 0; o < out; o++) {
		int64_t s, e;
		adaptive_window(o, in, out, s, e);
		for (int64_t i = s; i < e; i++)
			v[(size_t)(o * in + i)] = 1.0f / (float)(e - s);
	}
	return floats(v, { out, in }, like);
}

// A_h x A_w^T per plane, at fp32 on TensorE
at::Tensor adaptive_avg_pool2d(const at::Tensor &x, at::IntArrayRef size)
{
	if (!float_input(x) || (x.dim() != 3 && x.dim() != 4) || size.size() != 2 || size[0] <= 0 || size[1] <= 0 ||
	    (x.numel() == 0 && (x.dim() == 3 || x.size(0) != 0 || x.size(1) == 0 || x.size(2) == 0 || x.size(3) == 0)))
		return declined;
	int64_t H = x.size(-2), W = x.size(-1);
	if (x.numel() == 0)   /* an empty batch (CPU allows only that): an empty result */
		return at::empty({ 0, x.size(1), size[0], size[1] }, x.options());
	at::Tensor r = at::matmul(at::matmul(averaging(H, size[0], x), as_fp32(planes(x))), averaging(W, size[1], x).t());
	std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - 2);
	shape.push_back(size[0]);
	shape.push_back(size[1]);
	return cast_back(r.reshape(shape), x.scalar_type());
}

// each dim's windows as rows of Kmax indices, short windows padded with
// their last index (a repeat never wins a first-maximum search)
std::vector<int64_t> adaptive_table(int64_t in, int64_t out, int64_t &kmax, std::vector<int64_t> &starts)
{
	kmax = 0;
	starts.assign((size_t)out, 0);
	for (int64_t o = 0; o < out; o++) {
		int64_t s, e;
		adaptive_window(o, in, out, s, e);
		kmax = std::max(kmax, e - s);
		starts[(size_t)o] = s;
	}
	std::vector<int64_t> t((size_t)(out * kmax));
	for (int64_t o = 0; o < out; o++) {
		int64_t s, e;
		adaptive_window(o, in, out, s, e);
		for (int64_t j = 0; j < kmax; j++)
			t[(size_t)(o * kmax + j)] = std::min(s + j, e - 1);
	}
	return t;
}

std::tuple<at::Tensor &, at::Tensor &> adaptive_max_pool2d_out(const at::Tensor &x, at::IntArrayRef size,
								at::Tensor &out, at::Tensor &indices)
{
	if (!float_input(x) || (x.dim() != 3 && x.dim() != 4) || size.size() != 2 || size[0] <= 0 || size[1] <= 0 ||
	    x.numel() == 0 || !out.is_privateuseone() || !indices.is_privateuseone() ||
	    indices.scalar_type() != at::kLong || out.scalar_type() != x.scalar_type())
		return declined;
	int64_t H = x.size(-2), W = x.size(-1), oH = size[0], oW = size[1], kh, kw;
	std::vector<int64_t> sh, sw;
	at::Tensor th = longs(adaptive_table(H, oH, kh, sh), x), tw = longs(adaptive_table(W, oW, kw, sw), x);
	at::Tensor p = planes(x);
	int64_t B = p.size(0);
	at::Tensor g = p.index_select(1, th).index_select(2, tw).view({ B, oH, kh, oW, kw });
	at::Tensor flat = g.permute({ 0, 1, 3, 2, 4 }).reshape({ B, oH, oW, kh * kw });
	auto [v, k] = flat.max(3);
	at::Tensor kf = k.to(at::kFloat), kr = kf.div(kw).floor();
	at::Tensor h = kr.to(at::kLong).add(longs(sh, x).view({ oH, 1 }));
	at::Tensor w = kf.sub(kr.mul(kw)).to(at::kLong).add(longs(sw, x).view({ 1, oW }));
	std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - 2);
	shape.push_back(oH);
	shape.push_back(oW);
	composite_out(out, { &x }, v.view(shape));
	composite_out(indices, { &x }, h.mul(W).add(w).view(shape));
	return { out, indices };
}

// A_d, A_h, A_w over [B, D, H, W] planes: D first ([oD, D] @ [B, D, H W]),
// then H and W as adaptive_avg_pool2d, at fp32; bf16 / fp16 stay on the
// CPU, whose 3-D kernel accumulates in the dtype (up to 3x off an fp32
// average near zero)
at::Tensor adaptive_avg_pool3d(const at::Tensor &x, at::IntArrayRef size)
{
	if (!float_input(x) || x.scalar_type() != at::kFloat || (x.dim() != 4 && x.dim() != 5) || size.size() != 3 ||
	    size[0] <= 0 || size[1] <= 0 || size[2] <= 0)
		return declined;
	if (x.numel() == 0) {   /* an empty batch (CPU allows only that): an empty result */
		for (int64_t d = 1; d < x.dim(); d++)
			if (x.dim() == 4 || x.size(0) != 0 || x.size(d) == 0)
				return declined;
		return at::empty({ 0, x.size(1), size[0], size[1], size[2] }, x.options());
	}
	int64_t D = x.size(-3), H = x.size(-2), W = x.size(-1);
	at::Tensor v = as_fp32(x).reshape({ -1, D, H * W });
	at::Tensor r = at::matmul(averaging(D, size[0], x), v).reshape({ -1, H, W });
	r = at::matmul(at::matmul(averaging(H, size[1], x), r), averaging(W, size[2], x).t());
	std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - 3);
	shape.insert(shape.end(), size.begin(), size.end());
	return cast_back(r.reshape(shape), x.scalar_type());
}

// ---- padding, im2col, channel shuffle -------------------------------------------

// x with its last `dims` dims re-indexed: position o of dim k reads source
// src(o - before_k) of that dim (replicate: clamped; reflect: mirrored);
// pads as CPU lists them (last dim first); negative pads crop
at::Tensor pad_by_index(const at::Tensor &x, at::IntArrayRef pad, bool reflect)
{
	int64_t dims = (int64_t)pad.size() / 2;
	if (!float_input(x) || (int64_t)pad.size() != 2 * dims || x.dim() < dims + 1 || x.dim() > dims + 2)
		return {};
	if (x.numel() == 0) {   /* only an empty batch (dim 0 of a batched x), as CPU allows */
		bool batch_only = x.dim() == dims + 2 && x.size(0) == 0;
		for (int64_t d = 1; d < x.dim(); d++)
			batch_only = batch_only && x.size(d) > 0;
		if (!batch_only)
			return {};
	}
	at::Tensor r = x;
	for (int64_t k = 0; k < dims; k++) {
		int64_t d = x.dim() - 1 - k, in = x.size(d), before = pad[2 * k], after = pad[2 * k + 1];
		int64_t out = in + before + after;
		if (out <= 0 || (reflect && (before >= in || after >= in || before < 0 || after < 0)))
			return {};
		std::vector<int64_t> idx((size_t)out);
		for (int64_t o = 0; o < out; o++) {
			int64_t j = o - before;
			if (reflect)
				j = j < 0 ? -j : j >= in ? 2 * (in - 1) - j : j;
			idx[(size_t)o] = std::min(std::max<int64_t>(j, 0), in - 1);
		}
		r = r.index_select(d, longs(idx, x));
	}
	return r.contiguous();
}

at::Tensor &replication_pad1d_out(const at::Tensor &x, at::IntArrayRef pad, at::Tensor &out)
{
	return composite_out(out, { &x }, pad.size() == 2 ? pad_by_index(x, pad, false) : at::Tensor());
}

at::Tensor &replication_pad2d_out(const at::Tensor &x, at::IntArrayRef pad, at::Tensor &out)
{
	return composite_out(out, { &x }, pad.size() == 4 ? pad_by_index(x, pad, false) : at::Tensor());
}

at::Tensor &reflection_pad1d_out(const at::Tensor &x, at::IntArrayRef pad, at::Tensor &out)
{
	return composite_out(out, { &x }, pad.size() == 2 ? pad_by_index(x, pad, true) : at::Tensor());
}

// im2col: the windows of the zero-padded input as [N, C kH kW, L] columns
// (CPU's shape check first)
at::Tensor im2col(const at::Tensor &x, at::IntArrayRef k, at::IntArrayRef d, at::IntArrayRef p, at::IntArrayRef s)
{
	if (!float_input(x) || k.size() != 2 || d.size() != 2 || p.size() != 2 || s.size() != 2)
		return {};
	at::native::im2col_shape_check(x, at::Tensor(), k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]);
	bool batched = x.dim() == 4;
	at::Tensor b = batched ? x : x.unsqueeze(0);
	int64_t N = b.size(0), C = b.size(1);
	Pool2d g{ k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], b.size(2), b.size(3), 0, 0 };
	g.oH = (g.H + 2 * g.pH - (g.dH * (g.kH - 1) + 1)) / g.sH + 1;
	g.oW = (g.W + 2 * g.pW - (g.dW * (g.kW - 1) + 1)) / g.sW + 1;
	at::Tensor w = windows(b.reshape({ N * C, g.H, g.W }), g, 0.0);   /* [NC, oH, oW, kH, kW] */
	at::Tensor cols = w.permute({ 0, 3, 4, 1, 2 }).reshape({ N, C * g.kH * g.kW, g.oH * g.oW });
	return batched ? cols : cols.squeeze(0);
}

// channel_shuffle: [N, g, C / g, ...] with its group dims swapped
at::Tensor channel_shuffle(const at::Tensor &x, int64_t groups)
{
	if (!x.is_privateuseone() || x.dim() < 3 || groups <= 0 || x.size(1) % groups)
		return {};
	std::vector<int64_t> shape{ x.size(0), groups, x.size(1) / groups };
	shape.insert(shape.end(), x.sizes().begin() + 2, x.sizes().end());
	return x.reshape(shape).transpose(1, 2).reshape(x.sizes()).contiguous();
}

// ---- unpooling -----------------------------------------------------------------

// out[b, idx] = x[b, j] over planes of `spatial` elements; an index outside
// is CPU's error (read from the simulator's copy)
at::Tensor unpool(const at::Tensor &x, const at::Tensor &idx, at::IntArrayRef size, int64_t spatial_dims)
{
	if (!float_input(x) || !idx.is_privateuseone() || idx.scalar_type() != at::kLong || x.sizes() != idx.sizes() ||
	    (int64_t)size.size() != spatial_dims || x.dim() < spatial_dims + 1 || x.dim() > spatial_dims + 2)
		return {};
	int64_t total = 1;
	for (int64_t s : size)
		total *= s;
	int64_t B = 1;
	for (int64_t d = 0; d < x.dim() - spatial_dims; d++)
		B *= x.size(d);
	if (total <= 0 || B == 0)
		return {};
	at::Tensor i = idx.reshape({ B, -1 });
	if (i.numel()) {
		at::Tensor lim = peek_cpu(at::stack({ i.min(), i.max() }));
		int64_t lo = lim[0].item<int64_t>(), hi = lim[1].item<int64_t>();
		TORCH_CHECK(lo >= 0 && hi < total, "Found an invalid max index: ", lo < 0 ? lo : hi,
			    " (output volumes are of size ", size, ")");
	}
	at::Tensor r = at::zeros({ B, total }, x.options()).scatter(1, i, x.reshape({ B, -1 }));
	std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - spatial_dims);
	shape.insert(shape.end(), size.begin(), size.end());
	return r.view(shape);
}

at::Tensor max_unpool2d(const at::Tensor &x, const at::Tensor &idx, at::IntArrayRef size)
{
	return unpool(x, idx, size, 2);
}

at::Tensor max_unpool3d(const at::Tensor &x, const at::Tensor &idx, at::IntArrayRef size, at::IntArrayRef stride,
			at::IntArrayRef padding)
{
	if (stride.size() != 3 || padding.size() != 3)
		return {};
	for (int i = 0; i < 3; i++)
		if (stride[i] <= 0)
			return {};
	return unpool(x, idx, size, 3);
}

// ---- upsampling ----------------------------------------------------------------

// x with dim d (from the end) gathered at CPU's nearest source indices
at::Tensor nearest_dim(const at::Tensor &x, int64_t from_end, int64_t out, std::optional<double> scale, bool exact)
{
	int64_t d = x.dim() - from_end, in = x.size(d);
	std::vector<int64_t> v((size_t)out);
	for (int64_t o = 0; o < out; o++)
		v[(size_t)o] = exact ? at::native::nearest_exact_idx(o, in, out, scale) : at::native::nearest_idx(o, in, out, scale);
	return x.index_select(d, longs(v, x));
}

at::Tensor nearest(const at::Tensor &x, at::IntArrayRef size, std::initializer_list<std::optional<double>> scales,
		   bool exact)
{
	int64_t k = (int64_t)size.size();
	if (!float_input(x) || x.dim() != k + 2 || x.numel() == 0)
		return {};
	if (k == 1)
		at::native::upsample_1d_common_check(x.sizes(), size);
	else if (k == 2)
		at::native::upsample_2d_common_check(x.sizes(), size);
	else
		at::native::upsample_3d_common_check(x.sizes(), size);
	at::Tensor r = x;
	int64_t i = 0;
	for (const std::optional<double> &s : scales) {
		r = nearest_dim(r, k - i, size[i], s, exact);
		i++;
	}
	return r.contiguous();
}

at::Tensor &upsample_nearest1d_out(const at::Tensor &x, at::IntArrayRef size, std::optional<double> s, at::Tensor &out)
{
	return composite_out(out, { &x }, nearest(x, size, { s }, false));
}

at::Tensor &upsample_nearest_exact1d_out(const at::Tensor &x, at::IntArrayRef size, std::optional<double> s,
					 at::Tensor &out)
{
	return composite_out(out, { &x }, nearest(x, size, { s }, true));
}

at::Tensor &upsample_nearest2d_out(const at::Tensor &x, at::IntArrayRef size, std::optional<double> sh,
				   std::optional<double> sw, at::Tensor &out)
{
	return composite_out(out, { &x }, nearest(x, size, { sh, sw }, false));
}

at::Tensor &upsample_nearest_exact2d_out(const at::Tensor &x, at::IntArrayRef size, std::optional<double> sh,
					 std::optional<double> sw, at::Tensor &out)
{
	return composite_out(out, { &x }, nearest(x, size, { sh, sw }, true));
}

at::Tensor &upsample_nearest3d_out(const at::Tensor &x, at::IntArrayRef size, std::optional<double> sd,
				   std::optional<double> sh, std::optional<double> sw, at::Tensor &out)
{
	return composite_out(out, { &x }, nearest(x, size, { sd, sh, sw }, false));
}

// linear: x0 w0 + x1 w1; bilinear: CPU's order, the inner (W) mix of each
// source row, weighted by H's: (x00 w0w + x01 w1w) w0h + (x10 w0w + x11 w1w) w1h
at::Tensor &upsample_linear1d_out(const at::Tensor &x, at::IntArrayRef size, bool align, std::optional<double> s,
				  at::Tensor &out)
{
	if (!float_input(x) || x.dim() != 3 || size.size() != 1 || x.numel() == 0)
		return declined;
	at::native::upsample_1d_common_check(x.sizes(), size);
	Linear l = linear_dim(as_fp32(x), 1, size[0], align, s, x.scalar_type());   // bf16 weights, as CPU
	return composite_out(out, { &x }, cast_back(l.x0.mul(l.w0).add(l.x1.mul(l.w1)), x.scalar_type()));
}

at::Tensor &upsample_bilinear2d_out(const at::Tensor &x, at::IntArrayRef size, bool align, std::optional<double> sh,
				    std::optional<double> sw, at::Tensor &out)
{
	// bf16 / fp16: CPU's reduced-precision bilinear path rounds on its own
	// schedule (a 5 x 6 -> 13 x 129 resize differs by 1-2 bf16 ulps from
	// every fp32 order tried): left to the CPU fallback
	if (!float_input(x) || x.scalar_type() != at::kFloat || x.dim() != 4 || size.size() != 2 || x.numel() == 0)
		return declined;
	at::native::upsample_2d_common_check(x.sizes(), size);
	at::ScalarType dt = at::kFloat;
	Linear h = linear_dim(as_fp32(x), 2, size[0], align, sh, dt);
	Linear a = linear_dim(h.x0, 1, size[1], align, sw, dt), b = linear_dim(h.x1, 1, size[1], align, sw, dt);
	at::Tensor r = a.x0.mul(a.w0).add(a.x1.mul(a.w1)).mul(h.w0).add(b.x0.mul(b.w0).add(b.x1.mul(b.w1)).mul(h.w1));
	return composite_out(out, { &x }, cast_back(r, x.scalar_type()));
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_POOL)

}  // namespace neuron
