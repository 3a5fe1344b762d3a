"""`torch_neuronx.neuron_dynamo_backend` as the simulator provides it.

TorchNeuron's `set_model_name(name)` names the model the next
torch.compile(backend="neuron") graphs belong to (its compiled artifacts are
filed under it); diffusers' Neuron tests call it before compiling each
component.  Here the name labels the graphs compiled after it: their names in
NEURON_STRICT reports, in torch.profiler ranges and in the linked programs'
trace labels, "<name>: compiled graph N (...)"."""

_model_name = None


def set_model_name(name):
    """the model the graphs compiled from now on belong to (None: no name)"""
    global _model_name
    if name is not None and not isinstance(name, str):
        raise TypeError(f"set_model_name: expected a str or None, got {type(name).__name__}")
    _model_name = name


def model_name():
    return _model_name
