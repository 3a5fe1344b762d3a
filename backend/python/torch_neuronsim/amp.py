"""torch.neuron.amp: automatic mixed precision on `neuron`, named as
torch.cuda.amp names it (autocast, GradScaler); both are torch.amp's, on
this device."""
import functools

import torch


class autocast(torch.amp.autocast_mode.autocast):
    """torch.autocast("neuron", ...): bf16 by default (the device's
    autocast dtype)."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("neuron", enabled=enabled,
                         dtype=dtype if dtype is not None else torch.get_autocast_dtype("neuron"),
                         cache_enabled=cache_enabled)


@functools.wraps(torch.amp.GradScaler, updated=())
def GradScaler(*args, **kwargs):
    """torch.amp.GradScaler("neuron", ...)."""
    return torch.amp.GradScaler("neuron", *args, **kwargs)
