/*
 * validate_mx.c -- the MX rules (NeuronCore-v4: nki.isa.nc_matmul_mx,
 * nki.isa.quantize_mx; the Trainium3 architecture guide's "Quad-MXFP8/MXFP4
 * Matmul Performance" and "MX data-type Quantization").  MX data is packed
 * four values to an element (isa_dtype.def, class ISA_DC_MX); a scaling
 * group is 8 partitions x the 4 values of one element, and its uint8 scale
 * sits in the group's own SBUF quadrant: data partition p has its scale on
 * partition  start + (p / 32) * 32 + (p % 32) / 8  of the scale operand,
 * whose start may be 0, 4, 8 or 12 within a quadrant (scales of up to four
 * tensors packed in one tile, the MXFP tutorial's "Packing Scale Values").
 */
#include "validate.h"

/* partitions of the scale operand that a data operand of `p` partitions
 * uses, counted from the scale's first partition */
static uint32_t mx_scale_span(uint32_t p)
{
	return ((p - 1) / ISA_QUADRANT) * ISA_QUADRANT + ((p - 1) % ISA_QUADRANT) / 8 + 1;
}

/* data partitions a multiple of 32 up to 128 (nc_matmul_mx / quantize_mx
 * "Tile size") */
static isa_status check_mx_rows(vctx *v, const isa_ap *d, const char *field)
{
	if (d->nparts == 0 || d->nparts % ISA_QUADRANT || d->nparts > ISA_NUM_PARTITIONS)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, field,
			      "%u partitions: MX data takes a multiple of %u, at most %u", d->nparts,
			      ISA_QUADRANT, ISA_NUM_PARTITIONS);
	return ISA_OK;
}

/* the uint8 scale operand `s` of MX data `d` (SBUF both) */
isa_status v_mx_scale(vctx *v, const isa_ap *d, const char *dfield, const isa_ap *s,
		      const char *sfield)
{
	isa_status st = v_check_ap(v, s, sfield, SP_SBUF);
	if (st != ISA_OK)
		return st;
	if (s->dtype != ISA_DT_uint8)
		return v_fail(v, ISA_E_BAD_DTYPE, sfield, "MX scales are uint8 (an e8m0 exponent), not %s",
			      isa_dtype_name(s->dtype));
	unsigned off = s->start % ISA_QUADRANT;
	if (off % 4 || off > 12)
		return v_fail(v, ISA_E_BAD_VALUE, sfield,
			      "starts at partition %u: offset %u within its quadrant (0, 4, 8 or 12)",
			      s->start, off);
	uint32_t span = mx_scale_span(d->nparts);
	if (s->nparts < span)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, sfield,
			      "%u partitions; %s's %u partitions need %u (%u per 32-partition quadrant, in its own quadrant)",
			      s->nparts, dfield, d->nparts, span, ISA_QUADRANT / 8);
	if (isa_ap_free_elems(s) != isa_ap_free_elems(d))
		return v_fail(v, ISA_E_SHAPE_MISMATCH, sfield,
			      "%llu elements per partition, %s has %llu (one scale per packed element)",
			      (unsigned long long)isa_ap_free_elems(s), dfield,
			      (unsigned long long)isa_ap_free_elems(d));
	return ISA_OK;
}

/* an MX matmul operand (load_stationary / multiply_moving): MX data with
 * its scale, on a core that has them */
isa_status v_mx_operand(vctx *v, const isa_instr *in, const isa_ap *d, const char *dfield,
			const char *sfield)
{
	isa_status st = v_feature(v, ISA_FEAT_mx);
	if (st != ISA_OK)
		return st;
	if (!v_has(in, ISA_AP_SRC1))
		return v_fail(v, ISA_E_MISSING_OPERAND, sfield, "MX data (%s) needs its scale",
			      isa_dtype_name(d->dtype));
	if (in->e[0] != ISA_PERF_NONE)
		return v_fail(v, ISA_E_BAD_VALUE, "perf", "MX matmuls have no perf mode");
	if ((st = check_mx_rows(v, d, dfield)) != ISA_OK)
		return st;
	return v_mx_scale(v, d, dfield, &in->ap[ISA_AP_SRC1], sfield);
}

/* quantize_mx: bf16 / fp16 src [P, 4F] -> fp8 x4 dst [P, F] and scales */
isa_status rule_quantize_mx(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC], *sc = &in->ap[ISA_AP_AUX];
	isa_status st = v_feature(v, ISA_FEAT_mx);
	if (st != ISA_OK)
		return st;
	if (d->space != ISA_SPACE_SBUF || s->space != ISA_SPACE_SBUF)
		return v_fail(v, ISA_E_BAD_SPACE, d->space != ISA_SPACE_SBUF ? "dst" : "src",
			      "quantize_mx reads and writes SBUF");
	if (s->dtype != ISA_DT_bf16 && s->dtype != ISA_DT_fp16)
		return v_fail(v, ISA_E_BAD_DTYPE, "src", "quantize_mx takes bf16 or fp16, not %s",
			      isa_dtype_name(s->dtype));
	if (d->dtype != ISA_DT_fp8_e4m3_x4 && d->dtype != ISA_DT_fp8_e5m2_x4)
		return v_fail(v, ISA_E_BAD_DTYPE, "dst", "quantize_mx writes fp8_e4m3_x4 or fp8_e5m2_x4, not %s",
			      isa_dtype_name(d->dtype));
	if ((st = check_mx_rows(v, s, "src")) != ISA_OK)
		return st;
	if (d->nparts != s->nparts)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst", "%u partitions, src has %u", d->nparts,
			      s->nparts);
	if (isa_ap_free_elems(s) != 4 * isa_ap_free_elems(d))
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst",
			      "%llu elements per partition; src's %llu pack into %llu",
			      (unsigned long long)isa_ap_free_elems(d),
			      (unsigned long long)isa_ap_free_elems(s),
			      (unsigned long long)isa_ap_free_elems(s) / 4);
	if (isa_ap_free_elems(s) % 4)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "src", "%llu elements per partition (a multiple of 4)",
			      (unsigned long long)isa_ap_free_elems(s));
	return v_mx_scale(v, d, "dst", sc, "scale");
}

/* MX data anywhere else: moved as bytes (DMA, tensor_copy to the same
 * type), zeroed (memset 0), never converted */
isa_status v_mx_elsewhere(vctx *v, const isa_instr *in)
{
	bool any = false;
	for (int s = 0; s < ISA_MAX_AP; s++)
		any |= v_has(in, s) && isa_dtype_is_mx(in->ap[s].dtype);
	if (!any)
		return ISA_OK;
	if (!isa_target_has(v->p->target, ISA_FEAT_mx))
		return v_fail(v, ISA_E_BAD_DTYPE, "operands", "MX data needs NeuronCore-v%u or newer (%s is %s)",
			      isa_feature_first_core(ISA_FEAT_mx), v->ti->name, v->ti->core);
	switch (in->opcode) {
	case ISA_OP_load_stationary:
	case ISA_OP_multiply_moving:
	case ISA_OP_quantize_mx:
		return ISA_OK;          /* their own rules */
	case ISA_OP_tensor_copy:
		if (in->ap[ISA_AP_DST].dtype == in->ap[ISA_AP_SRC].dtype)
			return ISA_OK;
		return v_fail(v, ISA_E_BAD_DTYPE, "dst", "MX data is copied only as itself (%s to %s)",
			      isa_dtype_name(in->ap[ISA_AP_SRC].dtype),
			      isa_dtype_name(in->ap[ISA_AP_DST].dtype));
	case ISA_OP_memset:
		if (in->imm[0].bits == 0)
			return ISA_OK;
		return v_fail(v, ISA_E_BAD_VALUE, "value", "MX data is set only to 0 (nki.isa.memset)");
	default:
		return v_fail(v, ISA_E_BAD_DTYPE, "operands",
			      "%s does not take MX data (packed x4 types: matmul with scales, quantize_mx, copies)",
			      isa_op_name(in->opcode));
	}
}
