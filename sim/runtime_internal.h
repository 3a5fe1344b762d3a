/*
 * runtime_internal.h -- state and helpers shared by runtime.c (memory,
 * programs, tensor sets) and runtime_exec.c (execute, stats) and profile.c.
 * Not a public header.
 */
#ifndef NSIM_RUNTIME_INTERNAL_H
#define NSIM_RUNTIME_INTERNAL_H

#include "neuronsim/runtime.h"

#include "summary.h"
#include "writer.h"
#include "coresim.h"
#include "hbm_timing.h"

#include <pthread.h>

#define MAX_CORES   64
#define ALIGN       64u
#define BASE_ADDR   4096u

struct nsim_tensor {
	uint64_t addr, size;
	int      core;
	bool     slice;            /* a view of another tensor's bytes */
	char     name[64];
	nsim_ext_access_fn ext_fn; /* in external memory (nsim_tensor_set_external) */
	void    *ext_ctx;
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
	nsim_tensor    *image;         /* the program as loaded (.nsp bytes) */
	uint64_t       *addr;          /* per tensor, filled at execute */
	uint64_t       *bytes;
	nsim_ext_access_fn *ext_fn;    /* per tensor: external memory, or NULL */
	void          **ext_ctx;
	nsim_exec_stats last;
	char            name[64];
	uint64_t        sbuf_bytes, psum_bytes;   /* allocation (traces) */
	bool            data_control;  /* a branch tests a register (NSIM_EXEC_DATA_CONTROL) */
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

typedef struct rt_state {
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
	struct rt_profile *profile;     /* profile.c; under profile_lock */
	pthread_mutex_t hbm_lock;       /* one execution at a time uses the HBM model */
	nsim_hbm_chip   hbm_model;
	bool            profiling;
} rt_state;

/* the one runtime (runtime.c) */
extern rt_state rt;

/* records the message for nsim_last_error() and returns st */
nsim_status rt_fail(nsim_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* the tensor named `name` in s, or NULL */
nsim_tensor *rt_set_find(const nsim_tensor_set *s, const char *name);
/* profile.c, called with rt.profile_lock held: the trace observer (NULL
 * when no trace is written), and one execution's statistics for the summary */
const trc_observer *rt_profile_observer(void);
void rt_profile_record(const nsim_exec_stats *st, uint64_t start_ps, const char *label);
/* NEURON_RT_INSPECT_ENABLE: profile the whole process (nsim_init) */
nsim_status rt_profile_from_env(void);
/* the chip as the summary and trace writers see it (runtime_info.c) */
trc_device rt_trc_device(const dm_chip *chip);
/* dst += src, field by field (runtime_info.c) */
void rt_stats_add(nsim_exec_stats *dst, const nsim_exec_stats *src);
/* maps device bytes [addr, addr + len) to host memory, or NULL */
uint8_t *rt_hbm_map(void *ctx, uint64_t addr, uint64_t len, bool write);

#endif
