// neuron_attention.cpp -- scaled_dot_product_attention on the device.
// PyTorch routes SDPA for a PrivateUse1 device through _fused_sdp_choice;
// choosing the "overrideable" backend sends it to
// _scaled_dot_product_fused_attention_overrideable, implemented here from
// the native kernels: q @ k^T (TensorE), scale, causal / additive / boolean
// mask, softmax (VectorE + ScalarE), @ v.  Grouped-query attention (fewer
// k/v heads) repeats the k/v heads.  Not fused into one program yet: each
// step is its own program on the device timeline.
#include "neuron_kernels.h"
#include "neuron_ops.h"

#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_safe_softmax.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include <cmath>
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
	return dropout_p == 0.0 && q.dim() == k.dim() && k.dim() == v.dim();
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

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor, at::Tensor>
sdpa_overrideable(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
		  const std::optional<at::Tensor> &bias, double dropout_p, bool is_causal,
		  bool return_debug_mask, std::optional<double> scale)
{
	TORCH_CHECK(sdpa_covered(q, k, v, dropout_p), "neuron: scaled_dot_product_attention: q, k, v must be ",
		    "float neuron tensors of one dtype, and dropout is not supported");
	int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1);
	double sc = scale.value_or(1.0 / std::sqrt((double)E));
	at::Tensor kk = k, vv = v;
	if (q.dim() >= 3 && k.size(-3) != q.size(-3)) {
		TORCH_CHECK(k.size(-3) > 0 && q.size(-3) % k.size(-3) == 0, "neuron: sdpa: ", q.size(-3),
			    " query heads over ", k.size(-3), " key heads");
		kk = repeat_heads(k, q.size(-3) / k.size(-3));
		vv = repeat_heads(v, q.size(-3) / v.size(-3));
	}
	// scores and softmax at fp32 (TensorE accumulates in fp32 PSUM; the
	// probabilities are rounded to v's dtype for the second product, as CPU
	// PyTorch's flash attention does)
	std::vector<int64_t> lead(q.sizes().begin(), q.sizes().end() - 2);
	int64_t nb = c10::multiply_integers(lead);
	std::vector<int64_t> sshape = lead;
	sshape.push_back(L);
	sshape.push_back(S);
	at::Tensor scores;
	if (kk.sizes().slice(0, kk.dim() - 2).equals(lead)) {
		at::Tensor q3 = q.reshape({ nb, L, E }), k3 = kk.reshape({ nb, S, E }).transpose(1, 2);
		scores = matmul_to(q3, k3, at::kFloat).view(sshape).mul(sc);
	} else {   // broadcast batch dims: PyTorch's matmul, then fp32
		scores = at::matmul(q, kk.transpose(-2, -1)).to(at::kFloat).mul(sc);
	}
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
	at::Tensor out = at::matmul(at::_safe_softmax(scores, -1).to(v.scalar_type()), vv);
	at::Tensor none = at::empty({ 0 }, q.options());
	return { out, none, none, none, c10::SymInt(L), c10::SymInt(S), none, none, none };
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_ATTENTION)

}  // namespace neuron

// scaled_dot_product_attention picks its backend through this stub
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &neuron::fused_sdp_choice)
}
