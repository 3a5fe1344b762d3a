/*
 * summary.h -- the profiler-style summary JSON (metric names after the
 * Neuron profiler; see HARDWARE.md "Profiler vocabulary"), written by
 * `neuronsim run --summary` and by runtime profiling (NEURON_RT_INSPECT_*).
 * traces/ knows the device only through trc_device, filled by the runtime
 * from the chip table.
 */
#ifndef NSIM_TRC_SUMMARY_H
#define NSIM_TRC_SUMMARY_H

#include <stdio.h>

#include "neuronsim/exec.h"

/* what the rates are taken against */
typedef struct trc_device {
	const char *target;                /* "trn2" */
	uint64_t    peak_flops_per_second; /* TensorE bf16 (MFU's denominator) */
	uint64_t    hbm_bytes_per_second;  /* MBU's denominator */
	uint32_t    tensor_clock_mhz;      /* neuroncore_cycle_count */
	uint32_t    dma_engines;           /* per core */
} trc_device;

/* one row of the programs table: the executions that shared a label */
typedef struct trc_summary_row {
	char     label[96];
	uint64_t count;
	uint64_t time_ps;          /* summed simulated time */
	uint64_t flops;            /* matmul FLOPs */
	uint64_t hbm_bytes;        /* read + written */
} trc_summary_row;

/* `span_ps` is the time the metrics are rates over (a program's own time,
 * or first start to last end of a profile).  0, or -1 on a write error. */
int trc_summary_write(FILE *f, const trc_device *dev, const nsim_exec_stats *s, uint64_t span_ps,
		      uint64_t programs, const trc_summary_row *rows, int nrows);

#endif
