// runtime/autocast.cpp -- torch.autocast("neuron"): matrix products run in the
// lower precision (bf16 by default, TensorE's native input type), numerically
// sensitive ops in fp32, everything else falls through unchanged.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace {

struct DefaultDtype {
	DefaultDtype()
	{
		// bf16: TensorE multiplies bf16 at full rate and accumulates fp32
		at::autocast::set_autocast_dtype(c10::DeviceType::PrivateUse1, at::kBFloat16);
	}
} default_dtype;

}  // namespace

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m)
{
	m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m)
{
	// lower precision: the TensorE ops
	KERNEL_PRIVATEUSEONE(mm, lower_precision_fp)
	KERNEL_PRIVATEUSEONE(bmm, lower_precision_fp)
	KERNEL_PRIVATEUSEONE(addmm, lower_precision_fp)
	KERNEL_PRIVATEUSEONE(addbmm, lower_precision_fp)
	KERNEL_PRIVATEUSEONE(baddbmm, lower_precision_fp)
	KERNEL_PRIVATEUSEONE(matmul, lower_precision_fp)
	KERNEL_PRIVATEUSEONE(linear, lower_precision_fp)
	KERNEL_PRIVATEUSEONE(scaled_dot_product_attention, lower_precision_fp)
	// fp32: reductions and normalizations that lose accuracy in bf16
	KERNEL_PRIVATEUSEONE(softmax, int, fp32)
	KERNEL_PRIVATEUSEONE(log_softmax, int, fp32)
	KERNEL_PRIVATEUSEONE(layer_norm, fp32)
	KERNEL_PRIVATEUSEONE(mse_loss, fp32)
	KERNEL_PRIVATEUSEONE(cross_entropy_loss, fp32)
}
