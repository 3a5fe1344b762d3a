/*
 * asm_numbers.c -- the assembler's number and immediate tokens: integers
 * (decimal or 0x hex, range-checked to the field's width) and immediates
 * (an int32, a float, or a NaN spelled by its bits).  asm.c parses the
 * rest of the text form.
 */
#include "isa_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

bool isa_parse_u64(const char *s, uint64_t *out)
{
	if (!*s || *s == '-' || *s == '+' || isspace((unsigned char)*s))
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

bool isa_parse_i64(const char *s, int64_t *out)
{
	if (!*s || isspace((unsigned char)*s))
		return false;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 0);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

bool isa_parse_u32(const char *s, uint32_t *out)
{
	uint64_t v;
	if (!isa_parse_u64(s, &v) || v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

bool isa_parse_i32(const char *s, int32_t *out)
{
	int64_t v;
	if (!isa_parse_i64(s, &v) || v < INT32_MIN || v > INT32_MAX)
		return false;
	*out = (int32_t)v;
	return true;
}

/* integer token: optional sign then digits (or 0x hex) only */
static bool looks_integer(const char *s)
{
	if (*s == '-' || *s == '+')
		s++;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		return s[2] != '\0';
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

bool isa_parse_imm(const char *s, isa_imm *out)
{
	if (looks_integer(s)) {
		int64_t v;
		/* hex integers may spell any 32-bit pattern, decimals must fit int32 */
		if (!isa_parse_i64(s, &v) || v < INT32_MIN || v > (int64_t)UINT32_MAX)
			return false;
		if (v > INT32_MAX && !strstr(s, "0x") && !strstr(s, "0X"))
			return false;
		*out = isa_imm_i32((int32_t)(uint32_t)v);
		return true;
	}
	if (strncmp(s, "nan(0x", 6) == 0) {
		size_t n = strlen(s);
		if (n < 8 || s[n - 1] != ')')
			return false;
		char hex[16];
		/* "nan(" + hex digits + ")": the 0x... part is n - 5 bytes */
		if (n - 5 >= sizeof(hex))
			return false;
		memcpy(hex, s + 4, n - 5);
		hex[n - 5] = '\0';
		uint64_t bits;
		if (!isa_parse_u64(hex, &bits) || bits > UINT32_MAX)
			return false;
		float f;
		uint32_t b = (uint32_t)bits;
		memcpy(&f, &b, sizeof(f));
		if (!isnan(f))
			return false;
		out->kind = ISA_IMM_F32;
		out->bits = b;
		return true;
	}
	if (strcmp(s, "nan") == 0)
		return false;       /* a NaN must spell its bits */
	char *end;
	errno = 0;
	float f = strtof(s, &end);
	if (*end || end == s || (errno == ERANGE && isinf(f)))
		return false;
	*out = isa_imm_f32(f);
	return true;
}

