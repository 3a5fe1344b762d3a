/*
 * coresim.h -- one program on one NeuronCore: in-order engines synchronized
 * by semaphores, the TensorE LoadStationary/MultiplyMoving pipeline, DMA
 * engines and queues, and a memory-timing interface behind DMA.
 */
#ifndef NSIM_SIM_CORESIM_H
#define NSIM_SIM_CORESIM_H

#include "core.h"
#include "neuronsim/exec.h"
#include "observer.h"

/*
 * Memory timing behind DMA.  `access` returns when a transfer of `bytes`
 * issued at `start_ps` completes on the memory side.  The bandwidth+latency
 * stand-in lives in hbm_stub.c; the detailed HBM model plugs in here
 * without touching DMA code.
 */
typedef struct nsim_mem_timing {
	void     *ctx;
	uint64_t (*access)(void *ctx, uint64_t start_ps, uint64_t addr, uint64_t bytes,
			   bool write);
} nsim_mem_timing;

typedef struct nsim_run {
	/* in */
	dm_core            *core;
	int                 core_id;
	const isa_program  *prog;
	dm_binding          bind;
	nsim_mode           mode;
	const trc_observer *obs;
	nsim_mem_timing     mem;
	/* per program tensor: its external memory's access (NULL: simulated
	 * HBM) and context; may be NULL altogether */
	const nsim_ext_access_fn *ext_fn;
	void *const        *ext_ctx;
	uint64_t            start_ps;       /* device time the run starts at */
	/* the runtime's NEFF start-up before the first instruction and
	 * tear-down after the last (0 unless a standalone execution) */
	uint64_t            startup_ps, teardown_ps;
	/* called every 256 events (may be NULL): instructions retired
	 * so far and the current simulated time */
	void              (*progress)(void *ctx, uint64_t instructions, uint64_t now_ps);
	void               *progress_ctx;
	/* out */
	nsim_exec_stats     stats;
	dm_fault            fault;
} nsim_run;

/* External memory (ext_memory.c): whether a DMA side is a tensor in it, and
 * one access of a DMA to such a tensor -- the byte span the side touches (an
 * indexed side: the whole tensor), read into the simulator's copy or handed
 * over from it at `at_ps` (the core's clock); its latency is added to *lat.
 * A refused access or a span past the tensor faults (r->fault). */
static inline bool nsim_ext_side(const nsim_run *r, const isa_ap *side)
{
	return r->ext_fn && side->space == ISA_SPACE_HBM && r->ext_fn[side->tensor];
}
dm_fault_kind nsim_ext_access(nsim_run *r, int engine, int64_t pc, const isa_dma_desc *d, const isa_ap *side,
			      bool indexed, bool write, uint64_t at_ps, uint64_t *lat);

/* Runs to completion or the first fault (returned; details in r->fault). */
dm_fault_kind nsim_core_run(nsim_run *r);
/* Runs programs on several cores (distinct dm_core each) in one simulated
 * timeline; a fault on one stops all, each run's fault says whose. */
dm_fault_kind nsim_cores_run(nsim_run **runs, int n);

#endif
