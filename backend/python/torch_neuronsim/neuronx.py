"""The `torch_neuronx` module as neuronsim provides it (a stand-in).

Transformers, Accelerate and TRL pick the `neuron` device when the AWS
Neuron PyTorch package `torch_neuronx` can be found and `torch.neuron`
reports a device (transformers.utils.is_torch_neuron_available,
accelerate.utils.is_neuron_available); diffusers takes its Neuron paths when
the package's metadata answers (is_torch_neuronx_available).  So that a
script written for TorchNeuron runs on the simulated device unchanged,
`import torch_neuronx` resolves to this module in any process where no real
torch_neuronx is installed (neuronsim_standins, installed at interpreter
start, also answers importlib.metadata for torch-neuronx); an installed
package of that name is always found first.  NEURONSIM_TORCH_NEURONX=0
turns the stand-in off.

What it provides: the import itself (registering the `neuron` device as
torch_neuronsim does), `__version__`, `nki` (the NKI frontend with the torch
calling convention: torch_neuronsim.nki), `nki_op` (an NKI kernel as a
PyTorch custom operator) and `neuron_dynamo_backend.set_model_name` (names
the graphs compiled after it).  The AWS package's other APIs (torch_neuronx.trace,
the XLA integration) are not provided; using one raises an AttributeError
naming this stand-in."""
import torch_neuronsim  # noqa: F401  (registers the `neuron` device)
import neuronsim_standins

__version__ = neuronsim_standins.version("torch-neuronx")
neuronsim_standin = True


def __getattr__(name):
    if name in ("nki", "nki_op"):
        from . import nki as _nki
        return _nki if name == "nki" else _nki.nki_op
    raise AttributeError(f"torch_neuronx.{name}: this is neuronsim's stand-in for torch_neuronx, which provides "
                         "device detection, nki, nki_op and neuron_dynamo_backend.set_model_name; the AWS Neuron package's other APIs are not simulated")
