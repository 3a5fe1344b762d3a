/*
 * ops_control.c -- instructions with no effect on data.  sem_wait,
 * sem_signal, barrier, nop and end are sequencing, carried out by the
 * simulator's engine model; dma_copy's data moves when the simulator runs
 * its descriptor (dm_exec_dma) on the DMA engines.
 */
#include "ops.h"

#define NO_DATA_EFFECT(name)                                                               \
	dm_fault_kind dm_op_##name(dm_core *c, const dm_binding *b, int engine, int64_t index, \
				   const isa_instr *in, dm_fault *f)                           \
	{                                                                                   \
		(void)c, (void)b, (void)engine, (void)index, (void)in, (void)f;             \
		return DM_OK;                                                               \
	}

NO_DATA_EFFECT(sem_wait)
NO_DATA_EFFECT(sem_signal)
NO_DATA_EFFECT(barrier)
NO_DATA_EFFECT(nop)
NO_DATA_EFFECT(end)
NO_DATA_EFFECT(dma_copy)
