// neuron_composite.cpp -- ops composed from the native kernels (each step
// its own program on the device timeline): addcmul, lerp, baddbmm, var, std.
// They keep the result dtype and the value semantics of CPU PyTorch; the
// rounding of intermediate steps can differ within the dtype's tolerance.
#include "neuron_kernels.h"
#include "neuron_ops.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/ops/add.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/where.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/baddbmm_ops.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/std_ops.h>
#include <ATen/ops/var_ops.h>
#include <torch/library.h>

namespace neuron {

namespace {

at::Tensor addcmul(const at::Tensor &self, const at::Tensor &t1, const at::Tensor &t2, const at::Scalar &value)
{
	if (is_float_neuron(self) && is_float_neuron(t1) && is_float_neuron(t2) && !value.isComplex()) {
		at::Tensor p = t1.mul(t2);
		if (!value.equal(1))
			p = p.mul(value);
		return self.add(p);
	}
	return declined;
}

// CPU's two-sided form: w < 0.5 ? a + w (b - a) : b - (b - a)(1 - w)
at::Tensor lerp_scalar(const at::Tensor &a, const at::Tensor &b, const at::Scalar &w)
{
	if (is_float_neuron(a) && is_float_neuron(b) && !w.isComplex()) {
		double v = w.toDouble();
		at::Tensor d = b.sub(a);
		return v < 0.5 ? a.add(d.mul(v)) : b.sub(d.mul(1.0 - v));
	}
	return declined;
}

at::Tensor lerp_tensor(const at::Tensor &a, const at::Tensor &b, const at::Tensor &w)
{
	if (is_float_neuron(a) && is_float_neuron(b) && is_float_neuron(w)) {
		at::Tensor d = b.sub(a);
		at::Tensor one_minus = w.mul(-1.0).add(1.0);
		return at::where(w.lt(0.5), a.add(d.mul(w)), b.sub(d.mul(one_minus)));
	}
	return declined;
}

at::Tensor baddbmm(const at::Tensor &self, const at::Tensor &b1, const at::Tensor &b2, const at::Scalar &beta,
		   const at::Scalar &alpha)
{
	if (is_float_neuron(self) && is_float_neuron(b1) && is_float_neuron(b2) && !beta.isComplex() && !alpha.isComplex()) {
		at::Tensor p = at::bmm(b1, b2);
		if (!alpha.equal(1))
			p = p.mul(alpha);
		if (beta.equal(0))
			return p.expand_as(p).clone();
		return beta.equal(1) ? p.add(self) : p.add(self.mul(beta));
	}
	return declined;
}

// var = sum((x - mean)^2) / (N - correction), over one dim or all
at::Tensor variance(const at::Tensor &self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar> &corr,
		    bool keepdim)
{
	if (!is_float_neuron(self) || self.numel() == 0 || (dim && dim->size() > 1))
		return {};
	bool all = !dim || dim->empty();
	int64_t n = all ? self.numel() : self.size(at::maybe_wrap_dim((*dim)[0], self.dim()));
	double c = corr ? corr->toDouble() : 1.0;
	at::Tensor mean = all ? self.mean() : self.mean(*dim, true);
	at::Tensor d = self.sub(mean);
	at::Tensor ss = all ? d.mul(d).sum() : d.mul(d).sum(*dim, keepdim);
	if (all && keepdim)
		ss = ss.reshape(std::vector<int64_t>(self.dim(), 1));
	return ss.div(std::max(0.0, (double)n - c));
}

at::Tensor var(const at::Tensor &self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar> &corr, bool keepdim)
{
	return variance(self, dim, corr, keepdim);   // undefined: declined
}

at::Tensor stddev(const at::Tensor &self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar> &corr,
		  bool keepdim)
{
	at::Tensor r = variance(self, dim, corr, keepdim);
	return r.defined() ? r.sqrt() : r;           // undefined: declined
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_COMPOSITE)

}  // namespace neuron
