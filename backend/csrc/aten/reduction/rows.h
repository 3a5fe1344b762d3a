// aten/reduction/rows.h -- the row kernel (programs/rows.c) as the row-wise
// ATen kernels share it: reduce.cpp's reductions, softmax.cpp's softmax and
// layer norm.
#pragma once

#include "runtime/program.h"

#include <initializer_list>

namespace neuron {

// a float neuron tensor with elements
bool float_device(const at::Tensor &t);
// x viewed as [rows, cols] with `dim` last, contiguous (a copy if needed)
at::Tensor rows_view(const at::Tensor &x, int64_t dim);
// runs the row kernel over x2d [rows, cols]; extra inputs (layer norm's w,
// b) and outputs by name
void run_rows(const char *name, const nk_rows &op, const at::Tensor &x, std::initializer_list<Binding> extra_in,
	      std::initializer_list<Binding> outs);
// whether the row kernel takes rows of `cols` elements for `op`
bool fits(int op, int64_t cols, bool affine = false);

}  // namespace neuron
