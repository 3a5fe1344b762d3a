// aten/pointwise/ternary.cpp -- the three-operand pointwise ops: addcmul,
// addcdiv and lerp in every form (torch.optim's foreach paths reach the out=
// forms per tensor): one fused chain program (nk_chain) when the operands
// are same-shaped and contiguous, else composed from the native kernels in
// CPU's order of operations, so fp32 results round as CPU's do.
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/composite.h"
#include "ops.def"

#include <ATen/WrapDimUtils.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/where.h>
#include <torch/library.h>
#include <cmath>
#include <limits>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/add.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/equal_ops.h>
#include <ATen/ops/std_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/expm1_ops.h>
#include <ATen/ops/log1p_ops.h>
#include <ATen/ops/softplus_ops.h>
#include <ATen/ops/log_sigmoid_backward_ops.h>
#include <ATen/ops/log_sigmoid_forward_ops.h>

namespace neuron {

namespace {

at::Tensor addcmul(const at::Tensor &self, const at::Tensor &t1, const at::Tensor &t2, const at::Scalar &value)
{
	if (is_float_neuron(self) && is_float_neuron(t1) && is_float_neuron(t2) && !value.isComplex()) {
		at::Tensor p = t1.mul(t2);
		if (!value.equal(1))
			p = p.mul(value);
		return self.add(p);
	}
	return declined;
}

// CPU's two-sided form: w < 0.5 ? a + w (b - a) : b - (b - a)(1 - w)
at::Tensor lerp_scalar(const at::Tensor &a, const at::Tensor &b, const at::Scalar &w)
{
	if (is_float_neuron(a) && is_float_neuron(b) && !w.isComplex()) {
		double v = w.toDouble();
		at::Tensor d = b.sub(a);
		return v < 0.5 ? a.add(d.mul(v)) : b.sub(d.mul(1.0 - v));
	}
	return declined;
}

at::Tensor lerp_tensor(const at::Tensor &a, const at::Tensor &b, const at::Tensor &w)
{
	if (is_float_neuron(a) && is_float_neuron(b) && is_float_neuron(w)) {
		at::Tensor d = b.sub(a);
		at::Tensor one_minus = w.mul(-1.0).add(1.0);
		return at::where(w.lt(0.5), a.add(d.mul(w)), b.sub(d.mul(one_minus)));
	}
	return declined;
}

// One fused program (nk_chain) over same-shaped contiguous inputs of one
// float dtype, writing `out` when given (the in-place / out= destination,
// when it is exactly the result's layout) or a new tensor: an optimizer's
// per-tensor step reads each operand and writes its result once, as a device
// kernel does, instead of one program per arithmetic op plus a copy.  An
// undefined result: the operands do not fit (the caller composes).
at::Tensor run_chain(const char *name, nk_chain c, std::initializer_list<const at::Tensor *> ins,
		     const at::Tensor *out)
{
	const at::Tensor &a = **ins.begin();
	int dt = isa_dtype_of(a.scalar_type());
	if (!is_float_neuron(a) || dt == ISA_DT_INVALID || a.numel() == 0)
		return {};
	for (const at::Tensor *t : ins)
		if (!t->is_privateuseone() || t->device() != a.device() || t->scalar_type() != a.scalar_type() ||
		    !t->sizes().equals(a.sizes()) || !t->is_contiguous())
			return {};
	at::Tensor r;
	if (out) {
		if (!out->is_privateuseone() || out->device() != a.device() || out->scalar_type() != a.scalar_type() ||
		    !out->sizes().equals(a.sizes()) || !out->is_contiguous())
			return {};
		for (const at::Tensor *t : ins)
			if (!no_partial_overlap(*out, *t))
				return {};
		r = *out;
	} else {
		r = at::empty(a.sizes(), a.options());
	}
	c.dtype = dt;
	c.n = (uint64_t)a.numel();
	c.nin = (unsigned)ins.size();
	int dev = a.device().index();
	Program m = cached_program("chain", c, dev, nk_chain_program);
	static const char *names[3] = { "in0", "in1", "in2" };
	std::vector<Binding> in;
	int i = 0;
	for (const at::Tensor *t : ins)
		in.push_back({ names[i++], t });
	run_program(m, dev, name, in, { { "out", &r } });
	return r;
}

// the chain steps: value <alu> input k (or input k <alu> value), value <alu> imm
void step_tt(nk_chain &c, int alu, int input, bool input_first = false)
{
	unsigned k = c.nsteps++;
	c.alu[k] = alu;
	c.input[k] = input;
	c.imm[k] = 0.0f;
	c.input_first[k] = input_first;
}

void step_ts(nk_chain &c, int alu, float imm)
{
	unsigned k = c.nsteps++;
	c.alu[k] = alu;
	c.input[k] = -1;
	c.imm[k] = imm;
	c.input_first[k] = false;
}

// self + value * t1 / t2 (inputs self, t1, t2), in CPU's order
nk_chain addc_chain(int alu, const at::Scalar &value)
{
	nk_chain c{};
	c.first = 1;
	if (!value.equal(1))
		step_ts(c, ISA_ALU_multiply, (float)value.toDouble());
	step_tt(c, alu, 2);
	step_tt(c, ISA_ALU_add, 0, true);
	return c;
}

// CPU's two-sided lerp (inputs a, b): w < 0.5 ? a + w (b - a) : b - (b - a)(1 - w)
nk_chain lerp_chain(double w)
{
	nk_chain c{};
	c.first = 1;
	step_tt(c, ISA_ALU_subtract, 0);
	if (w < 0.5) {
		step_ts(c, ISA_ALU_multiply, (float)w);
		step_tt(c, ISA_ALU_add, 0, true);
	} else {
		step_ts(c, ISA_ALU_multiply, (float)(1.0 - w));
		step_tt(c, ISA_ALU_subtract, 1, true);
	}
	return c;
}

// self + value * t1 / t2 (or * t2) from separate ops, every step in the
// operands' common dtype as CPU's one kernel computes it (t1 * value in a
// bf16 t1's own dtype rounded it: mixed-dtype addcdiv was off by 2e-3)
at::Tensor addc_composed(int alu, const at::Tensor &self, const at::Tensor &t1, const at::Tensor &t2,
			 const at::Scalar &value)
{
	at::ScalarType rt = at::native::result_type({ self, t1, t2 });
	at::Tensor a = self.to(rt), x = t1.to(rt), y = t2.to(rt);
	x = value.equal(1) ? x : x.mul(value);
	return a.add(alu == ISA_ALU_divide ? x.div(y) : x.mul(y));
}

// self + value * t1 / t2 and self + value * t1 * t2, left to right as CPU's
// kernels evaluate them
// addcdiv.out / addcmul.out: one fused program into out, else composed
// (alu: divide or multiply) and written back
at::Tensor &addc_out(const char *name, int alu, const at::Tensor &self, const at::Tensor &t1, const at::Tensor &t2,
		     const at::Scalar &value, at::Tensor &out)
{
	if (run_chain(name, addc_chain(alu, value), { &self, &t1, &t2 }, &out).defined())
		return out;
	return store(out, addc_composed(alu, self, t1, t2, value)) ? out : declined;
}

at::Tensor &addcdiv_out(const at::Tensor &self, const at::Tensor &t1, const at::Tensor &t2, const at::Scalar &value,
			at::Tensor &out)
{
	if (is_float_neuron(self) && is_float_neuron(t1) && is_float_neuron(t2) && !value.isComplex() && is_float_neuron(out) &&
	    at::isFloatingType(at::result_type(t1, t2)))
		return addc_out("aten::addcdiv", ISA_ALU_divide, self, t1, t2, value, out);
	return declined;
}

at::Tensor addcdiv(const at::Tensor &self, const at::Tensor &t1, const at::Tensor &t2, const at::Scalar &value)
{
	if (is_float_neuron(self) && is_float_neuron(t1) && is_float_neuron(t2) && !value.isComplex() &&
	    at::isFloatingType(at::result_type(t1, t2))) {
		at::Tensor r = run_chain("aten::addcdiv", addc_chain(ISA_ALU_divide, value), { &self, &t1, &t2 }, nullptr);
		return r.defined() ? r : addc_composed(ISA_ALU_divide, self, t1, t2, value);
	}
	return declined;
}

at::Tensor &addcmul_out(const at::Tensor &self, const at::Tensor &t1, const at::Tensor &t2, const at::Scalar &value,
			at::Tensor &out)
{
	if (is_float_neuron(self) && is_float_neuron(t1) && is_float_neuron(t2) && !value.isComplex() && is_float_neuron(out))
		return addc_out("aten::addcmul", ISA_ALU_multiply, self, t1, t2, value, out);
	return declined;
}

at::Tensor &lerp_scalar_out(const at::Tensor &a, const at::Tensor &b, const at::Scalar &w, at::Tensor &out)
{
	if (is_float_neuron(a) && is_float_neuron(b) && !w.isComplex() && is_float_neuron(out) &&
	    (run_chain("aten::lerp", lerp_chain(w.toDouble()), { &a, &b }, &out).defined() || store(out, a.lerp(b, w))))
		return out;
	return declined;
}

at::Tensor &lerp_tensor_out(const at::Tensor &a, const at::Tensor &b, const at::Tensor &w, at::Tensor &out)
{
	if (is_float_neuron(a) && is_float_neuron(b) && is_float_neuron(w) && is_float_neuron(out) && store(out, a.lerp(b, w)))
		return out;
	return declined;
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_TERNARY)

}  // namespace neuron
