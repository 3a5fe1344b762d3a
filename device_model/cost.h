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

/*
 * DMA (HARDWARE.md "DMA"): a transfer's rows are spread over the core's DMA
 * engines; each engine pays a fixed overhead per descriptor (a contiguous
 * run of both sides, split at the chip's chunk size) plus its bytes at the
 * engine's theoretical rate.  HBM's own timing is the memory model's.
 */
typedef struct dm_dma_shape {
	uint64_t rows;             /* the partition dimension (the index's for indirect) */
	uint64_t src_row, dst_row; /* bytes per row read / written */
	uint64_t rmw_row;          /* scatter_add: destination bytes read back per row */
	uint64_t row_bytes;        /* bytes an engine moves per row */
	uint64_t descs_per_row;
	uint32_t rate_pct;         /* of the engine's copy rate: 100, less for a transpose */
} dm_dma_shape;

dm_dma_shape dm_dma_shape_of(const dm_chip *chip, const isa_dma_desc *d);
/* picoseconds from a sem_signal with `peer` to the paired core's semaphore
 * changing: a remote semaphore update is a small write the DMA fabric
 * carries (nki.isa core_barrier: "each NeuronCore writes a semaphore to each
 * other core"), so it pays the DMA issue latency and one descriptor */
uint64_t     dm_peer_signal_ps(const dm_chip *chip);
/* picoseconds one DMA engine is busy moving `rows` rows of `shape` */
uint64_t     dm_dma_engine_ps(const dm_chip *chip, const dm_dma_shape *shape, uint64_t rows);
/* How a transfer's rows fall on the DMA engines: each engine serves a
 * fixed block of partitions (128 / engines, HARDWARE.md "DMA" and
 * CALIBRATION C-10: A[4, 4096] moves on one engine), so the rows of the
 * on-chip side land on the engines of their partitions; a transfer between
 * HBM tensors takes its rows in the same blocks.  rows[k] (k < nengines,
 * at most 32) gets engine k's row count. */
void         dm_dma_rows_per_engine(const dm_chip *chip, const isa_dma_desc *d, uint64_t total_rows,
				    uint32_t nengines, uint64_t *rows);

#endif
