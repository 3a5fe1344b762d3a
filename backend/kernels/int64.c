/*
 * int64.c -- kernel generator for 64-bit integer elementwise ops.  The ISA
 * has no 64-bit type, so an int64 element is a (low uint32, high int32)
 * pair and VectorE's integer ALU (exact, results wrapped to 32 bits)
 * computes on the halves:
 *
 *   add: lo = a.lo + b.lo; carry = lo < a.lo (unsigned); hi = a.hi + b.hi + carry
 *   sub: lo = a.lo - b.lo; borrow = a.lo < b.lo;         hi = a.hi - b.hi - borrow
 *   to bool: lo | hi != 0
 *   from int32: lo = a, hi = -(a < 0)
 *   times b: lo = low(al * bl), hi = high32(al * bl) + al * bh + ah * bl (16-bit limbs)
 *   times c (int32): lo = low(a.lo * c); hi = a.hi * c + high(a.lo * c)
 *   to float: h = a.hi + (a.lo as int32 < 0); f = h * 2^32 + (a.lo as int32)
 *     (one rounding, as CPU PyTorch, whenever |value| < 2^55)
 *
 * Tiles of up to 128 x 1024 elements; Sync loads, VectorE computes, GpSimd
 * stores; two buffer sets.
 */
#include "kernels.h"

#include <string.h>

#define P 128u
#define F 1024u
enum { S_LOAD, S_DONE, S_STORE, NSEM };

static isa_ap pick(int dt, uint32_t r, uint64_t off, uint32_t f, unsigned half)
{
	int32_t stride = 2;
	isa_ap a = isa_ap_sbuf(dt, 0, r, off + 4u * half, f);
	return isa_ap_dims(a, 1, &stride, &f);
}

isa_status nk_int64_program(int target, const nk_int64 *prm, uint8_t **bin, size_t *len,
			    isa_diag *diag)
{
	int op = prm->op, out_dtype = prm->out_dtype;
	uint64_t n = prm->n;
	int32_t c = prm->c;
	*bin = NULL;
	*len = 0;
	bool cmp = op >= NK_I64_EQ && op <= NK_I64_LE;
	bool to_float = op == NK_I64_TO_FLOAT || op == NK_I64_TO_BOOL || cmp;   /* [n] results */
	bool from32 = op == NK_I64_FROM_I32;
	if (!n || n > ((uint64_t)1 << 36) || op < 0 || op >= NK_I64_NUM_OPS ||
	    (op == NK_I64_TO_FLOAT && !isa_dtype_is_float(out_dtype)) ||
	    ((op == NK_I64_TO_BOOL || cmp) && out_dtype != ISA_DT_bool)) {
		nk_fail(diag, ISA_E_LIMIT, "int64 kernel: op %d over %llu elements", op, (unsigned long long)n);
		return ISA_E_LIMIT;
	}
	isa_status st = ISA_E_NOMEM;
	isa_program *p = isa_program_new(target);
	if (!p)
		return st;
	p->num_semaphores = NSEM;
	bool muls = op == NK_I64_MULS;
	unsigned nin = (to_float && !cmp) || from32 || muls ? 1 : 2;
	const uint64_t temps = 2 * 4 * 8u * F;   /* 8 scratch rows after the two buffer sets */
	uint64_t s2[1] = { 2 * n }, s1[1] = { n };
	int ta = from32 ? isa_builder_tensor(p, "a", ISA_DT_int32, ISA_TK_INPUT, 1, s1, diag)
			: isa_builder_tensor(p, "a", ISA_DT_uint32, ISA_TK_INPUT, 1, s2, diag);
	int tb = nin == 2 ? isa_builder_tensor(p, "b", ISA_DT_uint32, ISA_TK_INPUT, 1, s2, diag) : 0;
	int to = to_float ? isa_builder_tensor(p, "out", out_dtype, ISA_TK_OUTPUT, 1, s1, diag)
			  : isa_builder_tensor(p, "out", ISA_DT_uint32, ISA_TK_OUTPUT, 1, s2, diag);
	if (ta < 0 || tb < 0 || to < 0) {
		st = diag->code;
		goto free_program;
	}
	/* per buffer set: a, b, out pairs (8 KiB each) and a scratch row */
	const uint64_t slot = 8u * F, set = 4 * slot;
	uint64_t f0 = (n + P - 1) / P;
	uint32_t f = (uint32_t)(f0 < F ? f0 : F);
	uint32_t tiles = 0;
	for (uint64_t s = 0; s < n; tiles++) {
		uint64_t left = n - s;
		uint32_t r = (uint32_t)(left >= (uint64_t)f * P ? P : left / f), w = f;
		if (r == 0) {
			r = 1;
			w = (uint32_t)left;
		}
		uint64_t b = (tiles % 2) * set;
		uint64_t a_off = b, b_off = b + slot, o_off = b + 2 * slot, t_off = b + 3 * slot;
		if (tiles >= 2 && (st = isa_builder_sem_wait(p, ISA_ENGINE_SYNC, S_STORE, ISA_ALU_is_ge, tiles - 1)))
			goto free_program;
		for (unsigned i = 0; i < nin; i++) {
			isa_ap sb = isa_ap_sbuf(ISA_DT_uint32, 0, r, i ? b_off : a_off, 2 * w);
			isa_ap hb = isa_ap_hbm(ISA_DT_uint32, (uint32_t)(i ? tb : ta), s * 8, r, 2 * (int64_t)w, 2 * w);
			if (from32) {
				sb = isa_ap_sbuf(ISA_DT_int32, 0, r, a_off, w);
				hb = isa_ap_hbm(ISA_DT_int32, (uint32_t)ta, s * 4, r, w, w);
			}
			int d = isa_builder_dma(p, "", ISA_DMA_DIRECT, &sb, &hb, NULL, diag);
			if (d < 0 || (st = isa_builder_dma_copy(p, ISA_ENGINE_SYNC, (uint32_t)d, i, S_LOAD, 1))) {
				st = d < 0 ? diag->code : st;
				goto free_program;
			}
		}
		if ((st = isa_builder_sem_wait(p, ISA_ENGINE_VECTOR, S_LOAD, ISA_ALU_is_ge, nin * (tiles + 1))))
			goto free_program;
		isa_ap alo = pick(ISA_DT_uint32, r, a_off, w, 0), ahi = pick(ISA_DT_int32, r, a_off, w, 1);
		isa_ap blo = pick(ISA_DT_uint32, r, b_off, w, 0), bhi = pick(ISA_DT_int32, r, b_off, w, 1);
		isa_ap olo = pick(ISA_DT_uint32, r, o_off, w, 0), ohi = pick(ISA_DT_int32, r, o_off, w, 1);
		isa_ap tmp = isa_ap_sbuf(ISA_DT_int32, 0, r, t_off, w);
		isa_ap fo = isa_ap_sbuf(ISA_DT_fp32, 0, r, o_off, w);
		isa_ap slo = pick(ISA_DT_int32, r, a_off, w, 0);
		const int V = ISA_ENGINE_VECTOR;
		isa_imm z = isa_imm_i32(0);
		if (op == NK_I64_ADD) {
			st = isa_builder_tensor_tensor(p, V, olo, alo, blo, ISA_ALU_add);
			st = st ? st : isa_builder_tensor_tensor(p, V, tmp, olo, alo, ISA_ALU_is_lt);
			st = st ? st : isa_builder_tensor_tensor(p, V, ohi, ahi, bhi, ISA_ALU_add);
			st = st ? st : isa_builder_tensor_tensor(p, V, ohi, ohi, tmp, ISA_ALU_add);
		} else if (op == NK_I64_SUB) {
			st = isa_builder_tensor_tensor(p, V, tmp, alo, blo, ISA_ALU_is_lt);
			st = st ? st : isa_builder_tensor_tensor(p, V, olo, alo, blo, ISA_ALU_subtract);
			st = st ? st : isa_builder_tensor_tensor(p, V, ohi, ahi, bhi, ISA_ALU_subtract);
			st = st ? st : isa_builder_tensor_tensor(p, V, ohi, ohi, tmp, ISA_ALU_subtract);
		} else if (op == NK_I64_MUL) {
			/* (ah, al) * (bh, bl) mod 2^64: lo = al * bl (low word);
			 * hi = high32(al * bl) + al * bh + ah * bl, high32 from 16-bit limbs
			 * (every partial product < 2^32, so 32-bit scratch is exact) */
			isa_ap T[8];
			for (int k = 0; k < 8; k++)
				T[k] = isa_ap_sbuf(ISA_DT_uint32, 0, r, temps + (uint64_t)k * 4 * F, w);
			isa_imm m16 = isa_imm_i32(0xFFFF), s16 = isa_imm_i32(16);
			enum { A0, A1, B0, B1, P00, P01, P10, P11 };
			st = isa_builder_tensor_scalar(p, V, T[A0], alo, ISA_ALU_bitwise_and, m16, ISA_ALU_bypass, z);
			st = st ? st : isa_builder_tensor_scalar(p, V, T[A1], alo, ISA_ALU_shift_right, s16, ISA_ALU_bypass, z);
			st = st ? st : isa_builder_tensor_scalar(p, V, T[B0], blo, ISA_ALU_bitwise_and, m16, ISA_ALU_bypass, z);
			st = st ? st : isa_builder_tensor_scalar(p, V, T[B1], blo, ISA_ALU_shift_right, s16, ISA_ALU_bypass, z);
			st = st ? st : isa_builder_tensor_tensor(p, V, T[P00], T[A0], T[B0], ISA_ALU_multiply);
			st = st ? st : isa_builder_tensor_tensor(p, V, T[P01], T[A0], T[B1], ISA_ALU_multiply);
			st = st ? st : isa_builder_tensor_tensor(p, V, T[P10], T[A1], T[B0], ISA_ALU_multiply);
			st = st ? st : isa_builder_tensor_tensor(p, V, T[P11], T[A1], T[B1], ISA_ALU_multiply);
			/* s1 = (p00 >> 16) + (p01 & 0xffff) + (p10 & 0xffff) into A0; its carry */
			st = st ? st : isa_builder_tensor_scalar(p, V, T[A0], T[P00], ISA_ALU_shift_right, s16, ISA_ALU_bypass, z);
			st = st ? st : isa_builder_tensor_scalar(p, V, T[A1], T[P01], ISA_ALU_bitwise_and, m16, ISA_ALU_bypass, z);
			st = st ? st : isa_builder_tensor_tensor(p, V, T[A0], T[A0], T[A1], ISA_ALU_add);
			st = st ? st : isa_builder_tensor_scalar(p, V, T[A1], T[P10], ISA_ALU_bitwise_and, m16, ISA_ALU_bypass, z);
			st = st ? st : isa_builder_tensor_tensor(p, V, T[A0], T[A0], T[A1], ISA_ALU_add);
			/* h = (s1 >> 16) + p11 + (p01 >> 16) + (p10 >> 16) into B0 */
			st = st ? st : isa_builder_tensor_scalar(p, V, T[B0], T[A0], ISA_ALU_shift_right, s16, ISA_ALU_bypass, z);
			st = st ? st : isa_builder_tensor_tensor(p, V, T[B0], T[B0], T[P11], ISA_ALU_add);
			st = st ? st : isa_builder_tensor_scalar(p, V, T[A1], T[P01], ISA_ALU_shift_right, s16, ISA_ALU_bypass, z);
			st = st ? st : isa_builder_tensor_tensor(p, V, T[B0], T[B0], T[A1], ISA_ALU_add);
			st = st ? st : isa_builder_tensor_scalar(p, V, T[A1], T[P10], ISA_ALU_shift_right, s16, ISA_ALU_bypass, z);
			st = st ? st : isa_builder_tensor_tensor(p, V, T[B0], T[B0], T[A1], ISA_ALU_add);
			/* the cross terms (low words only) */
			st = st ? st : isa_builder_tensor_tensor(p, V, T[A1], alo, bhi, ISA_ALU_multiply);
			st = st ? st : isa_builder_tensor_tensor(p, V, T[B0], T[B0], T[A1], ISA_ALU_add);
			st = st ? st : isa_builder_tensor_tensor(p, V, T[A1], ahi, blo, ISA_ALU_multiply);
			st = st ? st : isa_builder_tensor_tensor(p, V, ohi, T[B0], T[A1], ISA_ALU_add);
			st = st ? st : isa_builder_tensor_tensor(p, V, olo, alo, blo, ISA_ALU_multiply);
		} else if (muls) {
			/* a * c: lo * c is exact in the 64-bit ALU; its low word is the
			 * result's, its high word carries into hi * c */
			isa_imm ci = isa_imm_i32(c);
			st = isa_builder_tensor_scalar(p, V, olo, alo, ISA_ALU_multiply, ci, ISA_ALU_bypass, z);
			st = st ? st : isa_builder_tensor_scalar(p, V, tmp, alo, ISA_ALU_multiply, ci,
								 ISA_ALU_shift_right, isa_imm_i32(32));
			st = st ? st : isa_builder_tensor_scalar(p, V, ohi, ahi, ISA_ALU_multiply, ci, ISA_ALU_bypass, z);
			st = st ? st : isa_builder_tensor_tensor(p, V, ohi, ohi, tmp, ISA_ALU_add);
		} else if (from32) {   /* lo = a; hi = -(a < 0) */
			isa_ap a32 = isa_ap_sbuf(ISA_DT_int32, 0, r, a_off, w);
			st = isa_builder_tensor_copy(p, V, olo, a32);
			st = st ? st : isa_builder_tensor_scalar(p, V, ohi, a32, ISA_ALU_is_lt, z, ISA_ALU_multiply,
								 isa_imm_i32(-1));
		} else if (cmp) {
			/* eq: lo == lo' and hi == hi'; lt/le: hi < hi' (signed), or
			 * hi == hi' and lo <(=) lo' (unsigned) */
			isa_ap ob = isa_ap_sbuf(ISA_DT_bool, 0, r, o_off, w);
			int lo_cmp = op == NK_I64_LT ? ISA_ALU_is_lt : op == NK_I64_LE ? ISA_ALU_is_le : ISA_ALU_is_equal;
			st = isa_builder_tensor_tensor(p, V, tmp, alo, blo, lo_cmp);
			st = st ? st : isa_builder_tensor_tensor(p, V, ob, ahi, bhi, ISA_ALU_is_equal);
			st = st ? st : isa_builder_tensor_tensor(p, V, ob, ob, tmp, ISA_ALU_logical_and);
			if (op == NK_I64_LT || op == NK_I64_LE) {
				st = st ? st : isa_builder_tensor_tensor(p, V, tmp, ahi, bhi, ISA_ALU_is_lt);
				st = st ? st : isa_builder_tensor_tensor(p, V, ob, ob, tmp, ISA_ALU_logical_or);
			} else if (op == NK_I64_NE) {
				st = st ? st : isa_builder_tensor_scalar(p, V, ob, ob, ISA_ALU_is_equal, z, ISA_ALU_bypass, z);
			}
		} else if (op == NK_I64_TO_BOOL) {
			st = isa_builder_tensor_tensor(p, V, isa_ap_sbuf(ISA_DT_bool, 0, r, o_off, w), alo, ahi,
						       ISA_ALU_logical_or);
		} else {   /* h = hi + (lo < 0) as integers; then h * 2^32 + lo at fp32 */
			st = isa_builder_tensor_scalar(p, V, tmp, slo, ISA_ALU_is_lt, z, ISA_ALU_bypass, z);
			st = st ? st : isa_builder_tensor_tensor(p, V, tmp, tmp, ahi, ISA_ALU_add);
			st = st ? st : isa_builder_tensor_scalar(p, V, fo, tmp, ISA_ALU_multiply,
								 isa_imm_f32(4294967296.0f), ISA_ALU_bypass,
								 isa_imm_f32(0));
			st = st ? st : isa_builder_tensor_tensor(p, V, fo, fo, slo, ISA_ALU_add);
		}
		if (st || (st = isa_builder_sem_signal(p, V, S_DONE, ISA_SEMOP_ADD, 1)))
			goto free_program;
		isa_ap ho = to_float ? isa_ap_hbm(out_dtype, (uint32_t)to, s * isa_dtype_size(out_dtype), r, w, w)
				     : isa_ap_hbm(ISA_DT_uint32, (uint32_t)to, s * 8, r, 2 * (int64_t)w, 2 * w);
		isa_ap so = op == NK_I64_TO_BOOL || cmp ? isa_ap_sbuf(ISA_DT_bool, 0, r, o_off, w)
			    : to_float ? fo : isa_ap_sbuf(ISA_DT_uint32, 0, r, o_off, 2 * w);
		int d = isa_builder_dma(p, "", ISA_DMA_DIRECT, &ho, &so, NULL, diag);
		if (d < 0 || (st = isa_builder_sem_wait(p, ISA_ENGINE_GPSIMD, S_DONE, ISA_ALU_is_ge, tiles + 1)) ||
		    (st = isa_builder_dma_copy(p, ISA_ENGINE_GPSIMD, (uint32_t)d, 2, S_STORE, 1))) {
			st = d < 0 ? diag->code : st;
			goto free_program;
		}
		s += (uint64_t)r * w;
	}
	if ((st = nk_finish(p, ISA_ENGINE_GPSIMD, S_STORE, tiles, bin, len, diag)))
		goto free_program;
	st = ISA_OK;
free_program:
	isa_program_free(p);
	return st;
}
