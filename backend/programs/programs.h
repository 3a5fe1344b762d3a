/*
 * programs.h -- kernel generators: ISA programs for ATen ops, emitted with the
 * program builder (neuronsim/isa.h).  Each returns the program's binary form
 * (free() it) or a status with diag filled.
 */
#ifndef NSIM_BACKEND_KERNELS_H
#define NSIM_BACKEND_KERNELS_H

#include <stdbool.h>

#include "neuronsim/isa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[n] = a[n] <alu> b[n], contiguous, one dtype; inputs "a", "b", output "out" */
typedef struct nk_binary {
	int alu;
	int dtype;
	uint64_t n;
} nk_binary;
isa_status nk_binary_program(int target, const nk_binary *prm, uint8_t **bin, size_t *len,
			     isa_diag *diag);

/* out[r, c] = a[r, c] <alu> b, a and out [rows, cols] row-major; b is [rows, 1]
 * (b_per_row) or [cols], broadcast by stride-0 DMA patterns */
typedef struct nk_broadcast {
	int alu;
	int dtype;
	uint64_t rows;
	uint64_t cols;
	bool b_per_row;
	bool b_one;           /* b is a single element (rows x cols is just n) */
} nk_broadcast;
isa_status nk_broadcast_program(int target, const nk_broadcast *prm, uint8_t **bin, size_t *len,
				isa_diag *diag);

/* out = a fused chain of up to NK_CHAIN_MAX VectorE steps over nin (1..3)
 * inputs of n elements (addcmul, addcdiv, lerp as one program): the running
 * value starts as input `first` and stays fp32 in SBUF between steps; step
 * k combines it with input `input[k]` (tensor_tensor; input_first: input
 * <alu> value, else value <alu> input) or, for input -1, with the immediate
 * imm[k] (tensor_scalar); the last step writes out's dtype. */
#define NK_CHAIN_MAX 4
typedef struct nk_chain {
	int dtype;            /* every input's and out's */
	uint64_t n;
	unsigned nin, first, nsteps;
	int alu[NK_CHAIN_MAX];
	int input[NK_CHAIN_MAX];
	float imm[NK_CHAIN_MAX];
	bool input_first[NK_CHAIN_MAX];
} nk_chain;
isa_status nk_chain_program(int target, const nk_chain *prm, uint8_t **bin, size_t *len, isa_diag *diag);

/* out[n] = func(scale * a[n]) on ScalarE; input "a", output "out" */
typedef struct nk_unary {
	int func;
	float scale;
	int dtype;
	uint64_t n;
} nk_unary;
isa_status nk_unary_program(int target, const nk_unary *prm, uint8_t **bin, size_t *len,
			    isa_diag *diag);

/* out[n] = (a[n] <alu> s) <alu2> s2 on VectorE (tensor_scalar; alu2 may be
 * ISA_ALU_bypass); input "a", output "out" */
typedef struct nk_scalar {
	int alu;
	float s;
	int alu2;
	float s2;
	int dtype;
	uint64_t n;
} nk_scalar;
isa_status nk_scalar_program(int target, const nk_scalar *prm, uint8_t **bin, size_t *len,
			     isa_diag *diag);

/* out[b, m, n] = sum_k a[b, m, k] * b[b, k, n] (+ bias[n]); out contiguous.
 * a and b are flat tensors of a_elems / b_elems elements addressed by
 * element strides (batch, row, col); each needs a unit stride in one of its
 * two matrix dims (row-major or transposed). */
typedef struct nk_matmul {
	int dtype;                 /* a, b, bias and out: fp32, bf16 or fp16 */
	uint64_t batch, m, k, n;
	int64_t a_stride[3];       /* batch, m, k */
	int64_t b_stride[3];       /* batch, k, n */
	uint64_t a_elems, b_elems;
	bool bias;                 /* input "bias" [n] */
	int out_dtype;             /* 0: dtype; else a float type (e.g. fp32 scores) */
	int act;                   /* epilogue: out = act(product + bias) (ISA_ACT_identity: none) */
	bool residual;             /* epilogue: out = product + bias + "res" [batch, m, n] (no act) */
} nk_matmul;
isa_status nk_matmul_program(int target, const nk_matmul *mm, uint8_t **bin, size_t *len,
			     isa_diag *diag);
/* whether nk_matmul_program takes mm (its shape, strides and SBUF plan) */
bool nk_matmul_fits(int target, const nk_matmul *mm);

/* Scaled-dot-product attention's forward as one flash-attention tile loop
 * (attention.c): out[b, h, l, :] = softmax(scale * q[b, h, l, :] .
 * k[b, h / rep, j, :] + mask[b, h, l, j]) @ v[b, h / rep, j, :] over keys j,
 * rep = heads / kv_heads (grouped-query attention); with `causal`, keys
 * j > l are hidden (top-left aligned, as PyTorch's is_causal).  q, k, v and
 * mask are flat tensors addressed by element strides (batch, head, row) with
 * a unit stride along the last dim; the mask is additive (a float type) or
 * bool (true: take part); out is contiguous [batch, heads, l, d]. */
typedef struct nk_attention {
	int dtype;                 /* q, k, v and out: fp32, bf16 or fp16 */
	uint64_t batch, heads, kv_heads, l, s, d;
	int64_t q_stride[3], k_stride[3], v_stride[3];
	uint64_t q_elems, k_elems, v_elems;
	float scale;               /* > 0 */
	bool causal;
	int mask_dtype;            /* 0: no "mask" input */
	int64_t mask_stride[3];
	uint64_t mask_elems;
} nk_attention;
isa_status nk_attention_program(int target, const nk_attention *at, uint8_t **bin, size_t *len,
				isa_diag *diag);
/* whether nk_attention_program takes these parameters (shapes, strides, SBUF) */
bool nk_attention_covered(int target, const nk_attention *at);

/* out[n] (bool) = a[n] <cmp> b[n], or a[n] <cmp> s with `scalar` */
typedef struct nk_compare {
	int alu;
	int dtype;
	bool scalar;
	float s;
	uint64_t n;
} nk_compare;
isa_status nk_compare_program(int target, const nk_compare *prm, uint8_t **bin, size_t *len,
			      isa_diag *diag);
/* out[n] (out_dtype) = a[n] (in_dtype) converted on VectorE (integer and
 * bool types to any 32-bit-or-smaller type; values as CPU PyTorch converts
 * them when exact in fp32) */
typedef struct nk_cast {
	int in_dtype;
	int out_dtype;
	uint64_t n;
} nk_cast;
isa_status nk_cast_program(int target, const nk_cast *prm, uint8_t **bin, size_t *len,
			   isa_diag *diag);
/* out[n] = a[n] (bool) ? b[n] : c[n]; inputs "a", "b", "c"; b_one / c_one:
 * that operand is a single element, for every n (torch.where(m, 0.0, x)) */
typedef struct nk_select {
	int dtype;
	uint64_t n;
	bool b_one, c_one;
} nk_select;
isa_status nk_select_program(int target, const nk_select *prm, uint8_t **bin, size_t *len,
			     isa_diag *diag);

/* 64-bit integer elementwise ops on (low, high) int32 pairs (int64.c):
 * "a", "b" [2n] uint32 in ("a" [n] int32 for FROM_I32, fp32 for FROM_FLOAT);
 * "out" [2n] uint32, or [n] out_dtype for TO_FLOAT / TO_BOOL */
enum nk_i64_op {
	NK_I64_ADD, NK_I64_SUB, NK_I64_TO_FLOAT, NK_I64_TO_BOOL, NK_I64_FROM_I32,
	NK_I64_FROM_FLOAT,                            /* truncated, x86's INT64_MIN out of range */
	NK_I64_EQ, NK_I64_NE, NK_I64_LT, NK_I64_LE,   /* bool results */
	NK_I64_MULS,                                  /* a * c */
	NK_I64_MUL,                                   /* a * b */
	NK_I64_NUM_OPS
};
typedef struct nk_int64 {
	int op;
	int out_dtype;
	uint64_t n;
	int32_t c;
} nk_int64;
isa_status nk_int64_program(int target, const nk_int64 *prm, uint8_t **bin, size_t *len,
			    isa_diag *diag);

/* tril (upper false) / triu of `batch` [rows, cols] matrices, diagonal k;
 * "x" in, "out" out */
typedef struct nk_tri {
	int dtype;
	uint64_t batch;
	uint64_t rows;
	uint64_t cols;
	int64_t k;
	bool upper;
} nk_tri;
isa_status nk_tri_program(int target, const nk_tri *prm, uint8_t **bin, size_t *len,
			  isa_diag *diag);

#define NK_MAX_RANK 8

/* dst[idx] = src[idx] over shape (element strides per side, src may have
 * stride 0); src_dtype -> dst_dtype equal or both float.  Tensors "src" and
 * "dst" are flat, src_elems / dst_elems long. */
typedef struct nk_copy {
	int src_dtype, dst_dtype;
	unsigned rank;
	uint64_t shape[NK_MAX_RANK];
	int64_t src_stride[NK_MAX_RANK], dst_stride[NK_MAX_RANK];
	uint64_t src_elems, dst_elems;
} nk_copy;
isa_status nk_copy_program(int target, const nk_copy *c, uint8_t **bin, size_t *len,
			   isa_diag *diag);

/* row-wise ops over x[rows, cols] (see rows.c); "x" in, "out" [rows] or
 * [rows, cols] (argmax: int64 as int32 pairs), layer norm also "w", "b"
 * [cols] in (affine) and "mean", "rstd" [rows] out (out_dtype) */
enum nk_row_op {
	NK_ROW_SUM, NK_ROW_MEAN, NK_ROW_MAX, NK_ROW_MIN, NK_ROW_ARGMAX,
	NK_ROW_SOFTMAX, NK_ROW_LOG_SOFTMAX, NK_ROW_LAYER_NORM,
	NK_ROW_SAFE_SOFTMAX,       /* softmax, 0 for a row of -inf (as aten::_safe_softmax) */
	NK_ROW_ARGMIN,
	NK_ROW_NUM_OPS
};
typedef struct nk_rows {
	int op;
	int in_dtype, out_dtype;   /* float types */
	uint64_t rows, cols;
	float eps;                 /* layer norm */
	bool affine;
	uint32_t spread;           /* sum / mean / max / min of one row cut over this many
				      partitions (cols a multiple of it), 0: a row per partition */
} nk_rows;
/* out[a, n] = sum over m of x[a, m, n] (mean: / m), x contiguous [a, m, n]
 * (a middle dim reduced: GQA's gradient over the repeated heads), on
 * VectorE; "x" in (in_dtype), "out" [a, n] out (out_dtype), fp32 sums */
typedef struct nk_slabs {
	bool mean;
	int in_dtype, out_dtype;
	uint64_t a, m, n;
} nk_slabs;
isa_status nk_slabs_program(int target, const nk_slabs *op, uint8_t **bin, size_t *len, isa_diag *diag);

isa_status nk_rows_program(int target, const nk_rows *op, uint8_t **bin, size_t *len,
			   isa_diag *diag);

/* out[o, j, :] = table[o, index[j], :]; "table" [outer*rows*inner], "index"
 * int32 [nidx] (int64: [2*nidx] pairs), "out" [outer*nidx*inner] */
typedef struct nk_gather {
	int dtype;                 /* any ISA dtype (the element unit moved) */
	uint64_t outer, rows, inner, nidx;
	bool index_int64;
	bool scatter;              /* table[o, index[j], :] = src[o, j, :] instead */
	bool accumulate;           /* with scatter: += (DMA scatter_add; repeats add up) */
} nk_gather;
isa_status nk_gather_program(int target, const nk_gather *g, uint8_t **bin, size_t *len,
			     isa_diag *diag);

/* "out"[n] = value, or start + i * step (iota: int32/int64/fp32) */
typedef struct nk_fill {
	int dtype;                 /* ISA dtype of an element (int64: int32 with int64 set) */
	bool int64;
	uint64_t n;
	bool iota;
	int64_t start, step;       /* iota */
	int64_t ivalue;            /* fill, integer types */
	float fvalue;              /* fill, float types */
} nk_fill;
isa_status nk_fill_program(int target, const nk_fill *f, uint8_t **bin, size_t *len,
			   isa_diag *diag);

/* "out"[n] random (fp32/bf16/fp16) from the GpSimd PRNG seeded by "seeds"
 * (uint32 [128 x 6]: one XORWOW state per lane); NeuronCore-v3+ */
enum { NK_RAND_UNIFORM, NK_RAND_NORMAL };
typedef struct nk_random {
	int kind;
	int dtype;
	uint64_t n;
	float a, b;                /* uniform [a, b); normal mean a, std b */
} nk_random;
isa_status nk_random_program(int target, const nk_random *r, uint8_t **bin, size_t *len,
			     isa_diag *diag);

/* "values"/"indices" (int32) [rows, cols] = x sorted along rows (stable;
 * NaN last, first when descending); "scratch_k"/"scratch_i" are fp32
 * scratch of nk_sort_scratch elements each */
typedef struct nk_sort {
	int dtype;                 /* fp32, bf16, fp16 */
	uint64_t rows, cols;       /* cols <= 2^19 */
	bool descending;
} nk_sort;
isa_status nk_sort_program(int target, const nk_sort *o, uint8_t **bin, size_t *len, isa_diag *diag);
uint64_t nk_sort_scratch(const nk_sort *o);

/* "values" [rows, k] (x's dtype) and "indices" [rows, k] (uint32) = the k
 * largest (smallest) of each row of x [rows, cols] in CPU PyTorch's order
 * (GpSimd topk); sort: the whole row (k = cols) as CPU's unstable sort */
typedef struct nk_topk {
	int dtype;                 /* any of <= 4 bytes */
	uint64_t rows, cols, k;    /* a row in one partition, or (longer) over several:
	                              cols and k each n = Pn x Fn, Pn <= 128 (topk.c) */
	bool largest, sorted, sort;
} nk_topk;
bool nk_topk_fits(int target, const nk_topk *o);
isa_status nk_topk_program(int target, const nk_topk *o, uint8_t **bin, size_t *len, isa_diag *diag);

/* out[n] = a fused pointwise region (fused.c): nsteps steps over nin inputs
 * "in0".."in7", the output "out" of n elements of `dtype`.  Step k's
 * operands a[k] (and b[k]) are inputs (0..nin-1) or earlier steps (nin + j);
 * the last step is "out".  Kinds: tensor_tensor (VectorE, alu op),
 * tensor_scalar (VectorE, (x op imm) op2 imm2, or imm op x with reverse),
 * activation (ScalarE, func op of imm * x + imm2).  Intermediates stay fp32
 * in SBUF unless sdt[k] names the dtype step k rounds to (a cast).
 *
 * Inputs keep their own float dtype.  Seen as [n / cols, cols] (cols: the
 * output's innermost length; 0 when every input is FULL), an input is FULL
 * (n elements, as the output), ROW (one element per row, broadcast along
 * it) or PERIOD (in_period elements, a multiple of cols dividing n, repeated:
 * the output's trailing dims).  Only tensor_tensor steps read broadcast
 * inputs. */
#define NK_FUSED_MAX_IN 8
#define NK_FUSED_MAX_STEPS 24
enum { NK_FUSED_TT, NK_FUSED_TS, NK_FUSED_ACT };
enum { NK_FUSED_FULL, NK_FUSED_ROW, NK_FUSED_PERIOD };
typedef struct nk_fused {
	int dtype;
	uint64_t n;
	uint64_t cols;
	unsigned nin, nsteps;
	int in_dtype[NK_FUSED_MAX_IN];
	int in_mode[NK_FUSED_MAX_IN];
	uint64_t in_period[NK_FUSED_MAX_IN];
	int kind[NK_FUSED_MAX_STEPS];
	int op[NK_FUSED_MAX_STEPS];
	int op2[NK_FUSED_MAX_STEPS];
	float imm[NK_FUSED_MAX_STEPS], imm2[NK_FUSED_MAX_STEPS];
	int a[NK_FUSED_MAX_STEPS], b[NK_FUSED_MAX_STEPS];
	bool reverse[NK_FUSED_MAX_STEPS];
	int sdt[NK_FUSED_MAX_STEPS];
} nk_fused;
isa_status nk_fused_program(int target, const nk_fused *f, uint8_t **bin, size_t *len, isa_diag *diag);

/* A generated program's end: validate (isa_builder_finish) and encode into
 * bin/len; nk_finish first makes `engine` wait until semaphore `sem`
 * reaches `count` (every store landed). */
isa_status nk_encode(isa_program *p, uint8_t **bin, size_t *len, isa_diag *diag);
isa_status nk_finish(isa_program *p, int engine, uint32_t sem, uint32_t count, uint8_t **bin, size_t *len,
		     isa_diag *diag);

void nk_fail(isa_diag *diag, isa_status code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
