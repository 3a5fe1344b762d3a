// aten/nn/conv.cpp -- convolution on `neuron`: convolution_overrideable (the
// slot PyTorch's convolution dispatches to for a PrivateUse1 device) and its
// backward, 1-D to 3-D, with stride, padding, dilation and groups.
//
// im2col by views: the zero-padded input unfolded once per spatial dim
// (window taps last, dilation as a strided slice of each window), brought
// into [groups, N x outputs, channels x taps] by one DMA program, then one
// batched matmul on TensorE.  A depthwise convolution (one input and one
// output channel per group: Mamba's and the SSM hybrids' short causal
// convolution) has only the taps to contract, so it multiplies and adds on
// VectorE instead.  The backward is the same algebra: the weight's gradient
// is cols^T x grad, the input's gradient grad x W scattered back tap by tap
// (col2im) with in-place adds into the padded input's strided windows.
// 3-D convolutions the same way; a transposed convolution's forward as the
// direct convolution it is the adjoint of (its backward runs on the CPU,
// counted: the CPU has no convolution_overrideable, its at::convolution
// runs).
#include "aten/composite.h"
#include "ops.def"

#include <ATen/ops/convolution_backward_overrideable_ops.h>
#include <ATen/ops/convolution_overrideable_ops.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/flip.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

namespace neuron {

namespace {

struct Conv {
	int64_t nd = 0, N = 0, Cin = 0, Cout = 0, g = 1, cg = 0, og = 0, S = 1, K = 1;
	std::vector<int64_t> k, s, p, d, in, out;
	bool depthwise() const { return cg == 1 && og == 1; }
};

int64_t at_or_last(at::IntArrayRef v, int64_t i, int64_t dflt)
{
	return v.empty() ? dflt : v[std::min<int64_t>(i, (int64_t)v.size() - 1)];
}

// the geometry of a covered call; false: not covered (the CPU runs it)
bool geometry(const at::Tensor &x, const at::Tensor &w, at::IntArrayRef stride, at::IntArrayRef padding,
	      at::IntArrayRef dilation, bool transposed, int64_t groups, Conv &c)
{
	c.nd = x.dim() - 2;
	if (transposed || c.nd < 1 || c.nd > 3 || w.dim() != x.dim() || !is_float_neuron(x) ||
	    !is_float_neuron(w) || x.scalar_type() != w.scalar_type() || x.device() != w.device() || groups < 1)
		return false;
	c.N = x.size(0);
	c.Cin = x.size(1);
	c.Cout = w.size(0);
	c.g = groups;
	TORCH_CHECK(c.Cin % groups == 0 && c.Cout % groups == 0 && w.size(1) * groups == c.Cin,
		    "neuron: convolution: input channels ", c.Cin, ", weight ", w.sizes(), " and groups ", groups,
		    " do not agree");
	c.cg = c.Cin / groups;
	c.og = c.Cout / groups;
	for (int64_t i = 0; i < c.nd; i++) {
		c.k.push_back(w.size(2 + i));
		c.s.push_back(at_or_last(stride, i, 1));
		c.p.push_back(at_or_last(padding, i, 0));
		c.d.push_back(at_or_last(dilation, i, 1));
		c.in.push_back(x.size(2 + i));
		TORCH_CHECK(c.s[i] > 0 && c.d[i] > 0 && c.p[i] >= 0, "neuron: convolution: bad stride / dilation / padding");
		int64_t o = (c.in[i] + 2 * c.p[i] - c.d[i] * (c.k[i] - 1) - 1) / c.s[i] + 1;
		TORCH_CHECK(o > 0, "neuron: convolution: the kernel (", c.k[i], " taps, dilation ", c.d[i],
			    ") is larger than the padded input (", c.in[i] + 2 * c.p[i], ")");
		c.out.push_back(o);
		c.S *= o;
		c.K *= c.k[i];
	}
	return c.N > 0 && c.Cin > 0 && c.Cout > 0;
}

at::Tensor padded(const at::Tensor &x, const Conv &c)
{
	at::Tensor r = x;
	for (int64_t i = 0; i < c.nd; i++) {
		if (!c.p[i])
			continue;
		std::vector<int64_t> zs = r.sizes().vec();
		zs[2 + i] = c.p[i];
		at::Tensor z = at::zeros(zs, r.options());
		r = at::cat({ z, r, z }, 2 + i);
	}
	return r;
}

// [N, Cin, out..., k...]: every output position's window of taps (views)
at::Tensor windows(const at::Tensor &xp, const Conv &c)
{
	at::Tensor w = xp;
	for (int64_t i = 0; i < c.nd; i++)
		w = w.unfold(2 + i, c.d[i] * (c.k[i] - 1) + 1, c.s[i]);
	for (int64_t i = 0; i < c.nd; i++)
		if (c.d[i] > 1)
			w = w.slice(2 + c.nd + i, 0, std::nullopt, c.d[i]);
	return w;
}

std::vector<int64_t> cat_dims(std::initializer_list<int64_t> head, const std::vector<int64_t> &a,
			      const std::vector<int64_t> &b = {})
{
	std::vector<int64_t> r(head);
	r.insert(r.end(), a.begin(), a.end());
	r.insert(r.end(), b.begin(), b.end());
	return r;
}

// cols as [g, N * S, cg * K]: one DMA program gathers the windows
at::Tensor cols_matrix(const at::Tensor &cols, const Conv &c)
{
	at::Tensor c5 = cols.reshape(cat_dims({ c.N, c.g, c.cg }, c.out, c.k));
	std::vector<int64_t> perm{ 1, 0 };
	for (int64_t i = 0; i < c.nd; i++)
		perm.push_back(3 + i);
	perm.push_back(2);
	for (int64_t i = 0; i < c.nd; i++)
		perm.push_back(3 + c.nd + i);
	return c5.permute(perm).reshape({ c.g, c.N * c.S, c.cg * c.K });
}

// [N, Cout, out...] <-> [g, N * S, og]
at::Tensor grad_matrix(const at::Tensor &go, const Conv &c)
{
	at::Tensor g5 = go.reshape(cat_dims({ c.N, c.g, c.og }, c.out));
	std::vector<int64_t> perm{ 1, 0 };
	for (int64_t i = 0; i < c.nd; i++)
		perm.push_back(3 + i);
	perm.push_back(2);
	return g5.permute(perm).reshape({ c.g, c.N * c.S, c.og });
}

at::Tensor from_matrix(const at::Tensor &m, const Conv &c)
{
	at::Tensor r = m.view(cat_dims({ c.g, c.N }, c.out, { c.og }));
	std::vector<int64_t> perm{ 1, 0, 2 + c.nd };
	for (int64_t i = 0; i < c.nd; i++)
		perm.push_back(2 + i);
	return r.permute(perm).reshape(cat_dims({ c.N, c.Cout }, c.out));
}

// the weight as [C, 1 (x nd), k...] against windows [N, C, out..., k...]
at::Tensor depthwise_weight(const at::Tensor &w, const Conv &c)
{
	std::vector<int64_t> shape{ 1, c.Cin };
	for (int64_t i = 0; i < c.nd; i++)
		shape.push_back(1);
	shape.insert(shape.end(), c.k.begin(), c.k.end());
	return w.reshape(shape);
}

std::vector<int64_t> tap_dims(const Conv &c)
{
	std::vector<int64_t> r;
	for (int64_t i = 0; i < c.nd; i++)
		r.push_back(2 + c.nd + i);
	return r;
}

at::Tensor forward(const at::Tensor &x, const at::Tensor &w, const std::optional<at::Tensor> &bias, const Conv &c)
{
	at::Tensor cols = windows(padded(x, c), c);
	at::Tensor out;
	if (c.depthwise())
		out = cols.mul(depthwise_weight(w, c)).sum(tap_dims(c));
	else
		out = from_matrix(at::bmm(cols_matrix(cols, c), w.reshape({ c.g, c.og, c.cg * c.K }).transpose(1, 2)), c);
	if (bias && bias->defined()) {
		std::vector<int64_t> bs(2 + c.nd, 1);
		bs[1] = c.Cout;
		out = out.add(bias->reshape(bs));
	}
	return out.contiguous();
}

// A transposed convolution as the direct one it is the adjoint of: x with
// stride - 1 zeros between its elements, padded by dilation (k - 1) -
// padding on each side (output_padding more at the end; a negative pad
// crops), convolved at stride 1 with each group's weight [Cin, og, k...]
// turned into [Cout, cg, k...] and flipped in every spatial dim
at::Tensor transposed_forward(const at::Tensor &x, const at::Tensor &w, const std::optional<at::Tensor> &bias,
			      at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
			      at::IntArrayRef output_padding, int64_t groups)
{
	int64_t nd = x.dim() - 2;
	if (nd < 1 || nd > 3 || w.dim() != x.dim() || !is_float_neuron(x) || !is_float_neuron(w) ||
	    x.scalar_type() != w.scalar_type() || x.device() != w.device() || groups < 1 || x.size(1) != w.size(0) ||
	    x.size(1) % groups != 0 || x.size(0) == 0 || x.numel() == 0)
		return {};
	int64_t cg = x.size(1) / groups, og = w.size(1);
	at::Tensor xd = x;
	std::vector<int64_t> dl;
	for (int64_t i = 0; i < nd; i++) {
		int64_t s = at_or_last(stride, i, 1), p = at_or_last(padding, i, 0), d = at_or_last(dilation, i, 1);
		int64_t op = at_or_last(output_padding, i, 0), k = w.size(2 + i), in = x.size(2 + i);
		if (s < 1 || d < 1 || p < 0 || op < 0 || (op >= s && op >= d))
			return {};
		dl.push_back(d);
		if (s > 1) {
			std::vector<int64_t> shape = xd.sizes().vec();
			shape[2 + i] = (in - 1) * s + 1;
			at::Tensor z = at::zeros(shape, xd.options());
			z.slice(2 + i, 0, std::nullopt, s).copy_(xd);
			xd = z;
		}
		int64_t lo = d * (k - 1) - p, hi = lo + op;
		if (lo < 0)
			xd = xd.narrow(2 + i, -lo, xd.size(2 + i) + lo);
		if (hi < 0)
			xd = xd.narrow(2 + i, 0, xd.size(2 + i) + hi);
		std::vector<at::Tensor> parts;
		std::vector<int64_t> zs = xd.sizes().vec();
		if (lo > 0) {
			zs[2 + i] = lo;
			parts.push_back(at::zeros(zs, xd.options()));
		}
		parts.push_back(xd);
		if (hi > 0) {
			zs[2 + i] = hi;
			parts.push_back(at::zeros(zs, xd.options()));
		}
		if (parts.size() > 1)
			xd = at::cat(parts, 2 + i);
	}
	std::vector<int64_t> flip;
	for (int64_t i = 0; i < nd; i++)
		flip.push_back(2 + i);
	std::vector<int64_t> ws = w.sizes().vec();
	std::vector<int64_t> grouped{ groups, cg, og };
	grouped.insert(grouped.end(), ws.begin() + 2, ws.end());
	std::vector<int64_t> direct{ groups * og, cg };
	direct.insert(direct.end(), ws.begin() + 2, ws.end());
	at::Tensor wd = w.reshape(grouped).transpose(1, 2).reshape(direct).flip(flip).contiguous();
	Conv c;
	std::vector<int64_t> ones(nd, 1), zeros(nd, 0);
	if (!geometry(xd.contiguous(), wd, ones, zeros, dl, false, groups, c))
		return {};
	return forward(xd.contiguous(), wd, bias, c);
}

at::Tensor conv_forward(const at::Tensor &x, const at::Tensor &w, const std::optional<at::Tensor> &bias,
			c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
			bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups)
{
	auto st = C10_AS_INTARRAYREF_SLOW(stride), pd = C10_AS_INTARRAYREF_SLOW(padding),
	     dl = C10_AS_INTARRAYREF_SLOW(dilation), op = C10_AS_INTARRAYREF_SLOW(output_padding);
	int64_t gr = groups.guard_int(__FILE__, __LINE__);
	Conv c;
	int64_t cout = transposed ? w.size(1) * gr : w.size(0);
	bool bias_ok = !bias || !bias->defined() || (is_float_neuron(*bias) && bias->numel() == cout);
	if (bias_ok && transposed) {
		at::Tensor r = transposed_forward(x, w, bias, st, pd, dl, op, gr);
		if (r.defined())
			return r;
	}
	if (bias_ok && geometry(x, w, st, pd, dl, transposed, gr, c))
		return forward(x, w, bias, c);
	count_fallback("aten::convolution_overrideable");
	std::optional<at::Tensor> b = bias && bias->defined() ? std::optional<at::Tensor>(bias->cpu()) : std::nullopt;
	return at::convolution(x.cpu(), w.cpu(), b, st, pd, dl, transposed, op, gr).to(x.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
conv_backward(const at::Tensor &go, const at::Tensor &x, const at::Tensor &w, c10::SymIntArrayRef stride,
	      c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
	      c10::SymIntArrayRef output_padding, c10::SymInt groups, std::array<bool, 3> mask)
{
	auto st = C10_AS_INTARRAYREF_SLOW(stride), pd = C10_AS_INTARRAYREF_SLOW(padding),
	     dl = C10_AS_INTARRAYREF_SLOW(dilation), op = C10_AS_INTARRAYREF_SLOW(output_padding);
	int64_t gr = groups.guard_int(__FILE__, __LINE__);
	Conv c;
	if (!geometry(x, w, st, pd, dl, transposed, gr, c) || !is_float_neuron(go) ||
	    go.scalar_type() != x.scalar_type()) {
		count_fallback("aten::convolution_backward_overrideable");
		std::vector<int64_t> bias_sizes{ w.size(transposed ? 1 : 0) * (transposed ? gr : 1) };
		auto r = at::convolution_backward(go.cpu(), x.cpu(), w.cpu(), bias_sizes, st, pd, dl, transposed, op, gr,
						  mask);
		auto back = [&](const at::Tensor &t) { return t.defined() ? t.to(x.device()) : t; };
		return { back(std::get<0>(r)), back(std::get<1>(r)), back(std::get<2>(r)) };
	}
	at::Tensor gi, gw, gb;
	std::vector<int64_t> sdims{ 0 };
	for (int64_t i = 0; i < c.nd; i++)
		sdims.push_back(2 + i);
	if (mask[2])
		gb = go.sum(sdims);
	at::Tensor xp = padded(x, c);
	at::Tensor cols = windows(xp, c);
	at::Tensor gm, wm;
	if (!c.depthwise()) {
		gm = grad_matrix(go, c);                                  // [g, N S, og]
		wm = w.reshape({ c.g, c.og, c.cg * c.K });                // [g, og, cg K]
	}
	if (mask[1]) {
		if (c.depthwise()) {
			std::vector<int64_t> gshape = go.sizes().vec();
			for (int64_t i = 0; i < c.nd; i++)
				gshape.push_back(1);
			at::Tensor prod = cols.mul(go.reshape(gshape));   // [N, C, out..., k...]
			gw = prod.sum(sdims).reshape(w.sizes());
		} else {
			at::Tensor a = cols_matrix(cols, c);             // [g, N S, cg K]
			gw = at::bmm(a.transpose(1, 2), gm)               // [g, cg K, og]
				     .transpose(1, 2)
				     .reshape(w.sizes());
		}
	}
	if (mask[0]) {
		at::Tensor dcols;   // [N, Cin, out..., k...]
		if (c.depthwise()) {
			std::vector<int64_t> gshape = go.sizes().vec();
			for (int64_t i = 0; i < c.nd; i++)
				gshape.push_back(1);
			dcols = go.reshape(gshape).mul(depthwise_weight(w, c));
		} else {
			at::Tensor m = at::bmm(gm, wm);                   // [g, N S, cg K]
			at::Tensor r = m.view(cat_dims({ c.g, c.N }, c.out, cat_dims({ c.cg }, c.k)));
			std::vector<int64_t> perm{ 1, 0, 2 + c.nd };
			for (int64_t i = 0; i < c.nd; i++)
				perm.push_back(2 + i);
			for (int64_t i = 0; i < c.nd; i++)
				perm.push_back(3 + c.nd + i);
			dcols = r.permute(perm).reshape(cat_dims({ c.N, c.Cin }, c.out, c.k));
		}
		// col2im: each tap's gradient added into the padded input's
		// positions that tap read
		at::Tensor gxp = at::zeros(xp.sizes(), x.options());
		std::vector<int64_t> tap(c.nd, 0);
		for (int64_t t = 0; t < c.K; t++) {
			int64_t rest = t;
			for (int64_t i = c.nd - 1; i >= 0; i--) {
				tap[i] = rest % c.k[i];
				rest /= c.k[i];
			}
			at::Tensor dst = gxp, src = dcols;
			for (int64_t i = 0; i < c.nd; i++) {
				int64_t start = tap[i] * c.d[i];
				dst = dst.slice(2 + i, start, start + c.s[i] * (c.out[i] - 1) + 1, c.s[i]);
			}
			for (int64_t i = c.nd - 1; i >= 0; i--)
				src = src.select(2 + c.nd + i, tap[i]);
			dst.add_(src);
		}
		gi = gxp;
		for (int64_t i = 0; i < c.nd; i++)
			gi = gi.narrow(2 + i, c.p[i], c.in[i]);
		gi = gi.contiguous();
	}
	return { gi, gw, gb };
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_CONV)

}  // namespace neuron
