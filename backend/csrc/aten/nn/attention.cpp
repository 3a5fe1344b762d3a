// aten/nn/attention.cpp -- scaled_dot_product_attention on the device.
// PyTorch routes SDPA for a PrivateUse1 device through _fused_sdp_choice;
// choosing the "overrideable" backend sends it to
// _scaled_dot_product_fused_attention_overrideable, implemented here from
// the native kernels: q @ k^T (TensorE), scale, causal / additive / boolean
// mask, softmax (VectorE + ScalarE), dropout, @ v, and its backward
// (_scaled_dot_product_fused_attention_overrideable_backward).
// Without dropout the forward is one program, the flash-attention tile loop
// of programs/attention.c (scores never leave SBUF / PSUM, grouped-query
// heads read in place); the backward, and the forward with dropout or
// shapes that kernel does not take, run the steps above as one program
// each (grouped-query attention then repeats the k/v heads).
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/linalg/matmul.h"
#include "ops.def"

#include <ATen/ExpandUtils.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_ops.h>
#include <ATen/ops/_scaled_dot_product_fused_attention_overrideable_backward_ops.h>
#include <ATen/ops/_scaled_dot_product_fused_attention_overrideable_ops.h>
#include <ATen/ops/_safe_softmax.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <map>
#include <mutex>
#include <tuple>
#include <limits>

namespace neuron {

namespace {

constexpr int64_t kOverrideable = 4;   // sdp::SDPBackend::overrideable
constexpr int64_t kMath = 0;

bool sdpa_covered(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, double dropout_p)
{
	for (const at::Tensor *t : { &q, &k, &v })
		if (!t->is_privateuseone() || isa_dtype_of(t->scalar_type()) == ISA_DT_INVALID || t->dim() < 2 ||
		    t->scalar_type() != q.scalar_type())
			return false;
	return dropout_p >= 0.0 && dropout_p < 1.0 && q.dim() == k.dim() && k.dim() == v.dim();
}

}  // namespace

int64_t fused_sdp_choice(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
			 const std::optional<at::Tensor> &mask, double dropout_p, bool is_causal,
			 std::optional<double> scale, bool enable_gqa)
{
	bool heads_ok = q.dim() < 3 || k.size(-3) == q.size(-3) ||
			(enable_gqa && k.size(-3) > 0 && q.size(-3) % k.size(-3) == 0);
	return sdpa_covered(q, k, v, dropout_p) && heads_ok ? kOverrideable : kMath;
}

namespace {

// k or v with each of its heads repeated `rep` times (GQA)
at::Tensor repeat_heads(const at::Tensor &t, int64_t rep)
{
	if (rep == 1)
		return t;
	std::vector<int64_t> sz = t.sizes().vec();
	int64_t h = sz[sz.size() - 3];
	at::Tensor e = t.unsqueeze(-3);
	std::vector<int64_t> ex = e.sizes().vec();
	ex[ex.size() - 3] = rep;
	e = e.expand(ex);
	sz[sz.size() - 3] = h * rep;
	return materialize(e, e.sizes(), t.scalar_type()).view(sz);
}

// [L, S] bool, true where key j is hidden from query i (j > i, top-left
// aligned as PyTorch), built on the device once per (L, S, device) and kept:
// a constant, like the masks a compiled graph embeds
at::Tensor causal_mask(int64_t L, int64_t S, const at::Tensor &like)
{
	static std::mutex lock;
	static std::map<std::tuple<int64_t, int64_t, int>, at::Tensor> cache;
	auto key = std::make_tuple(L, S, (int)like.device().index());
	if (capturing()) {   // a compiled graph makes its own
		auto fopt = like.options().dtype(at::kFloat);
		return at::arange(S, fopt).view({ 1, S }).gt(at::arange(L, fopt).view({ L, 1 }));
	}
	{
		std::lock_guard<std::mutex> g(lock);
		auto it = cache.find(key);
		if (it != cache.end())
			return it->second;
	}
	auto fopt = like.options().dtype(at::kFloat);
	at::Tensor i = at::arange(L, fopt).view({ L, 1 }), j = at::arange(S, fopt).view({ 1, S });
	at::Tensor m = j.gt(i);
	std::lock_guard<std::mutex> g(lock);
	if (cache.size() > 64)   // bounded: shapes of a long-running process come and go
		cache.clear();
	cache[key] = m;
	return m;
}

// [lead..., m, k] @ [lead..., k, n] with the lead dims flattened into one
// batch (operands may be transposed views), the result at out_dt
at::Tensor batched_matmul(const at::Tensor &a, const at::Tensor &b, at::ScalarType out_dt)
{
	std::vector<int64_t> shape(a.sizes().begin(), a.sizes().end() - 2);
	int64_t nb = c10::multiply_integers(shape);
	shape.push_back(a.size(-2));
	shape.push_back(b.size(-1));
	at::Tensor a3 = a.reshape({ nb, a.size(-2), a.size(-1) }), b3 = b.reshape({ nb, b.size(-2), b.size(-1) });
	return matmul_to(a3, b3, out_dt).view(shape);
}

// The attention probabilities at fp32, [lead..., L, S]: softmax(scale *
// q @ k^T + mask) with k already shaped as q (heads_like_q).  Scores and
// softmax at fp32 (TensorE accumulates in fp32 PSUM).  The backward
// recomputes them from q and k, as flash attention's backward does, rather
// than keeping an L x S matrix alive between the passes.
at::Tensor attention_probs(const at::Tensor &q, const at::Tensor &kk, const std::optional<at::Tensor> &bias,
			   bool is_causal, double sc)
{
	int64_t L = q.size(-2), S = kk.size(-2);
	at::Tensor scores = batched_matmul(q, kk.transpose(-2, -1), at::kFloat).mul(sc);
	if (is_causal)
		scores = scores.masked_fill(causal_mask(L, S, q), -std::numeric_limits<double>::infinity());
	if (bias && bias->defined()) {
		if (bias->scalar_type() == at::kBool) {   // true: take part
			at::Tensor ninf = at::empty({}, scores.options());
			TORCH_CHECK(native_fill(ninf, -std::numeric_limits<double>::infinity()), "neuron: sdpa fill");
			scores = at::where(*bias, scores, ninf);
		} else
			scores = scores.add(*bias);
	}
	// a fully masked query row gets zeros, as PyTorch's SDPA (_safe_softmax)
	return at::_safe_softmax(scores, -1);
}

// Attention dropout's mask, scaled by 1 / (1 - p): drawn from a generator
// seeded with `seed` (64 bits of the device generator, drawn in the
// forward), so the backward regenerates the forward's mask from the seed
// alone, as flash attention does from its philox seed.
at::Tensor dropout_keep(const at::Tensor &p, uint64_t seed, double dropout_p)
{
	at::Generator g = new_generator(p.device().index());
	g.set_current_seed(seed);
	at::Tensor u = at::empty(p.sizes(), p.options().dtype(at::kFloat));
	u.uniform_(0.0, 1.0, g);
	return u.lt(1.0 - dropout_p).to(at::kFloat).mul(1.0 / (1.0 - dropout_p));
}

// k and v shaped as q: their heads repeated to q's (grouped-query
// attention), batch dims broadcast to q's (a view)
std::pair<at::Tensor, at::Tensor> heads_like_q(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v)
{
	at::Tensor kk = k, vv = v;
	if (q.dim() >= 3 && k.size(-3) != q.size(-3)) {
		TORCH_CHECK(k.size(-3) > 0 && q.size(-3) % k.size(-3) == 0 && v.size(-3) == k.size(-3),
			    "neuron: sdpa: ", q.size(-3), " query heads over ", k.size(-3), " key heads and ", v.size(-3),
			    " value heads");
		kk = repeat_heads(k, q.size(-3) / k.size(-3));
		vv = repeat_heads(v, q.size(-3) / v.size(-3));
	}
	auto lead = q.sizes().slice(0, q.dim() - 2);
	auto like_q = [&](const at::Tensor &t) {
		std::vector<int64_t> sz(lead.begin(), lead.end());
		sz.push_back(t.size(-2));
		sz.push_back(t.size(-1));
		return t.sizes().slice(0, t.dim() - 2).equals(lead) ? t : t.expand(sz);
	};
	return { like_q(kk), like_q(vv) };
}

// a gradient of repeated heads summed back onto the `heads` heads it came from
at::Tensor fold_heads(const at::Tensor &g, int64_t heads)
{
	int64_t h = g.size(-3);
	if (h == heads)
		return g;
	std::vector<int64_t> sz = g.sizes().vec();
	sz[sz.size() - 3] = heads;
	sz.insert(sz.end() - 2, h / heads);
	return g.reshape(sz).sum(-3);
}

// NEURON_SIM_FUSION=0 (the graph compiler's switch) runs attention as its
// steps, one program each, as before the fused kernel: for comparisons
bool fused_off()
{
	const char *v = std::getenv("NEURON_SIM_FUSION");
	return v && std::string(v) == "0";
}

// t as [batch, heads, rows, d] (leading dims of 1 added)
at::Tensor as4(const at::Tensor &t)
{
	at::Tensor r = t;
	while (r.dim() < 4)
		r = r.unsqueeze(0);
	return r;
}

// a tensor's (batch, head, row) element strides, its last dim made unit-stride
void attention_strides(at::Tensor &t, int64_t s[3])
{
	if (t.size(3) > 1 && t.stride(3) != 1)
		t = t.contiguous();
	for (int i = 0; i < 3; i++)
		s[i] = t.size(i) == 1 ? 0 : t.stride(i);
}

// The forward as one flash-attention program (programs/attention.c);
// undefined when that kernel does not take the operands (the caller runs
// the steps one program each).
at::Tensor fused_attention(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
			   const std::optional<at::Tensor> &bias, bool is_causal, double sc)
{
	if (q.dim() > 4 || q.dim() < 2 || k.size(-1) != q.size(-1) || v.size(-1) != q.size(-1) ||
	    v.size(-2) != k.size(-2) || q.numel() == 0 || k.numel() == 0)
		return {};
	at::Tensor q4 = as4(q), k4 = as4(k), v4 = as4(v);
	int64_t B = q4.size(0), H = q4.size(1), L = q4.size(2), D = q4.size(3), S = k4.size(2), KH = k4.size(1);
	if (v4.size(1) != KH || KH == 0 || H % KH || (k4.size(0) != B && k4.size(0) != 1) || v4.size(0) != k4.size(0))
		return {};
	k4 = k4.expand({ B, KH, S, D });
	v4 = v4.expand({ B, KH, S, D });
	nk_attention at{};
	at.dtype = isa_dtype_of(q.scalar_type());
	at.batch = (uint64_t)B;
	at.heads = (uint64_t)H;
	at.kv_heads = (uint64_t)KH;
	at.l = (uint64_t)L;
	at.s = (uint64_t)S;
	at.d = (uint64_t)D;
	at.scale = (float)sc;
	at.causal = is_causal;
	attention_strides(q4, at.q_stride);
	attention_strides(k4, at.k_stride);
	attention_strides(v4, at.v_stride);
	at::Tensor m;
	if (bias && bias->defined()) {
		if (!bias->is_privateuseone() || !at::is_expandable_to(bias->sizes(), { B, H, L, S }))
			return {};
		at.mask_dtype = bias->scalar_type() == at::kBool ? ISA_DT_bool : isa_dtype_of(bias->scalar_type());
		if (at.mask_dtype == ISA_DT_INVALID)
			return {};
		m = bias->expand({ B, H, L, S });
		attention_strides(m, at.mask_stride);
		at.mask_elems = (uint64_t)extent_of(m);
	}
	at.q_elems = (uint64_t)extent_of(q4);
	at.k_elems = (uint64_t)extent_of(k4);
	at.v_elems = (uint64_t)extent_of(v4);
	if (!nk_attention_covered(isa_target_from_name(nsim_target_name()), &at))
		return {};
	int dev = q.device().index();
	Program prog = cached_program("attention", at, dev, nk_attention_program);
	at::Tensor out = at::empty({ B, H, L, D }, q.options());
	std::vector<Binding> in{ { "q", &q4 }, { "k", &k4 }, { "v", &v4 } };
	if (m.defined())
		in.emplace_back("mask", &m);
	run_program(prog, dev, "aten::_scaled_dot_product_fused_attention_overrideable", in, { { "out", &out } });
	return out.view(q.sizes());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor, at::Tensor>
sdpa_overrideable(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
		  const std::optional<at::Tensor> &bias, double dropout_p, bool is_causal,
		  bool return_debug_mask, std::optional<double> scale)
{
	TORCH_CHECK(sdpa_covered(q, k, v, dropout_p), "neuron: scaled_dot_product_attention: q, k, v must be ",
		    "float neuron tensors of one dtype, and dropout_p in [0, 1)");
	int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1);
	double sc = scale.value_or(1.0 / std::sqrt((double)E));
	at::Tensor none = at::empty({ 0 }, q.options());
	if (dropout_p == 0.0 && !fused_off()) {
		at::Tensor out = fused_attention(q, k, v, bias, is_causal, sc);
		if (out.defined())
			return { out, none, none, none, c10::SymInt(L), c10::SymInt(S), none, none, none };
	}
	auto [kk, vv] = heads_like_q(q, k, v);
	// the probabilities are rounded to v's dtype for the second product, as
	// CPU PyTorch's flash attention does
	at::Tensor p = attention_probs(q, kk, bias, is_causal, sc), seed = at::empty({ 0 }, q.options());
	if (dropout_p > 0.0) {
		uint64_t s = draw_seed(std::nullopt, q.device().index());
		seed = at::full({ 1 }, (int64_t)s, at::TensorOptions().dtype(at::kLong));
		p = p.mul(dropout_keep(p, s, dropout_p));
	}
	at::Tensor out = batched_matmul(p.to(v.scalar_type()), vv, v.scalar_type());
	return { out, none, none, none, c10::SymInt(L), c10::SymInt(S), seed, none, none };
}

// The backward of the forward above, from the recomputed probabilities P:
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(P * dP)),
//   dQ = scale * dS K,  dK = scale * dS^T Q,  d(additive mask) = dS,
// at fp32 (TensorE's PSUM), rounded once to the inputs' dtype; repeated
// (GQA) heads' gradients summed back onto their key / value heads.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>
sdpa_overrideable_backward(const at::Tensor &grad_out, const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
			   const at::Tensor &bias, std::array<bool, 4> mask, const at::Tensor &out,
			   const at::Tensor &logsumexp, const at::Tensor &cum_seq_q, const at::Tensor &cum_seq_k,
			   c10::SymInt max_q, c10::SymInt max_k, double dropout_p, bool is_causal,
			   const at::Tensor &philox_seed, const at::Tensor &philox_offset, std::optional<double> scale)
{
	TORCH_CHECK(sdpa_covered(q, k, v, dropout_p) && grad_out.scalar_type() == q.scalar_type() &&
			    grad_out.is_privateuseone(),
		    "neuron: scaled_dot_product_attention backward: q, k, v and the gradient must be float neuron ",
		    "tensors of one dtype");
	double sc = scale.value_or(1.0 / std::sqrt((double)q.size(-1)));
	auto [kk, vv] = heads_like_q(q, k, v);
	std::optional<at::Tensor> b;
	if (bias.defined())
		b = bias;
	at::Tensor p = attention_probs(q, kk, b, is_causal, sc);   // fp32
	at::Tensor keep;
	if (dropout_p > 0.0) {
		TORCH_CHECK(philox_seed.numel() == 1, "neuron: sdpa backward with dropout needs the forward's seed");
		keep = dropout_keep(p, (uint64_t)philox_seed.to(at::kCPU).item<int64_t>(), dropout_p);
	}
	// with dropout the forward multiplied v by pk = p * keep: dV = pk^T dO,
	// and dS = p * (dP keep - rowsum(pk * dP))
	at::Tensor pk = keep.defined() ? p.mul(keep) : p;
	at::ScalarType dt = q.scalar_type(), f = at::kFloat;
	at::Tensor go = grad_out;
	at::Tensor dq, dk, dv, dbias;
	if (mask[2]) {
		at::Tensor pd = pk.to(v.scalar_type());   // what the forward multiplied v by
		dv = fold_heads(batched_matmul(pd.transpose(-2, -1), go, dt), v.dim() >= 3 ? v.size(-3) : 1)
			     .sum_to_size(v.sizes());   // broadcast batch dims summed back
	}
	if (mask[0] || mask[1] || mask[3]) {
		at::Tensor dp = batched_matmul(go, vv.transpose(-2, -1), f);
		at::Tensor dpk = keep.defined() ? dp.mul(keep) : dp;
		at::Tensor ds = p.mul(dpk.sub(pk.mul(dp).sum(-1, true)));
		if (mask[3] && bias.defined() && bias.scalar_type() != at::kBool)
			dbias = ds.sum_to_size(bias.sizes()).to(bias.scalar_type());
		at::Tensor dss = ds.mul(sc).to(dt);
		if (mask[0])
			dq = batched_matmul(dss, kk, dt);
		if (mask[1])
			dk = fold_heads(batched_matmul(dss.transpose(-2, -1), q, dt), k.dim() >= 3 ? k.size(-3) : 1)
				     .sum_to_size(k.sizes());
	}
	return { dq, dk, dv, dbias };
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_ATTENTION)

}  // namespace neuron

// scaled_dot_product_attention picks its backend through this stub
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &neuron::fused_sdp_choice)
}
