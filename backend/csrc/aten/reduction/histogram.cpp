// aten/reduction/histogram.cpp -- histc: counts of a tensor's values in
// equal bins, on the device.
#include "runtime/copy.h"
#include "aten/composite.h"
#include "ops.def"

#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/histc_ops.h>
#include <ATen/ops/zeros.h>

#include <cmath>

namespace neuron {

namespace {

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

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_HISTOGRAM)

}  // namespace neuron
