/*
 * util.c -- diagnostics, bounded little-endian byte I/O, growable buffers,
 * and the small value constructors and sizes every other file of isa/ uses
 * (so none of them calls into another for these).
 */
#include "isa_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Every rejection goes through here so messages share one shape:
 *   "<engine> stream, instruction <i>, field <f>: <summary>: <detail>"
 * with the parts that do not apply left out.
 */
isa_status isa_fail(isa_diag *diag, isa_status code, int engine, int64_t index,
		    const char *field, const char *fmt, ...)
{
	if (!diag)
		return code;

	char detail[200] = "";
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(detail, sizeof(detail), fmt, ap);
		va_end(ap);
	}

	diag->code = code;
	diag->engine = engine;
	diag->index = index;
	diag->line = 0;
	snprintf(diag->field, sizeof(diag->field), "%s", field ? field : "");

	char where[96] = "";
	size_t n = 0;
	if (engine >= 0 && engine < ISA_NUM_ENGINES && index >= 0)
		n += (size_t)snprintf(where + n, sizeof(where) - n, "%s stream, instruction %lld",
				      isa_engine_name(engine), (long long)index);
	else if (engine >= 0 && engine < ISA_NUM_ENGINES)
		n += (size_t)snprintf(where + n, sizeof(where) - n, "%s stream",
				      isa_engine_name(engine));
	if (field && *field && n < sizeof(where))
		n += (size_t)snprintf(where + n, sizeof(where) - n, "%sfield %s",
				      n ? ", " : "", field);

	snprintf(diag->msg, sizeof(diag->msg), "%s%s%s%s%s", where, n ? ": " : "",
		 isa_status_summary(code), detail[0] ? ": " : "", detail);
	return code;
}

/* Puts "line N: " in front of a message (truncating its end if needed). */
void isa_diag_set_line(isa_diag *diag, int line)
{
	char prefix[32];
	if (!diag)
		return;
	int n = snprintf(prefix, sizeof(prefix), "line %d: ", line);
	size_t plen = n > 0 ? (size_t)n : 0;
	size_t mlen = strnlen(diag->msg, sizeof(diag->msg) - 1);
	if (mlen + plen > sizeof(diag->msg) - 1)
		mlen = sizeof(diag->msg) - 1 - plen;
	memmove(diag->msg + plen, diag->msg, mlen);
	memcpy(diag->msg, prefix, plen);
	diag->msg[plen + mlen] = '\0';
	diag->line = line;
}

/* Tensor and descriptor names: 1..ISA_MAX_NAME of [A-Za-z0-9_.], not
 * starting with a digit (they appear unquoted in the text form). */
bool isa_name_valid(const char *s)
{
	size_t n = strnlen(s, ISA_MAX_NAME + 1);
	if (n == 0 || n > ISA_MAX_NAME || isdigit((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

/* ------------------------------------------------------------ reader */

bool isa_rd_bytes(isa_reader *r, void *dst, size_t n)
{
	if (r->short_read || n > r->len - r->pos) {
		r->short_read = true;
		if (dst)
			memset(dst, 0, n);
		return false;
	}
	if (dst)
		memcpy(dst, r->p + r->pos, n);
	r->pos += n;
	return true;
}

uint8_t isa_rd_u8(isa_reader *r)
{
	uint8_t b = 0;
	isa_rd_bytes(r, &b, 1);
	return b;
}

uint16_t isa_rd_u16(isa_reader *r)
{
	uint8_t b[2];
	isa_rd_bytes(r, b, 2);
	return (uint16_t)(b[0] | (b[1] << 8));
}

uint32_t isa_rd_u32(isa_reader *r)
{
	uint8_t b[4];
	isa_rd_bytes(r, b, 4);
	return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) |
	       ((uint32_t)b[3] << 24);
}

uint64_t isa_rd_u64(isa_reader *r)
{
	uint64_t lo = isa_rd_u32(r);
	uint64_t hi = isa_rd_u32(r);
	return lo | (hi << 32);
}

/* ------------------------------------------------------------ writer */

void isa_wr_bytes(isa_writer *w, const void *src, size_t n)
{
	if (w->oom)
		return;
	if (n > w->cap - w->len) {
		size_t cap = w->cap ? w->cap : 4096;
		while (n > cap - w->len) {
			if (cap > SIZE_MAX / 2) {
				w->oom = true;
				return;
			}
			cap *= 2;
		}
		uint8_t *nb = realloc(w->buf, cap);
		if (!nb) {
			w->oom = true;
			return;
		}
		w->buf = nb;
		w->cap = cap;
	}
	memcpy(w->buf + w->len, src, n);
	w->len += n;
}

void isa_wr_u8(isa_writer *w, uint8_t v) { isa_wr_bytes(w, &v, 1); }

void isa_wr_u16(isa_writer *w, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
	isa_wr_bytes(w, b, 2);
}

void isa_wr_u32(isa_writer *w, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
	isa_wr_bytes(w, b, 4);
}

void isa_wr_u64(isa_writer *w, uint64_t v)
{
	isa_wr_u32(w, (uint32_t)v);
	isa_wr_u32(w, (uint32_t)(v >> 32));
}

/* -------------------------------------------------------------- text */

void isa_text_printf(isa_text *t, const char *fmt, ...)
{
	if (t->oom)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		size_t room = t->cap - t->len;
		int n = vsnprintf(t->buf ? t->buf + t->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->oom = true;
			return;
		}
		if ((size_t)n < room) {
			t->len += (size_t)n;
			return;
		}
		size_t cap = t->cap ? t->cap * 2 : 4096;
		while (cap - t->len <= (size_t)n)
			cap *= 2;
		char *nb = realloc(t->buf, cap);
		if (!nb) {
			t->oom = true;
			return;
		}
		t->buf = nb;
		t->cap = cap;
	}
}

/* ------------------------------------------------------------ arrays */

bool isa_grow(void **ptr, uint32_t *cap, uint32_t need, size_t elem)
{
	if (need <= *cap)
		return true;
	uint64_t ncap = *cap ? *cap : 16;
	while (ncap < need)
		ncap *= 2;
	if (ncap > UINT32_MAX)
		ncap = UINT32_MAX;
	if (ncap > SIZE_MAX / elem)
		return false;
	void *np = realloc(*ptr, (size_t)ncap * elem);
	if (!np)
		return false;
	memset((char *)np + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
	*ptr = np;
	*cap = (uint32_t)ncap;
	return true;
}

isa_imm isa_imm_f32(float v)
{
	isa_imm imm = { ISA_IMM_F32, 0 };
	memcpy(&imm.bits, &v, sizeof(v));
	return imm;
}

isa_imm isa_imm_i32(int32_t v)
{
	isa_imm imm = { ISA_IMM_I32, (uint32_t)v };
	return imm;
}

uint64_t isa_tensor_bytes(const isa_tensor *t)
{
	uint64_t n = isa_dtype_size(t->dtype);
	for (unsigned d = 0; d < t->rank && d < ISA_MAX_RANK; d++)
		if (__builtin_mul_overflow(n, t->shape[d], &n))
			return 0;
	return n;
}
