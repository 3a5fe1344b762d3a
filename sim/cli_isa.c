/*
 * cli_isa.c -- `neuronsim isa [NAME...]`: the instruction set as the tables
 * declare it -- engines, operand fields in text order, cost class and
 * synopsis -- so a program author never needs to read isa.def.
 */
#include "cli.h"

#include "isa_internal.h"

#include <stdio.h>
#include <string.h>

static const char *kind_hint(const isa_field *f)
{
	switch (f->kind) {
	case ISA_FK_AP:     return "=AP";
	case ISA_FK_APOPT:  return "=AP (optional)";
	case ISA_FK_SCALAR: return "=NUMBER|AP[P,1]";
	case ISA_FK_IMM:    return "=NUMBER";
	case ISA_FK_U32:    return "=UINT";
	case ISA_FK_SEM:    return "=SEMAPHORE";
	case ISA_FK_DESC:   return "=DMA-NAME";
	case ISA_FK_IVEC:   return "=INT,INT,...";
	case ISA_FK_FLAG:   return " (flag)";
	case ISA_FK_ENUM:   return "=NAME,";
	default:            return "";
	}
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
	for (const isa_field *f = isa_op_fields(op); f->key; f++) {
		printf("    %s%s", f->key, kind_hint(f));
		if (f->kind == ISA_FK_ENUM) {
			printf(" one of:");
			unsigned dflt = (unsigned)isa_enum_from_code(f->domain, f->dflt);
			for (unsigned i = 0; i < isa_enum_count(f->domain); i++)
				if (f->domain != ISA_DOM_ALU || !f->max || i == dflt ||
				    (isa_alu_uses((int)i) & f->max))
					printf(" %s", isa_enum_name(f->domain, i));
			printf(" (default %s)", isa_enum_name(f->domain, dflt));
		} else if (f->kind == ISA_FK_U32) {
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
