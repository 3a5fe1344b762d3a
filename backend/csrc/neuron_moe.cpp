// neuron_moe.cpp -- what a mixture-of-experts router runs between its
// matmuls: floor_divide, remainder and div's rounding modes (a token's index
// from a sorted (token, expert) slot), floor, clamp between tensors, and
// histc (tokens per expert).  Composed
// from the native kernels (each step a program on the device timeline);
// the values are CPU PyTorch's.
#include "neuron_kernels.h"
#include "neuron_ops.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/clamp_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/floor_divide_ops.h>
#include <ATen/ops/floor_ops.h>
#include <ATen/ops/histc_ops.h>
#include <ATen/ops/remainder_ops.h>
#include <ATen/ops/fmod_ops.h>
#include <ATen/ops/_scaled_grouped_mm_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <cmath>

namespace neuron {

namespace {

bool neuron_operands(const at::Tensor &a, const at::Tensor &b)
{
	return a.is_privateuseone() && (b.is_privateuseone() ? b.device() == a.device() : b.dim() == 0 && b.is_cpu());
}

// CPU PyTorch raises for an integer division by zero; a device divisor is
// read back to check (one small program and a host read)
void check_int_divisor(const at::Tensor &b)
{
	TORCH_CHECK(!b.eq(0).any().item<bool>(), "ZeroDivisionError");
}

// a 0-dim CPU integer divisor in [1, 2^15]: its value; 0 otherwise
int32_t small_positive_constant(const at::Tensor &b)
{
	if (b.dim() != 0 || !b.is_cpu() || at::isFloatingType(b.scalar_type()) || b.is_complex() ||
	    b.scalar_type() == at::kBool)
		return 0;
	int64_t v = b.item<int64_t>();
	return v >= 1 && v <= (1 << 15) ? (int32_t)v : 0;
}

// int64 a // c and a % c for a constant 1 <= c <= 2^15, exactly, on int32
// words: a as four 16-bit limbs (the top one signed), long division from
// the top with floor semantics at each step, so every partial remainder is
// in [0, c) and r * 2^16 + limb stays below 2^31.  Returns (quotient,
// remainder) as int64 tensors.
std::pair<at::Tensor, at::Tensor> i64_divmod_const(const at::Tensor &a0, int32_t c)
{
	at::Tensor a = materialize(a0, a0.sizes(), at::kLong);
	at::Tensor words = a.view(at::kInt).view({ a.numel(), 2 });
	at::Tensor lo = words.select(1, 0), hi = words.select(1, 1);
	const int64_t B = 1 << 16;
	at::Tensor limbs[4] = { lo.remainder(B), lo.floor_divide(B).remainder(B), hi.remainder(B),
				hi.floor_divide(B) };
	at::Tensor q[4], r;
	for (int i = 3; i >= 0; i--) {
		at::Tensor cur = i == 3 ? limbs[3] : r.mul(B).add(limbs[i]);
		q[i] = cur.floor_divide(c);
		r = cur.remainder(c);
	}
	at::Tensor qlo = q[1].mul(B).add(q[0]), qhi = q[3].mul(B).add(q[2]);   // lo wraps to its bits
	at::Tensor quot = at::stack({ qlo, qhi }, 1).view(at::kLong).view(a0.sizes());
	at::Tensor zero = at::zeros_like(r);
	at::Tensor rem = at::stack({ r, zero }, 1).view(at::kLong).view(a0.sizes());
	return { quot, rem };
}

// floor(x) of a float tensor: x - (x mod 1) (VectorE's floored mod); an
// infinity's mod is NaN, and floor(+-inf) is the infinity itself
at::Tensor float_floor(const at::Tensor &x)
{
	return at::where(x.abs().eq(INFINITY), x, x.sub(x.remainder(1)));
}

// PyTorch's div_floor for floats: mod = a mod b (floored), div = (a - mod)
// / b, rounded to the nearest integer from its floor (div is an integer up
// to rounding); b == 0 gives a / b
at::Tensor float_floor_divide(const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor mod = a.remainder(b);
	at::Tensor div = a.sub(mod).div(b);
	at::Tensor f = float_floor(div);
	f = f.add(div.sub(f).gt(0.5).to(f.scalar_type()));
	return at::where(b.eq(0), a.div(b), f);
}

// both float (and one a 0-dim CPU number or a device tensor)
bool floats(const at::Tensor &a, const at::Tensor &b)
{
	at::ScalarType rt = at::result_type(a, b);
	return at::isFloatingType(rt) && isa_dtype_of(rt) != ISA_DT_INVALID && neuron_operands(a, b);
}

// integers of at most 32 bits
bool narrow_ints(const at::Tensor &a, const at::Tensor &b)
{
	at::ScalarType rt = at::result_type(a, b);
	return at::isIntegralType(rt, false) && c10::elementSize(rt) <= 4 && neuron_operands(a, b);
}

at::Tensor floor_divide_impl(const at::Tensor &a, const at::Tensor &b)
{
	if (floats(a, b)) {
		at::ScalarType rt = at::result_type(a, b);
		at::Tensor x = a.scalar_type() == rt ? a : a.to(rt);
		at::Tensor y = b.is_cpu() ? at::scalar_tensor(b.item(), x.options()) : b.scalar_type() == rt ? b : b.to(rt);
		return float_floor_divide(x, y);
	}
	if (narrow_ints(a, b)) {
		check_int_divisor(b);
		return int_binary("aten::floor_divide", ISA_ALU_divide, a, b);
	}
	int32_t c;
	if (a.is_privateuseone() && a.scalar_type() == at::kLong && (c = small_positive_constant(b)))
		return i64_divmod_const(a, c).first;
	if (a.is_privateuseone() && a.scalar_type() == at::kLong && b.dim() == 0 && b.is_cpu() &&
	    !at::isFloatingType(b.scalar_type()))
		check_int_divisor(b);
	return {};
}

// a <alu> b for a remainder ALU (mod, fmod) of floats or narrow integers
// (an integer divisor of zero is CPU's ZeroDivisionError); undefined else
at::Tensor remainder_alu(const char *name, int alu, const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor out;
	if (floats(a, b) && native_binary_op(name, alu, a, b, out))
		return out;
	if (narrow_ints(a, b)) {
		check_int_divisor(b);
		return int_binary(name, alu, a, b);
	}
	return {};
}

at::Tensor remainder_impl(const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor r = remainder_alu("aten::remainder", ISA_ALU_mod, a, b);
	if (r.defined())
		return r;
	int32_t c;
	if (a.is_privateuseone() && a.scalar_type() == at::kLong && (c = small_positive_constant(b)))
		return i64_divmod_const(a, c).second;
	return {};
}

at::Tensor floor_divide(const at::Tensor &a, const at::Tensor &b)
{
	return floor_divide_impl(a, b);   /* undefined: declined */
}

at::Tensor &floor_divide_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? floor_divide_impl(a, b) : at::Tensor());
}

at::Tensor &floor_divide_inplace(at::Tensor &self, const at::Tensor &b)
{
	return inplace_or_declined(self, floor_divide_impl(self, b));
}

// C's fmod (the remainder with the dividend's sign, exact): VectorE's fmod ALU
at::Tensor &fmod_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? remainder_alu("aten::fmod", ISA_ALU_fmod, a, b)
							       : at::Tensor());
}

at::Tensor remainder(const at::Tensor &a, const at::Tensor &b)
{
	return remainder_impl(a, b);   /* undefined: declined */
}

at::Tensor &remainder_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? remainder_impl(a, b) : at::Tensor());
}

at::Tensor &remainder_inplace(at::Tensor &self, const at::Tensor &b)
{
	return inplace_or_declined(self, remainder_impl(self, b));
}

// a / b with rounding_mode: none (true division), "floor" (floor_divide),
// "trunc" (toward zero: the floored quotient plus one where the remainder is
// not zero and the signs differ; floats: the floor of |a / b| with a / b's sign)
at::Tensor div_mode_impl(const at::Tensor &a, const at::Tensor &b, std::optional<c10::string_view> mode)
{
	if (!mode)
		return neuron_operands(a, b) ? a.div(b) : at::Tensor();
	if (*mode == "floor")
		return floor_divide_impl(a, b);
	if (*mode != "trunc")
		return {};
	if (floats(a, b)) {
		at::Tensor q = a.div(b);
		return at::where(q.lt(0), float_floor(q.neg()).neg(), float_floor(q));
	}
	at::Tensor q = floor_divide_impl(a, b);
	if (!q.defined())
		return {};
	at::Tensor r = remainder_impl(a, b);
	if (!r.defined())
		return {};
	at::Tensor bb = b.is_cpu() ? at::scalar_tensor(b.item(), q.options()) : b;
	at::Tensor fix = r.ne(0).bitwise_and(a.lt(0).bitwise_xor(bb.lt(0)));
	return q.add(fix.to(q.scalar_type()));
}

at::Tensor div_mode(const at::Tensor &a, const at::Tensor &b, std::optional<c10::string_view> mode)
{
	return div_mode_impl(a, b, mode);   /* undefined: declined */
}

at::Tensor &div_out_mode(const at::Tensor &a, const at::Tensor &b, std::optional<c10::string_view> mode,
			 at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? div_mode_impl(a, b, mode) : at::Tensor());
}

// clamp between tensor bounds: max with the lower, min with the upper
// (NaN in either operand propagates, as CPU's clamp)
at::Tensor clamp_tensor_impl(const at::Tensor &x, const std::optional<at::Tensor> &lo,
			     const std::optional<at::Tensor> &hi)
{
	bool has_lo = lo && lo->defined(), has_hi = hi && hi->defined();
	if (!x.is_privateuseone() || (!has_lo && !has_hi))
		return {};
	at::Tensor r = x;
	if (has_lo)
		r = at::maximum(r, *lo);
	if (has_hi)
		r = at::minimum(r, *hi);
	return r.is_same(x) ? x.clone() : r;
}

at::Tensor clamp_tensor(const at::Tensor &x, const std::optional<at::Tensor> &lo, const std::optional<at::Tensor> &hi)
{
	return clamp_tensor_impl(x, lo, hi);   /* undefined: declined */
}

at::Tensor &clamp_tensor_out(const at::Tensor &x, const std::optional<at::Tensor> &lo,
			     const std::optional<at::Tensor> &hi, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? clamp_tensor_impl(x, lo, hi) : at::Tensor());
}

at::Tensor floor_impl(const at::Tensor &x)
{
	if (!x.is_privateuseone())
		return {};
	if (at::isIntegralType(x.scalar_type(), true))
		return x.clone();
	if (is_float_neuron(x))
		return float_floor(x);
	return {};
}

at::Tensor floor(const at::Tensor &x)
{
	return floor_impl(x);   /* undefined: declined */
}

at::Tensor &floor_out(const at::Tensor &x, at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? floor_impl(x) : at::Tensor());
}

// histc: counts of x in `bins` equal bins over [min, max] (min == max: the
// data's range, widened by 1 each way when it is one value), elements
// outside or NaN not counted, the last bin closed.  As CPU PyTorch, a
// float element's bin is (x - min) * bins / (max - min) in x's dtype,
// truncated, in one rounding per step; integer inputs (which CPU PyTorch
// refuses and a MoE router sends on accelerators) are binned as their fp32
// values.  Counting: a one-hot [n, bins] against an iota, summed over n in
// fp32 (exact below 2^24 per bin).
at::Tensor histc_impl(const at::Tensor &self, int64_t bins, const at::Scalar &min_s, const at::Scalar &max_s)
{
	TORCH_CHECK(bins > 0, "torch.histc: bins must be > 0, but got ", bins, " for 'bins'");
	at::ScalarType dt = self.scalar_type();
	bool is_int = at::isIntegralType(dt, false) && c10::elementSize(dt) <= 4;
	if (!self.is_privateuseone() || !(is_float_neuron(self) || is_int) || self.numel() * bins > (1 << 22) ||
	    min_s.isComplex() || max_s.isComplex())
		return {};
	at::Tensor x = self.reshape({ -1 });
	if (is_int)
		x = x.to(at::kFloat);
	at::ScalarType xt = x.scalar_type();
	double lo = min_s.toDouble(), hi = max_s.toDouble();
	if (lo == hi && x.numel() > 0) {
		lo = x.amin().item<double>();
		hi = x.amax().item<double>();
	}
	if (lo == hi) {
		lo -= 1;
		hi += 1;
	}
	TORCH_CHECK(!(lo > hi), "torch.histc: max must be larger than min");
	TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histc: range of [", lo, ", ", hi, "] is not finite");
	at::Tensor out = at::zeros({ bins }, self.options().dtype(is_int ? at::kFloat : dt));
	if (x.numel() == 0)
		return is_int ? out.to(dt) : out;
	// the edges and their difference in x's dtype, as CPU's bin_edges hold them
	at::Tensor edges = at::empty({ 2 }, at::TensorOptions().dtype(xt));
	edges[0] = lo;
	edges[1] = hi;
	double left = edges[0].item<double>(), range = edges[1].sub(edges[0]).item<double>();
	at::Tensor pos = x.sub(left).mul((double)bins).div(range);
	at::Tensor idx = pos.to(at::kInt).clamp(std::nullopt, bins - 1);
	at::Tensor valid = x.ge(left).bitwise_and(x.le(edges[1].item<double>()));
	at::Tensor iota = at::arange(bins, x.options().dtype(at::kInt));
	at::Tensor hit = idx.unsqueeze(1).eq(iota).bitwise_and(valid.unsqueeze(1));
	at::Tensor counts = hit.to(at::kFloat).sum(0);
	return counts.to(dt);
}

at::Tensor histc(const at::Tensor &self, int64_t bins, const at::Scalar &min, const at::Scalar &max)
{
	return histc_impl(self, bins, min, max);   /* undefined: declined */
}

at::Tensor &histc_out(const at::Tensor &self, int64_t bins, const at::Scalar &min, const at::Scalar &max,
		      at::Tensor &out)
{
	return written_or_declined(out, out.is_privateuseone() ? histc_impl(self, bins, min, max) : at::Tensor());
}


// ---- torch._scaled_grouped_mm: fp8 expert matmuls -------------------------

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

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_MOE)

}  // namespace neuron
