// runtime/allocator.cpp -- simulated HBM for PyTorch: the caching allocator
// of the `neuron` device (PrivateUse1) over nsim_tensor_allocate, the
// runtime's bring-up on first use, and the map from data pointers to device
// allocations that copies and kernels resolve through.
//
// Device pointers are not host memory: a tensor's data pointer is
// kPtrBase + its device address, in an unmapped part of the address space,
// so a stray host dereference faults instead of silently reading simulator
// memory.  Every access goes through the runtime (nsim_tensor_read/write).
#include "runtime/device_internal.h"

#include <c10/core/Allocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Storage.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <string>

namespace neuron {

// The allocator's bookkeeping lives on the heap and is never destroyed: a
// device tensor held by another file's static (a kernel's cache) is freed
// during static destruction at exit, in an order across files no one
// controls, and must find these maps intact.
namespace detail {
std::mutex g_lock;                                   // allocations and statistics
Stats &g_stats = *new Stats;
}  // namespace detail

using namespace detail;

namespace {

constexpr uintptr_t kPtrBase = uintptr_t(1) << 45;   // 32 TiB: unmapped on x86-64 Linux

std::once_flag g_init_once;
std::string g_init_error;

// data pointer -> allocation
std::map<uintptr_t, nsim_tensor *> &g_allocs = *new std::map<uintptr_t, nsim_tensor *>;
// allocation -> the stamp of its last write or hand-out, from one counter:
// a stamp is never repeated, so a cache entry made from an allocation's
// data can only match while nothing wrote it and nobody was handed it since
std::map<uintptr_t, uint64_t> &g_write_gen = *new std::map<uintptr_t, uint64_t>;
uint64_t g_gen_counter;
// data pointer -> core
std::map<uintptr_t, int> &g_alloc_device = *new std::map<uintptr_t, int>;

}  // namespace

void detail::ensure_runtime()
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
		g_init_error = init_default_device();
		if (!g_init_error.empty())
			return;
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
		g_write_gen[std::prev(it)->first] = ++g_gen_counter;
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

uint64_t device_address(const at::Tensor &t)
{
	uint64_t off;
	nsim_tensor *base = lookup_allocation(t.storage().data(), &off);
	return nsim_tensor_device_address(base) + off + (uint64_t)t.storage_offset() * t.element_size();
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

// every reserved block
std::map<uintptr_t, Block> &g_blocks = *new std::map<uintptr_t, Block>;
std::multimap<size_t, uintptr_t> g_cache[64];         // per device: free blocks by size
uint64_t g_cached_bytes = 0;                          // in every device's free blocks
MemStats g_mem[64];

size_t round_size(size_t n)
{
	return (n + 511) & ~size_t(511);
}

// the cached block `c` of device `dev` returned to the device
void release_block_locked(int dev, std::multimap<size_t, uintptr_t>::iterator c)
{
	auto [cap, ptr] = *c;
	auto it = g_blocks.find(ptr);
	g_mem[dev].reserved -= cap;
	g_mem[dev].released_total += cap;
	g_mem[dev].segment_releases++;
	g_cached_bytes -= cap;
	nsim_tensor_free(it->second.t);
	g_allocs.erase(ptr);
	g_write_gen.erase(reinterpret_cast<uintptr_t>(ptr));
	g_alloc_device.erase(ptr);
	g_blocks.erase(it);
	g_cache[dev].erase(c);
}

void release_cached_locked(int dev)
{
	while (!g_cache[dev].empty())
		release_block_locked(dev, g_cache[dev].begin());
}

// Simulated HBM is host memory, so freed blocks the cache keeps are host
// memory too: past NEURON_SIM_ALLOCATOR_CACHE_MB (default 2048) of them,
// the largest go back to the device (their pages to the host).  The
// simulated HBM (96 GiB on trn2) is no bound on a 24 GiB host: a sweep of
// growing shapes reached 14 GB resident with nothing allocated.
uint64_t cache_limit_bytes()
{
	static const uint64_t limit = [] {
		const char *e = std::getenv("NEURON_SIM_ALLOCATOR_CACHE_MB");
		char *end = nullptr;
		unsigned long long mb = e && *e ? std::strtoull(e, &end, 10) : 2048;
		if (e && *e && (*end || mb > (1ull << 30))) {
			TORCH_WARN("neuron: NEURON_SIM_ALLOCATOR_CACHE_MB='", e, "' is not a whole number of MiB; using 2048");
			mb = 2048;
		}
		return (uint64_t)mb << 20;
	}();
	return limit;
}

void trim_cache_locked(int dev)
{
	while (g_cached_bytes > cache_limit_bytes() && !g_cache[dev].empty())
		release_block_locked(dev, std::prev(g_cache[dev].end()));
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
	g_mem[b.dev].freed_total += b.requested;
	g_mem[b.dev].frees++;
	g_stats.allocated_bytes -= b.requested;
	b.requested = 0;
	g_cache[b.dev].emplace(b.capacity, it->first);
	g_cached_bytes += b.capacity;
	trim_cache_locked(b.dev);
}

}  // namespace

// ------------------------------------------------------------- allocator

// A c10::DeviceAllocator, so the device-generic torch.accelerator.memory_*
// API reads the same counters as torch.neuron.memory_*.
struct NeuronAllocator final : public c10::DeviceAllocator {
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
			g_cached_bytes -= hit->first;
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
			ms.reserved_total += cap;
			ms.peak_reserved = std::max(ms.peak_reserved, ms.reserved);
			ms.segments++;
			ms.peak_live_segments = std::max(ms.peak_live_segments, ms.segments - ms.segment_releases);
		}
		g_write_gen[p] = ++g_gen_counter;   // a block handed out (again) is new data
		g_blocks[p].requested = nbytes;
		ms.allocated += nbytes;
		ms.allocated_total += nbytes;
		ms.peak_allocated = std::max(ms.peak_allocated, ms.allocated);
		ms.allocations++;
		ms.peak_live_allocations = std::max(ms.peak_live_allocations, ms.allocations - ms.frees);
		g_stats.allocated_bytes += nbytes;
		g_stats.peak_allocated_bytes = std::max(g_stats.peak_allocated_bytes, g_stats.allocated_bytes);
		void *vp = reinterpret_cast<void *>(p);
		return { vp, vp, &delete_device, device };
	}

	c10::DeleterFnPtr raw_deleter() const override { return &delete_device; }

	void copy_data(void *dest, const void *src, std::size_t count) const override
	{
		capture_host_access("copies device memory outside a program");
		uint64_t doff, soff;
		nsim_tensor *d = lookup_allocation(dest, &doff), *s = lookup_allocation(src, &soff);
		check_status(nsim_tensor_copy(s, soff, d, doff, count), "device copy");
	}

	bool initialized() override { return nsim_target_name() != nullptr; }

	// one pool per device: mempool ids (CUDA graphs) do not apply
	void emptyCache(c10::MempoolId_t) override { empty_cache(); }

	// Device work completes as it is issued in the simulator (the streams
	// are simulated clocks), so a freed block is never still in use by a
	// stream: nothing to record.
	void recordStream(const c10::DataPtr &, c10::Stream) override {}

	c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override
	{
		MemStats m = memory_stats(device);
		c10::CachingDeviceAllocator::DeviceStats s;
		auto set = [](c10::CachingAllocator::Stat &st, uint64_t cur, uint64_t peak, uint64_t in,
			      uint64_t out) {
			st.current = (int64_t)cur, st.peak = (int64_t)peak;
			st.allocated = (int64_t)in, st.freed = (int64_t)out;
		};
		const size_t all = (size_t)c10::CachingAllocator::StatType::AGGREGATE;
		set(s.allocated_bytes[all], m.allocated, m.peak_allocated, m.allocated_total, m.freed_total);
		set(s.requested_bytes[all], m.allocated, m.peak_allocated, m.allocated_total, m.freed_total);
		set(s.active_bytes[all], m.allocated, m.peak_allocated, m.allocated_total, m.freed_total);
		set(s.reserved_bytes[all], m.reserved, m.peak_reserved, m.reserved_total, m.released_total);
		set(s.allocation[all], m.allocations - m.frees, m.peak_live_allocations, m.allocations, m.frees);
		set(s.active[all], m.allocations - m.frees, m.peak_live_allocations, m.allocations, m.frees);
		set(s.segment[all], m.segments - m.segment_releases, m.peak_live_segments, m.segments,
		    m.segment_releases);
		s.num_alloc_retries = (int64_t)m.alloc_retries;
		s.num_ooms = (int64_t)m.ooms;
		s.num_device_alloc = (int64_t)m.segments;
		s.num_device_free = (int64_t)m.segment_releases;
		return s;
	}

	void resetAccumulatedStats(c10::DeviceIndex device) override
	{
		reset_accumulated_memory_stats(device);
	}

	void resetPeakStats(c10::DeviceIndex device) override { reset_peak_memory_stats(device); }

	// the chip's HBM, less what the simulator holds on it (shared by its cores)
	std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex) override
	{
		ensure_runtime();
		nsim_chip_info info;
		check_status(nsim_chip_info_get(nullptr, &info), "chip info");
		uint64_t used = nsim_memory_allocated();
		return { (size_t)(info.hbm_bytes > used ? info.hbm_bytes - used : 0), (size_t)info.hbm_bytes };
	}
};

NeuronAllocator g_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

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
	const c10::DeviceGuard guard(storage.device());   // the new bytes on the storage's device
	size_t old = storage.nbytes();
	c10::DataPtr fresh = g_allocator.allocate(newsize);
	size_t keep = old < newsize ? old : newsize;
	if (keep && storage.data())
		g_allocator.copy_data(fresh.get(), storage.data(), keep);
	const_cast<c10::Storage &>(storage).set_data_ptr_noswap(std::move(fresh));
	const_cast<c10::Storage &>(storage).set_nbytes(newsize);
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

void reset_accumulated_memory_stats(int dev)
{
	TORCH_CHECK(dev >= 0 && dev < 64, "neuron: device ", dev);
	std::lock_guard<std::mutex> g(g_lock);
	MemStats &m = g_mem[dev];
	// what is live stays counted: the cumulative counters restart from it
	m.allocated_total = m.allocated, m.freed_total = 0;
	m.reserved_total = m.reserved, m.released_total = 0;
	m.allocations -= m.frees, m.frees = 0;
	m.segments -= m.segment_releases, m.segment_releases = 0;
	m.alloc_retries = m.ooms = 0;
}

void reset_peak_memory_stats(int dev)
{
	TORCH_CHECK(dev >= 0 && dev < 64, "neuron: device ", dev);
	std::lock_guard<std::mutex> g(g_lock);
	MemStats &m = g_mem[dev];
	m.peak_allocated = m.allocated;
	m.peak_reserved = m.reserved;
	m.peak_live_allocations = m.allocations - m.frees;
	m.peak_live_segments = m.segments - m.segment_releases;
}

}  // namespace neuron
