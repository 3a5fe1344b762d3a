/*
 * cli_isa.c -- `neuronsim isa [NAME...]`: the instruction set as the tables
 * declare it -- engines, operand fields in text order, cost class and
 * synopsis -- so a program author never needs to read isa.def.
 */
#include "cli.h"

#include "neuronsim/isa.h"

#include <stdio.h>
#include <string.h>

static const struct { const char *kind, *hint; } hints[] = {
	{ "ap", "=AP" }, { "ap_optional", "=AP (optional)" }, { "scalar", "=NUMBER|AP[P,1]" },
	{ "imm", "=NUMBER" }, { "u32", "=UINT" }, { "sem", "=SEMAPHORE" }, { "desc", "=DMA-NAME" },
	{ "ivec", "=INT,INT,..." }, { "flag", " (flag)" }, { "enum", "=NAME," },
};

static const char *kind_hint(const isa_field_info *f)
{
	for (size_t i = 0; i < sizeof(hints) / sizeof(hints[0]); i++)
		if (!strcmp(hints[i].kind, f->kind))
			return hints[i].hint;
	return "";
}

/* index of the enum value whose code is `code`, or 0 */
static unsigned domain_index(const char *domain, unsigned code)
{
	for (unsigned i = 0; i < isa_domain_size(domain); i++)
		if (isa_domain_code(domain, i) == code)
			return i;
	return 0;
}

static void print_op(int op, bool verbose)
{
	const isa_op_info *o = &isa_ops[op];
	printf("%-24s", o->name);
	for (int e = 0; e < ISA_NUM_ENGINES; e++)
		if (o->engines & (1u << e))
			printf(" %s", isa_engine_name(e));
	printf("\n    %s\n", o->synopsis);
	if (!verbose)
		return;
	isa_field_info fi, *f = &fi;
	for (unsigned k = 0; isa_op_field(op, k, f); k++) {
		printf("    %s%s", f->key, kind_hint(f));
		if (f->domain) {
			bool alu = !strcmp(f->domain, "alu");
			printf(" one of:");
			unsigned dflt = domain_index(f->domain, f->dflt);
			for (unsigned i = 0; i < isa_domain_size(f->domain); i++)
				if (!alu || !f->max || i == dflt || (isa_alu_uses((int)i) & f->max))
					printf(" %s", isa_domain_name(f->domain, i));
			printf(" (default %s)", isa_domain_name(f->domain, dflt));
		} else if (!strcmp(f->kind, "u32")) {
			printf(" in [0, %u] (default %u)", f->max, f->dflt);
		}
		printf("\n");
	}
	printf("    cost: %s -- %s\n", isa_cost_class_name(o->cost), isa_cost_class_formula(o->cost));
}

int nsim_cli_isa(int argc, char **argv)
{
	if (argc < 2) {
		printf("instructions (engines that may run them); `neuronsim isa NAME` for fields\n\n");
		for (int op = 0; op < ISA_NUM_OPS; op++)
			print_op(op, false);
		printf("\ndtypes:");
		for (int d = 1; d < ISA_NUM_DTYPES; d++)
			printf(" %s", isa_dtype_name(d));
		printf("\ntargets:");
		for (int t = 1; t < ISA_NUM_TARGETS; t++)
			printf(" %s (%s)", isa_target_name(t), isa_target_get(t)->core);
		printf("\n");
		return NSIM_EXIT_OK;
	}
	int rc = NSIM_EXIT_OK;
	for (int i = 1; i < argc; i++) {
		int op = isa_op_from_name(argv[i]);
		if (op < 0) {
			fprintf(stderr, "neuronsim: no instruction '%s' (see `neuronsim isa`)\n", argv[i]);
			rc = NSIM_EXIT_BAD;
			continue;
		}
		print_op(op, true);
	}
	return rc;
}

void nsim_cli_targets(char *buf, size_t size)
{
	isa_target_list(buf, size, "|");
}
