// neuron_backward.cpp -- the backward kernels transformer training runs:
// softmax / log_softmax backward, nll_loss forward and backward (the core
// of cross_entropy), embedding's dense backward, the activation backwards
// (threshold = relu, gelu both forms, tanh, sigmoid), layer_norm backward,
// dropout.  Each is composed from the native kernels (every step its own
// program on the device timeline, so its simulated time is the sum of the
// steps').  Half-precision inputs are computed at fp32 and rounded once at
// the end, as CPU PyTorch's kernels compute in their "opmath" type.
#include "neuron_kernels.h"
#include "neuron_ops.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/bernoulli_ops.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/native_dropout_backward_ops.h>
#include <ATen/ops/native_dropout_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cmath>

namespace neuron {

namespace {

// r (fp32) rounded to dt
at::Tensor down(const at::Tensor &r, at::ScalarType dt)
{
	return r.scalar_type() == dt ? r : r.to(dt);
}

// ---- softmax / log_softmax backward ---------------------------------------

// d softmax: y * (g - sum(g * y)); d log_softmax: g - exp(y) * sum(g)
at::Tensor softmax_bwd(bool log, const at::Tensor &g, const at::Tensor &y, int64_t dim, at::ScalarType in_dt)
{
	if (!is_float_neuron(g) || !is_float_neuron(y) || g.sizes() != y.sizes() || isa_dtype_of(in_dt) == ISA_DT_INVALID)
		return {};
	if (g.numel() == 0)
		return at::empty(g.sizes(), g.options().dtype(in_dt));
	dim = g.dim() ? at::maybe_wrap_dim(dim, g.dim()) : 0;
	at::Tensor gf = as_fp32(g), yf = as_fp32(y), r;
	if (g.dim() == 0)
		r = log ? gf.sub(yf.exp().mul(gf)) : yf.mul(gf.sub(gf.mul(yf)));
	else if (log)
		r = gf.sub(yf.exp().mul(gf.sum(dim, true)));
	else
		r = yf.mul(gf.sub(gf.mul(yf).sum(dim, true)));
	return down(r, in_dt);
}

// _softmax_backward_data.out (Log = false) and _log_softmax_backward_data.out
template <bool Log>
at::Tensor &softmax_backward_out(const at::Tensor &g, const at::Tensor &y, int64_t dim, at::ScalarType in_dt,
				 at::Tensor &out)
{
	at::Tensor r = softmax_bwd(Log, g, y, dim, in_dt);
	if (r.defined() && out.is_privateuseone())
		return write_result(out, r);
	return declined;
}

// ---- nll_loss ----------------------------------------------------------------

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
	write_result(output, down(r, dt));
	write_result(total_weight, down(tw, dt));
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
	at::Tensor vals = down(as_fp32(t.w).mul(c.neg()), self.scalar_type());
	at::Tensor gi = at::zeros(t.input2d.sizes(), self.options());
	if (N > 0)
		gi = gi.scatter(1, t.safe.unsqueeze(1), vals.view({ N, 1 }));
	return write_result(grad_input, gi.view(self.sizes()));
}

// ---- embedding ---------------------------------------------------------------

// grad_weight[idx[j]] += grad[j] over every lookup j (repeats add up, a DMA
// scatter-add), padding_idx rows left zero; with scale_grad_by_freq each
// lookup's gradient divided by its index's count
at::Tensor embedding_dense_backward(const at::Tensor &grad, const at::Tensor &indices, int64_t num_weights,
				    int64_t padding_idx, bool scale_grad_by_freq)
{
	if (!is_float_neuron(grad) || !indices.is_privateuseone() || grad.dim() < 1 ||
	    (indices.scalar_type() != at::kLong && indices.scalar_type() != at::kInt) || num_weights < 0)
		return declined;
	int64_t D = grad.size(-1);
	at::Tensor idx = indices.reshape({ -1 }).to(at::kLong);
	TORCH_CHECK(grad.numel() == idx.numel() * D, "embedding_dense_backward: grad ", grad.sizes(),
		    " does not match indices ", indices.sizes());
	at::Tensor g = as_fp32(grad).reshape({ idx.numel(), D });
	if (padding_idx >= 0 || scale_grad_by_freq) {
		at::Tensor scale = at::ones({ idx.numel() }, g.options());
		if (scale_grad_by_freq) {
			at::Tensor counts = at::zeros({ num_weights }, g.options());
			TORCH_CHECK(rows_write_dim(counts, 0, idx, scale, true, "aten::embedding_dense_backward"),
				    "neuron: embedding_dense_backward: counting indices");
			scale = scale.div(counts.index_select(0, idx));
		}
		if (padding_idx >= 0)
			scale = scale.masked_fill(idx.eq(padding_idx), 0);
		g = g.mul(scale.unsqueeze(1));
	}
	at::Tensor out = at::zeros({ num_weights, D }, g.options());
	if (idx.numel() > 0)
		TORCH_CHECK(rows_write_dim(out, 0, idx, g, true, "aten::embedding_dense_backward"),
			    "neuron: embedding_dense_backward: index out of range or layout not covered");
	return down(out, grad.scalar_type());
}

// ---- activation backwards ----------------------------------------------------

bool pair_ok(const at::Tensor &g, const at::Tensor &x)
{
	return is_float_neuron(g) && is_float_neuron(x) && g.scalar_type() == x.scalar_type() && g.sizes() == x.sizes();
}

// relu's backward: g where x > threshold, else 0
at::Tensor threshold_backward(const at::Tensor &g, const at::Tensor &x, const at::Scalar &th)
{
	if (!pair_ok(g, x) || th.isComplex())
		return declined;
	return g.masked_fill(x.le(th), 0);
}

at::Tensor &threshold_backward_out(const at::Tensor &g, const at::Tensor &x, const at::Scalar &th, at::Tensor &out)
{
	if (!pair_ok(g, x) || th.isComplex() || !out.is_privateuseone())
		return declined;
	return write_result(out, g.masked_fill(x.le(th), 0));
}

// tanh: g (1 - y^2); sigmoid: g (1 - y) y (y the forward's output)
at::Tensor tanh_bwd(const at::Tensor &g, const at::Tensor &y)
{
	at::Tensor yf = as_fp32(y);
	return down(as_fp32(g).mul(yf.mul(yf).neg().add(1.0)), g.scalar_type());
}

at::Tensor sigmoid_bwd(const at::Tensor &g, const at::Tensor &y)
{
	at::Tensor yf = as_fp32(y);
	return down(as_fp32(g).mul(yf.neg().add(1.0)).mul(yf), g.scalar_type());
}

at::Tensor tanh_backward(const at::Tensor &g, const at::Tensor &y)
{
	return pair_ok(g, y) ? tanh_bwd(g, y) : at::Tensor();   // undefined: declined
}

at::Tensor &tanh_backward_out(const at::Tensor &g, const at::Tensor &y, at::Tensor &out)
{
	if (pair_ok(g, y) && out.is_privateuseone())
		return write_result(out, tanh_bwd(g, y));
	return declined;
}

at::Tensor sigmoid_backward(const at::Tensor &g, const at::Tensor &y)
{
	return pair_ok(g, y) ? sigmoid_bwd(g, y) : at::Tensor();
}

at::Tensor &sigmoid_backward_out(const at::Tensor &g, const at::Tensor &y, at::Tensor &out)
{
	if (pair_ok(g, y) && out.is_privateuseone())
		return write_result(out, sigmoid_bwd(g, y));
	return declined;
}

// gelu's derivative, as CPU PyTorch's GeluBackward kernel computes it:
//   none: cdf(x) + x pdf(x),  cdf = (1 + erf(x / sqrt 2)) / 2, pdf = exp(-x^2/2) / sqrt(2 pi)
//   tanh: 0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa x^2), t = tanh(beta (x + kappa x^3))
at::Tensor gelu_bwd(const at::Tensor &g, const at::Tensor &x, c10::string_view approximate)
{
	at::Tensor xf = as_fp32(x), d;
	if (approximate == "tanh") {
		const double beta = M_SQRT2 * M_2_SQRTPI * 0.5, kappa = 0.044715;
		at::Tensor x2 = xf.mul(xf);
		at::Tensor t = xf.add(x2.mul(xf).mul(kappa)).mul(beta).tanh();
		at::Tensor left_d = t.add(1.0).mul(0.5);
		at::Tensor right_d = xf.mul(0.5).mul(t.mul(t).neg().add(1.0)).mul(x2.mul(3.0 * kappa).add(1.0).mul(beta));
		d = left_d.add(right_d);
	} else {
		at::Tensor cdf = xf.mul(M_SQRT1_2).erf().add(1.0).mul(0.5);
		at::Tensor pdf = xf.mul(xf).mul(-0.5).exp().mul(M_2_SQRTPI * M_SQRT1_2 * 0.5);
		d = cdf.add(xf.mul(pdf));
	}
	return down(as_fp32(g).mul(d), g.scalar_type());
}

bool gelu_ok(const at::Tensor &g, const at::Tensor &x, c10::string_view approximate)
{
	return pair_ok(g, x) && (approximate == "none" || approximate == "tanh");
}

at::Tensor gelu_backward(const at::Tensor &g, const at::Tensor &x, c10::string_view approximate)
{
	return gelu_ok(g, x, approximate) ? gelu_bwd(g, x, approximate) : at::Tensor();
}

at::Tensor &gelu_backward_out(const at::Tensor &g, const at::Tensor &x, c10::string_view approximate,
			      at::Tensor &out)
{
	if (gelu_ok(g, x, approximate) && out.is_privateuseone())
		return write_result(out, gelu_bwd(g, x, approximate));
	return declined;
}

// ---- layer_norm backward -----------------------------------------------------

// xhat = (x - mean) rstd, gx = g w:
//   dx = rstd (gx - mean(gx) - xhat mean(gx xhat)),  dw = sum(g xhat),  db = sum(g)
// over the M rows of N normalized elements, at fp32
std::tuple<at::Tensor, at::Tensor, at::Tensor>
layer_norm_backward(const at::Tensor &g, const at::Tensor &x, at::IntArrayRef shape, const at::Tensor &mean,
		    const at::Tensor &rstd, const std::optional<at::Tensor> &w, const std::optional<at::Tensor> &b,
		    std::array<bool, 3> mask)
{
	bool has_w = w && w->defined();
	int64_t N = 1;
	for (int64_t s : shape)
		N *= s;
	bool ok = pair_ok(g, x) && is_float_neuron(mean) && is_float_neuron(rstd) && N > 0 && x.numel() % N == 0 &&
		  (!has_w || is_float_neuron(*w)) && (!b || !b->defined() || is_float_neuron(*b));
	if (!ok)
		return declined;
	int64_t M = x.numel() / N;
	at::Tensor g2 = as_fp32(g).reshape({ M, N }), x2 = as_fp32(x).reshape({ M, N });
	at::Tensor mu = as_fp32(mean).reshape({ M, 1 }), rs = as_fp32(rstd).reshape({ M, 1 });
	at::Tensor xhat = x2.sub(mu).mul(rs);
	at::Tensor dx, dw, db;
	if (mask[0]) {
		at::Tensor gx = has_w ? g2.mul(as_fp32(*w).reshape({ N })) : g2;
		at::Tensor a = gx.mean(1, true), c = gx.mul(xhat).mean(1, true);
		dx = down(gx.sub(a).sub(xhat.mul(c)).mul(rs).view(x.sizes()), x.scalar_type());
	}
	if (mask[1] && has_w)
		dw = down(g2.mul(xhat).sum(0), w->scalar_type()).view(w->sizes());
	if (mask[2] && b && b->defined())
		db = down(g2.sum(0), b->scalar_type()).view(b->sizes());
	return { dx, dw, db };
}

// ---- dropout -----------------------------------------------------------------

// keep each element with probability 1 - p (GpSimd's PRNG on the device's
// generator), scaled by 1 / (1 - p); the mask is bool, as PyTorch's
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor &x, double p, std::optional<bool> train)
{
	if (!is_float_neuron(x))
		return declined;
	bool t = train.value_or(true);
	if (!t || p == 0.0 || x.numel() == 0)
		return { x.clone(), at::ones(x.sizes(), x.options().dtype(at::kBool)) };
	TORCH_CHECK(p >= 0.0 && p <= 1.0, "dropout probability has to be between 0 and 1, but got ", p);
	if (p == 1.0)
		return { at::zeros(x.sizes(), x.options()), at::zeros(x.sizes(), x.options().dtype(at::kBool)) };
	at::Tensor u = at::empty(x.sizes(), x.options().dtype(at::kFloat));
	u.uniform_(0.0, 1.0);
	at::Tensor keep = u.lt(1.0 - p);
	at::Tensor out = down(as_fp32(x).mul(keep.to(at::kFloat)).mul(1.0 / (1.0 - p)), x.scalar_type());
	return { out, keep };
}

at::Tensor native_dropout_backward(const at::Tensor &g, const at::Tensor &mask, double scale)
{
	if (!is_float_neuron(g) || !mask.is_privateuseone() || mask.sizes() != g.sizes())
		return declined;
	return down(as_fp32(g).mul(mask.to(at::kFloat)).mul(scale), g.scalar_type());
}

// self = draws < p, as self's dtype (a Bernoulli(p) sample per element)
at::Tensor &bernoulli_float(at::Tensor &self, double p, std::optional<at::Generator> gen)
{
	if (!is_float_neuron(self) || p < 0.0 || p > 1.0)
		return declined;
	if (self.numel() == 0)
		return self;
	at::Tensor u = at::empty(self.sizes(), self.options().dtype(at::kFloat));
	u.uniform_(0.0, 1.0, gen);
	return write_result(self, u.lt(p).to(self.scalar_type()));
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_BACKWARD)

}  // namespace neuron
