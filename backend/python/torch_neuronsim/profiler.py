"""Profiling the simulated device from PyTorch.

    with torch_neuronsim.profile("run.pftrace", summary="run.json"):
        model(x)

writes a Perfetto trace (or Chrome JSON for a .json trace name) of every
program run inside the block -- engine and DMA-queue tracks, a slice per
instruction, the ATen op that launched each program, HBM bandwidth and
SBUF/PSUM counters -- and, at exit, a summary JSON with the Neuron profiler's
metric names.  `neuronsim trace summary|diff|report` reads both.
`NEURON_RT_INSPECT_ENABLE=1` does the same for a whole process without code
changes (files in NEURON_RT_INSPECT_OUTPUT_DIR, default ./output).

`range(name)` (exported as torch_neuronsim.profile_range) marks a span of
device time (it nests, 4 deep); compiled graphs are ranges on their own.
`torch.autograd.profiler.profile(use_device="neuron")` reports each op's
simulated device time through the PrivateUse1 profiler hooks, which read the
simulated clock."""
import contextlib
import ctypes

_DETAILS = {"instruction": 0, "program": 1, "utilization": 2}


def _lib():
    from . import _lib as lib
    return lib


def is_active():
    """Whether a profile (this API or NEURON_RT_INSPECT_ENABLE) is being written."""
    return bool(_lib().neuron_profile_active())


@contextlib.contextmanager
def profile(path=None, summary=None, detail="instruction", max_mb=None):
    """Trace (`path`: .pftrace or .json) and/or summary JSON of the block's
    device activity.  detail: "instruction" (a slice per instruction and DMA
    transfer), "program" (a slice per program per engine / queue) or
    "utilization" (busy % per engine and DMA queue and HBM GB/s per 1 ms).
    max_mb bounds the trace (default 400 MB: at half of it the trace drops to
    per-program slices, at three quarters to utilization, at the limit it
    stops and says so)."""
    if path is None and summary is None:
        raise ValueError("torch_neuronsim.profile: give a trace path, a summary path, or both")
    if detail not in _DETAILS:
        raise ValueError(f"torch_neuronsim.profile: detail={detail!r}; use 'instruction', 'program' "
                         "or 'utilization'")
    if max_mb is not None and not (isinstance(max_mb, int) and max_mb > 0):
        raise ValueError(f"torch_neuronsim.profile: max_mb={max_mb!r}; a positive integer")
    lib = _lib()
    err = ctypes.create_string_buffer(512)
    enc = (lambda p: None if p is None else str(p).encode())
    if lib.neuron_profile_start(enc(path), enc(summary), _DETAILS[detail],
                                ctypes.c_uint64((max_mb or 0) << 20), err, len(err)):
        raise RuntimeError(f"torch_neuronsim.profile: {err.value.decode()}")
    try:
        yield
    finally:
        if lib.neuron_profile_stop(err, len(err)):
            raise RuntimeError(f"torch_neuronsim.profile: {err.value.decode()}")


@contextlib.contextmanager
def range(name):  # noqa: A001 (mirrors torch.cuda.nvtx.range)
    """A named span of device time over the programs run inside it."""
    lib = _lib()
    lib.neuron_range_push(str(name).encode())
    try:
        yield
    finally:
        lib.neuron_range_pop()
