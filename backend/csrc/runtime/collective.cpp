// runtime/collective.cpp -- the device side of the c10d backend
// (torch_neuronsim/distributed.py): a rank's tensor read and written by the
// host without the host link's charge, because a collective's data moves
// over NeuronLink on the hardware and the collective model charges its time
// (neuron_collective_charge, runtime/capi.cpp).
#include "runtime/device.h"

#include <torch/library.h>

namespace neuron {
namespace {

at::Tensor collective_read(const at::Tensor &t)
{
	TORCH_CHECK(t.is_privateuseone(), "neuronsim::collective_read: a neuron tensor, not one on ", t.device());
	return peek_cpu(t);
}

void collective_write(const at::Tensor &dst, const at::Tensor &src)
{
	TORCH_CHECK(dst.is_privateuseone(), "neuronsim::collective_write_: a neuron destination, not one on ",
		    dst.device());
	poke_cpu(dst, src);
}

}  // namespace
}  // namespace neuron

TORCH_LIBRARY_FRAGMENT(neuronsim, m)
{
	m.def("collective_read(Tensor t) -> Tensor", &neuron::collective_read);
	m.def("collective_write_(Tensor(a!) dst, Tensor src) -> ()", &neuron::collective_write);
}
