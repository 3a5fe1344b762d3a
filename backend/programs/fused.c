/*
 * fused.c -- kernel generator for a fused pointwise region: the graph
 * compiler's elementwise chains as one program.
 *
 * A region is up to NK_FUSED_MAX_STEPS pointwise steps over up to
 * NK_FUSED_MAX_IN inputs of n contiguous elements; every step reads inputs
 * or earlier steps' values, and the last step is the output.  Per tile the
 * inputs are loaded once and the output stored once: the intermediates stay
 * in SBUF (fp32), so the region moves its inputs and its output through HBM
 * exactly once, whatever its length.
 *
 * Engines: tensor_tensor and tensor_scalar steps on VectorE, activation
 * steps on ScalarE.  Each compute engine counts the steps it finished on a
 * semaphore of its own (taken from the tile pipeline, pipeline.h, which
 * owns the loads, stores, buffer sets and their waits); a step whose operand
 * was made on the other engine waits for that step's count.  Before a
 * tile's first step an engine waits until the other finished the previous
 * tile, so a buffer set is never rewritten under a reader two tiles behind.
 */
#include "programs.h"
#include "pipeline.h"

#include <stdlib.h>

#define FUSED_F 512u   /* elements per partition row: 33 fp32 slots of 2 KiB per set fit SBUF */


/* one step, gathered from nk_fused's per-field arrays: op is the ALU
 * operator (tensor_tensor, tensor_scalar) or the activation function; imm,
 * imm2 the immediates or the activation's scale and bias */
typedef struct nk_fused_step {
	int kind, op, op2;
	float imm, imm2;
	int a, b;
	bool reverse;
} nk_fused_step;

static nk_fused_step step_of(const nk_fused *f, unsigned k)
{
	nk_fused_step s = { f->kind[k], f->op[k], f->op2[k], f->imm[k], f->imm2[k], f->a[k], f->b[k], f->reverse[k] };
	return s;
}

/* Rows of up to FUSED_F elements, 128 rows a tile, then the tail
 * (nk_flat_tile): the row length for n elements. */
static uint64_t fused_row(uint64_t n)
{
	uint64_t f = (n + ISA_NUM_PARTITIONS - 1) / ISA_NUM_PARTITIONS;
	return f > FUSED_F ? FUSED_F : f ? f : 1;
}

static int step_engine(const nk_fused_step *s)
{
	return s->kind == NK_FUSED_ACT ? ISA_ENGINE_SCALAR : ISA_ENGINE_VECTOR;
}

static bool valid(const nk_fused *f)
{
	if (f->nin < 1 || f->nin > NK_FUSED_MAX_IN || f->nsteps < 1 || f->nsteps > NK_FUSED_MAX_STEPS ||
	    !isa_dtype_is_float(f->dtype) || f->n == 0)
		return false;
	for (unsigned k = 0; k < f->nsteps; k++) {
		nk_fused_step st = step_of(f, k);
		const nk_fused_step *s = &st;
		unsigned limit = f->nin + k;   /* operands: inputs and earlier steps */
		if (s->a < 0 || (unsigned)s->a >= limit)
			return false;
		if (s->kind == NK_FUSED_TT && (s->b < 0 || (unsigned)s->b >= limit))
			return false;
		if (s->kind < NK_FUSED_TT || s->kind > NK_FUSED_ACT)
			return false;
	}
	return true;
}

typedef struct emitter {
	isa_program *p;
	const nk_fused *f;
	uint64_t slot;                      /* bytes per value slot */
	uint32_t per_tile[2];               /* steps per tile on VectorE, ScalarE */
	uint32_t ordinal[NK_FUSED_MAX_STEPS];   /* a step's index among its engine's steps in a tile */
	uint32_t sem_steps[2];              /* steps finished on VectorE, ScalarE */
} emitter;

static int eidx(int engine)
{
	return engine == ISA_ENGINE_SCALAR;
}

/* value v (input or step) of a tile in buffer set `base` */
static isa_ap value_ap(const emitter *E, unsigned v, uint64_t base, const nk_tile *x, bool last)
{
	const nk_fused *f = E->f;
	if (v < f->nin)
		return isa_ap_sbuf(f->dtype, 0, x->rows, base + v * E->slot, x->cols);
	if (last)
		return isa_ap_sbuf(f->dtype, 0, x->rows, base + (f->nin + f->nsteps) * E->slot, x->cols);
	return isa_ap_sbuf(ISA_DT_fp32, 0, x->rows, base + v * E->slot, x->cols);
}

static isa_status emit_tile(emitter *E, uint32_t t, const nk_tile *x, uint64_t base)
{
	const nk_fused *f = E->f;
	isa_status st = ISA_OK;
	bool waited[2] = { false, false };
	for (unsigned k = 0; k < f->nsteps && !st; k++) {
		nk_fused_step sk = step_of(f, k);
		const nk_fused_step *s = &sk;
		int eng = step_engine(s);
		int me = eidx(eng), other = 1 - me;
		/* first step of this engine in tile t: the other engine is past tile t-1 */
		if (!waited[me] && t > 0 && E->per_tile[other]) {
			st = isa_builder_sem_wait(E->p, eng, E->sem_steps[other], ISA_ALU_is_ge,
						  E->per_tile[other] * t);
			waited[me] = true;
			if (st)
				break;
		}
		if (!waited[me])
			waited[me] = true;
		/* operands made on the other engine in this tile */
		int ops[2] = { s->a, s->kind == NK_FUSED_TT ? s->b : -1 };
		uint32_t need = 0;
		for (int o = 0; o < 2; o++) {
			if (ops[o] < (int)f->nin)
				continue;
			unsigned j = (unsigned)ops[o] - f->nin;
			nk_fused_step sj = step_of(f, j);
			if (eidx(step_engine(&sj)) == other && E->ordinal[j] + 1 > need)
				need = E->ordinal[j] + 1;
		}
		if (need)
			st = isa_builder_sem_wait(E->p, eng, E->sem_steps[other], ISA_ALU_is_ge,
						  E->per_tile[other] * t + need);
		bool last = k + 1 == f->nsteps;
		isa_ap dst = value_ap(E, f->nin + k, base, x, last);
		isa_ap a = value_ap(E, (unsigned)s->a, base, x, false);
		if (!st) {
			switch (s->kind) {
			case NK_FUSED_TT:
				st = isa_builder_tensor_tensor(E->p, eng, dst, a, value_ap(E, (unsigned)s->b, base, x, false),
							       s->op);
				break;
			case NK_FUSED_TS: {
				st = isa_builder_tensor_scalar(E->p, eng, dst, a, s->op, isa_imm_f32(s->imm), s->op2,
							       isa_imm_f32(s->imm2));
				if (!st && s->reverse) {
					/* imm <alu> x: the flag on the instruction just emitted */
					E->p->stream[eng][E->p->n_instr[eng] - 1].flags |= ISA_FLAG_REVERSE0;
				}
				break;
			}
			default:
				st = isa_builder_activation(E->p, dst, a, s->op, s->imm, s->imm2);
				break;
			}
		}
		if (!st)
			st = isa_builder_sem_signal(E->p, eng, E->sem_steps[me], ISA_SEMOP_ADD, 1);
	}
	return st;
}

static isa_status fused_emit(int target, const nk_fused *f, uint8_t **bin, size_t *len, isa_diag *diag)
{
	/* value slots as long as a tile's rows (a linked graph groups parts by
	 * the SBUF they use: a 128-element region need not hold 2 KiB a value) */
	uint64_t slot = (fused_row(f->n) * 4 + 63) / 64 * 64;
	emitter E = { .f = f, .slot = slot };
	nk_pipe pp;
	if (!nk_pipe_init(&pp, target, 2, (f->nin + f->nsteps + 1) * E.slot, diag))
		return pp.em.st;
	E.p = pp.em.p;
	E.sem_steps[0] = nk_pipe_sem(&pp);
	E.sem_steps[1] = nk_pipe_sem(&pp);
	for (unsigned k = 0; k < f->nsteps; k++) {
		nk_fused_step sk = step_of(f, k);
		int e = eidx(step_engine(&sk));
		E.ordinal[k] = E.per_tile[e]++;
	}
	int tin[NK_FUSED_MAX_IN];
	for (unsigned i = 0; i < f->nin; i++) {
		char name[8] = { 'i', 'n', (char)('0' + i), 0 };
		tin[i] = nk_pipe_tensor(&pp, name, f->dtype, ISA_TK_INPUT, f->n);
	}
	int to = nk_pipe_tensor(&pp, "out", f->dtype, ISA_TK_OUTPUT, f->n);
	const uint64_t esz = isa_dtype_size(f->dtype);
	nk_fused_step last = step_of(f, f->nsteps - 1);
	uint64_t row = fused_row(f->n);
	nk_tile tile;
	for (uint64_t s = 0, t = 0; s < f->n && !pp.em.st; s += (uint64_t)tile.rows * tile.cols, t++) {
		tile = nk_flat_tile(f->n, s, row);
		const nk_tile *x = &tile;
		uint64_t base = nk_pipe_tile(&pp);
		for (unsigned i = 0; i < f->nin; i++)
			nk_pipe_load(&pp, value_ap(&E, i, base, x, false),
				     isa_ap_hbm(f->dtype, (uint32_t)tin[i], x->start * esz, x->rows, x->cols, x->cols),
				     i % ISA_NUM_DMA_QUEUES);
		for (int e = 0; e < 2; e++)
			if (E.per_tile[e])
				nk_pipe_compute(&pp, e ? ISA_ENGINE_SCALAR : ISA_ENGINE_VECTOR);
		if (!pp.em.st)
			nk_pipe_check(&pp, emit_tile(&E, (uint32_t)t, x, base));
		nk_pipe_computed(&pp, step_engine(&last));
		nk_pipe_store(&pp, isa_ap_hbm(f->dtype, (uint32_t)to, x->start * esz, x->rows, x->cols, x->cols),
			      value_ap(&E, f->nin + f->nsteps - 1, base, x, true), 2);
	}
	return nk_pipe_finish(&pp, bin, len);
}

isa_status nk_fused_program(int target, const nk_fused *f, uint8_t **bin, size_t *len, isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	uint64_t max_tiles = f->n / ((uint64_t)FUSED_F * ISA_NUM_PARTITIONS) + 3;
	if (!valid(f) || max_tiles > (1u << 20)) {
		nk_fail(diag, ISA_E_LIMIT, "fused pointwise kernel: %u inputs, %u steps, %llu elements", f->nin,
			f->nsteps, (unsigned long long)f->n);
		return ISA_E_LIMIT;
	}
	return fused_emit(target, f, bin, len, diag);
}
