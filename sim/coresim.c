/*
 * coresim.c -- executes one validated program on one NeuronCore.
 *
 * Each engine runs its stream in order.  An instruction starts when its
 * engine can issue it; it occupies the engine for its cost's `busy` cycles
 * and its results are visible after `latency` cycles.  Engines meet only at
 * semaphores: sem_wait blocks until the condition holds, sem_signal updates
 * the semaphore once every earlier instruction of its engine has completed,
 * a DMA adds its value when the whole transfer has landed.  Values are
 * computed when an instruction issues, in program order per engine; the
 * semaphores order engines exactly as they order the hardware.
 *
 * TensorE: load_stationary may run while the previous multiply_moving still
 * streams (background weight load), but only one stationary can wait ahead of
 * the array; multiply_moving starts when the array and its stationary are
 * ready.
 *
 * Compute engines issue back to back; an instruction reading what an earlier
 * one of its own engine writes waits for that result (after_own_writes).
 *
 * DMA: a transfer's rows fall on the DMA engines that serve their
 * partitions, 128 / 16 = 8 each (dm_dma_rows_per_engine, device_model/cost.c);
 * each engine serves its slices in arrival order, one transfer at a time,
 * paying a per-descriptor overhead plus bytes at its rate; the memory side is
 * the nsim_mem_timing interface.  The transfer starts after the DMA issue
 * latency and completes when its last slice does.
 */
#include "coresim.h"

#include "busy_union.h"
#include "cost.h"
#include "ops.h"
#include "evqueue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EV_ENGINE = 1, EV_SEM, EV_DMA_DONE, EV_SEM_RESET };

/* backward branches one engine may take in a run: a loop whose register
 * never ends it stops here with a fault instead of running forever */
#define NSIM_MAX_BACK_BRANCHES (1u << 20)
enum { ENG_IDLE = 0, ENG_READY, ENG_WAIT_SEM, ENG_WAIT_BARRIER, ENG_DONE };

/* an on-chip region an instruction writes, readable from `ready` on */
typedef struct pending_write {
	uint8_t  space;
	uint32_t p0, p1;            /* partitions [p0, p1) */
	uint64_t b0, b1;            /* bytes [b0, b1) inside each partition */
	uint64_t ready;             /* ps */
} pending_write;
#define NSIM_PENDING_WRITES 8   /* deeper than any engine's pipeline holds */

typedef struct eng {
	const isa_instr *stream;
	uint32_t         n, pc;
	int              state;
	uint32_t         wait_sem;
	uint64_t         wait_from;    /* when it started waiting on wait_sem */
	uint64_t         waited_ps;    /* semaphore wait not yet reported with an instruction */
	uint64_t         issue_at;   /* the engine can start its next instruction */
	uint64_t         done_at;    /* every issued instruction has completed */
	uint64_t         busy_until; /* end of the latest busy interval counted */
	uint32_t         back_branches; /* backward branches taken (NSIM_MAX_BACK_BRANCHES) */
	pending_write    pw[NSIM_PENDING_WRITES];   /* its recent writes still in the pipeline */
	uint32_t         npw;
} eng;

typedef struct sim {
	nsim_run      *r;
	const dm_chip *chip;
	nsim_sched    *q;               /* shared by every core of a run */
	uint32_t       idx;             /* this core's index in the run */
	struct sim    *all;             /* every core of the run: runs 2j, 2j+1 are paired */
	uint32_t       nall;
	uint64_t       end;             /* last event time of this core */
	eng            e[ISA_NUM_ENGINES];
	int64_t        sem[ISA_MAX_SEMAPHORES];
	/* TensorE pipeline */
	uint64_t       ls_done, mm_free, last_mm_start;
	bool           ls_pending;      /* a stationary loaded, not yet used */
	/* v2 shared ports: busy until (ps) */
	uint64_t       sbuf_vg_free, psum_vs_free;
	dm_cost_ctx    cctx;
	/* barrier */
	int            barrier_needed, barrier_waiting;
	uint64_t       barrier_time;
	uint32_t       barrier_reset;   /* a fence among them: semaphores 0..n-1 zeroed on release */
	/* DMA engines and queues */
	uint64_t       dma_free[32];
	uint64_t       queue_last[ISA_NUM_DMA_QUEUES][32];
	nsim_busy_union dma_union;      /* when any DMA engine moves data */
	bool           timed;           /* false in functional mode */
	bool           compute;         /* false in timing mode */
	dm_fault_kind  fault;
} sim;

static uint64_t cyc(const sim *s, int engine, uint64_t cycles)
{
	return s->timed ? dm_cycles_ps(s->chip, engine, cycles) : 0;
}

static uint64_t umax(uint64_t a, uint64_t b) { return a > b ? a : b; }

static bool push(sim *s, uint64_t t, uint32_t kind, uint32_t a, uint64_t b)
{
	if (nsim_sched_push(s->q, t, kind | (s->idx << 8), a, b))
		return true;
	s->fault = dm_fault_set(&s->r->fault, DM_FAULT_NOMEM, -1, -1, 0, "event queue");
	return false;
}

/* the paired core (LNC=2: runs 2j and 2j+1), or NULL */
static sim *peer_of(sim *s)
{
	return (s->idx ^ 1u) < s->nall ? &s->all[s->idx ^ 1u] : NULL;
}

/* a semaphore update on another core: the paired one (nki.isa core_barrier,
 * sendrecv) or a collective's rank (nki.collectives) */
static bool push_remote_sem(sim *s, int engine, const isa_instr *in, uint64_t t)
{
	bool peer = in->flags & ISA_FLAG_PEER;
	sim *p = peer ? peer_of(s) : in->u[2] < s->nall ? &s->all[in->u[2]] : NULL;
	if (!p || in->u[0] >= p->r->prog->num_semaphores) {
		if (!p && peer)
			s->fault = dm_fault_set(&s->r->fault, DM_FAULT_NO_PEER, engine, s->e[engine].pc, 0,
						"a peer semaphore update, but this execution has no paired core "
						"(peer operations need the two cores of an LNC=2 pair)");
		else if (!p)
			s->fault = dm_fault_set(&s->r->fault, DM_FAULT_NO_PEER, engine, s->e[engine].pc, 0,
						"a semaphore update on rank %u, but this execution runs %u core(s)",
						in->u[2], s->nall);
		else
			s->fault = dm_fault_set(&s->r->fault, DM_FAULT_NO_PEER, engine, s->e[engine].pc, 0,
						"remote semaphore %u: that core's program declares %u",
						in->u[0], p->r->prog->num_semaphores);
		return false;
	}
	uint64_t at = t + (s->timed ? dm_peer_signal_ps(s->chip) : 0);
	if (nsim_sched_push(s->q, at, EV_SEM | (p->idx << 8), in->u[0], ((uint64_t)in->e[0] << 32) | in->u[1]))
		return true;
	s->fault = dm_fault_set(&s->r->fault, DM_FAULT_NOMEM, -1, -1, 0, "event queue");
	return false;
}

static uint64_t ap_bytes(const isa_ap *ap)
{
	return (uint64_t)ap->nparts * isa_ap_free_elems(ap) * isa_dtype_size(ap->dtype);
}

_Static_assert(ISA_NUM_OPS <= NSIM_MAX_OPCODES, "nsim_exec_stats per-opcode arrays too small");

/* bytes of an on-chip operand into the SBUF / PSUM read or write totals */
static void count_onchip(nsim_exec_stats *st, const isa_ap *ap, uint64_t bytes, bool write)
{
	if (ap->space == ISA_SPACE_SBUF)
		*(write ? &st->sbuf_write_bytes : &st->sbuf_read_bytes) += bytes;
	else if (ap->space == ISA_SPACE_PSUM)
		*(write ? &st->psum_write_bytes : &st->psum_read_bytes) += bytes;
}

static void wake_waiters(sim *s, uint32_t semid, uint64_t t)
{
	for (int k = 0; k < ISA_NUM_ENGINES; k++)
		if (s->e[k].state == ENG_WAIT_SEM && s->e[k].wait_sem == semid) {
			s->e[k].state = ENG_READY;
			s->e[k].waited_ps += t - s->e[k].wait_from;
			push(s, t, EV_ENGINE, (uint32_t)k, 0);
		}
}

static void sem_apply(sim *s, uint32_t semid, int op, int64_t value, int engine, uint64_t t)
{
	int64_t *v = &s->sem[semid];
	if (op == ISA_SEMOP_ADD)
		*v += value;
	else if (op == ISA_SEMOP_SUB)
		*v -= value;
	else
		*v = value;
	if (s->r->obs && s->r->obs->sem) {
		trc_sem_event ev = { s->r->core_id, engine, semid, *v, t };
		s->r->obs->sem(s->r->obs->ctx, &ev);
	}
	wake_waiters(s, semid, t);
}

static bool sem_holds(const sim *s, const isa_instr *in)
{
	return dm_alu_i64(in->e[0], s->sem[in->u[0]], (int64_t)in->u[1]) != 0;
}

static void report_instr(sim *s, int engine, const isa_instr *in, uint64_t start, uint64_t end,
			 uint64_t bytes, uint64_t flops)
{
	const trc_observer *o = s->r->obs;
	if (!o || !o->instr)
		return;
	char text[512];
	if (o->want_text)
		isa_format_instr(s->r->prog, in, text, sizeof(text));
	trc_instr_event ev = { s->r->core_id, engine, (int64_t)s->e[engine].pc, in->opcode,
			       start, end, bytes, flops, s->e[engine].waited_ps, o->want_text ? text : NULL };
	s->e[engine].waited_ps = 0;
	o->instr(o->ctx, &ev);
}

/* ------------------------------------------------------------------ DMA */

/* When one DMA engine finishes `rows` rows of `sh` started at `start`: its
 * own cost (device_model/cost.c), or later if the memory is slower. */
static uint64_t dma_slice_end(sim *s, uint64_t start, const dm_dma_shape *sh, uint64_t rows,
			      uint64_t read_addr, bool hbm_read, uint64_t write_addr, bool hbm_write)
{
	uint64_t bytes = rows * sh->row_bytes;
	uint64_t end = start + dm_dma_engine_ps(s->chip, sh, rows);
	/* an HBM-to-HBM transfer moves its bytes through HBM twice */
	if (hbm_read && s->r->mem.access)
		end = umax(end, s->r->mem.access(s->r->mem.ctx, start, read_addr, bytes, false));
	if (hbm_write && s->r->mem.access)
		end = umax(end, s->r->mem.access(s->r->mem.ctx, start, write_addr, bytes, true));
	return end;
}

/* A dma_copy with dyn=REG,STRIDE,SIDE[,SKIP]: the descriptor with that HBM
 * side's offset moved by the issuing engine's register times the stride;
 * outside its tensor it faults (the tensor's neighbours in HBM stay
 * untouched), or with SKIP (nki.isa oob_mode.skip: "skips any operations
 * involving out-of-bounds indices") the transfer is dropped: *skipped.  In
 * timing-only mode registers hold no loaded values: the offset stays. */
static dm_fault_kind dyn_desc(sim *s, int engine, const isa_instr *in, isa_dma_desc *out, bool *skipped)
{
	int32_t reg = s->r->core->reg[engine][in->ivec[0]];
	isa_ap *side = in->ivec[2] ? &out->src : &out->dst;
	int64_t off = (int64_t)side->offset + (int64_t)reg * in->ivec[1], lo, hi;
	uint64_t have = isa_tensor_bytes(&s->r->prog->tensors[side->tensor]);
	side->offset = off < 0 ? 0 : (uint64_t)off;
	bool outside = off < 0 || !isa_ap_byte_range(side, &lo, &hi) || lo < 0 || (uint64_t)hi > have;
	*skipped = outside && in->nivec == 4 && in->ivec[3];
	if (outside && !*skipped)
		return dm_fault_set(&s->r->fault, DM_FAULT_OOB, engine, s->e[engine].pc, 0,
				    "descriptor '%s': dyn offset (register %d = %d, times %d bytes) reaches past the "
				    "edges of tensor '%s' (%llu bytes)", out->name, in->ivec[0], reg, in->ivec[1],
				    s->r->prog->tensors[side->tensor].name, (unsigned long long)have);
	return DM_OK;
}

static dm_fault_kind issue_dma(sim *s, int engine, const isa_instr *in, uint64_t t)
{
	const isa_program *p = s->r->prog;
	const isa_dma_desc *d = &p->dma[in->u[0]];
	nsim_exec_stats *st = &s->r->stats;
	isa_dma_desc moved;
	if (in->nivec) {
		bool skipped = false;
		moved = *d;
		dm_fault_kind fk = dyn_desc(s, engine, in, &moved, &skipped);
		if (fk)
			return fk;
		if (skipped) {
			/* dropped when its descriptor is made: nothing moves,
			 * completion as soon as it is issued */
			if (in->u[2] != ISA_SEM_NONE)
				push(s, t + (s->timed ? s->chip->dma_issue_latency_ps : 0), EV_DMA_DONE, in->u[2],
				     in->u[3]);
			return DM_OK;
		}
		d = &moved;
	}

	sim *peer = in->flags & ISA_FLAG_PEER ? peer_of(s) : NULL;
	if ((in->flags & ISA_FLAG_PEER) && !peer)
		return dm_fault_set(&s->r->fault, DM_FAULT_NO_PEER, engine, s->e[engine].pc, 0,
				    "descriptor '%s' writes the paired core's SBUF, but this execution has no "
				    "paired core (peer operations need the two cores of an LNC=2 pair)", d->name);
	/* external memory: the reads when the transfer is issued, the write when
	 * its data has moved; each access's latency delays the completion */
	uint64_t ext_lat = 0;
	bool ext_src = nsim_ext_side(s->r, &d->src), ext_dst = nsim_ext_side(s->r, &d->dst);
	bool gather = isa_dma_mode_gathers(d->mode), scatter = d->mode == ISA_DMA_SCATTER || d->mode == ISA_DMA_SCATTER_ADD;
	dm_fault_kind xk = DM_OK;
	int64_t pc = s->e[engine].pc;
	if (ext_src)
		xk = nsim_ext_access(s->r, engine, pc, d, &d->src, gather, false, t, &ext_lat);
	if (!xk && ext_dst && isa_dma_mode_rmw(d->mode))   /* read-modify-write */
		xk = nsim_ext_access(s->r, engine, pc, d, &d->dst, scatter, false, t, &ext_lat);
	if (xk)
		return xk;
	if (s->compute) {
		dm_fault_kind k = dm_exec_dma_to(s->r->core, peer ? peer->r->core : s->r->core, &s->r->bind,
						 engine, s->e[engine].pc, d, &s->r->fault);
		if (k)
			return k;
	}
	dm_dma_shape sh = dm_dma_shape_of(s->chip, d);
	uint64_t rows = sh.rows, src_row = sh.src_row, dst_row = sh.dst_row, rmw_row = sh.rmw_row;
	uint64_t row_bytes = sh.row_bytes;
	/* a read-modify-write reads its destination back: from HBM when it is there */
	bool rmw = isa_dma_mode_rmw(d->mode) && d->dst.space == ISA_SPACE_HBM;
	bool hbm_read = d->src.space == ISA_SPACE_HBM || rmw, hbm_write = d->dst.space == ISA_SPACE_HBM;
	uint64_t read_addr = d->src.space == ISA_SPACE_HBM
				     ? s->r->bind.tensor_addr[d->src.tensor] + d->src.offset
			     : rmw ? s->r->bind.tensor_addr[d->dst.tensor] + d->dst.offset : 0;
	uint64_t write_addr = hbm_write ? s->r->bind.tensor_addr[d->dst.tensor] + d->dst.offset : 0;

	uint32_t neng = s->chip->dma_engines < 32 ? s->chip->dma_engines : 32;
	uint32_t q = in->u[1];
	uint64_t ready = t + (s->timed ? s->chip->dma_issue_latency_ps : 0);
	uint64_t end = ready, first = UINT64_MAX;
	uint32_t used = 0;
	uint64_t per_engine[32];
	dm_dma_rows_per_engine(s->chip, d, rows, neng, per_engine);
	for (uint32_t k = 0; k < neng; k++) {
		uint64_t my_rows = per_engine[k];
		if (!my_rows)
			continue;
		uint64_t start = umax(ready, umax(s->dma_free[k], s->queue_last[q][k]));
		uint64_t fin = s->timed ? dma_slice_end(s, start, &sh, my_rows, read_addr, hbm_read,
							write_addr, hbm_write)
					: start;
		s->dma_free[k] = fin;
		s->queue_last[q][k] = fin;
		st->dma_busy_ps += fin - start;
		if (!nsim_busy_union_add(&s->dma_union, t, start, fin))
			return dm_fault_set(&s->r->fault, DM_FAULT_NOMEM, engine, (int)s->e[engine].pc, 0,
					    "DMA activity intervals");
		end = umax(end, fin);
		first = start < first ? start : first;
		used++;
	}
	end += s->timed ? ext_lat : 0;
	if (ext_dst) {
		uint64_t wlat = 0;
		if ((xk = nsim_ext_access(s->r, engine, pc, d, &d->dst, scatter, true, end, &wlat)))
			return xk;
		end += s->timed ? wlat : 0;
	}
	if (s->r->obs && s->r->obs->dma && used) {
		trc_dma_event ev = { s->r->core_id, (int)q, (int)used, in->u[0], d->name, first, end,
				     rows * row_bytes,
				     hbm_read ? rows * ((d->src.space == ISA_SPACE_HBM ? src_row : 0) + (rmw ? rmw_row : 0)) : 0,
				     hbm_write ? rows * dst_row : 0 };
		s->r->obs->dma(s->r->obs->ctx, &ev);
	}
	st->dma_transfers++;
	st->dma_bytes += rows * row_bytes;
	count_onchip(st, &d->src, rows * src_row, false);
	count_onchip(st, &d->dst, rows * dst_row, true);
	if (isa_dma_mode_indexed(d->mode))   /* the row indices, one word per row */
		count_onchip(st, &d->index, rows * isa_dtype_size(d->index.dtype), false);
	if (d->src.space == ISA_SPACE_HBM)
		st->hbm_read_bytes += rows * src_row;
	if (rmw)
		st->hbm_read_bytes += rows * rmw_row;
	else if (rmw_row)              /* an on-chip destination read back */
		count_onchip(st, &d->dst, rows * rmw_row, false);
	if (hbm_write)
		st->hbm_write_bytes += rows * dst_row;
	if (in->u[2] != ISA_SEM_NONE)
		push(s, end, EV_DMA_DONE, in->u[2], in->u[3]);
	return DM_OK;
}

/* -------------------------------------------------------------- engines */

/* Busy (active) time is the union of an engine's instruction intervals,
 * each from its start to its end -- its `latency`, when its results are
 * out, not only its issue interval: the profiler's ActiveTime ("processing
 * at least one instruction ... merging the intervals of all instructions
 * on the engine", SDK profile-schema-reference.rst; its instruction bars
 * outlast the issue interval, nki/img/how-to/v3-zoom.png).  Back-to-back
 * instructions overlap, so a stream counts its issue time plus one tail;
 * TensorE's LoadStationary overlapping a MultiplyMoving adds only what
 * sticks out.  The trace writer draws the same union, so its slices add up
 * to this. */
static void count_busy(sim *s, int k, int opcode, uint64_t start, uint64_t end)
{
	eng *e = &s->e[k];
	uint64_t from = umax(start, e->busy_until);
	if (end > from) {
		s->r->stats.engine_busy_ps[k] += end - from;
		s->r->stats.op_busy_ps[k][opcode] += end - from;
	}
	e->busy_until = umax(e->busy_until, end);
}

/* the bytes [b0, b1) of each partition an on-chip access pattern touches */
static void ap_region(const isa_ap *ap, pending_write *w)
{
	int64_t lo = 0, hi = 0;
	for (unsigned d = 0; d < ap->ndims && d < ISA_MAX_DIMS; d++) {
		int64_t ext = (int64_t)ap->stride[d] * ((int64_t)ap->size[d] - 1);
		lo += ext < 0 ? ext : 0;
		hi += ext > 0 ? ext : 0;
	}
	int64_t esz = isa_dtype_size(ap->dtype);
	int64_t b0 = (int64_t)ap->offset + lo * esz;
	w->space = ap->space;
	w->p0 = ap->start;
	w->p1 = ap->start + ap->nparts;
	w->b0 = b0 < 0 ? 0 : (uint64_t)b0;
	w->b1 = (uint64_t)((int64_t)ap->offset + (hi + 1) * esz);
}

static bool regions_overlap(const pending_write *a, const pending_write *b)
{
	return a->space == b->space && a->p0 < b->p1 && b->p0 < a->p1 && a->b0 < b->b1 && b->b0 < a->b1;
}

/*
 * An engine issues its stream back to back, but an instruction that reads
 * what an earlier one of the same engine writes waits until that result
 * leaves the pipeline (writes land in order, so overwriting waits for
 * nothing): "~100 cycles static overhead for
 * dependent or tiny Vector/Scalar instructions" and the 264-cycle dependent
 * ScalarE initiation interval (HARDWARE.md cost model, CALIBRATION C-09).
 * Returns the earliest start; forgets writes that have landed by then.
 */
static uint64_t after_own_writes(eng *e, const isa_instr *in, uint64_t start)
{
	if (!e->npw)                       /* the common case: nothing in flight */
		return start;
	for (int slot = 0; slot < ISA_MAX_AP; slot++) {
		if (!((in->ap_mask >> slot) & 1u) || in->ap[slot].space == ISA_SPACE_HBM ||
		    slot == ISA_AP_DST || slot == ISA_AP_AUX)
			continue;
		pending_write r;
		ap_region(&in->ap[slot], &r);
		for (uint32_t i = 0; i < e->npw; i++)
			if (e->pw[i].ready > start && regions_overlap(&e->pw[i], &r))
				start = e->pw[i].ready;
	}
	uint32_t n = 0;
	for (uint32_t i = 0; i < e->npw; i++)
		if (e->pw[i].ready > start)
			e->pw[n++] = e->pw[i];
	e->npw = n;
	return start;
}

static void note_own_writes(eng *e, const isa_instr *in, uint64_t ready)
{
	static const int written[] = { ISA_AP_DST, ISA_AP_AUX };
	for (unsigned j = 0; j < sizeof(written) / sizeof(written[0]); j++) {
		int slot = written[j];
		if (!((in->ap_mask >> slot) & 1u) || in->ap[slot].space == ISA_SPACE_HBM)
			continue;
		if (e->npw == NSIM_PENDING_WRITES) {    /* the oldest lands first */
			memmove(&e->pw[0], &e->pw[1], (NSIM_PENDING_WRITES - 1) * sizeof(e->pw[0]));
			e->npw--;
		}
		ap_region(&in->ap[slot], &e->pw[e->npw]);
		e->pw[e->npw++].ready = ready;
	}
}

static dm_fault_kind issue_compute(sim *s, int k, const isa_instr *in, uint64_t t)
{
	eng *e = &s->e[k];
	nsim_exec_stats *st = &s->r->stats;
	dm_cost c = dm_cost_of(s->chip, k, in, &s->cctx);
	uint64_t busy = cyc(s, k, c.busy), lat = cyc(s, k, c.latency);
	uint64_t start = t, flops = 0;

	if (k == ISA_ENGINE_TENSOR) {
		/* the sequencer moves on after one cycle; the units pace the work */
		if (in->opcode == ISA_OP_load_stationary) {
			start = umax(t, s->ls_done);
			if (s->ls_pending)          /* one stationary may wait ahead */
				start = umax(start, s->mm_free);
			else
				start = umax(start, s->last_mm_start);
			s->ls_done = start + busy;
			s->ls_pending = true;
			s->cctx.stat_m = (uint32_t)isa_ap_free_elems(&in->ap[ISA_AP_SRC]);
			s->cctx.stat_dtype = in->ap[ISA_AP_SRC].dtype;
			e->done_at = umax(e->done_at, start + lat);
		} else {
			start = umax(t, umax(s->mm_free, s->ls_done));
			s->mm_free = start + busy;
			if (in->opcode == ISA_OP_multiply_moving) {
				s->last_mm_start = start;
				s->ls_pending = false;
				uint64_t kk = in->ap[ISA_AP_SRC].nparts;
				if (isa_dtype_is_mx(in->ap[ISA_AP_SRC].dtype))
					kk *= 4;        /* four contraction values per element */
				flops = 2 * kk * s->cctx.stat_m * isa_ap_free_elems(&in->ap[ISA_AP_SRC]);
				st->matmul_flops += flops;
				st->matmul_instructions++;
			}
			e->done_at = umax(e->done_at, start + lat);
		}
		e->issue_at = t + cyc(s, k, 1);
	} else {
		/* v2: Vector/GpSimd take turns on SBUF, Vector/Scalar on PSUM */
		bool sb = false, ps = false;
		for (int slot = 0; slot < ISA_MAX_AP; slot++) {
			if (!((in->ap_mask >> slot) & 1u))
				continue;
			sb |= in->ap[slot].space == ISA_SPACE_SBUF;
			ps |= in->ap[slot].space == ISA_SPACE_PSUM;
		}
		bool use_sb = s->chip->sbuf_vector_gpsimd_shared && sb &&
			      (k == ISA_ENGINE_VECTOR || k == ISA_ENGINE_GPSIMD);
		bool use_ps = s->chip->psum_vector_scalar_shared && ps &&
			      (k == ISA_ENGINE_VECTOR || k == ISA_ENGINE_SCALAR);
		start = after_own_writes(e, in, start);
		if (use_sb)
			start = umax(start, s->sbuf_vg_free);
		if (use_ps)
			start = umax(start, s->psum_vs_free);
		if (use_sb)
			s->sbuf_vg_free = start + busy;
		if (use_ps)
			s->psum_vs_free = start + busy;
		e->issue_at = start + busy;
		e->done_at = umax(e->done_at, start + lat);
		note_own_writes(e, in, start + lat);
	}
	count_busy(s, k, in->opcode, start, start + lat);

	if (s->compute) {
		dm_fault_kind fk = dm_exec(s->r->core, &s->r->bind, k, e->pc, in, &s->r->fault);
		if (fk)
			return fk;
	}
	uint64_t bytes = 0;
	for (int slot = 0; slot < ISA_MAX_AP; slot++) {
		if (!((in->ap_mask >> slot) & 1u))
			continue;
		uint64_t b = ap_bytes(&in->ap[slot]);
		bool write = slot == ISA_AP_DST || slot == ISA_AP_AUX;
		bytes += b;
		count_onchip(st, &in->ap[slot], b, write);
		/* an accumulating matmul reads the PSUM it adds to */
		if (slot == ISA_AP_DST && in->opcode == ISA_OP_multiply_moving && (in->flags & ISA_FLAG_ACCUMULATE))
			count_onchip(st, &in->ap[slot], b, false);
	}
	/* the stationary's reads are its load_stationary's (SRC above) */
	report_instr(s, k, in, start, start + lat, bytes, flops);
	return DM_OK;
}

/* A fence's release: semaphores 0..n-1 become 0 at the release time, after
 * every update scheduled up to then (the event queue keeps insertion order
 * at equal times) and before any engine goes on. */
static void release_barrier(sim *s)
{
	if (s->barrier_reset)
		push(s, s->barrier_time, EV_SEM_RESET, s->barrier_reset, 0);
	s->barrier_reset = 0;
	for (int k = 0; k < ISA_NUM_ENGINES; k++) {
		if (s->e[k].state != ENG_WAIT_BARRIER)
			continue;
		s->e[k].state = ENG_READY;
		s->e[k].issue_at = umax(s->e[k].issue_at, s->barrier_time);
		push(s, s->barrier_time, EV_ENGINE, (uint32_t)k, 0);
	}
	s->barrier_waiting = 0;
	s->barrier_time = 0;
}

/* Issues engine k's instructions from time t until it blocks or must wait. */
static dm_fault_kind run_engine(sim *s, int k, uint64_t t)
{
	eng *e = &s->e[k];
	nsim_exec_stats *st = &s->r->stats;

	while (e->state == ENG_READY && e->pc < e->n) {
		const isa_instr *in = &e->stream[e->pc];
		if (e->issue_at > t) {
			push(s, e->issue_at, EV_ENGINE, (uint32_t)k, 0);
			return DM_OK;
		}
		switch (in->opcode) {
		case ISA_OP_sem_wait:
			if (!sem_holds(s, in)) {
				e->state = ENG_WAIT_SEM;
				e->wait_sem = in->u[0];
				e->wait_from = t;
				return DM_OK;
			}
			e->issue_at = t + cyc(s, k, 1);
			break;
		case ISA_OP_sem_signal:
			/* lands when every earlier instruction of this engine has */
			if (in->flags & (ISA_FLAG_PEER | ISA_FLAG_REMOTE)) {
				if (!push_remote_sem(s, k, in, umax(t, e->done_at)))
					return s->fault;
			} else {
				push(s, umax(t, e->done_at), EV_SEM, in->u[0],
				     ((uint64_t)in->e[0] << 32) | in->u[1]);
			}
			e->issue_at = t + cyc(s, k, 1);
			break;
		case ISA_OP_branch:
			if (in->u[1] != 64 && !s->compute)
				return dm_fault_set(&s->r->fault, DM_FAULT_CONTROL, k, e->pc, 0,
						    "a branch on register %u: timing-only mode does not compute "
						    "the data it depends on (run in full mode)", in->u[1]);
			e->issue_at = t + cyc(s, k, 1);
			e->done_at = umax(e->done_at, e->issue_at);
			report_instr(s, k, in, t, e->issue_at, 0, 0);
			st->engine_instructions[k]++;
			st->op_instructions[k][in->opcode]++;
			if (!dm_branch_taken(s->r->core, k, in)) {
				e->pc++;
				continue;
			}
			if (in->u[0] <= e->pc && ++e->back_branches > NSIM_MAX_BACK_BRANCHES)
				return dm_fault_set(&s->r->fault, DM_FAULT_CONTROL, k, e->pc, 0,
						    "more than %u backward branches on this engine in one run (a loop "
						    "whose register never says stop?)", NSIM_MAX_BACK_BRANCHES);
			e->pc = in->u[0];
			continue;
		case ISA_OP_fence:      /* a barrier that also zeroes semaphores on release */
			s->barrier_reset = s->barrier_reset > in->u[0] ? s->barrier_reset : in->u[0];
			/* fall through */
		case ISA_OP_barrier:
			e->pc++;
			st->engine_instructions[k]++;
			st->op_instructions[k][in->opcode]++;
			e->state = ENG_WAIT_BARRIER;
			s->barrier_time = umax(s->barrier_time, umax(t, e->done_at));
			if (++s->barrier_waiting == s->barrier_needed)
				release_barrier(s);
			return DM_OK;
		case ISA_OP_end:
			e->pc++;
			st->engine_instructions[k]++;
			st->op_instructions[k][in->opcode]++;
			e->state = ENG_DONE;
			e->done_at = umax(e->done_at, t);
			return DM_OK;
		case ISA_OP_reg_load:
		case ISA_OP_reg_alu:
		case ISA_OP_reg_store: {
			/* the sequencer's own work: a cycle, no engine pipeline */
			if (s->compute) {
				dm_fault_kind fk = dm_exec(s->r->core, &s->r->bind, k, e->pc, in, &s->r->fault);
				if (fk)
					return fk;
			}
			if (in->opcode != ISA_OP_reg_alu)
				count_onchip(st, &in->ap[in->opcode == ISA_OP_reg_load ? ISA_AP_SRC : ISA_AP_DST], 4,
					     in->opcode == ISA_OP_reg_store);
			e->issue_at = t + cyc(s, k, 1);
			e->done_at = umax(e->done_at, e->issue_at);
			report_instr(s, k, in, t, e->issue_at, 0, 0);
			break;
		}
		case ISA_OP_nop:
			/* a deliberate delay keeps the engine occupied: counted busy,
			 * so a track's slices add up to the engine's busy time */
			e->issue_at = t + cyc(s, k, in->u[0]);
			count_busy(s, k, in->opcode, t, e->issue_at);
			report_instr(s, k, in, t, e->issue_at, 0, 0);
			break;
		case ISA_OP_dma_copy: {
			dm_cost c = dm_cost_of(s->chip, k, in, &s->cctx);
			dm_fault_kind fk = issue_dma(s, k, in, t);
			if (fk)
				return fk;
			e->issue_at = t + cyc(s, k, c.busy);
			count_busy(s, k, in->opcode, t, e->issue_at);
			report_instr(s, k, in, t, e->issue_at, 0, 0);
			break;
		}
		default: {
			dm_fault_kind fk = issue_compute(s, k, in, t);
			if (fk)
				return fk;
			break;
		}
		}
		e->pc++;
		st->engine_instructions[k]++;
		st->op_instructions[k][in->opcode]++;
	}
	return DM_OK;
}

static void describe_deadlock(sim *s)
{
	char msg[256];
	size_t n = (size_t)snprintf(msg, sizeof(msg), "semaphore deadlock: every engine waits;");
	for (int k = 0; k < ISA_NUM_ENGINES && n < sizeof(msg); k++) {
		eng *e = &s->e[k];
		if (e->state == ENG_WAIT_SEM) {
			const isa_instr *in = &e->stream[e->pc];
			n += (size_t)snprintf(msg + n, sizeof(msg) - n,
					      " %s at instruction %u waits sem %u %s %u (now %lld);",
					      isa_engine_name(k), e->pc, in->u[0], isa_alu_name(in->e[0]),
					      in->u[1], (long long)s->sem[in->u[0]]);
		} else if (e->state == ENG_WAIT_BARRIER) {
			n += (size_t)snprintf(msg + n, sizeof(msg) - n, " %s at barrier (instruction %u);",
					      isa_engine_name(k), e->pc - 1);
		}
	}
	int first = 0;
	while (first < ISA_NUM_ENGINES && s->e[first].state != ENG_WAIT_SEM &&
	       s->e[first].state != ENG_WAIT_BARRIER)
		first++;
	s->fault = dm_fault_set(&s->r->fault, DM_FAULT_DEADLOCK, first, s->e[first].pc, 0, "%s", msg);
}

static void sim_start(sim *s, nsim_run *r, nsim_sched *q, uint32_t idx)
{
	memset(&r->stats, 0, sizeof(r->stats));
	memset(&r->fault, 0, sizeof(r->fault));
	s->r = r;
	s->q = q;
	s->idx = idx;
	s->chip = r->core->chip;
	s->timed = r->mode != NSIM_MODE_FUNCTIONAL;
	s->compute = r->mode != NSIM_MODE_TIMING;
	if (s->compute)
		dm_core_reset(r->core);
	uint64_t t0 = r->start_ps + (s->timed ? r->startup_ps : 0);
	for (int k = 0; k < ISA_NUM_ENGINES; k++) {
		eng *e = &s->e[k];
		e->stream = r->prog->stream[k];
		e->n = r->prog->n_instr[k];
		e->issue_at = e->done_at = e->busy_until = t0;
		e->wait_from = e->waited_ps = 0;
		e->npw = 0;
		e->back_branches = 0;
		if (!e->n)
			continue;
		e->state = ENG_READY;
		s->barrier_needed++;
		push(s, t0, EV_ENGINE, (uint32_t)k, 0);
	}
	s->end = t0;
}

static void sim_event(sim *s, const nsim_event *ev, uint64_t *events)
{
	nsim_run *r = s->r;
	s->end = umax(s->end, ev->time);
	if (r->progress && (++*events & 255) == 0) {
		uint64_t n = 0;
		for (int k = 0; k < ISA_NUM_ENGINES; k++)
			n += r->stats.engine_instructions[k];
		r->progress(r->progress_ctx, n, ev->time);
	}
	switch (ev->kind & 0xffu) {
	case EV_ENGINE:
		if (s->e[ev->a].state == ENG_READY)
			s->fault = run_engine(s, (int)ev->a, ev->time);
		break;
	case EV_SEM:
		sem_apply(s, ev->a, (int)(ev->b >> 32), (int64_t)(uint32_t)ev->b, -1, ev->time);
		break;
	case EV_DMA_DONE:
		sem_apply(s, ev->a, ISA_SEMOP_ADD, (int64_t)ev->b, -1, ev->time);
		break;
	case EV_SEM_RESET:
		for (uint32_t i = 0; i < ev->a; i++)
			if (s->sem[i])
				sem_apply(s, i, ISA_SEMOP_SET, 0, -1, ev->time);
		break;
	}
}

static void sim_finish(sim *s)
{
	nsim_run *r = s->r;
	if (!s->fault) {
		for (int k = 0; k < ISA_NUM_ENGINES; k++) {
			if (s->e[k].state == ENG_WAIT_SEM || s->e[k].state == ENG_WAIT_BARRIER) {
				describe_deadlock(s);
				break;
			}
			s->end = umax(s->end, s->e[k].done_at);
		}
	}
	if (s->timed)
		s->end += r->teardown_ps;
	r->stats.total_ps = s->end - r->start_ps;
	r->stats.dma_active_ps = nsim_busy_union_total(&s->dma_union);
	nsim_busy_union_free(&s->dma_union);
	for (int k = 0; k < ISA_NUM_ENGINES; k++)
		r->stats.instructions += r->stats.engine_instructions[k];
}

/*
 * Several cores in one event loop: their engines interleave in simulated
 * time (not host time), so cores sharing a memory-timing model contend for
 * it deterministically.  Runs 2j and 2j+1 are paired cores (LNC=2): peer
 * semaphore updates and peer DMAs go between them; a remote semaphore
 * update names its run (a collective's rank).  The first fault on any core
 * stops every core.
 */
dm_fault_kind nsim_cores_run(nsim_run **runs, int n)
{
	if (n < 1 || n > 256)
		return DM_FAULT_NOMEM;
	sim *sims = calloc((size_t)n, sizeof(*sims));
	if (!sims)
		return dm_fault_set(&runs[0]->fault, DM_FAULT_NOMEM, -1, -1, 0, "simulator state");
	nsim_sched q;
	nsim_sched_init(&q);
	uint64_t t0 = UINT64_MAX;
	for (int i = 0; i < n; i++)
		t0 = runs[i]->start_ps < t0 ? runs[i]->start_ps : t0;
	q.now = t0;
	for (int i = 0; i < n; i++) {
		sim_start(&sims[i], runs[i], &q, (uint32_t)i);
		sims[i].all = sims;
		sims[i].nall = (uint32_t)n;
	}

	nsim_event ev;
	uint64_t events = 0;
	dm_fault_kind f = DM_OK;
	while (!f && nsim_sched_pop(&q, &ev)) {
		sim *s = &sims[ev.kind >> 8];
		sim_event(s, &ev, &events);
		f = s->fault;
	}
	for (int i = 0; i < n; i++) {
		sim_finish(&sims[i]);
		if (!f)
			f = sims[i].fault;
	}
	nsim_sched_free(&q);
	free(sims);
	return f;
}

dm_fault_kind nsim_core_run(nsim_run *r)
{
	return nsim_cores_run(&r, 1);
}
