/*
 * hostpool.c -- the host threads that share one instruction's rows
 * (dm_par, device_model/core.h).
 *
 * Why: a simulated program's host time is the functional work of its
 * instructions -- memcpy of DMA rows, TensorE dot products -- and all of it
 * ran on one host core.  Rows of one instruction are independent, so the
 * idle cores take some: the caller and the workers claim chunks of the row
 * range (a few chunks per thread) from one counter, and the caller returns
 * when every chunk is done.
 * Which thread runs a chunk never changes its result (dm_par's contract), so
 * results and cycle counts are the same for any thread count.
 *
 * Workers spin briefly after a job (instructions come microseconds apart),
 * yielding now and then (a VM may run two of our threads on one CPU), then
 * sleep on a condition variable.  One job at a time: a second caller
 * (another host thread simulating) runs its rows itself.  In a forked child
 * the workers do not exist: it runs everything itself.
 */
#define _GNU_SOURCE
#include "hostpool.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define MAX_THREADS 16
#define SPIN_ROUNDS 20000        /* ~50-100 us of pause before sleeping */
#define YIELD_EVERY 64           /* spins between sched_yield() calls */

static struct {
	pthread_once_t   once;
	int              nthreads;   /* including the caller; 1: no pool */
	pid_t            pid;
	pthread_mutex_t  busy;       /* one job at a time */
	/* the job, published by `gen` */
	dm_rows_fn       fn;
	void            *arg;
	uint32_t         n;
	atomic_uint      next;       /* chunks claimed */
	atomic_uint      done;       /* chunks finished */
	atomic_ulong     gen;
	/* sleeping workers */
	pthread_mutex_t  mu;
	pthread_cond_t   cv;
	int              sleepers;
} pool = {
	.once = PTHREAD_ONCE_INIT,
	.nthreads = 1,
	.busy = PTHREAD_MUTEX_INITIALIZER,
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
};

/* Chunk i of the job: rows [n i / C, n (i + 1) / C), C = CHUNKS_PER_THREAD
 * chunks per thread so that a thread the host slows down (or wakes late)
 * leaves its share to the others.  C is fixed when the pool starts: a
 * worker still leaving the previous job may claim from the next job's
 * counter, and its bound on the claim must be the next job's too.  (Chunks
 * past n's rows are empty.) */
#define CHUNKS_PER_THREAD 4

static unsigned nchunks(void)
{
	return (unsigned)pool.nthreads * CHUNKS_PER_THREAD;
}

static void run_chunks(void)
{
	unsigned C = nchunks(), i;
	while ((i = atomic_fetch_add_explicit(&pool.next, 1, memory_order_acquire)) < C) {
		uint32_t lo = (uint32_t)((uint64_t)pool.n * i / C);
		uint32_t hi = (uint32_t)((uint64_t)pool.n * (i + 1) / C);
		if (lo < hi)
			pool.fn(pool.arg, lo, hi);
		atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
	}
}

static void *worker(void *unused)
{
	(void)unused;
	unsigned long seen = atomic_load_explicit(&pool.gen, memory_order_acquire);
	for (;;) {
		int spins = 0;
		while (atomic_load_explicit(&pool.gen, memory_order_acquire) == seen) {
			if (++spins < SPIN_ROUNDS) {
				cpu_relax();
				if (spins % YIELD_EVERY == 0)
					sched_yield();   /* a thread sharing this CPU goes first */
				continue;
			}
			pthread_mutex_lock(&pool.mu);
			pool.sleepers++;
			while (atomic_load_explicit(&pool.gen, memory_order_acquire) == seen)
				pthread_cond_wait(&pool.cv, &pool.mu);
			pool.sleepers--;
			pthread_mutex_unlock(&pool.mu);
		}
		seen = atomic_load_explicit(&pool.gen, memory_order_acquire);
		run_chunks();
	}
	return NULL;
}

/* NEURON_SIM_THREADS, else the online CPUs (at most MAX_THREADS) */
static int configured_threads(void)
{
	const char *e = getenv("NEURON_SIM_THREADS");
	long n;
	if (e && *e) {
		char *end;
		n = strtol(e, &end, 10);
		if (*end || n < 1) {
			fprintf(stderr, "neuronsim: NEURON_SIM_THREADS='%s' is not a positive integer; "
				"simulating on one host thread\n", e);
			n = 1;
		}
	} else {
		n = sysconf(_SC_NPROCESSORS_ONLN);
	}
	return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}

static void start(void)
{
	int want = configured_threads(), have = 1;
	pthread_attr_t attr;
	if (want > 1 && pthread_attr_init(&attr) == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		for (; have < want; have++) {
			pthread_t t;
			if (pthread_create(&t, &attr, worker, NULL))
				break;          /* fewer threads: still correct */
		}
		pthread_attr_destroy(&attr);
	}
	pool.pid = getpid();
	pool.nthreads = have;
	atomic_store(&pool.next, UINT_MAX / 2);      /* nothing to claim yet */
}

int nsim_hostpool_threads(void)
{
	pthread_once(&pool.once, start);
	return pool.nthreads;
}

void nsim_hostpool_run(void *ctx, dm_rows_fn fn, void *arg, uint32_t n)
{
	(void)ctx;
	if (pool.nthreads < 2 || getpid() != pool.pid || pthread_mutex_trylock(&pool.busy)) {
		fn(arg, 0, n);
		return;
	}
	pool.fn = fn;
	pool.arg = arg;
	pool.n = n;
	atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
	atomic_store_explicit(&pool.next, 0, memory_order_release);
	atomic_fetch_add_explicit(&pool.gen, 1, memory_order_release);
	pthread_mutex_lock(&pool.mu);
	if (pool.sleepers)
		pthread_cond_broadcast(&pool.cv);
	pthread_mutex_unlock(&pool.mu);
	run_chunks();
	/* a worker finishing its last chunk: usually microseconds, but when
	 * the host runs it on this thread's CPU, let it have the CPU */
	for (unsigned spins = 1;
	     atomic_load_explicit(&pool.done, memory_order_acquire) < nchunks(); spins++) {
		cpu_relax();
		if (spins % YIELD_EVERY == 0)
			sched_yield();
	}
	pthread_mutex_unlock(&pool.busy);
}
