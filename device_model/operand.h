/*
 * operand.h -- access patterns resolved to host memory ("views") and moved
 * in and out of fp32 staging rows; shared by the instruction semantics.
 */
#ifndef NSIM_DM_OPERAND_H
#define NSIM_DM_OPERAND_H

#include "core.h"
#include "numerics.h"

typedef struct dm_view {
	uint8_t *base;        /* element (row 0, all free indices 0) */
	int64_t  pstep;       /* bytes between partitions (rows) */
	int64_t  step[ISA_MAX_DIMS];
	uint32_t size[ISA_MAX_DIMS];   /* padded with 1s to 4 dims */
	uint32_t nparts;
	uint64_t nfree;       /* elements per partition */
	unsigned esz;
	int      dtype;
	int      space;
	uint32_t start;       /* first partition (SBUF/PSUM) */
	bool     contiguous;  /* free elements of a row are adjacent */
} dm_view;

/* Resolves `ap`; HBM ranges go through the binding's accessor.  On an
 * address outside HBM, returns DM_FAULT_OOB with fault filled. */
dm_fault_kind dm_view_of(dm_core *c, const dm_binding *b, const isa_ap *ap, bool write,
			 dm_view *v, int engine, int64_t index, const char *field,
			 dm_fault *fault);

/* the src and dst operands of an instruction (most semantics start here) */
dm_fault_kind dm_views_src_dst(dm_core *c, const dm_binding *b, const isa_instr *in, int engine,
			       int64_t index, dm_view *src, dm_view *dst, dm_fault *f);

/* element k of row p (row-major over the free dims) */
static inline uint8_t *dm_view_elem(const dm_view *v, uint32_t p, uint64_t k)
{
	uint8_t *a = v->base + (int64_t)p * v->pstep;
	for (int d = ISA_MAX_DIMS - 1; d >= 0; d--) {
		uint64_t i = k % v->size[d];
		k /= v->size[d];
		a += (int64_t)i * v->step[d];
	}
	return a;
}

/* rows of the view to/from fp32: out[p * nfree + k] */
void dm_view_read(const dm_view *v, float *out);
void dm_view_write(const dm_view *v, const float *in);
/* rows [p0, p0 + np) only: out[(p - p0) * nfree + k] */
void dm_view_read_rows(const dm_view *v, uint32_t p0, uint32_t np, float *out);
void dm_view_write_rows(const dm_view *v, uint32_t p0, uint32_t np, const float *in);
/* how many rows an elementwise instruction may stage at a time (all of
 * them unless row-by-row gives the same result; see operand.c) */
uint32_t dm_row_block(const dm_binding *b, const dm_view *dst, const dm_view *const *srcs, int nsrc);
/* whether dst's rows may be written in any order, by any thread: they touch
 * disjoint bytes, none of them a source byte */
bool dm_rows_independent(const dm_view *dst, const dm_view *const *srcs, int nsrc);
/* fn over rows [0, n): split over the binding's host threads when `big`
 * (worth the hand-off: a few us of work or more), else here */
void dm_par_rows(const dm_binding *b, dm_rows_fn fn, void *arg, uint32_t n, bool big);
/* whether dm_par_rows would split work this big: callers test it before
 * their own (costlier) checks that the rows are independent */
static inline bool dm_par_on(const dm_binding *b, bool big)
{
	return big && b->par.run;
}
/* a typed immediate's value as fp32 (an int immediate converted) */
static inline float dm_imm_f32(isa_imm imm)
{
	return imm.kind == ISA_IMM_F32 ? dm_bits_f32(imm.bits) : (float)(int32_t)imm.bits;
}

/* exact integer access (int/uint/bool dtypes; floats truncate) */
void dm_view_read_i64(const dm_view *v, int64_t *out);
void dm_view_write_i64(const dm_view *v, const int64_t *in);

/* staging buffer `slot` of at least n floats (NULL on no memory) */
float *dm_tmp(dm_core *c, int slot, uint64_t n);

/* marks the PSUM banks a write covers as holding data */
void dm_psum_mark(dm_core *c, const dm_view *v);
/* true when every bank the view covers has been written */
bool dm_psum_initialized(const dm_core *c, const dm_view *v);

dm_fault_kind dm_fault_set(dm_fault *f, dm_fault_kind kind, int engine, int64_t index,
			   uint64_t addr, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

/* numeric check of a written view: first NaN/Inf is a fault */
dm_fault_kind dm_check_finite(const dm_binding *b, const float *vals, uint64_t n, int engine,
			      int64_t index, const char *what, dm_fault *fault);

/* the end of every fp32-computing instruction: the numeric check, the
 * write (casting to the view's dtype) and the PSUM mark */
dm_fault_kind dm_write_results(dm_core *c, const dm_binding *b, const dm_view *dv, const float *vals,
			       int engine, int64_t index, const char *what, dm_fault *fault);

#endif /* NSIM_DM_OPERAND_H */
