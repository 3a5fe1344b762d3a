// Helpers for the runtime tests: assemble text, load it through the runtime
// API, bind zero-filled (or given) tensors, execute, read outputs back.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

extern "C" {
#include "neuronsim/isa.h"
#include "neuronsim/runtime.h"
}

// an int32's bytes, as a tensor of one element
inline std::vector<uint8_t> word(int32_t v)
{
	std::vector<uint8_t> b(4);
	memcpy(b.data(), &v, 4);
	return b;
}

inline std::vector<uint8_t> to_binary(const std::string &text)
{
	isa_program *p = nullptr;
	isa_diag d{};
	EXPECT_EQ(isa_asm(text.data(), text.size(), &p, &d), ISA_OK) << d.msg;
	if (!p)
		return {};
	uint8_t *buf = nullptr;
	size_t len = 0;
	EXPECT_EQ(isa_program_encode(p, &buf, &len, &d), ISA_OK) << d.msg;
	std::vector<uint8_t> v(buf, buf + len);
	free(buf);
	isa_program_free(p);
	return v;
}

// One execution of a program; tensors named in `data` are written first,
// every input/output tensor of the program is bound (zero-filled).
struct SimRun {
	nsim_status status = NSIM_FAILURE;
	std::string error;
	nsim_exec_stats stats{};
	std::map<std::string, std::vector<uint8_t>> out;
};

inline SimRun run_program(const std::string &text, int core = 0,
		       const std::map<std::string, std::vector<uint8_t>> &data = {}, uint32_t flags = 0)
{
	SimRun r;
	std::vector<uint8_t> bin = to_binary(text);
	isa_program *p = nullptr;
	isa_diag d{};
	isa_program_load(bin.data(), bin.size(), &p, &d);
	nsim_model *m = nullptr;
	r.status = nsim_load(bin.data(), bin.size(), core, &m);
	if (r.status) {
		r.error = nsim_last_error();
		isa_program_free(p);
		return r;
	}
	nsim_tensor_set *in = nullptr, *out = nullptr;
	nsim_tensor_set_create(&in);
	nsim_tensor_set_create(&out);
	std::vector<nsim_tensor *> owned;
	for (uint32_t i = 0; i < p->n_tensors; i++) {
		const isa_tensor *t = &p->tensors[i];
		if (t->kind != ISA_TK_INPUT && t->kind != ISA_TK_OUTPUT)
			continue;
		nsim_tensor *dev = nullptr;
		uint64_t bytes = isa_tensor_bytes(t);
		EXPECT_EQ(nsim_tensor_allocate(core, bytes, t->name, &dev), NSIM_SUCCESS);
		nsim_tensor_memset(dev, 0, 0, bytes);
		auto it = data.find(t->name);
		if (it != data.end())
			nsim_tensor_write(dev, it->second.data(), 0, it->second.size());
		nsim_tensor_set_add(t->kind == ISA_TK_INPUT ? in : out, t->name, dev);
		owned.push_back(dev);
	}
	nsim_exec_options opt{ nullptr, 0, flags };
	r.status = nsim_execute_ex(m, in, out, &opt);
	if (r.status)
		r.error = nsim_last_error();
	nsim_model_stats(m, &r.stats);
	size_t k = 0;
	for (uint32_t i = 0; i < p->n_tensors; i++) {
		const isa_tensor *t = &p->tensors[i];
		if (t->kind != ISA_TK_INPUT && t->kind != ISA_TK_OUTPUT)
			continue;
		if (t->kind == ISA_TK_OUTPUT) {
			std::vector<uint8_t> v(isa_tensor_bytes(t));
			nsim_tensor_read(owned[k], v.data(), 0, v.size());
			r.out[t->name] = v;
		}
		k++;
	}
	for (nsim_tensor *t : owned)
		nsim_tensor_free(t);
	nsim_tensor_set_free(in);
	nsim_tensor_set_free(out);
	nsim_unload(m);
	isa_program_free(p);
	return r;
}

// Runtime initialized for one test with the given target and mode.
class RuntimeTest : public ::testing::Test {
protected:
	void start(const char *target = "trn2", int mode = NSIM_MODE_FULL, int check = 0)
	{
		nsim_close();
		nsim_config cfg{ target, mode, check, 0 };
		ASSERT_EQ(nsim_init_config(&cfg), NSIM_SUCCESS) << nsim_last_error();
	}
	void TearDown() override { nsim_close(); }
};

// The same program on cores 0..n-1 at once (nsim_execute_multi), each with
// its own input "a" and output "b" of `bytes` bytes; with fill_a, core c's
// "a" holds fill_a(c) in every fp32 word (else it is left as allocated) and
// "b" starts zeroed.  Runs 2j and 2j+1 are paired cores.
struct MultiRun {
	nsim_status status = NSIM_FAILURE;
	std::string error;
	std::vector<nsim_exec_stats> stats;
	std::vector<std::vector<float>> out;     // each core's "b" (with fill_a)
	uint64_t dma_bytes() const
	{
		uint64_t b = 0;
		for (const auto &s : stats)
			b += s.dma_bytes;
		return b;
	}
	uint64_t span_ps() const
	{
		uint64_t t = 0;
		for (const auto &s : stats)
			t = s.total_ps > t ? s.total_ps : t;
		return t;
	}
};

inline MultiRun run_on_cores(const std::vector<uint8_t> &bin, int n, uint64_t bytes,
			     float (*fill_a)(int core) = nullptr)
{
	MultiRun r;
	std::vector<nsim_model *> models(n, nullptr);
	std::vector<nsim_tensor_set *> ins(n, nullptr), outs(n, nullptr);
	std::vector<nsim_tensor *> ts;
	for (int c = 0; c < n; c++) {
		EXPECT_EQ(nsim_load(bin.data(), bin.size(), c, &models[c]), NSIM_SUCCESS) << nsim_last_error();
		nsim_tensor *a = nullptr, *b = nullptr;
		nsim_tensor_allocate(c, bytes, "a", &a);
		nsim_tensor_allocate(c, bytes, "b", &b);
		if (fill_a) {
			std::vector<float> v(bytes / 4, fill_a(c));
			nsim_tensor_write(a, v.data(), 0, bytes);
			nsim_tensor_memset(b, 0, 0, bytes);
		}
		ts.push_back(a);
		ts.push_back(b);
		nsim_tensor_set_create(&ins[c]);
		nsim_tensor_set_create(&outs[c]);
		nsim_tensor_set_add(ins[c], "a", a);
		nsim_tensor_set_add(outs[c], "b", b);
	}
	nsim_exec_options opt{ "cores", 0, 0 };
	r.status = nsim_execute_multi_ex(models.data(), ins.data(), outs.data(), n, &opt);
	if (r.status)
		r.error = nsim_last_error();
	for (int c = 0; c < n; c++) {
		nsim_exec_stats st{};
		nsim_model_stats(models[c], &st);
		r.stats.push_back(st);
		if (fill_a) {
			r.out.emplace_back(bytes / 4);
			nsim_tensor_read(ts[2 * c + 1], r.out.back().data(), 0, bytes);
		}
		nsim_unload(models[c]);
		nsim_tensor_set_free(ins[c]);
		nsim_tensor_set_free(outs[c]);
	}
	for (nsim_tensor *t : ts)
		nsim_tensor_free(t);
	return r;
}
