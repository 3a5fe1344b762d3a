/*
 * hbm_stub.c -- bandwidth + latency memory timing (see hbm_stub.h).
 */
#include "hbm_stub.h"

#include <string.h>

void nsim_hbm_stub_init(nsim_hbm_stub *h, const dm_chip *chip, uint64_t start_ps)
{
	memset(h, 0, sizeof(*h));
	h->chip = chip;
	h->free_at = start_ps;
}

uint64_t nsim_hbm_stub_access(void *ctx, uint64_t start_ps, uint64_t addr, uint64_t bytes,
			      bool write)
{
	nsim_hbm_stub *h = ctx;
	(void)addr, (void)write;
	/* bytes / (bytes per us) in ps, rounded up */
	uint64_t xfer = (bytes * 1000000u + h->chip->hbm_rate - 1) / h->chip->hbm_rate;
	uint64_t begin = start_ps > h->free_at ? start_ps : h->free_at;
	h->free_at = begin + xfer;
	return h->free_at + h->chip->hbm_latency_ps;
}
