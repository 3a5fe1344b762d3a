// runtime/fallback.cpp -- the counted CPU fallback for every ATen op without a
// native `neuron` kernel: arguments copied to the CPU, the CPU kernel run,
// results copied back (at::native::cpu_fallback), with random ops drawing
// from the neuron device's generator; and the sentinel declining native
// kernels return (runtime/registration.h), whose wrappers call this fallback.
#include "runtime/copy.h"
#include "runtime/registration.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <string>
#include <vector>

namespace neuron {

at::Tensor &declined_tensor()
{
	// undefined, and never written: a kernel only returns it
	static thread_local at::Tensor none;
	return none;
}

namespace {

// The CPU kernel sees copies, so it cannot see that an out= argument
// partly overlaps an input: that check, which CPU's TensorIterator makes
// before resizing out, is made here on the device tensors.  (An out whose
// own elements overlap is left to the kernel: one that resizes out
// accepts it.)
void check_out_overlap(const c10::OperatorHandle &op, const torch::jit::Stack &stack, size_t base)
{
	const auto &args = op.schema().arguments();
	for (size_t i = 0; i < args.size(); i++) {
		const c10::IValue &o = stack[base + i];
		if (!args[i].is_out() || !o.isTensor() || !o.toTensor().defined() || o.toTensor().numel() == 0)
			continue;
		const at::Tensor &out = o.toTensor();
		for (size_t j = 0; j < args.size(); j++) {
			const c10::IValue &v = stack[base + j];
			if (!args[j].is_out() && v.isTensor() && v.toTensor().defined())
				at::assert_no_partial_overlap(out, v.toTensor());
		}
	}
}

// operands on two cores: the error native kernels raise (registration.h)
void check_one_device(const std::string &name, const torch::jit::Stack &stack, size_t base, size_t n)
{
	if (!compares_devices(name))
		return;
	std::optional<c10::Device> d;
	for (size_t i = 0; i < n; i++) {
		const c10::IValue &v = stack[base + i];
		if (v.isTensor())
			note_device<true>(d, v.toTensor());
		else if (v.isTensorList())   // (index lists, optional tensors, are not compared)
			for (const at::Tensor &t : v.toTensorList().vec())
				note_device<true>(d, t);
	}
}

void cpu_fallback_impl(const c10::OperatorHandle &op, torch::jit::Stack *stack)
{
	const std::string name = c10::toString(op.schema().operator_name());
	const auto &args = op.schema().arguments();
	size_t base = stack->size() - args.size();
	check_one_device(name, *stack, base, args.size());
	count_fallback(name);
	// Random ops draw from the neuron generator: an explicit one, or the
	// device's default when none is given and the op targets a neuron device.
	int dev = -1;
	for (size_t i = 0; i < args.size() && dev < 0; i++) {
		const c10::IValue &v = (*stack)[base + i];
		if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_privateuseone())
			dev = v.toTensor().device().index();
		else if (v.isDevice() && v.toDevice().is_privateuseone())
			dev = v.toDevice().index() < 0 ? current_device() : v.toDevice().index();
	}
	std::vector<at::Generator> presented;
	for (size_t i = 0; i < args.size(); i++) {
		c10::IValue &v = (*stack)[base + i];
		const auto &type = args[i].type();
		bool gen_arg = type->kind() == c10::TypeKind::OptionalType &&
			       type->castRaw<c10::OptionalType>()->getElementType()->kind() ==
				       c10::TypeKind::GeneratorType;
		if (!gen_arg && type->kind() != c10::TypeKind::GeneratorType)
			continue;
		if (v.isNone() && dev >= 0)
			v = c10::IValue(default_generator(dev));
		if (v.isGenerator() && is_neuron_generator(v.toGenerator())) {
			generator_present_as_cpu(v.toGenerator(), true);
			presented.push_back(v.toGenerator());
		}
	}
	// Random ops without a generator argument (native_dropout, ...) use the
	// CPU default generator inside: lend it the neuron generator's state for
	// the call and take the advanced state back.
	bool lend = presented.empty() && dev >= 0 && op.hasTag(at::Tag::nondeterministic_seeded);
	// (the CPU kernel takes the generator's lock itself: none is held here, so
	// a CPU random op racing on another thread could interleave)
	at::Generator cpu_gen, dev_gen;
	at::Tensor saved;
	if (lend) {
		cpu_gen = at::detail::getDefaultCPUGenerator();
		dev_gen = default_generator(dev);
		saved = cpu_gen.get_state();
		cpu_gen.set_state(dev_gen.get_state());
	}
	auto restore = [&] {
		for (auto &g : presented)
			generator_present_as_cpu(g, false);
		if (lend) {
			dev_gen.set_state(cpu_gen.get_state());
			cpu_gen.set_state(saved);
		}
	};
	check_out_overlap(op, *stack, base);
	try {
		t_in_cpu_fallback = true;
		at::native::cpu_fallback(op, stack);
		t_in_cpu_fallback = false;
	} catch (...) {
		t_in_cpu_fallback = false;
		restore();
		throw;
	}
	restore();
}

}  // namespace

void operands_on_two_devices(c10::Device a, c10::Device b)
{
	TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", a,
		    " and ", b, "!");
}

}  // namespace neuron

void neuron_cpu_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack)
{
	neuron::cpu_fallback_impl(op, stack);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m)
{
	m.fallback(torch::CppFunction::makeFromBoxedFunction<&::neuron_cpu_fallback>());
}
