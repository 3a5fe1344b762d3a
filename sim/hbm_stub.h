/*
 * hbm_stub.h -- HBM timing as bandwidth + latency: one shared pipe per chip
 * at the chip's published bandwidth, plus a fixed access latency.  It sits
 * behind nsim_mem_timing so the detailed HBM model can replace it.
 */
#ifndef NSIM_SIM_HBM_STUB_H
#define NSIM_SIM_HBM_STUB_H

#include "coresim.h"

typedef struct nsim_hbm_stub {
	const dm_chip *chip;
	uint64_t       free_at;   /* ps: when the pipe is next idle */
} nsim_hbm_stub;

/* one per execution (shared by the cores of a multi-core execution), so its
 * state follows simulated time only and runs stay repeatable */
void     nsim_hbm_stub_init(nsim_hbm_stub *h, const dm_chip *chip, uint64_t start_ps);
uint64_t nsim_hbm_stub_access(void *ctx, uint64_t start_ps, uint64_t addr, uint64_t bytes,
			      bool write);

#endif
