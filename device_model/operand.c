/*
 * operand.c -- access patterns to host memory and fp32 staging rows.
 * The validator already proved every SBUF/PSUM pattern in bounds and every
 * HBM pattern inside its tensor; what remains here is the HBM binding (the
 * tensor's device address must map) and the per-run PSUM bank state.
 */
#include "operand.h"

#include "numerics.h"

#include <math.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

dm_fault_kind dm_fault_set(dm_fault *f, dm_fault_kind kind, int engine, int64_t index,
			   uint64_t addr, const char *fmt, ...)
{
	if (!f)
		return kind;
	f->kind = kind;
	f->engine = engine;
	f->index = index;
	f->addr = addr;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
	va_end(ap);
	return kind;
}

float *dm_tmp(dm_core *c, int slot, uint64_t n)
{
	if (n == 0)
		n = 1;
	if (c->tmp_cap[slot] < n) {
		float *p = realloc(c->tmp[slot], n * sizeof(float));
		if (!p)
			return NULL;
		c->tmp[slot] = p;
		c->tmp_cap[slot] = n;
	}
	return c->tmp[slot];
}

dm_fault_kind dm_view_of(dm_core *c, const dm_binding *b, const isa_ap *ap, bool write,
			 dm_view *v, int engine, int64_t index, const char *field,
			 dm_fault *fault)
{
	memset(v, 0, sizeof(*v));
	v->esz = isa_dtype_size(ap->dtype);
	v->dtype = ap->dtype;
	v->space = ap->space;
	v->nparts = ap->nparts;
	v->nfree = isa_ap_free_elems(ap);
	for (unsigned d = 0; d < ISA_MAX_DIMS; d++) {
		/* right-align the dims so index 3 is innermost */
		unsigned src = d + ap->ndims;
		if (src >= ISA_MAX_DIMS) {
			v->size[d] = ap->size[src - ISA_MAX_DIMS];
			v->step[d] = (int64_t)ap->stride[src - ISA_MAX_DIMS] * v->esz;
		} else {
			v->size[d] = 1;
			v->step[d] = 0;
		}
	}
	v->contiguous = true;
	for (int d = ISA_MAX_DIMS - 1, expect = (int)v->esz; d >= 0; d--) {
		if (v->size[d] == 1)
			continue;
		if (v->step[d] != expect) {
			v->contiguous = false;
			break;
		}
		expect *= (int)v->size[d];
	}

	if (ap->space == ISA_SPACE_SBUF || ap->space == ISA_SPACE_PSUM) {
		uint32_t pbytes = ap->space == ISA_SPACE_SBUF ? c->ti->sbuf_partition_bytes
							      : c->ti->psum_partition_bytes;
		uint8_t *mem = ap->space == ISA_SPACE_SBUF ? c->sbuf : c->psum;
		v->start = ap->start;
		v->pstep = pbytes;
		v->base = mem + (uint64_t)ap->start * pbytes + ap->offset;
		return DM_OK;
	}

	/* HBM: the bound tensor's range must map */
	int64_t lo, hi;
	isa_ap_byte_range(ap, &lo, &hi);
	uint64_t taddr = b->tensor_addr[ap->tensor];
	uint8_t *host = b->hbm.map(b->hbm.ctx, taddr + (uint64_t)lo, (uint64_t)(hi - lo), write);
	if (!host)
		return dm_fault_set(fault, DM_FAULT_OOB, engine, index, taddr + (uint64_t)lo,
				    "%s: HBM bytes [0x%llx, 0x%llx) of tensor '%s' are outside device memory",
				    field, (unsigned long long)(taddr + (uint64_t)lo),
				    (unsigned long long)(taddr + (uint64_t)hi),
				    b->prog->tensors[ap->tensor].name);
	/* `host` maps tensor byte `lo`; element (0, 0) sits at byte `offset` */
	v->pstep = ap->pstride * (int64_t)v->esz;
	v->base = host - lo + (int64_t)ap->offset;
	return DM_OK;
}

/* Visits the innermost runs of row p: `a` is the run's first element and
 * `k` the index in the row of that element. */
#define FOR_EACH_RUN(v, p, a, k, body)                                                    \
	do {                                                                              \
		uint64_t k = 0;                                                           \
		uint8_t *b0_ = (v)->base + (int64_t)(p) * (v)->pstep;                     \
		for (uint32_t i0 = 0; i0 < (v)->size[0]; i0++)                           \
			for (uint32_t i1 = 0; i1 < (v)->size[1]; i1++)                   \
				for (uint32_t i2 = 0; i2 < (v)->size[2]; i2++) {         \
					uint8_t *a = b0_ + i0 * (v)->step[0] +              \
						     i1 * (v)->step[1] + i2 * (v)->step[2];  \
					body;                                               \
					k += (v)->size[3];                                  \
				}                                                           \
	} while (0)

/* Visits every element of row p of a strided view in row-major order:
 * `a` is its address and `k` its index in the row. */
#define FOR_EACH_ELEM(v, p, a, k, body)                                                   \
	FOR_EACH_RUN(v, p, r_, k0_,                                                      \
		     for (uint32_t i3 = 0; i3 < (v)->size[3]; i3++) {                    \
			     uint8_t *a = r_ + i3 * (v)->step[3];                        \
			     uint64_t k = k0_ + i3;                                      \
			     body;                                                       \
		     })

void dm_view_read_rows(const dm_view *v, uint32_t p0, uint32_t np, float *out)
{
	for (uint32_t p = p0; p < p0 + np; p++) {
		float *row = out + (uint64_t)(p - p0) * v->nfree;
		if (v->contiguous)
			dm_load_row(v->dtype, v->base + (int64_t)p * v->pstep, row, v->nfree);
		else
			FOR_EACH_RUN(v, p, a, k, dm_load_run(v->dtype, a, v->step[3], v->esz, row + k, v->size[3]));
	}
}

void dm_view_write_rows(const dm_view *v, uint32_t p0, uint32_t np, const float *in)
{
	for (uint32_t p = p0; p < p0 + np; p++) {
		const float *row = in + (uint64_t)(p - p0) * v->nfree;
		if (v->contiguous)
			dm_store_row(v->dtype, v->base + (int64_t)p * v->pstep, row, v->nfree);
		else
			FOR_EACH_RUN(v, p, a, k, dm_store_run(v->dtype, a, v->step[3], v->esz, row + k, v->size[3]));
	}
}

void dm_view_read(const dm_view *v, float *out)
{
	dm_view_read_rows(v, 0, v->nparts, out);
}

void dm_view_write(const dm_view *v, const float *in)
{
	dm_view_write_rows(v, 0, v->nparts, in);
}

/* bytes [lo, hi) one row of a view touches, relative to the row's start */
static void row_span(const dm_view *v, int64_t *lo, int64_t *hi)
{
	*lo = 0;
	*hi = (int64_t)v->esz;
	for (int d = 0; d < (int)ISA_MAX_DIMS; d++) {
		int64_t ext = v->step[d] * (int64_t)(v->size[d] ? v->size[d] - 1 : 0);
		if (ext < 0)
			*lo += ext;
		else
			*hi += ext;
	}
}

static bool same_layout(const dm_view *a, const dm_view *b)
{
	if (a->base != b->base || a->pstep != b->pstep || a->esz != b->esz || a->nfree != b->nfree)
		return false;
	for (int d = 0; d < (int)ISA_MAX_DIMS; d++)
		if (a->size[d] != b->size[d] || a->step[d] != b->step[d])
			return false;
	return true;
}

/* Whether some byte of view a is also a byte of view b.  On-chip views are
 * stripes one partition apart: two overlap only where both their partitions
 * and their byte ranges inside a partition do (tiles side by side in the
 * same partitions do not). */
static bool may_overlap(const dm_view *a, const dm_view *b)
{
	int64_t al, ah, bl, bh;
	row_span(a, &al, &ah);
	row_span(b, &bl, &bh);
	int64_t P = a->pstep, na = a->nparts, nb = b->nparts;
	if (P != b->pstep || P <= 0 || ah - al > P || bh - bl > P) {
		/* anything else: compare the whole address ranges (as integers:
		 * the views may be in different host allocations) */
		int64_t pa = a->pstep * (na ? na - 1 : 0), pb = b->pstep * (nb ? nb - 1 : 0);
		intptr_t ab = (intptr_t)a->base, bb = (intptr_t)b->base;
		intptr_t alo = ab + al + (pa < 0 ? pa : 0), ahi = ab + ah + (pa > 0 ? pa : 0);
		intptr_t blo = bb + bl + (pb < 0 ? pb : 0), bhi = bb + bh + (pb > 0 ? pb : 0);
		return alo < bhi && blo < ahi;
	}
	/* a's row p starts `d` bytes into b's row p + r */
	int64_t delta = (int64_t)((intptr_t)a->base - (intptr_t)b->base);
	int64_t r = delta >= 0 ? delta / P : -((-delta + P - 1) / P);
	int64_t d = delta - r * P;
	for (int64_t s = -3; s <= 3; s++) {
		int64_t lo = d + al - s * P, hi = d + ah - s * P;   /* in b's row p + r + s */
		if (lo < bh && bl < hi && r + s < nb && r + s + na > 0)
			return true;
	}
	return false;
}

bool dm_rows_independent(const dm_view *dst, const dm_view *const *srcs, int nsrc)
{
	int64_t lo, hi, P = dst->pstep < 0 ? -dst->pstep : dst->pstep;
	row_span(dst, &lo, &hi);
	if (dst->nparts > 1 && hi - lo > P)
		return false;
	for (int i = 0; i < nsrc; i++)
		if (may_overlap(dst, srcs[i]))
			return false;
	return true;
}

void dm_par_rows(const dm_binding *b, dm_rows_fn fn, void *arg, uint32_t n, bool big)
{
	if (n > 1 && dm_par_on(b, big))
		b->par.run(b->par.ctx, fn, arg, n);
	else
		fn(arg, 0, n);
}

/*
 * An instruction reads all its operands before it writes; staging every row
 * at once moved whole tiles (up to MiBs) through memory several times per
 * instruction, most of an elementwise instruction's host time.  Processing a
 * few rows at a time keeps the staging in cache and gives the same result
 * when no later row's input can change under an earlier row's write: the
 * destination overlaps no source, or only exactly in place.  Checked
 * numerics stage everything, so a fault leaves the destination untouched.
 */
uint32_t dm_row_block(const dm_binding *b, const dm_view *dst, const dm_view *const *srcs, int nsrc)
{
	uint32_t all = dst->nparts ? dst->nparts : 1;
	if (b->check_numerics)
		return all;
	for (int i = 0; i < nsrc; i++)
		if (may_overlap(dst, srcs[i]) && !same_layout(srcs[i], dst))
			return all;
	/* ~16 KiB of fp32 per staged operand, but at least 8 rows: the
	 * accumulating reductions fold 8 rows side by side (dm_fold_rows_f32) */
	uint64_t rows = 4096 / (dst->nfree ? dst->nfree : 1);
	return rows < 8 ? (all < 8 ? all : 8) : rows > all ? all : (uint32_t)rows;
}

dm_fault_kind dm_views_src_dst(dm_core *c, const dm_binding *b, const isa_instr *in, int engine,
			       int64_t index, dm_view *src, dm_view *dst, dm_fault *f)
{
	dm_fault_kind k = dm_view_of(c, b, &in->ap[ISA_AP_SRC], false, src, engine, index, "src", f);
	if (k)
		return k;
	return dm_view_of(c, b, &in->ap[ISA_AP_DST], true, dst, engine, index, "dst", f);
}

static int64_t load_i64(int dtype, const uint8_t *a)
{
	switch (dtype) {
	case ISA_DT_int8: return *(const int8_t *)a;
	case ISA_DT_uint8: case ISA_DT_bool: return *a;
	case ISA_DT_int16: { int16_t x; memcpy(&x, a, 2); return x; }
	case ISA_DT_uint16: { uint16_t x; memcpy(&x, a, 2); return x; }
	case ISA_DT_int32: { int32_t x; memcpy(&x, a, 4); return x; }
	case ISA_DT_uint32: { uint32_t x; memcpy(&x, a, 4); return x; }
	default: {
		float f = dm_load(dtype, a);
		return isnan(f) ? 0 : f >= 9.2e18f ? INT64_MAX : f <= -9.2e18f ? INT64_MIN : (int64_t)f;
	}
	}
}

/* integer stores wrap to the type's width, as integer ALUs do */
static void store_i64(int dtype, uint8_t *a, int64_t v)
{
	switch (dtype) {
	case ISA_DT_int8: case ISA_DT_uint8: *a = (uint8_t)v; break;
	case ISA_DT_bool: *a = v != 0; break;
	case ISA_DT_int16: case ISA_DT_uint16: { uint16_t x = (uint16_t)v; memcpy(a, &x, 2); break; }
	case ISA_DT_int32: case ISA_DT_uint32: { uint32_t x = (uint32_t)v; memcpy(a, &x, 4); break; }
	default: dm_store(dtype, a, (float)v); break;
	}
}

void dm_view_read_i64(const dm_view *v, int64_t *out)
{
	for (uint32_t p = 0; p < v->nparts; p++) {
		int64_t *row = out + (uint64_t)p * v->nfree;
		FOR_EACH_ELEM(v, p, a, k, row[k] = load_i64(v->dtype, a));
	}
}

void dm_view_write_i64(const dm_view *v, const int64_t *in)
{
	for (uint32_t p = 0; p < v->nparts; p++) {
		const int64_t *row = in + (uint64_t)p * v->nfree;
		FOR_EACH_ELEM(v, p, a, k, store_i64(v->dtype, a, row[k]));
	}
}

/* PSUM banks touched by a view: [first, last] byte of each partition row */
static void psum_banks(const dm_core *c, const dm_view *v, unsigned *first, unsigned *last)
{
	uint32_t bank = c->ti->psum_partition_bytes / c->ti->psum_banks;
	uint64_t pbytes = c->ti->psum_partition_bytes;
	uint64_t off0 = (uint64_t)(v->base - c->psum) % pbytes;
	int64_t lo = 0, hi = 0;
	for (int d = 0; d < (int)ISA_MAX_DIMS; d++) {
		int64_t ext = v->step[d] * (int64_t)(v->size[d] - 1);
		if (ext < 0)
			lo += ext;
		else
			hi += ext;
	}
	*first = (unsigned)(((int64_t)off0 + lo) / bank);
	*last = (unsigned)(((int64_t)off0 + hi + v->esz - 1) / bank);
}

void dm_psum_mark(dm_core *c, const dm_view *v)
{
	if (v->space != ISA_SPACE_PSUM)
		return;
	unsigned f, l;
	psum_banks(c, v, &f, &l);
	for (uint32_t p = 0; p < v->nparts; p++)
		for (unsigned k = f; k <= l && k < 16; k++)
			c->psum_written[v->start + p][k] = 1;
}

bool dm_psum_initialized(const dm_core *c, const dm_view *v)
{
	unsigned f, l;
	psum_banks(c, v, &f, &l);
	for (uint32_t p = 0; p < v->nparts; p++)
		for (unsigned k = f; k <= l && k < 16; k++)
			if (!c->psum_written[v->start + p][k])
				return false;
	return true;
}

dm_fault_kind dm_check_finite(const dm_binding *b, const float *vals, uint64_t n, int engine,
			      int64_t index, const char *what, dm_fault *fault)
{
	if (!b->check_numerics)
		return DM_OK;
	for (uint64_t i = 0; i < n; i++)
		if (!isfinite(vals[i]))
			return dm_fault_set(fault, DM_FAULT_NUMERIC, engine, index, i,
					    "%s: element %llu is %s", what, (unsigned long long)i,
					    isnan(vals[i]) ? "NaN" : "Inf");
	return DM_OK;
}

dm_fault_kind dm_write_results(dm_core *c, const dm_binding *b, const dm_view *dv, const float *vals,
			       int engine, int64_t index, const char *what, dm_fault *fault)
{
	dm_fault_kind k = dm_check_finite(b, vals, (uint64_t)dv->nparts * dv->nfree, engine, index, what,
					  fault);
	if (k)
		return k;
	dm_view_write(dv, vals);
	dm_psum_mark(c, dv);
	return DM_OK;
}
