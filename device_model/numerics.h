/*
 * numerics.h -- element conversions of the engines.  Engines compute in FP32
 * and cast on input and output (../shared/HARDWARE.md); every narrowing float
 * conversion rounds to nearest, ties to even.
 *
 * Float -> integer: truncate toward zero and saturate to the type's range;
 * NaN becomes 0.  (PyTorch leaves out-of-range float->int undefined; the
 * hardware saturates, and a saturating rule keeps results deterministic.)
 * fp8_e4m3 is the "fn" variant (no infinities, max 448, S.1111.111 is NaN):
 * values beyond its range saturate to +-448, as TensorE/ScalarE output casts
 * do; fp8_e5m2 follows IEEE (overflow rounds to infinity).
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

uint16_t dm_f32_to_bf16(float f);
float    dm_bf16_to_f32(uint16_t h);
uint16_t dm_f32_to_fp16(float f);
float    dm_fp16_to_f32(uint16_t h);
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
