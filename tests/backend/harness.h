// harness.h -- shared by the backend kernel tests: a generated program's
// bytes, device buffers, and one execution over named tensors through the
// runtime API (no torch).
#pragma once
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

extern "C" {
#include "programs.h"
#include "neuronsim/runtime.h"
}

namespace harness {

struct Bin {
	uint8_t *p = nullptr;
	size_t n = 0;
	isa_program *decoded = nullptr;
	~Bin()
	{
		free(p);
		isa_program_free(decoded);
	}
	// the program as the runtime's loader holds it (decoded and validated):
	// what the linker takes
	const isa_program *prog()
	{
		isa_diag d{};
		if (!decoded) {
			EXPECT_EQ(isa_program_load(p, n, &decoded, &d), ISA_OK) << d.msg;
		}
		return decoded;
	}
};

inline int target()
{
	EXPECT_EQ(nsim_init(), NSIM_SUCCESS) << nsim_last_error();
	return isa_target_from_name(nsim_target_name());
}

inline void binary(int tgt, int alu, uint64_t n, Bin *b)
{
	nk_binary prm{ alu, ISA_DT_fp32, n };
	isa_diag d{};
	ASSERT_EQ(nk_binary_program(tgt, &prm, &b->p, &b->n, &d), ISA_OK) << d.msg;
}

struct Buf {
	nsim_tensor *t = nullptr;
	Buf(uint64_t bytes) { EXPECT_EQ(nsim_tensor_allocate(0, bytes, "t", &t), NSIM_SUCCESS); }
	~Buf() { nsim_tensor_free(t); }
};

// runs `bin` with its tensors bound by name; its execution statistics
inline nsim_exec_stats run(const Bin &bin, const std::vector<std::pair<std::string, nsim_tensor *>> &in,
			   const std::vector<std::pair<std::string, nsim_tensor *>> &out)
{
	nsim_model *m = nullptr;
	EXPECT_EQ(nsim_load(bin.p, bin.n, 0, &m), NSIM_SUCCESS) << nsim_last_error();
	nsim_tensor_set *si = nullptr, *so = nullptr;
	nsim_tensor_set_create(&si);
	nsim_tensor_set_create(&so);
	for (auto &[name, t] : in)
		nsim_tensor_set_add(si, name.c_str(), t);
	for (auto &[name, t] : out)
		nsim_tensor_set_add(so, name.c_str(), t);
	EXPECT_EQ(nsim_execute(m, si, so), NSIM_SUCCESS) << nsim_last_error();
	nsim_exec_stats st{};
	nsim_model_stats(m, &st);
	nsim_tensor_set_free(si);
	nsim_tensor_set_free(so);
	nsim_unload(m);
	return st;
}

}  // namespace harness
