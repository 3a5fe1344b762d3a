// Negative tests for every validator rule: each case changes one thing in a
// valid program and expects a specific status and a message naming the
// field.  Rules the text form cannot express (it rejects earlier, or cannot
// spell the bad value) are reached through the program structure directly.
#include "base_program.h"
#include "mutation_check.h"

#include <gtest/gtest.h>

namespace {

using Case = MutationCase;

std::string mutate(const char *from, const char *to)
{
	return ::mutate(kBaseProgram, from, to);
}

const Case kTextCases[] = {
	// header
	{ "target_unknown", ".target trn2", ".target trn9", ISA_E_BAD_TARGET, "trn9" },
	{ "semaphores_limit", ".semaphores 2", ".semaphores 300", ISA_E_LIMIT, "semaphores" },
	{ "scratch_limit", ".scratch 1024", ".scratch 2000000000000", ISA_E_LIMIT, "scratch" },
	// tensor table
	{ "tensor_dim_zero", "[128,64]\n.tensor y", "[128,0]\n.tensor y", ISA_E_BAD_TENSOR, "dim 1 is 0" },
	{ "tensor_overflow", "x input fp32 [128,64]", "x input fp32 [4294967296,4294967296]",
	  ISA_E_OVERFLOW, "tensor 'x'" },
	{ "tensor_bad_name", ".tensor y ", ".tensor 9y ", ISA_E_BAD_TENSOR, "9y" },
	{ "tensor_duplicate", ".tensor y ", ".tensor x ", ISA_E_DUPLICATE_NAME, "tensor 'x'" },
	{ "tensor_bad_dtype", "y output fp32", "y output fp31", ISA_E_BAD_DTYPE, "fp31" },
	{ "internal_unaligned", "offset=0", "offset=2", ISA_E_BAD_VALUE, "not aligned" },
	{ "internal_outside_scratch", "offset=0", "offset=1000", ISA_E_OUT_OF_BOUNDS, "scratch" },
	{ "const_data_short", "data=0100000002000000", "data=01000000", ISA_E_CONST_SIZE, "needs 8 bytes" },
	{ "const_data_not_hex", "data=0100000002000000", "data=01000000020000zz", ISA_E_SYNTAX, "non-hex" },
	// DMA descriptors
	{ "dma_duplicate", ".dma sy ", ".dma lx ", ISA_E_DUPLICATE_NAME, "lx" },
	{ "dma_count_mismatch", "dst=sbuf:fp32[0:128]{1x64} src=hbm(x)", "dst=sbuf:fp32[0:128]{1x32} src=hbm(x)",
	  ISA_E_SHAPE_MISMATCH, "8192 elements to 4096" },
	// a direct copy casts between any dtypes; a gather between float types only
	{ "dma_gather_int_cast", "gather dst=sbuf:fp32[0:8]+2048{1x64}", "gather dst=sbuf:int32[0:8]+2048{1x64}",
	  ISA_E_BAD_DTYPE, "gather / scatter DMA casts between float types only" },
	{ "dma_writes_const", ";EXTRA_DMA", ".dma wc direct dst=hbm(c):int32[1x2]{1x1} src=sbuf:int32[0:2]{1x1}",
	  ISA_E_BAD_SPACE, "const tensor 'c'" },
	// an access may read a tensor's bytes as another dtype, inside its bytes
	{ "dma_hbm_reinterpret_past_end", "src=hbm(x):fp32[64x128]{1x64}\n.dma sy",
	  "src=hbm(x):bf16[128x128]+2{1x128}\n.dma sy", ISA_E_OUT_OF_BOUNDS, "outside tensor 'x'" },
	{ "dma_hbm_out_of_bounds", "dst=hbm(y):fp32[64x128]{1x64}", "dst=hbm(y):fp32[64x128]+4{1x64}",
	  ISA_E_OUT_OF_BOUNDS, "outside tensor 'y'" },
	{ "dma_hbm_zero_rows", "dst=hbm(y):fp32[64x128]{1x64} src=sbuf:fp32[0:128]+1024{1x64}",
	  "dst=hbm(y):fp32[64x0]{1x64} src=sbuf:fp32[0:128]+1024{1x64}", ISA_E_BAD_PARTITION, "0 rows" },
	{ "dma_undefined_tensor", "src=hbm(x):fp32[64x128]{1x64}\n.dma sy", "src=hbm(q):fp32[64x128]{1x64}\n.dma sy",
	  ISA_E_UNDEFINED_TENSOR, "'q'" },
	{ "gather_index_dtype", "index=sbuf:int32[0:8]+4096{1x1}", "index=sbuf:fp32[0:8]+4096{1x1}",
	  ISA_E_BAD_DTYPE, "index is fp32" },
	{ "gather_index_elems", "index=sbuf:int32[0:8]+4096{1x1}", "index=sbuf:int32[0:8]+4096{1x2}",
	  ISA_E_SHAPE_MISMATCH, "one index per partition" },
	{ "gather_index_in_psum", "index=sbuf:int32[0:8]+4096{1x1}", "index=psum:int32[0:8]+4096{1x1}",
	  ISA_E_BAD_SPACE, "psum operand, must be in sbuf" },
	{ "gather_rows_mismatch", "index=sbuf:int32[0:8]+4096{1x1}", "index=sbuf:int32[0:4]+4096{1x1}",
	  ISA_E_SHAPE_MISMATCH, "8 rows, index has 4" },
	{ "gather_row_elems", "dst=sbuf:fp32[0:8]+2048{1x64}", "dst=sbuf:fp32[0:8]+2048{1x32}",
	  ISA_E_SHAPE_MISMATCH, "32 elements per row" },
	{ "gather_table_not_hbm", "gather dst=sbuf:fp32[0:8]+2048{1x64} src=hbm(x):fp32[64x128]{1x64}",
	  "gather dst=sbuf:fp32[0:8]+2048{1x64} src=sbuf:fp32[0:8]{1x64}", ISA_E_BAD_SPACE, "indexed side" },
	{ "gather_without_index", " index=sbuf:int32[0:8]+4096{1x1}", "", ISA_E_MISSING_OPERAND, "index=" },
	// the DMA engines' adds (dma_compute): floats of any types, one integer type, no reshaping
	{ "gather_add_float_types", "gather dst=sbuf:fp32[0:8]+2048{1x64}", "gather_add dst=sbuf:bf16[0:8]+2048{1x64}",
	  ISA_OK, "" },
	{ "gather_add_int_float", "gather dst=sbuf:fp32[0:8]+2048{1x64}", "gather_add dst=sbuf:int32[0:8]+2048{1x64}",
	  ISA_E_BAD_DTYPE, "casts between float types only (fp32 -> int32)" },
	{ "add_reshaping", ";EXTRA_DMA", ".dma ad add dst=sbuf:fp32[0:64]{1x128} src=hbm(x):fp32[64x128]{1x64}",
	  ISA_E_SHAPE_MISMATCH, "add takes rows of one shape" },
	{ "add_bool", ";EXTRA_DMA", ".dma ad add dst=sbuf:bool[0:8]{1x8} src=sbuf:bool[0:8]+64{1x8}",
	  ISA_E_BAD_DTYPE, "adds bool to bool (numbers only)" },
	// access patterns (generic)
	{ "ap_partitions_past_128", "dst=sbuf:fp32[0:128]{1x64} src=hbm(x)", "dst=sbuf:fp32[64:192]{1x64} src=hbm(x)",
	  ISA_E_BAD_PARTITION, "[64, 192)" },
	{ "ap_zero_partitions", "tensor_copy dst=sbuf:bf16[0:128]", "tensor_copy dst=sbuf:bf16[5:5]",
	  ISA_E_BAD_PARTITION, "[5, 5)" },
	{ "ap_zero_size", "memset dst=sbuf:bf16[0:128]+52224{1x64}", "memset dst=sbuf:bf16[0:128]+52224{1x0}",
	  ISA_E_BAD_DIMS, "size 0" },
	{ "ap_five_dims", "memset dst=sbuf:bf16[0:128]+52224{1x64}", "memset dst=sbuf:bf16[0:128]+52224{1x1,1x1,1x1,1x1,1x64}",
	  ISA_E_BAD_DIMS, "more than 4" },
	{ "ap_unaligned", "memset dst=sbuf:bf16[0:128]+52224{1x64}", "memset dst=sbuf:bf16[0:128]+52225{1x64}",
	  ISA_E_BAD_VALUE, "not aligned" },
	{ "ap_past_sbuf", "memset dst=sbuf:bf16[0:128]+52224{1x64}", "memset dst=sbuf:bf16[0:128]+229374{1x2}",
	  ISA_E_OUT_OF_BOUNDS, "229376-byte sbuf partition of trn2" },
	{ "ap_negative_stride", "memset dst=sbuf:bf16[0:128]+52224{1x64}", "memset dst=sbuf:bf16[0:128]+4{-1x64}",
	  ISA_E_OUT_OF_BOUNDS, "bytes [-122" },
	{ "ap_past_psum", "src=psum:fp32[0:128]+6144{1x64}", "src=psum:fp32[0:128]+16380{1x64}",
	  ISA_E_OUT_OF_BOUNDS, "16384-byte psum" },
	{ "ap_overflow", "memset dst=sbuf:bf16[0:128]+52224{1x64}",
	  "memset dst=sbuf:bf16[0:128]+52224{2147483647x4294967295,2147483647x4294967295}",
	  ISA_E_OVERFLOW, "64 bits" },
	{ "ap_free_size_limit", "memset dst=sbuf:bf16[0:128]+52224{1x64}", "memset dst=sbuf:bf16[0:128]+52224{0x65537}",
	  ISA_E_LIMIT, "65537 elements" },
	{ "ap_psum_free_size_limit", "tensor_copy dst=sbuf:bf16[0:128]+32768{1x64} src=psum:fp32[0:128]+4096{1x64}",
	  "tensor_copy dst=sbuf:bf16[0:128]+32768{1x4097} src=psum:bf16[0:128]{1x4097}", ISA_E_LIMIT, "4097 elements" },
	// in PSUM the limit is the elements a partition holds: a broadcast (stride 0) re-reads them
	{ "ap_psum_broadcast_counts_distinct", "tensor_copy dst=sbuf:bf16[0:128]+32768{1x64} src=psum:fp32[0:128]+4096{1x64}",
	  "tensor_copy dst=sbuf:bf16[0:128]+32768{1x7680} src=psum:fp32[0:128]+4096{0x24,1x320}", ISA_OK, "" },
	{ "gpsimd_psum", "memset dst=sbuf:bf16[0:128]+52224{1x64}", "memset dst=psum:bf16[0:128]{1x64}",
	  ISA_E_BAD_SPACE, "psum operand, must be in sbuf" },
	{ "compute_hbm_operand", "memset dst=sbuf:bf16[0:128]+52224{1x64}", "memset dst=hbm(y):fp32[64x128]{1x64}",
	  ISA_E_BAD_SPACE, "hbm operand" },
	{ "ap_bad_syntax", "memset dst=sbuf:bf16[0:128]+52224{1x64}", "memset dst=sbuf:bf16(0:128){1x64}",
	  ISA_E_SYNTAX, "expected DTYPE[" },
	// instruction fields
	{ "unknown_opcode", "    end\n\n.engine tensor", "    frobnicate\n    end\n\n.engine tensor", ISA_E_BAD_OPCODE, "frobnicate" },
	{ "wrong_engine", "    tensor_tensor dst", "    iota dst=sbuf:int32[0:1]{1x1}\n    tensor_tensor dst",
	  ISA_E_BAD_ENGINE, "iota cannot run on the vector engine" },
	{ "missing_operand", "memset dst=sbuf:bf16[0:128]+52224{1x64} value=0", "memset value=0",
	  ISA_E_MISSING_OPERAND, "memset needs dst=" },
	{ "unknown_field", "value=0\n", "value=0 colour=blue\n", ISA_E_SYNTAX, "no field 'colour'" },
	{ "field_twice", "op=add\n    tensor_scalar", "op=add op=max\n    tensor_scalar", ISA_E_SYNTAX, "given twice" },
	{ "bad_enum", "func=silu", "func=swish", ISA_E_BAD_CODE, "swish" },
	{ "queue_range", "desc=sy queue=1", "desc=sy queue=16", ISA_E_BAD_VALUE, "16 (at most 15)" },
	{ "semaphore_range", "desc=sy queue=1 sem=0", "desc=sy queue=1 sem=2", ISA_E_BAD_SEMAPHORE, "semaphore 2, program declares 2" },
	{ "undefined_desc", "desc=sy", "desc=zz", ISA_E_BAD_DESC, "'zz'" },
	{ "nop_cycles_range", ";EXTRA_SYNC", "nop cycles=2000000", ISA_E_BAD_VALUE, "cycles" },
	// streams
	{ "missing_end", "    ;EXTRA_SYNC\n    end\n", "\n", ISA_E_STREAM_END, "last instruction is dma_copy" },
	{ "after_end", ";EXTRA_SYNC\n    end\n", "end\n    nop\n", ISA_E_STREAM_END, "1 instructions after end" },
	{ "barrier_mismatch", ";EXTRA_SYNC", "barrier", ISA_E_BARRIER_MISMATCH, "barrier" },
	{ "instr_before_engine", ";EXTRA_DMA", "nop", ISA_E_SYNTAX, "before any .engine" },
	// TensorE
	{ "stationary_in_psum", "stationary=sbuf:bf16[0:128]+8192{1x128}", "stationary=psum:bf16[0:128]{1x128}",
	  ISA_E_BAD_SPACE, "stationary" },
	{ "stationary_int", "stationary=sbuf:bf16[0:128]+8192{1x128}", "stationary=sbuf:int8[0:128]+8192{1x128}",
	  ISA_E_BAD_DTYPE, "int8 is not a matmul input type" },
	{ "stationary_too_wide", "stationary=sbuf:bf16[0:128]+8192{1x128}", "stationary=sbuf:bf16[0:128]+8192{1x129}",
	  ISA_E_SHAPE_MISMATCH, "M = 129" },
	{ "double_row_not_fp8", "stationary=sbuf:bf16[0:128]+8192{1x128}", "stationary=sbuf:bf16[0:128]+8192{1x128} perf=double_row",
	  ISA_E_BAD_DTYPE, "double_row needs fp8" },
	{ "no_stationary", "    load_stationary stationary=sbuf:bf16[0:128]+8192{1x128}\n", "",
	  ISA_E_NO_STATIONARY, "no load_stationary" },
	{ "mm_dst_in_sbuf", "multiply_moving dst=psum:fp32[0:128]{1x512}", "multiply_moving dst=sbuf:fp32[0:128]{1x512}",
	  ISA_E_BAD_SPACE, "must be in psum" },
	{ "mm_moving_int", "moving=sbuf:bf16[0:128]+16384{1x512}", "moving=sbuf:int16[0:128]+16384{1x512}",
	  ISA_E_BAD_DTYPE, "int16 is not a matmul input" },
	{ "mm_fp32_with_bf16", "moving=sbuf:bf16[0:128]+16384{1x512}", "moving=sbuf:fp32[0:128]+16384{1x512}",
	  ISA_E_BAD_DTYPE, "fp32/tf32 pair" },
	{ "mm_k_mismatch", "moving=sbuf:bf16[0:128]+16384{1x512}", "moving=sbuf:bf16[0:64]+16384{1x512}",
	  ISA_E_SHAPE_MISMATCH, "K = 64 partitions, the stationary has 128" },
	{ "mm_perf_mismatch", "moving=sbuf:bf16[0:128]+16384{1x512}", "moving=sbuf:bf16[0:128]+16384{1x512} perf=double_row",
	  ISA_E_BAD_VALUE, "perf mode differs" },
	{ "mm_dst_partitions", "multiply_moving dst=psum:fp32[0:128]{1x512}", "multiply_moving dst=psum:fp32[0:64]{1x512}",
	  ISA_E_SHAPE_MISMATCH, "M = 128 columns" },
	{ "mm_dst_elems", "multiply_moving dst=psum:fp32[0:128]{1x512}", "multiply_moving dst=psum:fp32[0:128]{1x256}",
	  ISA_E_SHAPE_MISMATCH, "N = 512" },
	{ "mm_dst_bf16_trn2", "multiply_moving dst=psum:fp32[0:128]{1x512}", "multiply_moving dst=psum:bf16[0:128]{1x512}",
	  ISA_E_BAD_DTYPE, "PSUM results are fp32" },
	{ "mm_n_too_large", "multiply_moving dst=psum:fp32[0:128]{1x512} moving=sbuf:bf16[0:128]+16384{1x512}",
	  "multiply_moving dst=psum:fp32[0:128]{1x1024} moving=sbuf:bf16[0:128]+16384{1x1024}",
	  ISA_E_SHAPE_MISMATCH, "N = 1024 (at most 512 on trn2)" },
	{ "mm_crosses_bank", "multiply_moving dst=psum:fp32[0:128]{1x512}", "multiply_moving dst=psum:fp32[0:128]+1024{1x512}",
	  ISA_E_OUT_OF_BOUNDS, "bank boundary" },
	{ "te_transpose_src_psum", "src=sbuf:fp32[0:128]+20480{1x64}", "src=psum:fp32[0:128]+8192{1x64}",
	  ISA_E_BAD_SPACE, "must be in sbuf" },
	{ "te_transpose_dtype", "nc_transpose dst=psum:fp32[0:64]+2048{1x128} src=sbuf:fp32[0:128]+20480{1x64}",
	  "nc_transpose dst=psum:fp16[0:64]+2048{1x128} src=sbuf:bf16[0:128]+20480{1x64}", ISA_E_BAD_DTYPE, "fp16 result of bf16" },
	{ "te_transpose_int", "nc_transpose dst=psum:fp32[0:64]+2048{1x128} src=sbuf:fp32[0:128]+20480{1x64}",
	  "nc_transpose dst=psum:int32[0:64]+2048{1x128} src=sbuf:int32[0:128]+20480{1x64}", ISA_E_BAD_DTYPE, "not a TensorE input" },
	{ "te_transpose_shape", "nc_transpose dst=psum:fp32[0:64]+2048{1x128}", "nc_transpose dst=psum:fp32[0:128]+2048{1x64}",
	  ISA_E_SHAPE_MISMATCH, "transpose of src is [64, 128]" },
	{ "te_transpose_too_big", "src=sbuf:fp32[0:128]+20480{1x64}", "src=sbuf:fp32[0:128]+20480{1x129}",
	  ISA_E_SHAPE_MISMATCH, "at most [128, 128]" },
	{ "ve_transpose_too_big", "nc_transpose dst=sbuf:fp32[0:16]+30720{1x32} src=sbuf:fp32[0:32]+31232{1x16}",
	  "nc_transpose dst=sbuf:fp32[0:16]+30720{1x64} src=sbuf:fp32[0:64]+31232{1x16}", ISA_E_SHAPE_MISMATCH, "at most [32, 32] on vector" },
	// activation
	{ "act_count", "activation dst=sbuf:bf16[0:128]+40960{1x64}", "activation dst=sbuf:bf16[0:128]+40960{1x63}",
	  ISA_E_SHAPE_MISMATCH, "dst has 63" },
	{ "act_scale_shape", "scale=sbuf:fp32[0:128]+41472{1x1}", "scale=sbuf:fp32[0:128]+41472{1x2}",
	  ISA_E_SHAPE_MISMATCH, "per-partition scalar" },
	{ "act_scale_dtype", "scale=sbuf:fp32[0:128]+41472{1x1}", "scale=sbuf:bf16[0:128]+41472{1x1}",
	  ISA_E_BAD_DTYPE, "per-partition scalars are fp32" },
	{ "act_bias_partitions", "bias=0.5", "bias=sbuf:fp32[0:64]+41600{1x1}", ISA_E_SHAPE_MISMATCH, "64 partitions, src has 128" },
	{ "act_reduce_op", "reduce=add reduce_dst", "reduce=subtract reduce_dst", ISA_E_BAD_OPERATOR, "'subtract' cannot be used" },
	{ "act_reduce_without_dst", " reduce_dst=sbuf:fp32[0:128]+41984{1x1}", "", ISA_E_MISSING_OPERAND, "reduce_dst" },
	{ "act_reduce_dst_without_op", "reduce=add reduce_dst", "reduce=bypass reduce_dst", ISA_E_BAD_VALUE, "without a reduce op" },
	{ "act_reduce_dst_shape", "reduce_dst=sbuf:fp32[0:128]+41984{1x1}", "reduce_dst=sbuf:fp32[0:128]+41984{1x2}",
	  ISA_E_SHAPE_MISMATCH, "expected [128, 1]" },
	// tensor_tensor / tensor_scalar
	{ "tt_count", "src1=sbuf:fp32[0:128]+256{1x64}", "src1=sbuf:fp32[0:128]+256{1x32}", ISA_E_SHAPE_MISMATCH, "src1" },
	{ "tt_op_bypass", "op=add\n    tensor_scalar", "op=bypass\n    tensor_scalar", ISA_E_BAD_OPERATOR, "'bypass'" },
	{ "tt_bitwise_float", "op=add\n    tensor_scalar", "op=bitwise_and\n    tensor_scalar", ISA_E_BAD_OPERATOR, "needs integer operands" },
	{ "ts_op0_bypass", "op0=multiply", "op0=bypass", ISA_E_BAD_OPERATOR, "op0 cannot be bypass" },
	{ "ts_scalar1_without_op1", "op1=add scalar1", "op1=bypass scalar1", ISA_E_BAD_VALUE, "without op1" },
	{ "ts_scalar_shape", "scalar1=sbuf:fp32[0:128]+25088{1x1}", "scalar1=sbuf:fp32[0:128]+25088{1x4}",
	  ISA_E_SHAPE_MISMATCH, "per-partition scalar" },
	{ "ts_shift_float", "op0=multiply", "op0=shift_left", ISA_E_BAD_OPERATOR, "needs integer operands" },
	{ "ts_cmp_only_op_in_tt", "op=add\n    tensor_scalar", "op=is_equal\n    tensor_scalar", ISA_OK, "" },
	// reductions
	{ "reduce_op", "op=max axes=2", "op=divide axes=2", ISA_E_BAD_OPERATOR, "'divide' cannot be used" },
	{ "reduce_axes_zero", "op=max axes=2", "op=max axes=0", ISA_E_BAD_VALUE, "mask 0x0" },
	{ "reduce_axes_past_dims", "op=max axes=2", "op=max axes=4", ISA_E_BAD_VALUE, "mask 0x4 for 2 free dims" },
	{ "reduce_dst_elems", "tensor_reduce dst=sbuf:fp32[0:128]+25600{1x4}", "tensor_reduce dst=sbuf:fp32[0:128]+25600{1x16}",
	  ISA_E_SHAPE_MISMATCH, "leaves 4" },
	{ "reduce_dst_partitions", "tensor_reduce dst=sbuf:fp32[0:128]+25600{1x4}", "tensor_reduce dst=sbuf:fp32[0:64]+25600{1x4}",
	  ISA_E_SHAPE_MISMATCH, "64 partitions" },
	{ "preduce_op", "+51712{1x64} op=add", "+51712{1x64} op=pow", ISA_E_BAD_OPERATOR, "'pow'" },
	{ "preduce_dst_partitions", "tensor_partition_reduce dst=sbuf:fp32[0:1]", "tensor_partition_reduce dst=sbuf:fp32[0:2]",
	  ISA_E_SHAPE_MISMATCH, "writes 1" },
	{ "preduce_elems", "tensor_partition_reduce dst=sbuf:fp32[0:1]+51200{1x64}", "tensor_partition_reduce dst=sbuf:fp32[0:1]+51200{1x60}",
	  ISA_E_SHAPE_MISMATCH, "60 elements" },
	// copy / select
	{ "copy_count", "tensor_copy dst=sbuf:bf16[0:128]+32768{1x64}", "tensor_copy dst=sbuf:bf16[0:128]+32768{1x65}",
	  ISA_E_SHAPE_MISMATCH, "dst has 65" },
	{ "select_pred_count", "pred=sbuf:uint8[0:128]+28160{1x8}", "pred=sbuf:uint8[0:128]+28160{1x9}", ISA_E_SHAPE_MISMATCH, "pred" },
	{ "select_on_false_count", "on_false=sbuf:fp32[0:128]+29184{1x8}", "on_false=sbuf:fp32[0:127]+29184{1x8}",
	  ISA_E_SHAPE_MISMATCH, "on_false" },
	// GpSimd affine tools
	{ "topk_k_over_n", "    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0",
	  "    topk dst=sbuf:fp32[0:128]+53248{1x65} src=sbuf:fp32[0:128]+53504{1x64} indices=sbuf:uint32[0:128]+53760{1x65}\n    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0", ISA_E_SHAPE_MISMATCH, "k = 65" },
	{ "topk_indices_int32", "    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0",
	  "    topk dst=sbuf:fp32[0:128]+53248{1x8} src=sbuf:fp32[0:128]+53504{1x64} indices=sbuf:int32[0:128]+53760{1x8}\n    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0", ISA_E_BAD_DTYPE, "uint32, not int32" },
	{ "topk_casts_values", "    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0",
	  "    topk dst=sbuf:bf16[0:128]+53248{1x8} src=sbuf:fp32[0:128]+53504{1x64} indices=sbuf:uint32[0:128]+53760{1x8}\n    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0", ISA_E_BAD_DTYPE, "keeps src's dtype" },
	{ "topk_from_psum", "    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0",
	  "    topk dst=sbuf:fp32[0:128]+53248{1x8} src=psum:fp32[0:128]+0{1x64} indices=sbuf:uint32[0:128]+53760{1x8}\n    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0", ISA_E_BAD_SPACE, "must be in sbuf" },
	{ "topk_partitions_differ", "    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0",
	  "    topk dst=sbuf:fp32[0:128]+53248{1x8} src=sbuf:fp32[0:128]+53504{1x64} indices=sbuf:uint32[0:64]+53760{1x8}\n    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0", ISA_E_SHAPE_MISMATCH, "same partitions" },
	{ "topk_sort_part_of_row", "    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0",
	  "    topk dst=sbuf:fp32[0:128]+53248{1x8} src=sbuf:fp32[0:128]+53504{1x64} indices=sbuf:uint32[0:128]+53760{1x8} sort\n    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0", ISA_E_BAD_VALUE, "whole row" },
	{ "topk_counts_differ", "    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0",
	  "    topk dst=sbuf:fp32[0:128]+53248{1x8} src=sbuf:fp32[0:128]+53504{1x64} indices=sbuf:uint32[0:128]+53760{1x4}\n    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0", ISA_E_SHAPE_MISMATCH, "indices" },
	{ "topk_span_positions_count", "    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0",
	  "    topk dst=sbuf:fp32[0:1]+53248{1x8} src=sbuf:fp32[0:128]+53504{1x64} indices=sbuf:uint32[0:2]+53760{1x8} span\n    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0", ISA_E_SHAPE_MISMATCH, "16 positions for k = 8" },
	{ "iota_float_base", "base=3 pmul=1", "base=3.5 pmul=1", ISA_E_BAD_VALUE, "integers" },
	{ "iota_too_many_mul", "mul=1,2", "mul=1,2,3", ISA_E_BAD_DIMS, "3 multipliers for 2 free dims" },
	{ "affine_cmp", "cmp=is_ge", "cmp=add", ISA_E_BAD_OPERATOR, "'add' cannot be used" },
	{ "affine_count", "affine_select dst=sbuf:fp32[0:128]+50176{1x64}", "affine_select dst=sbuf:fp32[0:128]+50176{1x32}",
	  ISA_E_SHAPE_MISMATCH, "src" },
	// semaphores
	{ "sem_wait_no_sem", "sem_wait sem=1 cond=is_ge", "sem_wait cond=is_ge", ISA_E_MISSING_OPERAND, "sem_wait needs sem=" },
	{ "sem_wait_cond", "sem_wait sem=1 cond=is_ge", "sem_wait sem=1 cond=add", ISA_E_BAD_OPERATOR, "'add'" },
	{ "sem_signal_no_sem", "sem_signal sem=1 op=add", "sem_signal op=add", ISA_E_MISSING_OPERAND, "sem_signal needs sem=" },
	{ "sem_signal_bad_op", "sem_signal sem=1 op=add", "sem_signal sem=1 op=mul", ISA_E_BAD_CODE, "'mul'" },
	{ "sem_value_range", "sem_signal sem=1 op=add value=1", "sem_signal sem=1 op=add value=4294967295", ISA_E_BAD_VALUE, "value" },
};

TEST(IsaValidate, BaseProgramIsValid)
{
	isa_diag d{};
	Program p = assemble(kBaseProgram, &d);
	ASSERT_TRUE(p) << d.msg;
	// and it round-trips
	Program p2 = assemble(disasm(p.get()), &d);
	ASSERT_TRUE(p2) << d.msg;
	EXPECT_EQ(encode(p.get()), encode(p2.get()));
}

class TextCase : public ::testing::TestWithParam<Case> {};

TEST_P(TextCase, RejectedWithNamedField)
{
	expect_mutation_result(kBaseProgram, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Rules, TextCase, ::testing::ValuesIn(kTextCases),
			 [](const ::testing::TestParamInfo<Case> &i) { return std::string(i.param.name); });

}  // namespace

// ---- rules reached through the program structure (builder / binary users)

namespace {

struct StructCase {
	const char *name;
	void (*mutate)(isa_program *p);
	isa_status code;
	const char *expect;
};

isa_instr *find_instr(isa_program *p, int engine, int op)
{
	for (uint32_t i = 0; i < p->n_instr[engine]; i++)
		if (p->stream[engine][i].opcode == op)
			return &p->stream[engine][i];
	return nullptr;
}

isa_instr *memset_instr(isa_program *p) { return find_instr(p, ISA_ENGINE_GPSIMD, ISA_OP_memset); }

const StructCase kStructCases[] = {
	{ "target_invalid", [](isa_program *p) { p->target = 77; }, ISA_E_BAD_TARGET, "target" },
	{ "tensor_name_invalid", [](isa_program *p) { strcpy(p->tensors[1].name, "9y"); },
	  ISA_E_BAD_TENSOR, "name must be" },
	{ "tensor_name_empty", [](isa_program *p) { p->tensors[1].name[0] = 0; }, ISA_E_BAD_TENSOR, "name" },
	{ "tensor_name_duplicate", [](isa_program *p) { strcpy(p->tensors[1].name, "x"); },
	  ISA_E_DUPLICATE_NAME, "tensor 'x'" },
	{ "tensor_dtype_invalid", [](isa_program *p) { p->tensors[1].dtype = 0; }, ISA_E_BAD_DTYPE, "dtype 0" },
	{ "tensor_kind_invalid", [](isa_program *p) { p->tensors[1].kind = 9; }, ISA_E_BAD_TENSOR, "kind 9" },
	{ "tensor_rank_invalid", [](isa_program *p) { p->tensors[1].rank = 9; }, ISA_E_BAD_TENSOR, "rank 9" },
	{ "input_with_offset", [](isa_program *p) { p->tensors[0].offset = 64; }, ISA_E_BAD_TENSOR,
	  "placed at run time" },
	{ "const_not_packed", [](isa_program *p) { p->tensors[3].offset = 4; }, ISA_E_CONST_SIZE,
	  "packed in order" },
	{ "const_short", [](isa_program *p) { p->consts_size = 4; }, ISA_E_CONST_SIZE, "needs 8 bytes, 4 left" },
	{ "consts_unused_bytes", [](isa_program *p) {
		  p->consts = (uint8_t *)realloc(p->consts, 16);
		  p->consts_size = 12;
	  }, ISA_E_CONST_SIZE, "12 constant bytes" },
	{ "dma_name_invalid", [](isa_program *p) { strcpy(p->dma[1].name, "a b"); }, ISA_E_BAD_DESC, "bad name" },
	{ "dma_name_duplicate", [](isa_program *p) { strcpy(p->dma[1].name, "lx"); }, ISA_E_DUPLICATE_NAME, "'lx'" },
	{ "dma_mode_invalid", [](isa_program *p) { p->dma[0].mode = 7; }, ISA_E_BAD_CODE, "mode 7" },
	{ "dma_direct_with_index", [](isa_program *p) { p->dma[0].index = p->dma[2].index; }, ISA_E_BAD_VALUE,
	  "index operand on a direct" },
	{ "ap_space_none", [](isa_program *p) { p->dma[0].dst.space = ISA_SPACE_NONE; }, ISA_E_BAD_SPACE, "code 0" },
	{ "ap_space_invalid", [](isa_program *p) { memset_instr(p)->ap[0].space = 9; }, ISA_E_BAD_SPACE, "code 9" },
	{ "ap_dtype_invalid", [](isa_program *p) { memset_instr(p)->ap[0].dtype = 0; }, ISA_E_BAD_DTYPE, "dtype 0" },
	{ "ap_ndims_zero", [](isa_program *p) { memset_instr(p)->ap[0].ndims = 0; }, ISA_E_BAD_DIMS, "0 free dims" },
	{ "ap_unused_dim_set", [](isa_program *p) { memset_instr(p)->ap[0].size[3] = 2; }, ISA_E_BAD_DIMS,
	  "unused free dim 3" },
	{ "ap_hbm_start", [](isa_program *p) { p->dma[0].src.start = 3; }, ISA_E_BAD_PARTITION, "start partition 3" },
	{ "ap_hbm_tensor_index", [](isa_program *p) { p->dma[0].src.tensor = 40; }, ISA_E_UNDEFINED_TENSOR,
	  "tensor #40" },
	{ "ap_onchip_pstride", [](isa_program *p) { memset_instr(p)->ap[0].pstride = 5; }, ISA_E_BAD_VALUE,
	  "row stride" },
	{ "ap_partitions_over", [](isa_program *p) { memset_instr(p)->ap[0].nparts = 300; }, ISA_E_BAD_PARTITION,
	  "[0, 300)" },
	{ "opcode_invalid", [](isa_program *p) { memset_instr(p)->opcode = 200; }, ISA_E_BAD_OPCODE, "opcode 200" },
	{ "missing_ap", [](isa_program *p) { memset_instr(p)->ap_mask = 0; }, ISA_E_MISSING_OPERAND, "dst" },
	{ "stray_ap_slot", [](isa_program *p) { memset_instr(p)->ap_mask |= 1u << ISA_AP_AUX; }, ISA_E_BAD_VALUE,
	  "not in the format" },
	{ "stray_flag", [](isa_program *p) { memset_instr(p)->flags = ISA_FLAG_ACCUMULATE; }, ISA_E_BAD_VALUE,
	  "flag bits" },
	{ "stray_ivec", [](isa_program *p) { memset_instr(p)->nivec = 1; }, ISA_E_BAD_VALUE, "integer list" },
	{ "ivec_too_long", [](isa_program *p) { find_instr(p, ISA_ENGINE_GPSIMD, ISA_OP_iota)->nivec = 5; },
	  ISA_E_BAD_DIMS, "5 entries" },
	{ "imm_kind_invalid", [](isa_program *p) { memset_instr(p)->imm[0].kind = 5; }, ISA_E_BAD_CODE,
	  "immediate kind 5" },
	{ "scalar_imm_kind_invalid", [](isa_program *p) {
		  find_instr(p, ISA_ENGINE_VECTOR, ISA_OP_tensor_scalar)->imm[0].kind = 5;
	  }, ISA_E_BAD_CODE, "immediate kind 5" },
	{ "enum_out_of_range", [](isa_program *p) {
		  find_instr(p, ISA_ENGINE_SCALAR, ISA_OP_activation)->e[0] = 250;
	  }, ISA_E_BAD_CODE, "value 250" },
	{ "desc_out_of_range", [](isa_program *p) { p->stream[ISA_ENGINE_SYNC][0].u[0] = 99; }, ISA_E_BAD_DESC,
	  "descriptor #99" },
	{ "stream_without_storage", [](isa_program *p) {
		  free(p->stream[ISA_ENGINE_GPSIMD]);
		  p->stream[ISA_ENGINE_GPSIMD] = nullptr;
		  p->cap_instr[ISA_ENGINE_GPSIMD] = 0;
	  }, ISA_E_BAD_VALUE, "without storage" },
	{ "stream_too_long", [](isa_program *p) { p->n_instr[ISA_ENGINE_VECTOR] = ISA_MAX_STREAM_LEN + 1; },
	  ISA_E_LIMIT, "instructions" },
};

void PrintTo(const StructCase &c, std::ostream *os) { *os << c.name; }

class StructCaseTest : public ::testing::TestWithParam<StructCase> {};

TEST_P(StructCaseTest, RejectedWithNamedField)
{
	const StructCase &c = GetParam();
	isa_diag d{};
	Program p = assemble(kBaseProgram, &d);
	ASSERT_TRUE(p) << d.msg;
	ASSERT_EQ(isa_validate(p.get(), &d), ISA_OK);
	c.mutate(p.get());
	isa_status st = isa_validate(p.get(), &d);
	EXPECT_EQ(st, c.code) << isa_status_name(st) << ": " << d.msg;
	EXPECT_NE(std::string(d.msg).find(c.expect), std::string::npos) << d.msg;
	// an invalid program is never encoded or printed
	uint8_t *buf = nullptr;
	size_t len = 0;
	EXPECT_NE(isa_program_encode(p.get(), &buf, &len, &d), ISA_OK);
	EXPECT_EQ(buf, nullptr);
	if (p->n_instr[ISA_ENGINE_VECTOR] > ISA_MAX_STREAM_LEN)
		p->n_instr[ISA_ENGINE_VECTOR] = 0;   // keep the free path honest
}

INSTANTIATE_TEST_SUITE_P(Rules, StructCaseTest, ::testing::ValuesIn(kStructCases),
			 [](const ::testing::TestParamInfo<StructCase> &i) {
				 return std::string(i.param.name);
			 });

// Messages name the engine stream and instruction index.
TEST(IsaValidate, MessageNamesStreamIndexAndField)
{
	std::string text = mutate("stationary=sbuf:bf16[0:128]+8192{1x128}", "stationary=sbuf:bf16[0:128]+8192{1x129}");
	isa_diag d{};
	Program p = assemble(text, &d);
	ASSERT_FALSE(p);
	EXPECT_EQ(d.engine, ISA_ENGINE_TENSOR);
	EXPECT_EQ(d.index, 1);
	EXPECT_STREQ(d.field, "stationary");
	EXPECT_NE(std::string(d.msg).find("tensor stream, instruction 1, field stationary"), std::string::npos)
		<< d.msg;
}

// Target geometry: the same operand is legal on trn3 (bigger SBUF), not trn2.
TEST(IsaValidate, GeometryFollowsTarget)
{
	std::string big = mutate("memset dst=sbuf:bf16[0:128]+52224{1x64}",
				 "memset dst=sbuf:bf16[0:128]+240000{1x64}");
	isa_diag d{};
	EXPECT_FALSE(assemble(big, &d));
	EXPECT_EQ(d.code, ISA_E_OUT_OF_BOUNDS);
	std::string on_trn3 = big;
	on_trn3.replace(on_trn3.find(".target trn2"), 12, ".target trn3");
	EXPECT_TRUE(assemble(on_trn3, &d)) << d.msg;
	// trn1 has no double_row
	std::string dr = mutate("load_stationary stationary=sbuf:bf16[0:128]+8192{1x128}\n    multiply_moving dst=psum:fp32[0:128]{1x512} moving=sbuf:bf16[0:128]+16384{1x512}",
				"load_stationary stationary=sbuf:fp8_e4m3[0:128]+8192{1x128} perf=double_row\n    multiply_moving dst=psum:fp32[0:128]{1x512} moving=sbuf:fp8_e5m2[0:128]+16384{1x512} perf=double_row");
	EXPECT_TRUE(assemble(dr, &d)) << d.msg;
	dr.replace(dr.find(".target trn2"), 12, ".target trn1");
	EXPECT_FALSE(assemble(dr, &d));
	EXPECT_NE(std::string(d.msg).find("not supported on trn1"), std::string::npos) << d.msg;
	// trn3 takes bf16 PSUM results up to N = 8192 ... in the whole PSUM partition
	std::string n4k = mutate("multiply_moving dst=psum:fp32[0:128]{1x512} moving=sbuf:bf16[0:128]+16384{1x512}",
				 "multiply_moving dst=psum:fp32[0:128]{1x4096} moving=sbuf:bf16[0:128]+16384{1x4096}");
	EXPECT_FALSE(assemble(n4k, &d));
	n4k.replace(n4k.find(".target trn2"), 12, ".target trn3");
	EXPECT_TRUE(assemble(n4k, &d)) << d.msg;
}

}  // namespace
