/*
 * ops_dma.c -- what a DMA transfer does to data: copy elements in flattened
 * (row, free index) order between any two memories, casting between float
 * types through fp32 when the dtypes differ; gather/scatter address the HBM
 * side's rows through an SBUF index column, each index checked at run time.
 */
#include "ops.h"

#include "numerics.h"

#include <string.h>

static void copy_elem(const dm_view *d, uint8_t *da, const dm_view *s, const uint8_t *sa)
{
	if (d->dtype == s->dtype)
		memcpy(da, sa, d->esz);
	else
		dm_store(d->dtype, da, dm_load(s->dtype, sa));
}

/* rows of `d` from rows of `s`, both with `nfree` elements per row */
static void copy_row(const dm_view *d, uint32_t dp, const dm_view *s, uint32_t sp)
{
	if (d->contiguous && s->contiguous && d->dtype == s->dtype) {
		memcpy(d->base + (int64_t)dp * d->pstep, s->base + (int64_t)sp * s->pstep,
		       d->nfree * d->esz);
		return;
	}
	/* a broadcast source (every free step 0: one element repeated) into a
	 * contiguous row of the same type: replicate it */
	bool bcast = d->contiguous && d->dtype == s->dtype;
	for (int k = 0; k < (int)ISA_MAX_DIMS && bcast; k++)
		bcast = s->size[k] == 1 || s->step[k] == 0;
	if (bcast) {
		uint8_t *dst = d->base + (int64_t)dp * d->pstep;
		const uint8_t *src = s->base + (int64_t)sp * s->pstep;
		for (uint64_t k = 0; k < d->nfree; k++)
			memcpy(dst + k * d->esz, src, d->esz);
		return;
	}
	for (uint64_t k = 0; k < d->nfree; k++)
		copy_elem(d, dm_view_elem(d, dp, k), s, dm_view_elem(s, sp, k));
}

static dm_fault_kind read_index(dm_core *c, const dm_binding *b, const isa_dma_desc *desc,
				int64_t *idx, int engine, int64_t index, dm_fault *f)
{
	dm_view iv;
	dm_fault_kind k = dm_view_of(c, b, &desc->index, false, &iv, engine, index, "index", f);
	if (k)
		return k;
	for (uint32_t p = 0; p < iv.nparts; p++) {
		uint8_t *a = dm_view_elem(&iv, p, 0);
		if (iv.dtype == ISA_DT_int32) {
			int32_t v;
			memcpy(&v, a, 4);
			idx[p] = v;
		} else {
			uint32_t v;
			memcpy(&v, a, 4);
			idx[p] = v;
		}
	}
	return DM_OK;
}

dm_fault_kind dm_exec_dma(dm_core *c, const dm_binding *b, int engine, int64_t index,
			  const isa_dma_desc *desc, dm_fault *f)
{
	dm_view dv, sv;
	dm_fault_kind k;
	if ((k = dm_view_of(c, b, &desc->src, false, &sv, engine, index, "dma src", f)) ||
	    (k = dm_view_of(c, b, &desc->dst, true, &dv, engine, index, "dma dst", f)))
		return k;

	if (desc->mode == ISA_DMA_DIRECT) {
		if (dv.nfree == sv.nfree && dv.nparts == sv.nparts) {
			for (uint32_t p = 0; p < dv.nparts; p++)
				copy_row(&dv, p, &sv, p);
		} else {
			/* reshaping transfer: walk both in flattened order */
			uint64_t total = (uint64_t)dv.nparts * dv.nfree;
			for (uint64_t t = 0; t < total; t++)
				copy_elem(&dv, dm_view_elem(&dv, (uint32_t)(t / dv.nfree), t % dv.nfree),
					  &sv, dm_view_elem(&sv, (uint32_t)(t / sv.nfree), t % sv.nfree));
		}
		dm_psum_mark(c, &dv);
		return DM_OK;
	}

	int64_t idx[ISA_NUM_PARTITIONS];
	if ((k = read_index(c, b, desc, idx, engine, index, f)))
		return k;
	bool gather = desc->mode == ISA_DMA_GATHER;
	const dm_view *table = gather ? &sv : &dv;
	uint32_t rows = desc->index.nparts;
	for (uint32_t p = 0; p < rows; p++) {
		if (idx[p] < 0 || idx[p] >= (int64_t)table->nparts)
			return dm_fault_set(f, DM_FAULT_OOB, engine, index, (uint64_t)idx[p],
					    "descriptor '%s': index[%u] = %lld outside the %u rows of %s tensor '%s'",
					    desc->name, p, (long long)idx[p], table->nparts,
					    gather ? "source" : "destination",
					    b->prog->tensors[gather ? desc->src.tensor : desc->dst.tensor].name);
	}
	for (uint32_t p = 0; p < rows; p++) {
		if (gather)
			copy_row(&dv, p, &sv, (uint32_t)idx[p]);
		else
			copy_row(&dv, (uint32_t)idx[p], &sv, p);
	}
	dm_psum_mark(c, &dv);
	return DM_OK;
}
