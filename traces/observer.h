/*
 * observer.h -- what the simulator tells a trace writer.  The simulator calls
 * these hooks; traces/ implements writers (Chrome JSON now, Perfetto and the
 * profiler summary later).  traces/ never includes sim/: this small interface
 * is the whole contract.  Times are simulated picoseconds.
 */
#ifndef NSIM_TRC_OBSERVER_H
#define NSIM_TRC_OBSERVER_H

#include <stdint.h>

typedef struct trc_instr_event {
	int         core;
	int         engine;        /* isa_engine */
	int64_t     index;         /* in the engine's stream */
	int         opcode;        /* isa_opcode */
	uint64_t    start_ps, end_ps;
	uint64_t    bytes;         /* operand bytes read + written */
	uint64_t    flops;
	const char *text;          /* disassembly of the instruction (may be NULL) */
} trc_instr_event;

typedef struct trc_dma_event {
	int         core;
	int         queue;         /* DMA queue id */
	int         dma_engine;    /* which of the core's DMA engines */
	uint32_t    desc;          /* descriptor block index */
	const char *desc_name;
	uint64_t    start_ps, end_ps;
	uint64_t    bytes;
	uint64_t    hbm_read_bytes, hbm_write_bytes;
} trc_dma_event;

typedef struct trc_sem_event {
	int      core;
	int      engine;           /* who changed it (-1: DMA completion) */
	uint32_t sem;
	int64_t  value;            /* new value */
	uint64_t time_ps;
} trc_sem_event;

typedef struct trc_program_event {
	int         core;
	const char *name;          /* program / op name */
	uint64_t    start_ps, end_ps;
} trc_program_event;

/* a sampled quantity (e.g. HBM bandwidth of one stack over an interval) */
typedef struct trc_counter_event {
	int         core;          /* -1: chip-wide */
	const char *name;          /* "HBM stack 0 read GB/s" */
	uint64_t    time_ps;
	double      value;
} trc_counter_event;

typedef struct trc_observer {
	void *ctx;
	void (*instr)(void *ctx, const trc_instr_event *e);
	void (*dma)(void *ctx, const trc_dma_event *e);
	void (*sem)(void *ctx, const trc_sem_event *e);
	void (*program)(void *ctx, const trc_program_event *e);
	void (*counter)(void *ctx, const trc_counter_event *e);
} trc_observer;

#endif
