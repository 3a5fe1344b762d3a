// The graph compiler's linker (backend/programs/link.c): kernel programs
// linked into one over memory regions give the values of running them one
// after another; what a linked program cannot hold is refused by name.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"

extern "C" {
#include "link.h"
}

using namespace harness;

namespace {

std::vector<float> ramp(uint64_t n, float a, float b)
{
	std::vector<float> v(n);
	for (uint64_t i = 0; i < n; i++)
		v[i] = a + b * (float)(i % 97);
	return v;
}

}  // namespace

TEST(Link, TwoPartsOverAnIntermediateGiveTheSequentialValues)
{
	int tgt = target();
	const uint64_t n = 5000;   // tail tiles too
	Bin add, mul, linked;
	binary(tgt, ISA_ALU_add, n, &add);
	binary(tgt, ISA_ALU_multiply, n, &mul);
	// z = (x + y) * y with t = x + y kept in the linked program's scratch
	nk_link_region regions[4] = { { ISA_TK_INPUT, n * 4 }, { ISA_TK_INPUT, n * 4 }, { ISA_TK_INTERNAL, n * 4 },
				      { ISA_TK_OUTPUT, n * 4 } };
	nk_link_bind b0[3] = { { "a", 0, 0 }, { "b", 1, 0 }, { "out", 2, 0 } };
	nk_link_bind b1[3] = { { "a", 2, 0 }, { "b", 1, 0 }, { "out", 3, 0 } };
	nk_link_part parts[2] = { { add.prog(), "add", 3, b0 }, { mul.prog(), "mul", 3, b1 } };
	isa_diag d{};
	ASSERT_EQ(nk_link_program(tgt, parts, 2, regions, 4, &linked.p, &linked.n, &d), ISA_OK) << d.msg;

	std::vector<float> x = ramp(n, -3.f, 0.25f), y = ramp(n, 0.5f, -0.125f), z(n);
	Buf bx(n * 4), by(n * 4), bz(n * 4), bt(n * 4);
	nsim_tensor_write(bx.t, x.data(), 0, n * 4);
	nsim_tensor_write(by.t, y.data(), 0, n * 4);
	nsim_exec_stats st = run(linked, { { "r0_fp32", bx.t }, { "r1_fp32", by.t } }, { { "r3_fp32", bz.t } });
	nsim_tensor_read(bz.t, z.data(), 0, n * 4);
	for (uint64_t i = 0; i < n; i++)
		ASSERT_EQ(z[i], (x[i] + y[i]) * y[i]) << i;

	// the same work as two programs takes at least as long on the device
	nsim_exec_stats s1 = run(add, { { "a", bx.t }, { "b", by.t } }, { { "out", bt.t } });
	nsim_exec_stats s2 = run(mul, { { "a", bt.t }, { "b", by.t } }, { { "out", bz.t } });
	EXPECT_LE(st.total_ps, s1.total_ps + s2.total_ps + 100000);   // barriers cost no more than ends
	EXPECT_EQ(st.hbm_read_bytes, s1.hbm_read_bytes + s2.hbm_read_bytes);
}

TEST(Link, SemaphoresAreResetWhenTheTableRunsOut)
{
	int tgt = target();
	const uint64_t n = 256;
	Bin add, linked;
	binary(tgt, ISA_ALU_add, n, &add);
	// 120 adds (3 semaphores each: more than 256 in all), ping-ponging
	// between two scratch regions: out = x + 120 * y
	const unsigned k = 120;
	nk_link_region regions[4] = { { ISA_TK_INPUT, n * 4 }, { ISA_TK_INPUT, n * 4 }, { ISA_TK_INTERNAL, n * 4 },
				      { ISA_TK_OUTPUT, n * 4 } };
	std::vector<std::vector<nk_link_bind>> binds(k);
	std::vector<nk_link_part> parts(k);
	for (unsigned i = 0; i < k; i++) {
		uint32_t src = i == 0 ? 0 : (i % 2 ? 2 : 3), dst = i % 2 ? 3 : 2;
		binds[i] = { { "a", src, 0 }, { "b", 1, 0 }, { "out", dst, 0 } };
		parts[i] = { add.prog(), "add", 3, binds[i].data() };
	}
	isa_diag d{};
	ASSERT_EQ(nk_link_program(tgt, parts.data(), k, regions, 4, &linked.p, &linked.n, &d), ISA_OK) << d.msg;
	std::vector<float> x = ramp(n, 1.f, 1.f), y = ramp(n, 0.25f, 0.f), z(n);
	Buf bx(n * 4), by(n * 4), bz(n * 4);
	nsim_tensor_write(bx.t, x.data(), 0, n * 4);
	nsim_tensor_write(by.t, y.data(), 0, n * 4);
	run(linked, { { "r0_fp32", bx.t }, { "r1_fp32", by.t } }, { { "r3_fp32", bz.t } });
	nsim_tensor_read(bz.t, z.data(), 0, n * 4);
	for (uint64_t i = 0; i < n; i++)
		ASSERT_EQ(z[i], x[i] + 30.f) << i;   // 120 * 0.25, exact in fp32
}

TEST(Link, RefusesWhatALinkedProgramCannotHold)
{
	int tgt = target();
	const uint64_t n = 1024;
	Bin add, rnd, out;
	binary(tgt, ISA_ALU_add, n, &add);
	nk_link_region regions[2] = { { ISA_TK_INPUT, n * 4 }, { ISA_TK_OUTPUT, n * 4 } };
	isa_diag d{};

	// a tensor bound past its region's end
	nk_link_bind past[3] = { { "a", 0, 4 }, { "b", 0, 0 }, { "out", 1, 0 } };
	nk_link_part p1 = { add.prog(), "add", 3, past };
	EXPECT_EQ(nk_link_program(tgt, &p1, 1, regions, 2, &out.p, &out.n, &d), ISA_E_OUT_OF_BOUNDS);
	EXPECT_NE(std::string(d.msg).find("outside region 0"), std::string::npos) << d.msg;

	// a tensor bound to no region
	nk_link_bind missing[2] = { { "a", 0, 0 }, { "out", 1, 0 } };
	nk_link_part p2 = { add.prog(), "add", 2, missing };
	EXPECT_EQ(nk_link_program(tgt, &p2, 1, regions, 2, &out.p, &out.n, &d), ISA_E_UNDEFINED_TENSOR);
	EXPECT_NE(std::string(d.msg).find("'b'"), std::string::npos) << d.msg;

	// a write into an input region
	nk_link_bind into_input[3] = { { "a", 0, 0 }, { "b", 0, 0 }, { "out", 0, 0 } };
	nk_link_part p3 = { add.prog(), "add", 3, into_input };
	EXPECT_EQ(nk_link_program(tgt, &p3, 1, regions, 2, &out.p, &out.n, &d), ISA_E_BAD_TENSOR);

	// engine state: the PRNG a random kernel seeds and draws from
	nk_random r{ NK_RAND_UNIFORM, ISA_DT_fp32, n, 0.f, 1.f };
	ASSERT_EQ(nk_random_program(tgt, &r, &rnd.p, &rnd.n, &d), ISA_OK) << d.msg;
	nk_link_region rr[2] = { { ISA_TK_INPUT, 128 * 6 * 4 }, { ISA_TK_OUTPUT, n * 4 } };
	nk_link_bind rb[2] = { { "seeds", 0, 0 }, { "out", 1, 0 } };
	nk_link_part p4 = { rnd.prog(), "rand", 2, rb };
	EXPECT_EQ(nk_link_program(tgt, &p4, 1, rr, 2, &out.p, &out.n, &d), ISA_E_BAD_OPCODE);
	EXPECT_NE(std::string(d.msg).find("rand"), std::string::npos) << d.msg;
}

TEST(Fused, ARegionMixingEnginesMatchesItsStepsOneByOne)
{
	int tgt = target();
	const uint64_t n = 70000;   // several tiles and a tail
	// out = tanh(x * y + 1) - x / 2: TT, TS, ACT (ScalarE), TS, TT
	nk_fused f{};
	f.dtype = ISA_DT_fp32;
	f.n = n;
	f.nin = 2;
	f.in_dtype[0] = f.in_dtype[1] = ISA_DT_fp32;
	f.nsteps = 5;
	int kind[5] = { NK_FUSED_TT, NK_FUSED_TS, NK_FUSED_ACT, NK_FUSED_TS, NK_FUSED_TT };
	int op[5] = { ISA_ALU_multiply, ISA_ALU_add, ISA_ACT_tanh, ISA_ALU_divide, ISA_ALU_subtract };
	int a[5] = { 0, 2, 3, 0, 4 }, b[5] = { 1, -1, -1, -1, 5 };
	float imm[5] = { 0, 1, 1, 2, 0 };
	for (int k = 0; k < 5; k++) {
		f.kind[k] = kind[k];
		f.op[k] = op[k];
		f.op2[k] = ISA_ALU_bypass;
		f.a[k] = a[k];
		f.b[k] = b[k];
		f.imm[k] = imm[k];
	}
	Bin prog;
	isa_diag d{};
	ASSERT_EQ(nk_fused_program(tgt, &f, &prog.p, &prog.n, &d), ISA_OK) << d.msg;
	std::vector<float> x = ramp(n, -1.f, 0.02f), y = ramp(n, 0.3f, -0.01f), z(n);
	Buf bx(n * 4), by(n * 4), bz(n * 4);
	nsim_tensor_write(bx.t, x.data(), 0, n * 4);
	nsim_tensor_write(by.t, y.data(), 0, n * 4);
	nsim_exec_stats st = run(prog, { { "in0", bx.t }, { "in1", by.t } }, { { "out", bz.t } });
	nsim_tensor_read(bz.t, z.data(), 0, n * 4);
	for (uint64_t i = 0; i < n; i++)
		ASSERT_NEAR(z[i], std::tanh(x[i] * y[i] + 1.f) - x[i] / 2.f, 2e-6f) << i;
	EXPECT_EQ(st.hbm_read_bytes, 2 * n * 4);    // each input once
	EXPECT_EQ(st.hbm_write_bytes, n * 4);       // the output once

	f.a[2] = 4;   // an operand that is not an earlier step
	Bin bad;
	EXPECT_EQ(nk_fused_program(tgt, &f, &bad.p, &bad.n, &d), ISA_E_LIMIT);
}

// out[r, c] = (x[r, c] * row[r]) rounded to bf16, times w[r % prow, c]:
// a ROW and a PERIOD input and a cast step, over shapes crossing the
// kernel's tiles (partitions, rows packed to a partition, rows cut in
// chunks), each value as the steps give it one by one
TEST(Fused, BroadcastInputsAndCastsMatchTheirStepsOneByOne)
{
	int tgt = target();
	struct { uint64_t rows, cols, prow; } shapes[] = {
		{ 1, 1, 1 }, { 129, 127, 1 }, { 4096, 128, 1 }, { 600, 32, 8 }, { 257, 513, 257 }, { 5, 1025, 5 }, { 300, 100, 3 },
	};
	for (const auto &sh : shapes) {
		const uint64_t n = sh.rows * sh.cols, np = sh.prow * sh.cols;
		nk_fused f{};
		f.dtype = ISA_DT_fp32;
		f.n = n;
		f.cols = sh.cols;
		f.nin = 3;
		f.in_dtype[0] = f.in_dtype[1] = f.in_dtype[2] = ISA_DT_fp32;
		f.in_mode[0] = NK_FUSED_FULL;
		f.in_mode[1] = NK_FUSED_ROW;
		f.in_mode[2] = NK_FUSED_PERIOD;
		f.in_period[2] = np;
		f.nsteps = 3;
		int kind[3] = { NK_FUSED_TT, NK_FUSED_TS, NK_FUSED_TT };
		int op[3] = { ISA_ALU_multiply, ISA_ALU_bypass, ISA_ALU_multiply };
		int a[3] = { 0, 3, 4 }, b[3] = { 1, -1, 2 };
		for (int k = 0; k < 3; k++) {
			f.kind[k] = kind[k];
			f.op[k] = op[k];
			f.op2[k] = ISA_ALU_bypass;
			f.a[k] = a[k];
			f.b[k] = b[k];
		}
		f.sdt[1] = ISA_DT_bf16;   // the cast
		Bin prog;
		isa_diag d{};
		ASSERT_EQ(nk_fused_program(tgt, &f, &prog.p, &prog.n, &d), ISA_OK) << d.msg << " rows " << sh.rows;
		std::vector<float> x = ramp(n, -1.f, 0.0173f), row = ramp(sh.rows, 0.5f, 0.031f), w = ramp(np, 2.f, -0.047f), z(n);
		Buf bx(n * 4), br(sh.rows * 4), bw(np * 4), bz(n * 4);
		nsim_tensor_write(bx.t, x.data(), 0, n * 4);
		nsim_tensor_write(br.t, row.data(), 0, sh.rows * 4);
		nsim_tensor_write(bw.t, w.data(), 0, np * 4);
		nsim_exec_stats st = run(prog, { { "in0", bx.t }, { "in1", br.t }, { "in2", bw.t } }, { { "out", bz.t } });
		nsim_tensor_read(bz.t, z.data(), 0, n * 4);
		for (uint64_t i = 0; i < n; i++) {
			uint64_t r = i / sh.cols, c = i % sh.cols;
			float p = x[i] * row[r];
			uint32_t u;
			std::memcpy(&u, &p, 4);
			u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;   // round to nearest even bf16
			std::memcpy(&p, &u, 4);
			ASSERT_EQ(z[i], p * w[(r % sh.prow) * sh.cols + c]) << "rows " << sh.rows << " cols " << sh.cols << " at " << i;
		}
		EXPECT_EQ(st.hbm_write_bytes, n * 4);
		EXPECT_GE(st.hbm_read_bytes, (n + sh.rows + np) * 4);
	}

	// a broadcast input is only the other side of a tensor_tensor
	nk_fused g{};
	g.dtype = ISA_DT_fp32;
	g.n = 256;
	g.cols = 128;
	g.nin = 1;
	g.in_dtype[0] = ISA_DT_fp32;
	g.in_mode[0] = NK_FUSED_ROW;
	g.nsteps = 1;
	g.kind[0] = NK_FUSED_ACT;
	g.op[0] = ISA_ACT_exp;
	Bin bad;
	isa_diag d{};
	EXPECT_EQ(nk_fused_program(tgt, &g, &bad.p, &bad.n, &d), ISA_E_LIMIT);
	// a period that does not divide the output
	g.in_mode[0] = NK_FUSED_PERIOD;
	g.in_period[0] = 384;
	g.kind[0] = NK_FUSED_TT;
	g.op[0] = ISA_ALU_add;
	g.b[0] = 0;
	EXPECT_EQ(nk_fused_program(tgt, &g, &bad.p, &bad.n, &d), ISA_E_LIMIT);
}
