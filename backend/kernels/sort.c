/*
 * sort.c -- sort along rows: a bitonic network on GpSimd.
 *
 *   nk_sort_program: "x" [rows, cols] (fp32/bf16/fp16) -> "values" (same
 *   dtype) and "indices" (int32) [rows, cols], ascending or descending,
 *   stable (ties keep index order), NaN last (first when descending) as
 *   PyTorch's sort.  "scratch_k" / "scratch_i" (fp32, one tile of rows) carry
 *   the tile between its two SBUF layouts.
 *
 * A row is padded to N = 2^k elements (+inf keys) and spread over R
 * partitions of C = N / R elements (R = 1 up to C_MAX, so G = 128 / R rows
 * share a tile).  Keys compare as (key, index) pairs, all distinct, so the
 * network sorts them totally and ties come out in index order.  Every
 * compare-exchange step pairs element i with i ^ d: for d < C both sit in
 * one partition in layout A (i = p * C + f); for d >= C (>= R) in layout B
 * (i = f * R + p), reached by a store to HBM scratch and a strided reload.
 * Descending blocks of a bitonic stage are sorted ascending on negated
 * (key, index) pairs (a sign pattern from iota), so every step is the same
 * ascending compare-exchange: masks by tensor_tensor compares, then four
 * selects into the other buffer set.
 */
#include "kernels.h"

#include <math.h>

#define P 128u
#define C_MAX 4096u

typedef struct sort_ctx {
	isa_program *p;
	isa_diag *diag;
	uint32_t parts;     /* G * R */
	uint64_t C;
	uint32_t dma_done;  /* completions on semaphore 0 */
} sort_ctx;

enum { K0, K1, I0, I1, M1, M2, M3, SIGN, NBUF };

static uint64_t buf_off(int b, uint64_t C)
{
	/* masks are C/2 elements; every slot is C fp32 words for simplicity */
	return (uint64_t)b * C * 4;
}

static isa_ap row_ap(sort_ctx *s, int buf, int dt)
{
	return isa_ap_sbuf(dt, 0, s->parts, buf_off(buf, s->C), (uint32_t)s->C);
}

/* the lo / hi halves of every pair (i, i ^ d) inside a row of `n` elements */
static isa_ap half_ap(sort_ctx *s, int buf, uint64_t n, uint64_t d, bool hi)
{
	isa_ap a = isa_ap_sbuf(ISA_DT_fp32, 0, s->parts, buf_off(buf, s->C) + (hi ? d * 4 : 0), (uint32_t)(n / 2));
	int32_t stride[2] = { (int32_t)(2 * d), 1 };
	uint32_t size[2] = { (uint32_t)(n / (2 * d)), (uint32_t)d };
	return isa_ap_dims(a, 2, stride, size);
}

static isa_ap mask_ap(sort_ctx *s, int buf, uint64_t n)
{
	return isa_ap_sbuf(ISA_DT_fp32, 0, s->parts, buf_off(buf, s->C), (uint32_t)(n / 2));
}

static isa_status tt(sort_ctx *s, isa_ap d, isa_ap a, isa_ap b, int alu)
{
	return isa_builder_tensor_tensor(s->p, ISA_ENGINE_GPSIMD, d, a, b, alu);
}

static isa_status ts(sort_ctx *s, isa_ap d, isa_ap a, int op0, isa_imm s0, int op1, isa_imm s1)
{
	return isa_builder_tensor_scalar(s->p, ISA_ENGINE_GPSIMD, d, a, op0, s0, op1, s1);
}

static isa_status sel(sort_ctx *s, isa_ap d, isa_ap pred, isa_ap t, isa_ap f)
{
	isa_instr in = isa_instr_init(ISA_OP_select);
	in.ap[ISA_AP_DST] = d;
	in.ap[ISA_AP_SRC] = pred;
	in.ap[ISA_AP_SRC1] = t;
	in.ap[ISA_AP_SRC2] = f;
	in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC | 1u << ISA_AP_SRC1 | 1u << ISA_AP_SRC2;
	return isa_builder_emit(s->p, ISA_ENGINE_GPSIMD, &in, s->diag);
}

/* one ascending compare-exchange of (key, index) pairs at distance d (in
 * the current layout's free index), from buffers (k, i) into (k ^ 1, i ^ 1) */
static isa_status exchange(sort_ctx *s, int k, int i, uint64_t d)
{
	uint64_t n = s->C;
	isa_ap lk = half_ap(s, k, n, d, false), hk = half_ap(s, k, n, d, true);
	isa_ap li = half_ap(s, i, n, d, false), hi = half_ap(s, i, n, d, true);
	int k2 = k == K0 ? K1 : K0, i2 = i == I0 ? I1 : I0;
	isa_ap m1 = mask_ap(s, M1, n), m2 = mask_ap(s, M2, n), m3 = mask_ap(s, M3, n);
	isa_status st;
	/* swap when hi < lo, or equal keys and hi's index is smaller */
	if ((st = tt(s, m1, hk, lk, ISA_ALU_is_lt)) || (st = tt(s, m2, hk, lk, ISA_ALU_is_equal)) ||
	    (st = tt(s, m3, hi, li, ISA_ALU_is_lt)) || (st = tt(s, m2, m2, m3, ISA_ALU_multiply)) ||
	    (st = tt(s, m1, m1, m2, ISA_ALU_max)))
		return st;
	if ((st = sel(s, half_ap(s, k2, n, d, false), m1, hk, lk)) ||
	    (st = sel(s, half_ap(s, k2, n, d, true), m1, lk, hk)) ||
	    (st = sel(s, half_ap(s, i2, n, d, false), m1, hi, li)) ||
	    (st = sel(s, half_ap(s, i2, n, d, true), m1, li, hi)))
		return st;
	return ISA_OK;
}

/* dst[p, f] = p * pmul + f * fmul (int32), p counted from dst's first partition */
static isa_status iota(sort_ctx *s, isa_ap dst, int32_t pmul, int32_t fmul)
{
	isa_instr in = isa_instr_init(ISA_OP_iota);
	in.ap[ISA_AP_DST] = dst;
	in.ap_mask = 1u << ISA_AP_DST;
	in.imm[0] = isa_imm_i32(0);
	in.imm[1] = isa_imm_i32(pmul);
	in.nivec = 1;
	in.ivec[0] = fmul;
	return isa_builder_emit(s->p, ISA_ENGINE_GPSIMD, &in, s->diag);
}

/* sign = 1 - 2 * bit `bit` of the element's position, multiplied into keys
 * and indices.  pos = partition * pmul + free * fmul (pmul = C in layout A:
 * the row's offset only adds bits above log2 N). */
static isa_status apply_sign(sort_ctx *s, int k, int i, unsigned bit, int32_t pmul, int32_t fmul)
{
	isa_ap sg = row_ap(s, SIGN, ISA_DT_int32);
	isa_status st;
	isa_ap sf = row_ap(s, SIGN, ISA_DT_fp32);
	if ((st = iota(s, sg, pmul, fmul)) ||
	    (st = ts(s, sg, sg, ISA_ALU_shift_right, isa_imm_i32((int32_t)bit), ISA_ALU_bitwise_and, isa_imm_i32(1))) ||
	    (st = isa_builder_tensor_copy(s->p, ISA_ENGINE_GPSIMD, sf, sg)) ||
	    (st = ts(s, sf, sf, ISA_ALU_multiply, isa_imm_f32(-2.0f), ISA_ALU_add, isa_imm_f32(1.0f))) ||
	    (st = tt(s, row_ap(s, k, ISA_DT_fp32), row_ap(s, k, ISA_DT_fp32), sf, ISA_ALU_multiply)) ||
	    (st = tt(s, row_ap(s, i, ISA_DT_fp32), row_ap(s, i, ISA_DT_fp32), sf, ISA_ALU_multiply)))
		return st;
	return ISA_OK;
}

static isa_status dma(sort_ctx *s, isa_ap dst, isa_ap src)
{
	int d = isa_builder_dma(s->p, "", ISA_DMA_DIRECT, &dst, &src, NULL, s->diag);
	if (d < 0)
		return s->diag->code;
	isa_status st = isa_builder_dma_copy(s->p, ISA_ENGINE_GPSIMD, (uint32_t)d, s->dma_done % 4, 0, 1);
	s->dma_done++;
	return st;
}

static isa_status dma_wait(sort_ctx *s)
{
	return isa_builder_sem_wait(s->p, ISA_ENGINE_GPSIMD, 0, ISA_ALU_is_ge, s->dma_done);
}

/* moves buffers k, i between layouts through the scratch tensors (to_b:
 * A -> B) for G rows of N = R * C elements */
static isa_status relayout(sort_ctx *s, int k, int i, int tk, int ti, uint32_t G, uint32_t R, bool to_b)
{
	uint64_t C = s->C, N = R * C;
	int bufs[2] = { k, i }, tens[2] = { tk, ti };
	isa_status st;
	for (int pass = 0; pass < 2; pass++) {   /* 0: store, 1: reload */
		bool natural = pass == 0 ? to_b : !to_b;   /* this pass's SBUF side is layout A */
		for (int b = 0; b < 2; b++) {
			if (natural) {
				isa_ap sb = row_ap(s, bufs[b], ISA_DT_fp32);
				isa_ap hb = isa_ap_hbm(ISA_DT_fp32, (uint32_t)tens[b], 0, s->parts, (int64_t)C, (uint32_t)C);
				if ((st = pass == 0 ? dma(s, hb, sb) : dma(s, sb, hb)))
					return st;
				continue;
			}
			for (uint32_t r = 0; r < G; r++) {
				/* partition p' of row r: elements r*N + p' + f*R */
				isa_ap sb = isa_ap_sbuf(ISA_DT_fp32, r * R, R, buf_off(bufs[b], C), (uint32_t)C);
				isa_ap hb = isa_ap_hbm(ISA_DT_fp32, (uint32_t)tens[b], (uint64_t)r * N * 4, R, 1, (uint32_t)C);
				int32_t stride = (int32_t)R;
				uint32_t size = (uint32_t)C;
				hb = isa_ap_dims(hb, 1, &stride, &size);
				if ((st = pass == 0 ? dma(s, hb, sb) : dma(s, sb, hb)))
					return st;
			}
		}
		if ((st = dma_wait(s)))
			return st;
	}
	return ISA_OK;
}

/* a sorted row (values from key buffer k, indices from int32 buffer ix)
 * from partitions [part0, ...) of layout A to row `row` of the outputs */
static isa_status store_row(sort_ctx *s, const nk_sort *o, int tv, int tn, int k, int ix, uint64_t row,
			    uint32_t part0)
{
	uint64_t C = s->C, full = o->cols / C, tail = o->cols % C;
	unsigned esz = isa_dtype_size(o->dtype);
	isa_status st;
	/* `full` whole partitions, then `tail` elements of the next */
	for (int piece = 0; piece < 2; piece++) {
		uint64_t parts = piece ? (tail ? 1 : 0) : full, n = piece ? tail : C;
		uint64_t first = row * o->cols + (piece ? full * C : 0);
		uint32_t p0 = part0 + (piece ? (uint32_t)full : 0);
		if (!parts)
			continue;
		if ((st = dma(s, isa_ap_hbm(o->dtype, (uint32_t)tv, first * esz, (uint32_t)parts, (int64_t)n, (uint32_t)n),
			      isa_ap_sbuf(ISA_DT_fp32, p0, (uint32_t)parts, buf_off(k, C), (uint32_t)n))) ||
		    (st = dma(s, isa_ap_hbm(ISA_DT_int32, (uint32_t)tn, first * 4, (uint32_t)parts, (int64_t)n, (uint32_t)n),
			      isa_ap_sbuf(ISA_DT_int32, p0, (uint32_t)parts, buf_off(ix, C), (uint32_t)n))))
			return st;
	}
	return ISA_OK;
}

isa_status nk_sort_program(int target, const nk_sort *o, uint8_t **bin, size_t *len, isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	uint64_t N = 2;
	while (N < o->cols)
		N *= 2;
	if (o->cols < 2 || o->rows == 0 || N > (uint64_t)C_MAX * P || o->rows * N > ((uint64_t)1 << 40) ||
	    (o->dtype != ISA_DT_fp32 && o->dtype != ISA_DT_bf16 && o->dtype != ISA_DT_fp16)) {
		nk_fail(diag, ISA_E_LIMIT, "sort kernel: %llu rows of %llu elements",
			(unsigned long long)o->rows, (unsigned long long)o->cols);
		return ISA_E_LIMIT;
	}
	uint32_t R = N <= C_MAX ? 1 : (uint32_t)(N / C_MAX);
	uint64_t C = N / R;
	uint32_t G = P / R;
	if (G > o->rows)
		G = (uint32_t)o->rows;
	unsigned logC = 0, logN = 0;
	while (((uint64_t)1 << logC) < C)
		logC++;
	while (((uint64_t)1 << logN) < N)
		logN++;
	isa_status st = ISA_E_NOMEM;
	isa_program *p = isa_program_new(target);
	if (!p)
		return st;
	p->num_semaphores = 1;
	sort_ctx s = { p, diag, G * R, C, 0 };
	uint64_t sx[2] = { o->rows, o->cols }, sc[1] = { (uint64_t)G * N };
	int tx = isa_builder_tensor(p, "x", o->dtype, ISA_TK_INPUT, 2, sx, diag);
	int tv = isa_builder_tensor(p, "values", o->dtype, ISA_TK_OUTPUT, 2, sx, diag);
	int tn = isa_builder_tensor(p, "indices", ISA_DT_int32, ISA_TK_OUTPUT, 2, sx, diag);
	int tk = isa_builder_tensor(p, "scratch_k", ISA_DT_fp32, ISA_TK_OUTPUT, 1, sc, diag);
	int ti = isa_builder_tensor(p, "scratch_i", ISA_DT_fp32, ISA_TK_OUTPUT, 1, sc, diag);
	if (tx < 0 || tv < 0 || tn < 0 || tk < 0 || ti < 0) {
		st = diag->code;
		goto free_program;
	}
	const float TOT = (float)((uint64_t)G * N);   /* NaN / padding index offsets */
	unsigned esz = isa_dtype_size(o->dtype);
	for (uint64_t r0 = 0; r0 < o->rows; r0 += G) {
		uint32_t g = (uint32_t)(o->rows - r0 < G ? o->rows - r0 : G);
		int k = K0, i = I0;
		/* keys: padding (+inf once descending keys are negated below),
		 * then the rows (cast to fp32 by the DMA) */
		float sgn = o->descending ? -1.0f : 1.0f;
		if ((st = dma_wait(&s)) ||
		    (st = isa_builder_memset(p, ISA_ENGINE_GPSIMD, row_ap(&s, k, ISA_DT_fp32), isa_imm_f32(sgn * INFINITY))))
			goto free_program;
		for (uint32_t r = 0; r < g; r++) {
			uint64_t full = o->cols / C, tail = o->cols % C;
			uint64_t src = (r0 + r) * o->cols * esz;
			if (full && (st = dma(&s, isa_ap_sbuf(ISA_DT_fp32, r * R, (uint32_t)full, buf_off(k, C), (uint32_t)C),
					      isa_ap_hbm(o->dtype, (uint32_t)tx, src, (uint32_t)full, (int64_t)C, (uint32_t)C))))
				goto free_program;
			if (tail && (st = dma(&s, isa_ap_sbuf(ISA_DT_fp32, r * R + (uint32_t)full, 1, buf_off(k, C), (uint32_t)tail),
					      isa_ap_hbm(o->dtype, (uint32_t)tx, src + full * C * esz, 1, (int64_t)tail,
							 (uint32_t)tail))))
				goto free_program;
		}
		/* indices: position p * C + f (the row's own offset only adds
		 * bits above log2 N, the same for the whole row); padding gets
		 * + 2 TOT so it sorts after NaN (+ TOT) */
		isa_ap ia = row_ap(&s, i, ISA_DT_int32), fi = row_ap(&s, i, ISA_DT_fp32);
		isa_ap kk = row_ap(&s, k, ISA_DT_fp32), m = row_ap(&s, M1, ISA_DT_fp32), m2 = row_ap(&s, M2, ISA_DT_fp32);
		if ((st = iota(&s, ia, (int32_t)C, 1)) ||
		    (st = isa_builder_tensor_copy(p, ISA_ENGINE_GPSIMD, fi, ia)) || (st = dma_wait(&s)))
			goto free_program;
		/* padding (local position >= cols, from a per-row iota) */
		if (o->cols < N) {
			for (uint32_t r = 0; r < g; r++) {
				isa_ap lp = isa_ap_sbuf(ISA_DT_int32, r * R, R, buf_off(M2, C), (uint32_t)C);
				if ((st = iota(&s, lp, (int32_t)C, 1)))
					goto free_program;
			}
			isa_ap lpi = row_ap(&s, M2, ISA_DT_int32);
			if ((st = ts(&s, lpi, lpi, ISA_ALU_is_ge, isa_imm_i32((int32_t)o->cols), ISA_ALU_multiply,
				     isa_imm_i32(2))) ||
			    (st = isa_builder_tensor_copy(p, ISA_ENGINE_GPSIMD, m2, lpi)) ||
			    (st = ts(&s, m2, m2, ISA_ALU_multiply, isa_imm_f32(TOT), ISA_ALU_bypass, isa_imm_f32(0))) ||
			    (st = tt(&s, fi, fi, m2, ISA_ALU_add)))
				goto free_program;
		}
		/* NaN (x != x): key -> +inf, index + TOT; descending negates both
		 * key and NaN's placement (NaN first) */
		isa_ap inf = row_ap(&s, M3, ISA_DT_fp32);
		if ((st = tt(&s, m, kk, kk, ISA_ALU_not_equal)) ||
		    (st = isa_builder_memset(p, ISA_ENGINE_GPSIMD, inf, isa_imm_f32(sgn * INFINITY))) ||
		    (st = ts(&s, kk, kk, ISA_ALU_multiply, isa_imm_f32(sgn), ISA_ALU_bypass, isa_imm_f32(0))) ||
		    (st = sel(&s, kk, m, inf, kk)) ||
		    (st = ts(&s, m, m, ISA_ALU_multiply, isa_imm_f32(sgn * TOT), ISA_ALU_bypass, isa_imm_f32(0))) ||
		    (st = tt(&s, fi, fi, m, ISA_ALU_add)))
			goto free_program;

		/* the bitonic network */
		bool in_b = false;
		for (unsigned sb = 1; sb <= logN; sb++) {
			bool signed_stage = sb < logN;
			for (int j = (int)sb - 1; j >= 0; j--) {
				bool want_b = (unsigned)j >= logC;
				if (want_b != in_b) {
					if ((st = relayout(&s, k, i, tk, ti, g, R, want_b)))
						goto free_program;
					in_b = want_b;
				}
				if (j == (int)sb - 1 && signed_stage &&
				    (st = in_b ? apply_sign(&s, k, i, sb - (unsigned)__builtin_ctz(R), 0, 1)
					       : apply_sign(&s, k, i, sb, (int32_t)C, 1)))
					goto free_program;
				uint64_t d = (uint64_t)1 << j;
				if ((st = exchange(&s, k, i, in_b ? d / R : d)))
					goto free_program;
				k = k == K0 ? K1 : K0;
				i = i == I0 ? I1 : I0;
			}
			/* the stage ends with d = 1, in layout A */
			if (signed_stage && (st = apply_sign(&s, k, i, sb, (int32_t)C, 1)))
				goto free_program;
		}
		/* values: key * sgn, NaN where the index carries the NaN offset;
		 * indices: position mod N */
		kk = row_ap(&s, k, ISA_DT_fp32);
		fi = row_ap(&s, i, ISA_DT_fp32);
		isa_ap nan = row_ap(&s, M3, ISA_DT_fp32);
		if ((st = ts(&s, m, fi, ISA_ALU_is_lt, isa_imm_f32(0.0f), ISA_ALU_bypass, isa_imm_f32(0))) ||
		    (st = ts(&s, m2, fi, ISA_ALU_is_ge, isa_imm_f32(TOT), ISA_ALU_bypass, isa_imm_f32(0))) ||
		    (st = tt(&s, m, m, m2, ISA_ALU_max)) ||
		    (st = isa_builder_memset(p, ISA_ENGINE_GPSIMD, nan, isa_imm_f32(NAN))) ||
		    (st = ts(&s, kk, kk, ISA_ALU_multiply, isa_imm_f32(sgn), ISA_ALU_bypass, isa_imm_f32(0))) ||
		    (st = sel(&s, kk, m, nan, kk)) ||
		    (st = ts(&s, fi, fi, ISA_ALU_mod, isa_imm_f32((float)N), ISA_ALU_bypass, isa_imm_f32(0))) ||
		    (st = isa_builder_tensor_copy(p, ISA_ENGINE_GPSIMD, row_ap(&s, I0 == i ? I1 : I0, ISA_DT_int32), fi)))
			goto free_program;
		int iout = i == I0 ? I1 : I0;
		for (uint32_t r = 0; r < g; r++)
			if ((st = store_row(&s, o, tv, tn, k, iout, r0 + r, r * R)))
				goto free_program;
	}
	if ((st = dma_wait(&s)) || (st = nk_encode(p, bin, len, diag)))
		goto free_program;
	st = ISA_OK;
free_program:
	isa_program_free(p);
	return st;
}

uint64_t nk_sort_scratch(const nk_sort *o)
{
	uint64_t N = 2;
	while (N < o->cols)
		N *= 2;
	uint64_t R = N <= C_MAX ? 1 : N / C_MAX, G = P / R;
	if (G > o->rows)
		G = o->rows;
	return G * N;
}
