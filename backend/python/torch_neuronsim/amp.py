"""torch.neuron.amp: automatic mixed precision on `neuron`, named as
torch.cuda.amp names it (autocast, GradScaler); both are torch.amp's, on
this device."""
import torch


class autocast(torch.amp.autocast_mode.autocast):
    """torch.autocast("neuron", ...): bf16 by default (the device's
    autocast dtype)."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("neuron", enabled=enabled,
                         dtype=dtype if dtype is not None else torch.get_autocast_dtype("neuron"),
                         cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """torch.amp.GradScaler("neuron", ...)."""

    def __init__(self, *args, **kwargs):
        super().__init__("neuron", *args, **kwargs)
