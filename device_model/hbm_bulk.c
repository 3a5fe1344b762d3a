/*
 * hbm_bulk.c -- the bulk HBM model (see hbm.h): O(1) per transfer, its rate
 * and start-up cost measured on the request-level model for the same access
 * pattern, refresh added from the refresh schedule.
 */
#include "hbm.h"

#include <stdlib.h>
#include <string.h>

#define CACHE 16

typedef struct calib {
	uint64_t stride;
	int      mode;
	double   intercept_ps, ps_per_byte;
} calib;

struct dm_hbm_bulk {
	dm_hbm_preset p;
	bool          refresh_on;
	calib         cache[CACHE];
	uint32_t      ncache;
	uint64_t      pipe_free;     /* ps: chip-wide bandwidth booked until */
};

dm_hbm_bulk *dm_hbm_bulk_new(const dm_hbm_preset *p, bool refresh_on)
{
	dm_hbm_bulk *b = calloc(1, sizeof(*b));
	if (b) {
		b->p = *p;
		b->refresh_on = refresh_on;
	}
	return b;
}

void dm_hbm_bulk_free(dm_hbm_bulk *b)
{
	free(b);
}

void dm_hbm_bulk_reset(dm_hbm_bulk *b)
{
	b->pipe_free = 0;
}

/* request-level time of a fresh model for `bytes` of the pattern, no refresh */
static double sample(const dm_hbm_preset *p, uint64_t bytes, uint64_t stride, int mode)
{
	dm_hbm_config cfg = { p, HBM_CLOSED_PAGE, 0, 0, false };
	dm_hbm *h = dm_hbm_new(&cfg);
	if (!h)
		return 0;
	double t = (double)dm_hbm_stream(h, 0, 0, bytes, stride, mode);
	dm_hbm_free(h);
	return t;
}

static const calib *calibrate(dm_hbm_bulk *b, uint64_t stride, int mode)
{
	for (uint32_t i = 0; i < b->ncache; i++)
		if (b->cache[i].stride == stride && b->cache[i].mode == mode)
			return &b->cache[i];
	/* two sizes give the line: enough bursts per pseudo-channel to be in
	 * steady state (8 KiB each at unit stride) */
	uint64_t pcs = (uint64_t)b->p.stacks * b->p.pcs_per_stack;
	uint64_t s1 = pcs * 4096, s2 = 2 * s1;
	double t1 = sample(&b->p, s1, stride, mode), t2 = sample(&b->p, s2, stride, mode);
	calib c = { stride, mode, 0, (t2 - t1) / (double)(s2 - s1) };
	c.intercept_ps = t1 - c.ps_per_byte * (double)s1;
	if (b->ncache == CACHE)
		b->ncache = 0;               /* small cache: recycle */
	b->cache[b->ncache] = c;
	return &b->cache[b->ncache++];
}

uint64_t dm_hbm_bulk_stream(dm_hbm_bulk *b, uint64_t start_ps, uint64_t addr, uint64_t bytes,
			    uint64_t stride, int mode)
{
	(void)addr;
	if (!stride)
		stride = b->p.burst_bytes;
	const calib *c = calibrate(b, stride, mode);
	/* the pipe: a transfer's data phase waits for earlier ones */
	uint64_t begin = start_ps > b->pipe_free ? start_ps : b->pipe_free;
	double busy = c->ps_per_byte * (double)bytes;
	uint64_t end = begin + (uint64_t)(busy + 0.5);
	if (b->refresh_on) {
		/* all-bank refreshes fall at k * tREFI; each one that lands inside
		 * the data phase stalls it by tRTP + tRP + tRFC + tRCD */
		const uint32_t *t = b->p.t;
		uint64_t refi = (uint64_t)t[HBM_tREFI] * b->p.tck_ps;
		uint64_t cost = (uint64_t)(t[HBM_tRTP] + t[HBM_tRP] + t[HBM_tRFC] + t[HBM_tRCDRD]) *
				b->p.tck_ps;
		uint64_t k = begin / refi + 1, n = 0;
		while (k * refi < end + n * cost) {
			n++;
			k++;
		}
		end += n * cost;
	}
	b->pipe_free = end;
	return end + (uint64_t)(c->intercept_ps > 0 ? c->intercept_ps + 0.5 : 0);
}
