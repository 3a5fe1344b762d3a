/*
 * link.c -- the graph compiler's back end: many kernel programs, in order,
 * become ONE program over a graph's memory regions.
 *
 * A compiled graph's nodes were lowered by the kernel generators into
 * programs, each over named HBM tensors; the caller says which region of the
 * graph's memory (an input, an output, an intermediate) and which byte
 * offset in it every such tensor is.  Here each part's instruction streams
 * are appended to one program:
 *   - HBM operands are re-pointed at the region's tensor of the operand's
 *     dtype ("r<region>_<dtype>") at the part's byte offset in it;
 *     intermediates become scratch the program owns, so they never leave
 *     the device and cost no launch;
 *   - a part's own scratch is placed in one area every part shares (parts
 *     run one after another), its constants are appended;
 *   - semaphores and DMA descriptors are renumbered into ranges of their
 *     own, so parts never see each other's counts; when the 256 semaphores
 *     run out, the used ones are reset to 0 between two barriers;
 *   - parts are scheduled in groups: a group takes the earliest part not
 *     yet placed and, looking a window ahead, every later part that touches
 *     no bytes an earlier unplaced part or a group member writes (nor
 *     writes bytes they read), keeps no scratch of its own, and whose SBUF
 *     and PSUM fit beside the members'; each member's SBUF and PSUM move
 *     past the previous ones' (PSUM by whole banks) and every engine goes
 *     on from one member's instructions to the next's, so one part's loads
 *     run under another's compute, as the Neuron compiler schedules
 *     independent operations;
 *   - between two groups every engine of the program meets at a barrier: a
 *     part may use all of SBUF and PSUM, as its generator assumed.
 * What the launch overhead and the host round trip of each part cost in
 * eager mode is what the one program saves.
 *
 * Parts that keep state an earlier part could disturb are refused (the
 * caller then runs that node on its own): register instructions and
 * dynamic DMA (engine registers start at 0 in a program), the PRNG
 * instructions (engine state), and peer / remote semaphores (other cores).
 */
#include "programs.h"
#include "link.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINK_ALIGN 64u

typedef struct linker {
	isa_program *out;
	const nk_link_region *regions;
	uint32_t nregions;
	int32_t *region_tensor;         /* [nregions * ISA_NUM_DTYPES]: tensor index or -1 */
	uint64_t *region_offset;        /* INTERNAL regions: byte offset in scratch */
	uint64_t shared_scratch;        /* where every part's own scratch starts */
	uint64_t shared_bytes;          /* the largest part scratch */
	uint32_t sem_base, sem_used;    /* this part's first semaphore; high-water mark */
	bool engine_used[ISA_NUM_ENGINES];
	uint64_t sbuf_base, psum_base;  /* where the current part's SBUF / PSUM start */
	/* the waits that end the group's parts (a part's last instructions on an
	 * engine waiting for its DMAs): met at the group's end, so the engine
	 * goes on to the next member meanwhile */
	isa_instr *deferred;
	int *deferred_engine;
	uint32_t ndeferred, deferred_cap;
	isa_diag *diag;
} linker;

static bool refused_instr(const isa_instr *in)
{
	switch (in->opcode) {
	case ISA_OP_reg_load:
	case ISA_OP_reg_alu:
	case ISA_OP_reg_store:
	case ISA_OP_branch:
	case ISA_OP_fence:
	case ISA_OP_rng:
	case ISA_OP_rand_set_state:
	case ISA_OP_rand_get_state:
		return true;
	case ISA_OP_dma_copy:
		return in->nivec || (in->flags & ISA_FLAG_PEER);
	case ISA_OP_sem_signal:
		return (in->flags & (ISA_FLAG_PEER | ISA_FLAG_REMOTE)) != 0;
	default:
		return false;
	}
}

/* Why part `p` cannot be linked, or NULL. */
static const char *refusal(const isa_program *p)
{
	for (int e = 0; e < ISA_NUM_ENGINES; e++)
		for (uint32_t i = 0; i < p->n_instr[e]; i++)
			if (refused_instr(&p->stream[e][i]))
				return isa_op_name(p->stream[e][i].opcode);
	return NULL;
}

/* The tensor of region r seen as `dtype`, added on first use: its whole
 * elements (a region of 254 booleans read as int32 words -- the bitwise
 * kernels do -- is 63 of them; a part reaching past the last whole one is
 * refused by place_part_tensors). */
static int region_tensor(linker *L, uint32_t r, int dtype)
{
	int32_t *slot = &L->region_tensor[(size_t)r * ISA_NUM_DTYPES + (unsigned)dtype];
	if (*slot >= 0)
		return *slot;
	const nk_link_region *reg = &L->regions[r];
	unsigned es = isa_dtype_size(dtype);
	if (!es || reg->bytes < es) {
		nk_fail(L->diag, ISA_E_BAD_DTYPE, "region %u (%llu bytes) read as %s", r,
			(unsigned long long)reg->bytes, isa_dtype_name(dtype));
		return -1;
	}
	char name[ISA_MAX_NAME + 1];
	snprintf(name, sizeof(name), "r%u_%s", r, isa_dtype_name(dtype));
	uint64_t shape[1] = { reg->bytes / es };
	int t = isa_builder_tensor(L->out, name, dtype, reg->kind, 1, shape, L->diag);
	if (t >= 0 && reg->kind == ISA_TK_INTERNAL)
		L->out->tensors[t].offset = L->region_offset[r];
	*slot = t;
	return t;
}

bool nk_link_region_of(const char *name, uint32_t *region)
{
	unsigned r;
	int n = 0;
	if (sscanf(name, "r%u_%n", &r, &n) != 1 || !n)
		return false;
	*region = r;
	return true;
}

/* Where part tensor i lives in the output: tensor index and byte offset. */
typedef struct placed {
	int32_t tensor;
	uint64_t offset;
} placed;

static isa_status place_part_tensors(linker *L, const isa_program *p, const nk_link_part *part, unsigned k,
				     placed *where)
{
	for (uint32_t i = 0; i < p->n_tensors; i++) {
		const isa_tensor *t = &p->tensors[i];
		where[i].tensor = -1;
		where[i].offset = 0;
		char name[ISA_MAX_NAME + 1];
		snprintf(name, sizeof(name), "p%u_t%u", k, i);
		if (t->kind == ISA_TK_INTERNAL) {
			int x = isa_builder_tensor(L->out, name, t->dtype, ISA_TK_INTERNAL, t->rank, t->shape, L->diag);
			if (x < 0)
				return L->diag->code;
			L->out->tensors[x].offset = L->shared_scratch + t->offset;
			where[i].tensor = x;
			continue;
		}
		if (t->kind == ISA_TK_CONST) {
			uint64_t bytes = isa_tensor_bytes(t);
			int x = isa_builder_const(L->out, name, t->dtype, t->rank, t->shape, p->consts + t->offset,
						  bytes, L->diag);
			if (x < 0)
				return L->diag->code;
			where[i].tensor = x;
			continue;
		}
		const nk_link_bind *b = NULL;
		for (uint32_t j = 0; j < part->nbind && !b; j++)
			if (strcmp(part->bind[j].name, t->name) == 0)
				b = &part->bind[j];
		if (!b) {
			nk_fail(L->diag, ISA_E_UNDEFINED_TENSOR, "part %u: tensor '%s' is not bound to a region", k,
				t->name);
			return ISA_E_UNDEFINED_TENSOR;
		}
		if (b->region >= L->nregions) {
			nk_fail(L->diag, ISA_E_BAD_VALUE, "part %u: tensor '%s' bound to region %u of %u", k, t->name,
				b->region, L->nregions);
			return ISA_E_BAD_VALUE;
		}
		uint64_t bytes = isa_tensor_bytes(t);
		const nk_link_region *reg = &L->regions[b->region];
		if (b->offset > reg->bytes || bytes > reg->bytes - b->offset) {
			nk_fail(L->diag, ISA_E_OUT_OF_BOUNDS,
				"part %u: tensor '%s' (%llu bytes at %llu) outside region %u (%llu bytes)", k, t->name,
				(unsigned long long)bytes, (unsigned long long)b->offset, b->region,
				(unsigned long long)reg->bytes);
			return ISA_E_OUT_OF_BOUNDS;
		}
		if (t->kind == ISA_TK_OUTPUT && reg->kind == ISA_TK_INPUT) {
			nk_fail(L->diag, ISA_E_BAD_TENSOR, "part %u writes '%s' into input region %u", k, t->name,
				b->region);
			return ISA_E_BAD_TENSOR;
		}
		int x = region_tensor(L, b->region, t->dtype);
		if (x < 0)
			return L->diag->code;
		uint64_t whole = reg->bytes - reg->bytes % isa_dtype_size(t->dtype);
		if (b->offset + bytes > whole) {
			nk_fail(L->diag, ISA_E_OUT_OF_BOUNDS,
				"part %u: tensor '%s' (%llu bytes at %llu) reaches past the last whole %s of region "
				"%u (%llu bytes)", k, t->name, (unsigned long long)bytes, (unsigned long long)b->offset,
				isa_dtype_name(t->dtype), b->region, (unsigned long long)reg->bytes);
			return ISA_E_OUT_OF_BOUNDS;
		}
		where[i].tensor = x;
		where[i].offset = b->offset;
	}
	return ISA_OK;
}

static isa_status relocate_ap(linker *L, isa_ap *ap, const placed *where, uint32_t ntensors)
{
	if (ap->space == ISA_SPACE_SBUF || ap->space == ISA_SPACE_PSUM) {
		ap->offset += ap->space == ISA_SPACE_SBUF ? L->sbuf_base : L->psum_base;
		return ISA_OK;
	}
	if (ap->space != ISA_SPACE_HBM)
		return ISA_OK;
	if (ap->tensor >= ntensors) {
		nk_fail(L->diag, ISA_E_UNDEFINED_TENSOR, "operand of tensor #%u (part has %u)", ap->tensor, ntensors);
		return ISA_E_UNDEFINED_TENSOR;
	}
	ap->offset += where[ap->tensor].offset;
	ap->tensor = (uint32_t)where[ap->tensor].tensor;
	return ISA_OK;
}

/* Semaphore and descriptor fields of `in` moved by the part's bases. */
static void renumber(isa_instr *in, uint32_t sem_base, uint32_t desc_base)
{
	unsigned nf = isa_op_field_count(in->opcode);
	for (unsigned f = 0; f < nf; f++) {
		isa_field_info fi;
		if (!isa_op_field(in->opcode, f, &fi))
			break;
		if (strcmp(fi.kind, "sem") == 0 && in->u[fi.slot] != ISA_SEM_NONE)
			in->u[fi.slot] += sem_base;
		else if (strcmp(fi.kind, "desc") == 0)
			in->u[fi.slot] += desc_base;
	}
}

static isa_status defer_wait(linker *L, int engine, const isa_instr *in)
{
	if (L->ndeferred == L->deferred_cap) {
		uint32_t cap = L->deferred_cap ? 2 * L->deferred_cap : 64;
		isa_instr *d = realloc(L->deferred, cap * sizeof(*d));
		if (d)
			L->deferred = d;
		int *de = d ? realloc(L->deferred_engine, cap * sizeof(*de)) : NULL;
		if (de)
			L->deferred_engine = de;
		if (!d || !de) {
			nk_fail(L->diag, ISA_E_NOMEM, "linker waits");
			return ISA_E_NOMEM;
		}
		L->deferred_cap = cap;
	}
	L->deferred[L->ndeferred] = *in;
	L->deferred_engine[L->ndeferred++] = engine;
	return ISA_OK;
}

static isa_status emit_deferred(linker *L)
{
	isa_status st = ISA_OK;
	for (uint32_t i = 0; i < L->ndeferred && !st; i++)
		st = isa_builder_emit(L->out, L->deferred_engine[i], &L->deferred[i], L->diag);
	L->ndeferred = 0;
	return st;
}

/* Every engine of the output meets here (the group's deferred waits met first). */
static isa_status barrier_all(linker *L)
{
	isa_status dst = emit_deferred(L);
	if (dst)
		return dst;
	for (int e = 0; e < ISA_NUM_ENGINES; e++) {
		if (!L->engine_used[e])
			continue;
		isa_status st = isa_builder_simple(L->out, e, ISA_OP_barrier);
		if (st)
			return st;
	}
	return ISA_OK;
}

static int first_engine(const linker *L)
{
	for (int e = 0; e < ISA_NUM_ENGINES; e++)
		if (L->engine_used[e])
			return e;
	return -1;
}

/* The next part needs `n` fresh semaphores: reset the used ones when the
 * table is full (all engines are past the previous parts). */
static isa_status reserve_semaphores(linker *L, uint32_t n)
{
	if (L->sem_base + n <= ISA_MAX_SEMAPHORES)
		return ISA_OK;
	int e = first_engine(L);
	isa_status st = barrier_all(L);
	for (uint32_t s = 0; !st && s < L->sem_base; s++)
		st = isa_builder_sem_signal(L->out, e, s, ISA_SEMOP_SET, 0);
	if (!st)
		st = barrier_all(L);
	L->sem_base = 0;
	return st;
}

static isa_status append_part(linker *L, const isa_program *p, const nk_link_part *part, unsigned k)
{
	const char *why = refusal(p);
	if (why) {
		nk_fail(L->diag, ISA_E_BAD_OPCODE, "part %u (%s) uses %s, which a linked program cannot", k,
			part->label ? part->label : "?", why);
		return ISA_E_BAD_OPCODE;
	}
	if (p->num_semaphores > ISA_MAX_SEMAPHORES) {
		nk_fail(L->diag, ISA_E_LIMIT, "part %u: %u semaphores", k, p->num_semaphores);
		return ISA_E_LIMIT;
	}
	placed *where = calloc(p->n_tensors ? p->n_tensors : 1, sizeof(*where));
	if (!where) {
		nk_fail(L->diag, ISA_E_NOMEM, "linker tensor map");
		return ISA_E_NOMEM;
	}
	isa_status st = place_part_tensors(L, p, part, k, where);
	if (st)
		goto free_where;
	if (p->scratch_bytes > L->shared_bytes)
		L->shared_bytes = p->scratch_bytes;

	/* barriers inside the part: the engines absent from it meet them too */
	uint32_t nbar = 0;
	int nbar_engine = -1;
	for (int e = 0; e < ISA_NUM_ENGINES; e++) {
		if (!p->n_instr[e])
			continue;
		uint32_t b = 0;
		for (uint32_t i = 0; i < p->n_instr[e]; i++)
			b += p->stream[e][i].opcode == ISA_OP_barrier;
		if (nbar_engine >= 0 && b != nbar) {
			nk_fail(L->diag, ISA_E_BARRIER_MISMATCH, "part %u: engines meet %u and %u barriers", k, nbar,
				b);
			st = ISA_E_BARRIER_MISMATCH;
			goto free_where;
		}
		nbar = b;
		nbar_engine = e;
	}

	st = reserve_semaphores(L, p->num_semaphores);
	if (st)
		goto free_where;
	uint32_t desc_base = L->out->n_dma;
	for (uint32_t d = 0; d < p->n_dma; d++) {
		isa_dma_desc dd = p->dma[d];
		st = relocate_ap(L, &dd.dst, where, p->n_tensors);
		if (!st)
			st = relocate_ap(L, &dd.src, where, p->n_tensors);
		if (!st)
			st = relocate_ap(L, &dd.index, where, p->n_tensors);
		if (st)
			goto free_where;
		/* named after what the part computes: traces show the FX node */
		char name[ISA_MAX_NAME + 1], what[40];
		snprintf(what, sizeof(what), "%s", part->label ? part->label : "p");
		for (char *c = what; *c; c++)
			if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
				*c = '_';
		if (what[0] >= '0' && what[0] <= '9')
			what[0] = '_';
		snprintf(name, sizeof(name), "%s.p%u_d%u", what, k, d);
		if (isa_builder_dma(L->out, name, dd.mode, &dd.dst, &dd.src,
				    isa_dma_mode_indexed(dd.mode) ? &dd.index : NULL, L->diag) < 0) {
			st = L->diag->code;
			goto free_where;
		}
	}
	for (int e = 0; e < ISA_NUM_ENGINES; e++) {
		if (!p->n_instr[e] && nbar && L->engine_used[e]) {
			for (uint32_t b = 0; b < nbar && !st; b++)
				st = isa_builder_simple(L->out, e, ISA_OP_barrier);
		}
		/* the stream's trailing waits are deferred to the group's end */
		uint32_t n = 0, tail;
		while (n < p->n_instr[e] && p->stream[e][n].opcode != ISA_OP_end)
			n++;
		for (tail = n; tail && p->stream[e][tail - 1].opcode == ISA_OP_sem_wait; tail--)
			;
		for (uint32_t i = 0; i < n && !st; i++) {
			isa_instr in = p->stream[e][i];
			for (int s = 0; s < ISA_MAX_AP && !st; s++)
				if ((in.ap_mask >> s) & 1u)
					st = relocate_ap(L, &in.ap[s], where, p->n_tensors);
			renumber(&in, L->sem_base, desc_base);
			if (!st)
				st = i < tail ? isa_builder_emit(L->out, e, &in, L->diag) : defer_wait(L, e, &in);
		}
		if (st)
			goto free_where;
	}
	L->sem_base += p->num_semaphores;
	if (L->sem_base > L->sem_used)
		L->sem_used = L->sem_base;
free_where:
	free(where);
	return st;
}

/* ------------------------------------------------------------ groups */

#define GROUP_MAX 16u           /* parts per group */
#define WINDOW 64u               /* parts looked ahead for a group: bounds the dependency checks */
#define GROUP_ACCESSES 32u      /* tensors of a part that may join a group */
enum { IN_GROUP = 1, SCHEDULED_BEFORE = 2 };

/* bytes [lo, hi) of region `region` a part reads or writes */
typedef struct access {
	uint32_t region;
	bool written;
	uint64_t lo, hi;
} access;

/* what decides whether a part may join a group */
typedef struct shape {
	uint64_t sbuf, psum;        /* bytes per partition used (from offset 0) */
	bool alone;                 /* scratch of its own, barriers inside, or too many accesses */
	uint32_t naccess;
	access acc[GROUP_ACCESSES];
} shape;

static void note_onchip(shape *sh, const isa_ap *ap)
{
	int64_t lo, hi;
	if ((ap->space != ISA_SPACE_SBUF && ap->space != ISA_SPACE_PSUM) || !isa_ap_byte_range(ap, &lo, &hi) || hi < 0)
		return;
	uint64_t *top = ap->space == ISA_SPACE_SBUF ? &sh->sbuf : &sh->psum;
	if ((uint64_t)hi > *top)
		*top = (uint64_t)hi;
}

static void shape_of(const isa_program *p, const nk_link_part *part, shape *sh)
{
	memset(sh, 0, sizeof(*sh));
	sh->alone = p->scratch_bytes != 0;
	for (int e = 0; e < ISA_NUM_ENGINES; e++)
		for (uint32_t i = 0; i < p->n_instr[e]; i++) {
			const isa_instr *in = &p->stream[e][i];
			sh->alone |= in->opcode == ISA_OP_barrier;
			for (int a = 0; a < ISA_MAX_AP; a++)
				if ((in->ap_mask >> a) & 1u)
					note_onchip(sh, &in->ap[a]);
		}
	for (uint32_t d = 0; d < p->n_dma; d++) {
		note_onchip(sh, &p->dma[d].dst);
		note_onchip(sh, &p->dma[d].src);
		if (isa_dma_mode_indexed(p->dma[d].mode))
			note_onchip(sh, &p->dma[d].index);
	}
	for (uint32_t i = 0; i < p->n_tensors && !sh->alone; i++) {
		const isa_tensor *t = &p->tensors[i];
		if (t->kind == ISA_TK_INTERNAL) {
			sh->alone = true;
			break;
		}
		if (t->kind != ISA_TK_INPUT && t->kind != ISA_TK_OUTPUT)
			continue;
		const nk_link_bind *b = NULL;
		for (uint32_t j = 0; j < part->nbind && !b; j++)
			if (strcmp(part->bind[j].name, t->name) == 0)
				b = &part->bind[j];
		if (!b || sh->naccess == GROUP_ACCESSES) {
			sh->alone = true;   /* (place_part_tensors names an unbound one) */
			break;
		}
		sh->acc[sh->naccess++] = (access){ b->region, t->kind == ISA_TK_OUTPUT, b->offset,
						   b->offset + isa_tensor_bytes(t) };
	}
}

/* whether two parts touch the same bytes, one of them writing */
static bool conflicts(const shape *x, const shape *y)
{
	for (uint32_t i = 0; i < x->naccess; i++) {
		const access *a = &x->acc[i];
		for (uint32_t j = 0; j < y->naccess; j++) {
			const access *b = &y->acc[j];
			if (a->region == b->region && (a->written || b->written) && a->lo < b->hi && b->lo < a->hi)
				return true;
		}
	}
	return false;
}

static uint64_t round_up(uint64_t v, uint64_t to)
{
	return to ? (v + to - 1) / to * to : v;
}

isa_status nk_link_program(int target, const nk_link_part *parts, uint32_t nparts, const nk_link_region *regions,
			   uint32_t nregions, uint8_t **bin, size_t *len, isa_diag *diag)
{
	isa_status st = ISA_OK;
	if (!nparts) {
		nk_fail(diag, ISA_E_BAD_VALUE, "nothing to link");
		return ISA_E_BAD_VALUE;
	}
	linker L = { .regions = regions, .nregions = nregions, .diag = diag };
	shape *shapes = NULL;
	uint8_t *state = NULL;  /* per part: 0 left, IN_GROUP, SCHEDULED_BEFORE */
	L.out = isa_program_new(target);
	L.region_tensor = malloc(((size_t)nregions * ISA_NUM_DTYPES + 1) * sizeof(int32_t));
	L.region_offset = calloc((size_t)nregions + 1, sizeof(uint64_t));
	const isa_program **progs = calloc(nparts, sizeof(*progs));
	if (!L.out || !L.region_tensor || !L.region_offset || !progs) {
		nk_fail(diag, ISA_E_NOMEM, "linker tables");
		st = ISA_E_NOMEM;
		goto free_tables;
	}
	for (size_t i = 0; i < (size_t)nregions * ISA_NUM_DTYPES; i++)
		L.region_tensor[i] = -1;

	/* intermediates first in scratch, then the area the parts share */
	uint64_t scratch = 0;
	for (uint32_t r = 0; r < nregions; r++) {
		if (regions[r].kind == ISA_TK_INTERNAL) {
			L.region_offset[r] = scratch;
			scratch = (scratch + regions[r].bytes + LINK_ALIGN - 1) & ~(uint64_t)(LINK_ALIGN - 1);
		} else if (regions[r].kind != ISA_TK_INPUT && regions[r].kind != ISA_TK_OUTPUT) {
			nk_fail(diag, ISA_E_BAD_VALUE, "region %u: kind %d", r, regions[r].kind);
			st = ISA_E_BAD_VALUE;
			goto free_tables;
		}
	}
	L.shared_scratch = scratch;

	for (uint32_t k = 0; k < nparts; k++) {
		progs[k] = parts[k].prog;
		if (!progs[k]) {
			nk_fail(diag, ISA_E_BAD_VALUE, "part %u: no program", k);
			st = ISA_E_BAD_VALUE;
			goto free_tables;
		}
		if (progs[k]->target != target) {
			nk_fail(diag, ISA_E_BAD_VALUE, "part %u is for another target", k);
			st = ISA_E_BAD_VALUE;
			goto free_tables;
		}
		for (int e = 0; e < ISA_NUM_ENGINES; e++)
			L.engine_used[e] |= progs[k]->n_instr[e] != 0;
	}
	const isa_target_info *ti = isa_target_get(target);
	shapes = malloc((size_t)nparts * sizeof(*shapes));
	state = calloc(nparts, 1);
	if (!ti || !shapes || !state) {
		nk_fail(diag, ti ? ISA_E_NOMEM : ISA_E_BAD_VALUE, ti ? "linker groups" : "unknown target");
		st = ti ? ISA_E_NOMEM : ISA_E_BAD_VALUE;
		goto free_tables;
	}
	for (uint32_t k = 0; k < nparts; k++)
		shape_of(progs[k], &parts[k], &shapes[k]);
	uint64_t bank = ti->psum_banks ? ti->psum_partition_bytes / ti->psum_banks : 0;
	/* groups in order: each takes the earliest part left, then, looking
	 * WINDOW parts ahead, every later one that no part left before it and
	 * no group member conflicts with, while SBUF and PSUM hold them */
	for (uint32_t first = 0; first < nparts;) {
		if (first)
			st = barrier_all(&L);
		uint32_t ngroup = 0;
		uint64_t sbuf_top = 0, psum_top = 0;
		for (uint32_t j = first; !st && j < nparts && j < first + WINDOW && ngroup < GROUP_MAX; j++) {
			if (state[j])
				continue;
			const shape *sh = &shapes[j];
			if (sh->alone && ngroup)
				break;                       /* a fence: it waits for the group, the rest for it */
			bool blocked = false;
			for (uint32_t i = first; i < j && !blocked; i++)
				blocked = state[i] != SCHEDULED_BEFORE &&
					  (shapes[i].alone || conflicts(&shapes[i], sh));
			uint64_t sb = round_up(sbuf_top, LINK_ALIGN), ps = round_up(psum_top, bank);
			if (blocked || sb + sh->sbuf > ti->sbuf_partition_bytes || ps + sh->psum > ti->psum_partition_bytes)
				continue;
			L.sbuf_base = sb;
			L.psum_base = ps;
			st = append_part(&L, progs[j], &parts[j], j);
			state[j] = IN_GROUP;
			ngroup++;
			sbuf_top = sb + sh->sbuf;
			psum_top = ps + sh->psum;
			if (sh->alone)
				break;
		}
		if (st)
			goto free_tables;
		for (uint32_t i = first; i < nparts && i < first + WINDOW; i++)
			if (state[i] == IN_GROUP)
				state[i] = SCHEDULED_BEFORE;
		while (first < nparts && state[first])
			first++;
	}
	st = emit_deferred(&L);
	if (st)
		goto free_tables;
	L.out->num_semaphores = L.sem_used;
	L.out->scratch_bytes = L.shared_scratch + L.shared_bytes;
	st = nk_encode(L.out, bin, len, diag);
free_tables:
	free(L.deferred);
	free(L.deferred_engine);
	free(state);
	free(shapes);
	free(progs);
	free(L.region_offset);
	free(L.region_tensor);
	if (L.out)
		isa_program_free(L.out);
	return st;
}
