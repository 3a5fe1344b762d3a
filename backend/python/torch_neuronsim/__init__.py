"""torch_neuronsim: the `neuron` device for PyTorch, backed by the neuronsim
simulator of AWS Trainium NeuronCores.

Importing it (or just `import torch`, through the `torch.backends` entry
point) registers PyTorch's PrivateUse1 device as `neuron`, the
`torch.neuron` module and `Tensor.neuron()` / `Module.neuron()`.
"""
import ctypes
import os


def _autoload():
    """Entry point of the `torch.backends` group: `import torch` calls it.

    Defined before `import torch` because `import torch_neuronsim` on its own
    imports torch, whose autoload then finds this module half-initialised;
    in that case registration happens at the end of this module instead."""
    register = globals().get("_register")
    if register is not None:
        register()


import torch  # noqa: E402
from neuronsim import ENGINES  # noqa: E402  (the ISA's engine table, from libneuronsim.so)

__all__ = ["stats", "reset_stats", "clear_program_cache", "profile", "profile_range"]

_here = os.path.dirname(os.path.abspath(__file__))
_lib_path = os.path.join(_here, "lib", "libtorch_neuronsim.so")
if not os.path.exists(_lib_path):
    raise ImportError(f"torch_neuronsim: {_lib_path} is missing; build the project first "
                      "(scripts/setup.sh)")

# loading runs the library's static registrations (allocator, guard, kernels)
torch.ops.load_library(_lib_path)
_lib = ctypes.CDLL(_lib_path)
_lib.neuron_target.restype = ctypes.c_char_p
_lib.neuron_device_memory_in_use.restype = ctypes.c_uint64

def _lines(fn):
    n = fn(None, 0)
    buf = ctypes.create_string_buffer(n)
    fn(buf, n)
    return [line.rpartition("=") for line in buf.value.decode().splitlines()]


def stats():
    """Counters of the plugin: CPU fallbacks (total and per op), bytes copied
    each way, device memory, programs run on the simulator and their summed
    engine busy time, DMA and HBM traffic, the program cache (hits, misses,
    evictions, entries and bytes against NEURON_SIM_PROGRAM_CACHE_MB), and
    per native ATen op its program count and simulated time (`native_ops`).
    `simulated_time_ns` is device time as the stream clocks (and so
    torch.neuron.Event.elapsed_time) count it, summed over streams:
    `launch_time_ns`, each program's launch charge, plus `kernel_time_ns`,
    the programs' simulated runs, plus `transfer_time_ns`, host<->device
    copies over the host link.  `compile` counts torch.compile's work: graphs
    compiled, compile cache hits and misses (memory, disk), graph calls,
    linked segments and their runs, and nodes that run eagerly (fallbacks)."""
    out = {name: int(v) for name, _, v in _lines(_lib.neuron_stats)}
    out["fallback_ops"] = {op: int(n) for op, _, n in _lines(_lib.neuron_fallback_ops)}
    native = {}
    for op, _, v in _lines(_lib.neuron_native_ops):
        count, ps = v.split(",")
        native[op] = {"count": int(count), "simulated_ps": int(ps)}
    out["native_ops"] = native
    from .graph import COUNTERS
    out["compile"] = dict(COUNTERS)
    return out


def device_timeline():
    """The programs run on the simulated devices since the last reset_stats(),
    in order: a dict per program with the ATen op that launched it, device,
    stream, start/end in simulated picoseconds on that stream's clock (after
    the launch overhead), per-engine busy ps and DMA bytes.  At most 2^20
    records are kept; `timeline_dropped()` counts the older ones let go."""
    n = _lib.neuron_timeline(None, 0)
    buf = ctypes.create_string_buffer(n)
    _lib.neuron_timeline(buf, n)
    lines = buf.value.decode().splitlines()
    out = []
    for line in lines[1:]:
        # the op's label may hold commas ("compiled graph 0 (forward, 9 nodes)"):
        # the fixed fields are split from the right
        f = line.rsplit(",", 5 + len(ENGINES))
        engines = dict(zip(ENGINES, map(int, f[5:5 + len(ENGINES)])))
        out.append({"op": f[0], "device": int(f[1]), "stream": int(f[2]), "start_ps": int(f[3]),
                    "end_ps": int(f[4]), "engine_busy_ps": engines, "dma_bytes": int(f[5 + len(ENGINES)])})
    return out


def timeline_dropped():
    n = _lib.neuron_timeline(None, 0)
    buf = ctypes.create_string_buffer(n)
    _lib.neuron_timeline(buf, n)
    return int(buf.value.decode().splitlines()[0].split("=")[1])


def target():
    """The simulated chip's target name ("trn2"; neuronsim.TARGETS lists them)."""
    _lib.neuron_device_count()               # starts the runtime if nothing has yet
    return _lib.neuron_target().decode()


def reset_stats():
    _lib.neuron_reset_stats()
    from .graph import reset_counters
    reset_counters()


def clear_program_cache():
    """Unloads every cached program (their simulated HBM returns to the
    device); they are generated again when next needed."""
    _lib.neuron_clear_program_cache()


def _install_standins():
    """the import stand-ins (neuronsim_standins: torch_neuronx, nki,
    neuronxcc.nki), for a process the site-packages .pth did not set up
    (the package used from a source tree on PYTHONPATH)"""
    import neuronsim_standins
    neuronsim_standins.install()


def _register():
    if getattr(torch, "neuron", None) is not None and hasattr(torch.neuron, "_neuronsim"):
        return
    from . import device as _device
    torch.utils.rename_privateuse1_backend("neuron")
    torch._register_device_module("neuron", _device)
    import sys
    from . import backends as _backends
    torch.backends.neuron = sys.modules["torch.backends.neuron"] = _backends
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True,
                                                         for_storage=True)
    from .compile import install_default_backend
    install_default_backend()
    from . import printing as _printing
    _printing.install()
    _install_standins()
    _backward_on_caller_thread()


def _backward_on_caller_thread():
    """Runs autograd's neuron work on the thread that called backward(), as
    it runs CPU work (torch.autograd.set_multithreading_enabled(False), for
    the importing thread).  PyTorch's per-device autograd threads can hold
    a finished graph's last reference a moment after backward() returned;
    since PyTorch 2.13 that graph keeps a Python object (the backward's
    contextvars context), so when the script ends right then, the device
    thread drops it during interpreter shutdown and the process aborts
    ("terminate called without an active exception").  One simulated host
    gains nothing from a thread per NeuronCore; NEURON_AUTOGRAD_THREADS=1
    keeps PyTorch's default."""
    if os.environ.get("NEURON_AUTOGRAD_THREADS", "0") != "1":
        torch._C._set_multithreading_enabled(False)


from .profiler import profile, range as profile_range  # noqa: E402
# the compile cache's artifact type, known before any load_cache_artifacts()
from . import compile_cache as _compile_cache  # noqa: E402,F401
# the c10d backend "neuron", the device's default (torch.distributed)
from . import distributed as _distributed  # noqa: E402

_distributed.register()

_register()
