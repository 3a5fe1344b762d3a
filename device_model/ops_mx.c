/*
 * ops_mx.c -- MX data (NeuronCore-v4): quantize_mx, the dequantization the
 * MX matmul applies to its operands, and MX data moved as bytes.
 *
 * Layout (SDK nki.isa.quantize_mx / nc_matmul_mx, the Trainium3
 * architecture guide): an MX element packs four fp8 values (byte q = value
 * q) or four fp4 e2m1 values (nibble q, low nibble first); a scaling group
 * is 8 partitions x the 4 values of one element, its uint8 scale e the
 * power 2^(e - 127), kept in the group's own 32-partition quadrant (row
 * (p / 32) * 32 + (p % 32) / 8 of the scale operand).
 *
 * The quantize scale follows the API reference: X = 2^(floor(log2 amax) -
 * (Emax - 1)), "two times larger" than the OCP specification's sample
 * algorithm, so the largest value of a group rounds without saturating
 * (Emax = 8 for e4m3, 15 for e5m2); an all-zero group gets X = 2^-127.
 */
#include "ops.h"

#include "numerics.h"

#include <math.h>
#include <string.h>

/* the scale row of data partition p, from the scale operand's first row */
static uint32_t scale_row(uint32_t p)
{
	return (p / ISA_QUADRANT) * ISA_QUADRANT + (p % ISA_QUADRANT) / 8;
}

static float fp4_e2m1_to_f32(unsigned n)
{
	/* 1 sign, 2 exponent (bias 1), 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6 */
	static const float mag[8] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f };
	return n & 8u ? -mag[n & 7u] : mag[n & 7u];
}

/* value q of the packed element at a */
static float mx_value(int dtype, const uint8_t *a, unsigned q)
{
	switch (dtype) {
	case ISA_DT_fp8_e4m3_x4: return dm_fp8e4m3fn_to_f32(a[q]);
	case ISA_DT_fp8_e5m2_x4: return dm_fp8e5m2_to_f32(a[q]);
	default:                 return fp4_e2m1_to_f32((a[q / 2] >> (4 * (q % 2))) & 0xfu);
	}
}

/* out[(p * 4 + q) * nfree + k] = value q of element (p, k) x its group's
 * scale: the operand as fp32 rows of the contraction (4 per partition),
 * exact (a power of two times an fp8 / fp4 value) */
void dm_mx_dequantize(const dm_view *d, const dm_view *s, float *out)
{
	uint64_t n = d->nfree;
	for (uint32_t p = 0; p < d->nparts; p++)
		for (uint64_t k = 0; k < n; k++) {
			const uint8_t *a = dm_view_elem(d, p, k);
			int e = *dm_view_elem(s, scale_row(p), k);
			for (unsigned q = 0; q < 4; q++)
				out[((uint64_t)p * 4 + q) * n + k] = ldexpf(mx_value(d->dtype, a, q), e - 127);
		}
}

/* the exponent field of |x| as fp32 (0 for zero and fp32 subnormals) */
static int exp_field(float x)
{
	return (int)((dm_f32_bits(x) >> 23) & 0xffu);
}

dm_fault_kind dm_op_quantize_mx(dm_core *c, const dm_binding *b, int engine, int64_t index,
				const isa_instr *in, dm_fault *f)
{
	dm_view sv, dv, kv;
	DM_OP_VIEW(sv, ISA_AP_SRC, false, "src");
	DM_OP_VIEW(dv, ISA_AP_DST, true, "dst");
	DM_OP_VIEW(kv, ISA_AP_AUX, true, "scale");
	uint64_t n = dv.nfree;                           /* packed elements per partition */
	float *x = dm_tmp(c, 0, (uint64_t)sv.nparts * sv.nfree);
	if (!x)
		return dm_nomem(f, engine, index);
	dm_view_read(&sv, x);
	int emax = dv.dtype == ISA_DT_fp8_e4m3_x4 ? 8 : 15;
	for (uint32_t g = 0; g < dv.nparts; g += 8)
		for (uint64_t k = 0; k < n; k++) {
			int e = 0;
			bool any = false;
			for (uint32_t p = g; p < g + 8; p++)
				for (unsigned q = 0; q < 4; q++) {
					float v = x[(uint64_t)p * sv.nfree + 4 * k + q];
					any |= v != 0.0f;
					int ef = exp_field(v);
					e = ef > e ? ef : e;
				}
			int scale = any ? e - (emax - 1) : 0;
			scale = scale < 0 ? 0 : scale > 255 ? 255 : scale;
			*dm_view_elem(&kv, scale_row(g), k) = (uint8_t)scale;
			for (uint32_t p = g; p < g + 8; p++) {
				uint8_t *a = dm_view_elem(&dv, p, k);
				for (unsigned q = 0; q < 4; q++) {
					float v = ldexpf(x[(uint64_t)p * sv.nfree + 4 * k + q], 127 - scale);
					a[q] = dv.dtype == ISA_DT_fp8_e4m3_x4 ? dm_f32_to_fp8e4m3fn(v)
									      : dm_f32_to_fp8e5m2(v);
				}
			}
		}
	return DM_OK;
}

/* MX data as bytes: dst = src (same type), or zero */
void dm_mx_copy(const dm_view *dst, const dm_view *src)
{
	for (uint32_t p = 0; p < dst->nparts; p++)
		for (uint64_t k = 0; k < dst->nfree; k++) {
			if (src)
				memmove(dm_view_elem(dst, p, k), dm_view_elem(src, p, k), dst->esz);
			else
				memset(dm_view_elem(dst, p, k), 0, dst->esz);
		}
}
