/*
 * hbm_timing.c -- DMA's memory timing through the HBM model (hbm_timing.h).
 * Every execution starts the memory fresh at its start time (refresh phase,
 * open rows, bandwidth booked), so runs stay repeatable; the bulk model's
 * calibration is kept per chip.
 */
#include "hbm_timing.h"

#include <string.h>

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
	r->detailed = NULL;
}

/* Times are relative to the execution's start inside the models, so the
 * refresh schedule and the calibration see the same phase every run. */
uint64_t nsim_hbm_access(void *ctx, uint64_t start_ps, uint64_t addr, uint64_t bytes, bool write)
{
	nsim_hbm_run *r = ctx;
	uint64_t rel = start_ps - r->start_ps;
	int mode = write ? HBM_WRITES : HBM_READS;
	if (r->chip->mode == NSIM_HBM_DETAILED) {
		if (!r->detailed) {
			dm_hbm_config cfg = { r->chip->preset, HBM_CLOSED_PAGE, -1, 0, true };
			r->detailed = dm_hbm_new(&cfg);
		}
		if (r->detailed)
			return r->start_ps + dm_hbm_stream(r->detailed, rel, addr, bytes, 0, mode);
	}
	return r->start_ps + dm_hbm_bulk_stream(r->chip->bulk, rel, addr, bytes, 0, mode);
}
