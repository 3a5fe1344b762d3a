/*
 * ops_dma.c -- what a DMA transfer does to data: copy elements in flattened
 * (row, free index) order between any two memories, casting through fp32
 * when the dtypes differ (any pair for a direct copy, float types otherwise:
 * isa/validate.c); gather/scatter address the HBM
 * side's rows through an SBUF index column, each index checked at run time.
 */
#include "ops.h"

#include "numerics.h"

#include <string.h>

/* A position in a view walked in flattened (row, free index) order; the
 * walk advances by runs along the innermost dim, so no element pays a
 * division (the per-element div/mod address was most of a transposing
 * copy's host time). */
typedef struct walker {
	const dm_view *v;
	uint8_t *a;
	uint32_t p;
	uint32_t i[ISA_MAX_DIMS];
} walker;

static void walk_start(walker *w, const dm_view *v, uint32_t p)
{
	memset(w, 0, sizeof(*w));
	w->v = v;
	w->p = p;
	w->a = v->base + (int64_t)p * v->pstep;
}

/* elements left in the current innermost run */
static uint64_t walk_run(const walker *w)
{
	return w->v->size[ISA_MAX_DIMS - 1] - w->i[ISA_MAX_DIMS - 1];
}

/* advances n (<= walk_run) elements; carrying past dim 0 moves to the next row */
static void walk_advance(walker *w, uint64_t n)
{
	const dm_view *v = w->v;
	int d = ISA_MAX_DIMS - 1;
	w->i[d] += (uint32_t)n;
	w->a += (int64_t)n * v->step[d];
	while (w->i[d] == v->size[d]) {
		w->a -= (int64_t)v->size[d] * v->step[d];
		w->i[d] = 0;
		if (d == 0) {
			w->p++;
			w->a = v->base + (int64_t)w->p * v->pstep;
			return;
		}
		d--;
		w->i[d]++;
		w->a += v->step[d];
	}
}

/* n elements from s's run to d's run (element steps ds, ss bytes) */
static void copy_run(const dm_view *dv, uint8_t *da, int64_t ds, const dm_view *sv,
		     const uint8_t *sa, int64_t ss, uint64_t n)
{
	if (dv->dtype != sv->dtype) {
		/* a casting copy goes through fp32 in cache-sized pieces, as the
		 * engines cast (integers beyond 2^24 round, float -> int saturates) */
		float buf[512];
		while (n) {
			uint64_t m = n < 512 ? n : 512;
			dm_load_run(sv->dtype, sa, ss, sv->esz, buf, m);
			dm_store_run(dv->dtype, da, ds, dv->esz, buf, m);
			sa += (int64_t)m * ss;
			da += (int64_t)m * ds;
			n -= m;
		}
		return;
	}
	if (ds == (int64_t)dv->esz && ss == (int64_t)dv->esz) {
		memcpy(da, sa, n * dv->esz);
		return;
	}
	switch (dv->esz) {
	case 1:
		for (uint64_t k = 0; k < n; k++, da += ds, sa += ss)
			*da = *sa;
		break;
	case 2:
		for (uint64_t k = 0; k < n; k++, da += ds, sa += ss)
			memcpy(da, sa, 2);
		break;
	case 4:
		for (uint64_t k = 0; k < n; k++, da += ds, sa += ss)
			memcpy(da, sa, 4);
		break;
	default:
		for (uint64_t k = 0; k < n; k++, da += ds, sa += ss)
			memcpy(da, sa, dv->esz);
		break;
	}
}

/* `total` elements from s (starting at row sp) to d (row dp), in flattened order */
static void copy_flat(const dm_view *d, uint32_t dp, const dm_view *s, uint32_t sp, uint64_t total)
{
	walker dw, sw;
	walk_start(&dw, d, dp);
	walk_start(&sw, s, sp);
	int64_t ds = d->step[ISA_MAX_DIMS - 1], ss = s->step[ISA_MAX_DIMS - 1];
	while (total) {
		uint64_t n = walk_run(&dw);
		uint64_t m = walk_run(&sw);
		if (m < n)
			n = m;
		if (total < n)
			n = total;
		copy_run(d, dw.a, ds, s, sw.a, ss, n);
		walk_advance(&dw, n);
		walk_advance(&sw, n);
		total -= n;
	}
}

/* row dp of `d` += row sp of `s`: fp32 arithmetic rounded to d's dtype for
 * floats (any two float types), exact wrapping adds for one integer type */
static void add_row(const dm_view *d, uint32_t dp, const dm_view *s, uint32_t sp)
{
	walker dw, sw;
	walk_start(&dw, d, dp);
	walk_start(&sw, s, sp);
	bool is_float = isa_dtype_is_float(d->dtype);
	for (uint64_t k = 0; k < d->nfree; k++) {
		if (is_float) {
			dm_store(d->dtype, dw.a, dm_load(d->dtype, dw.a) + dm_load(s->dtype, sw.a));
		} else {
			int64_t a = 0, b = 0;
			switch (d->esz) {
			case 1: a = d->dtype == ISA_DT_int8 ? *(int8_t *)dw.a : *dw.a;
				b = d->dtype == ISA_DT_int8 ? *(const int8_t *)sw.a : *sw.a; break;
			case 2: { int16_t x, y; memcpy(&x, dw.a, 2); memcpy(&y, sw.a, 2); a = x; b = y; break; }
			case 4: { int32_t x, y; memcpy(&x, dw.a, 4); memcpy(&y, sw.a, 4); a = x; b = y; break; }
			default: { int64_t x, y; memcpy(&x, dw.a, 8); memcpy(&y, sw.a, 8); a = x; b = y; break; }
			}
			uint64_t r = (uint64_t)a + (uint64_t)b;   /* wraps to the width below */
			memcpy(dw.a, &r, d->esz);                  /* little-endian low bytes */
		}
		walk_advance(&dw, 1);
		walk_advance(&sw, 1);
	}
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
	copy_flat(d, dp, s, sp, d->nfree);
}

typedef struct copy_job {
	const dm_view *d, *s;
} copy_job;

static void copy_rows(void *arg, uint32_t lo, uint32_t hi)
{
	const copy_job *j = arg;
	for (uint32_t p = lo; p < hi; p++)
		copy_row(j->d, p, j->s, p);
}

/* a transfer worth splitting over host threads (a few us of memcpy) */
#define PAR_MIN_BYTES (64u << 10)

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
	return dm_exec_dma_to(c, c, b, engine, index, desc, f);
}

/* The source is read from core `c`, on-chip destinations are written in
 * `dc` (the paired core for a peer transfer, else `c`). */
dm_fault_kind dm_exec_dma_to(dm_core *c, dm_core *dc, const dm_binding *b, int engine, int64_t index,
			     const isa_dma_desc *desc, dm_fault *f)
{
	dm_view dv, sv;
	dm_fault_kind k;
	if ((k = dm_view_of(c, b, &desc->src, false, &sv, engine, index, "dma src", f)) ||
	    (k = dm_view_of(dc, b, &desc->dst, true, &dv, engine, index, "dma dst", f)))
		return k;
	c = dc;                 /* PSUM bookkeeping belongs to the written core */

	if (desc->mode == ISA_DMA_TRANSPOSE) {
		/* dst[p][j * I + i] = src[i][j * P + p], the outer free elements
		 * j kept in place (J = 1: the 2-D transpose); shapes and equal
		 * 2-byte dtypes validated */
		uint64_t I = sv.nparts, P = dv.nparts, J = dv.nfree / I;
		for (uint32_t p = 0; p < P; p++)
			for (uint64_t j = 0; j < J; j++)
				for (uint64_t i = 0; i < I; i++)
					memcpy(dm_view_elem(&dv, p, j * I + i), dm_view_elem(&sv, (uint32_t)i, j * P + p),
					       dv.esz);
		dm_psum_mark(c, &dv);
		return DM_OK;
	}
	if (desc->mode == ISA_DMA_ADD) {
		/* dst += src row by row (shapes validated equal) */
		for (uint32_t p = 0; p < dv.nparts; p++)
			add_row(&dv, p, &sv, p);
		dm_psum_mark(c, &dv);
		return DM_OK;
	}
	if (desc->mode == ISA_DMA_DIRECT) {
		if (dv.nfree == sv.nfree && dv.nparts == sv.nparts) {
			/* row by row; a large transfer's rows on the host threads
			 * when they cannot interfere */
			const dm_view *srcs[] = { &sv };
			copy_job j = { &dv, &sv };
			bool big = (uint64_t)dv.nparts * dv.nfree * dv.esz >= PAR_MIN_BYTES;
			dm_par_rows(b, copy_rows, &j, dv.nparts,
				    dm_par_on(b, big) && dm_rows_independent(&dv, srcs, 1));
		} else {
			/* reshaping transfer: walk both in flattened order */
			copy_flat(&dv, 0, &sv, 0, (uint64_t)dv.nparts * dv.nfree);
		}
		dm_psum_mark(c, &dv);
		return DM_OK;
	}

	int64_t idx[ISA_NUM_PARTITIONS];
	if ((k = read_index(c, b, desc, idx, engine, index, f)))
		return k;
	bool gather = isa_dma_mode_gathers(desc->mode);
	const dm_view *table = gather ? &sv : &dv;
	uint32_t rows = desc->index.nparts;
	for (uint32_t p = 0; p < rows; p++) {
		if ((idx[p] < 0 || idx[p] >= (int64_t)table->nparts) && !desc->oob_skip)
			return dm_fault_set(f, DM_FAULT_OOB, engine, index, (uint64_t)idx[p],
					    "descriptor '%s': index[%u] = %lld outside the %u rows of %s tensor '%s'",
					    desc->name, p, (long long)idx[p], table->nparts,
					    gather ? "source" : "destination",
					    b->prog->tensors[gather ? desc->src.tensor : desc->dst.tensor].name);
	}
	for (uint32_t p = 0; p < rows; p++) {
		if (idx[p] < 0 || idx[p] >= (int64_t)table->nparts)
			continue;       /* oob_skip: this row's transfer is dropped */
		if (desc->mode == ISA_DMA_GATHER_ADD)
			add_row(&dv, p, &sv, (uint32_t)idx[p]);
		else if (gather)
			copy_row(&dv, p, &sv, (uint32_t)idx[p]);
		else if (desc->mode == ISA_DMA_SCATTER_ADD)
			add_row(&dv, (uint32_t)idx[p], &sv, p);
		else
			copy_row(&dv, (uint32_t)idx[p], &sv, p);
	}
	dm_psum_mark(c, &dv);
	return DM_OK;
}
