/*
 * busy_union.h -- the length of a union of time intervals, built online.
 *
 * The profiler's dma_active_time is "time when at least one DMA packet is
 * transferring" (SDK tools/neuron-explorer/profile-schema-reference.rst):
 * the union of every DMA engine's busy intervals, not their sum.  The
 * simulator learns each interval when its transfer is issued, engines out of
 * step with each other, so intervals arrive unsorted; but none starts before
 * the issuing event's time.  Intervals that end by then are final: they are
 * added to the total and dropped, so only the ones still in the future are
 * kept (a handful: as many as there are gaps in the queued DMA work).
 */
#ifndef NSIM_SIM_BUSY_UNION_H
#define NSIM_SIM_BUSY_UNION_H

#include <stdbool.h>
#include <stdint.h>

typedef struct nsim_busy_union {
	uint64_t (*iv)[2];     /* disjoint [start, end) intervals, sorted */
	uint32_t   n, cap;
	uint64_t   done_ps;    /* length of the intervals already dropped */
} nsim_busy_union;

/* Adds [start, end) (start >= now); false when out of memory. */
bool nsim_busy_union_add(nsim_busy_union *u, uint64_t now, uint64_t start, uint64_t end);
/* Length of the whole union so far. */
uint64_t nsim_busy_union_total(const nsim_busy_union *u);
void nsim_busy_union_free(nsim_busy_union *u);

#endif
