// neuron_hooks.cpp -- PrivateUse1HooksInterface for `neuron`: what the
// autograd engine and device-generic code ask a backend (availability,
// devices, primary context, pinned memory).
#include "neuron_device.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>

namespace neuron {

namespace {

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
	// pinned host memory is ordinary CPU memory: copies go through the runtime
	at::Allocator *getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
	bool isPinnedPtr(const void *) const override { return false; }
	const at::Generator &getDefaultGenerator(c10::DeviceIndex) const override
	{
		TORCH_CHECK(false, "neuron: random numbers come from the CPU generator until the "
				   "device generator lands (random ops run through the CPU fallback)");
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
