/*
 * info.c -- the tables as data for callers outside C: sizes of the name
 * tables, an instruction's operand fields with their read/write roles
 * (isa_formats.def), and the enumeration domains by name.  The Python
 * bindings read the instruction set through these at import instead of
 * keeping copies that drift.
 */
#include "isa_internal.h"

#include <string.h>

unsigned isa_table_size(int table)
{
	switch (table) {
	case ISA_TABLE_OPS:          return ISA_NUM_OPS;
	case ISA_TABLE_ENGINES:      return ISA_NUM_ENGINES;
	case ISA_TABLE_DTYPES:       return ISA_NUM_DTYPES;
	case ISA_TABLE_ACTS:         return ISA_NUM_ACTS;
	case ISA_TABLE_ALUS:         return ISA_NUM_ALUS;
	case ISA_TABLE_TARGETS:      return ISA_NUM_TARGETS;
	case ISA_TABLE_SPACES:       return ISA_NUM_SPACES;
	case ISA_TABLE_COST_CLASSES: return ISA_NUM_COST_CLASSES;
	case ISA_TABLE_STATUS:       return ISA_NUM_STATUS;
	case ISA_TABLE_TENSOR_KINDS: return ISA_NUM_TENSOR_KINDS;
	case ISA_TABLE_DMA_MODES:    return ISA_NUM_DMA_MODES;
	default:                     return 0;
	}
}

static const char *const kind_names[] = {
	[ISA_FK_AP] = "ap",     [ISA_FK_APOPT] = "ap_optional", [ISA_FK_SCALAR] = "scalar",
	[ISA_FK_ENUM] = "enum", [ISA_FK_IMM] = "imm",           [ISA_FK_U32] = "u32",
	[ISA_FK_SEM] = "sem",   [ISA_FK_DESC] = "desc",         [ISA_FK_IVEC] = "ivec",
	[ISA_FK_FLAG] = "flag",
};

static const char *const domain_names[ISA_NUM_DOMAINS] = {
	[ISA_DOM_ACT] = "act", [ISA_DOM_ALU] = "alu", [ISA_DOM_PERF] = "perf", [ISA_DOM_SEMOP] = "semop",
};

unsigned isa_op_field_count(int op)
{
	if (op < 0 || op >= ISA_NUM_OPS)
		return 0;
	unsigned n = 0;
	for (const isa_field *f = isa_op_fields(op); f->key; f++)
		n++;
	return n;
}

bool isa_op_field(int op, unsigned i, isa_field_info *out)
{
	if (i >= isa_op_field_count(op))
		return false;
	const isa_field *f = &isa_op_fields(op)[i];
	bool operand = f->kind == ISA_FK_AP || f->kind == ISA_FK_APOPT || f->kind == ISA_FK_SCALAR;
	*out = (isa_field_info){
		.key = f->key,
		.kind = kind_names[f->kind],
		.ap_slot = f->kind == ISA_FK_SCALAR ? f->ap_slot : operand ? f->slot : -1,
		.role = f->role,
		.domain = f->kind == ISA_FK_ENUM ? domain_names[f->domain] : NULL,
		.slot = f->slot,
		.dflt = f->dflt,
		.max = f->max,
	};
	return true;
}

static int domain_of(const char *name)
{
	for (int d = 0; name && d < ISA_NUM_DOMAINS; d++)
		if (!strcmp(domain_names[d], name))
			return d;
	return -1;
}

unsigned isa_domain_size(const char *domain)
{
	int d = domain_of(domain);
	return d < 0 ? 0 : isa_enum_count(d);
}

const char *isa_domain_name(const char *domain, unsigned index)
{
	int d = domain_of(domain);
	return d < 0 ? NULL : isa_enum_name(d, index);
}

unsigned isa_domain_code(const char *domain, unsigned index)
{
	int d = domain_of(domain);
	return d < 0 || index >= isa_enum_count(d) ? 0 : isa_enum_code(d, index);
}
