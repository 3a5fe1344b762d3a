/*
 * ops_tensor.c -- TensorE semantics: load_stationary, multiply_moving and
 * the TensorE form of nc_transpose.  Inputs are read at their own precision
 * (tf32 inputs are rounded to 10 mantissa bits), products and sums are fp32,
 * results accumulate in fp32 PSUM.  The product comes from OpenBLAS sgemm:
 * the values are the hardware's (exact bf16/fp8 products, fp32 sums) up to
 * the summation order, which is fixed for a given build and thread count.
 * bf16 x bf16 products use the CPU's bf16 dot product where it has one
 * (gemm_bf16.c): the same sums in k order, without widening the tiles.
 */
#include "ops.h"

#include "gemm_bf16.h"
#include "numerics.h"

#include <cblas.h>
#include <stdlib.h>

/* contraction rows the stationary buffer holds: 128 partitions, four
 * values each for MX data */
#define STAT_MAX_K (4 * ISA_NUM_PARTITIONS)

static void round_tf32_rows(float *v, uint64_t n, int dtype)
{
	if (dtype != ISA_DT_tf32)
		return;
	for (uint64_t i = 0; i < n; i++)
		v[i] = dm_round_tf32(v[i]);
}

/* A bf16 stationary is kept as packed k-pairs when the CPU has the bf16
 * product (read straight from SBUF when its rows are contiguous), and
 * widened to fp32 only if a moving tile of another type meets it. */
dm_fault_kind dm_op_load_stationary(dm_core *c, const dm_binding *b, int engine, int64_t index,
				    const isa_instr *in, dm_fault *f)
{
	dm_view s;
	dm_fault_kind k = dm_view_of(c, b, &in->ap[ISA_AP_SRC], false, &s, engine, index,
				     "stationary", f);
	if (k)
		return k;
	uint64_t n = (uint64_t)s.nparts * s.nfree;
	if (!c->stationary) {
		c->stationary = malloc(STAT_MAX_K * ISA_NUM_PARTITIONS * sizeof(float));
		if (!c->stationary)
			return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "stationary buffer");
	}
	c->stat_k = s.nparts;
	c->stat_m = (uint32_t)s.nfree;
	c->stat_dtype = s.dtype;
	c->stat_paired = false;
	if (isa_dtype_is_mx(s.dtype)) {
		/* MX: four contraction rows per partition, dequantized */
		dm_view sc;
		if ((k = dm_view_of(c, b, &in->ap[ISA_AP_SRC1], false, &sc, engine, index, "scale", f)))
			return k;
		dm_mx_dequantize(&s, &sc, c->stationary);
		c->stat_k = 4 * s.nparts;
		c->stat_widened = true;
		return DM_OK;
	}
	if (s.dtype == ISA_DT_bf16 && dm_gemm_bf16_available()) {
		if (!c->stat_pairs) {
			c->stat_pairs = malloc(ISA_NUM_PARTITIONS / 2 * ISA_NUM_PARTITIONS * sizeof(uint32_t));
			if (!c->stat_pairs)
				return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "stationary buffer");
		}
		if (s.contiguous && s.pstep % 2 == 0) {
			dm_pack_bf16_pairs((const uint16_t *)s.base, s.pstep / 2, c->stat_k, c->stat_m,
					   c->stat_m, c->stat_pairs);
			c->stat_paired = true;
			c->stat_widened = false;
			return DM_OK;
		}
		dm_view_read(&s, c->stationary);        /* K rows of M */
		dm_pack_bf16_pairs_f32(c->stationary, c->stat_k, c->stat_m, c->stat_m, c->stat_pairs);
		c->stat_paired = true;
		c->stat_widened = true;
		return DM_OK;
	}
	dm_view_read(&s, c->stationary);        /* K rows of M */
	round_tf32_rows(c->stationary, n, s.dtype);
	c->stat_widened = true;
	return DM_OK;
}

/* the fp32 stationary of a packed one (its values are exact bf16) */
static void widen_stationary(dm_core *c)
{
	if (c->stat_widened)
		return;
	uint32_t M = c->stat_m;
	for (uint32_t kk = 0; kk < c->stat_k; kk++)
		for (uint32_t m = 0; m < M; m++) {
			uint32_t p = c->stat_pairs[(uint64_t)(kk / 2) * M + m];
			c->stationary[(uint64_t)kk * M + m] = dm_bits_f32(kk % 2 ? p << 16 : p & 0xffff0000u);
		}
	c->stat_widened = true;
}

/* output rows [lo, hi) of a bf16 product (rows are independent: host
 * threads may split them) */
typedef struct gemm_job {
	uint32_t        m, n, k;
	const uint32_t *a, *b;
	uint32_t        ldb;
	float          *c;
	int64_t         ldc;
	bool            acc;
} gemm_job;

static void gemm_rows(void *arg, uint32_t lo, uint32_t hi)
{
	const gemm_job *j = arg;
	dm_gemm_bf16(hi - lo, j->n, j->k, j->a + lo, j->m, j->b, j->ldb, j->c + (int64_t)lo * j->ldc,
		     j->ldc, j->acc);
}

/* k-pair rows [lo, hi) of a moving tile packed for the bf16 product */
typedef struct pack_job {
	const uint16_t *rows;
	int64_t         stride;
	uint32_t        k, n, ld;
	uint32_t       *out;
} pack_job;

static void pack_rows(void *arg, uint32_t lo, uint32_t hi)
{
	const pack_job *j = arg;
	uint32_t k_end = 2 * hi < j->k ? 2 * hi : j->k;
	dm_pack_bf16_pairs(j->rows + (int64_t)(2 * lo) * j->stride, j->stride, k_end - 2 * lo, j->n,
			   j->ld, j->out + (uint64_t)lo * j->ld);
}

/* a moving tile worth packing on several host threads */
#define PAR_MIN_PACK (16u << 10)

/* a product worth splitting over host threads (a few us of dot products;
 * a hand-off costs ~0.4 us while the pool's threads are awake) */
#define PAR_MIN_MACS (512u << 10)

/* multiply_moving for a packed bf16 stationary and a bf16 moving tile */
static dm_fault_kind multiply_bf16(dm_core *c, const dm_binding *b, int engine, int64_t index,
				   const dm_view *mv, const dm_view *dv, bool acc, dm_fault *f)
{
	uint32_t K = c->stat_k, M = c->stat_m, N = (uint32_t)mv->nfree;
	uint32_t ld = (N + 15) & ~15u;
	uint32_t *pairs = (uint32_t *)dm_tmp(c, 0, (uint64_t)(K + 1) / 2 * ld);
	if (!pairs)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "matmul staging");
	if (mv->contiguous && mv->pstep % 2 == 0) {
		pack_job pj = { (const uint16_t *)mv->base, mv->pstep / 2, K, N, ld, pairs };
		dm_par_rows(b, pack_rows, &pj, (K + 1) / 2, (uint64_t)K * N >= PAR_MIN_PACK);
	} else {
		float *m = dm_tmp(c, 1, (uint64_t)K * N);
		if (!m)
			return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "matmul staging");
		dm_view_read(mv, m);
		dm_pack_bf16_pairs_f32(m, K, N, ld, pairs);
	}
	gemm_job j = { M, N, K, c->stat_pairs, pairs, ld, NULL, 0, acc };
	bool big = (uint64_t)M * N * K >= PAR_MIN_MACS;
	if (dv->contiguous && dv->dtype == ISA_DT_fp32 && dv->pstep % 4 == 0 && !b->check_numerics) {
		j.c = (float *)dv->base;
		j.ldc = dv->pstep / 4;
		dm_par_rows(b, gemm_rows, &j, M, big);
		dm_psum_mark(c, dv);
		return DM_OK;
	}
	float *out = dm_tmp(c, 1, (uint64_t)M * N);
	if (!out)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "matmul staging");
	if (acc)
		dm_view_read(dv, out);
	j.c = out;
	j.ldc = N;
	dm_par_rows(b, gemm_rows, &j, M, big);
	dm_fault_kind k = dm_check_finite(b, out, (uint64_t)M * N, engine, index,
					  "multiply_moving dst", f);
	if (k)
		return k;
	dm_view_write(dv, out);
	dm_psum_mark(c, dv);
	return DM_OK;
}

dm_fault_kind dm_op_multiply_moving(dm_core *c, const dm_binding *b, int engine, int64_t index,
				    const isa_instr *in, dm_fault *f)
{
	dm_view mv, dv;
	dm_fault_kind k;
	bool acc = in->flags & ISA_FLAG_ACCUMULATE;

	if ((k = dm_view_of(c, b, &in->ap[ISA_AP_SRC], false, &mv, engine, index, "moving", f)) ||
	    (k = dm_view_of(c, b, &in->ap[ISA_AP_DST], true, &dv, engine, index, "dst", f)))
		return k;
	if (acc && !dm_psum_initialized(c, &dv))
		return dm_fault_set(f, DM_FAULT_UNINIT_PSUM, engine, index,
				    (uint64_t)(dv.base - c->psum),
				    "accumulate into PSUM partitions [%u, %u) bank never written in this run",
				    dv.start, dv.start + dv.nparts);

	if (c->stat_paired && mv.dtype == ISA_DT_bf16)
		return multiply_bf16(c, b, engine, index, &mv, &dv, acc, f);

	widen_stationary(c);
	uint32_t K = c->stat_k, M = c->stat_m, N = (uint32_t)mv.nfree;
	/* an fp32 moving tile with contiguous rows is the GEMM's B in place */
	const float *mov;
	int ldb = (int)N;
	if (isa_dtype_is_mx(mv.dtype)) {
		dm_view sc;
		if ((k = dm_view_of(c, b, &in->ap[ISA_AP_SRC1], false, &sc, engine, index,
				    "moving_scale", f)))
			return k;
		float *m = dm_tmp(c, 0, (uint64_t)K * N);
		if (!m)
			return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "matmul staging");
		dm_mx_dequantize(&mv, &sc, m);
		mov = m;
	} else if (mv.contiguous && mv.dtype == ISA_DT_fp32 && mv.pstep % 4 == 0) {
		mov = (const float *)mv.base;
		ldb = (int)(mv.pstep / 4);
	} else {
		float *m = dm_tmp(c, 0, (uint64_t)K * N);
		if (!m)
			return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "matmul staging");
		dm_view_read(&mv, m);
		round_tf32_rows(m, (uint64_t)K * N, mv.dtype);
		mov = m;
	}

	/* out[M,N] = stationary[K,M]^T @ moving[K,N] (+ out).  A contiguous
	 * fp32 PSUM tile (the usual case) is the GEMM's C matrix in place, rows
	 * one partition apart; anything else goes through a staging tile. */
	if (dv.contiguous && dv.dtype == ISA_DT_fp32 && !b->check_numerics) {
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f,
			    c->stationary, (int)M, mov, ldb, acc ? 1.0f : 0.0f, (float *)dv.base,
			    (int)(dv.pstep / 4));
		dm_psum_mark(c, &dv);
		return DM_OK;
	}
	float *out = dm_tmp(c, 1, (uint64_t)M * N);
	if (!out)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "matmul staging");
	if (acc)
		dm_view_read(&dv, out);
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f,
		    c->stationary, (int)M, mov, ldb, acc ? 1.0f : 0.0f, out, (int)N);
	if ((k = dm_check_finite(b, out, (uint64_t)M * N, engine, index, "multiply_moving dst", f)))
		return k;
	dm_view_write(&dv, out);
	dm_psum_mark(c, &dv);
	return DM_OK;
}

/* dst[f, p] = src[p, f], with the dtype cast of the destination */
dm_fault_kind dm_transpose(dm_core *c, const dm_binding *b, int engine, int64_t index,
			   const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv;
	dm_fault_kind k;
	if ((k = dm_views_src_dst(c, b, in, engine, index, &sv, &dv, f)))
		return k;
	uint64_t P = sv.nparts, F = sv.nfree;
	float *s = dm_tmp(c, 0, P * F), *d = dm_tmp(c, 1, P * F);
	if (!s || !d)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "transpose staging");
	dm_view_read(&sv, s);
	/* in 32 x 32 blocks: both the reads and the strided writes stay in cache */
	for (uint64_t p0 = 0; p0 < P; p0 += 32)
		for (uint64_t j0 = 0; j0 < F; j0 += 32) {
			uint64_t pe = p0 + 32 < P ? p0 + 32 : P, je = j0 + 32 < F ? j0 + 32 : F;
			for (uint64_t p = p0; p < pe; p++)
				for (uint64_t j = j0; j < je; j++)
					d[j * P + p] = s[p * F + j];
		}
	if ((k = dm_check_finite(b, d, P * F, engine, index, "nc_transpose dst", f)))
		return k;
	dm_view_write(&dv, d);
	dm_psum_mark(c, &dv);
	return DM_OK;
}

dm_fault_kind dm_op_nc_transpose(dm_core *c, const dm_binding *b, int engine, int64_t index,
				 const isa_instr *in, dm_fault *f)
{
	return dm_transpose(c, b, engine, index, in, f);
}
