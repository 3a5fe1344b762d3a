// aten/pointwise/math.cpp -- trigonometric, hyperbolic and two-operand math
// functions composed from the native kernels (ScalarE's arctan, exp, log,
// sqrt, sin; VectorE's arithmetic and selects): atan2, asin, acos, sinh,
// cosh, asinh, acosh, atanh, exp2, sinc, hypot, copysign, heaviside,
// nextafter, nan_to_num, logit, log1p, expm1, softplus, log2, log10,
// logaddexp, xlogy, xlog1py, logical and / or / xor, digamma (polygamma of
// order 0) and lgamma.
//
// Each computes in fp32 for bf16 / fp16 inputs (CPU's opmath) and rounds
// once; the formulas are the numerically stable ones (no cancellation, no
// overflow before the true result overflows), with CPU's NaN, infinity and
// signed-zero cases written out next to each.  Integer or mixed operands
// decline (the counted CPU fallback).
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/pointwise/math.h"
#include "ops.def"

#include <ATen/ops/expm1_ops.h>
#include <ATen/ops/log10_ops.h>
#include <ATen/ops/log1p_ops.h>
#include <ATen/ops/log2_ops.h>
#include <ATen/ops/logaddexp_ops.h>
#include <ATen/ops/softplus_ops.h>
#include <ATen/ops/xlogy_ops.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/full.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/acos_ops.h>
#include <ATen/ops/acosh_ops.h>
#include <ATen/ops/asin_ops.h>
#include <ATen/ops/asinh_ops.h>
#include <ATen/ops/atan2_ops.h>
#include <ATen/ops/atanh_ops.h>
#include <ATen/ops/copysign_ops.h>
#include <ATen/ops/cosh_ops.h>
#include <ATen/ops/exp2_ops.h>
#include <ATen/ops/heaviside_ops.h>
#include <ATen/ops/hypot_ops.h>
#include <ATen/ops/logical_and_ops.h>
#include <ATen/ops/logical_or_ops.h>
#include <ATen/ops/logical_xor_ops.h>
#include <ATen/ops/logit_ops.h>
#include <ATen/ops/nan_to_num_ops.h>
#include <ATen/ops/digamma_ops.h>
#include <ATen/ops/lgamma_ops.h>
#include <ATen/ops/polygamma_ops.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/nextafter_ops.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/sinc_ops.h>
#include <ATen/ops/sinh_ops.h>
#include <ATen/ops/special_xlog1py_ops.h>

#include <cmath>
#include <limits>

namespace neuron {

namespace {

// from here on a*a overflows fp32's precision budget: asinh / acosh use
// log(a) + ln 2 (the neglected 1 / (4 a^2) is below an ulp)
constexpr double kBig = 4096.0;

// ---- inverse trigonometric ----------------------------------------------------

// atan2(y, x) of fp32 tensors: atan(y / x) moved to x's half plane; both
// infinite: +-pi/4 or +-3pi/4; x == 0: +-pi/2; y == 0: +-0 or +-pi by the
// signs (of zeros too), as C's atan2
at::Tensor atan2_f32(const at::Tensor &y, const at::Tensor &x)
{
	at::Tensor r = y.div(x).atan();
	at::Tensor xneg = sign_bit(x), yneg = sign_bit(y);
	at::Tensor pi = scalar_like(kPi, r), half = scalar_like(kPi / 2, r);
	r = at::where(x.lt(0), at::where(yneg, r.sub(pi), r.add(pi)), r);
	at::Tensor inf_both = y.abs().eq(kInf).bitwise_and(x.abs().eq(kInf));
	at::Tensor quarter = at::where(xneg, scalar_like(3 * kPi / 4, r), scalar_like(kPi / 4, r));
	r = at::where(inf_both, with_sign_of(quarter, y), r);
	at::Tensor axis = at::where(xneg, pi, scalar_like(0.0, r));
	r = at::where(x.eq(0).bitwise_and(y.ne(0)), with_sign_of(half, y), r);
	r = at::where(y.eq(0), at::where(yneg, axis.neg(), axis), r);
	return at::where(y.ne(y).bitwise_or(x.ne(x)), scalar_like(kNaN, r), r);
}

at::Tensor &atan2_out(const at::Tensor &y, const at::Tensor &x, at::Tensor &out)
{
	if (!real_floats(y, x, out))
		return declined;
	return composite_out(out, { &y, &x }, cast_back(atan2_f32(as_fp32(y), as_fp32(x)), out.scalar_type()));
}

// asin(x) = atan2(x, sqrt((1 - x)(1 + x))) (no cancellation near |x| = 1);
// |x| > 1: NaN from the square root
at::Tensor &asin_out(const at::Tensor &x, at::Tensor &out)
{
	if (!real_float(x))
		return declined;
	at::Tensor f = as_fp32(x);
	at::Tensor c = f.neg().add(1.0).mul(f.add(1.0)).sqrt();
	return composite_out(out, { &x }, cast_back(atan2_f32(f, c), x.scalar_type()));
}

// acos(x) = atan2(sqrt((1 - x)(1 + x)), x)
at::Tensor &acos_out(const at::Tensor &x, at::Tensor &out)
{
	if (!real_float(x))
		return declined;
	at::Tensor f = as_fp32(x);
	at::Tensor s = f.neg().add(1.0).mul(f.add(1.0)).sqrt();
	return composite_out(out, { &x }, cast_back(atan2_f32(s, f), x.scalar_type()));
}

// ---- hyperbolic ---------------------------------------------------------------

// sinh: |x| <= 9 from e = expm1(|x|): (e + e / (e + 1)) / 2 (exact for tiny
// x); beyond, h * h / 2 with h = exp(|x| / 2), so the result overflows only
// where sinh does (89.4, not exp's 88.7: CPU's vectorized path gives inf
// from 88.7 on, its scalar path the finite value given here); x's sign
at::Tensor &sinh_out(const at::Tensor &x, at::Tensor &out)
{
	if (!real_float(x))
		return declined;
	at::Tensor f = as_fp32(x), a = f.abs();
	at::Tensor e = a.expm1(), h = a.mul(0.5).exp();
	at::Tensor small = e.add(e.div(e.add(1.0))).mul(0.5), large = h.mul(0.5).mul(h);
	return composite_out(out, { &x }, cast_back(with_sign_of(at::where(a.le(9.0), small, large), f), x.scalar_type()));
}

// cosh: (e^|x| + e^-|x|) / 2 up to |x| = 9, h * h / 2 beyond (as sinh)
at::Tensor &cosh_out(const at::Tensor &x, at::Tensor &out)
{
	if (!real_float(x))
		return declined;
	at::Tensor a = as_fp32(x).abs();
	at::Tensor e = a.exp(), h = a.mul(0.5).exp();
	at::Tensor small = e.add(e.reciprocal()).mul(0.5), large = h.mul(0.5).mul(h);
	return composite_out(out, { &x }, cast_back(at::where(a.le(9.0), small, large), x.scalar_type()));
}

// asinh(|x|) = log1p(a + a^2 / (1 + sqrt(1 + a^2))), log(a) + ln 2 from
// kBig on; x's sign
at::Tensor &asinh_out(const at::Tensor &x, at::Tensor &out)
{
	if (!real_float(x))
		return declined;
	at::Tensor f = as_fp32(x), a = f.abs();
	at::Tensor a2 = a.mul(a);
	at::Tensor small = a.add(a2.div(a2.add(1.0).sqrt().add(1.0))).log1p();
	at::Tensor r = at::where(a.lt(kBig), small, a.log().add(kLn2));
	return composite_out(out, { &x }, cast_back(with_sign_of(r, f), x.scalar_type()));
}

// acosh(x) = log1p(t + sqrt(2t + t^2)), t = x - 1 (exact); log(x) + ln 2
// from kBig on; x < 1: NaN from the square root or log1p
at::Tensor &acosh_out(const at::Tensor &x, at::Tensor &out)
{
	if (!real_float(x))
		return declined;
	at::Tensor f = as_fp32(x), t = f.sub(1.0);
	at::Tensor small = t.add(t.mul(2.0).add(t.mul(t)).sqrt()).log1p();
	at::Tensor r = at::where(f.lt(kBig), small, f.log().add(kLn2));
	return composite_out(out, { &x }, cast_back(r, x.scalar_type()));
}

// atanh(|x|) = log1p(2a / (1 - a)) / 2 (1 - a exact near 1), x's sign: +-1
// give +-inf, |x| > 1 NaN
at::Tensor &atanh_out(const at::Tensor &x, at::Tensor &out)
{
	if (!real_float(x))
		return declined;
	at::Tensor f = as_fp32(x), a = f.abs();
	at::Tensor r = a.mul(2.0).div(a.neg().add(1.0)).log1p().mul(0.5);
	return composite_out(out, { &x }, cast_back(with_sign_of(r, f), x.scalar_type()));
}

// ---- exponentials, sinc ---------------------------------------------------------

// 2^k for integer k in [-126, 127] (an int32 fp32 tensor of k), exactly:
// the bits of the biased exponent
at::Tensor pow2_int(const at::Tensor &k)
{
	return k.add(127).mul(8388608).view(at::kFloat);
}

// 2^x = 2^n1 * 2^n2 * e^(r ln 2), n = round(x) split in two halves (each a
// normal power of two), r = x - n in [-1/2, 1/2] exact: one rounding at the
// last product (a subnormal result too), no |x|-ulp loss of exp(x ln 2)
at::Tensor &exp2_out(const at::Tensor &x, at::Tensor &out)
{
	if (!real_float(x))
		return declined;
	at::Tensor f = at::clamp(as_fp32(x), -160.0, 130.0);   /* beyond: 0 or inf either way */
	at::Tensor n = f.add(0.5).floor(), p = f.sub(n).mul(kLn2).exp();
	at::Tensor n1 = n.mul(0.5).floor();
	at::Tensor k1 = n1.to(at::kInt), k2 = n.sub(n1).to(at::kInt);
	at::Tensor r = p.mul(pow2_int(k1)).mul(pow2_int(k2));
	return composite_out(out, { &x }, cast_back(r, x.scalar_type()));
}

// CPU's sinc: 1 at 0, else sin(pi x) / (pi x), the product rounded once
at::Tensor &sinc_out(const at::Tensor &x, at::Tensor &out)
{
	if (!real_float(x))
		return declined;
	at::Tensor f = as_fp32(x), p = f.mul(kPi);
	at::Tensor r = at::where(f.eq(0), scalar_like(1.0, p), p.sin().div(p));
	return composite_out(out, { &x }, cast_back(r, x.scalar_type()));
}

// ---- two operands --------------------------------------------------------------

// hypot: m sqrt(1 + (n / m)^2), m = max(|a|, |b|), n = min (no overflow of
// a^2); 0 when both are 0; an infinity wins over a NaN, as C's hypot
at::Tensor &hypot_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	if (!real_floats(a, b, out))
		return declined;
	at::Tensor x = as_fp32(a).abs(), y = as_fp32(b).abs();
	at::Tensor m = at::maximum(x, y), n = at::minimum(x, y);
	at::Tensor q = n.div(m);
	at::Tensor r = m.mul(q.mul(q).add(1.0).sqrt());
	r = at::where(m.eq(0), scalar_like(0.0, r), r);
	r = at::where(x.eq(kInf).bitwise_or(y.eq(kInf)), scalar_like(kInf, r), r);
	return composite_out(out, { &a, &b }, cast_back(r, out.scalar_type()));
}

// |a| with b's sign bit (negative zero and NaN's sign included)
at::Tensor &copysign_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	if (!real_floats(a, b, out) || a.scalar_type() != b.scalar_type())
		return declined;
	at::Tensor m = a.abs();
	return composite_out(out, { &a, &b }, cast_back(at::where(sign_bit(b), m.neg(), m), out.scalar_type()));
}

// CPU's heaviside: x == 0 ? v : (x > 0) (NaN: 0)
at::Tensor &heaviside_out(const at::Tensor &x, const at::Tensor &v, at::Tensor &out)
{
	if (!real_floats(x, v, out) || x.scalar_type() != v.scalar_type())
		return declined;
	at::Tensor r = at::where(x.eq(0), v, x.gt(0).to(x.scalar_type()));
	return composite_out(out, { &x, &v }, r.scalar_type() == out.scalar_type() ? r : r.to(out.scalar_type()));
}

// CPU's xlog1py: NaN where y is NaN, 0 where x is 0, else x * log1p(y)
at::Tensor &xlog1py_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	if (!real_floats(a, b, out))
		return declined;
	at::Tensor x = as_fp32(a), y = as_fp32(b);
	at::Tensor r = at::where(x.eq(0), scalar_like(0.0, x), x.mul(y.log1p()));
	r = at::where(y.ne(y), scalar_like(kNaN, x), r);
	return composite_out(out, { &a, &b }, cast_back(r, out.scalar_type()));
}

// nextafter(x, y): x's bits as an integer of its width stepped by one
// toward y (up for a positive x moving up or a negative one moving down);
// x == 0 gives the smallest subnormal with y's direction, x == y gives y,
// a NaN gives NaN
at::Tensor &nextafter_out(const at::Tensor &x, const at::Tensor &y, at::Tensor &out)
{
	if (!real_floats(x, y, out) || x.scalar_type() != y.scalar_type() || out.scalar_type() != x.scalar_type())
		return declined;
	at::ScalarType it = x.element_size() == 4 ? at::kInt : at::kShort;
	at::Tensor a = x.expand(at::infer_size(x.sizes(), y.sizes())).contiguous(), b = y.expand(a.sizes());
	at::Tensor one = at::full({}, 1, a.options().dtype(it)), minus = at::full({}, -1, a.options().dtype(it));
	at::Tensor step = at::where(b.gt(a).eq(a.gt(0)), one, minus);
	at::Tensor r = a.view(it).add(step).view(a.scalar_type());
	int64_t neg_tiny = it == at::kInt ? (int64_t)INT32_MIN + 1 : -32767;   /* sign bit | 1 */
	at::Tensor tiny = at::where(b.gt(0), one, at::full({}, neg_tiny, one.options())).view(a.scalar_type());
	r = at::where(a.eq(0), tiny.expand(a.sizes()), r);
	r = at::where(a.eq(b), b, r);
	r = at::where(a.ne(a).bitwise_or(b.ne(b)), scalar_like(kNaN, r), r);
	return composite_out(out, { &x, &y }, r);
}

// ---- gamma functions -------------------------------------------------------------

// digamma of fp32 values x > 0 (or NaN / inf) as CPU's calc_digamma: the
// recurrence psi(x) = psi(x + 1) - 1 / x up to x >= 10 (ten masked steps:
// the same subtractions in the same order), psi(10) exactly there, else the
// asymptotic series ln x - 1 / 2x - z P(z), z = 1 / x^2 (none from 1e17)
at::Tensor digamma_pos(at::Tensor x)
{
	static const double A[] = { 8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
				    -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
				    8.33333333333333333333E-2 };
	at::Tensor result = at::zeros_like(x);
	at::Tensor zero = scalar_like(0.0, x), one = scalar_like(1.0, x);
	for (int i = 0; i < 10; i++) {
		at::Tensor m = x.lt(10.0);
		result = result.sub(at::where(m, x.reciprocal(), zero));
		x = x.add(at::where(m, one, zero));
	}
	at::Tensor z = x.mul(x).reciprocal();
	at::Tensor p = at::full_like(z, (float)A[0]);
	for (int i = 1; i < 7; i++)
		p = p.mul(z).add((float)A[i]);
	at::Tensor y = at::where(x.lt(1.0e17), z.mul(p), zero);
	at::Tensor series = result.add(x.log()).sub(x.reciprocal().mul(0.5)).sub(y);
	return at::where(x.eq(10.0), result.add(2.25175258906672110764), series);
}

// CPU's digamma: +-0 give -+inf, a negative integer (or -inf) NaN, other
// negatives the reflection psi(1 - x) - pi / tan(pi r), r x's distance to
// its nearest integer
at::Tensor digamma_f32(const at::Tensor &x)
{
	at::Tensor r = near_zero_fraction(x);
	at::Tensor neg = x.lt(0);
	at::Tensor pos = digamma_pos(at::where(neg, x.neg().add(1.0), x));
	at::Tensor reflected = pos.sub(r.mul(kPi).tan().reciprocal().mul(kPi));
	at::Tensor v = at::where(neg, reflected, pos);
	v = at::where(neg.bitwise_and(x.eq(x.trunc())), scalar_like(kNaN, v), v);
	return at::where(x.eq(0), at::where(sign_bit(x), scalar_like(kInf, v), scalar_like(-kInf, v)), v);
}

at::Tensor &digamma_out(const at::Tensor &x, at::Tensor &out)
{
	if (!real_float(x))
		return declined;
	return composite_out(out, { &x }, cast_back(digamma_f32(as_fp32(x)), x.scalar_type()));
}

// Hurwitz zeta(xs, q) of fp32 q for an integer order xs >= 2, as CPU's
// (Cephes) zeta: q^-xs plus the next terms (a = q + i) while i < 9 or
// a <= 9 (each element's own count, masked: the same additions in the same
// order), then the Euler-Maclaurin tail's 12 terms (their factors depend on
// xs only: doubles from the host); CPU sums in double, here in fp32 (all
// terms positive for q > 0, what the caller passes: a few ulps)
at::Tensor hurwitz_zeta(double xs, const at::Tensor &q)
{
	static const double A[] = { 12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
				    7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
				    -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18 };
	/* the count's range over finite q (NaN and the infinities take no terms that matter) */
	at::Tensor finite = at::where(q.ne(q).bitwise_or(q.abs().eq(kInf)), scalar_like(kInf, q), q);
	double qmin = q.numel() ? peek_cpu(finite.min()).item<double>() : 0.0;
	int64_t nmax = std::max<int64_t>(9, (int64_t)std::floor(9.0 - qmin) + 1);
	at::Tensor zero = scalar_like(0.0, q);
	at::Tensor s = q.pow(-xs), a = q, b = at::zeros_like(q);
	at::Tensor count = at::clamp_min(q.neg().add(9.0).floor().add(1.0), 9.0);   /* each element's term count */
	for (int64_t i = 1; i <= nmax; i++) {
		at::Tensor on = count.ge((double)i);
		a = at::where(on, a.add(1.0), a);
		at::Tensor t = a.pow(-xs);
		s = at::where(on, s.add(t), s);
		b = at::where(on, t, b);
	}
	at::Tensor w = a;
	s = s.add(b.mul(w).div(xs - 1.0)).sub(b.mul(0.5));
	double ac = 1.0, k = 0.0;
	for (int i = 0; i < 12; i++) {
		ac *= xs + k;
		b = b.div(w);
		s = s.add(b.mul(ac / A[i]));
		k += 1.0;
		ac *= xs + k;
		b = b.div(w);
	}
	return s;
}

// CPU's trigamma (polygamma of order 1): x < 1/2 reflected (pi^2 / sin^2(pi
// x), sin of x's distance to its nearest integer), six recurrence steps,
// the asymptotic series, at fp32 where CPU works in double; for x > 0 only
// (the caller declines the rest)
at::Tensor trigamma_f32(const at::Tensor &x0)
{
	at::Tensor x = x0;
	at::Tensor refl = x.lt(0.5);
	at::Tensor sn = near_zero_fraction(x).mul(kPi).sin();
	at::Tensor result = at::where(refl, sn.mul(sn).reciprocal().mul(-kPi * kPi), scalar_like(0.0, x));
	x = at::where(refl, x.neg().add(1.0), x);
	for (int i = 0; i < 6; i++) {
		result = result.add(x.mul(x).reciprocal());
		x = x.add(1.0);
	}
	at::Tensor ixx = x.mul(x).reciprocal();
	at::Tensor poly = ixx.mul(1.0 / 42).neg().add(1.0 / 30).mul(ixx).neg().add(1.0 / 6).mul(ixx);
	result = result.add(x.mul(2.0).reciprocal().add(1.0).add(poly).div(x));
	return at::where(refl, result.neg(), result);
}

// pi^(n+1) P_n(c), where d^n/dx^n cot(pi x) = pi^n P_n(cot(pi x)):
// P_0 = c, P_(k+1) = -(1 + c^2) P_k'; P_n has only odd (n even) or even
// (n odd) powers, all of one sign, so Horner in c^2 never cancels.  The
// coefficients (pi folded in) are doubles from the host; undefined when one
// leaves fp32's range (then the caller declines)
at::Tensor cot_derivative(int64_t n, const at::Tensor &c)
{
	std::vector<double> p(n + 3, 0.0);
	p[1] = 1.0;
	for (int64_t k = 0; k < n; k++) {
		std::vector<double> d(n + 3, 0.0), q(n + 3, 0.0);
		for (int64_t i = 1; i < (int64_t)p.size(); i++)
			d[i - 1] = p[i] * (double)i;
		for (int64_t i = 0; i + 2 < (int64_t)q.size(); i++) {
			q[i] -= d[i];
			q[i + 2] -= d[i];
		}
		p = q;
	}
	double scale = std::pow(kPi, (double)(n + 1));
	int64_t top = n + 1;                  /* the degree; powers of the parity of top only */
	at::Tensor c2 = c.mul(c);
	at::Tensor acc;
	for (int64_t i = top; i >= 0; i -= 2) {
		double a = p[i] * scale;
		if (!(std::fabs(a) < 3.0e38))
			return {};
		acc = acc.defined() ? acc.mul(c2).add(a) : at::full_like(c, a);
	}
	return top % 2 ? acc.mul(c) : acc;
}

// cot(pi r) for r in [-1/2, 1/2] to a few ulps relative: tan(pi (1/2 -
// |r|)) with r's sign from |r| = 1/4 on (1/2 - |r| exact there), where
// 1 / tan(pi r) is off by tan's error at pi / 2 (c = -4e-8 at r = 1/2)
at::Tensor cot_pi(const at::Tensor &r)
{
	at::Tensor a = r.abs();
	at::Tensor far = a.neg().add(0.5).mul(kPi).tan();
	at::Tensor signed_far = at::where(r.lt(0), far.neg(), far);
	return at::where(a.ge(0.25), signed_far, r.mul(kPi).tan().reciprocal());
}

// polygamma of order n >= 1 at fp32 x <= 0 by the reflection
// psi_n(x) = (-1)^n psi_n(1 - x) - pi^(n+1) P_n(cot(pi x)): CPU's Cephes
// zeta sums alternating terms there, exact in its double but cancelling in
// fp32 (0.4% off at -4.5 for n = 4); cot of x's distance to its nearest
// integer.  At the poles (x a non-positive integer) CPU's zeta gives
// (-1)^(n+1) inf, so does this.
at::Tensor polygamma_reflected(int64_t n, const at::Tensor &x, const at::Tensor &right)
{
	at::Tensor c = cot_pi(near_zero_fraction(x));
	at::Tensor d = cot_derivative(n, c);
	if (!d.defined())
		return {};
	at::Tensor v = n % 2 ? right.neg().sub(d) : right.sub(d);
	at::Tensor pole = scalar_like(n % 2 ? kInf : -kInf, v);
	return at::where(x.eq(x.floor()), pole, v);
}

// polygamma(n, x): digamma for n == 0, trigamma for 1, else CPU's
// (-1)^(n+1) exp(lgamma(n + 1)) zeta(n + 1, x), the factor as CPU's float
// computes it; x <= 0 by reflection (above)
at::Tensor &polygamma_out(int64_t n, const at::Tensor &x, at::Tensor &out)
{
	if (n == 0)
		return digamma_out(x, out);
	if (!real_float(x) || n < 0 || n > 30)
		return declined;
	at::Tensor f = as_fp32(x);
	at::Tensor neg = f.le(0);
	bool any_neg = f.numel() && peek_cpu(neg.any()).item<bool>();
	if (n == 1) {
		/* CPU's trigamma at a pole is not inf but pi^2 over the square of
		 * the rounding error of sin(pi k) in its accumulate type: those run
		 * on the CPU */
		if (any_neg && peek_cpu(neg.bitwise_and(f.eq(f.floor())).any()).item<bool>())
			return declined;
		return composite_out(out, { &x }, cast_back(trigamma_f32(f), x.scalar_type()));
	}
	float factor = std::exp(std::lgamma((float)n + 1.0f)) * (n % 2 ? 1.0f : -1.0f);
	at::Tensor q = any_neg ? at::where(neg, f.neg().add(1.0), f) : f;
	at::Tensor z = hurwitz_zeta((double)(n + 1), q).mul((double)factor);
	if (any_neg) {
		at::Tensor r = polygamma_reflected(n, f, z);
		if (!r.defined())
			return declined;
		z = at::where(neg, r, z);
	}
	return composite_out(out, { &x }, cast_back(z, x.scalar_type()));
}

// lgamma of fp32 values: x > 0 moved to y = x + k >= 8 (k < 8 masked
// steps, the product x (x+1) ... (x+k-1) kept), Stirling's series there
// less log of the product; x <= 0 by reflection ln(pi / |sin(pi r)|) -
// lgamma(1 - x) (r x's distance to its nearest integer), inf at the poles
at::Tensor lgamma_pos(at::Tensor x)
{
	at::Tensor prod = at::ones_like(x), zero = scalar_like(0.0, x);
	for (int i = 0; i < 8; i++) {
		at::Tensor m = x.lt(8.0);
		prod = at::where(m, prod.mul(x), prod);
		x = x.add(at::where(m, scalar_like(1.0, x), zero));
	}
	at::Tensor z = x.mul(x).reciprocal();
	// 1/12y - 1/360y^3 + 1/1260y^5 - 1/1680y^7
	at::Tensor corr = z.mul(-1.0 / 1680).add(1.0 / 1260).mul(z).sub(1.0 / 360).mul(z).add(1.0 / 12).div(x);
	at::Tensor st = x.sub(0.5).mul(x.log()).sub(x).add(0.91893853320467274178).add(corr);
	return st.sub(prod.log());
}

at::Tensor lgamma_f32(const at::Tensor &x)
{
	at::Tensor neg = x.le(0);
	at::Tensor pos = lgamma_pos(at::where(neg, x.neg().add(1.0), x));
	at::Tensor r = near_zero_fraction(x);
	at::Tensor refl = r.mul(kPi).sin().abs().reciprocal().mul(kPi).log().sub(pos);
	at::Tensor v = at::where(neg, refl, pos);
	v = at::where(neg.bitwise_and(x.eq(x.trunc())), scalar_like(kInf, v), v);   /* poles, -inf included */
	return at::where(x.eq(kInf), scalar_like(kInf, v), v);
}

at::Tensor &lgamma_out(const at::Tensor &x, at::Tensor &out)
{
	if (!real_float(x))
		return declined;
	return composite_out(out, { &x }, cast_back(lgamma_f32(as_fp32(x)), x.scalar_type()));
}

// ---- replacements and the logit -----------------------------------------------

// NaN -> nan, +inf -> posinf (default the dtype's largest), -inf -> neginf
at::Tensor &nan_to_num_out(const at::Tensor &x, std::optional<double> nan, std::optional<double> posinf,
			   std::optional<double> neginf, at::Tensor &out)
{
	if (!real_float(x))
		return declined;
	double big = x.scalar_type() == at::kFloat      ? std::numeric_limits<float>::max()
		     : x.scalar_type() == at::kBFloat16 ? 3.3895313892515355e38
		     : x.scalar_type() == at::kHalf     ? 65504.0
							: 0.0;
	if (big == 0.0)
		return declined;
	at::Tensor r = at::where(x.ne(x), scalar_like(nan.value_or(0.0), x), x);
	r = at::where(x.eq(kInf), scalar_like(posinf.value_or(big), x), r);
	r = at::where(x.eq(-kInf), scalar_like(neginf.value_or(-big), x), r);
	return composite_out(out, { &x }, r);
}

// CPU's logit, in the tensor's own dtype as CPU computes it (each step
// rounded to bf16 / fp16 there): z = clamp(x, lo, hi) with lo = eps and
// hi = 1 - eps in that dtype (eps given), log(z / (1 - z))
template <class T> double in_type(double v) { return (double)static_cast<float>(static_cast<T>((float)v)); }

at::Tensor logit_impl(const at::Tensor &x, std::optional<double> eps)
{
	if (!real_float(x))
		return {};
	at::Tensor z = x;
	if (eps && *eps >= 0) {
		at::ScalarType t = x.scalar_type();
		auto round = [t](double v) {
			return t == at::kBFloat16 ? in_type<c10::BFloat16>(v) : t == at::kHalf ? in_type<c10::Half>(v)
								      : (double)(float)v;
		};
		double lo = round(*eps), hi = round(1.0 - lo);
		z = at::clamp(z, lo, hi);
	}
	return z.div(z.neg().add(1.0)).log();
}

at::Tensor logit(const at::Tensor &x, std::optional<double> eps)
{
	return logit_impl(x, eps);
}

at::Tensor &logit_out(const at::Tensor &x, std::optional<double> eps, at::Tensor &out)
{
	return composite_out(out, { &x }, logit_impl(x, eps));
}

// ---- logical --------------------------------------------------------------------

// (a != 0) op (b != 0) as bool, then out's dtype; NaN is true, as CPU
at::Tensor logical(const at::Tensor &a, const at::Tensor &b, const at::Tensor &out, int op)
{
	auto ok = [](const at::Tensor &t) {
		return t.defined() && t.is_privateuseone() && !at::isComplexType(t.scalar_type());
	};
	if (!ok(a) || !ok(b) || !out.is_privateuseone() || at::isComplexType(out.scalar_type()))
		return {};
	at::Tensor x = a.scalar_type() == at::kBool ? a : a.ne(0), y = b.scalar_type() == at::kBool ? b : b.ne(0);
	at::Tensor r = op == 0 ? x.bitwise_and(y) : op == 1 ? x.bitwise_or(y) : x.bitwise_xor(y);
	return r.scalar_type() == out.scalar_type() ? r : r.to(out.scalar_type());
}

at::Tensor &logical_and_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return composite_out(out, { &a, &b }, logical(a, b, out, 0));
}

at::Tensor &logical_or_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return composite_out(out, { &a, &b }, logical(a, b, out, 1));
}

at::Tensor &logical_xor_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return composite_out(out, { &a, &b }, logical(a, b, out, 2));
}

// log2 / log10 from the exponent field (aten/pointwise/special.cpp): exact at
// powers of the base, as code counting bits with floor(log2(x)) needs
// (log(x) / ln 2 gave 12.999999 for 8192); bf16 / fp16 at fp32, rounded once
at::Tensor &log2_out(const at::Tensor &x, at::Tensor &out)
{
	if (!is_float_neuron(x))
		return declined;
	return composite_out(out, { &x }, cast_back(log2_f32(as_fp32(x)), x.scalar_type()));
}

at::Tensor &log10_out(const at::Tensor &x, at::Tensor &out)
{
	if (!is_float_neuron(x))
		return declined;
	return composite_out(out, { &x }, cast_back(log10_f32(as_fp32(x)), x.scalar_type()));
}

// CPU's logaddexp: a == b == +-inf gives a; else max + log1p(exp(-|a - b|))
at::Tensor &logaddexp_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	if (!both_float_neuron(a, b) || !out.is_privateuseone() || !at::isFloatingType(out.scalar_type()))
		return declined;
	at::Tensor x = as_fp32(a), y = as_fp32(b);
	at::Tensor m = at::maximum(x, y);
	at::Tensor r = m.add(x.sub(y).abs().neg().exp().log1p());
	r = at::where(x.abs().eq(kInf).bitwise_and(x.eq(y)), x, r);
	return composite_out(out, { &a, &b }, cast_back(r, out.scalar_type()));
}

// CPU's xlogy: NaN where y is NaN, 0 where x is 0, else x * log(y)
at::Tensor &xlogy_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	if (!both_float_neuron(a, b) || !out.is_privateuseone() || !at::isFloatingType(out.scalar_type()))
		return declined;
	at::Tensor x = as_fp32(a), y = as_fp32(b);
	at::Tensor r = at::where(x.eq(0), at::zeros({}, x.options()), x.mul(y.log()));
	r = at::where(nan_mask(y), at::full({}, kNaN, x.options()), r);
	return composite_out(out, { &a, &b }, cast_back(r, out.scalar_type()));
}

// log1p and expm1 from ScalarE's log and exp with Kahan's correction: with
// u = 1 + x, log1p(x) = log(u) x / (u - 1) (x itself where u rounds to 1),
// and with u = exp(x), expm1(x) = (u - 1) x / log(u) (x where u is 1, -1
// where u - 1 is -1); the naive forms lose every digit for small |x|
at::Tensor log1p_impl(const at::Tensor &x)
{
	if (!is_float_neuron(x))
		return {};
	at::Tensor u = x.add(1.0);
	at::Tensor r = u.log().mul(x).div(u.sub(1.0));
	return at::where(u.eq(1.0), x, at::where(x.isinf().bitwise_and(x.gt(0)), x, r));
}

at::Tensor expm1_impl(const at::Tensor &x)
{
	if (!is_float_neuron(x))
		return {};
	at::Tensor u = x.exp();
	at::Tensor um1 = u.sub(1.0);
	at::Tensor r = um1.mul(x).div(u.log());
	r = at::where(um1.eq(-1.0), um1, r);
	return at::where(u.eq(1.0), x, at::where(u.isinf(), u, r));
}

// softplus(x) = log1p(exp(beta x)) / beta, x itself where beta x > threshold
at::Tensor softplus_impl(const at::Tensor &x, const at::Scalar &beta, const at::Scalar &threshold)
{
	if (!is_float_neuron(x) || beta.isComplex() || threshold.isComplex())
		return {};
	double b = beta.toDouble();
	// in fp32 for bf16 / fp16 as CPU's opmath (exp of an fp16 x over ~11
	// overflowed: inf below the threshold)
	at::Tensor xf = as_fp32(x);
	at::Tensor bx = b == 1.0 ? xf : xf.mul(b);
	at::Tensor sp = log1p_impl(bx.exp());
	if (b != 1.0)
		sp = sp.div(b);
	at::Tensor r = at::where(bx.gt(threshold.toDouble()), xf, sp);
	return r.scalar_type() == x.scalar_type() ? r : r.to(x.scalar_type());
}

#define UNARY_COMPOSITE(fname, impl)                                                         \
	at::Tensor fname(const at::Tensor &x)                                                \
	{                                                                                   \
		at::Tensor r = impl(x);                                                     \
		if (r.defined())                                                            \
			return r;                                                           \
		return declined;                                                            \
	}                                                                                   \
	at::Tensor &fname##_out(const at::Tensor &x, at::Tensor &out)                        \
	{                                                                                   \
		at::Tensor r = out.is_privateuseone() ? impl(x) : at::Tensor();               \
		if (r.defined())                                                            \
			return write_result(out, r);                                        \
		return declined;                                                            \
	}

UNARY_COMPOSITE(log1p, log1p_impl)
UNARY_COMPOSITE(expm1, expm1_impl)

at::Tensor softplus(const at::Tensor &x, const at::Scalar &beta, const at::Scalar &threshold)
{
	return softplus_impl(x, beta, threshold);   /* undefined: declined */
}

at::Tensor &softplus_out(const at::Tensor &x, const at::Scalar &beta, const at::Scalar &threshold, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? softplus_impl(x, beta, threshold) : at::Tensor());
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_MATH)

}  // namespace neuron
