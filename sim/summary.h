/*
 * summary.h -- the profiler-style summary JSON (metric names after the
 * Neuron profiler; see HARDWARE.md "Profiler vocabulary"), written by
 * `neuronsim run --summary` and by runtime profiling (NEURON_RT_INSPECT_*).
 */
#ifndef NSIM_SUMMARY_H
#define NSIM_SUMMARY_H

#include <stdio.h>

#include "neuronsim/runtime.h"
#include "chip.h"

/* one row of the programs table: the executions that shared a label */
typedef struct nsim_summary_row {
	char     label[96];
	uint64_t count;
	uint64_t time_ps;          /* summed simulated time */
	uint64_t flops;            /* matmul FLOPs */
	uint64_t hbm_bytes;        /* read + written */
} nsim_summary_row;

/* `span_ps` is the time the metrics are rates over (a program's own time,
 * or first start to last end of a profile).  0, or -1 on a write error. */
int  nsim_summary_write(FILE *f, const dm_chip *chip, const nsim_exec_stats *s, uint64_t span_ps,
			uint64_t programs, const nsim_summary_row *rows, int nrows);
/* TensorE's bf16 peak, 2 x 128 x 128 FLOPs per cycle (MFU's denominator) */
uint64_t nsim_summary_peak_flops(const dm_chip *chip);
/* dst += src, field by field */
void nsim_stats_add(nsim_exec_stats *dst, const nsim_exec_stats *src);

#endif
