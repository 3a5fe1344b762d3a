/*
 * hbm_timing.h -- memory timing behind DMA (nsim_mem_timing): the HBM model
 * of device_model/hbm.h.  Large regular transfers go to the bulk model
 * (calibrated on the request-level one); NEURON_SIM_HBM=detailed sends every
 * transfer through the request-level controllers instead.
 */
#ifndef NSIM_SIM_HBM_TIMING_H
#define NSIM_SIM_HBM_TIMING_H

#include "coresim.h"
#include "hbm.h"

typedef enum nsim_hbm_mode { NSIM_HBM_BULK = 0, NSIM_HBM_DETAILED } nsim_hbm_mode;

/* one per chip and runtime: keeps the bulk calibration between executions */
typedef struct nsim_hbm_chip {
	const dm_hbm_preset *preset;
	nsim_hbm_mode        mode;
	dm_hbm_bulk         *bulk;
} nsim_hbm_chip;

/* HBM traffic is binned per stack into intervals of this many ps for the
 * bandwidth-over-time counters */
#define NSIM_HBM_BIN_PS 1000000ull

/* one per execution (shared by the cores of a multi-core execution) */
typedef struct nsim_hbm_run {
	nsim_hbm_chip *chip;
	dm_hbm        *detailed;      /* created on first use in detailed mode */
	uint64_t       start_ps;
	double        *bins;          /* [bin][stack][read=0/write=1] bytes */
	uint64_t       nbins;
} nsim_hbm_run;

/* emits chip-wide "HBM read|write GB/s" counters, one sample per bin */
struct trc_observer;
void nsim_hbm_run_report(const nsim_hbm_run *r, const struct trc_observer *obs);

int      nsim_hbm_chip_init(nsim_hbm_chip *c, int isa_target, const char *mode);  /* 0 / -1 */
void     nsim_hbm_chip_free(nsim_hbm_chip *c);
void     nsim_hbm_run_begin(nsim_hbm_run *r, nsim_hbm_chip *c, uint64_t start_ps);
void     nsim_hbm_run_end(nsim_hbm_run *r);
uint64_t nsim_hbm_access(void *ctx, uint64_t start_ps, uint64_t addr, uint64_t bytes, bool write);

#endif
