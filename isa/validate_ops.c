/*
 * validate_ops.c -- one validator rule per instruction: how its operands
 * relate (shapes, dtypes, operators).  Generic checks (fields present, enum
 * values, operand memories and bounds for compute engines) already ran in
 * validate.c.  Registration is one line per opcode in isa_op_rules at the
 * bottom; the table test fails if an opcode has none.
 */
#include "validate.h"

static bool is_mm_dtype(int dt)
{
	switch (dt) {
	case ISA_DT_fp32: case ISA_DT_tf32: case ISA_DT_bf16: case ISA_DT_fp16:
	case ISA_DT_fp8_e4m3: case ISA_DT_fp8_e4m3fn: case ISA_DT_fp8_e5m2:
		return true;
	default:
		return false;
	}
}

static bool is_fp32_class(int dt) { return dt == ISA_DT_fp32 || dt == ISA_DT_tf32; }
static bool is_fp8(int dt)
{
	return dt == ISA_DT_fp8_e4m3 || dt == ISA_DT_fp8_e4m3fn || dt == ISA_DT_fp8_e5m2;
}

static isa_status check_perf(vctx *v, unsigned perf, int dtype, const char *field)
{
	if (perf == ISA_PERF_DOUBLE_ROW) {
		if (!v->ti->has_double_row)
			return v_fail(v, ISA_E_BAD_VALUE, "perf",
				      "double_row is not supported on %s (%s)", v->ti->name, v->ti->core);
		if (!is_fp8(dtype))
			return v_fail(v, ISA_E_BAD_DTYPE, field, "double_row needs fp8 input, not %s",
				      isa_dtype_name(dtype));
	}
	return ISA_OK;
}

/* ------------------------------------------------------------ TensorE */

static isa_status rule_load_stationary(vctx *v, const isa_instr *in)
{
	const isa_ap *s = &in->ap[ISA_AP_SRC];
	isa_status st = v_check_ap(v, s, "stationary", SP_SBUF);
	if (st != ISA_OK)
		return st;
	if (isa_dtype_is_mx(s->dtype)) {
		if ((st = v_mx_operand(v, in, s, "stationary", "scale")) != ISA_OK)
			return st;
		if (isa_ap_free_elems(s) % 2)
			return v_fail(v, ISA_E_SHAPE_MISMATCH, "stationary",
				      "M = %llu columns (MX: an even number)",
				      (unsigned long long)isa_ap_free_elems(s));
	} else if (v_has(in, ISA_AP_SRC1)) {
		return v_fail(v, ISA_E_BAD_VALUE, "scale", "a scale goes with MX data, not %s",
			      isa_dtype_name(s->dtype));
	} else if (!is_mm_dtype(s->dtype))
		return v_fail(v, ISA_E_BAD_DTYPE, "stationary", "%s is not a matmul input type",
			      isa_dtype_name(s->dtype));
	if (isa_ap_free_elems(s) > ISA_NUM_PARTITIONS)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "stationary",
			      "M = %llu columns (at most %u)",
			      (unsigned long long)isa_ap_free_elems(s), ISA_NUM_PARTITIONS);
	if ((st = check_perf(v, in->e[0], s->dtype, "stationary")) != ISA_OK)
		return st;
	v->have_stationary = true;
	v->stationary = *s;
	v->stationary_perf = in->e[0];
	return ISA_OK;
}

static isa_status rule_multiply_moving(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *m = &in->ap[ISA_AP_SRC];
	const isa_ap *s = &v->stationary;
	isa_status st;

	if ((st = v_check_ap(v, d, "dst", SP_PSUM)) != ISA_OK ||
	    (st = v_check_ap(v, m, "moving", SP_SBUF)) != ISA_OK)
		return st;
	if (!v->have_stationary)
		return v_fail(v, ISA_E_NO_STATIONARY, "moving",
			      "no load_stationary earlier in the tensor stream");
	if (isa_dtype_is_mx(m->dtype) != isa_dtype_is_mx(s->dtype))
		return v_fail(v, ISA_E_BAD_DTYPE, "moving",
			      "%s moving with %s stationary (MX data only with MX data)",
			      isa_dtype_name(m->dtype), isa_dtype_name(s->dtype));
	if (isa_dtype_is_mx(m->dtype)) {
		if ((st = v_mx_operand(v, in, m, "moving", "moving_scale")) != ISA_OK)
			return st;
	} else if (v_has(in, ISA_AP_SRC1)) {
		return v_fail(v, ISA_E_BAD_VALUE, "moving_scale", "a scale goes with MX data, not %s",
			      isa_dtype_name(m->dtype));
	} else if (!is_mm_dtype(m->dtype))
		return v_fail(v, ISA_E_BAD_DTYPE, "moving", "%s is not a matmul input type",
			      isa_dtype_name(m->dtype));
	if (is_fp32_class(m->dtype) != is_fp32_class(s->dtype))
		return v_fail(v, ISA_E_BAD_DTYPE, "moving",
			      "%s moving with %s stationary (fp32/tf32 pair only with each other)",
			      isa_dtype_name(m->dtype), isa_dtype_name(s->dtype));
	if (m->nparts != s->nparts)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "moving",
			      "K = %u partitions, the stationary has %u", m->nparts, s->nparts);
	if (in->e[0] != v->stationary_perf)
		return v_fail(v, ISA_E_BAD_VALUE, "perf", "perf mode differs from the stationary's");
	if ((st = check_perf(v, in->e[0], m->dtype, "moving")) != ISA_OK)
		return st;

	uint64_t mcols = isa_ap_free_elems(s), n = isa_ap_free_elems(m);
	if (d->nparts != mcols)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst",
			      "%u partitions, the stationary has M = %llu columns", d->nparts,
			      (unsigned long long)mcols);
	if (isa_ap_free_elems(d) != n)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst", "%llu elements, moving has N = %llu",
			      (unsigned long long)isa_ap_free_elems(d), (unsigned long long)n);
	uint32_t max_n;
	if (d->dtype == ISA_DT_fp32)
		max_n = v->ti->mm_max_n_fp32;
	else if (d->dtype == ISA_DT_bf16 && v->ti->mm_max_n_16bit > v->ti->mm_max_n_fp32)
		max_n = v->ti->mm_max_n_16bit;
	else
		return v_fail(v, ISA_E_BAD_DTYPE, "dst", "PSUM results are fp32%s, not %s",
			      v->ti->mm_max_n_16bit > v->ti->mm_max_n_fp32 ? " or bf16" : "",
			      isa_dtype_name(d->dtype));
	if (n > max_n)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "moving", "N = %llu (at most %u on %s)",
			      (unsigned long long)n, max_n, v->ti->name);

	/* where one bank holds the largest result, an accumulation group must
	 * stay inside one bank (v2/v3: 2 KiB = 512 fp32) */
	uint32_t bank = v->ti->psum_partition_bytes / v->ti->psum_banks;
	if ((uint64_t)v->ti->mm_max_n_fp32 * 4 <= bank) {
		int64_t lo, hi;
		isa_ap_byte_range(d, &lo, &hi);
		if (lo / bank != (hi - 1) / bank)
			return v_fail(v, ISA_E_OUT_OF_BOUNDS, "dst",
				      "bytes [%lld, %lld) cross a %u-byte PSUM bank boundary",
				      (long long)lo, (long long)hi, bank);
	}
	return ISA_OK;
}

static isa_status rule_nc_transpose(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC];
	isa_status st;
	unsigned max;

	if (v->engine == ISA_ENGINE_TENSOR) {
		/* a transpose through the array: SBUF in, PSUM out, up to 128x128 */
		if ((st = v_check_ap(v, s, "src", SP_SBUF)) != ISA_OK ||
		    (st = v_check_ap(v, d, "dst", SP_PSUM)) != ISA_OK)
			return st;
		if (!is_mm_dtype(s->dtype))
			return v_fail(v, ISA_E_BAD_DTYPE, "src", "%s is not a TensorE input type",
				      isa_dtype_name(s->dtype));
		if (d->dtype != s->dtype && d->dtype != ISA_DT_fp32)
			return v_fail(v, ISA_E_BAD_DTYPE, "dst", "%s result of %s input (same or fp32)",
				      isa_dtype_name(d->dtype), isa_dtype_name(s->dtype));
		max = ISA_NUM_PARTITIONS;
	} else {
		max = 32;   /* VectorE transposes 32x32 blocks */
	}
	uint64_t f = isa_ap_free_elems(s);
	if (s->nparts > max || f > max)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "src", "[%u, %llu] (at most [%u, %u] on %s)",
			      s->nparts, (unsigned long long)f, max, max, isa_engine_name(v->engine));
	if (d->nparts != f || isa_ap_free_elems(d) != s->nparts)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst", "[%u, %llu], the transpose of src is [%llu, %u]",
			      d->nparts, (unsigned long long)isa_ap_free_elems(d),
			      (unsigned long long)f, s->nparts);
	return ISA_OK;
}

/* ------------------------------------------------- Vector/Scalar/GpSimd */

/* a reduce along the free axis (op in e[1]) into reduce_dst [P, 1] */
static isa_status v_reduce_dst(vctx *v, const isa_instr *in)
{
	isa_status st;
	if ((st = v_alu(v, in->e[1], ISA_AU_RED, "reduce", false)) != ISA_OK)
		return st;
	if (!v_has(in, ISA_AP_AUX))
		return v_fail(v, ISA_E_MISSING_OPERAND, "reduce_dst", "reduce=%s needs reduce_dst=",
			      isa_alu_name(in->e[1]));
	return v_row_result(v, in);
}

static isa_status rule_activation(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC];
	isa_status st;

	if ((st = v_same_count(v, d, "dst", s, "src")) != ISA_OK)
		return st;
	if (v_has(in, ISA_AP_SRC1) &&
	    (st = v_per_partition(v, &in->ap[ISA_AP_SRC1], "scale", s, "src")) != ISA_OK)
		return st;
	if (v_has(in, ISA_AP_SRC2) &&
	    (st = v_per_partition(v, &in->ap[ISA_AP_SRC2], "bias", s, "src")) != ISA_OK)
		return st;
	if (in->e[1] == ISA_ALU_bypass) {
		if (v_has(in, ISA_AP_AUX))
			return v_fail(v, ISA_E_BAD_VALUE, "reduce_dst", "given without a reduce op");
		return ISA_OK;
	}
	return v_reduce_dst(v, in);
}

static bool all_integer(const isa_instr *in)
{
	for (int s = 0; s < ISA_MAX_AP; s++)
		if (v_has(in, s) && !isa_dtype_is_integer(in->ap[s].dtype))
			return false;
	return true;
}

static isa_status rule_tensor_tensor(vctx *v, const isa_instr *in)
{
	isa_status st;
	if ((st = v_same_count(v, &in->ap[ISA_AP_DST], "dst", &in->ap[ISA_AP_SRC], "src0")) != ISA_OK ||
	    (st = v_same_count(v, &in->ap[ISA_AP_DST], "dst", &in->ap[ISA_AP_SRC1], "src1")) != ISA_OK)
		return st;
	return v_alu(v, in->e[0], ISA_AU_TT, "op", all_integer(in));
}

/* (src <op0> scalar0) <op1> src1: same element counts, float operators (the
 * engines compute it in fp32), scalar0 an immediate or a [P,1] column */
static isa_status rule_scalar_tensor_tensor(vctx *v, const isa_instr *in)
{
	isa_status st;
	if ((st = v_same_count(v, &in->ap[ISA_AP_DST], "dst", &in->ap[ISA_AP_SRC], "src")) != ISA_OK ||
	    (st = v_same_count(v, &in->ap[ISA_AP_DST], "dst", &in->ap[ISA_AP_SRC1], "src1")) != ISA_OK ||
	    (st = v_alu(v, in->e[0], ISA_AU_TS, "op0", false)) != ISA_OK ||
	    (st = v_alu(v, in->e[1], ISA_AU_TT, "op1", false)) != ISA_OK)
		return st;
	if (v_has(in, ISA_AP_SRC2))
		return v_per_partition(v, &in->ap[ISA_AP_SRC2], "scalar0", &in->ap[ISA_AP_SRC], "src");
	return ISA_OK;
}

/* a recurrence along the free axis: same element counts, float operators
 * (it computes in fp32), the initial value an immediate or a [P,1] column */
static isa_status rule_tensor_tensor_scan(vctx *v, const isa_instr *in)
{
	isa_status st;
	if ((st = v_same_count(v, &in->ap[ISA_AP_DST], "dst", &in->ap[ISA_AP_SRC], "src0")) != ISA_OK ||
	    (st = v_same_count(v, &in->ap[ISA_AP_DST], "dst", &in->ap[ISA_AP_SRC1], "src1")) != ISA_OK ||
	    (st = v_alu(v, in->e[0], ISA_AU_TT, "op0", false)) != ISA_OK ||
	    (st = v_alu(v, in->e[1], ISA_AU_TT, "op1", false)) != ISA_OK)
		return st;
	if (v_has(in, ISA_AP_SRC2))
		return v_per_partition(v, &in->ap[ISA_AP_SRC2], "initial", &in->ap[ISA_AP_SRC], "src0");
	return ISA_OK;
}

static isa_status check_ts_operand(vctx *v, const isa_instr *in, int n, bool integer)
{
	static const char *const op_key[] = { "op0", "op1" };
	static const char *const sc_key[] = { "scalar0", "scalar1" };
	static const uint16_t rev[] = { ISA_FLAG_REVERSE0, ISA_FLAG_REVERSE1 };
	int slot = n ? ISA_AP_SRC2 : ISA_AP_SRC1;
	isa_status st;

	if (in->e[n] == ISA_ALU_bypass) {
		if (n == 0)
			return v_fail(v, ISA_E_BAD_OPERATOR, "op0", "op0 cannot be bypass");
		if (v_has(in, slot) || (in->flags & rev[n]))
			return v_fail(v, ISA_E_BAD_VALUE, sc_key[n], "scalar1/reverse1 without op1");
		return ISA_OK;
	}
	bool scalar_int = v_has(in, slot) ? isa_dtype_is_integer(in->ap[slot].dtype)
					  : in->imm[n].kind == ISA_IMM_I32;
	if ((st = v_alu(v, in->e[n], ISA_AU_TS, op_key[n], integer && scalar_int)) != ISA_OK)
		return st;
	if (v_has(in, slot))
		return v_per_partition(v, &in->ap[slot], sc_key[n], &in->ap[ISA_AP_SRC], "src");
	return ISA_OK;
}

static isa_status rule_tensor_scalar(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC];
	bool integer = isa_dtype_is_integer(d->dtype) && isa_dtype_is_integer(s->dtype);
	isa_status st;
	if ((st = v_same_count(v, d, "dst", s, "src")) != ISA_OK ||
	    (st = check_ts_operand(v, in, 0, integer)) != ISA_OK)
		return st;
	return check_ts_operand(v, in, 1, integer);
}

/* dst = src <op0> scalar0 (float: the engines compute it in fp32) and its
 * reduce along the free axis into reduce_dst [P, 1] */
static isa_status rule_tensor_scalar_reduce(vctx *v, const isa_instr *in)
{
	isa_status st;
	if ((st = v_same_count(v, &in->ap[ISA_AP_DST], "dst", &in->ap[ISA_AP_SRC], "src")) != ISA_OK ||
	    (st = check_ts_operand(v, in, 0, false)) != ISA_OK)
		return st;
	return v_reduce_dst(v, in);
}

static isa_status rule_tensor_reduce(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC];
	uint32_t axes = in->u[0];
	isa_status st;

	if ((st = v_alu(v, in->e[0], ISA_AU_RED, "op", false)) != ISA_OK)
		return st;
	if (axes == 0 || axes >= (1u << s->ndims))
		return v_fail(v, ISA_E_BAD_VALUE, "axes", "mask 0x%x for %u free dims of src", axes,
			      s->ndims);
	if (d->nparts != s->nparts)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst", "%u partitions, src has %u", d->nparts,
			      s->nparts);
	uint64_t kept = 1;
	for (unsigned k = 0; k < s->ndims; k++)
		if (!(axes & (1u << k)))
			kept *= s->size[k];
	if (isa_ap_free_elems(d) != kept)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst",
			      "%llu elements per partition, reducing axes 0x%x of src leaves %llu",
			      (unsigned long long)isa_ap_free_elems(d), axes, (unsigned long long)kept);
	return ISA_OK;
}

/* exponential: VectorE from NeuronCore-v4 (nki.isa.exponential); max an
 * immediate or a per-partition column; reduce_dst one value per partition */
static isa_status rule_exponential(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC];
	isa_status st;
	if ((st = v_feature(v, ISA_FEAT_exponential)) != ISA_OK ||
	    (st = v_same_count(v, d, "dst", s, "src")) != ISA_OK)
		return st;
	if (v_has(in, ISA_AP_SRC1) &&
	    (st = v_per_partition(v, &in->ap[ISA_AP_SRC1], "max", s, "src")) != ISA_OK)
		return st;
	return v_row_result(v, in);
}

/* bn_stats: at most 512 source elements per partition (the hardware limit,
 * nl.tile_size.bn_stats_fmax), six results per partition */
static isa_status rule_bn_stats(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC];
	if (d->nparts != s->nparts)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst", "%u partitions, src has %u", d->nparts,
			      s->nparts);
	if (isa_ap_free_elems(s) > 512)
		return v_fail(v, ISA_E_BAD_VALUE, "src", "%llu elements per partition, bn_stats takes at most 512",
			      (unsigned long long)isa_ap_free_elems(s));
	if (isa_ap_free_elems(d) != 6)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst", "%llu elements per partition, bn_stats writes 6",
			      (unsigned long long)isa_ap_free_elems(d));
	return ISA_OK;
}

/* bn_aggr: (count, mean, variance*count) triples in, (mean, variance) out */
static isa_status rule_bn_aggr(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC];
	uint64_t n = isa_ap_free_elems(s);
	if (d->nparts != s->nparts)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst", "%u partitions, src has %u", d->nparts,
			      s->nparts);
	if (n % 3)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "src",
			      "%llu elements per partition, not (count, mean, variance*count) triples",
			      (unsigned long long)n);
	if (isa_ap_free_elems(d) != 2)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst", "%llu elements per partition, bn_aggr writes 2",
			      (unsigned long long)isa_ap_free_elems(d));
	return ISA_OK;
}

/* max8 / nc_find_index8 (nki.isa): 8 to 16384 source elements per
 * partition, 8 results per partition, one partition range throughout */
static isa_status v_eight_of(vctx *v, const isa_ap *d, const isa_ap *s, const char *sname)
{
	uint64_t n = isa_ap_free_elems(s);
	if (d->nparts != s->nparts)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst", "%u partitions, %s has %u", d->nparts, sname,
			      s->nparts);
	if (n < 8 || n > 16384)
		return v_fail(v, ISA_E_BAD_VALUE, sname, "%llu elements per partition, not 8 to 16384",
			      (unsigned long long)n);
	if (isa_ap_free_elems(d) != 8)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst", "%llu elements per partition, 8 are written",
			      (unsigned long long)isa_ap_free_elems(d));
	return ISA_OK;
}

static isa_status rule_max8(vctx *v, const isa_instr *in)
{
	return v_eight_of(v, &in->ap[ISA_AP_DST], &in->ap[ISA_AP_SRC], "src");
}

/* positions are uint16 or uint32; vals holds the 8 values of each partition */
static isa_status rule_nc_find_index8(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *vals = &in->ap[ISA_AP_SRC1];
	isa_status st;
	if ((st = v_eight_of(v, d, &in->ap[ISA_AP_SRC], "data")) != ISA_OK)
		return st;
	if (d->dtype != ISA_DT_uint16 && d->dtype != ISA_DT_uint32)
		return v_fail(v, ISA_E_BAD_DTYPE, "dst", "positions are uint16 or uint32, not %s",
			      isa_dtype_name(d->dtype));
	if (vals->nparts != d->nparts || isa_ap_free_elems(vals) != 8)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "vals", "[%u, %llu]: 8 values for each of dst's %u partitions",
			      vals->nparts, (unsigned long long)isa_ap_free_elems(vals), d->nparts);
	return ISA_OK;
}

/* NeuronCore-v3+ (SDK nki.isa.nonzero_with_count); integer positions, one
 * more element per partition than src (the count), the same partitions */
static isa_status rule_nonzero_with_count(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC];
	isa_status st;
	if ((st = v_feature(v, ISA_FEAT_nonzero_with_count)) != ISA_OK)
		return st;
	if (!isa_dtype_is_integer(d->dtype))
		return v_fail(v, ISA_E_BAD_DTYPE, "dst", "positions are integers, not %s", isa_dtype_name(d->dtype));
	if (d->nparts != s->nparts || isa_ap_free_elems(d) != isa_ap_free_elems(s) + 1)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst", "[%u, %llu]: src's [%u, %llu] and one more for the count",
			      d->nparts, (unsigned long long)isa_ap_free_elems(d), s->nparts,
			      (unsigned long long)isa_ap_free_elems(s));
	return ISA_OK;
}

/* dst: data with 8 values replaced (same size); dst_idx as nc_find_index8's dst */
static isa_status rule_nc_match_replace8(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC], *vals = &in->ap[ISA_AP_SRC1];
	const isa_ap *ix = &in->ap[ISA_AP_AUX];
	isa_status st;
	uint64_t n = isa_ap_free_elems(s);
	if ((st = v_same_count(v, d, "dst", s, "data")) != ISA_OK)
		return st;
	if (n < 8 || n > 16384)
		return v_fail(v, ISA_E_BAD_VALUE, "data", "%llu elements per partition, not 8 to 16384",
			      (unsigned long long)n);
	if (vals->nparts != s->nparts || isa_ap_free_elems(vals) != 8)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "vals", "[%u, %llu]: 8 values for each of data's %u partitions",
			      vals->nparts, (unsigned long long)isa_ap_free_elems(vals), s->nparts);
	if (!v_has(in, ISA_AP_AUX))
		return ISA_OK;
	if (ix->dtype != ISA_DT_uint16 && ix->dtype != ISA_DT_uint32)
		return v_fail(v, ISA_E_BAD_DTYPE, "dst_idx", "positions are uint16 or uint32, not %s",
			      isa_dtype_name(ix->dtype));
	if (ix->nparts != s->nparts || isa_ap_free_elems(ix) != 8)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst_idx", "[%u, %llu]: 8 positions for each of data's %u "
			      "partitions", ix->nparts, (unsigned long long)isa_ap_free_elems(ix), s->nparts);
	return ISA_OK;
}

static isa_status rule_tensor_partition_reduce(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *s = &in->ap[ISA_AP_SRC];
	isa_status st;
	if ((st = v_alu(v, in->e[0], ISA_AU_RED, "op", false)) != ISA_OK)
		return st;
	if (d->nparts != 1)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst", "%u partitions, a partition reduce writes 1",
			      d->nparts);
	if (isa_ap_free_elems(d) != isa_ap_free_elems(s))
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dst", "%llu elements, src rows have %llu",
			      (unsigned long long)isa_ap_free_elems(d),
			      (unsigned long long)isa_ap_free_elems(s));
	return ISA_OK;
}

static isa_status rule_tensor_copy(vctx *v, const isa_instr *in)
{
	return v_same_count(v, &in->ap[ISA_AP_DST], "dst", &in->ap[ISA_AP_SRC], "src");
}

static isa_status rule_select(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST];
	isa_status st;
	if ((st = v_same_count(v, d, "dst", &in->ap[ISA_AP_SRC], "pred")) != ISA_OK ||
	    (st = v_same_count(v, d, "dst", &in->ap[ISA_AP_SRC1], "on_true")) != ISA_OK)
		return st;
	return v_same_count(v, d, "dst", &in->ap[ISA_AP_SRC2], "on_false");
}

static isa_status check_affine(vctx *v, const isa_instr *in, const isa_ap *shape)
{
	if (in->imm[0].kind != ISA_IMM_I32 || in->imm[1].kind != ISA_IMM_I32)
		return v_fail(v, ISA_E_BAD_VALUE, in->imm[0].kind != ISA_IMM_I32 ? "base" : "pmul",
			      "affine expressions take integers");
	if (in->nivec > shape->ndims)
		return v_fail(v, ISA_E_BAD_DIMS, "mul", "%u multipliers for %u free dims", in->nivec,
			      shape->ndims);
	return ISA_OK;
}

static isa_status rule_iota(vctx *v, const isa_instr *in)
{
	return check_affine(v, in, &in->ap[ISA_AP_DST]);
}

static isa_status rule_affine_select(vctx *v, const isa_instr *in)
{
	isa_status st;
	if ((st = v_same_count(v, &in->ap[ISA_AP_DST], "dst", &in->ap[ISA_AP_SRC], "src")) != ISA_OK ||
	    (st = v_alu(v, in->e[0], ISA_AU_CMP, "cmp", false)) != ISA_OK)
		return st;
	return check_affine(v, in, &in->ap[ISA_AP_SRC]);
}

/* ------------------------------------------------- random numbers (PRNG) */

/* NKI ISA rules: rng and the PRNG state instructions are features of the
 * engine they run on (isa_features.def) */
static isa_status check_rng_engine(vctx *v, const char *field, int gpsimd_feature, int vector_feature)
{
	int f = v->engine == ISA_ENGINE_GPSIMD ? gpsimd_feature : vector_feature;
	if (!isa_target_has(v->p->target, f))
		return v_fail(v, ISA_E_BAD_ENGINE, field, "needs NeuronCore-v%u or newer on %s (%s is %s)",
			      isa_feature_first_core(f), isa_engine_name(v->engine), v->ti->name, v->ti->core);
	return ISA_OK;
}

static isa_status rule_rng(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST];
	isa_status st;
	if ((st = check_rng_engine(v, "dst", ISA_FEAT_rng_gpsimd, ISA_FEAT_rng_vector)) != ISA_OK)
		return st;
	switch (d->dtype) {
	case ISA_DT_int8: case ISA_DT_int16: case ISA_DT_int32:
	case ISA_DT_uint8: case ISA_DT_uint16: case ISA_DT_uint32:
		return ISA_OK;
	default:
		return v_fail(v, ISA_E_BAD_DTYPE, "dst", "rng writes integers, not %s",
			      isa_dtype_name(d->dtype));
	}
}

/* one XORWOW state is 6 words; VectorE keeps 4 per lane */
static isa_status check_rand_state(vctx *v, const isa_ap *a, const char *field)
{
	isa_status st;
	if ((st = check_rng_engine(v, field, ISA_FEAT_rng_state_gpsimd, ISA_FEAT_rng_state_vector)) != ISA_OK)
		return st;
	if (a->dtype != ISA_DT_uint32)
		return v_fail(v, ISA_E_BAD_DTYPE, field, "PRNG state is uint32, not %s",
			      isa_dtype_name(a->dtype));
	uint64_t want = v->engine == ISA_ENGINE_GPSIMD ? 6 : 24;
	if (isa_ap_free_elems(a) != want)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, field,
			      "%llu elements per partition; a %s lane's XORWOW state is %llu",
			      (unsigned long long)isa_ap_free_elems(a), isa_engine_name(v->engine),
			      (unsigned long long)want);
	return ISA_OK;
}

static isa_status rule_rand_set_state(vctx *v, const isa_instr *in)
{
	return check_rand_state(v, &in->ap[ISA_AP_SRC], "src");
}

static isa_status rule_rand_get_state(vctx *v, const isa_instr *in)
{
	return check_rand_state(v, &in->ap[ISA_AP_DST], "dst");
}

/* ------------------------------------------------------------- control */

static isa_status rule_sem_wait(vctx *v, const isa_instr *in)
{
	if (in->u[0] == ISA_SEM_NONE)
		return v_fail(v, ISA_E_MISSING_OPERAND, "sem", "sem_wait needs sem=");
	return v_alu(v, in->e[0], ISA_AU_CMP, "cond", false);
}

/* the paired core (LNC=2) exists from NeuronCore-v3 on (nki.isa sendrecv,
 * core_barrier: "available only on NeuronCore-v3 or newer") */
static isa_status v_peer(vctx *v, const isa_instr *in)
{
	if ((in->flags & ISA_FLAG_PEER) && !isa_target_has(v->p->target, ISA_FEAT_peer))
		return v_fail(v, ISA_E_BAD_VALUE, "peer",
			      "%s peer: cores pair up (LNC=2) on NeuronCore-v%u and newer, not %s",
			      isa_op_name(in->opcode), isa_feature_first_core(ISA_FEAT_peer), v->ti->core);
	return ISA_OK;
}

static isa_status rule_sem_signal(vctx *v, const isa_instr *in)
{
	if (in->u[0] == ISA_SEM_NONE)
		return v_fail(v, ISA_E_MISSING_OPERAND, "sem", "sem_signal needs sem=");
	if ((in->flags & ISA_FLAG_PEER) && (in->flags & ISA_FLAG_REMOTE))
		return v_fail(v, ISA_E_BAD_VALUE, "remote", "sem_signal: peer or remote, not both");
	if (in->u[2] && !(in->flags & ISA_FLAG_REMOTE))
		return v_fail(v, ISA_E_BAD_VALUE, "rank", "sem_signal rank=%u without remote", in->u[2]);
	return v_peer(v, in);
}

/* dma_copy: descriptor, queue, semaphore and value are field rules and the
 * descriptor's operands are checked with the DMA table; a peer transfer
 * writes the paired core's SBUF, row for row */
static isa_status rule_dma_copy(vctx *v, const isa_instr *in)
{
	if (in->nivec) {
		/* dyn=reg,stride,side[,skip]: an HBM side's offset moves by a
		 * register; skip 1 drops a transfer it would carry outside the
		 * tensor (nki.isa oob_mode.skip) instead of faulting */
		const isa_dma_desc *d = &v->p->dma[in->u[0]];
		if (in->nivec < 3 || in->ivec[0] < 0 || in->ivec[0] > 63 || (in->ivec[2] != 0 && in->ivec[2] != 1) ||
		    (in->nivec == 4 && in->ivec[3] != 0 && in->ivec[3] != 1))
			return v_fail(v, ISA_E_BAD_VALUE, "dyn", "dyn=REG,STRIDE,SIDE[,SKIP]: a register 0..63, a byte "
				      "stride, 0 (dst) or 1 (src), 1 to skip a transfer the offset moves out of bounds");
		if ((in->ivec[2] ? d->src.space : d->dst.space) != ISA_SPACE_HBM || d->mode != ISA_DMA_DIRECT)
			return v_fail(v, ISA_E_BAD_SPACE, "dyn", "descriptor '%s': dyn= moves the HBM side of a "
				      "direct transfer", d->name);
	}
	if (!(in->flags & ISA_FLAG_PEER))
		return ISA_OK;
	isa_status st = v_peer(v, in);
	if (st)
		return st;
	const isa_dma_desc *d = &v->p->dma[in->u[0]];
	if (d->dst.space != ISA_SPACE_SBUF || d->mode != ISA_DMA_DIRECT)
		return v_fail(v, ISA_E_BAD_SPACE, "peer",
			      "dma_copy peer: descriptor '%s' must be a direct transfer into SBUF", d->name);
	return ISA_OK;
}

/* ------------------------------------------------------------ registers */

/* one 32-bit integer in SBUF: what a sequencer register reads or writes */
static isa_status v_reg_word(vctx *v, const isa_ap *ap, const char *field)
{
	isa_status st = v_check_ap(v, ap, field, SP_SBUF);
	if (st)
		return st;
	if (ap->dtype != ISA_DT_int32 && ap->dtype != ISA_DT_uint32)
		return v_fail(v, ISA_E_BAD_DTYPE, field, "a register holds an int32 or uint32, not %s",
			      isa_dtype_name(ap->dtype));
	if (ap->nparts != 1 || isa_ap_free_elems(ap) != 1)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, field, "one element ([1, 1]), got %u x %llu", ap->nparts,
			      (unsigned long long)isa_ap_free_elems(ap));
	return ISA_OK;
}

static isa_status rule_reg_load(vctx *v, const isa_instr *in)
{
	return v_reg_word(v, &in->ap[ISA_AP_SRC], "src");
}

static isa_status rule_reg_store(vctx *v, const isa_instr *in)
{
	return v_reg_word(v, &in->ap[ISA_AP_DST], "dst");
}

/* integer arithmetic, comparisons and bit operations; no float-only ones */
static isa_status rule_reg_alu(vctx *v, const isa_instr *in)
{
	if (in->e[0] == ISA_ALU_divide || in->e[0] == ISA_ALU_pow)
		return v_fail(v, ISA_E_BAD_OPERATOR, "op", "reg_alu: '%s' is not a sequencer operation",
			      isa_alu_name(in->e[0]));
	if (in->u[2] != 64 && in->imm[0].bits)
		return v_fail(v, ISA_E_BAD_VALUE, "imm", "reg_alu: b= or imm=, not both");
	if (in->u[2] == 64 && in->imm[0].kind != ISA_IMM_I32)
		return v_fail(v, ISA_E_BAD_VALUE, "imm", "reg_alu: an integer immediate");
	return v_alu(v, in->e[0], ISA_AU_TS, "op", true);
}

/* a register compared with a register or an integer immediate; without
 * a register, unconditional (the target's bound is the stream's: isa_validate) */
static isa_status rule_branch(vctx *v, const isa_instr *in)
{
	if (in->u[1] == 64) {
		if (in->u[2] != 64 || in->imm[0].bits)
			return v_fail(v, ISA_E_BAD_VALUE, "a", "branch: b= or imm= compare with register a=");
		return ISA_OK;
	}
	if (in->u[2] != 64 && in->imm[0].bits)
		return v_fail(v, ISA_E_BAD_VALUE, "imm", "branch: b= or imm=, not both");
	if (in->u[2] == 64 && in->imm[0].kind != ISA_IMM_I32)
		return v_fail(v, ISA_E_BAD_VALUE, "imm", "branch: an integer immediate");
	return v_alu(v, in->e[0], ISA_AU_CMP, "cond", true);
}

static isa_status rule_fence(vctx *v, const isa_instr *in)
{
	if (in->u[0] > v->p->num_semaphores)
		return v_fail(v, ISA_E_BAD_SEMAPHORE, "sems", "%u semaphores, program declares %u", in->u[0],
			      v->p->num_semaphores);
	return ISA_OK;
}

/* memset (one operand), barrier, nop and end have no relation between operands left to check. */
static isa_status rule_no_operands(vctx *v, const isa_instr *in)
{
	(void)v;
	(void)in;
	return ISA_OK;
}

/* One registration line per opcode. */
const isa_op_rule isa_op_rules[ISA_NUM_OPS] = {
	[ISA_OP_load_stationary]         = rule_load_stationary,
	[ISA_OP_multiply_moving]         = rule_multiply_moving,
	[ISA_OP_quantize_mx]             = rule_quantize_mx,
	[ISA_OP_nc_transpose]            = rule_nc_transpose,
	[ISA_OP_activation]              = rule_activation,
	[ISA_OP_tensor_tensor]           = rule_tensor_tensor,
	[ISA_OP_scalar_tensor_tensor]    = rule_scalar_tensor_tensor,
	[ISA_OP_tensor_tensor_scan]      = rule_tensor_tensor_scan,
	[ISA_OP_tensor_scalar]           = rule_tensor_scalar,
	[ISA_OP_tensor_scalar_reduce]    = rule_tensor_scalar_reduce,
	[ISA_OP_tensor_reduce]           = rule_tensor_reduce,
	[ISA_OP_tensor_partition_reduce] = rule_tensor_partition_reduce,
	[ISA_OP_exponential]             = rule_exponential,
	[ISA_OP_bn_stats]                = rule_bn_stats,
	[ISA_OP_bn_aggr]                 = rule_bn_aggr,
	[ISA_OP_max8]                    = rule_max8,
	[ISA_OP_nc_find_index8]          = rule_nc_find_index8,
	[ISA_OP_nc_match_replace8]       = rule_nc_match_replace8,
	[ISA_OP_nonzero_with_count]      = rule_nonzero_with_count,
	[ISA_OP_nc_stream_shuffle]       = rule_nc_stream_shuffle,
	[ISA_OP_tensor_copy]             = rule_tensor_copy,
	[ISA_OP_select]                  = rule_select,
	[ISA_OP_copy_predicated]         = rule_copy_predicated,
	[ISA_OP_range_select]            = rule_range_select,
	[ISA_OP_memset]                  = rule_no_operands,
	[ISA_OP_iota]                    = rule_iota,
	[ISA_OP_affine_select]           = rule_affine_select,
	[ISA_OP_nc_n_gather]             = rule_nc_n_gather,
	[ISA_OP_local_gather]            = rule_local_gather,
	[ISA_OP_topk]                    = rule_topk,
	[ISA_OP_rng]                     = rule_rng,
	[ISA_OP_rand_set_state]          = rule_rand_set_state,
	[ISA_OP_rand_get_state]          = rule_rand_get_state,
	[ISA_OP_dma_copy]                = rule_dma_copy,
	[ISA_OP_sem_wait]                = rule_sem_wait,
	[ISA_OP_sem_signal]              = rule_sem_signal,
	[ISA_OP_barrier]                 = rule_no_operands,
	[ISA_OP_reg_load]                = rule_reg_load,
	[ISA_OP_reg_alu]                 = rule_reg_alu,
	[ISA_OP_reg_store]               = rule_reg_store,
	[ISA_OP_branch]                  = rule_branch,
	[ISA_OP_fence]                   = rule_fence,
	[ISA_OP_nop]                     = rule_no_operands,
	[ISA_OP_end]                     = rule_no_operands,
};
