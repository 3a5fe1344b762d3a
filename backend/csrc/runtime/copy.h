// runtime/copy.h -- device copies as DMA programs and the ends of in-place / out=
// kernels: results written into their tensors, operands made contiguous
// in the dtype a kernel computes in, casts between integer and float types.
#pragma once

#include <ATen/core/Tensor.h>

#include <initializer_list>

namespace neuron {

// dst = src (broadcast to dst's shape; float casts) as a DMA program; false
// when not covered (then nothing was written)
bool native_copy(const at::Tensor &dst, const at::Tensor &src);
// r written into an in-place / out= kernel's tensor by a DMA program, out
// resized to r's shape first as PyTorch's out= contract says (nothing to do
// when r is out); an error when out's dtype cannot take r's
at::Tensor &write_result(at::Tensor &out, const at::Tensor &r);
// an out= / in-place kernel's end: r (undefined: not covered) written into
// out, or the decline (runtime/registration.h) that sends the call to the fallback
at::Tensor &declined_tensor();
inline at::Tensor &written_or_declined(at::Tensor &out, const at::Tensor &r)
{
	return r.defined() ? write_result(out, r) : declined_tensor();
}
// an in-place kernel's end: r written into self when it has self's dtype
inline at::Tensor &inplace_or_declined(at::Tensor &self, const at::Tensor &r)
{
	return r.defined() && r.scalar_type() == self.scalar_type() ? write_result(self, r) : declined_tensor();
}
// r written into out (write_result): false when out is not a neuron tensor
// or cannot hold r's dtype
bool store(at::Tensor &out, const at::Tensor &r);
// an out= composite's end: the decline when r is undefined or out is not a
// neuron tensor; else CPU's overlap checks (out with itself, out with each
// input) and r written into out (resized first, as CPU's out= contract)
at::Tensor &composite_out(at::Tensor &out, std::initializer_list<const at::Tensor *> ins, const at::Tensor &r);
// dst is x or shares no memory with it (a program may read x and write dst)
bool no_partial_overlap(const at::Tensor &dst, const at::Tensor &x);
// t broadcast to `sizes` and cast to `dtype`, contiguous (t itself if it is)
at::Tensor materialize(const at::Tensor &t, at::IntArrayRef sizes, at::ScalarType dtype);
// ... or undefined when the copy kernels do not cover the cast (the caller declines)
at::Tensor prepared(const at::Tensor &t, at::IntArrayRef sizes, at::ScalarType dtype);

// a wrapped Python number (0-dim CPU tensor) as a 0-dim `t` tensor on like's
// device: copied over, or -- while a graph is captured, where a host write
// would split the graph -- filled by a program
at::Tensor wrapped_on_device(const at::Tensor &scalar, const at::Tensor &like, at::ScalarType t);

// casts the copy kernels run on the integer ALU (aten/pointwise/int64.cpp)
bool native_i64_to_float(const at::Tensor &dst, const at::Tensor &src);   // and to bool
bool native_cast(const at::Tensor &dst, const at::Tensor &src);          // ints/bool -> others
bool native_float_to_int(const at::Tensor &dst, const at::Tensor &src);  // floats -> ints/bool
at::Tensor integral_float_to_int64(const at::Tensor &f);                 // |v| < 2^31

}  // namespace neuron
