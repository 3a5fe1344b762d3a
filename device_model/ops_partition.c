/*
 * ops_partition.c -- data moved across partitions by the engines' own data
 * paths: VectorE's reshape banks (nki.isa.nc_stream_shuffle).  Values move
 * as they are (one dtype in and out), so they are copied as bytes: integers
 * of any width and NaN payloads come through unchanged.
 */
#include "ops.h"

#include <string.h>

/* nc_stream_shuffle: each 32-partition quadrant of dst takes, in its
 * partition i, src's partition mask[i] of the same quadrant (the SDK's
 * numpy semantics); ISA_PMAP_KEEP leaves dst's partition as it was.  src is
 * staged whole first, so dst may be src (the SDK allows the shuffle in
 * place).  The validator has checked that every partition read is one src
 * covers. */
dm_fault_kind dm_op_nc_stream_shuffle(dm_core *c, const dm_binding *b, int engine, int64_t index,
				      const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv;
	dm_fault_kind k;
	if ((k = dm_views_src_dst(c, b, in, engine, index, &sv, &dv, f)))
		return k;
	uint64_t n = sv.nfree, esz = sv.esz, row = n * esz;
	uint8_t *stage = (uint8_t *)dm_tmp(c, 0, ((uint64_t)sv.nparts * row + 3) / 4);
	if (!stage)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "nc_stream_shuffle staging");
	for (uint32_t p = 0; p < sv.nparts; p++)
		for (uint64_t e = 0; e < n; e++)
			memcpy(stage + p * row + e * esz, dm_view_elem(&sv, p, e), esz);
	for (uint32_t p = 0; p < dv.nparts; p++) {
		unsigned m = in->pmap[p % ISA_QUADRANT];
		if (m == ISA_PMAP_KEEP)
			continue;
		const uint8_t *from = stage + (uint64_t)(p / ISA_QUADRANT * ISA_QUADRANT + m) * row;
		for (uint64_t e = 0; e < n; e++)
			memcpy(dm_view_elem(&dv, p, e), from + e * esz, esz);
	}
	dm_psum_mark(c, &dv);
	return DM_OK;
}
