/*
 * numerics.h -- element conversions of the engines.  Engines compute in FP32
 * and cast on input and output (../shared/HARDWARE.md); every narrowing float
 * conversion rounds to nearest, ties to even.
 *
 * Float -> integer: truncate toward zero and saturate to the type's range;
 * NaN becomes 0.  (PyTorch leaves out-of-range float->int undefined; the
 * hardware saturates, and a saturating rule keeps results deterministic.)
 * fp8_e4m3fn (no infinities, max 448, S.1111.111 is NaN): values beyond its
 * range saturate to +-448, as TensorE/ScalarE output casts do; fp8_e4m3
 * (NKI's float8_e4m3: IEEE-like, max 240, S.1111.000 infinity) and fp8_e5m2
 * follow IEEE (overflow rounds to infinity).
 */
#ifndef NSIM_DM_NUMERICS_H
#define NSIM_DM_NUMERICS_H

#include <stdint.h>
#include <string.h>

#include "neuronsim/isa.h"

/* The row loops most of a simulated program's host time runs in are also
 * built for wider x86 vectors, picked at load time (as static functions
 * behind the public names: GCC exports a clone's resolver whatever its
 * visibility).  Every variant gives the same bits: the conversions are
 * integer operations and the float ones IEEE operations per element (C11
 * mode: no FMA contraction, no fast-math). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DM_HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DM_HOT
#endif

static inline uint32_t dm_f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float dm_bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* e^x for the activation functions, written to vectorize (the libm call in
 * a row loop does not): 2^k * e^r with r = x - k ln 2, |r| <= ln2 / 2, the
 * polynomial to r^8 in double, one rounding to fp32 at the end -- within
 * 1 ulp of the exact value (equal to glibc's expf but in ~1 of 10^5
 * inputs), the same bits on every CPU.  Out-of-range inputs saturate to
 * inf / 0 through the same rounding; NaN passes through. */
static inline float dm_expf(float x)
{
	double xd = x != x ? 0.0 : x < -104.0f ? -104.0 : x > 89.0f ? 89.0 : (double)x;
	double t = xd * 0x1.71547652b82fep0 + 0x1.8p52;      /* k = round(x / ln 2) in t's low bits */
	double kd = t - 0x1.8p52;
	double r = xd - kd * 0x1.62e42fefa39efp-1;
	double p = 1.0 / 40320;
	p = p * r + 1.0 / 5040;
	p = p * r + 1.0 / 720;
	p = p * r + 1.0 / 120;
	p = p * r + 1.0 / 24;
	p = p * r + 1.0 / 6;
	p = p * r + 0.5;
	p = p * r + 1.0;
	p = p * r + 1.0;
	uint64_t tb, sb;
	memcpy(&tb, &t, sizeof(tb));
	sb = (tb + 1023) << 52;                                 /* 2^k, k in [-150, 129] */
	double s;
	memcpy(&s, &sb, sizeof(s));
	float y = (float)(p * s);
	return x != x ? x : y;
}

uint16_t dm_f32_to_bf16(float f);
float    dm_bf16_to_f32(uint16_t h);
uint16_t dm_f32_to_fp16(float f);
float    dm_fp16_to_f32(uint16_t h);
uint8_t  dm_f32_to_fp8e4m3fn(float f);
float    dm_fp8e4m3fn_to_f32(uint8_t b);
uint8_t  dm_f32_to_fp8e4m3(float f);
float    dm_fp8e4m3_to_f32(uint8_t b);
uint8_t  dm_f32_to_fp8e5m2(float f);
float    dm_fp8e5m2_to_f32(uint8_t b);
float    dm_round_tf32(float f);            /* keep 10 mantissa bits, RNE */

/* one element of `dtype` at p <-> fp32 (int32/uint32 beyond 2^24 round) */
float dm_load(int dtype, const void *p);
void  dm_store(int dtype, void *p, float v);

/* whole rows: n elements, contiguous (the common fast path) */
void dm_load_row(int dtype, const void *src, float *dst, uint64_t n);
void dm_store_row(int dtype, void *dst, const float *src, uint64_t n);
/* the same for n elements `step` bytes apart (step 0: one element repeated
 * on load); esz is the dtype's size */
void dm_load_run(int dtype, const void *src, int64_t step, unsigned esz, float *dst, uint64_t n);
void dm_store_run(int dtype, void *dst, int64_t step, unsigned esz, const float *src, uint64_t n);

#endif /* NSIM_DM_NUMERICS_H */
