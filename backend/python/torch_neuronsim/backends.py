"""torch.backends.neuron: what torch.backends.cuda / torch.backends.mps
answer for their device -- whether this PyTorch has the `neuron` backend
built in (the plugin is loaded) and whether a device is there to use."""


def is_built():
    """True: the `neuron` backend is registered with this PyTorch."""
    return True


def is_available():
    """Whether a `neuron` device can be used (the simulator runtime starts)."""
    from . import device
    return device.is_available()
