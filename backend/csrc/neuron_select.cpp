// neuron_select.cpp -- comparisons (bool results), where and masked_fill on
// VectorE; operands of other shapes, strides or float dtypes are first made
// the result's shape and dtype by DMA programs.  Integer operands go to the
// counted CPU fallback (64-bit integers have no ISA type).
#include "neuron_kernels.h"

#include <ATen/ExpandUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/ge_ops.h>
#include <ATen/ops/gt_ops.h>
#include <ATen/ops/le_ops.h>
#include <ATen/ops/lt_ops.h>
#include <ATen/ops/masked_fill_ops.h>
#include <ATen/ops/ne_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/where_ops.h>
#include <torch/library.h>

#include <cstring>

namespace neuron {

namespace {

bool float_dev(const at::Tensor &t)
{
	return t.is_privateuseone() && isa_dtype_of(t.scalar_type()) != ISA_DT_INVALID;
}

at::Tensor compare(const char *name, int alu, const at::Tensor &a, const at::Tensor *b, float s)
{
	at::ScalarType dt = b ? at::result_type(a, *b) : a.scalar_type();
	std::vector<int64_t> shape = b ? at::infer_size(a.sizes(), b->sizes()) : a.sizes().vec();
	at::Tensor out = at::empty(shape, a.options().dtype(at::kBool));
	if (out.numel() == 0)
		return out;
	at::Tensor x = materialize(a, shape, dt), y = b ? materialize(*b, shape, dt) : at::Tensor();
	int idt = isa_dtype_of(dt);
	uint32_t sb;
	std::memcpy(&sb, &s, 4);
	uint64_t n = (uint64_t)out.numel();
	std::vector<int64_t> key{ 'q', alu, idt, b != nullptr, b ? 0 : sb, (int64_t)n };
	int dev = a.device().index();
	nsim_model *m = cached_program(std::move(key), dev, "compare", [&](int target, uint8_t **bin, size_t *len, isa_diag *d) {
		return nk_compare_program(target, alu, idt, b == nullptr, s, n, bin, len, d);
	});
	if (b)
		run_program(m, dev, name, { { "a", &x }, { "b", &y } }, { { "out", &out } });
	else
		run_program(m, dev, name, { { "a", &x } }, { { "out", &out } });
	return out;
}

// a scalar that is exact as fp32 (so comparing at fp32 is comparing at the
// tensor's precision for fp32/bf16/fp16 tensors)
bool fp32_exact(const at::Scalar &s)
{
	if (s.isComplex())
		return false;
	double v = s.toDouble();
	return (double)(float)v == v || std::isnan(v);
}

#define CMP(fname, alu)                                                                          \
	at::Tensor fname##_tensor(const at::Tensor &a, const at::Tensor &b)                          \
	{                                                                                        \
		if (float_dev(a) && float_dev(b) && a.device() == b.device())                    \
			return compare("aten::" #fname, alu, a, &b, 0);                             \
		if (float_dev(a) && b.dim() == 0 && b.is_cpu() && fp32_exact(b.item()))          \
			return compare("aten::" #fname, alu, a, nullptr, b.item<float>());          \
		return at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::fname##_Tensor>::call(a, b); \
	}                                                                                        \
	at::Tensor fname##_scalar(const at::Tensor &a, const at::Scalar &s)                          \
	{                                                                                        \
		if (float_dev(a) && fp32_exact(s))                                               \
			return compare("aten::" #fname, alu, a, nullptr, (float)s.toDouble());     \
		return at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::fname##_Scalar>::call(a, s); \
	}

#define NEURON_CMP_OPS(X)          \
	X(eq, ISA_ALU_is_equal)    \
	X(ne, ISA_ALU_not_equal)   \
	X(lt, ISA_ALU_is_lt)       \
	X(le, ISA_ALU_is_le)       \
	X(gt, ISA_ALU_is_gt)       \
	X(ge, ISA_ALU_is_ge)

NEURON_CMP_OPS(CMP)

// out = cond ? a : b (VectorE select); undefined when not covered
at::Tensor select(const char *name, const at::Tensor &cond, const at::Tensor &a, const at::Tensor &b)
{
	if (!cond.is_privateuseone() || cond.scalar_type() != at::kBool || !float_dev(a) || !float_dev(b) ||
	    a.device() != cond.device() || b.device() != cond.device())
		return {};
	at::ScalarType dt = at::result_type(a, b);
	std::vector<int64_t> shape = at::infer_size(at::infer_size(cond.sizes(), a.sizes()), b.sizes());
	at::Tensor out = at::empty(shape, a.options().dtype(dt));
	if (out.numel() == 0)
		return out;
	at::Tensor c = materialize(cond, shape, at::kBool), x = materialize(a, shape, dt), y = materialize(b, shape, dt);
	int idt = isa_dtype_of(dt);
	uint64_t n = (uint64_t)out.numel();
	int dev = cond.device().index();
	nsim_model *m = cached_program({ 'w', idt, (int64_t)n }, dev, "select",
				       [&](int target, uint8_t **bin, size_t *len, isa_diag *d) {
		return nk_select_program(target, idt, n, bin, len, d);
	});
	run_program(m, dev, name, { { "a", &c }, { "b", &x }, { "c", &y } }, { { "out", &out } });
	return out;
}

at::Tensor where(const at::Tensor &cond, const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor out = select("aten::where", cond, a, b);
	if (out.defined())
		return out;
	return at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::where_self>::call(cond, a, b);
}

// self.masked_fill(mask, v) = where(mask, v, self), in self's dtype and shape
at::Tensor masked_fill(const at::Tensor &self, const at::Tensor &mask, const at::Scalar &v)
{
	if (float_dev(self) && mask.is_privateuseone() && mask.scalar_type() == at::kBool && !v.isComplex() &&
	    at::infer_size(self.sizes(), mask.sizes()) == self.sizes().vec()) {
		at::Tensor fill = at::empty({}, self.options());
		if (native_fill(fill, v)) {
			at::Tensor out = select("aten::masked_fill", mask, fill, self);
			if (out.defined())
				return out;
		}
	}
	return at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::masked_fill_Scalar>::call(self, mask, v);
}

at::Tensor &masked_fill_(at::Tensor &self, const at::Tensor &mask, const at::Scalar &v)
{
	if (float_dev(self) && mask.is_privateuseone() && mask.scalar_type() == at::kBool &&
	    at::infer_size(self.sizes(), mask.sizes()) == self.sizes().vec()) {
		at::Tensor out = neuron::masked_fill(self, mask, v);
		TORCH_CHECK(native_copy(self, out), "neuron: masked_fill_ copy");
		return self;
	}
	return at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::masked_fill__Scalar>::call(self, mask, v);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
#define CMP_REG(fname, alu)                           \
	m.impl(#fname ".Tensor", fname##_tensor);     \
	m.impl(#fname ".Scalar", fname##_scalar);
	NEURON_CMP_OPS(CMP_REG)
	m.impl("where.self", where);
	m.impl("masked_fill.Scalar", masked_fill);
	m.impl("masked_fill_.Scalar", masked_fill_);
}

}  // namespace neuron
