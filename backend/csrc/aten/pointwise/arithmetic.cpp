// aten/pointwise/arithmetic.cpp -- the arithmetic ops in every overload and
// dtype: add, sub, rsub, mul (complex64 too), maximum / minimum, fmax /
// fmin, clamp (scalar and tensor bounds), pow, and the ScalarE activations
// that are whole ATen ops (relu, exp, ...: the NEURON_UNARY_ACTS table).
// Binary ops run on VectorE, unary ones as ScalarE activations; each
// operand pair is lowered by type (aten/pointwise/lowering.h).  Programs
// are generated per generator parameters and device and cached
// (runtime/program.cpp); a call the kernel does not cover (mixed dtypes it
// cannot cast, alpha != 1, ...) declines, and its registration runs the
// counted CPU fallback.
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/complex/complex.h"
#include "aten/pointwise/lowering.h"
#include "ops.def"

#include <ATen/native/CPUFallback.h>
#include <ATen/ops/clamp_max_ops.h>
#include <ATen/ops/clamp_min_ops.h>
#include <ATen/ops/fmax_ops.h>
#include <ATen/ops/fmin_ops.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/rsub_ops.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/clamp_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/where.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/minimum_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <torch/library.h>

#include <cstring>

namespace neuron {

at::Tensor wrapped_on_device(const at::Tensor &scalar, const at::Tensor &like, at::ScalarType t)
{
	if (capturing()) {
		at::Tensor d = at::empty({}, like.options().dtype(t));
		if (native_fill(d, scalar.to(t).item()))
			return d;
	}
	return scalar.to(t).to(like.device());
}


// dst is x or shares no memory with it (a program may read x and write dst)
bool no_partial_overlap(const at::Tensor &dst, const at::Tensor &x)
{
	at::MemOverlapStatus st = at::get_overlap_status(dst, x);
	return st == at::MemOverlapStatus::No || st == at::MemOverlapStatus::Full;
}

namespace {

// what an elementwise program computes
// (BCAST_*: b broadcast over a [n / cols, cols], b [cols] or b [n / cols, 1])
enum Kind { NONE = 0, UNARY_ACT = 1, BINARY = 2, TENSOR_SCALAR = 3, BCAST_COLS = 4, BCAST_ROWS = 5, BCAST_ONE = 6 };
struct Ew {
	Kind kind;
	int code;           // activation (UNARY_ACT) or ALU op
	float imm;          // TENSOR_SCALAR's scalar; UNARY_ACT's input scale
	uint64_t cols = 0;  // BCAST_*
	int code2 = ISA_ALU_bypass;   // TENSOR_SCALAR: then `<code2> imm2`
	float imm2 = 0.0f;
};

// the program for `op` over n elements of `dtype`, from the cache
Program program_for(const Ew &op, int dtype, uint64_t n, int dev)
{
	switch (op.kind) {
	case BINARY: return cached_program("binary", nk_binary{ op.code, dtype, n }, dev, nk_binary_program);
	case TENSOR_SCALAR:
		return cached_program("scalar", nk_scalar{ op.code, op.imm, op.code2, op.imm2, dtype, n }, dev,
				      nk_scalar_program);
	case BCAST_COLS:
	case BCAST_ROWS:
		return cached_program("broadcast", nk_broadcast{ op.code, dtype, n / op.cols, op.cols, op.kind == BCAST_ROWS,
								 false },
				      dev, nk_broadcast_program);
	case BCAST_ONE:
		return cached_program("broadcast", nk_broadcast{ op.code, dtype, n, 1, false, true }, dev,
				      nk_broadcast_program);
	default: return cached_program("unary", nk_unary{ op.code, op.imm, dtype, n }, dev, nk_unary_program);
	}
}

// two contiguous, non-empty tensors of one supported dtype on one device
bool operands_ok(const at::Tensor &a, const at::Tensor &b)
{
	return a.is_privateuseone() && b.is_privateuseone() && a.device() == b.device() &&
	       a.scalar_type() == b.scalar_type() && isa_dtype_of(a.scalar_type()) != ISA_DT_INVALID &&
	       a.is_contiguous() && b.is_contiguous() && a.numel() > 0;
}

// Where the next elementwise program may put its result: the tensor of the
// in-place / out= op being run (ResultInto), taken when it is exactly what
// the program writes -- a's shape and dtype, contiguous, and not partly
// overlapping an operand (an operand that is the same memory is read
// before each tile is written).  The op is then one program, not a program
// and a copy, as a device kernel writing its destination.
thread_local const at::Tensor *t_result_into = nullptr;

struct ResultInto {
	explicit ResultInto(const at::Tensor &dst) : prev(t_result_into) { t_result_into = &dst; }
	~ResultInto() { t_result_into = prev; }
	const at::Tensor *prev;
};

// the output tensor of a program over a (and b): ResultInto's when it fits
at::Tensor result_for(const at::Tensor &a, const at::Tensor *b)
{
	const at::Tensor *d = t_result_into;
	t_result_into = nullptr;   // one program per op takes it
	if (d && d->is_privateuseone() && d->device() == a.device() && d->scalar_type() == a.scalar_type() &&
	    d->sizes().equals(a.sizes()) && d->is_contiguous() && no_partial_overlap(*d, a) &&
	    (!b || no_partial_overlap(*d, *b)))
		return *d;
	return at::empty(a.sizes(), a.options());
}

// out = op(a[, b]): one run of a cached program, charged to ATen op `name`
at::Tensor run_elementwise(const char *name, const Ew &op, const at::Tensor &a, const at::Tensor *b)
{
	int dev = a.device().index();
	at::Tensor out = result_for(a, b);
	if (a.numel() == 0)
		return out;
	Program m = program_for(op, isa_dtype_of(a.scalar_type()), (uint64_t)a.numel(), dev);
	if (b)
		run_program(m, dev, name, { { "a", &a }, { "b", b } }, { { "out", &out } });
	else
		run_program(m, dev, name, { { "a", &a } }, { { "out", &out } });
	return out;
}

// a float neuron tensor the unary kernels take, made contiguous first if
// needed (a strided view: one DMA program); undefined when not covered
at::Tensor unary_operand(const at::Tensor &a)
{
	if (!a.is_privateuseone() || isa_dtype_of(a.scalar_type()) == ISA_DT_INVALID)
		return {};
	if (a.numel() == 0)
		return a;
	return materialize(a, a.sizes(), a.scalar_type());
}

// a 0-dim CPU tensor (what `x * 2` passes as a wrapped number) whose type
// does not change the result's dtype: its value becomes an immediate
bool is_scalar_operand(const at::Tensor &a, const at::Tensor &b)
{
	return b.dim() == 0 && b.device().is_cpu() && !b.is_complex() &&
	       at::result_type(a, b) == a.scalar_type();
}

// The broadcast forms with a native kernel: b is a's last dim or last few
// (a bias, with any leading 1s) or a's shape with the last dim 1 (a per-row
// scale).
Kind shape_kind(const at::Tensor &a, const at::Tensor &b)
{
	if (a.dim() < 1 || b.dim() > a.dim() || a.size(-1) > INT32_MAX || a.numel() == 0)
		return NONE;
	if (b.numel() == a.size(-1) && b.dim() >= 1 && b.size(-1) == a.size(-1))
		return BCAST_COLS;
	// b as a's trailing dims (rotary's [1, 1, S, D] cos over [B, H, S, D]):
	// one [cols] row over the flattened trailing dims
	int64_t lead = 0;
	while (lead < b.dim() && b.size(lead) == 1)
		lead++;
	if (lead < b.dim() && b.dim() - lead <= a.dim() && b.numel() > 1 &&
	    b.sizes().slice(lead).equals(a.sizes().slice(a.dim() - (b.dim() - lead))))
		return BCAST_COLS;
	// a single float element (clip_grad_norm_'s device coefficient): every
	// partition's scalar operand
	if (b.numel() == 1 && a.numel() > 1 && isa_dtype_is_float(isa_dtype_of(a.scalar_type())))
		return BCAST_ONE;
	if (b.dim() == a.dim() && b.size(-1) == 1 && a.size(-1) > 1 &&
	    b.sizes().slice(0, b.dim() - 1).equals(a.sizes().slice(0, a.dim() - 1)))
		return BCAST_ROWS;
	return NONE;
}

Kind broadcast_kind(const at::Tensor &a, const at::Tensor &b)
{
	return operands_ok(a, b) ? shape_kind(a, b) : NONE;
}

// Any broadcast, strides, 0-dim device operands and float type promotion:
// each operand is first made the result's shape and dtype (a DMA program:
// exact, since the casts only widen or equal CPU's rounding), then the
// same-shape kernel runs.
// an operand the general path can bring to a float result type: a float,
// or an integer / bool (cast on the device; int64 exactly rounded)

bool promotable(const at::Tensor &t)
{
	return isa_dtype_of(t.scalar_type()) != ISA_DT_INVALID ||
	       (!at::isFloatingType(t.scalar_type()) && !t.is_complex() &&
		units_of(t.scalar_type(), false).dtype != ISA_DT_INVALID);
}

bool native_binary_general(const char *name, int alu, const at::Tensor &a, const at::Tensor &b0,
			   at::Tensor &out)
{
	at::ScalarType dt = at::result_type(a, b0);
	if (alu == ISA_ALU_divide && !at::isFloatingType(dt))
		dt = c10::typeMetaToScalarType(at::get_default_dtype());   // true division of integers
	at::Tensor b = b0;
	if (a.is_privateuseone() && b.dim() == 0 && b.is_cpu() && !b.is_complex() && isa_dtype_of(dt) != ISA_DT_INVALID)
		b = wrapped_on_device(b, a, dt);   // a wrapped Python number (int tensor * 2.5)
	if (!a.is_privateuseone() || !b.is_privateuseone() || a.device() != b.device())
		return false;
	if (isa_dtype_of(dt) == ISA_DT_INVALID || !promotable(a) || !promotable(b))
		return false;
	std::vector<int64_t> shape = at::infer_size(a.sizes(), b.sizes());
	if (c10::multiply_integers(shape) == 0) {
		out = at::empty(shape, a.options().dtype(dt));
		return true;
	}
	// an operand the copy kernels cannot cast (an int64 beyond the exact
	// float conversion) sends the call to the fallback
	at::Tensor x = prepared(a, shape, dt), y = x.defined() ? prepared(b, shape, dt) : at::Tensor();
	if (!y.defined())
		return false;
	out = run_elementwise(name, { BINARY, alu, 1.0f }, x, &y);
	return true;
}

// a <alu> b = b <alu> a
bool commutes(int alu)
{
	return alu == ISA_ALU_add || alu == ISA_ALU_multiply || alu == ISA_ALU_max || alu == ISA_ALU_min;
}

// a <alu> b with a float result (fast paths for same-shape, broadcast and
// number operands, else both made the result's shape and dtype): false
// when not covered
bool float_binary(const char *name, int alu, const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	if (operands_ok(a, b) && a.sizes().equals(b.sizes())) {
		out = run_elementwise(name, { BINARY, alu, 1.0f }, a, &b);
		return true;
	}
	for (int swap = 0; swap < (commutes(alu) ? 2 : 1); swap++) {
		const at::Tensor &x0 = swap ? b : a, &y = swap ? a : b;
		// a strided view (attention's heads transposed) brought contiguous
		// first: one copy, not the broadcast operand's too
		at::Tensor xc = !x0.is_contiguous() && x0.is_privateuseone() && y.is_privateuseone() &&
						y.is_contiguous() && x0.device() == y.device() &&
						x0.scalar_type() == y.scalar_type() && shape_kind(x0, y) != NONE
					? x0.contiguous()
					: x0;
		const at::Tensor &x = xc;
		Kind k = broadcast_kind(x, y);
		if (k != NONE) {
			uint64_t cols = k == BCAST_COLS ? (uint64_t)y.numel() : (uint64_t)x.size(-1);
			out = run_elementwise(name, { k, alu, 1.0f, cols }, x, &y);
			return true;
		}
	}
	at::Tensor x;
	if (commutes(alu) && is_scalar_operand(b, a) && !is_scalar_operand(a, b))   // 0.99 * t (foreach's order)
		return float_binary(name, alu, b, a, out);
	// s - t (rsub: the wrapped number first): -t + s in one tensor_scalar,
	// the negation exact, so one rounding as CPU's
	if (alu == ISA_ALU_subtract && is_scalar_operand(b, a) && !is_scalar_operand(a, b) &&
	    (x = unary_operand(b)).defined()) {
		Ew op{ TENSOR_SCALAR, ISA_ALU_multiply, -1.0f };
		op.code2 = ISA_ALU_add;
		op.imm2 = a.to(b.scalar_type()).item<float>();
		out = run_elementwise(name, op, x, nullptr);
		return true;
	}
	if (is_scalar_operand(a, b) && (x = unary_operand(a)).defined()) {
		// As CPU PyTorch: add/sub (ufunc kernels) first round the scalar to the
		// tensor's dtype; mul/div/max/min use its value at fp32 (opmath).
		bool round = alu == ISA_ALU_add || alu == ISA_ALU_subtract;
		float v = round ? b.to(a.scalar_type()).item<float>() : (float)b.item<double>();
		out = run_elementwise(name, { TENSOR_SCALAR, alu, v }, x, nullptr);
		return true;
	}
	return native_binary_general(name, alu, a, b, out);
}

// a <alu> b of int64 operands on exact (low, high) int32 pairs
// (aten/pointwise/int64.cpp): add, subtract, multiply, and max / min as
// the exact comparison and a select; undefined for other ALU operations
at::Tensor i64_binary(const char *name, int alu, const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor out;
	switch (alu) {
	case ISA_ALU_add:
	case ISA_ALU_subtract:
		return native_i64_addsub(name, alu == ISA_ALU_subtract, a, b, out) ? out : at::Tensor();
	case ISA_ALU_multiply: return native_i64_mul(a, b, out) ? out : at::Tensor();
	case ISA_ALU_max:
	case ISA_ALU_min:
		if (a.is_privateuseone() && b.is_privateuseone() && a.device() == b.device() &&
		    a.scalar_type() == at::kLong && b.scalar_type() == at::kLong)
			return at::where(alu == ISA_ALU_max ? a.ge(b) : a.le(b), a, b);
		return {};
	default: return {};
	}
}

#define BINARY_OP(name, op, alu)                                          \
	at::Tensor name(const at::Tensor &a, const at::Tensor &b)          \
	{                                                                  \
		return binary_op("aten::" #name, alu, a, b);   /* undefined: declined */ \
	}

BINARY_OP(maximum, maximum, ISA_ALU_max)
BINARY_OP(minimum, minimum, ISA_ALU_min)

// b * alpha for add / sub with alpha != 1 (the optimizers' weight decay):
// float operands only, the product rounded once before the add (CPU fuses
// the two, so the last bit can differ); undefined when not covered
at::Tensor alpha_scaled(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha)
{
	if (alpha.equal(1))
		return b;
	if (alpha.isComplex() || !at::isFloatingType(at::result_type(a, b)) || !a.is_privateuseone() ||
	    !b.is_privateuseone() || isa_dtype_of(b.scalar_type()) == ISA_DT_INVALID)
		return {};
	return b.mul(alpha);
}

at::Tensor add(const at::Tensor &a, const at::Tensor &b0, const at::Scalar &alpha)
{
	at::Tensor b = alpha_scaled(a, b0, alpha);
	return b.defined() ? binary_op("aten::add", ISA_ALU_add, a, b) : at::Tensor();   // undefined: declined
}

at::Tensor sub(const at::Tensor &a, const at::Tensor &b0, const at::Scalar &alpha)
{
	at::Tensor b = alpha_scaled(a, b0, alpha);
	return b.defined() ? binary_op("aten::sub", ISA_ALU_subtract, a, b) : at::Tensor();   // undefined: declined
}

// ScalarE activations: func(scale * x) evaluated in fp32 and rounded to the
// tensor's dtype, as the activation engine does
// neg / abs of integers on the exact integer ALU: -x = x * -1, |x| =
// max(x, -x) (both wrap at the type's minimum, as PyTorch)
at::Tensor int_unary(const char *name, int func, const at::Tensor &a)
{
	if (a.dim() == 0 && a.is_privateuseone()) {   // as one element (the integer ALU takes rows)
		at::Tensor r = int_unary(name, func, a.reshape({ 1 }));
		return r.defined() ? r.reshape({}) : r;
	}
	at::Tensor out;
	// int64 -x = 0 - x on the exact 64-bit subtract (relative positions),
	// |x| = max(x, -x) by the exact 64-bit compare
	if ((func == ISA_ACT_identity || func == ISA_ACT_abs) && a.is_privateuseone() && a.scalar_type() == at::kLong) {
		if (!native_i64_addsub(name, true, at::scalar_tensor(0, at::TensorOptions().dtype(at::kLong)), a, out))
			return {};
		return func == ISA_ACT_identity ? out : at::where(a.ge(out), a, out);
	}
	if (!a.is_privateuseone() || at::isFloatingType(a.scalar_type()) || a.scalar_type() == at::kBool ||
	    (func != ISA_ACT_identity && func != ISA_ACT_abs))
		return {};
	if (func == ISA_ACT_abs && a.scalar_type() == at::kByte)   // unsigned: |x| = x
		return int_binary(name, ISA_ALU_max, a, a);
	at::Tensor m1 = at::scalar_tensor(-1, at::TensorOptions().dtype(at::kLong));
	at::Tensor n = int_binary(name, ISA_ALU_multiply, a, m1);
	if (!n.defined() || func == ISA_ACT_identity)
		return n;
	return int_binary(name, ISA_ALU_max, a, n);
}

#define UNARY(name, func, scale)                                                              \
	at::Tensor name(const at::Tensor &a)                                                   \
	{                                                                                   \
		at::Tensor x = unary_operand(a);                                            \
		if (x.defined())                                                            \
			return run_elementwise("aten::" #name, { UNARY_ACT, func, scale }, x, nullptr); \
		if ((x = int_unary("aten::" #name, func, a)).defined())                      \
			return x;                                                            \
		return declined; \
	}

NEURON_UNARY_ACTS(UNARY)   /* the list: activations.def */

// the .out forms: the same kernel, its result written into out
#define UNARY_OUT(name)                                                               \
	at::Tensor &name##_out(const at::Tensor &a, at::Tensor &out)                   \
	{                                                                             \
		at::assert_no_internal_overlap(out);                                  \
		at::assert_no_partial_overlap(out, a);                                \
		at::Tensor r = out.is_privateuseone() ? at::Tensor(::neuron::name(a)) : at::Tensor(); \
		if (r.defined())                                                      \
			return write_result(out, r);                                  \
		return declined;                                                      \
	}

NEURON_UNARY_OUTS(UNARY_OUT)

at::Tensor gelu(const at::Tensor &a, c10::string_view approximate)
{
	at::Tensor x = unary_operand(a);
	if (x.defined() && (approximate == "none" || approximate == "tanh"))
		return run_elementwise("aten::gelu", { UNARY_ACT, approximate == "none" ? ISA_ACT_gelu : ISA_ACT_gelu_tanh, 1.0f },
				       x, nullptr);
	return declined;
}

// x ** e for the exponents models use, as ScalarE activations (CPU PyTorch
// special-cases the same ones: 2 -> x*x, 0.5 -> sqrt, -0.5 -> rsqrt, -1 -> 1/x)
at::Tensor pow_scalar(const at::Tensor &a, const at::Scalar &e)
{
	at::Tensor x = unary_operand(a);
	if (x.defined() && !e.isComplex()) {
		double v = e.toDouble();
		int func = v == 2.0 ? ISA_ACT_square : v == 0.5 ? ISA_ACT_sqrt
			 : v == -0.5 ? ISA_ACT_rsqrt : v == -1.0 ? ISA_ACT_reciprocal : -1;
		if (func >= 0)
			return run_elementwise("aten::pow", { UNARY_ACT, func, 1.0f }, x, nullptr);
		if (v == 1.0)
			return materialize(x, x.sizes(), x.scalar_type()).clone();
		// any other exponent: VectorE's pow ALU, the exponent in the
		// tensor's dtype as CPU takes it (bf16's -2.7 is -2.703125; fp32's
		// 1e300 is inf; one that overflows bf16 / fp16 is CPU's error: the
		// fallback raises it)
		bool half = x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf;
		float f = x.scalar_type() == at::kBFloat16 ? (float)c10::BFloat16((float)v)
			: x.scalar_type() == at::kHalf   ? (float)c10::Half((float)v)
							 : (float)v;
		if (!half || std::isfinite(f) || !std::isfinite(v))
			return run_elementwise("aten::pow", { TENSOR_SCALAR, ISA_ALU_pow, f }, x, nullptr);
	}
	return declined;
}

// clamp(x, lo, hi) = min(max(x, lo), hi) as one VectorE tensor_scalar
at::Tensor clamp(const at::Tensor &a, const std::optional<at::Scalar> &lo,
		 const std::optional<at::Scalar> &hi)
{
	at::Tensor x = unary_operand(a);
	bool ok = x.defined() && (lo || hi) && (!lo || !lo->isComplex()) &&
		  (!hi || !hi->isComplex());
	if (ok) {
		Ew op{ TENSOR_SCALAR, lo ? ISA_ALU_max : ISA_ALU_min,
		       (float)(lo ? lo->toDouble() : hi->toDouble()) };
		if (lo && hi) {
			op.code2 = ISA_ALU_min;
			op.imm2 = (float)hi->toDouble();
		}
		return run_elementwise("aten::clamp", op, x, nullptr);
	}
	// integers: max with lo, then min with hi (exact; integral bounds only)
	bool int_ok = a.is_privateuseone() && !at::isFloatingType(a.scalar_type()) && a.scalar_type() != at::kBool &&
		      (lo || hi) && (!lo || lo->isIntegral(false)) && (!hi || hi->isIntegral(false));
	if (int_ok) {
		at::Tensor r = a;
		if (lo)
			r = int_binary("aten::clamp", ISA_ALU_max, r, at::scalar_tensor(*lo, at::TensorOptions().dtype(at::kLong)));
		if (r.defined() && hi)
			r = int_binary("aten::clamp", ISA_ALU_min, r, at::scalar_tensor(*hi, at::TensorOptions().dtype(at::kLong)));
		if (r.defined())
			return r.is_same(a) ? r.clone() : r;
	}
	// int64 (labels.clamp(min=0)): the exact 64-bit compare, then masked_fill
	if (a.is_privateuseone() && a.scalar_type() == at::kLong && (lo || hi) && (!lo || lo->isIntegral(false)) &&
	    (!hi || hi->isIntegral(false))) {
		at::Tensor r = a;
		if (lo)
			r = r.masked_fill(r.lt(*lo), *lo);
		if (hi)
			r = r.masked_fill(r.gt(*hi), *hi);
		return r.is_same(a) ? r.clone() : r;
	}
	return declined;
}

at::Tensor &clamp_out(const at::Tensor &a, const std::optional<at::Scalar> &lo, const std::optional<at::Scalar> &hi,
		      at::Tensor &out)
{
	if (!out.is_privateuseone() || out.scalar_type() != a.scalar_type())
		return declined;
	at::Tensor r = neuron::clamp(a, lo, hi);
	return r.defined() ? composite_out(out, { &a }, r) : declined_tensor();
}

// clamp_min / clamp_max with a number: clamp with one bound (zaya's
// norm(...).clamp_min(eps)), and their out= forms
at::Tensor clamp_min_scalar(const at::Tensor &a, const at::Scalar &lo)
{
	return ::neuron::clamp(a, lo, std::nullopt);
}

at::Tensor clamp_max_scalar(const at::Tensor &a, const at::Scalar &hi)
{
	return ::neuron::clamp(a, std::nullopt, hi);
}

at::Tensor &clamp_min_scalar_out(const at::Tensor &a, const at::Scalar &lo, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? ::neuron::clamp(a, lo, std::nullopt) : at::Tensor());
}

at::Tensor &clamp_max_scalar_out(const at::Tensor &a, const at::Scalar &hi, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? ::neuron::clamp(a, std::nullopt, hi) : at::Tensor());
}

// In-place and out= forms of the binary ops: the functional kernel, then a
// DMA copy of its result into self / out (write_result; the result dtype
// must be one self / out can hold, as PyTorch requires).

// add_ / sub_: b scaled by alpha first; the result must have self's shape
// (an in-place op cannot grow self: CPU's error, from the fallback)
at::Tensor &alpha_inplace(const char *name, int alu, at::Tensor &self, const at::Tensor &b0, const at::Scalar &alpha)
{
	at::Tensor b = alpha_scaled(self, b0, alpha);
	at::Tensor r = b.defined() ? binary_into(name, alu, self, b, self) : at::Tensor();
	if (r.defined() && r.sizes().equals(self.sizes()))
		return write_result(self, r);
	return declined;
}

at::Tensor &add_inplace(at::Tensor &self, const at::Tensor &b, const at::Scalar &alpha)
{
	return alpha_inplace("aten::add", ISA_ALU_add, self, b, alpha);
}

at::Tensor &sub_inplace(at::Tensor &self, const at::Tensor &b, const at::Scalar &alpha)
{
	return alpha_inplace("aten::sub", ISA_ALU_subtract, self, b, alpha);
}

// add.out / sub.out: b scaled by alpha first, then one program into out
at::Tensor &alpha_out(const char *name, int alu, const at::Tensor &a, const at::Tensor &b0, const at::Scalar &alpha,
		      at::Tensor &out)
{
	at::Tensor b = alpha_scaled(a, b0, alpha);
	at::Tensor r = b.defined() ? binary_into(name, alu, a, b, out) : at::Tensor();
	if (r.defined())
		return write_result(out, r);
	return declined;
}

at::Tensor &add_out(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha, at::Tensor &out)
{
	return alpha_out("aten::add", ISA_ALU_add, a, b, alpha, out);
}

#define BINARY_OUT(fname, opname, alu)                                                           \
	at::Tensor &fname(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)                 \
	{                                                                                         \
		at::Tensor r = binary_into("aten::" opname, alu, a, b, out);                             \
		if (r.defined())                                                                  \
			return write_result(out, r);                                                \
		return declined;                                                                  \
	}

BINARY_OUT(mul_out, "mul", ISA_ALU_multiply)
BINARY_OUT(maximum_out, "maximum", ISA_ALU_max)
BINARY_OUT(minimum_out, "minimum", ISA_ALU_min)
BINARY_OUT(clamp_min_tensor_out, "clamp_min", ISA_ALU_max)   // a bound per element
BINARY_OUT(clamp_max_tensor_out, "clamp_max", ISA_ALU_min)

at::Tensor clamp_min_tensor(const at::Tensor &a, const at::Tensor &b)
{
	return binary_op("aten::clamp_min", ISA_ALU_max, a, b);
}

at::Tensor clamp_max_tensor(const at::Tensor &a, const at::Tensor &b)
{
	return binary_op("aten::clamp_max", ISA_ALU_min, a, b);
}

at::Tensor &sub_out(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha, at::Tensor &out)
{
	return alpha_out("aten::sub", ISA_ALU_subtract, a, b, alpha, out);
}

at::Tensor &mul_inplace(at::Tensor &self, const at::Tensor &b)
{
	at::Tensor r = binary_into("aten::mul", ISA_ALU_multiply, self, b, self);
	if (r.defined() && r.sizes().equals(self.sizes()))
		return write_result(self, r);
	return declined;
}

// clamp between tensor bounds: max with the lower, min with the upper
// (NaN in either operand propagates, as CPU's clamp)
at::Tensor clamp_tensor_impl(const at::Tensor &x, const std::optional<at::Tensor> &lo,
			     const std::optional<at::Tensor> &hi)
{
	bool has_lo = lo && lo->defined(), has_hi = hi && hi->defined();
	if (!x.is_privateuseone() || (!has_lo && !has_hi))
		return {};
	at::Tensor r = x;
	if (has_lo)
		r = at::maximum(r, *lo);
	if (has_hi)
		r = at::minimum(r, *hi);
	return r.is_same(x) ? x.clone() : r;
}

at::Tensor clamp_tensor(const at::Tensor &x, const std::optional<at::Tensor> &lo, const std::optional<at::Tensor> &hi)
{
	return clamp_tensor_impl(x, lo, hi);   /* undefined: declined */
}

at::Tensor &clamp_tensor_out(const at::Tensor &x, const std::optional<at::Tensor> &lo,
			     const std::optional<at::Tensor> &hi, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? clamp_tensor_impl(x, lo, hi) : at::Tensor());
}

// fmax / fmin: a NaN operand gives the other one
at::Tensor fminmax(const at::Tensor &a, const at::Tensor &b, const at::Tensor &out, bool max)
{
	if (!both_float_neuron(a, b) || !out.is_privateuseone() || a.scalar_type() != b.scalar_type())
		return {};
	at::Tensor r = max ? at::maximum(a, b) : at::minimum(a, b);
	return at::where(nan_mask(a), b, at::where(nan_mask(b), a, r));
}

at::Tensor &fmax_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return composite_out(out, { &a, &b }, fminmax(a, b, out, true));
}

at::Tensor &fmin_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return composite_out(out, { &a, &b }, fminmax(a, b, out, false));
}

// other - alpha * self
at::Tensor rsub_tensor(const at::Tensor &self, const at::Tensor &other, const at::Scalar &alpha)
{
	if (!self.is_privateuseone() || !other.is_privateuseone() || isa_dtype_of(at::result_type(self, other)) == ISA_DT_INVALID)
		return {};
	return other.sub(self, alpha);
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
	if (!x.defined() || !y.defined() || !float_binary("aten::pow", ISA_ALU_pow, x, y, out))
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

at::Tensor mul_tensor(const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor out;
	if (a.is_complex() || b.is_complex()) {
		out = complex_mul(a, b);   // aten/complex/complex.cpp
		if (out.defined())
			return out;
		return declined;
	}
	return binary_op("aten::mul", ISA_ALU_multiply, a, b);   // undefined: declined
}

}  // namespace

// an out= / in-place op's functional result when natively covered and
// storable in `dst` (lowering.h)
at::Tensor binary_into(const char *name, int alu, const at::Tensor &a, const at::Tensor &b, const at::Tensor &dst)
{
	// an out= / in-place target must not overlap itself nor partly overlap
	// an input (CPU's TensorIterator checks)
	at::assert_no_internal_overlap(dst);
	at::assert_no_partial_overlap(dst, a);
	at::assert_no_partial_overlap(dst, b);
	// decide from the result type before running anything, so an uncovered
	// call does not run the kernel and then the fallback too
	at::ScalarType rt = at::result_type(a, b);
	bool storable = dst.is_privateuseone() && c10::canCast(rt, dst.scalar_type()) &&
			(rt == dst.scalar_type() ||
			 (isa_dtype_of(rt) != ISA_DT_INVALID && isa_dtype_of(dst.scalar_type()) != ISA_DT_INVALID));
	if (!storable)
		return {};
	ResultInto into_dst(dst);
	at::Tensor out = binary_op(name, alu, a, b);
	return out.defined() && dst.device() == out.device() ? out : at::Tensor();
}

BinaryPath lower_binary(int alu, const at::Tensor &a, const at::Tensor &b)
{
	// the common case without type promotion: two tensors of one float type
	if (a.scalar_type() == b.scalar_type() && isa_dtype_of(a.scalar_type()) != ISA_DT_INVALID)
		return BinaryPath::Float;
	if (a.is_complex() || b.is_complex())
		return BinaryPath::Decline;
	at::ScalarType rt = at::result_type(a, b);
	if (at::isFloatingType(rt) || alu == ISA_ALU_divide)   // true division: in a float type
		return BinaryPath::Float;
	if (rt == at::kBool)
		return BinaryPath::Bool;
	if (rt == at::kLong)
		return BinaryPath::Int64;
	if (at::isIntegralType(rt, false) && c10::elementSize(rt) <= 4)
		return BinaryPath::Int32;
	return BinaryPath::Decline;
}

at::Tensor binary_op(const char *name, int alu, const at::Tensor &a, const at::Tensor &b)
{
	// a number first (2 * t, foreach's order): the tensor first for an
	// operation that commutes
	if (commutes(alu) && is_scalar_operand(b, a) && !is_scalar_operand(a, b))
		return binary_op(name, alu, b, a);
	at::Tensor out;
	switch (lower_binary(alu, a, b)) {
	case BinaryPath::Float: return float_binary(name, alu, a, b, out) ? out : at::Tensor();
	case BinaryPath::Int32: return int_binary(name, alu, a, b);
	case BinaryPath::Int64: return i64_binary(name, alu, a, b);
	case BinaryPath::Bool:   // a product of bools is their logical and
		return alu == ISA_ALU_multiply && native_bool_mul(a, b, out) ? out : at::Tensor();
	case BinaryPath::Decline: break;
	}
	return {};
}


NEURON_REGISTER_OPS(NEURON_OPS_ARITHMETIC)

}  // namespace neuron
