/*
 * tables.c -- name/code tables expanded from the .def files, and the
 * lookups over them.  Nothing here is written by hand per instruction.
 */
#include "isa_internal.h"

#include <stdio.h>
#include <string.h>

const isa_op_info isa_ops[ISA_NUM_OPS] = {
#define ISA_OP(name, code, engines, format, cost, synopsis) \
	[ISA_OP_##name] = { #name, code, engines, ISA_FMT_##format, ISA_COST_##cost, synopsis },
#include "neuronsim/isa.def"
#undef ISA_OP
};

/* Formats: one static field array per row of isa_formats.def. */
#define ISA_FORMAT(name, ...) static const isa_field fmt_##name[] = { __VA_ARGS__ };
#include "isa_formats.def"
#undef ISA_FORMAT

const isa_field *const isa_formats[ISA_NUM_FORMATS] = {
#define ISA_FORMAT(name, ...) [ISA_FMT_##name] = fmt_##name,
#include "isa_formats.def"
#undef ISA_FORMAT
};

const char *const isa_format_names[ISA_NUM_FORMATS] = {
#define ISA_FORMAT(name, ...) [ISA_FMT_##name] = #name,
#include "isa_formats.def"
#undef ISA_FORMAT
};

/*
 * Opcode byte -> opcode.  A switch generated from isa.def: two rows with the
 * same code are a compile error ("duplicate case value"), the first of two
 * guards against overlapping encodings (the table test is the second).
 */
int isa_op_from_code(unsigned code)
{
	switch (code) {
#define ISA_OP(name, c, engines, format, cost, synopsis) case c: return ISA_OP_##name;
#include "neuronsim/isa.def"
#undef ISA_OP
	default:
		return -1;
	}
}

static const char *const engine_names[ISA_NUM_ENGINES] = {
	"tensor", "vector", "scalar", "gpsimd", "sync"
};

const char *isa_engine_name(int engine)
{
	if (engine < 0 || engine >= ISA_NUM_ENGINES)
		return NULL;
	return engine_names[engine];
}

int isa_engine_from_name(const char *s)
{
	for (int i = 0; i < ISA_NUM_ENGINES; i++)
		if (strcmp(s, engine_names[i]) == 0)
			return i;
	return -1;
}

const char *isa_op_name(int op)
{
	if (op < 0 || op >= ISA_NUM_OPS)
		return NULL;
	return isa_ops[op].name;
}

int isa_op_from_name(const char *s)
{
	for (int i = 0; i < ISA_NUM_OPS; i++)
		if (strcmp(s, isa_ops[i].name) == 0)
			return i;
	return -1;
}

/* ------------------------------------------------------------- dtypes */

static const struct {
	const char *name;
	uint8_t code, bytes, cls;
} dtypes[ISA_NUM_DTYPES] = {
	[ISA_DT_INVALID] = { "invalid", 0, 0, 0 },
#define ISA_DTYPE(name, code, bytes, cls) [ISA_DT_##name] = { #name, code, bytes, cls },
#include "neuronsim/isa_dtype.def"
#undef ISA_DTYPE
};

static bool dtype_ok(int dt) { return dt > ISA_DT_INVALID && dt < ISA_NUM_DTYPES; }

const char *isa_dtype_name(int dt) { return dtype_ok(dt) ? dtypes[dt].name : NULL; }
unsigned isa_dtype_size(int dt) { return dtype_ok(dt) ? dtypes[dt].bytes : 0; }
unsigned isa_dtype_code(int dt) { return dtype_ok(dt) ? dtypes[dt].code : 0; }
int isa_dtype_class(int dt) { return dtype_ok(dt) ? dtypes[dt].cls : 0; }
bool isa_dtype_is_float(int dt) { return isa_dtype_class(dt) == ISA_DC_FLOAT; }
bool isa_dtype_is_mx(int dt) { return isa_dtype_class(dt) == ISA_DC_MX; }

bool isa_dtype_is_integer(int dt)
{
	int c = isa_dtype_class(dt);
	return c == ISA_DC_INT || c == ISA_DC_UINT || c == ISA_DC_BOOL;
}

int isa_dtype_from_name(const char *s)
{
	for (int i = 1; i < ISA_NUM_DTYPES; i++)
		if (strcmp(s, dtypes[i].name) == 0)
			return i;
	return ISA_DT_INVALID;
}

int isa_dtype_from_code(unsigned code)
{
	for (int i = 1; i < ISA_NUM_DTYPES; i++)
		if (dtypes[i].code == code)
			return i;
	return ISA_DT_INVALID;
}

/* ------------------------------------------------- activation / ALU ops */

static const struct { const char *name; uint8_t code; } acts[ISA_NUM_ACTS] = {
#define ISA_ACT(name, code, synopsis) [ISA_ACT_##name] = { #name, code },
#include "neuronsim/isa_act.def"
#undef ISA_ACT
};

static const struct { const char *name; uint8_t code, uses; } alus[ISA_NUM_ALUS] = {
#define ISA_ALU(name, code, uses, synopsis) [ISA_ALU_##name] = { #name, code, uses },
#include "neuronsim/isa_alu.def"
#undef ISA_ALU
};

static const char *const perf_names[ISA_NUM_PERF_MODES] = { "none", "double_row" };
static const char *const semop_names[ISA_NUM_SEMOPS] = { "add", "sub", "set" };

const char *isa_act_name(int a) { return a >= 0 && a < ISA_NUM_ACTS ? acts[a].name : NULL; }
const char *isa_alu_name(int a) { return a >= 0 && a < ISA_NUM_ALUS ? alus[a].name : NULL; }
unsigned isa_alu_uses(int a) { return a >= 0 && a < ISA_NUM_ALUS ? alus[a].uses : 0; }
bool isa_alu_needs_integers(int a) { return (isa_alu_uses(a) & ISA_AU_INT) != 0; }
unsigned isa_act_code(int a) { return acts[a].code; }
unsigned isa_alu_code(int a) { return alus[a].code; }

int isa_alu_from_name(const char *s)
{
	return isa_enum_from_name(ISA_DOM_ALU, s);
}

unsigned isa_enum_count(int domain)
{
	switch (domain) {
	case ISA_DOM_ACT:   return ISA_NUM_ACTS;
	case ISA_DOM_ALU:   return ISA_NUM_ALUS;
	case ISA_DOM_PERF:  return ISA_NUM_PERF_MODES;
	case ISA_DOM_SEMOP: return ISA_NUM_SEMOPS;
	default:            return 0;
	}
}

const char *isa_enum_name(int domain, unsigned i)
{
	if (i >= isa_enum_count(domain))
		return NULL;
	switch (domain) {
	case ISA_DOM_ACT:   return acts[i].name;
	case ISA_DOM_ALU:   return alus[i].name;
	case ISA_DOM_PERF:  return perf_names[i];
	case ISA_DOM_SEMOP: return semop_names[i];
	default:            return NULL;
	}
}

/* act/alu carry codes from their tables; perf and semop codes are indices */
unsigned isa_enum_code(int domain, unsigned i)
{
	switch (domain) {
	case ISA_DOM_ACT: return acts[i].code;
	case ISA_DOM_ALU: return alus[i].code;
	default:          return i;
	}
}

int isa_enum_from_code(int domain, unsigned code)
{
	unsigned n = isa_enum_count(domain);
	for (unsigned i = 0; i < n; i++)
		if (isa_enum_code(domain, i) == code)
			return (int)i;
	return -1;
}

int isa_enum_from_name(int domain, const char *s)
{
	unsigned n = isa_enum_count(domain);
	for (unsigned i = 0; i < n; i++)
		if (strcmp(s, isa_enum_name(domain, i)) == 0)
			return (int)i;
	return -1;
}

/* ------------------------------------------------------- spaces, targets */

static const char *const space_names[ISA_NUM_SPACES] = { "none", "hbm", "sbuf", "psum" };

const char *isa_space_name(int s)
{
	return s >= 0 && s < ISA_NUM_SPACES ? space_names[s] : NULL;
}

static const isa_target_info targets[ISA_NUM_TARGETS] = {
	[ISA_TARGET_INVALID] = { "invalid", 0, "", 0, 0, 0, 0, 0, 0, false },
#define ISA_TARGET(name, code, core, ver, sbuf, psum, banks, mmn32, mmn16, dr) \
	[ISA_TARGET_##name] = { #name, code, core, ver, sbuf, psum, banks, mmn32, mmn16, dr },
#include "neuronsim/isa_targets.def"
#undef ISA_TARGET
};

const isa_target_info *isa_target_get(int t)
{
	if (t <= ISA_TARGET_INVALID || t >= ISA_NUM_TARGETS)
		return NULL;
	return &targets[t];
}

static const struct {
	const char *name, *what;
	unsigned first;
} features[ISA_NUM_FEATURES] = {
#define ISA_FEATURE(name, first, what) [ISA_FEAT_##name] = { #name, what, first },
#include "neuronsim/isa_features.def"
#undef ISA_FEATURE
};

bool isa_target_has(int t, int f)
{
	const isa_target_info *ti = isa_target_get(t);
	return ti && f >= 0 && f < ISA_NUM_FEATURES && ti->core_version >= features[f].first;
}

const char *isa_feature_name(int f)
{
	return f >= 0 && f < ISA_NUM_FEATURES ? features[f].name : NULL;
}

const char *isa_feature_what(int f)
{
	return f >= 0 && f < ISA_NUM_FEATURES ? features[f].what : NULL;
}

unsigned isa_feature_first_core(int f)
{
	return f >= 0 && f < ISA_NUM_FEATURES ? features[f].first : 0;
}

const char *isa_target_name(int t)
{
	const isa_target_info *ti = isa_target_get(t);
	return ti ? ti->name : NULL;
}

int isa_target_from_name(const char *s)
{
	for (int i = 1; i < ISA_NUM_TARGETS; i++)
		if (strcmp(s, targets[i].name) == 0)
			return i;
	return ISA_TARGET_INVALID;
}

size_t isa_target_list(char *buf, size_t size, const char *sep)
{
	size_t n = 0;
	if (size)
		buf[0] = '\0';
	for (int t = 1; t < ISA_NUM_TARGETS && n < size; t++) {
		int w = snprintf(buf + n, size - n, "%s%s", t > 1 ? sep : "", isa_target_name(t));
		if (w < 0)
			break;
		n += (size_t)w;
	}
	return n < size ? n : size ? size - 1 : 0;
}

int isa_target_from_code(unsigned code)
{
	for (int i = 1; i < ISA_NUM_TARGETS; i++)
		if (targets[i].code == code)
			return i;
	return ISA_TARGET_INVALID;
}

/* ------------------------------------------------ tensor kinds, DMA modes */

static const char *const tensor_kind_names[ISA_NUM_TENSOR_KINDS] = {
	"input", "output", "internal", "const"
};
static const char *const dma_mode_names[ISA_NUM_DMA_MODES] = { "direct", "gather", "scatter",
									   "scatter_add", "transpose", "add",
									   "gather_add" };

const char *isa_tensor_kind_name(int k)
{
	return k >= 0 && k < ISA_NUM_TENSOR_KINDS ? tensor_kind_names[k] : "?";
}

int isa_tensor_kind_from_name(const char *s)
{
	for (int i = 0; i < ISA_NUM_TENSOR_KINDS; i++)
		if (strcmp(s, tensor_kind_names[i]) == 0)
			return i;
	return -1;
}

bool isa_dma_mode_indexed(int m)
{
	return m == ISA_DMA_GATHER || m == ISA_DMA_SCATTER || m == ISA_DMA_SCATTER_ADD ||
	       m == ISA_DMA_GATHER_ADD;
}

bool isa_dma_mode_gathers(int m)
{
	return m == ISA_DMA_GATHER || m == ISA_DMA_GATHER_ADD;
}

bool isa_dma_mode_rmw(int m)
{
	return m == ISA_DMA_SCATTER_ADD || m == ISA_DMA_ADD || m == ISA_DMA_GATHER_ADD;
}

const char *isa_dma_mode_name(int m)
{
	return m >= 0 && m < ISA_NUM_DMA_MODES ? dma_mode_names[m] : "?";
}

int isa_dma_mode_from_name(const char *s)
{
	for (int i = 0; i < ISA_NUM_DMA_MODES; i++)
		if (strcmp(s, dma_mode_names[i]) == 0)
			return i;
	return -1;
}

/* -------------------------------------------------------- cost classes */

static const struct { const char *name, *formula; } cost_classes[ISA_NUM_COST_CLASSES] = {
#define ISA_COST(name, formula) [ISA_COST_##name] = { #name, formula },
#include "neuronsim/isa_cost.def"
#undef ISA_COST
};

const char *isa_cost_class_name(int c)
{
	return c >= 0 && c < ISA_NUM_COST_CLASSES ? cost_classes[c].name : NULL;
}

const char *isa_cost_class_formula(int c)
{
	return c >= 0 && c < ISA_NUM_COST_CLASSES ? cost_classes[c].formula : NULL;
}

/* -------------------------------------------------------------- status */

static const char *const status_names[ISA_NUM_STATUS] = {
	[ISA_OK] = "OK",
#define ISA_ERR(name, summary) [ISA_E_##name] = #name,
#include "neuronsim/isa_errors.def"
#undef ISA_ERR
};

static const char *const status_summaries[ISA_NUM_STATUS] = {
	[ISA_OK] = "success",
#define ISA_ERR(name, summary) [ISA_E_##name] = summary,
#include "neuronsim/isa_errors.def"
#undef ISA_ERR
};

const char *isa_status_name(int s)
{
	return s >= 0 && s < ISA_NUM_STATUS ? status_names[s] : "UNKNOWN";
}

const char *isa_status_summary(int s)
{
	return s >= 0 && s < ISA_NUM_STATUS ? status_summaries[s] : "unknown status";
}
