// aten/complex/complex.h -- complex64 arithmetic for the arithmetic ops
// complex operands (aten/pointwise/arithmetic.cpp's mul).
#pragma once

#include <ATen/core/Tensor.h>

namespace neuron {

// a * b with a complex64 operand (the other complex64, real or a wrapped
// number) as products of (real, imaginary) fp32 pairs; undefined when not
// covered
at::Tensor complex_mul(const at::Tensor &a, const at::Tensor &b);

}  // namespace neuron
