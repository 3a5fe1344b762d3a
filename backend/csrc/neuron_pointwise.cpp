// neuron_pointwise.cpp -- elementwise activations and math functions composed
// from the native kernels (each step its own program on the device
// timeline): hardtanh / relu6, leaky_relu, elu / celu / selu, glu, prelu, hardsigmoid,
// hardswish, mish, threshold, hard / soft shrink, sign, round, trunc, ceil,
// frac, log2, log10, logaddexp, xlogy, fmax, fmin, rsub, nansum, dot, addmv,
// std_mean, roll.
//
// Each computes as CPU PyTorch's kernel does, in fp32 for bf16 / fp16 inputs
// (CPU's opmath) rounded once at the end, with CPU's NaN and infinity
// behaviour (written out next to each formula); undefined (the fallback)
// for what it does not cover.
#include "neuron_kernels.h"
#include "neuron_math.h"
#include "neuron_ops.h"

#include <ATen/native/Resize.h>

#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/addmv_ops.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/full.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/var_mean.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/ceil_ops.h>
#include <ATen/ops/dot_ops.h>
#include <ATen/ops/elu_ops.h>
#include <ATen/ops/glu_ops.h>
#include <ATen/ops/_prelu_kernel_ops.h>
#include <ATen/ops/fmax_ops.h>
#include <ATen/ops/fmin_ops.h>
#include <ATen/ops/frac_ops.h>
#include <ATen/ops/hardshrink_ops.h>
#include <ATen/ops/hardsigmoid_ops.h>
#include <ATen/ops/hardswish_ops.h>
#include <ATen/ops/hardtanh_ops.h>
#include <ATen/ops/leaky_relu_ops.h>
#include <ATen/ops/log10_ops.h>
#include <ATen/ops/log2_ops.h>
#include <ATen/ops/logaddexp_ops.h>
#include <ATen/ops/mish_ops.h>
#include <ATen/ops/nansum_ops.h>
#include <ATen/ops/roll_ops.h>
#include <ATen/ops/round_ops.h>
#include <ATen/ops/rsub_ops.h>
#include <ATen/ops/sgn_ops.h>
#include <ATen/ops/sign_ops.h>
#include <ATen/ops/softshrink_ops.h>
#include <ATen/ops/std_mean_ops.h>
#include <ATen/ops/threshold_ops.h>
#include <ATen/ops/trunc_ops.h>
#include <ATen/ops/vdot_ops.h>
#include <ATen/ops/xlogy_ops.h>

#include <cmath>
#include <limits>

namespace neuron {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

at::Tensor up(const at::Tensor &x) { return as_fp32(x); }
at::Tensor back(const at::Tensor &r, at::ScalarType dt) { return cast_back(r, dt); }
at::Tensor is_nan(const at::Tensor &x) { return x.ne(x); }
at::Tensor &out_of(at::Tensor &out, std::initializer_list<const at::Tensor *> ins, const at::Tensor &r)
{
	return composite_out(out, ins, r);
}

bool floats(const at::Tensor &x, const at::Tensor &y) { return is_float_neuron(x) && is_float_neuron(y); }

// ---- activations ------------------------------------------------------------

// clamp(x, lo, hi): NaN stays NaN, as CPU's hardtanh
at::Tensor hardtanh_impl(const at::Tensor &x, const at::Scalar &lo, const at::Scalar &hi)
{
	return is_float_neuron(x) ? at::clamp(x, lo, hi) : at::Tensor();
}

at::Tensor hardtanh(const at::Tensor &x, const at::Scalar &lo, const at::Scalar &hi)
{
	return hardtanh_impl(x, lo, hi);
}

at::Tensor &hardtanh_out(const at::Tensor &x, const at::Scalar &lo, const at::Scalar &hi, at::Tensor &out)
{
	return out_of(out, { &x }, hardtanh_impl(x, lo, hi));
}

at::Tensor &hardtanh_inplace(at::Tensor &x, const at::Scalar &lo, const at::Scalar &hi)
{
	return out_of(x, {}, hardtanh_impl(x, lo, hi));
}

// x > 0 ? x : x * slope (NaN: NaN * slope)
at::Tensor &leaky_relu_out(const at::Tensor &x, const at::Scalar &slope, at::Tensor &out)
{
	if (!is_float_neuron(x) || slope.isComplex())
		return declined;
	at::Tensor f = up(x);
	return out_of(out, { &x }, back(at::where(f.gt(0), f, f.mul(slope.toDouble())), x.scalar_type()));
}

// CPU's elu: x <= 0 ? (exp(x * input_scale) - 1) * alpha * scale : x * scale
at::Tensor &elu_out(const at::Tensor &x, const at::Scalar &alpha, const at::Scalar &scale,
		    const at::Scalar &input_scale, at::Tensor &out)
{
	if (!is_float_neuron(x) || alpha.isComplex() || scale.isComplex() || input_scale.isComplex())
		return declined;
	at::Tensor f = up(x);
	double a = alpha.toDouble(), s = scale.toDouble(), is = input_scale.toDouble();
	at::Tensor neg = f.mul(is).expm1().mul(a * s);   // expm1: exact for tiny x, as CPU
	return out_of(out, { &x }, back(at::where(f.le(0), neg, f.mul(s)), x.scalar_type()));
}

// CPU's hardsigmoid: min(max(x + 3, 0), 6) / 6
at::Tensor &hardsigmoid_out(const at::Tensor &x, at::Tensor &out)
{
	if (!is_float_neuron(x))
		return declined;
	return out_of(out, { &x }, back(at::clamp(up(x).add(3.0), 0.0, 6.0).div(6.0), x.scalar_type()));
}

// CPU's hardswish: x * min(max(x + 3, 0), 6) / 6
at::Tensor hardswish_impl(const at::Tensor &x)
{
	if (!is_float_neuron(x))
		return {};
	at::Tensor f = up(x);
	return back(f.mul(at::clamp(f.add(3.0), 0.0, 6.0)).div(6.0), x.scalar_type());
}

at::Tensor hardswish(const at::Tensor &x)
{
	return hardswish_impl(x);
}

at::Tensor &hardswish_out(const at::Tensor &x, at::Tensor &out)
{
	return out_of(out, { &x }, hardswish_impl(x));
}

// CPU's mish: x * tanh(log1p(exp(x))) (exp's overflow gives tanh(inf) = 1)
at::Tensor &mish_out(const at::Tensor &x, at::Tensor &out)
{
	if (!is_float_neuron(x))
		return declined;
	at::Tensor f = up(x);
	return out_of(out, { &x }, back(f.mul(f.exp().log1p().tanh()), x.scalar_type()));
}

// x <= threshold ? value : x (NaN: x)
at::Tensor &threshold_out(const at::Tensor &x, const at::Scalar &th, const at::Scalar &value, at::Tensor &out)
{
	if (!is_float_neuron(x) || th.isComplex() || value.isComplex())
		return declined;
	at::Tensor f = up(x);
	at::Tensor v = at::full({}, value.toDouble(), f.options());
	return out_of(out, { &x }, back(at::where(f.le(th.toDouble()), v, f), x.scalar_type()));
}

// -l <= x <= l ? 0 : x (NaN: x)
at::Tensor &hardshrink_out(const at::Tensor &x, const at::Scalar &l, at::Tensor &out)
{
	if (!is_float_neuron(x) || l.isComplex())
		return declined;
	at::Tensor f = up(x);
	double v = l.toDouble();
	at::Tensor in = f.ge(-v).bitwise_and(f.le(v));
	return out_of(out, { &x }, back(at::where(in, at::zeros({}, f.options()), f), x.scalar_type()));
}

// x > l ? x - l : x < -l ? x + l : x * 0 (NaN: NaN)
at::Tensor &softshrink_out(const at::Tensor &x, const at::Scalar &l, at::Tensor &out)
{
	if (!is_float_neuron(x) || l.isComplex())
		return declined;
	at::Tensor f = up(x);
	double v = l.toDouble();
	at::Tensor r = at::where(f.gt(v), f.sub(v), at::where(f.lt(-v), f.add(v), f.mul(0.0)));
	return out_of(out, { &x }, back(r, x.scalar_type()));
}

// glu: the first half along dim times the sigmoid of the second (fp32
// inside, as CPU's opmath); an odd size declines (CPU's error)
at::Tensor &glu_out(const at::Tensor &x, int64_t dim, at::Tensor &out)
{
	if (!is_float_neuron(x) || x.dim() == 0)
		return declined;
	int64_t d = at::maybe_wrap_dim(dim, x.dim());
	if (x.size(d) % 2)
		return declined;
	int64_t h = x.size(d) / 2;
	at::Tensor a = up(x.narrow(d, 0, h)), b = up(x.narrow(d, h, h));
	return out_of(out, { &x }, back(a.mul(b.sigmoid()), x.scalar_type()));
}

// CPU's prelu: x > 0 ? x : w * x (the weight already shaped to broadcast)
at::Tensor prelu_kernel(const at::Tensor &x, const at::Tensor &w)
{
	if (!is_float_neuron(x) || !is_float_neuron(w) || x.scalar_type() != w.scalar_type())
		return {};
	return at::where(x.gt(0), x, w.mul(x));
}

// ---- rounding ---------------------------------------------------------------

// (x > 0) - (x < 0): 0 for NaN, as CPU's sign
at::Tensor sign_impl(const at::Tensor &x)
{
	if (!is_float_neuron(x))
		return {};
	return x.gt(0).to(x.scalar_type()).sub(x.lt(0).to(x.scalar_type()));
}

at::Tensor &sign_out(const at::Tensor &x, at::Tensor &out)
{
	return out_of(out, { &x }, sign_impl(x));
}

at::Tensor &sgn_out(const at::Tensor &x, at::Tensor &out)
{
	return out_of(out, { &x }, sign_impl(x));   // a real tensor's sgn is its sign
}

// nearest integer, ties to even (CPU's nearbyint), of an fp32 f: below 2^23
// in magnitude, adding and subtracting 2^23 with f's sign rounds exactly so
// (the sum lands where fp32's spacing is 1: the adder's round-to-nearest-
// even); from 2^23 on every fp32 value is an integer
at::Tensor round_even(const at::Tensor &f)
{
	const double m = 8388608.0;   // 2^23
	at::Tensor r = at::where(f.lt(0), f.sub(m).add(m), f.add(m).sub(m));
	return at::where(f.abs().lt(m), r, f);
}

// CPU's round(x, decimals): nearbyint(x * 10^d) / 10^d, or with d < 0
// nearbyint(x / 10^-d) * 10^-d, in fp32 for every float dtype, rounded once
at::Tensor round_impl(const at::Tensor &x, int64_t decimals)
{
	if (!is_float_neuron(x) || decimals > 38 || decimals < -38)
		return {};
	at::Tensor f = up(x);
	if (decimals == 0)
		return back(round_even(f), x.scalar_type());
	double p = std::pow(10.0, (double)std::abs(decimals));
	at::Tensor r = decimals > 0 ? round_even(f.mul(p)).div(p) : round_even(f.div(p)).mul(p);
	return back(r, x.scalar_type());
}

at::Tensor &round_out(const at::Tensor &x, at::Tensor &out)
{
	return out_of(out, { &x }, round_impl(x, 0));
}

at::Tensor &round_decimals_out(const at::Tensor &x, int64_t decimals, at::Tensor &out)
{
	return out_of(out, { &x }, round_impl(x, decimals));
}

// toward zero: floor of |x| with x's sign (infinities and NaN stay)
at::Tensor trunc_impl(const at::Tensor &x)
{
	if (!is_float_neuron(x))
		return {};
	at::Tensor f = up(x);
	return back(at::where(f.lt(0), f.neg().floor().neg(), f.floor()), x.scalar_type());
}

at::Tensor &trunc_out(const at::Tensor &x, at::Tensor &out)
{
	return out_of(out, { &x }, trunc_impl(x));
}

at::Tensor &ceil_out(const at::Tensor &x, at::Tensor &out)
{
	if (!is_float_neuron(x))
		return declined;
	return out_of(out, { &x }, back(up(x).neg().floor().neg(), x.scalar_type()));
}

// x - trunc(x): NaN for an infinity, as CPU
at::Tensor &frac_out(const at::Tensor &x, at::Tensor &out)
{
	at::Tensor t = trunc_impl(x);
	return out_of(out, { &x }, t.defined() ? back(up(x).sub(up(t)), x.scalar_type()) : t);
}

// ---- logarithms, binary math -------------------------------------------------

// log2 / log10 from the exponent field (neuron_special.cpp): exact at
// powers of the base, as code counting bits with floor(log2(x)) needs
// (log(x) / ln 2 gave 12.999999 for 8192); bf16 / fp16 at fp32, rounded once
at::Tensor &log2_out(const at::Tensor &x, at::Tensor &out)
{
	if (!is_float_neuron(x))
		return declined;
	return out_of(out, { &x }, back(log2_f32(up(x)), x.scalar_type()));
}

at::Tensor &log10_out(const at::Tensor &x, at::Tensor &out)
{
	if (!is_float_neuron(x))
		return declined;
	return out_of(out, { &x }, back(log10_f32(up(x)), x.scalar_type()));
}

// CPU's logaddexp: a == b == +-inf gives a; else max + log1p(exp(-|a - b|))
at::Tensor &logaddexp_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	if (!floats(a, b) || !out.is_privateuseone() || !at::isFloatingType(out.scalar_type()))
		return declined;
	at::Tensor x = up(a), y = up(b);
	at::Tensor m = at::maximum(x, y);
	at::Tensor r = m.add(x.sub(y).abs().neg().exp().log1p());
	r = at::where(x.abs().eq(kInf).bitwise_and(x.eq(y)), x, r);
	return out_of(out, { &a, &b }, back(r, out.scalar_type()));
}

// CPU's xlogy: NaN where y is NaN, 0 where x is 0, else x * log(y)
at::Tensor &xlogy_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	if (!floats(a, b) || !out.is_privateuseone() || !at::isFloatingType(out.scalar_type()))
		return declined;
	at::Tensor x = up(a), y = up(b);
	at::Tensor r = at::where(x.eq(0), at::zeros({}, x.options()), x.mul(y.log()));
	r = at::where(is_nan(y), at::full({}, kNaN, x.options()), r);
	return out_of(out, { &a, &b }, back(r, out.scalar_type()));
}

// fmax / fmin: a NaN operand gives the other one
at::Tensor fminmax(const at::Tensor &a, const at::Tensor &b, const at::Tensor &out, bool max)
{
	if (!floats(a, b) || !out.is_privateuseone() || a.scalar_type() != b.scalar_type())
		return {};
	at::Tensor r = max ? at::maximum(a, b) : at::minimum(a, b);
	return at::where(is_nan(a), b, at::where(is_nan(b), a, r));
}

at::Tensor &fmax_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return out_of(out, { &a, &b }, fminmax(a, b, out, true));
}

at::Tensor &fmin_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return out_of(out, { &a, &b }, fminmax(a, b, out, false));
}

// other - alpha * self
at::Tensor rsub_tensor(const at::Tensor &self, const at::Tensor &other, const at::Scalar &alpha)
{
	if (!self.is_privateuseone() || !other.is_privateuseone() || isa_dtype_of(at::result_type(self, other)) == ISA_DT_INVALID)
		return {};
	return other.sub(self, alpha);
}

// ---- reductions and products built from native ones ---------------------------

// the sum with NaN counted as 0
at::Tensor nansum(const at::Tensor &x, at::OptionalIntArrayRef dims, bool keepdim, std::optional<at::ScalarType> dtype)
{
	if (!is_float_neuron(x))
		return {};
	at::Tensor z = at::where(is_nan(x), at::zeros({}, x.options()), x);
	return at::sum(z, dims, keepdim, dtype);
}

// a . b as a [1, K] @ [K, 1] product on TensorE
at::Tensor dot(const at::Tensor &a, const at::Tensor &b)
{
	if (!floats(a, b) || a.dim() != 1 || b.dim() != 1 || a.scalar_type() != b.scalar_type())
		return {};
	TORCH_CHECK(a.numel() == b.numel(), "inconsistent tensor size, expected tensor [", a.numel(),
		    "] and src [", b.numel(), "] to have the same number of elements, but got ", a.numel(), " and ",
		    b.numel(), " elements respectively");
	if (a.numel() == 0)
		return at::zeros({}, a.options());
	return at::mm(a.view({ 1, -1 }), b.view({ -1, 1 })).view(at::IntArrayRef{});
}

at::Tensor vdot(const at::Tensor &a, const at::Tensor &b)
{
	return neuron::dot(a, b);   // real: no conjugate
}

// beta * self + alpha * (mat @ vec); beta == 0 ignores self (NaN included)
at::Tensor &addmv_out(const at::Tensor &self, const at::Tensor &mat, const at::Tensor &vec, const at::Scalar &beta,
		      const at::Scalar &alpha, at::Tensor &out)
{
	if (!floats(mat, vec) || !is_float_neuron(self) || mat.dim() != 2 || vec.dim() != 1 || beta.isComplex() ||
	    alpha.isComplex() || mat.scalar_type() != vec.scalar_type() || mat.size(1) != vec.size(0))
		return declined;
	at::Tensor p = mat.size(1) == 0 ? at::zeros({ mat.size(0) }, mat.options())
					: at::mm(mat, vec.view({ -1, 1 })).view({ -1 });
	if (!alpha.equal(1))
		p = p.mul(alpha);
	at::Tensor r = beta.equal(0) ? p.expand({ mat.size(0) }) : p.add(self.mul(beta));
	return out_of(out, { &self, &mat, &vec }, r.contiguous());
}

// (std, mean) from the native var_mean
std::tuple<at::Tensor, at::Tensor> std_mean(const at::Tensor &x, at::OptionalIntArrayRef dims,
					    const std::optional<at::Scalar> &correction, bool keepdim)
{
	if (!is_float_neuron(x))
		return declined;
	auto [v, m] = at::var_mean(x, dims, correction, keepdim);
	return { v.sqrt(), m };
}

// roll: per (shift, dim) the two slabs swapped by one cat; no dims: the
// flattened tensor rolled
at::Tensor roll(const at::Tensor &x, at::IntArrayRef shifts, at::IntArrayRef dims)
{
	if (!x.is_privateuseone() || units_of(x.scalar_type(), false).dtype == ISA_DT_INVALID || shifts.empty() ||
	    (dims.empty() && shifts.size() != 1) || (!dims.empty() && dims.size() != shifts.size()))
		return {};
	if (dims.empty())
		return neuron::roll(x.flatten(), shifts, std::vector<int64_t>{ 0 }).view(x.sizes());
	at::Tensor r = x;
	for (size_t i = 0; i < dims.size(); i++) {
		int64_t d = at::maybe_wrap_dim(dims[i], x.dim()), n = x.size(d);
		if (n == 0)
			continue;
		int64_t s = ((shifts[i] % n) + n) % n;
		if (s)
			r = at::cat({ r.narrow(d, n - s, s), r.narrow(d, 0, n - s) }, d);
	}
	return r.is_same(x) ? x.clone() : r;
}

}  // namespace

at::Tensor &composite_out(at::Tensor &out, std::initializer_list<const at::Tensor *> ins, const at::Tensor &r)
{
	if (!r.defined() || !out.is_privateuseone())
		return declined;
	if (!out.sizes().equals(r.sizes()))
		at::native::resize_output(out, r.sizes());   /* before the checks, as CPU: a resized out is fresh */
	at::assert_no_internal_overlap(out);
	for (const at::Tensor *t : ins)
		at::assert_no_partial_overlap(out, *t);
	return write_result(out, r);
}

NEURON_REGISTER_OPS(NEURON_OPS_POINTWISE)

}  // namespace neuron
