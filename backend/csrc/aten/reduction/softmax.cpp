// aten/reduction/softmax.cpp -- row-wise ops that keep the row: softmax,
// log_softmax and _safe_softmax over one dim, their backwards, and
// layer_norm over the trailing dims.  The row is brought last and made
// contiguous by a DMA program when it is not already, then the row kernel
// runs (programs/rows.c, through rows.h); everything it does not cover goes
// to the counted CPU fallback.
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/reduction/rows.h"
#include "ops.def"

#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_safe_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

namespace neuron {

namespace {

// softmax / log_softmax over `dim`: computed with dim last, put back
at::Tensor softmax_like(const char *name, int kop, const at::Tensor &self, int64_t dim, bool half_to_float)
{
	if (!float_device(self) || (half_to_float && self.scalar_type() == at::kFloat))
		return {};
	dim = self.dim() ? at::maybe_wrap_dim(dim, self.dim()) : 0;
	int64_t cols = self.dim() ? self.size(dim) : 1;
	if (!fits(kop, cols))
		return {};
	at::ScalarType odt = half_to_float ? at::kFloat : self.scalar_type();
	at::Tensor xr = rows_view(self, dim);
	nk_rows op{};
	op.op = kop;
	op.in_dtype = isa_dtype_of(self.scalar_type());
	op.out_dtype = isa_dtype_of(odt);
	op.cols = (uint64_t)cols;
	op.rows = (uint64_t)(xr.numel() / cols);
	at::Tensor out = at::empty(xr.sizes(), xr.options().dtype(odt));
	run_rows(name, op, xr, {}, { { "out", &out } });
	if (self.dim() == 0)
		return out.reshape({});
	out = out.movedim(-1, dim);
	return out.is_contiguous() ? out : materialize(out, out.sizes(), odt);
}

at::Tensor softmax(const at::Tensor &self, int64_t dim, bool half_to_float)
{
	at::Tensor out = softmax_like("aten::_softmax", NK_ROW_SOFTMAX, self, dim, half_to_float);
	if (out.defined())
		return out;
	return declined;
}

at::Tensor log_softmax(const at::Tensor &self, int64_t dim, bool half_to_float)
{
	at::Tensor out = softmax_like("aten::_log_softmax", NK_ROW_LOG_SOFTMAX, self, dim, half_to_float);
	if (out.defined())
		return out;
	return declined;
}

// softmax that gives 0 (not NaN) for a row with every entry -inf: what
// scaled_dot_product_attention uses for fully masked query rows
at::Tensor safe_softmax(const at::Tensor &self, int64_t dim, std::optional<at::ScalarType> dtype)
{
	at::Tensor x = dtype ? self.to(*dtype) : self;
	at::Tensor out = softmax_like("aten::_safe_softmax", NK_ROW_SAFE_SOFTMAX, x, dim, false);
	if (out.defined())
		return out;
	return declined;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(const at::Tensor &x, at::IntArrayRef shape,
							  const std::optional<at::Tensor> &w0,
							  const std::optional<at::Tensor> &b0, double eps)
{
	TORCH_CHECK(!shape.empty(), "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least "
				    "one element, but got normalized_shape = ", shape);   // CPU's check, before any other
	// a weight without a bias (LayerNorm(bias=False): MPT) or the reverse:
	// the missing one as zeros / ones, which leave every value unchanged
	std::optional<at::Tensor> w = w0, b = b0;
	if ((w && w->defined()) != (b && b->defined()) && x.is_privateuseone()) {
		const at::Tensor &have = (w && w->defined()) ? *w : *b;
		if (have.is_privateuseone()) {
			if (!(w && w->defined()))
				w = at::ones_like(have);
			else
				b = at::zeros_like(have);
		}
	}
	bool has_w = w && w->defined(), has_b = b && b->defined();
	int64_t axis = x.dim() - (int64_t)shape.size(), cols = 1;
	for (int64_t s : shape)
		cols *= s;
	bool ok = float_device(x) && axis >= 0 && has_w == has_b && fits(NK_ROW_LAYER_NORM, cols, has_w) &&
		  (!has_w || (w->scalar_type() == x.scalar_type() && b->scalar_type() == x.scalar_type() &&
			      w->numel() == cols && b->numel() == cols && w->is_privateuseone() && b->is_privateuseone()));
	if (ok) {
		at::Tensor xc = materialize(x, x.sizes(), x.scalar_type());
		nk_rows op{};
		op.op = NK_ROW_LAYER_NORM;
		op.in_dtype = op.out_dtype = isa_dtype_of(x.scalar_type());
		op.cols = (uint64_t)cols;
		op.rows = (uint64_t)(x.numel() / cols);
		op.eps = (float)eps;
		op.affine = has_w;
		std::vector<int64_t> sshape(x.sizes().begin(), x.sizes().begin() + axis);
		sshape.resize(x.dim(), 1);
		at::Tensor out = at::empty(x.sizes(), x.options()), mean = at::empty(sshape, x.options()),
			   rstd = at::empty(sshape, x.options());
		if (has_w) {
			at::Tensor wc = materialize(w->reshape({ cols }), { cols }, x.scalar_type()),
				   bc = materialize(b->reshape({ cols }), { cols }, x.scalar_type());
			run_rows("aten::native_layer_norm", op, xc, { { "w", &wc }, { "b", &bc } },
				 { { "out", &out }, { "mean", &mean }, { "rstd", &rstd } });
		} else {
			run_rows("aten::native_layer_norm", op, xc, {}, { { "out", &out }, { "mean", &mean }, { "rstd", &rstd } });
		}
		return { out, mean, rstd };
	}
	return declined;
}

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
	return cast_back(r, in_dt);
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

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_SOFTMAX)

}  // namespace neuron
