// aten/linalg/matmul.cpp -- matrix products on TensorE: mm, bmm, addmm (and so
// linear and matmul, which PyTorch decomposes into them), baddbmm, addbmm,
// trace and the fp8 _scaled_grouped_mm of MoE layers.  One generated
// program per (shapes, strides, dtype); operands may be transposed views
// (x @ W.t() reads W's rows and turns them round on TensorE).
#include "aten/linalg/matmul.h"
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/composite.h"
#include "ops.def"

#include <ATen/native/CPUFallback.h>
#include <ATen/ops/addbmm_ops.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/baddbmm_ops.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/trace_ops.h>
#include <ATen/ops/_scaled_grouped_mm_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace neuron {

namespace {

// element strides (batch, row, col) of a [batch,] rows x cols operand;
// a size-1 dim's stride does not matter, 1 keeps the kernel's layout test simple
bool matrix_strides(const at::Tensor &t, int64_t s[3])
{
	int64_t d = t.dim();
	s[0] = d == 3 ? (t.size(0) == 1 ? 0 : t.stride(0)) : 0;
	s[1] = t.size(d - 2) == 1 ? 1 : t.stride(d - 2);
	s[2] = t.size(d - 1) == 1 ? 1 : t.stride(d - 1);
	return s[0] >= 0 && s[1] >= 0 && s[2] >= 0 && (s[1] == 1 || s[2] == 1);
}

// The weight layout cache.  x @ W.t() (linear) reads W [N, K] with K along
// the free dim, so every call would turn W round on TensorE.  Like a
// runtime that keeps weights in the matmul's layout, the first call makes a
// K-major copy of W (one DMA program, charged then) and later calls use it
// while W's storage is alive and unwritten (the device's per-allocation
// write stamp: any alias's write counts, `.data` ones too, and a block
// handed out again gets a new one), so only
// the first pays the transposes -- in host time and in simulated time.
// NEURON_SIM_WEIGHT_LAYOUT_CACHE=0 turns it off (every call transposes).
struct LayoutEntry {
	c10::weak_intrusive_ptr<c10::StorageImpl> storage;
	uint64_t generation;
	at::Tensor laid;
};
std::mutex g_layout_lock;
std::map<std::vector<int64_t>, LayoutEntry> g_layouts;

bool layout_cache_on()
{
	static const bool on = [] {
		const char *e = std::getenv("NEURON_SIM_WEIGHT_LAYOUT_CACHE");
		return !(e && std::string(e) == "0");
	}();
	return on;
}

at::Tensor weight_layout(const at::Tensor &wt)
{
	if (!layout_cache_on() || wt.dim() != 2 || capturing())
		return {};
	const c10::Storage &st = wt.storage();
	// the data pointer too: a storage resized to nothing and back (FSDP2's
	// unsharded parameters between all-gathers) is the same StorageImpl on
	// a new allocation
	std::vector<int64_t> key{ (int64_t)(uintptr_t)st.unsafeGetStorageImpl(), (int64_t)(uintptr_t)st.data(),
				  wt.storage_offset(), wt.size(0), wt.size(1), wt.stride(0), wt.stride(1),
				  (int64_t)wt.scalar_type() };
	uint64_t gen = write_generation(st.data());
	{
		std::lock_guard<std::mutex> g(g_layout_lock);
		auto it = g_layouts.find(key);
		if (it != g_layouts.end() && !it->second.storage.expired() && it->second.generation == gen)
			return it->second.laid;
	}
	at::Tensor laid = materialize(wt, wt.sizes(), wt.scalar_type());   // K-major, contiguous
	std::lock_guard<std::mutex> g(g_layout_lock);
	for (auto it = g_layouts.begin(); it != g_layouts.end();)   // drop entries of freed weights
		it = it->second.storage.expired() ? g_layouts.erase(it) : std::next(it);
	g_layouts.insert_or_assign(key, LayoutEntry{ c10::weak_intrusive_ptr<c10::StorageImpl>(st.getWeakStorageImpl()),
						       gen, laid });
	return laid;
}

bool operand_ok(const at::Tensor &t, const at::Tensor &like)
{
	return t.is_privateuseone() && t.device() == like.device() &&
	       t.scalar_type() == like.scalar_type() && isa_dtype_of(t.scalar_type()) != ISA_DT_INVALID;
}

bool native_matmul(const char *name, const at::Tensor &a, const at::Tensor &b, const at::Tensor *bias,
		   at::Tensor &out, at::ScalarType out_dt, int act, const at::Tensor *residual);

// A product whose K is too long for one program (its a^T rows outgrow
// SBUF: TRL's chunked log-prob backward multiplies by 32768-wide vocab
// chunks): K in halves until each part's program fits, the parts' fp32
// products summed on VectorE, then the bias, rounded once into out (as a
// gemm accumulates in fp32).  No epilogue activation or residual: false.
bool k_split_matmul(const char *name, const at::Tensor &a, const at::Tensor &b, const at::Tensor *bias,
		    at::Tensor &out, int act, const at::Tensor *residual)
{
	int64_t k = a.size(-1);
	if (act != ISA_ACT_identity || residual || k < 256)
		return false;
	int64_t half = (k / 2 + 127) / 128 * 128;   /* whole 128-row tiles first */
	at::Tensor acc, part;
	for (int64_t k0 = 0; k0 < k; k0 += half) {
		int64_t kc = std::min(half, k - k0);
		if (!native_matmul(name, a.narrow(-1, k0, kc), b.narrow(-2, k0, kc), nullptr, part, at::kFloat,
				   ISA_ACT_identity, nullptr))
			return false;
		acc = acc.defined() ? acc.add_(part) : part;
	}
	if (bias)
		acc.add_(as_fp32(*bias));
	return native_copy(out, acc);
}

// out[b] = a[b] @ b[b] (+ bias) on the device; false: not covered
bool native_matmul(const char *name, const at::Tensor &a, const at::Tensor &b,
		   const at::Tensor *bias, at::Tensor &out, at::ScalarType out_dt = at::ScalarType::Undefined,
		   int act = ISA_ACT_identity, const at::Tensor *residual = nullptr)
{
	if (out_dt == at::ScalarType::Undefined)
		out_dt = a.scalar_type();
	if (!operand_ok(a, a) || !operand_ok(b, a) || (bias && !operand_ok(*bias, a)))
		return false;
	bool batched = a.dim() == 3;
	int64_t batch = batched ? a.size(0) : 1, m = a.size(-2), k = a.size(-1), n = b.size(-1);
	if (bias && (!bias->is_contiguous() || bias->numel() != n || bias->size(-1) != n))
		return false;
	if (isa_dtype_of(out_dt) == ISA_DT_INVALID)
		return false;
	out = at::empty(batched ? at::IntArrayRef{ batch, m, n } : at::IntArrayRef{ m, n }, a.options().dtype(out_dt));
	if (out.numel() == 0)
		return true;
	if (k == 0) {   /* an empty sum: zeros (+ bias) */
		if (act != ISA_ACT_identity || residual || !native_fill(out, 0))
			return false;
		if (bias)
			out.add_(*bias);
		return true;
	}
	nk_matmul mm{};
	at::Tensor ac = a, bc = b;
	if (!matrix_strides(ac, mm.a_stride)) {
		ac = a.contiguous();
		matrix_strides(ac, mm.a_stride);
	}
	if (!matrix_strides(bc, mm.b_stride)) {
		bc = b.contiguous();
		matrix_strides(bc, mm.b_stride);
	}
	if (!batched && mm.b_stride[1] == 1 && n > 1 && k > 1) {   // x @ W.t(): W's K-major copy
		at::Tensor laid = weight_layout(b);
		if (laid.defined()) {
			bc = laid;
			matrix_strides(bc, mm.b_stride);
		}
	}
	mm.dtype = isa_dtype_of(a.scalar_type());
	mm.batch = (uint64_t)batch;
	mm.m = (uint64_t)m;
	mm.k = (uint64_t)k;
	mm.n = (uint64_t)n;
	mm.a_elems = (uint64_t)extent_of(ac);
	mm.b_elems = (uint64_t)extent_of(bc);
	mm.bias = bias != nullptr;
	mm.out_dtype = isa_dtype_of(out_dt);
	mm.act = act;
	mm.residual = residual != nullptr;
	if (!nk_matmul_fits(isa_target_from_name(nsim_target_name()), &mm))
		return k_split_matmul(name, a, b, bias, out, act, residual);
	int dev = a.device().index();
	Program prog = cached_program("matmul", mm, dev, nk_matmul_program);
	std::vector<Binding> in{ { "a", &ac }, { "b", &bc } };
	if (bias)
		in.emplace_back("bias", bias);
	at::Tensor res;
	if (residual) {
		res = materialize(*residual, out.sizes(), out.scalar_type());
		in.emplace_back("res", &res);
	}
	run_program(prog, dev, name, in, { { "out", &out } });
	return true;
}

at::Tensor mm(const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor out;
	if (a.dim() == 2 && b.dim() == 2 && native_matmul("aten::mm", a, b, nullptr, out))
		return out;
	return declined;
}

at::Tensor bmm(const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor out;
	if (a.dim() == 3 && b.dim() == 3 && native_matmul("aten::bmm", a, b, nullptr, out))
		return out;
	return declined;
}

// beta * bias + alpha * (a @ b): natively for alpha = 1 and a bias row
// (linear's form) or beta = 0
at::Tensor addmm(const at::Tensor &bias, const at::Tensor &a, const at::Tensor &b,
		 const at::Scalar &beta, const at::Scalar &alpha)
{
	at::Tensor out;
	if (a.dim() == 2 && b.dim() == 2 && alpha.equal(1) && bias.dim() <= 2 &&
	    (bias.dim() < 2 || bias.size(0) == 1)) {
		bool no_bias = beta.equal(0);
		if ((no_bias || beta.equal(1)) &&
		    native_matmul("aten::addmm", a, b, no_bias ? nullptr : &bias, out))
			return out;
	}
	// any other bias (a full [m, n] accumulator: acc.addmm_(a, b)): the
	// product on TensorE left in fp32, then beta * bias + alpha * product
	// on VectorE at fp32, rounded once to the dtype as CPU's gemm does
	// (rounding the product first is two bf16 roundings: off by more than
	// bf16's tolerance where bias and product cancel)
	at::ScalarType dt = a.scalar_type();
	if (a.dim() == 2 && b.dim() == 2 && !beta.isComplex() && !alpha.isComplex() && bias.is_privateuseone() &&
	    bias.scalar_type() == dt &&
	    native_matmul("aten::addmm", a, b, nullptr, out, dt == at::kFloat ? at::ScalarType::Undefined : at::kFloat)) {
		if (!alpha.equal(1))
			out = out.mul(alpha);
		if (!beta.equal(0))
			out = out.add(beta.equal(1) ? as_fp32(bias) : as_fp32(bias).mul(beta));
		return cast_back(out.expand({ a.size(0), b.size(1) }).contiguous(), dt);
	}
	return declined;
}

// out= forms (what autocast and torch.mm(out=) reach): the product, then a
// DMA copy into out (write_result)
at::Tensor &mm_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	at::Tensor r;
	if (a.dim() == 2 && b.dim() == 2 && out.is_privateuseone() && out.scalar_type() == a.scalar_type() &&
	    native_matmul("aten::mm", a, b, nullptr, r))
		return write_result(out, r);
	return declined;
}

at::Tensor &addmm_out(const at::Tensor &bias, const at::Tensor &a, const at::Tensor &b, const at::Scalar &beta,
		      const at::Scalar &alpha, at::Tensor &out)
{
	if (!out.is_privateuseone() || out.scalar_type() != a.scalar_type())
		return declined;
	at::Tensor r = neuron::addmm(bias, a, b, beta, alpha);
	if (!r.defined())
		return declined;
	return write_result(out, r);
}

// Groups of fp8 (e4m3fn) matmuls with rowwise fp32 scales, bf16 out, in
// the four layouts of PyTorch's kernel (the checks are its meta function's):
//   a [M, K] with b [G, K, N]: offs ends row groups of a; scale_a [M], scale_b [G, N]
//   a [G, M, K] with b [K, N]: offs ends column groups of b; scale_a [G, M], scale_b [N]
//   a [M, K] with b [K, N]:    offs ends K groups; out [G, M, N]; scale_a [G * M], scale_b [G * N]
//   a [G, M, K] with b [G, K, N]: no offs; scale_a [G, M], scale_b [G, N]
// out_g = (a_g @ b_g) * scale_a_g[:, None] * scale_b_g[None, :].  The fp8
// values widen exactly to bf16 (a DMA cast), TensorE multiplies them with
// fp32 accumulation (bf16 x bf16 products of fp8 values are exact), VectorE
// applies the scales in fp32 and rounds to bf16.  Rows / columns past the
// last offset are zero.  (TensorE's fp8 double-row mode would be faster on
// NeuronCore-v3: the bf16 timing is an upper bound.)
at::Tensor scaled_grouped_mm(const at::Tensor &a, const at::Tensor &b, const at::Tensor &sa, const at::Tensor &sb,
			     const std::optional<at::Tensor> &offs, const std::optional<at::Tensor> &bias,
			     const std::optional<at::Tensor> &scale_result, std::optional<at::ScalarType> out_dtype,
			     bool use_fast_accum)
{
	(void)use_fast_accum;   // accumulation is fp32 either way
	const char *who = "neuron: _scaled_grouped_mm: ";
	TORCH_CHECK(a.scalar_type() == at::kFloat8_e4m3fn && b.scalar_type() == at::kFloat8_e4m3fn, who,
		    "expected float8_e4m3fn inputs, got ", a.scalar_type(), " and ", b.scalar_type());
	TORCH_CHECK(sa.scalar_type() == at::kFloat && sb.scalar_type() == at::kFloat, who,
		    "scales must be float32 (rowwise), got ", sa.scalar_type(), " and ", sb.scalar_type());
	TORCH_CHECK((a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3), who,
		    "multiplicands must be 2-D or 3-D, got ", a.dim(), "-D and ", b.dim(), "-D");
	TORCH_CHECK(!bias || !bias->defined(), who, "bias is not supported (as in PyTorch)");
	TORCH_CHECK(!scale_result || !scale_result->defined(), who, "scale_result is not supported (as in PyTorch)");
	TORCH_CHECK(!out_dtype || *out_dtype == at::kBFloat16, who, "out_dtype must be bfloat16, got ", *out_dtype);
	TORCH_CHECK(a.device() == b.device() && sa.device() == a.device() && sb.device() == a.device(), who,
		    "all operands must be on ", a.device());
	bool a2 = a.dim() == 2, b2 = b.dim() == 2;
	TORCH_CHECK((a2 && b2) || a.size(-1) == b.size(-2), who, "contraction dims differ: ", a.sizes(), " and ",
		    b.sizes());
	std::vector<int64_t> ends;
	if (a2 || b2) {
		TORCH_CHECK(offs && offs->defined() && offs->dim() == 1 && offs->scalar_type() == at::kInt, who,
			    "a 1-D int32 offs tensor is needed for ", a.dim(), "-D / ", b.dim(), "-D operands");
		at::Tensor o = offs->cpu();
		ends.assign(o.data_ptr<int32_t>(), o.data_ptr<int32_t>() + o.numel());
	} else {
		TORCH_CHECK(!offs || !offs->defined(), who, "offs is not used with 3-D / 3-D operands");
		TORCH_CHECK(a.size(0) == b.size(0), who, "group counts differ: ", a.size(0), " and ", b.size(0));
	}
	int64_t G = a2 && b2 ? (int64_t)ends.size() : !a2 ? a.size(0) : b.size(0);
	TORCH_CHECK(ends.empty() || (int64_t)ends.size() == G, who, offs ? offs->numel() : 0, " offsets for ", G,
		    " groups");
	// the group extents along the offsets' dim, checked against it
	int64_t span = a2 && !b2 ? a.size(0) : !a2 && b2 ? b.size(1) : a2 && b2 ? a.size(1) : 0;
	for (size_t g = 0; g < ends.size(); g++)
		TORCH_CHECK(ends[g] >= (g ? ends[g - 1] : 0) && ends[g] <= span, who, "offs must be non-decreasing "
			    "and <= ", span, "; offs[", g, "] = ", ends[g]);
	int64_t M = a.size(-2), N = b.size(-1);
	auto want = [&](const at::Tensor &s, std::vector<int64_t> shape, const char *name) {
		TORCH_CHECK(s.sizes() == at::IntArrayRef(shape), who, name, " must have shape ", at::IntArrayRef(shape),
			    ", got ", s.sizes());
	};
	want(sa, a2 ? std::vector<int64_t>{ (b2 ? G : 1) * M } : std::vector<int64_t>{ G, M }, "scale_a");
	want(sb, b2 ? std::vector<int64_t>{ (a2 ? G : 1) * N } : std::vector<int64_t>{ G, N }, "scale_b");
	at::Tensor A = a.to(at::kBFloat16), B = b.to(at::kBFloat16);
	at::TensorOptions bf = a.options().dtype(at::kBFloat16);
	auto scaled = [](const at::Tensor &p, const at::Tensor &ra, const at::Tensor &cb) {
		return p.mul(ra.unsqueeze(-1)).mul(cb.unsqueeze(-2)).to(at::kBFloat16);
	};
	if (!a2 && !b2)
		return scaled(matmul_to(A, B, at::kFloat), sa, sb);
	at::Tensor out = at::zeros(a2 && b2 ? at::IntArrayRef{ G, M, N } : at::IntArrayRef{ M, N }, bf);
	int64_t lo = 0;
	for (int64_t g = 0; g < G; lo = ends[g], g++) {
		int64_t hi = ends[g];
		if (hi == lo)
			continue;
		if (a2 && !b2)   // row group of a
			out.narrow(0, lo, hi - lo).copy_(scaled(matmul_to(A.narrow(0, lo, hi - lo), B.select(0, g), at::kFloat),
								 sa.narrow(0, lo, hi - lo), sb.select(0, g)));
		else if (!a2 && b2)   // column group of b
			out.narrow(1, lo, hi - lo).copy_(scaled(matmul_to(A.select(0, g), B.narrow(1, lo, hi - lo), at::kFloat),
								 sa.select(0, g), sb.narrow(0, lo, hi - lo)));
		else   // K group
			out.select(0, g).copy_(scaled(matmul_to(A.narrow(1, lo, hi - lo), B.narrow(0, lo, hi - lo), at::kFloat),
						      sa.narrow(0, g * M, M), sb.narrow(0, g * N, N)));
	}
	return out;
}

at::Tensor baddbmm(const at::Tensor &self, const at::Tensor &b1, const at::Tensor &b2, const at::Scalar &beta,
		   const at::Scalar &alpha)
{
	// the products left in fp32, scaled and added there, rounded once (CPU's
	// gemm); beta == 0 ignores self
	if (is_float_neuron(self) && is_float_neuron(b1) && is_float_neuron(b2) && !beta.isComplex() && !alpha.isComplex() &&
	    b1.dim() == 3 && b2.dim() == 3 && b1.scalar_type() == b2.scalar_type() && self.scalar_type() == b1.scalar_type()) {
		at::ScalarType dt = b1.scalar_type();
		at::Tensor p = dt == at::kFloat ? at::bmm(b1, b2) : matmul_to(b1, b2, at::kFloat);
		if (!alpha.equal(1))
			p = p.mul(alpha);
		if (!beta.equal(0))
			p = p.add(beta.equal(1) ? as_fp32(self) : as_fp32(self).mul(beta));
		return cast_back(p.expand_as(p).contiguous(), dt);
	}
	return declined;
}

// beta * self + alpha * sum_b (b1[b] @ b2[b]) as CPU accumulates it: one
// addmm per batch into the result, in the result's dtype (bf16 rounds after
// every batch there; an fp32 sum of the products differs beyond bf16's
// tolerance where they cancel); beta == 0 ignores self, NaN included
at::Tensor addbmm(const at::Tensor &self, const at::Tensor &b1, const at::Tensor &b2, const at::Scalar &beta,
		  const at::Scalar &alpha)
{
	if (!is_float_neuron(self) || !is_float_neuron(b1) || !is_float_neuron(b2) || beta.isComplex() ||
	    alpha.isComplex() || b1.dim() != 3 || b2.dim() != 3 || b1.size(0) != b2.size(0) || b1.size(2) != b2.size(1) ||
	    b1.scalar_type() != b2.scalar_type() || self.scalar_type() != b1.scalar_type() || b1.size(0) == 0)
		return declined;
	at::Tensor r = self.expand({ b1.size(1), b2.size(2) }).contiguous();
	for (int64_t i = 0; i < b1.size(0); i++)
		r = at::addmm(r, b1[i], b2[i], i == 0 ? beta : at::Scalar(1), alpha);
	return r;
}

// the sum of a matrix's diagonal
at::Tensor trace(const at::Tensor &self)
{
	if (!is_float_neuron(self) || !at::isFloatingType(self.scalar_type()) || self.dim() != 2)
		return declined;
	return self.diagonal().sum();
}

}  // namespace

at::Tensor matmul_to(const at::Tensor &a, const at::Tensor &b, at::ScalarType out_dt)
{
	at::Tensor out;
	TORCH_CHECK(a.dim() == b.dim() && (a.dim() == 2 || a.dim() == 3) &&
			    native_matmul(a.dim() == 3 ? "aten::bmm" : "aten::mm", a, b, nullptr, out, out_dt),
		    "neuron: matmul of ", a.sizes(), " ", a.scalar_type(), " and ", b.sizes(), " ", b.scalar_type(),
		    " is not covered by the TensorE kernel");
	return out;
}

at::Tensor matmul_act(const at::Tensor &a, const at::Tensor &b, const at::Tensor *bias, int act,
		      const at::Tensor *residual)
{
	at::Tensor out;
	if (a.dim() == 2 && b.dim() == 2 &&
	    (!residual || (residual->is_privateuseone() && residual->scalar_type() == a.scalar_type() &&
			   residual->dim() == 2 && residual->size(0) == a.size(0) && residual->size(1) == b.size(1))) &&
	    native_matmul(bias ? "aten::addmm" : "aten::mm", a, b, bias, out, at::ScalarType::Undefined, act, residual))
		return out;
	return {};
}

NEURON_REGISTER_OPS(NEURON_OPS_MATMUL)

}  // namespace neuron
