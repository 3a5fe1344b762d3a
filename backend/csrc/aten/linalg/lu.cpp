// aten/linalg/lu.cpp -- linear systems composed from the native kernels: LU
// factorization with partial pivoting (LAPACK getrf's results: packed LU,
// 1-based int32 pivots, info), the solves built on it (lu_solve, solve,
// inv), determinants, lu_unpack, triangular solves and Cholesky.
//
// Each algorithm is the unblocked textbook one, a column (or row) per step,
// every step a handful of batched device ops over all matrices of the batch
// at once: the pivot an argmax of |column| (LAPACK's isamax: the first
// largest), rows swapped by a gather and a scatter, the trailing matrix
// updated by an outer product on VectorE, a triangular solve row by row
// with a batched matmul of the rows already solved.  LAPACK blocks and
// recurses: results agree to rounding.  fp32 only (bf16 / fp16 linear
// algebra is not CPU PyTorch's either); a singular input whose caller asks
// for errors runs on the CPU, which raises them, and so do matrices with a
// side over 1024 (kMaxSide).
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/pointwise/math.h"
#include "ops.def"

#include <ATen/ExpandUtils.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eye.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/_cholesky_solve_helper_ops.h>
#include <ATen/ops/_linalg_det_ops.h>
#include <ATen/ops/_linalg_slogdet_ops.h>
#include <ATen/ops/_linalg_solve_ex_ops.h>
#include <ATen/ops/cholesky_inverse_ops.h>
#include <ATen/ops/cholesky_ops.h>
#include <ATen/ops/linalg_cholesky_ex_ops.h>
#include <ATen/ops/linalg_inv_ex_ops.h>
#include <ATen/ops/linalg_lu_factor_ex_ops.h>
#include <ATen/ops/linalg_lu_ops.h>
#include <ATen/ops/linalg_lu_solve_ops.h>
#include <ATen/ops/linalg_solve_triangular_ops.h>
#include <ATen/ops/lu_unpack_ops.h>
#include <ATen/ops/triangular_solve_ops.h>

#include <tuple>
#include <vector>

namespace neuron {

namespace {

// the largest matrix side taken natively: the unblocked algorithms are n
// steps of host dispatch with an n^2 update each (a 512 x 512 solve 0.8 s
// of host time, 1024 about 5 s); larger ones run on the CPU, counted
constexpr int64_t kMaxSide = 1024;

// the matrices the kernels take: fp32 on the device, at least 2-D, sides
// up to kMaxSide
bool matrices(const at::Tensor &t)
{
	return t.defined() && t.is_privateuseone() && t.scalar_type() == at::kFloat && t.dim() >= 2 &&
	       t.size(-1) <= kMaxSide && t.size(-2) <= kMaxSide;
}

// every out= tensor of a multi-output kernel on the device (else the CPU
// fallback takes the whole call: nothing is written first)
bool on_device(std::initializer_list<const at::Tensor *> outs)
{
	for (const at::Tensor *t : outs)
		if (!t->is_privateuseone())
			return false;
	return true;
}

std::vector<int64_t> batch_of(const at::Tensor &t)
{
	return std::vector<int64_t>(t.sizes().begin(), t.sizes().end() - 2);
}

// t broadcast to batch [..., r, c] as a fresh contiguous [B, r, c]
at::Tensor flat_copy(const at::Tensor &t, const std::vector<int64_t> &batch)
{
	std::vector<int64_t> shape = batch;
	shape.push_back(t.size(-2));
	shape.push_back(t.size(-1));
	int64_t b = 1;
	for (int64_t s : batch)
		b *= s;
	at::Tensor r = at::empty({ b, t.size(-2), t.size(-1) }, t.options());
	if (r.numel())
		TORCH_CHECK(native_copy(r.view(shape), t.expand(shape)), "neuron: linalg copy");
	return r;
}

// rows i and r[b] (one per matrix) of x [B, rows, c] exchanged in place
void swap_rows(at::Tensor &x, int64_t i, const at::Tensor &r)
{
	int64_t B = x.size(0), c = x.size(2);
	at::Tensor idx = r.view({ B, 1, 1 }).expand({ B, 1, c });
	at::Tensor row_i = x.select(1, i).clone();
	at::Tensor row_r = x.gather(1, idx);
	x.scatter_(1, idx, row_i.unsqueeze(1));
	x.select(1, i).copy_(row_r.squeeze(1));
}

// ---- LU ---------------------------------------------------------------------------

// a [B, m, n] factored in place (L below the diagonal, unit; U on and
// above); the 0-based pivot rows [B, k] as int64
at::Tensor lu_inplace(at::Tensor &a)
{
	int64_t B = a.size(0), m = a.size(1), n = a.size(2), k = std::min(m, n);
	at::Tensor piv = at::empty({ B, k }, a.options().dtype(at::kLong));
	for (int64_t j = 0; j < k; j++) {
		at::Tensor r = a.narrow(1, j, m - j).select(2, j).abs().argmax(1).add(j);   /* [B] */
		piv.select(1, j).copy_(r);
		swap_rows(a, j, r);
		if (j + 1 == m)
			continue;
		at::Tensor p = a.select(1, j).narrow(1, j, 1);                              /* [B, 1] */
		at::Tensor col = a.narrow(1, j + 1, m - j - 1).select(2, j);                /* [B, m-j-1] */
		/* a zero pivot scales nothing (LAPACK's getf2), info reports it */
		at::Tensor l = at::where(p.ne(0), col.div(p), col);
		col.copy_(l);
		if (j + 1 < n) {
			at::Tensor trail = a.narrow(1, j + 1, m - j - 1).narrow(2, j + 1, n - j - 1);
			at::Tensor u = a.select(1, j).narrow(1, j + 1, n - j - 1);              /* [B, n-j-1] */
			trail.copy_(trail.sub(l.unsqueeze(2).mul(u.unsqueeze(1))));
		}
	}
	return piv;
}

// LAPACK's info: the first zero on U's diagonal (1-based), else 0
at::Tensor lu_info(const at::Tensor &lu)
{
	int64_t k = std::min(lu.size(-2), lu.size(-1));
	std::vector<int64_t> shape = batch_of(lu);
	if (k == 0)
		return at::zeros(shape, lu.options().dtype(at::kInt));
	if (lu.numel() == 0)
		return at::zeros(shape, lu.options().dtype(at::kInt));
	at::Tensor zero = lu.diagonal(0, -2, -1).eq(0).to(at::kFloat);
	at::Tensor first = zero.argmax(-1).add(1).to(at::kInt);
	return at::where(zero.amax(-1).gt(0), first, at::zeros_like(first)).view(shape);
}

struct Factored {
	at::Tensor lu, piv;   /* [B, m, n] fp32, [B, k] int64 0-based */
	std::vector<int64_t> batch;
};

Factored factor(const at::Tensor &A)
{
	Factored f;
	f.batch = batch_of(A);
	f.lu = flat_copy(A, f.batch);
	f.piv = f.lu.numel() ? lu_inplace(f.lu)
			     : at::arange(std::min(A.size(-2), A.size(-1)), A.options().dtype(at::kLong))
				       .expand({ f.lu.size(0), std::min(A.size(-2), A.size(-1)) })
				       .contiguous();
	return f;
}

at::Tensor unflat(const at::Tensor &t, const std::vector<int64_t> &batch)
{
	std::vector<int64_t> shape = batch;
	for (int64_t d = 1; d < t.dim(); d++)
		shape.push_back(t.size(d));
	return t.view(shape);
}

at::Tensor pivots_out(const Factored &f)
{
	return unflat(f.piv.add(1).to(at::kInt), f.batch);
}

std::tuple<at::Tensor &, at::Tensor &, at::Tensor &> lu_factor_ex_out(const at::Tensor &A, bool pivot, bool check_errors,
								     at::Tensor &LU, at::Tensor &pivots, at::Tensor &info)
{
	if (!matrices(A) || !pivot || !on_device({ &LU, &pivots, &info }))
		return declined;
	Factored f = factor(A);
	at::Tensor lu = unflat(f.lu, f.batch), inf = lu_info(lu);
	if (check_errors && inf.numel() && peek_cpu(inf.ne(0).any()).item<bool>())
		return declined;   /* CPU raises its error */
	composite_out(LU, { &A }, lu);
	composite_out(pivots, { &A }, pivots_out(f));
	composite_out(info, { &A }, inf);
	return { LU, pivots, info };
}

// ---- triangular solves ------------------------------------------------------------

// x [B, n, r] := T^-1 x in place for T [B, n, n] lower or upper (its
// other triangle ignored), transposed first if asked, unit diagonal if
// asked: row by row, each row less the product of T's row with the rows
// already solved
void tri_solve(const at::Tensor &T, at::Tensor &x, bool lower, bool unit, bool transpose)
{
	int64_t n = T.size(1);
	at::Tensor M = transpose ? T.transpose(1, 2) : T;
	bool down = lower != transpose;
	for (int64_t s = 0; s < n; s++) {
		int64_t i = down ? s : n - 1 - s;
		at::Tensor row = x.select(1, i);
		at::Tensor v = row;
		if (s > 0) {
			int64_t lo = down ? 0 : i + 1;
			at::Tensor coef = M.select(1, i).narrow(1, lo, s).unsqueeze(1);   /* [B, 1, s] */
			v = v.sub(at::matmul(coef, x.narrow(1, lo, s)).squeeze(1));
		}
		if (!unit)
			v = v.div(M.select(1, i).narrow(1, i, 1));
		row.copy_(v);
	}
}

// x [B, n, r] := P x (forward: the swaps in order, P^T applied) or the
// swaps undone in reverse
void permute_rows(at::Tensor &x, const at::Tensor &piv, bool forward)
{
	int64_t k = piv.size(1);
	for (int64_t s = 0; s < k; s++) {
		int64_t i = forward ? s : k - 1 - s;
		swap_rows(x, i, piv.select(1, i));
	}
}

// A X = B (or A^T X = B) from A's factors, x [B, n, r] in place
void lu_solve_inplace(const Factored &f, at::Tensor &x, bool adjoint)
{
	if (!adjoint) {
		permute_rows(x, f.piv, true);
		tri_solve(f.lu, x, true, true, false);
		tri_solve(f.lu, x, false, false, false);
	} else {
		tri_solve(f.lu, x, false, false, true);
		tri_solve(f.lu, x, true, true, true);
		permute_rows(x, f.piv, false);
	}
}

// the common batch of a factored [.., n, n] and B [.., n, r]
std::vector<int64_t> common_batch(const at::Tensor &A, const at::Tensor &B)
{
	return at::infer_size(batch_of(A), batch_of(B));
}

// X with A X = B (left) or X A = B, A given by its factors; B [.., n, r]
at::Tensor solve_factored(Factored f, const at::Tensor &A_shape_of, const at::Tensor &B, bool left, bool adjoint)
{
	at::Tensor Bm = left ? B : B.transpose(-2, -1);
	std::vector<int64_t> batch = common_batch(A_shape_of, Bm);
	if (batch != f.batch) {   /* the factors broadcast over B's batch */
		std::vector<int64_t> ls = batch, ps = batch;
		ls.push_back(f.lu.size(1));
		ls.push_back(f.lu.size(2));
		ps.push_back(f.piv.size(1));
		int64_t b = 1;
		for (int64_t s : batch)
			b *= s;
		f.lu = unflat(f.lu, f.batch).expand(ls).reshape({ b, f.lu.size(1), f.lu.size(2) });
		f.piv = unflat(f.piv, f.batch).expand(ps).reshape({ b, f.piv.size(1) });
		f.batch = batch;
	}
	at::Tensor x = flat_copy(Bm, batch);
	if (x.numel())
		lu_solve_inplace(f, x, left ? adjoint : !adjoint);
	at::Tensor r = unflat(x, batch);
	return left ? r : r.transpose(-2, -1);
}

bool is_square(const at::Tensor &A)
{
	return A.size(-1) == A.size(-2);
}

at::Tensor &lu_solve_out(const at::Tensor &LU, const at::Tensor &pivots, const at::Tensor &B, bool left, bool adjoint,
			 at::Tensor &out)
{
	if (!matrices(LU) || !matrices(B) || !is_square(LU) || !pivots.is_privateuseone() ||
	    pivots.scalar_type() != at::kInt || pivots.dim() != LU.dim() - 1 ||
	    pivots.size(-1) != LU.size(-1) || B.size(left ? -2 : -1) != LU.size(-1))
		return declined;
	Factored f;
	f.batch = batch_of(LU);
	f.lu = flat_copy(LU, f.batch);
	std::vector<int64_t> ps = f.batch;
	ps.push_back(pivots.size(-1));
	f.piv = pivots.expand(ps).reshape({ f.lu.size(0), pivots.size(-1) }).to(at::kLong).sub(1);
	return composite_out(out, { &LU, &pivots, &B }, solve_factored(f, LU, B, left, adjoint));
}

// linalg.solve's B is a vector (or a batch of them) when it is 1-D or has
// A's shape less the last dim (CPU's linalg_solve_is_vector_rhs)
bool vector_rhs(const at::Tensor &A, const at::Tensor &B)
{
	return B.dim() == 1 || (A.dim() - 1 == B.dim() && B.sizes().equals(A.sizes().slice(0, A.dim() - 1)));
}

std::tuple<at::Tensor &, at::Tensor &, at::Tensor &, at::Tensor &>
solve_ex_out(const at::Tensor &A, const at::Tensor &B, bool left, bool check_errors, at::Tensor &result, at::Tensor &LU,
	     at::Tensor &pivots, at::Tensor &info)
{
	if (!matrices(A) || !is_square(A) || !B.is_privateuseone() || B.scalar_type() != at::kFloat || B.dim() < 1 ||
	    !on_device({ &result, &LU, &pivots, &info }))
		return declined;
	bool vec = vector_rhs(A, B);
	if (vec && !left)
		return declined;   /* CPU's "vector broadcasting ... left=False" error */
	at::Tensor Bm = vec ? B.unsqueeze(left ? -1 : -2) : B;
	if (Bm.dim() < 2 || Bm.size(left ? -2 : -1) != A.size(-1))
		return declined;
	Factored f = factor(A);
	at::Tensor lu = unflat(f.lu, f.batch), inf = lu_info(lu);
	if (check_errors && inf.numel() && peek_cpu(inf.ne(0).any()).item<bool>())
		return declined;
	at::Tensor x = solve_factored(f, A, Bm, left, false);
	if (vec)
		x = x.squeeze(left ? -1 : -2);
	composite_out(result, { &A, &B }, x);
	composite_out(LU, { &A }, lu);
	composite_out(pivots, { &A }, pivots_out(f));
	composite_out(info, { &A }, inf);
	return { result, LU, pivots, info };
}

std::tuple<at::Tensor &, at::Tensor &> inv_ex_out(const at::Tensor &A, bool check_errors, at::Tensor &inverse,
						  at::Tensor &info)
{
	if (!matrices(A) || !is_square(A) || !on_device({ &inverse, &info }))
		return declined;
	Factored f = factor(A);
	at::Tensor inf = lu_info(unflat(f.lu, f.batch));
	if (check_errors && inf.numel() && peek_cpu(inf.ne(0).any()).item<bool>())
		return declined;
	at::Tensor eye = at::eye(A.size(-1), A.options());
	composite_out(inverse, { &A }, solve_factored(f, A, eye, true, false));
	composite_out(info, { &A }, inf);
	return { inverse, info };
}

// ---- determinants and unpacking ---------------------------------------------------------

// the permutation's sign per matrix: -1 to the number of real swaps
at::Tensor swap_sign(const Factored &f)
{
	int64_t k = f.piv.size(1);
	at::Tensor moved = f.piv.ne(at::arange(k, f.piv.options()).unsqueeze(0)).to(at::kFloat).sum(1);
	return moved.fmod(2.0).mul(-2.0).add(1.0);
}

// CPU's det / slogdet factor A^T when A is contiguous (and return that LU:
// their backward solves with it, adjoint accordingly); A otherwise
Factored det_factors(const at::Tensor &A)
{
	return factor(A.is_contiguous() ? A.mT() : A);
}

std::tuple<at::Tensor &, at::Tensor &, at::Tensor &> det_out(const at::Tensor &A, at::Tensor &result, at::Tensor &LU,
							     at::Tensor &pivots)
{
	if (!matrices(A) || !is_square(A) || !on_device({ &result, &LU, &pivots }))
		return declined;
	Factored f = det_factors(A);
	at::Tensor d = f.lu.diagonal(0, 1, 2).prod(1).mul(swap_sign(f));
	composite_out(result, { &A }, unflat(d.unsqueeze(1), f.batch).squeeze(-1));
	composite_out(LU, { &A }, unflat(f.lu, f.batch));
	composite_out(pivots, { &A }, pivots_out(f));
	return { result, LU, pivots };
}

std::tuple<at::Tensor &, at::Tensor &, at::Tensor &, at::Tensor &>
slogdet_out(const at::Tensor &A, at::Tensor &sign, at::Tensor &logabsdet, at::Tensor &LU, at::Tensor &pivots)
{
	if (!matrices(A) || !is_square(A) || !on_device({ &sign, &logabsdet, &LU, &pivots }))
		return declined;
	Factored f = det_factors(A);
	at::Tensor diag = f.lu.diagonal(0, 1, 2);
	at::Tensor s = diag.sign().prod(1).mul(swap_sign(f));
	at::Tensor l = diag.abs().log().sum(1);
	composite_out(sign, { &A }, unflat(s.unsqueeze(1), f.batch).squeeze(-1));
	composite_out(logabsdet, { &A }, unflat(l.unsqueeze(1), f.batch).squeeze(-1));
	composite_out(LU, { &A }, unflat(f.lu, f.batch));
	composite_out(pivots, { &A }, pivots_out(f));
	return { sign, logabsdet, LU, pivots };
}

// P, L, U with A = P L U from the packed factors: L unit lower [m, k], U
// upper [k, n], P the swaps applied in order to the identity's rows
std::tuple<at::Tensor, at::Tensor, at::Tensor> unpack(const at::Tensor &lu, const at::Tensor &piv0,
						      const std::vector<int64_t> &batch, bool data, bool pivots)
{
	int64_t m = lu.size(1), n = lu.size(2), k = std::min(m, n), B = lu.size(0);
	at::Tensor P = at::empty({ 0 }, lu.options()), L = P, U = P;
	if (data) {
		L = lu.narrow(2, 0, k).tril(-1).add(at::eye(m, k, lu.options()));
		U = lu.narrow(1, 0, k).triu();
		L = unflat(L, batch);
		U = unflat(U, batch);
	}
	if (pivots) {
		at::Tensor perm = at::arange(m, lu.options().dtype(at::kFloat)).expand({ B, m }).contiguous();
		at::Tensor p3 = perm.unsqueeze(2);
		for (int64_t i = 0; i < k; i++)
			swap_rows(p3, i, piv0.select(1, i));
		at::Tensor rows = integral_float_to_int64(p3.squeeze(2)).unsqueeze(1);   /* [B, 1, m] */
		P = at::zeros({ B, m, m }, lu.options()).scatter_(1, rows, 1.0);
		P = unflat(P, batch);
	}
	return { P, L, U };
}

std::tuple<at::Tensor &, at::Tensor &, at::Tensor &> lu_unpack_out(const at::Tensor &LU, const at::Tensor &pivots,
								   bool data, bool piv, at::Tensor &P, at::Tensor &L,
								   at::Tensor &U)
{
	if (!matrices(LU) || !pivots.is_privateuseone() || pivots.scalar_type() != at::kInt ||
	    pivots.dim() != LU.dim() - 1 || pivots.size(-1) != std::min(LU.size(-1), LU.size(-2)) ||
	    !on_device({ &P, &L, &U }))
		return declined;
	std::vector<int64_t> batch = batch_of(LU);
	at::Tensor lu = flat_copy(LU, batch);
	at::Tensor p0 = pivots.reshape({ lu.size(0), pivots.size(-1) }).to(at::kLong).sub(1);
	auto [p, l, u] = unpack(lu, p0, batch, data, piv);
	composite_out(P, { &LU, &pivots }, p);
	composite_out(L, { &LU, &pivots }, l);
	composite_out(U, { &LU, &pivots }, u);
	return { P, L, U };
}

std::tuple<at::Tensor &, at::Tensor &, at::Tensor &> linalg_lu_out(const at::Tensor &A, bool pivot, at::Tensor &P,
								   at::Tensor &L, at::Tensor &U)
{
	if (!matrices(A) || !pivot || !on_device({ &P, &L, &U }))
		return declined;
	Factored f = factor(A);
	auto [p, l, u] = unpack(f.lu, f.piv, f.batch, true, true);
	composite_out(P, { &A }, p);
	composite_out(L, { &A }, l);
	composite_out(U, { &A }, u);
	return { P, L, U };
}

// ---- triangular systems ---------------------------------------------------------------

// X with A X = B (left) or X A = B for a triangular A, in A's float type
// (the gated-delta-rule layers of Qwen3-Next and OLMo-hybrid solve 64-row
// unit lower systems per chunk in bf16)
at::Tensor triangular(const at::Tensor &A, const at::Tensor &B, bool upper, bool left, bool unit, bool transpose)
{
	if (!is_float_neuron(A) || !is_float_neuron(B) || A.scalar_type() != B.scalar_type() || A.device() != B.device() ||
	    A.dim() < 2 || B.dim() < 2 || !is_square(A) || B.size(left ? -2 : -1) != A.size(-1))
		return {};
	at::Tensor Bm = left ? B : B.transpose(-2, -1);
	std::vector<int64_t> batch = common_batch(A, Bm);
	at::Tensor T = flat_copy(A, batch), x = flat_copy(Bm, batch);
	if (x.numel())
		tri_solve(T, x, !upper, unit, left ? transpose : !transpose);
	at::Tensor r = unflat(x, batch);
	return left ? r : r.transpose(-2, -1);
}

std::tuple<at::Tensor &, at::Tensor &> triangular_solve_out(const at::Tensor &B, const at::Tensor &A, bool upper,
							    bool transpose, bool unit, at::Tensor &X, at::Tensor &M)
{
	at::Tensor r = on_device({ &X, &M }) ? triangular(A, B, upper, true, unit, transpose) : at::Tensor();
	if (!r.defined())
		return declined;
	composite_out(X, { &A, &B }, r);
	std::vector<int64_t> ms = common_batch(A, B);
	ms.push_back(A.size(-2));
	ms.push_back(A.size(-1));
	composite_out(M, { &A, &B }, A.expand(ms).clone());
	return { X, M };
}

at::Tensor solve_triangular(const at::Tensor &A, const at::Tensor &B, bool upper, bool left, bool unit)
{
	return triangular(A, B, upper, left, unit, false);   /* undefined: declined */
}

at::Tensor &solve_triangular_out(const at::Tensor &A, const at::Tensor &B, bool upper, bool left, bool unit,
				 at::Tensor &out)
{
	return composite_out(out, { &A, &B }, triangular(A, B, upper, left, unit, false));
}


// ---- Cholesky -------------------------------------------------------------------------

// A's lower Cholesky factor, column by column (LAPACK's potrf2 for one
// column: the pivot sqrt(a_jj - |l_j|^2), the column below it scaled); the
// first non-positive pivot's column (1-based) in info, 0 when none
std::tuple<at::Tensor, at::Tensor> cholesky_lower(const at::Tensor &A)
{
	std::vector<int64_t> batch = batch_of(A);
	at::Tensor a = flat_copy(A, batch);
	int64_t n = a.size(1);
	at::Tensor L = at::zeros(a.sizes(), a.options());
	at::Tensor bad = at::zeros({ a.size(0), n }, a.options());
	if (n == 0 || a.size(0) == 0)
		return { unflat(L, batch), at::zeros(batch, a.options().dtype(at::kInt)) };
	for (int64_t j = 0; j < n; j++) {
		at::Tensor row = L.select(1, j).narrow(1, 0, j);                            /* [B, j] */
		at::Tensor d = a.select(1, j).narrow(1, j, 1).squeeze(1);                    /* [B] */
		if (j > 0)
			d = d.sub(row.mul(row).sum(1));
		bad.select(1, j).copy_(d.le(0).bitwise_or(d.ne(d)).to(at::kFloat));
		at::Tensor p = d.sqrt();
		L.select(1, j).narrow(1, j, 1).copy_(p.unsqueeze(1));
		if (j + 1 < n) {
			at::Tensor col = a.narrow(1, j + 1, n - j - 1).select(2, j);             /* [B, n-j-1] */
			if (j > 0)
				col = col.sub(at::matmul(L.narrow(1, j + 1, n - j - 1).narrow(2, 0, j), row.unsqueeze(2)).squeeze(2));
			L.narrow(1, j + 1, n - j - 1).select(2, j).copy_(col.div(p.unsqueeze(1)));
		}
	}
	at::Tensor first = bad.argmax(1).add(1).to(at::kInt);
	at::Tensor info = at::where(bad.amax(1).gt(0), first, at::zeros_like(first));
	return { unflat(L, batch), info.view(batch) };
}

std::tuple<at::Tensor &, at::Tensor &> cholesky_ex_out(const at::Tensor &A, bool upper, bool check_errors, at::Tensor &L,
						       at::Tensor &info)
{
	if (!matrices(A) || !is_square(A) || !on_device({ &L, &info }))
		return declined;
	auto [l, inf] = cholesky_lower(upper ? A.mT() : A);   /* potrf 'U' reads the upper triangle */
	/* a matrix that is not positive definite: LAPACK's partial factor and
	 * CPU's error are CPU's to give */
	if (inf.numel() && peek_cpu(inf.ne(0).any()).item<bool>())
		return declined;
	composite_out(L, { &A }, upper ? l.transpose(-2, -1).contiguous() : l);
	composite_out(info, { &A }, inf);
	return { L, info };
}

at::Tensor cholesky(const at::Tensor &A, bool upper)
{
	if (!matrices(A) || !is_square(A))
		return declined;
	auto [l, inf] = cholesky_lower(upper ? A.mT() : A);
	if (inf.numel() && peek_cpu(inf.ne(0).any()).item<bool>())
		return declined;
	return upper ? l.transpose(-2, -1).contiguous() : l;
}

// (U^T U)^-1 B or (L L^T)^-1 B: two triangular solves
at::Tensor cholesky_solve_helper(const at::Tensor &B, const at::Tensor &A, bool upper)
{
	if (!matrices(A) || !matrices(B) || !is_square(A) || B.size(-2) != A.size(-1))
		return declined;
	std::vector<int64_t> batch = common_batch(A, B);
	at::Tensor T = flat_copy(A, batch), x = flat_copy(B, batch);
	if (x.numel()) {
		tri_solve(T, x, !upper, false, upper);    /* L y = B, or U^T y = B */
		tri_solve(T, x, !upper, false, !upper);   /* L^T x = y, or U x = y */
	}
	return unflat(x, batch);
}

at::Tensor cholesky_inverse(const at::Tensor &A, bool upper)
{
	if (!matrices(A) || !is_square(A))
		return declined;
	return cholesky_solve_helper(at::eye(A.size(-1), A.options()), A, upper);
}

at::Tensor &cholesky_inverse_out(const at::Tensor &A, bool upper, at::Tensor &out)
{
	return composite_out(out, { &A }, neuron::cholesky_inverse(A, upper));
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_LU)

}  // namespace neuron
