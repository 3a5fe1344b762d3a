/*
 * ops_topk.c -- topk on GpSimd: per partition, the k largest (smallest) of
 * src's free elements and their positions, in the order CPU PyTorch's topk
 * (or, with the sort flag, its unstable sort) returns them.  GpSimd's cores
 * run general code, so the instruction is the CPU's selection algorithm
 * itself (select.c) rather than a data-path stream; that is what makes tie
 * order -- equal router scores in an MoE -- come out as on the CPU.
 * Values move as bits (dst's dtype is src's); keys compare exactly: floats
 * widened from fp32 staging (exact for fp32 / bf16 / fp16 / fp8), integers
 * as 64-bit integers widened to double (exact for 32-bit ones).
 */
#include "ops.h"

#include "select.h"

#include <string.h>

dm_fault_kind dm_op_topk(dm_core *c, const dm_binding *b, int engine, int64_t index,
			 const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv, iv;
	dm_fault_kind k;
	if ((k = dm_views_src_dst(c, b, in, engine, index, &sv, &dv, f)) ||
	    (k = dm_view_of(c, b, &in->ap[ISA_AP_AUX], true, &iv, engine, index, "indices", f)))
		return k;
	/* span: one row over every partition (partition-major order) */
	bool span = in->flags & ISA_FLAG_SPAN;
	uint64_t n = span ? sv.nfree * sv.nparts : sv.nfree, kk = span ? dv.nfree * dv.nparts : dv.nfree;
	uint64_t P = span ? 1 : sv.nparts;
	bool ints = isa_dtype_is_integer(in->ap[ISA_AP_SRC].dtype);
	/* staging: the keys (fp32 or int64: two floats' room each), the pairs
	 * (four floats each), the positions out */
	float *keys = dm_tmp(c, 0, 2 * P * n);
	dm_sel_elem *q = (dm_sel_elem *)dm_tmp(c, 1, 4 * n);
	int64_t *pos = (int64_t *)dm_tmp(c, 2, 2 * P * kk);
	uint8_t *vals = (uint8_t *)dm_tmp(c, 3, (P * kk * dv.esz + 3) / 4);
	if (!keys || !q || !pos || !vals)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "topk staging");
	if (ints)
		dm_view_read_i64(&sv, (int64_t *)keys);
	else
		dm_view_read(&sv, keys);
	bool largest = !(in->flags & ISA_FLAG_SMALLEST);
	for (uint64_t p = 0; p < P; p++) {
		for (uint64_t e = 0; e < n; e++) {
			q[e].key = ints ? (double)((int64_t *)keys)[p * n + e] : (double)keys[p * n + e];
			q[e].pos = (int64_t)e;
		}
		if (in->flags & ISA_FLAG_SORT)
			dm_select_sort(q, (int64_t)n, largest);
		else
			dm_select_topk(q, (int64_t)n, (int64_t)kk, largest, !(in->flags & ISA_FLAG_UNSORTED));
		/* gather the picked values as bits before any write: dst may
		 * overlap src */
		for (uint64_t j = 0; j < kk; j++) {
			uint64_t e = (uint64_t)q[j].pos + p * n;   /* src element, partition-major */
			pos[p * kk + j] = q[j].pos;
			memcpy(vals + (p * kk + j) * dv.esz, dm_view_elem(&sv, (uint32_t)(e / sv.nfree), e % sv.nfree),
			       dv.esz);
		}
	}
	for (uint64_t p = 0; p < P; p++)
		for (uint64_t j = 0; j < kk; j++) {
			uint64_t flat = p * kk + j;   /* partition-major when spanning */
			memcpy(dm_view_elem(&dv, (uint32_t)(flat / dv.nfree), flat % dv.nfree), vals + flat * dv.esz, dv.esz);
		}
	dm_view_write_i64(&iv, pos);
	return DM_OK;
}
