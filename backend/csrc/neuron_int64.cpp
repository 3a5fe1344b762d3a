// neuron_int64.cpp -- int64 tensors (positions, indices) on the device: add
// and subtract exactly on (low, high) int32 pairs, and int64 -> float casts
// (kernels/int64.c).  Used by add/sub and by copy_.
#include "neuron_kernels.h"

#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>

namespace neuron {

namespace {

nsim_model *i64_program(int op, int out_dt, uint64_t n, int dev)
{
	return cached_program({ 'i', op, out_dt, (int64_t)n }, dev, "int64",
			      [&](int target, uint8_t **bin, size_t *len, isa_diag *d) {
		return nk_int64_program(target, op, out_dt, n, bin, len, d);
	});
}

// an int64 operand on `like`'s device: a device tensor, or a wrapped integer
at::Tensor i64_operand(const at::Tensor &t, const at::Tensor &like)
{
	if (t.is_privateuseone() && t.device() == like.device())
		return t;
	if (t.dim() == 0 && t.is_cpu() && !t.is_floating_point() && !t.is_complex()) {
		at::Tensor d = at::empty({}, like.options());
		if (native_fill(d, t.item()))
			return d;
	}
	return {};
}

}  // namespace

bool native_i64_addsub(const char *name, bool sub, const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	if (!a.is_privateuseone() || a.scalar_type() != at::kLong || b.scalar_type() == at::kBool ||
	    at::result_type(a, b) != at::kLong)
		return false;
	at::Tensor y = i64_operand(b, a);
	if (!y.defined() || y.scalar_type() != at::kLong)
		return false;
	std::vector<int64_t> shape = at::infer_size(a.sizes(), y.sizes());
	out = at::empty(shape, a.options());
	if (out.numel() == 0)
		return true;
	at::Tensor x = materialize(a, shape, at::kLong), z = materialize(y, shape, at::kLong);
	int dev = a.device().index();
	nsim_model *m = i64_program(sub ? NK_I64_SUB : NK_I64_ADD, ISA_DT_uint32, (uint64_t)out.numel(), dev);
	run_program(m, dev, name, { { "a", &x }, { "b", &z } }, { { "out", &out } });
	return true;
}

bool native_i64_to_float(const at::Tensor &dst, const at::Tensor &src)
{
	int odt = isa_dtype_of(dst.scalar_type());
	if (src.scalar_type() != at::kLong || odt == ISA_DT_INVALID || !src.is_privateuseone())
		return false;
	at::Tensor x = materialize(src, dst.sizes(), at::kLong);
	at::Tensor out = dst.is_contiguous() ? dst : at::empty(dst.sizes(), dst.options());
	if (out.numel()) {
		int dev = src.device().index();
		nsim_model *m = i64_program(NK_I64_TO_FLOAT, odt, (uint64_t)out.numel(), dev);
		run_program(m, dev, "aten::copy_", { { "a", &x } }, { { "out", &out } });
	}
	return out.is_same(dst) || native_copy(dst, out);
}

}  // namespace neuron
