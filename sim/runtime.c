/*
 * runtime.c -- the runtime C API (include/neuronsim/runtime.h) over the
 * simulated chip: configuration, device memory, program load and tensor
 * sets.  Execution and statistics: runtime_exec.c; profiling: profile.c;
 * the state and its errors: runtime_state.c.
 *
 * Simulated HBM is one address space per chip, reserved with MAP_NORESERVE
 * so a 96 GiB trn2 costs host memory only for the pages written.  Device
 * addresses start at 4 KiB (0 is never a tensor).  Each core keeps its own
 * device clock: an execution starts where the core's previous one ended.
 */
#define _GNU_SOURCE
#include "runtime_internal.h"

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

static nsim_status check_range(const nsim_tensor *t, uint64_t off, uint64_t size, const char *what);


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
			return rt_fail(NSIM_INVALID, "NEURON_RT_VISIBLE_CORES='%s': core '%.8s' not in 0..%d",
				    s, p, max - 1);
		b = a;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			if (end == p + 1 || b < a || b >= max)
				return rt_fail(NSIM_INVALID, "NEURON_RT_VISIBLE_CORES='%s': bad range", s);
			p = end;
		}
		for (long c = a; c <= b; c++) {
			for (int i = 0; i < *n; i++)
				if (out[i] == c)
					return rt_fail(NSIM_INVALID, "NEURON_RT_VISIBLE_CORES='%s': core %ld twice",
						    s, c);
			out[(*n)++] = (int)c;
		}
		if (*p == ',')
			p++;
		else if (*p)
			return rt_fail(NSIM_INVALID, "NEURON_RT_VISIBLE_CORES='%s': unexpected '%c'", s, *p);
	}
	if (!*n)
		return rt_fail(NSIM_INVALID, "NEURON_RT_VISIBLE_CORES is empty");
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
	if (!rt.chip) {
		char known[128];
		isa_target_list(known, sizeof(known), ", ");
		return rt_fail(NSIM_INVALID, "unknown target '%s' (%s)", target, known);
	}

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
		return rt_fail(NSIM_INVALID, "NEURON_SIM_MODE='%s' (full, timing or functional)", mode);
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
			return rt_fail(NSIM_INVALID, "NEURON_RT_NUM_CORES='%s': %d cores visible", num, n);
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
		st = rt_fail(NSIM_INVALID, "NEURON_SIM_HBM='%s' (bulk or detailed)", hbm_mode ? hbm_mode : "");
		goto unlock;
	}
	rt.hbm_size = rt.chip->hbm_bytes;
	rt.hbm = mmap(NULL, rt.hbm_size, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (rt.hbm == MAP_FAILED) {
		rt.hbm = NULL;
		st = rt_fail(NSIM_RESOURCE, "cannot reserve %llu bytes of simulated HBM: %s",
			  (unsigned long long)rt.hbm_size, strerror(errno));
		goto unlock;
	}
	rt.free = malloc(sizeof(free_blk) * 16);
	if (!rt.free) {
		st = rt_fail(NSIM_RESOURCE, "host memory");
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
	if ((st = rt_profile_from_env()))
		goto free_list;
	/* the simulator's GEMMs are small; one thread keeps sums in a fixed order */
	openblas_set_num_threads(1);
	rt.init = true;
	if (rt.log_level >= 2)
		fprintf(stderr, "neuronsim: simulator %s (%s), %d cores, mode %d\n", dm_chip_name(rt.chip),
			dm_chip_core_name(rt.chip), rt.ncores, rt.mode);
	goto unlock;

free_list:
	free(rt.free);
	rt.free = NULL;
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

void nsim_buffer_free(void *p)
{
	free(p);
}

int nsim_core_count(void) { return rt.init ? rt.ncores : 0; }
const char *nsim_target_name(void) { return rt.init ? dm_chip_name(rt.chip) : NULL; }
nsim_mode nsim_get_mode(void) { return rt.mode; }

/* ---------------------------------------------------------------- memory */

uint8_t *rt_hbm_map(void *ctx, uint64_t addr, uint64_t len, bool write)
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
		return rt_fail(NSIM_UNINITIALIZED, "nsim_init has not been called");
	if (core < 0 || core >= rt.ncores)
		return rt_fail(NSIM_INVALID, "core %d (%d visible)", core, rt.ncores);
	nsim_tensor *t = calloc(1, sizeof(*t));
	if (!t)
		return rt_fail(NSIM_RESOURCE, "host memory");
	pthread_mutex_lock(&rt.lock);
	bool ok = size <= rt.hbm_size && hbm_alloc(size, &t->addr);
	uint64_t used = rt.allocated;
	pthread_mutex_unlock(&rt.lock);
	if (!ok) {
		free(t);
		return rt_fail(NSIM_RESOURCE, "out of device memory: %llu bytes requested, %llu of %llu in use",
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
		return rt_fail(NSIM_RESOURCE, "host memory");
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
		return rt_fail(NSIM_UNINITIALIZED, "nsim_init has not been called");
	if (!t)
		return rt_fail(NSIM_INVALID_HANDLE, "%s: no tensor", what);
	if (off > t->size || size > t->size - off)
		return rt_fail(NSIM_INVALID, "%s: bytes [%llu, +%llu) outside tensor '%s' of %llu bytes", what,
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

nsim_status nsim_tensor_set_external(nsim_tensor *t, nsim_ext_access_fn fn, void *ctx)
{
	if (!t)
		return rt_fail(NSIM_INVALID_HANDLE, "nsim_tensor_set_external: NULL tensor");
	t->ext_fn = fn;
	t->ext_ctx = fn ? ctx : NULL;
	return NSIM_SUCCESS;
}

void *nsim_tensor_host_pointer(nsim_tensor *t)
{
	return t && rt.init ? rt.hbm + t->addr : NULL;
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
	return *out ? NSIM_SUCCESS : rt_fail(NSIM_RESOURCE, "host memory");
}

nsim_status nsim_tensor_set_add(nsim_tensor_set *s, const char *name, nsim_tensor *t)
{
	if (!s || !name || !t)
		return rt_fail(NSIM_INVALID, "nsim_tensor_set_add: null argument");
	if (strlen(name) > ISA_MAX_NAME)
		return rt_fail(NSIM_INVALID, "tensor name longer than %u", ISA_MAX_NAME);
	for (uint32_t i = 0; i < s->n; i++)
		if (!strcmp(s->e[i].name, name)) {
			s->e[i].t = t;          /* replacing a binding is allowed */
			return NSIM_SUCCESS;
		}
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 8;
		set_entry *ne = realloc(s->e, cap * sizeof(*ne));
		if (!ne)
			return rt_fail(NSIM_RESOURCE, "host memory");
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

nsim_tensor *rt_set_find(const nsim_tensor_set *s, const char *name)
{
	for (uint32_t i = 0; s && i < s->n; i++)
		if (!strcmp(s->e[i].name, name))
			return s->e[i].t;
	return NULL;
}

/* ------------------------------------------------------------------ load */

static uint32_t loads;   /* programs loaded: their names */

static void footprint_ap(const isa_ap *ap, uint64_t hw[2][ISA_NUM_PARTITIONS])
{
	int64_t lo, hi;
	int which = ap->space == ISA_SPACE_SBUF ? 0 : ap->space == ISA_SPACE_PSUM ? 1 : -1;
	if (which < 0 || !isa_ap_byte_range(ap, &lo, &hi) || hi < 0)
		return;
	for (uint32_t q = ap->start; q < (uint32_t)ap->start + ap->nparts && q < ISA_NUM_PARTITIONS; q++)
		if ((uint64_t)hi > hw[which][q])
			hw[which][q] = (uint64_t)hi;
}

/* SBUF / PSUM the program uses: per partition, the highest byte any operand
 * reaches (a stack-style allocation), summed over partitions.  Traces show
 * it as the program's allocation while it runs. */
static void footprint(const isa_program *p, uint64_t *sbuf, uint64_t *psum)
{
	uint64_t hw[2][ISA_NUM_PARTITIONS] = { { 0 } };
	for (int k = 0; k < ISA_NUM_ENGINES; k++)
		for (uint32_t i = 0; i < p->n_instr[k]; i++) {
			const isa_instr *in = &p->stream[k][i];
			for (int slot = 0; slot < ISA_MAX_AP; slot++)
				if ((in->ap_mask >> slot) & 1u)
					footprint_ap(&in->ap[slot], hw);
		}
	for (uint32_t d = 0; d < p->n_dma; d++) {
		footprint_ap(&p->dma[d].dst, hw);
		footprint_ap(&p->dma[d].src, hw);
		if (isa_dma_mode_indexed(p->dma[d].mode))
			footprint_ap(&p->dma[d].index, hw);
	}
	*sbuf = *psum = 0;
	for (uint32_t q = 0; q < ISA_NUM_PARTITIONS; q++) {
		*sbuf += hw[0][q];
		*psum += hw[1][q];
	}
}

/* whether a branch of p tests a register: its run depends on values */
static bool branches_on_data(const isa_program *p)
{
	for (int e = 0; e < ISA_NUM_ENGINES; e++)
		for (uint32_t i = 0; i < p->n_instr[e]; i++)
			if (p->stream[e][i].opcode == ISA_OP_branch && p->stream[e][i].u[1] != 64)
				return true;
	return false;
}

nsim_status nsim_load(const void *bytes, size_t size, int core, nsim_model **out)
{
	*out = NULL;
	if (!rt.init)
		return rt_fail(NSIM_UNINITIALIZED, "nsim_init has not been called");
	if (core < 0 || core >= rt.ncores)
		return rt_fail(NSIM_INVALID, "core %d (%d visible)", core, rt.ncores);
	isa_diag diag = { 0 };
	isa_program *p = NULL;
	if (isa_program_load(bytes, size, &p, &diag) != ISA_OK)
		return rt_fail(NSIM_INVALID, "bad program: %s", diag.msg);
	if (p->target != rt.chip->target) {
		nsim_status st = rt_fail(NSIM_INVALID, "program built for %s, the device is %s",
				      isa_target_name(p->target), dm_chip_name(rt.chip));
		isa_program_free(p);
		return st;
	}
	nsim_model *m = calloc(1, sizeof(*m));
	nsim_status st = NSIM_RESOURCE;
	if (!m)
		goto free_program;
	m->prog = p;
	m->core = core;
	snprintf(m->name, sizeof(m->name), "program %u", ++loads);
	footprint(p, &m->sbuf_bytes, &m->psum_bytes);
	m->data_control = branches_on_data(p);
	m->addr = calloc(p->n_tensors + 1, sizeof(uint64_t));
	m->bytes = calloc(p->n_tensors + 1, sizeof(uint64_t));
	m->ext_fn = calloc(p->n_tensors + 1, sizeof(*m->ext_fn));
	m->ext_ctx = calloc(p->n_tensors + 1, sizeof(*m->ext_ctx));
	if (!m->addr || !m->bytes || !m->ext_fn || !m->ext_ctx)
		goto free_model;
	if (p->scratch_bytes &&
	    (st = nsim_tensor_allocate(core, p->scratch_bytes, "scratch", &m->scratch)))
		goto free_model;
	if (p->consts_size) {
		if ((st = nsim_tensor_allocate(core, p->consts_size, "consts", &m->consts)))
			goto free_model;
		nsim_tensor_write(m->consts, p->consts, 0, p->consts_size);
	}
	/* the runtime keeps a loaded program's instruction streams and DMA
	 * descriptors in device memory, as the Neuron runtime does a NEFF's:
	 * loaded programs hold HBM until unloaded */
	if ((st = nsim_tensor_allocate(core, size, "program", &m->image)))
		goto free_model;
	nsim_tensor_write(m->image, bytes, 0, size);
	*out = m;
	return NSIM_SUCCESS;

free_model:
	nsim_tensor_free(m->consts);
	nsim_tensor_free(m->scratch);
	free(m->addr);
	free(m->bytes);
	free(m->ext_fn);
	free(m->ext_ctx);
	free(m);
	if (st == NSIM_RESOURCE && !nsim_last_error()[0])
		rt_fail(st, "host memory");
free_program:
	isa_program_free(p);
	return st;
}

uint64_t nsim_model_device_bytes(const nsim_model *m)
{
	if (!m)
		return 0;
	return nsim_tensor_size(m->scratch) + nsim_tensor_size(m->consts) + nsim_tensor_size(m->image);
}

const struct isa_program *nsim_model_program(const nsim_model *m)
{
	return m ? m->prog : NULL;
}

uint64_t nsim_model_host_bytes(const nsim_model *m)
{
	if (!m)
		return 0;
	uint64_t per_tensor = sizeof(*m->addr) + sizeof(*m->bytes) + sizeof(*m->ext_fn) + sizeof(*m->ext_ctx);
	return sizeof(*m) + isa_program_host_bytes(m->prog) + (uint64_t)m->prog->n_tensors * per_tensor;
}

nsim_status nsim_unload(nsim_model *m)
{
	if (!m)
		return rt_fail(NSIM_INVALID_HANDLE, "nsim_unload: no model");
	nsim_tensor_free(m->scratch);
	nsim_tensor_free(m->consts);
	nsim_tensor_free(m->image);
	isa_program_free(m->prog);
	free(m->addr);
	free(m->bytes);
	free(m->ext_fn);
	free(m->ext_ctx);
	free(m);
	return NSIM_SUCCESS;
}

