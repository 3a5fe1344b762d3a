/*
 * ops.h -- one semantic function per instruction, declared from isa.def:
 * dm_op_<name>.  The dispatch table in exec.c is expanded from the same
 * table, so an instruction without semantics fails to link.
 */
#ifndef NSIM_DM_OPS_H
#define NSIM_DM_OPS_H

#include "operand.h"

typedef dm_fault_kind (*dm_op_fn)(dm_core *c, const dm_binding *b, int engine, int64_t index,
				  const isa_instr *in, dm_fault *f);

#define ISA_OP(name, code, engines, format, cost, synopsis)                                \
	dm_fault_kind dm_op_##name(dm_core *c, const dm_binding *b, int engine, int64_t index, \
				   const isa_instr *in, dm_fault *f);
#include "neuronsim/isa.def"
#undef ISA_OP

extern const dm_op_fn dm_ops[ISA_NUM_OPS];

/* Inside a dm_op_<name>: resolve operand `slot` into view v, or return the
 * fault (uses the op's c, b, in, engine, index, f). */
#define DM_OP_VIEW(v, slot, wr, name)                                                      \
	do {                                                                              \
		dm_fault_kind k_ = dm_view_of(c, b, &in->ap[slot], wr, &(v), engine, index, \
					      name, f);                                     \
		if (k_)                                                                   \
			return k_;                                                        \
	} while (0)

/* a staging buffer could not be had */
static inline dm_fault_kind dm_nomem(dm_fault *f, int engine, int64_t index)
{
	return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "staging buffers");
}

/* shared by the TensorE and VectorE transposes */
dm_fault_kind dm_transpose(dm_core *c, const dm_binding *b, int engine, int64_t index,
			   const isa_instr *in, dm_fault *f);

/* MX data (ops_mx.c): an MX operand d with its scale s as fp32 rows of the
 * contraction, out[(p * 4 + q) * nfree + k]; copies and zeroing as bytes
 * (src NULL: zero) */
void dm_mx_dequantize(const dm_view *d, const dm_view *s, float *out);
void dm_mx_copy(const dm_view *dst, const dm_view *src);

/* whether branch `in` on `engine` is taken (its registers: ops_control.c) */
bool dm_branch_taken(const dm_core *c, int engine, const isa_instr *in);

/* scalar ALU operators (alu.c): fp32 and exact-integer forms */
float   dm_alu_f32(int op, float a, float b);
int64_t dm_alu_i64(int op, int64_t a, int64_t b);
float   dm_act_f32(int func, float x);
/* x[i] = x[i] op (y ? y[i] : scalar), or reversed operands */
void    dm_alu_row_f32(int op, float *x, const float *y, float scalar, bool reverse, uint64_t n);
/* x[i] = act(scale * x[i] + bias) over a row, the function switch hoisted */
void    dm_act_row_f32(int func, float *x, float scale, float bias, uint64_t n);
/* the left-to-right fold of a row by an ALU operator (n >= 1) */
float   dm_fold_row_f32(int op, const float *x, uint64_t n);
/* out[r] = dm_fold_row_f32(op, x + r * stride, n) for rows r < nrows */
void    dm_fold_rows_f32(int op, const float *x, uint64_t stride, uint64_t n, uint64_t nrows,
			 float *out);

#endif
