// runtime/kineto.cpp -- the `neuron` device in torch.profiler: a Kineto
// activity profiler for PrivateUse1 (registered through PyTorch's
// PrivateUse1ProfilerRegistry), so that
// torch.profiler.profile(activities=[CPU, ProfilerActivity.PrivateUse1])
// sees each program the device ran as a kernel event linked to the op that
// launched it: device time per op in key_averages(), a device track in the
// exported trace.
//
// Times: an event lasts its program's simulated time (launch overhead
// excluded, as a CUDA kernel's excludes its launch); it is placed on the host
// clock where the op launched it, but never before the previous event of the
// same stream ended, so each stream's track is the serial timeline the
// simulated stream ran.  The op's correlation id is the one Kineto pushes
// when the op starts (pushCorrelationId), kept per thread.
//
// PyTorch's CPU wheel is built with Kineto, whose headers it ships; the
// registry header is guarded by USE_KINETO, which torch's CMake config does
// not export, so it is defined here (this file needs a Kineto-enabled torch).
#ifndef USE_KINETO
#define USE_KINETO 1
#endif
#include "runtime/device.h"
#include "runtime/kineto.h"

#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace neuron {
namespace {

using libkineto::ActivityType;

int64_t unix_ns()
{
	return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
		.count();
}

// one program run while a session records
struct DeviceEvent {
	std::string name;
	int dev, stream;
	uint64_t corr;            // the launching op's correlation id (0: none)
	int64_t start_ns, end_ns; // host clock
};

// the recording session's events; only one session records at a time
std::mutex g_lock;
std::atomic<bool> g_recording{ false };
std::vector<DeviceEvent> g_events;
std::map<std::pair<int, int>, int64_t> g_stream_end;   // (dev, stream) -> its last event's end
constexpr size_t kMaxEvents = 1u << 20;                 // bounded: a long profile keeps its first million
uint64_t g_dropped = 0;
thread_local std::vector<uint64_t> t_corr;

class Session final : public libkineto::IActivityProfilerSession {
public:
	void start() override
	{
		std::lock_guard<std::mutex> g(g_lock);
		g_events.clear();
		g_stream_end.clear();
		g_dropped = 0;
		start_ns_ = unix_ns();
		g_recording = true;
	}
	void stop() override
	{
		g_recording = false;
		end_ns_ = unix_ns();
	}
	std::vector<std::string> errors() override
	{
		std::lock_guard<std::mutex> g(g_lock);
		if (!g_dropped)
			return {};
		return { "neuron: " + std::to_string(g_dropped) + " device events beyond the first " +
			 std::to_string(kMaxEvents) + " were not kept" };
	}
	void processTrace(libkineto::ActivityLogger &logger) override
	{
		collect(logger, nullptr);
	}
	void processTrace(libkineto::ActivityLogger &logger, libkineto::getLinkedActivityCallback linked, int64_t,
			  int64_t) override
	{
		collect(logger, linked);
	}
	std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return {}; }
	std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }
	// the buffer holding the logged activities goes to Kineto, which keeps
	// it for as long as the trace that points into it
	std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }
	void pushCorrelationId(uint64_t id) override { t_corr.push_back(id); }
	void popCorrelationId() override
	{
		if (!t_corr.empty())
			t_corr.pop_back();
	}

private:
	// the recorded events as kernel activities of this session's buffer,
	// each linked to its op's CPU activity when Kineto gives the link
	void collect(libkineto::ActivityLogger &logger, const libkineto::getLinkedActivityCallback &linked)
	{
		std::vector<DeviceEvent> events;
		{
			std::lock_guard<std::mutex> g(g_lock);
			events.swap(g_events);
		}
		buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
		buffer_->span = libkineto::TraceSpan(start_ns_, end_ns_ ? end_ns_ : unix_ns(), "__neuron_profiler__");
		int32_t id = 0;
		for (const DeviceEvent &e : events) {
			buffer_->emplace_activity(buffer_->span, ActivityType::CONCURRENT_KERNEL, e.name);
			libkineto::GenericTraceActivity &a = *buffer_->activities.back();
			a.startTime = e.start_ns;
			a.endTime = e.end_ns;
			a.id = ++id;
			a.device = e.dev;
			a.resource = e.stream;
			a.linked = e.corr && linked ? linked((int32_t)e.corr) : nullptr;
			logger.handleGenericActivity(a);
		}
	}

	int64_t start_ns_ = 0, end_ns_ = 0;
	std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class Profiler final : public libkineto::IActivityProfiler {
public:
	const std::string &name() const override { return name_; }
	const std::set<ActivityType> &availableActivities() const override { return types_; }
	std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType> &,
									const libkineto::Config &) override
	{
		return std::make_unique<Session>();
	}
	std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
									const std::set<ActivityType> &types,
									const libkineto::Config &config) override
	{
		return configure(types, config);
	}

private:
	std::string name_{ "neuronsim" };
	std::set<ActivityType> types_{ ActivityType::CONCURRENT_KERNEL, ActivityType::PRIVATEUSE1_RUNTIME };
};

const torch::profiler::impl::RegisterPrivateUse1Profiler<Profiler> g_register;


}  // namespace

bool kineto_recording()
{
	return g_recording.load(std::memory_order_relaxed);
}

void kineto_device_event(const char *op, int dev, int stream, uint64_t sim_ps)
{
	if (!kineto_recording())
		return;
	int64_t now = unix_ns();
	int64_t dur = (int64_t)((sim_ps + 500) / 1000);
	uint64_t corr = t_corr.empty() ? 0 : t_corr.back();
	std::lock_guard<std::mutex> g(g_lock);
	if (g_events.size() >= kMaxEvents) {
		g_dropped++;
		return;
	}
	int64_t &end = g_stream_end[{ dev, stream }];
	int64_t start = now > end ? now : end;
	end = start + dur;
	g_events.push_back({ op ? op : "", dev, stream, corr, start, start + dur });
}

}  // namespace neuron
