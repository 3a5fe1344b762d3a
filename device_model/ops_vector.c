/*
 * ops_vector.c -- elementwise semantics of VectorE, ScalarE and GpSimd:
 * activation, tensor_tensor, tensor_scalar, tensor_copy, select, memset and
 * the VectorE transpose.  Each reads its operands into fp32 rows, computes,
 * and writes with the destination's cast.  When every operand and immediate
 * is an integer the integer ALU path computes exactly instead (bitwise ops,
 * index arithmetic beyond 2^24).
 */
#include "ops.h"

#include "numerics.h"

#include <stdatomic.h>
#include <stdlib.h>

static bool all_integer(const isa_instr *in)
{
	for (int s = 0; s < ISA_MAX_AP; s++)
		if ((in->ap_mask >> s) & 1u)
			if (!isa_dtype_is_integer(in->ap[s].dtype))
				return false;
	return true;
}

/* writes fp32 results after the numeric check and marks PSUM */
static dm_fault_kind finish(dm_core *c, const dm_binding *b, const dm_view *dv, const float *v,
			    int engine, int64_t index, const isa_instr *in, dm_fault *f)
{
	return dm_write_results(c, b, dv, v, engine, index, isa_op_name(in->opcode), f);
}

/* the same for rows [p0, p0 + np) of the destination (vals holds just those) */
static dm_fault_kind finish_rows(dm_core *c, const dm_binding *b, const dm_view *dv, uint32_t p0, uint32_t np,
				 const float *v, int engine, int64_t index, const isa_instr *in, dm_fault *f)
{
	dm_fault_kind k = dm_check_finite(b, v, (uint64_t)np * dv->nfree, engine, index,
					  isa_op_name(in->opcode), f);
	if (k)
		return k;
	dm_view_write_rows(dv, p0, np, v);
	dm_psum_mark(c, dv);
	return DM_OK;
}

/*
 * Rows of a float elementwise instruction on host threads.  When rows may be
 * staged a few at a time (dm_row_block: no checked numerics, the
 * destination overlaps no source except exactly in place) and the
 * destination's rows are disjoint, every row depends only on its own
 * inputs, so any thread may compute any row: a large instruction's rows are
 * split over the binding's threads (dm_par_rows), each with its own staging.
 * PSUM is marked once by the caller.
 */
typedef struct ew_job ew_job;
struct ew_job {
	const dm_view *dst, *src[3];
	int            nsrc;
	uint32_t       blk;
	/* x, y, z: np staged rows from src[0], src[1], src[2]; results in x */
	void         (*compute)(const ew_job *j, uint32_t p0, uint32_t np, float *x, const float *y,
				const float *z);
	int            op0, op1;
	bool           r0, r1;
	const float   *s0, *s1;      /* per-partition scalars (scale / bias for activation) */
	float         *acc;          /* activation's reduction, per partition */
	atomic_bool    nomem;
};

static void ew_rows(void *arg, uint32_t lo, uint32_t hi)
{
	ew_job *j = arg;
	uint64_t m = (uint64_t)j->blk * j->dst->nfree;
	float *x = malloc(m * sizeof(float) * (size_t)j->nsrc);
	if (!x) {
		atomic_store(&j->nomem, true);
		return;
	}
	float *y = j->nsrc > 1 ? x + m : NULL, *z = j->nsrc > 2 ? x + 2 * m : NULL;
	for (uint32_t p0 = lo; p0 < hi; p0 += j->blk) {
		uint32_t np = hi - p0 < j->blk ? hi - p0 : j->blk;
		dm_view_read_rows(j->src[0], p0, np, x);
		if (y)
			dm_view_read_rows(j->src[1], p0, np, y);
		if (z)
			dm_view_read_rows(j->src[2], p0, np, z);
		if (j->compute)
			j->compute(j, p0, np, x, y, z);
		dm_view_write_rows(j->dst, p0, np, x);
	}
	free(x);
}

/* a float elementwise instruction worth splitting (a few us of row loops) */
#define EW_PAR_MIN_ELEMS (16u << 10)

/* whether ew_rows runs on the host threads: a large instruction, rows
 * staged a block at a time, and a destination whose rows are disjoint (the
 * overlap test only for instructions that pass the cheap ones) */
static bool ew_split(const dm_binding *b, const ew_job *j)
{
	const dm_view *d = j->dst;
	return dm_par_on(b, (uint64_t)d->nparts * d->nfree >= EW_PAR_MIN_ELEMS) && j->blk < d->nparts &&
	       dm_rows_independent(d, NULL, 0);
}

/* The whole float path of an elementwise instruction: on the host threads
 * when ew_split says so, else block by block here (staging in dm_tmp slots
 * 0..nsrc-1, no allocation per instruction), checking numerics before each
 * write. */
static dm_fault_kind ew_exec(dm_core *c, const dm_binding *b, ew_job *j, const isa_instr *in,
			     int engine, int64_t index, dm_fault *f)
{
	if (ew_split(b, j)) {
		atomic_init(&j->nomem, false);
		dm_par_rows(b, ew_rows, j, j->dst->nparts, true);
		if (atomic_load(&j->nomem))
			return dm_nomem(f, engine, index);
		dm_psum_mark(c, j->dst);
		return DM_OK;
	}
	uint32_t P = j->dst->nparts;
	uint64_t m = (uint64_t)j->blk * j->dst->nfree;
	float *v[3] = { NULL, NULL, NULL };
	for (int i = 0; i < j->nsrc; i++)
		if (!(v[i] = dm_tmp(c, i, m)))
			return dm_nomem(f, engine, index);
	for (uint32_t p0 = 0; p0 < P; p0 += j->blk) {
		uint32_t np = p0 + j->blk <= P ? j->blk : P - p0;
		for (int i = 0; i < j->nsrc; i++)
			dm_view_read_rows(j->src[i], p0, np, v[i]);
		if (j->compute)
			j->compute(j, p0, np, v[0], v[1], v[2]);
		dm_fault_kind k = finish_rows(c, b, j->dst, p0, np, v[0], engine, index, in, f);
		if (k)
			return k;
	}
	return DM_OK;
}

static void ew_tensor_tensor(const ew_job *j, uint32_t p0, uint32_t np, float *x, const float *y,
			     const float *z)
{
	(void)p0, (void)z;
	dm_alu_row_f32(j->op0, x, y, 0.0f, false, (uint64_t)np * j->dst->nfree);
}

static void ew_tensor_scalar(const ew_job *j, uint32_t p0, uint32_t np, float *x, const float *y,
			     const float *z)
{
	(void)y, (void)z;
	uint64_t n = j->dst->nfree;
	for (uint32_t q = 0; q < np; q++) {
		float *row = x + (uint64_t)q * n;
		dm_alu_row_f32(j->op0, row, NULL, j->s0[p0 + q], j->r0, n);
		if (j->op1 != ISA_ALU_bypass)
			dm_alu_row_f32(j->op1, row, NULL, j->s1[p0 + q], j->r1, n);
	}
}

/* per-partition scalar operand: immediate, or column [P,1] of an AP */
static dm_fault_kind scalar_col(dm_core *c, const dm_binding *b, const isa_instr *in, int slot,
				isa_imm imm, int tmp, uint32_t nparts, float **out, int engine,
				int64_t index, dm_fault *f)
{
	float *col = dm_tmp(c, tmp, nparts);
	if (!col)
		return dm_nomem(f, engine, index);
	if ((in->ap_mask >> slot) & 1u) {
		dm_view sv;
		DM_OP_VIEW(sv, slot, false, "scalar");
		dm_view_read(&sv, col);
	} else {
		float v = dm_imm_f32(imm);
		for (uint32_t p = 0; p < nparts; p++)
			col[p] = v;
	}
	*out = col;
	return DM_OK;
}

/* activation: op0 the function, op1 the reduction, s0/s1 scale/bias */
static void ew_activation(const ew_job *j, uint32_t p0, uint32_t np, float *x, const float *y,
			  const float *z)
{
	(void)y, (void)z;
	uint64_t n = j->dst->nfree;
	for (uint32_t q = 0; q < np; q++)
		dm_act_row_f32(j->op0, x + q * n, j->s0[p0 + q], j->s1[p0 + q], n);
	if (j->op1 != ISA_ALU_bypass) {
		/* the reduction sees the values as written to dst */
		float *acc = j->acc + p0;
		dm_fold_rows_f32(j->op1, x, n, n, np, acc);
		if (j->op1 == ISA_ALU_absmax)
			for (uint32_t q = 0; q < np; q++)
				acc[q] = acc[q] < 0 ? -acc[q] : acc[q];
	}
}

dm_fault_kind dm_op_activation(dm_core *c, const dm_binding *b, int engine, int64_t index,
			       const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv;
	float *scale, *bias;
	dm_fault_kind k;
	DM_OP_VIEW(sv, ISA_AP_SRC, false, "src");
	DM_OP_VIEW(dv, ISA_AP_DST, true, "dst");
	if ((k = scalar_col(c, b, in, ISA_AP_SRC1, in->imm[0], 1, sv.nparts, &scale, engine, index, f)) ||
	    (k = scalar_col(c, b, in, ISA_AP_SRC2, in->imm[1], 2, sv.nparts, &bias, engine, index, f)))
		return k;
	int func = in->e[0], red = in->e[1];
	float *acc = dm_tmp(c, 3, sv.nparts);
	if (!acc)
		return dm_nomem(f, engine, index);
	const dm_view *srcs[] = { &sv };
	ew_job j = { .dst = &dv, .src = { &sv }, .nsrc = 1, .blk = dm_row_block(b, &dv, srcs, 1),
		     .compute = ew_activation, .op0 = func, .op1 = red, .s0 = scale, .s1 = bias,
		     .acc = acc };
	if ((k = ew_exec(c, b, &j, in, engine, index, f)))
		return k;
	if (red != ISA_ALU_bypass) {
		dm_view rv;
		DM_OP_VIEW(rv, ISA_AP_AUX, true, "reduce_dst");
		dm_view_write(&rv, acc);
		dm_psum_mark(c, &rv);
	}
	return DM_OK;
}

/* exponential: e^(x - s0[p]), summed per partition into acc */
static void ew_exponential(const ew_job *j, uint32_t p0, uint32_t np, float *x, const float *y,
			   const float *z)
{
	(void)y, (void)z;
	uint64_t n = j->dst->nfree;
	for (uint32_t q = 0; q < np; q++)
		dm_act_row_f32(ISA_ACT_exp, x + (uint64_t)q * n, 1.0f, -j->s0[p0 + q], n);
	/* the sum the accumulator keeps, in order (from the first term: exp is
	 * never -0, so 0 + e0 == e0) */
	dm_fold_rows_f32(ISA_ALU_add, x, n, n, np, j->acc + p0);
}

dm_fault_kind dm_op_exponential(dm_core *c, const dm_binding *b, int engine, int64_t index,
				const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv;
	float *mx;
	dm_fault_kind k;
	DM_OP_VIEW(sv, ISA_AP_SRC, false, "src");
	DM_OP_VIEW(dv, ISA_AP_DST, true, "dst");
	const dm_view *srcs[] = { &sv };
	float *acc = dm_tmp(c, 3, sv.nparts);
	if (!acc)
		return dm_nomem(f, engine, index);
	if ((k = scalar_col(c, b, in, ISA_AP_SRC1, in->imm[0], 1, sv.nparts, &mx, engine, index, f)))
		return k;
	ew_job j = { .dst = &dv, .src = { &sv }, .nsrc = 1, .blk = dm_row_block(b, &dv, srcs, 1),
		     .compute = ew_exponential, .s0 = mx, .acc = acc };
	if ((k = ew_exec(c, b, &j, in, engine, index, f)))
		return k;
	if ((in->ap_mask >> ISA_AP_AUX) & 1u) {
		dm_view rv;
		DM_OP_VIEW(rv, ISA_AP_AUX, true, "reduce_dst");
		dm_view_write(&rv, acc);
		dm_psum_mark(c, &rv);
	}
	return DM_OK;
}

dm_fault_kind dm_op_tensor_tensor(dm_core *c, const dm_binding *b, int engine, int64_t index,
				  const isa_instr *in, dm_fault *f)
{
	dm_view av, bv, dv;
	DM_OP_VIEW(av, ISA_AP_SRC, false, "src0");
	DM_OP_VIEW(bv, ISA_AP_SRC1, false, "src1");
	DM_OP_VIEW(dv, ISA_AP_DST, true, "dst");
	uint64_t n = (uint64_t)av.nparts * av.nfree;
	int op = in->e[0];
	if (all_integer(in)) {
		int64_t *x = (int64_t *)dm_tmp(c, 0, 2 * n), *y = (int64_t *)dm_tmp(c, 1, 2 * n);
		if (!x || !y)
			return dm_nomem(f, engine, index);
		dm_view_read_i64(&av, x);
		dm_view_read_i64(&bv, y);
		for (uint64_t i = 0; i < n; i++)
			x[i] = dm_alu_i64(op, x[i], y[i]);
		dm_view_write_i64(&dv, x);
		dm_psum_mark(c, &dv);
		return DM_OK;
	}
	const dm_view *srcs[] = { &av, &bv };
	ew_job j = { .dst = &dv, .src = { &av, &bv }, .nsrc = 2, .blk = dm_row_block(b, &dv, srcs, 2),
		     .compute = ew_tensor_tensor, .op0 = op };
	return ew_exec(c, b, &j, in, engine, index, f);
}

/* (x <op0> s0[p]) <op1> y, each step in fp32 (NKI's scalar_tensor_tensor) */
static void ew_scalar_tensor_tensor(const ew_job *j, uint32_t p0, uint32_t np, float *x, const float *y,
				    const float *z)
{
	(void)z;
	uint64_t n = j->dst->nfree;
	for (uint32_t q = 0; q < np; q++)
		dm_alu_row_f32(j->op0, x + (uint64_t)q * n, NULL, j->s0[p0 + q], j->r0, n);
	dm_alu_row_f32(j->op1, x, y, 0.0f, j->r1, (uint64_t)np * n);
}

dm_fault_kind dm_op_scalar_tensor_tensor(dm_core *c, const dm_binding *b, int engine, int64_t index,
					 const isa_instr *in, dm_fault *f)
{
	dm_view av, bv, dv;
	float *s0;
	dm_fault_kind k;
	DM_OP_VIEW(av, ISA_AP_SRC, false, "src");
	DM_OP_VIEW(bv, ISA_AP_SRC1, false, "src1");
	DM_OP_VIEW(dv, ISA_AP_DST, true, "dst");
	if ((k = scalar_col(c, b, in, ISA_AP_SRC2, in->imm[0], 2, av.nparts, &s0, engine, index, f)))
		return k;
	const dm_view *srcs[] = { &av, &bv };
	ew_job j = { .dst = &dv, .src = { &av, &bv }, .nsrc = 2, .blk = dm_row_block(b, &dv, srcs, 2),
		     .compute = ew_scalar_tensor_tensor, .op0 = in->e[0], .op1 = in->e[1],
		     .r0 = in->flags & ISA_FLAG_REVERSE0, .r1 = in->flags & ISA_FLAG_REVERSE1, .s0 = s0 };
	return ew_exec(c, b, &j, in, engine, index, f);
}

/* NKI's tensor_tensor_scan: per partition, a running value that starts at
 * `initial` and takes each element in turn, in fp32 (the engines' compute
 * precision), then casts on write like every elementwise result. */
dm_fault_kind dm_op_tensor_tensor_scan(dm_core *c, const dm_binding *b, int engine, int64_t index,
				       const isa_instr *in, dm_fault *f)
{
	dm_view av, bv, dv;
	float *init;
	dm_fault_kind k;
	DM_OP_VIEW(av, ISA_AP_SRC, false, "src0");
	DM_OP_VIEW(bv, ISA_AP_SRC1, false, "src1");
	DM_OP_VIEW(dv, ISA_AP_DST, true, "dst");
	uint64_t n = av.nfree, P = av.nparts;
	float *x = dm_tmp(c, 0, P * n), *y = dm_tmp(c, 1, P * n);
	if (!x || !y)
		return dm_nomem(f, engine, index);
	if ((k = scalar_col(c, b, in, ISA_AP_SRC2, in->imm[0], 2, (uint32_t)P, &init, engine, index, f)))
		return k;
	dm_view_read(&av, x);
	dm_view_read(&bv, y);
	for (uint64_t p = 0; p < P; p++) {
		float acc = init[p];
		for (uint64_t j = 0; j < n; j++) {
			acc = dm_alu_f32(in->e[1], dm_alu_f32(in->e[0], x[p * n + j], acc), y[p * n + j]);
			x[p * n + j] = acc;
		}
	}
	return finish(c, b, &dv, x, engine, index, in, f);
}

dm_fault_kind dm_op_tensor_scalar(dm_core *c, const dm_binding *b, int engine, int64_t index,
				  const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv;
	dm_fault_kind k;
	DM_OP_VIEW(sv, ISA_AP_SRC, false, "src");
	DM_OP_VIEW(dv, ISA_AP_DST, true, "dst");
	uint64_t n = sv.nfree, P = sv.nparts;
	int op0 = in->e[0], op1 = in->e[1];
	bool r0 = in->flags & ISA_FLAG_REVERSE0, r1 = in->flags & ISA_FLAG_REVERSE1;
	bool integer = all_integer(in) && in->imm[0].kind == ISA_IMM_I32 &&
		       (op1 == ISA_ALU_bypass || in->imm[1].kind == ISA_IMM_I32);

	if (integer) {
		int64_t *x = (int64_t *)dm_tmp(c, 0, 2 * P * n);
		float *s0, *s1;
		if (!x)
			return dm_nomem(f, engine, index);
		if ((k = scalar_col(c, b, in, ISA_AP_SRC1, in->imm[0], 1, (uint32_t)P, &s0, engine, index, f)) ||
		    (k = scalar_col(c, b, in, ISA_AP_SRC2, in->imm[1], 2, (uint32_t)P, &s1, engine, index, f)))
			return k;
		int64_t i0 = (int32_t)in->imm[0].bits, i1 = (int32_t)in->imm[1].bits;
		dm_view_read_i64(&sv, x);
		for (uint64_t p = 0; p < P; p++) {
			/* per-partition scalar operands are fp32 [P,1] columns */
			int64_t a0 = ((in->ap_mask >> ISA_AP_SRC1) & 1u) ? (int64_t)s0[p] : i0;
			int64_t a1 = ((in->ap_mask >> ISA_AP_SRC2) & 1u) ? (int64_t)s1[p] : i1;
			for (uint64_t j = 0; j < n; j++) {
				int64_t v = x[p * n + j];
				v = r0 ? dm_alu_i64(op0, a0, v) : dm_alu_i64(op0, v, a0);
				if (op1 != ISA_ALU_bypass)
					v = r1 ? dm_alu_i64(op1, a1, v) : dm_alu_i64(op1, v, a1);
				x[p * n + j] = v;
			}
		}
		dm_view_write_i64(&dv, x);
		dm_psum_mark(c, &dv);
		return DM_OK;
	}

	const dm_view *srcs[] = { &sv };
	float *s0, *s1;
	if ((k = scalar_col(c, b, in, ISA_AP_SRC1, in->imm[0], 1, (uint32_t)P, &s0, engine, index, f)) ||
	    (k = scalar_col(c, b, in, ISA_AP_SRC2, in->imm[1], 2, (uint32_t)P, &s1, engine, index, f)))
		return k;
	ew_job j = { .dst = &dv, .src = { &sv }, .nsrc = 1, .blk = dm_row_block(b, &dv, srcs, 1),
		     .compute = ew_tensor_scalar, .op0 = op0, .op1 = op1, .r0 = r0, .r1 = r1,
		     .s0 = s0, .s1 = s1 };
	return ew_exec(c, b, &j, in, engine, index, f);
}

/* src <op0> s0[p] in fp32, then its reduce <op1> per partition into acc --
 * of the values before the cast to dst, as activation's reduce */
static void ew_tensor_scalar_reduce(const ew_job *j, uint32_t p0, uint32_t np, float *x, const float *y,
				    const float *z)
{
	(void)y, (void)z;
	uint64_t n = j->dst->nfree;
	for (uint32_t q = 0; q < np; q++)
		dm_alu_row_f32(j->op0, x + (uint64_t)q * n, NULL, j->s0[p0 + q], j->r0, n);
	float *acc = j->acc + p0;
	dm_fold_rows_f32(j->op1, x, n, n, np, acc);
	if (j->op1 == ISA_ALU_absmax)
		for (uint32_t q = 0; q < np; q++)
			acc[q] = acc[q] < 0 ? -acc[q] : acc[q];
}

dm_fault_kind dm_op_tensor_scalar_reduce(dm_core *c, const dm_binding *b, int engine, int64_t index,
					 const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv, rv;
	float *s0;
	dm_fault_kind k;
	DM_OP_VIEW(sv, ISA_AP_SRC, false, "src");
	DM_OP_VIEW(dv, ISA_AP_DST, true, "dst");
	DM_OP_VIEW(rv, ISA_AP_AUX, true, "reduce_dst");
	if ((k = scalar_col(c, b, in, ISA_AP_SRC1, in->imm[0], 1, sv.nparts, &s0, engine, index, f)))
		return k;
	float *acc = dm_tmp(c, 3, sv.nparts);
	if (!acc)
		return dm_nomem(f, engine, index);
	const dm_view *srcs[] = { &sv };
	ew_job j = { .dst = &dv, .src = { &sv }, .nsrc = 1, .blk = dm_row_block(b, &dv, srcs, 1),
		     .compute = ew_tensor_scalar_reduce, .op0 = in->e[0], .op1 = in->e[1],
		     .r0 = in->flags & ISA_FLAG_REVERSE0, .s0 = s0, .acc = acc };
	if ((k = ew_exec(c, b, &j, in, engine, index, f)))
		return k;
	dm_view_write(&rv, acc);
	dm_psum_mark(c, &rv);
	return DM_OK;
}

dm_fault_kind dm_op_tensor_copy(dm_core *c, const dm_binding *b, int engine, int64_t index,
				const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv;
	DM_OP_VIEW(sv, ISA_AP_SRC, false, "src");
	DM_OP_VIEW(dv, ISA_AP_DST, true, "dst");
	uint64_t n = (uint64_t)sv.nparts * sv.nfree;
	if (isa_dtype_is_mx(dv.dtype)) {
		dm_mx_copy(&dv, &sv);
		return DM_OK;
	}
	if (all_integer(in)) {
		int64_t *x = (int64_t *)dm_tmp(c, 0, 2 * n);
		if (!x)
			return dm_nomem(f, engine, index);
		dm_view_read_i64(&sv, x);
		dm_view_write_i64(&dv, x);
		dm_psum_mark(c, &dv);
		return DM_OK;
	}
	const dm_view *srcs[] = { &sv };
	ew_job j = { .dst = &dv, .src = { &sv }, .nsrc = 1, .blk = dm_row_block(b, &dv, srcs, 1) };
	return ew_exec(c, b, &j, in, engine, index, f);
}

/* select: x = pred (x) ? on_true (y) : on_false (z) */
static void ew_select(const ew_job *j, uint32_t p0, uint32_t np, float *x, const float *y,
		      const float *z)
{
	(void)p0;
	for (uint64_t i = 0, n = (uint64_t)np * j->dst->nfree; i < n; i++)
		x[i] = x[i] != 0.0f ? y[i] : z[i];
}

dm_fault_kind dm_op_select(dm_core *c, const dm_binding *b, int engine, int64_t index,
			   const isa_instr *in, dm_fault *f)
{
	dm_view pv, tv, fv, dv;
	DM_OP_VIEW(pv, ISA_AP_SRC, false, "pred");
	DM_OP_VIEW(tv, ISA_AP_SRC1, false, "on_true");
	DM_OP_VIEW(fv, ISA_AP_SRC2, false, "on_false");
	DM_OP_VIEW(dv, ISA_AP_DST, true, "dst");
	uint64_t n = (uint64_t)dv.nparts * dv.nfree;
	if (all_integer(in)) {
		/* a predicated copy: integer values move exactly (any width) */
		int64_t *x = (int64_t *)dm_tmp(c, 0, 2 * n), *y = (int64_t *)dm_tmp(c, 1, 2 * n),
			*z = (int64_t *)dm_tmp(c, 2, 2 * n);
		if (!x || !y || !z)
			return dm_nomem(f, engine, index);
		dm_view_read_i64(&pv, x);
		dm_view_read_i64(&tv, y);
		dm_view_read_i64(&fv, z);
		for (uint64_t i = 0; i < n; i++)
			y[i] = x[i] ? y[i] : z[i];
		dm_view_write_i64(&dv, y);
		dm_psum_mark(c, &dv);
		return DM_OK;
	}
	const dm_view *srcs[] = { &pv, &tv, &fv };
	ew_job j = { .dst = &dv, .src = { &pv, &tv, &fv }, .nsrc = 3, .blk = dm_row_block(b, &dv, srcs, 3),
		     .compute = ew_select };
	return ew_exec(c, b, &j, in, engine, index, f);
}

dm_fault_kind dm_op_memset(dm_core *c, const dm_binding *b, int engine, int64_t index,
			   const isa_instr *in, dm_fault *f)
{
	dm_view dv;
	DM_OP_VIEW(dv, ISA_AP_DST, true, "dst");
	uint64_t n = (uint64_t)dv.nparts * dv.nfree;
	if (isa_dtype_is_mx(dv.dtype)) {          /* validated: the value is 0 */
		dm_mx_copy(&dv, NULL);
		return DM_OK;
	}
	if (isa_dtype_is_integer(dv.dtype) && in->imm[0].kind == ISA_IMM_I32) {
		int64_t *x = (int64_t *)dm_tmp(c, 0, 2 * n);
		if (!x)
			return dm_nomem(f, engine, index);
		for (uint64_t i = 0; i < n; i++)
			x[i] = (int32_t)in->imm[0].bits;
		dm_view_write_i64(&dv, x);
		dm_psum_mark(c, &dv);
		return DM_OK;
	}
	float *x = dm_tmp(c, 0, n);
	if (!x)
		return dm_nomem(f, engine, index);
	float v = dm_imm_f32(in->imm[0]);
	for (uint64_t i = 0; i < n; i++)
		x[i] = v;
	dm_view_write(&dv, x);   /* an explicit NaN/Inf fill is not a numeric fault */
	dm_psum_mark(c, &dv);
	return DM_OK;
}
