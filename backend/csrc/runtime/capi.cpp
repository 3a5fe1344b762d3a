// runtime/capi.cpp -- a small C interface for the Python package (loaded with
// ctypes), so the bindings need no pybind11 and no heavy headers.
#include "runtime/program.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

extern "C" {

int neuron_device_count(void) { return neuron::device_count(); }
int neuron_current_device(void) { return neuron::current_device(); }

// 0 on success; else -1 with the message in err
int neuron_set_device(int d, char *err, int errlen)
{
	try {
		neuron::set_device(d);
		return 0;
	} catch (const std::exception &e) {
		std::snprintf(err, (size_t)errlen, "%s", e.what());
		return -1;
	}
}

// "name=value\n" lines of every counter: the names live here only, and
// torch_neuronsim.stats() takes them as they come; returns the length needed
int neuron_stats(char *buf, int len)
{
	neuron::Stats s = neuron::stats();
	neuron::ProgramCacheStats pc = neuron::program_cache_stats();
	std::vector<std::pair<std::string, uint64_t>> v = {
		{ "cpu_fallbacks", s.cpu_fallbacks },
		{ "programs_executed", s.programs_executed },
		{ "program_cache_hits", s.program_cache_hits },
		{ "program_cache_misses", s.program_cache_misses },
		{ "program_cache_evictions", pc.evictions },
		{ "program_cache_entries", pc.entries },
		{ "program_cache_bytes", pc.bytes },
		{ "program_cache_limit_bytes", pc.limit_bytes },
		{ "simulated_time_ns", (s.launch_ps + s.kernel_ps + s.link_ps + s.collective_ps) / 1000 },
		{ "kernel_time_ns", s.kernel_ps / 1000 },
		{ "launch_time_ns", s.launch_ps / 1000 },
		{ "transfer_time_ns", s.link_ps / 1000 },
		{ "collectives", s.collectives },
		{ "collective_time_ns", s.collective_ps / 1000 },
		{ "collective_wait_ns", s.collective_wait_ps / 1000 },
		{ "collective_exposed_ns", s.collective_exposed_ps / 1000 },
		{ "collective_bytes", s.collective_bytes },
		{ "host_to_device_bytes", s.host_to_device_bytes },
		{ "device_to_host_bytes", s.device_to_host_bytes },
		{ "allocated_bytes", s.allocated_bytes },
		{ "peak_allocated_bytes", s.peak_allocated_bytes },
	};
	for (int e = 0; e < ISA_NUM_ENGINES; e++)
		v.emplace_back(std::string(isa_engine_name(e)) + "_busy_ps", s.engine_busy_ps[e]);
	v.insert(v.end(), { { "dma_busy_ps", s.dma_busy_ps }, { "dma_active_ps", s.dma_active_ps },
			    { "dma_bytes", s.dma_bytes },
			    { "hbm_read_bytes", s.hbm_read_bytes }, { "hbm_write_bytes", s.hbm_write_bytes },
			    { "matmul_flops", s.matmul_flops } });
	std::string all;
	for (auto &[name, n] : v)
		all += name + "=" + std::to_string(n) + "\n";
	if (buf && len > 0)
		std::snprintf(buf, (size_t)len, "%s", all.c_str());
	return (int)all.size() + 1;
}

// unloads every cached program no run holds
void neuron_clear_program_cache(void) { neuron::clear_program_cache(); }

// "op=count\n" lines into buf; returns the length needed
int neuron_fallback_ops(char *buf, int len)
{
	std::string all;
	for (auto &[op, n] : neuron::fallback_ops())
		all += op + "=" + std::to_string(n) + "\n";
	if (buf && len > 0)
		std::snprintf(buf, (size_t)len, "%s", all.c_str());
	return (int)all.size() + 1;
}

// "op=count,simulated_ps\n" lines into buf; returns the length needed
int neuron_native_ops(char *buf, int len)
{
	std::string all;
	for (auto &[op, o] : neuron::native_ops())
		all += op + "=" + std::to_string(o.count) + "," + std::to_string(o.simulated_ps) + "\n";
	if (buf && len > 0)
		std::snprintf(buf, (size_t)len, "%s", all.c_str());
	return (int)all.size() + 1;
}

// "op,dev,stream,start_ps,end_ps,busy0..busy4,dma_bytes\n" lines; the first
// line is "dropped=N"; returns the length needed
int neuron_timeline(char *buf, int len)
{
	uint64_t dropped = 0;
	std::string all = "";
	auto recs = neuron::timeline(&dropped);
	all = "dropped=" + std::to_string(dropped) + "\n";
	for (auto &r : recs) {
		all += r.op + "," + std::to_string(r.dev) + "," + std::to_string(r.stream) + "," +
		       std::to_string(r.start_ps) + "," + std::to_string(r.end_ps);
		for (uint64_t b : r.busy_ps)
			all += "," + std::to_string(b);
		all += "," + std::to_string(r.dma_bytes) + "\n";
	}
	if (buf && len > 0)
		std::snprintf(buf, (size_t)len, "%s", all.c_str());
	return (int)all.size() + 1;
}

void neuron_reset_stats(void) { neuron::reset_stats(); }

const char *neuron_target(void) { return nsim_target_name(); }

// the running chip (get_device_properties): its core's name, NeuronCores
// and HBM bytes; -1 before the runtime is up
int neuron_chip_info(const char **core_name, uint32_t *cores, uint64_t *hbm_bytes)
{
	nsim_chip_info info;
	if (nsim_chip_info_get(nullptr, &info) != NSIM_SUCCESS)
		return -1;
	*core_name = info.core_name;
	*cores = info.cores;
	*hbm_bytes = info.hbm_bytes;
	return 0;
}

// streams: ids per device; times in simulated picoseconds.  Each returns -1
// (with err filled) on a bad device or stream.
#define CATCH(expr)                                                        \
	try {                                                              \
		expr;                                                      \
	} catch (const std::exception &e) {                                \
		std::snprintf(err, (size_t)errlen, "%s", e.what());        \
		return -1;                                                 \
	}

int neuron_stream_new(int dev, char *err, int errlen) { CATCH(return neuron::stream_new(dev)) }
int neuron_stream_set(int dev, int id, char *err, int errlen) { CATCH(neuron::stream_set(dev, id); return 0) }
int neuron_stream_current(int dev, char *err, int errlen) { CATCH(return neuron::stream_current(dev)) }
int neuron_stream_time(int dev, int id, uint64_t *out, char *err, int errlen)
{
	CATCH(*out = neuron::stream_time_ps(dev, id); return 0)
}
int neuron_utilization(int dev, char *err, int errlen) { CATCH(return neuron::device_utilization(dev)) }

int neuron_stream_wait_until(int dev, int id, uint64_t at, char *err, int errlen)
{
	CATCH(neuron::stream_wait_until(dev, id, at); return 0)
}

uint64_t neuron_device_memory_in_use(void) { return nsim_memory_allocated(); }

// a collective's modeled time on the collective stream of `dev` (the c10d
// backend, torch_neuronsim/distributed.py): its end in *end_ps; the
// algorithm and the group's ranks (text, either may be NULL) go to the trace
int neuron_collective_charge(int dev, uint64_t start_ps, uint64_t dur_ps, const char *label, uint64_t bytes,
			     const char *algorithm, const char *peers, uint64_t *end_ps, char *err, int errlen)
{
	CATCH(*end_ps = neuron::charge_collective(dev, start_ps, dur_ps, label ? label : "collective", bytes,
						  algorithm, peers);
	      return 0)
}

// the current stream of `dev` waits for a collective ending at end_ps (a Work's wait)
int neuron_collective_wait(int dev, uint64_t end_ps, char *err, int errlen)
{
	CATCH(neuron::collective_wait(dev, neuron::stream_current(dev), end_ps); return 0)
}

// the stream id collectives of `dev` run on (a future completes on it)
int neuron_collective_stream(int dev, char *err, int errlen)
{
	CATCH(return neuron::collective_stream(dev))
}

}  // extern "C"
