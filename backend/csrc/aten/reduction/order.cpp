// aten/reduction/order.cpp -- order statistics composed from the native stable sort
// (programs/sort.c, NaN last as CPU orders them), gather and the scans:
// median / nanmedian (whole tensor or along a dim), kthvalue, mode, unique
// and unique_consecutive.
//
// A statistic is read from the sorted row at a position computed per row
// (gather); the index is the sorted element's original position.  Where
// CPU's quickselect leaves the choice among equal elements open, the stable
// order's choice is taken (the first among ties below the middle, as CPU's
// for the inputs tried); where CPU's answer is an artifact of its
// algorithm (nanmedian of an all-NaN row, mode of a row with NaN), the call
// runs on the CPU, counted.
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/reduction/scan.h"
#include "aten/pointwise/math.h"
#include "ops.def"

#include <ATen/WrapDimUtils.h>
#include <ATen/ops/where.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/masked_select.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/_unique2_ops.h>
#include <ATen/ops/kthvalue_ops.h>
#include <ATen/ops/median_ops.h>
#include <ATen/ops/mode_ops.h>
#include <ATen/ops/nanmedian_ops.h>
#include <ATen/ops/unique_consecutive_ops.h>

#include <functional>
#include <tuple>

namespace neuron {

namespace {

bool sortable(const at::Tensor &t)
{
	return t.is_privateuseone() && units_of(t.scalar_type(), false).dtype != ISA_DT_INVALID &&
	       t.scalar_type() != at::kBool && !t.is_complex();
}

// positions 0..n-1 as fp32 (exact below 2^24), shaped to broadcast along the last dim
at::Tensor positions(int64_t n, const at::Tensor &like)
{
	return at::arange(n, at::TensorOptions().dtype(at::kFloat)).to(like.device());
}

// x's shape with its last dim 1: one statistic per row
std::vector<int64_t> row_shape(const at::Tensor &x)
{
	std::vector<int64_t> s(x.sizes().begin(), x.sizes().end());
	s.back() = 1;
	return s;
}

// which element of each row (the last dim of x, n >= 1) a statistic takes:
// `pick` maps (n, NaN count per row [..., 1] fp32) to the sorted position
// (fp32 [..., 1]); values and original indices, the last dim kept as 1
using Pick = std::function<at::Tensor(int64_t n, const at::Tensor &nans)>;
std::tuple<at::Tensor, at::Tensor> pick_sorted(const at::Tensor &x, const Pick &pick)
{
	auto [sv, si] = at::sort(x, /*stable=*/true, -1, false);
	at::Tensor nans = at::isFloatingType(x.scalar_type()) ? x.ne(x).to(at::kFloat).sum(-1, true)
							       : at::zeros({}, x.options().dtype(at::kFloat));
	at::Tensor k = integral_float_to_int64(pick(x.size(-1), nans).expand(row_shape(x)).contiguous());
	return { sv.gather(-1, k), si.gather(-1, k) };
}

// a per-row statistic (values, indices: the row dim last, kept as 1) put
// back at dim d of a self of nd dims (0: a scalar), dropped unless keepdim
std::tuple<at::Tensor, at::Tensor> placed(at::Tensor v, at::Tensor i, int64_t nd, int64_t d, bool keepdim)
{
	if (nd == 0)
		return { v.view(at::IntArrayRef{}), i.view(at::IntArrayRef{}) };
	v = v.movedim(-1, d);
	i = i.movedim(-1, d);
	if (!keepdim) {
		v = v.squeeze(d);
		i = i.squeeze(d);
	}
	return { v, i };
}

// a statistic of self along dim: moved last, picked, put back
std::tuple<at::Tensor, at::Tensor> along(const at::Tensor &self, int64_t dim, bool keepdim, const Pick &pick)
{
	int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), (int64_t)1));
	at::Tensor rows = self.dim() ? self.movedim(d, -1).contiguous() : self.view({ 1 });
	auto [v, i] = pick_sorted(rows, pick);
	return placed(v, i, self.dim(), d, keepdim);
}

// CPU's median: NaN (the first NaN's index) when a row has one, else the
// lower middle, sorted position (n - 1) / 2
at::Tensor median_pick(int64_t n, const at::Tensor &nans)
{
	return at::where(nans.gt(0), nans.neg().add((double)n), scalar_like((double)((n - 1) / 2), nans));
}

// nanmedian: the lower middle of the non-NaN elements
at::Tensor nanmedian_pick(int64_t n, const at::Tensor &nans)
{
	return nans.neg().add((double)(n - 1)).mul(0.5).floor();
}

bool median_covered(const at::Tensor &self, int64_t n, bool ignore_nan, const at::Tensor *nan_rows)
{
	if (!sortable(self) || n == 0 || self.numel() == 0 || n >= (int64_t)1 << 24)
		return false;
	/* nanmedian of an all-NaN row: CPU's nth_element picks some NaN's index */
	return !ignore_nan || !at::isFloatingType(self.scalar_type()) || !peek_cpu(nan_rows->all(-1).any()).item<bool>();
}

std::tuple<at::Tensor, at::Tensor> median_dim_impl(const at::Tensor &self, int64_t dim, bool keepdim, bool ignore_nan)
{
	int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), (int64_t)1));
	int64_t n = self.dim() ? self.size(d) : 1;
	at::Tensor isnan = self.dim() ? self.movedim(d, -1).ne(self.movedim(d, -1)) : self.ne(self).view({ 1 });
	if (!median_covered(self, n, ignore_nan, &isnan))
		return {};
	return along(self, d, keepdim, ignore_nan ? nanmedian_pick : median_pick);
}

std::tuple<at::Tensor &, at::Tensor &> median_values(const at::Tensor &self, int64_t dim, bool keepdim,
						     at::Tensor &values, at::Tensor &indices, bool ignore_nan)
{
	if (values.scalar_type() != self.scalar_type() || indices.scalar_type() != at::kLong || !values.is_privateuseone() ||
	    !indices.is_privateuseone())
		return declined;
	auto [v, i] = median_dim_impl(self, dim, keepdim, ignore_nan);
	if (!v.defined())
		return declined;
	composite_out(values, { &self }, v);
	composite_out(indices, { &self }, i);
	return { values, indices };
}

std::tuple<at::Tensor &, at::Tensor &> median_dim_values(const at::Tensor &self, int64_t dim, bool keepdim,
							 at::Tensor &values, at::Tensor &indices)
{
	return median_values(self, dim, keepdim, values, indices, false);
}

std::tuple<at::Tensor &, at::Tensor &> nanmedian_dim_values(const at::Tensor &self, int64_t dim, bool keepdim,
							    at::Tensor &values, at::Tensor &indices)
{
	return median_values(self, dim, keepdim, values, indices, true);
}

// the whole tensor's median: of the flattened values
at::Tensor median_all(const at::Tensor &self, bool ignore_nan)
{
	auto [v, i] = median_dim_impl(self.reshape({ -1 }), 0, false, ignore_nan);
	if (v.defined())
		return v;
	return declined;
}

at::Tensor median(const at::Tensor &self) { return median_all(self, false); }
at::Tensor nanmedian(const at::Tensor &self) { return median_all(self, true); }

// whether a row's k-th smallest equals a neighbour in sorted order: which
// of the equal elements' indices CPU's quickselect returns depends on its
// partitioning (it differed from the stable order for 7 in 10 rows of
// small integers), so those calls run on the CPU
bool kth_tied(const at::Tensor &self, int64_t k, int64_t dim)
{
	if (self.dim() == 0)
		return false;
	int64_t d = at::maybe_wrap_dim(dim, self.dim());
	int64_t n = self.size(d);
	if (n < 2 || self.numel() == 0)
		return false;
	at::Tensor sv = std::get<0>(at::sort(self, /*stable=*/true, d, false));
	at::Tensor at_k = sv.narrow(d, k - 1, 1);
	at::Tensor tie = at::zeros_like(at_k, at_k.options().dtype(at::kBool));
	auto same = [&](const at::Tensor &o) {   /* equal, or both NaN */
		return at_k.eq(o).bitwise_or(at_k.ne(at_k).bitwise_and(o.ne(o)));
	};
	if (k > 1)
		tie = tie.bitwise_or(same(sv.narrow(d, k - 2, 1)));
	if (k < n)
		tie = tie.bitwise_or(same(sv.narrow(d, k, 1)));
	return peek_cpu(tie.any()).item<bool>();
}

// kthvalue: sorted position k - 1 (NaN the largest, as CPU's quickselect
// orders them); a k outside [1, n] declines to CPU's error, a tie at k
// (above) runs on the CPU
std::tuple<at::Tensor &, at::Tensor &> kthvalue_values(const at::Tensor &self, int64_t k, int64_t dim, bool keepdim,
						       at::Tensor &values, at::Tensor &indices)
{
	int64_t n = self.dim() ? self.size(at::maybe_wrap_dim(dim, self.dim())) : (at::maybe_wrap_dim(dim, (int64_t)1), 1);
	if (!sortable(self) || k < 1 || k > n || n >= (int64_t)1 << 24 || values.scalar_type() != self.scalar_type() ||
	    indices.scalar_type() != at::kLong || !values.is_privateuseone() || !indices.is_privateuseone())
		return declined;
	if (kth_tied(self, k, dim))
		return declined;
	auto [v, i] = along(self, dim, keepdim, [k](int64_t, const at::Tensor &nans) {
		return at::full({ 1 }, (double)(k - 1), nans.options());
	});
	composite_out(values, { &self }, v);
	composite_out(indices, { &self }, i);
	return { values, indices };
}

// mode of each row: CPU sorts (value, index) pairs and keeps the first
// longest run (the smallest value among equally frequent ones) with its
// last index.  On the sorted row: a run's start position is carried
// forward by a max scan; the run length ends at each run's last element;
// the first maximal length (argmax) names the run.  Rows with NaN decline,
// and a repeated mode of a row longer than 16 (below).
std::tuple<at::Tensor, at::Tensor> mode_impl(const at::Tensor &self, int64_t dim, bool keepdim)
{
	int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), (int64_t)1));
	int64_t n = self.dim() ? self.size(d) : 1;
	if (!sortable(self) || self.numel() == 0 || n >= (int64_t)1 << 24)
		return {};
	if (at::isFloatingType(self.scalar_type()) && peek_cpu(self.ne(self).any()).item<bool>())
		return {};
	at::Tensor x = self.dim() ? self.movedim(d, -1).contiguous() : self.view({ 1 });
	auto [sv, si] = at::sort(x, /*stable=*/true, -1, false);
	at::Tensor pos = positions(n, x).expand(x.sizes());
	at::Tensor starts = sv.narrow(-1, 1, n - 1).ne(sv.narrow(-1, 0, n - 1));
	at::Tensor first = at::cat({ at::full(row_shape(x), true, starts.options()), starts }, -1);
	at::Tensor start = doubling_scan(at::where(first, pos, scalar_like(0.0, pos)).contiguous(), x.dim() - 1,
					 [](const at::Tensor &a, const at::Tensor &b) { return at::maximum(a, b); });
	at::Tensor ends = at::cat({ starts, at::full(row_shape(x), true, starts.options()) }, -1);
	at::Tensor len = at::where(ends, pos.sub(start).add(1.0), scalar_like(0.0, pos));
	at::Tensor k = len.argmax(-1, true);
	/* CPU's std::sort of (value, index) pairs by value leaves equal values'
	 * indices in insertion order up to 16 elements, in introsort's order
	 * beyond: a repeated mode of a longer row runs on the CPU */
	if (n > 16 && peek_cpu(len.amax().gt(1.0)).item<bool>())
		return {};
	return placed(sv.gather(-1, k), si.gather(-1, k), self.dim(), d, keepdim);
}

std::tuple<at::Tensor, at::Tensor> mode(const at::Tensor &self, int64_t dim, bool keepdim)
{
	return mode_impl(self, dim, keepdim);   /* undefined: declined */
}

// unique of the flattened values, sorted (CPU sorts for sorted=False as
// well): a run starts where the sorted value differs from the previous
// (NaN differs from NaN: each its own, as CPU's); the inverse is the run
// number scattered back to the original positions; counts from the runs'
// starts.  `sorted_runs` false: unique_consecutive, the runs of x as it is.
std::tuple<at::Tensor, at::Tensor, at::Tensor> runs_of(const at::Tensor &self, bool sort_first, bool return_inverse,
						       bool return_counts)
{
	if (!sortable(self) || self.numel() >= (int64_t)1 << 24)
		return {};
	at::Tensor flat = self.reshape({ -1 });
	int64_t n = flat.numel();
	at::Tensor none = at::empty({ 0 }, self.options().dtype(at::kLong));
	if (n == 0)
		return { at::empty({ 0 }, self.options()), return_inverse ? at::empty(self.sizes(), none.options()) : none,
			 return_counts ? none.clone() : none };
	at::Tensor sv = flat, si;
	if (sort_first)
		std::tie(sv, si) = at::sort(flat, /*stable=*/true, 0, false);
	at::Tensor first = at::cat({ at::full({ 1 }, true, self.options().dtype(at::kBool)),
				     sv.narrow(0, 1, n - 1).ne(sv.narrow(0, 0, n - 1)) });
	at::Tensor values = at::masked_select(sv, first);
	at::Tensor inverse = none, counts = none;
	if (return_inverse) {
		at::Tensor run = first.to(at::kFloat).cumsum(0).sub(1.0);
		at::Tensor r = integral_float_to_int64(run);
		inverse = sort_first ? at::empty({ n }, r.options()).scatter_(0, si, r) : r;
		inverse = inverse.view(self.sizes());
	}
	if (return_counts) {
		at::Tensor starts = at::masked_select(positions(n, flat), first);
		at::Tensor ends = at::cat({ starts.narrow(0, 1, starts.numel() - 1), at::full({ 1 }, (double)n, starts.options()) });
		counts = integral_float_to_int64(ends.sub(starts));
	}
	return { values, inverse, counts };
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(const at::Tensor &self, bool sorted, bool return_inverse,
						       bool return_counts)
{
	return runs_of(self, true, return_inverse, return_counts);   /* undefined: declined */
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive(const at::Tensor &self, bool return_inverse,
								  bool return_counts, std::optional<int64_t> dim)
{
	/* a dim: only the one of a 1-D tensor is the flat case (others, and
	 * CPU's out-of-range error, on the CPU) */
	if (dim && (self.dim() != 1 || (*dim != 0 && *dim != -1)))
		return declined;
	return runs_of(self, false, return_inverse, return_counts);   /* undefined: declined */
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_ORDER)

}  // namespace neuron
