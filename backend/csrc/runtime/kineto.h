// runtime/kineto.h -- the device's events for torch.profiler (kineto.cpp):
// each program the runtime charges, while a profiler session records.
#pragma once

#include <cstdint>

namespace neuron {

// whether a torch.profiler session with PrivateUse1 activity is recording
bool kineto_recording();
// a program of `sim_ps` simulated time that `op` ran on (dev, stream)
void kineto_device_event(const char *op, int dev, int stream, uint64_t sim_ps);

}  // namespace neuron
