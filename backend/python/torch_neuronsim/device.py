"""torch.neuron: the torch.cuda-like module of the `neuron` device."""
import contextlib
import ctypes

import torch

from . import _lib

_neuronsim = True          # marks this module as torch_neuronsim's


def is_available():
    return device_count() > 0


def device_count():
    return int(_lib.neuron_device_count())


def current_device():
    return int(_lib.neuron_current_device())


def set_device(device):
    idx = torch.device(device, 0).index if isinstance(device, str) else (
        device.index if isinstance(device, torch.device) else int(device))
    err = ctypes.create_string_buffer(512)
    if _lib.neuron_set_device(int(idx or 0), err, 512):
        raise RuntimeError(err.value.decode())


@contextlib.contextmanager
def device(dev):
    prev = current_device()
    set_device(dev)
    try:
        yield
    finally:
        set_device(prev)


def synchronize(device=None):
    """Device work completes as it is issued in the simulator: nothing to wait for."""


def is_initialized():
    return True


def memory_allocated(device=None):
    from . import stats
    return stats()["allocated_bytes"]


def max_memory_allocated(device=None):
    from . import stats
    return stats()["peak_allocated_bytes"]


def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16]


def is_bf16_supported():
    return True


def _is_in_bad_fork():
    return False


# Random ops run through the CPU fallback, so they draw from the CPU default
# generator (torch.manual_seed calls these too: they must not call it back).
def manual_seed(seed):
    torch.default_generator.manual_seed(int(seed))


def manual_seed_all(seed):
    manual_seed(seed)


def seed():
    return torch.default_generator.seed()


def initial_seed():
    return torch.default_generator.initial_seed()


def get_rng_state(device="neuron"):
    return torch.default_generator.get_state()


def set_rng_state(new_state, device="neuron"):
    torch.default_generator.set_state(new_state)
