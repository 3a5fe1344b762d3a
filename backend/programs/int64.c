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
 *   from fp32: the bits decoded (exponent e, 24-bit mantissa m): |a| truncated
 *     = m shifted by e - 150 across the two words, then the sign; NaN,
 *     infinities and |a| >= 2^63 give INT64_MIN, as x86's cvttss2si does
 *   times b: lo = low(al * bl), hi = high32(al * bl) + al * bh + ah * bl (16-bit limbs)
 *   times c (int32): lo = low(a.lo * c); hi = a.hi * c + high(a.lo * c)
 *   to float: rounded once to nearest-even, as CPU PyTorch converts: the
 *     magnitude shifted right by the bit length of its high word, the
 *     dropped bits ORed into the lowest kept one (round to odd at 32 bits,
 *     which rounds to fp32's 24 as the value itself would), then scaled
 *     back by that power of two (see to_float64)
 *
 * Tiles of up to 128 x 1024 elements through the tile pipeline
 * (pipeline.h: Sync loads, VectorE computes, GpSimd stores, two buffer
 * sets); this file states a tile's operands and its VectorE steps.
 */
#include "programs.h"
#include "pipeline.h"

#include <string.h>

#define P 128u
#define F 1024u

static isa_ap pick(int dt, uint32_t r, uint64_t off, uint32_t f, unsigned half)
{
	int32_t stride = 2;
	isa_ap a = isa_ap_sbuf(dt, 0, r, off + 4u * half, f);
	return isa_ap_dims(a, 1, &stride, &f);
}

/* one tile's operands in SBUF: a, b and out as (lo, hi) pairs, a scratch
 * row, the 8 scratch rows of a product after both buffer sets */
typedef struct i64_tile {
	uint32_t r, w;
	uint64_t a_off, o_off, temps;
	isa_ap alo, ahi, blo, bhi, olo, ohi, tmp, fo;
} i64_tile;

#define V ISA_ENGINE_VECTOR
#define TT(d, a, b, op) (st = st ? st : isa_builder_tensor_tensor(p, V, d, a, b, op))
#define TS(d, a, op, i, op2, i2) (st = st ? st : isa_builder_tensor_scalar(p, V, d, a, op, i, op2, i2))

/* the tile's 8 scratch rows (after both buffer sets) as `dt` */
static void scratch_rows(const i64_tile *x, int dt, isa_ap T[8])
{
	for (int k = 0; k < 8; k++)
		T[k] = isa_ap_sbuf(dt, 0, x->r, x->temps + (uint64_t)k * 4 * F, x->w);
}

/* (lo, hi) = (lo ^ m) - m over the pair, m all ones (negate) or zero (keep):
 * the low word's borrow (lo == 0 when negating) carried into the high word;
 * c: a scratch row */
static isa_status negate_pair(isa_program *p, isa_ap dlo, isa_ap dhi, isa_ap lo, isa_ap hi, isa_ap m, isa_ap c)
{
	isa_status st = ISA_OK;
	isa_imm z = isa_imm_i32(0);
	TS(c, lo, ISA_ALU_is_equal, z, ISA_ALU_bypass, z);
	TT(c, c, m, ISA_ALU_bitwise_and);
	TT(dlo, lo, m, ISA_ALU_bitwise_xor);
	TT(dlo, dlo, m, ISA_ALU_subtract);
	TT(dhi, hi, m, ISA_ALU_bitwise_xor);
	TT(dhi, dhi, c, ISA_ALU_add);
	return st;
}

/* (ah, al) * (bh, bl) mod 2^64: lo = al * bl (low word); hi = high32(al *
 * bl) + al * bh + ah * bl, high32 from 16-bit limbs (every partial product
 * < 2^32, so 32-bit scratch is exact) */
static isa_status mul64(isa_program *p, const i64_tile *x)
{
	isa_status st = ISA_OK;
	isa_ap T[8];
	scratch_rows(x, ISA_DT_uint32, T);
	isa_imm m16 = isa_imm_i32(0xFFFF), s16 = isa_imm_i32(16), z = isa_imm_i32(0);
	enum { A0, A1, B0, B1, P00, P01, P10, P11 };
	TS(T[A0], x->alo, ISA_ALU_bitwise_and, m16, ISA_ALU_bypass, z);
	TS(T[A1], x->alo, ISA_ALU_shift_right, s16, ISA_ALU_bypass, z);
	TS(T[B0], x->blo, ISA_ALU_bitwise_and, m16, ISA_ALU_bypass, z);
	TS(T[B1], x->blo, ISA_ALU_shift_right, s16, ISA_ALU_bypass, z);
	TT(T[P00], T[A0], T[B0], ISA_ALU_multiply);
	TT(T[P01], T[A0], T[B1], ISA_ALU_multiply);
	TT(T[P10], T[A1], T[B0], ISA_ALU_multiply);
	TT(T[P11], T[A1], T[B1], ISA_ALU_multiply);
	/* s1 = (p00 >> 16) + (p01 & 0xffff) + (p10 & 0xffff) into A0; its carry */
	TS(T[A0], T[P00], ISA_ALU_shift_right, s16, ISA_ALU_bypass, z);
	TS(T[A1], T[P01], ISA_ALU_bitwise_and, m16, ISA_ALU_bypass, z);
	TT(T[A0], T[A0], T[A1], ISA_ALU_add);
	TS(T[A1], T[P10], ISA_ALU_bitwise_and, m16, ISA_ALU_bypass, z);
	TT(T[A0], T[A0], T[A1], ISA_ALU_add);
	/* h = (s1 >> 16) + p11 + (p01 >> 16) + (p10 >> 16) into B0 */
	TS(T[B0], T[A0], ISA_ALU_shift_right, s16, ISA_ALU_bypass, z);
	TT(T[B0], T[B0], T[P11], ISA_ALU_add);
	TS(T[A1], T[P01], ISA_ALU_shift_right, s16, ISA_ALU_bypass, z);
	TT(T[B0], T[B0], T[A1], ISA_ALU_add);
	TS(T[A1], T[P10], ISA_ALU_shift_right, s16, ISA_ALU_bypass, z);
	TT(T[B0], T[B0], T[A1], ISA_ALU_add);
	/* the cross terms (low words only) */
	TT(T[A1], x->alo, x->bhi, ISA_ALU_multiply);
	TT(T[B0], T[B0], T[A1], ISA_ALU_add);
	TT(T[A1], x->ahi, x->blo, ISA_ALU_multiply);
	TT(x->ohi, T[B0], T[A1], ISA_ALU_add);
	TT(x->olo, x->alo, x->blo, ISA_ALU_multiply);
	return st;
}

/* eq: lo == lo' and hi == hi'; lt / le: hi < hi' (signed), or hi == hi' and
 * lo <(=) lo' (unsigned); ne: not eq */
static isa_status compare64(isa_program *p, const i64_tile *x, int op)
{
	isa_status st = ISA_OK;
	isa_imm z = isa_imm_i32(0);
	isa_ap ob = isa_ap_sbuf(ISA_DT_bool, 0, x->r, x->o_off, x->w);
	int lo_cmp = op == NK_I64_LT ? ISA_ALU_is_lt : op == NK_I64_LE ? ISA_ALU_is_le : ISA_ALU_is_equal;
	TT(x->tmp, x->alo, x->blo, lo_cmp);
	TT(ob, x->ahi, x->bhi, ISA_ALU_is_equal);
	TT(ob, ob, x->tmp, ISA_ALU_logical_and);
	if (op == NK_I64_LT || op == NK_I64_LE) {
		TT(x->tmp, x->ahi, x->bhi, ISA_ALU_is_lt);
		TT(ob, ob, x->tmp, ISA_ALU_logical_or);
	} else if (op == NK_I64_NE) {
		TS(ob, ob, ISA_ALU_is_equal, z, ISA_ALU_bypass, z);
	}
	return st;
}

/* a (int64) to fp32 with one round-to-nearest-even for every value.  u =
 * |a| as unsigned words (uhi, ulo); sh = bit length of uhi (0..32, binary
 * search); w = u >> sh with the bits shifted out ORed into bit 0, so w is u
 * rounded to odd at 32 bits (exact when uhi = 0); f = w * 2^sh, w's
 * conversion the only rounding; the sign applied last.  Integer steps are
 * exact (the ALU's integer path, wrapped to the destination's 32 bits). */
static isa_status to_float64(isa_program *p, const i64_tile *x)
{
	isa_status st = ISA_OK;
	isa_ap T[8];
	scratch_rows(x, ISA_DT_uint32, T);
	enum { M, ULO, UHI, X, SH, C, W, A };
	isa_imm z = isa_imm_i32(0);
	/* m = -(a < 0): all ones for a negative value; u = |a| */
	TS(T[M], x->ahi, ISA_ALU_is_lt, z, ISA_ALU_multiply, isa_imm_i32(-1));
	st = st ? st : negate_pair(p, T[ULO], T[UHI], x->alo, x->ahi, T[M], T[C]);
	/* sh = bit length of uhi */
	TS(T[X], T[UHI], ISA_ALU_add, z, ISA_ALU_bypass, z);
	TS(T[SH], T[UHI], ISA_ALU_multiply, z, ISA_ALU_bypass, z);
	for (int32_t s = 16; s >= 1; s /= 2) {
		TS(T[C], T[X], ISA_ALU_shift_right, isa_imm_i32(s), ISA_ALU_not_equal, z);
		TS(T[C], T[C], ISA_ALU_multiply, isa_imm_i32(s), ISA_ALU_bypass, z);
		TT(T[X], T[X], T[C], ISA_ALU_shift_right);
		TT(T[SH], T[SH], T[C], ISA_ALU_add);
	}
	TS(T[C], T[X], ISA_ALU_not_equal, z, ISA_ALU_bypass, z);
	TT(T[SH], T[SH], T[C], ISA_ALU_add);
	/* w = (uhi << (32 - sh)) | (ulo >> sh) | (ulo << (32 - sh) != 0) */
	TS(T[A], T[SH], ISA_ALU_subtract, isa_imm_i32(32), ISA_ALU_multiply, isa_imm_i32(-1));
	TT(T[W], T[UHI], T[A], ISA_ALU_shift_left);
	TT(T[X], T[ULO], T[SH], ISA_ALU_shift_right);
	TT(T[W], T[W], T[X], ISA_ALU_bitwise_or);
	TT(T[X], T[ULO], T[A], ISA_ALU_shift_left);
	TS(T[X], T[X], ISA_ALU_not_equal, z, ISA_ALU_bypass, z);
	TT(T[W], T[W], T[X], ISA_ALU_bitwise_or);
	/* 2^sh as fp32 bits, (sh + 127) << 23; the sign as +-1 (2m + 1) */
	TS(T[SH], T[SH], ISA_ALU_add, isa_imm_i32(127), ISA_ALU_shift_left, isa_imm_i32(23));
	isa_ap sign = isa_ap_sbuf(ISA_DT_int32, 0, x->r, x->temps + (uint64_t)M * 4 * F, x->w);
	TS(sign, T[M], ISA_ALU_multiply, isa_imm_i32(2), ISA_ALU_add, isa_imm_i32(1));
	TT(x->fo, T[W], isa_ap_sbuf(ISA_DT_fp32, 0, x->r, x->temps + (uint64_t)SH * 4 * F, x->w), ISA_ALU_multiply);
	TT(x->fo, x->fo, sign, ISA_ALU_multiply);
	return st;
}

/* a (fp32, its bits read as uint32) to int64 truncated toward zero: m the
 * mantissa with its hidden bit, k = e - 150 the shift that makes m * 2^k =
 * |a|; lo = (m << max(k, 0)) >> max(-k, 0) (the left shift wrapping to 32
 * bits), hi = (m >> (32 - k)) << (k - 32), each amount clamped to [0, 63];
 * the sign applied by negate_pair; e >= 190 (|a| >= 2^63, infinities, NaN) gives
 * INT64_MIN.  Every step is an exact integer one. */
static isa_status from_float64(isa_program *p, const i64_tile *x, isa_ap bits)
{
	isa_status st = ISA_OK;
	isa_ap T[8];
	scratch_rows(x, ISA_DT_int32, T);
	enum { E, MT, K, A, B, M, C, BAD };
	isa_imm z = isa_imm_i32(0);
	TS(T[E], bits, ISA_ALU_shift_right, isa_imm_i32(23), ISA_ALU_bitwise_and, isa_imm_i32(0xFF));
	TS(T[MT], bits, ISA_ALU_bitwise_and, isa_imm_i32(0x7FFFFF), ISA_ALU_bitwise_or, isa_imm_i32(0x800000));
	TS(T[K], T[E], ISA_ALU_subtract, isa_imm_i32(150), ISA_ALU_bypass, z);
	/* lo */
	TS(T[A], T[K], ISA_ALU_max, z, ISA_ALU_min, isa_imm_i32(63));
	TS(T[B], T[K], ISA_ALU_multiply, isa_imm_i32(-1), ISA_ALU_max, z);
	TS(T[B], T[B], ISA_ALU_min, isa_imm_i32(63), ISA_ALU_bypass, z);
	TT(x->olo, T[MT], T[A], ISA_ALU_shift_left);
	TT(x->olo, x->olo, T[B], ISA_ALU_shift_right);
	/* hi */
	TS(T[A], T[K], ISA_ALU_multiply, isa_imm_i32(-1), ISA_ALU_add, isa_imm_i32(32));
	TS(T[A], T[A], ISA_ALU_max, z, ISA_ALU_min, isa_imm_i32(63));
	TS(T[B], T[K], ISA_ALU_subtract, isa_imm_i32(32), ISA_ALU_max, z);
	TS(T[B], T[B], ISA_ALU_min, isa_imm_i32(63), ISA_ALU_bypass, z);
	TT(x->ohi, T[MT], T[A], ISA_ALU_shift_right);
	TT(x->ohi, x->ohi, T[B], ISA_ALU_shift_left);
	/* the sign: m = -(sign bit) */
	TS(T[M], bits, ISA_ALU_shift_right, isa_imm_i32(31), ISA_ALU_multiply, isa_imm_i32(-1));
	st = st ? st : negate_pair(p, x->olo, x->ohi, x->olo, x->ohi, T[M], T[C]);
	/* out of range: lo = 0, hi = 0x80000000 */
	TS(T[BAD], T[E], ISA_ALU_is_ge, isa_imm_i32(190), ISA_ALU_bypass, z);
	TS(T[C], T[BAD], ISA_ALU_is_equal, z, ISA_ALU_bypass, z);
	TT(x->olo, x->olo, T[C], ISA_ALU_multiply);
	TT(x->ohi, x->ohi, T[C], ISA_ALU_multiply);
	TS(T[BAD], T[BAD], ISA_ALU_multiply, isa_imm_i32(INT32_MIN), ISA_ALU_bypass, z);
	TT(x->ohi, x->ohi, T[BAD], ISA_ALU_add);
	return st;
}

/* the VectorE steps of one tile */
static isa_status compute64(isa_program *p, const nk_int64 *prm, const i64_tile *x)
{
	isa_status st = ISA_OK;
	isa_imm z = isa_imm_i32(0);
	switch (prm->op) {
	case NK_I64_ADD:
		TT(x->olo, x->alo, x->blo, ISA_ALU_add);
		TT(x->tmp, x->olo, x->alo, ISA_ALU_is_lt);
		TT(x->ohi, x->ahi, x->bhi, ISA_ALU_add);
		TT(x->ohi, x->ohi, x->tmp, ISA_ALU_add);
		return st;
	case NK_I64_SUB:
		TT(x->tmp, x->alo, x->blo, ISA_ALU_is_lt);
		TT(x->olo, x->alo, x->blo, ISA_ALU_subtract);
		TT(x->ohi, x->ahi, x->bhi, ISA_ALU_subtract);
		TT(x->ohi, x->ohi, x->tmp, ISA_ALU_subtract);
		return st;
	case NK_I64_MUL:
		return mul64(p, x);
	case NK_I64_MULS: {
		/* a * c: lo * c is exact in the 64-bit ALU; its low word is the
		 * result's, its high word carries into hi * c */
		isa_imm ci = isa_imm_i32(prm->c);
		TS(x->olo, x->alo, ISA_ALU_multiply, ci, ISA_ALU_bypass, z);
		TS(x->tmp, x->alo, ISA_ALU_multiply, ci, ISA_ALU_shift_right, isa_imm_i32(32));
		TS(x->ohi, x->ahi, ISA_ALU_multiply, ci, ISA_ALU_bypass, z);
		TT(x->ohi, x->ohi, x->tmp, ISA_ALU_add);
		return st;
	}
	case NK_I64_FROM_I32: {   /* lo = a; hi = -(a < 0) */
		isa_ap a32 = isa_ap_sbuf(ISA_DT_int32, 0, x->r, x->a_off, x->w);
		st = isa_builder_tensor_copy(p, V, x->olo, a32);
		TS(x->ohi, a32, ISA_ALU_is_lt, z, ISA_ALU_multiply, isa_imm_i32(-1));
		return st;
	}
	case NK_I64_TO_BOOL:
		TT(isa_ap_sbuf(ISA_DT_bool, 0, x->r, x->o_off, x->w), x->alo, x->ahi, ISA_ALU_logical_or);
		return st;
	case NK_I64_TO_FLOAT:
		return to_float64(p, x);
	case NK_I64_FROM_FLOAT:
		return from_float64(p, x, isa_ap_sbuf(ISA_DT_uint32, 0, x->r, x->a_off, x->w));
	default:
		return compare64(p, x, prm->op);
	}
}

#undef TT
#undef TS
#undef V

isa_status nk_int64_program(int target, const nk_int64 *prm, uint8_t **bin, size_t *len,
			    isa_diag *diag)
{
	int op = prm->op, out_dtype = prm->out_dtype;
	uint64_t n = prm->n;
	*bin = NULL;
	*len = 0;
	bool cmp = op >= NK_I64_EQ && op <= NK_I64_LE;
	bool to_float = op == NK_I64_TO_FLOAT || op == NK_I64_TO_BOOL || cmp;   /* [n] results */
	bool from32 = op == NK_I64_FROM_I32 || op == NK_I64_FROM_FLOAT;   /* [n] 32-bit elements in */
	int in_dt = op == NK_I64_FROM_FLOAT ? ISA_DT_fp32 : ISA_DT_int32;
	if (!n || n > ((uint64_t)1 << 36) || op < 0 || op >= NK_I64_NUM_OPS ||
	    (op == NK_I64_TO_FLOAT && !isa_dtype_is_float(out_dtype)) ||
	    ((op == NK_I64_TO_BOOL || cmp) && out_dtype != ISA_DT_bool)) {
		nk_fail(diag, ISA_E_LIMIT, "int64 kernel: op %d over %llu elements", op, (unsigned long long)n);
		return ISA_E_LIMIT;
	}
	unsigned nin = (to_float && !cmp) || from32 || op == NK_I64_MULS ? 1 : 2;
	/* per buffer set: a, b, out pairs (8 KiB each) and a scratch row */
	const uint64_t slot = 8u * F;
	nk_pipe pp;
	if (!nk_pipe_init(&pp, target, 2, 4 * slot, diag))
		return pp.em.st;
	int ta = from32 ? nk_pipe_tensor(&pp, "a", in_dt, ISA_TK_INPUT, n)
			: nk_pipe_tensor(&pp, "a", ISA_DT_uint32, ISA_TK_INPUT, 2 * n);
	int tb = nin == 2 ? nk_pipe_tensor(&pp, "b", ISA_DT_uint32, ISA_TK_INPUT, 2 * n) : 0;
	int to = to_float ? nk_pipe_tensor(&pp, "out", out_dtype, ISA_TK_OUTPUT, n)
			  : nk_pipe_tensor(&pp, "out", ISA_DT_uint32, ISA_TK_OUTPUT, 2 * n);
	uint64_t f = (n + P - 1) / P;
	f = f < F ? f : F;
	nk_tile t;
	for (uint64_t s = 0; s < n && !pp.em.st; s += (uint64_t)t.rows * t.cols) {
		t = nk_flat_tile(n, s, f);
		uint32_t r = t.rows, w = t.cols;
		uint64_t b = nk_pipe_tile(&pp);
		i64_tile x = { .r = r, .w = w, .a_off = b, .o_off = b + 2 * slot, .temps = 2 * 4 * slot };
		for (unsigned i = 0; i < nin; i++) {
			isa_ap sb = from32 ? isa_ap_sbuf(in_dt, 0, r, b, w)
					   : isa_ap_sbuf(ISA_DT_uint32, 0, r, b + i * slot, 2 * w);
			isa_ap hb = from32 ? isa_ap_hbm(in_dt, (uint32_t)ta, s * 4, r, w, w)
					   : isa_ap_hbm(ISA_DT_uint32, (uint32_t)(i ? tb : ta), s * 8, r, 2 * (int64_t)w, 2 * w);
			nk_pipe_load(&pp, sb, hb, i);
		}
		x.alo = pick(ISA_DT_uint32, r, b, w, 0), x.ahi = pick(ISA_DT_int32, r, b, w, 1);
		x.blo = pick(ISA_DT_uint32, r, b + slot, w, 0), x.bhi = pick(ISA_DT_int32, r, b + slot, w, 1);
		x.olo = pick(ISA_DT_uint32, r, x.o_off, w, 0), x.ohi = pick(ISA_DT_int32, r, x.o_off, w, 1);
		x.tmp = isa_ap_sbuf(ISA_DT_int32, 0, r, b + 3 * slot, w);
		x.fo = isa_ap_sbuf(ISA_DT_fp32, 0, r, x.o_off, w);
		nk_pipe_compute(&pp, ISA_ENGINE_VECTOR);
		if (!pp.em.st)
			nk_pipe_check(&pp, compute64(pp.em.p, prm, &x));
		nk_pipe_computed(&pp, ISA_ENGINE_VECTOR);
		isa_ap ho = to_float ? isa_ap_hbm(out_dtype, (uint32_t)to, s * isa_dtype_size(out_dtype), r, w, w)
				     : isa_ap_hbm(ISA_DT_uint32, (uint32_t)to, s * 8, r, 2 * (int64_t)w, 2 * w);
		isa_ap so = op == NK_I64_TO_BOOL || cmp ? isa_ap_sbuf(ISA_DT_bool, 0, r, x.o_off, w)
			    : to_float ? x.fo : isa_ap_sbuf(ISA_DT_uint32, 0, r, x.o_off, 2 * w);
		nk_pipe_store(&pp, ho, so, 2);
	}
	return nk_pipe_finish(&pp, bin, len);
}
