/*
 * fuzz_isa_asm.c -- libFuzzer target for the text reader (.nsasm).
 * Accepted text must encode, load back, and survive disasm -> asm with the
 * same bytes; rejected text must come with a message.
 */
#include "neuronsim/isa.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_isa_asm: property violated: %s\n", what);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	isa_program *p = NULL, *q = NULL, *r = NULL;
	isa_diag diag;
	uint8_t *bin = NULL, *bin2 = NULL;
	char *text = NULL;
	size_t len = 0, len2 = 0, tlen = 0;

	if (isa_asm((const char *)data, size, &p, &diag) != ISA_OK) {
		if (p)
			fail("rejected text returned a program");
		if (diag.msg[0] == '\0')
			fail("rejection without a message");
		return 0;
	}
	if (isa_program_encode(p, &bin, &len, &diag) != ISA_OK)
		fail("assembled program does not encode");
	if (isa_program_load(bin, len, &r, &diag) != ISA_OK)
		fail("encoded program does not load");
	if (isa_disasm(r, &text, &tlen, &diag) != ISA_OK)
		fail("loaded program does not disassemble");
	if (isa_asm(text, tlen, &q, &diag) != ISA_OK)
		fail("disassembly does not assemble");
	if (isa_program_encode(q, &bin2, &len2, &diag) != ISA_OK)
		fail("reassembled program does not encode");
	if (len2 != len || memcmp(bin2, bin, len) != 0)
		fail("asm -> disasm -> asm changed the bytes");

	free(bin);
	free(bin2);
	free(text);
	isa_program_free(p);
	isa_program_free(q);
	isa_program_free(r);
	return 0;
}
