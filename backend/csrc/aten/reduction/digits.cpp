// aten/reduction/digits.cpp -- the max / min of integer tensors and their
// positions, exactly, with the float reductions the engines have.
//
// The engines compare in fp32, exact for integers below 2^24 only; an int32
// or int64 element is compared as its base-2^16 digits instead, most
// significant first (the top digit signed, the others unsigned, as
// reduction/sort.cpp's radix passes split them): each pass keeps, per row,
// the candidates whose digit equals the row's extreme digit among the
// candidates still in, and the first remaining candidate is the answer --
// the first occurrence of the extreme, as CPU PyTorch returns it.
#include "aten/reduction/digits.h"

#include "runtime/copy.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/where.h>

#include <limits>
#include <vector>

namespace neuron {

namespace {

// x (rows x cols, int) as fp32 digits, most significant first
std::vector<at::Tensor> digits_of(const at::Tensor &x2)
{
	const int64_t B = 1 << 16;
	switch (x2.scalar_type()) {
	case at::kLong: {
		at::Tensor words = x2.view(at::kInt).view({ x2.size(0), x2.size(1), 2 });
		at::Tensor lo = words.select(2, 0), hi = words.select(2, 1);
		return { hi.floor_divide(B), hi.remainder(B), lo.floor_divide(B).remainder(B), lo.remainder(B) };
	}
	case at::kInt:
		return { x2.floor_divide(B), x2.remainder(B) };
	default:
		return { x2 };
	}
}

// (values, indices) of the rows of `moved` (self with dim last, the reduced
// dim kept as size 1) in the shape the reduction returns
std::tuple<at::Tensor, at::Tensor> finish(const at::Tensor &self, std::optional<int64_t> dim, bool keepdim,
					  at::Tensor vals, at::Tensor idx)
{
	if (!dim) {
		std::vector<int64_t> ones(keepdim ? self.dim() : 0, 1);
		return std::make_tuple(vals.reshape(ones), idx.reshape(ones));
	}
	int64_t d = at::maybe_wrap_dim(*dim, self.dim());
	vals = vals.movedim(-1, d);
	idx = idx.movedim(-1, d);
	if (!keepdim && self.dim() > 0) {
		vals = vals.squeeze(d);
		idx = idx.squeeze(d);
	} else if (self.dim() == 0) {
		vals = vals.reshape({});
		idx = idx.reshape({});
	}
	return std::make_tuple(vals.contiguous(), idx.contiguous());
}

}  // namespace

std::optional<std::tuple<at::Tensor, at::Tensor>> int_extreme(const at::Tensor &self, std::optional<int64_t> dim,
							       bool keepdim, bool is_max)
{
	at::ScalarType dt = self.scalar_type();
	// the types digits_of splits (uint32 / uint64 would need unsigned top digits)
	bool covered = dt == at::kByte || dt == at::kChar || dt == at::kShort || dt == at::kUInt16 || dt == at::kInt ||
		       dt == at::kLong;
	if (!self.is_privateuseone() || !covered || self.numel() == 0)
		return std::nullopt;
	at::Tensor moved = dim ? self.movedim(at::maybe_wrap_dim(*dim, self.dim()), -1) : self.reshape({ -1 });
	if (moved.dim() == 0)
		moved = moved.reshape({ 1 });
	int64_t cols = moved.size(-1), rows = moved.numel() / cols;
	// row-major strides spelled out: a size-1 dim may carry any stride, and
	// viewing int64 as int32 words needs the last one to be 1
	at::Tensor x2 = materialize(moved, moved.sizes(), dt).contiguous();
	x2 = x2.as_strided({ rows, cols }, { cols, 1 }, x2.storage_offset());
	if (cols == 1) {   // nothing to compare: each row's one element, at 0
		std::vector<int64_t> shape = moved.sizes().vec();
		at::Tensor vals = x2.clone().view(shape), idx = at::zeros(shape, self.options().dtype(at::kLong));
		return finish(self, dim, keepdim, vals, idx);
	}
	float none = is_max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
	at::Tensor in;   // the candidates still in (all, before the first digit)
	for (const at::Tensor &d : digits_of(x2)) {
		at::Tensor key = d.to(at::kFloat);
		if (in.defined())
			key = at::where(in, key, none);
		at::Tensor best = is_max ? key.amax(1, true) : key.amin(1, true);
		at::Tensor here = key.eq(best);
		in = in.defined() ? in.bitwise_and(here) : here;
	}
	at::Tensor idx = in.to(at::kFloat).argmax(1, true);            // the first candidate left
	at::Tensor vals = x2.gather(1, idx);
	std::vector<int64_t> shape = moved.sizes().vec();
	shape.back() = 1;
	return finish(self, dim, keepdim, vals.view(shape), idx.view(shape));
}

}  // namespace neuron
