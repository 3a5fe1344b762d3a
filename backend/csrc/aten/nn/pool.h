// aten/nn/pool.h -- what the resampling kernels share (aten/nn/pool.cpp,
// aten/nn/resample.cpp): host-built index / weight tables uploaded to the
// device, and CPU's linear interpolation of one dim.
#pragma once

#include "runtime/device.h"

#include <optional>
#include <vector>

namespace neuron {

// a real floating-point neuron tensor
bool float_input(const at::Tensor &x);
// host values as an int64 / fp32 tensor on like's device
at::Tensor longs(const std::vector<int64_t> &v, const at::Tensor &like);
at::Tensor floats(const std::vector<float> &v, at::IntArrayRef shape, const at::Tensor &like);

// CPU's linear interpolation of dim `from_end` (counted from the last) of x
// to `out` positions: x gathered at each output's two source indices and
// their weights (in dt's precision, as CPU keeps them), shaped to broadcast
struct Linear {
	at::Tensor x0, x1, w0, w1;
};
Linear linear_dim(const at::Tensor &x, int64_t from_end, int64_t out, bool align, std::optional<double> scale,
		  at::ScalarType dt);

}  // namespace neuron
