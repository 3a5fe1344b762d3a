/*
 * gemm_bf16.c -- TensorE's product for bf16 stationary and moving tiles on
 * x86 CPUs with AVX512_BF16: out[M,N] (+)= A[K,M]^T B[K,N].
 *
 * Why: bf16 matmuls are most of a training step's host time, and OpenBLAS
 * (Debian builds it without sbgemm) needs both tiles widened to fp32 first
 * and then runs at half the rate of the CPU's bf16 dot-product instruction.
 *
 * VDPBF16PS adds two bf16 products to an fp32 lane, each product exact (8-bit
 * significands) and each addition rounded to nearest-even: the hardware's
 * "exact products, fp32 sums".  Pairs are packed with k in the half the
 * instruction adds first, so every output sums k = 0, 1, 2, ... in order --
 * the same order (and, on the CPUs tested, the same bits) as the sgemm path.
 * One difference: the instruction treats subnormal inputs and results as
 * zero (DAZ/FTZ); values below 1.2e-38 are flushed where sgemm keeps them.
 */
#include "gemm_bf16.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define DM_BF16_KERNEL 1
#endif

bool dm_gemm_bf16_available(void)
{
#ifdef DM_BF16_KERNEL
	static int have = -1;
	if (have < 0) {
		__builtin_cpu_init();
		have = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f");
	}
	return have;
#else
	return false;
#endif
}

/* (k even, k odd) -> one 32-bit pair, the even k in the half added first */
static inline uint32_t pair(uint16_t even, uint16_t odd)
{
	return (uint32_t)even << 16 | odd;
}

void dm_pack_bf16_pairs(const uint16_t *rows, int64_t row_stride, uint32_t k, uint32_t n,
			uint32_t ld, uint32_t *out)
{
	for (uint32_t j = 0; 2 * j < k; j++) {
		const uint16_t *r0 = rows + (int64_t)(2 * j) * row_stride;
		const uint16_t *r1 = 2 * j + 1 < k ? r0 + row_stride : NULL;
		uint32_t *d = out + (uint64_t)j * ld;
		if (r1)
			for (uint32_t i = 0; i < n; i++)
				d[i] = pair(r0[i], r1[i]);
		else
			for (uint32_t i = 0; i < n; i++)
				d[i] = pair(r0[i], 0);
		for (uint32_t i = n; i < ld; i++)
			d[i] = 0;
	}
}

void dm_pack_bf16_pairs_f32(const float *rows, uint32_t k, uint32_t n, uint32_t ld, uint32_t *out)
{
	/* the values are bf16 widened: the top half of each fp32 is exact */
	for (uint32_t j = 0; 2 * j < k; j++) {
		const float *r0 = rows + (uint64_t)(2 * j) * n;
		uint32_t *d = out + (uint64_t)j * ld;
		for (uint32_t i = 0; i < n; i++) {
			uint16_t e = (uint16_t)(dm_f32_bits(r0[i]) >> 16);
			uint16_t o = 2 * j + 1 < k ? (uint16_t)(dm_f32_bits(r0[n + i]) >> 16) : 0;
			d[i] = pair(e, o);
		}
		for (uint32_t i = n; i < ld; i++)
			d[i] = 0;
	}
}

#ifdef DM_BF16_KERNEL
#define BF16_TARGET __attribute__((target("avx512f,avx512bf16,avx512vl,avx512bw")))
/* the accumulators must stay in registers: unroll the register-tile loops
 * fully whatever the optimization level */
#define UNROLL _Pragma("GCC unroll 8")

/* MR output rows x NT vectors of 16 columns; the last vector stores `mask` */
static inline __attribute__((always_inline)) BF16_TARGET void
tile(int MR, int NT, uint32_t k2, const uint32_t *a, uint32_t lda, const uint32_t *b, uint32_t ldb,
     float *c, int64_t ldc, bool acc, __mmask16 mask)
{
	__m512 s[8][3];
	UNROLL for (int i = 0; i < MR; i++)
		UNROLL for (int t = 0; t < NT; t++)
			s[i][t] = _mm512_setzero_ps();
	for (uint32_t j = 0; j < k2; j++) {
		__m512bh v[3];
		UNROLL for (int t = 0; t < NT; t++)
			v[t] = (__m512bh)_mm512_loadu_si512(b + (uint64_t)j * ldb + 16 * t);
		const uint32_t *ap = a + (uint64_t)j * lda;
		UNROLL for (int i = 0; i < MR; i++) {
			__m512bh w = (__m512bh)_mm512_set1_epi32((int)ap[i]);
			UNROLL for (int t = 0; t < NT; t++)
				s[i][t] = _mm512_dpbf16_ps(s[i][t], w, v[t]);
		}
	}
	UNROLL for (int i = 0; i < MR; i++)
		UNROLL for (int t = 0; t < NT; t++) {
			float *o = c + i * ldc + 16 * t;
			__mmask16 m = t == NT - 1 ? mask : 0xffff;
			__m512 r = s[i][t];
			if (acc)
				r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(m, o));
			_mm512_mask_storeu_ps(o, m, r);
		}
}

/* all output rows of one block of NT vectors */
static inline __attribute__((always_inline)) BF16_TARGET void
column_block(int NT, uint32_t m, uint32_t k2, const uint32_t *a, uint32_t lda, const uint32_t *b,
	     uint32_t ldb, float *c, int64_t ldc, bool acc, __mmask16 mask)
{
	uint32_t i = 0;
	for (; i + 8 <= m; i += 8)
		tile(8, NT, k2, a + i, lda, b, ldb, c + i * ldc, ldc, acc, mask);
	for (; i < m; i++)
		tile(1, NT, k2, a + i, lda, b, ldb, c + i * ldc, ldc, acc, mask);
}

static BF16_TARGET void gemm_avx512(uint32_t m, uint32_t n, uint32_t k, const uint32_t *a,
				     uint32_t lda, const uint32_t *b, uint32_t ldb, float *c, int64_t ldc,
				     bool acc)
{
	uint32_t k2 = (k + 1) / 2, j = 0;
	for (; j + 48 <= n; j += 48)
		column_block(3, m, k2, a, lda, b + j, ldb, c + j, ldc, acc, 0xffff);
	if (j < n) {
		uint32_t rest = n - j, nt = (rest + 15) / 16;
		__mmask16 mask = (__mmask16)(rest % 16 ? (1u << (rest % 16)) - 1 : 0xffff);
		if (nt == 1)
			column_block(1, m, k2, a, lda, b + j, ldb, c + j, ldc, acc, mask);
		else if (nt == 2)
			column_block(2, m, k2, a, lda, b + j, ldb, c + j, ldc, acc, mask);
		else
			column_block(3, m, k2, a, lda, b + j, ldb, c + j, ldc, acc, mask);
	}
}
#endif

/* the same sums one element at a time (CPUs without the instruction; the
 * unit test's reference), subnormals kept */
static void gemm_scalar(uint32_t m, uint32_t n, uint32_t k, const uint32_t *a, uint32_t lda,
			const uint32_t *b, uint32_t ldb, float *c, int64_t ldc, bool acc)
{
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t x = 0; x < n; x++) {
			float s = 0.0f;
			for (uint32_t j = 0; 2 * j < k; j++) {
				uint32_t pa = a[(uint64_t)j * lda + i], pb = b[(uint64_t)j * ldb + x];
				s += dm_bits_f32(pa & 0xffff0000u) * dm_bits_f32(pb & 0xffff0000u);
				s += dm_bits_f32(pa << 16) * dm_bits_f32(pb << 16);
			}
			float *o = c + i * ldc + x;
			*o = acc ? *o + s : s;
		}
}

void dm_gemm_bf16(uint32_t m, uint32_t n, uint32_t k, const uint32_t *a, uint32_t lda,
		  const uint32_t *b, uint32_t ldb, float *c, int64_t ldc, bool acc)
{
#ifdef DM_BF16_KERNEL
	if (dm_gemm_bf16_available()) {
		gemm_avx512(m, n, k, a, lda, b, ldb, c, ldc, acc);
		return;
	}
#endif
	gemm_scalar(m, n, k, a, lda, b, ldb, c, ldc, acc);
}
