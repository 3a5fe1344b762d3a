/*
 * validate_ap.c -- the checks every validation rule is built from: the
 * failure report, an access pattern's extent and bounds, element counts
 * that must agree, ALU operations an engine and dtype allow.  validate.c
 * (the program's structure) and validate_ops.c (one rule per opcode) both
 * use them; neither calls into the other for these.
 */
#include "validate.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

isa_status v_fail(vctx *v, isa_status code, const char *field, const char *fmt, ...)
{
	char detail[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (v->in && v->engine >= 0)
		return isa_fail(v->diag, code, v->engine, v->index, field, "%s: %s",
				isa_op_name(v->in->opcode), detail);
	return isa_fail(v->diag, code, v->engine, v->index, field, "%s", detail);
}

/* ---------------------------------------------------- access patterns */

uint64_t isa_ap_free_elems(const isa_ap *ap)
{
	uint64_t n = 1;
	for (unsigned d = 0; d < ap->ndims && d < ISA_MAX_DIMS; d++)
		if (__builtin_mul_overflow(n, (uint64_t)ap->size[d], &n))
			return UINT64_MAX;
	return n;
}

/* the free elements a pattern reaches at least once: dimensions of stride 0
 * (broadcasts) repeat elements instead of adding them */
uint64_t isa_ap_distinct_elems(const isa_ap *ap)
{
	uint64_t n = 1;
	for (unsigned d = 0; d < ap->ndims && d < ISA_MAX_DIMS; d++)
		if (ap->stride[d] != 0 && __builtin_mul_overflow(n, (uint64_t)ap->size[d], &n))
			return UINT64_MAX;
	return n;
}

/* adds (size-1)*stride elements of one dim to the [lo, hi] element span */
static bool span_add(int64_t *lo, int64_t *hi, int64_t stride, uint64_t size)
{
	int64_t ext;
	if (size == 0)
		return true;
	if (size - 1 > (uint64_t)INT64_MAX)
		return false;
	if (__builtin_mul_overflow(stride, (int64_t)(size - 1), &ext))
		return false;
	if (ext < 0)
		return !__builtin_add_overflow(*lo, ext, lo);
	return !__builtin_add_overflow(*hi, ext, hi);
}

bool isa_ap_byte_range(const isa_ap *ap, int64_t *lo_out, int64_t *hi_out)
{
	int64_t lo = 0, hi = 0;  /* element offsets relative to `offset` */
	unsigned esz = isa_dtype_size(ap->dtype);
	if (!esz || ap->offset > (uint64_t)INT64_MAX || ap->ndims > ISA_MAX_DIMS)
		return false;
	if (ap->space == ISA_SPACE_HBM && !span_add(&lo, &hi, ap->pstride, ap->nparts))
		return false;
	for (unsigned d = 0; d < ap->ndims; d++)
		if (!span_add(&lo, &hi, ap->stride[d], ap->size[d]))
			return false;
	int64_t blo, bhi;
	if (__builtin_mul_overflow(lo, (int64_t)esz, &blo) ||
	    __builtin_mul_overflow(hi + 1, (int64_t)esz, &bhi) ||
	    __builtin_add_overflow(blo, (int64_t)ap->offset, &blo) ||
	    __builtin_add_overflow(bhi, (int64_t)ap->offset, &bhi))
		return false;
	*lo_out = blo;
	*hi_out = bhi;
	return true;
}

static const char *spaces_text(unsigned spaces)
{
	switch (spaces) {
	case SP_SBUF:                     return "sbuf";
	case SP_PSUM:                     return "psum";
	case SP_HBM:                      return "hbm";
	case SP_SBUF | SP_PSUM:           return "sbuf or psum";
	case SP_HBM | SP_SBUF:            return "hbm or sbuf";
	default:                          return "hbm, sbuf or psum";
	}
}

isa_status v_check_ap(vctx *v, const isa_ap *ap, const char *field, unsigned spaces)
{
	if (ap->space == ISA_SPACE_NONE || ap->space >= ISA_NUM_SPACES)
		return v_fail(v, ISA_E_BAD_SPACE, field, "memory space code %u", ap->space);
	if (!((spaces >> ap->space) & 1u))
		return v_fail(v, ISA_E_BAD_SPACE, field, "%s operand, must be in %s",
			      isa_space_name(ap->space), spaces_text(spaces));
	if (ap->dtype == ISA_DT_INVALID || ap->dtype >= ISA_NUM_DTYPES)
		return v_fail(v, ISA_E_BAD_DTYPE, field, "dtype %u", ap->dtype);
	if (ap->ndims < 1 || ap->ndims > ISA_MAX_DIMS)
		return v_fail(v, ISA_E_BAD_DIMS, field, "%u free dims (1..%u)", ap->ndims,
			      ISA_MAX_DIMS);
	for (unsigned d = 0; d < ap->ndims; d++)
		if (ap->size[d] == 0)
			return v_fail(v, ISA_E_BAD_DIMS, field, "free dim %u has size 0", d);
	for (unsigned d = ap->ndims; d < ISA_MAX_DIMS; d++)
		if (ap->size[d] || ap->stride[d])
			return v_fail(v, ISA_E_BAD_DIMS, field, "unused free dim %u is not zero", d);

	unsigned esz = isa_dtype_size(ap->dtype);
	if (ap->offset % esz)
		return v_fail(v, ISA_E_BAD_VALUE, field, "byte offset %llu not aligned to %s (%u bytes)",
			      (unsigned long long)ap->offset, isa_dtype_name(ap->dtype), esz);

	uint64_t limit;
	if (ap->space == ISA_SPACE_HBM) {
		if (ap->start)
			return v_fail(v, ISA_E_BAD_PARTITION, field, "hbm operand with start partition %u",
				      ap->start);
		if (ap->tensor >= v->p->n_tensors)
			return v_fail(v, ISA_E_UNDEFINED_TENSOR, field, "tensor #%u (table has %u)",
				      ap->tensor, v->p->n_tensors);
		/* an access may read the tensor's bytes as another dtype (SDK
		 * nki-aps.rst, .ap(dtype=)): its bounds are the tensor's bytes */
		const isa_tensor *t = &v->p->tensors[ap->tensor];
		if (ap->nparts == 0)
			return v_fail(v, ISA_E_BAD_PARTITION, field, "0 rows");
		limit = isa_tensor_bytes(t);
	} else {
		if (ap->pstride || ap->tensor)
			return v_fail(v, ISA_E_BAD_VALUE, field,
				      "row stride / tensor set on an on-chip operand");
		if (ap->nparts == 0 || ap->nparts > ISA_NUM_PARTITIONS ||
		    ap->start + ap->nparts > ISA_NUM_PARTITIONS)
			return v_fail(v, ISA_E_BAD_PARTITION, field,
				      "partitions [%u, %u) outside [0, %u)", ap->start,
				      ap->start + ap->nparts, ISA_NUM_PARTITIONS);
		limit = ap->space == ISA_SPACE_SBUF ? v->ti->sbuf_partition_bytes
						    : v->ti->psum_partition_bytes;
	}

	int64_t lo, hi;
	if (!isa_ap_byte_range(ap, &lo, &hi))
		return v_fail(v, ISA_E_OVERFLOW, field, "access pattern extent does not fit 64 bits");
	if (lo < 0 || (uint64_t)hi > limit) {
		if (ap->space == ISA_SPACE_HBM)
			return v_fail(v, ISA_E_OUT_OF_BOUNDS, field,
				      "bytes [%lld, %lld) outside tensor '%s' (%llu bytes)",
				      (long long)lo, (long long)hi, v->p->tensors[ap->tensor].name,
				      (unsigned long long)limit);
		return v_fail(v, ISA_E_OUT_OF_BOUNDS, field,
			      "bytes [%lld, %lld) outside the %llu-byte %s partition of %s",
			      (long long)lo, (long long)hi, (unsigned long long)limit,
			      isa_space_name(ap->space), v->ti->name);
	}
	return ISA_OK;
}

isa_status v_same_count(vctx *v, const isa_ap *a, const char *fa, const isa_ap *b,
			const char *fb)
{
	if (a->nparts != b->nparts)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, fb, "%u partitions, %s has %u", b->nparts, fa,
			      a->nparts);
	uint64_t na = isa_ap_free_elems(a), nb = isa_ap_free_elems(b);
	if (na != nb)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, fb, "%llu elements per partition, %s has %llu",
			      (unsigned long long)nb, fa, (unsigned long long)na);
	return ISA_OK;
}

isa_status v_per_partition(vctx *v, const isa_ap *ap, const char *field, const isa_ap *ref,
			   const char *ref_field)
{
	if (ap->nparts != ref->nparts)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, field, "%u partitions, %s has %u", ap->nparts,
			      ref_field, ref->nparts);
	if (isa_ap_free_elems(ap) != 1)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, field,
			      "a per-partition scalar has 1 element per partition, not %llu",
			      (unsigned long long)isa_ap_free_elems(ap));
	if (ap->dtype != ISA_DT_fp32)
		return v_fail(v, ISA_E_BAD_DTYPE, field, "per-partition scalars are fp32, not %s",
			      isa_dtype_name(ap->dtype));
	return ISA_OK;
}

isa_status v_alu(vctx *v, unsigned alu, unsigned use, const char *field, bool integer_data)
{
	unsigned uses = isa_alu_uses((int)alu);
	if (!(uses & use))
		return v_fail(v, ISA_E_BAD_OPERATOR, field, "'%s' cannot be used here",
			      isa_alu_name((int)alu));
	if ((uses & ISA_AU_INT) && !integer_data)
		return v_fail(v, ISA_E_BAD_OPERATOR, field, "'%s' needs integer operands",
			      isa_alu_name((int)alu));
	return ISA_OK;
}

/* reduce_dst (when given): one value on each of dst's partitions */
isa_status v_row_result(vctx *v, const isa_instr *in)
{
	const isa_ap *d = &in->ap[ISA_AP_DST], *r = &in->ap[ISA_AP_AUX];
	if (v_has(in, ISA_AP_AUX) && (r->nparts != d->nparts || isa_ap_free_elems(r) != 1))
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "reduce_dst",
			      "[%u, %llu], expected [%u, 1]", r->nparts,
			      (unsigned long long)isa_ap_free_elems(r), d->nparts);
	return ISA_OK;
}

/* the instruction is a feature of later cores (isa_features.def) */
isa_status v_feature(vctx *v, int feature)
{
	if (isa_target_has(v->p->target, feature))
		return ISA_OK;
	return v_fail(v, ISA_E_BAD_ENGINE, "dst", "%s needs NeuronCore-v%u or newer (%s is %s)",
		      isa_op_name(v->in->opcode), isa_feature_first_core(feature), v->ti->name, v->ti->core);
}

/* a has ref's partitions and elements per partition */
isa_status v_same_rows(vctx *v, const isa_ap *a, const char *field, const isa_ap *ref, const char *rname)
{
	if (a->nparts == ref->nparts && isa_ap_free_elems(a) == isa_ap_free_elems(ref))
		return ISA_OK;
	return v_fail(v, ISA_E_SHAPE_MISMATCH, field, "[%u, %llu], %s [%u, %llu]", a->nparts,
		      (unsigned long long)isa_ap_free_elems(a), rname, ref->nparts,
		      (unsigned long long)isa_ap_free_elems(ref));
}
