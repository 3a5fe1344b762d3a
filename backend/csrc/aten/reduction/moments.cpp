// aten/reduction/moments.cpp -- variance and standard deviation with
// Bessel's correction (var, std, var_mean, std_mean): two passes at fp32,
// the result in the input's dtype, as CPU PyTorch computes them.
#include "aten/composite.h"
#include "ops.def"

#include <ATen/native/Resize.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/var_mean.h>
#include <ATen/ops/nansum_ops.h>
#include <ATen/ops/std_mean_ops.h>
#include <cmath>
#include <limits>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/count_nonzero_ops.h>
#include <ATen/ops/std_ops.h>
#include <ATen/ops/var_ops.h>
#include <torch/library.h>
#include <ATen/ops/var_mean_ops.h>
#include <tuple>

namespace neuron {

namespace {

// (std, mean) from the native var_mean
std::tuple<at::Tensor, at::Tensor> std_mean(const at::Tensor &x, at::OptionalIntArrayRef dims,
					    const std::optional<at::Scalar> &correction, bool keepdim)
{
	if (!is_float_neuron(x))
		return declined;
	auto [v, m] = at::var_mean(x, dims, correction, keepdim);
	return { v.sqrt(), m };
}

// var = sum((x - mean)^2) / (N - correction), over one dim or all
at::Tensor variance(const at::Tensor &self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar> &corr,
		    bool keepdim)
{
	if (!is_float_neuron(self) || (dim && dim->size() > 1))
		return {};
	bool all = !dim || dim->empty();
	int64_t n = all ? self.numel() : self.size(at::maybe_wrap_dim((*dim)[0], self.dim()));
	double c = corr ? corr->toDouble() : 1.0;
	// in fp32 for bf16 / fp16 as CPU's opmath, rounded once: an fp16 sum of
	// squares past 65504 was inf
	at::Tensor x = as_fp32(self);
	at::Tensor mean = all ? x.mean() : x.mean(*dim, true);
	at::Tensor d = x.sub(mean);
	at::Tensor ss = all ? d.mul(d).sum() : d.mul(d).sum(*dim, keepdim);
	if (all && keepdim)
		ss = ss.reshape(std::vector<int64_t>(self.dim(), 1));
	return ss.div(std::max(0.0, (double)n - c));   // fp32: the caller rounds once
}

at::Tensor var(const at::Tensor &self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar> &corr, bool keepdim)
{
	at::Tensor r = variance(self, dim, corr, keepdim);
	return r.defined() ? r.to(self.scalar_type()) : r;           // undefined: declined
}

at::Tensor stddev(const at::Tensor &self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar> &corr,
		  bool keepdim)
{
	at::Tensor r = variance(self, dim, corr, keepdim);
	return r.defined() ? r.sqrt().to(self.scalar_type()) : r;    // undefined: declined
}

// (var, mean) over dims with Bessel's correction: two passes, fp32
std::tuple<at::Tensor, at::Tensor> var_mean_correction(const at::Tensor &x, at::OptionalIntArrayRef dim,
						       const std::optional<at::Scalar> &correction, bool keepdim)
{
	if (!is_float_neuron(x))
		return declined;
	std::vector<int64_t> dims;
	if (dim && !dim->empty())
		dims = dim->vec();
	else
		for (int64_t d = 0; d < x.dim(); d++)
			dims.push_back(d);
	int64_t n = 1;
	for (int64_t d : dims)
		n *= x.dim() ? x.size(at::maybe_wrap_dim(d, x.dim())) : 1;
	double corr = correction ? correction->toDouble() : 1.0;
	at::Tensor xf = as_fp32(x);
	if (x.dim() == 0)
		xf = xf.reshape({ 1 });
	at::Tensor mean = xf.sum(dims, true).div((double)n);
	at::Tensor xc = xf.sub(mean);
	double denom = std::max(0.0, (double)n - corr);
	at::Tensor var = xc.mul(xc).sum(dims, keepdim).div(denom);
	if (!keepdim)
		mean = mean.squeeze(dims);
	if (x.dim() == 0) {
		var = var.reshape({});
		mean = mean.reshape({});
	}
	return { var.to(x.scalar_type()), mean.to(x.scalar_type()) };
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_MOMENTS)

}  // namespace neuron
