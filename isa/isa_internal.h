/*
 * isa_internal.h -- shared by the isa/ sources only: operand-format field
 * descriptors, bounded byte reader/writer, diagnostics helpers.
 */
#ifndef NSIM_ISA_INTERNAL_H
#define NSIM_ISA_INTERNAL_H

#include "neuronsim/isa.h"

#include <stdarg.h>

/* ------------------------------------------------------------ formats */

typedef enum isa_field_kind {
	ISA_FK_END = 0,
	ISA_FK_AP,
	ISA_FK_APOPT,
	ISA_FK_SCALAR,
	ISA_FK_ENUM,
	ISA_FK_IMM,
	ISA_FK_U32,
	ISA_FK_SEM,
	ISA_FK_DESC,
	ISA_FK_IVEC,
	ISA_FK_FLAG,
	ISA_FK_PMAP,
} isa_field_kind;

/* enumeration domains of ISA_FK_ENUM fields */
typedef enum isa_enum_domain {
	ISA_DOM_ACT = 0,
	ISA_DOM_ALU,
	ISA_DOM_PERF,
	ISA_DOM_SEMOP,
	ISA_NUM_DOMAINS
} isa_enum_domain;

typedef struct isa_field {
	const char *key;      /* keyword in the text form, NULL ends a format */
	uint8_t     kind;     /* isa_field_kind */
	uint8_t     slot;     /* e[] / u[] / imm[] index, ap slot, flag bit */
	uint8_t     ap_slot;  /* SCALAR: where an AP operand goes */
	uint8_t     domain;   /* ENUM */
	uint32_t    dflt;     /* ENUM: default code; U32: default; IMM: int */
	uint32_t    max;      /* U32: largest legal value; ALU enum: ISA_AU_* uses */
	uint8_t     role;     /* operands (AP, APOPT, SCALAR): ISA_ROLE_* bits */
} isa_field;

/* operand roles as isa_formats.def writes them */
#define ISA_ROLE_R    ISA_ROLE_READ
#define ISA_ROLE_W    ISA_ROLE_WRITE
#define ISA_ROLE_WACC (ISA_ROLE_WRITE | ISA_ROLE_READ_IF_ACCUMULATE)

#define F_END                         { NULL, ISA_FK_END, 0, 0, 0, 0, 0, 0 }
#define F_AP(k, s, r)                 { k, ISA_FK_AP, ISA_AP_##s, 0, 0, 0, 0, ISA_ROLE_##r }
#define F_APOPT(k, s, r)              { k, ISA_FK_APOPT, ISA_AP_##s, 0, 0, 0, 0, ISA_ROLE_##r }
#define F_SCALAR(k, i, s, d)          { k, ISA_FK_SCALAR, i, ISA_AP_##s, 0, d, 0, ISA_ROLE_READ }
#define F_ENUM(k, i, dom, d)          { k, ISA_FK_ENUM, i, 0, ISA_DOM_##dom, d, 0, 0 }
/* an ALU-operator field; `uses` (ISA_AU_*) names the operators it takes */
#define F_ALU(k, i, uses, d)          { k, ISA_FK_ENUM, i, 0, ISA_DOM_ALU, d, uses, 0 }
#define F_IMM(k, i, d)                { k, ISA_FK_IMM, i, 0, 0, d, 0, 0 }
#define F_U32(k, i, mx, d)            { k, ISA_FK_U32, i, 0, 0, d, mx, 0 }
#define F_SEM(k, i)                   { k, ISA_FK_SEM, i, 0, 0, ISA_SEM_NONE, 0, 0 }
#define F_DESC(k, i)                  { k, ISA_FK_DESC, i, 0, 0, 0, 0, 0 }
#define F_IVEC(k)                     { k, ISA_FK_IVEC, 0, 0, 0, 0, 0, 0 }
#define F_FLAG(k, bit)                { k, ISA_FK_FLAG, 0, 0, 0, bit, 0, 0 }
#define F_PMAP(k)                     { k, ISA_FK_PMAP, 0, 0, 0, 0, 0, 0 }

typedef enum isa_format {
#define ISA_FORMAT(name, ...) ISA_FMT_##name,
#include "isa_formats.def"
#undef ISA_FORMAT
	ISA_NUM_FORMATS
} isa_format;

extern const isa_field *const isa_formats[ISA_NUM_FORMATS];
extern const char *const isa_format_names[ISA_NUM_FORMATS];

static inline const isa_field *isa_op_fields(int op)
{
	return isa_formats[isa_ops[op].format];
}

/* enum domains: code <-> index <-> name */
unsigned    isa_enum_count(int domain);
const char *isa_enum_name(int domain, unsigned index);
int         isa_enum_from_name(int domain, const char *s);   /* -1 */
int         isa_enum_from_code(int domain, unsigned code);   /* -1 */
unsigned    isa_enum_code(int domain, unsigned index);
unsigned    isa_act_code(int act);
unsigned    isa_alu_code(int alu);
int         isa_target_from_code(unsigned code);             /* INVALID */
int         isa_tensor_kind_from_name(const char *s);        /* -1 */
int         isa_dma_mode_from_name(const char *s);           /* -1 */

/* sets defaults of every optional field of `op` (used by decoder, parser, builder) */
void isa_instr_defaults(isa_instr *in, int op);

/* --------------------------------------------------------- diagnostics */

/* Fills diag (if non-NULL) and returns code.  `engine`/`index` -1 when n/a. */
isa_status isa_fail(isa_diag *diag, isa_status code, int engine, int64_t index,
		    const char *field, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

bool isa_name_valid(const char *s);

/* prefixes diag->msg with "line N: " and sets diag->line */
void isa_diag_set_line(isa_diag *diag, int line);

/* ---------------------------------------------------------- byte I/O */

typedef struct isa_reader {
	const uint8_t *p;
	size_t         len, pos;
	bool           short_read;   /* a read ran past the end */
} isa_reader;

bool     isa_rd_bytes(isa_reader *r, void *dst, size_t n);
uint8_t  isa_rd_u8(isa_reader *r);
uint16_t isa_rd_u16(isa_reader *r);
uint32_t isa_rd_u32(isa_reader *r);
uint64_t isa_rd_u64(isa_reader *r);
static inline size_t isa_rd_left(const isa_reader *r) { return r->len - r->pos; }

typedef struct isa_writer {
	uint8_t *buf;
	size_t   len, cap;
	bool     oom;
} isa_writer;

void isa_wr_bytes(isa_writer *w, const void *src, size_t n);
void isa_wr_u8(isa_writer *w, uint8_t v);
void isa_wr_u16(isa_writer *w, uint16_t v);
void isa_wr_u32(isa_writer *w, uint32_t v);
void isa_wr_u64(isa_writer *w, uint64_t v);

/* growable text buffer for the disassembler */
typedef struct isa_text {
	char  *buf;
	size_t len, cap;
	bool   oom;
} isa_text;
void isa_text_printf(isa_text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------- fields */

/* binary operand encoding, one place for every field kind (fields.c) */
isa_status isa_decode_instr(isa_reader *r, isa_instr *in, int engine,
			    int64_t index, isa_diag *diag);
void       isa_encode_instr(isa_writer *w, const isa_instr *in);
isa_status isa_decode_ap(isa_reader *r, isa_ap *ap, int engine, int64_t index,
			 const char *field, isa_diag *diag);
void       isa_encode_ap(isa_writer *w, const isa_ap *ap);

/* text forms of operands (text.c) */
void isa_text_ap(isa_text *t, const isa_program *p, const isa_ap *ap);
void isa_text_imm(isa_text *t, isa_imm imm);
void isa_text_instr(isa_text *t, const isa_program *p, const isa_instr *in);

/* the assembler's number and immediate tokens (asm_numbers.c): false when
 * the token is not one, or does not fit */
bool isa_parse_u64(const char *s, uint64_t *out);
bool isa_parse_i64(const char *s, int64_t *out);
bool isa_parse_u32(const char *s, uint32_t *out);
bool isa_parse_i32(const char *s, int32_t *out);
bool isa_parse_imm(const char *s, isa_imm *out);

/* generic growth helper: ensures (*ptr) holds at least `need` elements */
bool isa_grow(void **ptr, uint32_t *cap, uint32_t need, size_t elem);

/* program.c: the encoding of a program the caller has just validated */
isa_status isa_program_encode_valid(const isa_program *p, uint8_t **buf, size_t *len, isa_diag *diag);

#endif /* NSIM_ISA_INTERNAL_H */
