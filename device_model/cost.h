/*
 * cost.h -- cycles per instruction from the published NKI cost model
 * (../shared/HARDWARE.md "Cost model"), one function per cost class of
 * isa_cost.def.
 *
 * `busy` is how long the instruction occupies its engine (the issue
 * interval of back-to-back independent instructions); `latency` is when its
 * results are visible (busy + the engine's fixed pipeline overhead), which is
 * what a dependent instruction on another engine waits for.
 */
#ifndef NSIM_DM_COST_H
#define NSIM_DM_COST_H

#include <stdbool.h>

#include "chip.h"

typedef struct dm_cost {
	uint64_t busy;      /* engine cycles */
	uint64_t latency;   /* engine cycles, >= busy */
} dm_cost;

/* TensorE context a matmul's cost depends on: the loaded stationary */
typedef struct dm_cost_ctx {
	uint32_t stat_m;       /* free size (M) of the last load_stationary */
	int      stat_dtype;
} dm_cost_ctx;

dm_cost dm_cost_of(const dm_chip *chip, int engine, const isa_instr *in,
		   const dm_cost_ctx *ctx);

#endif
