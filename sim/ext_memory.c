/*
 * ext_memory.c -- a DMA's accesses to tensors in memory outside the chip
 * (nsim_tensor_set_external, runtime.h): the scheduler (coresim.c) calls
 * these around a DMA that reads or writes such a tensor; the caller's
 * access function moves the bytes and names the latency the access adds.
 */
#include "coresim.h"

#include "operand.h"

dm_fault_kind nsim_ext_access(nsim_run *r, int engine, int64_t pc, const isa_dma_desc *d, const isa_ap *side,
			      bool indexed, bool write, uint64_t at_ps, uint64_t *lat)
{
	uint32_t ti = side->tensor;
	const char *tname = r->prog->tensors[ti].name;
	int64_t lo = 0, hi = 0;
	if (indexed || !isa_ap_byte_range(side, &lo, &hi)) {
		lo = 0;
		hi = (int64_t)isa_tensor_bytes(&r->prog->tensors[ti]);
	}
	if (lo < 0 || hi < lo || (uint64_t)hi > r->bind.tensor_bytes[ti])
		return dm_fault_set(&r->fault, DM_FAULT_OOB, engine, pc, 0,
				    "descriptor '%s' reaches past external tensor '%s'", d->name, tname);
	uint64_t len = (uint64_t)(hi - lo);
	uint8_t *bytes = r->bind.hbm.map(r->bind.hbm.ctx, r->bind.tensor_addr[ti] + (uint64_t)lo, len, !write);
	uint64_t rel = at_ps > r->start_ps ? at_ps - r->start_ps : 0;
	uint64_t l = bytes ? r->ext_fn[ti](r->ext_ctx[ti], write, (uint64_t)lo, bytes, len, rel) : NSIM_EXT_ERROR;
	if (l == NSIM_EXT_ERROR)
		return dm_fault_set(&r->fault, DM_FAULT_OOB, engine, pc, (uint64_t)lo,
				    "descriptor '%s': the external memory of tensor '%s' refused a %llu-byte %s at "
				    "offset %lld", d->name, tname, (unsigned long long)len, write ? "write" : "read",
				    (long long)lo);
	*lat += l;
	return DM_OK;
}
