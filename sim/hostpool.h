/*
 * hostpool.h -- host threads sharing the rows of one instruction's
 * functional work (the dm_par of an execution's binding; see hostpool.c).
 * NEURON_SIM_THREADS sets the count (default: the online CPUs, at most 16;
 * 1 runs everything on the simulating thread).
 */
#ifndef NSIM_HOSTPOOL_H
#define NSIM_HOSTPOOL_H

#include "core.h"

/* threads that share a job, the caller included (starts them on first use) */
int  nsim_hostpool_threads(void);
/* dm_par.run: fn over [0, n) in chunks on the pool's threads */
void nsim_hostpool_run(void *ctx, dm_rows_fn fn, void *arg, uint32_t n);

#endif /* NSIM_HOSTPOOL_H */
