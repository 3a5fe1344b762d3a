/*
 * gather.c -- kernel generators that address HBM rows by value or write
 * generated data:
 *
 *   nk_gather_program: out[o, j, :] = table[o, index[j], :] (index_select,
 *   embedding) -- indices go into an SBUF column, 128 at a time (int64 ones
 *   as their low words, -1 where the high word is not 0), then one indirect DMA per outer
 *   slab moves whole rows HBM to HBM; an index outside the table is a
 *   runtime fault (a Python exception), never an out-of-bounds access.
 *
 *   nk_fill_program: out[i] = value, or start + i * step (arange), built in
 *   SBUF by VectorE memset / GpSimd iota and stored by DMA, 64-bit integers as
 *   (low, high) int32 pairs.
 */
#include "kernels.h"

#include <string.h>

#define P 128u
#define FILL_F 2048u

static isa_status dma_issue(isa_program *p, int engine, isa_ap dst, isa_ap src, const isa_ap *index,
			    unsigned queue, uint32_t sem, isa_diag *diag)
{
	int d = isa_builder_dma(p, "", index ? ISA_DMA_GATHER : ISA_DMA_DIRECT, &dst, &src, index, diag);
	if (d < 0)
		return diag->code;
	return isa_builder_dma_copy(p, engine, (uint32_t)d, queue, sem, 1);
}

/*
 * Tile t of the index (r values from j0) into the SBUF column of slot
 * t % 2, ready for GpSimd's indirect DMAs (GpSimd waits for it).  An int64
 * index is loaded as its (low, high) int32 pair and GpSimd folds the high
 * word in: lo | -(hi != 0), so any index outside [0, 2^31) -- 2^32 + 1,
 * a negative one -- is a negative row, outside every table: a fault,
 * never the row its low word names.
 */
static isa_status load_index(isa_program *p, int ti, uint64_t t, uint32_t r, bool int64, isa_diag *diag)
{
	unsigned slot = (unsigned)(t % 2), iw = int64 ? 2 : 1;
	isa_ap col = isa_ap_sbuf(ISA_DT_int32, 0, r, slot * 4, 1);
	isa_ap land = int64 ? isa_ap_sbuf(ISA_DT_int32, 0, r, 8 + slot * 8, 2) : col;
	isa_status st = dma_issue(p, ISA_ENGINE_SYNC, land,
				  isa_ap_hbm(ISA_DT_int32, (uint32_t)ti, t * P * iw * 4, r, iw, iw), NULL, 0, 0, diag);
	if (st || (st = isa_builder_sem_wait(p, ISA_ENGINE_GPSIMD, 0, ISA_ALU_is_ge, (uint32_t)t + 1)) || !int64)
		return st;
	isa_ap lo = isa_ap_sbuf(ISA_DT_int32, 0, r, 8 + slot * 8, 1);
	isa_ap hi = isa_ap_sbuf(ISA_DT_int32, 0, r, 12 + slot * 8, 1);
	if ((st = isa_builder_tensor_scalar(p, ISA_ENGINE_GPSIMD, hi, hi, ISA_ALU_not_equal, isa_imm_i32(0),
					    ISA_ALU_multiply, isa_imm_i32(-1))))
		return st;
	return isa_builder_tensor_tensor(p, ISA_ENGINE_GPSIMD, col, lo, hi, ISA_ALU_bitwise_or);
}

isa_status nk_gather_program(int target, const nk_gather *gth, uint8_t **bin, size_t *len,
			     isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	uint64_t tiles = (gth->nidx + P - 1) / P;
	if (!gth->outer || !gth->rows || !gth->inner || !gth->nidx || gth->rows > UINT32_MAX ||
	    gth->inner > INT32_MAX || tiles * gth->outer > 65536) {
		nk_fail(diag, ISA_E_LIMIT, "gather kernel: %llu x %llu x %llu table, %llu indices",
			(unsigned long long)gth->outer, (unsigned long long)gth->rows,
			(unsigned long long)gth->inner, (unsigned long long)gth->nidx);
		return ISA_E_LIMIT;
	}
	isa_status st = ISA_E_NOMEM;
	isa_program *p = isa_program_new(target);
	if (!p)
		return st;
	p->num_semaphores = 3;   /* 0 indices landed, 1 rows moved, 2 index slot free */
	unsigned iw = gth->index_int64 ? 2 : 1;
	uint64_t st_[1] = { gth->outer * gth->rows * gth->inner }, si[1] = { gth->nidx * iw },
		 so[1] = { gth->outer * gth->nidx * gth->inner };
	/* scatter: "src" rows into the "table" (bound in place: other rows stay) */
	int tt = isa_builder_tensor(p, "table", gth->dtype, gth->scatter ? ISA_TK_OUTPUT : ISA_TK_INPUT, 1,
				    st_, diag);
	int ti = isa_builder_tensor(p, "index", ISA_DT_int32, ISA_TK_INPUT, 1, si, diag);
	int to = isa_builder_tensor(p, gth->scatter ? "src" : "out", gth->dtype,
				    gth->scatter ? ISA_TK_INPUT : ISA_TK_OUTPUT, 1, so, diag);
	if (tt < 0 || ti < 0 || to < 0) {
		st = diag->code;
		goto free_program;
	}
	unsigned esz = isa_dtype_size(gth->dtype);
	uint32_t moved = 0;
	for (uint64_t t = 0; t < tiles; t++) {
		uint64_t j0 = t * P;
		uint32_t r = (uint32_t)(gth->nidx - j0 < P ? gth->nidx - j0 : P);
		isa_ap col = isa_ap_sbuf(ISA_DT_int32, 0, r, (t % 2) * 4, 1);
		/* the slot was read by the gathers of tile t-2 */
		if (t >= 2 && (st = isa_builder_sem_wait(p, ISA_ENGINE_SYNC, 1,
							 ISA_ALU_is_ge, (uint32_t)((t - 1) * gth->outer))))
			goto free_program;
		if ((st = load_index(p, ti, t, r, gth->index_int64, diag)))
			goto free_program;
		for (uint64_t o = 0; o < gth->outer; o++) {
			isa_ap table = isa_ap_hbm(gth->dtype, (uint32_t)tt, o * gth->rows * gth->inner * esz,
						  (uint32_t)gth->rows, (int64_t)gth->inner, (uint32_t)gth->inner);
			isa_ap rows = isa_ap_hbm(gth->dtype, (uint32_t)to, (o * gth->nidx + j0) * gth->inner * esz,
						 r, (int64_t)gth->inner, (uint32_t)gth->inner);
			int mode = gth->accumulate ? ISA_DMA_SCATTER_ADD : ISA_DMA_SCATTER;
			int d = gth->scatter ? isa_builder_dma(p, "", mode, &table, &rows, &col, diag)
					     : isa_builder_dma(p, "", ISA_DMA_GATHER, &rows, &table, &col, diag);
			if (d < 0) {
				st = diag->code;
				goto free_program;
			}
			if ((st = isa_builder_dma_copy(p, ISA_ENGINE_GPSIMD, (uint32_t)d, 1 + (unsigned)(o % 2), 1, 1)))
				goto free_program;
			moved++;
		}
	}
	if ((st = nk_finish(p, ISA_ENGINE_GPSIMD, 1, moved, bin, len, diag)))
		goto free_program;
	st = ISA_OK;
free_program:
	isa_program_free(p);
	return st;
}

isa_status nk_fill_program(int target, const nk_fill *fl, uint8_t **bin, size_t *len, isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	unsigned words = fl->int64 ? 2 : 1;     /* ISA elements per output element */
	bool is_int = !isa_dtype_is_float(fl->dtype);
	if (!fl->n || fl->n > ((uint64_t)1 << 40) || (fl->iota && !(is_int || fl->dtype == ISA_DT_fp32))) {
		nk_fail(diag, ISA_E_LIMIT, "fill kernel: %llu elements", (unsigned long long)fl->n);
		return ISA_E_LIMIT;
	}
	isa_status st = ISA_E_NOMEM;
	isa_program *p = isa_program_new(target);
	if (!p)
		return st;
	p->num_semaphores = 1;
	int dt = fl->int64 ? ISA_DT_int32 : fl->dtype;
	uint64_t so[1] = { fl->n * words };
	int to = isa_builder_tensor(p, "out", dt, ISA_TK_OUTPUT, 1, so, diag);
	if (to < 0) {
		st = diag->code;
		goto free_program;
	}
	unsigned esz = isa_dtype_size(dt);
	/* one [128, F] tile of values (F elements per partition) */
	uint64_t f = (fl->n + P - 1) / P;
	f = f > FILL_F ? FILL_F : f;
	uint64_t per_tile = f * P;
	bool one_tile = fl->iota ? false : true;   /* a constant tile is stored over and over */
	uint32_t stores = 0;
	for (uint64_t s = 0; s < fl->n; s += per_tile) {
		uint64_t left = fl->n - s, rows = left / f, tail = left % f;
		if (rows >= P) {   /* a full tile: the remainder starts the next one */
			rows = P;
			tail = 0;
		}
		if (s == 0 || !one_tile) {
			/* build the tile (ordered after the previous tile's stores) */
			if (s && (st = isa_builder_sem_wait(p, ISA_ENGINE_GPSIMD, 0, ISA_ALU_is_ge, stores)))
				goto free_program;
			int32_t stride = (int32_t)words;
			uint32_t size = (uint32_t)f;
			isa_ap lo = isa_ap_dims(isa_ap_sbuf(dt, 0, P, 0, (uint32_t)f), 1, &stride, &size);
			if (fl->iota) {
				isa_instr in = isa_instr_init(ISA_OP_iota);
				in.ap[ISA_AP_DST] = lo;
				in.ap_mask = 1u << ISA_AP_DST;
				in.imm[0] = isa_imm_i32((int32_t)(fl->start + (int64_t)s * fl->step));
				in.imm[1] = isa_imm_i32((int32_t)(fl->step * (int64_t)f));
				in.nivec = 1;
				in.ivec[0] = (int32_t)fl->step;
				if ((st = isa_builder_emit(p, ISA_ENGINE_GPSIMD, &in, diag)))
					goto free_program;
			} else {
				isa_imm v = is_int ? isa_imm_i32((int32_t)fl->ivalue) : isa_imm_f32(fl->fvalue);
				if ((st = isa_builder_memset(p, ISA_ENGINE_GPSIMD, lo, v)))
					goto free_program;
			}
			if (fl->int64) {
				isa_ap hi = lo;
				hi.offset = 4;
				/* a range may cross zero: each value's high word is its
				 * low word's sign (an arithmetic shift by 31) */
				st = fl->iota ? isa_builder_tensor_scalar(p, ISA_ENGINE_GPSIMD, hi, lo, ISA_ALU_shift_right,
									  isa_imm_i32(31), ISA_ALU_bypass, isa_imm_i32(0))
					      : isa_builder_memset(p, ISA_ENGINE_GPSIMD, hi,
								   isa_imm_i32((int32_t)(fl->ivalue >> 32)));
				if (st)
					goto free_program;
			}
		}
		if (rows) {
			isa_ap src = isa_ap_sbuf(dt, 0, (uint32_t)rows, 0, (uint32_t)(f * words));
			isa_ap dst = isa_ap_hbm(dt, (uint32_t)to, s * words * esz, (uint32_t)rows,
						(int64_t)(f * words), (uint32_t)(f * words));
			if ((st = dma_issue(p, ISA_ENGINE_GPSIMD, dst, src, NULL, stores % 4, 0, diag)))
				goto free_program;
			stores++;
		}
		if (tail) {   /* the first `tail` values of the next row */
			isa_ap src = isa_ap_sbuf(dt, (uint32_t)rows, 1, 0, (uint32_t)(tail * words));
			isa_ap dst = isa_ap_hbm(dt, (uint32_t)to, (s + rows * f) * words * esz, 1,
						(int64_t)(tail * words), (uint32_t)(tail * words));
			if ((st = dma_issue(p, ISA_ENGINE_GPSIMD, dst, src, NULL, stores % 4, 0, diag)))
				goto free_program;
			stores++;
			break;
		}
	}
	if ((st = nk_finish(p, ISA_ENGINE_GPSIMD, 0, stores, bin, len, diag)))
		goto free_program;
	st = ISA_OK;
free_program:
	isa_program_free(p);
	return st;
}
