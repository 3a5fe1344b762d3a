/*
 * select.h -- top-k selection over (key, position) pairs in CPU PyTorch's
 * order (select.c says how and why).
 */
#ifndef NSIM_DM_SELECT_H
#define NSIM_DM_SELECT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct dm_sel_elem {
	double  key;   /* the value (exact for fp32 / bf16 / fp16 and 32-bit integers) */
	int64_t pos;   /* its position in the row */
} dm_sel_elem;

/* whether a row of n picks its k with a heap (else nth_element + sort) */
bool dm_select_uses_heap(int64_t n, int64_t k);

/* q[0, n) holds a row's pairs (pos = 0..n-1 in order); afterwards q[0, k)
 * holds the k largest (smallest unless largest) as CPU topk returns them:
 * NaN ranks above every number; in rank order when sorted (the heap path
 * always sorts, as CPU's does).  k outside [1, n]: q is left alone. */
void dm_select_topk(dm_sel_elem *q, int64_t n, int64_t k, bool largest, bool sorted);

/* an unstable sort of the whole row as CPU's std::sort leaves it (NaN last
 * ascending, first descending) */
void dm_select_sort(dm_sel_elem *q, int64_t n, bool descending);

#endif
