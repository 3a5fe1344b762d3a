/*
 * gemm_bf16.h -- TensorE's bf16 x bf16 product from packed k-pairs (see
 * gemm_bf16.c): a[j * lda + i] pairs rows 2j and 2j+1 of the stationary's
 * column i; b[j * ldb + x] the same of the moving's column x.
 */
#ifndef NSIM_DM_GEMM_BF16_H
#define NSIM_DM_GEMM_BF16_H

#include <stdbool.h>
#include <stdint.h>

#include "numerics.h"

/* whether this CPU runs the bf16 product faster than sgemm (AVX512_BF16) */
bool dm_gemm_bf16_available(void);

/* out[i * ldc + x] (+)= sum over k of a(k, i) * b(k, x), k in order;
 * c: m rows of n fp32; a's pair rows lda apart, b's ldb (>= n) apart.  Each
 * output row is computed alone: any split of the rows gives the same bits. */
void dm_gemm_bf16(uint32_t m, uint32_t n, uint32_t k, const uint32_t *a, uint32_t lda,
		  const uint32_t *b, uint32_t ldb, float *c, int64_t ldc, bool acc);

/* k rows of n bf16 (row_stride elements apart) -> (k+1)/2 rows of ld pairs,
 * zero past n and past an odd k */
void dm_pack_bf16_pairs(const uint16_t *rows, int64_t row_stride, uint32_t k, uint32_t n,
			uint32_t ld, uint32_t *out);
/* the same from k rows of n bf16-valued fp32, packed densely */
void dm_pack_bf16_pairs_f32(const float *rows, uint32_t k, uint32_t n, uint32_t ld, uint32_t *out);

#endif /* NSIM_DM_GEMM_BF16_H */
