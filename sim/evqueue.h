/*
 * evqueue.h -- the discrete-event queue: integer picoseconds, a binary heap
 * keyed by (time, insertion sequence), so events at the same time run in the
 * order they were scheduled and every run is bit-for-bit repeatable.
 */
#ifndef NSIM_SIM_SCHED_H
#define NSIM_SIM_SCHED_H

#include <stdbool.h>
#include <stdint.h>

typedef struct nsim_event {
	uint64_t time;        /* ps */
	uint64_t seq;
	uint32_t kind;
	uint32_t a;
	uint64_t b;
} nsim_event;

typedef struct nsim_sched {
	nsim_event *heap;
	uint32_t    n, cap;
	uint64_t    next_seq;
	uint64_t    now;
} nsim_sched;

void nsim_sched_init(nsim_sched *s);
void nsim_sched_free(nsim_sched *s);
/* schedules at max(time, now); false on no memory */
bool nsim_sched_push(nsim_sched *s, uint64_t time, uint32_t kind, uint32_t a, uint64_t b);
/* pops the earliest event into *e and advances now; false when empty */
bool nsim_sched_pop(nsim_sched *s, nsim_event *e);

#endif
