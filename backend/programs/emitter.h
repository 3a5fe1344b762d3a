/*
 * emitter.h -- a sticky-error instruction emitter shared by the kernel
 * generators (through the tile pipeline, pipeline.h): every call
 * after the first failure does nothing, so a generator checks once at the
 * end, and each semaphore's signals are counted so waits can name "the
 * k-th signal" without bookkeeping at every call site.
 */
#ifndef NSIM_BACKEND_EMITTER_H
#define NSIM_BACKEND_EMITTER_H

#include <stdbool.h>

#include "neuronsim/isa.h"

#define NK_EM_SEMS 16

typedef struct nk_em {
	isa_program *p;
	isa_diag *diag;
	isa_status st;                 /* first error; later calls do nothing */
	uint32_t cnt[NK_EM_SEMS];      /* signals emitted per semaphore */
} nk_em;

void nk_em_emit(nk_em *e, int engine, isa_instr *in);
/* sem += 1 after the engine's earlier instructions; counted */
void nk_em_signal(nk_em *e, int engine, unsigned sem);
/* the engine waits until sem >= v (nothing for v == 0) */
void nk_em_wait(nk_em *e, int engine, unsigned sem, uint32_t v);
/* dst = (src op0 s0) op1 s1 on `engine`; a scalar is the immediate or, when
 * its AP is given, a per-partition [P, 1] value */
void nk_em_ts(nk_em *e, int engine, isa_ap dst, isa_ap src, int op0, float s0, const isa_ap *a0, int op1,
	      float s1, const isa_ap *a1);
/* dst[P, 1] = reduce<alu>(src) along the free dim (negated with `negate`) */
void nk_em_reduce(nk_em *e, int engine, isa_ap dst, isa_ap src, int alu, bool negate);
/* ScalarE: dst = func(src * scale + bias[p]) (bias optional), row sums into acc */
void nk_em_act(nk_em *e, isa_ap dst, isa_ap src, int func, float scale, const isa_ap *bias, const isa_ap *acc);
void nk_em_tt(nk_em *e, int engine, isa_ap dst, isa_ap a, isa_ap b, int alu);
/* dst = pred ? on_true : on_false, elementwise: the instruction, and emitted */
isa_instr nk_select_instr(isa_ap dst, isa_ap pred, isa_ap on_true, isa_ap on_false);
void nk_em_select(nk_em *e, int engine, isa_ap dst, isa_ap pred, isa_ap on_true, isa_ap on_false);
void nk_em_copy(nk_em *e, int engine, isa_ap dst, isa_ap src);
/* a DMA descriptor block dst <- src; its index (0 after an error) */
uint32_t nk_em_dma(nk_em *e, isa_ap dst, isa_ap src);
/* `engine` starts descriptor block d on `queue`; sem counts its completion */
void nk_em_dma_start(nk_em *e, int engine, uint32_t d, unsigned queue, unsigned sem);

#endif
