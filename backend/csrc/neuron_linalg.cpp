// neuron_linalg.cpp -- matrix products on TensorE: mm, bmm, addmm (and so
// linear and matmul, which PyTorch decomposes into them).  One generated
// program per (shapes, strides, dtype); operands may be transposed views
// (x @ W.t() reads W's rows and turns them round on TensorE).
#include "neuron_kernels.h"
#include "neuron_ops.h"

#include <ATen/native/CPUFallback.h>
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
	at::Tensor r = addmm(bias, a, b, beta, alpha);
	if (!r.defined())
		return declined;
	return write_result(out, r);
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

NEURON_REGISTER_OPS(NEURON_OPS_LINALG)

}  // namespace neuron
