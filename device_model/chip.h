/*
 * chip.h -- chip configurations as data: one dm_chip per Trainium
 * generation (chips.c).  Clocks are integers in MHz and rates in bytes per
 * microsecond so every conversion to simulated picoseconds is exact integer
 * arithmetic.  Geometry a program may address (SBUF/PSUM sizes, matmul N)
 * lives in include/neuronsim/isa_targets.def; this adds what time depends on.
 */
#ifndef NSIM_DM_CHIP_H
#define NSIM_DM_CHIP_H

#include <stdbool.h>
#include <stdint.h>

#include "neuronsim/isa.h"

/* A chip row's name and core name are its isa_targets.def row's
 * (dm_chip_name, dm_chip_core_name): stated once, there. */
/* A generation's collective fabric, as data (chips.c names the source of
 * every figure; collectives.c the formulas that use them). */
typedef struct dm_fabric {
	uint32_t torus_x, torus_y;  /* chips of an instance in a 2D torus */
	uint64_t link_rate;         /* bytes/us, one direction of one chip-to-chip link */
	uint64_t ring_rate;         /* bytes/us a rank moves on one ring: the engines driving it */
	uint64_t launch_ps;         /* a collective's floor: launch and completion handshake */
	uint64_t pipe_ps;           /* a pipelined algorithm's fill, beside the launch */
	uint64_t step_ps;           /* per step: a handshake with the step's peer */
	uint64_t mesh_max;          /* bytes up to which all-reduce / gathers use mesh */
	uint64_t rdh_max;           /* ... recursive halving-doubling (2^k ranks), ring above */
} dm_fabric;

typedef struct dm_chip {
	int         target;              /* isa_target */
	uint32_t    cores;               /* physical NeuronCores per chip */
	uint32_t    clock_mhz[ISA_NUM_ENGINES];
	/* elements per engine cycle (HARDWARE.md "Engines") */
	uint32_t    vector_elems_16bit;  /* bf16/fp16 */
	uint32_t    vector_elems;        /* other dtypes */
	uint32_t    scalar_elems;
	uint32_t    scalar_elems_16bit;  /* v4: 256 for bf16/fp16/fp8 */
	uint32_t    gpsimd_elems;
	uint32_t    min_ii;              /* minimum initiation interval, cycles */
	uint32_t    static_overhead;     /* dependent/tiny Vector/GpSimd instr, cycles */
	uint32_t    scalar_overhead;     /* the same for ScalarE (its activation pipeline) */
	/* TensorE cycles from an fp32 / tf32 matmul's last moving column to its
	 * result having left the array (the instruction's end); 16-bit and
	 * 8-bit: the published 64-cycle latency */
	uint32_t    mm_fp32_drain;
	/* v2 port contention (HW On-chip memory): Vector and GpSimd cannot access
	 * SBUF in parallel; Vector and Scalar cannot access PSUM in parallel */
	bool        sbuf_vector_gpsimd_shared;
	bool        psum_vector_scalar_shared;
	/* DMA */
	uint32_t    dma_engines;         /* per core */
	uint32_t    dma_queues;          /* per engine */
	uint32_t    dma_engine_rate;     /* bytes/us, theoretical per engine */
	uint32_t    dma_desc_overhead_ps;/* per descriptor (contiguous chunk) */
	uint32_t    dma_issue_latency_ps;/* queue -> first byte */
	uint32_t    dma_chunk_bytes;     /* descriptors split contiguous runs at this */
	/* DMA transpose: share of the copy rate (percent) reading HBM / SBUF;
	 * 0 where the generation has none */
	uint32_t    dma_transpose_hbm_pct, dma_transpose_sbuf_pct;
	/* A whole NEFF execution, as nki.benchmark and the profiler time it:
	 * the runtime's start-up before the kernel's first instruction and its
	 * tear-down after the last (applied with NSIM_EXEC_STANDALONE) */
	uint32_t    exec_startup_ps;
	uint32_t    exec_teardown_ps;
	/* HBM: the part's standard and per-pin data rate; its timing preset
	 * is derived from these (dm_hbm_preset_for_target, hbm_presets.c) */
	const char *hbm_standard;        /* "HBM3": a standard hbm_presets.c knows */
	uint32_t    hbm_mbps;            /* data rate per pin, Mb/s */
	uint32_t    hbm_stacks;
	uint64_t    hbm_bytes;
	dm_fabric   fabric;              /* the chips of an instance and their links */
} dm_chip;

const dm_chip *dm_chip_get(int target);       /* NULL for an unknown target */
const dm_chip *dm_chip_by_name(const char *name);
const char    *dm_chip_name(const dm_chip *c);        /* "trn2" */
const char    *dm_chip_core_name(const dm_chip *c);   /* "NeuronCore-v3" */
/* the HBM part's peak, from its derived preset (0 if it has none) */
uint64_t       dm_chip_hbm_bytes_per_second(const dm_chip *c);

/* TensorE's bf16 peak, 2 x 128 x 128 FLOPs per cycle (MFU's denominator) */
static inline uint64_t dm_chip_peak_flops(const dm_chip *c)
{
	return 2ull * ISA_NUM_PARTITIONS * ISA_NUM_PARTITIONS * c->clock_mhz[ISA_ENGINE_TENSOR] * 1000000ull;
}

/* engine cycles -> picoseconds, rounded up (deterministic integer math) */
static inline uint64_t dm_cycles_ps(const dm_chip *c, int engine, uint64_t cycles)
{
	uint64_t mhz = c->clock_mhz[engine];
	return (cycles * 1000000u + mhz - 1) / mhz;
}

/* ceil(log2(n)): 0 for n <= 1 (step counts of trees and sorts) */
static inline uint64_t dm_log2_ceil(uint64_t n)
{
	uint64_t k = 0;
	while (k < 63 && (1ull << k) < n)
		k++;
	return k;
}

#endif /* NSIM_DM_CHIP_H */
