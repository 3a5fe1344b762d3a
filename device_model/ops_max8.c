/*
 * ops_max8.c -- VectorE's top-8 group (nki.isa.max8, nc_find_index8, nc_match_replace8):
 * max8 writes, per partition, the 8 largest source values, largest first;
 * nc_find_index8 the position of the first data element equal to each of 8
 * given values.  Both read their inputs converted to fp32, as the published
 * instructions do.  NaN ranks above every number in max8 (as CPU PyTorch's
 * topk ranks it), and equal values keep their source order, so results are
 * deterministic.  A value nc_find_index8 does not find gets the all-ones
 * sentinel of the position dtype (the current SDK's documented behaviour);
 * a value given twice is paired with two occurrences (SDK
 * nki.isa.nc_match_replace8: ascending for nc_find_index8, descending for
 * nc_match_replace8, which also replaces what it matched with an immediate).
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

/* position of the first element of row r (n long) equal to `want` and not
 * taken by an earlier match (found[0..nf)), else -1 */
static int64_t first_free_match(const float *r, uint64_t n, float want, const int64_t *found, int nf)
{
	for (uint64_t e = 0; e < n; e++) {
		if (r[e] != want)
			continue;
		bool taken = false;
		for (int i = 0; i < nf && !taken; i++)
			taken = found[i] == (int64_t)e;
		if (!taken)
			return (int64_t)e;
	}
	return -1;
}

/* The 8 positions of one row: vals in `order` (ascending for
 * nc_find_index8, descending for nc_match_replace8, as the SDK's
 * nc_match_replace8 page states), a value given twice taking the next
 * occurrence each time; -1 where there is none. */
static void match8(const float *r, uint64_t n, const float *vals, bool descending, int64_t *pos)
{
	int64_t found[8];
	int nf = 0;
	for (int k = 0; k < 8; k++) {
		int j = descending ? 7 - k : k;
		pos[j] = first_free_match(r, n, vals[j], found, nf);
		if (pos[j] >= 0)
			found[nf++] = pos[j];
	}
}

/* The operands of nc_find_index8 / nc_match_replace8 (data, vals, dst) and
 * each row's 8 positions, matched in the instruction's order */
static dm_fault_kind stage_match8(dm_core *c, const dm_binding *b, const isa_instr *in, int engine, int64_t index,
				  dm_view *sv, dm_view *dv, float **x, float **v, int64_t **pos, dm_fault *f)
{
	dm_view vv;
	dm_fault_kind k;
	if ((k = dm_view_of(c, b, &in->ap[ISA_AP_SRC], false, sv, engine, index, "data", f)) ||
	    (k = dm_view_of(c, b, &in->ap[ISA_AP_SRC1], false, &vv, engine, index, "vals", f)) ||
	    (k = dm_view_of(c, b, &in->ap[ISA_AP_DST], true, dv, engine, index, "dst", f)))
		return k;
	uint64_t P = sv->nparts;
	*x = dm_tmp(c, 0, P * sv->nfree);
	*v = dm_tmp(c, 1, P * 8);
	*pos = (int64_t *)dm_tmp(c, 2, 2 * P * 8);
	if (!*x || !*v || !*pos)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "8-value match staging");
	dm_view_read(sv, *x);
	dm_view_read(&vv, *v);
	for (uint64_t p = 0; p < P; p++)
		match8(*x + p * sv->nfree, sv->nfree, *v + p * 8, in->opcode == ISA_OP_nc_match_replace8, *pos + p * 8);
	return DM_OK;
}

/* positions out, -1 as the dtype's all-ones sentinel */
static void write_positions(dm_core *c, const dm_view *dv, int64_t *pos, uint64_t n)
{
	int64_t none = dv->dtype == ISA_DT_uint16 ? 0xffff : 0xffffffffLL;
	for (uint64_t i = 0; i < n; i++)
		if (pos[i] < 0)
			pos[i] = none;
	dm_view_write_i64(dv, pos);
	dm_psum_mark(c, dv);
}

dm_fault_kind dm_op_nc_find_index8(dm_core *c, const dm_binding *b, int engine, int64_t index,
				   const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv;
	float *x, *v;
	int64_t *pos;
	dm_fault_kind k;
	if ((k = stage_match8(c, b, in, engine, index, &sv, &dv, &x, &v, &pos, f)))
		return k;
	write_positions(c, &dv, pos, (uint64_t)sv.nparts * 8);
	return DM_OK;
}

/* dst = data with each matched element replaced by imm; dst_idx (optional)
 * the matched positions */
dm_fault_kind dm_op_nc_match_replace8(dm_core *c, const dm_binding *b, int engine, int64_t index,
				      const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv;
	float *x, *v;
	int64_t *pos;
	dm_fault_kind k;
	if ((k = stage_match8(c, b, in, engine, index, &sv, &dv, &x, &v, &pos, f)))
		return k;
	float imm = dm_imm_f32(in->imm[0]);
	uint64_t n = sv.nfree, P = sv.nparts;
	for (uint64_t p = 0; p < P; p++)
		for (int j = 0; j < 8; j++)
			if (pos[p * 8 + j] >= 0)
				x[p * n + (uint64_t)pos[p * 8 + j]] = imm;
	if ((k = dm_write_results(c, b, &dv, x, engine, index, "nc_match_replace8 dst", f)))
		return k;
	if ((in->ap_mask >> ISA_AP_AUX) & 1u) {
		dm_view iv;
		if ((k = dm_view_of(c, b, &in->ap[ISA_AP_AUX], true, &iv, engine, index, "dst_idx", f)))
			return k;
		write_positions(c, &iv, pos, P * 8);
	}
	return DM_OK;
}
