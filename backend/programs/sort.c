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
 *
 * GpSimd does it all, on the tile pipeline (pipeline.h) with one buffer
 * set: a tile is G rows, loaded, sorted (each relayout a store to scratch,
 * the stores drained, a reload) and stored.
 */
#include "programs.h"
#include "pipeline.h"

#include <math.h>
#include <string.h>

#define P 128u
#define C_MAX 4096u
#define GP ISA_ENGINE_GPSIMD

typedef struct sort_ctx {
	nk_pipe pp;
	const nk_sort *o;
	uint32_t parts;     /* G * R */
	uint32_t R, G;
	uint64_t C, N;
	unsigned logC, logN;
	int tx, tv, tn, tk, ti;
	float sgn, TOT;     /* -1 descending; NaN / padding index offset G * N */
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

/* GpSimd's instructions, sticky (the pipeline keeps the first failure) */
static void tt(sort_ctx *s, isa_ap d, isa_ap a, isa_ap b, int alu) { nk_em_tt(&s->pp.em, GP, d, a, b, alu); }

static void ts(sort_ctx *s, isa_ap d, isa_ap a, int op0, isa_imm s0, int op1, isa_imm s1)
{
	if (!s->pp.em.st)
		nk_pipe_check(&s->pp, isa_builder_tensor_scalar(s->pp.em.p, GP, d, a, op0, s0, op1, s1));
}

static void tsf(sort_ctx *s, isa_ap d, isa_ap a, int op0, float s0)
{
	ts(s, d, a, op0, isa_imm_f32(s0), ISA_ALU_bypass, isa_imm_f32(0));
}

static void copy(sort_ctx *s, isa_ap d, isa_ap a) { nk_em_copy(&s->pp.em, GP, d, a); }

static void fill(sort_ctx *s, isa_ap d, float v)
{
	if (!s->pp.em.st)
		nk_pipe_check(&s->pp, isa_builder_memset(s->pp.em.p, GP, d, isa_imm_f32(v)));
}

static void sel(sort_ctx *s, isa_ap d, isa_ap pred, isa_ap t, isa_ap f) { nk_em_select(&s->pp.em, GP, d, pred, t, f); }

/* dst[p, f] = p * pmul + f * fmul (int32), p counted from dst's first partition */
static void iota(sort_ctx *s, isa_ap dst, int32_t pmul, int32_t fmul)
{
	isa_instr in = isa_instr_init(ISA_OP_iota);
	in.ap[ISA_AP_DST] = dst;
	in.ap_mask = 1u << ISA_AP_DST;
	in.imm[0] = isa_imm_i32(0);
	in.imm[1] = isa_imm_i32(pmul);
	in.nivec = 1;
	in.ivec[0] = fmul;
	nk_em_emit(&s->pp.em, GP, &in);
}

/* DMAs of the tile, queues in turn */
static unsigned queue(sort_ctx *s) { return (s->pp.loads + s->pp.stores) % 4; }
static void load(sort_ctx *s, isa_ap dst, isa_ap src) { nk_pipe_load(&s->pp, dst, src, queue(s)); }
static void store(sort_ctx *s, isa_ap dst, isa_ap src) { nk_pipe_store(&s->pp, dst, src, queue(s)); }

/* one ascending compare-exchange of (key, index) pairs at distance d (in
 * the current layout's free index), from buffers (k, i) into (k ^ 1, i ^ 1) */
static void exchange(sort_ctx *s, int k, int i, uint64_t d)
{
	uint64_t n = s->C;
	isa_ap lk = half_ap(s, k, n, d, false), hk = half_ap(s, k, n, d, true);
	isa_ap li = half_ap(s, i, n, d, false), hi = half_ap(s, i, n, d, true);
	int k2 = k == K0 ? K1 : K0, i2 = i == I0 ? I1 : I0;
	isa_ap m1 = mask_ap(s, M1, n), m2 = mask_ap(s, M2, n), m3 = mask_ap(s, M3, n);
	/* swap when hi < lo, or equal keys and hi's index is smaller */
	tt(s, m1, hk, lk, ISA_ALU_is_lt);
	tt(s, m2, hk, lk, ISA_ALU_is_equal);
	tt(s, m3, hi, li, ISA_ALU_is_lt);
	tt(s, m2, m2, m3, ISA_ALU_multiply);
	tt(s, m1, m1, m2, ISA_ALU_max);
	sel(s, half_ap(s, k2, n, d, false), m1, hk, lk);
	sel(s, half_ap(s, k2, n, d, true), m1, lk, hk);
	sel(s, half_ap(s, i2, n, d, false), m1, hi, li);
	sel(s, half_ap(s, i2, n, d, true), m1, li, hi);
}

/* sign = 1 - 2 * bit `bit` of the element's position, multiplied into keys
 * and indices.  pos = partition * pmul + free * fmul (pmul = C in layout A:
 * the row's offset only adds bits above log2 N). */
static void apply_sign(sort_ctx *s, int k, int i, unsigned bit, int32_t pmul, int32_t fmul)
{
	isa_ap sg = row_ap(s, SIGN, ISA_DT_int32), sf = row_ap(s, SIGN, ISA_DT_fp32);
	iota(s, sg, pmul, fmul);
	ts(s, sg, sg, ISA_ALU_shift_right, isa_imm_i32((int32_t)bit), ISA_ALU_bitwise_and, isa_imm_i32(1));
	copy(s, sf, sg);
	ts(s, sf, sf, ISA_ALU_multiply, isa_imm_f32(-2.0f), ISA_ALU_add, isa_imm_f32(1.0f));
	tt(s, row_ap(s, k, ISA_DT_fp32), row_ap(s, k, ISA_DT_fp32), sf, ISA_ALU_multiply);
	tt(s, row_ap(s, i, ISA_DT_fp32), row_ap(s, i, ISA_DT_fp32), sf, ISA_ALU_multiply);
}

/* moves buffers k, i between layouts through the scratch tensors (to_b:
 * A -> B) for G rows of N = R * C elements: stored, drained, reloaded */
static void relayout(sort_ctx *s, int k, int i, uint32_t G, bool to_b)
{
	uint64_t C = s->C, N = s->R * C;
	uint32_t R = s->R;
	int bufs[2] = { k, i }, tens[2] = { s->tk, s->ti };
	for (int pass = 0; pass < 2; pass++) {   /* 0: store, 1: reload */
		bool natural = pass == 0 ? to_b : !to_b;   /* this pass's SBUF side is layout A */
		for (int b = 0; b < 2; b++) {
			if (natural) {
				isa_ap sb = row_ap(s, bufs[b], ISA_DT_fp32);
				isa_ap hb = isa_ap_hbm(ISA_DT_fp32, (uint32_t)tens[b], 0, s->parts, (int64_t)C, (uint32_t)C);
				pass == 0 ? store(s, hb, sb) : load(s, sb, hb);
				continue;
			}
			for (uint32_t r = 0; r < G; r++) {
				/* partition p' of row r: elements r*N + p' + f*R */
				isa_ap sb = isa_ap_sbuf(ISA_DT_fp32, r * R, R, buf_off(bufs[b], C), (uint32_t)C);
				isa_ap hb = isa_ap_hbm(ISA_DT_fp32, (uint32_t)tens[b], (uint64_t)r * N * 4, R, 1, (uint32_t)C);
				int32_t stride = (int32_t)R;
				uint32_t size = (uint32_t)C;
				hb = isa_ap_dims(hb, 1, &stride, &size);
				pass == 0 ? store(s, hb, sb) : load(s, sb, hb);
			}
		}
		if (pass == 0)
			nk_pipe_drain(&s->pp, GP);
		else
			nk_pipe_compute(&s->pp, GP);
	}
}

/* a sorted row (values from key buffer k, indices from int32 buffer ix)
 * from partitions [part0, ...) of layout A to row `row` of the outputs */
static void store_row(sort_ctx *s, int k, int ix, uint64_t row, uint32_t part0)
{
	const nk_sort *o = s->o;
	uint64_t C = s->C, full = o->cols / C, tail = o->cols % C;
	unsigned esz = isa_dtype_size(o->dtype);
	/* `full` whole partitions, then `tail` elements of the next */
	for (int piece = 0; piece < 2; piece++) {
		uint64_t parts = piece ? (tail ? 1 : 0) : full, n = piece ? tail : C;
		uint64_t first = row * o->cols + (piece ? full * C : 0);
		uint32_t p0 = part0 + (piece ? (uint32_t)full : 0);
		if (!parts)
			continue;
		store(s, isa_ap_hbm(o->dtype, (uint32_t)s->tv, first * esz, (uint32_t)parts, (int64_t)n, (uint32_t)n),
		      isa_ap_sbuf(ISA_DT_fp32, p0, (uint32_t)parts, buf_off(k, C), (uint32_t)n));
		store(s, isa_ap_hbm(ISA_DT_int32, (uint32_t)s->tn, first * 4, (uint32_t)parts, (int64_t)n, (uint32_t)n),
		      isa_ap_sbuf(ISA_DT_int32, p0, (uint32_t)parts, buf_off(ix, C), (uint32_t)n));
	}
}

/* the tile's g rows from r0: keys (padding +inf once descending keys are
 * negated, then the rows, cast to fp32 by the DMA) into buffer k, their
 * positions into i */
static void load_rows(sort_ctx *s, uint64_t r0, uint32_t g, int k, int i)
{
	const nk_sort *o = s->o;
	uint64_t C = s->C, full = o->cols / C, tail = o->cols % C;
	unsigned esz = isa_dtype_size(o->dtype);
	fill(s, row_ap(s, k, ISA_DT_fp32), s->sgn * INFINITY);
	for (uint32_t r = 0; r < g; r++) {
		uint64_t src = (r0 + r) * o->cols * esz;
		if (full)
			load(s, isa_ap_sbuf(ISA_DT_fp32, r * s->R, (uint32_t)full, buf_off(k, C), (uint32_t)C),
			     isa_ap_hbm(o->dtype, (uint32_t)s->tx, src, (uint32_t)full, (int64_t)C, (uint32_t)C));
		if (tail)
			load(s, isa_ap_sbuf(ISA_DT_fp32, r * s->R + (uint32_t)full, 1, buf_off(k, C), (uint32_t)tail),
			     isa_ap_hbm(o->dtype, (uint32_t)s->tx, src + full * C * esz, 1, (int64_t)tail, (uint32_t)tail));
	}
	/* indices: position p * C + f (the row's own offset only adds bits
	 * above log2 N, the same for the whole row) */
	iota(s, row_ap(s, i, ISA_DT_int32), (int32_t)C, 1);
	copy(s, row_ap(s, i, ISA_DT_fp32), row_ap(s, i, ISA_DT_int32));
	nk_pipe_compute(&s->pp, GP);
}

/* padding gets index + 2 TOT so it sorts after NaN; NaN (x != x): key ->
 * +inf, index + TOT; descending negates both key and NaN's placement (NaN
 * first) */
static void mark(sort_ctx *s, uint32_t g, int k, int i)
{
	isa_ap fi = row_ap(s, i, ISA_DT_fp32), kk = row_ap(s, k, ISA_DT_fp32);
	isa_ap m = row_ap(s, M1, ISA_DT_fp32), m2 = row_ap(s, M2, ISA_DT_fp32), inf = row_ap(s, M3, ISA_DT_fp32);
	if (s->o->cols < s->N) {   /* padding: local position >= cols, from a per-row iota */
		for (uint32_t r = 0; r < g; r++)
			iota(s, isa_ap_sbuf(ISA_DT_int32, r * s->R, s->R, buf_off(M2, s->C), (uint32_t)s->C), (int32_t)s->C, 1);
		isa_ap lpi = row_ap(s, M2, ISA_DT_int32);
		ts(s, lpi, lpi, ISA_ALU_is_ge, isa_imm_i32((int32_t)s->o->cols), ISA_ALU_multiply, isa_imm_i32(2));
		copy(s, m2, lpi);
		tsf(s, m2, m2, ISA_ALU_multiply, s->TOT);
		tt(s, fi, fi, m2, ISA_ALU_add);
	}
	tt(s, m, kk, kk, ISA_ALU_not_equal);
	fill(s, inf, s->sgn * INFINITY);
	tsf(s, kk, kk, ISA_ALU_multiply, s->sgn);
	sel(s, kk, m, inf, kk);
	tsf(s, m, m, ISA_ALU_multiply, s->sgn * s->TOT);
	tt(s, fi, fi, m, ISA_ALU_add);
}

/* the bitonic network over buffers (*k, *i), which end up naming the
 * sorted pair */
static void network(sort_ctx *s, uint32_t g, int *k, int *i)
{
	bool in_b = false;
	for (unsigned sb = 1; sb <= s->logN; sb++) {
		bool signed_stage = sb < s->logN;
		for (int j = (int)sb - 1; j >= 0; j--) {
			bool want_b = (unsigned)j >= s->logC;
			if (want_b != in_b) {
				relayout(s, *k, *i, g, want_b);
				in_b = want_b;
			}
			if (j == (int)sb - 1 && signed_stage) {
				if (in_b)
					apply_sign(s, *k, *i, sb - (unsigned)__builtin_ctz(s->R), 0, 1);
				else
					apply_sign(s, *k, *i, sb, (int32_t)s->C, 1);
			}
			uint64_t d = (uint64_t)1 << j;
			exchange(s, *k, *i, in_b ? d / s->R : d);
			*k = *k == K0 ? K1 : K0;
			*i = *i == I0 ? I1 : I0;
		}
		/* the stage ends with d = 1, in layout A */
		if (signed_stage)
			apply_sign(s, *k, *i, sb, (int32_t)s->C, 1);
	}
}

/* values: key * sgn, NaN where the index carries the NaN offset; indices:
 * position mod N, as int32 into the other index buffer (returned) */
static int unmark(sort_ctx *s, int k, int i)
{
	isa_ap kk = row_ap(s, k, ISA_DT_fp32), fi = row_ap(s, i, ISA_DT_fp32);
	isa_ap m = row_ap(s, M1, ISA_DT_fp32), m2 = row_ap(s, M2, ISA_DT_fp32), nan = row_ap(s, M3, ISA_DT_fp32);
	int iout = i == I0 ? I1 : I0;
	tsf(s, m, fi, ISA_ALU_is_lt, 0.0f);
	tsf(s, m2, fi, ISA_ALU_is_ge, s->TOT);
	tt(s, m, m, m2, ISA_ALU_max);
	fill(s, nan, NAN);
	tsf(s, kk, kk, ISA_ALU_multiply, s->sgn);
	sel(s, kk, m, nan, kk);
	tsf(s, fi, fi, ISA_ALU_mod, (float)s->N);
	copy(s, row_ap(s, iout, ISA_DT_int32), fi);
	return iout;
}

/* R, C, G and the logs for rows of cols: false when they do not fit */
static bool plan(sort_ctx *s, const nk_sort *o)
{
	s->o = o;
	s->N = 2;
	while (s->N < o->cols)
		s->N *= 2;
	if (o->cols < 2 || o->rows == 0 || s->N > (uint64_t)C_MAX * P || o->rows * s->N > ((uint64_t)1 << 40) ||
	    (o->dtype != ISA_DT_fp32 && o->dtype != ISA_DT_bf16 && o->dtype != ISA_DT_fp16))
		return false;
	s->R = s->N <= C_MAX ? 1 : (uint32_t)(s->N / C_MAX);
	s->C = s->N / s->R;
	s->G = P / s->R;
	if (s->G > o->rows)
		s->G = (uint32_t)o->rows;
	s->parts = s->G * s->R;
	while (((uint64_t)1 << s->logC) < s->C)
		s->logC++;
	while (((uint64_t)1 << s->logN) < s->N)
		s->logN++;
	s->sgn = o->descending ? -1.0f : 1.0f;
	s->TOT = (float)((uint64_t)s->G * s->N);
	return true;
}

isa_status nk_sort_program(int target, const nk_sort *o, uint8_t **bin, size_t *len, isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	sort_ctx s;
	memset(&s, 0, sizeof(s));
	if (!plan(&s, o)) {
		nk_fail(diag, ISA_E_LIMIT, "sort kernel: %llu rows of %llu elements",
			(unsigned long long)o->rows, (unsigned long long)o->cols);
		return ISA_E_LIMIT;
	}
	if (!nk_pipe_init(&s.pp, target, 1, 0, diag))
		return nk_pipe_finish(&s.pp, bin, len);
	s.pp.load_engine = GP;
	uint64_t shape[2] = { o->rows, o->cols };
	s.tx = isa_builder_tensor(s.pp.em.p, "x", o->dtype, ISA_TK_INPUT, 2, shape, diag);
	s.tv = isa_builder_tensor(s.pp.em.p, "values", o->dtype, ISA_TK_OUTPUT, 2, shape, diag);
	s.tn = isa_builder_tensor(s.pp.em.p, "indices", ISA_DT_int32, ISA_TK_OUTPUT, 2, shape, diag);
	if (s.tx < 0 || s.tv < 0 || s.tn < 0)
		nk_pipe_check(&s.pp, diag->code ? diag->code : ISA_E_LIMIT);
	s.tk = nk_pipe_tensor(&s.pp, "scratch_k", ISA_DT_fp32, ISA_TK_OUTPUT, (uint64_t)s.G * s.N);
	s.ti = nk_pipe_tensor(&s.pp, "scratch_i", ISA_DT_fp32, ISA_TK_OUTPUT, (uint64_t)s.G * s.N);
	for (uint64_t r0 = 0; r0 < o->rows && !s.pp.em.st; r0 += s.G) {
		uint32_t g = (uint32_t)(o->rows - r0 < s.G ? o->rows - r0 : s.G);
		int k = K0, i = I0;
		nk_pipe_tile(&s.pp);
		load_rows(&s, r0, g, k, i);
		mark(&s, g, k, i);
		network(&s, g, &k, &i);
		int iout = unmark(&s, k, i);
		nk_pipe_computed(&s.pp, GP);
		for (uint32_t r = 0; r < g; r++)
			store_row(&s, k, iout, r0 + r, r * s.R);
	}
	return nk_pipe_finish(&s.pp, bin, len);
}

uint64_t nk_sort_scratch(const nk_sort *o)
{
	sort_ctx s;
	memset(&s, 0, sizeof(s));
	return plan(&s, o) ? (uint64_t)s.G * s.N : 0;
}
