/*
 * neuronsim/runtime.h -- the runtime C API: the seam between the PyTorch
 * plugin (backend/) and the simulator.  Shaped after the Neuron Runtime's
 * nrt.h; a hardware implementation of the same calls could replace the
 * simulator without touching the plugin.
 *
 * Status codes keep NRT_STATUS values where one exists.  Every failing call
 * leaves a message for nsim_last_error() (per thread).  The API is thread
 * safe: calls on different cores run concurrently; allocation is serialized.
 *
 * Environment (read by nsim_init):
 *   NEURON_PLATFORM_TARGET_OVERRIDE  trn1 | trn2 | trn3       (default trn2)
 *   NEURON_RT_VISIBLE_CORES          "2" or "0-3" or "0,2"    (default all)
 *   NEURON_RT_NUM_CORES              number of cores to use   (default all)
 *   NEURON_RT_LOG_LEVEL              ERROR | WARN | INFO | DEBUG (default ERROR)
 *   NEURON_SIM_MODE                  full | timing | functional (default full)
 *   NEURON_RT_INSPECT_ENABLE         1: profile every execution of the process
 *                                    (trace + summary, see nsim_profile_start_opts)
 *   NEURON_RT_INSPECT_OUTPUT_DIR     where (default ./output): neuronsim_<pid>.pftrace
 *                                    and neuronsim_<pid>_summary.json
 *   NEURON_SIM_TRACE_DETAIL          instruction | program | utilization
 *   NEURON_SIM_TRACE_MAX_MB          trace size budget (default 400)
 */
#ifndef NEURONSIM_RUNTIME_H
#define NEURONSIM_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "neuronsim/exec.h"   /* the execution mode, its statistics, external memory */

#ifdef __cplusplus
extern "C" {
#endif

/* Declarations between this push and its pop are libneuronsim.so's exported
 * API (the library is built with hidden visibility; see isa.h). */
#pragma GCC visibility push(default)

typedef enum nsim_status {
	NSIM_SUCCESS         = 0,
	NSIM_FAILURE         = 1,    /* internal error */
	NSIM_INVALID         = 2,    /* bad argument or bad program */
	NSIM_INVALID_HANDLE  = 3,
	NSIM_RESOURCE        = 4,    /* out of device (or host) memory */
	NSIM_TIMEOUT         = 5,    /* the program cannot finish: semaphore deadlock */
	NSIM_UNINITIALIZED   = 13,   /* nsim_init not called */
	NSIM_EXEC_BAD_INPUT  = 1002, /* missing / wrong-size input or output tensor */
	NSIM_EXEC_NUM_ERR    = 1003, /* NaN/Inf produced (numeric checking on) */
	NSIM_EXEC_ERR        = 1004, /* other execution fault (uninitialized PSUM read) */
	NSIM_EXEC_NC_BUSY    = 1005,
	NSIM_EXEC_OOB        = 1006, /* out-of-bounds access at run time */
} nsim_status;

typedef struct nsim_tensor nsim_tensor;
typedef struct nsim_tensor_set nsim_tensor_set;
typedef struct nsim_model nsim_model;

typedef struct nsim_config {
	const char *target;                /* NULL: environment / trn2 */
	int         mode;                  /* -1: environment / full */
	int         check_numerics;        /* 1: NaN/Inf is NSIM_EXEC_NUM_ERR */
	int         progress;              /* 1: executions longer than a second report
	                                      progress on stderr */
} nsim_config;

const char *nsim_version(void);                     /* "0.1.0" */
nsim_status nsim_init(void);                        /* from the environment */
nsim_status nsim_init_config(const nsim_config *cfg);
void        nsim_close(void);
const char *nsim_last_error(void);
const char *nsim_status_name(nsim_status st);

int         nsim_core_count(void);                  /* visible cores */
const char *nsim_target_name(void);                 /* "trn2" */
nsim_mode   nsim_get_mode(void);

/* device memory */
nsim_status nsim_tensor_allocate(int core, uint64_t size, const char *name, nsim_tensor **out);
void        nsim_tensor_free(nsim_tensor *t);
uint64_t    nsim_tensor_size(const nsim_tensor *t);
/* A handle on bytes [offset, offset + size) of `parent` (nrt's tensor slice):
 * bind it in a tensor set like any tensor; freeing it releases only the
 * handle; it must not outlive its parent. */
nsim_status nsim_tensor_slice(nsim_tensor *parent, uint64_t offset, uint64_t size, nsim_tensor **out);
/* the tensor's device address (unique on the chip; not a host pointer) */
uint64_t    nsim_tensor_device_address(const nsim_tensor *t);
nsim_status nsim_tensor_write(nsim_tensor *t, const void *buf, uint64_t offset, uint64_t size);
/* the host bytes that hold the tensor in the simulated HBM, for direct
 * access (a SystemC DMI window); valid until the tensor is freed or
 * nsim_close; NULL for NULL or before nsim_init */
void       *nsim_tensor_host_pointer(nsim_tensor *t);
/* A tensor in memory outside the simulated chip (a SystemC platform's
 * memory behind the core's initiator socket).  Every DMA that reads or
 * writes it makes one access through fn for the byte span it touches (an
 * indexed side: the whole tensor): a read fills `data` (the tensor's bytes in
 * the simulator, which the DMA then reads), a write hands over the bytes the
 * DMA wrote there.  at_ps: when the access happens, in simulated ps from the
 * start of the run.  fn returns the latency in ps the access adds to that
 * DMA's completion, or NSIM_EXT_ERROR to make it an out-of-bounds fault.
 * fn runs inside nsim_execute, on its thread, in simulated-time order per
 * core.  fn NULL: an ordinary tensor. */
/* (NSIM_EXT_ERROR and nsim_ext_access_fn: neuronsim/exec.h) */
nsim_status nsim_tensor_set_external(nsim_tensor *t, nsim_ext_access_fn fn, void *ctx);
nsim_status nsim_tensor_read(const nsim_tensor *t, void *buf, uint64_t offset, uint64_t size);
nsim_status nsim_tensor_copy(const nsim_tensor *src, uint64_t src_offset, nsim_tensor *dst,
			     uint64_t dst_offset, uint64_t size);
nsim_status nsim_tensor_memset(nsim_tensor *t, int value, uint64_t offset, uint64_t size);
uint64_t    nsim_memory_allocated(void);            /* bytes in live tensors */

/* programs (.nsp bytes) */
nsim_status nsim_load(const void *program, size_t size, int core, nsim_model **out);
nsim_status nsim_unload(nsim_model *m);
/* device memory a loaded program holds until unloaded: its image (the .nsp
 * bytes: instruction streams and DMA descriptors, kept on the device as the
 * Neuron runtime keeps a NEFF's), its scratch (INTERNAL tensors) and its
 * constants */
uint64_t    nsim_model_device_bytes(const nsim_model *m);
/* host memory a loaded program holds until unloaded: its decoded
 * instruction streams, descriptors and tensor tables (a large generated
 * kernel's decoded form is several times its image) */
uint64_t    nsim_model_host_bytes(const nsim_model *m);
struct isa_program;   /* neuronsim/isa.h */
/* the program a model was loaded from, as the loader decoded and validated
 * it (isa.h), for callers that build on loaded programs (the graph
 * compiler's linker): valid while the model is loaded */
const struct isa_program *nsim_model_program(const nsim_model *m);

/* named tensor sets for execute */
nsim_status nsim_tensor_set_create(nsim_tensor_set **out);
nsim_status nsim_tensor_set_add(nsim_tensor_set *set, const char *name, nsim_tensor *t);
void        nsim_tensor_set_free(nsim_tensor_set *set);

nsim_status nsim_execute(nsim_model *m, const nsim_tensor_set *inputs, nsim_tensor_set *outputs);

/* What an execution is for, beyond its tensors. */
typedef struct nsim_exec_options {
	const char *label;          /* what launched it (a PyTorch op, a graph): names
	                               the program's slice in traces and its summary row */
	uint64_t    not_before_ps;  /* device time before which it cannot start (host
	                               launch overhead, transfers): the core idles until then */
	uint32_t    flags;          /* NSIM_EXEC_* */
} nsim_exec_options;
/* A whole NEFF execution as nki.benchmark and the profiler time it: the
 * runtime's start-up before the first instruction and its tear-down after
 * the last are part of the run (the chip's published figures).  Without it
 * a run is the program's instructions alone (what a framework that accounts
 * for launch overhead itself, like the torch plugin, wants). */
#define NSIM_EXEC_STANDALONE 1u
/* The caller's inputs hold real values: in timing-only mode a program whose
 * branches test registers (a run-time loop) computes its values anyway, so
 * it runs the iterations its data asks for; without the flag such a run is
 * refused (NSIM_EXEC_ERR), as the data is not there to decide. */
#define NSIM_EXEC_DATA_CONTROL 2u
nsim_status nsim_execute_ex(nsim_model *m, const nsim_tensor_set *inputs, nsim_tensor_set *outputs,
			    const nsim_exec_options *opt);
/* n models on n distinct cores, simulated together from a common start (the
 * latest of their cores' clocks): they share the chip's HBM bandwidth.
 * Models 2j and 2j+1 are a paired core (one LNC=2 logical core): their
 * programs' `peer` semaphore updates and DMAs reach each other.  A tensor in
 * the sets of several models is one buffer all of them see (shared HBM). */
nsim_status nsim_execute_multi(nsim_model *const *models, const nsim_tensor_set *const *inputs,
			       nsim_tensor_set *const *outputs, int n);
nsim_status nsim_execute_multi_ex(nsim_model *const *models, const nsim_tensor_set *const *inputs,
				  nsim_tensor_set *const *outputs, int n, const nsim_exec_options *opt);
nsim_status nsim_model_stats(const nsim_model *m, nsim_exec_stats *out);

/* Profiling: every execution between start and stop goes to a trace
 * (Perfetto .pftrace, or Chrome JSON for a .json name; streamed, bounded by
 * max_bytes) and, at stop, a summary JSON with the Neuron profiler's metric
 * names plus a table of programs by label. */
typedef struct nsim_profile_options {
	const char *trace_path;     /* NULL: no trace */
	const char *summary_path;   /* NULL: no summary */
	int         detail;         /* 0: a slice per instruction, 1: per program,
	                               2: engine/DMA/HBM utilization per 1 ms only */
	uint64_t    max_bytes;      /* trace budget; 0: 400 MB (NEURON_SIM_TRACE_MAX_MB) */
} nsim_profile_options;
nsim_status nsim_profile_start(const char *trace_path);   /* defaults, no summary */
nsim_status nsim_profile_start_opts(const nsim_profile_options *opt);
nsim_status nsim_profile_stop(void);
int         nsim_profile_active(void);
/* a named span of device time on `core` (a compiled graph, a profiled
 * region), drawn over the programs it enclosed; depth 0..3 for nesting.
 * Nothing happens when no profile is active. */
nsim_status nsim_profile_range(int core, const char *name, uint64_t start_ps, uint64_t end_ps, int depth);
/* a collective across cores (a c10d backend's) on `core`'s "Collectives"
 * track: its name, span, the bytes this core sent, the algorithm ("ring")
 * and the group's global ranks as text ("0-7", "0,8,16"); either text may
 * be NULL.  Nothing happens when no profile is active. */
nsim_status nsim_profile_collective(int core, const char *name, uint64_t start_ps, uint64_t end_ps, uint64_t bytes,
				    const char *algorithm, const char *peers);
/* the name of an engine's track in traces ("TensorE" for isa engine 0), as
 * the profiler names it; NULL for an unknown engine */
const char *nsim_trace_track_name(int engine);

/* The chip a target simulates, from the device model's chip table (target
 * NULL: the running runtime's).  NSIM_INVALID for an unknown target. */
typedef struct nsim_chip_info {
	const char *target;             /* "trn2" */
	const char *core_name;          /* "NeuronCore-v3" */
	const char *hbm_standard;       /* the HBM timing preset: "HBM3-5.7" */
	uint32_t    cores;              /* physical NeuronCores per chip */
	uint32_t    clock_mhz[5];       /* per engine: tensor, vector, scalar, gpsimd, sync */
	uint32_t    dma_engines;        /* per core */
	uint32_t    dma_queues;         /* per DMA engine */
	uint64_t    dma_engine_bytes_per_second;   /* one DMA engine's theoretical rate */
	uint32_t    hbm_stacks;
	uint64_t    hbm_bytes;
	uint64_t    hbm_bytes_per_second;   /* the HBM model's peak (its derived preset) */
	uint64_t    peak_flops_per_second;  /* TensorE bf16: 2 x 128 x 128 per cycle */
	uint64_t    exec_startup_ps;        /* a standalone execution's NEFF start-up */
	uint64_t    exec_teardown_ps;       /* ... and tear-down (NSIM_EXEC_STANDALONE) */
	uint64_t    peer_signal_ps;         /* a semaphore update reaching the paired core */
	uint32_t    min_ii;                 /* an engine instruction's minimum cycles (MIN_II) */
	uint32_t    static_overhead;        /* cycles until a Vector / GpSimd result is readable */
	uint32_t    scalar_overhead;        /* ... a ScalarE result */
	uint64_t    dma_issue_latency_ps;   /* a DMA descriptor's issue to its first byte */
} nsim_chip_info;
nsim_status nsim_chip_info_get(const char *target, nsim_chip_info *out);

/* The modeled time of a collective over `ranks` NeuronCores (ranks fill
 * chips in order), as nccom-test reports it: `op` is "all_reduce",
 * "all_gather" (bytes: the gathered output), "reduce_scatter" (bytes: the
 * whole input), "broadcast", "all_to_all" (bytes: one rank's buffer),
 * "send_recv" or "barrier"; target NULL: the running runtime's.  The
 * formulas and the fabric data: device_model/collectives.c. */
typedef struct nsim_collective_cost {
	uint64_t    ps;                 /* simulated time */
	const char *algorithm;          /* "mesh", "rdh", "ring" or "p2p" */
	uint32_t    steps;              /* sequential exchanges */
	uint32_t    rings;              /* concurrent rings */
	uint64_t    wire_bytes;         /* bytes each rank sends */
} nsim_collective_cost;
nsim_status nsim_collective_estimate(const char *target, const char *op, uint32_t ranks, uint64_t bytes,
				     nsim_collective_cost *out);
/* ... over a group given by its global ranks ranks[0..n) (rank r is
 * NeuronCore r: a strided group spans more chips than a contiguous one);
 * ranks NULL: the first n.  Ranks above 4095 are NSIM_INVALID. */
nsim_status nsim_collective_estimate_ranks(const char *target, const char *op, const uint32_t *ranks, uint32_t n,
					   uint64_t bytes, nsim_collective_cost *out);

/* n elements of isa dtype `src_dtype` -> `dst_dtype` with the engines'
 * numerics (round to nearest even; float <-> float, or between equal
 * dtypes).  NSIM_INVALID names a pair it does not convert. */
nsim_status nsim_convert(int dst_dtype, void *dst, int src_dtype, const void *src, uint64_t n);

/* The profiler-style summary JSON of one execution's statistics on the
 * running runtime's chip, with one programs-table row named `label`. */
nsim_status nsim_summary_write(const char *path, const nsim_exec_stats *s, const char *label);

/* For callers of libneuronsim.so from other languages: free a buffer the
 * library allocated (isa_program_encode's bytes); the size of a struct they
 * share with the library ("isa_diag", "isa_ap", "isa_imm", "isa_instr",
 * "isa_tensor", "isa_dma_desc", "isa_program",
 * "isa_field_info", "isa_target_info", "nsim_exec_stats", "nsim_config",
 * "nsim_exec_options", "nsim_profile_options", "nsim_chip_info"; 0 if
 * unknown), so bindings can check their copy of its layout; and the fields
 * of nsim_exec_stats in order, each a run of `words` uint64_t counters. */
void        nsim_buffer_free(void *p);
size_t      nsim_struct_size(const char *name);
const char *nsim_stats_field(unsigned i, unsigned *words);   /* NULL past the last */

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* NEURONSIM_RUNTIME_H */
