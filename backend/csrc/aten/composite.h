// aten/composite.h -- what kernels composed from other native kernels share: the
// operand predicates and fp32 as the compute type (the out= ending is
// runtime/copy.h's composite_out)
#pragma once

#include <ATen/core/Tensor.h>

#include <initializer_list>

#include "runtime/program.h"

namespace neuron {

// a neuron tensor of a float type the kernels compute in
inline bool is_float_neuron(const at::Tensor &t)
{
	return t.defined() && t.is_privateuseone() && isa_dtype_of(t.scalar_type()) != ISA_DT_INVALID;
}
inline bool both_float_neuron(const at::Tensor &x, const at::Tensor &y)
{
	return is_float_neuron(x) && is_float_neuron(y);
}
// a gradient and the tensor it is taken at: float neuron tensors of one
// dtype and shape (what the elementwise backwards compute on)
inline bool grad_pair(const at::Tensor &g, const at::Tensor &x)
{
	return both_float_neuron(g, x) && g.scalar_type() == x.scalar_type() && g.sizes() == x.sizes();
}
// true where x is NaN
inline at::Tensor nan_mask(const at::Tensor &x)
{
	return x.ne(x);
}
// t at fp32 (a cast program for bf16 / fp16; t itself when fp32): where
// composite kernels compute, as the CPU's accumulate type
inline at::Tensor as_fp32(const at::Tensor &t)
{
	return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat);
}

// a composite's fp32 result r in dtype dt (r itself when it has it): rounded
// once, as CPU PyTorch's opmath kernels for bf16 / fp16
inline at::Tensor cast_back(const at::Tensor &r, at::ScalarType dt)
{
	return r.scalar_type() == dt ? r : r.to(dt);
}

}  // namespace neuron
