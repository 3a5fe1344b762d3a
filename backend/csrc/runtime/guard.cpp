// runtime/guard.cpp -- the device guard of `neuron` (current device, device
// count, streams and events) and the simulated device timelines: one clock
// in picoseconds per stream per device, which programs and host-link copies
// advance and events record.
#include "runtime/device_internal.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cstdio>
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

// A thread's current device; -1 until it sets one: the process's default
// core, which follows LOCAL_RANK as torchrun and Accelerate expect (rank r of
// a host on core r of the cores visible to the process, see
// default_device_error), unless only one core is visible.
thread_local int g_current_device = -1;
int g_default_device = 0;

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

// set once as the runtime starts; an error message when LOCAL_RANK is not a
// process index
std::string detail::init_default_device()
{
	const char *lr = std::getenv("LOCAL_RANK");
	int n = nsim_core_count();
	if (!lr || !*lr || n <= 1)
		return {};
	char *end;
	long r = std::strtol(lr, &end, 10);
	if (*end || r < 0)
		return std::string("LOCAL_RANK='") + lr + "' is not a process index";
	if (r >= n) {
		// (NEURON_RT_VISIBLE_CORES gave each process its own cores, or more
		// processes than cores share them): CUDA's default, device 0
		std::fprintf(stderr,
			     "[neuronsim] LOCAL_RANK=%ld but this process sees %d NeuronCores: its current device "
			     "stays neuron:0\n", r, n);
		return {};
	}
	g_default_device = (int)r;
	return {};
}

int current_device()
{
	if (g_current_device >= 0)
		return g_current_device;
	try {
		ensure_runtime();
	} catch (...) {
		return 0;
	}
	// the process default is final once the runtime is up: the thread keeps
	// it, so the dispatch path's guards stop asking
	return g_current_device = g_default_device;
}

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
	c10::Device getDevice() const override { return c10::Device(kType, current_device()); }
	void setDevice(c10::Device d) const override { set_device(d.index()); }
	void uncheckedSetDevice(c10::Device d) const noexcept override { g_current_device = d.index(); }
	// streams are the per-device simulated timelines (stream id 0: default)
	c10::Stream getStream(c10::Device d) const noexcept override
	{
		int dev = d.index() < 0 ? current_device() : d.index();
		return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, dev),
				   g_current_stream[dev & 63]);
	}
	c10::Stream getDefaultStream(c10::Device d) const override
	{
		return c10::Stream(c10::Stream::UNSAFE, d, 0);
	}
	c10::Stream getNewStream(c10::Device d, int) const override
	{
		int dev = d.index() < 0 ? current_device() : d.index();
		return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, dev), stream_new(dev));
	}
	// a pool of streams per device, handed out round-robin as CUDA's are: a
	// future's callbacks (DDP's, per bucket) take one each time and the
	// stream table must not grow with every call
	c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override
	{
		static constexpr size_t kPool = 8;
		static std::mutex pool_lock;
		static std::vector<int> pool[64];
		static size_t next[64];
		int dev = d.index() < 0 ? current_device() : d.index();
		std::lock_guard<std::mutex> g(pool_lock);
		auto &p = pool[dev & 63];
		if (p.size() < kPool)
			p.push_back(stream_new(dev));
		int id = p[next[dev & 63]++ % p.size()];
		return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, dev), id);
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
	// events hold the simulated time of their stream when recorded, and
	// whether a collective set it (stream_collective_bound): a stream
	// blocked on such an event waits for a collective (a device-aware
	// future's completion)
	struct SimEvent {
		uint64_t ps;
		bool collective;
	};
	void record(void **event, const c10::Stream &stream, const c10::DeviceIndex,
		    const c10::EventFlag) const override
	{
		if (!*event)
			*event = new SimEvent{ 0, false };
		auto *e = static_cast<SimEvent *>(*event);
		e->ps = stream_time_ps(stream.device_index(), (int)stream.id());
		e->collective = stream_collective_bound(stream.device_index(), (int)stream.id());
	}
	void block(void *event, const c10::Stream &stream) const override
	{
		if (!event)
			return;
		auto *e = static_cast<SimEvent *>(event);
		stream_wait_for(stream.device_index(), (int)stream.id(), e->ps, e->collective);
	}
	bool queryEvent(void *) const override { return true; }
	void synchronizeEvent(void *) const override {}
	void destroyEvent(void *event, const c10::DeviceIndex) const noexcept override
	{
		delete static_cast<SimEvent *>(event);
	}
	double elapsedTime(void *e1, void *e2, const c10::DeviceIndex) const override
	{
		TORCH_CHECK(e1 && e2, "neuron: elapsed_time needs two recorded events");
		return ((double)static_cast<SimEvent *>(e2)->ps - (double)static_cast<SimEvent *>(e1)->ps) / 1e9;
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

// Which stream clocks a collective set: a stream is "collective-bound" while
// its clock is still the value a collective's end gave it (the collective
// stream after each collective, a stream that waited for one and has run
// nothing since).  An event recorded on such a stream carries it, so the
// default stream waiting -- directly or through FSDP2's all-gather stream
// and its event -- for a collective counts as exposed collective time.
static std::vector<uint64_t> g_bound_at[64];   // [device][stream]: the bound clock value

static uint64_t &bound_at_locked(int dev, int id)
{
	auto &b = g_bound_at[dev];
	if (b.size() < g_stream_ps[dev].size())
		b.resize(g_stream_ps[dev].size(), UINT64_MAX);
	return b[(size_t)id];
}

void mark_collective_bound_locked(int dev, int id)
{
	bound_at_locked(dev, id) = g_stream_ps[dev][id];
}

bool stream_collective_bound(int dev, int id)
{
	std::lock_guard<std::mutex> g(g_lock);
	TORCH_CHECK(dev >= 0 && dev < 64 && id >= 0 && (size_t)id < g_stream_ps[dev].size(),
		    "neuron: no stream ", id, " on device ", dev);
	return bound_at_locked(dev, id) == g_stream_ps[dev][id];
}

// `id` waits until time `at` (everything issued so far on another stream,
// an event); `collective`: `at` is a collective's end, directly or through
// a collective-bound stream
void stream_wait_for(int dev, int id, uint64_t at, bool collective)
{
	std::lock_guard<std::mutex> g(g_lock);
	TORCH_CHECK(dev >= 0 && dev < 64 && id >= 0 && (size_t)id < g_stream_ps[dev].size(),
		    "neuron: no stream ", id, " on device ", dev);
	uint64_t &clock = g_stream_ps[dev][id];
	if (at <= clock)
		return;
	// the default stream is where a step's compute runs: its stalls are
	// the exposed ones (a side stream's would count the same wait twice)
	if (collective && id == 0)
		g_stats.collective_exposed_ps += at - clock;
	clock = at;
	if (collective)
		bound_at_locked(dev, id) = at;
}

void stream_wait_until(int dev, int id, uint64_t at)
{
	stream_wait_for(dev, id, at, false);
}

}  // namespace neuron
