/*
 * program.c -- the program container and its binary form (.nsp).
 *
 * Layout (all integers little-endian):
 *   magic "NSIMPROG", u16 major, u16 minor, u8 target, u8[3] zero,
 *   u32 num_semaphores, u64 scratch_bytes, u32 n_tensors, u32 n_dma,
 *   u64 consts_size, u32 n_instr[ISA_NUM_ENGINES],
 *   tensors:  u8 name_len, name, u8 dtype, u8 kind, u8 rank, u64 shape[rank],
 *             u64 offset
 *   consts:   consts_size bytes
 *   dma:      u8 name_len, name, u8 mode (bit 7: oob_skip), ap dst, ap src, [ap index]
 *   streams:  tensor, vector, scalar, gpsimd, sync; instructions per fields.c
 * and nothing after.  Every count is checked against its limit and against
 * the bytes left before anything is allocated, so a short hostile file cannot
 * make us allocate much.
 */
#include "isa_internal.h"

#include <stdlib.h>
#include <string.h>

#define HEADER_BYTES (8 + 2 + 2 + 4 + 4 + 8 + 4 + 4 + 8 + 4 * ISA_NUM_ENGINES)
#define MIN_TENSOR_BYTES (1 + 1 + 1 + 1 + 1 + 8)
#define MIN_AP_BYTES (3 + 3 + 8 + 8)
#define MIN_DMA_BYTES (1 + 1 + 1 + 2 * MIN_AP_BYTES)

isa_program *isa_program_new(int target)
{
	isa_program *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->target = (uint8_t)target;
	return p;
}

void isa_program_free(isa_program *p)
{
	if (!p)
		return;
	free(p->tensors);
	free(p->consts);
	free(p->dma);
	for (int e = 0; e < ISA_NUM_ENGINES; e++)
		free(p->stream[e]);
	free(p);
}

uint64_t isa_program_host_bytes(const isa_program *p)
{
	if (!p)
		return 0;
	uint64_t b = sizeof(*p) + (uint64_t)p->cap_tensors * sizeof(*p->tensors) + p->cap_consts +
		     (uint64_t)p->cap_dma * sizeof(*p->dma);
	for (int e = 0; e < ISA_NUM_ENGINES; e++)
		b += (uint64_t)p->cap_instr[e] * sizeof(*p->stream[e]);
	return b;
}

int isa_program_find_tensor(const isa_program *p, const char *name)
{
	for (uint32_t i = 0; i < p->n_tensors; i++)
		if (strcmp(p->tensors[i].name, name) == 0)
			return (int)i;
	return -1;
}

uint64_t isa_program_instr_count(const isa_program *p)
{
	uint64_t n = 0;
	for (int e = 0; e < ISA_NUM_ENGINES; e++)
		n += p->n_instr[e];
	return n;
}

/* ------------------------------------------------------------- decode */

static isa_status read_name(isa_reader *r, char *name, const char *what, int64_t idx,
			    isa_diag *diag)
{
	unsigned n = isa_rd_u8(r);
	if (r->short_read)
		return isa_fail(diag, ISA_E_TRUNCATED, -1, idx, what, "name cut off");
	if (n == 0 || n > ISA_MAX_NAME)
		return isa_fail(diag, ISA_E_BAD_TENSOR, -1, idx, what,
				"%s %lld: name length %u (1..%u)", what, (long long)idx, n,
				ISA_MAX_NAME);
	if (!isa_rd_bytes(r, name, n))
		return isa_fail(diag, ISA_E_TRUNCATED, -1, idx, what, "name cut off");
	name[n] = '\0';
	if (strlen(name) != n)
		return isa_fail(diag, ISA_E_BAD_TENSOR, -1, idx, what,
				"%s %lld: name contains a NUL byte", what, (long long)idx);
	return ISA_OK;
}

static isa_status decode_tensor(isa_reader *r, isa_tensor *t, int64_t i, isa_diag *diag)
{
	isa_status st = read_name(r, t->name, "tensor", i, diag);
	if (st != ISA_OK)
		return st;
	unsigned dcode = isa_rd_u8(r);
	unsigned kind = isa_rd_u8(r);
	unsigned rank = isa_rd_u8(r);
	if (r->short_read)
		goto truncated;
	t->dtype = (uint8_t)isa_dtype_from_code(dcode);
	if (t->dtype == ISA_DT_INVALID)
		return isa_fail(diag, ISA_E_BAD_CODE, -1, i, "tensor.dtype",
				"tensor '%s': dtype code 0x%02x", t->name, dcode);
	if (kind >= ISA_NUM_TENSOR_KINDS)
		return isa_fail(diag, ISA_E_BAD_CODE, -1, i, "tensor.kind",
				"tensor '%s': kind code %u", t->name, kind);
	if (rank > ISA_MAX_RANK)
		return isa_fail(diag, ISA_E_BAD_TENSOR, -1, i, "tensor.rank",
				"tensor '%s': rank %u (at most %u)", t->name, rank, ISA_MAX_RANK);
	t->kind = (uint8_t)kind;
	t->rank = (uint8_t)rank;
	for (unsigned d = 0; d < rank; d++)
		t->shape[d] = isa_rd_u64(r);
	t->offset = isa_rd_u64(r);
	if (r->short_read)
		goto truncated;
	return ISA_OK;
truncated:
	return isa_fail(diag, ISA_E_TRUNCATED, -1, i, "tensor", "tensor table cut off");
}

/* a DMA descriptor's mode byte: the mode, and bit 7 its oob_skip */
#define DMA_MODE_MASK 0x7fu

static isa_status decode_dma(isa_reader *r, isa_dma_desc *d, int64_t i, isa_diag *diag)
{
	isa_status st = read_name(r, d->name, "dma", i, diag);
	if (st != ISA_OK)
		return st;
	unsigned mode = isa_rd_u8(r);
	if (r->short_read)
		return isa_fail(diag, ISA_E_TRUNCATED, -1, i, "dma", "descriptor cut off");
	d->oob_skip = (uint8_t)(mode >> 7);
	mode &= DMA_MODE_MASK;
	if (mode >= ISA_NUM_DMA_MODES || (d->oob_skip && !isa_dma_mode_indexed(mode)))
		return isa_fail(diag, ISA_E_BAD_CODE, -1, i, "dma.mode",
				"descriptor '%s': mode %u%s", d->name, mode,
				d->oob_skip ? " with oob_skip (indexed modes only)" : "");
	d->mode = (uint8_t)mode;
	if ((st = isa_decode_ap(r, &d->dst, -1, i, "dma.dst", diag)) != ISA_OK)
		return st;
	if ((st = isa_decode_ap(r, &d->src, -1, i, "dma.src", diag)) != ISA_OK)
		return st;
	if (isa_dma_mode_indexed(mode))
		return isa_decode_ap(r, &d->index, -1, i, "dma.index", diag);
	return ISA_OK;
}

static isa_status check_count(isa_reader *r, uint64_t n, uint64_t max, uint64_t min_bytes,
			      const char *what, isa_diag *diag)
{
	if (n > max)
		return isa_fail(diag, ISA_E_LIMIT, -1, -1, what, "%llu (at most %llu)",
				(unsigned long long)n, (unsigned long long)max);
	if (min_bytes && n > isa_rd_left(r) / min_bytes)
		return isa_fail(diag, ISA_E_TRUNCATED, -1, -1, what,
				"%llu entries cannot fit in the %zu bytes left",
				(unsigned long long)n, isa_rd_left(r));
	return ISA_OK;
}

isa_status isa_program_decode(const void *buf, size_t len, isa_program **out,
			      isa_diag *diag)
{
	isa_reader r = { .p = buf, .len = len };
	isa_status st;
	uint32_t n_instr[ISA_NUM_ENGINES];

	*out = NULL;
	if (!buf || len < HEADER_BYTES)
		return isa_fail(diag, ISA_E_TRUNCATED, -1, -1, "header",
				"%zu bytes, a header needs %d", len, HEADER_BYTES);
	char magic[8];
	isa_rd_bytes(&r, magic, 8);
	if (memcmp(magic, ISA_MAGIC, 8) != 0)
		return isa_fail(diag, ISA_E_BAD_MAGIC, -1, -1, "magic",
				"not a neuronsim program (expected \"%s\")", ISA_MAGIC);
	unsigned major = isa_rd_u16(&r), minor = isa_rd_u16(&r);
	if (major != ISA_FORMAT_VERSION_MAJOR || minor > ISA_FORMAT_VERSION_MINOR)
		return isa_fail(diag, ISA_E_BAD_VERSION, -1, -1, "version",
				"%u.%u (this build reads %u.0 to %u.%u)", major, minor,
				ISA_FORMAT_VERSION_MAJOR, ISA_FORMAT_VERSION_MAJOR,
				ISA_FORMAT_VERSION_MINOR);
	unsigned tcode = isa_rd_u8(&r);
	int target = isa_target_from_code(tcode);
	if (target == ISA_TARGET_INVALID)
		return isa_fail(diag, ISA_E_BAD_TARGET, -1, -1, "target", "code %u", tcode);
	uint8_t reserved[3];
	isa_rd_bytes(&r, reserved, 3);
	if (reserved[0] | reserved[1] | reserved[2])
		return isa_fail(diag, ISA_E_BAD_VALUE, -1, -1, "reserved",
				"reserved header bytes must be zero");

	isa_program *p = isa_program_new(target);
	if (!p)
		return isa_fail(diag, ISA_E_NOMEM, -1, -1, NULL, NULL);
	p->num_semaphores = isa_rd_u32(&r);
	p->scratch_bytes = isa_rd_u64(&r);
	uint32_t n_tensors = isa_rd_u32(&r);
	uint32_t n_dma = isa_rd_u32(&r);
	uint64_t consts_size = isa_rd_u64(&r);
	for (int e = 0; e < ISA_NUM_ENGINES; e++)
		n_instr[e] = isa_rd_u32(&r);

	/* tensors */
	if ((st = check_count(&r, n_tensors, ISA_MAX_TENSORS, MIN_TENSOR_BYTES,
			      "n_tensors", diag)) != ISA_OK)
		goto free_program;
	if (!isa_grow((void **)&p->tensors, &p->cap_tensors, n_tensors, sizeof(isa_tensor)))
		goto nomem;
	for (uint32_t i = 0; i < n_tensors; i++) {
		if ((st = decode_tensor(&r, &p->tensors[i], i, diag)) != ISA_OK)
			goto free_program;
		p->n_tensors = i + 1;
	}

	/* constants */
	if ((st = check_count(&r, consts_size, ISA_MAX_CONST_BYTES, 1, "consts_size",
			      diag)) != ISA_OK)
		goto free_program;
	if (consts_size) {
		p->consts = malloc(consts_size);
		if (!p->consts)
			goto nomem;
		p->cap_consts = p->consts_size = consts_size;
		isa_rd_bytes(&r, p->consts, consts_size);
	}

	/* DMA descriptor blocks */
	if ((st = check_count(&r, n_dma, ISA_MAX_DMA_DESCS, MIN_DMA_BYTES, "n_dma", diag)) != ISA_OK)
		goto free_program;
	if (!isa_grow((void **)&p->dma, &p->cap_dma, n_dma, sizeof(isa_dma_desc)))
		goto nomem;
	for (uint32_t i = 0; i < n_dma; i++) {
		if ((st = decode_dma(&r, &p->dma[i], i, diag)) != ISA_OK)
			goto free_program;
		p->n_dma = i + 1;
	}

	/* instruction streams */
	for (int e = 0; e < ISA_NUM_ENGINES; e++) {
		if ((st = check_count(&r, n_instr[e], ISA_MAX_STREAM_LEN, 1, "n_instr",
				      diag)) != ISA_OK)
			goto free_program;
		if (!isa_grow((void **)&p->stream[e], &p->cap_instr[e], n_instr[e],
			      sizeof(isa_instr)))
			goto nomem;
		for (uint32_t i = 0; i < n_instr[e]; i++) {
			st = isa_decode_instr(&r, &p->stream[e][i], e, i, diag);
			if (st != ISA_OK)
				goto free_program;
			p->n_instr[e] = i + 1;
		}
	}

	if (r.short_read) {
		st = isa_fail(diag, ISA_E_TRUNCATED, -1, -1, NULL, "file ends early");
		goto free_program;
	}
	if (r.pos != r.len) {
		st = isa_fail(diag, ISA_E_TRAILING_DATA, -1, -1, NULL,
			      "%zu bytes after the last instruction", r.len - r.pos);
		goto free_program;
	}
	*out = p;
	return ISA_OK;

nomem:
	st = isa_fail(diag, ISA_E_NOMEM, -1, -1, NULL, "decoding program");
free_program:
	isa_program_free(p);
	return st;
}

isa_status isa_program_load(const void *buf, size_t len, isa_program **out, isa_diag *diag)
{
	isa_status st = isa_program_decode(buf, len, out, diag);
	if (st != ISA_OK)
		return st;
	st = isa_validate(*out, diag);
	if (st != ISA_OK) {
		isa_program_free(*out);
		*out = NULL;
	}
	return st;
}

/* ------------------------------------------------------------- encode */

static void write_name(isa_writer *w, const char *name)
{
	size_t n = strnlen(name, ISA_MAX_NAME);
	isa_wr_u8(w, (uint8_t)n);
	isa_wr_bytes(w, name, n);
}

/* Encodes a program; it must validate first, so that every code written is
 * one the decoder accepts and every array index is in range. */
isa_status isa_program_encode(const isa_program *p, uint8_t **buf, size_t *len,
			      isa_diag *diag)
{
	*buf = NULL;
	*len = 0;
	isa_status st = isa_validate(p, diag);
	return st != ISA_OK ? st : isa_program_encode_valid(p, buf, len, diag);
}

/* The encoding of a program that has just passed the validator (the caller
 * ran it: isa_program_encode, isa_builder_finish_encode). */
isa_status isa_program_encode_valid(const isa_program *p, uint8_t **buf, size_t *len, isa_diag *diag)
{
	isa_writer w = { 0 };
	*buf = NULL;
	*len = 0;

	isa_wr_bytes(&w, ISA_MAGIC, 8);
	isa_wr_u16(&w, ISA_FORMAT_VERSION_MAJOR);
	isa_wr_u16(&w, ISA_FORMAT_VERSION_MINOR);
	isa_wr_u8(&w, isa_target_get(p->target)->code);
	isa_wr_bytes(&w, "\0\0\0", 3);
	isa_wr_u32(&w, p->num_semaphores);
	isa_wr_u64(&w, p->scratch_bytes);
	isa_wr_u32(&w, p->n_tensors);
	isa_wr_u32(&w, p->n_dma);
	isa_wr_u64(&w, p->consts_size);
	for (int e = 0; e < ISA_NUM_ENGINES; e++)
		isa_wr_u32(&w, p->n_instr[e]);

	for (uint32_t i = 0; i < p->n_tensors; i++) {
		const isa_tensor *t = &p->tensors[i];
		write_name(&w, t->name);
		isa_wr_u8(&w, (uint8_t)isa_dtype_code(t->dtype));
		isa_wr_u8(&w, t->kind);
		isa_wr_u8(&w, t->rank);
		for (unsigned d = 0; d < t->rank; d++)
			isa_wr_u64(&w, t->shape[d]);
		isa_wr_u64(&w, t->offset);
	}
	if (p->consts_size)
		isa_wr_bytes(&w, p->consts, p->consts_size);
	for (uint32_t i = 0; i < p->n_dma; i++) {
		const isa_dma_desc *d = &p->dma[i];
		write_name(&w, d->name);
		isa_wr_u8(&w, (uint8_t)(d->mode | (d->oob_skip ? 0x80u : 0u)));
		isa_encode_ap(&w, &d->dst);
		isa_encode_ap(&w, &d->src);
		if (isa_dma_mode_indexed(d->mode))
			isa_encode_ap(&w, &d->index);
	}
	for (int e = 0; e < ISA_NUM_ENGINES; e++)
		for (uint32_t i = 0; i < p->n_instr[e]; i++)
			isa_encode_instr(&w, &p->stream[e][i]);

	if (w.oom) {
		free(w.buf);
		return isa_fail(diag, ISA_E_NOMEM, -1, -1, NULL, "encoding program");
	}
	*buf = w.buf;
	*len = w.len;
	return ISA_OK;
}
