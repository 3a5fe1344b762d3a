// aten/reduction/scan.h -- the inclusive scan the cumulative kernels share.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>

namespace neuron {

// an inclusive scan of x along dim by log2(n) doubling steps, x[k:] =
// combine(x[k:], x[:-k]) for k = 1, 2, 4, ... (aten/reduction/scan.cpp)
at::Tensor doubling_scan(at::Tensor x, int64_t dim,
			 const std::function<at::Tensor(const at::Tensor &later, const at::Tensor &earlier)> &combine);

}  // namespace neuron
