/*
 * neuronsim/exec.h -- what one execution is made of, below the runtime API:
 * the simulation mode, the statistics of a run, and the callback of a
 * tensor in external memory.  The simulation kernel (sim/coresim.h) and
 * the trace summary (traces/summary.h) need these types and nothing else
 * of runtime.h, which includes this header.
 */
#ifndef NEURONSIM_EXEC_H
#define NEURONSIM_EXEC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nsim_mode {
	NSIM_MODE_FULL = 0,          /* values and timing */
	NSIM_MODE_TIMING,            /* timing only, no values computed */
	NSIM_MODE_FUNCTIONAL,        /* values only, simulated time stays 0 */
} nsim_mode;

/* Statistics of a model's last execution.  Every field is a uint64_t
 * counter (the runtime adds them up as an array). */
#define NSIM_MAX_OPCODES 64           /* bound on isa_opcode values */

typedef struct nsim_exec_stats {
	uint64_t total_ps;                 /* simulated time */
	uint64_t engine_busy_ps[5];        /* tensor, vector, scalar, gpsimd, sync */
	uint64_t engine_instructions[5];
	uint64_t dma_transfers;
	uint64_t dma_bytes;
	uint64_t dma_busy_ps;              /* summed over DMA engines */
	uint64_t dma_active_ps;            /* at least one DMA engine moving data */
	uint64_t hbm_read_bytes, hbm_write_bytes;
	uint64_t matmul_flops;             /* 2*K*M*N per multiply_moving */
	uint64_t matmul_instructions;
	uint64_t instructions;
	/* on-chip memory traffic: compute operands (sources read, destinations
	 * written; an accumulating matmul reads its PSUM too) and the SBUF/PSUM
	 * side of DMA transfers */
	uint64_t sbuf_read_bytes, sbuf_write_bytes, psum_read_bytes, psum_write_bytes;
	/* per engine and opcode (isa_opcode): instructions and busy time (the
	 * engine_busy_ps share; control instructions count, take no time) */
	uint64_t op_instructions[5][NSIM_MAX_OPCODES];
	uint64_t op_busy_ps[5][NSIM_MAX_OPCODES];
} nsim_exec_stats;

/* A tensor in external memory (nsim_tensor_set_external, runtime.h): its
 * accesses call fn with ctx. */
#define NSIM_EXT_ERROR UINT64_MAX
typedef uint64_t (*nsim_ext_access_fn)(void *ctx, int is_write, uint64_t offset, void *data, uint64_t len,
				       uint64_t at_ps);

#ifdef __cplusplus
}
#endif

#endif
