// aten/random/random.cpp -- random numbers on the device: uniform_, normal_,
// bernoulli_, dropout (and its backward) and multinomial.  The numbers come from GpSimd's per-lane XORWOW generators
// (programs/random.c), seeded for each call from 64 bits of the tensor's
// neuron generator, so torch.manual_seed / generator state make runs
// repeatable and the program stays cached.  multinomial is composed from
// native kernels: uniform draws, a row cumsum, and a count of the cumsum
// entries at or below u * total (inverse CDF); without replacement, an
// exponential race (keys -ln(1-u) / p, the num_samples smallest by topk).
// NeuronCore-v2 (trn1) cannot seed its PRNG: there these ops run through the
// CPU fallback on the same generator.
#include "runtime/program.h"
#include "runtime/copy.h"
#include "aten/composite.h"
#include "ops.def"

#include <ATen/native/CPUFallback.h>
#include <ATen/ops/bernoulli_ops.h>
#include <ATen/ops/uniform_ops.h>
#include <ATen/ops/native_dropout_backward_ops.h>
#include <ATen/ops/native_dropout_ops.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/multinomial_ops.h>
#include <ATen/ops/normal_ops.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>

namespace neuron {

namespace {

bool device_rng()
{
	return isa_target_has(isa_target_from_name(nsim_target_name()), ISA_FEAT_rng_state_gpsimd);
}

uint64_t splitmix64(uint64_t &x)
{
	uint64_t z = (x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

// one XORWOW state per lane from 64 bits of the generator, on the device
at::Tensor seed_tensor(const std::optional<at::Generator> &gen, int dev)
{
	uint64_t x = draw_seed(gen, dev);
	at::Tensor host = at::empty({ 128 * 6 }, at::TensorOptions().dtype(at::kInt));
	auto *w = host.data_ptr<int32_t>();
	for (int i = 0; i < 128 * 6; i++) {
		uint32_t v = (uint32_t)splitmix64(x);
		w[i] = (int32_t)(v ? v : 1u);   // xorshift words must not all be 0
	}
	at::Tensor d = at::empty({ 128 * 6 }, at::TensorOptions().dtype(at::kInt).device(
					       c10::Device(c10::DeviceType::PrivateUse1, (c10::DeviceIndex)dev)));
	d.copy_(host);
	return d;
}

// fills self (float, on the device) with draws; false when not covered
bool fill_random(at::Tensor &self, int kind, double a, double b, const std::optional<at::Generator> &gen,
		 const char *opname)
{
	int dt = isa_dtype_of(self.scalar_type());
	if (!self.is_privateuseone() || dt == ISA_DT_INVALID || !device_rng() ||
	    !std::isfinite(a) || !std::isfinite(b))
		return false;
	if (self.numel() == 0)
		return true;
	if (!self.is_contiguous()) {
		at::Tensor tmp = at::empty(self.sizes(), self.options());
		if (!fill_random(tmp, kind, a, b, gen, opname))
			return false;
		return native_copy(self, tmp);
	}
	nk_random r{};
	r.kind = kind;
	r.dtype = dt;
	r.n = (uint64_t)self.numel();
	r.a = (float)a;
	r.b = (float)b;
	int dev = self.device().index();
	Program m = cached_program("random", r, dev, nk_random_program);
	at::Tensor seeds = seed_tensor(gen, dev);
	run_program(m, dev, opname, { { "seeds", &seeds } }, { { "out", &self } });
	return true;
}

at::Tensor &uniform_(at::Tensor &self, double from, double to, std::optional<at::Generator> gen)
{
	TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
		    " > to=", to);
	if (fill_random(self, NK_RAND_UNIFORM, from, to, gen, "aten::uniform_"))
		return self;
	return declined;
}

at::Tensor &normal_(at::Tensor &self, double mean, double std, std::optional<at::Generator> gen)
{
	TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
	if (fill_random(self, NK_RAND_NORMAL, mean, std, gen, "aten::normal_"))
		return self;
	return declined;
}

bool multinomial_covered(const at::Tensor &self, int64_t n, bool replacement)
{
	return self.is_privateuseone() && isa_dtype_of(self.scalar_type()) != ISA_DT_INVALID && device_rng() &&
	       (self.dim() == 1 || self.dim() == 2) && self.size(-1) > 0 && n > 0 &&
	       (replacement || n == 1 || n <= 64);
}

at::Tensor multinomial_impl(const at::Tensor &self, int64_t n, bool replacement,
			    const std::optional<at::Generator> &gen)
{
	at::Tensor w = self.dim() == 1 ? self.unsqueeze(0) : self;
	w = w.to(at::kFloat);
	int64_t rows = w.size(0), cats = w.size(1);
	// PyTorch's input checks, made by the simulator on the values (no device
	// programs: a real kernel would not spend time on them)
	at::Tensor v = peek_cpu(w);
	TORCH_CHECK(!v.lt(0).logical_or(v.isnan()).logical_or(v.isinf()).any().item<bool>(),
		    "probability tensor contains either `inf`, `nan` or element < 0");
	TORCH_CHECK(!v.sum(-1).le(0).any().item<bool>(), "invalid multinomial distribution (sum of probabilities <= 0)");
	at::Tensor out;
	if (replacement || n == 1) {
		at::Tensor u = at::empty({ rows, n }, w.options());
		TORCH_CHECK(fill_random(u, NK_RAND_UNIFORM, 0.0, 1.0, gen, "aten::multinomial"), "neuron: multinomial draws");
		at::Tensor c = w.cumsum(-1);
		at::Tensor last = c.narrow(1, cats - 1, 1);
		// u * total, kept strictly below the last cumsum entry (fp32 rounding)
		at::Tensor t = u.mul(last).minimum(last.mul(1.0 - std::ldexp(1.0, -23)));
		out = c.unsqueeze(1).le(t.unsqueeze(2)).sum(-1);
	} else {
		at::Tensor u = at::empty({ rows, cats }, w.options());
		TORCH_CHECK(fill_random(u, NK_RAND_UNIFORM, 0.0, 1.0, gen, "aten::multinomial"), "neuron: multinomial draws");
		// zero weights never win the race (after every positive one, in
		// index order, as CPU PyTorch draws them once the rest are used up)
		at::Tensor keys = u.neg().add(1.0).log().neg().div(w).masked_fill(w.le(0), INFINITY);
		out = std::get<1>(keys.topk(n, -1, false, true));
	}
	return self.dim() == 1 ? out.squeeze(0) : out;
}

at::Tensor multinomial(const at::Tensor &self, int64_t n, bool replacement, std::optional<at::Generator> gen)
{
	TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
	TORCH_CHECK(at::isFloatingType(self.scalar_type()), "multinomial only supports floating-point dtypes for input, got: ",
		    self.scalar_type());
	TORCH_CHECK(n > 0, "cannot sample n_sample <= 0 samples");
	TORCH_CHECK(replacement || n <= self.size(-1), "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
	if (multinomial_covered(self, n, replacement))
		return multinomial_impl(self, n, replacement, gen);
	return declined;
}

at::Tensor &multinomial_out(const at::Tensor &self, int64_t n, bool replacement, std::optional<at::Generator> gen,
			    at::Tensor &out)
{
	at::Tensor r = multinomial(self, n, replacement, gen);
	out.resize_(r.sizes());
	out.copy_(r);
	return out;
}

// keep each element with probability 1 - p (GpSimd's PRNG on the device's
// generator), scaled by 1 / (1 - p); the mask is bool, as PyTorch's
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor &x, double p, std::optional<bool> train)
{
	if (!is_float_neuron(x))
		return declined;
	bool t = train.value_or(true);
	if (!t || p == 0.0 || x.numel() == 0)
		return { x.clone(), at::ones(x.sizes(), x.options().dtype(at::kBool)) };
	TORCH_CHECK(p >= 0.0 && p <= 1.0, "dropout probability has to be between 0 and 1, but got ", p);
	if (p == 1.0)
		return { at::zeros(x.sizes(), x.options()), at::zeros(x.sizes(), x.options().dtype(at::kBool)) };
	at::Tensor u = at::empty(x.sizes(), x.options().dtype(at::kFloat));
	u.uniform_(0.0, 1.0);
	at::Tensor keep = u.lt(1.0 - p);
	at::Tensor out = cast_back(as_fp32(x).mul(keep.to(at::kFloat)).mul(1.0 / (1.0 - p)), x.scalar_type());
	return { out, keep };
}

at::Tensor native_dropout_backward(const at::Tensor &g, const at::Tensor &mask, double scale)
{
	if (!is_float_neuron(g) || !mask.is_privateuseone() || mask.sizes() != g.sizes())
		return declined;
	return cast_back(as_fp32(g).mul(mask.to(at::kFloat)).mul(scale), g.scalar_type());
}

// self = draws < p, as self's dtype (a Bernoulli(p) sample per element)
at::Tensor &bernoulli_float(at::Tensor &self, double p, std::optional<at::Generator> gen)
{
	if (!is_float_neuron(self) || p < 0.0 || p > 1.0)
		return declined;
	if (self.numel() == 0)
		return self;
	at::Tensor u = at::empty(self.sizes(), self.options().dtype(at::kFloat));
	u.uniform_(0.0, 1.0, gen);
	return write_result(self, u.lt(p).to(self.scalar_type()));
}

}  // namespace

NEURON_REGISTER_OPS(NEURON_OPS_RANDOM)

}  // namespace neuron
