// aten/linalg/vector.cpp -- vector products and norms composed from the
// native kernels: dot, vdot, addmv, linalg_cross, linalg_vector_norm / norm
// (clip_grad_norm_, foreach norm) and renorm.
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/composite.h"
#include "ops.def"

#include <ATen/native/Resize.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/addmv_ops.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/dot_ops.h>
#include <ATen/ops/vdot_ops.h>
#include <cmath>
#include <limits>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/baddbmm_ops.h>
#include <ATen/ops/linalg_cross_ops.h>
#include <ATen/ops/equal_ops.h>
#include <ATen/ops/trace_ops.h>
#include <ATen/ops/addbmm_ops.h>
#include <ATen/ops/std_ops.h>
#include <ATen/ops/linalg_solve_triangular_ops.h>
#include <ATen/ops/pow_ops.h>
#include <torch/library.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/linalg_vector_norm_ops.h>
#include <ATen/ops/norm_ops.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/renorm_ops.h>

namespace neuron {

namespace {

// a . b as a [1, K] @ [K, 1] product on TensorE
at::Tensor dot(const at::Tensor &a, const at::Tensor &b)
{
	if (!both_float_neuron(a, b) || a.dim() != 1 || b.dim() != 1 || a.scalar_type() != b.scalar_type())
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
	if (!both_float_neuron(mat, vec) || !is_float_neuron(self) || mat.dim() != 2 || vec.dim() != 1 || beta.isComplex() ||
	    alpha.isComplex() || mat.scalar_type() != vec.scalar_type() || mat.size(1) != vec.size(0))
		return declined;
	at::Tensor p = mat.size(1) == 0 ? at::zeros({ mat.size(0) }, mat.options())
					: at::mm(mat, vec.view({ -1, 1 })).view({ -1 });
	if (!alpha.equal(1))
		p = p.mul(alpha);
	at::Tensor r = beta.equal(0) ? p.expand({ mat.size(0) }) : p.add(self.mul(beta));
	return composite_out(out, { &self, &mat, &vec }, r.contiguous());
}

// a x b along dim (size 3, operands broadcast): each component a product
// difference in the dtype, as CPU's kernel
at::Tensor &linalg_cross_out(const at::Tensor &a, const at::Tensor &b, int64_t dim, at::Tensor &out)
{
	if (!is_float_neuron(a) || !is_float_neuron(b) || a.scalar_type() != b.scalar_type() ||
	    !at::isFloatingType(a.scalar_type()) || a.dim() != b.dim() || a.dim() == 0)
		return declined;
	std::vector<int64_t> shape = at::infer_size(a.sizes(), b.sizes());
	int64_t d = dim < 0 ? dim + (int64_t)shape.size() : dim;
	if (d < 0 || d >= (int64_t)shape.size() || shape[d] != 3 || a.size(d) != 3 || b.size(d) != 3)
		return declined;
	at::Tensor x = a.expand(shape), y = b.expand(shape);
	auto c = [d](const at::Tensor &t, int64_t i) { return t.narrow(d, i, 1); };
	at::Tensor r = at::cat({ c(x, 1).mul(c(y, 2)).sub(c(x, 2).mul(c(y, 1))),
				 c(x, 2).mul(c(y, 0)).sub(c(x, 0).mul(c(y, 2))),
				 c(x, 0).mul(c(y, 1)).sub(c(x, 1).mul(c(y, 0))) }, d);
	return composite_out(out, { &a, &b }, r);
}

// ||x||_ord over `dim` (all when empty): 2 -> sqrt(sum x^2), 1 -> sum |x|,
// inf -> max |x|, -inf -> min |x|, 0 -> count of nonzeros, else
// (sum |x|^p)^(1/p); at fp32 for half inputs, the result in `dtype`
at::Tensor vector_norm(const at::Tensor &self, const at::Scalar &ord, at::OptionalIntArrayRef dim, bool keepdim,
		       std::optional<at::ScalarType> dtype)
{
	at::ScalarType odt = dtype.value_or(self.scalar_type());
	if (!is_float_neuron(self) || ord.isComplex() || isa_dtype_of(odt) == ISA_DT_INVALID || self.numel() == 0)
		return {};
	double p = ord.toDouble();
	at::Tensor x = self.to(at::kFloat);
	std::vector<int64_t> dims;
	if (dim)
		dims.assign(dim->begin(), dim->end());
	at::Tensor r;
	auto sum = [&](const at::Tensor &t) { return t.sum(dims, keepdim); };
	if (p == 2.0)
		r = sum(x.mul(x)).sqrt();
	else if (p == 1.0)
		r = sum(x.abs());
	else if (std::isinf(p))
		r = p > 0 ? x.abs().amax(dims, keepdim) : x.abs().amin(dims, keepdim);
	else if (p == 0.0)
		r = sum(x.ne(0).to(at::kFloat));
	else
		r = sum(x.abs().pow(p)).pow(1.0 / p);
	return r.to(odt);
}

at::Tensor linalg_vector_norm(const at::Tensor &self, const at::Scalar &ord, at::OptionalIntArrayRef dim,
			      bool keepdim, std::optional<at::ScalarType> dtype)
{
	return vector_norm(self, ord, dim, keepdim, dtype);   // undefined: declined
}

at::Tensor &linalg_vector_norm_out(const at::Tensor &self, const at::Scalar &ord, at::OptionalIntArrayRef dim,
				   bool keepdim, std::optional<at::ScalarType> dtype, at::Tensor &out)
{
	at::Tensor r = vector_norm(self, ord, dim, keepdim, dtype.has_value() ? dtype : out.scalar_type());
	if (r.defined() && store(out, r))
		return out;
	return declined;
}

// at::norm's p-norm over `dim` (all when empty): the vector norm, in out's
// dtype (p absent: 2)
at::Tensor &norm_out(const at::Tensor &self, const std::optional<at::Scalar> &p, at::IntArrayRef dim, bool keepdim,
		     at::Tensor &out)
{
	at::Tensor r = vector_norm(self, p.value_or(2.0), dim, keepdim, out.scalar_type());
	if (r.defined() && store(out, r))
		return out;
	return declined;
}

at::Tensor &norm_dtype_out(const at::Tensor &self, const std::optional<at::Scalar> &p, at::IntArrayRef dim,
			   bool keepdim, at::ScalarType dtype, at::Tensor &out)
{
	at::Tensor r = vector_norm(self, p.value_or(2.0), dim, keepdim, dtype);
	if (r.defined() && store(out, r))
		return out;
	return declined;
}

// renorm: each slice along `dim` scaled to p-norm maxnorm where its norm
// exceeds it, by maxnorm / (norm + 1e-7) computed at fp32 (CPU's accumulate
// type); bad arguments decline so the fallback raises CPU's error
at::Tensor &renorm_out(const at::Tensor &self, const at::Scalar &p, int64_t dim, const at::Scalar &maxnorm,
		       at::Tensor &out)
{
	if (!is_float_neuron(self) || p.isComplex() || maxnorm.isComplex() || !(p.toDouble() > 0) ||
	    !(maxnorm.toDouble() >= 0) || self.dim() == 0 || dim < -self.dim() || dim >= self.dim())
		return declined;
	dim = dim < 0 ? dim + self.dim() : dim;
	std::vector<int64_t> others;
	for (int64_t d = 0; d < self.dim(); d++)
		if (d != dim)
			others.push_back(d);
	at::Tensor norm = vector_norm(self, p, others, true, at::kFloat);
	if (!norm.defined())
		return declined;
	double m = maxnorm.toDouble();
	at::Tensor factor = at::where(norm.gt(m), norm.add(1e-7).reciprocal().mul(m), at::ones({}, norm.options()));
	if (store(out, as_fp32(self).mul(factor).to(out.scalar_type())))
		return out;
	return declined;
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_VECTOR)

}  // namespace neuron
