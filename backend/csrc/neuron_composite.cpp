// neuron_composite.cpp -- ops composed from the native kernels (each step
// its own program on the device timeline): addcmul, lerp, baddbmm, addbmm,
// trace, count_nonzero, equal, linalg_cross, var, std, log1p, expm1,
// softplus, pow of a number base, eye, flip.
// They keep the result dtype and the value semantics of CPU PyTorch; the
// rounding of intermediate steps can differ within the dtype's tolerance.
#include "neuron_kernels.h"
#include "neuron_ops.h"

#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/where.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/baddbmm_ops.h>
#include <ATen/ops/linalg_cross_ops.h>
#include <ATen/ops/equal_ops.h>
#include <ATen/ops/count_nonzero_ops.h>
#include <ATen/ops/trace_ops.h>
#include <ATen/ops/addbmm_ops.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/std_ops.h>
#include <ATen/ops/var_ops.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/linalg_solve_triangular_ops.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/arange_ops.h>
#include <ATen/ops/eye_ops.h>
#include <ATen/ops/flip_ops.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/index_select.h>
#include <cmath>
#include <limits>
#include <ATen/ops/expm1_ops.h>
#include <ATen/ops/log1p_ops.h>
#include <ATen/ops/softplus_ops.h>
#include <ATen/ops/log_sigmoid_backward_ops.h>
#include <ATen/ops/log_sigmoid_forward_ops.h>
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
	// the products left in fp32, scaled and added there, rounded once (CPU's
	// gemm); beta == 0 ignores self
	if (is_float_neuron(self) && is_float_neuron(b1) && is_float_neuron(b2) && !beta.isComplex() && !alpha.isComplex() &&
	    b1.dim() == 3 && b2.dim() == 3 && b1.scalar_type() == b2.scalar_type() && self.scalar_type() == b1.scalar_type()) {
		at::ScalarType dt = b1.scalar_type();
		at::Tensor p = dt == at::kFloat ? at::bmm(b1, b2) : matmul_to(b1, b2, at::kFloat);
		if (!alpha.equal(1))
			p = p.mul(alpha);
		if (!beta.equal(0))
			p = p.add(beta.equal(1) ? as_fp32(self) : as_fp32(self).mul(beta));
		return cast_back(p.expand_as(p).contiguous(), dt);
	}
	return declined;
}

// beta * self + alpha * sum_b (b1[b] @ b2[b]) as CPU accumulates it: one
// addmm per batch into the result, in the result's dtype (bf16 rounds after
// every batch there; an fp32 sum of the products differs beyond bf16's
// tolerance where they cancel); beta == 0 ignores self, NaN included
at::Tensor addbmm(const at::Tensor &self, const at::Tensor &b1, const at::Tensor &b2, const at::Scalar &beta,
		  const at::Scalar &alpha)
{
	if (!is_float_neuron(self) || !is_float_neuron(b1) || !is_float_neuron(b2) || beta.isComplex() ||
	    alpha.isComplex() || b1.dim() != 3 || b2.dim() != 3 || b1.size(0) != b2.size(0) || b1.size(2) != b2.size(1) ||
	    b1.scalar_type() != b2.scalar_type() || self.scalar_type() != b1.scalar_type() || b1.size(0) == 0)
		return declined;
	at::Tensor r = self.expand({ b1.size(1), b2.size(2) }).contiguous();
	for (int64_t i = 0; i < b1.size(0); i++)
		r = at::addmm(r, b1[i], b2[i], i == 0 ? beta : at::Scalar(1), alpha);
	return r;
}

// the sum of a matrix's diagonal
at::Tensor trace(const at::Tensor &self)
{
	if (!is_float_neuron(self) || !at::isFloatingType(self.scalar_type()) || self.dim() != 2)
		return declined;
	return self.diagonal().sum();
}

// nonzero elements over dims, as int64
at::Tensor count_nonzero_dims(const at::Tensor &self, at::IntArrayRef dim)
{
	if (!self.is_privateuseone() || at::isComplexType(self.scalar_type()))
		return declined;
	return self.ne(0).sum(dim);
}

// equal shapes and elements (NaN equals nothing); the answer is read from
// the simulator's copy
std::optional<bool> equal(const at::Tensor &a, const at::Tensor &b)
{
	if (!a.is_privateuseone() || !b.is_privateuseone() || a.scalar_type() != b.scalar_type() ||
	    at::isComplexType(a.scalar_type()))
		return std::nullopt;
	if (!a.sizes().equals(b.sizes()))
		return false;
	if (a.numel() == 0)
		return true;
	return peek_cpu(a.eq(b).all()).item<bool>();
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

// log1p and expm1 from ScalarE's log and exp with Kahan's correction: with
// u = 1 + x, log1p(x) = log(u) x / (u - 1) (x itself where u rounds to 1),
// and with u = exp(x), expm1(x) = (u - 1) x / log(u) (x where u is 1, -1
// where u - 1 is -1); the naive forms lose every digit for small |x|
at::Tensor log1p_impl(const at::Tensor &x)
{
	if (!is_float_neuron(x))
		return {};
	at::Tensor u = x.add(1.0);
	at::Tensor r = u.log().mul(x).div(u.sub(1.0));
	return at::where(u.eq(1.0), x, at::where(x.isinf().bitwise_and(x.gt(0)), x, r));
}

at::Tensor expm1_impl(const at::Tensor &x)
{
	if (!is_float_neuron(x))
		return {};
	at::Tensor u = x.exp();
	at::Tensor um1 = u.sub(1.0);
	at::Tensor r = um1.mul(x).div(u.log());
	r = at::where(um1.eq(-1.0), um1, r);
	return at::where(u.eq(1.0), x, at::where(u.isinf(), u, r));
}

// softplus(x) = log1p(exp(beta x)) / beta, x itself where beta x > threshold
at::Tensor softplus_impl(const at::Tensor &x, const at::Scalar &beta, const at::Scalar &threshold)
{
	if (!is_float_neuron(x) || beta.isComplex() || threshold.isComplex())
		return {};
	double b = beta.toDouble();
	// in fp32 for bf16 / fp16 as CPU's opmath (exp of an fp16 x over ~11
	// overflowed: inf below the threshold)
	at::Tensor xf = as_fp32(x);
	at::Tensor bx = b == 1.0 ? xf : xf.mul(b);
	at::Tensor sp = log1p_impl(bx.exp());
	if (b != 1.0)
		sp = sp.div(b);
	at::Tensor r = at::where(bx.gt(threshold.toDouble()), xf, sp);
	return r.scalar_type() == x.scalar_type() ? r : r.to(x.scalar_type());
}

#define UNARY_COMPOSITE(fname, impl)                                                         \
	at::Tensor fname(const at::Tensor &x)                                                \
	{                                                                                   \
		at::Tensor r = impl(x);                                                     \
		if (r.defined())                                                            \
			return r;                                                           \
		return declined;                                                            \
	}                                                                                   \
	at::Tensor &fname##_out(const at::Tensor &x, at::Tensor &out)                        \
	{                                                                                   \
		at::Tensor r = out.is_privateuseone() ? impl(x) : at::Tensor();               \
		if (r.defined())                                                            \
			return write_result(out, r);                                        \
		return declined;                                                            \
	}

UNARY_COMPOSITE(log1p, log1p_impl)
UNARY_COMPOSITE(expm1, expm1_impl)

at::Tensor softplus(const at::Tensor &x, const at::Scalar &beta, const at::Scalar &threshold)
{
	return softplus_impl(x, beta, threshold);   /* undefined: declined */
}

at::Tensor &softplus_out(const at::Tensor &x, const at::Scalar &beta, const at::Scalar &threshold, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? softplus_impl(x, beta, threshold) : at::Tensor());
}

// base ** x for a positive number base: exp(x ln base) on ScalarE (1 ** x
// is 1; 0 ** x is 1, 0 or inf by the sign of x); a negative base declines
at::Tensor pow_base_impl(const at::Scalar &base, const at::Tensor &x)
{
	if (base.isComplex() || !x.is_privateuseone())
		return {};
	double b = base.toDouble();
	at::ScalarType rt = at::result_type(base, x);
	if (!(b >= 0) || isa_dtype_of(rt) == ISA_DT_INVALID)
		return {};
	at::Tensor xf = x.scalar_type() == rt ? x : x.to(rt);
	if (b == 1.0)
		return at::ones_like(xf);
	if (b == 0.0)
		return at::where(xf.eq(0), 1.0, at::where(xf.gt(0), 0.0, std::numeric_limits<double>::infinity()))
			.to(rt);
	// in fp32, rounded once at the end as CPU's opmath (x ln b rounded to
	// bf16 first was off by up to 6 bf16 ulps)
	at::Tensor r = as_fp32(xf).mul(std::log(b)).exp();
	return r.scalar_type() == rt ? r : r.to(rt);
}

at::Tensor pow_scalar_base(const at::Scalar &base, const at::Tensor &x)
{
	return pow_base_impl(base, x);   /* undefined: declined */
}

at::Tensor &pow_scalar_base_out(const at::Scalar &base, const at::Tensor &x, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? pow_base_impl(base, x) : at::Tensor());
}

// eye: row index == column index, from two iotas
at::Tensor &eye_m_out(int64_t n, int64_t m, at::Tensor &out)
{
	TORCH_CHECK(n >= 0 && m >= 0, "eye: n and m must be non-negative, got ", n, " and ", m);
	if (!out.is_privateuseone() || units_of(out.scalar_type(), false).dtype == ISA_DT_INVALID)
		return declined;
	at::Tensor r = at::arange(n, out.options().dtype(at::kInt)).unsqueeze(1).eq(
		at::arange(m, out.options().dtype(at::kInt)).unsqueeze(0));
	return write_result(out, r.to(out.scalar_type()));
}

at::Tensor &eye_out(int64_t n, at::Tensor &out)
{
	return eye_m_out(n, n, out);
}

// flip: an index_select per flipped dim with the reversed indices
at::Tensor flip(const at::Tensor &self, at::IntArrayRef dims)
{
	if (!self.is_privateuseone() || units_of(self.scalar_type(), false).dtype == ISA_DT_INVALID)
		return declined;
	at::Tensor r = self;
	std::vector<bool> seen(std::max<int64_t>(self.dim(), 1), false);
	for (int64_t d0 : dims) {
		int64_t d = at::maybe_wrap_dim(d0, self.dim());
		TORCH_CHECK(!seen[d], "flip: dim ", d, " appears multiple times in the list of dims");
		seen[d] = true;
		int64_t n = self.size(d);
		if (n < 2)
			continue;
		at::Tensor idx = at::empty({ n }, self.options().dtype(at::kLong));
		at::_ops::arange_start_out::call(n - 1, -1, -1, idx);
		r = r.index_select(d, idx);
	}
	return r.is_same(self) ? self.clone() : r;
}



// base ** exponent elementwise, both tensors (ALiBi slopes: a 0-dim base to
// int32 powers): VectorE's pow ALU in the promoted float type, the operands
// broadcast and cast by DMA first
at::Tensor pow_tt_impl(const at::Tensor &a, const at::Tensor &b)
{
	if (!a.is_privateuseone() || !b.is_privateuseone() || a.device() != b.device() || a.is_complex() ||
	    b.is_complex())
		return {};
	at::ScalarType rt = at::result_type(a, b);
	if (isa_dtype_of(rt) == ISA_DT_INVALID)
		return {};
	std::vector<int64_t> shape = at::infer_size(a.sizes(), b.sizes());
	at::Tensor x = prepared(a, shape, rt), y = prepared(b, shape, rt), out;
	if (!x.defined() || !y.defined() || !native_binary_op("aten::pow", ISA_ALU_pow, x, y, out))
		return {};
	return out;
}

at::Tensor pow_tt(const at::Tensor &a, const at::Tensor &b)
{
	return pow_tt_impl(a, b);   /* undefined: declined */
}

at::Tensor &pow_tt_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? pow_tt_impl(a, b) : at::Tensor());
}

// log sigmoid as the CPU kernel computes it: z = exp(-|x|),
// out = min(x, 0) - log1p(z), and z kept as the backward's buffer:
// d x = g * ((x < 0) - sign * z / (1 + z)), sign = +1 for x < 0, else -1
std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor &x)
{
	if (!is_float_neuron(x))
		return declined;
	at::Tensor z = x.abs().neg().exp();
	at::Tensor out = at::where(x.lt(0), x, at::zeros_like(x)).sub(log1p_impl(z));
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

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_COMPOSITE)

}  // namespace neuron
