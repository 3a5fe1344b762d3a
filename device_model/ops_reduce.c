/*
 * ops_reduce.c -- tensor_reduce (along free axes) and tensor_partition_reduce
 * (across partitions).  Sums run in fp32 in index order, so results are
 * deterministic; absmax reduces |x|.
 */
#include "ops.h"

static float combine(int op, float acc, float x, bool first)
{
	if (op == ISA_ALU_absmax)
		x = x < 0 ? -x : x;
	return first ? x : dm_alu_f32(op, acc, x);
}

dm_fault_kind dm_op_tensor_reduce(dm_core *c, const dm_binding *b, int engine, int64_t index,
				  const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv;
	dm_fault_kind k;
	if ((k = dm_views_src_dst(c, b, in, engine, index, &sv, &dv, f)))
		return k;
	uint64_t n = sv.nfree, P = sv.nparts, m = dv.nfree;
	float *x = dm_tmp(c, 0, P * n), *y = dm_tmp(c, 1, P * m);
	if (!x || !y)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "reduce staging");
	dm_view_read(&sv, x);

	/* src dims right-aligned into 4 (as the view); axes bit k = AP dim k */
	const isa_ap *ap = &in->ap[ISA_AP_SRC];
	unsigned shift = ISA_MAX_DIMS - ap->ndims;
	bool reduced[ISA_MAX_DIMS] = { false };
	for (unsigned d = 0; d < ap->ndims; d++)
		reduced[d + shift] = (in->u[0] >> d) & 1u;
	int op = in->e[0];
	/* reduced dims (ignoring size-1 ones) all inside kept ones: out[j]
	 * reduces the j-th run of `inner` adjacent elements, in index order
	 * like the general walk below, so the result is the same */
	bool suffix = true, seen_kept = false;
	uint64_t inner = 1;
	for (int d = ISA_MAX_DIMS - 1; d >= 0; d--) {
		if (sv.size[d] == 1)
			continue;
		if (reduced[d]) {
			suffix &= !seen_kept;
			inner *= sv.size[d];
		} else {
			seen_kept = true;
		}
	}
	if (suffix && inner * m == n && inner > 0 &&
	    (op == ISA_ALU_add || op == ISA_ALU_max || op == ISA_ALU_min)) {
		/* the runs are P * m rows of `inner`, `inner` apart */
		dm_fold_rows_f32(op, x, inner, inner, P * m, y);
		if (in->flags & ISA_FLAG_NEGATE)
			for (uint64_t j = 0; j < P * m; j++)
				y[j] = -y[j];
		goto write;
	}
	if (suffix && inner * m == n && inner > 0) {
		for (uint64_t p = 0; p < P; p++) {
			for (uint64_t j = 0; j < m; j++) {
				const float *r = x + p * n + j * inner;
				float acc = combine(op, 0.0f, r[0], true);
				for (uint64_t e = 1; e < inner; e++)
					acc = combine(op, acc, r[e], false);
				y[p * m + j] = (in->flags & ISA_FLAG_NEGATE) ? -acc : acc;
			}
		}
		goto write;
	}
	for (uint64_t p = 0; p < P; p++) {
		float *out = y + p * m;
		for (uint64_t j = 0; j < m; j++)
			out[j] = 0.0f;
		uint64_t idx[ISA_MAX_DIMS];
		for (uint64_t e = 0; e < n; e++) {
			uint64_t rem = e;
			for (int d = ISA_MAX_DIMS - 1; d >= 0; d--) {
				idx[d] = rem % sv.size[d];
				rem /= sv.size[d];
			}
			/* output index over the kept dims, and whether this is the
			 * first element reduced into it (all reduced indices 0) */
			uint64_t o = 0;
			bool first = true;
			for (int d = 0; d < (int)ISA_MAX_DIMS; d++) {
				if (reduced[d])
					first &= idx[d] == 0;
				else
					o = o * sv.size[d] + idx[d];
			}
			out[o] = combine(op, out[o], x[p * n + e], first);
		}
		if (in->flags & ISA_FLAG_NEGATE)
			for (uint64_t j = 0; j < m; j++)
				out[j] = -out[j];
	}
write:
	if ((k = dm_check_finite(b, y, P * m, engine, index, "tensor_reduce dst", f)))
		return k;
	dm_view_write(&dv, y);
	dm_psum_mark(c, &dv);
	return DM_OK;
}

dm_fault_kind dm_op_tensor_partition_reduce(dm_core *c, const dm_binding *b, int engine,
					    int64_t index, const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv;
	dm_fault_kind k;
	if ((k = dm_views_src_dst(c, b, in, engine, index, &sv, &dv, f)))
		return k;
	uint64_t n = sv.nfree, P = sv.nparts;
	float *x = dm_tmp(c, 0, P * n), *y = dm_tmp(c, 1, n);
	if (!x || !y)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "reduce staging");
	dm_view_read(&sv, x);
	for (uint64_t j = 0; j < n; j++) {
		float a = 0.0f;
		for (uint64_t p = 0; p < P; p++)
			a = combine(in->e[0], a, x[p * n + j], p == 0);
		y[j] = a;
	}
	if ((k = dm_check_finite(b, y, n, engine, index, "tensor_partition_reduce dst", f)))
		return k;
	dm_view_write(&dv, y);
	return DM_OK;
}
