// runtime/profile.cpp -- profiling from PyTorch: the runtime's trace and
// summary (torch_neuronsim.profile, NEURON_RT_INSPECT_ENABLE), host-named
// ranges over the device timeline, and PyTorch's profiler hooks for
// PrivateUse1 (torch::profiler::impl::ProfilerStubs): events read the
// simulated stream clock, so the profiler's device times are simulated time;
// the stubs' range push/pop, when PyTorch calls them, become ranges in the
// trace (record_function does not call them).
#include "runtime/device.h"

#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace neuron {
namespace {

uint64_t now_ps(int dev)
{
	return stream_time_ps(dev, stream_current(dev));
}

struct OpenRange {
	std::string name;
	int dev;
	uint64_t start_ps;
};
thread_local std::vector<OpenRange> t_ranges;

void range_push(const char *name)
{
	int dev = current_device();
	t_ranges.push_back({ name ? name : "", dev, now_ps(dev) });
}

void range_pop()
{
	if (t_ranges.empty())
		return;
	OpenRange r = t_ranges.back();
	t_ranges.pop_back();
	int depth = (int)t_ranges.size();
	if (depth < 4 && nsim_profile_active())
		nsim_profile_range(r.dev, r.name.c_str(), r.start_ps, std::max(r.start_ps, now_ps(r.dev)), depth);
}

struct NeuronProfilerStubs final : torch::profiler::impl::ProfilerStubs {
	void record(c10::DeviceIndex *device, torch::profiler::impl::ProfilerVoidEventStub *event,
		    int64_t *cpu_ns) const override
	{
		int dev = current_device();
		if (device)
			*device = (c10::DeviceIndex)dev;
		*event = std::make_shared<uint64_t>(now_ps(dev));
		if (cpu_ns)
			*cpu_ns = c10::getTime();
	}
	// microseconds, as the CUDA stubs return
	float elapsed(const torch::profiler::impl::ProfilerVoidEventStub *a,
		      const torch::profiler::impl::ProfilerVoidEventStub *b) const override
	{
		uint64_t t0 = *static_cast<const uint64_t *>(a->get());
		uint64_t t1 = *static_cast<const uint64_t *>(b->get());
		return t1 >= t0 ? (float)((double)(t1 - t0) / 1e6) : -(float)((double)(t0 - t1) / 1e6);
	}
	void mark(const char *name) const override
	{
		int dev = current_device();
		if (nsim_profile_active())
			nsim_profile_range(dev, name ? name : "", now_ps(dev), now_ps(dev), 0);
	}
	void rangePush(const char *name) const override { range_push(name); }
	void rangePop() const override { range_pop(); }
	bool enabled() const override { return true; }
	void onEachDevice(std::function<void(int)> op) const override
	{
		int saved = current_device();
		for (int d = 0; d < device_count(); d++) {
			set_device(d);
			op(d);
		}
		set_device(saved);
	}
	// the simulated device finishes each program before the host moves on
	void synchronize() const override {}
};

NeuronProfilerStubs g_stubs;
const bool g_registered = (torch::profiler::impl::registerPrivateUse1Methods(&g_stubs), true);

}  // namespace
}  // namespace neuron

extern "C" {

// 0, or -1 with the message in err
int neuron_profile_start(const char *trace, const char *summary, int detail, uint64_t max_bytes,
			 char *err, int errlen)
{
	try {
		neuron::device_count();   // the runtime is up
		nsim_profile_options o = { trace, summary, detail, max_bytes };
		neuron::check_status(nsim_profile_start_opts(&o), "profile start");
		return 0;
	} catch (const std::exception &e) {
		std::snprintf(err, (size_t)errlen, "%s", e.what());
		return -1;
	}
}

int neuron_profile_stop(char *err, int errlen)
{
	nsim_status st = nsim_profile_stop();
	if (st) {
		std::snprintf(err, (size_t)errlen, "%s", nsim_last_error());
		return -1;
	}
	return 0;
}

int neuron_profile_active(void) { return nsim_profile_active(); }

void neuron_range_push(const char *name) { neuron::range_push(name); }
void neuron_range_pop(void) { neuron::range_pop(); }

}  // extern "C"
