/*
 * topk.c -- kernel generator for topk / unstable sort along rows: tiles of
 * up to 128 rows (one per partition) loaded by Sync, ranked by GpSimd's
 * topk instruction (CPU PyTorch's selection algorithm, so ties come out as
 * on the CPU), values and uint32 positions stored by GpSimd: the tile
 * pipeline (pipeline.h), two buffers when two tiles fit a partition, else
 * one.  A row longer than a partition
 * holds is laid over [Pn, Fn] partitions (Fn the smallest divisor of its
 * length with Pn <= 128: the row's elements exactly, no padding, which
 * would change what the CPU's algorithm sees) and ranked whole by the
 * instruction's `span` form, one row at a time.
 */
#include "programs.h"
#include "pipeline.h"

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

/* one tile through the pipeline: x (sx <- hx) ranked by GpSimd's topk into
 * its k values (sv -> hv) and positions (si -> hi); `span` ranks one row
 * laid over the tile's partitions */
static void rank(nk_pipe *pp, const nk_topk *o, isa_ap sx, isa_ap hx, isa_ap sv, isa_ap hv, isa_ap si, isa_ap hi,
		 bool span, isa_diag *diag)
{
	nk_pipe_load(pp, sx, hx, 0);
	isa_instr in = isa_instr_init(ISA_OP_topk);
	in.ap[ISA_AP_DST] = sv;
	in.ap[ISA_AP_SRC] = sx;
	in.ap[ISA_AP_AUX] = si;
	in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC | 1u << ISA_AP_AUX;
	in.flags = (uint16_t)((span ? ISA_FLAG_SPAN : 0) | (o->largest ? 0 : ISA_FLAG_SMALLEST) |
			      (o->sorted ? 0 : ISA_FLAG_UNSORTED) | (o->sort ? ISA_FLAG_SORT : 0));
	nk_pipe_compute(pp, ISA_ENGINE_GPSIMD);
	if (!pp->em.st)
		nk_pipe_check(pp, isa_builder_emit(pp->em.p, ISA_ENGINE_GPSIMD, &in, diag));
	nk_pipe_computed(pp, ISA_ENGINE_GPSIMD);
	nk_pipe_store(pp, hv, sv, 1);
	nk_pipe_store(pp, hi, si, 2);
}

/* one row at a time over [Pn, Fn] partitions, one buffer */
static void span_rows(nk_pipe *pp, const isa_target_info *ti, const nk_topk *o, int tx, int tv, int ti_,
		      isa_diag *diag)
{
	uint64_t fn, fk;
	span_geometry(ti, o, &fn, &fk);
	int dt = o->dtype;
	unsigned esz = isa_dtype_size(dt);
	uint32_t pn = (uint32_t)(o->cols / fn), pk = (uint32_t)(o->k / fk);
	for (uint64_t r = 0; r < o->rows && !pp->em.st; r++) {
		nk_pipe_tile(pp);
		rank(pp, o, isa_ap_sbuf(dt, 0, pn, 0, (uint32_t)fn),
		     isa_ap_hbm(dt, (uint32_t)tx, r * o->cols * esz, pn, (int64_t)fn, (uint32_t)fn),
		     isa_ap_sbuf(dt, 0, pk, align4(fn * esz), (uint32_t)fk),
		     isa_ap_hbm(dt, (uint32_t)tv, r * o->k * esz, pk, (int64_t)fk, (uint32_t)fk),
		     isa_ap_sbuf(ISA_DT_uint32, 0, pk, align4(fn * esz) + align4(fk * esz), (uint32_t)fk),
		     isa_ap_hbm(ISA_DT_uint32, (uint32_t)ti_, r * o->k * 4, pk, (int64_t)fk, (uint32_t)fk), true, diag);
	}
}

/* tiles of up to 128 rows, a row per partition */
static void row_tiles(nk_pipe *pp, const nk_topk *o, int tx, int tv, int ti_, isa_diag *diag)
{
	int dt = o->dtype;
	unsigned esz = isa_dtype_size(dt);
	uint64_t n = o->cols, k = o->k;
	for (uint64_t r0 = 0; r0 < o->rows && !pp->em.st; r0 += P) {
		uint32_t r = (uint32_t)(o->rows - r0 < P ? o->rows - r0 : P);
		uint64_t base = nk_pipe_tile(pp);
		rank(pp, o, isa_ap_sbuf(dt, 0, r, base, (uint32_t)n),
		     isa_ap_hbm(dt, (uint32_t)tx, r0 * n * esz, r, (int64_t)n, (uint32_t)n),
		     isa_ap_sbuf(dt, 0, r, base + align4(n * esz), (uint32_t)k),
		     isa_ap_hbm(dt, (uint32_t)tv, r0 * k * esz, r, (int64_t)k, (uint32_t)k),
		     isa_ap_sbuf(ISA_DT_uint32, 0, r, base + align4(n * esz) + align4(k * esz), (uint32_t)k),
		     isa_ap_hbm(ISA_DT_uint32, (uint32_t)ti_, r0 * k * 4, r, (int64_t)k, (uint32_t)k), false, diag);
	}
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
	bool one = fits_one(ti, o);   /* else rows longer than a partition: one at a time, spanning */
	uint64_t bb = buffer_bytes(o);
	nk_pipe pp;
	if (!nk_pipe_init(&pp, target, one && 2 * bb <= ti->sbuf_partition_bytes ? 2 : 1, bb, diag))
		return pp.em.st;
	uint64_t sx[2] = { o->rows, o->cols }, sk[2] = { o->rows, o->k };
	int tx = isa_builder_tensor(pp.em.p, "x", o->dtype, ISA_TK_INPUT, 2, sx, diag);
	int tv = isa_builder_tensor(pp.em.p, "values", o->dtype, ISA_TK_OUTPUT, 2, sk, diag);
	int ti_ = isa_builder_tensor(pp.em.p, "indices", ISA_DT_uint32, ISA_TK_OUTPUT, 2, sk, diag);
	if (tx < 0 || tv < 0 || ti_ < 0)
		nk_pipe_check(&pp, diag->code);
	else if (one)
		row_tiles(&pp, o, tx, tv, ti_, diag);
	else
		span_rows(&pp, ti, o, tx, tv, ti_, diag);
	return nk_pipe_finish(&pp, bin, len);
}
