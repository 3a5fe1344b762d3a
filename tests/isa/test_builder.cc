// The program builder: a matmul kernel emitted from C is the same program,
// byte for byte, as examples/programs/matmul_gelu.nsasm assembled.
#include "test_util.h"

#include <gtest/gtest.h>

namespace {

TEST(IsaBuilder, MatmulGeluMatchesTheExample)
{
	isa_diag d{};
	Program p(isa_program_new(ISA_TARGET_trn2));
	ASSERT_TRUE(p);
	p->num_semaphores = 4;
	uint64_t xs[] = { 128, 512 }, ws[] = { 128, 128 };
	int x = isa_builder_tensor(p.get(), "x", ISA_DT_bf16, ISA_TK_INPUT, 2, xs, &d);
	int w = isa_builder_tensor(p.get(), "w", ISA_DT_bf16, ISA_TK_INPUT, 2, ws, &d);
	int y = isa_builder_tensor(p.get(), "y", ISA_DT_bf16, ISA_TK_OUTPUT, 2, xs, &d);
	ASSERT_EQ(y, 2) << d.msg;

	isa_ap sx = isa_ap_sbuf(ISA_DT_bf16, 0, 128, 0, 512);
	isa_ap sw = isa_ap_sbuf(ISA_DT_bf16, 0, 128, 1024, 128);
	isa_ap sy = isa_ap_sbuf(ISA_DT_bf16, 0, 128, 2048, 512);
	isa_ap ps = isa_ap_psum(ISA_DT_fp32, 0, 128, 0, 512);
	isa_ap hx = isa_ap_hbm(ISA_DT_bf16, (uint32_t)x, 0, 128, 512, 512);
	isa_ap hw = isa_ap_hbm(ISA_DT_bf16, (uint32_t)w, 0, 128, 128, 128);
	isa_ap hy = isa_ap_hbm(ISA_DT_bf16, (uint32_t)y, 0, 128, 512, 512);
	ASSERT_EQ(isa_builder_dma(p.get(), "load_x", ISA_DMA_DIRECT, &sx, &hx, nullptr, &d), 0);
	ASSERT_EQ(isa_builder_dma(p.get(), "load_w", ISA_DMA_DIRECT, &sw, &hw, nullptr, &d), 1);
	ASSERT_EQ(isa_builder_dma(p.get(), "store_y", ISA_DMA_DIRECT, &hy, &sy, nullptr, &d), 2);

	const int S = ISA_ENGINE_SYNC, T = ISA_ENGINE_TENSOR, A = ISA_ENGINE_SCALAR;
	EXPECT_EQ(isa_builder_dma_copy(p.get(), S, 0, 0, 0, 1), ISA_OK);
	EXPECT_EQ(isa_builder_dma_copy(p.get(), S, 1, 1, 0, 1), ISA_OK);
	EXPECT_EQ(isa_builder_sem_wait(p.get(), S, 2, ISA_ALU_is_ge, 1), ISA_OK);
	EXPECT_EQ(isa_builder_dma_copy(p.get(), S, 2, 0, 3, 1), ISA_OK);
	EXPECT_EQ(isa_builder_sem_wait(p.get(), S, 3, ISA_ALU_is_ge, 1), ISA_OK);

	EXPECT_EQ(isa_builder_sem_wait(p.get(), T, 0, ISA_ALU_is_ge, 2), ISA_OK);
	EXPECT_EQ(isa_builder_load_stationary(p.get(), sw, ISA_PERF_NONE), ISA_OK);
	EXPECT_EQ(isa_builder_multiply_moving(p.get(), ps, sx, false, ISA_PERF_NONE), ISA_OK);
	EXPECT_EQ(isa_builder_sem_signal(p.get(), T, 1, ISA_SEMOP_ADD, 1), ISA_OK);

	EXPECT_EQ(isa_builder_sem_wait(p.get(), A, 1, ISA_ALU_is_ge, 1), ISA_OK);
	EXPECT_EQ(isa_builder_activation(p.get(), sy, ps, ISA_ACT_gelu, 1.0f, 0.0f), ISA_OK);
	EXPECT_EQ(isa_builder_sem_signal(p.get(), A, 2, ISA_SEMOP_ADD, 1), ISA_OK);

	// finished and encoded in one step (validated once): the same bytes
	uint8_t *bin = nullptr;
	size_t len = 0;
	ASSERT_EQ(isa_builder_finish_encode(p.get(), &bin, &len, &d), ISA_OK) << d.msg;
	std::vector<uint8_t> once(bin, bin + len);
	std::free(bin);

	Program ex = assemble(read_text(std::string(NSIM_EXAMPLES_DIR) + "/matmul_gelu.nsasm"), &d);
	ASSERT_TRUE(ex) << d.msg;
	EXPECT_EQ(encode(p.get()), encode(ex.get()));
	EXPECT_EQ(once, encode(ex.get()));
}

TEST(IsaBuilder, FinishReportsGeneratorBugs)
{
	isa_diag d{};
	Program p(isa_program_new(ISA_TARGET_trn1));
	isa_ap big = isa_ap_sbuf(ISA_DT_fp32, 0, 128, 0, 60000);   // 240000 bytes > 192 KiB
	EXPECT_EQ(isa_builder_memset(p.get(), ISA_ENGINE_VECTOR, big, isa_imm_f32(0)), ISA_OK);
	EXPECT_EQ(isa_builder_finish(p.get(), &d), ISA_E_OUT_OF_BOUNDS);
	EXPECT_NE(std::string(d.msg).find("196608-byte sbuf partition of trn1"), std::string::npos) << d.msg;
	// the one-step form validates too: no bytes for a program that fails
	uint8_t *bin = reinterpret_cast<uint8_t *>(1);
	size_t len = 1;
	d = isa_diag{};
	EXPECT_EQ(isa_builder_finish_encode(p.get(), &bin, &len, &d), ISA_E_OUT_OF_BOUNDS);
	EXPECT_EQ(bin, nullptr);
	EXPECT_EQ(len, 0u);
}

TEST(IsaBuilder, TablesAndConstants)
{
	isa_diag d{};
	Program p(isa_program_new(ISA_TARGET_trn2));
	uint64_t s4[] = { 4 };
	int32_t data[4] = { 1, 2, 3, 4 };
	EXPECT_EQ(isa_builder_const(p.get(), "c", ISA_DT_int32, 1, s4, data, sizeof(data), &d), 0);
	EXPECT_EQ(isa_builder_const(p.get(), "c2", ISA_DT_int32, 1, s4, data, 8, &d), -1);
	EXPECT_EQ(d.code, ISA_E_CONST_SIZE);
	EXPECT_EQ(isa_builder_tensor(p.get(), "s1", ISA_DT_fp32, ISA_TK_INTERNAL, 1, s4, &d), 1);
	EXPECT_EQ(isa_builder_tensor(p.get(), "s2", ISA_DT_bf16, ISA_TK_INTERNAL, 1, s4, &d), 2);
	EXPECT_EQ(p->tensors[2].offset, 64u);   // 64-byte aligned after s1
	EXPECT_EQ(p->scratch_bytes, 72u);
	uint64_t r9[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
	EXPECT_EQ(isa_builder_tensor(p.get(), "r9", ISA_DT_fp32, ISA_TK_INPUT, 9, r9, &d), -1);
	isa_ap a = isa_ap_sbuf(ISA_DT_fp32, 0, 1, 0, 1);
	EXPECT_EQ(isa_builder_dma(p.get(), "", ISA_DMA_GATHER, &a, &a, nullptr, &d), -1);
	EXPECT_EQ(isa_builder_emit(p.get(), 9, nullptr, &d), ISA_E_BAD_ENGINE);
	EXPECT_EQ(isa_builder_finish(p.get(), &d), ISA_OK) << d.msg;
	Program back = assemble(disasm(p.get()), &d);
	ASSERT_TRUE(back) << d.msg;
	EXPECT_EQ(encode(back.get()), encode(p.get()));
}

}  // namespace
