// aten/compare/compare.cpp -- comparisons (bool results), isnan, equal,
// isin, the bitwise ops, where and masked_fill on VectorE; operands of other
// shapes, strides or dtypes are first made the result's shape and dtype by
// DMA programs, and int64 operands compare exactly as (low, high) int32
// pairs (aten/pointwise/int64.cpp).  Calls a kernel does not cover decline
// to the counted CPU fallback (runtime/registration.h).
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/pointwise/lowering.h"
#include "ops.def"

#include <ATen/ExpandUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ScalarOps.h>
#include <ATen/ops/bitwise_left_shift_ops.h>
#include <ATen/ops/bitwise_right_shift_ops.h>
#include <ATen/ops/equal_ops.h>
#include <ATen/ops/isin_ops.h>
#include <ATen/ops/logical_not_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/bitwise_and_ops.h>
#include <ATen/ops/bitwise_not_ops.h>
#include <ATen/ops/bitwise_or_ops.h>
#include <ATen/ops/bitwise_xor_ops.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/isnan_ops.h>
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

at::Tensor compare(const char *name, int alu, const at::Tensor &a, const at::Tensor *b, float s)
{
	at::ScalarType dt = b ? at::result_type(a, *b) : a.scalar_type();
	std::vector<int64_t> shape = b ? at::infer_size(a.sizes(), b->sizes()) : a.sizes().vec();
	at::Tensor out = at::empty(shape, a.options().dtype(at::kBool));
	if (out.numel() == 0)
		return out;
	at::Tensor x = materialize(a, shape, dt), y = b ? materialize(*b, shape, dt) : at::Tensor();
	int idt = isa_dtype_of(dt) != ISA_DT_INVALID ? isa_dtype_of(dt) : units_of(dt, false).dtype;
	uint64_t n = (uint64_t)out.numel();
	int dev = a.device().index();
	Program m = cached_program("compare", nk_compare{ alu, idt, b == nullptr, b ? 0.0f : s, n }, dev,
				   nk_compare_program);
	if (b)
		run_program(m, dev, name, { { "a", &x }, { "b", &y } }, { { "out", &out } });
	else
		run_program(m, dev, name, { { "a", &x } }, { { "out", &out } });
	return out;
}

// PyTorch compares a float tensor with a Python scalar at the tensor's dtype:
// the scalar rounded to it (0.1 on a bf16 tensor is bf16's 0.10009765625).
// Values of that dtype compare the same at fp32, where the kernel works.
// (an unchecked cast as in PyTorch's kernels: out of range becomes inf)
float scalar_at(const at::Tensor &a, const at::Scalar &s)
{
	float f = static_cast<float>(s.toDouble());
	switch (a.scalar_type()) {
	case at::kBFloat16: return static_cast<float>(c10::BFloat16(f));
	case at::kHalf: return static_cast<float>(c10::Half(f));
	default: return f;
	}
}

// int32-and-narrower / bool operands (a Python int or 0-dim CPU integer
// copied over in the promoted type): compared exactly on the integer ALU
bool small_int(at::ScalarType t)
{
	Units u = units_of(t, false);
	return !at::isFloatingType(t) && !at::isComplexType(t) && u.per == 1 && u.dtype != ISA_DT_INVALID;
}

at::Tensor int_compare(const char *name, int alu, const at::Tensor &a, const at::Tensor &b0)
{
	bool cpu_scalar = b0.is_cpu() && b0.dim() == 0;
	if (!a.is_privateuseone() || !small_int(a.scalar_type()) || at::isFloatingType(b0.scalar_type()) ||
	    b0.is_complex() || (!cpu_scalar && !small_int(b0.scalar_type())))
		return {};
	at::ScalarType rt = at::result_type(a, b0);
	if (!small_int(rt))
		return {};
	at::Tensor b = b0;
	if (cpu_scalar)
		b = b.to(rt).to(a.device());   // in the promoted type (wrapping, as CPU PyTorch)
	if (!b.is_privateuseone() || b.device() != a.device())
		return {};
	return compare(name, alu, a, &b, 0);
}

// a bool tensor ==/!= a number (mask == 0): the mask itself, its negation,
// or a constant; other comparisons of bools decline
at::Tensor bool_eq_scalar(int alu, const at::Tensor &a, const at::Scalar &s)
{
	if (!a.is_privateuseone() || a.scalar_type() != at::kBool || s.isComplex() ||
	    (alu != ISA_ALU_is_equal && alu != ISA_ALU_not_equal))
		return {};
	double v = s.toDouble();
	bool eq = alu == ISA_ALU_is_equal;
	if (v == 1.0)
		return eq ? a.clone() : a.bitwise_not();
	if (v == 0.0)
		return eq ? a.bitwise_not() : a.clone();
	at::Tensor r = at::empty(a.sizes(), a.options());
	TORCH_CHECK(native_fill(r, !eq), "neuron: comparison fill");
	return r;
}

// logical_not: bool -> its negation, other dtypes -> x == 0
at::Tensor logical_not_impl(const at::Tensor &a)
{
	if (!a.is_privateuseone())
		return {};
	if (a.scalar_type() == at::kBool)
		return a.bitwise_not();
	return a.eq(0);
}

at::Tensor logical_not(const at::Tensor &a)
{
	return logical_not_impl(a);   /* undefined: declined */
}

at::Tensor &logical_not_out(const at::Tensor &a, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? logical_not_impl(a) : at::Tensor());
}

#define CMP(fname, alu)                                                                          \
	at::Tensor fname##_tensor(const at::Tensor &a, const at::Tensor &b)                          \
	{                                                                                        \
		if (is_float_neuron(a) && is_float_neuron(b) && a.device() == b.device())                    \
			return compare("aten::" #fname, alu, a, &b, 0);                             \
		at::Tensor r = int_compare("aten::" #fname, alu, a, b);                          \
		if (r.defined())                                                                 \
			return r;                                                                \
		if (is_float_neuron(a) && b.dim() == 0 && b.is_cpu() && !b.is_complex() &&              \
		    at::result_type(a, b) == a.scalar_type())                                    \
			return compare("aten::" #fname, alu, a, nullptr, scalar_at(a, b.item()));   \
		at::Tensor out;                                                                  \
		if (native_i64_compare("aten::" #fname, alu, a, b, out))                         \
			return out;                                                              \
		return declined; \
	}                                                                                        \
	at::Tensor fname##_scalar(const at::Tensor &a, const at::Scalar &s)                          \
	{                                                                                        \
		if (is_float_neuron(a) && !s.isComplex())                                              \
			return compare("aten::" #fname, alu, a, nullptr, scalar_at(a, s));         \
		at::Tensor out;                                                                  \
		if (!s.isFloatingPoint() && !s.isComplex() &&                                    \
		    (out = int_compare("aten::" #fname, alu, a, at::scalar_to_tensor(s))).defined()) \
			return out;                                                              \
		if (!s.isFloatingPoint() && !s.isComplex() && !s.isBoolean() &&                   \
		    native_i64_compare("aten::" #fname, alu, a, at::scalar_to_tensor(s), out))     \
			return out;                                                              \
		if ((out = bool_eq_scalar(alu, a, s)).defined())                                 \
			return out;                                                              \
		return declined; \
	}

NEURON_COMPARISONS(CMP)   /* the list: ops.def */

// out = cond ? a : b (VectorE select); undefined when not covered
at::Tensor select(const char *name, const at::Tensor &cond, const at::Tensor &a, const at::Tensor &b)
{
	// float operands (promoted), or integer/bool ones of one dtype (an int64
	// element is two words, each picked by the same condition)
	bool fl = is_float_neuron(a) && is_float_neuron(b);
	bool ints = !fl && a.scalar_type() == b.scalar_type() && !at::isFloatingType(a.scalar_type()) &&
		    units_of(a.scalar_type(), false).dtype != ISA_DT_INVALID;
	if (!cond.is_privateuseone() || cond.scalar_type() != at::kBool || !(fl || ints) || !a.is_privateuseone() ||
	    !b.is_privateuseone() || a.device() != cond.device() || b.device() != cond.device())
		return {};
	at::ScalarType dt = fl ? at::result_type(a, b) : a.scalar_type();
	std::vector<int64_t> shape = at::infer_size(at::infer_size(cond.sizes(), a.sizes()), b.sizes());
	at::Tensor out = at::empty(shape, a.options().dtype(dt));
	if (out.numel() == 0)
		return out;
	Units u = fl ? Units{ isa_dtype_of(dt), 1 } : units_of(dt, false);
	// a single-element operand (where(m, 0.0, x), masked_fill's value) is
	// read once by the kernel, not expanded to the result's size first
	bool a_one = u.per == 1 && a.numel() == 1, b_one = u.per == 1 && b.numel() == 1;
	at::Tensor c = materialize(cond, shape, at::kBool);
	at::Tensor x = a_one ? materialize(a.reshape({ 1 }), { 1 }, dt) : materialize(a, shape, dt);
	at::Tensor y = b_one ? materialize(b.reshape({ 1 }), { 1 }, dt) : materialize(b, shape, dt);
	if (u.per == 2) {
		std::vector<int64_t> s2 = shape;
		s2.push_back(2);
		c = materialize(c.unsqueeze(-1), s2, at::kBool);
	}
	int idt = u.dtype;
	uint64_t n = (uint64_t)out.numel() * u.per;
	int dev = cond.device().index();
	Program m = cached_program("select", nk_select{ idt, n, a_one, b_one }, dev, nk_select_program);
	run_program(m, dev, name, { { "a", &c }, { "b", &x }, { "c", &y } }, { { "out", &out } });
	return out;
}

at::Tensor where(const at::Tensor &cond, const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor out = select("aten::where", cond, a, b);
	if (out.defined())
		return out;
	return declined;
}

// self.masked_fill(mask, v) = where(mask, v, self), in self's dtype and shape
at::Tensor masked_fill(const at::Tensor &self, const at::Tensor &mask, const at::Scalar &v)
{
	bool ints = self.is_privateuseone() && !at::isFloatingType(self.scalar_type()) &&
		    units_of(self.scalar_type(), false).dtype != ISA_DT_INVALID && !v.isFloatingPoint();
	if ((is_float_neuron(self) || ints) && mask.is_privateuseone() && mask.scalar_type() == at::kBool && !v.isComplex() &&
	    at::infer_size(self.sizes(), mask.sizes()) == self.sizes().vec()) {
		at::Tensor fill = at::empty({}, self.options());
		if (native_fill(fill, v)) {
			at::Tensor out = select("aten::masked_fill", mask, fill, self);
			if (out.defined())
				return out;
		}
	}
	return declined;
}

at::Tensor &masked_fill_(at::Tensor &self, const at::Tensor &mask, const at::Scalar &v)
{
	bool ints = self.is_privateuseone() && !at::isFloatingType(self.scalar_type()) &&
		    units_of(self.scalar_type(), false).dtype != ISA_DT_INVALID && !v.isFloatingPoint();
	if ((is_float_neuron(self) || ints) && mask.is_privateuseone() && mask.scalar_type() == at::kBool &&
	    at::infer_size(self.sizes(), mask.sizes()) == self.sizes().vec()) {
		at::Tensor out = neuron::masked_fill(self, mask, v);
		TORCH_CHECK(native_copy(self, out), "neuron: masked_fill_ copy");
		return self;
	}
	return declined;
}

// masked_fill with a 0-dim tensor value: a CPU one is a number; a device
// one fills through the select without visiting the host
at::Tensor masked_fill_t(const at::Tensor &self, const at::Tensor &mask, const at::Tensor &v)
{
	if (v.dim() != 0 || v.is_complex())
		return declined;
	if (v.is_cpu())
		return neuron::masked_fill(self, mask, v.item());
	if (!v.is_privateuseone() || v.device() != self.device() || !mask.is_privateuseone() ||
	    mask.scalar_type() != at::kBool || at::infer_size(self.sizes(), mask.sizes()) != self.sizes().vec() ||
	    (at::isFloatingType(v.scalar_type()) && !at::isFloatingType(self.scalar_type())))
		return declined;
	at::Tensor fill = v.scalar_type() == self.scalar_type() ? v : v.to(self.scalar_type());
	at::Tensor out = select("aten::masked_fill", mask, fill, self);
	return out.defined() ? out : declined_tensor();
}

at::Tensor &masked_fill_t_(at::Tensor &self, const at::Tensor &mask, const at::Tensor &v)
{
	if (v.dim() != 0 || (!v.is_cpu() && v.device() != self.device()))
		return declined;
	at::Tensor r = masked_fill_t(self, mask, v);
	return inplace_or_declined(self, r);
}

// Bitwise ops on integer and bool tensors of one dtype: elementwise on
// VectorE's integer ALU; an int64 element is two 32-bit words, each
// combined on its own (exact).  Bool uses the logical ops.
int bitwise_units(at::ScalarType t, int64_t *per)
{
	Units u = units_of(t, false);
	*per = u.per;
	if (t == at::kDouble || t == at::kComplexFloat || isa_dtype_of(t) != ISA_DT_INVALID)
		return ISA_DT_INVALID;
	return u.dtype;
}

// a wrapped Python int as b is copied over by int_binary
at::Tensor bitwise(const char *name, int alu, const at::Tensor &a0, const at::Tensor &b0)
{
	if (!a0.is_privateuseone() || b0.is_complex())
		return {};
	return int_binary(name, alu, a0, b0);
}

}  // namespace

// a <alu> b for integer / bool operands in their promoted type (VectorE's
// exact integer ALU: adds and products wrap as PyTorch's do); a 0-dim CPU
// operand (a wrapped Python int) is copied over first.  Undefined when not
// covered: floats, or an 8-byte result for arithmetic (int64 has its own
// kernels).
at::Tensor int_binary(const char *name, int alu, const at::Tensor &a0, const at::Tensor &b0in)
{
	at::Tensor b0 = b0in;
	if (a0.is_privateuseone() && b0.dim() == 0 && b0.is_cpu() && !at::isFloatingType(b0.scalar_type()) &&
	    !b0.is_complex())
		b0 = wrapped_on_device(b0, a0, at::result_type(a0, b0));   // the wrapped int in the result type
	if (!a0.is_privateuseone() || !b0.is_privateuseone() || a0.device() != b0.device())
		return {};
	// mixed integer/bool operands: both in the promoted type first (DMA/VectorE casts)
	at::ScalarType rt = at::result_type(a0, b0in);
	int64_t per;
	int dt = bitwise_units(rt, &per);
	bool bitwise_op = alu == ISA_ALU_bitwise_and || alu == ISA_ALU_bitwise_or || alu == ISA_ALU_bitwise_xor;
	if (dt == ISA_DT_INVALID || at::isFloatingType(a0.scalar_type()) || at::isFloatingType(b0.scalar_type()) ||
	    (!bitwise_op && (per != 1 || dt == ISA_DT_bool)))
		return {};
	at::Tensor a = a0, b = b0;
	if (a.scalar_type() != rt) {
		a = at::empty(a0.sizes(), a0.options().dtype(rt));
		if (!native_copy(a, a0))
			return {};
	}
	if (b.scalar_type() != rt) {
		b = at::empty(b0.sizes(), b0.options().dtype(rt));
		if (!native_copy(b, b0))
			return {};
	}
	if (dt == ISA_DT_bool && bitwise_op)
		alu = alu == ISA_ALU_bitwise_and ? ISA_ALU_logical_and
		    : alu == ISA_ALU_bitwise_or ? ISA_ALU_logical_or : ISA_ALU_logical_xor;
	std::vector<int64_t> shape = at::infer_size(a.sizes(), b.sizes());
	at::Tensor out = at::empty(shape, a.options());
	if (out.numel() == 0)
		return out;
	at::Tensor x = materialize(a, shape, a.scalar_type()), y = materialize(b, shape, a.scalar_type());
	uint64_t n = (uint64_t)out.numel() * per;
	int dev = a.device().index();
	Program m = cached_program("binary", nk_binary{ alu, dt, n }, dev, nk_binary_program);
	run_program(m, dev, name, { { "a", &x }, { "b", &y } }, { { "out", &out } });
	return out;
}

namespace {

// The bitwise and shift ops, each in its functional, out= and in-place
// forms (and with a Python int for the shifts' Scalar overloads): VectorE's
// integer ALU (int_binary) in the promoted type; shift counts outside
// [0, width) give 0 (or -1 for >> of a negative), as CPU's
at::Tensor &int_binary_out(const char *name, int alu, const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	if (!out.is_privateuseone())
		return declined;
	at::Tensor r = bitwise(name, alu, a, b);
	/* in place, a result of another shape is CPU's error, never a resize */
	if (!r.defined() || out.scalar_type() != r.scalar_type() || (out.is_same(a) && !r.sizes().equals(a.sizes())))
		return declined;
	return composite_out(out, { &a, &b }, r);
}

at::Tensor int_binary_functional(const char *name, int alu, const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor r = bitwise(name, alu, a, b);
	if (r.defined())
		return r;
	return declined;
}

#define BITWISE(fname, alu)                                                                      \
	at::Tensor fname(const at::Tensor &a, const at::Tensor &b)                                   \
	{                                                                                            \
		return int_binary_functional("aten::" #fname, alu, a, b);                            \
	}                                                                                            \
	at::Tensor &fname##_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)           \
	{                                                                                            \
		return int_binary_out("aten::" #fname, alu, a, b, out);                              \
	}                                                                                            \
	at::Tensor &fname##_inplace(at::Tensor &self, const at::Tensor &b)                           \
	{                                                                                            \
		return int_binary_out("aten::" #fname "_", alu, self, b, self);                      \
	}

/* the shifts' Python-int forms (__lshift__.Scalar ...) */
#define SHIFT_SCALAR(fname, alu)                                                                 \
	at::Tensor fname##_scalar(const at::Tensor &a, const at::Scalar &b)                          \
	{                                                                                            \
		return int_binary_functional("aten::" #fname, alu, a, at::native::wrapped_scalar_tensor(b)); \
	}                                                                                            \
	at::Tensor &fname##_scalar_inplace(at::Tensor &self, const at::Scalar &b)                    \
	{                                                                                            \
		return int_binary_out("aten::" #fname "_", alu, self, at::native::wrapped_scalar_tensor(b), self); \
	}

BITWISE(bitwise_and, ISA_ALU_bitwise_and)
BITWISE(bitwise_or, ISA_ALU_bitwise_or)
BITWISE(bitwise_xor, ISA_ALU_bitwise_xor)
BITWISE(bitwise_left_shift, ISA_ALU_shift_left)
BITWISE(bitwise_right_shift, ISA_ALU_shift_right)
SHIFT_SCALAR(bitwise_left_shift, ISA_ALU_shift_left)
SHIFT_SCALAR(bitwise_right_shift, ISA_ALU_shift_right)

// ~x: bool -> x == 0; integers -> x ^ -1 (each word of an int64)
at::Tensor bitwise_not_impl(const at::Tensor &a)
{
	int64_t per;
	int dt = bitwise_units(a.scalar_type(), &per);
	if (dt == ISA_DT_INVALID || !a.is_privateuseone())
		return {};
	at::Tensor out = at::empty(a.sizes(), a.options());
	if (out.numel() == 0)
		return out;
	at::Tensor x = materialize(a, a.sizes(), a.scalar_type());
	uint64_t n = (uint64_t)out.numel() * per;
	int dev = a.device().index();
	// bool: x == 0; integers: x ^ -1
	Program m = dt == ISA_DT_bool
			    ? cached_program("compare", nk_compare{ ISA_ALU_is_equal, dt, true, 0.0f, n }, dev,
					     nk_compare_program)
			    : cached_program("scalar", nk_scalar{ ISA_ALU_bitwise_xor, -1.0f, ISA_ALU_bypass, 0.0f, dt, n },
					     dev, nk_scalar_program);
	run_program(m, dev, "aten::bitwise_not", { { "a", &x } }, { { "out", &out } });
	return out;
}

at::Tensor bitwise_not(const at::Tensor &a)
{
	at::Tensor r = bitwise_not_impl(a);
	if (r.defined())
		return r;
	return declined;
}

at::Tensor &bitwise_not_out(const at::Tensor &a, at::Tensor &out)
{
	at::Tensor r = bitwise_not_impl(a);
	if (r.defined() && out.scalar_type() == r.scalar_type() && out.is_privateuseone()) {
		if (!out.sizes().equals(r.sizes()))
			out.resize_(r.sizes());
		TORCH_CHECK(native_copy(out, r), "neuron: bitwise_not out");
		return out;
	}
	return declined;
}

// isnan(x) = x != x on VectorE (integers: all false)
at::Tensor isnan(const at::Tensor &a)
{
	if (is_float_neuron(a))
		return a.numel() ? compare("aten::isnan", ISA_ALU_not_equal, a, &a, 0)
				 : at::empty(a.sizes(), a.options().dtype(at::kBool));
	return declined;
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

// elements[i] in test_elements: one broadcast comparison, then any()
at::Tensor isin_impl(const at::Tensor &e, const at::Tensor &t, bool invert)
{
	if (!dma_movable(e) || !dma_movable(t) || e.device() != t.device() || t.numel() == 0 || e.numel() == 0 ||
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
	return declined;
}

at::Tensor &isin_out(const at::Tensor &e, const at::Tensor &t, bool assume_unique, bool invert, at::Tensor &out)
{
	at::Tensor r = isin_impl(e, t, invert);
	return written_or_declined(out, r.defined() && out.is_privateuseone() && out.scalar_type() == at::kBool
						? r
						: at::Tensor());
}

}  // namespace

// bool * bool is logical and
bool native_bool_mul(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	if (a.scalar_type() != at::kBool || b.scalar_type() != at::kBool || !a.is_privateuseone())
		return false;
	if (b.dim() == 0 && b.is_cpu()) {   // a wrapped Python bool: a, or all false
		out = at::empty(a.sizes(), a.options());
		return b.item<bool>() ? native_copy(out, a) : native_fill(out, false);
	}
	out = bitwise("aten::mul", ISA_ALU_bitwise_and, a, b);
	return out.defined();
}

NEURON_REGISTER_OPS(NEURON_OPS_COMPARE)

}  // namespace neuron
