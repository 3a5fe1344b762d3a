// runtime/generator.cpp -- random numbers for `neuron`: one default generator
// per device (seeded and stateful on its own, apart from the CPU's), and
// torch.Generator(device="neuron").  The native random kernels draw their
// seeds from it (aten/random/random.cpp); a random op without one runs through
// the CPU fallback, and while it runs its neuron generator presents itself
// as the CPU generator it is built on, so the CPU kernel draws from the
// neuron stream.
#include "runtime/device.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/empty.h>
#include <c10/core/GeneratorImpl.h>

#include <cstring>
#include <mutex>

namespace neuron {

namespace {

struct NeuronGeneratorImpl final : public at::CPUGeneratorImpl {
	explicit NeuronGeneratorImpl(c10::DeviceIndex idx, uint64_t seed = c10::default_rng_seed_val)
		: at::CPUGeneratorImpl(seed)
	{
		device_ = c10::Device(c10::DeviceType::PrivateUse1, idx);
		key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
	}
	void present_as_cpu(bool cpu)
	{
		device_ = cpu ? c10::Device(c10::DeviceType::CPU)
			      : c10::Device(c10::DeviceType::PrivateUse1, index_);
	}
	c10::DeviceIndex index_ = 0;

private:
	NeuronGeneratorImpl *clone_impl() const override
	{
		auto *g = new NeuronGeneratorImpl(device_.index() < 0 ? index_ : device_.index());
		g->set_state(*get_state());
		return g;
	}
};

std::mutex g_gen_lock;
at::Generator g_default[64];

}  // namespace

at::Generator new_generator(int dev)
{
	auto g = at::make_generator<NeuronGeneratorImpl>((c10::DeviceIndex)dev);
	g.get<NeuronGeneratorImpl>()->index_ = (c10::DeviceIndex)dev;
	return g;
}

const at::Generator &default_generator(int dev)
{
	TORCH_CHECK(dev >= 0 && dev < 64, "neuron: device ", dev);
	std::lock_guard<std::mutex> g(g_gen_lock);
	if (!g_default[dev].defined())
		g_default[dev] = new_generator(dev);
	return g_default[dev];
}

bool is_neuron_generator(const at::Generator &g)
{
	return g.defined() && dynamic_cast<NeuronGeneratorImpl *>(g.unsafeGetGeneratorImpl()) != nullptr;
}

uint64_t draw_seed(const std::optional<at::Generator> &gen, int dev)
{
	capture_host_access("draws a random seed on the host");   // a replay would repeat it
	at::Generator g = gen.has_value() && gen->defined() ? *gen : default_generator(dev);
	TORCH_CHECK(is_neuron_generator(g), "neuron: a random op on a neuron tensor needs a neuron generator, got one for ",
		    g.device());
	std::lock_guard<std::mutex> lock(g.mutex());
	return static_cast<NeuronGeneratorImpl *>(g.unsafeGetGeneratorImpl())->random64();
}

void generator_present_as_cpu(const at::Generator &g, bool cpu)
{
	static_cast<NeuronGeneratorImpl *>(g.unsafeGetGeneratorImpl())->present_as_cpu(cpu);
}

}  // namespace neuron

extern "C" {

void neuron_manual_seed(int dev, uint64_t seed)
{
	at::Generator g = neuron::default_generator(dev);   /* shares the impl */
	std::lock_guard<std::mutex> lock(g.mutex());
	g.set_current_seed(seed);
}

uint64_t neuron_initial_seed(int dev)
{
	return neuron::default_generator(dev).current_seed();
}

uint64_t neuron_seed(int dev)
{
	at::Generator g = neuron::default_generator(dev);   /* shares the impl */
	std::lock_guard<std::mutex> lock(g.mutex());
	return g.seed();
}

// the state as bytes: returns its size; copies it when buf is big enough
int neuron_get_rng_state(int dev, uint8_t *buf, int len)
{
	at::Generator g = neuron::default_generator(dev);   /* shares the impl */
	std::lock_guard<std::mutex> lock(g.mutex());
	at::Tensor st = g.get_state();
	int n = (int)st.numel();
	if (buf && len >= n)
		std::memcpy(buf, st.data_ptr(), (size_t)n);
	return n;
}

int neuron_set_rng_state(int dev, const uint8_t *buf, int len)
{
	at::Generator g = neuron::default_generator(dev);   /* shares the impl */
	std::lock_guard<std::mutex> lock(g.mutex());
	at::Tensor st = at::empty({ len }, at::TensorOptions().dtype(at::kByte));
	std::memcpy(st.data_ptr(), buf, (size_t)len);
	try {
		g.set_state(st);
	} catch (...) {
		return -1;
	}
	return 0;
}

}  // extern "C"
