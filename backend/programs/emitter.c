/*
 * emitter.c -- the sticky-error instruction emitter (emitter.h).
 */
#include "emitter.h"
#include "programs.h"

void nk_em_emit(nk_em *e, int engine, isa_instr *in)
{
	if (!e->st)
		e->st = isa_builder_emit(e->p, engine, in, e->diag);
}

void nk_em_signal(nk_em *e, int engine, unsigned sem)
{
	if (!e->st)
		e->st = isa_builder_sem_signal(e->p, engine, sem, ISA_SEMOP_ADD, 1);
	e->cnt[sem]++;
}

void nk_em_wait(nk_em *e, int engine, unsigned sem, uint32_t v)
{
	if (!e->st && v)
		e->st = isa_builder_sem_wait(e->p, engine, sem, ISA_ALU_is_ge, v);
}

void nk_em_ts(nk_em *e, int engine, isa_ap dst, isa_ap src, int op0, float s0, const isa_ap *a0, int op1,
	      float s1, const isa_ap *a1)
{
	isa_instr in = isa_instr_init(ISA_OP_tensor_scalar);
	in.ap[ISA_AP_DST] = dst;
	in.ap[ISA_AP_SRC] = src;
	in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC;
	in.e[0] = (uint8_t)op0;
	in.e[1] = (uint8_t)op1;
	in.imm[0] = isa_imm_f32(s0);
	in.imm[1] = isa_imm_f32(s1);
	if (a0) {
		in.ap[ISA_AP_SRC1] = *a0;
		in.ap_mask |= 1u << ISA_AP_SRC1;
	}
	if (a1) {
		in.ap[ISA_AP_SRC2] = *a1;
		in.ap_mask |= 1u << ISA_AP_SRC2;
	}
	nk_em_emit(e, engine, &in);
}

void nk_em_reduce(nk_em *e, int engine, isa_ap dst, isa_ap src, int alu, bool negate)
{
	isa_instr in = isa_instr_init(ISA_OP_tensor_reduce);
	in.ap[ISA_AP_DST] = dst;
	in.ap[ISA_AP_SRC] = src;
	in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC;
	in.e[0] = (uint8_t)alu;
	in.u[0] = 1;
	if (negate)
		in.flags |= ISA_FLAG_NEGATE;
	nk_em_emit(e, engine, &in);
}

void nk_em_act(nk_em *e, isa_ap dst, isa_ap src, int func, float scale, const isa_ap *bias, const isa_ap *acc)
{
	isa_instr in = isa_instr_init(ISA_OP_activation);
	in.ap[ISA_AP_DST] = dst;
	in.ap[ISA_AP_SRC] = src;
	in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC;
	in.e[0] = (uint8_t)func;
	in.imm[0] = isa_imm_f32(scale);
	in.imm[1] = isa_imm_f32(0.0f);
	if (bias) {
		in.ap[ISA_AP_SRC2] = *bias;
		in.ap_mask |= 1u << ISA_AP_SRC2;
	}
	if (acc) {
		in.e[1] = ISA_ALU_add;
		in.ap[ISA_AP_AUX] = *acc;
		in.ap_mask |= 1u << ISA_AP_AUX;
	}
	nk_em_emit(e, ISA_ENGINE_SCALAR, &in);
}

void nk_em_tt(nk_em *e, int engine, isa_ap dst, isa_ap a, isa_ap b, int alu)
{
	if (!e->st)
		e->st = isa_builder_tensor_tensor(e->p, engine, dst, a, b, alu);
}

isa_instr nk_select_instr(isa_ap dst, isa_ap pred, isa_ap on_true, isa_ap on_false)
{
	isa_instr in = isa_instr_init(ISA_OP_select);
	in.ap[ISA_AP_DST] = dst;
	in.ap[ISA_AP_SRC] = pred;
	in.ap[ISA_AP_SRC1] = on_true;
	in.ap[ISA_AP_SRC2] = on_false;
	in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC | 1u << ISA_AP_SRC1 | 1u << ISA_AP_SRC2;
	return in;
}

void nk_em_select(nk_em *e, int engine, isa_ap dst, isa_ap pred, isa_ap on_true, isa_ap on_false)
{
	isa_instr in = nk_select_instr(dst, pred, on_true, on_false);
	nk_em_emit(e, engine, &in);
}

void nk_em_copy(nk_em *e, int engine, isa_ap dst, isa_ap src)
{
	if (!e->st)
		e->st = isa_builder_tensor_copy(e->p, engine, dst, src);
}

uint32_t nk_em_dma(nk_em *e, isa_ap dst, isa_ap src)
{
	if (e->st)
		return 0;
	int d = isa_builder_dma(e->p, "", ISA_DMA_DIRECT, &dst, &src, NULL, e->diag);
	if (d < 0) {
		e->st = e->diag->code;
		return 0;
	}
	return (uint32_t)d;
}

void nk_em_dma_start(nk_em *e, int engine, uint32_t d, unsigned queue, unsigned sem)
{
	if (!e->st)
		e->st = isa_builder_dma_copy(e->p, engine, d, queue, sem, 1);
	e->cnt[sem]++;
}
