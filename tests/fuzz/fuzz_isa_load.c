/*
 * fuzz_isa_load.c -- libFuzzer target for the binary loader and validator.
 *
 * Beyond "does not crash" (ASan/UBSan), it checks two properties on every
 * input the loader accepts:
 *   1. the binary form is canonical: encode(load(x)) == x;
 *   2. text round trip: encode(asm(disasm(load(x)))) == x.
 * A violation aborts, which the fuzzer reports with the input.
 */
#include "neuronsim/isa.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_isa_load: property violated: %s\n", what);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	isa_program *p = NULL, *q = NULL;
	isa_diag diag;
	uint8_t *bin = NULL, *bin2 = NULL;
	char *text = NULL;
	size_t len = 0, len2 = 0, tlen = 0;

	if (isa_program_load(data, size, &p, &diag) != ISA_OK) {
		if (p)
			fail("rejected load returned a program");
		if (diag.msg[0] == '\0')
			fail("rejection without a message");
		return 0;
	}
	if (isa_program_encode(p, &bin, &len, &diag) != ISA_OK)
		fail("valid program does not encode");
	if (len != size || memcmp(bin, data, size) != 0)
		fail("encode(load(x)) != x");
	if (isa_disasm(p, &text, &tlen, &diag) != ISA_OK)
		fail("valid program does not disassemble");
	if (isa_asm(text, tlen, &q, &diag) != ISA_OK) {
		fprintf(stderr, "%s\n---\n%.*s\n", diag.msg, (int)tlen, text);
		fail("disassembly does not assemble");
	}
	if (isa_program_encode(q, &bin2, &len2, &diag) != ISA_OK)
		fail("reassembled program does not encode");
	if (len2 != size || memcmp(bin2, data, size) != 0)
		fail("encode(asm(disasm(load(x)))) != x");

	free(bin);
	free(bin2);
	free(text);
	isa_program_free(p);
	isa_program_free(q);
	return 0;
}
