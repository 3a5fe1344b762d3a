// aten/nn/pool.cpp -- pooling, unpooling, resampling and padding composed
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
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/nn/pool.h"
#include "ops.def"

#include <ATen/native/Pool.h>
#include <ATen/native/UpSample.h>
#include <ATen/native/im2col_shape_check.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/constant_pad_nd.h>
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
#include <ATen/ops/adaptive_max_pool3d_ops.h>
#include <ATen/ops/avg_pool2d_ops.h>
#include <ATen/ops/avg_pool3d_ops.h>
#include <ATen/ops/max_pool3d_with_indices_ops.h>
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

// ---- average and max pooling --------------------------------------------------

// a pooling's geometry over its nd (2 or 3) spatial dims
struct Pool {
	int64_t nd = 0;
	std::vector<int64_t> k, s, p, d, in, out;
	int64_t outputs() const
	{
		int64_t n = 1;
		for (int64_t o : out)
			n *= o;
		return n;
	}
	int64_t taps() const
	{
		int64_t n = 1;
		for (int64_t t : k)
			n *= t;
		return n;
	}
};

// x [..., spatial...] as [B, spatial...], B the leading dims' product
at::Tensor planes(const at::Tensor &x, int64_t nd)
{
	std::vector<int64_t> shape{ -1 };
	shape.insert(shape.end(), x.sizes().end() - nd, x.sizes().end());
	return x.reshape(shape);
}

// x's leading dims with the pooled dims' output sizes
std::vector<int64_t> pooled_shape(const at::Tensor &x, const Pool &g)
{
	std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - g.nd);
	shape.insert(shape.end(), g.out.begin(), g.out.end());
	return shape;
}

// kernel / stride / padding / dilation as CPU reads them (one value or nd;
// stride empty: the kernel), the output size, CPU's shape check (its
// function name in the 3-D messages; the input-size check average pooling's)
bool pool_geometry(const at::Tensor &x, int64_t nd, at::IntArrayRef k, at::IntArrayRef s, at::IntArrayRef p,
		   at::IntArrayRef d, bool ceil, const char *fn, bool check_size, Pool &g)
{
	auto each = [nd](at::IntArrayRef a, int64_t dflt, std::vector<int64_t> &v) {
		if (a.empty()) {
			v.assign((size_t)nd, dflt);
			return true;
		}
		if (a.size() != 1 && (int64_t)a.size() != nd)
			return false;
		v.clear();
		for (int64_t i = 0; i < nd; i++)
			v.push_back(a.size() == 1 ? a[0] : a[i]);
		return true;
	};
	g.nd = nd;
	if ((x.dim() != nd + 1 && x.dim() != nd + 2) || k.empty() || !each(k, 0, g.k) || !each(s, 0, g.s) ||
	    !each(p, 0, g.p) || !each(d, 1, g.d))
		return false;
	if (s.empty())
		g.s = g.k;
	g.in.clear();
	g.out.clear();
	for (int64_t i = 0; i < nd; i++) {
		if (g.k[i] <= 0 || g.s[i] <= 0 || g.d[i] <= 0)
			return false;
		g.in.push_back(x.size(x.dim() - nd + i));
		g.out.push_back(at::native::pooling_output_shape<int64_t>(g.in[i], g.k[i], g.p[i], g.s[i], g.d[i], ceil));
	}
	if (nd == 2)
		at::native::pool2d_shape_check(x, g.k[0], g.k[1], g.s[0], g.s[1], g.p[0], g.p[1], g.d[0], g.d[1],
					       x.size(-3), g.in[0], g.in[1], g.out[0], g.out[1],
					       at::MemoryFormat::Contiguous);
	else
		at::native::pool3d_shape_check(x, x.size(-4), (int)g.k[0], (int)g.k[1], (int)g.k[2], (int)g.s[0],
					       (int)g.s[1], (int)g.s[2], (int)g.p[0], (int)g.p[1], (int)g.p[2],
					       (int)g.d[0], (int)g.d[1], (int)g.d[2], g.in[0], g.in[1], g.in[2],
					       g.out[0], g.out[1], g.out[2], fn, check_size);
	return true;
}

// the windows [B, out..., k...] of x [B, spatial...] padded with `fill` (on
// every side far enough for the last window)
at::Tensor windows(const at::Tensor &x, const Pool &g, double fill)
{
	std::vector<int64_t> pads;   /* last dim first, as constant_pad_nd takes them */
	for (int64_t i = g.nd - 1; i >= 0; i--) {
		int64_t need = (g.out[i] - 1) * g.s[i] + (g.k[i] - 1) * g.d[i] + 1;
		pads.push_back(g.p[i]);
		pads.push_back(std::max<int64_t>(0, need - g.in[i] - g.p[i]));
	}
	at::Tensor xp = at::constant_pad_nd(x, pads, fill).contiguous();
	std::vector<int64_t> size{ xp.size(0) }, stride{ xp.stride(0) };
	for (int64_t i = 0; i < g.nd; i++) {
		size.push_back(g.out[i]);
		stride.push_back(g.s[i] * xp.stride(1 + i));
	}
	for (int64_t i = 0; i < g.nd; i++) {
		size.push_back(g.k[i]);
		stride.push_back(g.d[i] * xp.stride(1 + i));
	}
	return xp.as_strided(size, stride);
}

// the window's last nd dims (the taps) as one
at::Tensor taps_last(const at::Tensor &w, const Pool &g)
{
	std::vector<int64_t> shape(w.sizes().begin(), w.sizes().end() - g.nd);
	shape.push_back(g.taps());
	return w.reshape(shape);
}

// CPU's avg_pool divisor per output position (divisor_override, or the
// window clipped to the padded input, or to the input without padding)
at::Tensor avg_divisors(const Pool &g, bool count_include_pad, std::optional<int64_t> divisor, const at::Tensor &like)
{
	std::vector<float> v((size_t)g.outputs());
	std::vector<int64_t> o((size_t)g.nd, 0);
	for (size_t n = 0; n < v.size(); n++) {
		int64_t pool = 1, inside = 1;
		for (int64_t i = 0; i < g.nd; i++) {
			int64_t st = o[i] * g.s[i] - g.p[i], en = std::min(st + g.k[i], g.in[i] + g.p[i]);
			pool *= en - st;
			inside *= std::min(en, g.in[i]) - std::max<int64_t>(st, 0);
		}
		v[n] = (float)(divisor ? *divisor : count_include_pad ? pool : inside);
		for (int64_t i = g.nd - 1; i >= 0 && ++o[i] == g.out[i]; i--)
			o[i] = 0;
	}
	return floats(v, g.out, like);
}

at::Tensor avg_pool(const at::Tensor &x, int64_t nd, at::IntArrayRef k, at::IntArrayRef s, at::IntArrayRef p,
		    bool ceil, bool count_include_pad, std::optional<int64_t> divisor, const char *fn)
{
	Pool g;
	/* CPU's avg_pool3d takes fp32 only: bf16 / fp16 get its NotImplementedError */
	if (!float_input(x) || (nd == 3 && x.scalar_type() != at::kFloat) || (divisor && *divisor == 0) ||
	    !pool_geometry(x, nd, k, s, p, {}, ceil, fn, true, g) || x.numel() == 0)
		return {};
	at::Tensor w = taps_last(windows(as_fp32(planes(x, nd)), g, 0.0), g);
	at::Tensor r = w.sum(-1).div(avg_divisors(g, count_include_pad, divisor, x));
	return cast_back(r.view(pooled_shape(x, g)), x.scalar_type());
}

at::Tensor &avg_pool2d_out(const at::Tensor &x, at::IntArrayRef k, at::IntArrayRef s, at::IntArrayRef p, bool ceil,
			   bool count_include_pad, std::optional<int64_t> divisor, at::Tensor &out)
{
	return composite_out(out, { &x }, avg_pool(x, 2, k, s, p, ceil, count_include_pad, divisor, "avg_pool2d()"));
}

at::Tensor &avg_pool3d_out(const at::Tensor &x, at::IntArrayRef k, at::IntArrayRef s, at::IntArrayRef p, bool ceil,
			   bool count_include_pad, std::optional<int64_t> divisor, at::Tensor &out)
{
	return composite_out(out, { &x }, avg_pool(x, 3, k, s, p, ceil, count_include_pad, divisor, "avg_pool3d()"));
}

// the flat input index of window tap kidx (row-major over the taps) of
// every output position; where the tap falls in the padding (the window's
// maximum is then -inf) the window's first in-bounds element, whose index
// CPU keeps
at::Tensor flat_index(const at::Tensor &kidx, const Pool &g, const at::Tensor &like)
{
	at::Tensor rest = kidx.to(at::kFloat), flat, first, inside;
	int64_t stride = 1;
	for (int64_t i = g.nd - 1; i >= 0; i--) {
		at::Tensor q = rest.div((double)g.k[i]).floor();
		at::Tensor tap = rest.sub(q.mul((double)g.k[i]));
		rest = q;
		std::vector<float> base((size_t)g.out[i]), lead((size_t)g.out[i]);
		for (int64_t o = 0; o < g.out[i]; o++) {
			int64_t b = o * g.s[i] - g.p[i];
			base[(size_t)o] = (float)b;
			lead[(size_t)o] = (float)(b >= 0 ? b : b + ((-b + g.d[i] - 1) / g.d[i]) * g.d[i]);
		}
		std::vector<int64_t> shape((size_t)g.nd, 1);
		shape[(size_t)i] = g.out[i];
		at::Tensor pos = tap.mul((double)g.d[i]).add(floats(base, shape, like));
		at::Tensor ok = pos.ge(0).bitwise_and(pos.lt((double)g.in[i]));
		at::Tensor term = pos.mul((double)stride), fterm = floats(lead, shape, like).mul((double)stride);
		flat = flat.defined() ? flat.add(term) : term;
		first = first.defined() ? first.add(fterm) : fterm;
		inside = inside.defined() ? inside.bitwise_and(ok) : ok;
		stride *= g.in[i];
	}
	return integral_float_to_int64(at::where(inside, flat, first.expand(flat.sizes())));
}

std::tuple<at::Tensor, at::Tensor> max_pool(const at::Tensor &x, int64_t nd, at::IntArrayRef k, at::IntArrayRef s,
					    at::IntArrayRef p, at::IntArrayRef d, bool ceil, const char *fn)
{
	Pool g;
	if (!float_input(x) || !pool_geometry(x, nd, k, s, p, d, ceil, fn, false, g) || x.numel() == 0)
		return {};
	int64_t plane = 1;
	for (int64_t n : g.in)
		plane *= n;
	if (plane >= (int64_t)1 << 24)   /* positions exact in fp32 */
		return {};
	at::Tensor w = taps_last(windows(planes(x, nd), g, -std::numeric_limits<double>::infinity()), g);
	auto [v, kidx] = w.max(-1);
	std::vector<int64_t> shape = pooled_shape(x, g);
	return { v.view(shape), flat_index(kidx, g, x).view(shape) };
}

std::tuple<at::Tensor &, at::Tensor &> max_pool_out(const std::tuple<at::Tensor, at::Tensor> &r, const at::Tensor &x,
						    at::Tensor &out, at::Tensor &indices)
{
	if (!std::get<0>(r).defined() || !out.is_privateuseone() || !indices.is_privateuseone() ||
	    indices.scalar_type() != at::kLong || out.scalar_type() != x.scalar_type())
		return declined;
	composite_out(out, { &x }, std::get<0>(r));
	composite_out(indices, { &x }, std::get<1>(r));
	return { out, indices };
}

std::tuple<at::Tensor &, at::Tensor &> max_pool2d_with_indices_out(const at::Tensor &x, at::IntArrayRef k,
								    at::IntArrayRef s, at::IntArrayRef p,
								    at::IntArrayRef d, bool ceil, at::Tensor &out,
								    at::Tensor &indices)
{
	return max_pool_out(max_pool(x, 2, k, s, p, d, ceil, "max_pool2d()"), x, out, indices);
}

std::tuple<at::Tensor, at::Tensor> max_pool3d_with_indices(const at::Tensor &x, at::IntArrayRef k, at::IntArrayRef s,
							   at::IntArrayRef p, at::IntArrayRef d, bool ceil)
{
	return max_pool(x, 3, k, s, p, d, ceil, "max_pool3d_with_indices_out_cpu_template()");   /* undefined: declined */
}

// d input = the output gradient added at each window's chosen index
at::Tensor &max_pool2d_backward_out(const at::Tensor &grad, const at::Tensor &x, at::IntArrayRef, at::IntArrayRef,
				    at::IntArrayRef, at::IntArrayRef, bool, const at::Tensor &indices,
				    at::Tensor &grad_input)
{
	if (!float_input(grad) || !float_input(x) || !indices.is_privateuseone() || indices.scalar_type() != at::kLong ||
	    grad.sizes() != indices.sizes() || x.dim() < 3 || grad.dim() != x.dim())
		return declined;
	at::Tensor gx = planes(x, 2);
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
	at::Tensor r = at::matmul(at::matmul(averaging(H, size[0], x), as_fp32(planes(x, 2))), averaging(W, size[1], x).t());
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

// adaptive max pooling over nd spatial dims: each dim's windows gathered
// (index_select by its table), the taps brought last, the first maximum;
// its index from the window starts plus the tap's offset per dim
std::tuple<at::Tensor, at::Tensor> adaptive_max(const at::Tensor &x, int64_t nd, at::IntArrayRef size)
{
	if (!float_input(x) || (x.dim() != nd + 1 && x.dim() != nd + 2) || (int64_t)size.size() != nd ||
	    x.numel() == 0)
		return {};
	for (int64_t o : size)
		if (o <= 0)
			return {};
	at::Tensor g = planes(x, nd);
	int64_t B = g.size(0), plane = 1;
	std::vector<int64_t> kmax((size_t)nd), view{ B }, perm{ 0 }, out_shape{ B };
	std::vector<std::vector<int64_t>> starts((size_t)nd);
	for (int64_t i = 0; i < nd; i++) {
		int64_t in = x.size(x.dim() - nd + i);
		plane *= in;
		g = g.index_select(1 + i, longs(adaptive_table(in, size[i], kmax[i], starts[i]), x));
		view.push_back(size[i]);
		view.push_back(kmax[i]);
		perm.push_back(1 + 2 * i);
		out_shape.push_back(size[i]);
	}
	if (plane >= (int64_t)1 << 24)   /* positions exact in fp32 */
		return {};
	for (int64_t i = 0; i < nd; i++)
		perm.push_back(2 + 2 * i);
	int64_t K = 1;
	for (int64_t k : kmax)
		K *= k;
	out_shape.push_back(K);
	auto [v, k] = g.view(view).permute(perm).reshape(out_shape).max(-1);
	at::Tensor rest = k.to(at::kFloat), flat;
	int64_t stride = 1;
	for (int64_t i = nd - 1; i >= 0; i--) {
		at::Tensor q = rest.div((double)kmax[i]).floor();
		at::Tensor j = rest.sub(q.mul((double)kmax[i]));
		rest = q;
		std::vector<float> st(starts[i].begin(), starts[i].end());
		std::vector<int64_t> shape((size_t)nd, 1);
		shape[(size_t)i] = size[i];
		at::Tensor term = j.add(floats(st, shape, x)).mul((double)stride);
		flat = flat.defined() ? flat.add(term) : term;
		stride *= x.size(x.dim() - nd + i);
	}
	std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - nd);
	shape.insert(shape.end(), size.begin(), size.end());
	return { v.view(shape), integral_float_to_int64(flat).view(shape) };
}

std::tuple<at::Tensor &, at::Tensor &> adaptive_max_pool2d_out(const at::Tensor &x, at::IntArrayRef size,
								at::Tensor &out, at::Tensor &indices)
{
	return max_pool_out(adaptive_max(x, 2, size), x, out, indices);
}

std::tuple<at::Tensor &, at::Tensor &> adaptive_max_pool3d_out(const at::Tensor &x, at::IntArrayRef size,
								at::Tensor &out, at::Tensor &indices)
{
	return max_pool_out(adaptive_max(x, 3, size), x, out, indices);
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
	Pool g;
	g.nd = 2;
	g.k = k.vec();
	g.s = s.vec();
	g.p = p.vec();
	g.d = d.vec();
	g.in = { b.size(2), b.size(3) };
	for (int64_t i = 0; i < 2; i++)
		g.out.push_back((g.in[i] + 2 * g.p[i] - (g.d[i] * (g.k[i] - 1) + 1)) / g.s[i] + 1);
	at::Tensor w = windows(b.reshape({ N * C, g.in[0], g.in[1] }), g, 0.0);   /* [NC, oH, oW, kH, kW] */
	at::Tensor cols = w.permute({ 0, 3, 4, 1, 2 }).reshape({ N, C * g.taps(), g.outputs() });
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
