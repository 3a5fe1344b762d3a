/*
 * validate.c -- the validator run on every load.  A program that passes can
 * be executed without further checks of its static structure: every index is
 * in range, every access pattern lies inside its memory, every size fits.
 * (Data-dependent checks -- indirect DMA indices, NaNs -- stay at run time.)
 *
 * Order: header limits, tensor table, constants, DMA descriptors, then each
 * engine stream in order (generic operand checks, then the opcode's rule from
 * isa_op_rules), then cross-stream rules (end, barriers).
 */
#include "validate.h"

#include "name_index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------- generic fields */

/* Where an engine's compute operands may live (GpSimd cannot reach PSUM). */
static unsigned compute_spaces(int engine)
{
	return engine == ISA_ENGINE_GPSIMD ? SP_SBUF : SP_SBUF | SP_PSUM;
}

/* Checks every field against its format: presence, enum/flag/range, and the
 * operand's memory; the opcode's own rule then checks how operands relate. */
static isa_status check_fields(vctx *v, const isa_instr *in)
{
	const isa_field *fields = isa_op_fields(in->opcode);
	uint8_t slots = 0;
	uint16_t flags = 0;
	isa_status st;

	for (const isa_field *f = fields; f->key; f++) {
		switch (f->kind) {
		case ISA_FK_AP:
			if (!v_has(in, f->slot))
				return v_fail(v, ISA_E_MISSING_OPERAND, f->key, "operand absent");
			slots |= (uint8_t)(1u << f->slot);
			break;
		case ISA_FK_APOPT:
			slots |= (uint8_t)(1u << f->slot);
			break;
		case ISA_FK_SCALAR:
			slots |= (uint8_t)(1u << f->ap_slot);
			if (!v_has(in, f->ap_slot) && in->imm[f->slot].kind > ISA_IMM_F32)
				return v_fail(v, ISA_E_BAD_CODE, f->key, "immediate kind %u",
					      in->imm[f->slot].kind);
			break;
		case ISA_FK_ENUM:
			if (in->e[f->slot] >= isa_enum_count(f->domain))
				return v_fail(v, ISA_E_BAD_CODE, f->key, "value %u", in->e[f->slot]);
			break;
		case ISA_FK_IMM:
			if (in->imm[f->slot].kind > ISA_IMM_F32)
				return v_fail(v, ISA_E_BAD_CODE, f->key, "immediate kind %u",
					      in->imm[f->slot].kind);
			break;
		case ISA_FK_U32:
			if (in->u[f->slot] > f->max)
				return v_fail(v, ISA_E_BAD_VALUE, f->key, "%u (at most %u)",
					      in->u[f->slot], f->max);
			break;
		case ISA_FK_SEM:
			if (in->u[f->slot] != ISA_SEM_NONE && in->u[f->slot] >= v->p->num_semaphores)
				return v_fail(v, ISA_E_BAD_SEMAPHORE, f->key,
					      "semaphore %u, program declares %u", in->u[f->slot],
					      v->p->num_semaphores);
			break;
		case ISA_FK_DESC:
			if (in->u[f->slot] >= v->p->n_dma)
				return v_fail(v, ISA_E_BAD_DESC, f->key, "descriptor #%u (program has %u)",
					      in->u[f->slot], v->p->n_dma);
			break;
		case ISA_FK_IVEC:
			if (in->nivec > ISA_MAX_DIMS)
				return v_fail(v, ISA_E_BAD_DIMS, f->key, "%u entries", in->nivec);
			break;
		case ISA_FK_FLAG:
			flags |= (uint16_t)f->dflt;
			break;
		case ISA_FK_PMAP:
			for (unsigned i = 0; i < ISA_QUADRANT; i++)
				if (in->pmap[i] >= ISA_QUADRANT && in->pmap[i] != ISA_PMAP_KEEP)
					return v_fail(v, ISA_E_BAD_VALUE, f->key,
						      "entry %u is %u (a partition 0..%u of the quadrant, or %u: keep)",
						      i, in->pmap[i], ISA_QUADRANT - 1, ISA_PMAP_KEEP);
			break;
		default:
			break;
		}
	}
	if (in->ap_mask & ~slots)
		return v_fail(v, ISA_E_BAD_VALUE, "operands", "operand slots 0x%02x not in the format",
			      in->ap_mask & ~slots);
	if (in->flags & ~flags)
		return v_fail(v, ISA_E_BAD_VALUE, "flags", "flag bits 0x%04x not in the format",
			      in->flags & ~flags);
	bool has_ivec = false;
	for (const isa_field *f = fields; f->key; f++)
		has_ivec |= f->kind == ISA_FK_IVEC;
	if (!has_ivec && in->nivec)
		return v_fail(v, ISA_E_BAD_VALUE, "ivec", "integer list not in the format");

	/* operand memories: TensorE and DMA rules are the opcode's; compute
	 * engines reach SBUF and (except GpSimd) PSUM, and process at most 64K
	 * elements per partition from SBUF, 4K from PSUM (HARDWARE.md).  In
	 * PSUM the 4K are what a partition holds (16 KiB of fp32): an operand
	 * broadcast along a dimension (stride 0) reads its elements again, so
	 * only the distinct ones count (nki-library's layernorm_tkg reads a
	 * [320] fp32 mean 24 times over in one instruction). */
	if (in->opcode == ISA_OP_dma_copy || v->engine == ISA_ENGINE_TENSOR)
		return ISA_OK;
	for (const isa_field *f = fields; f->key; f++) {
		int slot = f->kind == ISA_FK_SCALAR ? f->ap_slot : f->slot;
		if (f->kind != ISA_FK_AP && f->kind != ISA_FK_APOPT && f->kind != ISA_FK_SCALAR)
			continue;
		if (!v_has(in, slot))
			continue;
		const isa_ap *ap = &in->ap[slot];
		if ((st = v_check_ap(v, ap, f->key, compute_spaces(v->engine))) != ISA_OK)
			return st;
		uint64_t n = ap->space == ISA_SPACE_PSUM ? isa_ap_distinct_elems(ap) : isa_ap_free_elems(ap);
		uint64_t max = ap->space == ISA_SPACE_PSUM ? 4096 : 65536;
		if (n > max)
			return v_fail(v, ISA_E_LIMIT, f->key, "%llu elements per partition in %s (at most %llu)",
				      (unsigned long long)n, isa_space_name(ap->space),
				      (unsigned long long)max);
	}
	return ISA_OK;
}

static isa_status check_instr(vctx *v, const isa_instr *in)
{
	if (in->opcode >= ISA_NUM_OPS)
		return isa_fail(v->diag, ISA_E_BAD_OPCODE, v->engine, v->index, "opcode", "opcode %u",
				in->opcode);
	v->in = in;
	if (!(isa_ops[in->opcode].engines & (1u << v->engine)))
		return v_fail(v, ISA_E_BAD_ENGINE, "opcode", "%s cannot run on the %s engine",
			      isa_op_name(in->opcode), isa_engine_name(v->engine));
	isa_status st = check_fields(v, in);
	if (st != ISA_OK)
		return st;
	if ((st = v_mx_elsewhere(v, in)) != ISA_OK)
		return st;
	if (!isa_op_rules[in->opcode])
		return v_fail(v, ISA_E_BAD_OPCODE, "opcode", "no validator rule registered");
	return isa_op_rules[in->opcode](v, in);
}

/* ----------------------------------------------------------- tables */


static isa_status check_tensors(vctx *v)
{
	const isa_program *p = v->p;
	uint64_t const_end = 0;

	for (uint32_t i = 0; i < p->n_tensors; i++) {
		const isa_tensor *t = &p->tensors[i];
		v->index = i;
		if (!isa_name_valid(t->name))
			return v_fail(v, ISA_E_BAD_TENSOR, "tensor.name",
				      "tensor %u: name must be 1..%u of [A-Za-z0-9_.], not starting with a digit",
				      i, ISA_MAX_NAME);
		for (uint32_t j = 0; j < i; j++)
			if (strcmp(p->tensors[j].name, t->name) == 0)
				return v_fail(v, ISA_E_DUPLICATE_NAME, "tensor.name", "tensor '%s'",
					      t->name);
		if (t->dtype == ISA_DT_INVALID || t->dtype >= ISA_NUM_DTYPES)
			return v_fail(v, ISA_E_BAD_DTYPE, "tensor.dtype", "tensor '%s': dtype %u",
				      t->name, t->dtype);
		if (t->kind >= ISA_NUM_TENSOR_KINDS)
			return v_fail(v, ISA_E_BAD_TENSOR, "tensor.kind", "tensor '%s': kind %u",
				      t->name, t->kind);
		if (t->rank > ISA_MAX_RANK)
			return v_fail(v, ISA_E_BAD_TENSOR, "tensor.rank", "tensor '%s': rank %u",
				      t->name, t->rank);
		for (unsigned d = 0; d < t->rank; d++)
			if (t->shape[d] == 0)
				return v_fail(v, ISA_E_BAD_TENSOR, "tensor.shape",
					      "tensor '%s': dim %u is 0", t->name, d);
		uint64_t bytes = isa_tensor_bytes(t);
		if (bytes == 0 || bytes > ISA_MAX_TENSOR_BYTES)
			return v_fail(v, ISA_E_OVERFLOW, "tensor.shape",
				      "tensor '%s': size above %llu bytes", t->name,
				      (unsigned long long)ISA_MAX_TENSOR_BYTES);
		switch (t->kind) {
		case ISA_TK_INTERNAL:
			if (t->offset % isa_dtype_size(t->dtype))
				return v_fail(v, ISA_E_BAD_VALUE, "tensor.offset",
					      "tensor '%s': offset %llu not aligned", t->name,
					      (unsigned long long)t->offset);
			if (t->offset > p->scratch_bytes || bytes > p->scratch_bytes - t->offset)
				return v_fail(v, ISA_E_OUT_OF_BOUNDS, "tensor.offset",
					      "tensor '%s': bytes [%llu, +%llu) outside the %llu-byte scratch",
					      t->name, (unsigned long long)t->offset,
					      (unsigned long long)bytes,
					      (unsigned long long)p->scratch_bytes);
			break;
		case ISA_TK_CONST:
			/* constants are packed in table order, so the text form (which
			 * carries data inline) and the binary form map one to one */
			if (t->offset != const_end)
				return v_fail(v, ISA_E_CONST_SIZE, "tensor.offset",
					      "const tensor '%s' at byte %llu, expected %llu (packed in order)",
					      t->name, (unsigned long long)t->offset,
					      (unsigned long long)const_end);
			if (bytes > p->consts_size - const_end)
				return v_fail(v, ISA_E_CONST_SIZE, "tensor.data",
					      "const tensor '%s' needs %llu bytes, %llu left", t->name,
					      (unsigned long long)bytes,
					      (unsigned long long)(p->consts_size - const_end));
			const_end += bytes;
			break;
		default:
			if (t->offset)
				return v_fail(v, ISA_E_BAD_TENSOR, "tensor.offset",
					      "tensor '%s': %s tensors are placed at run time (offset 0)",
					      t->name, isa_tensor_kind_name(t->kind));
			break;
		}
	}
	v->index = -1;
	if (const_end != p->consts_size)
		return v_fail(v, ISA_E_CONST_SIZE, "consts",
			      "%llu constant bytes, const tensors use %llu",
			      (unsigned long long)p->consts_size, (unsigned long long)const_end);
	return ISA_OK;
}

/* DMA transpose (nki.isa.dma_transpose, 2-D): dst[i][j] = src[j][i], so
 * dst has a row per source element of a row and an element per source row;
 * the published constraints: 2-byte dtypes, no cast, dst in SBUF,
 * NeuronCore-v3 and later (the DMA engines' transpose mode) */
static isa_status check_dma_transpose(vctx *v, const isa_dma_desc *d, uint64_t nd, uint64_t ns)
{
	if (!isa_target_has(v->p->target, ISA_FEAT_dma_transpose))
		return v_fail(v, ISA_E_BAD_VALUE, "dma.mode", "descriptor '%s': DMA transpose needs "
			      "NeuronCore-v%u or newer (%s is %s)", d->name, isa_feature_first_core(ISA_FEAT_dma_transpose),
			      v->ti->name, v->ti->core);
	if (d->index.space || d->index.ndims)
		return v_fail(v, ISA_E_BAD_VALUE, "dma.index", "descriptor '%s': index operand on a "
			      "transpose", d->name);
	if (d->dst.space != ISA_SPACE_SBUF || d->src.space == ISA_SPACE_PSUM)
		return v_fail(v, ISA_E_BAD_SPACE, "dma.dst", "descriptor '%s': a DMA transpose writes "
			      "SBUF from HBM or SBUF", d->name);
	if (d->dst.dtype != d->src.dtype || isa_dtype_size(d->dst.dtype) != 2)
		return v_fail(v, ISA_E_BAD_DTYPE, "dma.dst", "descriptor '%s': a DMA transpose moves "
			      "2-byte elements without a cast (%s -> %s)", d->name,
			      isa_dtype_name(d->src.dtype), isa_dtype_name(d->dst.dtype));
	/* dst[p][j * I + i] = src[i][j * P + p]: the outer free elements j
	 * shared (J = 1 for the 2-D transpose; the 3-D / 4-D permutations of
	 * nki.isa.dma_transpose keep their middle axes in place) */
	uint64_t I = d->src.nparts, P = d->dst.nparts;
	if (!I || !P || nd % I || ns % P || nd / I != ns / P)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dma.dst", "descriptor '%s': transposing [%llu, %llu] "
			      "needs a destination of %llu partitions x %llu, or one of P partitions x %llu * %llu / P; "
			      "got [%llu, %llu]", d->name, (unsigned long long)I, (unsigned long long)ns,
			      (unsigned long long)ns, (unsigned long long)I, (unsigned long long)I,
			      (unsigned long long)ns, (unsigned long long)P, (unsigned long long)nd);
	return ISA_OK;
}

static isa_status check_dma_desc(vctx *v, const isa_dma_desc *d)
{
	const unsigned any = SP_HBM | SP_SBUF | SP_PSUM;
	isa_status st;

	if (!isa_name_valid(d->name))
		return v_fail(v, ISA_E_BAD_DESC, "dma.name", "descriptor %lld: bad name",
			      (long long)v->index);
	if (d->mode >= ISA_NUM_DMA_MODES)
		return v_fail(v, ISA_E_BAD_CODE, "dma.mode", "descriptor '%s': mode %u", d->name,
			      d->mode);
	if (d->oob_skip > 1 || (d->oob_skip && !isa_dma_mode_indexed(d->mode)))
		return v_fail(v, ISA_E_BAD_VALUE, "dma.oob_skip", "descriptor '%s': oob_skip %u on a %s "
			      "transfer (gather / scatter modes only: it drops rows whose index leaves the tensor)",
			      d->name, d->oob_skip, isa_dma_mode_name(d->mode));
	if ((st = v_check_ap(v, &d->dst, "dma.dst", any)) != ISA_OK ||
	    (st = v_check_ap(v, &d->src, "dma.src", any)) != ISA_OK)
		return st;
	if (d->dst.space == ISA_SPACE_HBM &&
	    v->p->tensors[d->dst.tensor].kind == ISA_TK_CONST)
		return v_fail(v, ISA_E_BAD_SPACE, "dma.dst", "descriptor '%s' writes const tensor '%s'",
			      d->name, v->p->tensors[d->dst.tensor].name);
	/* a direct copy casts between any dtypes, as the engines cast (through
	 * fp32: SDK nki.isa.dma_copy, "A cast will happen if the src and dst
	 * have different dtype"); the other modes between float types only */
	if (d->dst.dtype != d->src.dtype && d->mode != ISA_DMA_DIRECT &&
	    !(isa_dtype_is_float(d->dst.dtype) && isa_dtype_is_float(d->src.dtype)))
		return v_fail(v, ISA_E_BAD_DTYPE, "dma.dst",
			      "descriptor '%s': a %s DMA casts between float types only (%s -> %s)",
			      d->name, d->mode == ISA_DMA_TRANSPOSE ? "transposing" : "gather / scatter",
			      isa_dtype_name(d->src.dtype), isa_dtype_name(d->dst.dtype));

	/* MX data moves as bytes: to the same type, by the modes that copy */
	if (isa_dtype_is_mx(d->dst.dtype) || isa_dtype_is_mx(d->src.dtype)) {
		if (!isa_target_has(v->p->target, ISA_FEAT_mx))
			return v_fail(v, ISA_E_BAD_DTYPE, "dma.dst",
				      "descriptor '%s': MX data needs NeuronCore-v%u or newer (%s is %s)",
				      d->name, isa_feature_first_core(ISA_FEAT_mx), v->ti->name, v->ti->core);
		if (d->dst.dtype != d->src.dtype || isa_dma_mode_rmw(d->mode) || d->mode == ISA_DMA_TRANSPOSE)
			return v_fail(v, ISA_E_BAD_DTYPE, "dma.dst",
				      "descriptor '%s': MX data is copied as itself, without arithmetic or transposes (%s %s -> %s)",
				      d->name, isa_dma_mode_name(d->mode), isa_dtype_name(d->src.dtype),
				      isa_dtype_name(d->dst.dtype));
	}

	/* the engines' adds (read-modify-write): floats of any two types (the
	 * rule above; SDK nki.isa.dma_compute: the sources cast to fp32, the sum
	 * cast to dst's type) or one integer type (exact wrapping adds), never
	 * bool */
	if (isa_dma_mode_rmw(d->mode) && d->dst.dtype == ISA_DT_bool)
		return v_fail(v, ISA_E_BAD_DTYPE, "dma.dst",
			      "descriptor '%s': %s adds %s to %s (numbers only)", d->name,
			      isa_dma_mode_name(d->mode), isa_dtype_name(d->src.dtype),
			      isa_dtype_name(d->dst.dtype));
	uint64_t nd = isa_ap_free_elems(&d->dst), ns = isa_ap_free_elems(&d->src);
	if (d->mode == ISA_DMA_TRANSPOSE)
		return check_dma_transpose(v, d, nd, ns);
	if (d->mode == ISA_DMA_ADD && (d->dst.nparts != d->src.nparts || nd != ns))
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dma.src",
			      "descriptor '%s': add takes rows of one shape (%u x %llu into %u x %llu)", d->name,
			      d->src.nparts, (unsigned long long)ns, d->dst.nparts, (unsigned long long)nd);
	if (d->mode == ISA_DMA_DIRECT || d->mode == ISA_DMA_ADD) {
		uint64_t td, ts;
		if (d->index.space || d->index.ndims)
			return v_fail(v, ISA_E_BAD_VALUE, "dma.index",
				      "descriptor '%s': index operand on a direct transfer", d->name);
		if (__builtin_mul_overflow(nd, (uint64_t)d->dst.nparts, &td) ||
		    __builtin_mul_overflow(ns, (uint64_t)d->src.nparts, &ts))
			return v_fail(v, ISA_E_OVERFLOW, "dma.dst", "descriptor '%s': element count",
				      d->name);
		if (td != ts)
			return v_fail(v, ISA_E_SHAPE_MISMATCH, "dma.src",
				      "descriptor '%s': %llu elements to %llu", d->name,
				      (unsigned long long)ts, (unsigned long long)td);
		return ISA_OK;
	}

	/* indirect: one int32/uint32 row index per partition of an SBUF index
	 * operand; the indexed side's rows bound the table, checked at run time */
	if ((st = v_check_ap(v, &d->index, "dma.index", SP_SBUF)) != ISA_OK)
		return st;
	if (d->index.dtype != ISA_DT_int32 && d->index.dtype != ISA_DT_uint32)
		return v_fail(v, ISA_E_BAD_DTYPE, "dma.index", "descriptor '%s': index is %s, not int32/uint32",
			      d->name, isa_dtype_name(d->index.dtype));
	if (isa_ap_free_elems(&d->index) != 1)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, "dma.index",
			      "descriptor '%s': one index per partition", d->name);
	bool gathers = isa_dma_mode_gathers(d->mode);
	const isa_ap *table = gathers ? &d->src : &d->dst;
	const isa_ap *other = gathers ? &d->dst : &d->src;
	const char *tf = gathers ? "dma.src" : "dma.dst";
	const char *of = gathers ? "dma.dst" : "dma.src";
	if (table->space != ISA_SPACE_HBM)
		return v_fail(v, ISA_E_BAD_SPACE, tf, "descriptor '%s': the indexed side is in hbm",
			      d->name);
	if (other->nparts != d->index.nparts)
		return v_fail(v, ISA_E_SHAPE_MISMATCH, of, "descriptor '%s': %u rows, index has %u",
			      d->name, other->nparts, d->index.nparts);
	if (isa_ap_free_elems(table) != isa_ap_free_elems(other))
		return v_fail(v, ISA_E_SHAPE_MISMATCH, of,
			      "descriptor '%s': %llu elements per row, indexed rows have %llu", d->name,
			      (unsigned long long)isa_ap_free_elems(other),
			      (unsigned long long)isa_ap_free_elems(table));
	return ISA_OK;
}

/* ---------------------------------------------------------- program */

/* The first descriptor whose name an earlier one has (-1: none; -2: out of
 * memory), through the assembler's name index: linear in the descriptors. */
static int64_t first_duplicate_dma(const isa_program *p)
{
	isa_name_index ix = { 0 };
	int64_t first = -1;
	for (uint32_t i = 0; i < p->n_dma && first == -1; i++) {
		if (isa_name_index_find(&ix, p, p->dma[i].name) >= 0)
			first = i;
		else if (!isa_name_index_add(&ix, p, i))
			first = -2;
	}
	isa_name_index_free(&ix);
	return first;
}

isa_status isa_validate(const isa_program *p, isa_diag *diag)
{
	vctx v = { .p = p, .diag = diag, .engine = -1, .index = -1 };
	isa_status st;

	if (!p)
		return isa_fail(diag, ISA_E_BAD_VALUE, -1, -1, NULL, "no program");
	v.ti = isa_target_get(p->target);
	if (!v.ti)
		return isa_fail(diag, ISA_E_BAD_TARGET, -1, -1, "target", "target %u", p->target);
	if (p->num_semaphores > ISA_MAX_SEMAPHORES)
		return isa_fail(diag, ISA_E_LIMIT, -1, -1, "semaphores", "%u (at most %u)",
				p->num_semaphores, ISA_MAX_SEMAPHORES);
	if (p->scratch_bytes > ISA_MAX_TENSOR_BYTES)
		return isa_fail(diag, ISA_E_LIMIT, -1, -1, "scratch", "%llu bytes (at most %llu)",
				(unsigned long long)p->scratch_bytes,
				(unsigned long long)ISA_MAX_TENSOR_BYTES);
	if (p->n_tensors > ISA_MAX_TENSORS || p->n_dma > ISA_MAX_DMA_DESCS ||
	    p->consts_size > ISA_MAX_CONST_BYTES)
		return isa_fail(diag, ISA_E_LIMIT, -1, -1, "tables", "table sizes above limits");
	if ((p->n_tensors && !p->tensors) || (p->n_dma && !p->dma) ||
	    (p->consts_size && !p->consts))
		return isa_fail(diag, ISA_E_BAD_VALUE, -1, -1, "tables", "table count without storage");

	if ((st = check_tensors(&v)) != ISA_OK)
		return st;
	int64_t dup = first_duplicate_dma(p);
	if (dup == -2)
		return isa_fail(diag, ISA_E_NOMEM, -1, -1, "dma", "checking descriptor names");
	for (uint32_t i = 0; i < p->n_dma; i++) {
		v.index = i;
		if ((int64_t)i == dup)
			return v_fail(&v, ISA_E_DUPLICATE_NAME, "dma.name", "descriptor '%s'",
				      p->dma[i].name);
		if ((st = check_dma_desc(&v, &p->dma[i])) != ISA_OK)
			return st;
	}

	int barriers = -1, barrier_engine = -1;
	for (int e = 0; e < ISA_NUM_ENGINES; e++) {
		uint32_t n = p->n_instr[e];
		if (n > ISA_MAX_STREAM_LEN)
			return isa_fail(diag, ISA_E_LIMIT, e, -1, "n_instr", "%u instructions (at most %u)",
					n, ISA_MAX_STREAM_LEN);
		if (n && !p->stream[e])
			return isa_fail(diag, ISA_E_BAD_VALUE, e, -1, "stream", "count without storage");
		v.engine = e;
		v.have_stationary = false;
		int nb = 0;
		int64_t last_barrier = n ? (int64_t)n - 1 : -1;
		for (uint32_t i = 0; i < n; i++) {
			const isa_instr *in = &p->stream[e][i];
			v.index = i;
			v.in = NULL;
			if ((st = check_instr(&v, in)) != ISA_OK)
				return st;
			if (in->opcode == ISA_OP_end && i + 1 != n)
				return v_fail(&v, ISA_E_STREAM_END, "opcode",
					      "%u instructions after end", n - i - 1);
			if (in->opcode == ISA_OP_branch && in->u[0] >= n)
				return v_fail(&v, ISA_E_BAD_VALUE, "to", "instruction %u, the stream has %u",
					      in->u[0], n);
			/* a fence is a barrier too: every engine meets at each */
			if (in->opcode == ISA_OP_barrier || in->opcode == ISA_OP_fence) {
				nb++;
				last_barrier = i;
			}
		}
		if (n && p->stream[e][n - 1].opcode != ISA_OP_end) {
			v.index = n - 1;
			v.in = NULL;
			return isa_fail(diag, ISA_E_STREAM_END, e, n - 1, "opcode",
					"the last instruction is %s", isa_op_name(p->stream[e][n - 1].opcode));
		}
		if (!n)
			continue;
		if (barriers >= 0 && nb != barriers)
			return isa_fail(diag, ISA_E_BARRIER_MISMATCH, e, last_barrier, "barrier",
					"%s has %d barriers, %s has %d", isa_engine_name(e), nb,
					isa_engine_name(barrier_engine), barriers);
		barriers = nb;
		barrier_engine = e;
	}
	return ISA_OK;
}
