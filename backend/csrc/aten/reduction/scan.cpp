// aten/reduction/scan.cpp -- products and scans composed from the native
// elementwise kernels: prod (a pairwise tree of multiplies), and the
// inclusive scans cumsum (exact for integers), cumprod, cummax / cummin
// (with CPU's indices) and logcumsumexp, each as log2(n) doubling steps
// (Hillis-Steele: x[k:] = x[k:] <op> x[:-k] for k = 1, 2, 4, ...).
//
// Floats combine in a different order than CPU's sequential loop (within a
// few ulps; bf16 / fp16 at fp32 and rounded once, as CPU's accumulate
// type).  Integer products and integer cummax / cummin decline (the
// counted CPU fallback).
#include "aten/reduction/scan.h"
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/pointwise/math.h"
#include "ops.def"

#include <ATen/WrapDimUtils.h>
#include <ATen/ops/cumsum_ops.h>
#include <ATen/ops/where.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/logaddexp.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/cumprod_ops.h>
#include <ATen/ops/logcumsumexp_ops.h>
#include <ATen/ops/_logcumsumexp_ops.h>
#include <ATen/ops/_cummax_helper_ops.h>
#include <ATen/ops/_cummin_helper_ops.h>
#include <ATen/ops/prod_ops.h>

#include <functional>

namespace neuron {

using Combine = std::function<at::Tensor(const at::Tensor &later, const at::Tensor &earlier)>;

// x scanned along dim in place of a copy: after the step of k, element i
// combines elements (i - 2k, i]; log2(n) steps of one elementwise op each
at::Tensor doubling_scan(at::Tensor x, int64_t dim, const Combine &combine)
{
	int64_t n = x.size(dim);
	for (int64_t k = 1; k < n; k *= 2) {
		at::Tensor y = x.clone();
		y.narrow(dim, k, n - k).copy_(combine(x.narrow(dim, k, n - k), x.narrow(dim, 0, n - k)));
		x = y;
	}
	return x;
}

namespace {

// the accumulate type of a float scan or product (CPU's: fp32 for bf16 /
// fp16), and the result type (dtype, else self's; integers give int64)
bool float_scan(const at::Tensor &self, std::optional<at::ScalarType> dtype, at::ScalarType *rt)
{
	*rt = dtype.value_or(at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type());
	return is_float_neuron(self) && isa_dtype_of(*rt) != ISA_DT_INVALID && at::isFloatingType(*rt);
}

// r, or a copy of it when it is self's memory (a scan or product over a
// dim of one element returns its input): an op's result is a new tensor
at::Tensor fresh(const at::Tensor &r, const at::Tensor &self)
{
	return r.is_alias_of(self) ? r.clone() : r;
}

// the product of x's rows ([rows, n] fp32 -> [rows]): pairs multiplied
// until one is left (an odd last element carried); an empty row is 1
at::Tensor product_rows(at::Tensor x)
{
	int64_t rows = x.size(0);
	if (x.size(1) == 0)
		return at::ones({ rows }, x.options());
	while (x.size(1) > 1) {
		int64_t n = x.size(1), h = n / 2;
		at::Tensor p = x.narrow(1, 0, h).mul(x.narrow(1, h, h));
		x = n % 2 ? at::cat({ p, x.narrow(1, 2 * h, 1) }, 1) : p;
	}
	return x.view({ rows });
}

// prod over one dim (or all with dim absent), keepdim, in dtype
at::Tensor prod_impl(const at::Tensor &self, std::optional<int64_t> dim, bool keepdim, std::optional<at::ScalarType> dtype)
{
	at::ScalarType rt;
	if (!float_scan(self, dtype, &rt))
		return {};
	at::Tensor f = as_fp32(self);
	if (!dim || self.dim() == 0) {
		if (dim)
			at::maybe_wrap_dim(*dim, (int64_t)0);   /* CPU's IndexError for a bad dim of a scalar */
		at::Tensor r = product_rows(f.reshape({ 1, f.numel() })).view(at::IntArrayRef{});
		if (dim && keepdim)
			r = r.view(self.sizes());
		return fresh(cast_back(r, rt), self);
	}
	int64_t d = at::maybe_wrap_dim(*dim, self.dim());
	std::vector<int64_t> shape = self.sizes().vec();
	shape.erase(shape.begin() + d);
	int64_t rows = 1;
	for (int64_t s : shape)
		rows *= s;
	at::Tensor r = product_rows(f.movedim(d, -1).contiguous().view({ rows, self.size(d) })).view(shape);
	if (keepdim)
		r = r.unsqueeze(d);
	return fresh(cast_back(r, rt), self);
}

at::Tensor prod(const at::Tensor &self, std::optional<at::ScalarType> dtype)
{
	return prod_impl(self, std::nullopt, false, dtype);   /* undefined: declined */
}

at::Tensor &prod_out(const at::Tensor &self, std::optional<at::ScalarType> dtype, at::Tensor &out)
{
	if (dtype && *dtype != out.scalar_type())
		return declined;   /* CPU's dtype error */
	return composite_out(out, { &self }, prod_impl(self, std::nullopt, false, out.scalar_type()));
}

at::Tensor prod_dim(const at::Tensor &self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype)
{
	return prod_impl(self, dim, keepdim, dtype);   /* undefined: declined */
}

at::Tensor &prod_int_out(const at::Tensor &self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype,
			 at::Tensor &out)
{
	if (out.scalar_type() != dtype.value_or(out.scalar_type()))
		return declined;
	return composite_out(out, { &self }, prod_impl(self, dim, keepdim, out.scalar_type()));
}

// a float scan of self along dim at fp32, rounded once into rt
at::Tensor float_scan_of(const at::Tensor &self, int64_t dim, at::ScalarType rt, const Combine &combine)
{
	int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), (int64_t)1));
	if (self.dim() == 0)
		return fresh(self.to(rt), self);
	return fresh(cast_back(doubling_scan(as_fp32(self).contiguous(), d, combine), rt), self);
}

at::Tensor cumprod_impl(const at::Tensor &self, int64_t dim, std::optional<at::ScalarType> dtype)
{
	at::ScalarType rt;
	if (!float_scan(self, dtype, &rt))
		return {};
	return float_scan_of(self, dim, rt, [](const at::Tensor &a, const at::Tensor &b) { return a.mul(b); });
}

at::Tensor cumprod(const at::Tensor &self, int64_t dim, std::optional<at::ScalarType> dtype)
{
	return cumprod_impl(self, dim, dtype);   /* undefined: declined */
}

at::Tensor &cumprod_out(const at::Tensor &self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor &out)
{
	if (dtype && *dtype != out.scalar_type())
		return declined;   /* CPU's dtype error */
	return composite_out(out, { &self }, cumprod_impl(self, dim, out.scalar_type()));
}

// CPU's logcumsumexp: the running log(sum(exp)) by logaddexp (whose
// a == b == +-inf case gives a), fp32 inside
at::Tensor logcumsumexp_impl(const at::Tensor &self, int64_t dim)
{
	if (!is_float_neuron(self))
		return {};
	return float_scan_of(self, dim, self.scalar_type(),
			     [](const at::Tensor &a, const at::Tensor &b) { return at::logaddexp(a, b); });
}

at::Tensor logcumsumexp(const at::Tensor &self, int64_t dim)
{
	return logcumsumexp_impl(self, dim);   /* undefined: declined */
}

at::Tensor &logcumsumexp_out(const at::Tensor &self, int64_t dim, at::Tensor &out)
{
	if (out.scalar_type() != self.scalar_type())
		return declined;
	return composite_out(out, { &self }, logcumsumexp_impl(self, dim));
}

// cummax / cummin of floats: the running extreme by a NaN-propagating
// maximum (minimum) scan; the index as CPU's loop keeps it -- the last
// position whose element took the running value (ties move it on: CPU
// tests x >= running max), and once a NaN came, the last NaN -- which is
// the running maximum of the positions where x equals its running value
// or is NaN (positions as fp32, exact below 2^24)
bool cum_extreme(const at::Tensor &self, at::Tensor &values, at::Tensor &indices, int64_t dim, bool is_max)
{
	if (!is_float_neuron(self) || self.dim() == 0 || values.scalar_type() != self.scalar_type() ||
	    indices.scalar_type() != at::kLong || !values.is_privateuseone() || !indices.is_privateuseone())
		return false;
	int64_t d = at::maybe_wrap_dim(dim, self.dim());
	if (self.size(d) >= (int64_t)1 << 24)
		return false;
	at::Tensor x = as_fp32(self).contiguous();
	at::Tensor v = doubling_scan(x, d, [is_max](const at::Tensor &a, const at::Tensor &b) {
		return is_max ? at::maximum(a, b) : at::minimum(a, b);
	});
	std::vector<int64_t> shape(self.dim(), 1);
	shape[d] = self.size(d);
	at::Tensor pos = at::arange(self.size(d), at::TensorOptions().dtype(at::kFloat)).to(self.device()).view(shape);
	at::Tensor took = x.eq(v).bitwise_or(x.ne(x));
	at::Tensor idx = at::where(took, pos.expand(self.sizes()), scalar_like(-1.0, x));
	idx = doubling_scan(idx.contiguous(), d, [](const at::Tensor &a, const at::Tensor &b) { return at::maximum(a, b); });
	at::Tensor r = cast_back(v, self.scalar_type());
	at::Tensor ri = integral_float_to_int64(idx);
	composite_out(values, { &self }, r);
	composite_out(indices, { &self }, ri);
	return true;
}

bool cummax_helper(const at::Tensor &self, at::Tensor &values, at::Tensor &indices, int64_t dim)
{
	return cum_extreme(self, values, indices, dim, true);
}

bool cummin_helper(const at::Tensor &self, at::Tensor &values, at::Tensor &indices, int64_t dim)
{
	return cum_extreme(self, values, indices, dim, false);
}

// inclusive scan along `dim` in log2(n) steps of shifted adds (exact for
// integers, wrapping as CPU's do; floats sum in a different order than
// CPU's sequential loop)
at::Tensor cumsum_impl(const at::Tensor &self, int64_t dim, std::optional<at::ScalarType> dtype)
{
	at::ScalarType rt = dtype.value_or(at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type());
	bool int_rt = at::isIntegralType(rt, false) && rt != at::kLong;   // int32 and narrower: exact wrapping adds
	if (!dma_movable(self) || !(rt == at::kLong || int_rt || isa_dtype_of(rt) != ISA_DT_INVALID))
		return {};
	if (self.dim() == 0)
		return materialize(self, self.sizes(), rt).clone();
	dim = at::maybe_wrap_dim(dim, self.dim());
	at::Tensor x = at::empty(self.sizes(), self.options().dtype(rt));
	if (!native_copy(x, self))
		return {};
	return doubling_scan(x, dim, [](const at::Tensor &a, const at::Tensor &b) { return a.add(b); });
}

at::Tensor cumsum(const at::Tensor &self, int64_t dim, std::optional<at::ScalarType> dtype)
{
	at::Tensor r = cumsum_impl(self, dim, dtype);
	if (r.defined())
		return r;
	return declined;
}

at::Tensor &cumsum_out(const at::Tensor &self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor &out)
{
	at::Tensor r = cumsum_impl(self, dim, dtype.has_value() ? dtype : std::optional<at::ScalarType>(out.scalar_type()));
	return written_or_declined(out, r.defined() && out.is_privateuseone() && out.scalar_type() == r.scalar_type()
						? r
						: at::Tensor());
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_SCAN)

}  // namespace neuron
