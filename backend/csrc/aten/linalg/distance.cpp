// aten/linalg/distance.cpp -- pairwise distances composed from the native
// kernels: cdist (rows of x1 against rows of x2) and pdist (the rows of one
// matrix against each other, the upper triangle in row order).
//
// As CPU computes them: p = 2 by matrix product where CPU's compute mode
// takes it (|a|^2 - 2 a.b + |b|^2 in one matmul of padded operands,
// clamped at 0, square root: TensorE); otherwise every pair's difference
// reduced -- p = 0 counts the nonzero differences, p = 1 sums |d|, p = inf
// takes max |d|, other p (sum |d|^p)^(1/p).
#include "runtime/device.h"
#include "aten/pointwise/math.h"
#include "ops.def"

#include <ATen/ExpandUtils.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/_cdist_forward_ops.h>
#include <ATen/ops/_pdist_forward_ops.h>

#include <cmath>
#include <vector>

namespace neuron {

namespace {

// the element count of the broadcast [.., r1, r2, c] differences a direct
// evaluation holds
constexpr int64_t kDirectCap = (int64_t)1 << 26;

// sum over the last dim of |d|^p as CPU's dist reductions take it
at::Tensor p_norm_last(const at::Tensor &d, double p)
{
	if (d.size(-1) == 0)   /* no coordinates: every distance is 0 */
		return d.sum(-1);
	if (p == 0.0)
		return d.ne(0).to(d.scalar_type()).sum(-1);
	if (p == 1.0)
		return d.abs().sum(-1);
	if (std::isinf(p))
		return d.abs().amax(-1);
	if (p == 2.0)
		return d.mul(d).sum(-1).sqrt();
	return d.abs().pow(p).sum(-1).pow(1.0 / p);
}

// CPU's _euclidean_dist: [x1 * -2, |x1|^2, 1] @ [x2, 1, |x2|^2]^T, clamped, sqrt
at::Tensor euclidean_by_matmul(const at::Tensor &x1, const at::Tensor &x2)
{
	at::Tensor n1 = x1.mul(x1).sum(-1, true), n2 = x2.mul(x2).sum(-1, true);
	at::Tensor a = at::cat({ x1.mul(-2.0), n1, at::ones_like(n1) }, -1);
	at::Tensor b = at::cat({ x2, at::ones_like(n2), n2 }, -1);
	return at::clamp_min(at::matmul(a, b.transpose(-2, -1)), 0.0).sqrt();
}

// fp32 (CPU's cdist / pdist take no bf16 / fp16: theirs is the error)
bool usable(const at::Tensor &t)
{
	return t.is_privateuseone() && t.scalar_type() == at::kFloat && t.dim() >= 2;
}

// CPU's compute_mode: 0 / absent: by matmul when either side has more than
// 25 rows; 1: always; 2: never
at::Tensor cdist_forward(const at::Tensor &x1, const at::Tensor &x2, double p, std::optional<int64_t> mode)
{
	if (!usable(x1) || !usable(x2) || x1.scalar_type() != x2.scalar_type() || x1.device() != x2.device() ||
	    x1.size(-1) != x2.size(-1) || p < 0 || std::isnan(p))
		return declined;
	int64_t r1 = x1.size(-2), r2 = x2.size(-2), c = x1.size(-1);
	int64_t m = mode.value_or(0);
	if (m < 0 || m > 2)
		return declined;   /* CPU's error */
	bool by_mm = p == 2.0 && (m == 1 || (m == 0 && (r1 > 25 || r2 > 25)));
	std::vector<int64_t> batch = at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
	std::vector<int64_t> s1 = batch, s2 = batch;
	s1.insert(s1.end(), { r1, c });
	s2.insert(s2.end(), { r2, c });
	at::Tensor a = x1.expand(s1), b = x2.expand(s2);
	if (by_mm)
		return euclidean_by_matmul(a, b);
	int64_t cells = c * r1 * r2;
	for (int64_t s : batch)
		cells *= s;
	if (cells > kDirectCap)
		return declined;
	at::Tensor d = a.unsqueeze(-2).sub(b.unsqueeze(-3));   /* [.., r1, r2, c] */
	return p_norm_last(d, p);
}

at::Tensor pdist_forward(const at::Tensor &x, double p)
{
	if (!usable(x) || x.dim() != 2 || p < 0 || std::isnan(p))
		return declined;
	int64_t n = x.size(0);
	if (n * (n - 1) / 2 > kDirectCap || n * (n - 1) / 2 * x.size(1) > kDirectCap)   /* the pairs' index tables too */
		return declined;
	std::vector<int64_t> rows, cols;
	for (int64_t i = 0; i < n; i++)
		for (int64_t j = i + 1; j < n; j++) {
			rows.push_back(i);
			cols.push_back(j);
		}
	if (rows.empty())
		return at::empty({ 0 }, x.options());
	at::Tensor ri = at::tensor(rows, at::TensorOptions().dtype(at::kLong)).to(x.device());
	at::Tensor ci = at::tensor(cols, at::TensorOptions().dtype(at::kLong)).to(x.device());
	return p_norm_last(x.index_select(0, ri).sub(x.index_select(0, ci)), p);
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_DISTANCE)

}  // namespace neuron
