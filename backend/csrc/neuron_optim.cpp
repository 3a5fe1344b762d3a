// neuron_optim.cpp -- what optimizers and their utilities run on the device:
// the pointwise ops of the foreach paths (addcdiv, addcmul and lerp in their
// out= forms, which torch.optim's _foreach_* calls reach per tensor),
// linalg_vector_norm (clip_grad_norm_, foreach norm), the fused SGD / Adam /
// AdamW steps, and AMP's gradient unscaling and loss-scale update.  Each is
// composed from the native kernels, in the order of operations CPU
// PyTorch's kernels use, so fp32 results round as CPU's do.
#include "neuron_kernels.h"
#include "neuron_ops.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale_ops.h>
#include <ATen/ops/_amp_update_scale_ops.h>
#include <ATen/ops/_fused_adam_ops.h>
#include <ATen/ops/_fused_adamw_ops.h>
#include <ATen/ops/_fused_sgd_ops.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/linalg_vector_norm_ops.h>
#include <ATen/ops/norm_ops.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/renorm_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

namespace neuron {

namespace {

// r written into out (write_result): false when out cannot hold r's dtype
// on the device
bool store(at::Tensor &out, const at::Tensor &r)
{
	if (!out.is_privateuseone() || !c10::canCast(r.scalar_type(), out.scalar_type()))
		return false;
	write_result(out, r);
	return true;
}

// ---- pointwise ops of the foreach paths -------------------------------------

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

// ---- norms -------------------------------------------------------------------

// ||x||_ord over `dim` (all when empty): 2 -> sqrt(sum x^2), 1 -> sum |x|,
// inf -> max |x|, -inf -> min |x|, 0 -> count of nonzeros, else
// (sum |x|^p)^(1/p); at fp32 for half inputs, the result in `dtype`
at::Tensor vector_norm(const at::Tensor &self, const at::Scalar &ord, at::OptionalIntArrayRef dim, bool keepdim,
		       std::optional<at::ScalarType> dtype)
{
	at::ScalarType odt = dtype.value_or(self.scalar_type());
	if (!is_float_neuron(self) || ord.isComplex() || isa_dtype_of(odt) == ISA_DT_INVALID || self.numel() == 0)
		return {};
	double p = ord.toDouble();
	at::Tensor x = self.to(at::kFloat);
	std::vector<int64_t> dims;
	if (dim)
		dims.assign(dim->begin(), dim->end());
	at::Tensor r;
	auto sum = [&](const at::Tensor &t) { return t.sum(dims, keepdim); };
	if (p == 2.0)
		r = sum(x.mul(x)).sqrt();
	else if (p == 1.0)
		r = sum(x.abs());
	else if (std::isinf(p))
		r = p > 0 ? x.abs().amax(dims, keepdim) : x.abs().amin(dims, keepdim);
	else if (p == 0.0)
		r = sum(x.ne(0).to(at::kFloat));
	else
		r = sum(x.abs().pow(p)).pow(1.0 / p);
	return r.to(odt);
}

at::Tensor linalg_vector_norm(const at::Tensor &self, const at::Scalar &ord, at::OptionalIntArrayRef dim,
			      bool keepdim, std::optional<at::ScalarType> dtype)
{
	return vector_norm(self, ord, dim, keepdim, dtype);   // undefined: declined
}

at::Tensor &linalg_vector_norm_out(const at::Tensor &self, const at::Scalar &ord, at::OptionalIntArrayRef dim,
				   bool keepdim, std::optional<at::ScalarType> dtype, at::Tensor &out)
{
	at::Tensor r = vector_norm(self, ord, dim, keepdim, dtype.has_value() ? dtype : out.scalar_type());
	if (r.defined() && store(out, r))
		return out;
	return declined;
}

// at::norm's p-norm over `dim` (all when empty): the vector norm, in out's
// dtype (p absent: 2)
at::Tensor &norm_out(const at::Tensor &self, const std::optional<at::Scalar> &p, at::IntArrayRef dim, bool keepdim,
		     at::Tensor &out)
{
	at::Tensor r = vector_norm(self, p.value_or(2.0), dim, keepdim, out.scalar_type());
	if (r.defined() && store(out, r))
		return out;
	return declined;
}

at::Tensor &norm_dtype_out(const at::Tensor &self, const std::optional<at::Scalar> &p, at::IntArrayRef dim,
			   bool keepdim, at::ScalarType dtype, at::Tensor &out)
{
	at::Tensor r = vector_norm(self, p.value_or(2.0), dim, keepdim, dtype);
	if (r.defined() && store(out, r))
		return out;
	return declined;
}

// renorm: each slice along `dim` scaled to p-norm maxnorm where its norm
// exceeds it, by maxnorm / (norm + 1e-7) computed at fp32 (CPU's accumulate
// type); bad arguments decline so the fallback raises CPU's error
at::Tensor &renorm_out(const at::Tensor &self, const at::Scalar &p, int64_t dim, const at::Scalar &maxnorm,
		       at::Tensor &out)
{
	if (!is_float_neuron(self) || p.isComplex() || maxnorm.isComplex() || !(p.toDouble() > 0) ||
	    !(maxnorm.toDouble() >= 0) || self.dim() == 0 || dim < -self.dim() || dim >= self.dim())
		return declined;
	dim = dim < 0 ? dim + self.dim() : dim;
	std::vector<int64_t> others;
	for (int64_t d = 0; d < self.dim(); d++)
		if (d != dim)
			others.push_back(d);
	at::Tensor norm = vector_norm(self, p, others, true, at::kFloat);
	if (!norm.defined())
		return declined;
	double m = maxnorm.toDouble();
	at::Tensor factor = at::where(norm.gt(m), norm.add(1e-7).reciprocal().mul(m), at::ones({}, norm.options()));
	if (store(out, as_fp32(self).mul(factor).to(out.scalar_type())))
		return out;
	return declined;
}

// ---- AMP ---------------------------------------------------------------------

bool all_is_float_neuron(at::TensorList ts)
{
	for (const at::Tensor &t : ts)
		if (!is_float_neuron(t))
			return false;
	return true;
}

// found_inf = 1 if any gradient holds an inf or NaN (x - x is NaN exactly
// for those), and every gradient multiplied by inv_scale in place
bool amp_unscale(at::TensorList grads, at::Tensor &found_inf, const at::Tensor &inv_scale)
{
	if (!all_is_float_neuron(grads) || !is_float_neuron(found_inf) || !is_float_neuron(inv_scale) || found_inf.numel() != 1 ||
	    inv_scale.numel() != 1)
		return false;
	at::Tensor found = found_inf.to(at::kFloat);
	for (const at::Tensor &g : grads) {
		if (g.numel() == 0)
			continue;
		at::Tensor bad = g.sub(g).ne(0).any().to(at::kFloat);
		found = found.maximum(bad.reshape(found.sizes()));
		at::Tensor gm = g;
		TORCH_CHECK(store(gm, g.mul(inv_scale.to(g.scalar_type()))), "neuron: unscaling a gradient");
	}
	TORCH_CHECK(store(found_inf, found), "neuron: writing found_inf");
	return true;
}

// GradScaler's scale update, on the device:
//   inf/NaN found: scale *= backoff, tracker = 0
//   else: tracker + 1 reaching growth_interval -> scale *= growth, tracker = 0
at::Tensor &amp_update_scale(at::Tensor &scale, at::Tensor &tracker, const at::Tensor &found_inf, double growth,
			     double backoff, int64_t interval)
{
	if (!is_float_neuron(scale) || !is_float_neuron(found_inf) || !tracker.is_privateuseone() ||
	    tracker.scalar_type() != at::kInt || scale.numel() != 1 || tracker.numel() != 1)
		return declined;
	at::Tensor found = found_inf.to(at::kFloat).reshape(scale.sizes()).gt(0);
	at::Tensor next = tracker.to(at::kFloat).add(1.0).reshape(scale.sizes());   // exact below 2^24
	at::Tensor grow = next.ge((double)interval);
	at::Tensor s = scale.to(at::kFloat);
	at::Tensor new_scale = at::where(found, s.mul(backoff), at::where(grow, s.mul(growth), s));
	at::Tensor zero = next.mul(0.0);
	at::Tensor new_tracker = at::where(found, zero, at::where(grow, zero, next));
	TORCH_CHECK(store(tracker, new_tracker.reshape(tracker.sizes()).to(at::kInt)) && store(scale, new_scale),
		    "neuron: writing the loss scale");
	return scale;
}

// ---- fused optimizers --------------------------------------------------------

// A fused step skips everything when found_inf is set (GradScaler found an
// overflow) -- a branch the device kernel takes on its own copy of the flag,
// so it is read without a modeled transfer.
bool skipped(const std::optional<at::Tensor> &found_inf)
{
	return found_inf && found_inf->defined() && peek_cpu(*found_inf).item<double>() != 0.0;
}

// grad as the step sees it: unscaled (divided by grad_scale) and negated
// for maximize, at fp32
at::Tensor step_grad(const at::Tensor &g, bool maximize, const std::optional<at::Tensor> &grad_scale)
{
	at::Tensor r = g.to(at::kFloat);
	if (grad_scale && grad_scale->defined())
		r = r.div(grad_scale->to(at::kFloat));
	return maximize ? r.neg() : r;
}

bool lists_ok(std::initializer_list<at::TensorList> lists, size_t n)
{
	for (at::TensorList l : lists)
		if (l.size() != n || !all_is_float_neuron(l))
			return false;
	return true;
}

enum class AdamMode { original, adamw };

// One Adam / AdamW step per parameter, as CPU PyTorch's fused kernel:
//   adamw: p *= 1 - lr wd  |  adam: g += wd p
//   m = m b1 + g (1 - b1);  v = v b2 + g g (1 - b2)  (v_max = max(v_max, v) with amsgrad)
//   p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps),  bc_i = 1 - b_i^step
bool fused_adam_impl(AdamMode mode, at::TensorList params, at::TensorList grads, at::TensorList m_list,
		     at::TensorList v_list, at::TensorList vmax_list, at::TensorList steps, double lr, double beta1,
		     double beta2, double wd, double eps, bool amsgrad, bool maximize,
		     const std::optional<at::Tensor> &grad_scale, const std::optional<at::Tensor> &found_inf)
{
	size_t n = params.size();
	if (!lists_ok({ params, grads, m_list, v_list, steps }, n) || (amsgrad && !lists_ok({ vmax_list }, n)))
		return false;
	if (skipped(found_inf))
		return true;
	for (size_t i = 0; i < n; i++) {
		at::Tensor p = params[i], m = m_list[i], v = v_list[i];
		if (p.numel() == 0)
			continue;
		double step = peek_cpu(steps[i]).item<double>();   // the kernel's own read of its step count
		double bc1 = 1.0 - std::pow(beta1, step), bc2 = 1.0 - std::pow(beta2, step);
		at::Tensor g = step_grad(grads[i], maximize, grad_scale), pf = p.to(at::kFloat);
		if (wd != 0.0) {
			if (mode == AdamMode::adamw)
				pf = pf.mul(1.0 - lr * wd);
			else
				g = g.add(pf.mul(wd));
		}
		at::Tensor mf = m.to(at::kFloat).mul(beta1).add(g.mul(1.0 - beta1));
		at::Tensor vf = v.to(at::kFloat).mul(beta2).add(g.mul(g).mul(1.0 - beta2));
		at::Tensor vd = vf;
		if (amsgrad) {
			at::Tensor vmax = vmax_list[i];
			vd = vmax.to(at::kFloat).maximum(vf);
			TORCH_CHECK(store(vmax, vd), "neuron: fused adam: max_exp_avg_sq");
		}
		at::Tensor denom = vd.sqrt().div(std::sqrt(bc2)).add(eps);
		pf = pf.sub(mf.mul(lr / bc1).div(denom));
		TORCH_CHECK(store(m, mf) && store(v, vf) && store(p, pf), "neuron: fused adam: writing the state");
	}
	return true;
}

// _fused_adam_ / _fused_adamw_ (float lr)
template <AdamMode M>
bool fused_adam(at::TensorList params, at::TensorList grads, at::TensorList m, at::TensorList v,
		at::TensorList vmax, at::TensorList steps, double lr, double beta1, double beta2, double wd,
		double eps, bool amsgrad, bool maximize, const std::optional<at::Tensor> &grad_scale,
		const std::optional<at::Tensor> &found_inf)
{
	return fused_adam_impl(M, params, grads, m, v, vmax, steps, lr, beta1, beta2, wd, eps, amsgrad, maximize,
			       grad_scale, found_inf);
}

// the lr given as a tensor (capturable schedules): its value, read by the kernel
bool lr_value(const at::Tensor &lr, double &out)
{
	if (!lr.defined() || lr.numel() != 1)
		return false;
	out = (lr.is_privateuseone() ? peek_cpu(lr) : lr).item<double>();
	return true;
}

// their .tensor_lr overloads
template <AdamMode M>
bool fused_adam_tlr(at::TensorList params, at::TensorList grads, at::TensorList m, at::TensorList v,
		    at::TensorList vmax, at::TensorList steps, const at::Tensor &lr, double beta1, double beta2,
		    double wd, double eps, bool amsgrad, bool maximize, const std::optional<at::Tensor> &grad_scale,
		    const std::optional<at::Tensor> &found_inf)
{
	double l;
	return lr_value(lr, l) && fused_adam_impl(M, params, grads, m, v, vmax, steps, l, beta1, beta2, wd, eps,
						  amsgrad, maximize, grad_scale, found_inf);
}

// SGD with momentum, as CPU PyTorch's fused kernel:
//   g += wd p;  buf = g on the first step, else buf momentum + g (1 - dampening);
//   g = nesterov ? g + momentum buf : buf;  p -= lr g
bool fused_sgd(at::TensorList params, at::TensorList grads, at::TensorList bufs, double wd, double momentum,
	       double lr, double dampening, bool nesterov, bool maximize, bool first,
	       const std::optional<at::Tensor> &grad_scale, const std::optional<at::Tensor> &found_inf)
{
	size_t n = params.size();
	if (!lists_ok({ params, grads }, n) || (momentum != 0.0 && !lists_ok({ bufs }, n)))
		return false;
	if (skipped(found_inf))
		return true;
	for (size_t i = 0; i < n; i++) {
		at::Tensor p = params[i];
		if (p.numel() == 0)
			continue;
		at::Tensor g = step_grad(grads[i], maximize, grad_scale), pf = p.to(at::kFloat);
		if (wd != 0.0)
			g = g.add(pf.mul(wd));
		if (momentum != 0.0) {
			at::Tensor buf = bufs[i];
			at::Tensor bf = first ? g : buf.to(at::kFloat).mul(momentum).add(g.mul(1.0 - dampening));
			TORCH_CHECK(store(buf, bf), "neuron: fused sgd: momentum buffer");
			g = nesterov ? g.add(bf.mul(momentum)) : bf;
		}
		TORCH_CHECK(store(p, pf.sub(g.mul(lr))), "neuron: fused sgd: writing the parameter");
	}
	return true;
}

bool fused_sgd_tlr(at::TensorList params, at::TensorList grads, at::TensorList bufs, double wd, double momentum,
		   const at::Tensor &lr, double dampening, bool nesterov, bool maximize, bool first,
		   const std::optional<at::Tensor> &grad_scale, const std::optional<at::Tensor> &found_inf)
{
	double l;
	return lr_value(lr, l) &&
	       fused_sgd(params, grads, bufs, wd, momentum, l, dampening, nesterov, maximize, first, grad_scale, found_inf);
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_OPTIM)

}  // namespace neuron
