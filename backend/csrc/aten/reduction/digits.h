// aten/reduction/digits.h -- exact integer extremes on the float engines.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <tuple>

namespace neuron {

// The largest (is_max) or smallest element of an integer tensor along dim
// (every element when dim is absent: a flat index, as argmax's) and its
// first position: (values, int64 indices), keepdim as the reductions take
// it.  std::nullopt when not covered (not an integer neuron tensor, an
// empty reduction: CPU's error then comes from the fallback).
std::optional<std::tuple<at::Tensor, at::Tensor>> int_extreme(const at::Tensor &self, std::optional<int64_t> dim,
							       bool keepdim, bool is_max);

}  // namespace neuron
