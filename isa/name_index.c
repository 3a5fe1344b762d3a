/*
 * name_index.c -- open-addressing hash of DMA descriptor names (see
 * name_index.h): FNV-1a, linear probing, doubled when half full.
 */
#include "name_index.h"

#include <stdlib.h>
#include <string.h>

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

/* the slot holding `name`, or the empty slot where it would go */
static uint32_t *slot_of(const isa_name_index *ix, const isa_program *p, const char *name)
{
	uint32_t mask = ix->cap - 1, i = name_hash(name) & mask;
	while (ix->slots[i] && strncmp(p->dma[ix->slots[i] - 1].name, name, ISA_MAX_NAME + 1) != 0)
		i = (i + 1) & mask;
	return &ix->slots[i];
}

int64_t isa_name_index_find(const isa_name_index *ix, const isa_program *p, const char *name)
{
	if (!ix->cap)
		return -1;
	uint32_t v = *slot_of(ix, p, name);
	return v ? (int64_t)v - 1 : -1;
}

bool isa_name_index_add(isa_name_index *ix, const isa_program *p, uint32_t idx)
{
	if (2ull * (idx + 1) >= ix->cap) {
		uint32_t cap = ix->cap ? 2 * ix->cap : 1024;
		uint32_t *slots = calloc(cap, sizeof(*slots));
		if (!slots)
			return false;
		free(ix->slots);
		ix->slots = slots;
		ix->cap = cap;
		for (uint32_t k = 0; k < idx; k++)
			*slot_of(ix, p, p->dma[k].name) = k + 1;
	}
	*slot_of(ix, p, p->dma[idx].name) = idx + 1;
	return true;
}

void isa_name_index_free(isa_name_index *ix)
{
	free(ix->slots);
	ix->slots = NULL;
	ix->cap = 0;
}
