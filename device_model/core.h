/*
 * core.h -- one NeuronCore's state (SBUF, PSUM, TensorE stationary, PSUM
 * accumulation tracking) and the functional side of every instruction.
 *
 * The device model knows nothing of files, threads or time sources: the
 * simulator hands it a core, the program, an HBM accessor and the HBM
 * address of each tensor, and gets values changed in place or a fault.
 */
#ifndef NSIM_DM_CORE_H
#define NSIM_DM_CORE_H

#include <stdbool.h>
#include <stdint.h>

#include "chip.h"
#include "neuronsim/isa.h"

/* Faults: simulated hardware errors, reported with where they happened. */
typedef enum dm_fault_kind {
	DM_OK = 0,
	DM_FAULT_OOB,            /* address outside HBM / a tensor / SBUF / PSUM */
	DM_FAULT_UNINIT_PSUM,    /* accumulate into a bank never written */
	DM_FAULT_NUMERIC,        /* NaN/Inf produced with numeric checking on */
	DM_FAULT_NOMEM,          /* host memory */
	DM_FAULT_DEADLOCK,       /* every engine waits (raised by the simulator) */
	DM_FAULT_NO_PEER,        /* a peer operation on a core without a paired core */
	DM_FAULT_CONTROL,        /* a branch the run cannot take (timing-only data, a runaway loop) */
} dm_fault_kind;

typedef struct dm_fault {
	dm_fault_kind kind;
	int           engine;
	int64_t       index;
	uint64_t      addr;
	char          msg[256];
} dm_fault;

/*
 * HBM as the device model sees it: translate [addr, addr+len) to host
 * memory, or NULL if any byte is outside the device's HBM.  The simulator
 * implements it (lazily committed memory) and later the detailed HBM model
 * sits behind the same call for timing.
 */
typedef struct dm_hbm {
	void    *ctx;
	uint8_t *(*map)(void *ctx, uint64_t addr, uint64_t len, bool write);
} dm_hbm;

/*
 * Splitting one instruction's rows over host threads.  The device model has
 * no threads; sim/ supplies `run`, which calls fn(arg, lo, hi) for disjoint
 * ranges covering [0, n) -- some perhaps on other threads -- and returns
 * when all are done.  Callers split only work whose every row comes out the
 * same whichever thread computes it and in whatever order, so results never
 * depend on the split.  run == NULL: one thread.
 */
typedef void (*dm_rows_fn)(void *arg, uint32_t lo, uint32_t hi);
typedef struct dm_par {
	void  *ctx;
	void (*run)(void *ctx, dm_rows_fn fn, void *arg, uint32_t n);
} dm_par;

/* what one execution binds: tensor i of the program lives at tensor_addr[i] */
typedef struct dm_binding {
	const isa_program *prog;
	const uint64_t    *tensor_addr;
	const uint64_t    *tensor_bytes;   /* bytes actually bound (>= the tensor's) */
	dm_hbm             hbm;
	dm_par             par;
	bool               check_numerics; /* NaN/Inf in outputs is a fault */
} dm_binding;

typedef struct dm_core {
	const dm_chip          *chip;
	const isa_target_info  *ti;
	uint8_t                *sbuf;        /* 128 x sbuf_partition_bytes */
	uint8_t                *psum;        /* 128 x psum_partition_bytes */
	uint8_t                 psum_written[ISA_NUM_PARTITIONS][16]; /* per bank */
	/* TensorE: the loaded stationary, K x M as fp32 (see stat_widened) */
	float                  *stationary;
	uint32_t                stat_k, stat_m;
	int                     stat_dtype;
	/* a bf16 stationary also as packed k-pairs (gemm_bf16.h), when the
	 * CPU has the bf16 product; NULL until first needed */
	uint32_t               *stat_pairs;
	bool                    stat_paired;
	bool                    stat_widened;  /* `stationary` holds it too */
	/* per-lane XORWOW PRNG states (ops_rng.c): [0] VectorE (4 generators
	 * of 6 words), [1] GpSimd (1 generator); power-on seeds at each
	 * program start (dm_core_reset) */
	uint32_t                rng[2][ISA_NUM_PARTITIONS][24];
	bool                    rng_used;    /* moved from power-on since the last reset */
	/* each engine sequencer's 64 x 32-bit registers (HW: "each sequencer
	 * has 64 x 32-bit registers"); zero at each program start */
	int32_t                 reg[ISA_NUM_ENGINES][64];
	/* scratch for operand staging (grown on demand) */
	float                  *tmp[4];
	uint64_t                tmp_cap[4];
} dm_core;

int  dm_core_init(dm_core *c, const dm_chip *chip);   /* 0 or -1 (no memory) */
void dm_core_free(dm_core *c);
void dm_core_reset(dm_core *c);                       /* clears per-run state */
void dm_rng_default_state(dm_core *c);                /* the power-on PRNG seeds */

/* Executes instruction `in` (engine `engine`, index `index`) functionally. */
dm_fault_kind dm_exec(dm_core *c, const dm_binding *b, int engine, int64_t index,
		      const isa_instr *in, dm_fault *fault);

/* DMA descriptor `d` functionally (a whole transfer). */
dm_fault_kind dm_exec_dma(dm_core *c, const dm_binding *b, int engine, int64_t index,
			  const isa_dma_desc *d, dm_fault *fault);
/* The same, its on-chip destination in core `dst` (a peer transfer writes the
 * paired core's SBUF); the source and HBM are `c`'s and `b`'s. */
dm_fault_kind dm_exec_dma_to(dm_core *c, dm_core *dst, const dm_binding *b, int engine,
			     int64_t index, const isa_dma_desc *d, dm_fault *fault);

#endif /* NSIM_DM_CORE_H */
