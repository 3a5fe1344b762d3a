// aten/pointwise/activation.cpp -- elementwise activations and their
// backwards composed from the native kernels (each step its own program on
// the device timeline): hardtanh / relu6, leaky_relu, elu / celu / selu,
// glu, prelu, hardsigmoid, hardswish, mish, threshold, hard / soft shrink,
// log_sigmoid, and the backwards of threshold (relu), tanh, sigmoid and gelu
// (both forms).
//
// Each computes as CPU PyTorch's kernel does, in fp32 for bf16 / fp16 inputs
// (CPU's opmath) rounded once at the end, with CPU's NaN and infinity
// behaviour (written out next to each formula); undefined (the fallback)
// for what it does not cover.
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/pointwise/math.h"
#include "ops.def"

#include <ATen/native/Resize.h>

#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/log_sigmoid_backward_ops.h>
#include <ATen/ops/log_sigmoid_forward_ops.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/full.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
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

namespace neuron {

namespace {

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
	return composite_out(out, { &x }, hardtanh_impl(x, lo, hi));
}

at::Tensor &hardtanh_inplace(at::Tensor &x, const at::Scalar &lo, const at::Scalar &hi)
{
	return composite_out(x, {}, hardtanh_impl(x, lo, hi));
}

// x > 0 ? x : x * slope (NaN: NaN * slope)
at::Tensor &leaky_relu_out(const at::Tensor &x, const at::Scalar &slope, at::Tensor &out)
{
	if (!is_float_neuron(x) || slope.isComplex())
		return declined;
	at::Tensor f = as_fp32(x);
	return composite_out(out, { &x }, cast_back(at::where(f.gt(0), f, f.mul(slope.toDouble())), x.scalar_type()));
}

// CPU's elu: x <= 0 ? (exp(x * input_scale) - 1) * alpha * scale : x * scale
at::Tensor &elu_out(const at::Tensor &x, const at::Scalar &alpha, const at::Scalar &scale,
		    const at::Scalar &input_scale, at::Tensor &out)
{
	if (!is_float_neuron(x) || alpha.isComplex() || scale.isComplex() || input_scale.isComplex())
		return declined;
	at::Tensor f = as_fp32(x);
	double a = alpha.toDouble(), s = scale.toDouble(), is = input_scale.toDouble();
	at::Tensor neg = f.mul(is).expm1().mul(a * s);   // expm1: exact for tiny x, as CPU
	return composite_out(out, { &x }, cast_back(at::where(f.le(0), neg, f.mul(s)), x.scalar_type()));
}

// CPU's hardsigmoid: min(max(x + 3, 0), 6) / 6
at::Tensor &hardsigmoid_out(const at::Tensor &x, at::Tensor &out)
{
	if (!is_float_neuron(x))
		return declined;
	return composite_out(out, { &x }, cast_back(at::clamp(as_fp32(x).add(3.0), 0.0, 6.0).div(6.0), x.scalar_type()));
}

// CPU's hardswish: x * min(max(x + 3, 0), 6) / 6
at::Tensor hardswish_impl(const at::Tensor &x)
{
	if (!is_float_neuron(x))
		return {};
	at::Tensor f = as_fp32(x);
	return cast_back(f.mul(at::clamp(f.add(3.0), 0.0, 6.0)).div(6.0), x.scalar_type());
}

at::Tensor hardswish(const at::Tensor &x)
{
	return hardswish_impl(x);
}

at::Tensor &hardswish_out(const at::Tensor &x, at::Tensor &out)
{
	return composite_out(out, { &x }, hardswish_impl(x));
}

// CPU's mish: x * tanh(log1p(exp(x))) (exp's overflow gives tanh(inf) = 1)
at::Tensor &mish_out(const at::Tensor &x, at::Tensor &out)
{
	if (!is_float_neuron(x))
		return declined;
	at::Tensor f = as_fp32(x);
	return composite_out(out, { &x }, cast_back(f.mul(f.exp().log1p().tanh()), x.scalar_type()));
}

// x <= threshold ? value : x (NaN: x)
at::Tensor &threshold_out(const at::Tensor &x, const at::Scalar &th, const at::Scalar &value, at::Tensor &out)
{
	if (!is_float_neuron(x) || th.isComplex() || value.isComplex())
		return declined;
	at::Tensor f = as_fp32(x);
	at::Tensor v = at::full({}, value.toDouble(), f.options());
	return composite_out(out, { &x }, cast_back(at::where(f.le(th.toDouble()), v, f), x.scalar_type()));
}

// -l <= x <= l ? 0 : x (NaN: x)
at::Tensor &hardshrink_out(const at::Tensor &x, const at::Scalar &l, at::Tensor &out)
{
	if (!is_float_neuron(x) || l.isComplex())
		return declined;
	at::Tensor f = as_fp32(x);
	double v = l.toDouble();
	at::Tensor in = f.ge(-v).bitwise_and(f.le(v));
	return composite_out(out, { &x }, cast_back(at::where(in, at::zeros({}, f.options()), f), x.scalar_type()));
}

// x > l ? x - l : x < -l ? x + l : x * 0 (NaN: NaN)
at::Tensor &softshrink_out(const at::Tensor &x, const at::Scalar &l, at::Tensor &out)
{
	if (!is_float_neuron(x) || l.isComplex())
		return declined;
	at::Tensor f = as_fp32(x);
	double v = l.toDouble();
	at::Tensor r = at::where(f.gt(v), f.sub(v), at::where(f.lt(-v), f.add(v), f.mul(0.0)));
	return composite_out(out, { &x }, cast_back(r, x.scalar_type()));
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
	at::Tensor a = as_fp32(x.narrow(d, 0, h)), b = as_fp32(x.narrow(d, h, h));
	return composite_out(out, { &x }, cast_back(a.mul(b.sigmoid()), x.scalar_type()));
}

// CPU's prelu: x > 0 ? x : w * x (the weight already shaped to broadcast)
at::Tensor prelu_kernel(const at::Tensor &x, const at::Tensor &w)
{
	if (!is_float_neuron(x) || !is_float_neuron(w) || x.scalar_type() != w.scalar_type())
		return {};
	return at::where(x.gt(0), x, w.mul(x));
}

// ---- log sigmoid, and the backwards of the activations ---------------------

// log sigmoid as the CPU kernel computes it: z = exp(-|x|),
// out = min(x, 0) - log1p(z), and z kept as the backward's buffer:
// d x = g * ((x < 0) - sign * z / (1 + z)), sign = +1 for x < 0, else -1
std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor &x)
{
	if (!is_float_neuron(x))
		return declined;
	at::Tensor z = x.abs().neg().exp();
	at::Tensor out = at::where(x.lt(0), x, at::zeros_like(x)).sub(z.log1p());
	return { out, z };
}

at::Tensor log_sigmoid_backward(const at::Tensor &g, const at::Tensor &x, const at::Tensor &buffer)
{
	if (!is_float_neuron(g) || !is_float_neuron(x) || !is_float_neuron(buffer) || buffer.sizes() != x.sizes())
		return declined;
	at::Tensor neg = x.lt(0);
	at::Tensor frac = buffer.div(buffer.add(1.0));
	at::Tensor d = at::where(neg, frac.neg().add(1.0), frac);   // 1 - z/(1+z) or z/(1+z)
	return g.mul(d);
}

// relu's backward: g where x > threshold, else 0
at::Tensor threshold_backward(const at::Tensor &g, const at::Tensor &x, const at::Scalar &th)
{
	if (!grad_pair(g, x) || th.isComplex())
		return declined;
	return g.masked_fill(x.le(th), 0);
}

at::Tensor &threshold_backward_out(const at::Tensor &g, const at::Tensor &x, const at::Scalar &th, at::Tensor &out)
{
	if (!grad_pair(g, x) || th.isComplex() || !out.is_privateuseone())
		return declined;
	return write_result(out, g.masked_fill(x.le(th), 0));
}

// tanh: g (1 - y^2); sigmoid: g (1 - y) y (y the forward's output)
at::Tensor tanh_bwd(const at::Tensor &g, const at::Tensor &y)
{
	at::Tensor yf = as_fp32(y);
	return cast_back(as_fp32(g).mul(yf.mul(yf).neg().add(1.0)), g.scalar_type());
}

at::Tensor sigmoid_bwd(const at::Tensor &g, const at::Tensor &y)
{
	at::Tensor yf = as_fp32(y);
	return cast_back(as_fp32(g).mul(yf.neg().add(1.0)).mul(yf), g.scalar_type());
}

at::Tensor tanh_backward(const at::Tensor &g, const at::Tensor &y)
{
	return grad_pair(g, y) ? tanh_bwd(g, y) : at::Tensor();   // undefined: declined
}

at::Tensor &tanh_backward_out(const at::Tensor &g, const at::Tensor &y, at::Tensor &out)
{
	if (grad_pair(g, y) && out.is_privateuseone())
		return write_result(out, tanh_bwd(g, y));
	return declined;
}

at::Tensor sigmoid_backward(const at::Tensor &g, const at::Tensor &y)
{
	return grad_pair(g, y) ? sigmoid_bwd(g, y) : at::Tensor();
}

at::Tensor &sigmoid_backward_out(const at::Tensor &g, const at::Tensor &y, at::Tensor &out)
{
	if (grad_pair(g, y) && out.is_privateuseone())
		return write_result(out, sigmoid_bwd(g, y));
	return declined;
}

// gelu's derivative, as CPU PyTorch's GeluBackward kernel computes it:
//   none: cdf(x) + x pdf(x),  cdf = (1 + erf(x / sqrt 2)) / 2, pdf = exp(-x^2/2) / sqrt(2 pi)
//   tanh: 0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa x^2), t = tanh(beta (x + kappa x^3))
at::Tensor gelu_bwd(const at::Tensor &g, const at::Tensor &x, c10::string_view approximate)
{
	at::Tensor xf = as_fp32(x), d;
	if (approximate == "tanh") {
		const double beta = M_SQRT2 * M_2_SQRTPI * 0.5, kappa = 0.044715;
		at::Tensor x2 = xf.mul(xf);
		at::Tensor t = xf.add(x2.mul(xf).mul(kappa)).mul(beta).tanh();
		at::Tensor left_d = t.add(1.0).mul(0.5);
		at::Tensor right_d = xf.mul(0.5).mul(t.mul(t).neg().add(1.0)).mul(x2.mul(3.0 * kappa).add(1.0).mul(beta));
		d = left_d.add(right_d);
	} else {
		at::Tensor cdf = xf.mul(M_SQRT1_2).erf().add(1.0).mul(0.5);
		at::Tensor pdf = xf.mul(xf).mul(-0.5).exp().mul(M_2_SQRTPI * M_SQRT1_2 * 0.5);
		d = cdf.add(xf.mul(pdf));
	}
	return cast_back(as_fp32(g).mul(d), g.scalar_type());
}

bool gelu_ok(const at::Tensor &g, const at::Tensor &x, c10::string_view approximate)
{
	return grad_pair(g, x) && (approximate == "none" || approximate == "tanh");
}

at::Tensor gelu_backward(const at::Tensor &g, const at::Tensor &x, c10::string_view approximate)
{
	return gelu_ok(g, x, approximate) ? gelu_bwd(g, x, approximate) : at::Tensor();
}

at::Tensor &gelu_backward_out(const at::Tensor &g, const at::Tensor &x, c10::string_view approximate,
			      at::Tensor &out)
{
	if (gelu_ok(g, x, approximate) && out.is_privateuseone())
		return write_result(out, gelu_bwd(g, x, approximate));
	return declined;
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_ACTIVATION)

}  // namespace neuron
