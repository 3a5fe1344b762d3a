/*
 * numerics.c -- conversions between fp32 and the narrow types, round to
 * nearest even; see numerics.h for the integer and fp8 rules.
 */
#include "numerics.h"

#include <math.h>

uint16_t dm_f32_to_bf16(float f)
{
	uint32_t u = dm_f32_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);         /* quiet NaN, keep sign */
	u += 0x7fffu + ((u >> 16) & 1u);                 /* RNE; overflow -> inf */
	return (uint16_t)(u >> 16);
}

float dm_bf16_to_f32(uint16_t h)
{
	return dm_bits_f32((uint32_t)h << 16);
}

/*
 * Generic narrowing: sign, exponent bits `eb`, mantissa bits `mb`, bias.
 * Returns the encoded magnitude bits (without sign) of |f| rounded to
 * nearest even, or `max_enc + 1` when it overflows the finite range.
 */
static uint32_t narrow_mag(float af, int eb, int mb, uint32_t max_enc)
{
	int bias = (1 << (eb - 1)) - 1;
	int emin = 1 - bias;                       /* smallest normal exponent */
	if (af == 0.0f)
		return 0;
	int e;
	float m = frexpf(af, &e);                  /* af = m * 2^e, m in [0.5, 1) */
	e -= 1;                                    /* af = (2m) * 2^e, 2m in [1, 2) */
	uint32_t enc;
	if (e < emin) {
		/* subnormal: units of 2^(emin - mb) */
		float q = ldexpf(af, mb - emin);
		float r = nearbyintf(q);               /* FE_TONEAREST: ties to even */
		enc = (uint32_t)r;                     /* may round up into the normal range */
	} else {
		float q = ldexpf(2.0f * m, mb);        /* in [2^mb, 2^(mb+1)) */
		float r = nearbyintf(q);
		uint32_t mant = (uint32_t)r;
		if (mant == (1u << (mb + 1))) {        /* rounded up to the next binade */
			mant >>= 1;
			e += 1;
		}
		enc = ((uint32_t)(e + bias) << mb) | (mant & ((1u << mb) - 1u));
	}
	return enc > max_enc ? max_enc + 1 : enc;
}

uint16_t dm_f32_to_fp16(float f)
{
	uint32_t sign = (dm_f32_bits(f) >> 16) & 0x8000u;
	if (isnan(f))
		return (uint16_t)(sign | 0x7e00u);
	float af = fabsf(f);
	if (isinf(af))
		return (uint16_t)(sign | 0x7c00u);
	uint32_t mag = narrow_mag(af, 5, 10, 0x7bffu);
	if (mag > 0x7bffu)
		mag = 0x7c00u;                         /* overflow -> inf */
	return (uint16_t)(sign | mag);
}

static float widen(uint32_t sign, uint32_t exp, uint32_t mant, int eb, int mb)
{
	int bias = (1 << (eb - 1)) - 1;
	float v;
	if (exp == 0)
		v = ldexpf((float)mant, 1 - bias - mb);
	else
		v = ldexpf((float)(mant | (1u << mb)), (int)exp - bias - mb);
	return sign ? -v : v;
}

float dm_fp16_to_f32(uint16_t h)
{
	uint32_t sign = h >> 15, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
	if (exp == 0x1f)
		return mant ? dm_bits_f32((sign << 31) | 0x7fc00000u | (mant << 13))
			    : (sign ? -INFINITY : INFINITY);
	return widen(sign, exp, mant, 5, 10);
}

/* e4m3fn: max finite S.1111.110 = 448; S.1111.111 is NaN; no infinity */
uint8_t dm_f32_to_fp8e4m3fn(float f)
{
	uint8_t sign = (uint8_t)((dm_f32_bits(f) >> 24) & 0x80u);
	if (isnan(f))
		return (uint8_t)(sign | 0x7fu);
	float af = fabsf(f);
	uint32_t mag = isinf(af) ? 0x7fu : narrow_mag(af, 4, 3, 0x7eu);
	if (mag > 0x7eu)
		mag = 0x7eu;                           /* saturate to 448 */
	return (uint8_t)(sign | mag);
}

float dm_fp8e4m3fn_to_f32(uint8_t b)
{
	uint32_t sign = b >> 7, exp = (b >> 3) & 0xfu, mant = b & 0x7u;
	if (exp == 0xf && mant == 0x7)
		return sign ? -NAN : NAN;
	return widen(sign, exp, mant, 4, 3);
}

/* The IEEE-like fp8 types (e4m3: 240 the largest finite; e5m2: 57344): the
 * top exponent holds infinity (mantissa 0) and NaN, the quiet NaN with the
 * mantissa's top bit (ml_dtypes' encodings); overflow rounds to infinity. */
static uint8_t to_fp8_ieee(float f, int eb, int mb)
{
	uint8_t sign = (uint8_t)((dm_f32_bits(f) >> 24) & 0x80u);
	uint32_t inf = ((1u << eb) - 1u) << mb;
	if (isnan(f))
		return (uint8_t)(sign | inf | (1u << (mb - 1)));
	float af = fabsf(f);
	if (isinf(af))
		return (uint8_t)(sign | inf);
	uint32_t mag = narrow_mag(af, eb, mb, inf - 1u);
	return (uint8_t)(sign | (mag > inf - 1u ? inf : mag));
}

static float from_fp8_ieee(uint8_t b, int eb, int mb)
{
	uint32_t sign = b >> 7, exp = (b >> mb) & ((1u << eb) - 1u), mant = b & ((1u << mb) - 1u);
	if (exp == (1u << eb) - 1u)
		return mant ? (sign ? -NAN : NAN) : (sign ? -INFINITY : INFINITY);
	return widen(sign, exp, mant, eb, mb);
}

uint8_t dm_f32_to_fp8e4m3(float f) { return to_fp8_ieee(f, 4, 3); }
float dm_fp8e4m3_to_f32(uint8_t b) { return from_fp8_ieee(b, 4, 3); }
uint8_t dm_f32_to_fp8e5m2(float f) { return to_fp8_ieee(f, 5, 2); }
float dm_fp8e5m2_to_f32(uint8_t b) { return from_fp8_ieee(b, 5, 2); }

float dm_round_tf32(float f)
{
	uint32_t u = dm_f32_bits(f);
	if ((u & 0x7f800000u) == 0x7f800000u)
		return f;                                  /* inf / NaN unchanged */
	u += 0xfffu + ((u >> 13) & 1u);                /* RNE to 10 mantissa bits */
	return dm_bits_f32(u & ~0x1fffu);
}

static int64_t sat(float v, int64_t lo, int64_t hi)
{
	if (isnan(v))
		return 0;
	if (v <= (float)lo)
		return lo;
	if (v >= (float)hi)
		return hi;
	return (int64_t)v;                             /* truncates toward zero */
}

float dm_load(int dtype, const void *p)
{
	switch (dtype) {
	case ISA_DT_fp32:
	case ISA_DT_tf32: { float f; memcpy(&f, p, 4); return f; }
	case ISA_DT_bf16: { uint16_t h; memcpy(&h, p, 2); return dm_bf16_to_f32(h); }
	case ISA_DT_fp16: { uint16_t h; memcpy(&h, p, 2); return dm_fp16_to_f32(h); }
	case ISA_DT_fp8_e4m3fn: return dm_fp8e4m3fn_to_f32(*(const uint8_t *)p);
	case ISA_DT_fp8_e4m3: return dm_fp8e4m3_to_f32(*(const uint8_t *)p);
	case ISA_DT_fp8_e5m2: return dm_fp8e5m2_to_f32(*(const uint8_t *)p);
	case ISA_DT_int8: return (float)*(const int8_t *)p;
	case ISA_DT_uint8: return (float)*(const uint8_t *)p;
	case ISA_DT_bool: return *(const uint8_t *)p ? 1.0f : 0.0f;
	case ISA_DT_int16: { int16_t v; memcpy(&v, p, 2); return (float)v; }
	case ISA_DT_uint16: { uint16_t v; memcpy(&v, p, 2); return (float)v; }
	case ISA_DT_int32: { int32_t v; memcpy(&v, p, 4); return (float)v; }
	case ISA_DT_uint32: { uint32_t v; memcpy(&v, p, 4); return (float)v; }
	default: return 0.0f;
	}
}

void dm_store(int dtype, void *p, float v)
{
	switch (dtype) {
	case ISA_DT_fp32: memcpy(p, &v, 4); break;
	case ISA_DT_tf32: { float r = dm_round_tf32(v); memcpy(p, &r, 4); break; }
	case ISA_DT_bf16: { uint16_t h = dm_f32_to_bf16(v); memcpy(p, &h, 2); break; }
	case ISA_DT_fp16: { uint16_t h = dm_f32_to_fp16(v); memcpy(p, &h, 2); break; }
	case ISA_DT_fp8_e4m3fn: *(uint8_t *)p = dm_f32_to_fp8e4m3fn(v); break;
	case ISA_DT_fp8_e4m3: *(uint8_t *)p = dm_f32_to_fp8e4m3(v); break;
	case ISA_DT_fp8_e5m2: *(uint8_t *)p = dm_f32_to_fp8e5m2(v); break;
	case ISA_DT_int8: *(int8_t *)p = (int8_t)sat(v, INT8_MIN, INT8_MAX); break;
	case ISA_DT_uint8: *(uint8_t *)p = (uint8_t)sat(v, 0, UINT8_MAX); break;
	case ISA_DT_bool: *(uint8_t *)p = (v != 0.0f && !isnan(v)) ? 1 : 0; break;
	case ISA_DT_int16: { int16_t x = (int16_t)sat(v, INT16_MIN, INT16_MAX); memcpy(p, &x, 2); break; }
	case ISA_DT_uint16: { uint16_t x = (uint16_t)sat(v, 0, UINT16_MAX); memcpy(p, &x, 2); break; }
	case ISA_DT_int32: { int32_t x = (int32_t)sat(v, INT32_MIN, INT32_MAX); memcpy(p, &x, 4); break; }
	case ISA_DT_uint32: { uint32_t x = (uint32_t)sat(v, 0, UINT32_MAX); memcpy(p, &x, 4); break; }
	default: break;
	}
}

static DM_HOT void dm_load_row_clones(int dtype, const void *src, float *dst, uint64_t n)
{
	if (dtype == ISA_DT_fp32 || dtype == ISA_DT_tf32) {
		memcpy(dst, src, n * 4);
		return;
	}
	const uint8_t *s = src;
	unsigned esz = isa_dtype_size(dtype);
	if (dtype == ISA_DT_bf16) {
		/* widening is a 16-bit shift: a loop the compiler vectorizes */
		for (uint64_t i = 0; i < n; i++) {
			uint16_t h;
			memcpy(&h, s + 2 * i, 2);
			uint32_t u = (uint32_t)h << 16;
			memcpy(&dst[i], &u, 4);
		}
		return;
	}
	/* masks and indices: exact widening casts, vectorized */
	if (dtype == ISA_DT_uint8 || dtype == ISA_DT_bool) {
		for (uint64_t i = 0; i < n; i++)
			dst[i] = (float)s[i];
		return;
	}
	if (dtype == ISA_DT_int8) {
		for (uint64_t i = 0; i < n; i++)
			dst[i] = (float)(int8_t)s[i];
		return;
	}
	for (uint64_t i = 0; i < n; i++)
		dst[i] = dm_load(dtype, s + i * esz);
}

void dm_load_row(int dtype, const void *src, float *dst, uint64_t n)
{
	dm_load_row_clones(dtype, src, dst, n);
}

static DM_HOT void dm_store_row_clones(int dtype, void *dst, const float *src, uint64_t n)
{
	if (dtype == ISA_DT_fp32) {
		memcpy(dst, src, n * 4);
		return;
	}
	uint8_t *d = dst;
	unsigned esz = isa_dtype_size(dtype);
	if (dtype == ISA_DT_bf16) {
		for (uint64_t i = 0; i < n; i++) {
			uint16_t h = dm_f32_to_bf16(src[i]);
			memcpy(d + 2 * i, &h, 2);
		}
		return;
	}
	for (uint64_t i = 0; i < n; i++)
		dm_store(dtype, d + i * esz, src[i]);
}

void dm_store_row(int dtype, void *dst, const float *src, uint64_t n)
{
	dm_store_row_clones(dtype, dst, src, n);
}

/* strided runs (the innermost dim of a view): no per-element dtype switch
 * for the common float types */
static DM_HOT void dm_load_run_clones(int dtype, const void *src, int64_t step, unsigned esz, float *out, uint64_t n)
{
	const uint8_t *a = src;
	if (step == (int64_t)esz) {
		dm_load_row(dtype, a, out, n);
		return;
	}
	if (step == 0) {                     /* a broadcast: one element repeated */
		float v = dm_load(dtype, a);
		for (uint64_t i = 0; i < n; i++)
			out[i] = v;
		return;
	}
	switch (dtype) {
	case ISA_DT_fp32:
		for (uint64_t i = 0; i < n; i++)
			memcpy(&out[i], a + (int64_t)i * step, 4);
		break;
	case ISA_DT_bf16:
		for (uint64_t i = 0; i < n; i++) {
			uint16_t h;
			memcpy(&h, a + (int64_t)i * step, 2);
			out[i] = dm_bf16_to_f32(h);
		}
		break;
	default:
		for (uint64_t i = 0; i < n; i++)
			out[i] = dm_load(dtype, a + (int64_t)i * step);
		break;
	}
}

void dm_load_run(int dtype, const void *src, int64_t step, unsigned esz, float *out, uint64_t n)
{
	dm_load_run_clones(dtype, src, step, esz, out, n);
}

static DM_HOT void dm_store_run_clones(int dtype, void *dst, int64_t step, unsigned esz, const float *in, uint64_t n)
{
	uint8_t *a = dst;
	if (step == (int64_t)esz) {
		dm_store_row(dtype, a, in, n);
		return;
	}
	switch (dtype) {
	case ISA_DT_fp32:
		for (uint64_t i = 0; i < n; i++)
			memcpy(a + (int64_t)i * step, &in[i], 4);
		break;
	case ISA_DT_bf16:
		for (uint64_t i = 0; i < n; i++) {
			uint16_t h = dm_f32_to_bf16(in[i]);
			memcpy(a + (int64_t)i * step, &h, 2);
		}
		break;
	default:
		for (uint64_t i = 0; i < n; i++)
			dm_store(dtype, a + (int64_t)i * step, in[i]);
		break;
	}
}

void dm_store_run(int dtype, void *dst, int64_t step, unsigned esz, const float *in, uint64_t n)
{
	dm_store_run_clones(dtype, dst, step, esz, in, n);
}
