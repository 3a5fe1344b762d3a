/*
 * rows.c -- kernel generator for row-wise ops over x[rows, cols] (the last
 * dim): sum, mean, amax, amin, argmax, softmax, log_softmax and layer_norm.
 *
 * 128 rows at a time sit on the partitions, a whole row along the free dim;
 * loads cast to fp32 on the way in (DMA casts through fp32), all arithmetic
 * is fp32 as CPU PyTorch's accumulate type, stores cast back.  Reductions
 * are VectorE tensor_reduce; exp/log/rsqrt are ScalarE activations (exp with
 * a per-partition bias of -max and its row sum accumulated in the same
 * instruction, as NKI softmax kernels do).  On the tile pipeline
 * (pipeline.h) with two buffer sets: Sync loads tile t+1 while t is
 * computed and GpSimd stores t-1; VectorE and ScalarE hand a tile to each
 * other on two semaphores of their own.
 */
#include "programs.h"
#include "pipeline.h"

#include <string.h>

#define P 128u
#define BIG 16777216.0f       /* 2^24: above any column index */

typedef struct rg {
	nk_pipe pp;                    /* program, first error, semaphores, buffer sets */
	nk_em *e;                      /* &pp.em */
	const nk_rows *op;
	uint64_t cols;
	uint32_t sem_vec, sem_act, sem_consts;   /* VectorE -> ScalarE, back, constants made */
	int tx, tout, tw, tb, tmean, trstd;
	uint64_t iota_off, wt_off, bt_off;       /* SBUF bytes of the constants */
} rg;

/* a buffer set: x, w (cols fp32 each), then its statistics */
static uint64_t xoff(uint64_t set) { return set; }
static uint64_t woff(const rg *g, uint64_t set) { return set + g->cols * 4; }
static uint64_t soff(const rg *g, uint64_t set) { return set + 2 * g->cols * 4; }

static isa_ap tile(uint32_t r, uint64_t off, uint64_t n) { return isa_ap_sbuf(ISA_DT_fp32, 0, r, off, (uint32_t)n); }
/* statistic k ([r, 1] fp32) of the buffer set at `set` */
static isa_ap stat(const rg *g, uint64_t set, uint32_t r, unsigned k) { return tile(r, soff(g, set) + 4u * k, 1); }

/* VectorE hands over to ScalarE and back (within one tile) */
static void to_act(rg *g)
{
	nk_em_signal(g->e, ISA_ENGINE_VECTOR, g->sem_vec);
	nk_em_wait(g->e, ISA_ENGINE_SCALAR, g->sem_vec, g->e->cnt[g->sem_vec]);
}

static void to_vec(rg *g)
{
	nk_em_signal(g->e, ISA_ENGINE_SCALAR, g->sem_act);
	nk_em_wait(g->e, ISA_ENGINE_VECTOR, g->sem_act, g->e->cnt[g->sem_act]);
}

/* arg max / min: first index of the max (min): (hit ? 0 : BIG) + column,
 * min-reduced, a hit being x == it or x NaN (the reduce propagates a NaN,
 * which equals nothing; PyTorch's arg of a row with NaN is its first NaN) */
static void arg_tile(rg *g, uint64_t set, uint32_t r)
{
	const uint64_t n = g->cols;
	nk_em *e = g->e;
	isa_ap x = tile(r, xoff(set), n), w = tile(r, woff(g, set), n);
	isa_ap s0 = stat(g, set, r, 0), s1 = stat(g, set, r, 1), iota = tile(r, g->iota_off, n);
	nk_em_reduce(e, ISA_ENGINE_VECTOR, s0, x, g->op->op == NK_ROW_ARGMAX ? ISA_ALU_max : ISA_ALU_min, false);
	nk_em_ts(e, ISA_ENGINE_VECTOR, w, x, ISA_ALU_is_equal, 0, &s0, ISA_ALU_bypass, 0, NULL);
	nk_em_tt(e, ISA_ENGINE_VECTOR, x, x, x, ISA_ALU_not_equal);   /* x is not needed after this */
	nk_em_tt(e, ISA_ENGINE_VECTOR, w, w, x, ISA_ALU_max);
	nk_em_ts(e, ISA_ENGINE_VECTOR, w, w, ISA_ALU_multiply, -BIG, NULL, ISA_ALU_add, BIG, NULL);
	nk_em_tt(e, ISA_ENGINE_VECTOR, w, w, iota, ISA_ALU_add);
	nk_em_reduce(e, ISA_ENGINE_VECTOR, s1, w, ISA_ALU_min, false);
	/* as int64: the int32 index and a zero high word */
	nk_em_copy(e, ISA_ENGINE_VECTOR, isa_ap_sbuf(ISA_DT_int32, 0, r, soff(g, set) + 16, 1), s1);
}

/* softmax, safe softmax, log softmax: exp(x - max) and its row sum in one
 * ScalarE instruction */
static void softmax_tile(rg *g, uint64_t set, uint32_t r)
{
	const uint64_t n = g->cols;
	nk_em *e = g->e;
	int op = g->op->op;
	isa_ap x = tile(r, xoff(set), n), w = tile(r, woff(g, set), n);
	isa_ap s0 = stat(g, set, r, 0), s1 = stat(g, set, r, 1), s2 = stat(g, set, r, 2);
	nk_em_reduce(e, ISA_ENGINE_VECTOR, s0, x, ISA_ALU_max, true);                    /* -max */
	if (op == NK_ROW_SAFE_SOFTMAX)                   /* a row of -inf: e = 0 */
		nk_em_ts(e, ISA_ENGINE_VECTOR, s0, s0, ISA_ALU_min, 3.4028235e38f, NULL, ISA_ALU_bypass, 0, NULL);
	to_act(g);
	nk_em_act(e, w, x, ISA_ACT_exp, 1.0f, &s0, &s1);                     /* e, sum(e) */
	if (op == NK_ROW_LOG_SOFTMAX) {
		nk_em_act(e, s2, s1, ISA_ACT_log, 1.0f, NULL, NULL);         /* log sum */
		to_vec(g);
		nk_em_ts(e, ISA_ENGINE_VECTOR, w, x, ISA_ALU_add, 0, &s0, ISA_ALU_subtract, 0, &s2);
		return;
	}
	to_vec(g);
	if (op == NK_ROW_SAFE_SOFTMAX)           /* 0 / tiny = 0 */
		nk_em_ts(e, ISA_ENGINE_VECTOR, s1, s1, ISA_ALU_max, 1.17549435e-38f, NULL, ISA_ALU_bypass, 0, NULL);
	nk_em_ts(e, ISA_ENGINE_VECTOR, w, w, ISA_ALU_divide, 0, &s1, ISA_ALU_bypass, 0, NULL);
}

static void layer_norm_tile(rg *g, uint64_t set, uint32_t r)
{
	const uint64_t n = g->cols;
	nk_em *e = g->e;
	isa_ap x = tile(r, xoff(set), n), w = tile(r, woff(g, set), n);
	isa_ap s0 = stat(g, set, r, 0), s1 = stat(g, set, r, 1), s2 = stat(g, set, r, 2), s3 = stat(g, set, r, 3);
	nk_em_reduce(e, ISA_ENGINE_VECTOR, s0, x, ISA_ALU_add, false);
	nk_em_ts(e, ISA_ENGINE_VECTOR, s0, s0, ISA_ALU_divide, (float)n, NULL, ISA_ALU_bypass, 0, NULL);  /* mean */
	nk_em_ts(e, ISA_ENGINE_VECTOR, w, x, ISA_ALU_subtract, 0, &s0, ISA_ALU_bypass, 0, NULL);           /* x - mean */
	to_act(g);
	nk_em_act(e, x, w, ISA_ACT_square, 1.0f, NULL, &s1);                                   /* sum sq */
	to_vec(g);
	nk_em_ts(e, ISA_ENGINE_VECTOR, s2, s1, ISA_ALU_divide, (float)n, NULL, ISA_ALU_add, g->op->eps, NULL);
	to_act(g);
	nk_em_act(e, s3, s2, ISA_ACT_rsqrt, 1.0f, NULL, NULL);                                  /* rstd */
	to_vec(g);
	nk_em_ts(e, ISA_ENGINE_VECTOR, w, w, ISA_ALU_multiply, 0, &s3, ISA_ALU_bypass, 0, NULL);
	if (g->op->affine) {
		nk_em_tt(e, ISA_ENGINE_VECTOR, w, w, tile(r, g->wt_off, n), ISA_ALU_multiply);
		nk_em_tt(e, ISA_ENGINE_VECTOR, w, w, tile(r, g->bt_off, n), ISA_ALU_add);
	}
}

/* s0 = the sum of each of the tile's rows, in blocks of SUM_BLOCK: each
 * block's fp32 sum into w, then the sum of those (the rounding error grows
 * with SUM_BLOCK + cols / SUM_BLOCK, not cols: a 30000-element row sums
 * within CPU PyTorch's tolerance of its cascade sum, as NKI kernels reduce
 * a long free dim a tile at a time) */
#define SUM_BLOCK 512u
static void row_sum(rg *g, uint64_t set, uint32_t r, isa_ap s0)
{
	const uint64_t n = g->cols, full = n / SUM_BLOCK, tail = n % SUM_BLOCK;
	isa_ap x = tile(r, xoff(set), n);
	if (full < 2) {
		nk_em_reduce(g->e, ISA_ENGINE_VECTOR, s0, x, ISA_ALU_add, false);
		return;
	}
	int32_t stride[2] = { (int32_t)SUM_BLOCK, 1 };
	uint32_t size[2] = { (uint32_t)full, SUM_BLOCK };
	isa_ap blocks = isa_ap_dims(tile(r, xoff(set), full * SUM_BLOCK), 2, stride, size);
	isa_instr in = isa_instr_init(ISA_OP_tensor_reduce);
	in.ap[ISA_AP_DST] = tile(r, woff(g, set), full);
	in.ap[ISA_AP_SRC] = blocks;
	in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC;
	in.e[0] = ISA_ALU_add;
	in.u[0] = 2;   /* the inner axis: one sum per block */
	nk_em_emit(g->e, ISA_ENGINE_VECTOR, &in);
	if (tail)
		nk_em_reduce(g->e, ISA_ENGINE_VECTOR, tile(r, woff(g, set) + full * 4, 1),
			     tile(r, xoff(set) + full * SUM_BLOCK * 4, tail), ISA_ALU_add, false);
	nk_em_reduce(g->e, ISA_ENGINE_VECTOR, s0, tile(r, woff(g, set), full + (tail ? 1 : 0)), ISA_ALU_add, false);
}

/* the computation of one tile of r rows in the buffer set at `set`; the
 * result is in w (row-shaped ops) or in the set's statistics */
static void compute(rg *g, uint64_t set, uint32_t r)
{
	isa_ap x = tile(r, xoff(set), g->cols), s0 = stat(g, set, r, 0);
	switch (g->op->op) {
	case NK_ROW_SUM:
	case NK_ROW_MEAN:
		row_sum(g, set, r, s0);
		if (g->op->op == NK_ROW_MEAN)
			nk_em_ts(g->e, ISA_ENGINE_VECTOR, s0, s0, ISA_ALU_divide, (float)g->cols, NULL, ISA_ALU_bypass, 0,
				 NULL);
		break;
	case NK_ROW_MAX:
	case NK_ROW_MIN:
		nk_em_reduce(g->e, ISA_ENGINE_VECTOR, s0, x, g->op->op == NK_ROW_MAX ? ISA_ALU_max : ISA_ALU_min, false);
		break;
	case NK_ROW_ARGMAX:
	case NK_ROW_ARGMIN:
		arg_tile(g, set, r);
		break;
	case NK_ROW_SOFTMAX:
	case NK_ROW_SAFE_SOFTMAX:
	case NK_ROW_LOG_SOFTMAX:
		softmax_tile(g, set, r);
		break;
	case NK_ROW_LAYER_NORM:
		layer_norm_tile(g, set, r);
		break;
	default:
		break;
	}
}

static bool row_shaped(int op)
{
	return op == NK_ROW_SOFTMAX || op == NK_ROW_SAFE_SOFTMAX || op == NK_ROW_LOG_SOFTMAX ||
	       op == NK_ROW_LAYER_NORM;
}

static bool is_arg(int op) { return op == NK_ROW_ARGMAX || op == NK_ROW_ARGMIN; }

/* what every tile reads besides its own rows: column indices (argmax, made
 * by GpSimd, with the zero high words of the int64 results), weight and
 * bias rows (layer norm, loaded first) */
static void constants(rg *g)
{
	const nk_rows *op = g->op;
	if (is_arg(op->op)) {
		isa_instr in = isa_instr_init(ISA_OP_iota);
		in.ap[ISA_AP_DST] = tile(P, g->iota_off, g->cols);
		in.ap_mask = 1u << ISA_AP_DST;
		in.imm[0] = isa_imm_i32(0);
		in.imm[1] = isa_imm_i32(0);
		in.nivec = 1;
		in.ivec[0] = 1;
		nk_em_emit(g->e, ISA_ENGINE_GPSIMD, &in);
		for (uint64_t s = 0; s < 2; s++)
			if (!g->e->st)
				g->e->st = isa_builder_memset(g->e->p, ISA_ENGINE_GPSIMD,
							   isa_ap_sbuf(ISA_DT_int32, 0, P, soff(g, s * g->pp.set_bytes) + 20, 1),
							   isa_imm_i32(0));
		nk_em_signal(g->e, ISA_ENGINE_GPSIMD, g->sem_consts);
		nk_em_wait(g->e, ISA_ENGINE_VECTOR, g->sem_consts, 1);
	}
	if (op->op == NK_ROW_LAYER_NORM && op->affine) {
		uint32_t n = (uint32_t)g->cols;
		nk_pipe_load(&g->pp, tile(P, g->wt_off, n), isa_ap_hbm(op->in_dtype, (uint32_t)g->tw, 0, P, 0, n), 0);
		nk_pipe_load(&g->pp, tile(P, g->bt_off, n), isa_ap_hbm(op->in_dtype, (uint32_t)g->tb, 0, P, 0, n), 0);
	}
}

/* the tile's stores: the row-shaped result, the int64 index or the
 * statistic, and layer norm's mean and rstd */
static void store(rg *g, uint64_t set, uint64_t r0, uint32_t r)
{
	const nk_rows *op = g->op;
	uint64_t osz = isa_dtype_size(op->out_dtype);
	if (row_shaped(op->op))
		nk_pipe_store(&g->pp, isa_ap_hbm(op->out_dtype, (uint32_t)g->tout, r0 * g->cols * osz, r,
						 (int64_t)g->cols, (uint32_t)g->cols),
			      tile(r, woff(g, set), g->cols), 2);
	else if (is_arg(op->op))
		nk_pipe_store(&g->pp, isa_ap_hbm(ISA_DT_int32, (uint32_t)g->tout, r0 * 8, r, 2, 2),
			      isa_ap_sbuf(ISA_DT_int32, 0, r, soff(g, set) + 16, 2), 2);
	else
		nk_pipe_store(&g->pp, isa_ap_hbm(op->out_dtype, (uint32_t)g->tout, r0 * osz, r, 1, 1),
			      stat(g, set, r, 0), 2);
	if (op->op == NK_ROW_LAYER_NORM) {
		nk_pipe_store(&g->pp, isa_ap_hbm(op->out_dtype, (uint32_t)g->tmean, r0 * osz, r, 1, 1),
			      stat(g, set, r, 0), 2);
		nk_pipe_store(&g->pp, isa_ap_hbm(op->out_dtype, (uint32_t)g->trstd, r0 * osz, r, 1, 1),
			      stat(g, set, r, 3), 2);
	}
}

/* Short rows reduced to one value each (sum, mean, amax, amin of a
 * [4, 128, 4, 32] tensor over its last dim: 16 tiles of 32 columns) go
 * `pack` whole rows to a partition: one tensor_reduce over the inner axis
 * of a [P, pack, cols] tile gives [P, pack] -- the same fold of each row as
 * one row per partition, in a tile the DMA moves at its rate. */
#define PACK_F 2048u
#define PACK_COLS 256u

static bool packs(const nk_rows *op)
{
	return (op->op == NK_ROW_SUM || op->op == NK_ROW_MEAN || op->op == NK_ROW_MAX || op->op == NK_ROW_MIN) &&
	       op->cols <= PACK_COLS && op->rows >= 2 * P;
}

static uint64_t packed_tiles(rg *g)
{
	const nk_rows *op = g->op;
	unsigned isz = isa_dtype_size(op->in_dtype), osz = isa_dtype_size(op->out_dtype);
	uint64_t r0 = 0, cols = g->cols;
	int alu = op->op == NK_ROW_MAX ? ISA_ALU_max : op->op == NK_ROW_MIN ? ISA_ALU_min : ISA_ALU_add;
	while (op->rows - r0 >= 2 * P && !g->e->st) {
		uint64_t k = (op->rows - r0) / P;
		k = k < PACK_F / cols ? k : PACK_F / cols;
		uint64_t set = nk_pipe_tile(&g->pp), out = xoff(set) + PACK_F * 4;
		nk_pipe_load(&g->pp, tile(P, xoff(set), k * cols),
			     isa_ap_hbm(op->in_dtype, (uint32_t)g->tx, r0 * cols * isz, P, (int64_t)(k * cols),
					(uint32_t)(k * cols)), 0);
		nk_pipe_compute(&g->pp, ISA_ENGINE_VECTOR);
		int32_t stride[2] = { (int32_t)cols, 1 };
		uint32_t size[2] = { (uint32_t)k, (uint32_t)cols };
		isa_instr in = isa_instr_init(ISA_OP_tensor_reduce);
		in.ap[ISA_AP_DST] = tile(P, out, k);
		in.ap[ISA_AP_SRC] = isa_ap_dims(tile(P, xoff(set), k * cols), 2, stride, size);
		in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC;
		in.e[0] = (uint8_t)alu;
		in.u[0] = 2;   /* the inner axis: one value per row */
		nk_em_emit(g->e, ISA_ENGINE_VECTOR, &in);
		if (op->op == NK_ROW_MEAN)
			nk_em_ts(g->e, ISA_ENGINE_VECTOR, tile(P, out, k), tile(P, out, k), ISA_ALU_divide, (float)cols, NULL,
				 ISA_ALU_bypass, 0, NULL);
		nk_pipe_computed(&g->pp, ISA_ENGINE_VECTOR);
		nk_pipe_store(&g->pp, isa_ap_hbm(op->out_dtype, (uint32_t)g->tout, r0 * osz, P, (int64_t)k, (uint32_t)k),
			      tile(P, out, k), 2);
		r0 += k * P;
	}
	return r0;
}

/* One row (a whole tensor) cut over `spread` partitions: each folds its
 * chunk, TensorE turns the [spread, 1] partials round into PSUM (exact: a
 * transpose carries fp32 values), VectorE folds them; a mean divides the
 * sum.  On one partition the row was one DMA engine's and 1/128 of
 * VectorE's (a 16384-element sum: 14.3 us). */
static void spread_tile(rg *g)
{
	const nk_rows *op = g->op;
	uint32_t np = op->spread;
	uint64_t c = g->cols, set = nk_pipe_tile(&g->pp);   /* g->cols: one partition's chunk */
	int alu = op->op == NK_ROW_MAX ? ISA_ALU_max : op->op == NK_ROW_MIN ? ISA_ALU_min : ISA_ALU_add;
	nk_pipe_load(&g->pp, tile(np, xoff(set), c),
		     isa_ap_hbm(op->in_dtype, (uint32_t)g->tx, 0, np, (int64_t)c, (uint32_t)c), 0);
	nk_pipe_compute(&g->pp, ISA_ENGINE_VECTOR);
	isa_ap part = stat(g, set, np, 0);
	if (alu == ISA_ALU_add) {
		row_sum(g, set, np, part);
	} else {
		nk_em_reduce(g->e, ISA_ENGINE_VECTOR, part, tile(np, xoff(set), c), alu, false);
	}
	nk_em_signal(g->e, ISA_ENGINE_VECTOR, g->sem_vec);
	nk_em_wait(g->e, ISA_ENGINE_TENSOR, g->sem_vec, g->e->cnt[g->sem_vec]);
	isa_instr in = isa_instr_init(ISA_OP_nc_transpose);
	in.ap[ISA_AP_DST] = isa_ap_psum(ISA_DT_fp32, 0, 1, 0, np);
	in.ap[ISA_AP_SRC] = part;
	in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC;
	nk_em_emit(g->e, ISA_ENGINE_TENSOR, &in);
	nk_em_signal(g->e, ISA_ENGINE_TENSOR, g->sem_act);
	nk_em_wait(g->e, ISA_ENGINE_VECTOR, g->sem_act, g->e->cnt[g->sem_act]);
	isa_ap total = stat(g, set, 1, 1);
	nk_em_reduce(g->e, ISA_ENGINE_VECTOR, total, isa_ap_psum(ISA_DT_fp32, 0, 1, 0, np), alu, false);
	if (op->op == NK_ROW_MEAN)
		nk_em_ts(g->e, ISA_ENGINE_VECTOR, total, total, ISA_ALU_divide, (float)op->cols, NULL, ISA_ALU_bypass, 0,
			 NULL);
	nk_pipe_computed(&g->pp, ISA_ENGINE_VECTOR);
	nk_pipe_store(&g->pp, isa_ap_hbm(op->out_dtype, (uint32_t)g->tout, 0, 1, 1, 1), total, 2);
}

static void emit_tiles(rg *g)
{
	const nk_rows *op = g->op;
	unsigned isz = isa_dtype_size(op->in_dtype);
	constants(g);
	if (op->spread) {
		spread_tile(g);
		return;
	}
	for (uint64_t r0 = packs(op) ? packed_tiles(g) : 0; r0 < op->rows && !g->e->st; r0 += P) {
		uint32_t r = (uint32_t)(op->rows - r0 < P ? op->rows - r0 : P);
		uint64_t set = nk_pipe_tile(&g->pp);
		nk_pipe_load(&g->pp, tile(r, xoff(set), g->cols),
			     isa_ap_hbm(op->in_dtype, (uint32_t)g->tx, r0 * g->cols * isz, r, (int64_t)g->cols,
					(uint32_t)g->cols), 0);
		nk_pipe_compute(&g->pp, ISA_ENGINE_VECTOR);
		compute(g, set, r);
		nk_pipe_computed(&g->pp, ISA_ENGINE_VECTOR);
		store(g, set, r0, r);
	}
}

/* the program's tensors: x and out, layer norm's weight, bias, mean, rstd */
static bool tensors(rg *g)
{
	const nk_rows *op = g->op;
	bool arg = is_arg(op->op);
	g->tw = g->tb = g->tmean = g->trstd = 0;
	g->tx = nk_pipe_tensor(&g->pp, "x", op->in_dtype, ISA_TK_INPUT, op->rows * op->cols);
	g->tout = nk_pipe_tensor(&g->pp, "out", arg ? ISA_DT_int32 : op->out_dtype, ISA_TK_OUTPUT,
				 row_shaped(op->op) ? op->rows * op->cols : arg ? 2 * op->rows : op->rows);
	if (op->op == NK_ROW_LAYER_NORM) {
		if (op->affine) {
			g->tw = nk_pipe_tensor(&g->pp, "w", op->in_dtype, ISA_TK_INPUT, op->cols);
			g->tb = nk_pipe_tensor(&g->pp, "b", op->in_dtype, ISA_TK_INPUT, op->cols);
		}
		g->tmean = nk_pipe_tensor(&g->pp, "mean", op->out_dtype, ISA_TK_OUTPUT, op->rows);
		g->trstd = nk_pipe_tensor(&g->pp, "rstd", op->out_dtype, ISA_TK_OUTPUT, op->rows);
	}
	return !g->e->st;
}

isa_status nk_rows_program(int target, const nk_rows *op, uint8_t **bin, size_t *len, isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	const isa_target_info *ti = isa_target_get(target);
	bool fl = isa_dtype_is_float(op->in_dtype) && op->in_dtype != ISA_DT_tf32;
	bool spread_ok = !op->spread || (op->rows == 1 && op->spread <= P && op->cols % op->spread == 0 &&
					 (op->op == NK_ROW_SUM || op->op == NK_ROW_MEAN || op->op == NK_ROW_MAX ||
					  op->op == NK_ROW_MIN));
	if (!ti || !fl || op->rows == 0 || op->cols == 0 || op->rows > (1u << 24) ||
	    op->op < 0 || op->op >= NK_ROW_NUM_OPS || !spread_ok) {
		nk_fail(diag, ISA_E_LIMIT, "row kernel: op %d on %llu x %llu %s", op->op,
			(unsigned long long)op->rows, (unsigned long long)op->cols,
			isa_dtype_name(op->in_dtype));
		return ISA_E_LIMIT;
	}
	/* SBUF per partition: x and w per buffer set, statistics, constants */
	unsigned consts = is_arg(op->op) ? 1 : op->op == NK_ROW_LAYER_NORM && op->affine ? 2 : 0;
	uint64_t cols = op->spread ? op->cols / op->spread : op->cols;   /* a partition's */
	uint64_t need = (4 + consts) * cols * 4 + 2 * 64;
	if (need + 4096 > ti->sbuf_partition_bytes || op->cols >= (1u << 24)) {
		nk_fail(diag, ISA_E_LIMIT, "row kernel: rows of %llu elements do not fit in SBUF",
			(unsigned long long)op->cols);
		return ISA_E_LIMIT;
	}
	rg g;
	memset(&g, 0, sizeof(g));
	g.op = op;
	g.cols = cols;
	g.e = &g.pp.em;
	uint64_t row = cols * 4, set_bytes = 2 * row + 64;
	if (packs(op) && set_bytes < 2 * PACK_F * 4)
		set_bytes = 2 * PACK_F * 4;   /* a packed tile and its [P, pack] results */
	g.iota_off = g.wt_off = 2 * set_bytes;
	g.bt_off = g.wt_off + row;
	if (!nk_pipe_init(&g.pp, target, 2, set_bytes, diag))
		return nk_pipe_finish(&g.pp, bin, len);
	g.sem_vec = nk_pipe_sem(&g.pp);
	g.sem_act = nk_pipe_sem(&g.pp);
	g.sem_consts = nk_pipe_sem(&g.pp);
	if (tensors(&g))
		emit_tiles(&g);
	return nk_pipe_finish(&g.pp, bin, len);
}

/* ------------------------------------------------------------- slabs */

/* nk_slabs: per slab a, the n columns cut in blocks of f, one block to a
 * partition, the m rows of the block along the free dims [m, f]; one
 * tensor_reduce over the m axis folds them in order (m = 0, 1, ... as CPU
 * PyTorch adds along a dim that is not the innermost).  Before this, a
 * TensorE product ones[1, m] @ x[m, n] per slab (its batch one after
 * another): 104 us for GQA's [8, 2, 4096] gradient sum. */
#define SLAB_F 4096u    /* elements per partition of a tile (m x f) */

isa_status nk_slabs_program(int target, const nk_slabs *op, uint8_t **bin, size_t *len, isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	if (!isa_dtype_is_float(op->in_dtype) || !isa_dtype_is_float(op->out_dtype) || !op->a || !op->m || !op->n ||
	    op->m > SLAB_F || op->n > INT32_MAX || op->a > (1u << 20)) {
		nk_fail(diag, ISA_E_LIMIT, "slab sum kernel: %llu x %llu x %llu", (unsigned long long)op->a,
			(unsigned long long)op->m, (unsigned long long)op->n);
		return ISA_E_LIMIT;
	}
	uint64_t f = (op->n + P - 1) / P, fmax = SLAB_F / op->m;
	f = f > fmax ? fmax : f;
	nk_pipe pp;
	if (!nk_pipe_init(&pp, target, 2, (uint64_t)SLAB_F * 4 + f * 4, diag))
		return nk_pipe_finish(&pp, bin, len);
	unsigned isz = isa_dtype_size(op->in_dtype), osz = isa_dtype_size(op->out_dtype);
	int tx = nk_pipe_tensor(&pp, "x", op->in_dtype, ISA_TK_INPUT, op->a * op->m * op->n);
	int to = nk_pipe_tensor(&pp, "out", op->out_dtype, ISA_TK_OUTPUT, op->a * op->n);
	for (uint64_t a = 0; a < op->a && !pp.em.st; a++)
		for (uint64_t c0 = 0; c0 < op->n && !pp.em.st;) {
			/* whole blocks of f on up to P partitions, else the tail as one */
			uint64_t left = op->n - c0, w = left >= f ? f : left;
			uint64_t np = left >= f ? (left / f < P ? left / f : P) : 1;
			uint64_t set = nk_pipe_tile(&pp), out = set + (uint64_t)SLAB_F * 4;
			int32_t st3[2] = { (int32_t)op->n, 1 };
			uint32_t sz3[2] = { (uint32_t)op->m, (uint32_t)w };
			isa_ap h = isa_ap_hbm(op->in_dtype, (uint32_t)tx, (a * op->m * op->n + c0) * isz, (uint32_t)np,
					      (int64_t)w, 1);
			nk_pipe_load(&pp, tile((uint32_t)np, set, op->m * w), isa_ap_dims(h, 2, st3, sz3), 0);
			nk_pipe_compute(&pp, ISA_ENGINE_VECTOR);
			int32_t sst[2] = { (int32_t)w, 1 };
			isa_instr in = isa_instr_init(ISA_OP_tensor_reduce);
			in.ap[ISA_AP_DST] = tile((uint32_t)np, out, w);
			in.ap[ISA_AP_SRC] = isa_ap_dims(tile((uint32_t)np, set, op->m * w), 2, sst, sz3);
			in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC;
			in.e[0] = ISA_ALU_add;
			in.u[0] = 1;   /* the outer axis: the m rows */
			nk_em_emit(&pp.em, ISA_ENGINE_VECTOR, &in);
			if (op->mean)
				nk_em_ts(&pp.em, ISA_ENGINE_VECTOR, tile((uint32_t)np, out, w), tile((uint32_t)np, out, w),
					 ISA_ALU_divide, (float)op->m, NULL, ISA_ALU_bypass, 0, NULL);
			nk_pipe_computed(&pp, ISA_ENGINE_VECTOR);
			nk_pipe_store(&pp, isa_ap_hbm(op->out_dtype, (uint32_t)to, (a * op->n + c0) * osz, (uint32_t)np,
						      (int64_t)w, (uint32_t)w), tile((uint32_t)np, out, w), 2);
			c0 += np * w;
		}
	return nk_pipe_finish(&pp, bin, len);
}
