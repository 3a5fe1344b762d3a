/*
 * profile.c -- runtime profiling: between nsim_profile_start and stop, every
 * execution goes to a trace writer (traces/writer.h) and into a summary
 * (traces/summary.h) written at stop.  NEURON_RT_INSPECT_ENABLE=1 profiles the
 * whole process into NEURON_RT_INSPECT_OUTPUT_DIR, as the Neuron runtime's
 * inspect mode does; the files are completed at exit.
 */
#include "runtime_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ROWS 4096   /* distinct labels in the summary; later ones share "(other)" */

struct rt_profile {
	trc_writer      *trace;
	char            *summary_path;
	nsim_exec_stats  total;
	uint64_t         programs;
	uint64_t         first_ps, last_ps;
	trc_summary_row *rows;
	int              nrows;
};

const trc_observer *rt_profile_observer(void)
{
	return rt.profiling && rt.profile->trace ? &rt.profile->trace->obs : NULL;
}

/* the row of `label`; past MAX_ROWS distinct labels, the shared "(other)" row */
static trc_summary_row *row_for(struct rt_profile *p, const char *label)
{
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < p->nrows; i++)
			if (strncmp(p->rows[i].label, label, sizeof(p->rows[i].label) - 1) == 0)
				return &p->rows[i];
		if (p->nrows < MAX_ROWS || (pass == 1 && p->nrows == MAX_ROWS))
			break;
		label = "(other)";
	}
	trc_summary_row *r = &p->rows[p->nrows++];
	snprintf(r->label, sizeof(r->label), "%s", label);
	return r;
}

void rt_profile_record(const nsim_exec_stats *st, uint64_t start_ps, const char *label)
{
	struct rt_profile *p = rt.profile;
	if (!p->programs || start_ps < p->first_ps)
		p->first_ps = start_ps;
	if (start_ps + st->total_ps > p->last_ps)
		p->last_ps = start_ps + st->total_ps;
	p->programs++;
	rt_stats_add(&p->total, st);
	trc_summary_row *r = row_for(p, label);
	r->count++;
	r->time_ps += st->total_ps;
	r->flops += st->matmul_flops;
	r->hbm_bytes += st->hbm_read_bytes + st->hbm_write_bytes;
}

static void free_profile(struct rt_profile *p)
{
	if (!p)
		return;
	free(p->summary_path);
	free(p->rows);
	free(p);
}

/* summary rows by time, largest first (ties by label: deterministic) */
static int by_time(const void *a, const void *b)
{
	const trc_summary_row *x = a, *y = b;
	if (x->time_ps != y->time_ps)
		return x->time_ps < y->time_ps ? 1 : -1;
	return strcmp(x->label, y->label);
}

static uint64_t env_max_bytes(void)
{
	const char *e = getenv("NEURON_SIM_TRACE_MAX_MB");
	if (!e || !*e)
		return 0;
	char *end = NULL;
	unsigned long long mb = strtoull(e, &end, 10);
	return end && !*end && mb > 0 && mb < (1ull << 40) ? (uint64_t)mb << 20 : 0;
}

nsim_status nsim_profile_start_opts(const nsim_profile_options *o)
{
	if (!o || (!o->trace_path && !o->summary_path))
		return rt_fail(NSIM_INVALID, "nsim_profile_start_opts: neither a trace nor a summary path");
	if (o->detail < 0 || o->detail > 2)
		return rt_fail(NSIM_INVALID,
			       "nsim_profile_start_opts: detail %d (0 instruction, 1 program, 2 utilization)",
			       o->detail);
	pthread_mutex_lock(&rt.profile_lock);
	nsim_status st = NSIM_SUCCESS;
	struct rt_profile *p = NULL;
	if (rt.profiling) {
		st = rt_fail(NSIM_INVALID, "a profile is already being written");
		goto unlock;
	}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->rows = calloc(MAX_ROWS + 1, sizeof(*p->rows))) ||
	    (o->summary_path && !(p->summary_path = strdup(o->summary_path)))) {
		st = rt_fail(NSIM_RESOURCE, "host memory");
		goto free_p;
	}
	if (o->trace_path) {
		trc_options to = { TRC_FORMAT_AUTO, o->detail,
				   o->max_bytes ? o->max_bytes : env_max_bytes(), NULL, 0, 0 };
		if (rt.chip) {
			trc_device dev = rt_trc_device(rt.chip);
			to.target = dev.target;
			to.peak_flops_per_second = dev.peak_flops_per_second;
			to.hbm_bytes_per_second = dev.hbm_bytes_per_second;
		}
		if (trc_writer_open(&p->trace, o->trace_path, &to)) {
			st = rt_fail(NSIM_INVALID, "cannot create trace '%s': %s", o->trace_path, strerror(errno));
			goto free_p;
		}
	}
	if (p->summary_path) {            /* fail now, not after the run */
		FILE *f = fopen(p->summary_path, "w");
		if (!f) {
			st = rt_fail(NSIM_INVALID, "cannot create summary '%s': %s", p->summary_path,
				     strerror(errno));
			goto close_trace;
		}
		fclose(f);
	}
	rt.profile = p;
	rt.profiling = true;
	goto unlock;

close_trace:
	trc_writer_close(p->trace);
free_p:
	free_profile(p);
unlock:
	pthread_mutex_unlock(&rt.profile_lock);
	return st;
}

nsim_status nsim_profile_start(const char *trace_path)
{
	nsim_profile_options o = { trace_path, NULL, 0, 0 };
	if (!trace_path)
		return rt_fail(NSIM_INVALID, "nsim_profile_start: no trace path");
	return nsim_profile_start_opts(&o);
}

int nsim_profile_active(void)
{
	pthread_mutex_lock(&rt.profile_lock);
	int on = rt.profiling;
	pthread_mutex_unlock(&rt.profile_lock);
	return on;
}

nsim_status nsim_profile_stop(void)
{
	pthread_mutex_lock(&rt.profile_lock);
	nsim_status st = NSIM_SUCCESS;
	struct rt_profile *p = rt.profile;
	if (!rt.profiling)
		goto unlock;
	if (p->trace && trc_writer_close(p->trace))
		st = rt_fail(NSIM_FAILURE, "error writing the trace file");
	if (p->summary_path) {
		FILE *f = fopen(p->summary_path, "w");
		qsort(p->rows, (size_t)p->nrows, sizeof(*p->rows), by_time);
		trc_device dev = rt.chip ? rt_trc_device(rt.chip) : (trc_device){ 0 };
		int rc = f && rt.chip ? trc_summary_write(f, &dev, &p->total, p->last_ps - p->first_ps,
							  p->programs, p->rows, p->nrows)
				      : -1;
		if ((f && fclose(f) != 0) || rc)
			st = rt_fail(NSIM_FAILURE, "error writing the summary '%s'", p->summary_path);
	}
	free_profile(p);
	rt.profile = NULL;
	rt.profiling = false;
unlock:
	pthread_mutex_unlock(&rt.profile_lock);
	return st;
}

nsim_status nsim_profile_range(int core, const char *name, uint64_t start_ps, uint64_t end_ps, int depth)
{
	if (!name || end_ps < start_ps || depth < 0 || depth >= TRC_MAX_RANGE_DEPTH || core < 0 ||
	    core >= TRC_MAX_CORES)
		return rt_fail(NSIM_INVALID, "nsim_profile_range: bad range '%s' on core %d [%llu, %llu] depth %d",
			       name ? name : "(null)", core, (unsigned long long)start_ps,
			       (unsigned long long)end_ps, depth);
	pthread_mutex_lock(&rt.profile_lock);
	const trc_observer *o = rt_profile_observer();
	if (o && o->range) {
		trc_range_event e = { core, name, start_ps, end_ps, depth };
		o->range(o->ctx, &e);
	}
	pthread_mutex_unlock(&rt.profile_lock);
	return NSIM_SUCCESS;
}

nsim_status nsim_profile_collective(int core, const char *name, uint64_t start_ps, uint64_t end_ps, uint64_t bytes,
				    const char *algorithm, const char *peers)
{
	if (!name || end_ps < start_ps || core < 0 || core >= TRC_MAX_CORES)
		return rt_fail(NSIM_INVALID, "nsim_profile_collective: bad collective '%s' on core %d [%llu, %llu]",
			       name ? name : "(null)", core, (unsigned long long)start_ps, (unsigned long long)end_ps);
	pthread_mutex_lock(&rt.profile_lock);
	const trc_observer *o = rt_profile_observer();
	if (o && o->collective) {
		trc_collective_event e = { core, name, start_ps, end_ps, bytes, algorithm, peers };
		o->collective(o->ctx, &e);
	}
	pthread_mutex_unlock(&rt.profile_lock);
	return NSIM_SUCCESS;
}

static void stop_at_exit(void)
{
	nsim_profile_stop();
}

/* NEURON_RT_INSPECT_ENABLE=1: trace and summary of the whole process */
nsim_status rt_profile_from_env(void)
{
	const char *en = getenv("NEURON_RT_INSPECT_ENABLE");
	if (!en || strcmp(en, "1") != 0)
		return NSIM_SUCCESS;
	const char *dir = getenv("NEURON_RT_INSPECT_OUTPUT_DIR");
	if (!dir || !*dir)
		dir = "./output";
	if (mkdir(dir, 0777) && errno != EEXIST)
		return rt_fail(NSIM_INVALID, "NEURON_RT_INSPECT_OUTPUT_DIR '%s': %s", dir, strerror(errno));
	const char *det = getenv("NEURON_SIM_TRACE_DETAIL");
	int detail = 0;
	if (det && *det) {
		if (!strcmp(det, "program"))
			detail = 1;
		else if (!strcmp(det, "utilization"))
			detail = 2;
		else if (strcmp(det, "instruction"))
			return rt_fail(NSIM_INVALID,
				       "NEURON_SIM_TRACE_DETAIL='%s' (instruction, program or utilization)", det);
	}
	char trace[4096], summary[4096];
	snprintf(trace, sizeof(trace), "%s/neuronsim_%ld.pftrace", dir, (long)getpid());
	snprintf(summary, sizeof(summary), "%s/neuronsim_%ld_summary.json", dir, (long)getpid());
	nsim_profile_options o = { trace, summary, detail, 0 };
	nsim_status st = nsim_profile_start_opts(&o);
	static int registered;
	if (st == NSIM_SUCCESS && !registered++)
		atexit(stop_at_exit);
	if (st == NSIM_SUCCESS)
		fprintf(stderr, "neuronsim: NEURON_RT_INSPECT_ENABLE: writing %s and %s\n", trace, summary);
	return st;
}
