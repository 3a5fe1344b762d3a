// runtime/views.cpp -- `neuron` tensors and their views: empty /
// empty_strided on the caching allocator (runtime/allocator.cpp), and the
// metadata-only ops that need a per-backend kernel (as_strided, view,
// reshape alias, unfold, resize_, set_) and whether a tensor may take
// another's storage (set_data).
#include "runtime/device_internal.h"
#include "ops.def"

#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/set_native.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_has_compatible_shallow_copy_type_ops.h>
#include <ATen/ops/_reshape_alias_ops.h>
#include <ATen/ops/as_strided_ops.h>
#include <ATen/ops/empty_ops.h>
#include <ATen/ops/empty_strided_ops.h>
#include <ATen/ops/record_stream_ops.h>
#include <ATen/ops/resize_ops.h>
#include <ATen/ops/set_ops.h>
#include <ATen/ops/unfold_ops.h>
#include <ATen/ops/view_ops.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>

namespace neuron {

namespace {

// the checks every factory shares; returns the device to allocate on
c10::Device factory_device(std::optional<at::Layout> layout, std::optional<at::Device> device,
			   std::optional<bool> pin_memory)
{
	TORCH_CHECK(c10::layout_or_default(layout) == at::Layout::Strided,
		    "neuron: only strided tensors are supported");
	TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "neuron: pinned memory lives on the CPU");
	return c10::device_or_default(device);
}

constexpr c10::DispatchKeySet kNeuronKeys(c10::DispatchKey::PrivateUse1);

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
			       std::optional<at::Layout> layout, std::optional<at::Device> device,
			       std::optional<bool> pin_memory,
			       std::optional<at::MemoryFormat> memory_format)
{
	const c10::DeviceGuard guard(factory_device(layout, device, pin_memory));
	return at::detail::empty_generic(size, c10::GetAllocator(c10::DeviceType::PrivateUse1), kNeuronKeys, c10::dtype_or_default(dtype),
					 memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
			 std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
			 std::optional<at::Device> device, std::optional<bool> pin_memory)
{
	const c10::DeviceGuard guard(factory_device(layout, device, pin_memory));
	return at::detail::empty_strided_generic(size, stride, c10::GetAllocator(c10::DeviceType::PrivateUse1), kNeuronKeys,
						 c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor &self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
		      std::optional<c10::SymInt> offset)
{
	return at::cpu::as_strided_symint(self, size, stride, offset);
}

// Sizes (and strides) set as the CPU sets them; a storage that must grow is
// grown by the device allocator, which keeps the old bytes with a device
// copy.  The CPU's resize_bytes_cpu memcpy's them on the host, from a
// simulated HBM address: a SIGSEGV for resize_, set_ past the storage and
// every out= of the wrong size.
void resize_impl(at::TensorImpl *self, at::IntArrayRef size, at::OptionalIntArrayRef stride)
{
	at::native::resize_impl_cpu_(self, size, stride, /*resize_storage=*/false);
	if (self->numel() == 0)   // no bytes needed, whatever the offset (as the CPU)
		return;
	size_t need = at::detail::computeStorageNbytes(self->sizes(), self->strides(), self->dtype().itemsize(),
						       self->storage_offset());
	const c10::Storage &storage = self->unsafe_storage();
	if (need <= storage.nbytes())
		return;
	TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
	resize_storage(storage, need);
}

const at::Tensor &resize_(const at::Tensor &self, c10::SymIntArrayRef size,
			  std::optional<at::MemoryFormat> fmt)
{
	resize_impl(self.unsafeGetTensorImpl(), C10_AS_INTARRAYREF_SLOW(size), std::nullopt);
	if (fmt) {
		TORCH_CHECK(*fmt != at::MemoryFormat::Preserve, "Unsupported memory format", *fmt);
		self.unsafeGetTensorImpl()->empty_tensor_restride(*fmt);
	}
	return self;
}

at::Tensor reshape_alias(const at::Tensor &self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride)
{
	return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
					  C10_AS_INTARRAYREF_SLOW(stride));
}

at::Tensor view(const at::Tensor &self, c10::SymIntArrayRef size)
{
	return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

// view ops with per-backend kernels: all metadata, no data touched
at::Tensor unfold(const at::Tensor &self, int64_t dim, int64_t size, int64_t step)
{
	return at::native::unfold(self, dim, size, step);
}

at::Tensor view_dtype(const at::Tensor &self, at::ScalarType dtype)
{
	return at::native::view_dtype(self, dtype);
}

at::Tensor &set_tensor(at::Tensor &self, const at::Tensor &src)
{
	return at::native::set_tensor_(self, src);
}

at::Tensor &set_storage(at::Tensor &self, at::Storage src)
{
	return at::native::set_(self, src);
}

at::Tensor &set_storage_offset(at::Tensor &self, at::Storage src, int64_t offset, at::IntArrayRef size,
			       at::IntArrayRef stride)
{
	at::native::checkSetStorage(self, std::move(src), offset, size, stride);
	self.unsafeGetTensorImpl()->set_storage_offset(offset);
	resize_impl(self.unsafeGetTensorImpl(), size,
		    stride.data() ? at::OptionalIntArrayRef(stride) : at::OptionalIntArrayRef());
	return self;
}

// Tensor.record_stream (FSDP2 marks its all-gather outputs this way): a
// caching allocator must not reuse the block until the stream's work is
// done.  The simulator finishes a stream's work as it is issued (a stream's
// clock is simulated time, not pending work), so nothing is deferred; what
// is checked is that the stream is a neuron one.
void record_stream(at::Tensor &self, c10::Stream s)
{
	TORCH_CHECK(s.device_type() == c10::DeviceType::PrivateUse1,
		    "neuron: record_stream of a neuron tensor on a ", c10::DeviceTypeName(s.device_type()),
		    " stream");
	TORCH_CHECK(s.device_index() >= 0, "neuron: record_stream on a stream without a device index");
	(void)self;
}

// Whether `self` may take `from`'s storage and metadata (`param.data = t`,
// Variable.set_data).  c10 allows it between dense tensors of its built-in
// backends and leaves PrivateUse1 to this operator.  A dense CPU tensor and
// a dense neuron one are as compatible as a CPU and a CUDA one, so
// Module.to("neuron") keeps its Parameter objects, as on CUDA: an optimizer
// built before the move (Accelerate's prepare order) updates the device
// weights instead of the CPU ones it would otherwise hold.
bool has_compatible_shallow_copy_type(const at::Tensor &self, const at::Tensor &from)
{
	if (self.key_set() == from.key_set())
		return true;
	auto dense = [](const at::Tensor &t) {
		return t.layout() == at::kStrided && !t.is_quantized() && (t.is_cpu() || t.is_privateuseone());
	};
	return dense(self) && dense(from);
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_VIEWS)

}  // namespace neuron
