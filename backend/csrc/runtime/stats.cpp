// runtime/stats.cpp -- the plugin's counters: CPU fallbacks (and strict
// mode), program cache hits, executed programs charged to the stream clocks
// with their launch overhead, per-op totals and the device timeline.
#include "runtime/device_internal.h"
#include "runtime/kineto.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace neuron {

using namespace detail;

namespace {

std::unordered_map<std::string, uint64_t> g_fallback_ops;
std::unordered_map<std::string, OpStat> g_native_ops;
// the device timeline: one record per executed program, oldest dropped
// beyond kTimelineCap (counted) so a long run stays bounded
constexpr size_t kTimelineCap = 1u << 20;
std::deque<TimelineRecord> g_timeline;
uint64_t g_timeline_dropped = 0;
std::unordered_set<std::string> g_warned;

}  // namespace

// work done on the host for a neuron op: counted; an error under NEURON_STRICT=1
void count_fallback(const std::string &name)
{
	capture_host_access("falls back to the CPU");
	{
		std::lock_guard<std::mutex> g(g_lock);
		g_stats.cpu_fallbacks++;
		g_fallback_ops[name]++;
	}
	const char *strict = std::getenv("NEURON_STRICT");
	TORCH_CHECK(!(strict && std::string(strict) == "1"), "neuron: operator '", name,
		    "' has no neuron kernel and NEURON_STRICT=1 forbids the CPU fallback");
	bool first;
	{
		std::lock_guard<std::mutex> g(g_lock);
		first = g_warned.insert(name).second;
	}
	if (first)
		TORCH_WARN("neuron: operator '", name, "' runs on the CPU (no neuron kernel yet); "
			   "counted in torch_neuronsim.stats(); NEURON_STRICT=1 makes this an error");
}

void count_program(bool hit)
{
	std::lock_guard<std::mutex> g(g_lock);
	if (hit)
		g_stats.program_cache_hits++;
	else
		g_stats.program_cache_misses++;
}

// No published figure for the runtime's per-program launch cost: 15 us
// assumed, NEURON_SIM_LAUNCH_OVERHEAD_US overrides.
static uint64_t launch_overhead_ps()
{
	static const uint64_t overhead_ps = [] {
		const char *e = std::getenv("NEURON_SIM_LAUNCH_OVERHEAD_US");
		if (!e || !*e)
			return (uint64_t)15000000;
		char *end = nullptr;
		double us = std::strtod(e, &end);
		TORCH_CHECK(end && *end == '\0' && us >= 0 && us <= 1e6,
			    "neuron: NEURON_SIM_LAUNCH_OVERHEAD_US='", e,
			    "' is not a number of microseconds in [0, 1e6]");
		return (uint64_t)(us * 1e6);
	}();
	return overhead_ps;
}

uint64_t next_program_start_ps(int dev)
{
	uint64_t overhead_ps = launch_overhead_ps();
	std::lock_guard<std::mutex> g(g_lock);
	if (dev < 0 || dev >= 64)
		return 0;
	auto &v = g_stream_ps[dev];
	int sid = g_current_stream[dev];
	return sid >= 0 && (size_t)sid < v.size() ? v[sid] + overhead_ps : 0;
}

// per device, the simulated time its programs ran since the process
// started (torch.neuron.utilization; reset_stats leaves it)
static uint64_t g_device_kernel_ps[64];

int device_utilization(int dev)
{
	ensure_runtime();
	TORCH_CHECK(dev >= 0 && dev < device_count(), "neuron: device ", dev, " does not exist (", device_count(),
		    " visible)");
	std::lock_guard<std::mutex> g(g_lock);
	uint64_t clock = 0;
	for (uint64_t ps : g_stream_ps[dev])
		clock = std::max(clock, ps);
	if (!clock)
		return 0;
	// streams may run programs side by side: busy time beyond the clock is 100%
	return (int)std::min<uint64_t>(100, (g_device_kernel_ps[dev] * 100 + clock / 2) / clock);
}

void charge_program(int dev, const nsim_exec_stats &st, const char *op)
{
	uint64_t sim_ps = st.total_ps;
	uint64_t overhead_ps = launch_overhead_ps();
	if (kineto_recording())
		kineto_device_event(op, dev, dev >= 0 && dev < 64 ? g_current_stream[dev] : 0, sim_ps);
	std::lock_guard<std::mutex> g(g_lock);
	g_stats.programs_executed++;
	g_stats.kernel_ps += sim_ps;
	for (int e = 0; e < 5; e++)
		g_stats.engine_busy_ps[e] += st.engine_busy_ps[e];
	g_stats.dma_busy_ps += st.dma_busy_ps;
	g_stats.dma_active_ps += st.dma_active_ps;
	g_stats.dma_bytes += st.dma_bytes;
	g_stats.hbm_read_bytes += st.hbm_read_bytes;
	g_stats.hbm_write_bytes += st.hbm_write_bytes;
	g_stats.matmul_flops += st.matmul_flops;
	OpStat &o = g_native_ops[op];
	o.count++;
	o.simulated_ps += sim_ps;
	if (dev >= 0 && dev < 64) {
		g_device_kernel_ps[dev] += sim_ps;
		auto &v = g_stream_ps[dev];
		int sid = g_current_stream[dev];
		if (sid >= 0 && (size_t)sid < v.size()) {
			// the launch overhead, then the program's simulated run
			uint64_t start = v[sid] + overhead_ps;
			if (g_timeline.size() == kTimelineCap) {
				g_timeline.pop_front();
				g_timeline_dropped++;
			}
			g_timeline.push_back({ op, dev, sid, start, start + sim_ps, st.engine_busy_ps[0],
					       st.engine_busy_ps[1], st.engine_busy_ps[2], st.engine_busy_ps[3],
					       st.engine_busy_ps[4], st.dma_bytes });
		}
	}
	if (dev >= 0 && dev < 64) {
		auto &v = g_stream_ps[dev];
		int s = g_current_stream[dev];
		if (s >= 0 && (size_t)s < v.size()) {
			v[s] += overhead_ps + sim_ps;
			g_stats.launch_ps += overhead_ps;
		}
	}
}

// Collectives run on a stream of their own per device (created on first
// use), as NCCL's do: the caller's stream is not held up until it waits on
// the collective's Work or future (collective_wait), so compute issued in
// between -- DDP's backward, FSDP2's prefetched all-gathers -- overlaps it.
static int g_coll_stream[64];   // 0: not created yet (stream 0 is the default stream)

int collective_stream(int dev)
{
	TORCH_CHECK(dev >= 0 && dev < 64, "neuron: collective on device ", dev);
	{
		std::lock_guard<std::mutex> g(g_lock);
		if (g_coll_stream[dev])
			return g_coll_stream[dev];
	}
	int s = stream_new(dev);
	std::lock_guard<std::mutex> g(g_lock);
	if (!g_coll_stream[dev])
		g_coll_stream[dev] = s;
	return g_coll_stream[dev];
}

uint64_t charge_collective(int dev, uint64_t start_ps, uint64_t dur_ps, const std::string &label, uint64_t bytes,
			   const char *algorithm, const char *peers)
{
	int cs = collective_stream(dev);
	uint64_t begin, end;
	{
		std::lock_guard<std::mutex> g(g_lock);
		auto &v = g_stream_ps[dev];
		int sid = g_current_stream[dev];
		TORCH_CHECK(sid >= 0 && (size_t)sid < v.size(), "neuron: collective on an unknown stream ", sid);
		// the inputs are ready when this rank's stream gets here, the
		// peers' when the last of them arrives (start_ps); the collective
		// stream runs one collective at a time
		uint64_t arrival = v[sid];
		begin = std::max({ v[cs], start_ps, arrival });
		end = begin + dur_ps;
		g_stats.collectives++;
		g_stats.collective_wait_ps += begin - arrival;
		g_stats.collective_ps += dur_ps;
		g_stats.collective_bytes += bytes;
		if (g_timeline.size() == kTimelineCap) {
			g_timeline.pop_front();
			g_timeline_dropped++;
		}
		g_timeline.push_back({ label, dev, cs, begin, end, { 0, 0, 0, 0, 0 }, bytes });
		v[cs] = end;
		mark_collective_bound_locked(dev, cs);
	}
	if (nsim_profile_active())
		nsim_profile_collective(dev, label.c_str(), begin, end, bytes, algorithm, peers);
	return end;
}

void collective_wait(int dev, int id, uint64_t end_ps)
{
	stream_wait_for(dev, id, end_ps, true);
}

Stats stats()
{
	std::lock_guard<std::mutex> g(g_lock);
	return g_stats;
}

std::vector<std::pair<std::string, uint64_t>> fallback_ops()
{
	std::lock_guard<std::mutex> g(g_lock);
	return { g_fallback_ops.begin(), g_fallback_ops.end() };
}

std::vector<std::pair<std::string, OpStat>> native_ops()
{
	std::lock_guard<std::mutex> g(g_lock);
	return { g_native_ops.begin(), g_native_ops.end() };
}

void reset_stats()
{
	std::lock_guard<std::mutex> g(g_lock);
	uint64_t alloc = g_stats.allocated_bytes;
	g_stats = Stats{};
	g_stats.allocated_bytes = g_stats.peak_allocated_bytes = alloc;
	g_fallback_ops.clear();
	g_native_ops.clear();
	g_timeline.clear();
	g_timeline_dropped = 0;
	reset_program_cache_counters();
}

std::vector<TimelineRecord> timeline(uint64_t *dropped)
{
	std::lock_guard<std::mutex> g(g_lock);
	*dropped = g_timeline_dropped;
	return { g_timeline.begin(), g_timeline.end() };
}

}  // namespace neuron
