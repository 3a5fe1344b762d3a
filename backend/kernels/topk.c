/*
 * topk.c -- kernel generator for topk / unstable sort along rows: tiles of
 * up to 128 rows (one per partition) loaded by Sync, ranked by GpSimd's
 * topk instruction (CPU PyTorch's selection algorithm, so ties come out as
 * on the CPU), values and uint32 positions stored by GpSimd.  Two buffers
 * when two tiles fit a partition, else one.  A row longer than a partition
 * holds is laid over [Pn, Fn] partitions (Fn the smallest divisor of its
 * length with Pn <= 128: the row's elements exactly, no padding, which
 * would change what the CPU's algorithm sees) and ranked whole by the
 * instruction's `span` form, one row at a time.
 */
#include "kernels.h"

#define P 128u

static uint64_t align4(uint64_t n) { return (n + 3) & ~3ull; }

/* bytes of one buffer (a row, its k values, its k positions) per partition */
static uint64_t buffer_bytes(const nk_topk *o)
{
	unsigned esz = isa_dtype_size(o->dtype);
	return align4(o->cols * esz) + align4(o->k * esz) + 4 * o->k;
}

/* the smallest f with n % f == 0 and n / f <= 128 (0: none under 65536) */
static uint64_t span_cols(uint64_t n)
{
	for (uint64_t f = (n + P - 1) / P; f <= n && f < 65536; f++)
		if (n % f == 0)
			return f;
	return 0;
}

static bool fits_one(const isa_target_info *ti, const nk_topk *o)
{
	return o->cols <= 65535 && (o->rows + P - 1) / P <= 65536 && buffer_bytes(o) <= ti->sbuf_partition_bytes;
}

/* a spanning row: the row's, the k values' and the positions' columns */
static bool span_geometry(const isa_target_info *ti, const nk_topk *o, uint64_t *fn, uint64_t *fk)
{
	unsigned esz = isa_dtype_size(o->dtype);
	*fn = span_cols(o->cols);
	*fk = span_cols(o->k);
	return *fn && *fk && o->rows <= 65536 && o->cols <= (1ull << 31) &&
	       align4(*fn * esz) + align4(*fk * esz) + 4 * *fk <= ti->sbuf_partition_bytes;
}

bool nk_topk_fits(int target, const nk_topk *o)
{
	const isa_target_info *ti = isa_target_get(target);
	unsigned esz = isa_dtype_size(o->dtype);
	uint64_t fn, fk;
	if (!ti || !esz || esz > 4 || !o->rows || !o->cols || !o->k || o->k > o->cols || (o->sort && o->k != o->cols))
		return false;
	return fits_one(ti, o) || span_geometry(ti, o, &fn, &fk);
}

/* one row at a time over [Pn, Fn] partitions: load, rank (span), store */
static isa_status span_program(isa_program *p, const isa_target_info *ti, const nk_topk *o, int tx, int tv, int ti_,
			       isa_diag *diag)
{
	uint64_t fn, fk;
	span_geometry(ti, o, &fn, &fk);
	int dt = o->dtype;
	unsigned esz = isa_dtype_size(dt);
	uint32_t pn = (uint32_t)(o->cols / fn), pk = (uint32_t)(o->k / fk);
	isa_status st;
	for (uint64_t r = 0; r < o->rows; r++) {
		isa_ap sx = isa_ap_sbuf(dt, 0, pn, 0, (uint32_t)fn);
		isa_ap sv = isa_ap_sbuf(dt, 0, pk, align4(fn * esz), (uint32_t)fk);
		isa_ap si = isa_ap_sbuf(ISA_DT_uint32, 0, pk, align4(fn * esz) + align4(fk * esz), (uint32_t)fk);
		isa_ap hx = isa_ap_hbm(dt, (uint32_t)tx, r * o->cols * esz, pn, (int64_t)fn, (uint32_t)fn);
		isa_ap hv = isa_ap_hbm(dt, (uint32_t)tv, r * o->k * esz, pk, (int64_t)fk, (uint32_t)fk);
		isa_ap hi = isa_ap_hbm(ISA_DT_uint32, (uint32_t)ti_, r * o->k * 4, pk, (int64_t)fk, (uint32_t)fk);
		int dl = isa_builder_dma(p, "", ISA_DMA_DIRECT, &sx, &hx, NULL, diag);
		int dv = isa_builder_dma(p, "", ISA_DMA_DIRECT, &hv, &sv, NULL, diag);
		int di = isa_builder_dma(p, "", ISA_DMA_DIRECT, &hi, &si, NULL, diag);
		if (dl < 0 || dv < 0 || di < 0)
			return diag->code;
		/* the previous row's stores landed (one buffer) */
		if (r && (st = isa_builder_sem_wait(p, ISA_ENGINE_SYNC, 1, ISA_ALU_is_ge, (uint32_t)(2 * r))))
			return st;
		if ((st = isa_builder_dma_copy(p, ISA_ENGINE_SYNC, (uint32_t)dl, 0, 0, 1)) ||
		    (st = isa_builder_sem_wait(p, ISA_ENGINE_GPSIMD, 0, ISA_ALU_is_ge, (uint32_t)(r + 1))))
			return st;
		isa_instr in = isa_instr_init(ISA_OP_topk);
		in.ap[ISA_AP_DST] = sv;
		in.ap[ISA_AP_SRC] = sx;
		in.ap[ISA_AP_AUX] = si;
		in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC | 1u << ISA_AP_AUX;
		in.flags = (uint16_t)(ISA_FLAG_SPAN | (o->largest ? 0 : ISA_FLAG_SMALLEST) |
				      (o->sorted ? 0 : ISA_FLAG_UNSORTED) | (o->sort ? ISA_FLAG_SORT : 0));
		if ((st = isa_builder_emit(p, ISA_ENGINE_GPSIMD, &in, diag)) ||
		    (st = isa_builder_dma_copy(p, ISA_ENGINE_GPSIMD, (uint32_t)dv, 1, 1, 1)) ||
		    (st = isa_builder_dma_copy(p, ISA_ENGINE_GPSIMD, (uint32_t)di, 2, 1, 1)))
			return st;
	}
	return ISA_OK;
}

isa_status nk_topk_program(int target, const nk_topk *o, uint8_t **bin, size_t *len, isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	if (!nk_topk_fits(target, o)) {
		nk_fail(diag, ISA_E_LIMIT, "topk kernel: %llu rows of %llu, k = %llu", (unsigned long long)o->rows,
			(unsigned long long)o->cols, (unsigned long long)o->k);
		return ISA_E_LIMIT;
	}
	const isa_target_info *ti = isa_target_get(target);
	int dt = o->dtype;
	unsigned esz = isa_dtype_size(dt);
	uint64_t rows = o->rows, n = o->cols, k = o->k, bb = buffer_bytes(o);
	unsigned nbuf = 2 * bb <= ti->sbuf_partition_bytes ? 2 : 1;
	isa_status st = ISA_E_NOMEM;
	isa_program *p = isa_program_new(target);
	if (!p)
		return st;
	p->num_semaphores = 2;   /* 0 loads landed, 1 stores landed (two per tile) */
	uint64_t sx[2] = { rows, n }, sk[2] = { rows, k };
	int tx = isa_builder_tensor(p, "x", dt, ISA_TK_INPUT, 2, sx, diag);
	int tv = isa_builder_tensor(p, "values", dt, ISA_TK_OUTPUT, 2, sk, diag);
	int ti_ = isa_builder_tensor(p, "indices", ISA_DT_uint32, ISA_TK_OUTPUT, 2, sk, diag);
	if (tx < 0 || tv < 0 || ti_ < 0) {
		st = diag->code;
		goto free_program;
	}
	if (!fits_one(ti, o)) {   /* rows longer than a partition: one at a time, spanning */
		if ((st = span_program(p, ti, o, tx, tv, ti_, diag)) ||
		    (st = nk_finish(p, ISA_ENGINE_GPSIMD, 1, (uint32_t)(2 * rows), bin, len, diag)))
			goto free_program;
		st = ISA_OK;
		goto free_program;
	}
	uint32_t t = 0;
	for (uint64_t r0 = 0; r0 < rows; r0 += P, t++) {
		uint32_t r = (uint32_t)(rows - r0 < P ? rows - r0 : P);
		uint64_t base = (t % nbuf) * bb;
		isa_ap sxa = isa_ap_sbuf(dt, 0, r, base, (uint32_t)n);
		isa_ap sva = isa_ap_sbuf(dt, 0, r, base + align4(n * esz), (uint32_t)k);
		isa_ap sia = isa_ap_sbuf(ISA_DT_uint32, 0, r, base + align4(n * esz) + align4(k * esz), (uint32_t)k);
		isa_ap hx = isa_ap_hbm(dt, (uint32_t)tx, r0 * n * esz, r, (int64_t)n, (uint32_t)n);
		isa_ap hv = isa_ap_hbm(dt, (uint32_t)tv, r0 * k * esz, r, (int64_t)k, (uint32_t)k);
		isa_ap hi = isa_ap_hbm(ISA_DT_uint32, (uint32_t)ti_, r0 * k * 4, r, (int64_t)k, (uint32_t)k);
		int dl = isa_builder_dma(p, "", ISA_DMA_DIRECT, &sxa, &hx, NULL, diag);
		int dv = isa_builder_dma(p, "", ISA_DMA_DIRECT, &hv, &sva, NULL, diag);
		int di = isa_builder_dma(p, "", ISA_DMA_DIRECT, &hi, &sia, NULL, diag);
		if (dl < 0 || dv < 0 || di < 0) {
			st = diag->code;
			goto free_program;
		}
		/* the buffer's stores (tile t - nbuf) landed */
		if (t >= nbuf && (st = isa_builder_sem_wait(p, ISA_ENGINE_SYNC, 1, ISA_ALU_is_ge, 2 * (t - nbuf + 1))))
			goto free_program;
		if ((st = isa_builder_dma_copy(p, ISA_ENGINE_SYNC, (uint32_t)dl, 0, 0, 1)) ||
		    (st = isa_builder_sem_wait(p, ISA_ENGINE_GPSIMD, 0, ISA_ALU_is_ge, t + 1)))
			goto free_program;
		isa_instr in = isa_instr_init(ISA_OP_topk);
		in.ap[ISA_AP_DST] = sva;
		in.ap[ISA_AP_SRC] = sxa;
		in.ap[ISA_AP_AUX] = sia;
		in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC | 1u << ISA_AP_AUX;
		in.flags = (uint16_t)((o->largest ? 0 : ISA_FLAG_SMALLEST) | (o->sorted ? 0 : ISA_FLAG_UNSORTED) |
				      (o->sort ? ISA_FLAG_SORT : 0));
		if ((st = isa_builder_emit(p, ISA_ENGINE_GPSIMD, &in, diag)) ||
		    (st = isa_builder_dma_copy(p, ISA_ENGINE_GPSIMD, (uint32_t)dv, 1, 1, 1)) ||
		    (st = isa_builder_dma_copy(p, ISA_ENGINE_GPSIMD, (uint32_t)di, 2, 1, 1)))
			goto free_program;
	}
	if ((st = nk_finish(p, ISA_ENGINE_GPSIMD, 1, 2 * t, bin, len, diag)))
		goto free_program;
	st = ISA_OK;
free_program:
	isa_program_free(p);
	return st;
}
