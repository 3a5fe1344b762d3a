"""Printing `neuron` tensors without float64 on the device.

torch._tensor_str's formatter finds the range of a float tensor's values
(to choose between fixed and scientific notation) after converting them to
float64 -- or to float32 on the devices PyTorch knows have no float64 (MPS,
XPUs without it, MAIA).  NeuronCores have no float64 arithmetic either, so
`print(loss)` ran 7-15 float64 ops through the CPU fallback (and raised
under NEURON_STRICT=1).  install() gives `neuron` tensors the float32
treatment those devices get; the printed digits come from `.item()` of the
tensor's own dtype as before, and every other device is unchanged."""
import torch


def install():
    import torch._tensor_str as tensor_str
    original = tensor_str.tensor_totype
    if getattr(original, "_neuronsim", False):
        return

    def tensor_totype(t):
        if t.device.type == "neuron":
            return t.to(dtype=torch.float)
        return original(t)
    tensor_totype._neuronsim = True
    tensor_str.tensor_totype = tensor_totype
