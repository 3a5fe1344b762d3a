// runtime/copy.cpp -- device-to-device copies as DMA programs: copy_ between
// neuron tensors (any strides, broadcast sources, float casts), and the
// operand preparation other kernels use (expand / cast / make contiguous).
#include "runtime/copy.h"
#include "runtime/program.h"

#include <ATen/native/Resize.h>
#include <ATen/MemoryOverlap.h>

#include <ATen/ops/empty.h>

namespace neuron {

// fp8 (torch's float8_e4m3fn / float8_e5m2): the ISA's fp8 types, whose
// widening is exact; narrowing to them is not done on the device (the
// engines saturate e4m3 at 448 where torch's conversion gives NaN)
static int fp8_dtype(at::ScalarType t)
{
	return t == at::kFloat8_e4m3fn ? ISA_DT_fp8_e4m3fn : t == at::kFloat8_e5m2 ? ISA_DT_fp8_e5m2 : ISA_DT_INVALID;
}

Units units_of(at::ScalarType t, bool cast)
{
	int f = isa_dtype_of(t);
	if (f != ISA_DT_INVALID)
		return { f, 1 };
	if (fp8_dtype(t) != ISA_DT_INVALID)
		return { fp8_dtype(t), 1 };
	if (cast)
		return {};
	switch (t) {
	case at::kInt: return { ISA_DT_int32, 1 };
	case at::kShort: return { ISA_DT_int16, 1 };
	case at::kChar: return { ISA_DT_int8, 1 };
	case at::kByte: return { ISA_DT_uint8, 1 };
	case at::kBool: return { ISA_DT_bool, 1 };
	case at::kLong:
	case at::kDouble:
	case at::kComplexFloat: return { ISA_DT_uint32, 2 };
	default: return {};
	}
}

namespace {

bool overlaps(const at::Tensor &a, const at::Tensor &b)
{
	if (!a.storage().is_alias_of(b.storage()))
		return false;
	int64_t ea = extent_of(a), eb = extent_of(b);
	int64_t a0 = a.storage_offset() * a.element_size(), b0 = b.storage_offset() * b.element_size();
	return a0 < b0 + eb * b.element_size() && b0 < a0 + ea * a.element_size();
}

}  // namespace

namespace {

bool copy_program(const at::Tensor &dst, const at::Tensor &src, int dev);

}  // namespace

// dst and s (of dst's sizes) with the dims a DMA can walk as one merged:
// size-1 dims dropped, neighbours whose strides chain in both tensors
// joined; false when more than NK_MAX_RANK dims remain
static bool coalesced(const at::Tensor &dst, const at::Tensor &s, at::Tensor &d2, at::Tensor &s2)
{
	std::vector<int64_t> shape, ds, ss;
	for (int64_t i = 0; i < dst.dim(); i++) {
		if (dst.size(i) == 1)
			continue;
		if (!shape.empty() && ds.back() == dst.stride(i) * dst.size(i) && ss.back() == s.stride(i) * dst.size(i)) {
			shape.back() *= dst.size(i);
			ds.back() = dst.stride(i);
			ss.back() = s.stride(i);
			continue;
		}
		shape.push_back(dst.size(i));
		ds.push_back(dst.stride(i));
		ss.push_back(s.stride(i));
	}
	if ((int64_t)shape.size() > NK_MAX_RANK)
		return false;
	d2 = dst.as_strided(shape, ds, dst.storage_offset());
	s2 = s.as_strided(shape, ss, s.storage_offset());
	return true;
}

bool native_copy(const at::Tensor &dst, const at::Tensor &src)
{
	if (dst.is_privateuseone() && src.is_privateuseone() && dst.dim() > NK_MAX_RANK && src.dim() <= dst.dim() &&
	    dst.numel() > 0) {
		/* more dims than a DMA walks: merged where the strides allow, else one copy per leading index */
		at::Tensor s = src.expand(dst.sizes()), d2, s2;
		if (coalesced(dst, s, d2, s2))
			return native_copy(d2, s2);
		for (int64_t i = 0; i < dst.size(0); i++)
			if (!native_copy(dst.select(0, i), s.select(0, i)))
				return false;
		return true;
	}
	if (!dst.is_privateuseone() || !src.is_privateuseone() || dst.device() != src.device() ||
	    dst.dim() > NK_MAX_RANK || src.dim() > dst.dim())
		return false;
	bool cast = dst.scalar_type() != src.scalar_type();
	if (cast && fp8_dtype(dst.scalar_type()) != ISA_DT_INVALID)
		return false;   // narrowing to fp8: the CPU's rounding (see fp8_dtype)
	if (cast && fp8_dtype(src.scalar_type()) != ISA_DT_INVALID && isa_dtype_of(dst.scalar_type()) == ISA_DT_INVALID)
		return false;   // fp8 to integers: the CPU
	if (cast && src.scalar_type() == at::kLong &&
	    (isa_dtype_of(dst.scalar_type()) != ISA_DT_INVALID || dst.scalar_type() == at::kBool))
		return native_i64_to_float(dst, src);
	if (cast && isa_dtype_of(src.scalar_type()) == ISA_DT_INVALID && fp8_dtype(src.scalar_type()) == ISA_DT_INVALID &&
	    (src.scalar_type() != at::kLong || dst.scalar_type() == at::kInt))
		return native_cast(dst, src);
	if (cast && isa_dtype_of(src.scalar_type()) != ISA_DT_INVALID && isa_dtype_of(dst.scalar_type()) == ISA_DT_INVALID)
		return native_float_to_int(dst, src);
	Units us = units_of(src.scalar_type(), cast), ud = units_of(dst.scalar_type(), cast);
	if (us.dtype == ISA_DT_INVALID || ud.dtype == ISA_DT_INVALID || dst.numel() == 0)
		return dst.numel() == 0 && us.dtype != ISA_DT_INVALID && ud.dtype != ISA_DT_INVALID;
	at::Tensor s = src.expand(dst.sizes());
	if (extent_of(s) < 0 || extent_of(dst) < 0)
		return false;
	if (s.is_same(dst) || (s.data_ptr() == dst.data_ptr() && s.strides() == dst.strides() && !cast))
		return true;
	if (overlaps(s, dst)) {   // through a fresh buffer: a DMA reads and writes in no set order
		at::Tensor tmp = at::empty(dst.sizes(), src.options());
		return native_copy(tmp, s) && native_copy(dst, tmp);
	}
	return copy_program(dst, s, dst.device().index());
}

// Between two cores of the chip: one DMA program on the source core (the
// cores share the chip's HBM), ordered like a CUDA peer copy -- it starts
// when both devices' current streams reach it, and the destination's
// stream waits for it.  A cast first crosses in the source dtype, then
// converts on the destination core.
bool native_copy_across(const at::Tensor &dst, const at::Tensor &src)
{
	if (!dst.is_privateuseone() || !src.is_privateuseone() || dst.device() == src.device() ||
	    dst.dim() > NK_MAX_RANK || src.dim() > dst.dim() || dst.numel() == 0)
		return false;
	if (dst.scalar_type() != src.scalar_type()) {
		at::Tensor moved = at::empty(dst.sizes(), src.options().device(dst.device()));
		return native_copy_across(moved, src) && native_copy(dst, moved);
	}
	at::Tensor s = src.expand(dst.sizes());
	if (extent_of(s) < 0 || extent_of(dst) < 0)
		return false;
	int sd = src.device().index(), dd = dst.device().index();
	int ss = stream_current(sd), ds = stream_current(dd);
	stream_wait_until(sd, ss, stream_time_ps(dd, ds));
	if (!copy_program(dst, s, sd))
		return false;
	stream_wait_until(dd, ds, stream_time_ps(sd, ss));
	return true;
}

namespace {

// dst = s (same sizes; any strides and, where the DMA casts, dtypes) as one
// copy program run on core `dev`
bool copy_program(const at::Tensor &dst, const at::Tensor &s, int dev)
{
	bool cast = dst.scalar_type() != s.scalar_type();
	Units us = units_of(s.scalar_type(), cast), ud = units_of(dst.scalar_type(), cast);
	if (us.dtype == ISA_DT_INVALID || ud.dtype == ISA_DT_INVALID)
		return false;
	nk_copy c{};
	c.src_dtype = us.dtype;
	c.dst_dtype = ud.dtype;
	c.rank = (unsigned)dst.dim();
	for (int64_t i = 0; i < dst.dim(); i++) {
		c.shape[i] = (uint64_t)dst.size(i);
		c.src_stride[i] = s.stride(i) * us.per;
		c.dst_stride[i] = dst.stride(i) * ud.per;
	}
	if (us.per == 2) {   // the pair of words: one more, innermost dim
		if (c.rank == NK_MAX_RANK)
			return false;
		c.shape[c.rank] = 2;
		c.src_stride[c.rank] = c.dst_stride[c.rank] = 1;
		c.rank++;
	}
	c.src_elems = (uint64_t)extent_of(s) * us.per;
	c.dst_elems = (uint64_t)extent_of(dst) * ud.per;
	Program m = cached_program("copy", c, dev, nk_copy_program);
	run_program(m, dev, "aten::copy_", { { "src", &s } }, { { "dst", &dst } });
	return true;
}

}  // namespace

at::Tensor prepared(const at::Tensor &t, at::IntArrayRef sizes, at::ScalarType dtype)
{
	if (t.sizes().equals(sizes) && t.scalar_type() == dtype && t.is_contiguous())
		return t;
	at::Tensor out = at::empty(sizes, t.options().dtype(dtype));
	return native_copy(out, t) ? out : at::Tensor();
}

at::Tensor materialize(const at::Tensor &t, at::IntArrayRef sizes, at::ScalarType dtype)
{
	at::Tensor out = prepared(t, sizes, dtype);
	TORCH_CHECK(out.defined(), "neuron: cannot prepare a ", t.scalar_type(), " operand of shape ", t.sizes(),
		    " as ", dtype, " ", sizes);
	return out;
}

at::Tensor &write_result(at::Tensor &out, const at::Tensor &r)
{
	if (r.is_same(out))   // the kernel wrote out itself
		return out;
	if (!out.sizes().equals(r.sizes()))
		out.resize_(r.sizes());
	TORCH_CHECK(native_copy(out, r), "neuron: writing a ", r.scalar_type(), " result into a ", out.scalar_type(),
		    " tensor");
	return out;
}

at::Tensor &composite_out(at::Tensor &out, std::initializer_list<const at::Tensor *> ins, const at::Tensor &r)
{
	if (!r.defined() || !out.is_privateuseone())
		return declined_tensor();
	if (!out.sizes().equals(r.sizes()))
		at::native::resize_output(out, r.sizes());   /* before the checks, as CPU: a resized out is fresh */
	at::assert_no_internal_overlap(out);
	for (const at::Tensor *t : ins)
		at::assert_no_partial_overlap(out, *t);
	return write_result(out, r);
}

// r written into out (write_result): false when out cannot hold r's dtype
// on the device
bool store(at::Tensor &out, const at::Tensor &r)
{
	if (!out.is_privateuseone() || !c10::canCast(r.scalar_type(), out.scalar_type()))
		return false;
	write_result(out, r);
	return true;
}

}  // namespace neuron
