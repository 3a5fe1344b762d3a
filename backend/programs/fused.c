/*
 * fused.c -- kernel generator for a fused pointwise region: the graph
 * compiler's elementwise chains as one program.
 *
 * A region is up to NK_FUSED_MAX_STEPS pointwise steps over up to
 * NK_FUSED_MAX_IN inputs; every step reads inputs or earlier steps' values,
 * and the last step is the output.  Per tile the inputs are loaded once and
 * the output stored once: the intermediates stay in SBUF (fp32, or a cast's
 * dtype), so the region moves its inputs and its output through HBM exactly
 * once, whatever its length.
 *
 * Tiles: the output seen as [rows, cols] (cols 1 when no input broadcasts),
 * k whole rows to a partition (up to FUSED_F elements), or, for rows longer
 * than FUSED_F, one row chunk to a partition.  A FULL input is loaded as the
 * output is; a ROW input as [partitions, k], read along each row with stride
 * 0; a PERIOD input row by row from its own rows (row mod its row count),
 * once for the whole program when every tile that starts on its first row
 * can read the same SBUF copy -- the loop-invariant load a compiler hoists.
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

/* a tile: partitions x k output rows of w columns from (row0, c0) */
typedef struct ftile {
	uint64_t row0, c0;
	uint32_t parts, k, w;
} ftile;

/* the row length tiles are cut by: the output's rows, or elements (1) */
static uint64_t row_len(const nk_fused *f)
{
	return f->cols ? f->cols : 1;
}

/* rows to a partition: enough to fill a partition's FUSED_F elements, no
 * more than spreads the rows over all partitions, and, for a PERIOD input
 * of more than one row, a divisor of its rows (a partition's rows never
 * wrap round it) */
static uint32_t rows_per_part(const nk_fused *f)
{
	uint64_t c = row_len(f), rows = f->n / c;
	if (c > FUSED_F)
		return 1;
	uint64_t k = FUSED_F / c, spread = (rows + ISA_NUM_PARTITIONS - 1) / ISA_NUM_PARTITIONS;
	k = k < spread ? k : spread;
	k = k ? k : 1;
	for (unsigned i = 0; i < f->nin; i++) {
		uint64_t prow = f->in_mode[i] == NK_FUSED_PERIOD ? f->in_period[i] / c : 1;
		while (prow > 1 && prow % k)
			k--;
	}
	return (uint32_t)k;
}

/* the tile after `t` (t->parts 0: the first); false past the end */
static bool next_tile(const nk_fused *f, uint32_t k, ftile *t)
{
	uint64_t c = row_len(f), rows = f->n / c;
	uint64_t row = t->row0, c0 = t->c0;
	if (t->parts) {
		c0 += t->w;
		if (c0 >= c || c <= FUSED_F) {
			c0 = 0;
			row += (uint64_t)t->parts * t->k;
		}
	}
	if (row >= rows)
		return false;
	if (c <= FUSED_F) {
		/* the flat tiler over whole rows: 128 partitions of k rows, then
		 * fewer partitions, then one partition of the last rows */
		nk_tile x = nk_flat_tile(rows, row, k);
		*t = (ftile){ .row0 = row, .c0 = 0, .parts = x.rows, .k = x.cols, .w = (uint32_t)c };
		return true;
	}
	uint64_t left = rows - row, w = c - c0;
	*t = (ftile){ .row0 = row, .c0 = c0, .parts = (uint32_t)(left < ISA_NUM_PARTITIONS ? left : ISA_NUM_PARTITIONS),
		      .k = 1, .w = (uint32_t)(w < FUSED_F ? w : FUSED_F) };
	return true;
}

static int step_engine(const nk_fused_step *s)
{
	return s->kind == NK_FUSED_ACT ? ISA_ENGINE_SCALAR : ISA_ENGINE_VECTOR;
}

static bool valid(const nk_fused *f)
{
	if (f->nin < 1 || f->nin > NK_FUSED_MAX_IN || f->nsteps < 1 || f->nsteps > NK_FUSED_MAX_STEPS ||
	    !isa_dtype_is_float(f->dtype) || f->n == 0 || f->n % row_len(f))
		return false;
	for (unsigned i = 0; i < f->nin; i++) {
		if (!isa_dtype_is_float(f->in_dtype[i]))
			return false;
		switch (f->in_mode[i]) {
		case NK_FUSED_FULL:
			break;
		case NK_FUSED_ROW:
			if (!f->cols)
				return false;
			break;
		case NK_FUSED_PERIOD:
			if (!f->cols || !f->in_period[i] || f->in_period[i] % f->cols || f->n % f->in_period[i])
				return false;
			break;
		default:
			return false;
		}
	}
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
		/* a broadcast input is only ever the other side of a tensor_tensor */
		if (s->kind != NK_FUSED_TT && (unsigned)s->a < f->nin && f->in_mode[s->a] != NK_FUSED_FULL)
			return false;
		if (f->sdt[k] && !isa_dtype_is_float(f->sdt[k]))
			return false;
	}
	return true;
}

typedef struct emitter {
	isa_program *p;
	const nk_fused *f;
	uint64_t slot;                      /* bytes per value slot */
	uint64_t hoist_base;                /* SBUF of the hoisted PERIOD inputs, a slot each */
	bool hoisted[NK_FUSED_MAX_IN];
	uint32_t per_tile[2];               /* steps per tile on VectorE, ScalarE */
	uint32_t ordinal[NK_FUSED_MAX_STEPS];   /* a step's index among its engine's steps in a tile */
	uint32_t sem_steps[2];              /* steps finished on VectorE, ScalarE */
} emitter;

static int eidx(int engine)
{
	return engine == ISA_ENGINE_SCALAR;
}

/* tile x reads input i from the hoisted copy: its first row is the
 * input's first, and it covers the input's whole rows */
static bool reads_hoisted(const emitter *E, unsigned i, const ftile *x)
{
	return E->hoisted[i] && x->c0 == 0 && x->row0 % (E->f->in_period[i] / row_len(E->f)) == 0;
}

/* value v (input or step) of a tile in buffer set `base` */
static isa_ap value_ap(const emitter *E, unsigned v, uint64_t base, const ftile *x, bool last)
{
	const nk_fused *f = E->f;
	uint32_t free = x->k * x->w;
	if (v < f->nin) {
		int dt = f->in_dtype[v];
		if (f->in_mode[v] == NK_FUSED_ROW) {
			/* [partitions, k], each element along its row's w columns */
			int32_t st[2] = { 1, 0 };
			uint32_t sz[2] = { x->k, x->w };
			return isa_ap_dims(isa_ap_sbuf(dt, 0, x->parts, base + v * E->slot, 1), 2, st, sz);
		}
		uint64_t at = reads_hoisted(E, v, x) ? E->hoist_base + v * E->slot : base + v * E->slot;
		return isa_ap_sbuf(dt, 0, x->parts, at, free);
	}
	if (last)
		return isa_ap_sbuf(f->dtype, 0, x->parts, base + (f->nin + f->nsteps) * E->slot, free);
	int sdt = f->sdt[v - f->nin];
	return isa_ap_sbuf(sdt ? sdt : ISA_DT_fp32, 0, x->parts, base + v * E->slot, free);
}

/* input i's rows for partitions 0..x->parts of tile x, into SBUF at `at` */
static void load_input(nk_pipe *pp, const nk_fused *f, unsigned i, uint32_t tensor, const ftile *x, uint64_t at)
{
	const uint64_t c = row_len(f);
	const int dt = f->in_dtype[i];
	const uint64_t esz = isa_dtype_size(dt);
	const unsigned q = i % ISA_NUM_DMA_QUEUES;
	const uint32_t free = x->k * x->w;
	switch (f->in_mode[i]) {
	case NK_FUSED_ROW:
		nk_pipe_load(pp, isa_ap_sbuf(dt, 0, x->parts, at, x->k),
			     isa_ap_hbm(dt, tensor, x->row0 * esz, x->parts, x->k, x->k), q);
		return;
	case NK_FUSED_PERIOD: {
		uint64_t prow = f->in_period[i] / c;
		if (prow == 1) {
			/* one row for every partition and every row: stride 0 */
			isa_ap src = isa_ap_hbm(dt, tensor, x->c0 * esz, x->parts, 0, x->w);
			if (x->k > 1) {
				int32_t st[2] = { 0, 1 };
				uint32_t sz[2] = { x->k, x->w };
				src = isa_ap_dims(src, 2, st, sz);
			}
			nk_pipe_load(pp, isa_ap_sbuf(dt, 0, x->parts, at, free), src, q);
			return;
		}
		/* partitions whose rows follow each other in the input: a load each run */
		for (uint32_t p0 = 0; p0 < x->parts;) {
			uint64_t r = (x->row0 + (uint64_t)p0 * x->k) % prow;
			uint64_t run = (prow - r) / x->k;
			run = run < x->parts - p0 ? run : x->parts - p0;
			nk_pipe_load(pp, isa_ap_sbuf(dt, p0, (uint32_t)run, at, free),
				     isa_ap_hbm(dt, tensor, (r * c + x->c0) * esz, (uint32_t)run, (int64_t)(x->k * c), free), q);
			p0 += (uint32_t)run;
		}
		return;
	}
	default:
		nk_pipe_load(pp, isa_ap_sbuf(dt, 0, x->parts, at, free),
			     isa_ap_hbm(dt, tensor, (x->row0 * c + x->c0) * esz, x->parts, (int64_t)(x->k * c), free), q);
	}
}

static isa_status emit_tile(emitter *E, uint32_t t, const ftile *x, uint64_t base)
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
				if (s->op == ISA_ALU_bypass) {
					/* nothing to compute: a copy, rounded to dst's dtype (a cast) */
					st = isa_builder_tensor_copy(E->p, eng, dst, a);
					break;
				}
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
	const uint64_t c = row_len(f);
	const uint32_t kmax = rows_per_part(f);
	/* value slots as long as a tile's rows (a linked graph groups parts by
	 * the SBUF they use: a 128-element region need not hold 2 KiB a value) */
	uint64_t per_part = c > FUSED_F ? FUSED_F : kmax * c;
	uint64_t slot = (per_part * 4 + 63) / 64 * 64;
	emitter E = { .f = f, .slot = slot };
	const unsigned nbuf = 2;
	const uint64_t set_bytes = (f->nin + f->nsteps + 1) * E.slot;
	nk_pipe pp;
	if (!nk_pipe_init(&pp, target, nbuf, set_bytes, diag))
		return pp.em.st;
	E.p = pp.em.p;
	E.hoist_base = nbuf * set_bytes;
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
		uint64_t n = f->in_mode[i] == NK_FUSED_ROW ? f->n / c : f->in_mode[i] == NK_FUSED_PERIOD ? f->in_period[i] : f->n;
		tin[i] = nk_pipe_tensor(&pp, name, f->in_dtype[i], ISA_TK_INPUT, n);
		/* a PERIOD input of whole rows is loaded once, when more than one tile reads it */
		E.hoisted[i] = f->in_mode[i] == NK_FUSED_PERIOD && c <= FUSED_F &&
			       f->n > (uint64_t)kmax * c * ISA_NUM_PARTITIONS;
	}
	int to = nk_pipe_tensor(&pp, "out", f->dtype, ISA_TK_OUTPUT, f->n);
	const uint64_t esz = isa_dtype_size(f->dtype);
	nk_fused_step last = step_of(f, f->nsteps - 1);
	ftile tile = { 0 };
	for (uint32_t t = 0; !pp.em.st && next_tile(f, kmax, &tile); t++) {
		const ftile *x = &tile;
		uint64_t base = nk_pipe_tile(&pp);
		if (t == 0) {
			/* the hoisted copies: every partition's first rows, as a full tile reads them */
			ftile whole = { .row0 = 0, .c0 = 0, .parts = ISA_NUM_PARTITIONS, .k = kmax, .w = (uint32_t)c };
			for (unsigned i = 0; i < f->nin; i++)
				if (E.hoisted[i])
					load_input(&pp, f, i, (uint32_t)tin[i], &whole, E.hoist_base + i * E.slot);
		}
		for (unsigned i = 0; i < f->nin; i++)
			if (!reads_hoisted(&E, i, x))
				load_input(&pp, f, i, (uint32_t)tin[i], x, base + i * E.slot);
		for (int e = 0; e < 2; e++)
			if (E.per_tile[e])
				nk_pipe_compute(&pp, e ? ISA_ENGINE_SCALAR : ISA_ENGINE_VECTOR);
		if (!pp.em.st)
			nk_pipe_check(&pp, emit_tile(&E, t, x, base));
		nk_pipe_computed(&pp, step_engine(&last));
		nk_pipe_store(&pp, isa_ap_hbm(f->dtype, (uint32_t)to, (x->row0 * c + x->c0) * esz, x->parts,
					      (int64_t)(x->k * c), x->k * x->w),
			      value_ap(&E, f->nin + f->nsteps - 1, base, x, true), 2);
	}
	return nk_pipe_finish(&pp, bin, len);
}

isa_status nk_fused_program(int target, const nk_fused *f, uint8_t **bin, size_t *len, isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	bool ok = valid(f);
	uint64_t c = ok ? row_len(f) : 1, k = ok ? rows_per_part(f) : 1;
	/* tiles: the row blocks times the chunks of a row */
	uint64_t max_tiles = ok ? (f->n / c) / (k * ISA_NUM_PARTITIONS) + 3 : 0;
	if (ok && c > FUSED_F)
		max_tiles *= (c + FUSED_F - 1) / FUSED_F;
	if (!ok || max_tiles > (1u << 20)) {
		nk_fail(diag, ISA_E_LIMIT, "fused pointwise kernel: %u inputs, %u steps, %llu elements", f->nin,
			f->nsteps, (unsigned long long)f->n);
		return ISA_E_LIMIT;
	}
	return fused_emit(target, f, bin, len, diag);
}
