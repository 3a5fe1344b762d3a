/*
 * disasm.c -- the text form (.nsasm) writer.  Its output is exactly what
 * asm.c reads back: asm(disasm(p)) encodes to the same bytes as p.
 *
 * Operand syntax (one token, no spaces):
 *   sbuf:bf16[0:128]+256{1x512}          partitions 0..127, byte 256, 512 elems
 *   psum:fp32[0:64]{1x512,0x2}           free dims stride x size, outermost first
 *   hbm(x):fp32[512x128]+64{1x512}       tensor x, 128 rows 512 elems apart
 */
#include "isa_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void isa_text_ap(isa_text *t, const isa_program *p, const isa_ap *ap)
{
	const char *dt = isa_dtype_name(ap->dtype);
	if (!dt)
		dt = "?";
	if (ap->space == ISA_SPACE_HBM) {
		if (p && ap->tensor < p->n_tensors)
			isa_text_printf(t, "hbm(%s):%s", p->tensors[ap->tensor].name, dt);
		else
			isa_text_printf(t, "hbm(#%u):%s", ap->tensor, dt);
		isa_text_printf(t, "[%lldx%u]", (long long)ap->pstride, ap->nparts);
	} else {
		const char *sp = isa_space_name(ap->space);
		isa_text_printf(t, "%s:%s[%u:%u]", sp ? sp : "?", dt, ap->start,
				ap->start + ap->nparts);
	}
	if (ap->offset)
		isa_text_printf(t, "+%llu", (unsigned long long)ap->offset);
	isa_text_printf(t, "{");
	for (unsigned d = 0; d < ap->ndims && d < ISA_MAX_DIMS; d++)
		isa_text_printf(t, "%s%dx%u", d ? "," : "", ap->stride[d], ap->size[d]);
	isa_text_printf(t, "}");
}

/*
 * Integers print as integers; fp32 immediates always carry a '.', an
 * exponent, "inf" or "nan(0xBITS)" so the parser knows their kind, and 9
 * significant digits make every finite float round-trip exactly.
 */
void isa_text_imm(isa_text *t, isa_imm imm)
{
	if (imm.kind == ISA_IMM_I32) {
		isa_text_printf(t, "%d", (int32_t)imm.bits);
		return;
	}
	float f;
	memcpy(&f, &imm.bits, sizeof(f));
	if (isnan(f)) {
		isa_text_printf(t, "nan(0x%08x)", imm.bits);
		return;
	}
	if (isinf(f)) {
		isa_text_printf(t, "%sinf", f < 0 ? "-" : "");
		return;
	}
	char buf[48];
	snprintf(buf, sizeof(buf), "%.9g", (double)f);
	if (!strpbrk(buf, ".e"))
		strcat(buf, ".0");
	isa_text_printf(t, "%s", buf);
}

void isa_text_instr(isa_text *t, const isa_program *p, const isa_instr *in)
{
	if (in->opcode >= ISA_NUM_OPS) {
		isa_text_printf(t, "<opcode %u>", in->opcode);
		return;
	}
	isa_text_printf(t, "%s", isa_ops[in->opcode].name);
	for (const isa_field *f = isa_op_fields(in->opcode); f->key; f++) {
		switch (f->kind) {
		case ISA_FK_AP:
			isa_text_printf(t, " %s=", f->key);
			isa_text_ap(t, p, &in->ap[f->slot]);
			break;
		case ISA_FK_APOPT:
			if (in->ap_mask & (1u << f->slot)) {
				isa_text_printf(t, " %s=", f->key);
				isa_text_ap(t, p, &in->ap[f->slot]);
			}
			break;
		case ISA_FK_SCALAR:
			isa_text_printf(t, " %s=", f->key);
			if (in->ap_mask & (1u << f->ap_slot))
				isa_text_ap(t, p, &in->ap[f->ap_slot]);
			else
				isa_text_imm(t, in->imm[f->slot]);
			break;
		case ISA_FK_ENUM: {
			const char *n = isa_enum_name(f->domain, in->e[f->slot]);
			if (n)
				isa_text_printf(t, " %s=%s", f->key, n);
			else
				isa_text_printf(t, " %s=<%u>", f->key, in->e[f->slot]);
			break;
		}
		case ISA_FK_IMM:
			isa_text_printf(t, " %s=", f->key);
			isa_text_imm(t, in->imm[f->slot]);
			break;
		case ISA_FK_U32:
			isa_text_printf(t, " %s=%u", f->key, in->u[f->slot]);
			break;
		case ISA_FK_SEM:
			if (in->u[f->slot] != ISA_SEM_NONE)
				isa_text_printf(t, " %s=%u", f->key, in->u[f->slot]);
			break;
		case ISA_FK_DESC: {
			uint32_t d = in->u[f->slot];
			if (p && d < p->n_dma)
				isa_text_printf(t, " %s=%s", f->key, p->dma[d].name);
			else
				isa_text_printf(t, " %s=#%u", f->key, d);
			break;
		}
		case ISA_FK_IVEC:
			if (in->nivec) {
				isa_text_printf(t, " %s=", f->key);
				for (unsigned i = 0; i < in->nivec && i < ISA_MAX_DIMS; i++)
					isa_text_printf(t, "%s%d", i ? "," : "", in->ivec[i]);
			}
			break;
		case ISA_FK_PMAP:
			isa_text_printf(t, " %s=", f->key);
			for (unsigned i = 0; i < ISA_QUADRANT; i++)
				isa_text_printf(t, "%s%u", i ? "," : "", in->pmap[i]);
			break;
		case ISA_FK_FLAG:
			if (in->flags & f->dflt)
				isa_text_printf(t, " %s", f->key);
			break;
		default:
			break;
		}
	}
}

static int copy_out(isa_text *t, char *buf, size_t size)
{
	int n = (int)t->len;
	if (size) {
		size_t m = t->len < size - 1 ? t->len : size - 1;
		if (t->buf)
			memcpy(buf, t->buf, m);
		buf[m] = '\0';
	}
	free(t->buf);
	return t->oom ? -1 : n;
}

int isa_format_instr(const isa_program *p, const isa_instr *in, char *buf, size_t size)
{
	isa_text t = { 0 };
	isa_text_instr(&t, p, in);
	return copy_out(&t, buf, size);
}

int isa_format_ap(const isa_program *p, const isa_ap *ap, char *buf, size_t size)
{
	isa_text t = { 0 };
	isa_text_ap(&t, p, ap);
	return copy_out(&t, buf, size);
}

static void text_tensor(isa_text *t, const isa_program *p, const isa_tensor *tn)
{
	isa_text_printf(t, ".tensor %s %s %s [", tn->name, isa_tensor_kind_name(tn->kind),
			isa_dtype_name(tn->dtype));
	for (unsigned d = 0; d < tn->rank; d++)
		isa_text_printf(t, "%s%llu", d ? "," : "", (unsigned long long)tn->shape[d]);
	isa_text_printf(t, "]");
	if (tn->kind == ISA_TK_INTERNAL)
		isa_text_printf(t, " offset=%llu", (unsigned long long)tn->offset);
	if (tn->kind == ISA_TK_CONST) {
		uint64_t n = isa_tensor_bytes(tn);
		isa_text_printf(t, " data=");
		for (uint64_t i = 0; i < n; i++)
			isa_text_printf(t, "%02x", p->consts[tn->offset + i]);
	}
	isa_text_printf(t, "\n");
}

isa_status isa_disasm(const isa_program *p, char **text, size_t *len, isa_diag *diag)
{
	isa_text t = { 0 };
	*text = NULL;
	*len = 0;

	/* the validator guarantees every index printed below is in range */
	isa_status st = isa_validate(p, diag);
	if (st != ISA_OK)
		return st;

	isa_text_printf(&t, "; neuronsim program (format %u.%u)\n", ISA_FORMAT_VERSION_MAJOR,
			ISA_FORMAT_VERSION_MINOR);
	isa_text_printf(&t, ".target %s\n", isa_target_name(p->target));
	isa_text_printf(&t, ".semaphores %u\n", p->num_semaphores);
	isa_text_printf(&t, ".scratch %llu\n", (unsigned long long)p->scratch_bytes);
	for (uint32_t i = 0; i < p->n_tensors; i++)
		text_tensor(&t, p, &p->tensors[i]);
	for (uint32_t i = 0; i < p->n_dma; i++) {
		const isa_dma_desc *d = &p->dma[i];
		isa_text_printf(&t, ".dma %s %s dst=", d->name, isa_dma_mode_name(d->mode));
		isa_text_ap(&t, p, &d->dst);
		isa_text_printf(&t, " src=");
		isa_text_ap(&t, p, &d->src);
		if (isa_dma_mode_indexed(d->mode)) {
			isa_text_printf(&t, " index=");
			isa_text_ap(&t, p, &d->index);
			if (d->oob_skip)
				isa_text_printf(&t, " oob=skip");
		}
		isa_text_printf(&t, "\n");
	}
	for (int e = 0; e < ISA_NUM_ENGINES; e++) {
		if (!p->n_instr[e])
			continue;
		isa_text_printf(&t, "\n.engine %s\n", isa_engine_name(e));
		for (uint32_t i = 0; i < p->n_instr[e]; i++) {
			isa_text_printf(&t, "    ");
			isa_text_instr(&t, p, &p->stream[e][i]);
			isa_text_printf(&t, "\n");
		}
	}
	if (t.oom) {
		free(t.buf);
		return isa_fail(diag, ISA_E_NOMEM, -1, -1, NULL, "disassembling");
	}
	*text = t.buf;
	*len = t.len;
	return ISA_OK;
}
