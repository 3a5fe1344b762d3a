// aten/reduction/reduce.cpp -- reductions on the device: sum, nansum, mean,
// amax, amin, max / min (whole tensor or along a dim), argmax, argmin, all,
// any, count_nonzero (softmax and layer norm: softmax.cpp).  The
// reduced dim is brought last and made contiguous by a DMA program when it
// is not already, then the row kernel runs (programs/rows.c); everything it
// does not cover goes to the counted CPU fallback.
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/linalg/matmul.h"
#include "aten/pointwise/lowering.h"
#include "aten/reduction/digits.h"
#include "aten/reduction/rows.h"
#include "ops.def"

#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/count_nonzero_ops.h>
#include <ATen/ops/nansum_ops.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/all_ops.h>
#include <ATen/ops/amax_ops.h>
#include <ATen/ops/any_ops.h>
#include <ATen/ops/amin_ops.h>
#include <ATen/ops/amax_ops.h>
#include <ATen/ops/aminmax_ops.h>
#include <ATen/ops/argmax_ops.h>
#include <ATen/ops/argmin_ops.h>
#include <ATen/ops/min_ops.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/max_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/sum_ops.h>
#include <torch/library.h>

#include <cstring>
#include <limits>

namespace neuron {

bool float_device(const at::Tensor &t)
{
	return is_float_neuron(t) && t.numel() > 0;
}

// x viewed as [rows, cols] with `dim` last, contiguous (a copy if needed)
at::Tensor rows_view(const at::Tensor &x, int64_t dim)
{
	at::Tensor t = x.dim() == 0 ? x.reshape({ 1 }) : x.movedim(dim, -1);
	return materialize(t, t.sizes(), t.scalar_type());
}

// runs the row kernel over x2d [rows, cols]; outs by name
void run_rows(const char *name, const nk_rows &op, const at::Tensor &x, std::initializer_list<Binding> extra_in,
	      std::initializer_list<Binding> outs)
{
	int dev = x.device().index();
	Program m = cached_program("rows", op, dev, nk_rows_program);
	std::vector<Binding> in{ { "x", &x } };
	in.insert(in.end(), extra_in.begin(), extra_in.end());
	if (in.size() == 1)
		run_program(m, dev, name, { in[0] }, outs);
	else
		run_program(m, dev, name, { in[0], in[1], in[2] }, outs);
}

// rows x cols, and whether the kernel takes rows of that length
bool fits(int op, int64_t cols, bool affine)
{
	const isa_target_info *ti = isa_target_get(isa_target_from_name(nsim_target_name()));
	int consts = op == NK_ROW_ARGMAX || op == NK_ROW_ARGMIN ? 1 : op == NK_ROW_LAYER_NORM && affine ? 2 : 0;
	return ti && cols > 0 && (uint64_t)(4 + consts) * cols * 4 + 4096 + 128 <= ti->sbuf_partition_bytes;
}

namespace {

// the shape of a reduction's result: `self` without dim `dim` (1 with
// keepdim), or of every dim with `all`
std::vector<int64_t> reduced_shape(const at::Tensor &self, int64_t dim, bool all, bool keepdim)
{
	std::vector<int64_t> shape;
	for (int64_t d = 0; d < self.dim() && !all; d++) {
		if (d != dim)
			shape.push_back(self.size(d));
		else if (keepdim)
			shape.push_back(1);
	}
	if (all && keepdim)
		shape.assign(self.dim(), 1);
	return shape;
}

at::Tensor reduce_one(const char *name, int kop, const at::Tensor &self, at::OptionalIntArrayRef dims,
		      bool keepdim, at::ScalarType out_dt);
std::vector<int64_t> reduced_shape(const at::Tensor &self, int64_t dim, bool all, bool keepdim);

// Which dims of `self` a reduction over `dims` reduces (every dim for an
// absent or empty list); a dim named twice is an error, as on CPU
std::vector<bool> reduced_mask(const char *name, const at::Tensor &self, at::OptionalIntArrayRef dims)
{
	std::vector<bool> red(self.dim(), !dims || dims->empty());
	if (dims)
		for (int64_t d : *dims) {
			int64_t w = at::maybe_wrap_dim(d, self.dim());
			TORCH_CHECK(!red[w], name, ": dim ", w,
				    " appears multiple times in the list of dims");
			red[w] = true;
		}
	return red;
}

// self as [kept elements, reduced elements] in `dtype`: the reduced dims
// brought last and flattened (one DMA program when they are not already)
at::Tensor reduced_last(const at::Tensor &self, const std::vector<bool> &red, at::ScalarType dtype)
{
	std::vector<int64_t> perm;
	int64_t rows = 1, n = 1;
	for (int pass = 0; pass < 2; pass++)
		for (int64_t d = 0; d < self.dim(); d++)
			if (red[d] == (pass == 1)) {
				perm.push_back(d);
				(pass ? n : rows) *= self.size(d);
			}
	at::Tensor p = self.permute(perm);
	return materialize(p, p.sizes(), dtype).view({ rows, n });
}

// the result's shape: self without its reduced dims (1s with keepdim)
std::vector<int64_t> mask_shape(const at::Tensor &self, const std::vector<bool> &red, bool keepdim)
{
	std::vector<int64_t> shape;
	for (int64_t d = 0; d < self.dim(); d++)
		if (!red[d] || keepdim)
			shape.push_back(red[d] ? 1 : self.size(d));
	return shape;
}

constexpr int64_t kSlabRows = 16;   // reduced rows a slab sum adds on VectorE
constexpr int64_t kSpreadCols = 4096;   // a whole-tensor reduction this long spreads over the partitions

// A sum / mean over a block of adjacent dims that are not last (a weight
// gradient's sum over batch and sequence): x as [A, M, N] with the block as
// M, reduced on TensorE as ones[A, 1, M] @ x (fp32 PSUM), the partition-dim
// reduction hardware uses -- where bringing the block last would be an
// element-wise transposing DMA.  Undefined when not that case.
at::Tensor reduce_block(int kop, const at::Tensor &self, int64_t first, int64_t last, bool keepdim,
			at::ScalarType out_dt)
{
	if ((kop != NK_ROW_SUM && kop != NK_ROW_MEAN) || last >= self.dim() - 1 || !self.is_contiguous() ||
	    self.scalar_type() == at::kDouble)
		return {};
	int64_t A = 1, M = 1, N = 1;
	for (int64_t d = 0; d < self.dim(); d++)
		(d < first ? A : d <= last ? M : N) *= self.size(d);
	if (M <= 1)
		return {};
	std::vector<int64_t> shape;   // the result's: the block dropped (1s with keepdim)
	for (int64_t d = 0; d < self.dim(); d++)
		if (d < first || d > last)
			shape.push_back(self.size(d));
		else if (keepdim)
			shape.push_back(1);
	int idt = isa_dtype_of(self.scalar_type()), odt = isa_dtype_of(out_dt);
	if (M <= kSlabRows && N >= 128 && idt != ISA_DT_INVALID && odt != ISA_DT_INVALID &&
	    at::isFloatingType(self.scalar_type()) && at::isFloatingType(out_dt)) {
		// a few rows per slab: added on VectorE, in order (the TensorE
		// product ran its slabs one after another)
		nk_slabs sp{ kop == NK_ROW_MEAN, idt, odt, (uint64_t)A, (uint64_t)M, (uint64_t)N };
		at::Tensor out = at::empty({ A, N }, self.options().dtype(out_dt));
		int dev = self.device().index();
		Program m = cached_program("slabs", sp, dev, nk_slabs_program);
		run_program(m, dev, kop == NK_ROW_MEAN ? "aten::mean" : "aten::sum", { { "x", &self } }, { { "out", &out } });
		return out.view(shape);
	}
	at::Tensor ones = at::ones({ A, 1, M }, self.options());
	at::Tensor r = matmul_to(ones, self.view({ A, M, N }), at::kFloat);   // [A, 1, N]
	if (kop == NK_ROW_MEAN)
		r = r.mul(1.0 / (double)M);
	r = r.view(shape);
	return r.scalar_type() == out_dt ? r : r.to(out_dt);
}

// Several dims (a bias gradient's sum over batch and sequence): they are
// brought last by one DMA program and flattened into one row.
at::Tensor reduce_dims(const char *name, int kop, const at::Tensor &self, at::IntArrayRef dims, bool keepdim,
		       at::ScalarType out_dt)
{
	std::vector<bool> red = reduced_mask(name, self, dims);
	int64_t first = -1, last = -1, count = 0;
	for (int64_t d = 0; d < self.dim(); d++)
		if (red[d]) {
			first = first < 0 ? d : first;
			last = d;
			count++;
		}
	if (count == last - first + 1) {   // one block of adjacent dims
		at::Tensor r = reduce_block(kop, self, first, last, keepdim, out_dt);
		if (r.defined())
			return r;
	}
	at::Tensor r = reduce_one(name, kop, reduced_last(self, red, self.scalar_type()), at::IntArrayRef{ 1 }, false,
				  out_dt);
	return r.defined() ? r.view(mask_shape(self, red, keepdim)) : r;
}

// reduction of `self` over its dims (all, for an empty/absent dim list);
// undefined when not covered
// argmax / argmin of rows too long for one SBUF pass (a vocabulary's
// logits in greedy decoding): rows as [rows, chunks, c] (padded with the
// value that never wins, -inf / +inf, at the end), each chunk's max / min
// and its arg, the arg of the chunks' values, then that chunk's arg + its
// offset.  The first occurrence wins within a chunk and across chunks (the
// first chunk holding the extreme value), so the result is the first
// occurrence overall, as on CPU; a NaN wins both passes the same way.
at::Tensor long_arg(const char *name, int kop, const at::Tensor &self, const at::Tensor &x, int64_t dim, bool all,
		    bool keepdim)
{
	int64_t cols = x.dim() == 0 ? 1 : x.size(dim);
	int64_t c = 8192;
	while (c > 256 && !fits(kop, c))
		c /= 2;
	if (!fits(kop, c))
		return {};
	at::Tensor xr = rows_view(x, dim);
	int64_t rows = xr.numel() / cols, chunks = (cols + c - 1) / c;
	xr = xr.view({ rows, cols });
	if (chunks * c != cols) {
		bool max = kop == NK_ROW_ARGMAX;
		at::Tensor pad = at::full({ rows, chunks * c - cols },
					  max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity(),
					  xr.options());
		xr = at::cat({ xr, pad }, 1);
	}
	at::Tensor x3 = xr.view({ rows, chunks, c });
	int vop = kop == NK_ROW_ARGMAX ? NK_ROW_MAX : NK_ROW_MIN;
	at::Tensor part_v = reduce_one(name, vop, x3, at::IntArrayRef{ 2 }, false, self.scalar_type());
	at::Tensor part_i = reduce_one(name, kop, x3, at::IntArrayRef{ 2 }, false, self.scalar_type());
	if (!part_v.defined() || !part_i.defined())
		return {};
	at::Tensor j = reduce_one(name, kop, part_v, at::IntArrayRef{ 1 }, true, self.scalar_type());   // [rows, 1]
	if (!j.defined())
		return {};
	at::Tensor out = part_i.gather(1, j).add(j.mul(c));
	return out.view(reduced_shape(all ? self : x, dim, all, keepdim));
}

at::Tensor reduce_one(const char *name, int kop, const at::Tensor &self, at::OptionalIntArrayRef dims,
		      bool keepdim, at::ScalarType out_dt)
{
	if (is_float_neuron(self) && self.numel() == 0 && (kop == NK_ROW_SUM || kop == NK_ROW_MEAN) &&
	    isa_dtype_of(out_dt) != ISA_DT_INVALID) {
		/* nothing to reduce: CPU's 0 for a sum, NaN (0 / 0) for a mean */
		at::Tensor out = at::empty(mask_shape(self, reduced_mask(name, self, dims), keepdim),
					   self.options().dtype(out_dt));
		if (out.numel())
			TORCH_CHECK(native_fill(out, kop == NK_ROW_SUM ? 0.0 : std::nan("")), "neuron: empty reduction fill");
		return out;
	}
	if (!float_device(self) || isa_dtype_of(out_dt) == ISA_DT_INVALID)
		return {};
	TORCH_CHECK(self.dim() <= 64, "only tensors with up to 64 dims are supported");   // as CPU's TensorIterator
	bool all = !dims.has_value() || dims->empty();
	bool arg = kop == NK_ROW_ARGMAX || kop == NK_ROW_ARGMIN;
	if (!all && dims->size() != 1)
		return arg ? at::Tensor() : reduce_dims(name, kop, self, *dims, keepdim, out_dt);
	int64_t dim = all ? 0 : at::maybe_wrap_dim((*dims)[0], self.dim());
	at::Tensor x = all ? self.reshape({ -1 }) : self;
	if (all)
		dim = 0;
	int64_t cols = x.dim() == 0 ? 1 : x.size(dim);
	if (!all && x.dim() > 1 && dim < x.dim() - 1) {
		at::Tensor r = reduce_block(kop, x, dim, dim, keepdim, out_dt);
		if (r.defined())
			return r;
	}
	if (all && !arg && cols >= kSpreadCols && (kop == NK_ROW_SUM || kop == NK_ROW_MEAN || kop == NK_ROW_MAX ||
						    kop == NK_ROW_MIN)) {
		// a whole tensor is one row: cut over up to 128 partitions in one
		// program (rows.c's spread), not folded on one
		for (int64_t n = 128; n >= 16; n--)
			if (cols % n == 0 && fits(kop, cols / n)) {
				nk_rows op{};
				op.op = kop;
				op.in_dtype = isa_dtype_of(self.scalar_type());
				op.out_dtype = isa_dtype_of(out_dt);
				op.rows = 1;
				op.cols = (uint64_t)cols;
				op.spread = (uint32_t)n;
				at::Tensor xr = x.contiguous();
				at::Tensor out = at::empty(reduced_shape(self, dim, all, keepdim), self.options().dtype(out_dt));
				run_rows(name, op, xr, {}, { { "out", &out } });
				return out;
			}
	}
	if (!fits(kop, cols) && !arg) {
		// a long row in two passes over [rows, cols / c, c] (equal chunks, so a
		// mean of means is the mean); partials stay fp32
		for (int64_t c = 8192; c >= 256; c--)
			if (cols % c == 0 && fits(kop, cols / c)) {
				at::Tensor xr = rows_view(x, dim);
				int64_t rows = xr.numel() / cols;
				at::Tensor part = reduce_one(name, kop, xr.view({ rows, cols / c, c }), at::IntArrayRef{ 2 },
							     false, at::kFloat);
				at::Tensor out = reduce_one(name, kop, part, at::IntArrayRef{ 1 }, false, out_dt);
				return out.view(reduced_shape(all ? self : x, dim, all, keepdim));
			}
		return {};
	}
	if (!fits(kop, cols))
		return arg ? long_arg(name, kop, self, x, dim, all, keepdim) : at::Tensor();
	at::Tensor xr = rows_view(x, dim);
	nk_rows op{};
	op.op = kop;
	op.in_dtype = isa_dtype_of(self.scalar_type());
	op.out_dtype = arg ? ISA_DT_int32 : isa_dtype_of(out_dt);
	op.cols = (uint64_t)cols;
	op.rows = (uint64_t)(xr.numel() / cols);
	at::Tensor out = at::empty(reduced_shape(self, dim, all, keepdim), self.options().dtype(arg ? at::kLong : out_dt));
	run_rows(name, op, xr, {}, { { "out", &out } });
	return out;
}

#define REDUCE(fname, kop, aten, opname)                                                             \
	at::Tensor fname(const at::Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,              \
			 std::optional<at::ScalarType> dtype)                                            \
	{                                                                                          \
		at::Tensor out = reduce_one("aten::" opname, kop, self, dim, keepdim,                      \
					    dtype.value_or(self.scalar_type()));                           \
		if (out.defined())                                                                 \
			return out;                                                                \
		return declined; \
	}

REDUCE(sum_float, NK_ROW_SUM, sum_dim_IntList, "sum")

// An exact int64 sum of an integer tensor (label masks, token counts): the
// reduced dims brought last as [rows, n] int64, zero-padded to a power of
// two, then halved by exact 64-bit adds (VectorE on 32-bit halves with
// carries, int64.c) -- log2(n) passes, wrapping on overflow as PyTorch does.
at::Tensor sum_int64(const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim)
{
	if (self.dim() == 0)   // one element: the sum is the element
		return materialize(self, self.sizes(), at::kLong).clone();
	std::vector<bool> red = reduced_mask("sum", self, dims);
	at::Tensor x = reduced_last(self, red, at::kLong);
	int64_t rows = x.size(0), n = x.size(1);
	int64_t p2 = 1;
	while (p2 < n)
		p2 *= 2;
	if (p2 > n)
		x = at::cat({ x, at::zeros({ rows, p2 - n }, x.options()) }, 1);
	for (int64_t h = p2 / 2; h >= 1; h /= 2) {
		at::Tensor out;
		at::Tensor a = materialize(x.narrow(1, 0, h), { rows, h }, at::kLong),
			   b = materialize(x.narrow(1, h, h), { rows, h }, at::kLong);
		if (!native_i64_addsub("aten::sum", false, a, b, out))
			return {};
		x = out;
	}
	return x.reshape(mask_shape(self, red, keepdim));
}

// An exact int64 sum of a narrow integer tensor (bool, uint8, int8, int16):
// fp32 adds are exact while every partial sum stays within 2^24, so each
// row is cut in chunks of 2^24 / 2^bits elements summed by the fp32 row
// reduction, a slab of chunks at a time (its fp32 copy at most 16 MiB),
// and the chunk sums -- integers -- are added by sum_int64.  Device memory
// stays within the input plus a slab (a 256 MiB uint8 sum widened all of it
// to int64 and took 5.4 GiB).
at::Tensor sum_narrow_int(const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim)
{
	at::ScalarType st = self.scalar_type();
	int bits = st == at::kBool ? 1 : st == at::kShort ? 16 : 8;
	std::vector<bool> red = reduced_mask("sum", self, dims);
	at::Tensor x = reduced_last(self, red, st);
	int64_t rows = x.size(0), n = x.size(1);
	int64_t c = std::min<int64_t>((int64_t)1 << (24 - bits), n), per_row = (n + c - 1) / c;
	if (per_row * c != n)
		x = at::cat({ x, at::zeros({ rows, per_row * c - n }, x.options()) }, 1);
	x = x.view({ rows * per_row, c });
	int64_t slab = std::max<int64_t>(1, ((int64_t)1 << 22) / c);   // chunks per fp32 slab
	std::vector<at::Tensor> sums;
	for (int64_t r0 = 0; r0 < x.size(0); r0 += slab) {
		int64_t nr = std::min(slab, x.size(0) - r0);
		at::Tensor f = at::empty({ nr, c }, x.options().dtype(at::kFloat));
		if (!native_copy(f, x.narrow(0, r0, nr)))
			return {};
		at::Tensor s = reduce_one("aten::sum", NK_ROW_SUM, f, at::IntArrayRef{ 1 }, false, at::kFloat);
		if (!s.defined())
			return {};
		sums.push_back(s);
	}
	at::Tensor parts = integral_float_to_int64(sums.size() == 1 ? sums[0] : at::cat(sums)).view({ rows, per_row });
	at::Tensor r = per_row == 1 ? parts.view({ rows }) : sum_int64(parts, at::IntArrayRef{ 1 }, false);
	return r.defined() ? r.reshape(mask_shape(self, red, keepdim)) : r;
}

at::Tensor sum(const at::Tensor &self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype)
{
	bool to_long = self.is_privateuseone() && self.numel() > 0 && dtype.value_or(at::kLong) == at::kLong;
	at::ScalarType st = self.scalar_type();
	if (to_long && self.dim() > 0 && (st == at::kBool || st == at::kByte || st == at::kChar || st == at::kShort)) {
		at::Tensor r = sum_narrow_int(self, dim, keepdim);
		if (r.defined())
			return r;
	}
	if (to_long && (st == at::kLong || st == at::kInt || st == at::kShort || st == at::kByte || st == at::kChar ||
			st == at::kBool)) {
		at::Tensor r = sum_int64(self, dim, keepdim);
		if (r.defined())
			return r;
	}
	return sum_float(self, dim, keepdim, dtype);
}

// sum into out (log-sum-exp and gated-attention code passes out=)
at::Tensor &sum_out(const at::Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
		    std::optional<at::ScalarType> dtype, at::Tensor &out)
{
	at::Tensor r = out.is_privateuseone() ? at::Tensor(neuron::sum(self, dim, keepdim, dtype.has_value() ? dtype
												: std::optional<at::ScalarType>(out.scalar_type())))
					      : at::Tensor();
	if (r.defined())
		return write_result(out, r);
	return declined;
}
REDUCE(mean, NK_ROW_MEAN, mean_dim, "mean")

at::Tensor amax(const at::Tensor &self, at::IntArrayRef dim, bool keepdim)
{
	if (at::isIntegralType(self.scalar_type(), false) && dim.size() <= 1) {
		auto r = int_extreme(self, dim.empty() ? std::nullopt : std::optional<int64_t>(dim[0]), keepdim, true);
		return r ? std::get<0>(*r) : at::Tensor();
	}
	at::Tensor out = reduce_one("aten::amax", NK_ROW_MAX, self, dim, keepdim, self.scalar_type());
	if (out.defined())
		return out;
	return declined;
}

at::Tensor amin(const at::Tensor &self, at::IntArrayRef dim, bool keepdim)
{
	if (at::isIntegralType(self.scalar_type(), false) && dim.size() <= 1) {
		auto r = int_extreme(self, dim.empty() ? std::nullopt : std::optional<int64_t>(dim[0]), keepdim, false);
		return r ? std::get<0>(*r) : at::Tensor();
	}
	at::Tensor out = reduce_one("aten::amin", NK_ROW_MIN, self, dim, keepdim, self.scalar_type());
	if (out.defined())
		return out;
	return declined;
}

// the out= forms, and aminmax (both, over dim or everything)
at::Tensor &amax_out(const at::Tensor &self, at::IntArrayRef dim, bool keepdim, at::Tensor &out)
{
	if (out.scalar_type() != self.scalar_type())
		return declined;
	return composite_out(out, { &self }, reduce_one("aten::amax", NK_ROW_MAX, self, dim, keepdim, self.scalar_type()));
}

at::Tensor &amin_out(const at::Tensor &self, at::IntArrayRef dim, bool keepdim, at::Tensor &out)
{
	if (out.scalar_type() != self.scalar_type())
		return declined;
	return composite_out(out, { &self }, reduce_one("aten::amin", NK_ROW_MIN, self, dim, keepdim, self.scalar_type()));
}

std::tuple<at::Tensor &, at::Tensor &> aminmax_out(const at::Tensor &self, std::optional<int64_t> dim, bool keepdim,
						    at::Tensor &min, at::Tensor &max)
{
	std::vector<int64_t> dims;
	if (dim)
		dims.push_back(*dim);
	if (min.scalar_type() != self.scalar_type() || max.scalar_type() != self.scalar_type() || self.numel() == 0)
		return declined;
	at::Tensor lo = reduce_one("aten::aminmax", NK_ROW_MIN, self, dims, keepdim, self.scalar_type());
	at::Tensor hi = lo.defined() ? reduce_one("aten::aminmax", NK_ROW_MAX, self, dims, keepdim, self.scalar_type())
				     : at::Tensor();
	if (!hi.defined() || !min.is_privateuseone() || !max.is_privateuseone())
		return declined;
	composite_out(min, { &self }, lo);
	composite_out(max, { &self }, hi);
	return { min, max };
}

at::Tensor argmax(const at::Tensor &self, std::optional<int64_t> dim, bool keepdim)
{
	if (at::isIntegralType(self.scalar_type(), false)) {
		auto r = int_extreme(self, dim, keepdim, true);
		return r ? std::get<1>(*r) : at::Tensor();
	}
	at::Tensor out;
	if (dim)
		out = reduce_one("aten::argmax", NK_ROW_ARGMAX, self, at::IntArrayRef{ *dim }, keepdim, self.scalar_type());
	else if (!keepdim)
		out = reduce_one("aten::argmax", NK_ROW_ARGMAX, self, std::nullopt, false, self.scalar_type());
	if (out.defined())
		return out;
	return declined;
}

std::tuple<at::Tensor, at::Tensor> max_dim(const at::Tensor &self, int64_t dim, bool keepdim)
{
	if (at::isIntegralType(self.scalar_type(), false)) {
		auto r = int_extreme(self, dim, keepdim, true);
		return r ? *r : std::tuple<at::Tensor, at::Tensor>{};   // undefined: declined
	}
	at::Tensor v = reduce_one("aten::max", NK_ROW_MAX, self, at::IntArrayRef{ dim }, keepdim, self.scalar_type());
	at::Tensor i = v.defined() ? reduce_one("aten::max", NK_ROW_ARGMAX, self, at::IntArrayRef{ dim }, keepdim,
						self.scalar_type())
				   : at::Tensor();
	if (i.defined())
		return { v, i };
	return declined;
}

at::Tensor argmin(const at::Tensor &self, std::optional<int64_t> dim, bool keepdim)
{
	if (at::isIntegralType(self.scalar_type(), false)) {
		auto r = int_extreme(self, dim, keepdim, false);
		return r ? std::get<1>(*r) : at::Tensor();
	}
	at::Tensor out;
	if (dim)
		out = reduce_one("aten::argmin", NK_ROW_ARGMIN, self, at::IntArrayRef{ *dim }, keepdim, self.scalar_type());
	else if (!keepdim)
		out = reduce_one("aten::argmin", NK_ROW_ARGMIN, self, std::nullopt, false, self.scalar_type());
	if (out.defined())
		return out;
	return declined;
}

std::tuple<at::Tensor, at::Tensor> min_dim(const at::Tensor &self, int64_t dim, bool keepdim)
{
	if (at::isIntegralType(self.scalar_type(), false)) {
		auto r = int_extreme(self, dim, keepdim, false);
		return r ? *r : std::tuple<at::Tensor, at::Tensor>{};   // undefined: declined
	}
	at::Tensor v = reduce_one("aten::min", NK_ROW_MIN, self, at::IntArrayRef{ dim }, keepdim, self.scalar_type());
	at::Tensor i = v.defined() ? reduce_one("aten::min", NK_ROW_ARGMIN, self, at::IntArrayRef{ dim }, keepdim,
						self.scalar_type())
				   : at::Tensor();
	if (i.defined())
		return { v, i };
	return declined;
}

// all / any over a tensor of any real type: min / max of (x != 0) as
// fp32, != 0 (NaN counts as true); over nothing, CPU's true (all) / false
// (any); undefined when not covered
at::Tensor all_any(bool any, const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim)
{
	if (!self.is_privateuseone() || self.is_complex() || units_of(self.scalar_type(), false).dtype == ISA_DT_INVALID)
		return {};
	if (self.numel() == 0) {
		at::Tensor out = at::empty(mask_shape(self, reduced_mask(any ? "any" : "all", self, dims), keepdim),
					   self.options().dtype(at::kBool));
		if (out.numel())
			TORCH_CHECK(native_fill(out, !any), "neuron: empty all / any fill");
		return out;
	}
	at::Tensor f = at::empty(self.sizes(), self.options().dtype(at::kFloat));
	if (!native_copy(f, self.scalar_type() == at::kBool ? self : self.ne(0)))
		return {};
	at::Tensor r = reduce_one(any ? "aten::any" : "aten::all", any ? NK_ROW_MAX : NK_ROW_MIN, f, dims, keepdim,
				  at::kFloat);
	return r.defined() ? r.ne(0) : r;
}

#define ALL_ANY(fname, is_any)                                                                            \
	at::Tensor fname##_full(const at::Tensor &self)                                                   \
	{                                                                                              \
		at::Tensor r = all_any(is_any, self, std::nullopt, false);                                  \
		return r;   /* undefined: declined */ \
	}                                                                                              \
	at::Tensor &fname##_full_out(const at::Tensor &self, at::Tensor &out)                             \
	{                                                                                              \
		at::Tensor r = all_any(is_any, self, std::nullopt, false);                                  \
		if (r.defined() && out.is_privateuseone() && out.scalar_type() == at::kBool)                \
			return write_result(out, r);                                                             \
		return declined; \
	}                                                                                              \
	at::Tensor fname##_dim(const at::Tensor &self, int64_t dim, bool keepdim)                         \
	{                                                                                              \
		at::Tensor r = all_any(is_any, self, at::IntArrayRef{ dim }, keepdim);                      \
		return r;   /* undefined: declined */ \
	}                                                                                              \
	at::Tensor &fname##_dim_out(const at::Tensor &self, int64_t dim, bool keepdim, at::Tensor &out)   \
	{                                                                                              \
		at::Tensor r = all_any(is_any, self, at::IntArrayRef{ dim }, keepdim);                      \
		if (r.defined() && out.is_privateuseone() && out.scalar_type() == at::kBool)                \
			return write_result(out, r);                                                             \
		return declined; \
	}

ALL_ANY(all, false)
ALL_ANY(any, true)

// the sum with NaN counted as 0
at::Tensor nansum(const at::Tensor &x, at::OptionalIntArrayRef dims, bool keepdim, std::optional<at::ScalarType> dtype)
{
	if (!is_float_neuron(x))
		return {};
	at::Tensor z = at::where(nan_mask(x), at::zeros({}, x.options()), x);
	return at::sum(z, dims, keepdim, dtype);
}

// nonzero elements over dims, as int64
at::Tensor count_nonzero_dims(const at::Tensor &self, at::IntArrayRef dim)
{
	if (!self.is_privateuseone() || at::isComplexType(self.scalar_type()))
		return declined;
	return self.ne(0).sum(dim);
}

// max() / min() of a whole tensor: floats by the row kernel; integers by a
// pairwise tree of compare + select (exact at any width, log2(n) rounds:
// a generation loop's unfinished_sequences.max() is one element, no
// program at all but its copy)
at::Tensor extreme(const at::Tensor &self, bool is_max)
{
	if (!dma_movable(self) || self.numel() == 0 || self.scalar_type() == at::kBool)
		return {};
	if (!at::isIntegralType(self.scalar_type(), false))
		return isa_dtype_of(self.scalar_type()) != ISA_DT_INVALID ? (is_max ? self.amax() : self.amin())
									  : at::Tensor();
	at::Tensor x = materialize(self.reshape({ -1 }), { self.numel() }, self.scalar_type());
	if (x.numel() == 1)
		return x.reshape({}).clone();   // a result of its own, not a view of self
	while (x.numel() > 1) {
		int64_t h = x.numel() / 2;
		at::Tensor a = x.narrow(0, 0, h), b = x.narrow(0, h, h);
		at::Tensor m = at::where(is_max ? a.gt(b) : a.lt(b), a, b);
		x = x.numel() % 2 ? materialize(at::cat({ m, x.narrow(0, 2 * h, 1) }), { h + 1 }, x.scalar_type()) : m;
	}
	return x.reshape({});
}

at::Tensor max_full(const at::Tensor &self)
{
	at::Tensor r = extreme(self, true);
	return r;   /* undefined: declined */
}

at::Tensor min_full(const at::Tensor &self)
{
	at::Tensor r = extreme(self, false);
	return r;   /* undefined: declined */
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_REDUCE)

}  // namespace neuron
