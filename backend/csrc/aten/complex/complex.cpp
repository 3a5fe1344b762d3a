// aten/complex/complex.cpp -- complex64 tensors as real pairs: the complex form of
// rotary embeddings (DeepSeek-V2/V3, Llama-4: view_as_complex, polar, a
// complex product, view_as_real).  A complex64 tensor is its interleaved
// (real, imaginary) fp32 pairs in device memory; view_as_real /
// view_as_complex are views of it, and arithmetic runs on the fp32 pairs
// with the native kernels.
#include "runtime/copy.h"
#include "aten/composite.h"
#include "aten/complex/complex.h"
#include "ops.def"

#include <ATen/ops/view_as_complex_ops.h>
#include <ATen/ops/view_as_real_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/polar_ops.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

namespace neuron {

namespace {

bool complex_neuron(const at::Tensor &t)
{
	return t.is_privateuseone() && t.scalar_type() == at::kComplexFloat;
}

// (real, imaginary) parts of a complex64 device tensor (strided views), of a
// real tensor (itself and nothing), or of a wrapped number on the host
struct Parts {
	at::Tensor re, im;          // device tensors; im undefined: zero
	double sre = 0, sim = 0;    // a wrapped number's value
	bool scalar = false;
};

bool parts_of(const at::Tensor &t, const at::Tensor &like, Parts &p)
{
	if (complex_neuron(t)) {
		at::Tensor r = at::view_as_real(t);
		p.re = r.select(-1, 0);
		p.im = r.select(-1, 1);
		return true;
	}
	if (t.dim() == 0 && t.is_cpu()) {
		if (t.is_complex()) {
			c10::complex<double> v = t.item<c10::complex<double>>();
			p.sre = v.real();
			p.sim = v.imag();
		} else {
			p.sre = t.item<double>();
		}
		p.scalar = true;
		return true;
	}
	if (t.is_privateuseone() && t.device() == like.device() && is_float_neuron(t) && !t.is_complex()) {
		p.re = t.scalar_type() == at::kFloat ? t : t.to(at::kFloat);
		return true;
	}
	return false;
}

// x * y for a part that may be a host number or absent (zero)
at::Tensor part_mul(const at::Tensor &x, const Parts &y, bool imag)
{
	if (y.scalar)
		return x.mul(imag ? y.sim : y.sre);
	const at::Tensor &p = imag ? y.im : y.re;
	return p.defined() ? x.mul(p) : at::Tensor();
}

at::Tensor pair_to_complex(const at::Tensor &re, const at::Tensor &im)
{
	return at::view_as_complex(at::stack({ re, im }, -1));
}

}  // namespace

// (a + bi)(c + di) = (ac - bd) + (ad + bc)i, each product and sum one
// VectorE program on fp32 (CPU's rounding of the same formula; its
// vectorized kernel may fuse, so the last bit can differ)
at::Tensor complex_mul(const at::Tensor &a, const at::Tensor &b)
{
	if (!complex_neuron(a) && !complex_neuron(b))
		return {};
	const at::Tensor &dev = complex_neuron(a) ? a : b;
	Parts x, y;
	if (!parts_of(a, dev, x) || !parts_of(b, dev, y))
		return {};
	if (x.scalar)   // a number times a tensor: the tensor first
		std::swap(x, y);
	if (x.scalar || !x.re.defined())
		return {};
	at::Tensor ac = part_mul(x.re, y, false), ad = part_mul(x.re, y, true);
	at::Tensor bc = x.im.defined() ? part_mul(x.im, y, false) : at::Tensor();
	at::Tensor bd = x.im.defined() ? part_mul(x.im, y, true) : at::Tensor();
	at::Tensor re = bd.defined() ? ac.sub(bd) : ac;
	at::Tensor im = ad.defined() ? (bc.defined() ? ad.add(bc) : ad) : bc;
	if (!im.defined())
		im = at::zeros_like(re);
	return pair_to_complex(re, im);
}

namespace {

// polar(abs, angle) = abs cos(angle) + abs sin(angle) i
at::Tensor &polar_out(const at::Tensor &abs, const at::Tensor &angle, at::Tensor &out)
{
	if (abs.scalar_type() == at::kFloat && angle.scalar_type() == at::kFloat && abs.is_privateuseone() &&
	    angle.is_privateuseone() && complex_neuron(out)) {
		at::Tensor c = pair_to_complex(abs.mul(angle.cos()), abs.mul(angle.sin()));
		return write_result(out, c);
	}
	return declined;
}

at::Tensor view_as_real(const at::Tensor &self)
{
	return at::native::view_as_real(self);
}

at::Tensor view_as_complex(const at::Tensor &self)
{
	return at::native::view_as_complex(self);
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_COMPLEX)

}  // namespace neuron
