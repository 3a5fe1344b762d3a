/*
 * evqueue.c -- binary min-heap of events ordered by (time, seq).
 */
#include "evqueue.h"

#include <stdlib.h>
#include <string.h>

void nsim_sched_init(nsim_sched *s)
{
	memset(s, 0, sizeof(*s));
}

void nsim_sched_free(nsim_sched *s)
{
	free(s->heap);
	memset(s, 0, sizeof(*s));
}

static bool before(const nsim_event *x, const nsim_event *y)
{
	return x->time < y->time || (x->time == y->time && x->seq < y->seq);
}

bool nsim_sched_push(nsim_sched *s, uint64_t time, uint32_t kind, uint32_t a, uint64_t b)
{
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 64;
		nsim_event *h = realloc(s->heap, (size_t)cap * sizeof(*h));
		if (!h)
			return false;
		s->heap = h;
		s->cap = cap;
	}
	nsim_event e = { time < s->now ? s->now : time, s->next_seq++, kind, a, b };
	uint32_t i = s->n++;
	while (i > 0) {
		uint32_t parent = (i - 1) / 2;
		if (!before(&e, &s->heap[parent]))
			break;
		s->heap[i] = s->heap[parent];
		i = parent;
	}
	s->heap[i] = e;
	return true;
}

bool nsim_sched_pop(nsim_sched *s, nsim_event *out)
{
	if (!s->n)
		return false;
	*out = s->heap[0];
	nsim_event last = s->heap[--s->n];
	uint32_t i = 0;
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		const nsim_event *best = &last;
		if (l < s->n && before(&s->heap[l], best)) {
			m = l;
			best = &s->heap[l];
		}
		if (r < s->n && before(&s->heap[r], best))
			m = r;
		if (m == i)
			break;
		s->heap[i] = s->heap[m];
		i = m;
	}
	if (s->n)
		s->heap[i] = last;
	s->now = out->time;
	return true;
}
