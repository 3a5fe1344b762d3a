// runtime/device_internal.h -- state shared by the device's own files
// (runtime/allocator.cpp, runtime/guard.cpp, runtime/transfer.cpp,
// runtime/views.cpp) and runtime/stats.cpp (counters, stream charges); not for
// the kernel files, which use runtime/device.h.
#pragma once

#include "runtime/device.h"

#include <mutex>
#include <string>
#include <vector>

namespace neuron::detail {

extern std::mutex g_lock;                          // allocations and statistics
extern Stats &g_stats;
extern std::vector<uint64_t> g_stream_ps[64];      // [device][stream id]: simulated ps
extern thread_local int g_current_stream[64];       // per thread: current stream id

// starts the runtime on first use (an error names why it cannot); the
// allocator's and the guard's entry points call it
void ensure_runtime();
// the stream clocks and host-link parameters (runtime/guard.cpp), once, when
// the runtime starts
void init_timelines();
// the process's default core (LOCAL_RANK), once the runtime is up: an
// error message, empty when it is fine
std::string init_default_device();

}  // namespace neuron::detail
