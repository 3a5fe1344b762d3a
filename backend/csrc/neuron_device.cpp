// neuron_device.cpp -- the `neuron` device for PyTorch (PrivateUse1) over the
// neuronsim runtime C API: allocator on simulated HBM, device guard, copies,
// the minimal native ops (the counted CPU fallback is neuron_fallback.cpp).
//
// Device pointers are not host memory: a tensor's data pointer is
// kPtrBase + its device address, in an unmapped part of the address space,
// so a stray host dereference faults instead of silently reading simulator
// memory.  Every access goes through the runtime (nsim_tensor_read/write).
#include "neuron_device_internal.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_cpu_dispatch.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace neuron {

namespace detail {
std::mutex g_lock;                                   // allocations and statistics
Stats g_stats;
std::vector<uint64_t> g_stream_ps[64];               // [device][stream id]
thread_local int g_current_stream[64];                // per thread: current stream id
}  // namespace detail

using namespace detail;

namespace {

constexpr uintptr_t kPtrBase = uintptr_t(1) << 45;   // 32 TiB: unmapped on x86-64 Linux

std::once_flag g_init_once;
std::string g_init_error;

std::map<uintptr_t, nsim_tensor *> g_allocs;         // data pointer -> allocation
std::map<uintptr_t, uint64_t> g_write_gen;            // allocation -> writes so far
std::map<uintptr_t, int> g_alloc_device;             // data pointer -> core
thread_local int g_current_device = 0;

// Simulated device timelines: one clock (ps) per stream per device.  Copies
// charge host-link time to the current stream; events read the clocks.
uint64_t g_link_bytes_per_us = 0;                      // host link, bytes per microsecond
uint64_t g_link_latency_ps = 0;

void init_timelines()
{
	// No public figure for the Trainium host link: PCIe Gen5 x16 class, 32 GB/s
	// and 2 us per transfer by default; NEURON_SIM_HOST_LINK_GBPS overrides.
	const char *gbps = std::getenv("NEURON_SIM_HOST_LINK_GBPS");
	double g = gbps ? std::atof(gbps) : 32.0;
	if (g <= 0)
		g = 32.0;
	g_link_bytes_per_us = (uint64_t)(g * 1000.0);
	g_link_latency_ps = 2000000;
	for (auto &v : g_stream_ps)
		v.assign(1, 0);
}

void ensure_runtime()
{
	std::call_once(g_init_once, [] {
		const char *sim = std::getenv("NEURON_SIM");
		if (sim && std::string(sim) == "0") {
			g_init_error = "NEURON_SIM=0 asks for Trainium hardware, but this build of "
				       "torch_neuronsim has no hardware runtime; unset NEURON_SIM or set "
				       "NEURON_SIM=1 to use the simulator";
			return;
		}
		if (nsim_init() != NSIM_SUCCESS) {
			g_init_error = std::string("neuronsim runtime: ") + nsim_last_error();
			return;
		}
		init_timelines();
		// NEURON_SIM unset: this build has no hardware runtime to find, so the
		// simulator stands in -- say so once
		if (!sim)
			std::fprintf(stderr,
				     "[neuronsim] no Trainium runtime found: `neuron` is the simulated %s "
				     "(%d NeuronCores); set NEURON_SIM=1 to silence this\n",
				     nsim_target_name(), nsim_core_count());
	});
	TORCH_CHECK(g_init_error.empty(), g_init_error);
}

}  // namespace

// the allocation holding device pointer p, and p's offset in it
// Every write into device memory (a program's outputs, a host copy) bumps
// its allocation's generation, so caches of derived data (the weight layout
// cache) see writes through any alias, `.data` included.
void note_write(const void *p)
{
	uintptr_t u = reinterpret_cast<uintptr_t>(p);
	std::lock_guard<std::mutex> g(g_lock);
	auto it = g_allocs.upper_bound(u);
	if (it != g_allocs.begin())
		g_write_gen[std::prev(it)->first]++;
}

uint64_t write_generation(const void *p)
{
	uintptr_t u = reinterpret_cast<uintptr_t>(p);
	std::lock_guard<std::mutex> g(g_lock);
	auto it = g_allocs.upper_bound(u);
	if (it == g_allocs.begin())
		return 0;
	auto w = g_write_gen.find(std::prev(it)->first);
	return w == g_write_gen.end() ? 0 : w->second;
}

nsim_tensor *lookup_allocation(const void *p, uint64_t *offset)
{
	uintptr_t u = reinterpret_cast<uintptr_t>(p);
	std::lock_guard<std::mutex> g(g_lock);
	auto it = g_allocs.upper_bound(u);
	TORCH_CHECK(it != g_allocs.begin(), "neuron: pointer ", p, " is not device memory");
	--it;
	uint64_t off = u - it->first;
	TORCH_CHECK(off <= nsim_tensor_size(it->second), "neuron: pointer ", p,
		    " is outside its allocation");
	*offset = off;
	return it->second;
}

void check_status(nsim_status st, const char *what)
{
	TORCH_CHECK(st == NSIM_SUCCESS, "neuron: ", what, " failed: ", nsim_status_name(st), ": ",
		    nsim_last_error());
}

namespace {

// ------------------------------------------------------------ caching
// Freed blocks stay reserved in a per-device cache and are reused for
// requests of up to their size (but not less than half of it), as CUDA's
// caching allocator does; empty_cache() returns them to the device.

struct Block {
	nsim_tensor *t;
	size_t       capacity, requested;
	int          dev;
};

std::map<uintptr_t, Block> g_blocks;                  // every reserved block
std::multimap<size_t, uintptr_t> g_cache[64];         // per device: free blocks by size
MemStats g_mem[64];

size_t round_size(size_t n)
{
	return (n + 511) & ~size_t(511);
}

void release_cached_locked(int dev)
{
	for (auto &[cap, ptr] : g_cache[dev]) {
		auto it = g_blocks.find(ptr);
		g_mem[dev].reserved -= cap;
		nsim_tensor_free(it->second.t);
		g_allocs.erase(ptr);
		g_write_gen[reinterpret_cast<uintptr_t>(ptr)]++;   // a reused block is new data
		g_alloc_device.erase(ptr);
		g_blocks.erase(it);
	}
	g_cache[dev].clear();
}

void delete_device(void *p)
{
	if (!p)
		return;
	std::lock_guard<std::mutex> g(g_lock);
	auto it = g_blocks.find(reinterpret_cast<uintptr_t>(p));
	if (it == g_blocks.end())
		return;
	Block &b = it->second;
	g_mem[b.dev].allocated -= b.requested;
	g_stats.allocated_bytes -= b.requested;
	b.requested = 0;
	g_cache[b.dev].emplace(b.capacity, it->first);
}

}  // namespace

// ------------------------------------------------------------- allocator

struct NeuronAllocator final : public c10::Allocator {
	c10::DataPtr allocate(size_t nbytes) override
	{
		ensure_runtime();
		int dev = current_device();
		c10::Device device(c10::DeviceType::PrivateUse1, dev);
		if (nbytes == 0)
			return { nullptr, nullptr, &delete_device, device };
		size_t cap = round_size(nbytes);
		std::lock_guard<std::mutex> g(g_lock);
		MemStats &ms = g_mem[dev];
		uintptr_t p = 0;
		auto hit = g_cache[dev].lower_bound(cap);
		if (hit != g_cache[dev].end() && hit->first <= 2 * cap) {
			p = hit->second;
			g_cache[dev].erase(hit);
		} else {
			nsim_tensor *t = nullptr;
			nsim_status st = nsim_tensor_allocate(dev, cap, "torch", &t);
			if (st == NSIM_RESOURCE && !g_cache[dev].empty()) {
				ms.alloc_retries++;               // give the cache back, try again
				release_cached_locked(dev);
				st = nsim_tensor_allocate(dev, cap, "torch", &t);
			}
			if (st == NSIM_RESOURCE && program_cache_stats().entries) {
				ms.alloc_retries++;               // unload cached programs, try again
				clear_program_cache();
				st = nsim_tensor_allocate(dev, cap, "torch", &t);
			}
			if (st == NSIM_RESOURCE) {
				ms.ooms++;
				TORCH_CHECK_WITH(OutOfMemoryError, false, "neuron: out of memory allocating ",
						 nbytes, " bytes on neuron:", dev, "; ", ms.allocated,
						 " bytes allocated and ", ms.reserved,
						 " reserved by PyTorch on this device, ", nsim_memory_allocated(),
						 " bytes in use on the chip: ", nsim_last_error());
			}
			check_status(st, "allocation");
			p = kPtrBase + nsim_tensor_device_address(t);
			g_blocks[p] = Block{ t, cap, 0, dev };
			g_allocs[p] = t;
			g_alloc_device[p] = dev;
			ms.reserved += cap;
			ms.peak_reserved = std::max(ms.peak_reserved, ms.reserved);
			ms.segments++;
		}
		g_blocks[p].requested = nbytes;
		ms.allocated += nbytes;
		ms.peak_allocated = std::max(ms.peak_allocated, ms.allocated);
		ms.allocations++;
		g_stats.allocated_bytes += nbytes;
		g_stats.peak_allocated_bytes = std::max(g_stats.peak_allocated_bytes, g_stats.allocated_bytes);
		void *vp = reinterpret_cast<void *>(p);
		return { vp, vp, &delete_device, device };
	}

	c10::DeleterFnPtr raw_deleter() const override { return &delete_device; }

	void copy_data(void *dest, const void *src, std::size_t count) const override
	{
		uint64_t doff, soff;
		nsim_tensor *d = lookup_allocation(dest, &doff), *s = lookup_allocation(src, &soff);
		check_status(nsim_tensor_copy(s, soff, d, doff, count), "device copy");
	}
};

NeuronAllocator g_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

// ------------------------------------------------------------ device guard

int current_device() { return g_current_device; }

int device_count()
{
	try {
		ensure_runtime();
	} catch (...) {
		return 0;
	}
	return nsim_core_count();
}

void set_device(int d)
{
	TORCH_CHECK(d >= 0 && d < device_count(), "neuron: device ", d, " does not exist (",
		    device_count(), " visible)");
	g_current_device = d;
}

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
	static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;
	c10::DeviceType type() const override { return kType; }
	c10::Device exchangeDevice(c10::Device d) const override
	{
		c10::Device old = getDevice();
		if (old.index() != d.index())
			set_device(d.index());
		return old;
	}
	c10::Device getDevice() const override { return c10::Device(kType, g_current_device); }
	void setDevice(c10::Device d) const override { set_device(d.index()); }
	void uncheckedSetDevice(c10::Device d) const noexcept override { g_current_device = d.index(); }
	// streams are the per-device simulated timelines (stream id 0: default)
	c10::Stream getStream(c10::Device d) const noexcept override
	{
		int dev = d.index() < 0 ? g_current_device : d.index();
		return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, dev),
				   g_current_stream[dev & 63]);
	}
	c10::Stream getDefaultStream(c10::Device d) const override
	{
		return c10::Stream(c10::Stream::UNSAFE, d, 0);
	}
	c10::Stream getNewStream(c10::Device d, int) const override
	{
		int dev = d.index() < 0 ? g_current_device : d.index();
		return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, dev), stream_new(dev));
	}
	c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override
	{
		return getNewStream(d, 0);
	}
	c10::Stream exchangeStream(c10::Stream s) const noexcept override
	{
		int dev = s.device_index();
		c10::Stream old(c10::Stream::UNSAFE, s.device(), g_current_stream[dev & 63]);
		g_current_stream[dev & 63] = (int)s.id();
		return old;
	}
	bool queryStream(const c10::Stream &) const override { return true; }
	void synchronizeStream(const c10::Stream &) const override {}
	// events hold the simulated time of their stream when recorded
	void record(void **event, const c10::Stream &stream, const c10::DeviceIndex,
		    const c10::EventFlag) const override
	{
		if (!*event)
			*event = new uint64_t(0);
		*static_cast<uint64_t *>(*event) = stream_time_ps(stream.device_index(), (int)stream.id());
	}
	void block(void *event, const c10::Stream &stream) const override
	{
		if (event)
			stream_wait_until(stream.device_index(), (int)stream.id(),
					  *static_cast<uint64_t *>(event));
	}
	bool queryEvent(void *) const override { return true; }
	void synchronizeEvent(void *) const override {}
	void destroyEvent(void *event, const c10::DeviceIndex) const noexcept override
	{
		delete static_cast<uint64_t *>(event);
	}
	double elapsedTime(void *e1, void *e2, const c10::DeviceIndex) const override
	{
		TORCH_CHECK(e1 && e2, "neuron: elapsed_time needs two recorded events");
		return ((double)*static_cast<uint64_t *>(e2) - (double)*static_cast<uint64_t *>(e1)) / 1e9;
	}
	c10::DeviceIndex deviceCount() const noexcept override
	{
		return static_cast<c10::DeviceIndex>(device_count());
	}
	// device work completes as it is issued (the simulator runs synchronously)
	void synchronizeDevice(const c10::DeviceIndex) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

// -------------------------------------------------------------- timelines

void charge_link(int dev, uint64_t bytes)
{
	if (dev < 0 || dev >= 64)
		return;
	uint64_t ps = g_link_latency_ps + (bytes * 1000000u + g_link_bytes_per_us - 1) / g_link_bytes_per_us;
	std::lock_guard<std::mutex> g(g_lock);
	auto &v = g_stream_ps[dev];
	int s = g_current_stream[dev];
	if (s >= 0 && (size_t)s < v.size())
		v[s] += ps;
}

int stream_new(int dev)
{
	ensure_runtime();
	TORCH_CHECK(dev >= 0 && dev < device_count(), "neuron: device ", dev);
	std::lock_guard<std::mutex> g(g_lock);
	// a new stream starts at the device's default-stream time
	g_stream_ps[dev].push_back(g_stream_ps[dev][0]);
	return (int)g_stream_ps[dev].size() - 1;
}

void stream_set(int dev, int id)
{
	ensure_runtime();
	std::lock_guard<std::mutex> g(g_lock);
	TORCH_CHECK(dev >= 0 && dev < 64 && id >= 0 && (size_t)id < g_stream_ps[dev].size(),
		    "neuron: no stream ", id, " on device ", dev);
	g_current_stream[dev] = id;
}

int stream_current(int dev)
{
	TORCH_CHECK(dev >= 0 && dev < 64, "neuron: device ", dev);
	return g_current_stream[dev];
}

uint64_t stream_time_ps(int dev, int id)
{
	ensure_runtime();
	std::lock_guard<std::mutex> g(g_lock);
	TORCH_CHECK(dev >= 0 && dev < 64 && id >= 0 && (size_t)id < g_stream_ps[dev].size(),
		    "neuron: no stream ", id, " on device ", dev);
	return g_stream_ps[dev][id];
}

// `id` waits for everything issued so far on `other` (and for time `at`)
void stream_wait_until(int dev, int id, uint64_t at)
{
	std::lock_guard<std::mutex> g(g_lock);
	TORCH_CHECK(dev >= 0 && dev < 64 && id >= 0 && (size_t)id < g_stream_ps[dev].size(),
		    "neuron: no stream ", id, " on device ", dev);
	g_stream_ps[dev][id] = std::max(g_stream_ps[dev][id], at);
}

// ------------------------------------------------------------------- data

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
// through a CPU mirror of the bytes dst touches
void write_from_cpu(const at::Tensor &dst, const at::Tensor &src)
{
	if (dst.numel() == 0)
		return;
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
		mirror = read_to_cpu(dst, true);                       // keep the bytes between elements
		mirror.copy_(src);
		const uint8_t *base = static_cast<const uint8_t *>(mirror.storage().data());
		check_status(nsim_tensor_write(dt, base, off + first, last - first), "host to device copy");
	}
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

int device_of_ptr(const void *p)
{
	uintptr_t u = reinterpret_cast<uintptr_t>(p);
	std::lock_guard<std::mutex> g(g_lock);
	auto it = g_alloc_device.upper_bound(u);
	TORCH_CHECK(it != g_alloc_device.begin(), "neuron: pointer ", p, " is not device memory");
	return std::prev(it)->second;
}

// storage resize (untyped_storage().resize_()): new allocation, old bytes kept
void resize_storage(const c10::Storage &storage, size_t newsize)
{
	size_t old = storage.nbytes();
	c10::DataPtr fresh = g_allocator.allocate(newsize);
	size_t keep = old < newsize ? old : newsize;
	if (keep && storage.data())
		g_allocator.copy_data(fresh.get(), storage.data(), keep);
	const_cast<c10::Storage &>(storage).set_data_ptr_noswap(std::move(fresh));
	const_cast<c10::Storage &>(storage).set_nbytes(newsize);
}

// ------------------------------------------------------------ native ops

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
	return at::detail::empty_generic(size, &g_allocator, kNeuronKeys, c10::dtype_or_default(dtype),
					 memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
			 std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
			 std::optional<at::Device> device, std::optional<bool> pin_memory)
{
	const c10::DeviceGuard guard(factory_device(layout, device, pin_memory));
	return at::detail::empty_strided_generic(size, stride, &g_allocator, kNeuronKeys,
						 c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor &self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
		      std::optional<c10::SymInt> offset)
{
	return at::cpu::as_strided_symint(self, size, stride, offset);
}

const at::Tensor &resize_(const at::Tensor &self, c10::SymIntArrayRef size,
			  std::optional<at::MemoryFormat> fmt)
{
	return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), fmt);
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

}  // namespace

namespace {

// every direction: host<->device and device<->device, any strides, any dtypes
at::Tensor copy_from(const at::Tensor &self, const at::Tensor &dst, bool non_blocking)
{
	(void)non_blocking;
	TORCH_CHECK(self.defined() && dst.defined(), "neuron: copy of an undefined tensor");
	if (self.is_cpu() && dst.is_privateuseone()) {
		write_from_cpu(dst, self.to(dst.scalar_type()));
	} else if (self.is_privateuseone() && dst.is_cpu()) {
		const_cast<at::Tensor &>(dst).copy_(read_to_cpu(self, true));
	} else {
		TORCH_CHECK(self.is_privateuseone() && dst.is_privateuseone(),
			    "neuron: copy between ", self.device(), " and ", dst.device());
		if (self.device() != dst.device() || !native_copy(dst, self)) {
			// across cores or a cast the DMA cannot do: through the host, counted
			count_fallback("aten::copy_");
			write_from_cpu(dst, read_to_cpu(self, true).to(dst.scalar_type()));
		}
	}
	return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor &self, const at::Tensor &dst)
{
	at::native::resize_(dst, self.sizes(), std::nullopt);
	return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor &self)
{
	return at::native::_local_scalar_dense_cpu(read_to_cpu(self, true));
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
	return at::cpu::set_(self, src, offset, size, stride);
}

at::Tensor &fill_scalar(at::Tensor &self, const at::Scalar &value)
{
	if (self.numel() == 0 || native_fill(self, value))
		return self;
	count_fallback("aten::fill_");
	auto cpu = at::empty(self.sizes(), self.options().device(at::kCPU));
	cpu.fill_(value);
	write_from_cpu(self, cpu);
	return self;
}

at::Tensor &zero(at::Tensor &self)
{
	return fill_scalar(self, 0);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("empty.memory_format", empty_memory_format);
	m.impl("empty_strided", empty_strided);
	m.impl("as_strided", as_strided);
	m.impl("resize_", resize_);
	m.impl("_reshape_alias", reshape_alias);
	m.impl("view", view);
	m.impl("view.dtype", view_dtype);
	m.impl("unfold", unfold);
	m.impl("_copy_from", copy_from);
	m.impl("_copy_from_and_resize", copy_from_and_resize);
	m.impl("_local_scalar_dense", local_scalar_dense);
	m.impl("set_.source_Tensor", set_tensor);
	m.impl("set_.source_Storage", set_storage);
	m.impl("set_.source_Storage_storage_offset", set_storage_offset);
	m.impl("fill_.Scalar", fill_scalar);
	m.impl("zero_", zero);
}

// ---------------------------------------------------------------- stats

MemStats memory_stats(int dev)
{
	TORCH_CHECK(dev >= 0 && dev < 64, "neuron: device ", dev);
	std::lock_guard<std::mutex> g(g_lock);
	return g_mem[dev];
}

void empty_cache()
{
	std::lock_guard<std::mutex> g(g_lock);
	for (int d = 0; d < 64; d++)
		release_cached_locked(d);
}

void reset_peak_memory_stats(int dev)
{
	TORCH_CHECK(dev >= 0 && dev < 64, "neuron: device ", dev);
	std::lock_guard<std::mutex> g(g_lock);
	g_mem[dev].peak_allocated = g_mem[dev].allocated;
	g_mem[dev].peak_reserved = g_mem[dev].reserved;
}

}  // namespace neuron
