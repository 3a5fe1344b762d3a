/*
 * ops_control.c -- instructions with no effect on data.  sem_wait,
 * sem_signal, barrier, fence, nop and end are sequencing, carried out by the
 * simulator's engine model, as is where a branch goes (dm_branch_taken); dma_copy's data moves when the simulator runs
 * its descriptor (dm_exec_dma) on the DMA engines.  The register
 * instructions move a 32-bit integer between SBUF and a sequencer register,
 * or compute one from registers.
 */
#include "ops.h"

#include <string.h>

#define NO_DATA_EFFECT(name)                                                               \
	dm_fault_kind dm_op_##name(dm_core *c, const dm_binding *b, int engine, int64_t index, \
				   const isa_instr *in, dm_fault *f)                           \
	{                                                                                   \
		(void)c, (void)b, (void)engine, (void)index, (void)in, (void)f;             \
		return DM_OK;                                                               \
	}

NO_DATA_EFFECT(sem_wait)
NO_DATA_EFFECT(sem_signal)
NO_DATA_EFFECT(barrier)
NO_DATA_EFFECT(fence)
NO_DATA_EFFECT(branch)
NO_DATA_EFFECT(nop)
NO_DATA_EFFECT(end)
NO_DATA_EFFECT(dma_copy)

/* the one int32 an operand names, for a register to read or write */
static dm_fault_kind reg_word(dm_core *c, const dm_binding *b, int engine, int64_t index,
			      const isa_instr *in, int slot, dm_fault *f, uint8_t **word)
{
	dm_view v;
	dm_fault_kind k = dm_view_of(c, b, &in->ap[slot], slot == ISA_AP_DST, &v, engine, index,
				     slot == ISA_AP_DST ? "dst" : "src", f);
	if (!k)
		*word = dm_view_elem(&v, 0, 0);
	return k;
}

dm_fault_kind dm_op_reg_load(dm_core *c, const dm_binding *b, int engine, int64_t index,
			     const isa_instr *in, dm_fault *f)
{
	uint8_t *w;
	dm_fault_kind k = reg_word(c, b, engine, index, in, ISA_AP_SRC, f, &w);
	if (!k)
		memcpy(&c->reg[engine][in->u[0]], w, 4);
	return k;
}

dm_fault_kind dm_op_reg_store(dm_core *c, const dm_binding *b, int engine, int64_t index,
			      const isa_instr *in, dm_fault *f)
{
	uint8_t *w;
	dm_fault_kind k = reg_word(c, b, engine, index, in, ISA_AP_DST, f, &w);
	if (!k)
		memcpy(w, &c->reg[engine][in->u[0]], 4);
	return k;
}

/* 32-bit two's complement: the result wraps as the sequencer's ALU does */
dm_fault_kind dm_op_reg_alu(dm_core *c, const dm_binding *b, int engine, int64_t index,
			    const isa_instr *in, dm_fault *f)
{
	(void)b, (void)index, (void)f;
	int64_t a = c->reg[engine][in->u[1]];
	int64_t y = in->u[2] < 64 ? c->reg[engine][in->u[2]] : (int32_t)in->imm[0].bits;
	c->reg[engine][in->u[0]] = (int32_t)(uint32_t)(uint64_t)dm_alu_i64(in->e[0], a, y);
	return DM_OK;
}

/* a branch's condition: register a <cond> (register b, or the immediate);
 * always true without a= */
bool dm_branch_taken(const dm_core *c, int engine, const isa_instr *in)
{
	if (in->u[1] == 64)
		return true;
	int64_t a = c->reg[engine][in->u[1]];
	int64_t y = in->u[2] < 64 ? c->reg[engine][in->u[2]] : (int32_t)in->imm[0].bits;
	return dm_alu_i64(in->e[0], a, y) != 0;
}

