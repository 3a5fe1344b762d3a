/*
 * exec.c -- core state and the instruction dispatch, expanded from isa.def:
 * every instruction's semantics is dm_op_<name>.
 */
#include "ops.h"

#include <stdlib.h>
#include <string.h>

const dm_op_fn dm_ops[ISA_NUM_OPS] = {
#define ISA_OP(name, code, engines, format, cost, synopsis) [ISA_OP_##name] = dm_op_##name,
#include "neuronsim/isa.def"
#undef ISA_OP
};

int dm_core_init(dm_core *c, const dm_chip *chip)
{
	memset(c, 0, sizeof(*c));
	c->chip = chip;
	c->ti = isa_target_get(chip->target);
	c->sbuf = calloc(ISA_NUM_PARTITIONS, c->ti->sbuf_partition_bytes);
	c->psum = calloc(ISA_NUM_PARTITIONS, c->ti->psum_partition_bytes);
	if (!c->sbuf || !c->psum) {
		dm_core_free(c);
		return -1;
	}
	dm_rng_default_state(c);
	return 0;
}

void dm_core_free(dm_core *c)
{
	free(c->sbuf);
	free(c->psum);
	free(c->stationary);
	free(c->stat_pairs);
	for (int i = 0; i < 4; i++)
		free(c->tmp[i]);
	memset(c, 0, sizeof(*c));
}

/* A program starts with no PSUM accumulation groups and no stationary; SBUF
 * and PSUM keep their bytes (as on hardware, nothing clears them).  The
 * PRNGs restart from their power-on seeds: a program's random numbers must
 * not depend on what ran before it (determinism: same program and inputs,
 * same bits), so a stream that spans programs is carried explicitly with
 * rand_get_state / rand_set_state. */
void dm_core_reset(dm_core *c)
{
	/* (re-seeding costs ~8 us: only after a program that used the PRNGs) */
	if (c->rng_used)
		dm_rng_default_state(c);
	memset(c->psum_written, 0, sizeof(c->psum_written));
	memset(c->reg, 0, sizeof(c->reg));
	c->stat_k = c->stat_m = 0;
	c->stat_paired = false;
}

dm_fault_kind dm_exec(dm_core *c, const dm_binding *b, int engine, int64_t index,
		      const isa_instr *in, dm_fault *fault)
{
	return dm_ops[in->opcode](c, b, engine, index, in, fault);
}
