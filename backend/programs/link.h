/*
 * link.h -- the graph compiler's linker (link.c): kernel programs in the
 * order they run become one program.  Not a kernel generator: its inputs are
 * programs, not parameters, so nothing here is a program cache key.
 */
#ifndef NSIM_BACKEND_LINK_H
#define NSIM_BACKEND_LINK_H

#include "neuronsim/isa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parts (kernel programs, in the order
 * they run) become one program.  Every INPUT / OUTPUT tensor of a part is
 * bound to a byte offset in one of the graph's memory regions; the linked
 * program names region r seen as dtype d "r<r>_<d>" (INPUT and OUTPUT
 * regions are bound at run time, INTERNAL ones are its scratch). */
typedef struct nk_link_bind {
	const char *name;          /* the part's tensor */
	uint32_t region;
	uint64_t offset;           /* bytes into the region */
} nk_link_bind;
typedef struct nk_link_part {
	const isa_program *prog;   /* the part's program (as loaded: validated) */
	const char *label;         /* what it computes, for messages */
	uint32_t nbind;
	const nk_link_bind *bind;
} nk_link_part;
typedef struct nk_link_region {
	int kind;                  /* ISA_TK_INPUT, ISA_TK_OUTPUT or ISA_TK_INTERNAL */
	uint64_t bytes;
} nk_link_region;
isa_status nk_link_program(int target, const nk_link_part *parts, uint32_t nparts, const nk_link_region *regions,
			   uint32_t nregions, uint8_t **bin, size_t *len, isa_diag *diag);
/* whether `name` is a linked program's region tensor ("r<region>_<dtype>"),
 * and which region: what a caller binds at run time */
bool nk_link_region_of(const char *name, uint32_t *region);

#ifdef __cplusplus
}
#endif
#endif
