// runtime/hooks.cpp -- PrivateUse1HooksInterface for `neuron`: what the
// autograd engine and device-generic code ask a backend (availability,
// devices, primary context, pinned memory).
#include "runtime/device.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>

namespace neuron {

namespace {

// Pinned host memory: ordinary page-aligned host memory, remembered so
// is_pinned() can answer (copies to the device go through the runtime
// either way; pinning changes nothing in the simulator's timing).
std::mutex g_pin_lock;
std::unordered_set<const void *> g_pinned;

void free_pinned(void *p)
{
	{
		std::lock_guard<std::mutex> g(g_pin_lock);
		g_pinned.erase(p);
	}
	std::free(p);
}

struct PinnedAllocator final : public c10::Allocator {
	c10::DataPtr allocate(size_t n) override
	{
		void *p = nullptr;
		if (n && posix_memalign(&p, 4096, n) != 0)
			TORCH_CHECK_WITH(OutOfMemoryError, false, "neuron: cannot pin ", n, " bytes of host memory");
		if (p) {
			std::lock_guard<std::mutex> g(g_pin_lock);
			g_pinned.insert(p);
		}
		return { p, p, &free_pinned, c10::Device(c10::DeviceType::CPU) };
	}
	c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
	void copy_data(void *dest, const void *src, std::size_t count) const override
	{
		std::memcpy(dest, src, count);
	}
};

PinnedAllocator g_pinned_allocator;

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
	bool isBuilt() const override { return true; }
	bool isAvailable() const override { return device_count() > 0; }
	bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
	c10::DeviceIndex deviceCount() const override { return (c10::DeviceIndex)device_count(); }
	void setCurrentDevice(c10::DeviceIndex d) const override { set_device(d); }
	c10::DeviceIndex getCurrentDevice() const override { return (c10::DeviceIndex)current_device(); }
	c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override
	{
		c10::DeviceIndex old = (c10::DeviceIndex)current_device();
		set_device(d);
		return old;
	}
	c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override
	{
		return exchangeDevice(d);
	}
	at::Device getDeviceFromPtr(void *data) const override
	{
		return at::Device(c10::DeviceType::PrivateUse1, (c10::DeviceIndex)device_of_ptr(data));
	}
	at::Allocator *getPinnedMemoryAllocator() const override { return &g_pinned_allocator; }
	bool isPinnedPtr(const void *p) const override
	{
		std::lock_guard<std::mutex> g(g_pin_lock);
		return g_pinned.count(p) != 0;
	}
	const at::Generator &getDefaultGenerator(c10::DeviceIndex d) const override
	{
		return default_generator(d < 0 ? current_device() : d);
	}
	at::Generator getNewGenerator(c10::DeviceIndex d) const override
	{
		return new_generator(d < 0 ? current_device() : d);
	}
	void resizePrivateUse1Bytes(const c10::Storage &storage, size_t newsize) const override
	{
		resize_storage(storage, newsize);
	}
};

struct Register {
	Register() { at::RegisterPrivateUse1HooksInterface(new NeuronHooks()); }
} registered;

}  // namespace

}  // namespace neuron
