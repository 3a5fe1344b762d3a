// neuron_fused.cpp -- the graph compiler's fused ops: fused_pointwise, its
// elementwise regions (kernels/fused.c), and matmul_epilogue, a matmul whose
// PSUM evacuation applies an activation (kernels/matmul.c).
// The compiler's FX pass (torch_neuronsim/fusion.py) replaces a chain of
// pointwise nodes by one call; the region's steps come as integer rows
// (kind, op, op2, a, b, reverse) and immediate pairs.
#include "neuron_kernels.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

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
namespace {

at::Tensor fused_pointwise(at::TensorList inputs, at::IntArrayRef spec, at::ArrayRef<double> imms)
{
	static const char *names[NK_FUSED_MAX_IN] = { "in0", "in1", "in2", "in3", "in4", "in5", "in6", "in7" };
	TORCH_CHECK(!inputs.empty() && inputs.size() <= NK_FUSED_MAX_IN, "neuronsim.fused_pointwise: ",
		    inputs.size(), " inputs (1..", NK_FUSED_MAX_IN, ")");
	TORCH_CHECK(spec.size() % 6 == 0 && spec.size() / 6 >= 1 && spec.size() / 6 <= NK_FUSED_MAX_STEPS &&
			    imms.size() == spec.size() / 3,
		    "neuronsim.fused_pointwise: steps are rows of 6 integers and 2 immediates (1..", NK_FUSED_MAX_STEPS,
		    " steps)");
	const at::Tensor &first = inputs[0];
	TORCH_CHECK(is_float_neuron(first), "neuronsim.fused_pointwise: float neuron tensors only, got ",
		    first.scalar_type(), " on ", first.device());
	for (const at::Tensor &t : inputs)
		TORCH_CHECK(is_float_neuron(t) && t.scalar_type() == first.scalar_type() && t.sizes() == first.sizes() &&
				    t.device() == first.device(),
			    "neuronsim.fused_pointwise: inputs differ in dtype, shape or device");
	nk_fused f{};
	f.dtype = isa_dtype_of(first.scalar_type());
	f.n = (uint64_t)first.numel();
	f.nin = (unsigned)inputs.size();
	f.nsteps = (unsigned)(spec.size() / 6);
	for (unsigned k = 0; k < f.nsteps; k++) {
		const int64_t *r = spec.data() + 6 * k;
		f.kind[k] = (int)r[0];
		f.op[k] = (int)r[1];
		f.op2[k] = (int)r[2];
		f.a[k] = (int)r[3];
		f.b[k] = (int)r[4];
		f.reverse[k] = r[5] != 0;
		f.imm[k] = (float)imms[2 * k];
		f.imm2[k] = (float)imms[2 * k + 1];
	}
	at::Tensor out = at::empty(first.sizes(), first.options());
	if (!f.n)
		return out;
	std::vector<at::Tensor> held;
	std::vector<Binding> in;
	held.reserve(inputs.size());
	for (size_t i = 0; i < inputs.size(); i++)
		held.push_back(materialize(inputs[i], inputs[i].sizes(), inputs[i].scalar_type()));
	for (size_t i = 0; i < held.size(); i++)
		in.emplace_back(names[i], &held[i]);
	int dev = first.device().index();
	Program m = cached_program("fused", f, dev, nk_fused_program);
	run_program(m, dev, "neuronsim::fused_pointwise", in, { { "out", &out } });
	return out;
}

// act(a @ b + bias): one matmul program whose PSUM evacuation applies the
// activation; operands the matmul kernel does not take are composed of
// eager ops instead (same values)
at::Tensor matmul_epilogue(const at::Tensor &a, const at::Tensor &b, const std::optional<at::Tensor> &bias,
			   int64_t act, const std::optional<at::Tensor> &residual)
{
	TORCH_CHECK(act == ISA_ACT_identity || act == ISA_ACT_relu || act == ISA_ACT_gelu || act == ISA_ACT_gelu_tanh ||
			    act == ISA_ACT_silu || act == ISA_ACT_sigmoid || act == ISA_ACT_tanh,
		    "neuronsim.matmul_epilogue: activation ", act, " is not one the epilogue applies");
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

// the fused program's step kinds and limits (kernels.h), by name: what the
// Python fuser builds its steps with, never restated there
c10::Dict<std::string, int64_t> fused_constants()
{
	c10::Dict<std::string, int64_t> d;
	d.insert("TT", NK_FUSED_TT);
	d.insert("TS", NK_FUSED_TS);
	d.insert("ACT", NK_FUSED_ACT);
	d.insert("MAX_IN", NK_FUSED_MAX_IN);
	d.insert("MAX_STEPS", NK_FUSED_MAX_STEPS);
	return d;
}

}  // namespace neuron

TORCH_LIBRARY_FRAGMENT(neuronsim, m)
{
	m.def("fused_constants() -> Dict(str, int)", &neuron::fused_constants);
	m.def("fused_pointwise(Tensor[] inputs, int[] spec, float[] imms) -> Tensor");
	m.def("matmul_epilogue(Tensor a, Tensor b, Tensor? bias, int act, Tensor? residual=None) -> Tensor");
}

TORCH_LIBRARY_IMPL(neuronsim, PrivateUse1, m)
{
	m.impl("fused_pointwise", &neuron::fused_pointwise);
	m.impl("matmul_epilogue", &neuron::matmul_epilogue);
}
