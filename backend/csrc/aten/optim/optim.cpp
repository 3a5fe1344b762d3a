// aten/optim/optim.cpp -- the optimizer steps that are ATen ops: the fused
// SGD / Adam / AdamW steps, and AMP's gradient unscaling and loss-scale
// update.  Each is composed from the native kernels, in the order of
// operations CPU PyTorch's kernels use, so fp32 results round as CPU's do.
// (The foreach paths' pointwise ops are aten/pointwise/ternary.cpp; the
// gradient norms aten/linalg/vector.cpp.)
#include "runtime/batch.h"
#include "runtime/copy.h"
#include "compile/fused.h"
#include "aten/composite.h"
#include "ops.def"

#include <ATen/WrapDimUtils.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale_ops.h>
#include <ATen/ops/_amp_update_scale_ops.h>
#include <ATen/ops/_fused_adam_ops.h>
#include <ATen/ops/_fused_adamw_ops.h>
#include <ATen/ops/_fused_sgd_ops.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

namespace neuron {

namespace {

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

// One parameter's Adam / AdamW step as three fused pointwise programs that
// update p, m and v in place, each intermediate fp32 in SBUF -- the same
// operations in the same order as fused_adam_impl's composite below (and
// CPU's kernel), in 3 programs instead of 13.  p's program runs first and
// recomputes m' and v' from the old m and v (unrounded, as CPU's kernel
// uses them); then m's and v's own.  false: operands it does not take.
bool adam_in_place(AdamMode mode, at::Tensor &p, const at::Tensor &g, at::Tensor &m, at::Tensor &v, double lr,
		   double beta1, double beta2, double wd, double eps, double bc1, double bc2)
{
	// (Adam's L2 term g + wd p would need the old p in m's and v's programs)
	if (mode == AdamMode::original && wd != 0.0)
		return false;
	for (const at::Tensor *t : std::initializer_list<const at::Tensor *>{ &g, &m, &v })
		if (t->scalar_type() != p.scalar_type() || t->sizes() != p.sizes())
			return false;
	if (!p.is_contiguous() || !m.is_contiguous() || !v.is_contiguous())
		return false;
	// m' = m b1 + g (1 - b1);  v' = v b2 + g g (1 - b2)
	auto m_next = [&](FusedRegion &r, int gi, int mi) {
		int a = r.ts(mi, ISA_ALU_multiply, (float)beta1);
		return r.tt(a, ISA_ALU_add, r.ts(gi, ISA_ALU_multiply, (float)(1.0 - beta1)));
	};
	auto v_next = [&](FusedRegion &r, int gi, int vi) {
		int a = r.ts(vi, ISA_ALU_multiply, (float)beta2);
		return r.tt(a, ISA_ALU_add, r.ts(r.tt(gi, ISA_ALU_multiply, gi), ISA_ALU_multiply, (float)(1.0 - beta2)));
	};
	enum { P_, G_, M_, V_ };   // p's program's inputs
	FusedRegion rp(4);
	int pf = wd != 0.0 ? rp.ts(P_, ISA_ALU_multiply, (float)(1.0 - lr * wd)) : P_;
	int mf = m_next(rp, G_, M_), vf = v_next(rp, G_, V_);
	int denom = rp.ts(rp.act(vf, ISA_ACT_sqrt), ISA_ALU_divide, (float)std::sqrt(bc2), ISA_ALU_add, (float)eps);
	rp.tt(pf, ISA_ALU_subtract, rp.tt(rp.ts(mf, ISA_ALU_multiply, (float)(lr / bc1)), ISA_ALU_divide, denom));
	run_fused("aten::_fused_adam_", rp, { &p, &g, &m, &v }, p);
	FusedRegion rm(2), rv(2);   // inputs: the moment, g
	m_next(rm, 1, 0);
	v_next(rv, 1, 0);
	run_fused("aten::_fused_adam_", rm, { &m, &g }, m);
	run_fused("aten::_fused_adam_", rv, { &v, &g }, v);
	return true;
}

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
	std::vector<double> step_of(n);   // the kernel's own reads of its step counts, before its launch
	for (size_t i = 0; i < n; i++)
		step_of[i] = params[i].numel() ? peek_cpu(steps[i]).item<double>() : 0.0;
	LaunchBatch batch(mode == AdamMode::adamw ? "aten::_fused_adamw_" : "aten::_fused_adam_");
	for (size_t i = 0; i < n; i++) {
		at::Tensor p = params[i], m = m_list[i], v = v_list[i];
		if (p.numel() == 0)
			continue;
		double step = step_of[i];
		double bc1 = 1.0 - std::pow(beta1, step), bc2 = 1.0 - std::pow(beta2, step);
		if (!amsgrad && !maximize && !(grad_scale && grad_scale->defined()) &&
		    adam_in_place(mode, p, grads[i], m, v, lr, beta1, beta2, wd, eps, bc1, bc2))
			continue;
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
	batch.flush();
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
