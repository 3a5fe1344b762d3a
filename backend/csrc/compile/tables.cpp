// compile/tables.cpp -- what the graph compiler's Python side
// (torch_neuronsim/fusion.py, graph.py, records.py) reads from the library
// instead of restating: the fused program's step kinds and limits, the
// ATen ops that are one activation, the activations a matmul epilogue
// applies, and the records' field layouts.  Each is the table the C++ side
// itself uses.
#include "runtime/program.h"
#include "compile/records.h"
#include "compile/tables.h"

#include <ATen/core/Dict.h>
#include <torch/library.h>

#include <string>
#include <vector>

namespace neuron {

// what the fuser may hand matmul_epilogue, from the table it checks against
std::vector<int64_t> epilogue_activations()
{
#define NEURON_EPILOGUE_CODE(a) ISA_ACT_##a,
	return { NEURON_EPILOGUE_ACTS(NEURON_EPILOGUE_CODE) };
#undef NEURON_EPILOGUE_CODE
}

// the fused program's step kinds and limits (programs.h), by name: what the
// Python fuser builds its steps with, never restated there
c10::Dict<std::string, int64_t> fused_constants()
{
	c10::Dict<std::string, int64_t> d;
	d.insert("TT", NK_FUSED_TT);
	d.insert("TS", NK_FUSED_TS);
	d.insert("ACT", NK_FUSED_ACT);
	d.insert("MAX_IN", NK_FUSED_MAX_IN);
	d.insert("MAX_STEPS", NK_FUSED_MAX_STEPS);
	d.insert("FULL", NK_FUSED_FULL);
	d.insert("ROW", NK_FUSED_ROW);
	d.insert("PERIOD", NK_FUSED_PERIOD);
	// the ISA dtype a cast step rounds to, by the Python name of torch's dtype
	static const std::pair<at::ScalarType, const char *> floats[] = {
		{ at::kFloat, "float32" }, { at::kBFloat16, "bfloat16" }, { at::kHalf, "float16" } };
	for (const auto &[t, name] : floats)
		d.insert(std::string("dtype:") + name, isa_dtype_of(t));
	return d;
}

// the ATen ops that are one ScalarE activation of their input (at scale 1;
// neg is the identity at -1): aten name -> activation, the table the eager
// kernels are registered from (aten/pointwise/activations.def)
c10::Dict<std::string, int64_t> unary_activations()
{
	c10::Dict<std::string, int64_t> d;
#define NEURON_ACT_ENTRY(name, act, scale) \
	if ((scale) == 1.0f)               \
		d.insert(#name, act);
	NEURON_UNARY_ACTS(NEURON_ACT_ENTRY)
#undef NEURON_ACT_ENTRY
	return d;
}

// every record's fields in order, by record name: what the Python side
// packs its lists by (torch_neuronsim/records.py)
c10::Dict<std::string, std::vector<std::string>> records()
{
	c10::Dict<std::string, std::vector<std::string>> d;
#define NEURON_REC_NAME(f) #f,
#define NEURON_REC_ENTRY(rec, LIST) d.insert(#rec, std::vector<std::string>{ LIST(NEURON_REC_NAME) });
	NEURON_RECORDS(NEURON_REC_ENTRY)
#undef NEURON_REC_ENTRY
#undef NEURON_REC_NAME
	return d;
}

}  // namespace neuron

// the tables, each an op of no arguments: (name, what it returns)
#define NEURON_COMPILER_TABLES(X)                  \
	X(fused_constants, "Dict(str, int)")       \
	X(unary_activations, "Dict(str, int)")     \
	X(epilogue_activations, "int[]")           \
	X(records, "Dict(str, str[])")

TORCH_LIBRARY_FRAGMENT(neuronsim, m)
{
#define NEURON_TABLE_DEF(name, returns) m.def(#name "() -> " returns, &neuron::name);
	NEURON_COMPILER_TABLES(NEURON_TABLE_DEF)
#undef NEURON_TABLE_DEF
}
