// compile/records.h -- the records the graph compiler's Python side
// (torch_neuronsim/graph.py, fusion.py) and its library ops exchange as
// flat int64 lists, declared once: each record's fields in order.  The C++
// side indexes a record by these enums; Python reads the same layout from
// the library (neuronsim::records) and packs by field name, and checks at
// import that it fills exactly the library's fields -- so a field changed
// on one side fails there, never shifts the values after it.
//
// A field marked "rank values" holds that many int64s; such fields come
// last in their record.
#pragma once

#define NEURON_REC_FUSED_STEP(F) F(kind) F(op) F(op2) F(a) F(b) F(reverse) F(dtype)   /* a fused_pointwise step */
#define NEURON_REC_FUSED_IMM(F) F(imm) F(imm2)                               /* its immediates (floats) */
/* (a step's dtype: the ISA dtype a cast rounds its value to, 0: kept fp32) */
#define NEURON_REC_IN_SPAN(F) F(lo) F(hi)                       /* a graph input's device bytes at capture */
#define NEURON_REC_OUT_SPAN(F) F(lo) F(hi) F(element_size)      /* a graph output's */
#define NEURON_REC_OUT_META(F) F(rank) F(sizes) F(strides)   /* sizes, strides: rank values (the dtype: ScalarType[]) */
#define NEURON_REC_PLAN_REGION(F) F(kind) F(bytes) F(input)     /* a linked program's memory region */
#define NEURON_REC_PLAN_OUTPUT(F) F(region) F(offset)           /* where a graph output lives */

#define NEURON_RECORDS(R)                             \
	R(fused_step, NEURON_REC_FUSED_STEP)          \
	R(fused_imm, NEURON_REC_FUSED_IMM)            \
	R(in_span, NEURON_REC_IN_SPAN)                \
	R(out_span, NEURON_REC_OUT_SPAN)              \
	R(out_meta, NEURON_REC_OUT_META)              \
	R(plan_region, NEURON_REC_PLAN_REGION)        \
	R(plan_output, NEURON_REC_PLAN_OUTPUT)

namespace neuron::rec {
#define NEURON_REC_FIELD(f) f,
#define NEURON_REC_ENUM(rec, LIST) \
	namespace rec {            \
	enum : int { LIST(NEURON_REC_FIELD) fields };   /* fields: the record's width */ \
	}
NEURON_RECORDS(NEURON_REC_ENUM)
#undef NEURON_REC_ENUM
#undef NEURON_REC_FIELD
// the variable-length fields of out_meta: sizes, then strides, rank each
static_assert(out_meta::sizes == out_meta::rank + 1 && out_meta::strides == out_meta::sizes + 1 &&
	      out_meta::fields == out_meta::strides + 1);
}  // namespace neuron::rec
