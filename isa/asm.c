/*
 * asm.c -- the text form (.nsasm) reader.
 *
 *   ; comment to end of line
 *   .target trn2
 *   .semaphores 4
 *   .scratch 0
 *   .tensor NAME input|output|internal|const DTYPE [d0,d1,...] [offset=N] [data=HEX]
 *   .dma NAME MODE dst=AP src=AP [index=AP]   (MODE: direct gather scatter scatter_add transpose add gather_add)
 *   .engine tensor|vector|scalar|gpsimd|sync
 *   MNEMONIC key=value ... flag ...
 *
 * Tensors and descriptors are declared before they are referenced.  The
 * result is validated; a rejection names the line of the offending
 * instruction or declaration.  Input is untrusted: every number is range
 * checked, every token bounded, and nothing depends on NUL termination.
 */
#include "isa_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "name_index.h"

#define MAX_TOKENS 32
#define MAX_LINE   (1u << 26)   /* const data lines can be long */

typedef struct asm_ctx {
	isa_program *p;
	isa_diag    *diag;
	int          line;
	int          engine;         /* current .engine section, -1 before any */
	int         *lines[ISA_NUM_ENGINES + 2]; /* source line per instr / tensor / dma */
	uint32_t     nlines_cap[ISA_NUM_ENGINES + 2];
	bool         seen_target;
	int          target_line, sem_line, scratch_line;  /* header directives */
	isa_name_index dma_names;    /* descriptor names, for lookups by name */
} asm_ctx;

#define LINES_TENSOR ISA_NUM_ENGINES
#define LINES_DMA    (ISA_NUM_ENGINES + 1)

static isa_status asm_fail(asm_ctx *c, isa_status code, const char *field,
			   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static isa_status asm_fail(asm_ctx *c, isa_status code, const char *field,
			   const char *fmt, ...)
{
	char detail[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	isa_fail(c->diag, code, -1, -1, field, "%s", detail);
	isa_diag_set_line(c->diag, c->line);
	return code;
}

static bool record_line(asm_ctx *c, int which, uint32_t idx)
{
	if (!isa_grow((void **)&c->lines[which], &c->nlines_cap[which], idx + 1, sizeof(int)))
		return false;
	c->lines[which][idx] = c->line;
	return true;
}

/* ----------------------------------------------------- access pattern */

/* Parses "sbuf:bf16[0:128]+256{1x512,...}" and friends; see disasm.c. */
static isa_status parse_ap(asm_ctx *c, const char *tok, const char *field, isa_ap *ap)
{
	const char *s = tok;
	char name[ISA_MAX_NAME + 1];
	memset(ap, 0, sizeof(*ap));

	if (strncmp(s, "sbuf:", 5) == 0) {
		ap->space = ISA_SPACE_SBUF;
		s += 5;
	} else if (strncmp(s, "psum:", 5) == 0) {
		ap->space = ISA_SPACE_PSUM;
		s += 5;
	} else if (strncmp(s, "hbm(", 4) == 0) {
		const char *close = strchr(s + 4, ')');
		size_t n = close ? (size_t)(close - (s + 4)) : 0;
		if (!close || n == 0 || n > ISA_MAX_NAME || close[1] != ':')
			return asm_fail(c, ISA_E_SYNTAX, field,
					"'%.60s': expected hbm(TENSOR):DTYPE", tok);
		memcpy(name, s + 4, n);
		name[n] = '\0';
		int t = isa_program_find_tensor(c->p, name);
		if (t < 0)
			return asm_fail(c, ISA_E_UNDEFINED_TENSOR, field,
					"'%s' (declare it with .tensor first)", name);
		ap->space = ISA_SPACE_HBM;
		ap->tensor = (uint32_t)t;
		s = close + 2;
	} else {
		return asm_fail(c, ISA_E_SYNTAX, field,
				"'%.60s': an operand starts with sbuf:, psum: or hbm(NAME):", tok);
	}

	const char *br = strchr(s, '[');
	size_t dn = br ? (size_t)(br - s) : 0;
	char dts[16];
	if (!br || dn == 0 || dn >= sizeof(dts))
		return asm_fail(c, ISA_E_SYNTAX, field, "'%.60s': expected DTYPE[...]", tok);
	memcpy(dts, s, dn);
	dts[dn] = '\0';
	ap->dtype = (uint8_t)isa_dtype_from_name(dts);
	if (ap->dtype == ISA_DT_INVALID)
		return asm_fail(c, ISA_E_BAD_DTYPE, field, "unknown dtype '%s'", dts);

	/* partition part */
	s = br + 1;
	const char *rb = strchr(s, ']');
	char part[64];
	size_t pn = rb ? (size_t)(rb - s) : 0;
	if (!rb || pn == 0 || pn >= sizeof(part))
		return asm_fail(c, ISA_E_SYNTAX, field, "'%.60s': expected [...] partitions", tok);
	memcpy(part, s, pn);
	part[pn] = '\0';
	if (ap->space == ISA_SPACE_HBM) {
		char *x = strchr(part, 'x');
		int64_t ps;
		uint32_t rows;
		if (!x)
			goto bad_part;
		*x = '\0';
		if (!isa_parse_i64(part, &ps) || !isa_parse_u32(x + 1, &rows))
			goto bad_part;
		ap->pstride = ps;
		ap->nparts = rows;
	} else {
		char *colon = strchr(part, ':');
		uint32_t a, b;
		if (!colon)
			goto bad_part;
		*colon = '\0';
		if (!isa_parse_u32(part, &a) || !isa_parse_u32(colon + 1, &b) || b < a || a > 255 ||
		    b - a > 0xffff)
			goto bad_part;
		ap->start = (uint8_t)a;
		ap->nparts = b - a;
	}
	s = rb + 1;

	/* optional +offset */
	if (*s == '+') {
		const char *lb = strchr(s, '{');
		char off[32];
		size_t on = lb ? (size_t)(lb - s - 1) : 0;
		if (!lb || on == 0 || on >= sizeof(off))
			return asm_fail(c, ISA_E_SYNTAX, field, "'%.60s': bad +offset", tok);
		memcpy(off, s + 1, on);
		off[on] = '\0';
		if (!isa_parse_u64(off, &ap->offset))
			return asm_fail(c, ISA_E_SYNTAX, field, "'%s': bad byte offset", off);
		s = lb;
	}

	/* {stride x size, ...} */
	if (*s != '{')
		return asm_fail(c, ISA_E_SYNTAX, field, "'%.60s': expected {STRIDExSIZE,...}", tok);
	const char *end = strchr(s, '}');
	if (!end || end[1] != '\0')
		return asm_fail(c, ISA_E_SYNTAX, field, "'%.60s': expected a closing }", tok);
	s++;
	unsigned nd = 0;
	while (s < end) {
		const char *comma = memchr(s, ',', (size_t)(end - s));
		const char *stop = comma ? comma : end;
		char dim[48];
		size_t n = (size_t)(stop - s);
		if (nd >= ISA_MAX_DIMS)
			return asm_fail(c, ISA_E_BAD_DIMS, field, "more than %u free dims",
					ISA_MAX_DIMS);
		if (n == 0 || n >= sizeof(dim))
			return asm_fail(c, ISA_E_SYNTAX, field, "'%.60s': bad dim", tok);
		memcpy(dim, s, n);
		dim[n] = '\0';
		char *x = strchr(dim, 'x');
		if (!x)
			return asm_fail(c, ISA_E_SYNTAX, field, "dim '%s': expected STRIDExSIZE", dim);
		*x = '\0';
		if (!isa_parse_i32(dim, &ap->stride[nd]) || !isa_parse_u32(x + 1, &ap->size[nd]))
			return asm_fail(c, ISA_E_SYNTAX, field, "dim '%s' out of range", dim);
		nd++;
		s = comma ? comma + 1 : end;
		if (comma && s == end)
			return asm_fail(c, ISA_E_SYNTAX, field, "'%.60s': trailing comma", tok);
	}
	if (nd == 0)
		return asm_fail(c, ISA_E_BAD_DIMS, field, "no free dims in '%.60s'", tok);
	ap->ndims = (uint8_t)nd;
	return ISA_OK;

bad_part:
	return asm_fail(c, ISA_E_BAD_PARTITION, field,
			ap->space == ISA_SPACE_HBM ? "'[%s]': expected [ROWSTRIDExROWS]"
						   : "'[%s]': expected [START:END]",
			part);
}

/* ------------------------------------------------------ instructions */

static const isa_field *find_field(int op, const char *key, size_t keylen)
{
	for (const isa_field *f = isa_op_fields(op); f->key; f++)
		if (strlen(f->key) == keylen && strncmp(f->key, key, keylen) == 0)
			return f;
	return NULL;
}

static isa_status parse_field(asm_ctx *c, int op, const isa_field *f, const char *val,
			      isa_instr *in)
{
	switch (f->kind) {
	case ISA_FK_AP:
	case ISA_FK_APOPT:
		in->ap_mask |= (uint8_t)(1u << f->slot);
		return parse_ap(c, val, f->key, &in->ap[f->slot]);
	case ISA_FK_SCALAR:
		if (strncmp(val, "sbuf:", 5) == 0 || strncmp(val, "psum:", 5) == 0 ||
		    strncmp(val, "hbm(", 4) == 0) {
			in->ap_mask |= (uint8_t)(1u << f->ap_slot);
			in->imm[f->slot] = isa_imm_f32(0.0f);
			return parse_ap(c, val, f->key, &in->ap[f->ap_slot]);
		}
		if (!isa_parse_imm(val, &in->imm[f->slot]))
			return asm_fail(c, ISA_E_SYNTAX, f->key, "'%.60s' is neither a number nor an operand", val);
		return ISA_OK;
	case ISA_FK_ENUM: {
		int idx = isa_enum_from_name(f->domain, val);
		if (idx < 0)
			return asm_fail(c, ISA_E_BAD_CODE, f->key, "unknown value '%.60s' for %s",
					val, isa_ops[op].name);
		in->e[f->slot] = (uint8_t)idx;
		return ISA_OK;
	}
	case ISA_FK_IMM:
		if (!isa_parse_imm(val, &in->imm[f->slot]))
			return asm_fail(c, ISA_E_SYNTAX, f->key, "'%.60s' is not a number", val);
		return ISA_OK;
	case ISA_FK_U32:
	case ISA_FK_SEM:
		if (!isa_parse_u32(val, &in->u[f->slot]) ||
		    (f->kind == ISA_FK_SEM && in->u[f->slot] == ISA_SEM_NONE))
			return asm_fail(c, ISA_E_BAD_VALUE, f->key, "'%.60s'", val);
		return ISA_OK;
	case ISA_FK_DESC: {
		int64_t i = isa_name_index_find(&c->dma_names, c->p, val);
		if (i >= 0) {
			in->u[f->slot] = (uint32_t)i;
			return ISA_OK;
		}
		return asm_fail(c, ISA_E_BAD_DESC, f->key,
				"undefined descriptor '%.60s' (declare it with .dma first)", val);
	}
	case ISA_FK_IVEC: {
		char buf[128];
		size_t n = strlen(val);
		if (n == 0 || n >= sizeof(buf))
			return asm_fail(c, ISA_E_SYNTAX, f->key, "bad list");
		memcpy(buf, val, n + 1);
		in->nivec = 0;
		for (char *save = NULL, *t = strtok_r(buf, ",", &save); t;
		     t = strtok_r(NULL, ",", &save)) {
			if (in->nivec >= ISA_MAX_DIMS)
				return asm_fail(c, ISA_E_BAD_DIMS, f->key, "more than %u values",
						ISA_MAX_DIMS);
			if (!isa_parse_i32(t, &in->ivec[in->nivec]))
				return asm_fail(c, ISA_E_SYNTAX, f->key, "'%.40s' is not an int32", t);
			in->nivec++;
		}
		return ISA_OK;
	}
	case ISA_FK_PMAP: {
		/* exactly one entry per partition of a quadrant: a shorter list
		 * is more likely a mistake than a request to keep the rest */
		unsigned n = 0;
		for (const char *s = val; ; n++) {
			char *end;
			errno = 0;
			unsigned long x = strtoul(s, &end, 10);
			if (end == s || errno || (x >= ISA_QUADRANT && x != ISA_PMAP_KEEP) || n >= ISA_QUADRANT)
				return asm_fail(c, ISA_E_BAD_VALUE, f->key,
						"%u partition numbers 0..%u or %u (keep), comma-separated",
						ISA_QUADRANT, ISA_QUADRANT - 1, ISA_PMAP_KEEP);
			in->pmap[n] = (uint8_t)x;
			if (*end == '\0')
				break;
			if (*end != ',')
				return asm_fail(c, ISA_E_SYNTAX, f->key, "'%.40s' is not a number", s);
			s = end + 1;
		}
		if (n + 1 != ISA_QUADRANT)
			return asm_fail(c, ISA_E_BAD_VALUE, f->key, "%u entries, one per partition of a quadrant (%u)",
					n + 1, ISA_QUADRANT);
		return ISA_OK;
	}
	default:
		return asm_fail(c, ISA_E_SYNTAX, f->key, "field takes no value");
	}
}

static isa_status parse_instr(asm_ctx *c, char **tok, int ntok)
{
	int op = isa_op_from_name(tok[0]);
	if (op < 0)
		return asm_fail(c, ISA_E_BAD_OPCODE, "opcode", "unknown instruction '%.60s'", tok[0]);
	if (c->engine < 0)
		return asm_fail(c, ISA_E_SYNTAX, NULL, "instruction before any .engine section");

	isa_instr in;
	isa_instr_defaults(&in, op);
	uint32_t seen = 0;
	for (int i = 1; i < ntok; i++) {
		const char *eq = strchr(tok[i], '=');
		size_t klen = eq ? (size_t)(eq - tok[i]) : strlen(tok[i]);
		const isa_field *f = find_field(op, tok[i], klen);
		if (!f)
			return asm_fail(c, ISA_E_SYNTAX, NULL, "%s has no field '%.*s'",
					isa_ops[op].name, (int)(klen > 40 ? 40 : klen), tok[i]);
		unsigned fi = (unsigned)(f - isa_op_fields(op));
		if (seen & (1u << fi))
			return asm_fail(c, ISA_E_SYNTAX, f->key, "given twice");
		seen |= 1u << fi;
		if (f->kind == ISA_FK_FLAG) {
			if (eq)
				return asm_fail(c, ISA_E_SYNTAX, f->key, "a flag takes no value");
			in.flags |= (uint16_t)f->dflt;
			continue;
		}
		if (!eq)
			return asm_fail(c, ISA_E_SYNTAX, f->key, "expected %s=VALUE", f->key);
		isa_status st = parse_field(c, op, f, eq + 1, &in);
		if (st != ISA_OK)
			return st;
	}
	/* access patterns, descriptor references and partition maps have no default */
	for (const isa_field *f = isa_op_fields(op); f->key; f++)
		if ((f->kind == ISA_FK_AP || f->kind == ISA_FK_DESC || f->kind == ISA_FK_PMAP) &&
		    !(seen & (1u << (f - isa_op_fields(op)))))
			return asm_fail(c, ISA_E_MISSING_OPERAND, f->key, "%s needs %s=",
					isa_ops[op].name, f->key);

	int e = c->engine;
	uint32_t idx = c->p->n_instr[e];
	if (idx >= ISA_MAX_STREAM_LEN)
		return asm_fail(c, ISA_E_LIMIT, NULL, "more than %u instructions in a stream",
				ISA_MAX_STREAM_LEN);
	if (!isa_grow((void **)&c->p->stream[e], &c->p->cap_instr[e], idx + 1, sizeof(isa_instr)) ||
	    !record_line(c, e, idx))
		return asm_fail(c, ISA_E_NOMEM, NULL, "instruction");
	c->p->stream[e][idx] = in;
	c->p->n_instr[e] = idx + 1;
	return ISA_OK;
}

/* -------------------------------------------------------- directives */

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

static isa_status parse_tensor(asm_ctx *c, char **tok, int ntok)
{
	isa_program *p = c->p;
	if (ntok < 5)
		return asm_fail(c, ISA_E_SYNTAX, "tensor",
				".tensor NAME KIND DTYPE [SHAPE] [offset=N] [data=HEX]");
	if (!isa_name_valid(tok[1]))
		return asm_fail(c, ISA_E_BAD_TENSOR, "tensor.name", "bad name '%.60s'", tok[1]);
	if (isa_program_find_tensor(p, tok[1]) >= 0)
		return asm_fail(c, ISA_E_DUPLICATE_NAME, "tensor.name", "tensor '%s'", tok[1]);
	int kind = isa_tensor_kind_from_name(tok[2]);
	if (kind < 0)
		return asm_fail(c, ISA_E_BAD_TENSOR, "tensor.kind",
				"'%.60s' (input, output, internal or const)", tok[2]);
	int dt = isa_dtype_from_name(tok[3]);
	if (dt == ISA_DT_INVALID)
		return asm_fail(c, ISA_E_BAD_DTYPE, "tensor.dtype", "unknown dtype '%.60s'", tok[3]);

	isa_tensor t;
	memset(&t, 0, sizeof(t));
	snprintf(t.name, sizeof(t.name), "%s", tok[1]);
	t.kind = (uint8_t)kind;
	t.dtype = (uint8_t)dt;
	size_t sl = strlen(tok[4]);
	if (sl < 2 || tok[4][0] != '[' || tok[4][sl - 1] != ']')
		return asm_fail(c, ISA_E_SYNTAX, "tensor.shape", "expected [d0,d1,...], got '%.60s'",
				tok[4]);
	tok[4][sl - 1] = '\0';
	for (char *save = NULL, *d = strtok_r(tok[4] + 1, ",", &save); d;
	     d = strtok_r(NULL, ",", &save)) {
		if (t.rank >= ISA_MAX_RANK)
			return asm_fail(c, ISA_E_BAD_TENSOR, "tensor.rank", "rank above %u",
					ISA_MAX_RANK);
		if (!isa_parse_u64(d, &t.shape[t.rank]))
			return asm_fail(c, ISA_E_SYNTAX, "tensor.shape", "bad dim '%.40s'", d);
		t.rank++;
	}

	const char *data = NULL;
	for (int i = 5; i < ntok; i++) {
		if (strncmp(tok[i], "offset=", 7) == 0 && kind == ISA_TK_INTERNAL) {
			if (!isa_parse_u64(tok[i] + 7, &t.offset))
				return asm_fail(c, ISA_E_SYNTAX, "tensor.offset", "'%.60s'", tok[i] + 7);
		} else if (strncmp(tok[i], "data=", 5) == 0 && kind == ISA_TK_CONST) {
			data = tok[i] + 5;
		} else {
			return asm_fail(c, ISA_E_SYNTAX, "tensor", "unexpected '%.60s' for a %s tensor",
					tok[i], isa_tensor_kind_name(kind));
		}
	}
	if (kind == ISA_TK_CONST) {
		uint64_t bytes = isa_tensor_bytes(&t);
		size_t hl = data ? strlen(data) : 0;
		if (!data || hl % 2 || hl / 2 != bytes)
			return asm_fail(c, ISA_E_CONST_SIZE, "tensor.data",
					"tensor '%s' needs %llu bytes (%llu hex digits), got %zu digits",
					t.name, (unsigned long long)bytes,
					(unsigned long long)bytes * 2, hl);
		if (bytes > ISA_MAX_CONST_BYTES - p->consts_size)
			return asm_fail(c, ISA_E_LIMIT, "tensor.data", "constants above %llu bytes",
					(unsigned long long)ISA_MAX_CONST_BYTES);
		uint8_t *nc = realloc(p->consts, p->consts_size + bytes + 1);
		if (!nc)
			return asm_fail(c, ISA_E_NOMEM, "tensor.data", "constants");
		p->consts = nc;
		p->cap_consts = p->consts_size + bytes + 1;
		for (uint64_t i = 0; i < bytes; i++) {
			int hi = hexval(data[2 * i]), lo = hexval(data[2 * i + 1]);
			if (hi < 0 || lo < 0)
				return asm_fail(c, ISA_E_SYNTAX, "tensor.data",
						"non-hex digit near byte %llu", (unsigned long long)i);
			nc[p->consts_size + i] = (uint8_t)(hi << 4 | lo);
		}
		t.offset = p->consts_size;
		p->consts_size += bytes;
	}
	if (p->n_tensors >= ISA_MAX_TENSORS)
		return asm_fail(c, ISA_E_LIMIT, "tensor", "more than %u tensors", ISA_MAX_TENSORS);
	if (!isa_grow((void **)&p->tensors, &p->cap_tensors, p->n_tensors + 1, sizeof(t)) ||
	    !record_line(c, LINES_TENSOR, p->n_tensors))
		return asm_fail(c, ISA_E_NOMEM, "tensor", "tensor table");
	p->tensors[p->n_tensors++] = t;
	return ISA_OK;
}

static isa_status parse_dma(asm_ctx *c, char **tok, int ntok)
{
	isa_program *p = c->p;
	if (ntok < 5)
		return asm_fail(c, ISA_E_SYNTAX, "dma", ".dma NAME MODE dst=AP src=AP [index=AP [oob=skip]]");
	if (!isa_name_valid(tok[1]))
		return asm_fail(c, ISA_E_BAD_DESC, "dma.name", "bad name '%.60s'", tok[1]);
	if (isa_name_index_find(&c->dma_names, p, tok[1]) >= 0)
		return asm_fail(c, ISA_E_DUPLICATE_NAME, "dma.name", "descriptor '%s'", tok[1]);
	int mode = isa_dma_mode_from_name(tok[2]);
	if (mode < 0)
		return asm_fail(c, ISA_E_BAD_DESC, "dma.mode", "'%.60s' (direct, gather or scatter)",
				tok[2]);
	isa_dma_desc d;
	memset(&d, 0, sizeof(d));
	snprintf(d.name, sizeof(d.name), "%s", tok[1]);
	d.mode = (uint8_t)mode;
	bool have_dst = false, have_src = false, have_index = false;
	for (int i = 3; i < ntok; i++) {
		isa_status st;
		if (strncmp(tok[i], "dst=", 4) == 0 && !have_dst) {
			st = parse_ap(c, tok[i] + 4, "dma.dst", &d.dst);
			have_dst = true;
		} else if (strncmp(tok[i], "src=", 4) == 0 && !have_src) {
			st = parse_ap(c, tok[i] + 4, "dma.src", &d.src);
			have_src = true;
		} else if (strncmp(tok[i], "index=", 6) == 0 && !have_index &&
			   isa_dma_mode_indexed(mode)) {
			st = parse_ap(c, tok[i] + 6, "dma.index", &d.index);
			have_index = true;
		} else if (strcmp(tok[i], "oob=skip") == 0 && !d.oob_skip && isa_dma_mode_indexed(mode)) {
			d.oob_skip = 1;
			st = ISA_OK;
		} else if (strcmp(tok[i], "oob=error") == 0 && isa_dma_mode_indexed(mode)) {
			st = ISA_OK;
		} else {
			return asm_fail(c, ISA_E_SYNTAX, "dma", "unexpected '%.60s'", tok[i]);
		}
		if (st != ISA_OK)
			return st;
	}
	if (!have_dst || !have_src || (isa_dma_mode_indexed(mode) && !have_index))
		return asm_fail(c, ISA_E_MISSING_OPERAND, "dma", "descriptor '%s' needs dst=, src=%s",
				d.name, isa_dma_mode_indexed(mode) ? " and index=" : "");
	if (p->n_dma >= ISA_MAX_DMA_DESCS)
		return asm_fail(c, ISA_E_LIMIT, "dma", "more than %u descriptors", ISA_MAX_DMA_DESCS);
	if (!isa_grow((void **)&p->dma, &p->cap_dma, p->n_dma + 1, sizeof(d)) ||
	    !record_line(c, LINES_DMA, p->n_dma))
		return asm_fail(c, ISA_E_NOMEM, "dma", "descriptor table");
	p->dma[p->n_dma] = d;
	if (!isa_name_index_add(&c->dma_names, p, p->n_dma))
		return asm_fail(c, ISA_E_NOMEM, "dma", "descriptor names");
	p->n_dma++;
	return ISA_OK;
}

static isa_status parse_directive(asm_ctx *c, char **tok, int ntok)
{
	const char *d = tok[0];
	if (strcmp(d, ".tensor") == 0)
		return parse_tensor(c, tok, ntok);
	if (strcmp(d, ".dma") == 0)
		return parse_dma(c, tok, ntok);
	if (ntok != 2)
		return asm_fail(c, ISA_E_SYNTAX, NULL, "'%.20s' takes one argument", d);
	if (strcmp(d, ".target") == 0) {
		int t = isa_target_from_name(tok[1]);
		if (t == ISA_TARGET_INVALID) {
			char known[128];
			isa_target_list(known, sizeof(known), ", ");
			return asm_fail(c, ISA_E_BAD_TARGET, "target", "'%.60s' (%s)", tok[1], known);
		}
		if (c->seen_target)
			return asm_fail(c, ISA_E_SYNTAX, "target", ".target given twice");
		c->seen_target = true;
		c->target_line = c->line;
		c->p->target = (uint8_t)t;
		return ISA_OK;
	}
	if (strcmp(d, ".semaphores") == 0) {
		if (!isa_parse_u32(tok[1], &c->p->num_semaphores))
			return asm_fail(c, ISA_E_SYNTAX, "semaphores", "'%.60s'", tok[1]);
		c->sem_line = c->line;
		return ISA_OK;
	}
	if (strcmp(d, ".scratch") == 0) {
		if (!isa_parse_u64(tok[1], &c->p->scratch_bytes))
			return asm_fail(c, ISA_E_SYNTAX, "scratch", "'%.60s'", tok[1]);
		c->scratch_line = c->line;
		return ISA_OK;
	}
	if (strcmp(d, ".engine") == 0) {
		int e = isa_engine_from_name(tok[1]);
		if (e < 0)
			return asm_fail(c, ISA_E_SYNTAX, "engine",
					"'%.60s' (tensor, vector, scalar, gpsimd or sync)", tok[1]);
		c->engine = e;
		return ISA_OK;
	}
	return asm_fail(c, ISA_E_SYNTAX, NULL, "unknown directive '%.60s'", d);
}

/* Splits one line (already NUL-terminated, comment removed) into tokens. */
static int tokenize(char *s, char **tok)
{
	int n = 0;
	for (;;) {
		while (*s == ' ' || *s == '\t' || *s == '\r')
			s++;
		if (!*s)
			return n;
		if (n == MAX_TOKENS)
			return -1;
		tok[n++] = s;
		while (*s && *s != ' ' && *s != '\t' && *s != '\r')
			s++;
		if (*s)
			*s++ = '\0';
	}
}

/* Attaches the source line of the instruction/declaration a validator
 * rejection names, so users see where to look. */
static void locate(asm_ctx *c, isa_diag *diag)
{
	if (!diag || diag->line)
		return;
	int line = 0;
	if (diag->engine >= 0 && diag->engine < ISA_NUM_ENGINES && diag->index >= 0 &&
	    (uint64_t)diag->index < c->p->n_instr[diag->engine])
		line = c->lines[diag->engine][diag->index];
	else if (diag->engine < 0 && diag->index >= 0 && strncmp(diag->field, "tensor", 6) == 0 &&
		 (uint64_t)diag->index < c->p->n_tensors)
		line = c->lines[LINES_TENSOR][diag->index];
	else if (diag->engine < 0 && diag->index >= 0 && strncmp(diag->field, "dma", 3) == 0 &&
		 (uint64_t)diag->index < c->p->n_dma)
		line = c->lines[LINES_DMA][diag->index];
	else if (strcmp(diag->field, "semaphores") == 0)
		line = c->sem_line;
	else if (strcmp(diag->field, "scratch") == 0)
		line = c->scratch_line;
	else if (strcmp(diag->field, "target") == 0)
		line = c->target_line;
	if (line)
		isa_diag_set_line(diag, line);
}

isa_status isa_asm(const char *text, size_t len, isa_program **out, isa_diag *diag)
{
	return isa_asm_lines(text, len, out, NULL, diag);
}

/* The source line of every instruction, engine by engine in stream order,
 * in one malloc'd array (a tool that reports by source line, the race
 * detector, needs them). */
static isa_status export_lines(const asm_ctx *c, int **lines_out, isa_diag *diag)
{
	size_t total = 0;
	for (int e = 0; e < ISA_NUM_ENGINES; e++)
		total += c->p->n_instr[e];
	int *all = malloc((total ? total : 1) * sizeof(int));
	if (!all)
		return isa_fail(diag, ISA_E_NOMEM, -1, -1, NULL, "line table");
	size_t k = 0;
	for (int e = 0; e < ISA_NUM_ENGINES; e++)
		for (uint32_t i = 0; i < c->p->n_instr[e]; i++)
			all[k++] = c->lines[e] ? c->lines[e][i] : 0;
	*lines_out = all;
	return ISA_OK;
}

isa_status isa_asm_lines(const char *text, size_t len, isa_program **out, int **lines_out,
			 isa_diag *diag)
{
	asm_ctx c = { .diag = diag, .engine = -1 };
	isa_status st = ISA_OK;
	char *buf = NULL;
	*out = NULL;
	if (lines_out)
		*lines_out = NULL;

	c.p = isa_program_new(ISA_TARGET_trn2);   /* default target, as the runtime's */
	if (!c.p)
		return isa_fail(diag, ISA_E_NOMEM, -1, -1, NULL, "assembling");

	size_t pos = 0;
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
		c.line++;
		if (n > MAX_LINE) {
			st = asm_fail(&c, ISA_E_LIMIT, NULL, "line longer than %u bytes", MAX_LINE);
			goto free_all;
		}
		char *nb = realloc(buf, n + 1);
		if (!nb) {
			st = asm_fail(&c, ISA_E_NOMEM, NULL, "line buffer");
			goto free_all;
		}
		buf = nb;
		memcpy(buf, text + pos, n);
		buf[n] = '\0';
		pos += n + (nl ? 1 : 0);

		if (strlen(buf) != n) {
			st = asm_fail(&c, ISA_E_SYNTAX, NULL, "NUL byte in text");
			goto free_all;
		}
		char *semi = strchr(buf, ';');
		if (semi)
			*semi = '\0';
		char *tok[MAX_TOKENS];
		int ntok = tokenize(buf, tok);
		if (ntok < 0) {
			st = asm_fail(&c, ISA_E_SYNTAX, NULL, "more than %d tokens on a line", MAX_TOKENS);
			goto free_all;
		}
		if (ntok == 0)
			continue;
		st = tok[0][0] == '.' ? parse_directive(&c, tok, ntok) : parse_instr(&c, tok, ntok);
		if (st != ISA_OK)
			goto free_all;
	}

	st = isa_validate(c.p, diag);
	if (st != ISA_OK) {
		locate(&c, diag);
		goto free_all;
	}
	if (lines_out) {
		st = export_lines(&c, lines_out, diag);
		if (st != ISA_OK)
			goto free_all;
	}
	*out = c.p;
	c.p = NULL;

free_all:
	isa_name_index_free(&c.dma_names);
	for (int i = 0; i < ISA_NUM_ENGINES + 2; i++)
		free(c.lines[i]);
	free(buf);
	isa_program_free(c.p);
	return st;
}
