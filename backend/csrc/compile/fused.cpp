// compile/fused.cpp -- the graph compiler's fused ops: fused_pointwise, its
// elementwise regions (programs/fused.c), and matmul_epilogue, a matmul whose
// PSUM evacuation applies an activation (programs/matmul.c).
// The compiler's FX pass (torch_neuronsim/fusion.py) replaces a chain of
// pointwise nodes by one call; the region's steps come as fused_step and
// fused_imm records (compile/records.h).
#include "compile/fused.h"
#include "compile/records.h"
#include "compile/tables.h"
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/linalg/matmul.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <ATen/ExpandUtils.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/tanh.h>

namespace neuron {

// the next step's slot, of `kind` on operand a; its index as an operand
static unsigned next_step(nk_fused &f, int kind, int a)
{
	TORCH_CHECK(f.nsteps < NK_FUSED_MAX_STEPS, "neuron: a fused region of more than ", NK_FUSED_MAX_STEPS, " steps");
	unsigned k = f.nsteps++;
	f.kind[k] = kind;
	f.a[k] = a;
	return k;
}

int FusedRegion::ts(int a, int op, float imm, int op2, float imm2)
{
	unsigned k = next_step(f, NK_FUSED_TS, a);
	f.op[k] = op;
	f.imm[k] = imm;
	f.op2[k] = op2;
	f.imm2[k] = imm2;
	return (int)(f.nin + k);
}

int FusedRegion::tt(int a, int op, int b)
{
	unsigned k = next_step(f, NK_FUSED_TT, a);
	f.op[k] = op;
	f.b[k] = b;
	return (int)(f.nin + k);
}

int FusedRegion::act(int a, int func, float scale, float bias)
{
	unsigned k = next_step(f, NK_FUSED_ACT, a);
	f.op[k] = func;
	f.imm[k] = scale;
	f.imm2[k] = bias;
	return (int)(f.nin + k);
}

// How an input of shape `in` lines up with the output (programs.h): FULL
// (the same shape), ROW (the output's shape with a last dim of 1), PERIOD
// (ones, then the output's trailing dims, the last included: *period is
// their product), or -1 when it is none of them.  The fuser asks the same
// (fused_input_mode) before it takes a node.
int fused_input_mode(at::IntArrayRef in, at::IntArrayRef out, uint64_t *period)
{
	const size_t nd = out.size();
	if (in.size() > nd)
		return -1;
	std::vector<int64_t> s(nd - in.size(), 1);
	s.insert(s.end(), in.begin(), in.end());
	if (at::IntArrayRef(s) == out)
		return NK_FUSED_FULL;
	if (nd == 0)
		return -1;
	bool row = s[nd - 1] == 1;
	for (size_t i = 0; i + 1 < nd && row; i++)
		row = s[i] == out[i];
	if (row)
		return NK_FUSED_ROW;
	size_t j = 0;
	while (j < nd && s[j] == 1 && out[j] != 1)
		j++;
	uint64_t p = 1;
	for (size_t i = j; i < nd; i++) {
		if (s[i] != out[i])
			return -1;
		p *= (uint64_t)out[i];
	}
	if (j == nd)
		return -1;
	if (period)
		*period = p;
	return NK_FUSED_PERIOD;
}

void run_fused(const char *op, FusedRegion &r, const std::vector<const at::Tensor *> &inputs, at::Tensor &out)
{
	static const char *names[NK_FUSED_MAX_IN] = { "in0", "in1", "in2", "in3", "in4", "in5", "in6", "in7" };
	TORCH_CHECK(!inputs.empty() && inputs.size() == r.f.nin && inputs.size() <= NK_FUSED_MAX_IN && r.f.nsteps,
		    "neuron: a fused region of ", inputs.size(), " inputs and ", r.f.nsteps, " steps");
	bool broadcast = false;
	for (size_t i = 0; i < inputs.size(); i++) {
		const at::Tensor *t = inputs[i];
		uint64_t period = 0;
		int mode = fused_input_mode(t->sizes(), out.sizes(), &period);
		TORCH_CHECK(is_float_neuron(*t) && t->device() == out.device() && mode >= 0,
			    "neuron: a fused region's input ", i, " (", t->scalar_type(), " ", t->sizes(),
			    ") is not a float tensor on ", out.device(), " its output ", out.sizes(), " takes");
		r.f.in_dtype[i] = isa_dtype_of(t->scalar_type());
		r.f.in_mode[i] = mode;
		r.f.in_period[i] = mode == NK_FUSED_PERIOD ? period : 0;
		broadcast |= mode != NK_FUSED_FULL;
	}
	r.f.dtype = isa_dtype_of(out.scalar_type());
	r.f.n = (uint64_t)out.numel();
	r.f.cols = broadcast ? (uint64_t)out.sizes().back() : 0;
	if (!r.f.n)
		return;
	std::vector<at::Tensor> held;
	std::vector<Binding> in;
	held.reserve(inputs.size());
	for (const at::Tensor *t : inputs)
		held.push_back(materialize(*t, t->sizes(), t->scalar_type()));
	for (size_t i = 0; i < held.size(); i++)
		in.emplace_back(names[i], &held[i]);
	int dev = out.device().index();
	Program m = cached_program("fused", r.f, dev, nk_fused_program);
	run_program(m, dev, op, in, { { "out", &out } });
}

namespace {

bool is_epilogue_act(int64_t act)
{
#define NEURON_EPILOGUE_IS(a) act == ISA_ACT_##a ||
	return NEURON_EPILOGUE_ACTS(NEURON_EPILOGUE_IS) false;
#undef NEURON_EPILOGUE_IS
}

// the fuser's region: inputs, its steps as records, the output's dtype (its
// shape is the inputs' broadcast: every step's is)
at::Tensor fused_pointwise(at::TensorList inputs, at::IntArrayRef spec, at::ArrayRef<double> imms, at::ScalarType dtype)
{
	TORCH_CHECK(!inputs.empty() && inputs.size() <= NK_FUSED_MAX_IN, "neuronsim.fused_pointwise: ",
		    inputs.size(), " inputs (1..", NK_FUSED_MAX_IN, ")");
	const size_t width = rec::fused_step::fields, iwidth = rec::fused_imm::fields;
	TORCH_CHECK(spec.size() % width == 0 && spec.size() / width >= 1 && spec.size() / width <= NK_FUSED_MAX_STEPS &&
			    imms.size() == spec.size() / width * iwidth,
		    "neuronsim.fused_pointwise: steps are fused_step records of ", width, " integers and fused_imm records of ",
		    iwidth, " immediates (1..", NK_FUSED_MAX_STEPS, " steps)");
	const at::Tensor &first = inputs[0];
	TORCH_CHECK(is_float_neuron(first) && isa_dtype_of(dtype) != ISA_DT_INVALID && at::isFloatingType(dtype),
		    "neuronsim.fused_pointwise: float neuron tensors only, got ", first.scalar_type(), " on ",
		    first.device(), " for a ", dtype, " result");
	at::DimVector size(first.sizes());
	for (const at::Tensor &t : inputs)
		size = at::infer_size_dimvector(size, t.sizes());
	FusedRegion region((unsigned)inputs.size());
	nk_fused &f = region.f;
	f.nsteps = (unsigned)(spec.size() / width);
	for (unsigned k = 0; k < f.nsteps; k++) {
		const int64_t *r = spec.data() + width * k;
		const double *im = imms.data() + iwidth * k;
		f.kind[k] = (int)r[rec::fused_step::kind];
		f.op[k] = (int)r[rec::fused_step::op];
		f.op2[k] = (int)r[rec::fused_step::op2];
		f.a[k] = (int)r[rec::fused_step::a];
		f.b[k] = (int)r[rec::fused_step::b];
		f.reverse[k] = r[rec::fused_step::reverse] != 0;
		f.sdt[k] = (int)r[rec::fused_step::dtype];
		f.imm[k] = (float)im[rec::fused_imm::imm];
		f.imm2[k] = (float)im[rec::fused_imm::imm2];
	}
	at::Tensor out = at::empty(size, first.options().dtype(dtype));
	std::vector<const at::Tensor *> ins;
	for (const at::Tensor &t : inputs)
		ins.push_back(&t);
	run_fused("neuronsim::fused_pointwise", region, ins, out);
	return out;
}

// the fuser's question: how an input of shape `in` lines up with `out`
int64_t fused_input_mode_op(at::IntArrayRef in, at::IntArrayRef out)
{
	return fused_input_mode(in, out, nullptr);
}

// act(a @ b + bias): one matmul program whose PSUM evacuation applies the
// activation; operands the matmul kernel does not take are composed of
// eager ops instead (same values)
at::Tensor matmul_epilogue(const at::Tensor &a, const at::Tensor &b, const std::optional<at::Tensor> &bias,
			   int64_t act, const std::optional<at::Tensor> &residual)
{
	TORCH_CHECK(is_epilogue_act(act), "neuronsim.matmul_epilogue: activation ", act,
		    " is not one the epilogue applies");
	TORCH_CHECK(!residual || act == ISA_ACT_identity,
		    "neuronsim.matmul_epilogue: a residual add or an activation, not both");
	at::Tensor r = matmul_act(a, b, bias ? &*bias : nullptr, (int)act, residual ? &*residual : nullptr);
	if (r.defined())
		return r;
	at::Tensor p = bias ? at::addmm(*bias, a, b) : at::mm(a, b);
	if (residual)
		return at::add(p, *residual);
	switch (act) {
	case ISA_ACT_relu: return at::relu(p);
	case ISA_ACT_gelu: return at::gelu(p);
	case ISA_ACT_gelu_tanh: return at::gelu(p, "tanh");
	case ISA_ACT_silu: return at::silu(p);
	case ISA_ACT_sigmoid: return at::sigmoid(p);
	case ISA_ACT_tanh: return at::tanh(p);
	default: return p;
	}
}

}  // namespace

}  // namespace neuron

TORCH_LIBRARY_FRAGMENT(neuronsim, m)
{
	m.def("fused_pointwise(Tensor[] inputs, int[] spec, float[] imms, ScalarType dtype) -> Tensor");
	m.def("fused_input_mode(int[] input, int[] output) -> int", &neuron::fused_input_mode_op);
	m.def("matmul_epilogue(Tensor a, Tensor b, Tensor? bias, int act, Tensor? residual=None) -> Tensor");
}

TORCH_LIBRARY_IMPL(neuronsim, PrivateUse1, m)
{
	m.impl("fused_pointwise", &neuron::fused_pointwise);
	m.impl("matmul_epilogue", &neuron::matmul_epilogue);
}
