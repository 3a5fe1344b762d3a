/*
 * pipeline.c -- the tile pipeline of the streaming kernel generators
 * (pipeline.h): semaphores, buffer-set reuse, load / compute / store
 * ordering, sticky errors and the finish path, written once.
 */
#include "pipeline.h"

#include <string.h>

#include "programs.h"

/* engines of the pipeline's own DMAs: loads from Sync, stores from GpSimd,
 * so neither queue waits behind the other's issue */
#define LOAD_ENGINE ISA_ENGINE_SYNC
#define STORE_ENGINE ISA_ENGINE_GPSIMD

void nk_pipe_check(nk_pipe *pp, isa_status st)
{
	if (!pp->em.st && st)
		pp->em.st = st;
}

bool nk_pipe_init(nk_pipe *pp, int target, unsigned nbuf, uint64_t set_bytes, isa_diag *diag)
{
	memset(pp, 0, sizeof(*pp));
	pp->em.diag = diag;
	if (!nbuf || nbuf > NK_PIPE_MAX_BUF) {
		nk_fail(diag, ISA_E_LIMIT, "tile pipeline: %u buffer sets", nbuf);
		pp->em.st = ISA_E_LIMIT;
		return false;
	}
	pp->nbuf = nbuf;
	pp->set_bytes = set_bytes;
	pp->load_engine = LOAD_ENGINE;
	pp->store_engine = STORE_ENGINE;
	pp->em.p = isa_program_new(target);
	if (!pp->em.p) {
		pp->em.st = ISA_E_NOMEM;
		return false;
	}
	pp->sem_loaded = nk_pipe_sem(pp);
	pp->sem_computed = nk_pipe_sem(pp);
	pp->sem_stored = nk_pipe_sem(pp);
	return true;
}

uint32_t nk_pipe_sem(nk_pipe *pp)
{
	if (!pp->em.p)
		return 0;
	if (pp->em.p->num_semaphores >= NK_EM_SEMS) {   /* the emitter counts signals of NK_EM_SEMS */
		nk_fail(pp->em.diag, ISA_E_LIMIT, "tile pipeline: more than %u semaphores", NK_EM_SEMS);
		nk_pipe_check(pp, ISA_E_LIMIT);
		return 0;
	}
	return pp->em.p->num_semaphores++;
}

int nk_pipe_tensor(nk_pipe *pp, const char *name, int dtype, int kind, uint64_t n)
{
	if (pp->em.st)
		return -1;
	uint64_t shape[1] = { n };
	int t = isa_builder_tensor(pp->em.p, name, dtype, kind, 1, shape, pp->em.diag);
	if (t < 0)
		nk_pipe_check(pp, pp->em.diag->code ? pp->em.diag->code : ISA_E_LIMIT);
	return t;
}

uint64_t nk_pipe_tile(nk_pipe *pp)
{
	if (pp->tiles)   /* the previous tile's stores are all queued */
		pp->stored_by[(pp->tiles - 1) % pp->nbuf] = pp->stores;
	uint32_t t = pp->tiles++;
	/* buffer set t % nbuf was last read by tile t - nbuf's stores */
	if (!pp->em.st && t >= pp->nbuf)
		nk_pipe_check(pp, isa_builder_sem_wait(pp->em.p, pp->load_engine, pp->sem_stored, ISA_ALU_is_ge,
						       pp->stored_by[t % pp->nbuf]));
	return (uint64_t)(t % pp->nbuf) * pp->set_bytes;
}

/* a DMA descriptor dst <- src (`index`: an indirect one of `mode`), or -1
 * (the failure kept) */
static int descriptor(nk_pipe *pp, int mode, isa_ap dst, isa_ap src, const isa_ap *index)
{
	if (pp->em.st)
		return -1;
	int d = isa_builder_dma(pp->em.p, "", mode, &dst, &src, index, pp->em.diag);
	if (d < 0)
		nk_pipe_check(pp, pp->em.diag->code ? pp->em.diag->code : ISA_E_LIMIT);
	return d;
}

void nk_pipe_load(nk_pipe *pp, isa_ap dst, isa_ap src, unsigned queue)
{
	int d = descriptor(pp, ISA_DMA_DIRECT, dst, src, NULL);
	if (d < 0)
		return;
	nk_pipe_check(pp, isa_builder_dma_copy(pp->em.p, pp->load_engine, (uint32_t)d, queue, pp->sem_loaded, 1));
	pp->loads++;
}

void nk_pipe_compute(nk_pipe *pp, int engine)
{
	if (!pp->em.st)
		nk_pipe_check(pp, isa_builder_sem_wait(pp->em.p, engine, pp->sem_loaded, ISA_ALU_is_ge, pp->loads));
}

void nk_pipe_drain(nk_pipe *pp, int engine)
{
	if (!pp->em.st)
		nk_pipe_check(pp, isa_builder_sem_wait(pp->em.p, engine, pp->sem_stored, ISA_ALU_is_ge, pp->stores));
}

void nk_pipe_computed(nk_pipe *pp, int engine)
{
	pp->computed_on = engine;
	if (engine == pp->store_engine)
		return;
	pp->signalled++;
	if (!pp->em.st)
		nk_pipe_check(pp, isa_builder_sem_signal(pp->em.p, engine, pp->sem_computed, ISA_SEMOP_ADD, 1));
}

void nk_pipe_store_dma(nk_pipe *pp, int mode, isa_ap dst, isa_ap src, const isa_ap *index, unsigned queue)
{
	int d = descriptor(pp, mode, dst, src, index);
	if (d < 0)
		return;
	/* a tile computed on another engine: the store waits for its signal */
	if (pp->computed_on != pp->store_engine)
		nk_pipe_check(pp, isa_builder_sem_wait(pp->em.p, pp->store_engine, pp->sem_computed, ISA_ALU_is_ge,
						       pp->signalled));
	if (!pp->em.st)
		nk_pipe_check(pp, isa_builder_dma_copy(pp->em.p, pp->store_engine, (uint32_t)d, queue, pp->sem_stored, 1));
	pp->stores++;
}

void nk_pipe_store(nk_pipe *pp, isa_ap dst, isa_ap src, unsigned queue)
{
	nk_pipe_store_dma(pp, ISA_DMA_DIRECT, dst, src, NULL, queue);
}

void nk_pipe_transfer(nk_pipe *pp, isa_ap dst, isa_ap src)
{
	int d = descriptor(pp, ISA_DMA_DIRECT, dst, src, NULL);
	if (d < 0)
		return;
	int engine = pp->stores % 2 ? pp->store_engine : pp->load_engine;
	pp->stores++;
	nk_pipe_check(pp, isa_builder_dma_copy(pp->em.p, engine, (uint32_t)d, pp->stores % 2, pp->sem_stored, 1));
}

isa_status nk_pipe_finish(nk_pipe *pp, uint8_t **bin, size_t *len)
{
	if (!pp->em.st)
		nk_pipe_check(pp, nk_finish(pp->em.p, pp->store_engine, pp->sem_stored, pp->stores, bin, len, pp->em.diag));
	isa_program_free(pp->em.p);
	pp->em.p = NULL;
	return pp->em.st;
}

nk_tile nk_flat_tile(uint64_t n, uint64_t s, uint64_t f)
{
	uint64_t left = n - s, rows = left / f;
	if (rows == 0)
		return (nk_tile){ s, 1, (uint32_t)left };
	return (nk_tile){ s, (uint32_t)(rows > ISA_NUM_PARTITIONS ? ISA_NUM_PARTITIONS : rows), (uint32_t)f };
}
