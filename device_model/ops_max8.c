/*
 * ops_max8.c -- VectorE's top-8 pair (nki.isa.max8, nki.isa.nc_find_index8):
 * max8 writes, per partition, the 8 largest source values, largest first;
 * nc_find_index8 the position of the first data element equal to each of 8
 * given values.  Both read their inputs converted to fp32, as the published
 * instructions do.  NaN ranks above every number in max8 (as CPU PyTorch's
 * topk ranks it), and equal values keep their source order, so results are
 * deterministic.  A value nc_find_index8 does not find gets the all-ones
 * sentinel of the position dtype (the current SDK's documented behaviour).
 */
#include "ops.h"

/* a before b in max8's output: larger first, NaN largest, ties by position */
static bool ranks_before(float a, uint64_t ia, float b, uint64_t ib)
{
	bool na = a != a, nb = b != b;
	if (na != nb)
		return na;
	if (!na && a != b)
		return a > b;
	return ia < ib;
}

dm_fault_kind dm_op_max8(dm_core *c, const dm_binding *b, int engine, int64_t index,
			 const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv;
	dm_fault_kind k;
	if ((k = dm_views_src_dst(c, b, in, engine, index, &sv, &dv, f)))
		return k;
	uint64_t n = sv.nfree, P = sv.nparts;
	float *x = dm_tmp(c, 0, P * n), *y = dm_tmp(c, 1, P * 8);
	if (!x || !y)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "max8 staging");
	dm_view_read(&sv, x);
	for (uint64_t p = 0; p < P; p++) {
		const float *r = x + p * n;
		float best[8];
		uint64_t at[8], kept = 0;
		/* insertion into the 8 best so far: one pass, 8 compares at most */
		for (uint64_t e = 0; e < n; e++) {
			if (kept == 8 && !ranks_before(r[e], e, best[7], at[7]))
				continue;
			uint64_t j = kept < 8 ? kept++ : 7;
			while (j > 0 && ranks_before(r[e], e, best[j - 1], at[j - 1])) {
				best[j] = best[j - 1];
				at[j] = at[j - 1];
				j--;
			}
			best[j] = r[e];
			at[j] = e;
		}
		for (uint64_t j = 0; j < 8; j++)
			y[p * 8 + j] = best[j];
	}
	return dm_write_results(c, b, &dv, y, engine, index, "max8 dst", f);
}

dm_fault_kind dm_op_nc_find_index8(dm_core *c, const dm_binding *b, int engine, int64_t index,
				   const isa_instr *in, dm_fault *f)
{
	dm_view sv, vv, dv;
	dm_fault_kind k;
	if ((k = dm_views_src_dst(c, b, in, engine, index, &sv, &dv, f)) ||
	    (k = dm_view_of(c, b, &in->ap[ISA_AP_SRC1], false, &vv, engine, index, "vals", f)))
		return k;
	uint64_t n = sv.nfree, P = sv.nparts;
	float *x = dm_tmp(c, 0, P * n), *v = dm_tmp(c, 1, P * 8);
	int64_t *pos = (int64_t *)dm_tmp(c, 2, 2 * P * 8);
	if (!x || !v || !pos)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "nc_find_index8 staging");
	dm_view_read(&sv, x);
	dm_view_read(&vv, v);
	int64_t none = in->ap[ISA_AP_DST].dtype == ISA_DT_uint16 ? 0xffff : 0xffffffffLL;
	for (uint64_t p = 0; p < P; p++)
		for (uint64_t j = 0; j < 8; j++) {
			float want = v[p * 8 + j];
			int64_t found = none;
			for (uint64_t e = 0; e < n; e++)
				if (x[p * n + e] == want) {
					found = (int64_t)e;
					break;
				}
			pos[p * 8 + j] = found;
		}
	dm_view_write_i64(&dv, pos);
	dm_psum_mark(c, &dv);
	return DM_OK;
}
