// aten/pointwise/rounding.cpp -- rounding and sign composed from the native
// kernels: floor, ceil, round (to even, with decimals), trunc, frac, sign,
// sgn, in CPU PyTorch's fp32 opmath for bf16 / fp16 and with its NaN and
// infinity results.
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/pointwise/math.h"
#include "ops.def"

#include <ATen/native/Resize.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/ceil_ops.h>
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
#include <ATen/ops/round_ops.h>
#include <ATen/ops/rsub_ops.h>
#include <ATen/ops/sgn_ops.h>
#include <ATen/ops/sign_ops.h>
#include <ATen/ops/softshrink_ops.h>
#include <ATen/ops/threshold_ops.h>
#include <ATen/ops/trunc_ops.h>
#include <ATen/ops/xlogy_ops.h>
#include <cmath>
#include <limits>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/floor_divide_ops.h>
#include <ATen/ops/floor_ops.h>
#include <ATen/ops/remainder_ops.h>
#include <ATen/ops/fmod_ops.h>
#include <torch/library.h>

namespace neuron {

namespace {

// (x > 0) - (x < 0): 0 for NaN, as CPU's sign
at::Tensor sign_impl(const at::Tensor &x)
{
	if (!is_float_neuron(x))
		return {};
	return x.gt(0).to(x.scalar_type()).sub(x.lt(0).to(x.scalar_type()));
}

at::Tensor &sign_out(const at::Tensor &x, at::Tensor &out)
{
	return composite_out(out, { &x }, sign_impl(x));
}

at::Tensor &sgn_out(const at::Tensor &x, at::Tensor &out)
{
	return composite_out(out, { &x }, sign_impl(x));   // a real tensor's sgn is its sign
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
	at::Tensor f = as_fp32(x);
	if (decimals == 0)
		return cast_back(round_even(f), x.scalar_type());
	double p = std::pow(10.0, (double)std::abs(decimals));
	at::Tensor r = decimals > 0 ? round_even(f.mul(p)).div(p) : round_even(f.div(p)).mul(p);
	return cast_back(r, x.scalar_type());
}

at::Tensor &round_out(const at::Tensor &x, at::Tensor &out)
{
	return composite_out(out, { &x }, round_impl(x, 0));
}

at::Tensor &round_decimals_out(const at::Tensor &x, int64_t decimals, at::Tensor &out)
{
	return composite_out(out, { &x }, round_impl(x, decimals));
}

// toward zero: floor of |x| with x's sign (infinities and NaN stay)
at::Tensor trunc_impl(const at::Tensor &x)
{
	if (!is_float_neuron(x))
		return {};
	at::Tensor f = as_fp32(x);
	return cast_back(at::where(f.lt(0), f.neg().floor().neg(), f.floor()), x.scalar_type());
}

at::Tensor &trunc_out(const at::Tensor &x, at::Tensor &out)
{
	return composite_out(out, { &x }, trunc_impl(x));
}

at::Tensor &ceil_out(const at::Tensor &x, at::Tensor &out)
{
	if (!is_float_neuron(x))
		return declined;
	return composite_out(out, { &x }, cast_back(as_fp32(x).neg().floor().neg(), x.scalar_type()));
}

// x - trunc(x): NaN for an infinity, as CPU
at::Tensor &frac_out(const at::Tensor &x, at::Tensor &out)
{
	at::Tensor t = trunc_impl(x);
	return composite_out(out, { &x }, t.defined() ? cast_back(as_fp32(x).sub(as_fp32(t)), x.scalar_type()) : t);
}

at::Tensor floor_impl(const at::Tensor &x)
{
	if (!x.is_privateuseone())
		return {};
	if (at::isIntegralType(x.scalar_type(), true))
		return x.clone();
	if (is_float_neuron(x))
		return float_floor(x);
	return {};
}

at::Tensor floor(const at::Tensor &x)
{
	return floor_impl(x);   /* undefined: declined */
}

at::Tensor &floor_out(const at::Tensor &x, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? floor_impl(x) : at::Tensor());
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_ROUNDING)

}  // namespace neuron
