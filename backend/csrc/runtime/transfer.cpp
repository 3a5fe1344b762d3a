// runtime/transfer.cpp -- data between the host and `neuron` tensors: the
// host<->device copies (any strides; counted and charged to the host link),
// _copy_from in every direction (device-to-device as a DMA program, across
// cores too: runtime/copy.cpp), _local_scalar_dense and fill_/zero_.
#include "runtime/program.h"
#include "runtime/copy.h"
#include "runtime/device_internal.h"
#include "ops.def"

#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_copy_from_and_resize_ops.h>
#include <ATen/ops/_copy_from_ops.h>
#include <ATen/ops/_local_scalar_dense_ops.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/zero_ops.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>

#include <mutex>

namespace neuron {

thread_local bool t_in_cpu_fallback = false;

using namespace detail;

namespace {

// bytes [first, last) of the storage a strided tensor touches
void span_of(const at::Tensor &t, int64_t *first, int64_t *last)
{
	int64_t lo = t.storage_offset(), hi = t.storage_offset();
	for (int64_t d = 0; d < t.dim(); d++) {
		if (t.size(d) == 0) {
			*first = *last = 0;
			return;
		}
		int64_t ext = (t.size(d) - 1) * t.stride(d);
		if (ext < 0)
			lo += ext;
		else
			hi += ext;
	}
	*first = lo * t.element_size();
	*last = (hi + 1) * t.element_size();
}

// A CPU tensor with the device tensor's values (same sizes/strides): the
// bytes it touches are read from the device.  `transfer`: a modeled
// device-to-host copy (counted, charged to the host link); without, the
// simulator looking at its own memory (peek_cpu).
at::Tensor read_to_cpu(const at::Tensor &t, bool transfer)
{
	if (t.numel() == 0)
		return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kCPU));
	capture_host_access(transfer ? "copies device data to the host" : "reads device values on the host");
	int64_t first, last;
	span_of(t, &first, &last);
	auto buf = at::empty({ last - first }, t.options().dtype(at::kByte).device(at::kCPU));
	uint64_t off;
	nsim_tensor *dt = lookup_allocation(t.storage().data(), &off);
	check_status(nsim_tensor_read(dt, buf.data_ptr(), off + first, last - first), "device to host copy");
	if (transfer) {
		{
			std::lock_guard<std::mutex> g(g_lock);
			g_stats.device_to_host_bytes += last - first;
		}
		charge_link(t.device().index(), (uint64_t)(last - first));
	}
	// the byte buffer holds exactly the span: view it with t's geometry
	return at::empty({ 0 }, t.options().device(at::kCPU))
		.set_(buf.storage(), t.storage_offset() - first / t.element_size(), t.sizes(),
		      t.strides());
}

// writes `src` (CPU, same dtype) into device tensor `dst` element by element
// through a CPU mirror of the bytes dst touches; `transfer` as read_to_cpu
void write_from_cpu(const at::Tensor &dst, const at::Tensor &src, bool transfer)
{
	if (dst.numel() == 0)
		return;
	capture_host_access(transfer ? "writes host data to the device" : "writes device values from the host");
	note_write(dst.storage().data());
	int64_t first, last;
	span_of(dst, &first, &last);
	uint64_t off;
	nsim_tensor *dt = lookup_allocation(dst.storage().data(), &off);
	at::Tensor mirror;
	if (dst.is_contiguous() && last - first == (int64_t)dst.nbytes()) {
		mirror = src.contiguous();
		check_status(nsim_tensor_write(dt, mirror.data_ptr(), off + first, last - first), "host to device copy");
	} else {
		mirror = read_to_cpu(dst, transfer);                   // keep the bytes between elements
		mirror.copy_(src);
		const uint8_t *base = static_cast<const uint8_t *>(mirror.storage().data());
		check_status(nsim_tensor_write(dt, base, off + first, last - first), "host to device copy");
	}
	if (!transfer)
		return;
	{
		std::lock_guard<std::mutex> g(g_lock);
		g_stats.host_to_device_bytes += last - first;
	}
	charge_link(dst.device().index(), (uint64_t)(last - first));
}

}  // namespace

at::Tensor peek_cpu(const at::Tensor &t)
{
	return read_to_cpu(t, false);
}

at::Tensor to_cpu(const at::Tensor &t)
{
	return read_to_cpu(t, true);
}

void poke_cpu(const at::Tensor &dst, const at::Tensor &src)
{
	TORCH_CHECK(dst.is_privateuseone() && src.device().is_cpu() && src.scalar_type() == dst.scalar_type() &&
			    src.sizes().equals(dst.sizes()),
		    "neuron: poke_cpu: a CPU tensor of the device tensor's dtype and shape");
	write_from_cpu(dst, src, false);
}

namespace {

// every direction: host<->device and device<->device, any strides, any dtypes
// A copy where either side is a conjugate or negative view (complex
// x.conj(), its imag): the values are the source's stored elements with
// its bits applied, stored into dst through the inverse of dst's bits.
// Through the host: counted when both sides are on the device.
at::Tensor copy_with_view_bits(const at::Tensor &self, const at::Tensor &dst)
{
	at::Tensor raw = self.is_conj() ? self.conj() : self;   // conj() of a conj view clears the bit
	raw = raw.is_neg() ? raw._neg_view() : raw;
	at::Tensor v = raw.is_cpu() ? raw.clone() : read_to_cpu(raw, true);
	// the source's bits in its own dtype, the destination's in its dtype
	// (CPU's order: uint8 250 into a negative float view stores -250)
	if (self.is_conj())
		v = v.conj_physical();
	if (self.is_neg())
		v = v.neg();
	at::Tensor d = dst.is_conj() ? dst.conj() : dst;
	d = d.is_neg() ? d._neg_view() : d;
	v = v.to(d.scalar_type());
	if (dst.is_conj())
		v = v.conj_physical();
	if (dst.is_neg())
		v = v.neg();
	if (d.is_cpu()) {
		d.copy_(v);
		return dst;
	}
	if (self.is_privateuseone())
		count_fallback("aten::copy_");
	write_from_cpu(d, v, true);
	return dst;
}

// the copy itself; `user`: a copy_ the user called, with CPU copy_'s checks
// (TensorIterator's: no element of dst shared, no partial overlap with
// self) -- not the CPU fallback's write-back of a mutated argument, which
// CPU PyTorch accepts into an expanded tensor (index_put_ with a warning)
at::Tensor copy_values(const at::Tensor &self, const at::Tensor &dst, bool user)
{
	TORCH_CHECK(self.defined() && dst.defined(), "neuron: copy of an undefined tensor");
	if (dst.is_privateuseone()) {
		if (user)
			at::assert_no_internal_overlap(dst);
		at::assert_no_partial_overlap(dst, self);
	}
	if (self.is_conj() || self.is_neg() || dst.is_conj() || dst.is_neg())
		return copy_with_view_bits(self, dst);
	if (self.is_cpu() && dst.is_privateuseone()) {
		write_from_cpu(dst, self.to(dst.scalar_type()), true);
	} else if (self.is_privateuseone() && dst.is_cpu()) {
		const_cast<at::Tensor &>(dst).copy_(read_to_cpu(self, true));
	} else {
		TORCH_CHECK(self.is_privateuseone() && dst.is_privateuseone(),
			    "neuron: copy between ", self.device(), " and ", dst.device());
		bool done = self.device() == dst.device() ? native_copy(dst, self)
							  : native_copy_across(dst, self);
		if (!done) {
			// a cast or layout no copy program covers: through the host, counted
			count_fallback("aten::copy_");
			write_from_cpu(dst, read_to_cpu(self, true).to(dst.scalar_type()), true);
		}
	}
	return dst;
}

at::Tensor copy_from(const at::Tensor &self, const at::Tensor &dst, bool non_blocking)
{
	(void)non_blocking;
	return copy_values(self, dst, !t_in_cpu_fallback);
}

at::Tensor copy_from_and_resize(const at::Tensor &self, const at::Tensor &dst)
{
	dst.resize_(self.sizes());   // the device's resize_ (the CPU's memcpy's device bytes)
	return copy_values(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor &self)
{
	return at::native::_local_scalar_dense_cpu(read_to_cpu(self, true));
}

at::Tensor &fill_scalar(at::Tensor &self, const at::Scalar &value)
{
	if (self.numel() == 0 || native_fill(self, value))
		return self;
	count_fallback("aten::fill_");
	auto cpu = at::empty(self.sizes(), self.options().device(at::kCPU));
	cpu.fill_(value);
	write_from_cpu(self, cpu, true);
	return self;
}

// fill_ with a one-element tensor value (on the device or a CPU scalar):
// a broadcast copy
at::Tensor &fill_tensor_(at::Tensor &self, const at::Tensor &value)
{
	TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
		    value.dim(), " dimensions.");
	if (!self.is_privateuseone() || units_of(self.scalar_type(), false).dtype == ISA_DT_INVALID)
		return declined;
	if (value.is_cpu())
		return native_fill(self, value.item()) ? self : declined_tensor();
	if (!value.is_privateuseone())
		return declined;
	// a value on another core comes over first (one peer copy), as CUDA reads it
	at::Tensor on = value.device() == self.device() ? value : value.to(self.device());
	at::Tensor v = on.scalar_type() == self.scalar_type() ? on : prepared(on, {}, self.scalar_type());
	if (!v.defined() || !native_copy(self, v))
		return declined;
	return self;
}

at::Tensor &zero(at::Tensor &self)
{
	return fill_scalar(self, 0);
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_TRANSFER)

// _copy_from passes the conjugate and negative view bits down to
// copy_from, which applies them.  Their generic fallback would resolve the
// source with a clone, and a device clone copies through _copy_from again:
// an endless recursion (a SIGSEGV in fft.ifft of a real input).  Only a
// backend that routes copy_ through _copy_from (PrivateUse1, XLA) reaches it.
TORCH_LIBRARY_IMPL(aten, Conjugate, m)
{
	m.impl("_copy_from", torch::CppFunction::makeFallthrough());
	m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m)
{
	m.impl("_copy_from", torch::CppFunction::makeFallthrough());
	m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace neuron
