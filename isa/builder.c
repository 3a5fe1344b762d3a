/*
 * builder.c -- emit programs from C (kernel generators, the compiler).
 * The builder appends; isa_builder_finish() closes the streams and runs the
 * same validator every loaded program goes through, so a generator bug shows
 * up as a precise message, not as a bad run.
 */
#include "isa_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- constructors */

static isa_ap onchip(int space, int dtype, unsigned start, unsigned nparts, uint64_t offset,
		     uint32_t n)
{
	isa_ap ap;
	memset(&ap, 0, sizeof(ap));
	ap.space = (uint8_t)space;
	ap.dtype = (uint8_t)dtype;
	ap.start = (uint8_t)start;
	ap.nparts = nparts;
	ap.offset = offset;
	ap.ndims = 1;
	ap.stride[0] = 1;
	ap.size[0] = n;
	return ap;
}

isa_ap isa_ap_sbuf(int dtype, unsigned start, unsigned nparts, uint64_t offset, uint32_t n)
{
	return onchip(ISA_SPACE_SBUF, dtype, start, nparts, offset, n);
}

isa_ap isa_ap_psum(int dtype, unsigned start, unsigned nparts, uint64_t offset, uint32_t n)
{
	return onchip(ISA_SPACE_PSUM, dtype, start, nparts, offset, n);
}

isa_ap isa_ap_hbm(int dtype, uint32_t tensor, uint64_t offset, uint32_t rows,
		  int64_t row_stride, uint32_t n)
{
	isa_ap ap = onchip(ISA_SPACE_HBM, dtype, 0, rows, offset, n);
	ap.tensor = tensor;
	ap.pstride = row_stride;
	return ap;
}

isa_ap isa_ap_dims(isa_ap ap, unsigned ndims, const int32_t *stride, const uint32_t *size)
{
	if (ndims > ISA_MAX_DIMS)
		ndims = 0;   /* rejected by the validator: "0 free dims" */
	memset(ap.stride, 0, sizeof(ap.stride));
	memset(ap.size, 0, sizeof(ap.size));
	for (unsigned d = 0; d < ndims; d++) {
		ap.stride[d] = stride[d];
		ap.size[d] = size[d];
	}
	ap.ndims = (uint8_t)ndims;
	return ap;
}

isa_instr isa_instr_init(int op)
{
	isa_instr in;
	if (op < 0 || op >= ISA_NUM_OPS) {
		memset(&in, 0, sizeof(in));
		in.opcode = 0xff;   /* rejected by the validator as an unknown opcode */
		return in;
	}
	isa_instr_defaults(&in, op);
	return in;
}

/* -------------------------------------------------------------- tables */

int isa_builder_tensor(isa_program *p, const char *name, int dtype, int kind, unsigned rank,
		       const uint64_t *shape, isa_diag *diag)
{
	if (!name || strlen(name) == 0 || strlen(name) > ISA_MAX_NAME) {
		isa_fail(diag, ISA_E_BAD_TENSOR, -1, p->n_tensors, "tensor.name",
			 "name length must be 1..%u", ISA_MAX_NAME);
		return -1;
	}
	if (rank > ISA_MAX_RANK) {
		isa_fail(diag, ISA_E_BAD_TENSOR, -1, p->n_tensors, "tensor.rank",
			 "tensor '%s': rank %u (at most %u)", name, rank, ISA_MAX_RANK);
		return -1;
	}
	if (p->n_tensors >= ISA_MAX_TENSORS) {
		isa_fail(diag, ISA_E_LIMIT, -1, -1, "tensor", "more than %u tensors", ISA_MAX_TENSORS);
		return -1;
	}
	if (!isa_grow((void **)&p->tensors, &p->cap_tensors, p->n_tensors + 1, sizeof(isa_tensor))) {
		isa_fail(diag, ISA_E_NOMEM, -1, -1, "tensor", "tensor table");
		return -1;
	}
	isa_tensor *t = &p->tensors[p->n_tensors];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->dtype = (uint8_t)dtype;
	t->kind = (uint8_t)kind;
	t->rank = (uint8_t)rank;
	for (unsigned d = 0; d < rank; d++)
		t->shape[d] = shape[d];
	if (kind == ISA_TK_INTERNAL) {
		/* internal tensors are laid out one after another, 64-byte aligned */
		uint64_t bytes = isa_tensor_bytes(t);
		uint64_t off = (p->scratch_bytes + 63) & ~(uint64_t)63;
		t->offset = off;
		p->scratch_bytes = off + bytes;
	}
	return (int)p->n_tensors++;
}

int isa_builder_const(isa_program *p, const char *name, int dtype, unsigned rank,
		      const uint64_t *shape, const void *data, uint64_t size, isa_diag *diag)
{
	int idx = isa_builder_tensor(p, name, dtype, ISA_TK_CONST, rank, shape, diag);
	if (idx < 0)
		return -1;
	isa_tensor *t = &p->tensors[idx];
	uint64_t bytes = isa_tensor_bytes(t);
	if (bytes != size || size > ISA_MAX_CONST_BYTES - p->consts_size) {
		isa_fail(diag, ISA_E_CONST_SIZE, -1, idx, "tensor.data",
			 "const tensor '%s' needs %llu bytes, got %llu", name,
			 (unsigned long long)bytes, (unsigned long long)size);
		p->n_tensors--;
		return -1;
	}
	uint8_t *nc = realloc(p->consts, p->consts_size + size + 1);
	if (!nc) {
		isa_fail(diag, ISA_E_NOMEM, -1, idx, "tensor.data", "constants");
		p->n_tensors--;
		return -1;
	}
	p->consts = nc;
	memcpy(nc + p->consts_size, data, size);
	t->offset = p->consts_size;
	p->consts_size += size;
	p->cap_consts = p->consts_size + 1;
	return idx;
}

int isa_builder_dma(isa_program *p, const char *name, int mode, const isa_ap *dst,
		    const isa_ap *src, const isa_ap *index, isa_diag *diag)
{
	if (p->n_dma >= ISA_MAX_DMA_DESCS) {
		isa_fail(diag, ISA_E_LIMIT, -1, -1, "dma", "more than %u descriptors", ISA_MAX_DMA_DESCS);
		return -1;
	}
	if (isa_dma_mode_indexed(mode) != (index != NULL)) {
		isa_fail(diag, ISA_E_MISSING_OPERAND, -1, p->n_dma, "dma.index",
			 "gather/scatter need an index operand, direct and transpose transfers none");
		return -1;
	}
	if (!isa_grow((void **)&p->dma, &p->cap_dma, p->n_dma + 1, sizeof(isa_dma_desc))) {
		isa_fail(diag, ISA_E_NOMEM, -1, -1, "dma", "descriptor table");
		return -1;
	}
	isa_dma_desc *d = &p->dma[p->n_dma];
	memset(d, 0, sizeof(*d));
	if (name && *name)
		snprintf(d->name, sizeof(d->name), "%s", name);
	else
		snprintf(d->name, sizeof(d->name), "d%u", p->n_dma);
	d->mode = (uint8_t)mode;
	d->dst = *dst;
	d->src = *src;
	if (index)
		d->index = *index;
	return (int)p->n_dma++;
}

/* -------------------------------------------------------- instructions */

isa_status isa_builder_emit(isa_program *p, int engine, const isa_instr *in, isa_diag *diag)
{
	if (engine < 0 || engine >= ISA_NUM_ENGINES)
		return isa_fail(diag, ISA_E_BAD_ENGINE, -1, -1, "engine", "engine %d", engine);
	uint32_t n = p->n_instr[engine];
	if (n >= ISA_MAX_STREAM_LEN)
		return isa_fail(diag, ISA_E_LIMIT, engine, n, NULL, "stream longer than %u",
				ISA_MAX_STREAM_LEN);
	if (!isa_grow((void **)&p->stream[engine], &p->cap_instr[engine], n + 1, sizeof(isa_instr)))
		return isa_fail(diag, ISA_E_NOMEM, engine, n, NULL, "instruction stream");
	p->stream[engine][n] = *in;
	p->n_instr[engine] = n + 1;
	return ISA_OK;
}

static isa_status emit(isa_program *p, int engine, const isa_instr *in)
{
	return isa_builder_emit(p, engine, in, NULL);
}

static void set_ap(isa_instr *in, int slot, isa_ap ap)
{
	in->ap[slot] = ap;
	in->ap_mask |= (uint8_t)(1u << slot);
}

isa_status isa_builder_load_stationary(isa_program *p, isa_ap stationary, int perf)
{
	isa_instr in = isa_instr_init(ISA_OP_load_stationary);
	set_ap(&in, ISA_AP_SRC, stationary);
	in.e[0] = (uint8_t)perf;
	return emit(p, ISA_ENGINE_TENSOR, &in);
}

isa_status isa_builder_multiply_moving(isa_program *p, isa_ap dst, isa_ap moving,
				       bool accumulate, int perf)
{
	isa_instr in = isa_instr_init(ISA_OP_multiply_moving);
	set_ap(&in, ISA_AP_DST, dst);
	set_ap(&in, ISA_AP_SRC, moving);
	if (accumulate)
		in.flags |= ISA_FLAG_ACCUMULATE;
	in.e[0] = (uint8_t)perf;
	return emit(p, ISA_ENGINE_TENSOR, &in);
}

isa_status isa_builder_activation(isa_program *p, isa_ap dst, isa_ap src, int func,
				  float scale, float bias)
{
	isa_instr in = isa_instr_init(ISA_OP_activation);
	set_ap(&in, ISA_AP_DST, dst);
	set_ap(&in, ISA_AP_SRC, src);
	in.e[0] = (uint8_t)func;
	in.imm[0] = isa_imm_f32(scale);
	in.imm[1] = isa_imm_f32(bias);
	return emit(p, ISA_ENGINE_SCALAR, &in);
}

isa_status isa_builder_tensor_tensor(isa_program *p, int engine, isa_ap dst, isa_ap src0,
				     isa_ap src1, int alu)
{
	isa_instr in = isa_instr_init(ISA_OP_tensor_tensor);
	set_ap(&in, ISA_AP_DST, dst);
	set_ap(&in, ISA_AP_SRC, src0);
	set_ap(&in, ISA_AP_SRC1, src1);
	in.e[0] = (uint8_t)alu;
	return emit(p, engine, &in);
}

isa_status isa_builder_tensor_scalar(isa_program *p, int engine, isa_ap dst, isa_ap src,
				     int op0, isa_imm s0, int op1, isa_imm s1)
{
	isa_instr in = isa_instr_init(ISA_OP_tensor_scalar);
	set_ap(&in, ISA_AP_DST, dst);
	set_ap(&in, ISA_AP_SRC, src);
	in.e[0] = (uint8_t)op0;
	in.imm[0] = s0;
	in.e[1] = (uint8_t)op1;
	in.imm[1] = s1;
	return emit(p, engine, &in);
}

isa_status isa_builder_tensor_copy(isa_program *p, int engine, isa_ap dst, isa_ap src)
{
	isa_instr in = isa_instr_init(ISA_OP_tensor_copy);
	set_ap(&in, ISA_AP_DST, dst);
	set_ap(&in, ISA_AP_SRC, src);
	return emit(p, engine, &in);
}

isa_status isa_builder_memset(isa_program *p, int engine, isa_ap dst, isa_imm v)
{
	isa_instr in = isa_instr_init(ISA_OP_memset);
	set_ap(&in, ISA_AP_DST, dst);
	in.imm[0] = v;
	return emit(p, engine, &in);
}

isa_status isa_builder_dma_copy(isa_program *p, int engine, uint32_t desc, unsigned queue,
				uint32_t sem, uint32_t value)
{
	isa_instr in = isa_instr_init(ISA_OP_dma_copy);
	in.u[0] = desc;
	in.u[1] = queue;
	in.u[2] = sem;
	in.u[3] = value;
	return emit(p, engine, &in);
}

isa_status isa_builder_sem_wait(isa_program *p, int engine, uint32_t sem, int cond,
				uint32_t value)
{
	isa_instr in = isa_instr_init(ISA_OP_sem_wait);
	in.u[0] = sem;
	in.e[0] = (uint8_t)cond;
	in.u[1] = value;
	return emit(p, engine, &in);
}

isa_status isa_builder_sem_signal(isa_program *p, int engine, uint32_t sem, int op,
				  uint32_t value)
{
	isa_instr in = isa_instr_init(ISA_OP_sem_signal);
	in.u[0] = sem;
	in.e[0] = (uint8_t)op;
	in.u[1] = value;
	return emit(p, engine, &in);
}

isa_status isa_builder_simple(isa_program *p, int engine, int op)
{
	isa_instr in = isa_instr_init(op);
	return emit(p, engine, &in);
}

isa_status isa_builder_finish(isa_program *p, isa_diag *diag)
{
	for (int e = 0; e < ISA_NUM_ENGINES; e++) {
		uint32_t n = p->n_instr[e];
		if (n && p->stream[e][n - 1].opcode != ISA_OP_end) {
			isa_instr end = isa_instr_init(ISA_OP_end);
			isa_status st = isa_builder_emit(p, e, &end, diag);
			if (st != ISA_OK)
				return st;
		}
	}
	return isa_validate(p, diag);
}

isa_status isa_builder_finish_encode(isa_program *p, uint8_t **buf, size_t *len, isa_diag *diag)
{
	*buf = NULL;
	*len = 0;
	isa_status st = isa_builder_finish(p, diag);
	return st != ISA_OK ? st : isa_program_encode_valid(p, buf, len, diag);
}
