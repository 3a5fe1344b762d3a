/*
 * runtime.c -- the runtime C API (include/neuronsim/runtime.h) over the
 * simulated chip: device memory, program load, tensor sets, execute,
 * statistics and profiling.
 *
 * Simulated HBM is one address space per chip, reserved with MAP_NORESERVE
 * so a 96 GiB trn2 costs host memory only for the pages written.  Device
 * addresses start at 4 KiB (0 is never a tensor).  Each core keeps its own
 * device clock: an execution starts where the core's previous one ended.
 */
#define _GNU_SOURCE
#include "neuronsim/runtime.h"

#include "chrome.h"
#include "coresim.h"
#include "hbm_timing.h"

#include <cblas.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>

#define MAX_CORES   64
#define ALIGN       64u
#define BASE_ADDR   4096u

struct nsim_tensor {
	uint64_t addr, size;
	int      core;
	bool     slice;            /* a view of another tensor's bytes */
	char     name[64];
};

typedef struct set_entry {
	char         name[ISA_MAX_NAME + 1];
	nsim_tensor *t;
} set_entry;

struct nsim_tensor_set {
	set_entry *e;
	uint32_t   n, cap;
};

struct nsim_model {
	isa_program    *prog;
	int             core;          /* visible core index */
	nsim_tensor    *scratch;       /* INTERNAL tensors */
	nsim_tensor    *consts;        /* CONST tensors' data */
	uint64_t       *addr;          /* per tensor, filled at execute */
	uint64_t       *bytes;
	nsim_exec_stats last;
	char            name[64];
};

typedef struct free_blk {
	uint64_t off, size;
} free_blk;

typedef struct core_state {
	pthread_mutex_t lock;
	dm_core         dm;
	bool            ready;
	uint64_t        now_ps;     /* this core's device clock */
} core_state;

static struct {
	pthread_mutex_t lock;
	bool            init;
	const dm_chip  *chip;
	nsim_mode       mode;
	bool            check_numerics;
	bool            progress;
	int             log_level;        /* 0 error, 1 warn, 2 info, 3 debug */
	int             ncores;
	int             phys[MAX_CORES];  /* visible index -> physical core */
	uint8_t        *hbm;
	uint64_t        hbm_size;
	free_blk       *free;
	uint32_t        nfree, capfree;
	uint64_t        allocated;
	core_state      cores[MAX_CORES];
	pthread_mutex_t profile_lock;
	trc_chrome      profile;
	pthread_mutex_t hbm_lock;       /* one execution at a time uses the HBM model */
	nsim_hbm_chip   hbm_model;
	bool            profiling;
} rt = { .lock = PTHREAD_MUTEX_INITIALIZER, .profile_lock = PTHREAD_MUTEX_INITIALIZER,
	  .hbm_lock = PTHREAD_MUTEX_INITIALIZER };

static _Thread_local char last_error[512];

static nsim_status check_range(const nsim_tensor *t, uint64_t off, uint64_t size, const char *what);

static nsim_status fail(nsim_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static nsim_status fail(nsim_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	if (rt.log_level >= 1)
		fprintf(stderr, "neuronsim: %s: %s\n", nsim_status_name(st), last_error);
	return st;
}

const char *nsim_last_error(void)
{
	return last_error;
}

const char *nsim_status_name(nsim_status st)
{
	switch (st) {
	case NSIM_SUCCESS:        return "NSIM_SUCCESS";
	case NSIM_FAILURE:        return "NSIM_FAILURE";
	case NSIM_INVALID:        return "NSIM_INVALID";
	case NSIM_INVALID_HANDLE: return "NSIM_INVALID_HANDLE";
	case NSIM_RESOURCE:       return "NSIM_RESOURCE";
	case NSIM_TIMEOUT:        return "NSIM_TIMEOUT";
	case NSIM_UNINITIALIZED:  return "NSIM_UNINITIALIZED";
	case NSIM_EXEC_BAD_INPUT: return "NSIM_EXEC_BAD_INPUT";
	case NSIM_EXEC_NUM_ERR:   return "NSIM_EXEC_NUM_ERR";
	case NSIM_EXEC_ERR:       return "NSIM_EXEC_ERR";
	case NSIM_EXEC_NC_BUSY:   return "NSIM_EXEC_NC_BUSY";
	case NSIM_EXEC_OOB:       return "NSIM_EXEC_OOB";
	default:                  return "NSIM_UNKNOWN";
	}
}

/* ------------------------------------------------------------ environment */

/* "2", "0-3", "0,2,5" -> physical core list */
static nsim_status parse_cores(const char *s, int max, int *out, int *n)
{
	*n = 0;
	const char *p = s;
	while (*p) {
		char *end;
		long a = strtol(p, &end, 10), b;
		if (end == p || a < 0 || a >= max)
			return fail(NSIM_INVALID, "NEURON_RT_VISIBLE_CORES='%s': core '%.8s' not in 0..%d",
				    s, p, max - 1);
		b = a;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			if (end == p + 1 || b < a || b >= max)
				return fail(NSIM_INVALID, "NEURON_RT_VISIBLE_CORES='%s': bad range", s);
			p = end;
		}
		for (long c = a; c <= b; c++) {
			for (int i = 0; i < *n; i++)
				if (out[i] == c)
					return fail(NSIM_INVALID, "NEURON_RT_VISIBLE_CORES='%s': core %ld twice",
						    s, c);
			out[(*n)++] = (int)c;
		}
		if (*p == ',')
			p++;
		else if (*p)
			return fail(NSIM_INVALID, "NEURON_RT_VISIBLE_CORES='%s': unexpected '%c'", s, *p);
	}
	if (!*n)
		return fail(NSIM_INVALID, "NEURON_RT_VISIBLE_CORES is empty");
	return NSIM_SUCCESS;
}

static int parse_log_level(const char *s)
{
	if (!s || !*s || !strcasecmp(s, "ERROR"))
		return 0;
	if (!strcasecmp(s, "WARN") || !strcasecmp(s, "WARNING"))
		return 1;
	if (!strcasecmp(s, "INFO"))
		return 2;
	if (!strcasecmp(s, "DEBUG") || !strcasecmp(s, "TRACE"))
		return 3;
	return 0;
}

static nsim_status configure(const nsim_config *cfg)
{
	const char *target = cfg && cfg->target ? cfg->target : getenv("NEURON_PLATFORM_TARGET_OVERRIDE");
	if (!target || !*target)
		target = "trn2";
	rt.chip = dm_chip_by_name(target);
	if (!rt.chip)
		return fail(NSIM_INVALID, "unknown target '%s' (trn1, trn2 or trn3)", target);

	const char *mode = getenv("NEURON_SIM_MODE");
	if (cfg && cfg->mode >= 0)
		rt.mode = (nsim_mode)cfg->mode;
	else if (!mode || !*mode || !strcmp(mode, "full"))
		rt.mode = NSIM_MODE_FULL;
	else if (!strcmp(mode, "timing"))
		rt.mode = NSIM_MODE_TIMING;
	else if (!strcmp(mode, "functional"))
		rt.mode = NSIM_MODE_FUNCTIONAL;
	else
		return fail(NSIM_INVALID, "NEURON_SIM_MODE='%s' (full, timing or functional)", mode);
	rt.check_numerics = cfg && cfg->check_numerics;
	rt.progress = cfg && cfg->progress;

	int phys[MAX_CORES], n = (int)rt.chip->cores;
	const char *vis = getenv("NEURON_RT_VISIBLE_CORES");
	if (vis && *vis) {
		nsim_status st = parse_cores(vis, (int)rt.chip->cores, phys, &n);
		if (st)
			return st;
	} else {
		for (int i = 0; i < n; i++)
			phys[i] = i;
	}
	const char *num = getenv("NEURON_RT_NUM_CORES");
	if (num && *num) {
		char *end;
		long k = strtol(num, &end, 10);
		if (*end || k < 1 || k > n)
			return fail(NSIM_INVALID, "NEURON_RT_NUM_CORES='%s': %d cores visible", num, n);
		n = (int)k;
	}
	rt.ncores = n;
	memcpy(rt.phys, phys, sizeof(int) * (size_t)n);
	return NSIM_SUCCESS;
}

nsim_status nsim_init_config(const nsim_config *cfg)
{
	pthread_mutex_lock(&rt.lock);
	nsim_status st = NSIM_SUCCESS;
	if (rt.init)
		goto unlock;
	rt.log_level = parse_log_level(getenv("NEURON_RT_LOG_LEVEL"));
	if ((st = configure(cfg)))
		goto unlock;
	const char *hbm_mode = getenv("NEURON_SIM_HBM");
	if (nsim_hbm_chip_init(&rt.hbm_model, rt.chip->target, hbm_mode)) {
		st = fail(NSIM_INVALID, "NEURON_SIM_HBM='%s' (bulk or detailed)", hbm_mode ? hbm_mode : "");
		goto unlock;
	}
	rt.hbm_size = rt.chip->hbm_bytes;
	rt.hbm = mmap(NULL, rt.hbm_size, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (rt.hbm == MAP_FAILED) {
		rt.hbm = NULL;
		st = fail(NSIM_RESOURCE, "cannot reserve %llu bytes of simulated HBM: %s",
			  (unsigned long long)rt.hbm_size, strerror(errno));
		goto unlock;
	}
	rt.free = malloc(sizeof(free_blk) * 16);
	if (!rt.free) {
		st = fail(NSIM_RESOURCE, "host memory");
		goto unmap;
	}
	rt.capfree = 16;
	rt.nfree = 1;
	rt.free[0].off = BASE_ADDR;
	rt.free[0].size = rt.hbm_size - BASE_ADDR;
	rt.allocated = 0;
	for (int i = 0; i < rt.ncores; i++) {
		pthread_mutex_init(&rt.cores[i].lock, NULL);
		rt.cores[i].ready = false;
		rt.cores[i].now_ps = 0;
	}
	/* the simulator's GEMMs are small; one thread keeps sums in a fixed order */
	openblas_set_num_threads(1);
	rt.init = true;
	if (rt.log_level >= 2)
		fprintf(stderr, "neuronsim: simulator %s (%s), %d cores, mode %d\n", rt.chip->name,
			rt.chip->core_name, rt.ncores, rt.mode);
	goto unlock;

unmap:
	munmap(rt.hbm, rt.hbm_size);
	rt.hbm = NULL;
	nsim_hbm_chip_free(&rt.hbm_model);
unlock:
	pthread_mutex_unlock(&rt.lock);
	return st;
}

nsim_status nsim_init(void)
{
	return nsim_init_config(NULL);
}

void nsim_close(void)
{
	nsim_profile_stop();
	pthread_mutex_lock(&rt.lock);
	if (rt.init) {
		for (int i = 0; i < rt.ncores; i++) {
			if (rt.cores[i].ready)
				dm_core_free(&rt.cores[i].dm);
			pthread_mutex_destroy(&rt.cores[i].lock);
		}
		munmap(rt.hbm, rt.hbm_size);
		nsim_hbm_chip_free(&rt.hbm_model);
		free(rt.free);
		rt.hbm = NULL;
		rt.free = NULL;
		rt.init = false;
	}
	pthread_mutex_unlock(&rt.lock);
}

int nsim_core_count(void) { return rt.init ? rt.ncores : 0; }
const char *nsim_target_name(void) { return rt.init ? rt.chip->name : NULL; }
nsim_mode nsim_get_mode(void) { return rt.mode; }

/* ---------------------------------------------------------------- memory */

static uint8_t *hbm_map(void *ctx, uint64_t addr, uint64_t len, bool write)
{
	(void)ctx, (void)write;
	if (addr < BASE_ADDR || addr > rt.hbm_size || len > rt.hbm_size - addr)
		return NULL;
	return rt.hbm + addr;
}

/* first fit; the free list is sorted by offset (caller holds rt.lock) */
static bool hbm_alloc(uint64_t size, uint64_t *addr)
{
	size = (size + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
	if (!size)
		size = ALIGN;
	for (uint32_t i = 0; i < rt.nfree; i++) {
		if (rt.free[i].size < size)
			continue;
		*addr = rt.free[i].off;
		rt.free[i].off += size;
		rt.free[i].size -= size;
		if (!rt.free[i].size) {
			memmove(&rt.free[i], &rt.free[i + 1], (rt.nfree - i - 1) * sizeof(free_blk));
			rt.nfree--;
		}
		rt.allocated += size;
		return true;
	}
	return false;
}

static void hbm_release(uint64_t addr, uint64_t size)
{
	size = (size + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
	if (!size)
		size = ALIGN;
	/* the pages go back to the host, so freed device memory costs nothing */
	uint64_t page = 4096, lo = (addr + page - 1) & ~(page - 1), hi = (addr + size) & ~(page - 1);
	if (hi > lo)
		madvise(rt.hbm + lo, hi - lo, MADV_DONTNEED);
	uint32_t i = 0;
	while (i < rt.nfree && rt.free[i].off < addr)
		i++;
	bool merge_prev = i > 0 && rt.free[i - 1].off + rt.free[i - 1].size == addr;
	bool merge_next = i < rt.nfree && addr + size == rt.free[i].off;
	rt.allocated -= size;
	if (merge_prev && merge_next) {
		rt.free[i - 1].size += size + rt.free[i].size;
		memmove(&rt.free[i], &rt.free[i + 1], (rt.nfree - i - 1) * sizeof(free_blk));
		rt.nfree--;
	} else if (merge_prev) {
		rt.free[i - 1].size += size;
	} else if (merge_next) {
		rt.free[i].off = addr;
		rt.free[i].size += size;
	} else {
		if (rt.nfree == rt.capfree) {
			free_blk *nb = realloc(rt.free, sizeof(free_blk) * rt.capfree * 2);
			if (!nb)
				return;   /* the block leaks from the device heap, never the host */
			rt.free = nb;
			rt.capfree *= 2;
		}
		memmove(&rt.free[i + 1], &rt.free[i], (rt.nfree - i) * sizeof(free_blk));
		rt.free[i].off = addr;
		rt.free[i].size = size;
		rt.nfree++;
	}
}

nsim_status nsim_tensor_allocate(int core, uint64_t size, const char *name, nsim_tensor **out)
{
	*out = NULL;
	if (!rt.init)
		return fail(NSIM_UNINITIALIZED, "nsim_init has not been called");
	if (core < 0 || core >= rt.ncores)
		return fail(NSIM_INVALID, "core %d (%d visible)", core, rt.ncores);
	nsim_tensor *t = calloc(1, sizeof(*t));
	if (!t)
		return fail(NSIM_RESOURCE, "host memory");
	pthread_mutex_lock(&rt.lock);
	bool ok = size <= rt.hbm_size && hbm_alloc(size, &t->addr);
	uint64_t used = rt.allocated;
	pthread_mutex_unlock(&rt.lock);
	if (!ok) {
		free(t);
		return fail(NSIM_RESOURCE, "out of device memory: %llu bytes requested, %llu of %llu in use",
			    (unsigned long long)size, (unsigned long long)used,
			    (unsigned long long)rt.hbm_size);
	}
	t->size = size;
	t->core = core;
	snprintf(t->name, sizeof(t->name), "%s", name ? name : "");
	*out = t;
	return NSIM_SUCCESS;
}

void nsim_tensor_free(nsim_tensor *t)
{
	if (!t)
		return;
	if (!t->slice) {
		pthread_mutex_lock(&rt.lock);
		if (rt.init)
			hbm_release(t->addr, t->size);
		pthread_mutex_unlock(&rt.lock);
	}
	free(t);
}

nsim_status nsim_tensor_slice(nsim_tensor *parent, uint64_t offset, uint64_t size, nsim_tensor **out)
{
	*out = NULL;
	nsim_status st = check_range(parent, offset, size, "nsim_tensor_slice");
	if (st)
		return st;
	nsim_tensor *t = calloc(1, sizeof(*t));
	if (!t)
		return fail(NSIM_RESOURCE, "host memory");
	t->addr = parent->addr + offset;
	t->size = size;
	t->core = parent->core;
	t->slice = true;
	snprintf(t->name, sizeof(t->name), "%s", parent->name);
	*out = t;
	return NSIM_SUCCESS;
}

uint64_t nsim_tensor_size(const nsim_tensor *t) { return t ? t->size : 0; }
uint64_t nsim_tensor_device_address(const nsim_tensor *t) { return t ? t->addr : 0; }
uint64_t nsim_memory_allocated(void) { return rt.allocated; }

static nsim_status check_range(const nsim_tensor *t, uint64_t off, uint64_t size, const char *what)
{
	if (!rt.init)
		return fail(NSIM_UNINITIALIZED, "nsim_init has not been called");
	if (!t)
		return fail(NSIM_INVALID_HANDLE, "%s: no tensor", what);
	if (off > t->size || size > t->size - off)
		return fail(NSIM_INVALID, "%s: bytes [%llu, +%llu) outside tensor '%s' of %llu bytes", what,
			    (unsigned long long)off, (unsigned long long)size, t->name,
			    (unsigned long long)t->size);
	return NSIM_SUCCESS;
}

nsim_status nsim_tensor_write(nsim_tensor *t, const void *buf, uint64_t off, uint64_t size)
{
	nsim_status st = check_range(t, off, size, "nsim_tensor_write");
	if (!st && size)
		memcpy(rt.hbm + t->addr + off, buf, size);
	return st;
}

nsim_status nsim_tensor_read(const nsim_tensor *t, void *buf, uint64_t off, uint64_t size)
{
	nsim_status st = check_range(t, off, size, "nsim_tensor_read");
	if (!st && size)
		memcpy(buf, rt.hbm + t->addr + off, size);
	return st;
}

nsim_status nsim_tensor_copy(const nsim_tensor *src, uint64_t soff, nsim_tensor *dst, uint64_t doff,
			     uint64_t size)
{
	nsim_status st;
	if ((st = check_range(src, soff, size, "nsim_tensor_copy src")) ||
	    (st = check_range(dst, doff, size, "nsim_tensor_copy dst")))
		return st;
	if (size)
		memmove(rt.hbm + dst->addr + doff, rt.hbm + src->addr + soff, size);
	return NSIM_SUCCESS;
}

nsim_status nsim_tensor_memset(nsim_tensor *t, int value, uint64_t off, uint64_t size)
{
	nsim_status st = check_range(t, off, size, "nsim_tensor_memset");
	if (!st && size)
		memset(rt.hbm + t->addr + off, value, size);
	return st;
}

/* ------------------------------------------------------------ tensor sets */

nsim_status nsim_tensor_set_create(nsim_tensor_set **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? NSIM_SUCCESS : fail(NSIM_RESOURCE, "host memory");
}

nsim_status nsim_tensor_set_add(nsim_tensor_set *s, const char *name, nsim_tensor *t)
{
	if (!s || !name || !t)
		return fail(NSIM_INVALID, "nsim_tensor_set_add: null argument");
	if (strlen(name) > ISA_MAX_NAME)
		return fail(NSIM_INVALID, "tensor name longer than %u", ISA_MAX_NAME);
	for (uint32_t i = 0; i < s->n; i++)
		if (!strcmp(s->e[i].name, name)) {
			s->e[i].t = t;          /* replacing a binding is allowed */
			return NSIM_SUCCESS;
		}
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 8;
		set_entry *ne = realloc(s->e, cap * sizeof(*ne));
		if (!ne)
			return fail(NSIM_RESOURCE, "host memory");
		s->e = ne;
		s->cap = cap;
	}
	snprintf(s->e[s->n].name, sizeof(s->e[s->n].name), "%s", name);
	s->e[s->n++].t = t;
	return NSIM_SUCCESS;
}

void nsim_tensor_set_free(nsim_tensor_set *s)
{
	if (!s)
		return;
	free(s->e);
	free(s);
}

static nsim_tensor *set_find(const nsim_tensor_set *s, const char *name)
{
	for (uint32_t i = 0; s && i < s->n; i++)
		if (!strcmp(s->e[i].name, name))
			return s->e[i].t;
	return NULL;
}

/* ------------------------------------------------------------------ load */

nsim_status nsim_load(const void *bytes, size_t size, int core, nsim_model **out)
{
	*out = NULL;
	if (!rt.init)
		return fail(NSIM_UNINITIALIZED, "nsim_init has not been called");
	if (core < 0 || core >= rt.ncores)
		return fail(NSIM_INVALID, "core %d (%d visible)", core, rt.ncores);
	isa_diag diag = { 0 };
	isa_program *p = NULL;
	if (isa_program_load(bytes, size, &p, &diag) != ISA_OK)
		return fail(NSIM_INVALID, "bad program: %s", diag.msg);
	if (p->target != rt.chip->target) {
		nsim_status st = fail(NSIM_INVALID, "program built for %s, the device is %s",
				      isa_target_name(p->target), rt.chip->name);
		isa_program_free(p);
		return st;
	}
	nsim_model *m = calloc(1, sizeof(*m));
	nsim_status st = NSIM_RESOURCE;
	if (!m)
		goto free_program;
	m->prog = p;
	m->core = core;
	m->addr = calloc(p->n_tensors + 1, sizeof(uint64_t));
	m->bytes = calloc(p->n_tensors + 1, sizeof(uint64_t));
	if (!m->addr || !m->bytes)
		goto free_model;
	if (p->scratch_bytes &&
	    (st = nsim_tensor_allocate(core, p->scratch_bytes, "scratch", &m->scratch)))
		goto free_model;
	if (p->consts_size) {
		if ((st = nsim_tensor_allocate(core, p->consts_size, "consts", &m->consts)))
			goto free_model;
		nsim_tensor_write(m->consts, p->consts, 0, p->consts_size);
	}
	*out = m;
	return NSIM_SUCCESS;

free_model:
	nsim_tensor_free(m->scratch);
	free(m->addr);
	free(m->bytes);
	free(m);
	if (st == NSIM_RESOURCE && !last_error[0])
		fail(st, "host memory");
free_program:
	isa_program_free(p);
	return st;
}

nsim_status nsim_unload(nsim_model *m)
{
	if (!m)
		return fail(NSIM_INVALID_HANDLE, "nsim_unload: no model");
	nsim_tensor_free(m->scratch);
	nsim_tensor_free(m->consts);
	isa_program_free(m->prog);
	free(m->addr);
	free(m->bytes);
	free(m);
	return NSIM_SUCCESS;
}

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
			bound = set_find(in, t->name);
			if (!bound)
				bound = set_find(out, t->name);   /* in-place */
			break;
		case ISA_TK_OUTPUT:
			bound = set_find(out, t->name);
			break;
		case ISA_TK_INTERNAL:
			m->addr[i] = m->scratch->addr + t->offset;
			m->bytes[i] = need;
			continue;
		case ISA_TK_CONST:
			m->addr[i] = m->consts->addr + t->offset;
			m->bytes[i] = need;
			continue;
		}
		if (!bound)
			return fail(NSIM_EXEC_BAD_INPUT, "%s tensor '%s' not in the %s set",
				    t->kind == ISA_TK_INPUT ? "input" : "output", t->name,
				    t->kind == ISA_TK_INPUT ? "input" : "output");
		if (bound->size < need)
			return fail(NSIM_EXEC_BAD_INPUT, "tensor '%s' needs %llu bytes, the bound buffer has %llu",
				    t->name, (unsigned long long)need, (unsigned long long)bound->size);
		m->addr[i] = bound->addr;
		m->bytes[i] = bound->size;
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
		return fail(NSIM_EXEC_OOB, "%sout-of-bounds access: %s", where, f->msg);
	case DM_FAULT_UNINIT_PSUM:
		return fail(NSIM_EXEC_ERR, "%s%s", where, f->msg);
	case DM_FAULT_NUMERIC:
		return fail(NSIM_EXEC_NUM_ERR, "%snumerical error: %s", where, f->msg);
	case DM_FAULT_DEADLOCK:
		return fail(NSIM_TIMEOUT, "%s", f->msg);
	case DM_FAULT_NOMEM:
		return fail(NSIM_RESOURCE, "%shost memory: %s", where, f->msg);
	default:
		return fail(NSIM_FAILURE, "%s%s", where, f->msg);
	}
}

static nsim_status prepare_core(core_state *cs, int core)
{
	if (cs->ready)
		return NSIM_SUCCESS;
	if (dm_core_init(&cs->dm, rt.chip))
		return fail(NSIM_RESOURCE, "host memory for core %d SBUF/PSUM", core);
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
	r->bind.hbm.map = hbm_map;
	r->bind.check_numerics = rt.check_numerics;
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

static void report_program(nsim_run *r, const nsim_model *m)
{
	if (r->obs && r->obs->program) {
		trc_program_event pe = { m->core, m->name[0] ? m->name : "program", r->start_ps,
					 r->start_ps + r->stats.total_ps };
		r->obs->program(r->obs->ctx, &pe);
	}
}

nsim_status nsim_execute(nsim_model *m, const nsim_tensor_set *in, nsim_tensor_set *out)
{
	return nsim_execute_multi(&m, &in, &out, 1);
}

/*
 * Programs on several distinct cores in one simulated timeline, starting
 * together at the latest of their cores' clocks, sharing the chip's memory
 * timing (so HBM bandwidth is divided between them).  Core locks are taken
 * in core order so concurrent callers cannot deadlock.
 */
nsim_status nsim_execute_multi(nsim_model *const *models, const nsim_tensor_set *const *ins,
			       nsim_tensor_set *const *outs, int n)
{
	if (!rt.init)
		return fail(NSIM_UNINITIALIZED, "nsim_init has not been called");
	if (n < 1 || n > rt.ncores || !models)
		return fail(NSIM_INVALID, "nsim_execute_multi: %d models for %d cores", n, rt.ncores);
	int order[MAX_CORES];
	for (int i = 0; i < n; i++) {
		if (!models[i])
			return fail(NSIM_INVALID_HANDLE, "nsim_execute: no model");
		for (int j = 0; j < i; j++)
			if (models[j]->core == models[i]->core)
				return fail(NSIM_INVALID, "nsim_execute_multi: two models on core %d",
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
		st = fail(NSIM_RESOURCE, "host memory");
		goto unlock;
	}
	uint64_t start = 0;
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
	for (int i = 0; i < n; i++) {
		setup_run(&runs[i], models[i], &rt.cores[models[i]->core], &hbm, start,
			  i == 0 ? &prog : NULL);
		rp[i] = &runs[i];
	}

	pthread_mutex_lock(&rt.profile_lock);
	for (int i = 0; i < n; i++)
		runs[i].obs = rt.profiling ? &rt.profile.obs : NULL;
	dm_fault_kind fk = nsim_cores_run(rp, n);
	for (int i = 0; i < n; i++)
		report_program(&runs[i], models[i]);
	if (rt.profiling)
		nsim_hbm_run_report(&hbm, &rt.profile.obs);
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
		st = fail(NSIM_FAILURE, "execution stopped by a fault");
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
		return fail(NSIM_INVALID_HANDLE, "nsim_model_stats: no model");
	*out = m->last;
	return NSIM_SUCCESS;
}

/* -------------------------------------------------------------- profiling */

nsim_status nsim_profile_start(const char *filename)
{
	pthread_mutex_lock(&rt.profile_lock);
	nsim_status st = NSIM_SUCCESS;
	if (rt.profiling)
		st = fail(NSIM_INVALID, "a profile is already being written");
	else if (trc_chrome_open(&rt.profile, filename))
		st = fail(NSIM_INVALID, "cannot create trace '%s': %s", filename, strerror(errno));
	else
		rt.profiling = true;
	pthread_mutex_unlock(&rt.profile_lock);
	return st;
}

nsim_status nsim_profile_stop(void)
{
	pthread_mutex_lock(&rt.profile_lock);
	nsim_status st = NSIM_SUCCESS;
	if (rt.profiling) {
		if (trc_chrome_close(&rt.profile))
			st = fail(NSIM_FAILURE, "error writing the trace file");
		rt.profiling = false;
	}
	pthread_mutex_unlock(&rt.profile_lock);
	return st;
}
