// aten/indexing/index.h -- what the indexing kernels share: CPU PyTorch's words for an
// index out of range, device faults turned into them, whole-row moves.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "runtime/program.h"

namespace neuron {

// How CPU PyTorch words an index outside [-size, size) (or [0, size)).
enum class IndexWording {
	InSelf,         // IndexError "index out of range in self" (index_select, embedding)
	Bounds,         // IndexError "index i is out of bounds for dimension d with size s"
	BoundsRuntime,  // the same words as a RuntimeError (gather, scatter, index_add)
	CopyBounds,     // IndexError "index_copy_(): index i is out of bounds ..."
};
// The index dtypes CPU PyTorch takes for gather / scatter / index_select /
// advanced indexing: int64 and (since 2.x) int32.
inline bool is_index_dtype(const at::Tensor &t)
{
	return t.scalar_type() == at::kLong || t.scalar_type() == at::kInt;
}
// One index tensor of an op, what it indexes and how its faults read.
struct IndexCheck {
	at::Tensor index;
	int64_t dim, size;
	bool wrap;          // negative values count from the end (advanced indexing)
	IndexWording kind;
};
// Throws CPU PyTorch's error for the first index of `c` outside its range
// (the index read to the host: an error path only); returns when all are in.
void check_index_on_host(const IndexCheck &c);
// Runs f(); a device fault is raised as CPU PyTorch raises it for the first
// bad index among `checks`.
template <class F>
auto index_faults(F &&f, const std::vector<IndexCheck> &checks) -> decltype(f())
{
	try {
		return f();
	} catch (const OutOfBoundsFault &) {
		for (const IndexCheck &c : checks)
			check_index_on_host(c);
		throw;
	}
}

// flat positions with their index outside [0, size) made -1: a row outside
// every table (a device fault), never another element (aten/indexing/index.cpp)
at::Tensor outside_faults(const at::Tensor &flat, const at::Tensor &index, int64_t size);

// rows of `table` (dim 0) by index / written at index, in place (aten/indexing/index.cpp)
at::Tensor rows_select(const at::Tensor &table, const at::Tensor &index);
void rows_write(at::Tensor &table, const at::Tensor &index, const at::Tensor &src);
// out.select(dim, index[j]) = (or += with accumulate) src.select(dim, j), in
// place on a contiguous out; false when not covered (nothing written)
bool rows_write_dim(at::Tensor &out, int64_t dim, const at::Tensor &index, const at::Tensor &src, bool accumulate,
		    const char *opname);

// CPU's index ops (index_select / copy / add / fill / reduce) take a 0-dim
// self as one element along dim 0 or -1, with a one-element index: such a
// call runs on [1] views of self (and out / source)
inline bool scalar_self_case(const at::Tensor &self, int64_t dim, const at::Tensor &index)
{
	return self.dim() == 0 && (dim == 0 || dim == -1) && index.numel() == 1 && index.dim() <= 1;
}
inline at::Tensor as_row(const at::Tensor &t)
{
	return t.dim() == 0 ? t.view({ 1 }) : t;
}

}  // namespace neuron
