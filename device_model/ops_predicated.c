/*
 * ops_predicated.c -- VectorE instructions that write under a condition
 * (nki.isa.tensor_copy_predicated, range_select).  Elements a condition does
 * not pick keep dst's value (copy_predicated) or take the fill the hardware
 * fixes (range_select: FP32_MIN, which a 16-bit dst holds as -inf, as the
 * SDK notes).
 */
#include "ops.h"

#include <float.h>

/* copy_predicated (nki.isa.tensor_copy_predicated): where the predicate
 * (after reverse_pred) holds, dst takes src's element (or the immediate,
 * cast to dst's dtype); elsewhere dst keeps its value.  One dtype in and
 * out, so fp32 staging is exact for floats and the int64 path for
 * integers. */
dm_fault_kind dm_op_copy_predicated(dm_core *c, const dm_binding *b, int engine, int64_t index,
				    const isa_instr *in, dm_fault *f)
{
	dm_view sv, pv, dv;
	bool tile = (in->ap_mask >> ISA_AP_SRC) & 1u, rev = in->flags & ISA_FLAG_REVERSE0;
	if (tile)
		DM_OP_VIEW(sv, ISA_AP_SRC, false, "src");
	DM_OP_VIEW(pv, ISA_AP_SRC1, false, "pred");
	DM_OP_VIEW(dv, ISA_AP_DST, true, "dst");
	uint64_t n = (uint64_t)dv.nparts * dv.nfree;
	int64_t *pr = (int64_t *)dm_tmp(c, 0, 2 * n);
	if (!pr)
		return dm_nomem(f, engine, index);
	dm_view_read_i64(&pv, pr);
	if (isa_dtype_is_integer(dv.dtype)) {
		int64_t *x = (int64_t *)dm_tmp(c, 1, 2 * n), *y = tile ? (int64_t *)dm_tmp(c, 2, 2 * n) : NULL;
		if (!x || (tile && !y))
			return dm_nomem(f, engine, index);
		dm_view_read_i64(&dv, x);
		if (tile)
			dm_view_read_i64(&sv, y);
		int64_t imm = in->imm[0].kind == ISA_IMM_I32 ? (int32_t)in->imm[0].bits
							     : (int64_t)dm_imm_f32(in->imm[0]);
		for (uint64_t i = 0; i < n; i++)
			if ((pr[i] != 0) != rev)
				x[i] = tile ? y[i] : imm;
		dm_view_write_i64(&dv, x);
	} else {
		float *x = dm_tmp(c, 1, n), *y = tile ? dm_tmp(c, 2, n) : NULL;
		if (!x || (tile && !y))
			return dm_nomem(f, engine, index);
		dm_view_read(&dv, x);
		if (tile)
			dm_view_read(&sv, y);
		float imm = dm_imm_f32(in->imm[0]);
		for (uint64_t i = 0; i < n; i++)
			if ((pr[i] != 0) != rev)
				x[i] = tile ? y[i] : imm;
		dm_view_write(&dv, x);
	}
	dm_psum_mark(c, &dv);
	return DM_OK;
}

static bool cmp_f32(int op, float a, float b)
{
	return dm_alu_f32(op, a, b) != 0.0f;
}

/* range_select: with i the free index + range_start (in fp32, as the
 * hardware compares), dst = on_true where cmp0(i, bound0[p]) and
 * cmp1(i, bound1[p]), else FP32_MIN; reduce_dst[p] (optional) = the max of
 * the row written, before dst's cast (the SDK's numpy semantics). */
dm_fault_kind dm_op_range_select(dm_core *c, const dm_binding *b, int engine, int64_t index,
				 const isa_instr *in, dm_fault *f)
{
	dm_view sv, b0v, b1v, dv;
	dm_fault_kind k;
	DM_OP_VIEW(sv, ISA_AP_SRC, false, "src");
	DM_OP_VIEW(b0v, ISA_AP_SRC1, false, "bound0");
	DM_OP_VIEW(b1v, ISA_AP_SRC2, false, "bound1");
	DM_OP_VIEW(dv, ISA_AP_DST, true, "dst");
	uint64_t n = sv.nfree, P = sv.nparts;
	float *x = dm_tmp(c, 0, P * n), *lo = dm_tmp(c, 1, P), *hi = dm_tmp(c, 2, P), *mx = dm_tmp(c, 3, P);
	if (!x || !lo || !hi || !mx)
		return dm_nomem(f, engine, index);
	dm_view_read(&sv, x);
	dm_view_read(&b0v, lo);
	dm_view_read(&b1v, hi);
	float start = (float)(int32_t)in->imm[0].bits;
	for (uint64_t p = 0; p < P; p++) {
		float m = -FLT_MAX, *row = x + p * n;
		for (uint64_t e = 0; e < n; e++) {
			float i = start + (float)e;
			if (!(cmp_f32(in->e[0], i, lo[p]) && cmp_f32(in->e[1], i, hi[p])))
				row[e] = -FLT_MAX;
			m = row[e] > m || row[e] != row[e] ? row[e] : m;
		}
		mx[p] = m;
	}
	if ((k = dm_write_results(c, b, &dv, x, engine, index, "range_select", f)))
		return k;
	if ((in->ap_mask >> ISA_AP_AUX) & 1u) {
		dm_view rv;
		DM_OP_VIEW(rv, ISA_AP_AUX, true, "reduce_dst");
		dm_view_write(&rv, mx);
		dm_psum_mark(c, &rv);
	}
	return DM_OK;
}
