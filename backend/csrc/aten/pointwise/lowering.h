// aten/pointwise/lowering.h -- binary ops lowered by operand type: one step
// picks the path from the promoted type (floats on VectorE's float ALU,
// integers of <= 32 bits on its integer ALU, int64 as exact int32 pairs,
// bool on the logical ALU), so each op states its ALU operation and
// nothing else.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace neuron {

// How a binary ALU operation runs, from its operands' promoted type: the
// float ALU (integers promote for true division), the exact integer ALU
// for integers of <= 32 bits, exact (low, high) int32 pairs for int64, the
// logical ALU for bool, or not at all (complex: the caller's own path).
enum class BinaryPath { Float, Int32, Int64, Bool, Decline };
BinaryPath lower_binary(int alu, const at::Tensor &a, const at::Tensor &b);

// a <alu> b by its lowering, as one program where the operands allow
// (broadcast forms, a wrapped number as an immediate); undefined when not
// covered (the caller declines).  (aten/pointwise/arithmetic.cpp)
at::Tensor binary_op(const char *name, int alu, const at::Tensor &a, const at::Tensor &b);
// the same for an out= / in-place target `dst`: CPU's overlap checks first,
// and undefined (nothing run) when the result type is not one dst can take
// or the operands are not covered
at::Tensor binary_into(const char *name, int alu, const at::Tensor &a, const at::Tensor &b, const at::Tensor &dst);

// The paths' own kernels, for ops whose semantics need one directly:
// integer / bool operands on the exact integer ALU (wrapping; bitwise ops
// and shifts too; aten/compare/compare.cpp), undefined when not covered
at::Tensor int_binary(const char *name, int alu, const at::Tensor &a, const at::Tensor &b);
// exact int64 add / subtract, multiply, comparisons (aten/pointwise/int64.cpp)
bool native_i64_addsub(const char *name, bool sub, const at::Tensor &a, const at::Tensor &b, at::Tensor &out);
bool native_i64_mul(const at::Tensor &a, const at::Tensor &b, at::Tensor &out);
at::Tensor i64_mul_scalar(const at::Tensor &a, int32_t c);   // int64 a
bool native_i64_compare(const char *name, int alu, const at::Tensor &a, const at::Tensor &b, at::Tensor &out);
// bool * bool: their logical and (aten/compare/compare.cpp)
bool native_bool_mul(const at::Tensor &a, const at::Tensor &b, at::Tensor &out);

}  // namespace neuron
