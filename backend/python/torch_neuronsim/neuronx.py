"""The `torch_neuronx` module as neuronsim provides it (a stand-in).

Transformers, Accelerate and TRL pick the `neuron` device when the AWS
Neuron PyTorch package `torch_neuronx` can be found and `torch.neuron`
reports a device (transformers.utils.is_torch_neuron_available,
accelerate.utils.is_neuron_available).  So that a script written for a GPU
runs on the simulated device unchanged, importing torch (which loads
torch_neuronsim through its device-backend entry point) makes
`import torch_neuronx` resolve to this module -- but only when no real
torch_neuronx is installed: the finder sits last in sys.meta_path, so any
installed package of that name is found first and this one never loads.
NEURONSIM_TORCH_NEURONX=0 turns the stand-in off.

What it provides: the import itself (registering the `neuron` device as
torch_neuronsim does) and `__version__`.  The AWS package's own APIs
(torch_neuronx.trace, the XLA integration) are not provided; calling one
raises an AttributeError naming this stand-in."""
import torch_neuronsim  # noqa: F401  (registers the `neuron` device)

__version__ = "0.0.0+neuronsim"
neuronsim_standin = True


def __getattr__(name):
    raise AttributeError(f"torch_neuronx.{name}: this is neuronsim's stand-in for torch_neuronx, which provides "
                         "only device detection; the AWS Neuron package's APIs are not simulated")
