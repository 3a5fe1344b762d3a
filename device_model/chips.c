/*
 * chips.c -- the Trainium generations, one row each: engines, DMA, HBM and
 * the collective fabric.  Adding a generation is one more
 * row here (plus its include/neuronsim/isa_targets.def row, which names it
 * and its core): everything else -- HBM preset, target lists, the CLI's
 * usage, the Python tables -- is derived from the two.  Every figure names its source:
 * "HW" = ../shared/HARDWARE.md, which cites the AWS Neuron SDK documents;
 * "CAL" = ../shared/CALIBRATION.md (the fabric's C-12 / C-13 rows, read as
 * collectives.c's head comment explains).
 */
#include "chip.h"

#include "hbm.h"

#define MHZ(e) [ISA_ENGINE_##e]
#define US 1000000ull   /* ps per us */

/* trn2's collective fabric (trn3 has no published one and takes it) */
#define TRN2_FABRIC                                                                      \
	{                                                                                \
		.torus_x = 4, .torus_y = 4,   /* HW: trn2.48xlarge, 16 chips in a 4x4 torus */ \
		.link_rate = 256000,          /* HW: 1024 GB/s per chip intra-instance / 4 links */ \
		/* no trn2 collective measurement in CALIBRATION.md: trn1's per-ring   \
		 * rate, steps and launch (the same runtime and DMA rings) */            \
		.ring_rate = 56800, .launch_ps = 58 * US, .step_ps = 16500000,             \
		.mesh_max = 128u << 10, .rdh_max = 4u << 20,                               \
	}

static const dm_chip chips[] = {
	{
		.target = ISA_TARGET_trn1,
		.cores = 2,                               /* HW Generations */
		/* HW Engines: Tensor 2.8, Vector 1.12, Scalar 1.4, GpSimd 1.4 GHz;
		 * Sync is a sequencer, clocked with Scalar/GpSimd here */
		.clock_mhz = { MHZ(TENSOR) = 2800, MHZ(VECTOR) = 1120, MHZ(SCALAR) = 1400,
			       MHZ(GPSIMD) = 1400, MHZ(SYNC) = 1400 },
		.vector_elems_16bit = 128, .vector_elems = 128,   /* HW: v2 128 elem/cycle */
		.scalar_elems = 128, .scalar_elems_16bit = 128,
		.gpsimd_elems = 128,
		.min_ii = 64,                             /* HW Cost model: MIN_II ~ 64 */
		.static_overhead = 100,                   /* HW: ~100 cycles static overhead */
		/* dependent 1-element ScalarE instructions issue every ~189 ns =
		 * 264 cycles on v2 (CALIBRATION C-09, nki_perf_guide.rst): MIN_II
		 * 64 + 200 cycles until the result can be read */
		.scalar_overhead = 200,
		.mm_fp32_drain = 64,                      /* HW: 64 cycles; no fp32 figure for v2 */
		/* HW: v2 contention; v3 lifts both (arbitrated bus, per-bank PSUM) */
		.sbuf_vector_gpsimd_shared = true, .psum_vector_scalar_shared = true,
		.dma_engines = 16, .dma_queues = 16,      /* HW DMA */
		.dma_engine_rate = 27200,                 /* HW: 27.2 GB/s theoretical (v2, v3) */
		/* sustained 17 B/ns on trn1 (HW DMA) with 4 KiB descriptors:
		 * 4096/17 - 4096/27.2 = 90 ns per descriptor */
		.dma_desc_overhead_ps = 90000,
		.dma_issue_latency_ps = 1300000,          /* HW: ~1300 ns descriptor-to-start */
		.dma_chunk_bytes = 4096,                  /* HW: >= 4 KiB saturates */
		/* "every NEFF execution involves certain start-up and tear-down
		 * overhead" (SDK nki/guides/tutorials/fused_mamba.rst); its profile
		 * (nki/img/mamba_v1_profile.png, 172.93 us) shows the runtime's
		 * preamble on every engine until ~12.3 us, the kernel's first
		 * instruction there, and its postamble from the last store's end
		 * (~168.7 us) to the end: ~4 us.  The page states no generation:
		 * the same figures for every one */
		.exec_startup_ps = 12300000, .exec_teardown_ps = 4000000,
		.hbm_bytes = 32ull << 30, .hbm_stacks = 2,/* HW Generations: 32 GiB, 2 stacks */
		/* HW: 820 GB/s per chip = 2 stacks x 16 pseudo-channels x 64 bits at
		 * 3.2 Gb/s per pin (819 GB/s): HBM2E */
		.hbm_standard = "HBM2E", .hbm_mbps = 3200,
		.fabric = {
			.torus_x = 4, .torus_y = 4,          /* HW: 16 chips in a 2D torus (trn1.32xlarge) */
			/* HW: 384 GB/s per chip over its four torus links: 96 GB/s each way */
			.link_rate = 96000,
			/* CAL C-12: from 64 MiB to 1 GiB the 2-rank time grows 56.8 bytes/ns
			 * (1 GiB: 18930 us, busbw 52.83 GiB/s): the rate one rank moves on
			 * one ring, below the link's (the DMA rings that drive it) */
			.ring_rate = 56800,
			/* CAL C-12: 1 KiB to 64 KiB all take 58 us */
			.launch_ps = 58 * US,
			/* CAL C-12: 4 MiB takes 107 us = 73.8 us of bytes + 33 us: two
			 * steps between cores of one chip */
			.step_ps = 16500000,
			/* CAL C-13: mesh up to 128 KiB, rdh at 2 MiB, ring from 32 MiB */
			.mesh_max = 128u << 10, .rdh_max = 4u << 20,
		},
	},
	{
		.target = ISA_TARGET_trn2,
		.cores = 8,                               /* HW: 8 physical (LNC=2: 4 logical) */
		.clock_mhz = { MHZ(TENSOR) = 2400, MHZ(VECTOR) = 960, MHZ(SCALAR) = 1200,
			       MHZ(GPSIMD) = 1200, MHZ(SYNC) = 1200 },
		.vector_elems_16bit = 512, .vector_elems = 256, /* HW: v3 512 bf16/fp16, 256 other */
		.scalar_elems = 128, .scalar_elems_16bit = 128,
		.gpsimd_elems = 128,
		.min_ii = 64, .static_overhead = 100, .scalar_overhead = 200,   /* as v2: no later figure */
		/* the published trn2 profile of the kernel-optimization tutorial's
		 * matmul v3 (SDK nki/img/how-to/v3-zoom.png, CALIBRATION C-11): an
		 * fp32 128x128x512 nc_matmul runs as two TensorMatrix instructions
		 * issued 0.43 us apart (1024 cycles each at 2.4 GHz), each lasting
		 * 0.60 us: 0.173 us = 415 cycles after its last column; in v2,
		 * where each matmul waits for its data, that tail is what makes
		 * TensorE 34.82 ms active instead of v3's 28.16 ms */
		.mm_fp32_drain = 415,
		.dma_engines = 16, .dma_queues = 16,
		.dma_engine_rate = 27200,
		/* sustained 23 B/ns (HW DMA): 4096/23 - 4096/27.2 = 27.5 ns; this also
		 * puts one engine's 32 KiB HBM->SBUF at ~1425 ns (published: 1416) */
		.dma_desc_overhead_ps = 27500,
		.dma_issue_latency_ps = 1300000,
		.dma_chunk_bytes = 4096,
		/* "DMA transpose on trn2 up to 90% of DMA copy throughput, SBUF-to-SBUF
		 * transpose up to 50%" (CALIBRATION.md, SDK nki-dma-overview.rst);
		 * trn3: no other figure */
		.dma_transpose_hbm_pct = 90, .dma_transpose_sbuf_pct = 50,
		.exec_startup_ps = 12300000, .exec_teardown_ps = 4000000,
		.hbm_bytes = 96ull << 30, .hbm_stacks = 4,
		/* 2.9 TB/s (trn2 docs; the NKI guide once says 3 TB/s) over 4 stacks x
		 * 32 pseudo-channels x 32 bits: 5.666 Gb/s per pin, HBM3 */
		.hbm_standard = "HBM3", .hbm_mbps = 5666,
		.fabric = TRN2_FABRIC,
	},
	{
		.target = ISA_TARGET_trn3,
		.cores = 8,
		.clock_mhz = { MHZ(TENSOR) = 2400, MHZ(VECTOR) = 1200, MHZ(SCALAR) = 1200,
			       MHZ(GPSIMD) = 1200, MHZ(SYNC) = 1200 },
		.vector_elems_16bit = 512, .vector_elems = 256,
		.scalar_elems = 128, .scalar_elems_16bit = 256, /* HW: v4 256 for BF16/FP16/FP8 */
		.gpsimd_elems = 128,
		.min_ii = 64, .static_overhead = 100, .scalar_overhead = 200,   /* as v2: no later figure */
		.mm_fp32_drain = 415,                     /* as v3: no later figure */
		.dma_engines = 16, .dma_queues = 16,
		.dma_engine_rate = 38400,                 /* HW: 38.4 GB/s (v4) */
		/* sustained 33 B/ns (HW): 4096/33 - 4096/38.4 = 17.5 ns */
		.dma_desc_overhead_ps = 17500,
		.dma_issue_latency_ps = 1300000,
		.dma_chunk_bytes = 4096,
		/* "DMA transpose on trn2 up to 90% of DMA copy throughput, SBUF-to-SBUF
		 * transpose up to 50%" (CALIBRATION.md, SDK nki-dma-overview.rst);
		 * trn3: no other figure */
		.dma_transpose_hbm_pct = 90, .dma_transpose_sbuf_pct = 50,
		.exec_startup_ps = 12300000, .exec_teardown_ps = 4000000,
		.hbm_bytes = 144ull << 30, .hbm_stacks = 4,
		/* 4.9 TB/s (trn3 docs; the NKI guide says 4.7) over 4 stacks x 32
		 * pseudo-channels x 32 bits: 9.57 Gb/s per pin, HBM3E class */
		.hbm_standard = "HBM3E", .hbm_mbps = 9570,
		.fabric = TRN2_FABRIC,   /* HARDWARE.md states no trn3 interconnect */
	},
};

const dm_chip *dm_chip_get(int target)
{
	for (size_t i = 0; i < sizeof(chips) / sizeof(chips[0]); i++)
		if (chips[i].target == target)
			return &chips[i];
	return NULL;
}

const dm_chip *dm_chip_by_name(const char *name)
{
	return name ? dm_chip_get(isa_target_from_name(name)) : NULL;
}

const char *dm_chip_name(const dm_chip *c)
{
	return isa_target_name(c->target);
}

const char *dm_chip_core_name(const dm_chip *c)
{
	const isa_target_info *t = isa_target_get(c->target);
	return t ? t->core : "";
}

uint64_t dm_chip_hbm_bytes_per_second(const dm_chip *c)
{
	const dm_hbm_preset *p = dm_hbm_preset_for_target(c->target);
	return p ? (uint64_t)(dm_hbm_peak_bytes_per_ps(p) * 1e12 + 0.5) : 0;
}
