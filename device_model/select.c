/*
 * select.c -- top-k selection in the order CPU PyTorch gives ties.
 *
 * PyTorch's CPU topk (ATen's topk_impl_loop) pairs every value with its
 * position and picks the k first by value alone with the C++ library's
 * algorithms: std::partial_sort when 64 * k <= n, else std::nth_element
 * followed (when sorted) by std::sort of the first k - 1.  Which of several
 * equal values comes out, and in which order, is whatever those algorithms'
 * comparison sequence leaves -- so reproducing CPU's tie order means running
 * the same algorithms, step for step.  These are the GNU libstdc++ ones
 * (heap select, introselect, introsort with a median-of-three pivot and an
 * unguarded final insertion sort), written here over (key, position) pairs.
 * tests/device_model/test_select.cc checks them against the C++ library
 * itself; tests/python checks the instruction against torch.topk.
 */
#include "select.h"

#include <math.h>
#include <string.h>

typedef struct sel_ctx {
	bool largest;
} sel_ctx;

/* "a ranks before b": larger (smaller) first, NaN ranking above every number */
static bool before(const sel_ctx *c, const dm_sel_elem *a, const dm_sel_elem *b)
{
	bool an = isnan(a->key), bn = isnan(b->key);
	if (c->largest)
		return (an && !bn) || a->key > b->key;
	return (!an && bn) || a->key < b->key;
}

static void swap_elems(dm_sel_elem *a, dm_sel_elem *b)
{
	dm_sel_elem t = *a;
	*a = *b;
	*b = t;
}

/* ------------------------------------------------------------- heaps */

static void push_heap_hole(const sel_ctx *c, dm_sel_elem *first, int64_t hole, int64_t top,
			   dm_sel_elem value)
{
	int64_t parent = (hole - 1) / 2;
	while (hole > top && before(c, &first[parent], &value)) {
		first[hole] = first[parent];
		hole = parent;
		parent = (hole - 1) / 2;
	}
	first[hole] = value;
}

static void adjust_heap(const sel_ctx *c, dm_sel_elem *first, int64_t hole, int64_t len,
			dm_sel_elem value)
{
	const int64_t top = hole;
	int64_t child = hole;
	while (child < (len - 1) / 2) {
		child = 2 * (child + 1);
		if (before(c, &first[child], &first[child - 1]))
			child--;
		first[hole] = first[child];
		hole = child;
	}
	if ((len & 1) == 0 && child == (len - 2) / 2) {
		child = 2 * (child + 1);
		first[hole] = first[child - 1];
		hole = child - 1;
	}
	push_heap_hole(c, first, hole, top, value);
}

static void make_heap(const sel_ctx *c, dm_sel_elem *first, int64_t len)
{
	if (len < 2)
		return;
	for (int64_t parent = (len - 2) / 2;; parent--) {
		adjust_heap(c, first, parent, len, first[parent]);
		if (parent == 0)
			return;
	}
}

/* the heap's top moves to *result, *result's old value sifts into the heap */
static void pop_heap_into(const sel_ctx *c, dm_sel_elem *first, int64_t len, dm_sel_elem *result)
{
	dm_sel_elem value = *result;
	*result = *first;
	adjust_heap(c, first, 0, len, value);
}

static void sort_heap(const sel_ctx *c, dm_sel_elem *first, int64_t len)
{
	while (len > 1) {
		len--;
		pop_heap_into(c, first, len, &first[len]);
	}
}

static void heap_select(const sel_ctx *c, dm_sel_elem *first, int64_t middle, int64_t len)
{
	make_heap(c, first, middle);
	for (int64_t i = middle; i < len; i++)
		if (before(c, &first[i], &first[0]))
			pop_heap_into(c, first, middle, &first[i]);
}

static void partial_sort(const sel_ctx *c, dm_sel_elem *first, int64_t middle, int64_t len)
{
	heap_select(c, first, middle, len);
	sort_heap(c, first, middle);
}

/* ------------------------------------------------------ quick partitions */

static void move_median_to_first(const sel_ctx *c, dm_sel_elem *result, dm_sel_elem *a,
				 dm_sel_elem *b, dm_sel_elem *m)
{
	if (before(c, a, b)) {
		if (before(c, b, m))
			swap_elems(result, b);
		else if (before(c, a, m))
			swap_elems(result, m);
		else
			swap_elems(result, a);
	} else if (before(c, a, m)) {
		swap_elems(result, a);
	} else if (before(c, b, m)) {
		swap_elems(result, m);
	} else {
		swap_elems(result, b);
	}
}

/* Hoare partition around *pivot without bounds checks: the median-of-three
 * placed sentinels at both ends */
static dm_sel_elem *unguarded_partition(const sel_ctx *c, dm_sel_elem *first, dm_sel_elem *last,
					const dm_sel_elem *pivot)
{
	for (;;) {
		while (before(c, first, pivot))
			first++;
		last--;
		while (before(c, pivot, last))
			last--;
		if (!(first < last))
			return first;
		swap_elems(first, last);
		first++;
	}
}

static dm_sel_elem *partition_pivot(const sel_ctx *c, dm_sel_elem *first, dm_sel_elem *last)
{
	dm_sel_elem *mid = first + (last - first) / 2;
	move_median_to_first(c, first, first + 1, mid, last - 1);
	return unguarded_partition(c, first + 1, last, first);
}

static void unguarded_linear_insert(const sel_ctx *c, dm_sel_elem *last)
{
	dm_sel_elem val = *last;
	dm_sel_elem *next = last - 1;
	while (before(c, &val, next)) {
		*last = *next;
		last = next;
		next--;
	}
	*last = val;
}

static void insertion_sort(const sel_ctx *c, dm_sel_elem *first, dm_sel_elem *last)
{
	if (first == last)
		return;
	for (dm_sel_elem *i = first + 1; i != last; i++) {
		if (before(c, i, first)) {
			dm_sel_elem val = *i;
			memmove(first + 1, first, (size_t)(i - first) * sizeof(*first));
			*first = val;
		} else {
			unguarded_linear_insert(c, i);
		}
	}
}

static int64_t floor_log2(int64_t n)
{
	int64_t r = 0;
	while (n > 1) {
		n >>= 1;
		r++;
	}
	return r;
}

enum { SORT_THRESHOLD = 16 };

static void introsort_loop(const sel_ctx *c, dm_sel_elem *first, dm_sel_elem *last, int64_t depth)
{
	while (last - first > SORT_THRESHOLD) {
		if (depth == 0) {
			partial_sort(c, first, last - first, last - first);
			return;
		}
		depth--;
		dm_sel_elem *cut = partition_pivot(c, first, last);
		introsort_loop(c, cut, last, depth);
		last = cut;
	}
}

static void sort_range(const sel_ctx *c, dm_sel_elem *first, dm_sel_elem *last)
{
	if (first == last)
		return;
	introsort_loop(c, first, last, 2 * floor_log2(last - first));
	if (last - first > SORT_THRESHOLD) {
		insertion_sort(c, first, first + SORT_THRESHOLD);
		for (dm_sel_elem *i = first + SORT_THRESHOLD; i != last; i++)
			unguarded_linear_insert(c, i);
	} else {
		insertion_sort(c, first, last);
	}
}

static void nth_element(const sel_ctx *c, dm_sel_elem *first, dm_sel_elem *nth, dm_sel_elem *last)
{
	if (first == last || nth == last)
		return;
	int64_t depth = 2 * floor_log2(last - first);
	while (last - first > 3) {
		if (depth == 0) {
			heap_select(c, first, nth + 1 - first, last - first);
			swap_elems(first, nth);
			return;
		}
		depth--;
		dm_sel_elem *cut = partition_pivot(c, first, last);
		if (cut <= nth)
			first = cut;
		else
			last = cut;
	}
	insertion_sort(c, first, last);
}

/* ---------------------------------------------------------------- entry */

void dm_select_sort(dm_sel_elem *q, int64_t n, bool descending)
{
	sel_ctx c = { descending };
	sort_range(&c, q, q + n);
}

bool dm_select_uses_heap(int64_t n, int64_t k)
{
	return k * 64 <= n;
}

void dm_select_topk(dm_sel_elem *q, int64_t n, int64_t k, bool largest, bool sorted)
{
	sel_ctx c = { largest };
	if (k <= 0 || k > n)
		return;
	if (dm_select_uses_heap(n, k)) {
		partial_sort(&c, q, k, n);
		return;
	}
	nth_element(&c, q, q + k - 1, q + n);
	if (sorted)
		sort_range(&c, q, q + k - 1);
}
