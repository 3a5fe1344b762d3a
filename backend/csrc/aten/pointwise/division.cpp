// aten/pointwise/division.cpp -- division in every rounding mode: div (true
// division on VectorE's float ALU; "floor" and "trunc" composed),
// floor_divide, remainder and fmod (floats on the float ALU, integers of
// <= 32 bits on the integer ALU, int64 by a constant in exact 16-bit limbs:
// a MoE router's token index from a sorted (token, expert) slot), and
// floor.  The values are CPU PyTorch's, its ZeroDivisionError included.
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/pointwise/lowering.h"
#include "aten/pointwise/math.h"
#include "ops.def"

#include <ATen/ops/div_ops.h>
#include <ATen/ops/floor_divide_ops.h>
#include <ATen/ops/floor_ops.h>
#include <ATen/ops/remainder_ops.h>
#include <ATen/ops/fmod_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <cmath>

namespace neuron {

namespace {

bool neuron_operands(const at::Tensor &a, const at::Tensor &b)
{
	return a.is_privateuseone() && (b.is_privateuseone() ? b.device() == a.device() : b.dim() == 0 && b.is_cpu());
}

// CPU PyTorch raises for an integer division by zero; a device divisor is
// read back to check (one small program and a host read)
void check_int_divisor(const at::Tensor &b)
{
	TORCH_CHECK(!b.eq(0).any().item<bool>(), "ZeroDivisionError");
}

// a 0-dim CPU integer divisor in [1, 2^15]: its value; 0 otherwise
int32_t small_positive_constant(const at::Tensor &b)
{
	if (b.dim() != 0 || !b.is_cpu() || at::isFloatingType(b.scalar_type()) || b.is_complex() ||
	    b.scalar_type() == at::kBool)
		return 0;
	int64_t v = b.item<int64_t>();
	return v >= 1 && v <= (1 << 15) ? (int32_t)v : 0;
}

// int64 a // c and a % c for a constant 1 <= c <= 2^15, exactly, on int32
// words: a as four 16-bit limbs (the top one signed), long division from
// the top with floor semantics at each step, so every partial remainder is
// in [0, c) and r * 2^16 + limb stays below 2^31.  Returns (quotient,
// remainder) as int64 tensors.
std::pair<at::Tensor, at::Tensor> i64_divmod_const(const at::Tensor &a0, int32_t c)
{
	at::Tensor a = materialize(a0, a0.sizes(), at::kLong);
	at::Tensor words = a.view(at::kInt).view({ a.numel(), 2 });
	at::Tensor lo = words.select(1, 0), hi = words.select(1, 1);
	const int64_t B = 1 << 16;
	at::Tensor limbs[4] = { lo.remainder(B), lo.floor_divide(B).remainder(B), hi.remainder(B),
				hi.floor_divide(B) };
	at::Tensor q[4], r;
	for (int i = 3; i >= 0; i--) {
		at::Tensor cur = i == 3 ? limbs[3] : r.mul(B).add(limbs[i]);
		q[i] = cur.floor_divide(c);
		r = cur.remainder(c);
	}
	at::Tensor qlo = q[1].mul(B).add(q[0]), qhi = q[3].mul(B).add(q[2]);   // lo wraps to its bits
	at::Tensor quot = at::stack({ qlo, qhi }, 1).view(at::kLong).view(a0.sizes());
	at::Tensor zero = at::zeros_like(r);
	at::Tensor rem = at::stack({ r, zero }, 1).view(at::kLong).view(a0.sizes());
	return { quot, rem };
}

// PyTorch's div_floor for floats: mod = a mod b (floored), div = (a - mod)
// / b, rounded to the nearest integer from its floor (div is an integer up
// to rounding); b == 0 gives a / b
at::Tensor float_floor_divide(const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor mod = a.remainder(b);
	at::Tensor div = a.sub(mod).div(b);
	at::Tensor f = float_floor(div);
	f = f.add(div.sub(f).gt(0.5).to(f.scalar_type()));
	return at::where(b.eq(0), a.div(b), f);
}

// both float (and one a 0-dim CPU number or a device tensor)
bool floats(const at::Tensor &a, const at::Tensor &b)
{
	at::ScalarType rt = at::result_type(a, b);
	return at::isFloatingType(rt) && isa_dtype_of(rt) != ISA_DT_INVALID && neuron_operands(a, b);
}

// integers of at most 32 bits
bool narrow_ints(const at::Tensor &a, const at::Tensor &b)
{
	at::ScalarType rt = at::result_type(a, b);
	return at::isIntegralType(rt, false) && c10::elementSize(rt) <= 4 && neuron_operands(a, b);
}

at::Tensor floor_divide_impl(const at::Tensor &a, const at::Tensor &b)
{
	if (floats(a, b)) {
		at::ScalarType rt = at::result_type(a, b);
		at::Tensor x = a.scalar_type() == rt ? a : a.to(rt);
		at::Tensor y = b.is_cpu() ? at::scalar_tensor(b.item(), x.options()) : b.scalar_type() == rt ? b : b.to(rt);
		return float_floor_divide(x, y);
	}
	if (narrow_ints(a, b)) {
		check_int_divisor(b);
		return int_binary("aten::floor_divide", ISA_ALU_divide, a, b);
	}
	int32_t c;
	if (a.is_privateuseone() && a.scalar_type() == at::kLong && (c = small_positive_constant(b)))
		return i64_divmod_const(a, c).first;
	if (a.is_privateuseone() && a.scalar_type() == at::kLong && b.dim() == 0 && b.is_cpu() &&
	    !at::isFloatingType(b.scalar_type()))
		check_int_divisor(b);
	return {};
}

// a <alu> b for a remainder ALU (mod, fmod) of floats or narrow integers
// (an integer divisor of zero is CPU's ZeroDivisionError); undefined else
at::Tensor remainder_alu(const char *name, int alu, const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor out;
	if (floats(a, b) && (out = binary_op(name, alu, a, b)).defined())
		return out;
	if (narrow_ints(a, b)) {
		check_int_divisor(b);
		return int_binary(name, alu, a, b);
	}
	return {};
}

at::Tensor remainder_impl(const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor r = remainder_alu("aten::remainder", ISA_ALU_mod, a, b);
	if (r.defined())
		return r;
	int32_t c;
	if (a.is_privateuseone() && a.scalar_type() == at::kLong && (c = small_positive_constant(b)))
		return i64_divmod_const(a, c).second;
	return {};
}

at::Tensor floor_divide(const at::Tensor &a, const at::Tensor &b)
{
	return floor_divide_impl(a, b);   /* undefined: declined */
}

at::Tensor &floor_divide_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? floor_divide_impl(a, b) : at::Tensor());
}

at::Tensor &floor_divide_inplace(at::Tensor &self, const at::Tensor &b)
{
	return inplace_or_declined(self, floor_divide_impl(self, b));
}

// C's fmod (the remainder with the dividend's sign, exact): VectorE's fmod ALU
at::Tensor &fmod_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? remainder_alu("aten::fmod", ISA_ALU_fmod, a, b)
							       : at::Tensor());
}

at::Tensor remainder(const at::Tensor &a, const at::Tensor &b)
{
	return remainder_impl(a, b);   /* undefined: declined */
}

at::Tensor &remainder_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? remainder_impl(a, b) : at::Tensor());
}

at::Tensor &remainder_inplace(at::Tensor &self, const at::Tensor &b)
{
	return inplace_or_declined(self, remainder_impl(self, b));
}

// a / b with rounding_mode: none (true division), "floor" (floor_divide),
// "trunc" (toward zero: the floored quotient plus one where the remainder is
// not zero and the signs differ; floats: the floor of |a / b| with a / b's sign)
at::Tensor div_mode_impl(const at::Tensor &a, const at::Tensor &b, std::optional<c10::string_view> mode)
{
	if (!mode)
		return neuron_operands(a, b) ? a.div(b) : at::Tensor();
	if (*mode == "floor")
		return floor_divide_impl(a, b);
	if (*mode != "trunc")
		return {};
	if (floats(a, b)) {
		at::Tensor q = a.div(b);
		return at::where(q.lt(0), float_floor(q.neg()).neg(), float_floor(q));
	}
	at::Tensor q = floor_divide_impl(a, b);
	if (!q.defined())
		return {};
	at::Tensor r = remainder_impl(a, b);
	if (!r.defined())
		return {};
	at::Tensor bb = b.is_cpu() ? at::scalar_tensor(b.item(), q.options()) : b;
	at::Tensor fix = r.ne(0).bitwise_and(a.lt(0).bitwise_xor(bb.lt(0)));
	return q.add(fix.to(q.scalar_type()));
}

at::Tensor div_mode(const at::Tensor &a, const at::Tensor &b, std::optional<c10::string_view> mode)
{
	return div_mode_impl(a, b, mode);   /* undefined: declined */
}

at::Tensor &div_out_mode(const at::Tensor &a, const at::Tensor &b, std::optional<c10::string_view> mode,
			 at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? div_mode_impl(a, b, mode) : at::Tensor());
}


// ---- torch._scaled_grouped_mm: fp8 expert matmuls -------------------------

// a / b: true division on VectorE's float ALU (integer operands promote to
// the default float type first, as CPU PyTorch)
at::Tensor div(const at::Tensor &a, const at::Tensor &b)
{
	return binary_op("aten::div", ISA_ALU_divide, a, b);
}

at::Tensor &div_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return written_or_declined(out, binary_into("aten::div", ISA_ALU_divide, a, b, out));
}

at::Tensor &div_inplace(at::Tensor &self, const at::Tensor &b)
{
	at::Tensor r = binary_into("aten::div", ISA_ALU_divide, self, b, self);
	if (r.defined() && r.sizes().equals(self.sizes()))
		return write_result(self, r);
	return declined;
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_DIVISION)

}  // namespace neuron
