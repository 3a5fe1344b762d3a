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
 *   SBUF by GpSimd memset / iota and stored by DMA, 64-bit integers as
 *   (low, high) int32 pairs.
 *
 * Both run on the tile pipeline (pipeline.h): a gather tile is 128 indices
 * (loaded by Sync, two buffer sets) whose "stores" are the indirect DMAs
 * GpSimd issues; a fill tile is made by GpSimd and stored.
 */
#include "programs.h"
#include "pipeline.h"

#define P 128u
#define FILL_F 2048u

/*
 * A tile of the index (r values from j0) into the SBUF column of its buffer
 * set, ready for GpSimd's indirect DMAs.  An int64 index is loaded as its
 * (low, high) int32 pair and GpSimd folds the high word in:
 * lo | -(hi != 0), so any index outside [0, 2^31) -- 2^32 + 1, a negative
 * one -- is a negative row, outside every table: a fault, never the row its
 * low word names.  Buffer set: the column, then the pair.
 */
static isa_ap load_index(nk_pipe *pp, int ti, uint64_t j0, uint32_t r, bool int64)
{
	uint64_t set = nk_pipe_tile(pp);
	unsigned iw = int64 ? 2 : 1;
	isa_ap col = isa_ap_sbuf(ISA_DT_int32, 0, r, set, 1);
	isa_ap land = int64 ? isa_ap_sbuf(ISA_DT_int32, 0, r, set + 4, 2) : col;
	nk_pipe_load(pp, land, isa_ap_hbm(ISA_DT_int32, (uint32_t)ti, j0 * iw * 4, r, iw, iw), 0);
	nk_pipe_compute(pp, ISA_ENGINE_GPSIMD);
	if (int64) {
		isa_ap lo = isa_ap_sbuf(ISA_DT_int32, 0, r, set + 4, 1), hi = isa_ap_sbuf(ISA_DT_int32, 0, r, set + 8, 1);
		if (!pp->em.st)
			nk_pipe_check(pp, isa_builder_tensor_scalar(pp->em.p, ISA_ENGINE_GPSIMD, hi, hi, ISA_ALU_not_equal,
								    isa_imm_i32(0), ISA_ALU_multiply, isa_imm_i32(-1)));
		nk_em_tt(&pp->em, ISA_ENGINE_GPSIMD, col, lo, hi, ISA_ALU_bitwise_or);
	}
	nk_pipe_computed(pp, ISA_ENGINE_GPSIMD);
	return col;
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
	nk_pipe pp;
	if (!nk_pipe_init(&pp, target, 2, 12, diag))
		return nk_pipe_finish(&pp, bin, len);
	/* scatter: "src" rows into the "table" (bound in place: other rows stay) */
	int tt = nk_pipe_tensor(&pp, "table", gth->dtype, gth->scatter ? ISA_TK_OUTPUT : ISA_TK_INPUT,
				gth->outer * gth->rows * gth->inner);
	int ti = nk_pipe_tensor(&pp, "index", ISA_DT_int32, ISA_TK_INPUT, gth->nidx * (gth->index_int64 ? 2 : 1));
	int to = nk_pipe_tensor(&pp, gth->scatter ? "src" : "out", gth->dtype,
				gth->scatter ? ISA_TK_INPUT : ISA_TK_OUTPUT, gth->outer * gth->nidx * gth->inner);
	unsigned esz = isa_dtype_size(gth->dtype);
	int mode = !gth->scatter ? ISA_DMA_GATHER : gth->accumulate ? ISA_DMA_SCATTER_ADD : ISA_DMA_SCATTER;
	for (uint64_t j0 = 0; j0 < gth->nidx && !pp.em.st; j0 += P) {
		uint32_t r = (uint32_t)(gth->nidx - j0 < P ? gth->nidx - j0 : P);
		isa_ap col = load_index(&pp, ti, j0, r, gth->index_int64);
		for (uint64_t o = 0; o < gth->outer; o++) {
			isa_ap table = isa_ap_hbm(gth->dtype, (uint32_t)tt, o * gth->rows * gth->inner * esz,
						  (uint32_t)gth->rows, (int64_t)gth->inner, (uint32_t)gth->inner);
			isa_ap rows = isa_ap_hbm(gth->dtype, (uint32_t)to, (o * gth->nidx + j0) * gth->inner * esz,
						 r, (int64_t)gth->inner, (uint32_t)gth->inner);
			if (gth->scatter)
				nk_pipe_store_dma(&pp, mode, table, rows, &col, 1 + (unsigned)(o % 2));
			else
				nk_pipe_store_dma(&pp, mode, rows, table, &col, 1 + (unsigned)(o % 2));
		}
	}
	return nk_pipe_finish(&pp, bin, len);
}

/* the fill's tile from element s: f values per partition (words ISA
 * elements each), GpSimd's iota or memset, 64-bit values' high words */
static void fill_tile(nk_pipe *pp, const nk_fill *fl, int dt, uint64_t s, uint64_t f)
{
	unsigned words = fl->int64 ? 2 : 1;
	int32_t stride = (int32_t)words;
	uint32_t size = (uint32_t)f;
	isa_ap lo = isa_ap_dims(isa_ap_sbuf(dt, 0, P, 0, (uint32_t)f), 1, &stride, &size);
	nk_pipe_tile(pp);
	if (fl->iota) {
		isa_instr in = isa_instr_init(ISA_OP_iota);
		in.ap[ISA_AP_DST] = lo;
		in.ap_mask = 1u << ISA_AP_DST;
		in.imm[0] = isa_imm_i32((int32_t)(fl->start + (int64_t)s * fl->step));
		in.imm[1] = isa_imm_i32((int32_t)(fl->step * (int64_t)f));
		in.nivec = 1;
		in.ivec[0] = (int32_t)fl->step;
		nk_em_emit(&pp->em, ISA_ENGINE_GPSIMD, &in);
	} else if (!pp->em.st) {
		bool is_int = !isa_dtype_is_float(fl->dtype);
		isa_imm v = is_int ? isa_imm_i32((int32_t)fl->ivalue) : isa_imm_f32(fl->fvalue);
		nk_pipe_check(pp, isa_builder_memset(pp->em.p, ISA_ENGINE_GPSIMD, lo, v));
	}
	if (fl->int64 && !pp->em.st) {
		isa_ap hi = lo;
		hi.offset = 4;
		/* a range may cross zero: each value's high word is its low
		 * word's sign (an arithmetic shift by 31) */
		nk_pipe_check(pp, fl->iota ? isa_builder_tensor_scalar(pp->em.p, ISA_ENGINE_GPSIMD, hi, lo,
									ISA_ALU_shift_right, isa_imm_i32(31),
									ISA_ALU_bypass, isa_imm_i32(0))
					   : isa_builder_memset(pp->em.p, ISA_ENGINE_GPSIMD, hi,
								isa_imm_i32((int32_t)(fl->ivalue >> 32))));
	}
	nk_pipe_computed(pp, ISA_ENGINE_GPSIMD);
}

/* [rows, n] ISA elements from partition p0 of the tile to element `at` */
static void fill_store(nk_pipe *pp, int dt, int to, uint64_t at, uint32_t p0, uint32_t rows, uint64_t n)
{
	nk_pipe_store(pp, isa_ap_hbm(dt, (uint32_t)to, at * isa_dtype_size(dt), rows, (int64_t)n, (uint32_t)n),
		      isa_ap_sbuf(dt, p0, rows, 0, (uint32_t)n), pp->stores % 4);
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
	nk_pipe pp;
	if (!nk_pipe_init(&pp, target, 1, 0, diag))
		return nk_pipe_finish(&pp, bin, len);
	pp.load_engine = ISA_ENGINE_GPSIMD;   /* GpSimd makes the tiles */
	int dt = fl->int64 ? ISA_DT_int32 : fl->dtype;
	int to = nk_pipe_tensor(&pp, "out", dt, ISA_TK_OUTPUT, fl->n * words);
	/* one [128, F] tile of values (F elements per partition); a constant
	 * tile is made once and stored over and over */
	uint64_t f = (fl->n + P - 1) / P;
	f = f > FILL_F ? FILL_F : f;
	for (uint64_t s = 0; s < fl->n && !pp.em.st; s += f * P) {
		uint64_t left = fl->n - s, rows = left / f, tail = left % f;
		if (rows >= P) {   /* a full tile: the remainder starts the next one */
			rows = P;
			tail = 0;
		}
		if (s == 0 || fl->iota)
			fill_tile(&pp, fl, dt, s, f);
		if (rows)
			fill_store(&pp, dt, to, s * words, 0, (uint32_t)rows, f * words);
		if (tail)   /* the first `tail` values of the next row */
			fill_store(&pp, dt, to, (s + rows * f) * words, (uint32_t)rows, 1, tail * words);
	}
	return nk_pipe_finish(&pp, bin, len);
}
