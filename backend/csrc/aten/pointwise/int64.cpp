// aten/pointwise/int64.cpp -- int64 tensors (positions, indices) on the device,
// exactly on (low, high) int32 pairs (programs/int64.c): add, subtract,
// multiply, comparisons, and casts between int64, narrower integers and
// floats.  Used by the elementwise, comparison and copy kernels.
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/pointwise/lowering.h"

#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/where.h>
#include <ATen/ops/result_type.h>

namespace neuron {

namespace {

Program i64_program(int op, int out_dt, uint64_t n, int dev, int32_t c = 0)
{
	return cached_program("int64", nk_int64{ op, out_dt, n, c }, dev, nk_int64_program);
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

bool native_i64_addsub(const char *name, bool sub, const at::Tensor &a0, const at::Tensor &b, at::Tensor &out)
{
	// `1 - x` (rsub) arrives with the wrapped number first
	at::Tensor a = a0;
	if (!a.is_privateuseone() && b.is_privateuseone() && b.scalar_type() == at::kLong)
		a = i64_operand(a0, b);
	if (!a.defined() || !a.is_privateuseone() || a.scalar_type() != at::kLong || b.scalar_type() == at::kBool ||
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
	Program m = i64_program(sub ? NK_I64_SUB : NK_I64_ADD, ISA_DT_uint32, (uint64_t)out.numel(), dev);
	run_program(m, dev, name, { { "a", &x }, { "b", &z } }, { { "out", &out } });
	return true;
}

bool native_i64_to_float(const at::Tensor &dst, const at::Tensor &src)
{
	bool to_bool = dst.scalar_type() == at::kBool;
	int odt = to_bool ? ISA_DT_bool : isa_dtype_of(dst.scalar_type());
	if (src.scalar_type() != at::kLong || odt == ISA_DT_INVALID || !src.is_privateuseone())
		return false;
	at::Tensor x = materialize(src, dst.sizes(), at::kLong);
	at::Tensor out = dst.is_contiguous() ? dst : at::empty(dst.sizes(), dst.options());
	if (out.numel()) {
		int dev = src.device().index();
		Program m = i64_program(to_bool ? NK_I64_TO_BOOL : NK_I64_TO_FLOAT, odt, (uint64_t)out.numel(), dev);
		run_program(m, dev, "aten::copy_", { { "a", &x } }, { { "out", &out } });
	}
	return out.is_same(dst) || native_copy(dst, out);
}

// float -> integer / bool with CPU PyTorch's (x86) results: truncation
// toward zero; NaN and values outside int32 give INT32_MIN (cvttss2si),
// narrower types keep the low bits of that int32, bool is x != 0.  The
// device's own conversion saturates (NaN -> 0), so those lanes are fixed up.
// int64 is one program on the value's bits (int64.c, from_float64): exact
// for every value, none read on the host.
bool native_float_to_int(const at::Tensor &dst, const at::Tensor &src)
{
	at::ScalarType dt = dst.scalar_type();
	if (!src.is_privateuseone() || isa_dtype_of(src.scalar_type()) == ISA_DT_INVALID)
		return false;
	if (dt == at::kBool)
		return native_copy(dst, src.ne(0));
	Units ud = units_of(dt, false);
	if (ud.dtype == ISA_DT_INVALID || (ud.per != 1 && dt != at::kLong))
		return false;
	at::Tensor x = materialize(src, dst.sizes(), at::kFloat);
	if (x.numel() == 0)
		return true;
	int dev = src.device().index();
	if (dt == at::kLong) {
		at::Tensor out = dst.is_contiguous() ? dst : at::empty(dst.sizes(), dst.options());
		run_program(i64_program(NK_I64_FROM_FLOAT, ISA_DT_uint32, (uint64_t)out.numel(), dev), dev, "aten::copy_",
			    { { "a", &x } }, { { "out", &out } });
		return out.is_same(dst) || native_copy(dst, out);
	}
	at::Tensor bad = x.ne(x).bitwise_or(x.ge(2147483648.0)).bitwise_or(x.lt(-2147483648.0));
	at::Tensor t = at::empty(dst.sizes(), dst.options().dtype(at::kInt));
	Program m = cached_program("cast", nk_cast{ ISA_DT_fp32, ISA_DT_int32, (uint64_t)t.numel() }, dev,
				   nk_cast_program);
	run_program(m, dev, "aten::copy_", { { "a", &x } }, { { "out", &t } });
	t = at::where(bad, at::full({}, INT32_MIN, t.options()), t);
	return dt == at::kInt ? native_copy(dst, t) : native_cast(dst, t);
}

// small-integer / bool sources to other dtypes on VectorE; int64 -> int32
// keeps the low words (PyTorch's conversion wraps the same way)
bool native_cast(const at::Tensor &dst, const at::Tensor &src)
{
	at::ScalarType st = src.scalar_type(), dt = dst.scalar_type();
	if (st == at::kLong && dt == at::kInt) {
		at::Tensor x = materialize(src, dst.sizes(), at::kLong);
		at::Tensor lo = at::empty(dst.sizes(), dst.options());
		if (lo.numel()) {
			// the int64 buffer viewed as int32 pairs; the even words
			at::Tensor words = at::empty({ 0 }, x.options().dtype(at::kInt)).set_(x.storage(), 0, { 2 * x.numel() }, { 1 });
			TORCH_CHECK(native_copy(lo.view({ -1 }), words.as_strided({ x.numel() }, { 2 }, 2 * x.storage_offset())),
				    "neuron: int64 -> int32");
		}
		return lo.is_same(dst) || native_copy(dst, lo);
	}
	Units us = units_of(st, false), ud = units_of(dt, false);
	if (dt == at::kLong && us.per == 1 && us.dtype != ISA_DT_INVALID && !isa_dtype_is_float(us.dtype) &&
	    src.is_privateuseone()) {   // via int32, then sign-extended into pairs
		at::Tensor i32 = at::empty(dst.sizes(), dst.options().dtype(at::kInt));
		if (!native_cast(i32, src))
			return false;
		at::Tensor out = at::empty(dst.sizes(), dst.options());
		if (out.numel()) {
			int dev = src.device().index();
			run_program(i64_program(NK_I64_FROM_I32, ISA_DT_uint32, (uint64_t)out.numel(), dev), dev,
				    "aten::copy_", { { "a", &i32 } }, { { "out", &out } });
		}
		return native_copy(dst, out);
	}
	if (us.dtype == ISA_DT_INVALID || ud.dtype == ISA_DT_INVALID || us.per != 1 || ud.per != 1 ||
	    isa_dtype_is_float(us.dtype) || !src.is_privateuseone())
		return false;
	at::Tensor x = materialize(src, dst.sizes(), st);
	at::Tensor out = dst.is_contiguous() ? dst : at::empty(dst.sizes(), dst.options());
	if (out.numel()) {
		int dev = src.device().index();
		uint64_t n = (uint64_t)out.numel();
		Program m = cached_program("cast", nk_cast{ us.dtype, ud.dtype, n }, dev, nk_cast_program);
		run_program(m, dev, "aten::copy_", { { "a", &x } }, { { "out", &out } });
	}
	return out.is_same(dst) || native_copy(dst, out);
}

// an fp32 tensor of integer values (|v| < 2^31) as int64: VectorE converts
// to int32, then the pairs are formed (high word = sign)
at::Tensor integral_float_to_int64(const at::Tensor &f)
{
	at::Tensor x = materialize(f, f.sizes(), at::kFloat);
	at::Tensor i32 = at::empty(f.sizes(), f.options().dtype(at::kInt));
	at::Tensor out = at::empty(f.sizes(), f.options().dtype(at::kLong));
	if (!out.numel())
		return out;
	int dev = f.device().index();
	uint64_t n = (uint64_t)out.numel();
	Program m = cached_program("cast", nk_cast{ ISA_DT_fp32, ISA_DT_int32, n }, dev, nk_cast_program);
	run_program(m, dev, "aten::copy_", { { "a", &x } }, { { "out", &i32 } });
	run_program(i64_program(NK_I64_FROM_I32, ISA_DT_uint32, n, dev), dev, "aten::copy_", { { "a", &i32 } },
		    { { "out", &out } });
	return out;
}

bool native_i64_compare(const char *name, int alu, const at::Tensor &a0, const at::Tensor &b, at::Tensor &out)
{
	if (!a0.is_privateuseone() || at::result_type(a0, b) != at::kLong)
		return false;
	// a narrower integer operand (int64 ids < an int32 length) compares
	// in the promoted type, widened exactly on the device
	at::Tensor a = a0.scalar_type() == at::kLong ? a0 : a0.to(at::kLong);
	at::Tensor y = i64_operand(b, a);
	if (y.defined() && y.scalar_type() != at::kLong && y.is_privateuseone())
		y = y.to(at::kLong);
	if (!y.defined() || y.scalar_type() != at::kLong)
		return false;
	// gt / ge are lt / le with the operands swapped
	bool swap = alu == ISA_ALU_is_gt || alu == ISA_ALU_is_ge;
	int op = alu == ISA_ALU_is_equal ? NK_I64_EQ : alu == ISA_ALU_not_equal ? NK_I64_NE
	       : alu == ISA_ALU_is_lt || alu == ISA_ALU_is_gt ? NK_I64_LT : NK_I64_LE;
	std::vector<int64_t> shape = at::infer_size(a.sizes(), y.sizes());
	out = at::empty(shape, a.options().dtype(at::kBool));
	if (out.numel() == 0)
		return true;
	at::Tensor x = materialize(a, shape, at::kLong), z = materialize(y, shape, at::kLong);
	int dev = a.device().index();
	Program m = i64_program(op, ISA_DT_bool, (uint64_t)out.numel(), dev);
	run_program(m, dev, name, { { "a", swap ? &z : &x }, { "b", swap ? &x : &z } }, { { "out", &out } });
	return true;
}

at::Tensor i64_mul_scalar(const at::Tensor &a, int32_t c)
{
	at::Tensor x = materialize(a, a.sizes(), at::kLong);
	at::Tensor out = at::empty(a.sizes(), a.options());
	if (out.numel()) {
		int dev = a.device().index();
		run_program(i64_program(NK_I64_MULS, ISA_DT_uint32, (uint64_t)out.numel(), dev, c), dev, "aten::mul",
			    { { "a", &x } }, { { "out", &out } });
	}
	return out;
}

// a * b with int64 result (either side int64 or bool/small int, promoted)
bool native_i64_mul(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	if (!a.is_privateuseone() || at::result_type(a, b) != at::kLong)
		return false;
	if (b.dim() == 0 && b.is_cpu() && at::isIntegralType(b.scalar_type(), true)) {
		int64_t c = b.item<int64_t>();
		if (c < INT32_MIN || c > INT32_MAX || a.scalar_type() != at::kLong)
			return false;
		out = i64_mul_scalar(a, (int32_t)c);
		return true;
	}
	if (!b.is_privateuseone() || a.device() != b.device())
		return false;
	std::vector<int64_t> shape = at::infer_size(a.sizes(), b.sizes());
	out = at::empty(shape, a.options().dtype(at::kLong));
	if (out.numel() == 0)
		return true;
	at::Tensor x = at::empty(shape, out.options()), y = at::empty(shape, out.options());
	if (!native_copy(x, a) || !native_copy(y, b))
		return false;
	int dev = a.device().index();
	run_program(i64_program(NK_I64_MUL, ISA_DT_uint32, (uint64_t)out.numel(), dev), dev, "aten::mul",
		    { { "a", &x }, { "b", &y } }, { { "out", &out } });
	return true;
}

}  // namespace neuron
