// runtime/nki.cpp -- torch.ops.neuronsim.run_program: runs a program (the
// bytes of an .nsp, e.g. an NKI kernel traced by neuronsim_nki) on the
// device of its `neuron` tensor arguments, like any native op: on the
// current stream's timeline, charged and traced with its label.  Loaded
// programs are cached by their bytes, in the bounded program cache the
// native kernels use (runtime/program.cpp).
#include "runtime/program.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <string>

namespace neuron {
namespace {

Program load_cached(const at::Tensor &program, int dev)
{
	TORCH_CHECK(program.device().is_cpu() && program.scalar_type() == at::kByte && program.dim() == 1 &&
			    program.is_contiguous(),
		    "neuronsim.run_program: the program is a contiguous 1-D uint8 CPU tensor of .nsp bytes");
	std::string key = "p";   // program bytes (generated kernels' keys start with 'g')
	key.append(static_cast<const char *>(program.data_ptr()), (size_t)program.numel());
	return load_program(key, dev, [&]() { return load_bytes(key.data() + 1, key.size() - 1, dev); });
}

void run_program_op(const at::Tensor &program, c10::string_view label, at::ArrayRef<std::string> in_names,
		    at::TensorList inputs, at::ArrayRef<std::string> out_names, at::TensorList outputs)
{
	TORCH_CHECK(in_names.size() == inputs.size() && out_names.size() == outputs.size(),
		    "neuronsim.run_program: ", in_names.size(), " input names for ", inputs.size(), " inputs, ",
		    out_names.size(), " output names for ", outputs.size(), " outputs");
	int dev = -1;
	for (at::TensorList list : { inputs, outputs })
		for (const at::Tensor &t : list) {
			TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
				    "neuronsim.run_program: every tensor must be on the neuron device, got ", t.device());
			TORCH_CHECK(t.is_contiguous(), "neuronsim.run_program: tensors must be contiguous");
			TORCH_CHECK(dev < 0 || dev == t.device().index(),
				    "neuronsim.run_program: tensors on two neuron devices");
			dev = t.device().index();
		}
	TORCH_CHECK(dev >= 0, "neuronsim.run_program: no neuron tensor");
	Program m = load_cached(program, dev);
	std::vector<Binding> in, out;
	for (size_t i = 0; i < inputs.size(); i++)
		in.emplace_back(in_names[i].c_str(), &inputs[i]);
	for (size_t i = 0; i < outputs.size(); i++)
		out.emplace_back(out_names[i].c_str(), &outputs[i]);
	std::string op(label);
	run_program(m, dev, op.c_str(), in, out);
}

}  // namespace
}  // namespace neuron

TORCH_LIBRARY(neuronsim, m)
{
	m.def("run_program(Tensor program, str label, str[] in_names, Tensor[] inputs, str[] out_names, "
	      "Tensor(a!)[] outputs) -> ()");
}

TORCH_LIBRARY_IMPL(neuronsim, PrivateUse1, m)
{
	m.impl("run_program", &neuron::run_program_op);
}
