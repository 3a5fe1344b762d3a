/*
 * validate_move.c -- the rules of instructions that select, gather or move
 * data between partitions (nc_stream_shuffle, copy_predicated,
 * range_select, nc_n_gather, local_gather, topk); validate_ops.c registers
 * them with the others.
 */
#include "isa_internal.h"
#include "validate.h"

/* SDK nki.isa.nc_stream_shuffle: one dtype, the same elements per partition;
 * the quadrants active, ceil(max(partitions) / 32), fix where src and dst may
 * start (128 / 96: partition 0; 64: 0 or 64; 32: any quadrant); and every
 * partition the mask reads must be one src covers (src may be shorter than a
 * quadrant: one partition broadcast to 32) */
isa_status rule_nc_stream_shuffle(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC];
	if (d->dtype != s->dtype)
		return v_fail(v, ISA_E_BAD_DTYPE, "dst", "%s, src %s: the shuffle moves data as it is",
			      isa_dtype_name(d->dtype), isa_dtype_name(s->dtype));
	if (isa_ap_free_elems(d) != isa_ap_free_elems(s))
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "src", "%llu elements per partition, dst %llu",
			      (unsigned long long)isa_ap_free_elems(s), (unsigned long long)isa_ap_free_elems(d));
	unsigned active = (d->nparts > s->nparts ? d->nparts : s->nparts);
	active = (active + ISA_QUADRANT - 1) / ISA_QUADRANT * ISA_QUADRANT;
	unsigned align = active >= 96 ? ISA_NUM_PARTITIONS : active;
	for (int k = 0; k < 2; k++) {
		const isa_ap *a = k ? s : d;
		if (a->start % align)
			return v_fail(v, ISA_E_BAD_PARTITION, k ? "src" : "dst",
				      "starts at partition %u; with %u partitions active it must start at a multiple of %u",
				      a->start, active, align);
	}
	for (unsigned p = 0; p < d->nparts; p++) {
		unsigned m = in->pmap[p % ISA_QUADRANT];
		if (m != ISA_PMAP_KEEP && p / ISA_QUADRANT * ISA_QUADRANT + m >= s->nparts)
			return v_fail(v, ISA_E_BAD_PARTITION, "mask",
				      "dst partition %u reads src partition %u; src has %u", p,
				      p / ISA_QUADRANT * ISA_QUADRANT + m, s->nparts);
	}
	return ISA_OK;
}

/* SDK nki.isa.tensor_copy_predicated: src (a tile) and dst one dtype and
 * shape, the predicate an unsigned integer tile of that shape, src and the
 * predicate not both in PSUM */
isa_status rule_copy_predicated(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *pr = &in->ap[ISA_AP_SRC1];
	if (pr->dtype != ISA_DT_uint8 && pr->dtype != ISA_DT_uint16 && pr->dtype != ISA_DT_uint32)
		return v_fail(v, ISA_E_BAD_DTYPE, "pred", "%s: uint8, uint16 or uint32", isa_dtype_name(pr->dtype));
	isa_status st;
	if ((st = v_same_rows(v, pr, "pred", d, "dst")) != ISA_OK || !v_has(in, ISA_AP_SRC))
		return st;
	const isa_ap *s = &in->ap[ISA_AP_SRC];
	if (s->dtype != d->dtype)
		return v_fail(v, ISA_E_BAD_DTYPE, "src", "%s, dst %s: the copy does not cast",
			      isa_dtype_name(s->dtype), isa_dtype_name(d->dtype));
	if ((st = v_same_rows(v, s, "src", d, "dst")) != ISA_OK)
		return st;
	if (s->space == ISA_SPACE_PSUM && pr->space == ISA_SPACE_PSUM)
		return v_fail(v, ISA_E_BAD_SPACE, "pred", "src and pred both in PSUM (one of them may be)");
	return ISA_OK;
}

/* SDK nki.isa.range_select: NeuronCore-v3+; src a float tile, bound0 and
 * bound1 one fp32 per partition, compare by ==, <, <=, >, >=; an integer
 * range_start with range_start + free index inside fp32's exact 2^24 */
isa_status rule_range_select(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC];
	isa_status st;
	if ((st = v_feature(v, ISA_FEAT_range_select)) != ISA_OK)
		return st;
	if (isa_dtype_is_integer(s->dtype))
		return v_fail(v, ISA_E_BAD_DTYPE, "src", "%s: a float dtype", isa_dtype_name(s->dtype));
	if ((st = v_same_count(v, d, "dst", s, "src")) != ISA_OK)
		return st;
	for (int k = 0; k < 2; k++) {
		const isa_ap *bd = &in->ap[k ? ISA_AP_SRC2 : ISA_AP_SRC1];
		const char *name = k ? "bound1" : "bound0";
		if (bd->dtype != ISA_DT_fp32)
			return v_fail(v, ISA_E_BAD_DTYPE, name, "%s: bounds are fp32", isa_dtype_name(bd->dtype));
		if ((st = v_per_partition(v, bd, name, s, "src")) != ISA_OK)
			return st;
		if (in->e[k] == ISA_ALU_not_equal)
			return v_fail(v, ISA_E_BAD_OPERATOR, k ? "cmp1" : "cmp0",
				      "not_equal (range_select compares by ==, <, <=, > or >=)");
	}
	int64_t start = (int32_t)in->imm[0].bits;
	if (in->imm[0].kind != ISA_IMM_I32 || start < -(1 << 24) ||
	    start + (int64_t)isa_ap_free_elems(s) > (1 << 24))
		return v_fail(v, ISA_E_BAD_VALUE, "range_start", "an integer with range_start + index within 2^24");
	return v_row_result(v, in);
}

/* nc_n_gather (nki.isa.nc_n_gather): all three in SBUF (GpSimd cannot
 * reach PSUM), the same partitions, dst's dtype is data's, uint32 indices,
 * one per gathered element; indices in range are checked when it runs */
isa_status rule_nc_n_gather(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC], *i = &in->ap[ISA_AP_SRC1];
	if (d->space != ISA_SPACE_SBUF || s->space != ISA_SPACE_SBUF || i->space != ISA_SPACE_SBUF)
		return v_fail(v, ISA_E_BAD_SPACE, "dst", "nc_n_gather reads and writes SBUF only");
	if (d->dtype != s->dtype)
		return v_fail(v, ISA_E_BAD_DTYPE, "dst", "nc_n_gather keeps src's dtype (%s -> %s)",
			      isa_dtype_name(s->dtype), isa_dtype_name(d->dtype));
	if (i->dtype != ISA_DT_uint32)
		return v_fail(v, ISA_E_BAD_DTYPE, "indices", "nc_n_gather indices are uint32, not %s",
			      isa_dtype_name(i->dtype));
	if (d->nparts != s->nparts || i->nparts != s->nparts)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "indices", "nc_n_gather: dst, src and indices span "
			      "the same partitions (%u, %u, %u)", d->nparts, s->nparts, i->nparts);
	return v_same_count(v, d, "dst", i, "indices");
}

/* SDK nki.isa.local_gather: SBUF operands on whole GpSimd cores (16
 * partitions from a multiple of 16), src's dtype kept, uint16 indices on
 * src's partitions, elem_per_idx 1, 2, 4, .., 32, at most 4096 indices per
 * core and no more than the core's index slice holds; dst holds valid x
 * elem_per_idx elements per partition */
isa_status rule_local_gather(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC], *i = &in->ap[ISA_AP_SRC1];
	unsigned e = in->u[0];
	if (d->space != ISA_SPACE_SBUF || s->space != ISA_SPACE_SBUF || i->space != ISA_SPACE_SBUF)
		return v_fail(v, ISA_E_BAD_SPACE, "dst", "local_gather reads and writes SBUF only");
	if (d->dtype != s->dtype)
		return v_fail(v, ISA_E_BAD_DTYPE, "dst", "local_gather keeps src's dtype (%s -> %s)",
			      isa_dtype_name(s->dtype), isa_dtype_name(d->dtype));
	if (i->dtype != ISA_DT_uint16)
		return v_fail(v, ISA_E_BAD_DTYPE, "index", "uint16, not %s", isa_dtype_name(i->dtype));
	if (s->nparts % 16 || s->start % 16 || i->nparts != s->nparts || i->start != s->start ||
	    d->nparts != s->nparts)
		return v_fail(v, ISA_E_BAD_PARTITION, "src", "src, index and dst on the same whole GpSimd cores "
			      "(16 partitions each from a multiple of 16): src [%u, %u), index [%u, %u), dst %u",
			      s->start, s->start + s->nparts, i->start, i->start + i->nparts, d->nparts);
	if (e == 0 || (e & (e - 1)))
		return v_fail(v, ISA_E_BAD_VALUE, "elem_per_idx", "%u (1, 2, 4, 8, 16 or 32)", e);
	uint64_t per_core = 16 * isa_ap_free_elems(i), valid = in->u[1] ? in->u[1] : per_core;
	if (valid > per_core || valid > 4096)
		return v_fail(v, ISA_E_BAD_VALUE, "valid", "%llu indices per core; the index slice holds %llu "
			      "(at most 4096)", (unsigned long long)valid, (unsigned long long)per_core);
	if (isa_ap_free_elems(d) != valid * e)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst", "%llu elements per partition, %llu indices x %u "
			      "expected", (unsigned long long)isa_ap_free_elems(d), (unsigned long long)valid, e);
	return ISA_OK;
}

/* topk (a GpSimd program, no NKI counterpart): all in SBUF, the same
 * partitions, values keep src's dtype (moved as bits), uint32 positions,
 * 1 <= k <= n; `sort` ranks the whole row (k = n; descending, ascending
 * with smallest) and is not unsorted; `span`: one row over all of src's
 * partitions, dst and indices holding k elements in any geometry */
isa_status rule_topk(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC], *i = &in->ap[ISA_AP_AUX];
	bool span = in->flags & ISA_FLAG_SPAN;
	/* per partition, or (span) the whole operand */
	uint64_t n = isa_ap_free_elems(s) * (span ? s->nparts : 1), k = isa_ap_free_elems(d) * (span ? d->nparts : 1);
	if (d->space != ISA_SPACE_SBUF || s->space != ISA_SPACE_SBUF || i->space != ISA_SPACE_SBUF)
		return v_fail(v, ISA_E_BAD_SPACE, "dst", "topk reads and writes SBUF only");
	if (d->dtype != s->dtype)
		return v_fail(v, ISA_E_BAD_DTYPE, "dst", "topk keeps src's dtype (%s -> %s)",
			      isa_dtype_name(s->dtype), isa_dtype_name(d->dtype));
	if (i->dtype != ISA_DT_uint32)
		return v_fail(v, ISA_E_BAD_DTYPE, "indices", "topk positions are uint32, not %s",
			      isa_dtype_name(i->dtype));
	if (!span && (d->nparts != s->nparts || i->nparts != s->nparts))
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "indices", "topk: dst, src and indices span "
			      "the same partitions (%u, %u, %u)", d->nparts, s->nparts, i->nparts);
	if (span && (uint64_t)isa_ap_free_elems(i) * i->nparts != k)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "indices", "topk span: indices hold %llu positions for "
			      "k = %llu", (unsigned long long)isa_ap_free_elems(i) * i->nparts, (unsigned long long)k);
	if (k == 0 || k > n)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst", "topk: k = %llu (dst's %s) must be "
			      "in [1, %llu] (src's)", (unsigned long long)k, span ? "elements" : "free size",
			      (unsigned long long)n);
	if ((in->flags & ISA_FLAG_SORT) && (k != n || (in->flags & ISA_FLAG_UNSORTED)))
		return v_fail(v, ISA_E_BAD_VALUE, "sort", "topk sort ranks the whole row: k = n = %llu "
			      "(not %llu), and not unsorted", (unsigned long long)n, (unsigned long long)k);
	return span ? ISA_OK : v_same_count(v, d, "dst", i, "indices");
}
