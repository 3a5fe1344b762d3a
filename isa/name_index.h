/*
 * name_index.h -- a hash index over the names of a program's descriptors,
 * so lookups and duplicate checks stay linear in programs traced from big
 * kernels (hundreds of thousands of DMA descriptors).  Entries are indices
 * into p->dma; the index holds no names of its own, so the descriptor array
 * may grow (and move) between calls.
 */
#ifndef NSIM_ISA_NAME_INDEX_H
#define NSIM_ISA_NAME_INDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "neuronsim/isa.h"

typedef struct isa_name_index {
	uint32_t *slots;   /* descriptor index + 1; 0 = empty */
	uint32_t  cap;     /* a power of two, kept over twice the entries */
} isa_name_index;

/* index of the descriptor named `name`, or -1 */
int64_t isa_name_index_find(const isa_name_index *ix, const isa_program *p, const char *name);
/* enters descriptor `idx` (already in p->dma, its name not yet indexed) */
bool isa_name_index_add(isa_name_index *ix, const isa_program *p, uint32_t idx);
void isa_name_index_free(isa_name_index *ix);

#endif
