// neuron_generate.cpp -- the small integer ops a generation loop runs
// between model steps (Transformers' stopping criteria and position ids),
// composed from the native kernels: isin, cumsum, full max / min.
#include "neuron_kernels.h"

#include <ATen/native/CPUFallback.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cumsum_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/isin_ops.h>
#include <ATen/ops/max_ops.h>
#include <ATen/ops/min_ops.h>
#include <ATen/ops/tril_ops.h>
#include <ATen/ops/triu_ops.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

namespace neuron {

namespace {

bool on_device(const at::Tensor &t)
{
	return t.is_privateuseone() && units_of(t.scalar_type(), false).dtype != ISA_DT_INVALID;
}

// elements[i] in test_elements: one broadcast comparison, then any()
at::Tensor isin_impl(const at::Tensor &e, const at::Tensor &t, bool invert)
{
	if (!on_device(e) || !on_device(t) || e.device() != t.device() || t.numel() == 0 || e.numel() == 0 ||
	    e.scalar_type() != t.scalar_type() || at::isFloatingType(e.scalar_type()) != at::isFloatingType(t.scalar_type()))
		return {};
	at::Tensor hit = e.reshape({ -1, 1 }).eq(t.reshape({ 1, -1 })).any(-1).view(e.sizes());
	return invert ? hit.bitwise_not() : hit;
}

at::Tensor isin(const at::Tensor &e, const at::Tensor &t, bool assume_unique, bool invert)
{
	at::Tensor r = isin_impl(e, t, invert);
	if (r.defined())
		return r;
	return at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::isin_Tensor_Tensor>::call(e, t, assume_unique,
												      invert);
}

at::Tensor &isin_out(const at::Tensor &e, const at::Tensor &t, bool assume_unique, bool invert, at::Tensor &out)
{
	at::Tensor r = isin_impl(e, t, invert);
	if (r.defined() && out.is_privateuseone() && out.scalar_type() == at::kBool) {
		if (!out.sizes().equals(r.sizes()))
			out.resize_(r.sizes());
		TORCH_CHECK(native_copy(out, r), "neuron: isin out");
		return out;
	}
	return at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::isin_Tensor_Tensor_out>::call(
		e, t, assume_unique, invert, out);
}

// inclusive scan along `dim` in log2(n) steps of shifted adds (exact for
// integers: int64 adds are exact; floats sum in a different order than
// CPU's sequential loop)
at::Tensor cumsum_impl(const at::Tensor &self, int64_t dim, std::optional<at::ScalarType> dtype)
{
	at::ScalarType rt = dtype.value_or(at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type());
	if (!on_device(self) || !(rt == at::kLong || isa_dtype_of(rt) != ISA_DT_INVALID))
		return {};
	if (self.dim() == 0)
		return materialize(self, self.sizes(), rt).clone();
	dim = at::maybe_wrap_dim(dim, self.dim());
	at::Tensor x = at::empty(self.sizes(), self.options().dtype(rt));
	if (!native_copy(x, self))
		return {};
	int64_t n = self.size(dim);
	for (int64_t k = 1; k < n; k *= 2) {
		at::Tensor y = x.clone();
		y.narrow(dim, k, n - k).copy_(x.narrow(dim, k, n - k).add(x.narrow(dim, 0, n - k)));
		x = y;
	}
	return x;
}

at::Tensor cumsum(const at::Tensor &self, int64_t dim, std::optional<at::ScalarType> dtype)
{
	at::Tensor r = cumsum_impl(self, dim, dtype);
	if (r.defined())
		return r;
	return at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::cumsum>::call(self, dim, dtype);
}

at::Tensor &cumsum_out(const at::Tensor &self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor &out)
{
	at::Tensor r = cumsum_impl(self, dim, dtype.has_value() ? dtype : std::optional<at::ScalarType>(out.scalar_type()));
	if (r.defined() && out.is_privateuseone() && out.scalar_type() == r.scalar_type()) {
		if (!out.sizes().equals(r.sizes()))
			out.resize_(r.sizes());
		TORCH_CHECK(native_copy(out, r), "neuron: cumsum out");
		return out;
	}
	return at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::cumsum_out>::call(self, dim, dtype, out);
}

// max() / min() of a whole tensor: floats by the row kernel; integers by a
// pairwise tree of compare + select (exact at any width)
at::Tensor extreme(const at::Tensor &self, bool is_max)
{
	if (!on_device(self) || self.numel() == 0)
		return {};
	if (isa_dtype_of(self.scalar_type()) != ISA_DT_INVALID)
		return is_max ? self.amax() : self.amin();
	if (self.scalar_type() == at::kBool)
		return {};
	at::Tensor x = materialize(self.reshape({ -1 }), { self.numel() }, self.scalar_type());
	while (x.numel() > 1) {
		int64_t h = x.numel() / 2;
		at::Tensor a = x.narrow(0, 0, h), b = x.narrow(0, h, h);
		at::Tensor m = at::where(is_max ? a.gt(b) : a.lt(b), a, b);
		x = x.numel() % 2 ? materialize(at::cat({ m, x.narrow(0, 2 * h, 1) }), { h + 1 }, x.scalar_type()) : m;
	}
	return x.reshape({});
}

at::Tensor max_full(const at::Tensor &self)
{
	at::Tensor r = extreme(self, true);
	return r.defined() ? r : at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::max>::call(self);
}

at::Tensor min_full(const at::Tensor &self)
{
	at::Tensor r = extreme(self, false);
	return r.defined() ? r : at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::min>::call(self);
}

// tril / triu over the last two dims (GpSimd affine_select, kernels/tri.c)
at::Tensor tri(const at::Tensor &self, int64_t k, bool upper)
{
	if (!self.is_privateuseone() || isa_dtype_of(self.scalar_type()) == ISA_DT_INVALID || self.dim() < 2)
		return {};
	at::Tensor out = at::empty(self.sizes(), self.options());
	if (out.numel() == 0)
		return out;
	at::Tensor x = materialize(self, self.sizes(), self.scalar_type());
	int dt = isa_dtype_of(self.scalar_type());
	uint64_t r = (uint64_t)self.size(-2), c = (uint64_t)self.size(-1), b = (uint64_t)self.numel() / (r * c);
	int dev = self.device().index();
	// what the kernel takes: whole rows in SBUF (two buffers), <= 65536 tiles
	const isa_target_info *ti = isa_target_get(isa_target_from_name(nsim_target_name()));
	if (!ti || 2 * c * self.element_size() + 4096 > ti->sbuf_partition_bytes || b * ((r + 127) / 128) > 65536)
		return {};
	nsim_model *m = cached_program({ 't', dt, (int64_t)b, (int64_t)r, (int64_t)c, k, upper }, dev, "tril/triu",
				       [&](int target, uint8_t **bin, size_t *len, isa_diag *dd) {
		return nk_tri_program(target, dt, b, r, c, k, upper, bin, len, dd);
	});
	run_program(m, dev, upper ? "aten::triu" : "aten::tril", { { "x", &x } }, { { "out", &out } });
	return out;
}

at::Tensor tril(const at::Tensor &self, int64_t k)
{
	at::Tensor r = tri(self, k, false);
	return r.defined() ? r : at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::tril>::call(self, k);
}

at::Tensor triu(const at::Tensor &self, int64_t k)
{
	at::Tensor r = tri(self, k, true);
	return r.defined() ? r : at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::triu>::call(self, k);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("tril", tril);
	m.impl("triu", triu);
	m.impl("isin.Tensor_Tensor", isin);
	m.impl("isin.Tensor_Tensor_out", isin_out);
	m.impl("cumsum", cumsum);
	m.impl("cumsum.out", cumsum_out);
	m.impl("max", max_full);
	m.impl("min", min_full);
}

}  // namespace neuron
