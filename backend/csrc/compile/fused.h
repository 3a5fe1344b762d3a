// compile/fused.h -- running one fused pointwise region (programs/fused.c).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "runtime/program.h"

namespace neuron {

// The steps of a region (programs.h's nk_fused), added one by one; each
// returns the operand index of its result for later steps.
struct FusedRegion {
	nk_fused f{};
	explicit FusedRegion(unsigned inputs) { f.nin = inputs; }
	int ts(int a, int op, float imm, int op2 = ISA_ALU_bypass, float imm2 = 0.0f);   // (a op imm) op2 imm2
	int tt(int a, int op, int b);                                                   // a op b
	int act(int a, int func, float scale = 1.0f, float bias = 0.0f);                // func(scale a + bias)
};

// How an input of shape `in` lines up with an output of shape `out`:
// NK_FUSED_FULL, _ROW or _PERIOD (*period: its elements), or -1.
int fused_input_mode(at::IntArrayRef in, at::IntArrayRef out, uint64_t *period);

// out = the region over `inputs` (float tensors of any float dtype, each
// out's shape or broadcast to it as fused_input_mode allows): one program,
// intermediates in SBUF at fp32.  out may be one of the inputs (an update in
// place: each tile is read before it is written).
void run_fused(const char *op, FusedRegion &r, const std::vector<const at::Tensor *> &inputs, at::Tensor &out);

}  // namespace neuron
