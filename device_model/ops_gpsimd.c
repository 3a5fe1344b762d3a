/*
 * ops_gpsimd.c -- GpSimd index tools: iota, affine_select and the
 * within-partition gather nc_n_gather.  The affine
 * expression base + pmul*p + sum(mul_k * i_k) is evaluated exactly in 64-bit
 * integers; p counts partitions from the operand's first (0-based), i_k the
 * free indices, outermost first (missing multipliers are 0).
 */
#include "ops.h"

#include "numerics.h"

static int64_t affine(const isa_instr *in, const dm_view *v, unsigned ndims, uint64_t p,
		      uint64_t e)
{
	int64_t val = (int64_t)(int32_t)in->imm[0].bits + (int64_t)(int32_t)in->imm[1].bits * (int64_t)p;
	/* decompose e over the view's right-aligned dims; AP dim k = view dim k + shift */
	unsigned shift = ISA_MAX_DIMS - ndims;
	uint64_t idx[ISA_MAX_DIMS];
	for (int d = ISA_MAX_DIMS - 1; d >= 0; d--) {
		idx[d] = e % v->size[d];
		e /= v->size[d];
	}
	for (unsigned k = 0; k < in->nivec && k < ndims; k++)
		val += (int64_t)in->ivec[k] * (int64_t)idx[k + shift];
	return val;
}

dm_fault_kind dm_op_iota(dm_core *c, const dm_binding *b, int engine, int64_t index,
			 const isa_instr *in, dm_fault *f)
{
	dm_view dv;
	dm_fault_kind k = dm_view_of(c, b, &in->ap[ISA_AP_DST], true, &dv, engine, index, "dst", f);
	if (k)
		return k;
	uint64_t n = dv.nfree, P = dv.nparts;
	int64_t *x = (int64_t *)dm_tmp(c, 0, 2 * P * n);
	if (!x)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "iota staging");
	for (uint64_t p = 0; p < P; p++)
		for (uint64_t e = 0; e < n; e++)
			x[p * n + e] = affine(in, &dv, in->ap[ISA_AP_DST].ndims, p, e);
	dm_view_write_i64(&dv, x);
	return DM_OK;
}

/* dst[p, j] = src[p, indices[p, j]] over src's flattened free elements;
 * an index past them is a fault naming it (the hardware's is undefined) */
dm_fault_kind dm_op_nc_n_gather(dm_core *c, const dm_binding *b, int engine, int64_t index,
				const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv, iv;
	dm_fault_kind k;
	if ((k = dm_views_src_dst(c, b, in, engine, index, &sv, &dv, f)) ||
	    (k = dm_view_of(c, b, &in->ap[ISA_AP_SRC1], false, &iv, engine, index, "indices", f)))
		return k;
	uint64_t n = dv.nfree, P = dv.nparts;
	int64_t *idx = (int64_t *)dm_tmp(c, 0, 2 * P * n);
	if (!idx)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "nc_n_gather staging");
	dm_view_read_i64(&iv, idx);
	for (uint64_t p = 0; p < P; p++)
		for (uint64_t j = 0; j < n; j++) {
			int64_t e = idx[p * n + j];
			if (e < 0 || (uint64_t)e >= sv.nfree)
				return dm_fault_set(f, DM_FAULT_OOB, engine, index, (uint64_t)e,
						    "nc_n_gather: indices[%llu, %llu] = %lld outside the %llu "
						    "elements of a src partition", (unsigned long long)p,
						    (unsigned long long)j, (long long)e,
						    (unsigned long long)sv.nfree);
		}
	/* values move as bits: dst's dtype is src's */
	for (uint64_t p = 0; p < P; p++)
		for (uint64_t j = 0; j < n; j++)
			memcpy(dm_view_elem(&dv, (uint32_t)p, j),
			       dm_view_elem(&sv, (uint32_t)p, (uint64_t)idx[p * n + j]), dv.esz);
	dm_psum_mark(c, &dv);
	return DM_OK;
}

/* local_gather (nki.isa.local_gather, the SDK's numpy semantics): each
 * GpSimd core (16 partitions) flattens its slice of the index partitions
 * first and takes the first `valid` indices; every partition p of the core
 * then gathers, from its own elements, elem_per_idx contiguous ones at each
 * index: dst[p, j*E + e] = src[p, idx[j] + e].  The SDK leaves an index
 * past the row undefined; here it is a fault naming it. */
dm_fault_kind dm_op_local_gather(dm_core *c, const dm_binding *b, int engine, int64_t index,
				 const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv, iv;
	dm_fault_kind k;
	if ((k = dm_views_src_dst(c, b, in, engine, index, &sv, &dv, f)) ||
	    (k = dm_view_of(c, b, &in->ap[ISA_AP_SRC1], false, &iv, engine, index, "index", f)))
		return k;
	uint64_t P = sv.nparts, ni = iv.nfree, E = in->u[0];
	uint64_t valid = in->u[1] ? in->u[1] : 16 * ni;
	int64_t *idx = (int64_t *)dm_tmp(c, 0, 2 * P * ni);
	if (!idx)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "local_gather staging");
	dm_view_read_i64(&iv, idx);
	for (uint64_t core = 0; core < P / 16; core++)
		for (uint64_t j = 0; j < valid; j++) {
			int64_t at = idx[(core * 16 + j % 16) * ni + j / 16];
			if (at < 0 || (uint64_t)at + E > sv.nfree)
				return dm_fault_set(f, DM_FAULT_OOB, engine, index, (uint64_t)at,
						    "local_gather: index %lld (core %llu, entry %llu) + %llu elements "
						    "outside the %llu elements of a src partition", (long long)at,
						    (unsigned long long)core, (unsigned long long)j,
						    (unsigned long long)E, (unsigned long long)sv.nfree);
			for (uint64_t p = core * 16; p < core * 16 + 16; p++)
				for (uint64_t e = 0; e < E; e++)
					memcpy(dm_view_elem(&dv, (uint32_t)p, j * E + e),
					       dm_view_elem(&sv, (uint32_t)p, (uint64_t)at + e), dv.esz);
		}
	dm_psum_mark(c, &dv);
	return DM_OK;
}

dm_fault_kind dm_op_affine_select(dm_core *c, const dm_binding *b, int engine, int64_t index,
				  const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv;
	dm_fault_kind k;
	if ((k = dm_views_src_dst(c, b, in, engine, index, &sv, &dv, f)))
		return k;
	uint64_t n = sv.nfree, P = sv.nparts;
	float *x = dm_tmp(c, 0, P * n);
	if (!x)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "affine_select staging");
	dm_view_read(&sv, x);
	float fill = in->imm[2].kind == ISA_IMM_F32 ? dm_bits_f32(in->imm[2].bits)
						    : (float)(int32_t)in->imm[2].bits;
	for (uint64_t p = 0; p < P; p++)
		for (uint64_t e = 0; e < n; e++)
			if (!dm_alu_i64(in->e[0], affine(in, &sv, in->ap[ISA_AP_SRC].ndims, p, e), 0))
				x[p * n + e] = fill;
	dm_view_write(&dv, x);   /* the fill (e.g. -inf) is deliberate: no numeric check */
	return DM_OK;
}

/* nonzero_with_count (nki.isa.nonzero_with_count): GpSimd's eight cores each
 * read and write the first partition of their 16 (partitions 0, 16, .., 112
 * of the operands); the others are left as they are, as the SDK states.  Per
 * such row: the positions of the nonzero elements plus index_offset, then
 * padding_val up to src's length, then the count. */
dm_fault_kind dm_op_nonzero_with_count(dm_core *c, const dm_binding *b, int engine, int64_t index,
				       const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv;
	dm_fault_kind k;
	if ((k = dm_views_src_dst(c, b, in, engine, index, &sv, &dv, f)))
		return k;
	uint64_t n = sv.nfree, P = sv.nparts;
	float *x = dm_tmp(c, 0, P * n);
	int64_t *y = (int64_t *)dm_tmp(c, 1, 2 * P * (n + 1));
	if (!x || !y)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "nonzero_with_count staging");
	dm_view_read(&sv, x);
	dm_view_read_i64(&dv, y);           /* rows it does not write keep their values */
	int64_t off = (int32_t)in->imm[0].bits, pad = (int32_t)in->imm[1].bits;
	for (uint64_t p = 0; p < P; p += 16) {
		int64_t *row = y + p * (n + 1), count = 0;
		for (uint64_t e = 0; e < n; e++)
			if (x[p * n + e] != 0.0f)
				row[count++] = (int64_t)e + off;
		for (uint64_t e = (uint64_t)count; e < n; e++)
			row[e] = pad;
		row[n] = count;
	}
	dm_view_write_i64(&dv, y);
	dm_psum_mark(c, &dv);
	return DM_OK;
}
