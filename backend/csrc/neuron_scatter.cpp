// neuron_scatter.cpp -- scatter, scatter_add and index_add on the device.
// scatter / scatter_add address single elements: each index element's flat
// position in the (contiguous) result is sum_d coord_d * stride_d with the
// index value as the coordinate along dim (exact int64 arithmetic on the
// device), and one DMA scatter (scatter_add: read-modify-write, so repeated
// positions add up in order) moves the source elements there.  index_add
// moves whole slabs along dim (the index_copy kernel with accumulation).
// Float and 32-bit-or-narrower integer types accumulate; scatter (no reduce)
// takes any type.  Out-of-range indices fault on the device: a Python error,
// nothing written.
#include "neuron_kernels.h"
#include "neuron_ops.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/arange_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/index_add_ops.h>
#include <ATen/ops/scatter_add_ops.h>
#include <ATen/ops/scatter_ops.h>
#include <ATen/ops/where.h>
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
		at::Tensor r = at::empty({ index.size(d) }, index.options().dtype(at::kLong));
		at::_ops::arange_start_out::call(0, index.size(d) * out.stride(d), out.stride(d), r);
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
	return self.is_privateuseone() && index.is_privateuseone() && index.scalar_type() == at::kLong &&
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

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_SCATTER)

}  // namespace neuron
