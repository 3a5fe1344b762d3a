/*
 * hbm_stub.h -- HBM timing as bandwidth + latency: one shared pipe per chip
 * at the chip's published bandwidth, plus a fixed access latency.  It sits
 * behind nsim_mem_timing so the detailed HBM model can replace it.
 */
#ifndef NSIM_SIM_HBM_STUB_H
#define NSIM_SIM_HBM_STUB_H

#include <pthread.h>

#include "coresim.h"

typedef struct nsim_hbm_stub {
	const dm_chip  *chip;
	uint64_t        free_at;   /* ps: when the pipe is next idle */
	pthread_mutex_t lock;
} nsim_hbm_stub;

void     nsim_hbm_stub_init(nsim_hbm_stub *h, const dm_chip *chip);
uint64_t nsim_hbm_stub_access(void *ctx, uint64_t start_ps, uint64_t addr, uint64_t bytes,
			      bool write);

#endif
