// neuron_device_internal.h -- state shared by neuron_device.cpp (allocator,
// streams, copies) and neuron_stats.cpp (counters, stream charges); not for
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

}  // namespace neuron::detail
