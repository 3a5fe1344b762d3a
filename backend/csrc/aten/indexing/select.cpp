// aten/indexing/select.cpp -- selection by flat position or by value, composed from
// the native kernels: masked_select, masked_scatter and nonzero_static
// (nonzero's positions), take and put (a flat view's index_select / index_put,
// negative positions wrapped, CPU's IndexError for one outside), bucketize
// and searchsorted (each value compared with every boundary on VectorE and
// the hits counted: CPU's binary-search predicates, so NaN lands last).
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/composite.h"
#include "ops.def"

#include <ATen/ops/masked_scatter_ops.h>
#include <ATen/ops/put_ops.h>
#include <ATen/ops/bucketize_ops.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/masked_select_ops.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/nonzero_static_ops.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/searchsorted_ops.h>
#include <ATen/ops/take_ops.h>
#include <ATen/ops/where.h>

namespace neuron {

namespace {

// how many comparisons a search may hold at once (bool elements)
constexpr int64_t kSearchCap = (int64_t)1 << 26;

// index (int64, neuron) wrapped into [0, n), after CPU's bounds check
at::Tensor flat_positions(const at::Tensor &index, int64_t n)
{
	at::Tensor i = index.reshape({ -1 });
	if (i.numel()) {
		at::Tensor lim = peek_cpu(at::stack({ i.min(), i.max() }));
		int64_t lo = lim[0].item<int64_t>(), hi = lim[1].item<int64_t>();
		int64_t bad = lo < -n ? lo : hi;
		TORCH_CHECK_INDEX(lo >= -n && hi < n, "out of range: tried to access index ", bad, " on a tensor of ", n,
				  " elements.");
	}
	return at::where(i.lt(0), i.add(n), i);
}

bool positions_ok(const at::Tensor &self, const at::Tensor &index)
{
	return self.is_privateuseone() && index.is_privateuseone() && index.scalar_type() == at::kLong &&
	       (self.numel() > 0 || index.numel() == 0) && units_of(self.scalar_type(), false).dtype != ISA_DT_INVALID;
}

at::Tensor take_impl(const at::Tensor &self, const at::Tensor &index)
{
	if (!positions_ok(self, index))
		return {};
	if (index.numel() == 0)
		return at::empty(index.sizes(), self.options());
	at::Tensor i = flat_positions(index, self.numel());
	return self.reshape({ -1 }).index_select(0, i).view(index.sizes());
}

// the out= of a gathering op (take, masked_select): r written into out,
// which may share no memory with its inputs at all (CPU's check: these
// kernels read the inputs while they write)
at::Tensor &exclusive_out(at::Tensor &out, const at::Tensor &a, const at::Tensor &b, const at::Tensor &r)
{
	if (!r.defined() || !out.is_privateuseone() || out.scalar_type() != a.scalar_type())
		return declined;
	at::assert_no_internal_overlap(out);
	at::assert_no_overlap(out, a);
	at::assert_no_overlap(out, b);
	return write_result(out, r);
}

at::Tensor &take_out(const at::Tensor &self, const at::Tensor &index, at::Tensor &out)
{
	return exclusive_out(out, self, index, take_impl(self, index));
}

at::Tensor &put_(at::Tensor &self, const at::Tensor &index, const at::Tensor &source, bool accumulate)
{
	if (!positions_ok(self, index) || !source.is_privateuseone() || source.scalar_type() != self.scalar_type() ||
	    source.numel() != index.numel() || !self.is_contiguous())
		return declined;
	if (index.numel() == 0)
		return self;
	at::Tensor i = flat_positions(index, self.numel());
	at::Tensor flat = self.view({ -1 });
	flat.index_put_({ i }, source.reshape({ -1 }), accumulate);
	return self;
}

// per value, the count of sequence entries the binary search passes: CPU's
// lower bound passes !(s >= v), its upper bound !(s > v) (a NaN value
// passes every entry); seq [..., n] against values [..., m]
at::Tensor search(const at::Tensor &seq, const at::Tensor &values, bool right, bool out_int32)
{
	if (seq.size(-1) == 0 || values.numel() == 0)   /* nothing to pass: position 0 */
		return at::zeros(values.sizes(), values.options().dtype(out_int32 ? at::kInt : at::kLong));
	at::Tensor s = seq.dim() == 1 ? seq : seq.unsqueeze(-2);
	at::Tensor v = values.unsqueeze(-1);
	at::Tensor hit = right ? s.gt(v) : s.ge(v);
	at::Tensor r = hit.logical_not().sum(-1);
	return out_int32 ? r.to(at::kInt) : r;
}

bool search_ok(const at::Tensor &seq, const at::Tensor &values)
{
	if (!is_float_neuron(seq) || !is_float_neuron(values) || seq.scalar_type() != values.scalar_type() ||
	    !at::isFloatingType(seq.scalar_type()) || seq.dim() == 0)
		return false;
	if (seq.dim() > 1 && (values.dim() != seq.dim() || !values.sizes().slice(0, seq.dim() - 1).equals(
								seq.sizes().slice(0, seq.dim() - 1))))
		return false;
	return values.numel() * seq.size(-1) <= kSearchCap;
}

at::Tensor bucketize(const at::Tensor &values, const at::Tensor &boundaries, bool out_int32, bool right)
{
	if (boundaries.dim() != 1 || !search_ok(boundaries, values))
		return {};
	return search(boundaries, values, right, out_int32);
}

at::Tensor searchsorted(const at::Tensor &seq, const at::Tensor &values, bool out_int32, bool right,
			std::optional<c10::string_view> side, const std::optional<at::Tensor> &sorter)
{
	if (side) {
		if (*side != "left" && *side != "right")
			return {};
		if (right && *side == "left")   // CPU's error: the fallback raises it
			return {};
		right = *side == "right";
	}
	if (!search_ok(seq, values))
		return {};
	at::Tensor s = seq;
	if (sorter && sorter->defined()) {
		if (!sorter->is_privateuseone() || sorter->scalar_type() != at::kLong || !sorter->sizes().equals(seq.sizes()))
			return {};
		s = seq.gather(-1, *sorter);
	}
	return search(s, values, right, out_int32);
}

// masked_select: self and mask broadcast together, the elements where the
// mask holds, in order (nonzero's positions of the flat mask)
at::Tensor masked_select_impl(const at::Tensor &self, const at::Tensor &mask)
{
	if (!self.is_privateuseone() || !mask.is_privateuseone() || mask.scalar_type() != at::kBool ||
	    units_of(self.scalar_type(), false).dtype == ISA_DT_INVALID)
		return {};
	std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
	int64_t n = 1;
	for (int64_t s : shape)
		n *= s;
	if (n == 0)
		return at::empty({ 0 }, self.options());
	at::Tensor pos = at::nonzero(mask.expand(shape).reshape({ n })).view({ -1 });
	return self.expand(shape).reshape({ n }).index_select(0, pos);
}

at::Tensor &masked_select_out(const at::Tensor &self, const at::Tensor &mask, at::Tensor &out)
{
	return exclusive_out(out, self, mask, masked_select_impl(self, mask));
}

// masked_scatter_: self's elements where the (broadcast) mask holds take
// source's first elements in order: nonzero's positions, one index_put.
// A source too short for the mask declines (the fallback raises CPU's error)
at::Tensor &masked_scatter_(at::Tensor &self, const at::Tensor &mask, const at::Tensor &source)
{
	if (!self.is_privateuseone() || !mask.is_privateuseone() || !source.is_privateuseone() ||
	    mask.scalar_type() != at::kBool || source.scalar_type() != self.scalar_type() || !self.is_contiguous() ||
	    units_of(self.scalar_type(), false).dtype == ISA_DT_INVALID)
		return declined;
	std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
	if (!self.sizes().equals(shape))
		return declined;
	if (self.numel() == 0)
		return self;
	at::Tensor pos = at::nonzero(mask.expand(shape).reshape({ self.numel() })).view({ -1 });
	int64_t count = pos.numel();
	if (count > source.numel())
		return declined;
	if (count)
		self.view({ -1 }).index_put_({ pos }, source.reshape({ -1 }).narrow(0, 0, count));
	return self;
}

// nonzero_static: nonzero's first `size` rows, fill_value after them
at::Tensor nonzero_static(const at::Tensor &self, int64_t size, int64_t fill)
{
	if (!self.is_privateuseone() || size < 0)
		return {};
	at::Tensor nz = at::nonzero(self);
	at::Tensor out = at::full({ size, self.dim() }, fill, self.options().dtype(at::kLong));
	int64_t k = std::min<int64_t>(size, nz.size(0));
	if (k > 0)
		out.narrow(0, 0, k).copy_(nz.narrow(0, 0, k));
	return out;
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_SELECT)

}  // namespace neuron
