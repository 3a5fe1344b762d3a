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


_MEM_KEYS = ("allocated", "peak_allocated", "reserved", "peak_reserved", "allocations",
             "segments", "alloc_retries", "ooms")


def _index(device):
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    d = torch.device(device)
    return d.index if d.index is not None else current_device()


def _mem(device):
    vals = (ctypes.c_uint64 * len(_MEM_KEYS))()
    err = ctypes.create_string_buffer(512)
    if _lib.neuron_memory_stats(_index(device), vals, err, 512):
        raise RuntimeError(err.value.decode())
    return dict(zip(_MEM_KEYS, (int(v) for v in vals)))


def memory_allocated(device=None):
    """Bytes of tensors alive on the device."""
    return _mem(device)["allocated"]


def max_memory_allocated(device=None):
    return _mem(device)["peak_allocated"]


def memory_reserved(device=None):
    """Bytes held on the device by the caching allocator (live + cached)."""
    return _mem(device)["reserved"]


def max_memory_reserved(device=None):
    return _mem(device)["peak_reserved"]


def memory_stats(device=None):
    """The caching allocator's counters, named as torch.cuda.memory_stats names them."""
    m = _mem(device)
    return {
        "allocated_bytes.all.current": m["allocated"],
        "allocated_bytes.all.peak": m["peak_allocated"],
        "reserved_bytes.all.current": m["reserved"],
        "reserved_bytes.all.peak": m["peak_reserved"],
        "allocation.all.allocated": m["allocations"],
        "segment.all.allocated": m["segments"],
        "num_alloc_retries": m["alloc_retries"],
        "num_ooms": m["ooms"],
    }


def empty_cache():
    """Return cached, unused device memory to the device."""
    _lib.neuron_empty_cache()


def reset_peak_memory_stats(device=None):
    _lib.neuron_reset_peak_memory_stats(_index(device))


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
