// aten/linalg/matmul.h -- TensorE matrix products for the other kernels (attention, the
// graph compiler's matmul epilogue).
#pragma once

#include <ATen/core/Tensor.h>

namespace neuron {

// a @ b (+ bias [n]) with the activation `act` (isa_act) applied, or the
// [m, n] residual added, as the product leaves PSUM (the graph compiler's
// matmul epilogue); undefined when the matmul kernel does not cover the
// operands
at::Tensor matmul_act(const at::Tensor &a, const at::Tensor &b, const at::Tensor *bias, int act,
		      const at::Tensor *residual = nullptr);

// [b,] m x k @ [b,] k x n on TensorE with the result in out_dt (fp32 PSUM
// values rounded once), e.g. fp32 attention scores of bf16 q and k
at::Tensor matmul_to(const at::Tensor &a, const at::Tensor &b, at::ScalarType out_dt);

}  // namespace neuron
