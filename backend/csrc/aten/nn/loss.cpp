// aten/nn/loss.cpp -- losses composed from the native kernels: mean squared
// error (and its backward), binary cross entropy, smooth L1, Huber, the
// negative log likelihood (the core of cross_entropy) and its backward, and the
// 2-D negative log likelihood (nll_loss over [N, C, H, W] as nll_loss over
// N H W rows of C).
//
// Each is CPU PyTorch's elementwise formula, then its reduction (none, mean:
// the sum over the element count, NaN when there is none, as CPU; sum), at
// fp32 inside for bf16 / fp16 and rounded once, except where CPU computes in
// the tensor's dtype (binary cross entropy: each step rounded there).
// Arguments CPU rejects decline, so the fallback raises CPU's error; checks
// of values (binary cross entropy's input range) read the simulator's copy.
#include "runtime/copy.h"
#include "aten/composite.h"
#include "ops.def"

#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/full.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/where.h>
#include <ATen/ops/binary_cross_entropy_ops.h>
#include <ATen/ops/huber_loss_ops.h>
#include <ATen/ops/mse_loss_backward_ops.h>
#include <ATen/ops/mse_loss_ops.h>
#include <ATen/ops/nll_loss2d_forward_ops.h>
#include <ATen/ops/nll_loss_forward.h>
#include <ATen/ops/smooth_l1_loss_ops.h>

#include <algorithm>
#include <limits>

namespace neuron {

namespace {

enum { kNone = 0, kMean = 1, kSum = 2 };

bool pair_ok(const at::Tensor &x, const at::Tensor &t, int64_t reduction)
{
	return is_float_neuron(x) && is_float_neuron(t) && x.device() == t.device() && x.sizes() == t.sizes() &&
	       at::isFloatingType(x.scalar_type()) && at::isFloatingType(t.scalar_type()) && reduction >= kNone &&
	       reduction <= kSum;
}

// CPU's apply_loss_reduction: the elementwise loss, its mean (the sum over
// the count: NaN for no elements) or its sum
at::Tensor reduced(const at::Tensor &loss, int64_t reduction)
{
	if (reduction != kNone && loss.numel() == 0)
		return at::full({}, reduction == kMean ? std::numeric_limits<double>::quiet_NaN() : 0.0, loss.options());
	if (reduction == kMean)
		return loss.sum().div((double)loss.numel());
	return reduction == kSum ? loss.sum() : loss;
}

// ---- mean squared error -------------------------------------------------------

// (x - t)^2 and d x = 2 (x - t) g (/ n for the mean)
at::Tensor mse_loss(const at::Tensor &x, const at::Tensor &t, int64_t reduction)
{
	if (!pair_ok(x, t, reduction))
		return declined;
	at::Tensor d = as_fp32(x).sub(as_fp32(t));
	return reduced(d.mul(d), reduction).to(at::result_type(x, t));
}

at::Tensor mse_loss_backward(const at::Tensor &g, const at::Tensor &x, const at::Tensor &t, int64_t reduction)
{
	if (!is_float_neuron(g) || !pair_ok(x, t, reduction))
		return declined;
	double k = reduction == kMean ? 2.0 / (double)std::max<int64_t>(x.numel(), 1) : 2.0;
	at::Tensor r = as_fp32(x).sub(as_fp32(t)).mul(k).mul(as_fp32(g));
	return r.to(x.scalar_type());
}

// ---- binary cross entropy -----------------------------------------------------

// CPU's: (t - 1) max(log1p(-x), -100) - t max(log(x), -100), times the
// weight, each step in the dtype; an input outside [0, 1] (NaN too) is
// CPU's error
at::Tensor bce_impl(const at::Tensor &x, const at::Tensor &t, const std::optional<at::Tensor> &weight,
		    int64_t reduction)
{
	bool w_ok = !weight || !weight->defined() || (is_float_neuron(*weight) && weight->scalar_type() == x.scalar_type());
	if (!pair_ok(x, t, reduction) || x.scalar_type() != t.scalar_type() || !w_ok)
		return {};
	if (x.numel()) {
		bool inside = peek_cpu(x.ge(0).logical_and(x.le(1)).all()).item<bool>();
		TORCH_CHECK(inside, "all elements of input should be between 0 and 1");
	}
	at::Tensor lo = at::full({}, -100.0, x.options());
	at::Tensor l = t.sub(1).mul(at::maximum(x.neg().log1p(), lo)).sub(t.mul(at::maximum(x.log(), lo)));
	if (weight && weight->defined())
		l = l.mul(*weight);
	return reduced(l, reduction);
}

at::Tensor binary_cross_entropy(const at::Tensor &x, const at::Tensor &t, const std::optional<at::Tensor> &weight,
				int64_t reduction)
{
	return bce_impl(x, t, weight, reduction);
}

at::Tensor &binary_cross_entropy_out(const at::Tensor &x, const at::Tensor &t, const std::optional<at::Tensor> &weight,
				     int64_t reduction, at::Tensor &out)
{
	return composite_out(out, { &x, &t }, bce_impl(x, t, weight, reduction));
}

// ---- smooth L1 and Huber --------------------------------------------------------

// z = |x - t|: smooth L1 z < beta ? z^2 / (2 beta) : z - beta / 2 (beta 0:
// z); Huber z < delta ? z^2 / 2 : delta (z - delta / 2)
at::Tensor smooth_impl(const at::Tensor &x, const at::Tensor &t, int64_t reduction, double beta, bool huber)
{
	if (!pair_ok(x, t, reduction) || !(beta >= 0) || (huber && !(beta > 0)))
		return {};
	at::Tensor z = as_fp32(x).sub(as_fp32(t)).abs();
	at::Tensor l;
	if (huber)
		l = at::where(z.lt(beta), z.mul(z).mul(0.5), z.sub(0.5 * beta).mul(beta));
	else if (beta == 0)
		l = z;
	else
		l = at::where(z.lt(beta), z.mul(z).mul(0.5).div(beta), z.sub(0.5 * beta));
	return reduced(l, reduction).to(at::result_type(x, t));
}

at::Tensor &smooth_l1_loss_out(const at::Tensor &x, const at::Tensor &t, int64_t reduction, double beta,
			       at::Tensor &out)
{
	return composite_out(out, { &x, &t }, smooth_impl(x, t, reduction, beta, false));
}

at::Tensor huber_loss(const at::Tensor &x, const at::Tensor &t, int64_t reduction, double delta)
{
	return smooth_impl(x, t, reduction, delta, true);
}

at::Tensor &huber_loss_out(const at::Tensor &x, const at::Tensor &t, int64_t reduction, double delta, at::Tensor &out)
{
	return composite_out(out, { &x, &t }, smooth_impl(x, t, reduction, delta, true));
}

// ---- 2-D negative log likelihood ----------------------------------------------

// [N, C, H, W] scores and [N, H, W] targets as N H W rows of C: the native
// nll_loss_forward (its checks, ignore_index, weights); reduction none
// gives the loss back as [N, H, W]
std::tuple<at::Tensor, at::Tensor> nll2d(const at::Tensor &self, const at::Tensor &target,
					 const std::optional<at::Tensor> &weight, int64_t reduction, int64_t ignore_index)
{
	if (!is_float_neuron(self) || !target.is_privateuseone() || self.dim() != 4 || target.dim() != 3 ||
	    target.size(0) != self.size(0) || target.size(1) != self.size(2) || target.size(2) != self.size(3))
		return declined;
	int64_t C = self.size(1);
	at::Tensor rows = self.permute({ 0, 2, 3, 1 }).reshape({ -1, C });
	auto [loss, total] = at::nll_loss_forward(rows, target.reshape({ -1 }), weight, reduction, ignore_index);
	return { reduction == kNone ? loss.view(target.sizes()) : loss, total };
}

std::tuple<at::Tensor, at::Tensor> nll_loss2d_forward(const at::Tensor &self, const at::Tensor &target,
						      const std::optional<at::Tensor> &weight, int64_t reduction,
						      int64_t ignore_index)
{
	return nll2d(self, target, weight, reduction, ignore_index);
}

std::tuple<at::Tensor &, at::Tensor &> nll_loss2d_forward_out(const at::Tensor &self, const at::Tensor &target,
							       const std::optional<at::Tensor> &weight,
							       int64_t reduction, int64_t ignore_index,
							       at::Tensor &output, at::Tensor &total_weight)
{
	auto [loss, total] = nll2d(self, target, weight, reduction, ignore_index);
	if (!loss.defined() || !output.is_privateuseone() || !total_weight.is_privateuseone())
		return declined;
	write_result(output, loss);
	write_result(total_weight, total);
	return { output, total_weight };
}

enum { kReductionNone = 0, kReductionMean = 1, kReductionSum = 2 };

// The per-sample weight of an nll_loss target (0 where ignored), the
// target with ignored entries replaced by class 0 (a valid index), and the
// input as [N, C].  Out-of-range targets are an error, as on CPU.
struct NllTargets {
	at::Tensor input2d, safe, w;
};

bool nll_covered(const at::Tensor &self, const at::Tensor &target, const std::optional<at::Tensor> &weight)
{
	bool w_ok = !weight || !weight->defined() ||
		    (is_float_neuron(*weight) && weight->dim() == 1 && weight->size(0) == self.size(-1));
	return is_float_neuron(self) && (self.dim() == 1 || self.dim() == 2) && target.is_privateuseone() &&
	       target.scalar_type() == at::kLong && target.dim() == self.dim() - 1 &&
	       (self.dim() == 1 || target.size(0) == self.size(0)) && self.size(-1) > 0 && w_ok;
}

NllTargets nll_targets(const at::Tensor &self, const at::Tensor &target, const std::optional<at::Tensor> &weight,
		       int64_t ignore_index)
{
	NllTargets t;
	int64_t C = self.size(-1);
	t.input2d = self.dim() == 1 ? self.view({ 1, C }) : self;
	at::Tensor tg = target.reshape({ -1 });
	at::Tensor keep = tg.ne(ignore_index);
	t.safe = tg.masked_fill(tg.eq(ignore_index), 0);
	// PyTorch's check, on the simulator's own copy of the targets (no
	// transfer): a target outside [0, C) other than ignore_index
	at::Tensor host = peek_cpu(t.safe);
	int64_t lo = host.numel() ? host.min().item<int64_t>() : 0, hi = host.numel() ? host.max().item<int64_t>() : 0;
	TORCH_CHECK_INDEX(lo >= 0 && hi < C, "nll_loss: target ", lo < 0 ? lo : hi, " is out of bounds for ", C,
			  " classes");
	at::ScalarType dt = self.scalar_type();
	t.w = keep.to(dt);
	if (weight && weight->defined())
		t.w = weight->index_select(0, t.safe).mul(t.w);
	return t;
}

std::tuple<at::Tensor &, at::Tensor &> nll_loss_forward_out(const at::Tensor &self, const at::Tensor &target,
							     const std::optional<at::Tensor> &weight, int64_t reduction,
							     int64_t ignore_index, at::Tensor &output,
							     at::Tensor &total_weight)
{
	if (!nll_covered(self, target, weight) || !output.is_privateuseone() || !total_weight.is_privateuseone())
		return declined;
	NllTargets t = nll_targets(self, target, weight, ignore_index);
	at::ScalarType dt = self.scalar_type();
	at::Tensor picked = t.input2d.gather(1, t.safe.unsqueeze(1)).view({ -1 });
	at::Tensor loss = as_fp32(picked).mul(as_fp32(t.w)).neg();   // -w[t] * x[t]
	at::Tensor tw = t.w.numel() ? as_fp32(t.w).sum() : at::zeros({}, self.options().dtype(at::kFloat));
	at::Tensor r;
	if (reduction == kReductionNone)   // view({}) alone is view(ScalarType 0): a uint8 view of the bytes
		r = self.dim() == 1 ? loss.view(at::IntArrayRef{}) : loss;
	else if (loss.numel() == 0)
		r = reduction == kReductionMean ? tw.div(tw) : tw;   // CPU: nan for mean, 0 for sum
	else
		r = reduction == kReductionMean ? loss.sum().div(tw) : loss.sum();
	write_result(output, cast_back(r, dt));
	write_result(total_weight, cast_back(tw, dt));
	return { output, total_weight };
}

// d loss / d x[i, t_i] = -w_i * g (mean: divided by the total weight); zero elsewhere
at::Tensor &nll_loss_backward_out(const at::Tensor &grad, const at::Tensor &self, const at::Tensor &target,
				  const std::optional<at::Tensor> &weight, int64_t reduction, int64_t ignore_index,
				  const at::Tensor &total_weight, at::Tensor &grad_input)
{
	if (!nll_covered(self, target, weight) || !is_float_neuron(grad) || !grad_input.is_privateuseone() ||
	    !is_float_neuron(total_weight))
		return declined;
	NllTargets t = nll_targets(self, target, weight, ignore_index);
	int64_t N = t.input2d.size(0);
	at::Tensor c = as_fp32(grad).reshape({ reduction == kReductionNone ? N : 1 });
	if (reduction == kReductionMean)
		c = c.div(as_fp32(total_weight).reshape({ 1 }));
	at::Tensor vals = cast_back(as_fp32(t.w).mul(c.neg()), self.scalar_type());
	at::Tensor gi = at::zeros(t.input2d.sizes(), self.options());
	if (N > 0)
		gi = gi.scatter(1, t.safe.unsqueeze(1), vals.view({ N, 1 }));
	return write_result(grad_input, gi.view(self.sizes()));
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_LOSS)

}  // namespace neuron
