// neuron_device_internal.h -- state shared by the device's own files
// (neuron_allocator.cpp, neuron_guard.cpp, neuron_transfer.cpp,
// neuron_views.cpp) and neuron_stats.cpp (counters, stream charges); not for
// the kernel files, which use neuron_device.h.
#pragma once

#include "neuron_device.h"

#include <mutex>
#include <vector>

namespace neuron::detail {

extern std::mutex g_lock;                          // allocations and statistics
extern Stats g_stats;
extern std::vector<uint64_t> g_stream_ps[64];      // [device][stream id]: simulated ps
extern thread_local int g_current_stream[64];       // per thread: current stream id

// starts the runtime on first use (an error names why it cannot); the
// allocator's and the guard's entry points call it
void ensure_runtime();
// the stream clocks and host-link parameters (neuron_guard.cpp), once, when
// the runtime starts
void init_timelines();

}  // namespace neuron::detail
