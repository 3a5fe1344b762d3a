// Negative tests for the MX rules (isa/validate_mx.c and the MX branches of
// the matmul rules): each case changes one thing in a valid NeuronCore-v4
// program that quantizes two tiles and multiplies them, and expects a
// specific status and a message naming what was wrong.
#include "mutation_check.h"

namespace {

const char kMxProgram[] = R"(.target trn3
.semaphores 2
.scratch 0
.tensor x input bf16 [128,512]
.tensor q output fp8_e4m3_x4 [128,128]
.dma lx direct dst=sbuf:bf16[0:128]{1x512} src=hbm(x):bf16[512x128]{1x512}
.dma sq direct dst=hbm(q):fp8_e4m3_x4[128x128]{1x128} src=sbuf:fp8_e4m3_x4[0:128]+4096{1x128}
.engine sync
    dma_copy desc=lx queue=0 sem=0 value=1
    sem_wait sem=1 cond=is_ge value=1
    dma_copy desc=sq queue=0 sem=0 value=1
    end
.engine vector
    sem_wait sem=0 cond=is_ge value=1
    quantize_mx dst=sbuf:fp8_e4m3_x4[0:128]+4096{1x128} src=sbuf:bf16[0:128]{1x512} scale=sbuf:uint8[0:128]+8192{1x128}
    quantize_mx dst=sbuf:fp8_e5m2_x4[0:128]+5120{1x128} src=sbuf:bf16[0:128]{1x512} scale=sbuf:uint8[4:128]+8192{1x128}
    tensor_copy dst=sbuf:fp8_e4m3_x4[0:128]+6144{1x128} src=sbuf:fp8_e4m3_x4[0:128]+4096{1x128}
    memset dst=sbuf:fp8_e4m3_x4[0:128]+7168{1x128} value=0
    sem_signal sem=1 op=add value=1
    ;EXTRA_VECTOR
    end
.engine tensor
    sem_wait sem=1 cond=is_ge value=1
    load_stationary stationary=sbuf:fp8_e4m3_x4[0:128]+4096{1x128} scale=sbuf:uint8[0:128]+8192{1x128}
    multiply_moving dst=psum:fp32[0:128]{1x128} moving=sbuf:fp8_e5m2_x4[0:128]+5120{1x128} moving_scale=sbuf:uint8[4:128]+8192{1x128}
    end
)";

const MutationCase kCases[] = {
	{ "needs_v4", ".target trn3", ".target trn2", ISA_E_BAD_DTYPE, "MX data needs NeuronCore-v4" },
	{ "stationary_without_scale", "+4096{1x128} scale=sbuf:uint8[0:128]+8192{1x128}\n    multiply",
	  "+4096{1x128}\n    multiply", ISA_E_MISSING_OPERAND, "needs its scale" },
	{ "moving_without_scale", " moving_scale=sbuf:uint8[4:128]+8192{1x128}", "", ISA_E_MISSING_OPERAND,
	  "needs its scale" },
	{ "scale_quadrant_offset", "scale=sbuf:uint8[4:128]+8192{1x128}\n    tensor_copy",
	  "scale=sbuf:uint8[16:128]+8192{1x128}\n    tensor_copy", ISA_E_BAD_VALUE, "offset 16 within its quadrant" },
	{ "scale_too_few_partitions", "stationary=sbuf:fp8_e4m3_x4[0:128]+4096{1x128} scale=sbuf:uint8[0:128]",
	  "stationary=sbuf:fp8_e4m3_x4[0:128]+4096{1x128} scale=sbuf:uint8[0:64]", ISA_E_SHAPE_MISMATCH, "need 100" },
	{ "scale_free_size", "scale=sbuf:uint8[0:128]+8192{1x128}\n    multiply",
	  "scale=sbuf:uint8[0:128]+8192{1x64}\n    multiply", ISA_E_SHAPE_MISMATCH, "one scale per packed element" },
	{ "scale_dtype", "scale=sbuf:uint8[0:128]+8192{1x128}\n    multiply",
	  "scale=sbuf:int8[0:128]+8192{1x128}\n    multiply", ISA_E_BAD_DTYPE, "MX scales are uint8" },
	{ "mx_rows_multiple_of_32", "load_stationary stationary=sbuf:fp8_e4m3_x4[0:128]+4096{1x128} scale=sbuf:uint8[0:128]",
	  "load_stationary stationary=sbuf:fp8_e4m3_x4[0:48]+4096{1x128} scale=sbuf:uint8[0:128]", ISA_E_SHAPE_MISMATCH,
	  "multiple of 32" },
	{ "mx_stationary_odd_columns", "stationary=sbuf:fp8_e4m3_x4[0:128]+4096{1x128} scale=sbuf:uint8[0:128]+8192{1x128}",
	  "stationary=sbuf:fp8_e4m3_x4[0:128]+4096{1x127} scale=sbuf:uint8[0:128]+8192{1x127}", ISA_E_SHAPE_MISMATCH,
	  "an even number" },
	{ "mx_with_bf16_moving", "moving=sbuf:fp8_e5m2_x4[0:128]+5120{1x128} moving_scale=sbuf:uint8[4:128]+8192{1x128}",
	  "moving=sbuf:bf16[0:128]{1x128}", ISA_E_BAD_DTYPE, "MX data only with MX data" },
	{ "scale_on_bf16", "load_stationary stationary=sbuf:fp8_e4m3_x4[0:128]+4096{1x128}",
	  "load_stationary stationary=sbuf:bf16[0:128]{1x128}", ISA_E_BAD_VALUE, "a scale goes with MX data" },
	{ "mx_perf_mode", "scale=sbuf:uint8[0:128]+8192{1x128}\n    multiply",
	  "scale=sbuf:uint8[0:128]+8192{1x128} perf=double_row\n    multiply", ISA_E_BAD_VALUE, "no perf mode" },
	{ "quantize_src_fp32", "src=sbuf:bf16[0:128]{1x512} scale=sbuf:uint8[0:128]",
	  "src=sbuf:fp32[0:128]{1x512} scale=sbuf:uint8[0:128]", ISA_E_BAD_DTYPE, "takes bf16 or fp16" },
	{ "quantize_to_fp4", "quantize_mx dst=sbuf:fp8_e4m3_x4[0:128]+4096{1x128}",
	  "quantize_mx dst=sbuf:fp4_e2m1_x4[0:128]+4096{1x128}", ISA_E_BAD_DTYPE, "writes fp8_e4m3_x4 or fp8_e5m2_x4" },
	{ "quantize_packing", "quantize_mx dst=sbuf:fp8_e4m3_x4[0:128]+4096{1x128}",
	  "quantize_mx dst=sbuf:fp8_e4m3_x4[0:128]+4096{1x64}", ISA_E_SHAPE_MISMATCH, "pack into 128" },
	{ "quantize_psum", "quantize_mx dst=sbuf:fp8_e4m3_x4[0:128]+4096{1x128} src=sbuf:bf16[0:128]{1x512}",
	  "quantize_mx dst=sbuf:fp8_e4m3_x4[0:128]+4096{1x128} src=psum:bf16[0:128]{1x512}", ISA_E_BAD_SPACE,
	  "reads and writes SBUF" },
	{ "mx_in_arithmetic", ";EXTRA_VECTOR",
	  "tensor_tensor dst=sbuf:fp8_e4m3_x4[0:128]+6144{1x128} src0=sbuf:fp8_e4m3_x4[0:128]+4096{1x128} "
	  "src1=sbuf:fp8_e4m3_x4[0:128]+4096{1x128} op=add", ISA_E_BAD_DTYPE, "tensor_tensor does not take MX data" },
	{ "mx_copy_converts", "tensor_copy dst=sbuf:fp8_e4m3_x4[0:128]+6144{1x128}",
	  "tensor_copy dst=sbuf:uint32[0:128]+6144{1x128}", ISA_E_BAD_DTYPE, "copied only as itself" },
	{ "mx_memset_value", "+7168{1x128} value=0", "+7168{1x128} value=1", ISA_E_BAD_VALUE, "set only to 0" },
	{ "mx_dma_cast", "dst=hbm(q):fp8_e4m3_x4[128x128]{1x128}", "dst=hbm(q):fp32[128x128]{1x128}",
	  ISA_E_BAD_DTYPE, "copied as itself" },
};

TEST(IsaValidateMx, ProgramIsValidAndRoundTrips)
{
	isa_diag d{};
	Program p = assemble(kMxProgram, &d);
	ASSERT_TRUE(p) << d.msg;
	Program p2 = assemble(disasm(p.get()), &d);
	ASSERT_TRUE(p2) << d.msg;
	EXPECT_EQ(encode(p.get()), encode(p2.get()));
}

class MxCase : public ::testing::TestWithParam<MutationCase> {};

TEST_P(MxCase, RejectedWithNamedField)
{
	expect_mutation_result(kMxProgram, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Rules, MxCase, ::testing::ValuesIn(kCases),
			 [](const ::testing::TestParamInfo<MutationCase> &i) { return std::string(i.param.name); });

}  // namespace
