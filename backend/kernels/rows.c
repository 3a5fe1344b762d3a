/*
 * rows.c -- kernel generator for row-wise ops over x[rows, cols] (the last
 * dim): sum, mean, amax, amin, argmax, softmax, log_softmax and layer_norm.
 *
 * 128 rows at a time sit on the partitions, a whole row along the free dim;
 * loads cast to fp32 on the way in (DMA casts through fp32), all arithmetic
 * is fp32 as CPU PyTorch's accumulate type, stores cast back.  Reductions
 * are VectorE tensor_reduce; exp/log/rsqrt are ScalarE activations (exp with
 * a per-partition bias of -max and its row sum accumulated in the same
 * instruction, as NKI softmax kernels do).  Two buffer sets: Sync loads tile
 * t+1 while t is computed and GpSimd stores t-1.
 *
 * Semaphores: 0 loads landed, 1 VectorE steps, 2 ScalarE steps, 3 tiles
 * done, 4 stores landed.
 */
#include "emitter.h"
#include "kernels.h"

#include <string.h>

enum { S_LOAD, S_VEC, S_ACT, S_DONE, S_STORE, NSEM };

#define P 128u
#define BIG 16777216.0f       /* 2^24: above any column index */

typedef struct rg {
	nk_em e;                       /* program, first error, signal counts */
	const nk_rows *op;
	uint64_t cols;
	int tx, tout, tw, tb, tmean, trstd;
	uint64_t xoff[2], woff[2], soff[2], iota_off, wt_off, bt_off;   /* SBUF bytes */
} rg;

static isa_ap tile(uint32_t r, uint64_t off, uint64_t n) { return isa_ap_sbuf(ISA_DT_fp32, 0, r, off, (uint32_t)n); }
/* statistic k ([r, 1] fp32) of buffer set s */
static isa_ap stat(const rg *g, int s, uint32_t r, unsigned k) { return tile(r, g->soff[s] + 4u * k, 1); }

/* VectorE hands over to ScalarE and back (within one tile) */
static void to_act(rg *g)
{
	nk_em_signal(&g->e, ISA_ENGINE_VECTOR, S_VEC);
	nk_em_wait(&g->e, ISA_ENGINE_SCALAR, S_VEC, g->e.cnt[S_VEC]);
}

static void to_vec(rg *g)
{
	nk_em_signal(&g->e, ISA_ENGINE_SCALAR, S_ACT);
	nk_em_wait(&g->e, ISA_ENGINE_VECTOR, S_ACT, g->e.cnt[S_ACT]);
}

/* the computation of one tile of r rows in buffer set s; the result is in
 * w (row-shaped ops) or in the set's statistics */
static void compute(rg *g, int s, uint32_t r)
{
	const uint64_t n = g->cols;
	isa_ap x = tile(r, g->xoff[s], n), w = tile(r, g->woff[s], n);
	isa_ap s0 = stat(g, s, r, 0), s1 = stat(g, s, r, 1), s2 = stat(g, s, r, 2);
	switch (g->op->op) {
	case NK_ROW_SUM:
	case NK_ROW_MEAN:
		nk_em_reduce(&g->e, ISA_ENGINE_VECTOR, s0, x, ISA_ALU_add, false);
		if (g->op->op == NK_ROW_MEAN)
			nk_em_ts(&g->e, ISA_ENGINE_VECTOR, s0, s0, ISA_ALU_divide, (float)n, NULL, ISA_ALU_bypass, 0, NULL);
		break;
	case NK_ROW_MAX:
	case NK_ROW_MIN:
		nk_em_reduce(&g->e, ISA_ENGINE_VECTOR, s0, x, g->op->op == NK_ROW_MAX ? ISA_ALU_max : ISA_ALU_min, false);
		break;
	case NK_ROW_ARGMAX:
	case NK_ROW_ARGMIN: {
		/* first index of the max (min): (hit ? 0 : BIG) + column, min-reduced,
		 * a hit being x == it or x NaN (the reduce propagates a NaN, which
		 * equals nothing; PyTorch's arg of a row with NaN is its first NaN) */
		isa_ap iota = tile(r, g->iota_off, n);
		nk_em_reduce(&g->e, ISA_ENGINE_VECTOR, s0, x, g->op->op == NK_ROW_ARGMAX ? ISA_ALU_max : ISA_ALU_min, false);
		nk_em_ts(&g->e, ISA_ENGINE_VECTOR, w, x, ISA_ALU_is_equal, 0, &s0, ISA_ALU_bypass, 0, NULL);
		nk_em_tt(&g->e, ISA_ENGINE_VECTOR, x, x, x, ISA_ALU_not_equal);   /* x is not needed after this */
		nk_em_tt(&g->e, ISA_ENGINE_VECTOR, w, w, x, ISA_ALU_max);
		nk_em_ts(&g->e, ISA_ENGINE_VECTOR, w, w, ISA_ALU_multiply, -BIG, NULL, ISA_ALU_add, BIG, NULL);
		nk_em_tt(&g->e, ISA_ENGINE_VECTOR, w, w, iota, ISA_ALU_add);
		nk_em_reduce(&g->e, ISA_ENGINE_VECTOR, s1, w, ISA_ALU_min, false);
		/* as int64: the int32 index and a zero high word */
		isa_ap lo = isa_ap_sbuf(ISA_DT_int32, 0, r, g->soff[s] + 16, 1);
		if (!g->e.st)
			g->e.st = isa_builder_tensor_copy(g->e.p, ISA_ENGINE_VECTOR, lo, s1);
		break;
	}
	case NK_ROW_SOFTMAX:
	case NK_ROW_SAFE_SOFTMAX:
	case NK_ROW_LOG_SOFTMAX:
		nk_em_reduce(&g->e, ISA_ENGINE_VECTOR, s0, x, ISA_ALU_max, true);                    /* -max */
		if (g->op->op == NK_ROW_SAFE_SOFTMAX)                   /* a row of -inf: e = 0 */
			nk_em_ts(&g->e, ISA_ENGINE_VECTOR, s0, s0, ISA_ALU_min, 3.4028235e38f, NULL, ISA_ALU_bypass, 0, NULL);
		to_act(g);
		nk_em_act(&g->e, w, x, ISA_ACT_exp, 1.0f, &s0, &s1);                     /* e, sum(e) */
		if (g->op->op == NK_ROW_LOG_SOFTMAX) {
			nk_em_act(&g->e, s2, s1, ISA_ACT_log, 1.0f, NULL, NULL);         /* log sum */
			to_vec(g);
			nk_em_ts(&g->e, ISA_ENGINE_VECTOR, w, x, ISA_ALU_add, 0, &s0, ISA_ALU_subtract, 0, &s2);
		} else {
			to_vec(g);
			if (g->op->op == NK_ROW_SAFE_SOFTMAX)           /* 0 / tiny = 0 */
				nk_em_ts(&g->e, ISA_ENGINE_VECTOR, s1, s1, ISA_ALU_max, 1.17549435e-38f, NULL, ISA_ALU_bypass, 0, NULL);
			nk_em_ts(&g->e, ISA_ENGINE_VECTOR, w, w, ISA_ALU_divide, 0, &s1, ISA_ALU_bypass, 0, NULL);
		}
		break;
	case NK_ROW_LAYER_NORM: {
		isa_ap s3 = stat(g, s, r, 3);
		nk_em_reduce(&g->e, ISA_ENGINE_VECTOR, s0, x, ISA_ALU_add, false);
		nk_em_ts(&g->e, ISA_ENGINE_VECTOR, s0, s0, ISA_ALU_divide, (float)n, NULL, ISA_ALU_bypass, 0, NULL);  /* mean */
		nk_em_ts(&g->e, ISA_ENGINE_VECTOR, w, x, ISA_ALU_subtract, 0, &s0, ISA_ALU_bypass, 0, NULL);           /* x - mean */
		to_act(g);
		nk_em_act(&g->e, x, w, ISA_ACT_square, 1.0f, NULL, &s1);                                   /* sum sq */
		to_vec(g);
		nk_em_ts(&g->e, ISA_ENGINE_VECTOR, s2, s1, ISA_ALU_divide, (float)n, NULL, ISA_ALU_add, g->op->eps, NULL);
		to_act(g);
		nk_em_act(&g->e, s3, s2, ISA_ACT_rsqrt, 1.0f, NULL, NULL);                                  /* rstd */
		to_vec(g);
		nk_em_ts(&g->e, ISA_ENGINE_VECTOR, w, w, ISA_ALU_multiply, 0, &s3, ISA_ALU_bypass, 0, NULL);
		if (g->op->affine) {
			nk_em_tt(&g->e, ISA_ENGINE_VECTOR, w, w, tile(r, g->wt_off, n), ISA_ALU_multiply);
			nk_em_tt(&g->e, ISA_ENGINE_VECTOR, w, w, tile(r, g->bt_off, n), ISA_ALU_add);
		}
		break;
	}
	default:
		break;
	}
}

static bool row_shaped(int op)
{
	return op == NK_ROW_SOFTMAX || op == NK_ROW_SAFE_SOFTMAX || op == NK_ROW_LOG_SOFTMAX ||
	       op == NK_ROW_LAYER_NORM;
}

static void emit_tiles(rg *g)
{
	const nk_rows *op = g->op;
	unsigned isz = isa_dtype_size(op->in_dtype), osz = isa_dtype_size(op->out_dtype);
	uint64_t ntiles = (op->rows + P - 1) / P;
	/* constants: column indices (argmax), weight and bias rows (layer norm) */
	if (op->op == NK_ROW_ARGMAX || op->op == NK_ROW_ARGMIN) {
		isa_instr in = isa_instr_init(ISA_OP_iota);
		in.ap[ISA_AP_DST] = tile(P, g->iota_off, g->cols);
		in.ap_mask = 1u << ISA_AP_DST;
		in.imm[0] = isa_imm_i32(0);
		in.imm[1] = isa_imm_i32(0);
		in.nivec = 1;
		in.ivec[0] = 1;
		nk_em_emit(&g->e, ISA_ENGINE_GPSIMD, &in);
		for (int s = 0; s < 2; s++)   /* the high words of the int64 results */
			if (!g->e.st)
				g->e.st = isa_builder_memset(g->e.p, ISA_ENGINE_GPSIMD,
							   isa_ap_sbuf(ISA_DT_int32, 0, P, g->soff[s] + 20, 1),
							   isa_imm_i32(0));
		nk_em_signal(&g->e, ISA_ENGINE_GPSIMD, S_STORE);   /* counted as store 0 */
		nk_em_wait(&g->e, ISA_ENGINE_VECTOR, S_STORE, 1);
	}
	uint32_t base_stores = g->e.cnt[S_STORE];
	if (op->op == NK_ROW_LAYER_NORM && op->affine) {
		uint32_t n = (uint32_t)g->cols;
		uint32_t dw = nk_em_dma(&g->e, tile(P, g->wt_off, n), isa_ap_hbm(op->in_dtype, (uint32_t)g->tw, 0, P, 0, n));
		uint32_t db = nk_em_dma(&g->e, tile(P, g->bt_off, n), isa_ap_hbm(op->in_dtype, (uint32_t)g->tb, 0, P, 0, n));
		nk_em_dma_start(&g->e, ISA_ENGINE_SYNC, dw, 0, S_LOAD);
		nk_em_dma_start(&g->e, ISA_ENGINE_SYNC, db, 0, S_LOAD);
	}
	uint32_t base_loads = g->e.cnt[S_LOAD];
	for (uint64_t t = 0; t < ntiles && !g->e.st; t++) {
		int s = (int)(t % 2);
		uint64_t r0 = t * P;
		uint32_t r = (uint32_t)(op->rows - r0 < P ? op->rows - r0 : P);
		/* Sync: load into set s once the tile two back has been stored */
		if (t >= 2)
			nk_em_wait(&g->e, ISA_ENGINE_SYNC, S_STORE, base_stores + (uint32_t)(t - 1) * (op->op == NK_ROW_LAYER_NORM ? 3 : 1));
		int dl = nk_em_dma(&g->e, tile(r, g->xoff[s], g->cols),
			     isa_ap_hbm(op->in_dtype, (uint32_t)g->tx, r0 * g->cols * isz, r, (int64_t)g->cols,
					(uint32_t)g->cols));
		nk_em_dma_start(&g->e, ISA_ENGINE_SYNC, (uint32_t)dl, 0, S_LOAD);
		nk_em_wait(&g->e, ISA_ENGINE_VECTOR, S_LOAD, base_loads + (uint32_t)t + 1);
		compute(g, s, r);
		nk_em_signal(&g->e, ISA_ENGINE_VECTOR, S_DONE);
		/* GpSimd: store the result */
		nk_em_wait(&g->e, ISA_ENGINE_GPSIMD, S_DONE, g->e.cnt[S_DONE]);
		int ds;
		if (row_shaped(op->op))
			ds = nk_em_dma(&g->e, isa_ap_hbm(op->out_dtype, (uint32_t)g->tout, r0 * g->cols * osz, r,
					       (int64_t)g->cols, (uint32_t)g->cols),
				 tile(r, g->woff[s], g->cols));
		else if (op->op == NK_ROW_ARGMAX || op->op == NK_ROW_ARGMIN)
			ds = nk_em_dma(&g->e, isa_ap_hbm(ISA_DT_int32, (uint32_t)g->tout, r0 * 8, r, 2, 2),
				 isa_ap_sbuf(ISA_DT_int32, 0, r, g->soff[s] + 16, 2));
		else
			ds = nk_em_dma(&g->e, isa_ap_hbm(op->out_dtype, (uint32_t)g->tout, r0 * osz, r, 1, 1),
				 stat(g, s, r, 0));
		nk_em_dma_start(&g->e, ISA_ENGINE_GPSIMD, (uint32_t)ds, 2, S_STORE);
		if (op->op == NK_ROW_LAYER_NORM) {   /* mean and rstd */
			int dm = nk_em_dma(&g->e, isa_ap_hbm(op->out_dtype, (uint32_t)g->tmean, r0 * osz, r, 1, 1), stat(g, s, r, 0));
			int dr = nk_em_dma(&g->e, isa_ap_hbm(op->out_dtype, (uint32_t)g->trstd, r0 * osz, r, 1, 1), stat(g, s, r, 3));
			nk_em_dma_start(&g->e, ISA_ENGINE_GPSIMD, (uint32_t)dm, 2, S_STORE);
			nk_em_dma_start(&g->e, ISA_ENGINE_GPSIMD, (uint32_t)dr, 2, S_STORE);
		}
	}
	nk_em_wait(&g->e, ISA_ENGINE_GPSIMD, S_STORE, g->e.cnt[S_STORE]);
}

isa_status nk_rows_program(int target, const nk_rows *op, uint8_t **bin, size_t *len, isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	const isa_target_info *ti = isa_target_get(target);
	bool fl = isa_dtype_is_float(op->in_dtype) && op->in_dtype != ISA_DT_tf32;
	if (!ti || !fl || op->rows == 0 || op->cols == 0 || op->rows > (1u << 24) ||
	    op->op < 0 || op->op >= NK_ROW_NUM_OPS) {
		nk_fail(diag, ISA_E_LIMIT, "row kernel: op %d on %llu x %llu %s", op->op,
			(unsigned long long)op->rows, (unsigned long long)op->cols,
			isa_dtype_name(op->in_dtype));
		return ISA_E_LIMIT;
	}
	/* SBUF per partition: x and w per buffer set, statistics, constants */
	bool arg = op->op == NK_ROW_ARGMAX || op->op == NK_ROW_ARGMIN;
	unsigned consts = arg ? 1 : op->op == NK_ROW_LAYER_NORM && op->affine ? 2 : 0;
	uint64_t need = (4 + consts) * op->cols * 4 + 2 * 64;
	if (need + 4096 > ti->sbuf_partition_bytes || op->cols >= (1u << 24)) {
		nk_fail(diag, ISA_E_LIMIT, "row kernel: rows of %llu elements do not fit in SBUF",
			(unsigned long long)op->cols);
		return ISA_E_LIMIT;
	}
	rg g;
	memset(&g, 0, sizeof(g));
	g.op = op;
	g.e.diag = diag;
	g.cols = op->cols;
	uint64_t o = 0, row = op->cols * 4;
	for (int s = 0; s < 2; s++) {
		g.xoff[s] = o;
		g.woff[s] = o + row;
		o += 2 * row;
	}
	g.soff[0] = o;
	g.soff[1] = o + 64;
	o += 128;
	g.iota_off = g.wt_off = o;
	g.bt_off = o + row;
	g.e.p = isa_program_new(target);
	if (!g.e.p)
		return ISA_E_NOMEM;
	g.e.p->num_semaphores = NSEM;
	uint64_t sx[1] = { op->rows * op->cols }, srow[1] = { op->rows }, sc[1] = { op->cols };
	uint64_t sout[1] = { row_shaped(op->op) ? op->rows * op->cols
			     : arg ? 2 * op->rows : op->rows };
	int odt = arg ? ISA_DT_int32 : op->out_dtype;
	g.tx = isa_builder_tensor(g.e.p, "x", op->in_dtype, ISA_TK_INPUT, 1, sx, diag);
	g.tout = isa_builder_tensor(g.e.p, "out", odt, ISA_TK_OUTPUT, 1, sout, diag);
	if (op->op == NK_ROW_LAYER_NORM) {
		if (op->affine) {
			g.tw = isa_builder_tensor(g.e.p, "w", op->in_dtype, ISA_TK_INPUT, 1, sc, diag);
			g.tb = isa_builder_tensor(g.e.p, "b", op->in_dtype, ISA_TK_INPUT, 1, sc, diag);
		}
		g.tmean = isa_builder_tensor(g.e.p, "mean", op->out_dtype, ISA_TK_OUTPUT, 1, srow, diag);
		g.trstd = isa_builder_tensor(g.e.p, "rstd", op->out_dtype, ISA_TK_OUTPUT, 1, srow, diag);
	}
	if (g.tx < 0 || g.tout < 0 || g.tw < 0 || g.tb < 0 || g.tmean < 0 || g.trstd < 0)
		return nk_em_done(&g.e, diag->code, bin, len);
	emit_tiles(&g);
	return nk_em_done(&g.e, ISA_OK, bin, len);
}
