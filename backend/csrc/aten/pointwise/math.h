// aten/pointwise/math.h -- what the composed pointwise kernels (math.cpp,
// special.cpp, rounding.cpp, division.cpp, ...) share: the float
// constants, the operand predicates, and the few bit-exact helpers their
// special cases are written with.
#pragma once

#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/composite.h"

#include <ATen/ops/full.h>
#include <ATen/ops/where.h>

#include <cmath>
#include <limits>

namespace neuron {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kPi = 3.14159265358979323846;
inline constexpr double kLn2 = 0.69314718055994530942;

// a real floating-point tensor of a type the kernels compute at fp32
// (fp32 / bf16 / fp16: fp64 keeps its precision on the CPU)
inline bool real_float(const at::Tensor &t)
{
	return is_float_neuron(t) && at::isFloatingType(t.scalar_type());
}
inline bool real_floats(const at::Tensor &a, const at::Tensor &b, const at::Tensor &out)
{
	return real_float(a) && real_float(b) && out.is_privateuseone() && isa_dtype_of(out.scalar_type()) != ISA_DT_INVALID &&
	       at::isFloatingType(out.scalar_type());
}
// v as a 0-dim tensor of t's type and device (a broadcast operand)
inline at::Tensor scalar_like(double v, const at::Tensor &t)
{
	return at::full({}, v, t.options());
}
// the sign bit (negative zero and a NaN's sign included): the float's bits
// as a signed integer of its width are negative
inline at::Tensor sign_bit(const at::Tensor &x)
{
	return x.view(x.element_size() == 4 ? at::kInt : at::kShort).lt(0);
}
inline at::Tensor with_sign_of(const at::Tensor &mag, const at::Tensor &x)
{
	return at::where(x.lt(0), mag.neg(), mag);
}
// x less its nearest integer, in [-1/2, 1/2] (exact): tan(pi x) and
// |sin(pi x)| of it keep their precision next to an integer, where pi
// times the fraction itself loses it (pi / tan(pi x) was 1% off at
// -10.999994)
inline at::Tensor near_zero_fraction(const at::Tensor &x)
{
	at::Tensor r = x.sub(x.trunc());
	return r.sub(r.add(0.5).floor());
}

// floor(x) of a float tensor: x - (x mod 1) (VectorE's floored mod); an
// infinity's mod is NaN, and floor(+-inf) is the infinity itself
inline at::Tensor float_floor(const at::Tensor &x)
{
	return at::where(x.abs().eq(INFINITY), x, x.sub(x.remainder(1)));
}

// a float function's out= kernel: fn at fp32 (CPU's opmath for bf16 /
// fp16), rounded once into x's type; integer x declines (CPU promotes or
// raises)
template <class F> at::Tensor &float_unary_out(const at::Tensor &x, at::Tensor &out, F &&fn)
{
	if (!real_float(x))
		return declined_tensor();
	return composite_out(out, { &x }, cast_back(fn(as_fp32(x)), x.scalar_type()));
}

// log2 / log10 of fp32 x from its exponent field: exact at powers of the
// base (aten/pointwise/special.cpp)
at::Tensor log2_f32(const at::Tensor &x);
at::Tensor log10_f32(const at::Tensor &x);

}  // namespace neuron
