/*
 * runtime_exec.c -- the runtime C API's execution half: binding tensor sets
 * to a loaded program, running one or several cores, turning simulated
 * faults into status codes, per-model statistics and the profile trace.
 */
#define _GNU_SOURCE
#include "hostpool.h"
#include "runtime_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --------------------------------------------------------------- execute */

typedef struct progress_state {
	struct timespec start, last;
	bool            shown;
} progress_state;

static double since(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) * 1e-9;
}

/* after one host second, a line on stderr four times a second */
static void show_progress(void *ctx, uint64_t instructions, uint64_t now_ps)
{
	progress_state *ps = ctx;
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	if (since(&ps->start, &t) < 1.0 || (ps->shown && since(&ps->last, &t) < 0.25))
		return;
	ps->last = t;
	ps->shown = true;
	fprintf(stderr, "\r[neuronsim] %llu instructions retired, %.3f us simulated   ",
		(unsigned long long)instructions, (double)now_ps * 1e-6);
	fflush(stderr);
}

static nsim_status bind_tensors(nsim_model *m, const nsim_tensor_set *in, nsim_tensor_set *out)
{
	const isa_program *p = m->prog;
	for (uint32_t i = 0; i < p->n_tensors; i++) {
		const isa_tensor *t = &p->tensors[i];
		uint64_t need = isa_tensor_bytes(t);
		nsim_tensor *bound = NULL;
		switch (t->kind) {
		case ISA_TK_INPUT:
			bound = rt_set_find(in, t->name);
			if (!bound)
				bound = rt_set_find(out, t->name);   /* in-place */
			break;
		case ISA_TK_OUTPUT:
			bound = rt_set_find(out, t->name);
			break;
		case ISA_TK_INTERNAL:
			m->ext_fn[i] = NULL;
			m->addr[i] = m->scratch->addr + t->offset;
			m->bytes[i] = need;
			continue;
		case ISA_TK_CONST:
			m->ext_fn[i] = NULL;
			m->addr[i] = m->consts->addr + t->offset;
			m->bytes[i] = need;
			continue;
		}
		if (!bound)
			return rt_fail(NSIM_EXEC_BAD_INPUT, "%s tensor '%s' not in the %s set",
				    t->kind == ISA_TK_INPUT ? "input" : "output", t->name,
				    t->kind == ISA_TK_INPUT ? "input" : "output");
		if (bound->size < need)
			return rt_fail(NSIM_EXEC_BAD_INPUT, "tensor '%s' needs %llu bytes, the bound buffer has %llu",
				    t->name, (unsigned long long)need, (unsigned long long)bound->size);
		m->addr[i] = bound->addr;
		m->bytes[i] = bound->size;
		m->ext_fn[i] = bound->ext_fn;
		m->ext_ctx[i] = bound->ext_ctx;
	}
	return NSIM_SUCCESS;
}

static nsim_status fault_status(const dm_fault *f, const nsim_model *m)
{
	const char *eng = isa_engine_name(f->engine);
	char where[96] = "";
	if (eng && f->index >= 0 && (uint64_t)f->index < m->prog->n_instr[f->engine])
		snprintf(where, sizeof(where), "%s engine, instruction %lld (%s): ", eng,
			 (long long)f->index, isa_op_name(m->prog->stream[f->engine][f->index].opcode));
	switch (f->kind) {
	case DM_FAULT_OOB:
		return rt_fail(NSIM_EXEC_OOB, "%sout-of-bounds access: %s", where, f->msg);
	case DM_FAULT_UNINIT_PSUM:
		return rt_fail(NSIM_EXEC_ERR, "%s%s", where, f->msg);
	case DM_FAULT_NUMERIC:
		return rt_fail(NSIM_EXEC_NUM_ERR, "%snumerical error: %s", where, f->msg);
	case DM_FAULT_DEADLOCK:
		return rt_fail(NSIM_TIMEOUT, "%s", f->msg);
	case DM_FAULT_NO_PEER:
	case DM_FAULT_CONTROL:
		return rt_fail(NSIM_EXEC_ERR, "%s%s", where, f->msg);
	case DM_FAULT_NOMEM:
		return rt_fail(NSIM_RESOURCE, "%shost memory: %s", where, f->msg);
	default:
		return rt_fail(NSIM_FAILURE, "%s%s", where, f->msg);
	}
}

static nsim_status prepare_core(core_state *cs, int core)
{
	if (cs->ready)
		return NSIM_SUCCESS;
	if (dm_core_init(&cs->dm, rt.chip))
		return rt_fail(NSIM_RESOURCE, "host memory for core %d SBUF/PSUM", core);
	cs->ready = true;
	return NSIM_SUCCESS;
}

static void setup_run(nsim_run *r, nsim_model *m, core_state *cs, nsim_hbm_run *hbm,
		      uint64_t start, progress_state *prog)
{
	memset(r, 0, sizeof(*r));
	r->core = &cs->dm;
	r->core_id = m->core;
	r->prog = m->prog;
	r->bind.prog = m->prog;
	r->bind.tensor_addr = m->addr;
	r->bind.tensor_bytes = m->bytes;
	r->ext_fn = m->ext_fn;
	r->ext_ctx = m->ext_ctx;
	r->bind.hbm.map = rt_hbm_map;
	r->bind.check_numerics = rt.check_numerics;
	if (nsim_hostpool_threads() > 1)
		r->bind.par.run = nsim_hostpool_run;
	r->mode = rt.mode;
	r->mem.ctx = hbm;
	r->mem.access = nsim_hbm_access;
	r->start_ps = start;
	if (rt.progress && prog) {
		clock_gettime(CLOCK_MONOTONIC, &prog->start);
		r->progress = show_progress;
		r->progress_ctx = prog;
	}
}

static void report_program(nsim_run *r, const nsim_model *m, const char *label)
{
	if (r->obs && r->obs->program) {
		trc_program_event pe = { m->core, label, m->name, r->start_ps, r->start_ps + r->stats.total_ps,
					 m->sbuf_bytes, m->psum_bytes };
		r->obs->program(r->obs->ctx, &pe);
	}
}

static nsim_status execute(nsim_model *const *models, const nsim_tensor_set *const *ins,
			   nsim_tensor_set *const *outs, int n, const nsim_exec_options *opt);

nsim_status nsim_execute(nsim_model *m, const nsim_tensor_set *in, nsim_tensor_set *out)
{
	return execute(&m, &in, &out, 1, NULL);
}

nsim_status nsim_execute_ex(nsim_model *m, const nsim_tensor_set *in, nsim_tensor_set *out,
			    const nsim_exec_options *opt)
{
	return execute(&m, &in, &out, 1, opt);
}

nsim_status nsim_execute_multi(nsim_model *const *models, const nsim_tensor_set *const *ins,
			       nsim_tensor_set *const *outs, int n)
{
	return execute(models, ins, outs, n, NULL);
}

nsim_status nsim_execute_multi_ex(nsim_model *const *models, const nsim_tensor_set *const *ins,
				  nsim_tensor_set *const *outs, int n, const nsim_exec_options *opt)
{
	return execute(models, ins, outs, n, opt);
}

/*
 * Programs on several distinct cores in one simulated timeline, starting
 * together at the latest of their cores' clocks, sharing the chip's memory
 * timing (so HBM bandwidth is divided between them).  Core locks are taken
 * in core order so concurrent callers cannot deadlock.
 */
static nsim_status execute(nsim_model *const *models, const nsim_tensor_set *const *ins,
			   nsim_tensor_set *const *outs, int n, const nsim_exec_options *opt)
{
	if (!rt.init)
		return rt_fail(NSIM_UNINITIALIZED, "nsim_init has not been called");
	if (n < 1 || n > rt.ncores || !models)
		return rt_fail(NSIM_INVALID, "nsim_execute_multi: %d models for %d cores", n, rt.ncores);
	int order[MAX_CORES];
	for (int i = 0; i < n; i++) {
		if (!models[i])
			return rt_fail(NSIM_INVALID_HANDLE, "nsim_execute: no model");
		for (int j = 0; j < i; j++)
			if (models[j]->core == models[i]->core)
				return rt_fail(NSIM_INVALID, "nsim_execute_multi: two models on core %d",
					    models[i]->core);
		order[i] = i;
	}
	for (int i = 1; i < n; i++)                 /* insertion sort by core */
		for (int j = i; j > 0 && models[order[j]]->core < models[order[j - 1]]->core; j--) {
			int t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (int i = 0; i < n; i++)
		pthread_mutex_lock(&rt.cores[models[order[i]]->core].lock);

	nsim_status st = NSIM_SUCCESS;
	nsim_run *runs = calloc((size_t)n, sizeof(*runs));
	nsim_run **rp = calloc((size_t)n, sizeof(*rp));
	if (!runs || !rp) {
		st = rt_fail(NSIM_RESOURCE, "host memory");
		goto unlock;
	}
	uint64_t start = opt ? opt->not_before_ps : 0;
	for (int i = 0; i < n; i++) {
		nsim_model *m = models[i];
		core_state *cs = &rt.cores[m->core];
		if ((st = bind_tensors(m, ins ? ins[i] : NULL, outs ? outs[i] : NULL)) ||
		    (st = prepare_core(cs, m->core)))
			goto unlock;
		start = cs->now_ps > start ? cs->now_ps : start;
	}
	/* the HBM model (and its calibration cache) serves one execution at a time */
	pthread_mutex_lock(&rt.hbm_lock);
	nsim_hbm_run hbm;
	nsim_hbm_run_begin(&hbm, &rt.hbm_model, start);
	progress_state prog = { 0 };
	bool compute = false;           /* timing-only, but the run's branches need the values */
	for (int i = 0; i < n && rt.mode == NSIM_MODE_TIMING && opt && (opt->flags & NSIM_EXEC_DATA_CONTROL); i++)
		compute |= models[i]->data_control;
	for (int i = 0; i < n; i++) {
		setup_run(&runs[i], models[i], &rt.cores[models[i]->core], &hbm, start,
			  i == 0 ? &prog : NULL);
		if (compute)
			runs[i].mode = NSIM_MODE_FULL;
		if (opt && (opt->flags & NSIM_EXEC_STANDALONE)) {
			runs[i].startup_ps = rt.chip->exec_startup_ps;
			runs[i].teardown_ps = rt.chip->exec_teardown_ps;
		}
		rp[i] = &runs[i];
	}

	pthread_mutex_lock(&rt.profile_lock);
	const trc_observer *obs = rt_profile_observer();
	const char *label = opt && opt->label ? opt->label : NULL;
	for (int i = 0; i < n; i++)
		runs[i].obs = obs;
	dm_fault_kind fk = nsim_cores_run(rp, n);
	for (int i = 0; i < n; i++) {
		report_program(&runs[i], models[i], label);
		if (rt.profiling)
			rt_profile_record(&runs[i].stats, runs[i].start_ps, label ? label : models[i]->name);
	}
	if (obs)
		nsim_hbm_run_report(&hbm, obs);
	pthread_mutex_unlock(&rt.profile_lock);
	nsim_hbm_run_end(&hbm);
	pthread_mutex_unlock(&rt.hbm_lock);
	if (prog.shown)
		fputc('\n', stderr);

	for (int i = 0; i < n; i++) {
		nsim_model *m = models[i];
		rt.cores[m->core].now_ps = start + runs[i].stats.total_ps;
		m->last = runs[i].stats;
		if (fk && runs[i].fault.kind && st == NSIM_SUCCESS)
			st = fault_status(&runs[i].fault, m);
	}
	if (fk && st == NSIM_SUCCESS)
		st = rt_fail(NSIM_FAILURE, "execution stopped by a fault");
unlock:
	for (int i = n - 1; i >= 0; i--)
		pthread_mutex_unlock(&rt.cores[models[order[i]]->core].lock);
	free(runs);
	free(rp);
	return st;
}

nsim_status nsim_model_stats(const nsim_model *m, nsim_exec_stats *out)
{
	if (!m)
		return rt_fail(NSIM_INVALID_HANDLE, "nsim_model_stats: no model");
	*out = m->last;
	return NSIM_SUCCESS;
}
