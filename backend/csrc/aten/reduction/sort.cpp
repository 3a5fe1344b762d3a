// aten/reduction/sort.cpp -- sorting on the device: topk (GpSimd's
// partition-wise top-k, else the sort) and sort (programs/sort.c's bitonic
// network; integers as exact keys), values and CPU's indices.
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/indexing/index.h"
#include "ops.def"

#include <ATen/ops/arange_ops.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/stack.h>
#include <limits>
#include <ATen/ops/cumsum_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/max_ops.h>
#include <ATen/ops/min_ops.h>
#include <ATen/ops/sort_ops.h>
#include <ATen/ops/topk_ops.h>
#include <torch/library.h>

namespace neuron {

namespace {

// topk / unstable sort along `dim` with GpSimd's topk (programs/topk.c):
// CPU PyTorch's own selection algorithm, so equal values come out in the
// CPU's order (topk: partial_sort / nth_element + sort; sort: std::sort).
// Any dtype of up to 4 bytes; a row must fit one SBUF partition.
int topk_dtype(at::ScalarType t)
{
	switch (t) {
	case at::kInt: return ISA_DT_int32;
	case at::kShort: return ISA_DT_int16;
	case at::kChar: return ISA_DT_int8;
	case at::kByte: return ISA_DT_uint8;
	case at::kBool: return ISA_DT_uint8;   // 0 / 1
	default: return isa_dtype_of(t);
	}
}

std::optional<std::tuple<at::Tensor, at::Tensor>> gpsimd_topk(const at::Tensor &self, int64_t k, int64_t dim,
								  bool largest, bool sorted, bool sort)
{
	if (!self.is_privateuseone() || self.dim() == 0 || self.numel() == 0)
		return std::nullopt;
	// int64 whose values all fit int32 (ids, counts, positions) rank the
	// same as their int32 copy; the values then come from the int64 rows
	if (self.scalar_type() == at::kLong) {
		at::Tensor range = at::stack({ self.min(), self.max() }).cpu();   // one read
		if (range[0].item<int64_t>() < INT32_MIN || range[1].item<int64_t>() > INT32_MAX)
			return std::nullopt;
		auto r = gpsimd_topk(self.to(at::kInt), k, dim, largest, sorted, sort);
		if (r)
			std::get<0>(*r) = self.gather(dim, std::get<1>(*r));
		return r;
	}
	int dt = topk_dtype(self.scalar_type());
	if (dt == ISA_DT_INVALID)
		return std::nullopt;
	dim = at::maybe_wrap_dim(dim, self.dim());
	int64_t c = self.size(dim);
	if (k < 1 || k > c)
		return std::nullopt;
	nk_topk o{};
	o.dtype = dt;
	o.rows = (uint64_t)(self.numel() / c);
	o.cols = (uint64_t)c;
	o.k = (uint64_t)k;
	o.largest = largest;
	o.sorted = sorted;
	o.sort = sort;
	if (!nk_topk_fits(isa_target_from_name(nsim_target_name()), &o))
		return std::nullopt;
	at::Tensor moved = self.movedim(dim, -1);
	at::Tensor x = materialize(moved, moved.sizes(), self.scalar_type());
	std::vector<int64_t> osz = x.sizes().vec();
	osz.back() = k;
	at::Tensor vals = at::empty(osz, x.options());
	at::Tensor idx32 = at::empty(osz, x.options().dtype(at::kInt));
	int dev = self.device().index();
	Program m = cached_program("topk", o, dev, nk_topk_program);
	run_program(m, dev, sort ? "aten::sort" : "aten::topk", { { "x", &x } },
		    { { "values", &vals }, { "indices", &idx32 } });
	return std::make_tuple(vals.movedim(-1, dim).contiguous(), idx32.to(at::kLong).movedim(-1, dim).contiguous());
}

// topk along `dim` for k <= 64 when a row is too long for one partition:
// k rounds of argmax (argmin) over a working copy, each taking the picked
// value out (-inf / +inf) with a one-element scatter; values come out
// sorted, ties lowest index first (not the CPU's order: rows this long
// take the heap path there, whose tie order is the heap's).  NaNs are not
// ordered as PyTorch orders them (largest), so inputs with NaN fall back.
std::optional<std::tuple<at::Tensor, at::Tensor>> topk_impl(const at::Tensor &self, int64_t k, int64_t dim,
								bool largest)
{
	if (!self.is_privateuseone() || isa_dtype_of(self.scalar_type()) == ISA_DT_INVALID || self.dim() == 0 ||
	    k < 0 || k > 64)
		return std::nullopt;
	dim = at::maybe_wrap_dim(dim, self.dim());
	int64_t c = self.size(dim);
	if (k > c || self.numel() == 0 || c >= (1 << 24) || self.ne(self).any().item<bool>())   // NaN != NaN
		return std::nullopt;
	at::Tensor x = materialize(self.movedim(dim, -1), self.movedim(dim, -1).sizes(), self.scalar_type());
	int64_t rows = x.numel() / c;
	at::Tensor work = x.view({ -1, 1 }).clone();                        // [rows * c, 1]
	at::Tensor base = at::empty({ rows }, self.options().dtype(at::kLong));
	at::_ops::arange_start_out::call(0, rows * c, c, base);
	base = base.view({ rows, 1 });
	at::Tensor gone = at::empty({ rows, 1 }, self.options());
	TORCH_CHECK(native_fill(gone, largest ? -std::numeric_limits<double>::infinity()
					      : std::numeric_limits<double>::infinity()),
		    "neuron: topk fill");
	std::vector<at::Tensor> vals, idxs;
	for (int64_t t = 0; t < k; t++) {
		at::Tensor w2 = work.view({ rows, c });
		at::Tensor i = largest ? w2.argmax(-1, true) : w2.argmin(-1, true);  // [rows, 1]
		at::Tensor flat = base.add(i).view({ -1 });
		vals.push_back(rows_select(work, flat).view({ rows, 1 }));
		idxs.push_back(i);
		rows_write(work, flat, gone);
	}
	std::vector<int64_t> osz = x.sizes().vec();
	osz.back() = k;
	at::Tensor v = k ? at::cat(vals, -1).view(osz) : at::empty(osz, self.options());
	at::Tensor ix = k ? at::cat(idxs, -1).view(osz) : at::empty(osz, self.options().dtype(at::kLong));
	return std::make_tuple(v.movedim(-1, dim).contiguous(), ix.movedim(-1, dim).contiguous());
}

// sort along dim with the bitonic kernel (sort.c): float types, 2 <= size
// <= 2^19 along dim; stable, NaN last (first when descending)
std::optional<std::tuple<at::Tensor, at::Tensor>> bitonic_sort(const at::Tensor &self, int64_t dim, bool descending)
{
	int dt = isa_dtype_of(self.scalar_type());   // fp32, bf16, fp16
	if (!self.is_privateuseone() || self.dim() == 0 || dt == ISA_DT_INVALID)
		return std::nullopt;
	dim = at::maybe_wrap_dim(dim, self.dim());
	int64_t c = self.size(dim);
	if (c < 2 || c > (1 << 19) || self.numel() == 0)
		return std::nullopt;
	at::Tensor moved = self.movedim(dim, -1);
	at::Tensor x = materialize(moved, moved.sizes(), self.scalar_type());
	nk_sort o{};
	o.dtype = dt;
	o.rows = (uint64_t)(x.numel() / c);
	o.cols = (uint64_t)c;
	o.descending = descending;
	int dev = self.device().index();
	Program m = cached_program("sort", o, dev, nk_sort_program);
	at::Tensor vals = at::empty(x.sizes(), x.options());
	at::Tensor idx32 = at::empty(x.sizes(), x.options().dtype(at::kInt));
	at::Tensor sk = at::empty({ (int64_t)nk_sort_scratch(&o) }, x.options().dtype(at::kFloat));
	at::Tensor si = at::empty(sk.sizes(), sk.options());
	run_program(m, dev, "aten::sort", { { "x", &x } },
		    { { "values", &vals }, { "indices", &idx32 }, { "scratch_k", &sk }, { "scratch_i", &si } });
	at::Tensor idx = idx32.to(at::kLong);
	return std::make_tuple(vals.movedim(-1, dim).contiguous(), idx.movedim(-1, dim).contiguous());
}

std::tuple<at::Tensor, at::Tensor> topk(const at::Tensor &self, int64_t k, int64_t dim, bool largest, bool sorted)
{
	auto r = gpsimd_topk(self, k, dim, largest, sorted, false);
	if (!r)
		r = topk_impl(self, k, dim, largest);
	if (r)
		return *r;
	// larger k, or NaN in the input: the k first of a full sort
	if (self.dim() > 0 && k >= 0 && k <= self.size(at::maybe_wrap_dim(dim, self.dim()))) {
		int64_t d = at::maybe_wrap_dim(dim, self.dim());
		if ((r = bitonic_sort(self, d, largest)))
			return std::make_tuple(std::get<0>(*r).narrow(d, 0, k).contiguous(),
					       std::get<1>(*r).narrow(d, 0, k).contiguous());
	}
	return declined;
}

// Integers and bool: an LSD radix sort over 16-bit digits (int64: four,
// int32: two, narrower: one), each pass the stable bitonic sort of the
// digits -- exact as fp32 keys -- in the current order, the permutation
// carried along.  The top digit is signed (floored division), so negative
// values come first; every pass is stable, so ties keep index order.
std::optional<std::tuple<at::Tensor, at::Tensor>> int_sort(const at::Tensor &self, int64_t dim, bool descending)
{
	at::ScalarType dt = self.scalar_type();
	if (!self.is_privateuseone() || !at::isIntegralType(dt, true) || self.dim() == 0 || self.numel() == 0)
		return std::nullopt;
	dim = at::maybe_wrap_dim(dim, self.dim());
	int64_t c = self.size(dim);
	if (c < 2 || c > (1 << 19))
		return std::nullopt;
	at::Tensor moved = self.movedim(dim, -1);
	at::Tensor x = materialize(moved, moved.sizes(), dt);
	int64_t rows = x.numel() / c;
	at::Tensor x2 = x.view({ rows, c });
	const int64_t B = 1 << 16;
	std::vector<at::Tensor> digits;   // least significant first
	if (dt == at::kLong) {
		at::Tensor words = x2.view(at::kInt).view({ rows, c, 2 });
		at::Tensor lo = words.select(2, 0), hi = words.select(2, 1);
		digits = { lo.remainder(B), lo.floor_divide(B).remainder(B), hi.remainder(B), hi.floor_divide(B) };
	} else if (dt == at::kInt) {
		digits = { x2.remainder(B), x2.floor_divide(B) };
	} else {
		digits = { x2.to(at::kInt) };
	}
	at::Tensor perm = at::empty({ c }, x.options().dtype(at::kLong));
	at::_ops::arange_start_out::call(0, c, 1, perm);
	perm = perm.expand({ rows, c }).contiguous();
	for (const at::Tensor &dg : digits) {
		at::Tensor keys = dg.gather(1, perm).to(at::kFloat);
		auto r = bitonic_sort(keys, 1, descending);
		if (!r)
			return std::nullopt;
		perm = perm.gather(1, std::get<1>(*r));
	}
	at::Tensor vals = x2.gather(1, perm).view(x.sizes());
	return std::make_tuple(vals.movedim(-1, dim).contiguous(), perm.view(x.sizes()).movedim(-1, dim).contiguous());
}

// sort: unstable (the default), CPU's std::sort order from GpSimd's topk
// when a row fits a partition; stable (or longer rows), the bitonic kernel
// for float types, the radix passes over it for integers; otherwise (up to
// 64 elements) topk of all of them (ties keep index order: also the stable
// sort)
std::tuple<at::Tensor, at::Tensor> sort_stable(const at::Tensor &self, std::optional<bool> stable, int64_t dim,
					       bool descending)
{
	if (self.is_privateuseone() && units_of(self.scalar_type(), false).dtype != ISA_DT_INVALID &&
	    (self.dim() == 0 || self.size(at::maybe_wrap_dim(dim, self.dim())) <= 1)) {
		/* a row of one (or none) is sorted: itself, index 0 */
		if (self.dim() == 0)
			at::maybe_wrap_dim(dim, 1);   /* CPU's dim check */
		return { self.clone(), at::zeros(self.sizes(), self.options().dtype(at::kLong)) };
	}
	if (self.dim() > 0) {
		int64_t d = at::maybe_wrap_dim(dim, self.dim());
		std::optional<std::tuple<at::Tensor, at::Tensor>> r;
		if (!stable.value_or(false) && self.size(d) > 0)
			r = gpsimd_topk(self, self.size(d), d, descending, true, true);
		if (!r)
			r = at::isIntegralType(self.scalar_type(), true) ? int_sort(self, d, descending)
									 : bitonic_sort(self, d, descending);
		if (!r)
			r = topk_impl(self, self.size(d), d, descending);
		if (r)
			return *r;
	}
	return declined;
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_SORT)

}  // namespace neuron
