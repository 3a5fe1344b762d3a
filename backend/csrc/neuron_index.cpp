// neuron_index.cpp -- ops that move whole rows or write generated values:
// index_select (and so embedding), cat, arange, fill_ / zero_.
#include "neuron_kernels.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/arange_ops.h>
#include <ATen/ops/cat_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_select_ops.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>

namespace neuron {

bool native_fill(const at::Tensor &self, const at::Scalar &v)
{
	Units u = units_of(self.scalar_type(), false);
	bool is64 = self.scalar_type() == at::kLong;
	if (!self.is_privateuseone() || u.dtype == ISA_DT_INVALID || (u.per == 2 && !is64) || v.isComplex())
		return false;
	if (self.numel() == 0)
		return true;
	if (!self.is_contiguous()) {
		at::Tensor tmp = at::empty(self.sizes(), self.options());
		return native_fill(tmp, v) && native_copy(self, tmp);
	}
	nk_fill f{};
	f.dtype = is64 ? ISA_DT_int32 : u.dtype;
	f.int64 = is64;
	f.n = (uint64_t)self.numel();
	bool fl = isa_dtype_of(self.scalar_type()) != ISA_DT_INVALID;
	if (fl) {
		f.fvalue = (float)v.toDouble();   // memset rounds it to bf16/fp16 as CPU's fill_ does
	} else {
		f.ivalue = v.isBoolean() ? v.toBool() : v.toLong();
	}
	uint32_t fb;
	std::memcpy(&fb, &f.fvalue, 4);
	std::vector<int64_t> key{ 'f', f.dtype, f.int64, (int64_t)f.n, fb, f.ivalue };
	int dev = self.device().index();
	nsim_model *m = cached_program(std::move(key), dev, "fill", [&](int target, uint8_t **bin, size_t *len, isa_diag *d) {
		return nk_fill_program(target, &f, bin, len, d);
	});
	run_program(m, dev, "aten::fill_", {}, { { "out", &self } });
	return true;
}

namespace {

at::Tensor index_select(const at::Tensor &self, int64_t dim, const at::Tensor &index)
{
	Units u = units_of(self.scalar_type(), false);
	bool ok = self.is_privateuseone() && index.is_privateuseone() && self.device() == index.device() &&
		  u.dtype != ISA_DT_INVALID && index.dim() <= 1 &&
		  (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt) && self.dim() >= 1;
	if (ok) {
		dim = at::maybe_wrap_dim(dim, self.dim());
		std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
		shape[dim] = index.numel();
		at::Tensor out = at::empty(shape, self.options());
		if (out.numel() == 0)
			return out;
		TORCH_CHECK_INDEX(self.size(dim) > 0, "index_select(): index out of range: the source has no rows");
		at::Tensor src = materialize(self, self.sizes(), self.scalar_type());
		at::Tensor idx = materialize(index.reshape({ -1 }), { index.numel() }, index.scalar_type());
		nk_gather g{};
		g.dtype = u.dtype;
		g.outer = (uint64_t)c10::multiply_integers(self.sizes().slice(0, dim));
		g.rows = (uint64_t)self.size(dim);
		g.inner = (uint64_t)c10::multiply_integers(self.sizes().slice(dim + 1)) * u.per;
		g.nidx = (uint64_t)idx.numel();
		g.index_int64 = index.scalar_type() == at::kLong;
		std::vector<int64_t> key{ 'g', g.dtype, (int64_t)g.outer, (int64_t)g.rows, (int64_t)g.inner,
					  (int64_t)g.nidx, g.index_int64 };
		int dev = self.device().index();
		nsim_model *m = cached_program(std::move(key), dev, "gather",
					       [&](int target, uint8_t **bin, size_t *len, isa_diag *d) {
			return nk_gather_program(target, &g, bin, len, d);
		});
		run_program(m, dev, "aten::index_select", { { "table", &src }, { "index", &idx } }, { { "out", &out } });
		return out;
	}
	return at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::index_select>::call(self, dim, index);
}

// cat: one DMA copy per input into its slice of the result
at::Tensor cat(const at::ITensorListRef &tensors, int64_t dim)
{
	std::vector<at::Tensor> ts;
	for (const at::Tensor &t : tensors)
		ts.push_back(t);
	std::vector<at::Tensor> parts;   // legacy 1-D empty tensors take no part
	for (const at::Tensor &t : ts)
		if (!(t.dim() == 1 && t.numel() == 0))
			parts.push_back(t);
	bool ok = !parts.empty();
	at::ScalarType dt = ok ? parts[0].scalar_type() : at::kFloat;
	for (const at::Tensor &t : parts) {
		dt = c10::promoteTypes(dt, t.scalar_type());
		ok = ok && t.is_privateuseone() && t.device() == parts[0].device() && t.dim() == parts[0].dim();
	}
	if (ok) {
		dim = at::maybe_wrap_dim(dim, parts[0].dim());
		std::vector<int64_t> shape(parts[0].sizes().begin(), parts[0].sizes().end());
		int64_t total = 0;
		for (const at::Tensor &t : parts) {
			for (int64_t d = 0; d < t.dim(); d++)
				ok = ok && (d == dim || t.size(d) == shape[d]);
			ok = ok && (t.scalar_type() == dt || (isa_dtype_of(t.scalar_type()) != ISA_DT_INVALID &&
							     isa_dtype_of(dt) != ISA_DT_INVALID)) &&
			     units_of(t.scalar_type(), t.scalar_type() != dt).dtype != ISA_DT_INVALID;
			total += t.size(dim);
		}
		if (ok) {
			shape[dim] = total;
			at::Tensor out = at::empty(shape, parts[0].options().dtype(dt));
			int64_t off = 0;
			for (const at::Tensor &t : parts) {
				if (t.numel())
					TORCH_CHECK(native_copy(out.narrow(dim, off, t.size(dim)), t), "neuron: cat copy");
				off += t.size(dim);
			}
			return out;
		}
	}
	return at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::cat>::call(tensors, dim);
}

at::Tensor &arange_out(const at::Scalar &start, const at::Scalar &end, const at::Scalar &step, at::Tensor &out)
{
	double s = start.toDouble(), e = end.toDouble(), st = step.toDouble();
	bool integral = std::floor(s) == s && std::floor(st) == st && st != 0;
	double n = integral ? std::ceil((e - s) / st) : -1;
	bool is64 = out.scalar_type() == at::kLong;
	double last = s + (n - 1) * st;
	bool ok = out.is_privateuseone() && integral && n >= 0 && n < 1e12 &&
		  (is64 || out.scalar_type() == at::kInt || out.scalar_type() == at::kFloat) &&
		  std::fabs(s) < 16777216 && std::fabs(last) < 16777216 && std::fabs(st * 2048 * 128) < 2e9;
	if (ok) {
		out.resize_({ (int64_t)n });
		if (n == 0)
			return out;
		nk_fill f{};
		f.dtype = out.scalar_type() == at::kFloat ? ISA_DT_fp32 : ISA_DT_int32;
		f.int64 = is64;
		f.n = (uint64_t)n;
		f.iota = true;
		f.start = (int64_t)s;
		f.step = (int64_t)st;
		std::vector<int64_t> key{ 'a', f.dtype, f.int64, (int64_t)f.n, f.start, f.step };
		int dev = out.device().index();
		nsim_model *m = cached_program(std::move(key), dev, "arange",
					       [&](int target, uint8_t **bin, size_t *len, isa_diag *d) {
			return nk_fill_program(target, &f, bin, len, d);
		});
		at::Tensor dst = out.is_contiguous() ? out : at::empty(out.sizes(), out.options());
		run_program(m, dev, "aten::arange", {}, { { "out", &dst } });
		if (!dst.is_same(out))
			TORCH_CHECK(native_copy(out, dst), "neuron: arange copy");
		return out;
	}
	return at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::arange_start_out>::call(start, end, step, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("index_select", index_select);
	m.impl("cat", cat);
	m.impl("arange.start_out", arange_out);
}

}  // namespace neuron
