/*
 * busy_union.c -- the length of a union of time intervals (busy_union.h).
 */
#include "busy_union.h"

#include <stdlib.h>
#include <string.h>

/* intervals ending by `now` can no longer grow: count them and drop them */
static void retire(nsim_busy_union *u, uint64_t now)
{
	uint32_t k = 0;
	while (k < u->n && u->iv[k][1] <= now) {
		u->done_ps += u->iv[k][1] - u->iv[k][0];
		k++;
	}
	if (k) {
		memmove(u->iv, u->iv + k, (u->n - k) * sizeof(u->iv[0]));
		u->n -= k;
	}
}

bool nsim_busy_union_add(nsim_busy_union *u, uint64_t now, uint64_t start, uint64_t end)
{
	if (end <= start)
		return true;
	retire(u, now);
	/* first interval that ends at or after start: it and the ones after it
	 * that start by end merge with [start, end) */
	uint32_t lo = 0;
	while (lo < u->n && u->iv[lo][1] < start)
		lo++;
	uint32_t hi = lo;
	while (hi < u->n && u->iv[hi][0] <= end) {
		start = u->iv[hi][0] < start ? u->iv[hi][0] : start;
		end = u->iv[hi][1] > end ? u->iv[hi][1] : end;
		hi++;
	}
	if (hi == lo) {                /* no overlap: insert at lo */
		if (u->n == u->cap) {
			uint32_t cap = u->cap ? 2 * u->cap : 16;
			void *p = realloc(u->iv, cap * sizeof(u->iv[0]));
			if (!p)
				return false;
			u->iv = p;
			u->cap = cap;
		}
		memmove(u->iv + lo + 1, u->iv + lo, (u->n - lo) * sizeof(u->iv[0]));
		u->n++;
	} else if (hi > lo + 1) {      /* several merged into one */
		memmove(u->iv + lo + 1, u->iv + hi, (u->n - hi) * sizeof(u->iv[0]));
		u->n -= hi - lo - 1;
	}
	u->iv[lo][0] = start;
	u->iv[lo][1] = end;
	return true;
}

uint64_t nsim_busy_union_total(const nsim_busy_union *u)
{
	uint64_t t = u->done_ps;
	for (uint32_t k = 0; k < u->n; k++)
		t += u->iv[k][1] - u->iv[k][0];
	return t;
}

void nsim_busy_union_free(nsim_busy_union *u)
{
	free(u->iv);
	memset(u, 0, sizeof(*u));
}
