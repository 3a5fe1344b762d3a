// aten/pointwise/special.cpp -- float classification and the special functions of
// torch.special composed from the native kernels: frexp (the exponent field
// read with VectorE's integer ALU), signbit, isposinf / isneginf, angle of
// a real tensor, logaddexp2, erfc, erfcx, log_ndtr, erfinv, entr, the modified Bessel
// functions i0, i0e, i1, i1e, spherical_bessel_j0 and the orthogonal
// polynomials (Chebyshev T / U / V / W and their shifted forms, Hermite H /
// He, Laguerre, Legendre).
//
// Each follows CPU PyTorch's algorithm (ATen/native/Math.h, whose Cephes
// coefficient tables are read from that header, never restated) at fp32,
// bf16 / fp16 computed at fp32 and rounded once as CPU's; CPU's NaN,
// infinity and signed-zero cases are written out next to each.  Integer
// inputs of the float-only functions decline (the counted CPU fallback,
// which raises or promotes as CPU does).
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/pointwise/math.h"
#include "ops.def"

#include <ATen/native/Math.h>
#include <ATen/ops/where.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/angle_ops.h>
#include <ATen/ops/erfc_ops.h>
#include <ATen/ops/erfinv_ops.h>
#include <ATen/ops/frexp_ops.h>
#include <ATen/ops/i0_ops.h>
#include <ATen/ops/isneginf_ops.h>
#include <ATen/ops/isposinf_ops.h>
#include <ATen/ops/logaddexp2_ops.h>
#include <ATen/ops/signbit_ops.h>
#include <ATen/ops/special_entr_ops.h>
#include <ATen/ops/special_i0e_ops.h>
#include <ATen/ops/special_i1_ops.h>
#include <ATen/ops/special_i1e_ops.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/special_chebyshev_polynomial_t_ops.h>
#include <ATen/ops/special_chebyshev_polynomial_u_ops.h>
#include <ATen/ops/special_chebyshev_polynomial_v_ops.h>
#include <ATen/ops/special_chebyshev_polynomial_w_ops.h>
#include <ATen/ops/special_shifted_chebyshev_polynomial_t_ops.h>
#include <ATen/ops/special_shifted_chebyshev_polynomial_u_ops.h>
#include <ATen/ops/special_shifted_chebyshev_polynomial_v_ops.h>
#include <ATen/ops/special_shifted_chebyshev_polynomial_w_ops.h>
#include <ATen/ops/special_hermite_polynomial_h_ops.h>
#include <ATen/ops/special_hermite_polynomial_he_ops.h>
#include <ATen/ops/special_laguerre_polynomial_l_ops.h>
#include <ATen/ops/special_legendre_polynomial_p_ops.h>
#include <ATen/ops/special_spherical_bessel_j0_ops.h>
#include <ATen/ops/special_erfcx_ops.h>
#include <ATen/ops/special_log_ndtr_ops.h>
#include <ATen/ops/special_modified_bessel_i0_ops.h>
#include <ATen/ops/special_modified_bessel_i1_ops.h>

#include <tuple>

namespace neuron {

namespace {

// ---- the exponent field ------------------------------------------------------

// fp32 f = m * 2^e with |m| in [1/2, 1) (C's frexp) for finite nonzero f:
// m from f's bits with the exponent field set to 126, e from the field;
// subnormals first scaled by 2^25 (exact).  Zeros, infinities and NaN: m =
// f, e = 0 (glibc's).  e is int32.
std::tuple<at::Tensor, at::Tensor> frexp_f32(const at::Tensor &f)
{
	at::Tensor sub = f.abs().lt(1.1754943508222875e-38).bitwise_and(f.ne(0));
	at::Tensor g = at::where(sub, f.mul(33554432.0), f);
	at::Tensor bits = g.view(at::kInt);
	at::Tensor field = bits.__rshift__(23).bitwise_and(0xff);
	at::Tensor m = bits.bitwise_and((int64_t)0x807fffff).bitwise_or(0x3f000000).view(at::kFloat);
	at::Tensor e = field.sub(at::where(sub, scalar_like(126 + 25, field), scalar_like(126, field)));
	at::Tensor plain = f.eq(0).bitwise_or(f.abs().eq(kInf)).bitwise_or(f.ne(f));
	return { at::where(plain, f, m), at::where(plain, scalar_like(0, e), e) };
}

std::tuple<at::Tensor &, at::Tensor &> frexp_out(const at::Tensor &x, at::Tensor &mantissa, at::Tensor &exponent)
{
	if (!is_float_neuron(x) || !mantissa.is_privateuseone() || !exponent.is_privateuseone() ||
	    mantissa.scalar_type() != x.scalar_type() || exponent.scalar_type() != at::kInt)
		return declined;
	auto [m, e] = frexp_f32(as_fp32(x));
	composite_out(mantissa, { &x }, cast_back(m, x.scalar_type()));
	composite_out(exponent, { &x }, e);
	return { mantissa, exponent };
}

// log2 and log10 of fp32 x from its exponent e and mantissa m in
// [sqrt(1/2), sqrt(2)): e exact plus log(m) scaled, so a power of two (of
// ten) comes out exact where log(x) / ln 2 missed it (log2(8192) gave
// 12.999999; floor(log2(x)) is how code counts bits).  log10 adds e
// log10(2) as hi + lo (hi has 11 bits: e hi exact).  x < 0: NaN, 0: -inf,
// inf and NaN themselves.
at::Tensor log_base_f32(const at::Tensor &x, bool ten)
{
	auto [m0, e0] = frexp_f32(x);
	at::Tensor low = m0.lt(0.70710678118654752440);
	at::Tensor m = at::where(low, m0.mul(2.0), m0);
	at::Tensor e = at::where(low, e0.sub(1), e0).to(at::kFloat);
	at::Tensor r;
	if (!ten) {
		r = e.add(m.log().mul(1.0 / kLn2));
	} else {
		const double hi = 1233.0 / 4096.0, lo = 0.30102999566398119521 - 1233.0 / 4096.0;
		r = e.mul(hi).add(e.mul(lo).add(m.log().mul(0.43429448190325182765)));
	}
	r = at::where(x.eq(0), scalar_like(-kInf, r), r);
	r = at::where(x.lt(0), scalar_like(kNaN, r), r);
	return at::where(x.eq(kInf).bitwise_or(x.ne(x)), x, r);
}

// ---- classification ------------------------------------------------------------

// a bool result of an elementwise predicate into out (bool)
at::Tensor &predicate_out(at::Tensor &out, const at::Tensor &x, const at::Tensor &r)
{
	if (!r.defined() || out.scalar_type() != at::kBool)
		return declined;
	return composite_out(out, { &x }, r);
}

at::Tensor &signbit_out(const at::Tensor &x, at::Tensor &out)
{
	if (!dma_movable(x) || x.is_complex())
		return declined;
	if (at::isFloatingType(x.scalar_type()))   /* fp32 / bf16 / fp16; fp64 and fp8 on the CPU */
		return predicate_out(out, x, is_float_neuron(x) ? sign_bit(x) : at::Tensor());
	return predicate_out(out, x, x.scalar_type() == at::kBool || !at::isSignedType(x.scalar_type())
					    ? at::zeros_like(x, x.options().dtype(at::kBool))
					    : x.lt(0));
}

// x == +-inf; integers never are
at::Tensor is_inf(const at::Tensor &x, double v)
{
	if (!dma_movable(x) || x.is_complex())
		return {};
	if (is_float_neuron(x))
		return x.eq(v);
	if (at::isFloatingType(x.scalar_type()))   /* fp64 / fp8: the CPU */
		return {};
	return at::zeros_like(x, x.options().dtype(at::kBool));
}

at::Tensor &isposinf_out(const at::Tensor &x, at::Tensor &out)
{
	return predicate_out(out, x, is_inf(x, kInf));
}

at::Tensor &isneginf_out(const at::Tensor &x, at::Tensor &out)
{
	return predicate_out(out, x, is_inf(x, -kInf));
}

// angle of a real x: pi below zero, else 0; NaN stays (CPU's angle_impl)
at::Tensor angle_real(const at::Tensor &x)
{
	if (!is_float_neuron(x))
		return {};
	at::Tensor r = at::where(x.lt(0), scalar_like(kPi, x), scalar_like(0.0, x));
	return at::where(x.ne(x), x, r);
}

at::Tensor angle(const at::Tensor &x)
{
	return angle_real(x);   /* undefined: declined */
}

at::Tensor &angle_out(const at::Tensor &x, at::Tensor &out)
{
	at::Tensor r = angle_real(x);
	if (!r.defined() || out.scalar_type() != x.scalar_type())
		return declined;
	return composite_out(out, { &x }, r);
}

// CPU's logaddexp2: a == b == +-inf gives a; else max + log1p(2^-|a - b|) / ln 2
at::Tensor &logaddexp2_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	if (!real_floats(a, b, out) || a.device() != b.device())
		return declined;
	at::Tensor x = as_fp32(a), y = as_fp32(b);
	at::Tensor r = at::maximum(x, y).add(x.sub(y).abs().neg().exp2().log1p().mul(1.0 / kLn2));
	r = at::where(x.abs().eq(kInf).bitwise_and(x.eq(y)), x, r);
	return composite_out(out, { &a, &b }, cast_back(r, out.scalar_type()));
}

// ---- error functions -------------------------------------------------------------

// exp(sign z^2) of fp32 z >= 0 to a few ulps: z = h + l with h of 12
// bits (Dekker's split), so h^2 is exact and exp(sign h^2) exp(sign (2 h
// l + l^2)) loses nothing (exp of a rounded z^2 was off by 1e-5 relative
// at z = 9)
at::Tensor exp_of_square(const at::Tensor &z, double sign)
{
	at::Tensor h = z.mul(4097.0);
	h = h.sub(h.sub(z));
	at::Tensor l = z.sub(h);
	at::Tensor tail = h.mul(l).mul(2.0).add(l.mul(l));
	return h.mul(h).mul(sign).exp().mul(tail.mul(sign).exp());
}

// erfcx(z) = exp(z^2) erfc(z) for fp32 z >= 1/2: t exp(P(t)), t = 1 / (1 +
// z / 2) (the Chebyshev fit of Numerical Recipes' erfcc, relative error
// below 1.2e-7); 0 at infinity
at::Tensor erfcx_tail(const at::Tensor &z)
{
	static const double P[] = { 0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
				    -0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223 };
	at::Tensor t = z.mul(0.5).add(1.0).reciprocal();
	at::Tensor p = at::full_like(t, P[0]);
	for (size_t i = 1; i < sizeof(P) / sizeof(P[0]); i++)
		p = p.mul(t).add(P[i]);
	return t.mul(p.exp());
}

// erfc of fp32 x: 1 - erf(x) for |x| < 1/2 (no cancellation there:
// erf(1/2) = 0.52); beyond, exp(-z^2) erfcx(z), z = |x|, 0 from 11 on (h^2
// overflows later); 2 - erfc(-x) below zero
at::Tensor erfc_f32(const at::Tensor &x)
{
	at::Tensor z = x.abs();
	at::Tensor big = exp_of_square(z, -1.0).mul(erfcx_tail(z));
	big = at::where(z.ge(11.0), scalar_like(0.0, big), big);   /* erfc(11) = 1e-54 */
	at::Tensor r = at::where(z.lt(0.5), x.erf().neg().add(1.0), big);
	r = at::where(x.lt(0).bitwise_and(z.ge(0.5)), r.neg().add(2.0), r);
	return at::where(x.ne(x), x, r);
}

// erfcx(x) = exp(x^2) erfc(x): the fit above from 1/2 on; exp(x^2) erfc(x)
// below (2 exp(x^2) - erfcx(-x) from -1/2 down; inf once exp(x^2) is)
at::Tensor erfcx_f32(const at::Tensor &x)
{
	at::Tensor z = x.abs();
	at::Tensor e2 = exp_of_square(z, 1.0);
	at::Tensor small = e2.mul(x.erf().neg().add(1.0));
	at::Tensor r = at::where(x.ge(0.5), erfcx_tail(z), small);
	r = at::where(x.le(-0.5), e2.mul(2.0).sub(erfcx_tail(z)), r);
	r = at::where(x.eq(-kInf), scalar_like(kInf, r), r);
	return at::where(x.ne(x), x, r);
}

at::Tensor &erfcx_out(const at::Tensor &x, at::Tensor &out)
{
	return float_unary_out(x, out, erfcx_f32);
}

// CPU's log_ndtr: t = x / sqrt(2); below -1 log(erfcx(-t) / 2) - t^2, else
// log1p(-erfc(t) / 2)
at::Tensor log_ndtr_f32(const at::Tensor &x)
{
	at::Tensor t = x.mul(0.70710678118654752440);
	at::Tensor low = erfcx_f32(t.neg()).div(2.0).log().sub(t.mul(t));
	at::Tensor high = erfc_f32(t).div(2.0).neg().log1p();
	return at::where(t.lt(-0.70710678118654752440), low, high);
}

at::Tensor &log_ndtr_out(const at::Tensor &x, at::Tensor &out)
{
	return float_unary_out(x, out, log_ndtr_f32);
}

at::Tensor &erfc_out(const at::Tensor &x, at::Tensor &out)
{
	return float_unary_out(x, out, erfc_f32);
}

// CPU's calc_erfinv at fp32: a rational first guess (central |y| <= 0.7,
// else of sqrt(-log((1 - |y|) / 2))) and two Newton steps on erf; |y| > 1
// NaN, +-1 +-inf
at::Tensor erfinv_f32(const at::Tensor &y)
{
	static const double a[4] = { 0.886226899, -1.645349621, 0.914624893, -0.140543331 };
	static const double b[4] = { -2.118377725, 1.442710462, -0.329097515, 0.012229801 };
	static const double c[4] = { -1.970840454, -1.624906493, 3.429567803, 1.641345311 };
	static const double d[2] = { 3.543889200, 1.637067800 };
	at::Tensor ya = y.abs();
	at::Tensor z = y.mul(y);
	at::Tensor num = z.mul(a[3]).add(a[2]).mul(z).add(a[1]).mul(z).add(a[0]);
	at::Tensor dem = z.mul(b[3]).add(b[2]).mul(z).add(b[1]).mul(z).add(b[0]).mul(z).add(1.0);
	at::Tensor central = y.mul(num).div(dem);
	at::Tensor w = ya.neg().add(1.0).div(2.0).log().neg().sqrt();
	at::Tensor num2 = w.mul(c[3]).add(c[2]).mul(w).add(c[1]).mul(w).add(c[0]);
	at::Tensor dem2 = w.mul(d[1]).add(d[0]).mul(w).add(1.0);
	at::Tensor tail = with_sign_of(num2, y).div(dem2);
	at::Tensor x = at::where(ya.le(0.7), central, tail);
	const double two_over_sqrt_pi = 1.12837916709551257390;
	for (int i = 0; i < 2; i++)
		x = x.sub(x.erf().sub(y).div(x.mul(x).neg().exp().mul(two_over_sqrt_pi)));
	x = at::where(ya.eq(1.0), with_sign_of(scalar_like(kInf, x), y), x);
	return at::where(ya.gt(1.0).bitwise_or(y.ne(y)), scalar_like(kNaN, x), x);
}

at::Tensor &erfinv_out(const at::Tensor &x, at::Tensor &out)
{
	return float_unary_out(x, out, erfinv_f32);
}

// CPU's entr: -x log x for x > 0, 0 at 0, -inf below, NaN stays
at::Tensor entr_f32(const at::Tensor &f)
{
	at::Tensor r = f.mul(f.log()).neg();
	r = at::where(f.eq(0), scalar_like(0.0, r), r);
	r = at::where(f.lt(0), scalar_like(-kInf, r), r);
	return at::where(f.ne(f), f, r);
}

at::Tensor &entr_out(const at::Tensor &x, at::Tensor &out)
{
	return float_unary_out(x, out, entr_f32);
}

// ---- modified Bessel functions -----------------------------------------------------

// Cephes' chbevl: the Chebyshev series of `coef` at y by Clenshaw's
// recurrence, the same steps as CPU's (ATen/native/Math.h)
at::Tensor chbevl(const at::Tensor &y, std::tuple<const float *, size_t> series)
{
	auto [coef, len] = series;
	at::Tensor b0 = at::full_like(y, coef[0]), b1 = at::zeros_like(y), b2 = at::zeros_like(y);
	for (size_t i = 1; i < len; i++) {
		b2 = b1;
		b1 = b0;
		b0 = y.mul(b1).sub(b2).add(coef[i]);
	}
	return b0.sub(b2).mul(0.5);
}

// CPU's calc_i0 / calc_i0e / calc_i1 / calc_i1e at fp32 (their float
// coefficients): the [0, 8] series at y = x / 2 - 2, the (8, inf) series
// at 32 / x - 2 over sqrt(x); the exponential scaling exp(x) for i0 / i1;
// i1 and i1e odd.  Both branches are evaluated, the select takes one.
enum class Bessel { I0, I0E, I1, I1E };

at::Tensor bessel_f32(const at::Tensor &x0, Bessel kind)
{
	bool first = kind == Bessel::I1 || kind == Bessel::I1E;
	bool scaled = kind == Bessel::I0E || kind == Bessel::I1E;
	at::Tensor x = x0.abs();
	at::Tensor near = chbevl(x.mul(0.5).sub(2.0), first ? ::chebyshev_coefficients_i1e_A<float>()
							     : ::chebyshev_coefficients_i0e_A<float>());
	at::Tensor far = chbevl(x.reciprocal().mul(32.0).sub(2.0), first ? ::chebyshev_coefficients_i1e_B<float>()
									 : ::chebyshev_coefficients_i0e_B<float>());
	if (first)
		near = near.mul(x);
	far = far.div(x.sqrt());
	at::Tensor r = at::where(x.le(8.0), near, far);
	if (!scaled)
		r = x.exp().mul(r);
	if (first)
		r = at::where(x0.lt(0), r.neg(), r);
	return at::where(x0.ne(x0), x0, r);
}

at::Tensor &bessel_out(const at::Tensor &x, at::Tensor &out, Bessel kind)
{
	return float_unary_out(x, out, [kind](const at::Tensor &f) { return bessel_f32(f, kind); });
}

at::Tensor &i0_out(const at::Tensor &x, at::Tensor &out) { return bessel_out(x, out, Bessel::I0); }
at::Tensor &i0e_out(const at::Tensor &x, at::Tensor &out) { return bessel_out(x, out, Bessel::I0E); }
at::Tensor &i1_out(const at::Tensor &x, at::Tensor &out) { return bessel_out(x, out, Bessel::I1); }
at::Tensor &i1e_out(const at::Tensor &x, at::Tensor &out) { return bessel_out(x, out, Bessel::I1E); }
// special.modified_bessel_i0 / i1 are the same functions (CPU evaluates
// them with Math.h's other table of the same Cephes fit): within an ulp or two
at::Tensor &modified_i0_out(const at::Tensor &x, at::Tensor &out) { return bessel_out(x, out, Bessel::I0); }
at::Tensor &modified_i1_out(const at::Tensor &x, at::Tensor &out) { return bessel_out(x, out, Bessel::I1); }

// ---- orthogonal polynomials -------------------------------------------------------------

// The polynomials of torch.special as CPU evaluates them (Math.h's
// *_polynomial_*_forward, at fp32): n truncated to an integer (negative: 0),
// the endpoint values, the closed form in acos(y) for the Chebyshev kinds
// above a degree threshold inside (-1, 1), else the three-term recurrence
// -- run here to the largest degree present (read from the device), each
// element taking the term of its own degree.  y = x, or 2x - 1 for the
// shifted Chebyshev kinds.
enum class Poly { T, U, V, W, H, HE, L, P };

struct PolySpec {
	Poly kind;
	bool shifted;
	int closed_above;   /* Chebyshev: the closed form from this degree on (exclusive) */
};

// the Chebyshev kinds' closed forms at theta = acos(y), and their values
// at y = 1 and y = -1 (where CPU tests |x| == 1, or x == 1 / x == 0 shifted)
at::Tensor chebyshev_closed(Poly kind, const at::Tensor &y, const at::Tensor &n, const at::Tensor &at_minus_one,
			    const at::Tensor &at_one)
{
	at::Tensor th = y.acos();
	switch (kind) {
	case Poly::T:
		return n.mul(th).cos();
	case Poly::U: {
		at::Tensor s = th.sin();
		return at::where(s.ne(0), n.add(1.0).mul(th).sin().div(s), n.add(1.0).mul(n.add(1.0).mul(th).cos()).div(y));
	}
	case Poly::V: {
		at::Tensor h = th.div(2.0);
		return at::where(h.sin().ne(1.0), n.add(0.5).mul(th).cos().div(h.cos()), at_minus_one);
	}
	default: {   /* W */
		at::Tensor h = th.div(2.0);
		return at::where(h.cos().ne(1.0), n.add(0.5).mul(th).sin().div(h.sin()), at_one);
	}
	}
}

at::Tensor polynomial_f32(const at::Tensor &x, const at::Tensor &n0, const PolySpec &spec)
{
	bool hermite = spec.kind == Poly::H || spec.kind == Poly::HE;
	at::Tensor nf = n0.trunc();
	if (hermite)   /* CPU's Hermite reads a non-finite n as -1 */
		nf = at::where(n0.abs().lt(kInf), nf, scalar_like(-1.0, nf));
	else if (nf.numel() && !peek_cpu(nf.abs().lt(kInf).all()).item<bool>())
		return {};   /* CPU casts a non-finite n to an integer: undefined */
	at::Tensor n = nf.expand(at::infer_size(x.sizes(), nf.sizes()));
	at::Tensor xb = x.expand(n.sizes());
	int64_t nmax = n.numel() ? (int64_t)peek_cpu(n.amax()).item<float>() : 0;
	if (hermite)
		nmax = std::min<int64_t>(nmax, 128);   /* beyond: NaN, below */
	if (nmax > 4096)
		return {};
	at::Tensor y = spec.shifted ? xb.add(xb).sub(1.0) : xb;
	at::Tensor even = n.fmod(2.0).eq(0);
	at::Tensor one = at::ones_like(y), two_n1 = n.add(n).add(1.0);
	bool cheb = spec.kind <= Poly::W;
	/* degree 1 and the recurrence */
	at::Tensor q1;
	switch (spec.kind) {
	case Poly::T: case Poly::HE: case Poly::P: q1 = y; break;
	case Poly::U: case Poly::H: q1 = y.add(y); break;
	case Poly::V: q1 = y.add(y).sub(1.0); break;
	case Poly::W: q1 = y.add(y).add(1.0); break;
	case Poly::L: q1 = y.neg().add(1.0); break;
	}
	at::Tensor p = one, q = q1, r = at::where(n.eq(0), one, q1);
	for (int64_t s = 2; s <= nmax; s++) {
		double k = (double)(s - 1);
		at::Tensor next;
		switch (spec.kind) {
		case Poly::H: next = y.add(y).mul(q).sub(p.mul(2.0 * k)); break;
		case Poly::HE: next = y.mul(q).sub(p.mul(k)); break;
		case Poly::L: next = y.neg().add(1.0).add(2.0 * k).mul(q).sub(p.mul(k)).div(k + 1.0); break;
		case Poly::P: next = y.mul(2.0 * k + 1.0).mul(q).sub(p.mul(k)).div(k + 1.0); break;
		default: next = y.add(y).mul(q).sub(p); break;
		}
		p = q;
		q = next;
		r = at::where(n.eq((double)s), next, r);
	}
	/* the special cases, last first so the first CPU tests wins */
	if (cheb) {
		at::Tensor sign_n = at::where(even, one, one.neg());
		at::Tensor minus_one, plus_one;   /* the values at y = -1 and y = 1 */
		switch (spec.kind) {
		case Poly::T: minus_one = sign_n; plus_one = one; break;
		case Poly::U: minus_one = sign_n.mul(n.add(1.0)); plus_one = n.add(1.0); break;
		case Poly::V: minus_one = sign_n.mul(two_n1); plus_one = one; break;
		default: minus_one = sign_n; plus_one = two_n1; break;
		}
		at::Tensor inside = y.abs().lt(1.0);
		r = at::where(n.gt((double)spec.closed_above).bitwise_and(inside),
			      chebyshev_closed(spec.kind, y, n, minus_one, plus_one), r);
		at::Tensor at_one = spec.shifted ? xb.eq(1.0) : xb.eq(1.0);
		at::Tensor at_minus = spec.shifted ? xb.eq(0.0) : xb.eq(-1.0);
		r = at::where(at_minus, minus_one, r);
		r = at::where(at_one, plus_one, r);
	} else if (spec.kind == Poly::P) {
		r = at::where(xb.abs().eq(1.0), at::where(xb.gt(0).bitwise_or(even), one, one.neg()), r);
	} else if (spec.kind == Poly::L) {
		r = at::where(xb.eq(0), one, r);
	} else {
		r = at::where(n.gt(128.0), scalar_like(kNaN, r), r);
	}
	return at::where(n.lt(0), scalar_like(0.0, r), r);
}

at::Tensor &polynomial_out(const at::Tensor &x, const at::Tensor &n, at::Tensor &out, PolySpec spec)
{
	if (!real_float(x) || !n.is_privateuseone() || n.is_complex() || out.scalar_type() != at::kFloat ||
	    x.scalar_type() != at::kFloat || (n.scalar_type() != at::kFloat && at::isFloatingType(n.scalar_type())))
		return declined;
	at::Tensor nf = n.scalar_type() == at::kFloat ? n : n.to(at::kFloat);
	return composite_out(out, { &x, &n }, polynomial_f32(x, nf, spec));
}

#define POLYNOMIAL(fname, kind, shifted, above)                                                      \
	at::Tensor &fname##_out(const at::Tensor &x, const at::Tensor &n, at::Tensor &out)           \
	{                                                                                            \
		return polynomial_out(x, n, out, PolySpec{ Poly::kind, shifted, above });            \
	}
POLYNOMIAL(chebyshev_t, T, false, 6)
POLYNOMIAL(chebyshev_u, U, false, 8)
POLYNOMIAL(chebyshev_v, V, false, 8)
POLYNOMIAL(chebyshev_w, W, false, 8)
POLYNOMIAL(shifted_chebyshev_t, T, true, 6)
POLYNOMIAL(shifted_chebyshev_u, U, true, 6)
POLYNOMIAL(shifted_chebyshev_v, V, true, 6)
POLYNOMIAL(shifted_chebyshev_w, W, true, 4)
POLYNOMIAL(hermite_h, H, false, 0)
POLYNOMIAL(hermite_he, HE, false, 0)
POLYNOMIAL(laguerre_l, L, false, 0)
POLYNOMIAL(legendre_p, P, false, 0)

// CPU's spherical_bessel_j0: sin(x) / x, its Taylor series (1/n! terms)
// below |x| = 1/2, 0 at the infinities
at::Tensor spherical_bessel_j0_f32(const at::Tensor &f)
{
	at::Tensor z = f.mul(f);
	static const double c[] = { 1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0,
				    -1.0 / 6.0 };
	at::Tensor series = at::full_like(z, c[0]);
	for (int i = 1; i < 6; i++)
		series = z.mul(series).add(c[i]);
	series = z.mul(series).add(1.0);
	at::Tensor r = at::where(f.abs().lt(0.5), series, f.sin().div(f));
	return at::where(f.abs().eq(kInf), scalar_like(0.0, r), r);
}

at::Tensor &spherical_bessel_j0_out(const at::Tensor &x, at::Tensor &out)
{
	return float_unary_out(x, out, spherical_bessel_j0_f32);
}

}  // namespace

// log2 / log10 of fp32 x, exact at powers of the base (aten/pointwise/activation.cpp)
at::Tensor log2_f32(const at::Tensor &x) { return log_base_f32(x, false); }
at::Tensor log10_f32(const at::Tensor &x) { return log_base_f32(x, true); }

NEURON_REGISTER_OPS(NEURON_OPS_SPECIAL)

}  // namespace neuron
