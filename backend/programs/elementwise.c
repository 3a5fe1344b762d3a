/*
 * elementwise.c -- kernel generators: out = a <alu> b (VectorE) and
 * out = func(scale * a) (ScalarE activation) over n contiguous elements, as
 * ISA programs built with the program builder.
 *
 * The flat buffers are cut into tiles of up to 128 partitions x 2048
 * elements (rows shorter for small tensors so all 128 partitions are used;
 * the tail: whole rows, then one partial row).  Sync
 * queues the loads of a tile's operands into one of two SBUF buffer sets,
 * the compute engine works on it, GpSimd queues the store: with two buffer
 * sets the loads of tile t+1 overlap the compute and store of tile t, as a
 * double-buffered NKI kernel: the tile pipeline of pipeline.h, which owns
 * the semaphores, buffer sets and waits; a generator here states a tile's
 * loads, compute and store.
 */
#include "emitter.h"
#include "programs.h"
#include "pipeline.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TILE_F 2048u   /* 8 KiB fp32 per partition: DMA saturates from 4 KiB */
#define TILE_F_MIN 512u

isa_status nk_encode(isa_program *p, uint8_t **bin, size_t *len, isa_diag *diag)
{
	return isa_builder_finish_encode(p, bin, len, diag);
}

isa_status nk_finish(isa_program *p, int engine, uint32_t sem, uint32_t count, uint8_t **bin, size_t *len,
		     isa_diag *diag)
{
	isa_status st = isa_builder_sem_wait(p, engine, sem, ISA_ALU_is_ge, count);
	return st ? st : nk_encode(p, bin, len, diag);
}

void nk_fail(isa_diag *diag, isa_status code, const char *fmt, ...)
{
	if (!diag)
		return;
	memset(diag, 0, sizeof(*diag));
	diag->code = code;
	diag->engine = -1;
	diag->index = -1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(diag->msg, sizeof(diag->msg), fmt, ap);
	va_end(ap);
}

typedef struct tile {
	uint64_t start;            /* first element of a and out */
	uint32_t rows, cols;       /* rows x cols elements */
	uint64_t pstride;          /* elements between rows of a and out */
	uint64_t start_b;          /* b: first element, row and column strides (0: broadcast) */
	uint64_t pstride_b, fstride_b;
	uint32_t pack;             /* b per row, rows packed `pack` to a partition: b is
				      [rows, pack] in SBUF, read with stride 0 along each row */
	uint64_t period;           /* b [period] repeating along flat tiles of a (period a
				      multiple of the row length): loaded run by run */
} tile;

/* Row length f: up to TILE_F, shorter when that fills all 128 partitions
 * (mid-sized tensors still use every partition's DMA share), but not under
 * TILE_F_MIN: shorter rows are DMA-overhead-bound and cost more to simulate.
 * The flat tiles (nk_flat_tile), b read as a: same start, row stride. */
static uint32_t make_tiles(uint64_t n, tile *t, uint32_t cap)
{
	uint64_t f = n / ISA_NUM_PARTITIONS;
	f = f > TILE_F ? TILE_F : f < TILE_F_MIN ? TILE_F_MIN : f;
	uint32_t k = 0;
	uint64_t s = 0;
	for (; s < n && k < cap; k++) {
		nk_tile x = nk_flat_tile(n, s, f);
		t[k] = (tile){ x.start, x.rows, x.cols, x.cols, x.start, x.cols, 1, 0, 0 };
		s += (uint64_t)x.rows * x.cols;
	}
	return s == n ? k : 0;
}

/* the flat tiles of n elements (make_tiles) in a calloc'ed array the caller
 * frees, *nt of them; a status with diag filled when n cannot be tiled */
static isa_status flat_tiles(uint64_t n, const char *who, tile **tiles, uint32_t *nt, isa_diag *diag)
{
	uint64_t max_tiles = n / ((uint64_t)TILE_F_MIN * ISA_NUM_PARTITIONS) + 3;
	*tiles = NULL;
	*nt = 0;
	if (n == 0 || max_tiles > (1u << 20)) {
		nk_fail(diag, ISA_E_LIMIT, "%s: %llu elements", who, (unsigned long long)n);
		return ISA_E_LIMIT;
	}
	if (!(*tiles = calloc(max_tiles, sizeof(tile)))) {
		nk_fail(diag, ISA_E_NOMEM, "%s: no memory for %llu tiles", who, (unsigned long long)max_tiles);
		return ISA_E_NOMEM;
	}
	if (!(*nt = make_tiles(n, *tiles, (uint32_t)max_tiles))) {
		free(*tiles);
		*tiles = NULL;
		nk_fail(diag, ISA_E_LIMIT, "%s: cannot tile %llu elements", who, (unsigned long long)n);
		return ISA_E_LIMIT;
	}
	return ISA_OK;
}

typedef struct ew_op {
	unsigned nin;          /* 1: unary, 2: tensor_tensor, 3: select, on VectorE */
	bool vector_scalar;    /* unary as tensor_scalar `a <alu> imm` on VectorE, else activation */
	int alu, func;
	float scale;           /* activation input scale, or the immediate */
	int alu2;              /* tensor_scalar's second op (bypass: none) and immediate */
	float s2;
	int dt[3], dt_out;     /* operand and result dtypes */
	bool b_col;            /* b is one value per row: an fp32 [rows, 1] column, the
				* per-partition scalar of tensor_scalar */
	bool one[3];           /* operand i is a single element: loaded once into every
				* partition, read along each row with stride 0 */
} ew_op;

/* the compute of one tile: out (so) from a (sa) [, b (sb) [, c (sc)]] */
static isa_status ew_compute(isa_program *p, const ew_op *op, int engine, isa_ap so, isa_ap sa, isa_ap sb, isa_ap sc,
			     isa_diag *diag)
{
	if (op->nin == 3) {
		isa_instr in = nk_select_instr(so, sa, sb, sc);
		return isa_builder_emit(p, engine, &in, diag);
	}
	if (op->nin == 2 && op->b_col) {
		/* out = a <alu> b[row]: b's column is the per-partition scalar */
		isa_instr in = isa_instr_init(ISA_OP_tensor_scalar);
		in.ap[ISA_AP_DST] = so;
		in.ap[ISA_AP_SRC] = sa;
		in.ap[ISA_AP_SRC1] = sb;
		in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC | 1u << ISA_AP_SRC1;
		in.e[0] = (uint8_t)op->alu;
		in.e[1] = ISA_ALU_bypass;
		return isa_builder_emit(p, engine, &in, diag);
	}
	if (op->nin == 2)
		return isa_builder_tensor_tensor(p, engine, so, sa, sb, op->alu);
	if (op->vector_scalar) {
		/* integers to integers: the exact integer ALU path (wrapping as
		 * PyTorch's conversions do), not through fp32 */
		bool ints = !isa_dtype_is_float(op->dt[0]) && !isa_dtype_is_float(op->dt_out);
		isa_imm s0 = ints ? isa_imm_i32((int32_t)op->scale) : isa_imm_f32(op->scale);
		isa_imm s1 = ints ? isa_imm_i32((int32_t)op->s2) : isa_imm_f32(op->s2);
		return isa_builder_tensor_scalar(p, engine, so, sa, op->alu, s0, op->alu2, s1);
	}
	return isa_builder_activation(p, so, sa, op->func, op->scale, 0.0f);
}

/* Emits the program for `nt` tiles over a and out (n elements) and b (nb):
 * per tile the operands' loads, the compute, the store (pipeline.h). */
static isa_status ew_emit(int target, const ew_op *op, uint64_t n, uint64_t nb,
			  const tile *tiles, uint32_t nt, uint8_t **bin, size_t *len, isa_diag *diag)
{
	/* bytes per operand per buffer set: the longest tile row's (fp32) */
	uint64_t slot = 64;
	for (uint32_t i = 0; i < nt; i++) {
		uint64_t need = ((uint64_t)tiles[i].cols * 4 + 63) / 64 * 64;
		slot = need > slot ? need : slot;
	}
	nk_pipe pp;
	const uint64_t set_bytes = (op->nin + 1) * slot, one_base = 2 * set_bytes;   /* the single elements: 64 B each */
	if (!nk_pipe_init(&pp, target, 2, set_bytes, diag))
		return pp.em.st;
	int ta = nk_pipe_tensor(&pp, "a", op->dt[0], ISA_TK_INPUT, n);
	int tb = op->nin >= 2 ? nk_pipe_tensor(&pp, "b", op->dt[1], ISA_TK_INPUT, op->one[1] ? 1 : nb) : 0;
	int tc = op->nin >= 3 ? nk_pipe_tensor(&pp, "c", op->dt[2], ISA_TK_INPUT, op->one[2] ? 1 : n) : 0;
	int to = nk_pipe_tensor(&pp, "out", op->dt_out, ISA_TK_OUTPUT, n);
	const int compute = op->nin >= 2 || op->vector_scalar ? ISA_ENGINE_VECTOR : ISA_ENGINE_SCALAR;
	const int tin[3] = { ta, tb, tc };
	for (uint32_t i = 0; i < nt && !pp.em.st; i++) {
		const tile *x = &tiles[i];
		uint64_t base = nk_pipe_tile(&pp);            /* a, [b, [c,]] out of the tile's buffer set */
		for (unsigned j = 1; j < op->nin && i == 0; j++)
			if (op->one[j])
				nk_pipe_load(&pp, isa_ap_sbuf(op->dt[j], 0, ISA_NUM_PARTITIONS, one_base + 64 * j, 1),
					     isa_ap_hbm(op->dt[j], (uint32_t)tin[j], 0, ISA_NUM_PARTITIONS, 0, 1), j);
		isa_ap sa = isa_ap_sbuf(op->dt[0], 0, x->rows, base, x->cols);
		int bdt = op->b_col ? ISA_DT_fp32 : op->dt[1];
		isa_ap sb = x->pack ? isa_ap_sbuf(bdt, 0, x->rows, base + slot, x->pack)
			    : op->b_col ? isa_ap_sbuf(ISA_DT_fp32, 0, x->rows, base + slot, 1)
					: isa_ap_sbuf(op->dt[1], 0, x->rows, base + slot, x->cols);
		isa_ap sc = isa_ap_sbuf(op->dt[2], 0, x->rows, base + 2 * slot, x->cols);
		isa_ap so = isa_ap_sbuf(op->dt_out, 0, x->rows, base + op->nin * slot, x->cols);
		isa_ap hb = isa_ap_hbm(op->dt[1], (uint32_t)tb, x->start_b * isa_dtype_size(op->dt[1]), x->rows,
				       (int64_t)x->pstride_b, x->pack ? x->pack : op->b_col ? 1 : x->cols);
		if (x->fstride_b != 1 && !op->b_col && !x->pack) {
			int32_t fs = (int32_t)x->fstride_b;
			uint32_t sz = x->cols;
			hb = isa_ap_dims(hb, 1, &fs, &sz);
		}
		nk_pipe_load(&pp, sa, isa_ap_hbm(op->dt[0], (uint32_t)ta, x->start * isa_dtype_size(op->dt[0]), x->rows,
						  (int64_t)x->pstride, x->cols), 0);
		int32_t zero = 0;
		uint32_t cols = x->cols;
		if (op->one[1])
			sb = isa_ap_dims(isa_ap_sbuf(op->dt[1], 0, x->rows, one_base + 64, 1), 1, &zero, &cols);
		if (op->one[2])
			sc = isa_ap_dims(isa_ap_sbuf(op->dt[2], 0, x->rows, one_base + 128, 1), 1, &zero, &cols);
		/* (a single-element b was loaded with the first tile) */
		if (op->nin >= 2 && !op->one[1] && x->period) {
			/* partitions whose b rows follow each other in b: one load each run */
			unsigned bsz = isa_dtype_size(op->dt[1]);
			for (uint32_t p0 = 0; p0 < x->rows;) {
				uint64_t at = (x->start + (uint64_t)p0 * x->cols) % x->period;
				uint32_t run = (uint32_t)((x->period - at) / x->cols);
				run = run < x->rows - p0 ? run : x->rows - p0;
				nk_pipe_load(&pp, isa_ap_sbuf(op->dt[1], p0, run, base + slot, x->cols),
					     isa_ap_hbm(op->dt[1], (uint32_t)tb, at * bsz, run, (int64_t)x->cols, x->cols), 1);
				p0 += run;
			}
		} else if (op->nin >= 2 && !op->one[1]) {
			nk_pipe_load(&pp, sb, hb, 1);
		}
		if (op->nin >= 3 && !op->one[2])
			nk_pipe_load(&pp, sc, isa_ap_hbm(op->dt[2], (uint32_t)tc, x->start * isa_dtype_size(op->dt[2]),
							  x->rows, (int64_t)x->pstride, x->cols), 2);
		nk_pipe_compute(&pp, compute);
		if (!pp.em.st && x->pack) {
			/* each packed row's b along its cols elements: stride 0 */
			int32_t st2[2] = { 1, 0 };
			uint32_t sz2[2] = { x->pack, x->cols / x->pack };
			isa_ap wide = isa_ap_dims(isa_ap_sbuf(bdt, 0, x->rows, base + slot, 1), 2, st2, sz2);
			nk_pipe_check(&pp, isa_builder_tensor_tensor(pp.em.p, compute, so, sa, wide, op->alu));
		} else if (!pp.em.st) {
			nk_pipe_check(&pp, ew_compute(pp.em.p, op, compute, so, sa, sb, sc, diag));
		}
		nk_pipe_computed(&pp, compute);
		nk_pipe_store(&pp, isa_ap_hbm(op->dt_out, (uint32_t)to, x->start * isa_dtype_size(op->dt_out), x->rows,
					      (int64_t)x->pstride, x->cols), so, 2);
	}
	return nk_pipe_finish(&pp, bin, len);
}

static isa_status ew_program(int target, const ew_op *op, uint64_t n, uint8_t **bin,
			     size_t *len, isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	tile *tiles;
	uint32_t nt;
	isa_status st = flat_tiles(n, "elementwise kernel", &tiles, &nt, diag);
	if (!st)
		st = ew_emit(target, op, n, n, tiles, nt, bin, len, diag);
	free(tiles);
	return st;
}

isa_status nk_binary_program(int target, const nk_binary *prm, uint8_t **bin, size_t *len,
			     isa_diag *diag)
{
	int dt = prm->dtype;
	ew_op op = { 2, false, prm->alu, 0, 1.0f, ISA_ALU_bypass, 0.0f, { dt, dt, dt }, dt, false, { false } };
	return ew_program(target, &op, prm->n, bin, len, diag);
}

/* a <alu> b[0] over n = rows * cols elements: the flat tiles of a binary
 * op, b's single element as every partition's scalar (a float column read
 * with partition stride 0) */
static isa_status one_program(int target, const nk_broadcast *prm, uint8_t **bin, size_t *len, isa_diag *diag)
{
	uint64_t n = prm->rows * prm->cols;
	if (n == 0 || prm->cols == 0 || n / prm->cols != prm->rows || !isa_dtype_is_float(prm->dtype)) {
		nk_fail(diag, ISA_E_LIMIT, "single-element broadcast kernel: %llu x %llu elements of %s",
			(unsigned long long)prm->rows, (unsigned long long)prm->cols, isa_dtype_name(prm->dtype));
		return ISA_E_LIMIT;
	}
	tile *tiles;
	uint32_t nt;
	isa_status st = flat_tiles(n, "single-element broadcast kernel", &tiles, &nt, diag);
	for (uint32_t i = 0; i < nt; i++) {
		tiles[i].start_b = 0;
		tiles[i].pstride_b = 0;
		tiles[i].fstride_b = 0;
	}
	int dt = prm->dtype;
	ew_op op = { 2, false, prm->alu, 0, 1.0f, ISA_ALU_bypass, 0.0f, { dt, dt, dt }, dt, true, { false } };
	if (!st)
		st = ew_emit(target, &op, n, 1, tiles, nt, bin, len, diag);
	free(tiles);
	return st;
}

isa_status nk_broadcast_program(int target, const nk_broadcast *prm, uint8_t **bin, size_t *len,
				isa_diag *diag)
{
	uint64_t rows = prm->rows, cols = prm->cols;
	bool b_per_row = prm->b_per_row;
	*bin = NULL;
	*len = 0;
	if (prm->b_one)
		return one_program(target, prm, bin, len, diag);
	/* b [cols] over few rows (rotary's [1, 1, S, D] over [B, H, S, D]: 16
	 * rows of 4096): a's flat tiles on all 128 partitions, b's rows loaded
	 * where each partition's slice of it falls */
	if (!b_per_row && rows < ISA_NUM_PARTITIONS && cols >= 2 * TILE_F_MIN) {
		uint64_t n = rows * cols, f = n / ISA_NUM_PARTITIONS;
		f = f > TILE_F ? TILE_F : f;
		while (f > 1 && cols % f)
			f--;
		if (f >= 64 && n / cols == rows) {
			uint64_t nt = (n + f * ISA_NUM_PARTITIONS - 1) / (f * ISA_NUM_PARTITIONS);
			tile *tiles = calloc(nt, sizeof(tile));
			if (!tiles)
				return ISA_E_NOMEM;
			for (uint64_t i = 0; i < nt; i++) {
				uint64_t s0 = i * f * ISA_NUM_PARTITIONS, left = (n - s0) / f;
				tiles[i] = (tile){ s0, (uint32_t)(left < ISA_NUM_PARTITIONS ? left : ISA_NUM_PARTITIONS),
						   (uint32_t)f, f, 0, 0, 1, 0, cols };
			}
			int dt = prm->dtype;
			ew_op op = { 2, false, prm->alu, 0, 1.0f, ISA_ALU_bypass, 0.0f, { dt, dt, dt }, dt, false, { false } };
			isa_status st = ew_emit(target, &op, n, cols, tiles, (uint32_t)nt, bin, len, diag);
			free(tiles);
			return st;
		}
	}
	uint64_t rblocks = (rows + ISA_NUM_PARTITIONS - 1) / ISA_NUM_PARTITIONS;
	uint64_t cblocks = (cols + TILE_F - 1) / TILE_F;
	if (rows == 0 || cols == 0 || cols > INT32_MAX || rblocks > (1u << 20) ||
	    cblocks > (1u << 20) / rblocks) {
		nk_fail(diag, ISA_E_LIMIT, "broadcast kernel: %llu x %llu elements",
			(unsigned long long)rows, (unsigned long long)cols);
		return ISA_E_LIMIT;
	}
	tile *tiles = calloc(rblocks * cblocks + 1, sizeof(tile));
	if (!tiles)
		return ISA_E_NOMEM;
	uint32_t nt = 0;
	uint64_t r0 = 0;
	/* short rows with one b each: `pack` whole rows to a partition (a
	 * [4, 128, 4, 32] * [4, 128, 4, 1] product was 16 tiles of 32 columns) */
	if (b_per_row && cols < TILE_F_MIN && rows >= 2 * ISA_NUM_PARTITIONS) {
		uint64_t pack = TILE_F / cols;
		for (; rows - r0 >= 2 * ISA_NUM_PARTITIONS;) {
			uint64_t k = (rows - r0) / ISA_NUM_PARTITIONS;
			k = k < pack ? k : pack;
			tile *x = &tiles[nt++];
			*x = (tile){ r0 * cols, ISA_NUM_PARTITIONS, (uint32_t)(k * cols), k * cols, r0, k, 0, (uint32_t)k, 0 };
			r0 += k * ISA_NUM_PARTITIONS;
		}
	}
	for (uint64_t r = r0; r < rows; r += ISA_NUM_PARTITIONS)
		for (uint64_t c = 0; c < cols; c += TILE_F) {
			tile *x = &tiles[nt++];
			x->rows = (uint32_t)(rows - r < ISA_NUM_PARTITIONS ? rows - r : ISA_NUM_PARTITIONS);
			x->cols = (uint32_t)(cols - c < TILE_F ? cols - c : TILE_F);
			x->start = r * cols + c;
			x->pstride = cols;
			/* b [rows, 1]: one value per row, repeated along it (free stride 0);
			 * b [cols]: the same row in every partition (partition stride 0) */
			x->start_b = b_per_row ? r : c;
			x->pstride_b = b_per_row ? 1 : 0;
			x->fstride_b = b_per_row ? 0 : 1;
		}
	int dt = prm->dtype;
	ew_op op = { 2, false, prm->alu, 0, 1.0f, ISA_ALU_bypass, 0.0f, { dt, dt, dt }, dt, false, { false } };
	/* a float b per row is a [P, 1] column loaded once per tile (the DMA
	 * casts it to fp32), not a stride-0 pattern of single-element reads;
	 * integers keep the exact integer ALU of tensor_tensor */
	op.b_col = b_per_row && isa_dtype_is_float(dt);
	isa_status st = ew_emit(target, &op, rows * cols, b_per_row ? rows : cols, tiles, nt,
				bin, len, diag);
	free(tiles);
	return st;
}

isa_status nk_unary_program(int target, const nk_unary *prm, uint8_t **bin, size_t *len,
			    isa_diag *diag)
{
	int dt = prm->dtype;
	ew_op op = { 1, false, 0, prm->func, prm->scale, ISA_ALU_bypass, 0.0f, { dt, dt, dt }, dt, false, { false } };
	return ew_program(target, &op, prm->n, bin, len, diag);
}

isa_status nk_scalar_program(int target, const nk_scalar *prm, uint8_t **bin, size_t *len,
			     isa_diag *diag)
{
	int dt = prm->dtype;
	ew_op op = { 1, true, prm->alu, 0, prm->s, prm->alu2, prm->s2, { dt, dt, dt }, dt, false, { false } };
	return ew_program(target, &op, prm->n, bin, len, diag);
}

isa_status nk_compare_program(int target, const nk_compare *prm, uint8_t **bin, size_t *len,
			      isa_diag *diag)
{
	int dt = prm->dtype;
	ew_op op = { prm->scalar ? 1 : 2, prm->scalar, prm->alu, 0, prm->s, ISA_ALU_bypass, 0.0f,
		     { dt, dt, dt }, ISA_DT_bool, false, { false } };
	return ew_program(target, &op, prm->n, bin, len, diag);
}

isa_status nk_cast_program(int target, const nk_cast *prm, uint8_t **bin, size_t *len,
			   isa_diag *diag)
{
	/* x + 0: the conversion happens on the way out of the ALU */
	ew_op op = { 1, true, ISA_ALU_add, 0, 0.0f, ISA_ALU_bypass, 0.0f,
		     { prm->in_dtype, prm->in_dtype, prm->in_dtype }, prm->out_dtype, false, { false } };
	return ew_program(target, &op, prm->n, bin, len, diag);
}

isa_status nk_select_program(int target, const nk_select *prm, uint8_t **bin, size_t *len,
			     isa_diag *diag)
{
	int dt = prm->dtype;
	ew_op op = { 3, false, 0, 0, 1.0f, ISA_ALU_bypass, 0.0f, { ISA_DT_bool, dt, dt }, dt, false,
		     { false, prm->b_one, prm->c_one } };
	return ew_program(target, &op, prm->n, bin, len, diag);
}

/* One tile of a chain: steps on VectorE from the loaded inputs (slots
 * 0..nin-1 of buffer set `base`) through the fp32 value (slot nin) to out
 * (slot nin + 1). */
static isa_status chain_tile(isa_program *p, const nk_chain *c, const tile *x, uint64_t base, uint64_t slot)
{
	isa_ap val = isa_ap_sbuf(ISA_DT_fp32, 0, x->rows, base + c->nin * slot, x->cols);
	isa_ap out = isa_ap_sbuf(c->dtype, 0, x->rows, base + (c->nin + 1) * slot, x->cols);
	isa_ap cur = isa_ap_sbuf(c->dtype, 0, x->rows, base + c->first * slot, x->cols);
	for (unsigned k = 0; k < c->nsteps; k++) {
		isa_ap dst = k + 1 == c->nsteps ? out : val;
		isa_status st;
		if (c->input[k] < 0) {
			st = isa_builder_tensor_scalar(p, ISA_ENGINE_VECTOR, dst, cur, c->alu[k], isa_imm_f32(c->imm[k]),
						       ISA_ALU_bypass, isa_imm_f32(0.0f));
		} else {
			isa_ap in = isa_ap_sbuf(c->dtype, 0, x->rows, base + (uint64_t)c->input[k] * slot, x->cols);
			st = c->input_first[k] ? isa_builder_tensor_tensor(p, ISA_ENGINE_VECTOR, dst, in, cur, c->alu[k])
					       : isa_builder_tensor_tensor(p, ISA_ENGINE_VECTOR, dst, cur, in, c->alu[k]);
		}
		if (st)
			return st;
		cur = val;
	}
	return ISA_OK;
}

static isa_status chain_emit(int target, const nk_chain *c, const tile *tiles, uint32_t nt, uint8_t **bin,
			     size_t *len, isa_diag *diag)
{
	const uint64_t slot = (uint64_t)TILE_F * 4, esz = isa_dtype_size(c->dtype);
	nk_pipe pp;
	if (!nk_pipe_init(&pp, target, 2, (c->nin + 2) * slot, diag))
		return pp.em.st;
	static const char *names[3] = { "in0", "in1", "in2" };
	int tin[3];
	for (unsigned i = 0; i < c->nin; i++)
		tin[i] = nk_pipe_tensor(&pp, names[i], c->dtype, ISA_TK_INPUT, c->n);
	int to = nk_pipe_tensor(&pp, "out", c->dtype, ISA_TK_OUTPUT, c->n);
	for (uint32_t t = 0; t < nt && !pp.em.st; t++) {
		const tile *x = &tiles[t];
		uint64_t base = nk_pipe_tile(&pp);
		for (unsigned i = 0; i < c->nin; i++)
			nk_pipe_load(&pp, isa_ap_sbuf(c->dtype, 0, x->rows, base + i * slot, x->cols),
				     isa_ap_hbm(c->dtype, (uint32_t)tin[i], x->start * esz, x->rows, (int64_t)x->pstride,
						x->cols), i);
		nk_pipe_compute(&pp, ISA_ENGINE_VECTOR);
		if (!pp.em.st)
			nk_pipe_check(&pp, chain_tile(pp.em.p, c, x, base, slot));
		nk_pipe_computed(&pp, ISA_ENGINE_VECTOR);
		nk_pipe_store(&pp, isa_ap_hbm(c->dtype, (uint32_t)to, x->start * esz, x->rows, (int64_t)x->pstride, x->cols),
			      isa_ap_sbuf(c->dtype, 0, x->rows, base + (c->nin + 1) * slot, x->cols), 2);
	}
	return nk_pipe_finish(&pp, bin, len);
}

isa_status nk_chain_program(int target, const nk_chain *c, uint8_t **bin, size_t *len, isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	bool ok = c->nin >= 1 && c->nin <= 3 && c->first < c->nin && c->nsteps >= 1 &&
		  c->nsteps <= NK_CHAIN_MAX && isa_dtype_is_float(c->dtype);
	for (unsigned k = 0; ok && k < c->nsteps; k++)
		ok = c->input[k] < (int)c->nin;
	if (!ok) {
		nk_fail(diag, ISA_E_LIMIT, "chain kernel: %u inputs, %u steps, %llu elements", c->nin, c->nsteps,
			(unsigned long long)c->n);
		return ISA_E_LIMIT;
	}
	tile *tiles;
	uint32_t nt;
	isa_status st = flat_tiles(c->n, "chain kernel", &tiles, &nt, diag);
	if (!st)
		st = chain_emit(target, c, tiles, nt, bin, len, diag);
	free(tiles);
	return st;
}
