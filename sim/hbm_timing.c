/*
 * hbm_timing.c -- DMA's memory timing through the HBM model (hbm_timing.h).
 * Every execution starts the memory fresh at its start time (refresh phase,
 * open rows, bandwidth booked), so runs stay repeatable; the bulk model's
 * calibration is kept per chip.
 */
#include "hbm_timing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observer.h"

int nsim_hbm_chip_init(nsim_hbm_chip *c, int target, const char *mode)
{
	memset(c, 0, sizeof(*c));
	c->preset = dm_hbm_preset_for_target(target);
	if (!c->preset)
		return -1;
	if (mode && !strcmp(mode, "detailed"))
		c->mode = NSIM_HBM_DETAILED;
	else if (mode && *mode && strcmp(mode, "bulk"))
		return -1;
	c->bulk = dm_hbm_bulk_new(c->preset, true);
	return c->bulk ? 0 : -1;
}

void nsim_hbm_chip_free(nsim_hbm_chip *c)
{
	dm_hbm_bulk_free(c->bulk);
	c->bulk = NULL;
}

void nsim_hbm_run_begin(nsim_hbm_run *r, nsim_hbm_chip *c, uint64_t start_ps)
{
	memset(r, 0, sizeof(*r));
	r->chip = c;
	r->start_ps = start_ps;
	dm_hbm_bulk_reset(c->bulk);
}

void nsim_hbm_run_end(nsim_hbm_run *r)
{
	dm_hbm_free(r->detailed);
	free(r->bins);
	r->detailed = NULL;
	r->bins = NULL;
}

/* spreads a transfer's bytes over the bins it overlaps, evenly over the
 * stacks (the interleave puts consecutive bursts on every pseudo-channel) */
static void bin_traffic(nsim_hbm_run *r, uint64_t t0, uint64_t t1, uint64_t bytes, bool write)
{
	uint32_t stacks = r->chip->preset->stacks;
	if (t1 <= t0)
		t1 = t0 + 1;
	uint64_t last = (t1 - 1) / NSIM_HBM_BIN_PS;
	if (last >= (1u << 24))
		return;                       /* beyond ~16 s of simulated time: not binned */
	if (last >= r->nbins) {
		uint64_t n = last + 1 > 2 * r->nbins ? last + 1 : 2 * r->nbins;
		double *nb = realloc(r->bins, n * stacks * 2 * sizeof(double));
		if (!nb)
			return;
		memset(nb + r->nbins * stacks * 2, 0, (n - r->nbins) * stacks * 2 * sizeof(double));
		r->bins = nb;
		r->nbins = n;
	}
	double rate = (double)bytes / (double)(t1 - t0);
	for (uint64_t b = t0 / NSIM_HBM_BIN_PS; b <= last; b++) {
		uint64_t lo = b * NSIM_HBM_BIN_PS > t0 ? b * NSIM_HBM_BIN_PS : t0;
		uint64_t hi = (b + 1) * NSIM_HBM_BIN_PS < t1 ? (b + 1) * NSIM_HBM_BIN_PS : t1;
		for (uint32_t k = 0; k < stacks; k++)
			r->bins[(b * stacks + k) * 2 + write] += rate * (double)(hi - lo) / stacks;
	}
}

void nsim_hbm_run_report(const nsim_hbm_run *r, const trc_observer *obs)
{
	if (!obs || !obs->counter)
		return;
	uint32_t stacks = r->chip->preset->stacks;
	/* chip-wide: the DMA traffic is interleaved evenly over the stacks, so
	 * per-stack series would repeat one another */
	for (uint64_t b = 0; b <= r->nbins; b++) {
		for (int w = 0; w < 2; w++) {
			double bytes = 0.0;      /* a final zero sample closes each counter */
			for (uint32_t k = 0; b < r->nbins && k < stacks; k++)
				bytes += r->bins[(b * stacks + k) * 2 + w];
			trc_counter_event e = { -1, w ? "HBM write GB/s" : "HBM read GB/s",
						r->start_ps + b * NSIM_HBM_BIN_PS,
						bytes / (double)NSIM_HBM_BIN_PS * 1000.0 };
			obs->counter(obs->ctx, &e);
		}
	}
}

/* Times are relative to the execution's start inside the models, so the
 * refresh schedule and the calibration see the same phase every run. */
uint64_t nsim_hbm_access(void *ctx, uint64_t start_ps, uint64_t addr, uint64_t bytes, bool write)
{
	nsim_hbm_run *r = ctx;
	uint64_t rel = start_ps - r->start_ps, end;
	int mode = write ? HBM_WRITES : HBM_READS;
	if (r->chip->mode == NSIM_HBM_DETAILED && !r->detailed) {
		dm_hbm_config cfg = { r->chip->preset, HBM_CLOSED_PAGE, -1, 0, true };
		r->detailed = dm_hbm_new(&cfg);
	}
	if (r->chip->mode == NSIM_HBM_DETAILED && r->detailed)
		end = dm_hbm_stream(r->detailed, rel, addr, bytes, 0, mode);
	else
		end = dm_hbm_bulk_stream(r->chip->bulk, rel, addr, bytes, 0, mode);
	bin_traffic(r, rel, end, bytes, write);
	return r->start_ps + end;
}
