/*
 * validate.h -- the validator's shared context and helpers, used by
 * validate.c (program, tables, streams, generic operand rules) and
 * validate_ops.c (one rule per instruction).
 */
#ifndef NSIM_ISA_VALIDATE_H
#define NSIM_ISA_VALIDATE_H

#include "isa_internal.h"

/* memory spaces as a mask, for "where may this operand live" */
#define SP_HBM  (1u << ISA_SPACE_HBM)
#define SP_SBUF (1u << ISA_SPACE_SBUF)
#define SP_PSUM (1u << ISA_SPACE_PSUM)

typedef struct vctx {
	const isa_program     *p;
	const isa_target_info *ti;
	isa_diag              *diag;
	int                    engine;   /* current stream, -1 in tables */
	int64_t                index;    /* current instruction or table entry */
	const isa_instr       *in;
	/* TensorE state carried along its stream: the loaded stationary */
	bool                   have_stationary;
	isa_ap                 stationary;
	uint8_t                stationary_perf;
} vctx;

/* one rule per opcode; registered in isa_op_rules (validate_ops.c) */
typedef isa_status (*isa_op_rule)(vctx *v, const isa_instr *in);
extern const isa_op_rule isa_op_rules[ISA_NUM_OPS];

isa_status v_fail(vctx *v, isa_status code, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* access pattern in one of `spaces`: bounds, partitions, dims, dtype */
isa_status v_check_ap(vctx *v, const isa_ap *ap, const char *field, unsigned spaces);

/* element-count agreement between two operands of one instruction */
isa_status v_same_count(vctx *v, const isa_ap *a, const char *fa, const isa_ap *b,
			const char *fb);
/* a per-partition scalar operand: [P, 1] fp32 with P matching `ref` */
isa_status v_per_partition(vctx *v, const isa_ap *ap, const char *field, const isa_ap *ref,
			   const char *ref_field);
/* ALU operator legal for `use`, and integer-only operators on integer data */
isa_status v_alu(vctx *v, unsigned alu, unsigned use, const char *field, bool integer_data);

/* shared shape rules: reduce_dst one value per dst partition (when given);
 * the opcode is a feature of later cores; a has ref's rows */
isa_status v_row_result(vctx *v, const isa_instr *in);
isa_status v_feature(vctx *v, int feature);
isa_status v_same_rows(vctx *v, const isa_ap *a, const char *field, const isa_ap *ref, const char *rname);

/* rules in validate_move.c (selection, gathers, partition moves) */
isa_status rule_nc_stream_shuffle(vctx *v, const isa_instr *in);
isa_status rule_copy_predicated(vctx *v, const isa_instr *in);
isa_status rule_range_select(vctx *v, const isa_instr *in);
isa_status rule_nc_n_gather(vctx *v, const isa_instr *in);
isa_status rule_local_gather(vctx *v, const isa_instr *in);
isa_status rule_topk(vctx *v, const isa_instr *in);

/* MX rules in validate_mx.c */
isa_status v_mx_scale(vctx *v, const isa_ap *d, const char *dfield, const isa_ap *s, const char *sfield);
isa_status v_mx_operand(vctx *v, const isa_instr *in, const isa_ap *d, const char *dfield,
			const char *sfield);
isa_status v_mx_elsewhere(vctx *v, const isa_instr *in);
isa_status rule_quantize_mx(vctx *v, const isa_instr *in);

static inline bool v_has(const isa_instr *in, int slot)
{
	return (in->ap_mask >> slot) & 1u;
}

#endif /* NSIM_ISA_VALIDATE_H */
