// runtime/device.h -- the `neuron` PyTorch device over the neuronsim runtime.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

extern "C" {
#include "neuronsim/runtime.h"
}

namespace neuron {

struct Stats {
	uint64_t cpu_fallbacks = 0;
	uint64_t host_to_device_bytes = 0, device_to_host_bytes = 0;
	uint64_t allocated_bytes = 0, peak_allocated_bytes = 0;
	uint64_t programs_executed = 0, program_cache_hits = 0, program_cache_misses = 0;
	// device time as the stream clocks count it: each program's launch
	// charge, then its simulated run, and host-link copies (the parts apart)
	uint64_t launch_ps = 0, kernel_ps = 0, link_ps = 0;
	// summed over executed programs (simulated ps / bytes / flops)
	uint64_t engine_busy_ps[5] = {};   // tensor, vector, scalar, gpsimd, sync
	uint64_t dma_busy_ps = 0, dma_bytes = 0, hbm_read_bytes = 0, hbm_write_bytes = 0;
	uint64_t dma_active_ps = 0;        // any DMA engine moving data (the profiler's DMA active)
	uint64_t matmul_flops = 0;
	// collectives of the c10d backend: count, modeled time on the stream
	// clocks (after the ranks' reconciliation wait), bytes each rank sent
	uint64_t collectives = 0, collective_ps = 0, collective_wait_ps = 0, collective_bytes = 0;
	// ... and the time streams stood still waiting for a collective's end
	uint64_t collective_exposed_ps = 0;
};

// one executed program on the device timeline (simulated ps on its stream)
struct TimelineRecord {
	std::string op;                // ATen op name, "aten::mm"
	int dev, stream;
	uint64_t start_ps, end_ps;     // the program's run, after its launch overhead
	uint64_t busy_ps[5];           // tensor, vector, scalar, gpsimd, sync
	uint64_t dma_bytes;
};
std::vector<TimelineRecord> timeline(uint64_t *dropped);

// per ATen op run natively: programs executed and their simulated time
struct OpStat {
	uint64_t count = 0, simulated_ps = 0;
};

struct MemStats {
	uint64_t allocated = 0, peak_allocated = 0;   /* bytes PyTorch asked for */
	uint64_t reserved = 0, peak_reserved = 0;     /* bytes held on the device (incl. cache) */
	uint64_t allocations = 0, segments = 0;       /* allocate calls; device allocations */
	uint64_t alloc_retries = 0, ooms = 0;
	/* cumulative since the last reset: bytes handed out / given back by
	 * PyTorch; bytes reserved on / released to the device; frees; segment
	 * releases */
	uint64_t allocated_total = 0, freed_total = 0, reserved_total = 0, released_total = 0;
	uint64_t frees = 0, segment_releases = 0;
	uint64_t peak_live_allocations = 0, peak_live_segments = 0;
};

MemStats memory_stats(int dev);
void empty_cache();

// the bounded program cache (NEURON_SIM_PROGRAM_CACHE_MB; runtime/program.cpp)
struct ProgramCacheStats {
	uint64_t evictions, bytes, entries, limit_bytes;
};
ProgramCacheStats program_cache_stats();
void clear_program_cache();            // unloads every program no run holds
void reset_program_cache_counters();   // evictions back to 0 (reset_stats)
void reset_peak_memory_stats(int dev);
void reset_accumulated_memory_stats(int dev);   /* cumulative counters restart */

/* simulated device timelines (ps) per stream */
void charge_link(int dev, uint64_t bytes);
int stream_new(int dev);
void stream_set(int dev, int id);
int stream_current(int dev);
uint64_t stream_time_ps(int dev, int id);
void stream_wait_until(int dev, int id, uint64_t at);

/* device-to-device copy as a DMA program (runtime/copy.cpp); false: not covered */
bool native_copy(const at::Tensor &dst, const at::Tensor &src);
/* the same between two cores of the chip, both streams ordered around it */
bool native_copy_across(const at::Tensor &dst, const at::Tensor &src);
/* fill_ as a device program (aten/indexing/index.cpp); false: not covered */
bool native_fill(const at::Tensor &self, const at::Scalar &v);
/* host work for a neuron op: counted, warned once, an error under NEURON_STRICT=1 */
void count_fallback(const std::string &name);
// set while the CPU fallback runs an op: the copies into device tensors then
// are its write-backs of mutated arguments (runtime/transfer.cpp)
extern thread_local bool t_in_cpu_fallback;

/* the host read or wrote device memory (a transfer, a peek, a fallback, a
 * seed): a graph capture in progress cannot replay the node doing it */
void capture_host_access(const char *why);
/* a graph capture is in progress: kernels must not use device data kept
 * from before (layout caches, constant masks), which a replay could not
 * reproduce from the graph's inputs */
bool capturing();

/* for the kernels (aten/pointwise/arithmetic.cpp) */
nsim_tensor *lookup_allocation(const void *p, uint64_t *offset);
/* where a device tensor's first element is in the simulated device's memory */
uint64_t device_address(const at::Tensor &t);
void note_write(const void *p);              /* device memory at p was written */
uint64_t write_generation(const void *p);    /* writes so far into p's allocation */
void check_status(nsim_status st, const char *what);
void count_program(bool cache_hit);
/* an executed program (for ATen op `op`): its simulated time plus the launch
 * overhead on the current stream of `dev`; its stats into the totals */
void charge_program(int dev, const nsim_exec_stats &st, const char *op);
/* when the next program on the current stream of `dev` starts: after the
 * stream's work so far and the launch overhead (the runtime's core clock
 * follows it, so traces show the same timeline) */
uint64_t next_program_start_ps(int dev);
// percent of device `dev`'s simulated time (its furthest stream clock) in
// which it ran programs, since the process started (torch.neuron.utilization)
int device_utilization(int dev);

/* random numbers (runtime/generator.cpp) */
at::Generator new_generator(int dev);
const at::Generator &default_generator(int dev);
bool is_neuron_generator(const at::Generator &g);
void generator_present_as_cpu(const at::Generator &g, bool cpu);
// 64 random bits from `gen` (or dev's default generator), advancing it: the
// seed of one device random-number program
uint64_t draw_seed(const std::optional<at::Generator> &gen, int dev);

int current_device();
int device_count();
void set_device(int d);
at::Tensor to_cpu(const at::Tensor &t);
// The device tensor's values on the CPU as the simulator sees its own memory:
// no transfer modeled (no link time, not counted).  For the simulator's own
// decisions (which exact path, PyTorch's input checks), never for results.
at::Tensor peek_cpu(const at::Tensor &t);
/* src's values into device tensor dst without the host link's charge: a
 * collective's result, whose time the collective model charges */
void poke_cpu(const at::Tensor &dst, const at::Tensor &src);
/* a collective on `dev`'s collective stream: it starts when the current
 * stream has its inputs, the last rank arrived (`start_ps`) and the
 * collective stream is free, lasts `dur_ps`; recorded on the timeline and
 * in the trace as `label`; returns its end.  The current stream does not
 * wait for it: collective_wait does (a Work's wait, a future's event). */
uint64_t charge_collective(int dev, uint64_t start_ps, uint64_t dur_ps, const std::string &label, uint64_t bytes,
			   const char *algorithm, const char *peers);
int collective_stream(int dev);                         /* created on first use */
/* stream `id` waits for a collective that ends at end_ps (the default
 * stream's stall is counted as exposed collective time) */
void collective_wait(int dev, int id, uint64_t end_ps);
/* stream `id` waits until `at`; collective: `at` is a collective's end,
 * directly or through a stream a collective's end set (stream_collective_bound) */
void stream_wait_for(int dev, int id, uint64_t at, bool collective);
bool stream_collective_bound(int dev, int id);
void mark_collective_bound_locked(int dev, int id);     /* g_lock held: the clock is a collective's end */
int device_of_ptr(const void *p);                       /* the core holding it */
void resize_storage(const c10::Storage &storage, size_t newsize);

Stats stats();
std::vector<std::pair<std::string, uint64_t>> fallback_ops();
std::vector<std::pair<std::string, OpStat>> native_ops();
void reset_stats();

}  // namespace neuron

namespace c10 { class OperatorHandle; }
namespace torch::jit { using Stack = std::vector<c10::IValue>; }
/* the boxed CPU fallback (counted, strict-mode aware) */
void neuron_cpu_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack);
