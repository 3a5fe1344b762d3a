// neuron_program.cpp -- the program cache and program execution behind the
// native kernels: generate once per key, load once, run under one lock.
#include "neuron_kernels.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

namespace neuron {

namespace {

std::mutex g_cache_lock;
std::map<std::vector<int64_t>, nsim_model *> g_cache;

// One lock for executions: a cached model is shared by every thread, and
// its stats must be read for the run that produced them.
std::mutex g_exec_lock;

// the slice of device memory from a tensor's first element over `elems`
nsim_tensor *slice_of(const at::Tensor &t, int64_t elems)
{
	uint64_t off;
	nsim_tensor *base = lookup_allocation(t.storage().data(), &off);
	nsim_tensor *s = nullptr;
	check_status(nsim_tensor_slice(base, off + t.storage_offset() * t.element_size(),
				       (uint64_t)elems * t.element_size(), &s),
		     "tensor slice");
	return s;
}

struct SetDeleter {
	void operator()(nsim_tensor_set *s) const { nsim_tensor_set_free(s); }
};
struct TensorDeleter {
	void operator()(nsim_tensor *t) const { nsim_tensor_free(t); }
};

}  // namespace

int isa_dtype_of(at::ScalarType t)
{
	switch (t) {
	case at::kFloat: return ISA_DT_fp32;
	case at::kBFloat16: return ISA_DT_bf16;
	case at::kHalf: return ISA_DT_fp16;
	default: return ISA_DT_INVALID;
	}
}

int64_t extent_of(const at::Tensor &t)
{
	if (t.numel() == 0)
		return 0;
	int64_t e = 1;
	for (int64_t d = 0; d < t.dim(); d++) {
		if (t.stride(d) < 0)
			return -1;
		e += (t.size(d) - 1) * t.stride(d);
	}
	return e;
}

nsim_model *cached_program(std::vector<int64_t> key, int dev, const char *what, const ProgramGen &gen)
{
	key.push_back(dev);
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
	isa_status st = gen(isa_target_from_name(nsim_target_name()), &bin, &len, &d);
	TORCH_CHECK(st == ISA_OK, "neuron: generating the ", what, " kernel failed: ", d.msg);
	nsim_model *m = nullptr;
	nsim_status rs = nsim_load(bin, len, dev, &m);
	std::free(bin);
	check_status(rs, "program load");
	g_cache[key] = m;
	return m;
}

void run_program(nsim_model *m, int dev, const char *op, std::initializer_list<Binding> in,
		 std::initializer_list<Binding> out)
{
	run_program(m, dev, op, std::vector<Binding>(in), std::vector<Binding>(out));
}

void run_program(nsim_model *m, int dev, const char *op, const std::vector<Binding> &in,
		 const std::vector<Binding> &out)
{
	std::vector<std::unique_ptr<nsim_tensor, TensorDeleter>> held;
	std::unique_ptr<nsim_tensor_set, SetDeleter> sets[2];
	const std::vector<Binding> *lists[2] = { &in, &out };
	for (int i = 0; i < 2; i++) {
		nsim_tensor_set *s = nullptr;
		check_status(nsim_tensor_set_create(&s), "tensor set");
		sets[i].reset(s);
		for (const Binding &b : *lists[i]) {
			held.emplace_back(slice_of(*b.second, extent_of(*b.second)));
			check_status(nsim_tensor_set_add(s, b.first, held.back().get()), "tensor set");
		}
	}
	for (const Binding &b : out)
		note_write(b.second->storage().data());
	nsim_exec_stats stats;   // filled whole by nsim_model_stats (5 KiB: no zeroing first)
	{
		std::lock_guard<std::mutex> g(g_exec_lock);
		nsim_exec_options opt = { op, next_program_start_ps(dev) };
		check_status(nsim_execute_ex(m, sets[0].get(), sets[1].get(), &opt), "program execution");
		nsim_model_stats(m, &stats);
	}
	charge_program(dev, stats, op);
}

}  // namespace neuron
