/*
 * pipeline.h -- the tile pipeline the streaming kernel generators share.
 *
 * A streaming kernel moves its data through SBUF a tile at a time: one
 * engine queues the tile's loads (HBM -> SBUF), one or more compute engines
 * work on it, another engine queues its stores (SBUF -> HBM).  With nbuf
 * buffer sets the loads of tile t + 1 overlap the compute and store of tile
 * t, as a double-buffered NKI kernel.  The pipeline owns what every such
 * generator used to write by hand:
 *
 *  - the program, its tensors and the finish / encode / free path;
 *  - the semaphores, numbered in the order asked for: loads landed, tiles
 *    computed, stores landed, then any a generator adds (nk_pipe_sem) for
 *    hand-offs between its own compute engines;
 *  - every wait derived from which tile reads what another wrote: the load
 *    engine refills buffer set t % nbuf once tile t - nbuf's stores have
 *    read it, a compute engine starts once the tile's loads landed, the
 *    store engine stores once the tile is computed;
 *  - SBUF placement: a buffer set is `set_bytes` per partition, set s at
 *    s * set_bytes;
 *  - errors, sticky: the first failure is kept (diag filled by the builder)
 *    and every later call does nothing, so a generator checks once, at
 *    nk_pipe_finish.
 *
 * A generator states the tile's loads, its compute and its stores; the flat
 * tiler (nk_flat_tile) cuts n contiguous elements into tiles of up to 128
 * rows of f elements and a tail row.
 */
#ifndef NSIM_BACKEND_PIPELINE_H
#define NSIM_BACKEND_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "emitter.h"
#include "neuronsim/isa.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NK_PIPE_MAX_BUF 8u

typedef struct nk_pipe {
	nk_em em;               /* the program, its first failure (sticky), signal counts */
	unsigned nbuf;          /* buffer sets */
	uint64_t set_bytes;     /* SBUF bytes per partition of one buffer set */
	int load_engine;        /* the engine that fills a buffer set: Sync's loads, or
	                           the engine of a generator that makes its tiles */
	int store_engine;
	uint32_t sem_loaded, sem_computed, sem_stored;
	uint32_t tiles;         /* tiles begun */
	uint32_t loads, stores; /* DMAs queued */
	uint32_t signalled;     /* tiles signalled computed (by an engine other than the store engine) */
	uint32_t stored_by[NK_PIPE_MAX_BUF];   /* stores queued once tile t's were, at t % nbuf */
	int computed_on;        /* the engine that computed the current tile */
} nk_pipe;

/* A new pipeline (its program for `target`) of 1 to NK_PIPE_MAX_BUF buffer
 * sets; false when it could not be made (pp->em.st says why). */
bool nk_pipe_init(nk_pipe *pp, int target, unsigned nbuf, uint64_t set_bytes, isa_diag *diag);
/* another semaphore, numbered after those already given out */
uint32_t nk_pipe_sem(nk_pipe *pp);
/* a 1-D tensor of n elements: its index, or -1 (the failure kept) */
int nk_pipe_tensor(nk_pipe *pp, const char *name, int dtype, int kind, uint64_t n);

/* Begins the next tile and returns the SBUF offset of its buffer set. */
uint64_t nk_pipe_tile(nk_pipe *pp);
/* a load of the current tile: dst (SBUF) <- src (HBM) on DMA queue `queue` */
void nk_pipe_load(nk_pipe *pp, isa_ap dst, isa_ap src, unsigned queue);
/* `engine` waits until the current tile's loads landed */
void nk_pipe_compute(nk_pipe *pp, int engine);
/* `engine` waits until every store queued so far landed (a round trip
 * through HBM inside a tile: stored, drained, reloaded) */
void nk_pipe_drain(nk_pipe *pp, int engine);
/* `engine`, the tile's last, signals it computed (nothing to signal when
 * it is the store engine: its own stream orders the store after) */
void nk_pipe_computed(nk_pipe *pp, int engine);
/* a store of the current tile, dst (HBM) <- src (SBUF) on queue `queue`,
 * queued once the tile is computed */
void nk_pipe_store(nk_pipe *pp, isa_ap dst, isa_ap src, unsigned queue);
/* the same for any DMA mode: an indirect one (gather / scatter rows by the
 * SBUF column `index`) is the tile's store too, reading its index column */
void nk_pipe_store_dma(nk_pipe *pp, int mode, isa_ap dst, isa_ap src, const isa_ap *index, unsigned queue);
/* an HBM -> HBM transfer outside any tile (a copy kernel's), issued from
 * the load and the store engine in turn (two in-order issuers) on
 * alternating queues, counted with the stores */
void nk_pipe_transfer(nk_pipe *pp, isa_ap dst, isa_ap src);
/* a failure of the generator's own (a builder call's status): kept */
void nk_pipe_check(nk_pipe *pp, isa_status st);

/* The end: the store engine waits for every store, the program is
 * validated and encoded into bin / len, and freed (also on failure).
 * Returns the first failure, or ISA_OK. */
isa_status nk_pipe_finish(nk_pipe *pp, uint8_t **bin, size_t *len);

/* n contiguous elements as tiles of up to 128 rows of f elements each
 * (whole rows), then a last tile of one partial row: the tile starting at
 * element s (f > 0, s < n); the next starts rows * cols later. */
typedef struct nk_tile {
	uint64_t start;         /* first element */
	uint32_t rows, cols;
} nk_tile;
nk_tile nk_flat_tile(uint64_t n, uint64_t s, uint64_t f);

#ifdef __cplusplus
}
#endif
#endif
