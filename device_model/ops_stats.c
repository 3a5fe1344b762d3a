/*
 * ops_stats.c -- bn_stats and bn_aggr, VectorE's mean/variance pair, with
 * the published layout (nki.isa.bn_stats / bn_aggr): bn_stats writes, per
 * partition, (count, mean, variance * count) of the even-indexed source
 * elements and then of the odd-indexed ones; bn_aggr combines any number of
 * such triples into (mean, variance).  The hardware computes in fp32; here
 * the sums run in double in index order (deterministic, and at least as
 * accurate) and the results are rounded to fp32 once.  A triple with count 0
 * contributes nothing; no elements at all give mean 0, variance 0.
 */
#include "ops.h"

dm_fault_kind dm_op_bn_stats(dm_core *c, const dm_binding *b, int engine, int64_t index,
			     const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv;
	dm_fault_kind k;
	if ((k = dm_views_src_dst(c, b, in, engine, index, &sv, &dv, f)))
		return k;
	uint64_t n = sv.nfree, P = sv.nparts;
	float *x = dm_tmp(c, 0, P * n), *y = dm_tmp(c, 1, P * 6);
	if (!x || !y)
		return dm_nomem(f, engine, index);
	dm_view_read(&sv, x);
	for (uint64_t p = 0; p < P; p++) {
		const float *r = x + p * n;
		for (uint64_t half = 0; half < 2; half++) {
			uint64_t cnt = n > half ? (n - half + 1) / 2 : 0;
			double sum = 0.0, m2 = 0.0, mean;
			for (uint64_t j = half; j < n; j += 2)
				sum += r[j];
			mean = cnt ? sum / (double)cnt : 0.0;
			for (uint64_t j = half; j < n; j += 2)
				m2 += ((double)r[j] - mean) * ((double)r[j] - mean);
			y[p * 6 + half * 3 + 0] = (float)cnt;
			y[p * 6 + half * 3 + 1] = (float)mean;
			y[p * 6 + half * 3 + 2] = (float)m2;
		}
	}
	return dm_write_results(c, b, &dv, y, engine, index, "bn_stats dst", f);
}

dm_fault_kind dm_op_bn_aggr(dm_core *c, const dm_binding *b, int engine, int64_t index,
			    const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv;
	dm_fault_kind k;
	if ((k = dm_views_src_dst(c, b, in, engine, index, &sv, &dv, f)))
		return k;
	uint64_t n = sv.nfree, P = sv.nparts, groups = n / 3;
	float *x = dm_tmp(c, 0, P * n), *y = dm_tmp(c, 1, P * 2);
	if (!x || !y)
		return dm_nomem(f, engine, index);
	dm_view_read(&sv, x);
	for (uint64_t p = 0; p < P; p++) {
		const float *t = x + p * n;
		double total = 0.0, wsum = 0.0, m2 = 0.0, mean;
		for (uint64_t g = 0; g < groups; g++)
			if (t[3 * g] > 0.0f) {
				total += t[3 * g];
				wsum += (double)t[3 * g] * t[3 * g + 1];
			}
		mean = total > 0.0 ? wsum / total : 0.0;
		/* Chan et al.'s pairwise combination: within-group M2 plus the
		 * spread of the group means around the overall mean */
		for (uint64_t g = 0; g < groups; g++)
			if (t[3 * g] > 0.0f) {
				double d = (double)t[3 * g + 1] - mean;
				m2 += t[3 * g + 2] + (double)t[3 * g] * d * d;
			}
		y[p * 2 + 0] = (float)mean;
		y[p * 2 + 1] = total > 0.0 ? (float)(m2 / total) : 0.0f;
	}
	return dm_write_results(c, b, &dv, y, engine, index, "bn_aggr dst", f);
}
