// neuron_kernels.cpp -- native kernels: ATen ops executed as ISA programs on
// the simulated NeuronCore (values and time both from the simulator).
// Programs are generated per (op, dtype, size, device) and cached; a call
// that the kernel does not cover (broadcasting, mixed dtypes, strides, alpha)
// goes to the counted CPU fallback.
#include "neuron_device.h"

#include <ATen/native/CPUFallback.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/minimum_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/sub_ops.h>
#include <torch/library.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>

extern "C" {
#include "kernels.h"
}

namespace neuron {

namespace {

std::mutex g_cache_lock;
std::map<std::tuple<int, int, uint64_t, int>, nsim_model *> g_cache;   // (alu, dtype, n, dev)

int isa_dtype_of(at::ScalarType t)
{
	switch (t) {
	case at::kFloat: return ISA_DT_fp32;
	case at::kBFloat16: return ISA_DT_bf16;
	case at::kHalf: return ISA_DT_fp16;
	default: return ISA_DT_INVALID;
	}
}

// the slice of device memory holding a contiguous tensor's elements
nsim_tensor *slice_of(const at::Tensor &t)
{
	uint64_t off;
	nsim_tensor *base = lookup_allocation(t.storage().data(), &off);
	nsim_tensor *s = nullptr;
	check_status(nsim_tensor_slice(base, off + t.storage_offset() * t.element_size(), t.nbytes(), &s),
		     "tensor slice");
	return s;
}

nsim_model *program_for(int alu, int dtype, uint64_t n, int dev)
{
	auto key = std::make_tuple(alu, dtype, n, dev);
	std::lock_guard<std::mutex> g(g_cache_lock);
	auto it = g_cache.find(key);
	if (it != g_cache.end()) {
		count_program(true);
		return it->second;
	}
	count_program(false);
	uint8_t *bin = nullptr;
	size_t len = 0;
	isa_diag d{};
	isa_status st = nk_binary_program(isa_target_from_name(nsim_target_name()), alu, dtype, n, &bin,
					  &len, &d);
	TORCH_CHECK(st == ISA_OK, "neuron: generating the elementwise kernel failed: ", d.msg);
	nsim_model *m = nullptr;
	nsim_status rs = nsim_load(bin, len, dev, &m);
	std::free(bin);
	check_status(rs, "program load");
	g_cache[key] = m;
	return m;
}

bool native_ok(const at::Tensor &a, const at::Tensor &b)
{
	return a.is_privateuseone() && b.is_privateuseone() && a.device() == b.device() &&
	       a.scalar_type() == b.scalar_type() && isa_dtype_of(a.scalar_type()) != ISA_DT_INVALID &&
	       a.sizes().equals(b.sizes()) && a.is_contiguous() && b.is_contiguous() && a.numel() > 0;
}

// owns the handles of one execution, so an exception frees them
struct ExecHandles {
	nsim_tensor *t[3] = { nullptr, nullptr, nullptr };
	nsim_tensor_set *in = nullptr, *out = nullptr;
	~ExecHandles()
	{
		nsim_tensor_set_free(in);
		nsim_tensor_set_free(out);
		for (nsim_tensor *x : t)
			nsim_tensor_free(x);
	}
};

// One lock for executions: a cached model is shared by every thread, and
// its stats must be read for the run that produced them.
std::mutex g_exec_lock;

at::Tensor run_binary(int alu, const at::Tensor &a, const at::Tensor &b)
{
	int dev = a.device().index();
	at::Tensor out = at::empty(a.sizes(), a.options());
	nsim_model *m = program_for(alu, isa_dtype_of(a.scalar_type()), (uint64_t)a.numel(), dev);
	ExecHandles h;
	h.t[0] = slice_of(a);
	h.t[1] = slice_of(b);
	h.t[2] = slice_of(out);
	check_status(nsim_tensor_set_create(&h.in), "tensor set");
	check_status(nsim_tensor_set_create(&h.out), "tensor set");
	check_status(nsim_tensor_set_add(h.in, "a", h.t[0]), "tensor set");
	check_status(nsim_tensor_set_add(h.in, "b", h.t[1]), "tensor set");
	check_status(nsim_tensor_set_add(h.out, "out", h.t[2]), "tensor set");
	nsim_exec_stats stats{};
	{
		std::lock_guard<std::mutex> g(g_exec_lock);
		check_status(nsim_execute(m, h.in, h.out), "program execution");
		nsim_model_stats(m, &stats);
	}
	charge_program(dev, stats.total_ps);
	return out;
}

#define BINARY(name, op, alu)                                                                  \
	at::Tensor name(const at::Tensor &a, const at::Tensor &b)                               \
	{                                                                                       \
		if (native_ok(a, b))                                                            \
			return run_binary(alu, a, b);                                           \
		return at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::op>::call(a, b); \
	}

BINARY(mul, mul_Tensor, ISA_ALU_multiply)
BINARY(div, div_Tensor, ISA_ALU_divide)
BINARY(maximum, maximum, ISA_ALU_max)
BINARY(minimum, minimum, ISA_ALU_min)

at::Tensor add(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha)
{
	if (native_ok(a, b) && alpha.equal(1))
		return run_binary(ISA_ALU_add, a, b);
	return at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::add_Tensor>::call(a, b, alpha);
}

at::Tensor sub(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha)
{
	if (native_ok(a, b) && alpha.equal(1))
		return run_binary(ISA_ALU_subtract, a, b);
	return at::native::call_fallback_fn<&neuron_cpu_fallback, at::_ops::sub_Tensor>::call(a, b, alpha);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("add.Tensor", add);
	m.impl("sub.Tensor", sub);
	m.impl("mul.Tensor", mul);
	m.impl("div.Tensor", div);
	m.impl("maximum", maximum);
	m.impl("minimum", minimum);
}

}  // namespace neuron
