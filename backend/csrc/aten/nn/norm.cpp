// aten/nn/norm.cpp -- batch norm (forward in training and inference, the
// running statistics updated in place, and its backward), group norm's
// backward and layer norm's backward, as the CPU computes them, from native reductions
// and elementwise kernels: a convolutional network with norms trains on
// `neuron` without the CPU.  The input is viewed as [N, C, S] (S = the
// spatial elements); statistics are per channel over N x S (batch norm) or
// per (sample, group) over the group's channels x S (group norm), in fp32
// for bf16 / fp16 inputs, the biased variance normalizing and the unbiased
// one going into running_var, as ATen's CPU kernels do.
//
// native_batch_norm's schema does not mark running_mean / running_var as
// written, so the CPU fallback (which copies back only arguments marked
// written) would drop their update: a native kernel is the fix, not only
// speed.
#include "aten/composite.h"
#include "ops.def"

#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/_batch_norm_with_update_ops.h>
#include <ATen/ops/empty.h>


#include <ATen/ops/_native_batch_norm_legit_no_training_ops.h>
#include <ATen/ops/_native_batch_norm_legit_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/native_batch_norm_backward_ops.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <ATen/ops/native_group_norm_backward_ops.h>
#include <ATen/ops/ones.h>
#include <torch/library.h>

#include <cmath>
#include <tuple>

namespace neuron {

namespace {

using Tensor3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

bool opt_ok(const std::optional<at::Tensor> &t, int64_t C)
{
	return !t || !t->defined() || (is_float_neuron(*t) && t->numel() == C);
}

const at::Tensor *opt(const std::optional<at::Tensor> &t)
{
	return t && t->defined() ? &*t : nullptr;
}

// [N, C, S] view of an [N, C, ...] input (S = 1 for [N, C])
at::Tensor ncs(const at::Tensor &x)
{
	return x.reshape({ x.size(0), x.size(1), -1 });
}

// per-channel [C] vector as [1, C, 1]
at::Tensor chan(const at::Tensor &v)
{
	return as_fp32(v).reshape({ 1, -1, 1 });
}

// CPU's dtype for the saved statistics: fp32 when the input and the
// parameters differ in dtype, else the input's
at::ScalarType stat_dtype(const at::Tensor &x, std::initializer_list<const at::Tensor *> params)
{
	for (const at::Tensor *p : params)
		if (p && p->scalar_type() != x.scalar_type())
			return at::kFloat;
	return x.scalar_type();
}

bool bn_covered(const at::Tensor &x, const std::optional<at::Tensor> &w, const std::optional<at::Tensor> &b,
		const std::optional<at::Tensor> &rm, const std::optional<at::Tensor> &rv)
{
	if (!is_float_neuron(x) || x.dim() < 2 || x.numel() == 0)
		return false;
	int64_t C = x.size(1);
	return opt_ok(w, C) && opt_ok(b, C) && opt_ok(rm, C) && opt_ok(rv, C);
}

// out = x * scale + shift per channel (CPU's transform: scale = w * invstd,
// shift = b - mean * scale)
at::Tensor bn_apply(const at::Tensor &x, const at::Tensor &mean, const at::Tensor &invstd,
		    const std::optional<at::Tensor> &w, const std::optional<at::Tensor> &b)
{
	at::Tensor scale = opt(w) ? invstd.mul(as_fp32(*w)) : invstd;
	at::Tensor shift = mean.mul(scale).neg();
	if (opt(b))
		shift = shift.add(as_fp32(*b));
	at::Tensor y = as_fp32(ncs(x)).mul(chan(scale)).add(chan(shift));
	return y.to(x.scalar_type()).view(x.sizes());
}

Tensor3 bn_forward(const at::Tensor &x, const std::optional<at::Tensor> &w, const std::optional<at::Tensor> &b,
		   const std::optional<at::Tensor> &rm, const std::optional<at::Tensor> &rv, bool training,
		   double momentum, double eps)
{
	at::ScalarType sdt = stat_dtype(x, { opt(w), opt(b), opt(rm), opt(rv) });
	if (!training) {
		TORCH_CHECK(opt(rm) && opt(rv), "neuron: batch_norm: running_mean and running_var must be defined in "
			    "evaluation mode");
		at::Tensor invstd = as_fp32(*rv).add(eps).rsqrt();
		at::Tensor y = bn_apply(x, as_fp32(*rm), invstd, w, b);
		return { y, at::empty({ 0 }, x.options().dtype(sdt)), at::empty({ 0 }, x.options().dtype(sdt)) };
	}
	at::Tensor x3 = as_fp32(ncs(x));
	int64_t n = x3.size(0) * x3.size(2);
	at::Tensor mean = x3.sum({ 0, 2 }).div((double)n);
	at::Tensor xc = x3.sub(chan(mean));
	at::Tensor var = xc.mul(xc).sum({ 0, 2 }).div((double)n);
	at::Tensor invstd = var.add(eps).rsqrt();
	at::Tensor y = bn_apply(x, mean, invstd, w, b);
	// running = (1 - momentum) * running + momentum * batch (unbiased var)
	if (opt(rm))
		rm->mul_(1.0 - momentum).add_(mean.to(rm->scalar_type()), momentum);
	if (opt(rv)) {
		double unbias = n > 1 ? (double)n / (double)(n - 1) : INFINITY;
		rv->mul_(1.0 - momentum).add_(var.mul(unbias).to(rv->scalar_type()), momentum);
	}
	return { y, mean.to(sdt), invstd.to(sdt) };
}

std::optional<at::Tensor> on_cpu(const std::optional<at::Tensor> &t)
{
	return opt(t) ? std::optional<at::Tensor>(t->cpu()) : std::nullopt;
}

// Not covered (float64, an empty batch, ...): the CPU kernel, counted as a
// fallback, with the running statistics it updated copied back (the generic
// fallback would drop them: the schema does not mark them written).
Tensor3 bn_on_cpu(const at::Tensor &x, const std::optional<at::Tensor> &w, const std::optional<at::Tensor> &b,
		  const std::optional<at::Tensor> &rm, const std::optional<at::Tensor> &rv, bool training,
		  double momentum, double eps)
{
	count_fallback("aten::native_batch_norm");
	std::optional<at::Tensor> rmc = on_cpu(rm), rvc = on_cpu(rv);
	Tensor3 r = at::_ops::native_batch_norm::call(x.cpu(), on_cpu(w), on_cpu(b), rmc, rvc, training, momentum,
						       eps);
	if (training && rmc)
		rm->copy_(*rmc);
	if (training && rvc)
		rv->copy_(*rvc);
	return { std::get<0>(r).to(x.device()), std::get<1>(r).to(x.device()), std::get<2>(r).to(x.device()) };
}

Tensor3 bn_native(const at::Tensor &x, const std::optional<at::Tensor> &w, const std::optional<at::Tensor> &b,
		  const std::optional<at::Tensor> &rm, const std::optional<at::Tensor> &rv, bool training,
		  double momentum, double eps)
{
	if (!bn_covered(x, w, b, rm, rv))
		return bn_on_cpu(x, w, b, rm, rv, training, momentum, eps);
	return bn_forward(x, w, b, rm, rv, training, momentum, eps);
}

// the functional forms torch.compile's decompositions and functionalization use
Tensor3 bn_legit(const at::Tensor &x, const std::optional<at::Tensor> &w, const std::optional<at::Tensor> &b,
		 at::Tensor &rm, at::Tensor &rv, bool training, double momentum, double eps)
{
	if (!bn_covered(x, w, b, rm, rv))
		return declined;
	return bn_forward(x, w, b, rm, rv, training, momentum, eps);
}

// training mode's forward with the running statistics updated (what
// torch.compile's batch norm decomposes to): bn_legit, and an empty reserve
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>
bn_with_update(const at::Tensor &x, const std::optional<at::Tensor> &w, const std::optional<at::Tensor> &b, at::Tensor &rm,
	       at::Tensor &rv, double momentum, double eps)
{
	if (!bn_covered(x, w, b, rm, rv))
		return declined;
	auto [y, mean, rstd] = bn_forward(x, w, b, rm, rv, true, momentum, eps);
	return { y, mean, rstd, at::empty({ 0 }, x.options().dtype(at::kByte)) };
}

Tensor3 bn_legit_no_stats(const at::Tensor &x, const std::optional<at::Tensor> &w,
			  const std::optional<at::Tensor> &b, bool training, double momentum, double eps)
{
	if (!bn_covered(x, w, b, {}, {}))
		return declined;
	return bn_forward(x, w, b, {}, {}, training, momentum, eps);
}

Tensor3 bn_legit_no_training(const at::Tensor &x, const std::optional<at::Tensor> &w,
			     const std::optional<at::Tensor> &b, const at::Tensor &rm, const at::Tensor &rv,
			     double momentum, double eps)
{
	if (!bn_covered(x, w, b, rm, rv))
		return declined;
	return bn_forward(x, w, b, rm, rv, false, momentum, eps);
}

// d x = w * invstd / n * (n * g - sum(g) - xhat * sum(g * xhat)) in training
// (mean and invstd depend on x); g * w * invstd in evaluation
Tensor3 bn_backward(const at::Tensor &g, const at::Tensor &x, const std::optional<at::Tensor> &w,
				   const std::optional<at::Tensor> &rm, const std::optional<at::Tensor> &rv,
				   const std::optional<at::Tensor> &save_mean,
				   const std::optional<at::Tensor> &save_invstd, bool train, double eps,
				   std::array<bool, 3> mask)
{
	if (!bn_covered(x, w, {}, rm, rv) || !is_float_neuron(g) || g.sizes() != x.sizes())
		return declined;
	int64_t C = x.size(1);
	at::Tensor mean, invstd;
	if (train) {
		if (!opt(save_mean) || !opt(save_invstd) || !opt_ok(save_mean, C) || !opt_ok(save_invstd, C))
			return declined;
		mean = as_fp32(*save_mean);
		invstd = as_fp32(*save_invstd);
	} else {
		TORCH_CHECK(opt(rm) && opt(rv), "neuron: batch_norm backward in evaluation mode needs the running "
			    "statistics");
		mean = as_fp32(*rm);
		invstd = as_fp32(*rv).add(eps).rsqrt();
	}
	at::Tensor g3 = as_fp32(ncs(g)), x3 = as_fp32(ncs(x));
	at::Tensor xhat = x3.sub(chan(mean)).mul(chan(invstd));
	at::Tensor sum_g = g3.sum({ 0, 2 });
	at::Tensor sum_gx = g3.mul(xhat).sum({ 0, 2 });
	at::Tensor wv = opt(w) ? as_fp32(*w) : at::ones({ C }, x3.options());
	at::Tensor dx, dw, db;
	if (mask[0]) {
		at::Tensor k = wv.mul(invstd);
		if (train) {
			double n = (double)(x3.size(0) * x3.size(2));
			at::Tensor centered = g3.sub(chan(sum_g.div(n))).sub(xhat.mul(chan(sum_gx.div(n))));
			dx = centered.mul(chan(k));
		} else {
			dx = g3.mul(chan(k));
		}
		dx = dx.to(x.scalar_type()).view(x.sizes());
	}
	at::ScalarType pdt = opt(w) ? w->scalar_type() : x.scalar_type();
	if (mask[1])
		dw = sum_gx.to(pdt);
	if (mask[2])
		db = sum_g.to(pdt);
	return { dx, dw, db };
}

// group norm: x as [N, G, D * S]; per (n, g) xhat = (x - mean) * rstd;
// with gw = g * w[c]: d x = rstd * (gw - mean(gw) - xhat * mean(gw * xhat));
// d w[c] = sum over n, s of g * xhat, d b[c] = sum of g
Tensor3 gn_backward(const at::Tensor &g, const at::Tensor &x, const at::Tensor &mean,
				   const at::Tensor &rstd, const std::optional<at::Tensor> &w, int64_t N, int64_t C,
				   int64_t HxW, int64_t group, std::array<bool, 3> mask)
{
	if (!is_float_neuron(g) || !is_float_neuron(x) || !is_float_neuron(mean) || !is_float_neuron(rstd) ||
	    g.sizes() != x.sizes() || group <= 0 || C % group != 0 || N * C * HxW != x.numel() || x.numel() == 0 ||
	    mean.numel() != N * group || rstd.numel() != N * group || !opt_ok(w, C))
		return declined;
	int64_t D = C / group;
	at::Tensor x4 = as_fp32(x).reshape({ N, group, D, HxW }), g4 = as_fp32(g).reshape({ N, group, D, HxW });
	at::Tensor mu = as_fp32(mean).reshape({ N, group, 1, 1 }), rs = as_fp32(rstd).reshape({ N, group, 1, 1 });
	at::Tensor xhat = x4.sub(mu).mul(rs);
	at::Tensor dx, dw, db;
	if (mask[0]) {
		at::Tensor gw = opt(w) ? g4.mul(as_fp32(*w).reshape({ 1, group, D, 1 })) : g4;
		double m = (double)(D * HxW);
		at::Tensor a = gw.sum({ 2, 3 }, true).div(m);
		at::Tensor c = gw.mul(xhat).sum({ 2, 3 }, true).div(m);
		dx = gw.sub(a).sub(xhat.mul(c)).mul(rs).to(x.scalar_type()).view(x.sizes());
	}
	at::ScalarType pdt = opt(w) ? w->scalar_type() : x.scalar_type();
	if (mask[1])
		dw = g4.mul(xhat).sum({ 0, 3 }).reshape({ C }).to(pdt);
	if (mask[2])
		db = g4.sum({ 0, 3 }).reshape({ C }).to(pdt);
	return { dx, dw, db };
}


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
	bool ok = grad_pair(g, x) && is_float_neuron(mean) && is_float_neuron(rstd) && N > 0 && x.numel() % N == 0 &&
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
		dx = cast_back(gx.sub(a).sub(xhat.mul(c)).mul(rs).view(x.sizes()), x.scalar_type());
	}
	if (mask[1] && has_w)
		dw = cast_back(g2.mul(xhat).sum(0), w->scalar_type()).view(w->sizes());
	if (mask[2] && b && b->defined())
		db = cast_back(g2.sum(0), b->scalar_type()).view(b->sizes());
	return { dx, dw, db };
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_NORM)

}  // namespace neuron
