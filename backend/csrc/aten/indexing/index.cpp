// aten/indexing/index.cpp -- ops that move whole rows or write generated values:
// index / index_put_ / index_copy, gather, index_select (and so embedding),
// cat, and the device program behind fill_ / zero_ (native_fill).
#include "aten/indexing/index.h"
#include "runtime/program.h"
#include "runtime/batch.h"
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/pointwise/lowering.h"
#include "ops.def"

#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_index_put_impl_ops.h>
#include <ATen/ops/index_fill_ops.h>
#include <ATen/ops/full.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/arange_ops.h>
#include <ATen/ops/cat_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gather_ops.h>
#include <ATen/ops/index_copy_ops.h>
#include <ATen/ops/index_ops.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/index_select_ops.h>
#include <ATen/ops/nonzero_ops.h>
#include <ATen/ops/narrow_copy_ops.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>

namespace neuron {

bool native_fill(const at::Tensor &self, const at::Scalar &v)
{
	Units u = units_of(self.scalar_type(), false);
	bool is64 = self.scalar_type() == at::kLong;
	if (!self.is_privateuseone() || u.dtype == ISA_DT_INVALID || (u.per == 2 && !is64) || v.isComplex())
		return false;
	if (self.numel() == 0)
		return true;
	if (!self.is_contiguous()) {
		at::Tensor tmp = at::empty(self.sizes(), self.options());
		return native_fill(tmp, v) && native_copy(self, tmp);
	}
	nk_fill f{};
	f.dtype = is64 ? ISA_DT_int32 : u.dtype;
	f.int64 = is64;
	f.n = (uint64_t)self.numel();
	bool fl = isa_dtype_of(self.scalar_type()) != ISA_DT_INVALID;
	if (fl) {
		f.fvalue = (float)v.toDouble();   // memset rounds it to bf16/fp16 as CPU's fill_ does
	} else {
		f.ivalue = v.isBoolean() ? v.toBool() : v.toLong();
	}
	int dev = self.device().index();
	Program m = cached_program("fill", f, dev, nk_fill_program);
	run_program(m, dev, "aten::fill_", {}, { { "out", &self } });
	return true;
}

void check_index_on_host(const IndexCheck &c)
{
	at::Tensor idx = c.index.reshape({ -1 }).to(at::kCPU, at::kLong);
	const int64_t *v = idx.const_data_ptr<int64_t>();
	for (int64_t i = 0; i < idx.numel(); i++) {
		int64_t x = v[i];
		if (x < c.size && (x >= 0 || (c.wrap && x >= -c.size)))
			continue;
		switch (c.kind) {
		case IndexWording::InSelf:
			TORCH_CHECK_INDEX(false, "index out of range in self");
		case IndexWording::Bounds:
			TORCH_CHECK_INDEX(false, "index ", x, " is out of bounds for dimension ", c.dim, " with size ", c.size);
		case IndexWording::BoundsRuntime:
			TORCH_CHECK(false, "index ", x, " is out of bounds for dimension ", c.dim, " with size ", c.size);
		case IndexWording::CopyBounds:
			TORCH_CHECK_INDEX(false, "index_copy_(): index ", x, " is out of bounds for dimension ", c.dim,
					  " with size ", c.size);
		}
	}
}

at::Tensor outside_faults(const at::Tensor &flat, const at::Tensor &index, int64_t size)
{
	at::Tensor bad = index.lt(0).bitwise_or(index.ge(size));
	return at::where(bad, at::full({}, -1, flat.options()), flat);
}

namespace {

// The gather (index_select) or scatter (index_copy) program moving whole
// slabs of `table` along `dim` by the flat index tensor `idx`.
Program rows_program(const at::Tensor &table, int64_t dim, Units u, const at::Tensor &idx, bool scatter,
			 bool accumulate = false)
{
	nk_gather g{};
	g.dtype = u.dtype;
	g.outer = (uint64_t)c10::multiply_integers(table.sizes().slice(0, dim));
	g.rows = (uint64_t)table.size(dim);
	g.inner = (uint64_t)c10::multiply_integers(table.sizes().slice(dim + 1)) * u.per;
	g.nidx = (uint64_t)idx.numel();
	g.index_int64 = idx.scalar_type() == at::kLong;
	g.scatter = scatter;
	g.accumulate = accumulate;
	return cached_program("gather", g, table.device().index(), nk_gather_program);
}

at::Tensor neuron_index_select(const at::Tensor &self, int64_t dim, const at::Tensor &index)
{
	if (scalar_self_case(self, dim, index)) {
		at::Tensor r = neuron_index_select(self.view({ 1 }), 0, index.reshape({ 1 }));
		return r.defined() ? r.view(at::IntArrayRef{}) : r;
	}
	Units u = units_of(self.scalar_type(), false);
	bool ok = self.is_privateuseone() && index.is_privateuseone() && self.device() == index.device() &&
		  u.dtype != ISA_DT_INVALID && index.dim() <= 1 &&
		  is_index_dtype(index) && self.dim() >= 1;
	if (ok) {
		dim = at::maybe_wrap_dim(dim, self.dim());
		std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
		shape[dim] = index.numel();
		at::Tensor out = at::empty(shape, self.options());
		if (out.numel() == 0)
			return out;
		TORCH_CHECK_INDEX(self.size(dim) > 0, "index_select(): index out of range: the source has no rows");
		at::Tensor src = materialize(self, self.sizes(), self.scalar_type());
		at::Tensor idx = materialize(index.reshape({ -1 }), { index.numel() }, index.scalar_type());
		int dev = self.device().index();
		run_program(rows_program(self, dim, u, idx, false), dev, "aten::index_select",
			    { { "table", &src }, { "index", &idx } }, { { "out", &out } });
		return out;
	}
	return declined;
}

// index_select (and embedding, which is made of it): CPU PyTorch's
// "index out of range in self" for an index outside the rows
at::Tensor index_select(const at::Tensor &self, int64_t dim, const at::Tensor &index)
{
	return index_faults([&] { return neuron_index_select(self, dim, index); },
			    { { index, 0, self.dim() ? self.size(at::maybe_wrap_dim(dim, self.dim())) : 1, false,
				IndexWording::InSelf } });
}

// the checks of advanced indexing: index i on dim i, negative from the end
std::vector<IndexCheck> advanced_checks(const at::Tensor &self, const c10::List<std::optional<at::Tensor>> &indices)
{
	std::vector<IndexCheck> checks;
	for (size_t i = 0; i < indices.size() && (int64_t)i < self.dim(); i++) {
		const std::optional<at::Tensor> &t = indices.get(i);
		if (t && t->defined() && is_index_dtype(*t))
			checks.push_back({ *t, (int64_t)i, self.size((int64_t)i), true, IndexWording::Bounds });
	}
	return checks;
}

// cat: one DMA copy per input into its slice of the result, in one launch
at::Tensor cat(const at::ITensorListRef &tensors, int64_t dim)
{
	std::vector<at::Tensor> ts;
	for (const at::Tensor &t : tensors)
		ts.push_back(t);
	std::vector<at::Tensor> parts;   // legacy 1-D empty tensors take no part
	for (size_t i = 0; i < ts.size(); i++) {
		TORCH_CHECK(ts[i].dim() > 0, "zero-dimensional tensor (at position ", i, ") cannot be concatenated");
		if (!(ts[i].dim() == 1 && ts[i].numel() == 0))
			parts.push_back(ts[i]);
	}
	bool ok = !parts.empty();
	at::ScalarType dt = ok ? parts[0].scalar_type() : at::kFloat;
	for (const at::Tensor &t : parts) {
		dt = c10::promoteTypes(dt, t.scalar_type());
		ok = ok && t.is_privateuseone() && t.device() == parts[0].device() && t.dim() == parts[0].dim();
	}
	if (ok) {
		dim = at::maybe_wrap_dim(dim, parts[0].dim());
		std::vector<int64_t> shape(parts[0].sizes().begin(), parts[0].sizes().end());
		int64_t total = 0;
		for (const at::Tensor &t : parts) {
			for (int64_t d = 0; d < t.dim(); d++)
				ok = ok && (d == dim || t.size(d) == shape[d]);
			ok = ok && (t.scalar_type() == dt || (isa_dtype_of(t.scalar_type()) != ISA_DT_INVALID &&
							     isa_dtype_of(dt) != ISA_DT_INVALID)) &&
			     units_of(t.scalar_type(), t.scalar_type() != dt).dtype != ISA_DT_INVALID;
			total += t.size(dim);
		}
		if (ok) {
			shape[dim] = total;
			at::Tensor out = at::empty(shape, parts[0].options().dtype(dt));
			int64_t off = 0;
			LaunchBatch batch("aten::cat");   // the copies are one launch
			for (const at::Tensor &t : parts) {
				if (t.numel())
					TORCH_CHECK(native_copy(out.narrow(dim, off, t.size(dim)), t), "neuron: cat copy");
				off += t.size(dim);
			}
			batch.flush();
			return out;
		}
	}
	return declined;
}

// gather(x, dim, index): out[..., j] = x[..., index[..., j]] along dim, as
// index_select over the flattened x with flat row indices
// (row * x.size(dim) + index, int64 arithmetic on the device)
at::Tensor gather(const at::Tensor &self, int64_t dim, const at::Tensor &index_in, bool sparse_grad)
{
	/* an int32 index as int64 (a cast program), which the flat-row arithmetic takes */
	at::Tensor index = index_in.is_privateuseone() && index_in.scalar_type() == at::kInt ? index_in.to(at::kLong) : index_in;
	bool ok = self.is_privateuseone() && index.is_privateuseone() && index.scalar_type() == at::kLong &&
		  self.dim() == index.dim() && self.dim() >= 1 && units_of(self.scalar_type(), false).dtype != ISA_DT_INVALID;
	if (ok) {
		dim = at::maybe_wrap_dim(dim, self.dim());
		for (int64_t d = 0; d < self.dim() && ok; d++)
			ok = d == dim || index.size(d) <= self.size(d);
	}
	if (ok && index.numel() == 0)
		return at::empty(index.sizes(), self.options());
	if (ok && self.size(dim) > 0) {
		at::Tensor x = self;
		for (int64_t d = 0; d < self.dim(); d++)
			if (d != dim)
				x = x.narrow(d, 0, index.size(d));
		x = x.movedim(dim, -1);
		at::Tensor idx = index.movedim(dim, -1);
		int64_t cols = x.size(-1), j = idx.size(-1), rows = idx.numel() / j;
		at::Tensor base = at::empty({ rows, 1 }, index.options());
		at::_ops::arange_start_out::call(0, rows * cols, cols, base);
		at::Tensor along = materialize(idx, idx.sizes(), at::kLong).view({ rows, j });
		at::Tensor flat = outside_faults(along.add(base.view({ rows, 1 })), along, cols);
		at::Tensor xs = materialize(x, x.sizes(), self.scalar_type()).view({ -1 });
		at::Tensor out = index_faults([&] { return neuron_index_select(xs, 0, flat.view({ -1 })); },
					      { { index, dim, self.size(dim), false, IndexWording::BoundsRuntime } });
		std::vector<int64_t> osz = idx.sizes().vec();
		return out.view(osz).movedim(-1, dim).contiguous();
	}
	return declined;
}

// index_copy: out = self with out.select(dim, index[j]) = source.select(dim, j),
// one scatter DMA per 128 indices (in place when out is self); with
// `accumulate` (index_add) the slabs are added (DMA scatter_add), so
// repeated indices add up.  False when not covered (nothing written).
bool rows_into(const at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor &source,
	       at::Tensor &out, bool accumulate, const char *opname)
{
	Units u = units_of(self.scalar_type(), false);
	bool ok = (!accumulate || (u.per == 1 && self.scalar_type() != at::kBool)) && self.is_privateuseone() && index.is_privateuseone() && source.is_privateuseone() &&
		  u.dtype != ISA_DT_INVALID && source.scalar_type() == self.scalar_type() && index.dim() <= 1 &&
		  is_index_dtype(index) && self.dim() >= 1 &&
		  source.dim() == self.dim() && out.sizes().equals(self.sizes()) && out.is_contiguous() &&
		  out.scalar_type() == self.scalar_type();
	if (ok) {
		dim = at::maybe_wrap_dim(dim, self.dim());
		for (int64_t d = 0; d < self.dim() && ok; d++)
			ok = d == dim ? source.size(d) == index.numel() : source.size(d) == self.size(d);
	}
	if (ok) {
		if (!out.is_same(self))
			TORCH_CHECK(native_copy(out, self), "neuron: index_copy copy");
		if (index.numel() == 0)
			return true;
		at::Tensor src = materialize(source, source.sizes(), source.scalar_type());
		at::Tensor idx = materialize(index.reshape({ -1 }), { index.numel() }, index.scalar_type());
		int dev = self.device().index();
		run_program(rows_program(self, dim, u, idx, true, accumulate), dev, opname,
			    { { "src", &src }, { "index", &idx } }, { { "table", &out } });
		return true;
	}
	return false;
}

at::Tensor &index_copy_out(const at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor &source,
			   at::Tensor &out)
{
	int64_t d = self.dim() ? at::maybe_wrap_dim(dim, self.dim()) : 0;
	if (scalar_self_case(self, dim, index) && out.dim() == 0 && source.numel() == 1) {
		at::Tensor o = out.view({ 1 });
		if (index_faults([&] { return rows_into(self.view({ 1 }), 0, index.reshape({ 1 }), source.reshape({ 1 }), o, false,
							"aten::index_copy"); },
				 { { index, 0, 1, false, IndexWording::CopyBounds } }))
			return out;
		return declined;
	}
	if (index_faults([&] { return rows_into(self, dim, index, source, out, false, "aten::index_copy"); },
			 { { index, d, self.dim() ? self.size(d) : 1, false, IndexWording::CopyBounds } }))
		return out;
	return declined;
}

// index_fill_: self.select(dim, index[j]) = value for each j (negative
// indices from the end, as CPU's), as index_copy_ of a source filled with
// value; a 0-dim value tensor stays on the device (a broadcast copy)
at::Tensor &index_fill_impl(at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Scalar *value,
			    const at::Tensor *value_t)
{
	if (!self.is_privateuseone() || !index.is_privateuseone() || index.dim() > 1 || !self.is_contiguous() ||
	    index.scalar_type() != at::kLong ||   /* int32: CPU's IndexError */
	    units_of(self.scalar_type(), false).dtype == ISA_DT_INVALID || (value_t && value_t->dim() != 0))
		return declined;
	if (scalar_self_case(self, dim, index)) {
		at::Tensor row = self.view({ 1 });
		at::Tensor &r = index_fill_impl(row, 0, index.reshape({ 1 }), value, value_t);
		return &r == &declined_tensor() ? r : self;
	}
	if (self.dim() == 0)
		return declined;
	int64_t d = at::maybe_wrap_dim(dim, self.dim());
	std::vector<int64_t> shape = self.sizes().vec();
	shape[d] = index.numel();
	at::Tensor src = at::empty(shape, self.options());
	bool filled = value ? native_fill(src, *value)
		      : value_t->is_cpu() ? native_fill(src, value_t->item())
					  : value_t->device() == self.device() && native_copy(src, *value_t);
	if (!filled)
		return declined;
	at::Tensor idx = index.to(at::kLong);
	idx = at::where(idx.lt(0), idx.add(self.size(d)), idx);
	if (index_faults([&] { return rows_into(self, d, idx.reshape({ -1 }), src, self, false, "aten::index_fill_"); },
			 { { index, d, self.size(d), true, IndexWording::Bounds } }))
		return self;
	return declined;
}

at::Tensor &index_fill_scalar_(at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Scalar &value)
{
	return index_fill_impl(self, dim, index, &value, nullptr);
}

at::Tensor &index_fill_tensor_(at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor &value)
{
	return index_fill_impl(self, dim, index, nullptr, &value);
}

// narrow_copy: CPU's checks in CPU's order (a non-negative dim past the
// last is its RuntimeError, not the IndexError of wrapping), then the
// slice copied by a DMA program
at::Tensor narrow_copy(const at::Tensor &self, int64_t dim, int64_t start, int64_t length)
{
	if (!self.is_privateuseone() || units_of(self.scalar_type(), false).dtype == ISA_DT_INVALID)
		return declined;
	TORCH_CHECK(self.dim() > 0, "narrow() cannot be applied to a 0-dim tensor.");
	if (dim < 0)
		dim = at::maybe_wrap_dim(dim, self.dim());
	else
		TORCH_CHECK(dim < self.dim(), "Expected dim < static_cast<int64_t>(self_sizes.size()) to be true, but got false.");
	int64_t size = self.size(dim);
	TORCH_CHECK_INDEX(-size <= start && start <= size, "start out of range (expected to be in range of [", -size, ", ",
			  size, "], but got ", start, ")");
	if (start < 0)
		start += size;
	TORCH_CHECK(length >= 0 && start <= size - length, "start (", start, ") + length (", length,
		    ") exceeds dimension size (", size, ").");
	at::Tensor out = at::empty(self.narrow(dim, start, length).sizes(), self.options());
	if (out.numel())
		TORCH_CHECK(native_copy(out, self.narrow(dim, start, length)), "neuron: narrow_copy");
	return out;
}

// self[i0, i1, ..., ik-1] with integer index tensors on the leading dims
// (broadcast together): flat row = sum_d i_d * (rows below d), computed
// with exact int64 arithmetic, then an index_select of whole rows.  Bool
// masks (data-dependent shapes) and indices after a slice take the fallback.
// Integer index tensors on the leading dims of self (broadcast together):
// the flat row of each indexed element, row = sum_d i_d * (rows below d),
// exact int64 arithmetic on the device (negative indices count from the
// end).  False for bool masks or an index after a slice (data-dependent
// shapes, or not the leading dims).
bool flat_rows(const at::Tensor &self, const c10::List<std::optional<at::Tensor>> &indices, at::Tensor &flat,
	       std::vector<int64_t> &bshape, size_t &k, int64_t &rows)
{
	std::vector<at::Tensor> idx;
	bool ok = self.is_privateuseone() && units_of(self.scalar_type(), false).dtype != ISA_DT_INVALID;
	k = 0;
	for (size_t i = 0; i < indices.size() && ok; i++) {
		const std::optional<at::Tensor> &t = indices.get(i);
		if (!t || !t->defined())
			continue;
		ok = k == i && t->is_privateuseone() && is_index_dtype(*t);
		idx.push_back(*t);
		k++;
	}
	if (!ok || k < 1 || (int64_t)k > self.dim())
		return false;
	bshape = idx[0].sizes().vec();
	for (const at::Tensor &t : idx)
		bshape = at::infer_size(bshape, t.sizes());
	rows = 1;
	for (size_t d = 0; d < k; d++)
		rows *= self.size((int64_t)d);
	if (rows >= INT32_MAX)
		return false;
	int64_t below = 1;
	at::Tensor bad;   // an index outside its own dim, wherever the sum would land (x[0, 5] of a 5 x 4 is not x[1, 1])
	for (int64_t d = (int64_t)k - 1; d >= 0; d--) {
		at::Tensor t = materialize(idx[d].to(at::kLong), bshape, at::kLong);
		t = at::where(t.lt(0), t.add(self.size(d)), t);
		at::Tensor term = below == 1 ? t : i64_mul_scalar(t, (int32_t)below);
		flat = flat.defined() ? flat.add(term) : term;
		at::Tensor b = t.lt(0).bitwise_or(t.ge(self.size(d)));
		bad = bad.defined() ? bad.bitwise_or(b) : b;
		below *= self.size(d);
	}
	flat = at::where(bad, at::full({}, -1, flat.options()), flat);   // a fault, never another row
	return true;
}

// Indices not on the leading dims (x[:, idx], x[..., [-2], :]) or on the
// host (a Python list): the permutation of self that brings the indexed
// dims first, their indices on self's device, and where PyTorch puts the
// result's index dims -- at the first indexed dim when the indexed dims are
// adjacent, else first.  False for mask (bool / byte) indices.
bool to_front(const at::Tensor &self, const c10::List<std::optional<at::Tensor>> &indices, std::vector<int64_t> &perm,
	      c10::List<std::optional<at::Tensor>> &front, int64_t &pos)
{
	std::vector<int64_t> hit, rest;
	if ((int64_t)indices.size() > self.dim() || !self.is_privateuseone())
		return false;
	for (int64_t i = 0; i < self.dim(); i++) {
		std::optional<at::Tensor> t = i < (int64_t)indices.size() ? indices.get(i) : std::nullopt;
		if (!t || !t->defined()) {
			rest.push_back(i);
			continue;
		}
		if (!is_index_dtype(*t))
			return false;
		hit.push_back(i);
		front.push_back(t->is_privateuseone() ? *t : t->to(self.device()));
	}
	if (hit.empty())
		return false;
	pos = hit.back() - hit.front() + 1 == (int64_t)hit.size() ? hit.front() : 0;
	perm = hit;
	perm.insert(perm.end(), rest.begin(), rest.end());
	return true;
}

at::Tensor index_front(const at::Tensor &self, const c10::List<std::optional<at::Tensor>> &indices)
{
	at::Tensor flat;
	std::vector<int64_t> bshape;
	size_t k;
	int64_t rows;
	if (flat_rows(self, indices, flat, bshape, k, rows)) {
		std::vector<int64_t> rest(self.sizes().begin() + (int64_t)k, self.sizes().end());
		std::vector<int64_t> tshape{ rows };
		tshape.insert(tshape.end(), rest.begin(), rest.end());
		at::Tensor table = materialize(self, self.sizes(), self.scalar_type()).view(tshape);
		at::Tensor out = neuron_index_select(table, 0, flat.reshape({ -1 }));
		std::vector<int64_t> oshape = bshape;
		oshape.insert(oshape.end(), rest.begin(), rest.end());
		return out.view(oshape);
	}
	return {};
}

at::Tensor index_tensor_impl(const at::Tensor &self, const c10::List<std::optional<at::Tensor>> &indices)
{
	at::Tensor r = index_front(self, indices);
	if (r.defined())
		return r;
	std::vector<int64_t> perm;
	c10::List<std::optional<at::Tensor>> front;
	int64_t pos;
	if (to_front(self, indices, perm, front, pos) && (r = index_front(self.permute(perm), front)).defined()) {
		int64_t nb = r.dim() - (self.dim() - (int64_t)front.size());   // the index result's dims
		if (pos > 0) {
			std::vector<int64_t> from, to;
			for (int64_t i = 0; i < nb; i++) {
				from.push_back(i);
				to.push_back(pos + i);
			}
			r = r.movedim(from, to).contiguous();
		}
		return r;
	}
	return declined;
}

std::optional<c10::List<std::optional<at::Tensor>>> masks_as_indices(const at::Tensor &self,
								     const c10::List<std::optional<at::Tensor>> &indices);

// self[i0, ...]; boolean masks among the indices become their nonzero
// coordinates first, as CPU PyTorch turns them (the count read on the host,
// as CUDA's nonzero reads it: the result's size depends on it)
at::Tensor index_tensor(const at::Tensor &self, const c10::List<std::optional<at::Tensor>> &indices_in)
{
	std::optional<c10::List<std::optional<at::Tensor>>> unmasked = masks_as_indices(self, indices_in);
	const c10::List<std::optional<at::Tensor>> &indices = unmasked ? *unmasked : indices_in;
	return index_faults([&] { return index_tensor_impl(self, indices); }, advanced_checks(self, indices));
}

// self[i0, ..., ik-1] = values (or += with accumulate, float and 32-bit-or-
// narrower integer types): the indexed rows are written by a scatter DMA
// into self in place (index_copy's kernel; scatter_add for accumulate)
bool index_put_front(at::Tensor &self, const c10::List<std::optional<at::Tensor>> &indices, const at::Tensor &values,
		     bool accumulate);

// indices on other than the leading dims (scores[:, eos] = 0): on a copy of
// self with those dims first, the values brought to that layout, then
// copied back
at::Tensor &index_put_front_or_permuted(at::Tensor &self, const c10::List<std::optional<at::Tensor>> &indices,
					const at::Tensor &values0, bool accumulate)
{
	at::Tensor values = values0;
	if (values.dim() == 0 && values.is_cpu() && self.is_privateuseone())
		values = values.to(self.device());
	if (index_put_front(self, indices, values, accumulate))
		return self;
	std::vector<int64_t> perm;
	c10::List<std::optional<at::Tensor>> front;
	int64_t pos;
	if (!to_front(self, indices, perm, front, pos))
		return declined;
	at::Tensor t = self.permute(perm).contiguous();
	std::vector<int64_t> bshape = front.get(0)->sizes().vec();
	for (size_t i = 1; i < front.size(); i++)
		bshape = at::infer_size(bshape, front.get(i)->sizes());
	int64_t nb = (int64_t)bshape.size();
	std::vector<int64_t> rest(t.sizes().begin() + (int64_t)front.size(), t.sizes().end());
	std::vector<int64_t> result(rest.begin(), rest.begin() + pos);   // PyTorch's layout of the indexed values
	result.insert(result.end(), bshape.begin(), bshape.end());
	result.insert(result.end(), rest.begin() + pos, rest.end());
	at::Tensor v = values;
	if (v.dim() > 0) {
		v = v.expand(result);
		std::vector<int64_t> from, to;
		for (int64_t i = 0; i < nb; i++) {
			from.push_back(pos + i);
			to.push_back(i);
		}
		v = v.movedim(from, to);
	}
	if (!index_put_front(t, front, v, accumulate))
		return declined;
	std::vector<int64_t> inv(perm.size());
	for (size_t i = 0; i < perm.size(); i++)
		inv[perm[i]] = (int64_t)i;
	TORCH_CHECK(native_copy(self, t.permute(inv)), "neuron: index_put copy back");
	return self;
}

// An expanded self (an indexed dim of stride 0, a deprecated use that CPU
// PyTorch still runs): every element of such a dim is one memory location,
// so the writes land as through the view with the dim cut to one element
// and each in-range index made 0 (the last write wins, as on the CPU); an
// index out of range stays out of range of the cut dim, a fault, reported
// against the full sizes.  Undefined when that does not cover self.
at::Tensor put_through_expanded(at::Tensor &self, const c10::List<std::optional<at::Tensor>> &indices,
				const at::Tensor &values, bool accumulate)
{
	at::Tensor v = self;
	c10::List<std::optional<at::Tensor>> cut = indices.copy();
	for (int64_t d = 0; d < self.dim(); d++) {
		if (self.stride(d) != 0 || self.size(d) <= 1)
			continue;
		std::optional<at::Tensor> t = d < (int64_t)indices.size() ? indices.get(d) : std::nullopt;
		if (!t || !t->defined() || t->scalar_type() == at::kBool)
			return {};
		if (!t->is_privateuseone())   // a CPU index: its values on the device (cut is a copy)
			t = t->to(self.device());
		at::Tensor in = t->ge(-self.size(d)).logical_and(t->lt(self.size(d)));
		cut.set(d, at::where(in, at::zeros({}, t->options()), *t));
		v = v.narrow(d, 0, 1);
	}
	if (at::has_internal_overlap(v) != at::MemOverlap::No)
		return {};
	at::Tensor &r = index_put_front_or_permuted(v, cut, values, accumulate);
	return &r == &declined_tensor() ? at::Tensor() : self;
}

// bool / uint8 masks among indices as CPU turns them into indices: the
// nonzero coordinates of each mask (native nonzero, which reads the count),
// one int64 index per dim the mask covers; nullopt when there is no mask,
// or one CPU would reject (its shape is not the indexed dims')
std::optional<c10::List<std::optional<at::Tensor>>> masks_as_indices(const at::Tensor &self,
								     const c10::List<std::optional<at::Tensor>> &indices)
{
	c10::List<std::optional<at::Tensor>> out;
	bool any = false;
	int64_t d = 0;
	for (size_t i = 0; i < indices.size(); i++) {
		std::optional<at::Tensor> t = indices.get(i);
		if (!t || !t->defined() || (t->scalar_type() != at::kBool && t->scalar_type() != at::kByte)) {
			out.push_back(t);
			d++;
			continue;
		}
		if (!t->is_privateuseone() || t->device() != self.device() || t->dim() == 0)
			return std::nullopt;
		for (int64_t k = 0; k < t->dim(); k++)
			if (d + k >= self.dim() || t->size(k) != self.size(d + k))
				return std::nullopt;
		at::Tensor nz = at::_ops::nonzero::call(*t);
		for (int64_t k = 0; k < t->dim(); k++)
			out.push_back(nz.select(1, k));
		d += t->dim();
		any = true;
	}
	return any ? std::optional(out) : std::nullopt;
}

// self[mask] = v with one boolean mask over self's leading dims and one
// value (DTensor's vocab-parallel embedding zeroes the rows of tokens
// another rank holds this way): a select on the device, where the general
// path reads the mask's count on the host (nonzero); an undefined tensor
// when not this case
at::Tensor masked_put_one(at::Tensor &self, const c10::List<std::optional<at::Tensor>> &indices,
			  const at::Tensor &values, bool accumulate)
{
	if (accumulate || indices.size() != 1 || values.numel() != 1 || values.dim() > 1 || !values.is_privateuseone() ||
	    values.device() != self.device() || values.scalar_type() != self.scalar_type() ||
	    at::has_internal_overlap(self) != at::MemOverlap::No)
		return {};
	std::optional<at::Tensor> m = indices.get(0);
	if (!m || !m->defined() || m->scalar_type() != at::kBool || !m->is_privateuseone() ||
	    m->device() != self.device() || m->dim() == 0 || m->dim() > self.dim())
		return {};
	for (int64_t k = 0; k < m->dim(); k++)
		if (m->size(k) != self.size(k))
			return {};
	std::vector<int64_t> shape = m->sizes().vec();
	shape.resize(self.dim(), 1);
	at::Tensor r = at::where(m->view(shape), values.reshape({}), self);
	return native_copy(self, r) ? self : at::Tensor();
}

at::Tensor &index_put_impl(at::Tensor &self, const c10::List<std::optional<at::Tensor>> &indices_in,
			   const at::Tensor &values, bool accumulate, bool unsafe)
{
	if (masked_put_one(self, indices_in, values, accumulate).defined())
		return self;
	std::optional<c10::List<std::optional<at::Tensor>>> unmasked = masks_as_indices(self, indices_in);
	const c10::List<std::optional<at::Tensor>> &indices = unmasked ? *unmasked : indices_in;
	return index_faults(
		[&]() -> at::Tensor & {
			if (at::has_internal_overlap(self) != at::MemOverlap::Yes)
				return index_put_front_or_permuted(self, indices, values, accumulate);
			return put_through_expanded(self, indices, values, accumulate).defined() ? self
												  : declined_tensor();
		},
		advanced_checks(self, indices));
}

bool index_put_front(at::Tensor &self, const c10::List<std::optional<at::Tensor>> &indices, const at::Tensor &values,
		     bool accumulate)
{
	at::Tensor flat;
	std::vector<int64_t> bshape;
	size_t k;
	int64_t rows;
	Units u = units_of(self.scalar_type(), false);
	bool can_add = u.per == 1 && self.scalar_type() != at::kBool;
	if ((!accumulate || can_add) && self.is_contiguous() && values.is_privateuseone() && values.device() == self.device() &&
	    (values.scalar_type() == self.scalar_type() ||
	     (isa_dtype_of(values.scalar_type()) != ISA_DT_INVALID && isa_dtype_of(self.scalar_type()) != ISA_DT_INVALID)) &&
	    flat_rows(self, indices, flat, bshape, k, rows)) {
		std::vector<int64_t> rest(self.sizes().begin() + (int64_t)k, self.sizes().end());
		std::vector<int64_t> vshape = bshape;
		vshape.insert(vshape.end(), rest.begin(), rest.end());
		int64_t n = flat.numel();
		if (n == 0)
			return true;
		std::vector<int64_t> tshape{ rows }, sshape{ n };
		tshape.insert(tshape.end(), rest.begin(), rest.end());
		sshape.insert(sshape.end(), rest.begin(), rest.end());
		at::Tensor src = materialize(values, vshape, self.scalar_type()).view(sshape);
		at::Tensor table = self.view(tshape);
		TORCH_CHECK(rows_into(table, 0, flat.reshape({ -1 }), src, table, accumulate, "aten::index_put_"),
			    "neuron: index_put rows");
		return true;
	}
	return false;
}


// nonzero: the row-major coordinates of the non-zero elements, in order.
// The count sizes the result, so the host reads it (as every backend's
// nonzero synchronizes); the positions come from a prefix count of the
// mask (each non-zero element's slot), one scatter of the flat indices into
// those slots, and exact int64 division / remainder per dim.
at::Tensor nonzero(const at::Tensor &self)
{
	if (!self.is_privateuseone() || self.is_complex() || self.numel() >= INT32_MAX ||
	    units_of(self.scalar_type(), false).dtype == ISA_DT_INVALID)
		return declined;
	if (self.dim() == 0)   /* a scalar: one row of no coordinates, or none */
		return at::empty({ peek_cpu(self.ne(0)).item<bool>() ? 1 : 0, 0 }, self.options().dtype(at::kLong));
	int64_t n = self.numel(), nd = self.dim();
	at::Tensor flat = self.reshape({ n });
	at::Tensor mask = flat.scalar_type() == at::kBool ? flat : flat.ne(0);
	at::Tensor pos = mask.to(at::kInt).cumsum(0, at::kInt);
	int64_t count = n ? pos.select(0, n - 1).item<int32_t>() : 0;
	at::Tensor out = at::empty({ count, nd }, self.options().dtype(at::kLong));
	if (count == 0)
		return out;
	// slot of each non-zero element; the zeros all go to a spare slot `count`
	at::Tensor dest = pos.to(at::kLong).sub(1).masked_fill(mask.logical_not(), count);
	at::Tensor idx = at::empty({ n }, out.options());
	at::_ops::arange_start_out::call(0, n, 1, idx);
	at::Tensor slots = at::empty({ count + 1 }, out.options());
	slots.scatter_(0, dest, idx);
	at::Tensor flat_idx = slots.narrow(0, 0, count);
	int64_t stride = 1;
	for (int64_t d = nd - 1; d >= 0; d--) {
		at::Tensor q = stride == 1 ? flat_idx : flat_idx.floor_divide(stride);
		out.select(1, d).copy_(d == 0 ? q : q.remainder(self.size(d)));
		stride *= self.size(d);
	}
	return out;
}

// ---- out= forms: CPU's overlap checks, then the native result --------------

// r written into out, which may not overlap itself nor share memory with
// any input (CPU's gather / index_select / cat reject both)
at::Tensor &gathered_out(at::Tensor &out, std::initializer_list<const at::Tensor *> ins, const at::Tensor &r)
{
	if (!r.defined() || !out.is_privateuseone() || out.scalar_type() != r.scalar_type())
		return declined;
	at::native::resize_output(out, r.sizes());   /* first, as CPU: the checks see the resized out */
	at::assert_no_internal_overlap(out);
	for (const at::Tensor *t : ins)
		at::assert_no_overlap(out, *t);
	return write_result(out, r);
}

at::Tensor &gather_out(const at::Tensor &self, int64_t dim, const at::Tensor &index, bool sparse_grad, at::Tensor &out)
{
	if (!out.is_privateuseone() || out.scalar_type() != self.scalar_type())
		return declined;
	return gathered_out(out, { &self, &index }, neuron::gather(self, dim, index, sparse_grad));
}

at::Tensor &index_select_out(const at::Tensor &self, int64_t dim, const at::Tensor &index, at::Tensor &out)
{
	if (!out.is_privateuseone() || out.scalar_type() != self.scalar_type())
		return declined;
	/* CPU's index_select checks out's overlaps before it resizes out (cat after) */
	at::assert_no_internal_overlap(out);
	at::assert_no_overlap(out, self);
	at::assert_no_overlap(out, index);
	return gathered_out(out, { &self, &index }, neuron::index_select(self, dim, index));
}

at::Tensor &cat_out(const at::ITensorListRef &tensors, int64_t dim, at::Tensor &out)
{
	if (!out.is_privateuseone())
		return declined;
	std::vector<at::Tensor> ts(tensors.begin(), tensors.end());
	for (const at::Tensor &t : ts)
		if (!t.is_privateuseone())
			return declined;
	at::Tensor r = neuron::cat(tensors, dim);
	if (!r.defined() || out.scalar_type() != r.scalar_type())
		return declined;
	at::native::resize_output(out, r.sizes());   /* first, as CPU: an input that is out grows with it */
	at::assert_no_internal_overlap(out);
	for (const at::Tensor &t : ts)
		at::assert_no_overlap(out, t);
	return write_result(out, r);
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_INDEX)

at::Tensor rows_select(const at::Tensor &table, const at::Tensor &index)
{
	return neuron_index_select(table, 0, index);
}

void rows_write(at::Tensor &table, const at::Tensor &index, const at::Tensor &src)
{
	index_copy_out(table, 0, index, src, table);
}

bool rows_write_dim(at::Tensor &out, int64_t dim, const at::Tensor &index, const at::Tensor &src, bool accumulate,
		    const char *opname)
{
	return rows_into(out, dim, index, src, out, accumulate, opname);
}

}  // namespace neuron
