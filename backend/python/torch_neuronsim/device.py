"""torch.neuron: the torch.cuda-like module of the `neuron` device."""
import contextlib
import ctypes
import os

import torch

from . import _lib
from . import amp  # noqa: F401  (torch.neuron.amp)

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


def _index(device):
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    d = torch.device(device)
    return d.index if d.index is not None else current_device()


# The memory counters are the caching allocator's, read through its
# c10::DeviceAllocator interface (torch.accelerator), as torch.cuda's are.

def _dev(device):
    return torch.device("neuron", _index(device))


def memory_allocated(device=None):
    """Bytes of tensors alive on the device."""
    return torch.accelerator.memory_allocated(_dev(device))


def max_memory_allocated(device=None):
    return torch.accelerator.max_memory_allocated(_dev(device))


def memory_reserved(device=None):
    """Bytes held on the device by the caching allocator (live + cached)."""
    return torch.accelerator.memory_reserved(_dev(device))


def max_memory_reserved(device=None):
    return torch.accelerator.max_memory_reserved(_dev(device))


def memory_stats(device=None):
    """The caching allocator's counters, named as torch.cuda.memory_stats names them."""
    return torch.accelerator.memory_stats(_dev(device))


def empty_cache():
    """Return cached, unused device memory to the device."""
    torch.accelerator.empty_cache()


def reset_peak_memory_stats(device=None):
    torch.accelerator.reset_peak_memory_stats(_dev(device))


class _NeuronDeviceProperties:
    """What torch.cuda.get_device_properties reports, for one `neuron`
    device (a simulated NeuronCore): name, total_memory (the chip's HBM,
    which the simulator's cores share), multi_processor_count (NeuronCores
    on the chip), target and core_name."""
    __slots__ = ("name", "total_memory", "multi_processor_count", "target", "core_name", "index")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw[k])

    def __repr__(self):
        return (f"_NeuronDeviceProperties(name='{self.name}', total_memory={self.total_memory // 2**20}MB, "
                f"multi_processor_count={self.multi_processor_count}, target='{self.target}')")


def _existing(device):
    idx = _index(device)
    n = device_count()                    # also starts the runtime
    if not 0 <= idx < n:
        raise ValueError(f"neuron: device {idx} does not exist ({n} visible)")
    return idx


def get_device_properties(device=None):
    idx = _existing(device)
    core, cores, hbm = ctypes.c_char_p(), ctypes.c_uint32(), ctypes.c_uint64()
    if _lib.neuron_chip_info(ctypes.byref(core), ctypes.byref(cores), ctypes.byref(hbm)):
        raise RuntimeError("neuron: the simulator runtime is not running")
    target = _lib.neuron_target().decode()
    core_name = core.value.decode()
    return _NeuronDeviceProperties(name=f"{core_name} ({target}, neuronsim)", total_memory=hbm.value,
                                   multi_processor_count=cores.value, target=target, core_name=core_name,
                                   index=idx)


def get_device_name(device=None):
    return get_device_properties(device).name


def mem_get_info(device=None):
    """(free, total) bytes of device memory: the chip's HBM, less what the
    simulator holds on it (tensors, the caching allocator's blocks, loaded
    programs) -- shared by the chip's cores, as in the simulator."""
    free, total = torch.accelerator.get_memory_info(torch.device("neuron", _existing(device)))
    return int(free), int(total)


def get_device_capability(device=None):
    """(major, minor) of the device's compute architecture, as
    torch.cuda.get_device_capability: the NeuronCore version of the
    simulated target (trn2: NeuronCore-v3 -> (3, 0)), from the library's
    target table."""
    import neuronsim
    _existing(device)
    from . import target
    return int(neuronsim.target_info(target())["core_version"]), 0


def utilization(device=None):
    """Percent of the device's simulated time (its furthest stream clock) in
    which it ran programs, since the process started: torch.cuda.utilization's
    "time a kernel was executing", over simulated rather than sampled time."""
    return _call(_lib.neuron_utilization, _existing(device))


def _size(n):
    """bytes with a binary unit, as torch.cuda.memory_summary prints them"""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            break
        n /= 1024
    return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"


def memory_summary(device=None, abbreviated=False):
    """A table of the caching allocator's counters (memory_stats), laid out
    as torch.cuda.memory_summary lays them out: current, peak, total
    allocated and total freed per metric, split by pool unless abbreviated."""
    idx = _existing(device)
    st = memory_stats(idx)
    pools = ("all",) if abbreviated else ("all", "large_pool", "small_pool")
    metrics = (("allocated_bytes", "Allocated memory", _size), ("active_bytes", "Active memory", _size),
               ("requested_bytes", "Requested memory", _size), ("reserved_bytes", "Device reserved memory", _size),
               ("inactive_split_bytes", "Non-releasable memory", _size), ("allocation", "Allocations", str),
               ("active", "Active allocs", str), ("segment", "Reserved segments", str),
               ("inactive_split", "Non-releasable allocs", str))
    rule, thin = "=" * 75, "-" * 75
    lines = [rule, f" {'PyTorch NEURON memory summary, device ID ' + str(idx):<73} ", thin,
             f"  NEURON OOMs: {st.get('num_ooms', 0):<13d}|  device alloc retries: {st.get('num_alloc_retries', 0):<17d}",
             rule,
             "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ", thin]
    for key, title, fmt in metrics:
        for pool in pools:
            name = title if pool == "all" else ("      from large pool" if pool == "large_pool"
                                                 else "      from small pool")
            vals = [st.get(f"{key}.{pool}.{k}", 0) for k in ("current", "peak", "allocated", "freed")]
            lines.append(f"{name[:23]:<23}|" + "|".join(f" {fmt(v):>10} " for v in vals))
        lines.append(thin)
    for key, title in (("oversize_allocations", "Oversize allocations"), ("oversize_segments", "Oversize segments")):
        vals = [st.get(f"{key}.{k}", 0) for k in ("current", "peak", "allocated", "freed")]
        lines.append(f"{title:<23}|" + "|".join(f" {v:>10} " for v in vals))
    lines.append(rule)
    return "\n".join(lines) + "\n"


def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16]


def is_bf16_supported():
    return True


def _is_in_bad_fork():
    return False


# After os.fork the child has the parent's simulated device (its HBM is host
# memory, copied with the process) but not the parent's OpenMP pool: libgomp's
# workers do not survive fork, and the first host copy big enough to run in
# parallel (about 1 MiB) waits on them forever, as plain CPU PyTorch does.  A
# child of a process holding device tensors runs its host-side work on one
# thread (what torch's DataLoader workers do), so the device keeps working
# there (not a "bad fork": _is_in_bad_fork stays False).  The parent asks
# the runtime before forking: in the child a lock another thread held at
# the fork would never be released.
_fork_holds_device = False


def _before_fork():
    global _fork_holds_device
    _fork_holds_device = bool(_lib.neuron_device_memory_in_use())


def _after_fork_in_child():
    if _fork_holds_device:
        torch.set_num_threads(1)


os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


# Each device has its own default generator (runtime/generator.cpp); random ops
# on neuron tensors draw from it even while they run through the CPU fallback.
# (torch.manual_seed calls manual_seed_all here as well.)
_lib.neuron_initial_seed.restype = ctypes.c_uint64
_lib.neuron_seed.restype = ctypes.c_uint64


def manual_seed(seed):
    _lib.neuron_manual_seed(current_device(), ctypes.c_uint64(int(seed) & (2**64 - 1)))


def manual_seed_all(seed):
    for d in range(device_count()):
        _lib.neuron_manual_seed(d, ctypes.c_uint64(int(seed) & (2**64 - 1)))


def seed():
    return int(_lib.neuron_seed(current_device()))


def seed_all():
    for d in range(device_count()):
        _lib.neuron_seed(d)


def initial_seed():
    return int(_lib.neuron_initial_seed(current_device()))


def get_rng_state(device="neuron"):
    dev = _index(device)
    n = _lib.neuron_get_rng_state(dev, None, 0)
    buf = (ctypes.c_uint8 * n)()
    _lib.neuron_get_rng_state(dev, buf, n)
    return torch.tensor(bytearray(buf), dtype=torch.uint8)


def set_rng_state(new_state, device="neuron"):
    data = bytes(new_state.to(torch.uint8).cpu().numpy().tobytes())
    buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    if _lib.neuron_set_rng_state(_index(device), buf, len(data)):
        raise RuntimeError("neuron: invalid RNG state")


# ------------------------------------------------------------ streams/events
# Each stream has a simulated device clock.  Work issued to a stream (today:
# copies over the host link) advances it; events record it, so
# Event.elapsed_time reports simulated time.

def _call(fn, *args):
    err = ctypes.create_string_buffer(512)
    r = fn(*args, err, 512)
    if r < 0:
        raise RuntimeError(err.value.decode())
    return r


def _stream_time_ps(device, stream_id):
    out = ctypes.c_uint64()
    _call(_lib.neuron_stream_time, device, stream_id, ctypes.byref(out))
    return out.value


_PRIVATEUSE1 = 20        # c10::DeviceType::PrivateUse1, the device type torch.Stream carries for `neuron`


class Stream(torch.Stream):
    """A queue of device work with its own simulated clock.  A torch.Stream,
    so Tensor.record_stream, torch.Event and torch.accelerator take it.
    `priority` (FSDP2 asks for -1 on its all-gather streams) is kept and
    reported; it changes no timing: a stream's clock is simulated time and
    streams do not compete for an issue queue in the model."""

    def __new__(cls, device=None, priority=0, _id=None):
        idx = _index(device)
        sid = _id if _id is not None else _call(_lib.neuron_stream_new, idx)
        self = super().__new__(cls, stream_id=sid, device_index=idx, device_type=_PRIVATEUSE1)
        self._priority = int(priority)
        return self

    def __init__(self, device=None, priority=0, _id=None):
        pass

    @property
    def priority(self):
        return self._priority

    @staticmethod
    def priority_range():
        """(lowest, highest) priority, CUDA's convention: lower is higher"""
        return 0, -1

    def record_event(self, event=None):
        """records a torch.neuron.Event (a torch.Event) on this stream"""
        event = event if event is not None else Event(device=self.device)
        event.record(self)
        return event

    def query(self):
        return True                 # the simulator finishes work as it is issued

    def synchronize(self):
        pass

    def __eq__(self, other):
        return isinstance(other, torch.Stream) and (self.device, self.stream_id) == (other.device,
                                                                                       other.stream_id)

    def __hash__(self):
        return hash((self.device, self.stream_id))

    def __repr__(self):
        return f"<torch.neuron.Stream device={self.device} stream_id={self.stream_id}>"


def current_stream(device=None):
    dev = _index(device)
    return Stream(dev, _id=_call(_lib.neuron_stream_current, dev))


def default_stream(device=None):
    return Stream(_index(device), _id=0)


def set_stream(stream):
    _call(_lib.neuron_stream_set, stream.device.index, stream.stream_id)


@contextlib.contextmanager
def stream(s):
    if s is None:
        yield
        return
    prev = current_stream(s.device)
    set_stream(s)
    try:
        yield
    finally:
        set_stream(prev)


class _EventType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Event) and obj.device.type == "neuron"


class Event(metaclass=_EventType):
    """torch.neuron.Event(enable_timing=False, blocking=False,
    interprocess=False), torch.cuda.Event's signature: a torch.Event on the
    `neuron` device.  It marks a point of its stream's simulated timeline
    (the device guard records the stream's clock and whether a collective
    set it), so any torch.Stream / torch.Event code -- torch.accelerator,
    FSDP2's all-gather streams -- takes it, and elapsed_time is simulated
    time.  The object made is a plain torch.Event (PyTorch's elapsed_time
    takes no subclass of it); isinstance(e, torch.neuron.Event) holds for
    every torch.Event of the device."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False, device=None):
        # no device: it binds to the stream it is first recorded on, as a
        # torch.cuda.Event does
        dev = torch.device("neuron") if device is None else torch.device("neuron", _index(device))
        return torch.Event(device=dev, enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)
