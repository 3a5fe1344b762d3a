// aten/indexing/scatter.cpp -- scatter, scatter_add, index_add and embedding's
// dense backward (an index_add of the gradient rows) on the device.
// scatter / scatter_add address single elements: each index element's flat
// position in the (contiguous) result is sum_d coord_d * stride_d with the
// index value as the coordinate along dim (exact int64 arithmetic on the
// device), and one DMA scatter (scatter_add: read-modify-write, so repeated
// positions add up in order) moves the source elements there.  index_add
// moves whole slabs along dim (the index_copy kernel with accumulation).
// Float and 32-bit-or-narrower integer types accumulate; scatter (no reduce)
// takes any type.  scatter_reduce / index_reduce (sum, mean, amax, amin)
// reduce through a dense buffer of one slot per source element.  Out-of-range indices fault on the device: a Python error,
// nothing written.
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/indexing/index.h"
#include "aten/pointwise/lowering.h"
#include "ops.def"

#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
#include <ATen/ops/arange_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/index_add_ops.h>
#include <ATen/ops/scatter_add_ops.h>
#include <ATen/ops/scatter_ops.h>
#include <ATen/ops/where.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/index_reduce_ops.h>
#include <ATen/ops/scatter_reduce_ops.h>
#include <ATen/ops/segment_reduce_ops.h>
#include <ATen/ops/searchsorted.h>
#include <limits>
#include <torch/library.h>

namespace neuron {

namespace {

bool can_accumulate(at::ScalarType t)
{
	return units_of(t, false).per == 1 && t != at::kBool && units_of(t, false).dtype != ISA_DT_INVALID;
}

// PyTorch's shape rules for scatter/gather-style ops (index no larger than
// src, nor than self outside dim); false when they do not hold (the CPU
// fallback then raises PyTorch's own error)
bool scatter_shapes_ok(const at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor *src)
{
	if (index.dim() != self.dim() || (src && src->dim() != self.dim()))
		return false;
	for (int64_t d = 0; d < self.dim(); d++) {
		if (src && index.size(d) > src->size(d))
			return false;
		if (d != dim && index.size(d) > self.size(d))
			return false;
	}
	return true;
}

// src's slabs added into out (contiguous) at index along dim.  A bf16 / fp16
// out accumulates in fp32 and is rounded once, as CPU's index_add and
// scatter_add add in their opmath type (the DMA's read-modify-write in bf16
// rounded every add: 20x the CPU's error at 511 duplicates of one row).
bool add_rows(at::Tensor &out, int64_t dim, const at::Tensor &index, const at::Tensor &src, const char *opname)
{
	if (out.scalar_type() != at::kBFloat16 && out.scalar_type() != at::kHalf)
		return rows_write_dim(out, dim, index, src, true, opname);
	at::Tensor acc = out.to(at::kFloat);
	if (!rows_write_dim(acc, dim, index, src.to(at::kFloat), true, opname))
		return false;
	TORCH_CHECK(native_copy(out, acc), "neuron: ", opname, ": rounding the fp32 sums");
	return true;
}

// out (contiguous, on the device) gets src's elements at the positions index
// names along dim; in place
bool scatter_elements(at::Tensor &out, int64_t dim, const at::Tensor &index, const at::Tensor &src, bool accumulate,
		      const char *opname)
{
	if (index.numel() == 0)
		return true;
	// flat position of every index element: its own coordinates off dim,
	// the index value on dim (negative values are out of range, as on CPU)
	at::Tensor flat;
	for (int64_t d = 0; d < index.dim(); d++) {
		if (d == dim || index.size(d) == 1)
			continue;
		// coordinate * stride: the iota of coordinates, then an exact int64
		// multiply (an iota of a large step leaves the fill kernel's range)
		if (out.stride(d) > INT32_MAX)
			return false;
		at::Tensor r = at::empty({ index.size(d) }, index.options().dtype(at::kLong));
		at::_ops::arange_start_out::call(0, index.size(d), 1, r);
		if (out.stride(d) != 1)
			r = i64_mul_scalar(r, (int32_t)out.stride(d));
		std::vector<int64_t> shape(index.dim(), 1);
		shape[d] = index.size(d);
		r = r.view(shape);
		flat = flat.defined() ? flat.add(r) : r;
	}
	at::Tensor value = materialize(index, index.sizes(), at::kLong);
	at::Tensor along = out.stride(dim) != 1 ? i64_mul_scalar(value, (int32_t)out.stride(dim)) : value;
	flat = flat.defined() ? along.add(flat) : along;
	flat = materialize(flat, index.sizes(), at::kLong);
	// an index outside [0, size(dim)) must not land on another element
	flat = outside_faults(flat, value, out.size(dim)).view({ -1 });
	at::Tensor s = src;
	for (int64_t d = 0; d < index.dim(); d++)
		s = s.narrow(d, 0, index.size(d));
	s = materialize(s, s.sizes(), out.scalar_type()).view({ -1, 1 });
	at::Tensor table = out.view({ -1, 1 });
	return index_faults([&] { return accumulate ? add_rows(table, 0, flat, s, opname)
						    : rows_write_dim(table, 0, flat, s, false, opname); },
			    { { index, dim, out.size(dim), false, IndexWording::BoundsRuntime } });
}

bool covered(const at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor *src, bool accumulate)
{
	return self.is_privateuseone() && index.is_privateuseone() && is_index_dtype(index) &&
	       units_of(self.scalar_type(), false).dtype != ISA_DT_INVALID && (!accumulate || can_accumulate(self.scalar_type())) &&
	       (!src || (src->is_privateuseone() && src->device() == self.device() &&
			 (src->scalar_type() == self.scalar_type()))) &&
	       self.dim() >= 1 && self.numel() < INT32_MAX && scatter_shapes_ok(self, dim, index, src);
}

at::Tensor scatter_impl(const at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor &src,
			bool accumulate, const char *opname)
{
	at::Tensor out = at::empty(self.sizes(), self.options());
	TORCH_CHECK(native_copy(out, self), "neuron: scatter copy");
	TORCH_CHECK(scatter_elements(out, dim, index, src, accumulate, opname), "neuron: scatter");
	return out;
}

at::Tensor &scatter_inplace(at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor &src,
			    bool accumulate, const char *opname)
{
	if (self.is_contiguous()) {
		TORCH_CHECK(scatter_elements(self, dim, index, src, accumulate, opname), "neuron: scatter");
		return self;
	}
	at::Tensor r = scatter_impl(self, dim, index, src, accumulate, opname);
	TORCH_CHECK(native_copy(self, r), "neuron: scatter copy back");
	return self;
}

at::Tensor scatter_src(const at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor &src)
{
	int64_t d = self.dim() ? at::maybe_wrap_dim(dim, self.dim()) : 0;
	if (covered(self, d, index, &src, false))
		return scatter_impl(self, d, index, src, false, "aten::scatter");
	return declined;
}

at::Tensor &scatter_src_(at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor &src)
{
	int64_t d = self.dim() ? at::maybe_wrap_dim(dim, self.dim()) : 0;
	if (covered(self, d, index, &src, false))
		return scatter_inplace(self, d, index, src, false, "aten::scatter_");
	return declined;
}

at::Tensor value_source(const at::Tensor &self, const at::Tensor &index, const at::Scalar &value)
{
	return at::full(index.sizes(), value, self.options());
}

at::Tensor scatter_value(const at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Scalar &value)
{
	int64_t d = self.dim() ? at::maybe_wrap_dim(dim, self.dim()) : 0;
	if (covered(self, d, index, nullptr, false))
		return scatter_impl(self, d, index, value_source(self, index, value), false, "aten::scatter");
	return declined;
}

at::Tensor &scatter_value_(at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Scalar &value)
{
	int64_t d = self.dim() ? at::maybe_wrap_dim(dim, self.dim()) : 0;
	if (covered(self, d, index, nullptr, false))
		return scatter_inplace(self, d, index, value_source(self, index, value), false, "aten::scatter_");
	return declined;
}

at::Tensor scatter_add(const at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor &src)
{
	int64_t d = self.dim() ? at::maybe_wrap_dim(dim, self.dim()) : 0;
	if (covered(self, d, index, &src, true))
		return scatter_impl(self, d, index, src, true, "aten::scatter_add");
	return declined;
}

at::Tensor &scatter_add_(at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor &src)
{
	int64_t d = self.dim() ? at::maybe_wrap_dim(dim, self.dim()) : 0;
	if (covered(self, d, index, &src, true))
		return scatter_inplace(self, d, index, src, true, "aten::scatter_add_");
	return declined;
}

// index_add: out = self, out.select(dim, index[j]) += alpha * source.select(dim, j)
at::Tensor &index_add_out(const at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor &source,
			  const at::Scalar &alpha, at::Tensor &out)
{
	if (scalar_self_case(self, dim, index) && out.dim() == 0 && source.numel() == 1) {
		at::Tensor o = out.view({ 1 });
		at::Tensor &r = index_add_out(self.view({ 1 }), 0, index.reshape({ 1 }), source.reshape({ 1 }), alpha, o);
		return &r == &declined_tensor() ? r : out;
	}
	bool ok = self.is_privateuseone() && source.is_privateuseone() && index.is_privateuseone() &&
		  can_accumulate(self.scalar_type()) && source.scalar_type() == self.scalar_type() &&
		  out.sizes().equals(self.sizes()) && out.scalar_type() == self.scalar_type() && self.dim() >= 1;
	if (ok) {
		int64_t d = at::maybe_wrap_dim(dim, self.dim());
		at::Tensor src = alpha.equal(1) ? source : source.mul(alpha);
		at::Tensor dst = out.is_contiguous() ? out : at::empty(out.sizes(), out.options());
		if (!dst.is_same(self))
			TORCH_CHECK(native_copy(dst, self), "neuron: index_add copy");
		// CPU's 1-D index_add adds element by element in the tensor's dtype and
		// words a bad index as index_select does; with rows it adds in opmath
		bool one_d = self.dim() == 1;
		if (index_faults([&] { return one_d ? rows_write_dim(dst, d, index, src, true, "aten::index_add")
						  : add_rows(dst, d, index, src, "aten::index_add"); },
				 { { index, d, self.size(d), false,
				     one_d ? IndexWording::InSelf : IndexWording::BoundsRuntime } })) {
			if (!dst.is_same(out))
				TORCH_CHECK(native_copy(out, dst), "neuron: index_add copy back");
			return out;
		}
	}
	return declined;
}

// ---- reductions into positions ----------------------------------------------------

// the most elements a dense reduction may hold (fp32)
constexpr int64_t kDenseCap = (int64_t)1 << 26;

// self with src reduced into the positions index names along dim (sum,
// mean, amax, amin, prod).  Dense: with dim moved last, source
// element i of a row goes to slot index * n + i of an identity-filled
// [rows, m * n] buffer (every slot written once: no order to keep), each
// destination's n slots are reduced, then combined with self as CPU does
// (include_self; a mean divides by the count, self counted); the region
// index covers in the other dims only.  fp32 inside, rounded once.
at::Tensor reduce_into(const at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor &src,
		       c10::string_view reduce, bool include_self)
{
	bool op_ok = reduce == "sum" || reduce == "mean" || reduce == "amax" || reduce == "amin" || reduce == "prod";
	if (!op_ok || !is_float_neuron(self) || !is_float_neuron(src) || !at::isFloatingType(self.scalar_type()) ||
	    src.scalar_type() != self.scalar_type() || !index.is_privateuseone() || !is_index_dtype(index) ||
	    self.dim() == 0)
		return {};
	int64_t d = at::maybe_wrap_dim(dim, self.dim());
	if (!scatter_shapes_ok(self, d, index, &src))
		return {};
	if (index.numel() == 0)
		return self.clone();
	int64_t m = self.size(d), n = index.size(d);
	if (index.numel() / n * m * n > kDenseCap)
		return {};
	// the region the index addresses (all of dim d)
	at::Tensor t = self, x = src;
	for (int64_t k = 0; k < self.dim(); k++) {
		x = x.narrow(k, 0, index.size(k));
		if (k != d)
			t = t.narrow(k, 0, index.size(k));
	}
	at::Tensor I = index.movedim(d, -1).to(at::kLong).contiguous(), S = as_fp32(x.movedim(d, -1)).contiguous();
	at::Tensor T = as_fp32(t.movedim(d, -1));
	double fill = reduce == "amax" ? -std::numeric_limits<double>::infinity()
		    : reduce == "amin" ? std::numeric_limits<double>::infinity()
		    : reduce == "prod" ? 1.0
				       : 0.0;
	std::vector<int64_t> dense(I.sizes().begin(), I.sizes().end() - 1);
	dense.push_back(m * n);
	at::Tensor slot = I.mul(n).add(at::arange(n, at::TensorOptions().dtype(at::kLong)).to(I.device()));
	at::Tensor D = at::full(dense, fill, S.options()).scatter(-1, slot, S);
	dense.back() = m;
	dense.push_back(n);
	D = D.view(dense);
	at::Tensor R = reduce == "amax" ? D.amax(-1) : reduce == "amin" ? D.amin(-1) : reduce == "prod" ? D.prod(-1) : D.sum(-1);
	at::Tensor count = at::zeros(T.sizes(), S.options()).scatter_add(-1, I, at::ones(I.sizes(), S.options()));
	at::Tensor touched = count.gt(0), r;
	if (reduce == "sum")
		r = include_self ? T.add(R) : at::where(touched, R, T);
	else if (reduce == "prod")
		r = include_self ? T.mul(R) : at::where(touched, R, T);
	else if (reduce == "mean")
		r = include_self ? T.add(R).div(count.add(1)) : at::where(touched, R.div(count), T);
	else if (include_self)
		r = reduce == "amax" ? at::maximum(T, R) : at::minimum(T, R);
	else
		r = at::where(touched, R, T);
	at::Tensor out = self.clone();
	at::Tensor region = out;
	for (int64_t k = 0; k < self.dim(); k++)
		if (k != d)
			region = region.narrow(k, 0, index.size(k));
	region.copy_(r.movedim(-1, d));
	return out;
}

// the legacy scatter(..., reduce="add" / "multiply"): self's values kept
// and combined, as scatter_reduce's sum / prod with include_self
at::Tensor &scatter_reduce_legacy_out(const at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor &src,
				      c10::string_view reduce, at::Tensor &out)
{
	if (reduce != "add" && reduce != "multiply")
		return declined;
	return composite_out(out, { &self, &index, &src },
			     reduce_into(self, dim, index, src, reduce == "add" ? "sum" : "prod", true));
}

at::Tensor &scatter_reduce_two_out(const at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor &src,
				   c10::string_view reduce, bool include_self, at::Tensor &out)
{
	return composite_out(out, { &self, &index, &src }, reduce_into(self, dim, index, src, reduce, include_self));
}

// segment_reduce over axis 0 with 1-D lengths (or offsets): each segment's
// reduction starts from `initial` (or the reduction's identity) -- CPU
// folds initial into non-empty segments too -- as scatter_reduce into a
// tensor filled with it, segment ids from bucketizing positions by the
// segments' ends; a mean divides that sum by the length, an empty segment
// keeps initial (NaN without).  Other axes, multi-dim lengths and lengths
// CPU rejects run on the CPU.
at::Tensor segment_reduce(const at::Tensor &data, c10::string_view reduce, const std::optional<at::Tensor> &lengths,
			  const std::optional<at::Tensor> &indices, const std::optional<at::Tensor> &offsets,
			  int64_t axis, bool unsafe, const std::optional<at::Scalar> &initial)
{
	bool red_ok = reduce == "max" || reduce == "min" || reduce == "sum" || reduce == "mean" || reduce == "prod";
	if (!red_ok || !is_float_neuron(data) || data.dim() < 1 || axis != 0 || (indices && indices->defined()))
		return declined;
	auto index_like = [](const std::optional<at::Tensor> &t) {
		return t && t->defined() && t->dim() == 1 && t->is_privateuseone() &&
		       is_index_dtype(*t);
	};
	at::Tensor len;   /* offsets win when both are given, as CPU's */
	if (index_like(offsets) && offsets->numel() >= 1)
		len = offsets->narrow(0, 1, offsets->numel() - 1).to(at::kLong).sub(offsets->narrow(0, 0, offsets->numel() - 1).to(at::kLong));
	else if (index_like(lengths) && !(offsets && offsets->defined()))
		len = lengths->to(at::kLong);
	else
		return declined;
	int64_t S = len.numel(), N = data.size(0);
	if (S == 0 || N >= (int64_t)1 << 24)
		return declined;
	at::Tensor lf = len.to(at::kFloat);
	at::Tensor check = peek_cpu(at::stack({ lf.sum(), lf.amin() }));
	if (check[0].item<float>() != (float)N || check[1].item<float>() < 0)
		return declined;   /* CPU's error */
	const double inf = std::numeric_limits<double>::infinity();
	double ident = reduce == "max" ? -inf : reduce == "min" ? inf : reduce == "prod" ? 1.0 : 0.0;
	double start = initial ? initial->toDouble() : ident;
	std::vector<int64_t> shape = data.sizes().vec();
	shape[0] = S;
	at::Tensor base = at::full(shape, start, data.options().dtype(at::kFloat));
	at::Tensor r = base;
	if (N > 0) {
		at::Tensor ends = lf.cumsum(0);
		at::Tensor pos = at::arange(N, at::TensorOptions().dtype(at::kFloat)).to(data.device());
		at::Tensor ids = at::searchsorted(ends, pos, false, /*right=*/true);
		std::vector<int64_t> view(data.dim(), 1);
		view[0] = N;
		at::Tensor idx = ids.view(view).expand(data.sizes()).contiguous();
		c10::string_view how = reduce == "max" ? "amax" : reduce == "min" ? "amin" : reduce == "prod" ? "prod" : "sum";
		r = reduce_into(base, 0, idx, as_fp32(data), how, true);
		if (!r.defined())
			return declined;
	}
	if (reduce == "mean") {
		std::vector<int64_t> lv(data.dim(), 1);
		lv[0] = S;
		at::Tensor l = lf.view(lv);
		at::Tensor empty_value = at::full({}, initial ? start : std::numeric_limits<double>::quiet_NaN(), r.options());
		r = at::where(l.gt(0), r.div(l), empty_value);
	}
	return cast_back(r, data.scalar_type());
}

// index_reduce: index (1-D) names a position along dim for each of source's
// slices: the same reduction with index spread over source's shape.  A
// bf16 / fp16 mean stays on the CPU, which accumulates it in the dtype (a
// cancelling sum is 25% off an fp32 one there)
at::Tensor &index_reduce_out(const at::Tensor &self, int64_t dim, const at::Tensor &index, const at::Tensor &source,
			     c10::string_view reduce, bool include_self, at::Tensor &out)
{
	if (reduce == "mean" && self.scalar_type() != at::kFloat)
		return declined;
	if (self.dim() == 0 && source.dim() == 0 && index.numel() == 1 && (dim == 0 || dim == -1)) {   /* a scalar as [1] */
		at::Tensor r = reduce_into(self.view({ 1 }), 0, index.reshape({ 1 }), source.view({ 1 }), reduce, include_self);
		return composite_out(out, { &self, &index, &source }, r.defined() ? r.view(at::IntArrayRef{}) : r);
	}
	if (index.dim() > 1 || !source.is_privateuseone() || source.dim() != self.dim() || self.dim() == 0)
		return declined;
	int64_t d = at::maybe_wrap_dim(dim, self.dim());
	if (index.numel() != source.size(d))
		return declined;
	for (int64_t k = 0; k < self.dim(); k++)
		if (k != d && source.size(k) != self.size(k))
			return declined;
	std::vector<int64_t> view(self.dim(), 1);
	view[d] = index.numel();
	at::Tensor full = index.reshape(view).expand(source.sizes());
	if (index.numel()) {
		at::Tensor lim = peek_cpu(at::stack({ index.min(), index.max() }));
		int64_t lo = lim[0].item<int64_t>(), hi = lim[1].item<int64_t>();
		TORCH_CHECK_INDEX(lo >= 0 && hi < self.size(d), "index out of range in self");
	}
	return composite_out(out, { &self, &index, &source }, reduce_into(self, d, full, source, reduce, include_self));
}

// grad_weight[idx[j]] += grad[j] over every lookup j (repeats add up, a DMA
// scatter-add), padding_idx rows left zero; with scale_grad_by_freq each
// lookup's gradient divided by its index's count
at::Tensor embedding_dense_backward(const at::Tensor &grad, const at::Tensor &indices, int64_t num_weights,
				    int64_t padding_idx, bool scale_grad_by_freq)
{
	if (!is_float_neuron(grad) || !indices.is_privateuseone() || grad.dim() < 1 ||
	    !is_index_dtype(indices) || num_weights < 0)
		return declined;
	int64_t D = grad.size(-1);
	at::Tensor idx = indices.reshape({ -1 }).to(at::kLong);
	TORCH_CHECK(grad.numel() == idx.numel() * D, "embedding_dense_backward: grad ", grad.sizes(),
		    " does not match indices ", indices.sizes());
	at::Tensor g = as_fp32(grad).reshape({ idx.numel(), D });
	if (padding_idx >= 0 || scale_grad_by_freq) {
		at::Tensor scale = at::ones({ idx.numel() }, g.options());
		if (scale_grad_by_freq) {
			at::Tensor counts = at::zeros({ num_weights }, g.options());
			TORCH_CHECK(rows_write_dim(counts, 0, idx, scale, true, "aten::embedding_dense_backward"),
				    "neuron: embedding_dense_backward: counting indices");
			scale = scale.div(counts.index_select(0, idx));
		}
		if (padding_idx >= 0)
			scale = scale.masked_fill(idx.eq(padding_idx), 0);
		g = g.mul(scale.unsqueeze(1));
	}
	at::Tensor out = at::zeros({ num_weights, D }, g.options());
	if (idx.numel() > 0)
		TORCH_CHECK(rows_write_dim(out, 0, idx, g, true, "aten::embedding_dense_backward"),
			    "neuron: embedding_dense_backward: index out of range or layout not covered");
	return cast_back(out, grad.scalar_type());
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_SCATTER)

}  // namespace neuron
