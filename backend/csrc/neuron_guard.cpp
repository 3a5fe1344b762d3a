// neuron_guard.cpp -- the device guard of `neuron` (current device, device
// count, streams and events) and the simulated device timelines: one clock
// in picoseconds per stream per device, which programs and host-link copies
// advance and events record.
#include "neuron_device_internal.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace neuron {

namespace detail {
std::vector<uint64_t> g_stream_ps[64];               // [device][stream id]
thread_local int g_current_stream[64];                // per thread: current stream id
}  // namespace detail

using namespace detail;

namespace {

thread_local int g_current_device = 0;

// Simulated device timelines: one clock (ps) per stream per device.  Copies
// charge host-link time to the current stream; events read the clocks.
uint64_t g_link_bytes_per_us = 0;                      // host link, bytes per microsecond
uint64_t g_link_latency_ps = 0;

}  // namespace

void detail::init_timelines()
{
	// No public figure for the Trainium host link: PCIe Gen5 x16 class, 32 GB/s
	// and 2 us per transfer by default; NEURON_SIM_HOST_LINK_GBPS overrides.
	const char *gbps = std::getenv("NEURON_SIM_HOST_LINK_GBPS");
	double g = gbps ? std::atof(gbps) : 32.0;
	if (g <= 0)
		g = 32.0;
	g_link_bytes_per_us = (uint64_t)(g * 1000.0);
	g_link_latency_ps = 2000000;
	for (auto &v : g_stream_ps)
		v.assign(1, 0);
}

// ------------------------------------------------------------ device guard

int current_device() { return g_current_device; }

int device_count()
{
	try {
		ensure_runtime();
	} catch (...) {
		return 0;
	}
	return nsim_core_count();
}

void set_device(int d)
{
	TORCH_CHECK(d >= 0 && d < device_count(), "neuron: device ", d, " does not exist (",
		    device_count(), " visible)");
	g_current_device = d;
}

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
	static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;
	c10::DeviceType type() const override { return kType; }
	c10::Device exchangeDevice(c10::Device d) const override
	{
		c10::Device old = getDevice();
		if (old.index() != d.index())
			set_device(d.index());
		return old;
	}
	c10::Device getDevice() const override { return c10::Device(kType, g_current_device); }
	void setDevice(c10::Device d) const override { set_device(d.index()); }
	void uncheckedSetDevice(c10::Device d) const noexcept override { g_current_device = d.index(); }
	// streams are the per-device simulated timelines (stream id 0: default)
	c10::Stream getStream(c10::Device d) const noexcept override
	{
		int dev = d.index() < 0 ? g_current_device : d.index();
		return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, dev),
				   g_current_stream[dev & 63]);
	}
	c10::Stream getDefaultStream(c10::Device d) const override
	{
		return c10::Stream(c10::Stream::UNSAFE, d, 0);
	}
	c10::Stream getNewStream(c10::Device d, int) const override
	{
		int dev = d.index() < 0 ? g_current_device : d.index();
		return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, dev), stream_new(dev));
	}
	c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override
	{
		return getNewStream(d, 0);
	}
	c10::Stream exchangeStream(c10::Stream s) const noexcept override
	{
		int dev = s.device_index();
		c10::Stream old(c10::Stream::UNSAFE, s.device(), g_current_stream[dev & 63]);
		g_current_stream[dev & 63] = (int)s.id();
		return old;
	}
	bool queryStream(const c10::Stream &) const override { return true; }
	void synchronizeStream(const c10::Stream &) const override {}
	// events hold the simulated time of their stream when recorded
	void record(void **event, const c10::Stream &stream, const c10::DeviceIndex,
		    const c10::EventFlag) const override
	{
		if (!*event)
			*event = new uint64_t(0);
		*static_cast<uint64_t *>(*event) = stream_time_ps(stream.device_index(), (int)stream.id());
	}
	void block(void *event, const c10::Stream &stream) const override
	{
		if (event)
			stream_wait_until(stream.device_index(), (int)stream.id(),
					  *static_cast<uint64_t *>(event));
	}
	bool queryEvent(void *) const override { return true; }
	void synchronizeEvent(void *) const override {}
	void destroyEvent(void *event, const c10::DeviceIndex) const noexcept override
	{
		delete static_cast<uint64_t *>(event);
	}
	double elapsedTime(void *e1, void *e2, const c10::DeviceIndex) const override
	{
		TORCH_CHECK(e1 && e2, "neuron: elapsed_time needs two recorded events");
		return ((double)*static_cast<uint64_t *>(e2) - (double)*static_cast<uint64_t *>(e1)) / 1e9;
	}
	c10::DeviceIndex deviceCount() const noexcept override
	{
		return static_cast<c10::DeviceIndex>(device_count());
	}
	// device work completes as it is issued (the simulator runs synchronously)
	void synchronizeDevice(const c10::DeviceIndex) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

// -------------------------------------------------------------- timelines

void charge_link(int dev, uint64_t bytes)
{
	if (dev < 0 || dev >= 64)
		return;
	uint64_t ps = g_link_latency_ps + (bytes * 1000000u + g_link_bytes_per_us - 1) / g_link_bytes_per_us;
	std::lock_guard<std::mutex> g(g_lock);
	auto &v = g_stream_ps[dev];
	int s = g_current_stream[dev];
	if (s >= 0 && (size_t)s < v.size()) {
		v[s] += ps;
		g_stats.link_ps += ps;
	}
}

int stream_new(int dev)
{
	ensure_runtime();
	TORCH_CHECK(dev >= 0 && dev < device_count(), "neuron: device ", dev);
	std::lock_guard<std::mutex> g(g_lock);
	// a new stream starts at the device's default-stream time
	g_stream_ps[dev].push_back(g_stream_ps[dev][0]);
	return (int)g_stream_ps[dev].size() - 1;
}

void stream_set(int dev, int id)
{
	ensure_runtime();
	std::lock_guard<std::mutex> g(g_lock);
	TORCH_CHECK(dev >= 0 && dev < 64 && id >= 0 && (size_t)id < g_stream_ps[dev].size(),
		    "neuron: no stream ", id, " on device ", dev);
	g_current_stream[dev] = id;
}

int stream_current(int dev)
{
	TORCH_CHECK(dev >= 0 && dev < 64, "neuron: device ", dev);
	return g_current_stream[dev];
}

uint64_t stream_time_ps(int dev, int id)
{
	ensure_runtime();
	std::lock_guard<std::mutex> g(g_lock);
	TORCH_CHECK(dev >= 0 && dev < 64 && id >= 0 && (size_t)id < g_stream_ps[dev].size(),
		    "neuron: no stream ", id, " on device ", dev);
	return g_stream_ps[dev][id];
}

// `id` waits for everything issued so far on `other` (and for time `at`)
void stream_wait_until(int dev, int id, uint64_t at)
{
	std::lock_guard<std::mutex> g(g_lock);
	TORCH_CHECK(dev >= 0 && dev < 64 && id >= 0 && (size_t)id < g_stream_ps[dev].size(),
		    "neuron: no stream ", id, " on device ", dev);
	g_stream_ps[dev][id] = std::max(g_stream_ps[dev][id], at);
}

}  // namespace neuron
