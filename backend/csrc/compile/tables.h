// compile/tables.h -- tables the graph compiler's C++ side checks against
// and its Python side reads through compile/tables.cpp.
#pragma once

#include "aten/pointwise/activations.def"

// the activations matmul_epilogue applies as the product leaves PSUM (its
// eager equivalent in compile/fused.cpp covers each)
#define NEURON_EPILOGUE_ACTS(X) X(identity) X(relu) X(gelu) X(gelu_tanh) X(silu) X(sigmoid) X(tanh)
