/*
 * observer.h -- what the simulator tells a trace writer.  The simulator calls
 * these hooks; traces/ implements writers (writer.h: Perfetto protobuf and
 * Chrome JSON).  traces/ never includes sim/: this small interface is the
 * whole contract.  Times are simulated picoseconds.  Each engine's and DMA
 * queue's events arrive in issue order; a program's event comes after all of
 * its instructions' and transfers'.
 */
#ifndef NSIM_TRC_OBSERVER_H
#define NSIM_TRC_OBSERVER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct trc_instr_event {
	int         core;
	int         engine;        /* isa_engine */
	int64_t     index;         /* in the engine's stream */
	int         opcode;        /* isa_opcode */
	uint64_t    start_ps, end_ps;
	uint64_t    bytes;         /* operand bytes read + written */
	uint64_t    flops;
	uint64_t    sem_wait_ps;   /* time the engine waited on a semaphore before it */
	const char *text;          /* disassembly of the instruction (may be NULL) */
} trc_instr_event;

/* one DMA transfer (a dma_copy), over all the DMA engines that moved it */
typedef struct trc_dma_event {
	int         core;
	int         queue;         /* DMA queue id */
	int         dma_engines;   /* how many of the core's DMA engines moved it */
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
	const char *label;         /* what launched it (PyTorch op, graph) or NULL */
	const char *program;       /* the program's name */
	uint64_t    start_ps, end_ps;
	uint64_t    sbuf_bytes;    /* SBUF / PSUM the program uses (all partitions) */
	uint64_t    psum_bytes;
} trc_program_event;

/* a span the host names (a compiled graph, a profiled region): drawn over
 * the programs it enclosed; depth separates nested ranges */
typedef struct trc_range_event {
	int         core;
	const char *name;
	uint64_t    start_ps, end_ps;
	int         depth;         /* 0 outermost */
} trc_range_event;

/* a collective across NeuronCores on this core's timeline (the torch
 * plugin's c10d backend): drawn on the core's "Collectives" track */
typedef struct trc_collective_event {
	int         core;
	const char *name;          /* "all_reduce 4.0 MiB ring x8" */
	uint64_t    start_ps, end_ps;
	uint64_t    bytes;         /* bytes this rank sent */
	const char *algorithm;     /* "ring", or NULL */
	const char *peers;         /* the group's global ranks, "0-7" / "0,8,16", or NULL */
} trc_collective_event;

/* a sampled quantity (e.g. HBM bandwidth of one stack over an interval) */
typedef struct trc_counter_event {
	int         core;          /* -1: chip-wide */
	const char *name;          /* "HBM read GB/s" */
	uint64_t    time_ps;
	double      value;
} trc_counter_event;

typedef struct trc_observer {
	void *ctx;
	/* the instruction text is formatted only while this is set (a writer
	 * drawing per-program slices or counters has no use for it) */
	bool  want_text;
	void (*instr)(void *ctx, const trc_instr_event *e);
	void (*dma)(void *ctx, const trc_dma_event *e);
	void (*sem)(void *ctx, const trc_sem_event *e);
	void (*program)(void *ctx, const trc_program_event *e);
	void (*counter)(void *ctx, const trc_counter_event *e);
	void (*range)(void *ctx, const trc_range_event *e);
	void (*collective)(void *ctx, const trc_collective_event *e);
} trc_observer;

#endif
