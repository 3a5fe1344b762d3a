/*
 * fields.c -- binary encoding of operands and instructions.  One routine per
 * field kind; every instruction is decoded and encoded by walking its
 * format's field list, so operand fields are decoded in exactly one place.
 *
 * The decoder checks representation only (known codes, canonical 0/1 bytes,
 * lengths); meaning (bounds, shapes, dtype rules) is the validator's job.
 * The encoding is canonical: encode(decode(x)) == x for every accepted x.
 */
#include "isa_internal.h"

#include <string.h>

void isa_instr_defaults(isa_instr *in, int op)
{
	memset(in, 0, sizeof(*in));
	in->opcode = (uint8_t)op;
	for (const isa_field *f = isa_op_fields(op); f->key; f++) {
		switch (f->kind) {
		case ISA_FK_ENUM: {
			int idx = isa_enum_from_code(f->domain, f->dflt);
			in->e[f->slot] = (uint8_t)(idx < 0 ? 0 : idx);
			break;
		}
		case ISA_FK_U32:
		case ISA_FK_SEM:
			in->u[f->slot] = f->dflt;
			break;
		case ISA_FK_IMM:
			in->imm[f->slot] = isa_imm_i32((int32_t)f->dflt);
			break;
		case ISA_FK_SCALAR:
			in->imm[f->slot] = isa_imm_f32((float)f->dflt);
			break;
		case ISA_FK_PMAP:
			memset(in->pmap, ISA_PMAP_KEEP, sizeof(in->pmap));
			break;
		default:
			break;
		}
	}
}

/* ------------------------------------------------------------------ AP */

isa_status isa_decode_ap(isa_reader *r, isa_ap *ap, int engine, int64_t index,
			 const char *field, isa_diag *diag)
{
	memset(ap, 0, sizeof(*ap));
	unsigned space = isa_rd_u8(r);
	unsigned dcode = isa_rd_u8(r);
	unsigned ndims = isa_rd_u8(r);
	if (r->short_read)
		goto truncated;
	if (space == ISA_SPACE_NONE || space >= ISA_NUM_SPACES)
		return isa_fail(diag, ISA_E_BAD_CODE, engine, index, field,
				"memory space code %u", space);
	int dt = isa_dtype_from_code(dcode);
	if (dt == ISA_DT_INVALID)
		return isa_fail(diag, ISA_E_BAD_CODE, engine, index, field,
				"dtype code 0x%02x", dcode);
	if (ndims < 1 || ndims > ISA_MAX_DIMS)
		return isa_fail(diag, ISA_E_BAD_DIMS, engine, index, field,
				"%u free dims (1..%u allowed)", ndims, ISA_MAX_DIMS);
	ap->space = (uint8_t)space;
	ap->dtype = (uint8_t)dt;
	ap->ndims = (uint8_t)ndims;
	if (space == ISA_SPACE_HBM) {
		ap->tensor = isa_rd_u32(r);
		ap->nparts = isa_rd_u32(r);
		ap->pstride = (int64_t)isa_rd_u64(r);
	} else {
		ap->start = isa_rd_u8(r);
		ap->nparts = isa_rd_u16(r);
	}
	ap->offset = isa_rd_u64(r);
	for (unsigned d = 0; d < ndims; d++) {
		ap->stride[d] = (int32_t)isa_rd_u32(r);
		ap->size[d] = isa_rd_u32(r);
	}
	if (r->short_read)
		goto truncated;
	if (space != ISA_SPACE_HBM && ap->nparts > 0xffff)
		return isa_fail(diag, ISA_E_BAD_PARTITION, engine, index, field,
				"%u partitions", ap->nparts);
	return ISA_OK;

truncated:
	return isa_fail(diag, ISA_E_TRUNCATED, engine, index, field,
			"access pattern cut off at byte %zu", r->len);
}

void isa_encode_ap(isa_writer *w, const isa_ap *ap)
{
	isa_wr_u8(w, ap->space);
	isa_wr_u8(w, (uint8_t)isa_dtype_code(ap->dtype));
	isa_wr_u8(w, ap->ndims);
	if (ap->space == ISA_SPACE_HBM) {
		isa_wr_u32(w, ap->tensor);
		isa_wr_u32(w, ap->nparts);
		isa_wr_u64(w, (uint64_t)ap->pstride);
	} else {
		isa_wr_u8(w, ap->start);
		isa_wr_u16(w, (uint16_t)ap->nparts);
	}
	isa_wr_u64(w, ap->offset);
	for (unsigned d = 0; d < ap->ndims && d < ISA_MAX_DIMS; d++) {
		isa_wr_u32(w, (uint32_t)ap->stride[d]);
		isa_wr_u32(w, ap->size[d]);
	}
}

/* --------------------------------------------------------- instructions */

static isa_status decode_imm(isa_reader *r, isa_imm *imm, int engine, int64_t index,
			     const char *field, isa_diag *diag)
{
	unsigned kind = isa_rd_u8(r);
	imm->bits = isa_rd_u32(r);
	if (r->short_read)
		return isa_fail(diag, ISA_E_TRUNCATED, engine, index, field, "immediate cut off");
	if (kind > ISA_IMM_F32)
		return isa_fail(diag, ISA_E_BAD_CODE, engine, index, field,
				"immediate kind %u", kind);
	imm->kind = (uint8_t)kind;
	return ISA_OK;
}

static isa_status decode_bool(isa_reader *r, bool *out, int engine, int64_t index,
			      const char *field, isa_diag *diag)
{
	unsigned b = isa_rd_u8(r);
	if (r->short_read)
		return isa_fail(diag, ISA_E_TRUNCATED, engine, index, field, "cut off");
	if (b > 1)
		return isa_fail(diag, ISA_E_BAD_CODE, engine, index, field,
				"flag byte %u (0 or 1)", b);
	*out = b;
	return ISA_OK;
}

static isa_status decode_field(isa_reader *r, const isa_field *f, isa_instr *in,
			       int engine, int64_t index, isa_diag *diag)
{
	isa_status st = ISA_OK;
	bool present;

	switch (f->kind) {
	case ISA_FK_AP:
		st = isa_decode_ap(r, &in->ap[f->slot], engine, index, f->key, diag);
		in->ap_mask |= (uint8_t)(1u << f->slot);
		return st;
	case ISA_FK_APOPT:
		if ((st = decode_bool(r, &present, engine, index, f->key, diag)) != ISA_OK)
			return st;
		if (!present)
			return ISA_OK;
		in->ap_mask |= (uint8_t)(1u << f->slot);
		return isa_decode_ap(r, &in->ap[f->slot], engine, index, f->key, diag);
	case ISA_FK_SCALAR:
		if ((st = decode_bool(r, &present, engine, index, f->key, diag)) != ISA_OK)
			return st;
		if (!present)
			return decode_imm(r, &in->imm[f->slot], engine, index, f->key, diag);
		in->imm[f->slot] = isa_imm_f32(0.0f);
		in->ap_mask |= (uint8_t)(1u << f->ap_slot);
		return isa_decode_ap(r, &in->ap[f->ap_slot], engine, index, f->key, diag);
	case ISA_FK_ENUM: {
		unsigned code = isa_rd_u8(r);
		if (r->short_read)
			break;
		int idx = isa_enum_from_code(f->domain, code);
		if (idx < 0)
			return isa_fail(diag, ISA_E_BAD_CODE, engine, index, f->key,
					"code 0x%02x", code);
		in->e[f->slot] = (uint8_t)idx;
		return ISA_OK;
	}
	case ISA_FK_IMM:
		return decode_imm(r, &in->imm[f->slot], engine, index, f->key, diag);
	case ISA_FK_U32:
	case ISA_FK_SEM:
	case ISA_FK_DESC:
		in->u[f->slot] = isa_rd_u32(r);
		break;
	case ISA_FK_IVEC: {
		unsigned n = isa_rd_u8(r);
		if (r->short_read)
			break;
		if (n > ISA_MAX_DIMS)
			return isa_fail(diag, ISA_E_BAD_DIMS, engine, index, f->key,
					"%u entries (at most %u)", n, ISA_MAX_DIMS);
		in->nivec = (uint8_t)n;
		for (unsigned i = 0; i < n; i++)
			in->ivec[i] = (int32_t)isa_rd_u32(r);
		break;
	}
	case ISA_FK_PMAP:
		for (unsigned i = 0; i < ISA_QUADRANT; i++)
			in->pmap[i] = isa_rd_u8(r);
		break;
	case ISA_FK_FLAG:
		if ((st = decode_bool(r, &present, engine, index, f->key, diag)) != ISA_OK)
			return st;
		if (present)
			in->flags |= (uint16_t)f->dflt;
		return ISA_OK;
	default:
		return isa_fail(diag, ISA_E_BAD_CODE, engine, index, f->key, "field kind");
	}
	if (r->short_read)
		return isa_fail(diag, ISA_E_TRUNCATED, engine, index, f->key, "cut off");
	return ISA_OK;
}

isa_status isa_decode_instr(isa_reader *r, isa_instr *in, int engine, int64_t index,
			    isa_diag *diag)
{
	unsigned code = isa_rd_u8(r);
	if (r->short_read)
		return isa_fail(diag, ISA_E_TRUNCATED, engine, index, "opcode",
				"instruction cut off");
	int op = isa_op_from_code(code);
	if (op < 0)
		return isa_fail(diag, ISA_E_BAD_OPCODE, engine, index, "opcode",
				"opcode byte 0x%02x", code);
	isa_instr_defaults(in, op);
	in->nivec = 0;
	for (const isa_field *f = isa_op_fields(op); f->key; f++) {
		isa_status st = decode_field(r, f, in, engine, index, diag);
		if (st != ISA_OK)
			return st;
	}
	return ISA_OK;
}

static void encode_imm(isa_writer *w, isa_imm imm)
{
	isa_wr_u8(w, imm.kind);
	isa_wr_u32(w, imm.bits);
}

void isa_encode_instr(isa_writer *w, const isa_instr *in)
{
	isa_wr_u8(w, isa_ops[in->opcode].code);
	for (const isa_field *f = isa_op_fields(in->opcode); f->key; f++) {
		bool has_ap = in->ap_mask & (1u << (f->kind == ISA_FK_SCALAR ? f->ap_slot : f->slot));
		switch (f->kind) {
		case ISA_FK_AP:
			isa_encode_ap(w, &in->ap[f->slot]);
			break;
		case ISA_FK_APOPT:
			isa_wr_u8(w, has_ap);
			if (has_ap)
				isa_encode_ap(w, &in->ap[f->slot]);
			break;
		case ISA_FK_SCALAR:
			isa_wr_u8(w, has_ap);
			if (has_ap)
				isa_encode_ap(w, &in->ap[f->ap_slot]);
			else
				encode_imm(w, in->imm[f->slot]);
			break;
		case ISA_FK_ENUM:
			isa_wr_u8(w, (uint8_t)isa_enum_code(f->domain, in->e[f->slot]));
			break;
		case ISA_FK_IMM:
			encode_imm(w, in->imm[f->slot]);
			break;
		case ISA_FK_U32:
		case ISA_FK_SEM:
		case ISA_FK_DESC:
			isa_wr_u32(w, in->u[f->slot]);
			break;
		case ISA_FK_IVEC:
			isa_wr_u8(w, in->nivec);
			for (unsigned i = 0; i < in->nivec && i < ISA_MAX_DIMS; i++)
				isa_wr_u32(w, (uint32_t)in->ivec[i]);
			break;
		case ISA_FK_FLAG:
			isa_wr_u8(w, (in->flags & f->dflt) ? 1 : 0);
			break;
		case ISA_FK_PMAP:
			for (unsigned i = 0; i < ISA_QUADRANT; i++)
				isa_wr_u8(w, in->pmap[i]);
			break;
		default:
			break;
		}
	}
}
