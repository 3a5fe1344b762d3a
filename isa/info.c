/*
 * info.c -- the tables as data for callers outside C: sizes of the name
 * tables, an instruction's operand fields with their read/write roles
 * (isa_formats.def), and the enumeration domains by name.  The Python
 * bindings read the instruction set through these at import instead of
 * keeping copies that drift.
 */
#include "isa_internal.h"

#include <string.h>

/* every name table once: its enum, the name callers in other languages use,
 * its size and its name function */
#define ISA_TABLES(X)                                                        \
	X(OPS,          "ops",          ISA_NUM_OPS,          isa_op_name)          \
	X(ENGINES,      "engines",      ISA_NUM_ENGINES,      isa_engine_name)      \
	X(DTYPES,       "dtypes",       ISA_NUM_DTYPES,       isa_dtype_name)       \
	X(ACTS,         "acts",         ISA_NUM_ACTS,         isa_act_name)         \
	X(ALUS,         "alus",         ISA_NUM_ALUS,         isa_alu_name)         \
	X(TARGETS,      "targets",      ISA_NUM_TARGETS,      isa_target_name)      \
	X(SPACES,       "spaces",       ISA_NUM_SPACES,       isa_space_name)       \
	X(COST_CLASSES, "cost_classes", ISA_NUM_COST_CLASSES, isa_cost_class_name)  \
	X(STATUS,       "status",       ISA_NUM_STATUS,       isa_status_name)      \
	X(TENSOR_KINDS, "tensor_kinds", ISA_NUM_TENSOR_KINDS, isa_tensor_kind_name) \
	X(DMA_MODES,    "dma_modes",    ISA_NUM_DMA_MODES,    isa_dma_mode_name)    \
	X(FEATURES,     "features",     ISA_NUM_FEATURES,     isa_feature_name)

unsigned isa_table_size(int table)
{
	switch (table) {
#define X(id, key, n, fn) case ISA_TABLE_##id: return n;
	ISA_TABLES(X)
#undef X
	default: return 0;
	}
}

int isa_table_from_name(const char *name)
{
	if (!name)
		return -1;
#define X(id, key, n, fn) if (!strcmp(name, key)) return ISA_TABLE_##id;
	ISA_TABLES(X)
#undef X
	return -1;
}

const char *isa_table_entry(int table, unsigned i)
{
	if (i >= isa_table_size(table))
		return NULL;
	switch (table) {
#define X(id, key, n, fn) case ISA_TABLE_##id: return fn((int)i);
	ISA_TABLES(X)
#undef X
	default: return NULL;
	}
}

static const char *const kind_names[] = {
	[ISA_FK_AP] = "ap",     [ISA_FK_APOPT] = "ap_optional", [ISA_FK_SCALAR] = "scalar",
	[ISA_FK_ENUM] = "enum", [ISA_FK_IMM] = "imm",           [ISA_FK_U32] = "u32",
	[ISA_FK_SEM] = "sem",   [ISA_FK_DESC] = "desc",         [ISA_FK_IVEC] = "ivec",
	[ISA_FK_FLAG] = "flag", [ISA_FK_PMAP] = "pmap",
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
