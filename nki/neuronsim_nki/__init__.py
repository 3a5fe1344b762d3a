"""neuronsim_nki: NKI kernels on the simulator (timing, traces) -- the NKI
frontend, a kernel compiler beside the simulator's stack (nki/ in the tree).

    import neuronsim_nki as nki
    import neuronsim_nki.language as nl

    @nki.jit
    def add_kernel(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(a), nl.load(b)))
        return out

    c = add_kernel(a_np, b_np)               # NumPy in, NumPy out
    c, res = nki.simulate(add_kernel, a_np, b_np)   # plus the simulated result

The kernel's body runs once, tracing instructions (tracer.py); the program
runs on the cycle-approximate simulator through the neuronsim bindings.
Errors name the kernel source line.  Device tensors (torch's `neuron`
tensors) are a device package's business: torch_neuronsim.nki registers a
calling convention here (register_convention) and kernels called with its
tensors run through it.
"""
from __future__ import annotations

import collections
import contextlib
import enum
import functools
import gc
import importlib
import inspect
import io
import math
import os
import shutil
import sys
import types
from dataclasses import dataclass, field

import numpy as np

import neuronsim

from . import collectives, compiler, isa, language, lnc, runtime_loops, tracer, typing
from . import profile_json as profile_summaries
from .allocator import FixedPlan
from .dtype_keys import IsaKeyed
from .tensor import DType, Tensor, hbm_tensor, whole_view

# nki.dtype: the type of nl.float32 and the other dtypes (NKI 0.8+)
dtype = DType
from .race import find_races
from .tracer import NKIError

__all__ = ["jit", "trace", "simulate", "benchmark", "profile", "baremetal", "simulate_kernel", "language", "isa",
           "typing", "collectives", "compiler", "simulate_ranks", "per_rank", "NKIError", "KernelResult", "par_dim",
           "Convention", "register_convention"]

par_dim = language.par_dim        # `from neuronxcc.nki import par_dim`, as kernels write it
simulate_ranks, per_rank = collectives.simulate_ranks, collectives.per_rank

# NumPy arrays bind as the ISA dtype of the same name (neuronsim.DTYPES);
NP_TO_ISA = {np.dtype(t): name for name, t in neuronsim.DTYPES.items() if t is not None}
# bf16 and fp8 results come back widened to float32 (NumPy has no such types)
ISA_TO_NP = IsaKeyed({**{name: t for name, t in neuronsim.DTYPES.items() if t is not None},
                      **{name: np.float32 for name, t in neuronsim.DTYPES.items() if t is None},
                      **neuronsim.MX_HOST})
# NumPy extension dtypes of the ml_dtypes kind (jax, ml_dtypes): by name
EXT_TO_ISA = {"bfloat16": "bf16", "float8_e4m3fn": "fp8_e4m3fn", "float8_e4m3": "fp8_e4m3", "float8_e5m2": "fp8_e5m2",
              # MX data as NumPy types of these names (AWS's neuron_dtypes): their bytes are the packed words
              "float8_e4m3fn_x4": "fp8_e4m3_x4", "float8_e5m2_x4": "fp8_e5m2_x4", "float4_e2m1fn_x4": "fp4_e2m1_x4"}


def _np_isa_dtype(dtype):
    """The ISA dtype a NumPy array binds as.  A bool array is
    nl.bool_, "boolean stored as uint8" (SDK nki.api.shared.rst), its
    bytes 0 / 1 (the SDK's own tests pass np.bool_ predicates)."""
    if dtype == np.bool_:
        return "uint8"
    return NP_TO_ISA.get(dtype) or EXT_TO_ISA.get(dtype.name)


class Convention:
    """How kernels run on a device package's tensors (torch_neuronsim.nki
    registers one): accepts(value) says whether an argument is such a tensor,
    isa_dtype(value) its ISA dtype name (None: no device type), run(kernel,
    program, ins, outs, multi) runs the traced program on their device and
    returns the outputs."""

    def accepts(self, value) -> bool:
        raise NotImplementedError

    def isa_dtype(self, value):
        raise NotImplementedError

    def run(self, kernel, program, ins, outs, multi):
        raise NotImplementedError

    def host_array(self, value):
        """The value as a NumPy array the simulator can bind (bf16 data
        widened exactly to float32 is fine: it is rounded back)."""
        raise NotImplementedError

    def device_bytes(self, value, dtype):
        """The value's bytes as the device holds `dtype`, when the convention
        has them at hand (bf16 bits, saving the widening and rounding back);
        None otherwise."""
        return None


_conventions = []


def register_convention(convention: Convention):
    """Kernels called with tensors `convention` accepts run through it."""
    if convention not in _conventions:
        _conventions.append(convention)


# the calling convention a framework's tensors need, by the module their type
# comes from: imported the first time such a tensor reaches a kernel (so
# `import torch, nki` and a kernel called on `neuron` tensors just works)
_CONVENTION_MODULES = {"torch": "torch_neuronsim.nki"}


def _convention_of(value):
    conv = next((c for c in _conventions if c.accepts(value)), None)
    if conv is None and not isinstance(value, np.ndarray):
        mod = _CONVENTION_MODULES.get(type(value).__module__.split(".")[0])
        if mod is not None and mod not in sys.modules:
            importlib.import_module(mod)       # registers its convention
            conv = next((c for c in _conventions if c.accepts(value)), None)
    return conv


def _is_foreign_tensor(x):
    """A tensor of a framework no registered convention knows (torch without
    torch_neuronsim.nki imported): refused with a message, not traced."""
    return not isinstance(x, np.ndarray) and hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "device")


@dataclass
class KernelResult:
    """What a simulated kernel run measured."""
    latency_us: float
    engine_active_percent: dict
    hbm_read_bytes: int
    hbm_write_bytes: int
    instructions: int
    program: str = field(repr=False)
    stats: dict = field(repr=False, default_factory=dict)
    trace: str | None = None
    races: list | None = None          # with simulate(..., check_races=True)
    # time at least one DMA engine moves data, as the profiler's
    # dma_active_time_percent (profile-schema-reference.rst)
    dma_active_percent: float = 0.0
    # an LNC=2 run: each core's stats and program (core 0's are the above)
    cores: list = field(repr=False, default_factory=list)
    programs: list = field(repr=False, default_factory=list)


HISTORY_LIMIT = 1024        # simulated runs Kernel.history keeps (each holds its program text)
TRACE_CACHE_LIMIT = 64      # traced programs a kernel keeps, by call key
# the second tracing pass replays the first (Trace.replay) when it can; False
# runs the kernel body again, as the spilling path always does (the tests
# check both give the same program)
REPLAY = True


def _split_outputs(ins, outs):
    """({name: (shape, dtype)} of the HBM arrays the kernel made and
    returns, the same of the arguments it returns -- written in place, read
    back from their input buffers after the run)."""
    args = {t.name for t, _ in ins}
    made = {o.name: (o.shape, o.dtype) for o in outs if o.name not in args}
    return made, {o.name: (o.shape, o.dtype) for o in outs if o.name in args}


def assemble(program):
    """The traced program's bytes.  The C assembler and validator are the
    judges of what the ISA takes; an instruction they refuse becomes an
    NKIError naming the kernel line that traced it (each instruction's text
    ends with it)."""
    try:
        return neuronsim.assemble(program)
    except neuronsim.NeuronSimError as e:
        lines = program.splitlines()
        text = lines[e.line - 1] if 0 < e.line <= len(lines) else ""
        where = text.rsplit("   ; ", 1)[1] if "   ; " in text else "<kernel>"
        raise NKIError(f"{where}: the simulator's ISA refuses the instruction traced here -- {e}") from None


def _in_place(values, ins, outs, multi):
    """values, with each argument the kernel returned -- written in place,
    as on the device -- updated and returned itself when it is a writable
    NumPy array of the result's dtype (else the result stays a new array).
    multi None: the kernel returned nothing and wrote arguments (the older
    output-argument convention): they are updated and the call returns None."""
    args = {t.name: a for t, a in ins}
    vals = [values] if multi is False else list(values)
    for k, o in enumerate(outs):
        a = args.get(o.name)
        if isinstance(a, np.ndarray) and a.flags.writeable and a.dtype == vals[k].dtype and a.shape == vals[k].shape:
            np.copyto(a, vals[k])
            vals[k] = a
        elif multi is None:
            raise NKIError(f"argument {o.name}: the kernel writes it in place, but it is not a writable NumPy "
                           f"array of shape {list(vals[k].shape)} and dtype {vals[k].dtype} to write the result to")
    return shaped(vals, multi)


def shaped(results, multi):
    """A call's value from its results: one, a tuple, or None (multi None)."""
    return None if multi is None else tuple(results) if multi else results[0]


def _values(outputs, outs, multi, suffix=""):
    """The kernel's results as NumPy arrays (a tuple when it returned
    several): buffer o.name + suffix of the run's outputs for each output."""
    values = [outputs[o.name + suffix].astype(ISA_TO_NP[o.dtype], copy=False) for o in outs]
    return values[0] if multi is False else tuple(values)


def _value_type(v):
    """an argument that a trace may be keyed by: a value, equal to another
    only when it means the same (numbers, strings, dtypes, enums, tuples of
    them) -- not an object whose contents could change between calls"""
    if v is None or isinstance(v, (bool, int, float, complex, str, bytes, np.generic, np.dtype, enum.Enum, type)):
        return True
    if isinstance(v, (tuple, frozenset)):
        return all(_value_type(x) for x in v)
    if isinstance(v, (DType, types.FunctionType, types.BuiltinFunctionType, np.ufunc)):
        return True          # a dtype, an operator (nl.add, np.maximum) passed as an argument
    return type(v).__module__.split(".")[0] == "torch" and type(v).__name__ in ("dtype", "device")


def _pair_bindings(name, traced0, traced1):
    """(program 0, program 1, outputs, read_back, aliases) of an LNC=2
    launch's two traced cores ((Trace, program, inputs, outputs, structure)
    each) as run_multi takes them: buffers by core 0's names -- the arrays
    it made and returns, the arguments it returns (read back), the shared
    HBM arrays neither returns (one buffer for both cores, matched by
    creation order) -- and core 1's names aliased to them."""
    (t0, p0, ins0, outs0, _), (t1, p1, ins1, outs1, _) = traced0, traced1
    lnc.check_pair(name, t0, ins0, outs0, t1, ins1, outs1)
    p0, p1 = lnc.aim_sends(t0, p0, t1, p1)
    outputs, written = _split_outputs(ins0, outs0)
    aliases = [{}, {o1.name: o0.name for o0, o1 in zip(outs0, outs1) if o0.name in outputs}]
    ext = [{x.hbm_key: x for x in t.shared.values() if x.name in t.shared_external} for t in (t0, t1)]
    for key in sorted(set(ext[0]) | set(ext[1])):
        owner = ext[0].get(key) or ext[1][key]
        outputs[owner.name] = (owner.shape, owner.dtype)
        for core in (0, 1):
            x = ext[core].get(key)
            if x is not None and x.name != owner.name:
                aliases[core][x.name] = owner.name
    return p0, p1, outputs, written, aliases


class Kernel:
    # (name, target, KernelResult) of the latest simulated runs, oldest let go
    # past HISTORY_LIMIT so a long session stays bounded; runs counts them all
    history = collections.deque(maxlen=HISTORY_LIMIT)
    runs = 0

    def __init__(self, func, target=None, grid=None):
        self.func = func
        self._target = target
        self.grid = grid
        self._core = None          # tracing one core of an LNC=2 pair (lnc.py)
        self._rank = None          # (rank, ranks): tracing one rank of simulate_ranks (collectives.py)
        self.last_result = None
        # traced programs by call signature (_call_key), least recently used first
        self._traces = collections.OrderedDict()
        self.traces_made = 0
        functools.update_wrapper(self, func)

    def __getitem__(self, grid):
        """kernel[gx, gy](...): an SPMD launch; nl.program_id(axis) numbers
        the instances, which run one after another in one program -- except
        kernel[2] (NKI 0.8's LNC=2 bracket) and nl.spmd_dim(n, nl.nc(2)) on
        NeuronCore-v3 and later: the two cores of the logical core run their
        instances at once (lnc.py)."""
        grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
        if not grid or any(not isinstance(g, int) or g < 1 for g in grid):
            raise NKIError(f"launch grid {grid!r}: positive integers")
        # one kernel object per grid, so its traces are reused call to call
        launches = self.__dict__.setdefault("_launches", {})
        k = launches.get(grid)
        if k is None:
            k = launches[grid] = Kernel(self.func, self._target, grid)
        k.last_result = None
        return k

    @property
    def target(self):
        """The kernel's target, else NEURON_PLATFORM_TARGET_OVERRIDE, else trn2."""
        return self._target or os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")

    def _arguments(self, args, kwargs):
        """(name, value) of each argument the kernel body sees, in the order
        tracing binds them (*args and **kwargs expanded).  The signature is
        read once per kernel; a call passing every parameter by position
        skips binding (the trace cache's lookup is this function's cost)."""
        sig = self.__dict__.get("_sig")
        if sig is None:
            sig = self._sig = inspect.signature(self.func)
            plain = all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in sig.parameters.values())
            self._plain = tuple(sig.parameters) if plain else None
        if not kwargs and self._plain is not None and len(args) == len(self._plain):
            return list(zip(self._plain, args))
        bound = sig.bind(*args, **kwargs)
        out = []
        for name, value in bound.arguments.items():
            kind = sig.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                out += [(f"{name}{i}", v) for i, v in enumerate(value)]
            elif kind is inspect.Parameter.VAR_KEYWORD:
                out += list(value.items())
            else:
                out.append((name, value))
        return out

    def _call_key(self, args, kwargs):
        """(key, arrays): what a compiled kernel is specific to, as on
        hardware (the first call compiles for the input shapes, data types
        and non-tensor argument values; later calls with the same reuse it)
        -- each array's shape and device dtype, every other argument's value
        (None when one cannot be part of a key) -- and the call's arrays in
        the order tracing binds them."""
        key, arrays = [self.target, self.grid, tracer.settings()], []
        for name, v in self._arguments(args, kwargs):
            conv = None if isinstance(v, np.ndarray) else _convention_of(v)
            if isinstance(v, np.ndarray) or conv is not None:
                if key is not None:
                    dt = _np_isa_dtype(v.dtype) if conv is None else conv.isa_dtype(v)
                    key.append((name, "array", tuple(v.shape), dt))
                arrays.append(v)
            elif key is not None and _value_type(v):
                key.append((name, type(v).__name__, v))
            else:
                key = None
        return (tuple(key) if key is not None else None), arrays

    def _traced(self, args, kwargs):
        """trace()'s (program, inputs, outputs, structure), from the trace
        cache when this kernel was traced for the same call key before (the
        inputs bound to this call's arrays)"""
        key, arrays = self._call_key(args, kwargs) if self._core is None and self._rank is None else (None, [])
        hit = self._traces.get(key) if key is not None else None
        if hit is None:
            program, ins, outs, multi = self.trace(*args, **kwargs)
            self.traces_made += 1
            if key is not None:
                self._traces[key] = (program, [t for t, _ in ins], outs, multi)
                if len(self._traces) > TRACE_CACHE_LIMIT:
                    self._traces.popitem(last=False)
            return program, ins, outs, multi
        self._traces.move_to_end(key)
        program, tensors, outs, multi = hit
        return program, list(zip(tensors, arrays)), outs, multi

    def trace(self, *args, **kwargs):
        """(program text, input tensors with their arrays, output tensors,
        structure).  Two passes (see tracer.Trace): the first, silent, finds
        each tile's last use; the second allocates by it."""
        return self._trace_full(args, kwargs)[1:]

    def _trace_full(self, args, kwargs):
        """(Trace, program, inputs, outputs, structure).  Python's cycle
        collector is off meanwhile: a trace makes hundreds of thousands of
        long-lived objects (instructions, their dependency sets) and few
        cycles, so its passes over them were half the tracing time; and
        tiles then go when their last reference does, never at a point
        that depends on what else the process allocated."""
        enabled = gc.isenabled()
        gc.disable()
        try:
            try:
                return self._two_passes(args, kwargs, cse=True)
            except NKIError as e:
                if "overflow" not in str(e):
                    raise
            # results kept for reuse do not fit beside the kernel's own
            # tiles: trace it as written
            return self._two_passes(args, kwargs, cse=False)
        finally:
            if enabled:
                gc.enable()

    def _two_passes(self, args, kwargs, cse):
        """The second pass is a replay of the first (Trace.replay) when
        its tiles fit without spilling; otherwise the kernel runs again.
        What the kernel prints shows once, from the pass that counts."""
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            first = self._trace_pass(None, args, kwargs, cse)
            first.check_lifetimes()
            if first.cse_broken:
                # the kernel wrote into a result it got twice: trace it
                # without reusing results, each one a tile of its own
                printed = io.StringIO()
                with contextlib.redirect_stdout(printed):
                    first = self._trace_pass(None, args, kwargs, cse=False)
                    first.check_lifetimes()
        if REPLAY and first.replayable() and first.replay():
            sys.stdout.write(printed.getvalue())
            return (first,) + self._finish(first, first.bound_ins, first.ret)
        return self._trace_pass(first, args, kwargs, cse=first.cse)

    def _trace_pass(self, first, args, kwargs, cse=True):
        last_use = first.uses if first is not None else None
        sig = inspect.signature(self.func)
        bound = sig.bind(*args, **kwargs)
        files = {os.path.abspath(inspect.getsourcefile(self.func) or "<kernel>")}
        t = tracer.Trace(self.target, files, last_use, first.choices if first is not None else None, cse,
                         first.use_seq if first is not None else None,
                         FixedPlan(first) if first is not None and first.fixed else None)
        t.force_auto = compiler.is_forced_auto(self.func)
        prev, tracer._current = tracer._current, t
        try:
            ins = []

            def bind(name, value):
                """An argument as the kernel body sees it: arrays become HBM tensors."""
                conv = None if isinstance(value, np.ndarray) else _convention_of(value)
                if conv is None and _is_foreign_tensor(value):
                    raise NKIError(f"argument {name}: a {type(value).__module__}.{type(value).__name__}; kernels "
                                   "take NumPy arrays here (for torch `neuron` tensors, use torch_neuronsim.nki)")
                if not isinstance(value, np.ndarray) and conv is None:
                    return value
                dt = _np_isa_dtype(value.dtype) if conv is None else conv.isa_dtype(value)
                if dt is None:
                    raise NKIError(f"argument {name}: dtype {value.dtype} has no device type")
                ht = hbm_tensor(t.unique(name), tuple(value.shape), dt)
                t.tensors[ht.name] = ht
                ins.append((ht, value))
                return ht

            # *args and **kwargs pass through as the arguments they hold
            P_ = inspect.Parameter
            star = any(p.kind is P_.VAR_POSITIONAL for p in sig.parameters.values())
            pos, kw = [], {}
            for name, value in bound.arguments.items():
                kind = sig.parameters[name].kind
                if kind is P_.VAR_POSITIONAL:
                    pos += [bind(f"{name}{i}", v) for i, v in enumerate(value)]
                elif kind is P_.VAR_KEYWORD:
                    kw.update({k: bind(k, v) for k, v in value.items()})
                elif kind is P_.POSITIONAL_ONLY or (star and kind is P_.POSITIONAL_OR_KEYWORD):
                    pos.append(bind(name, value))
                else:
                    kw[name] = bind(name, value)
            grid = self.grid or (1,)
            ret = None
            t.lnc_rank = self._core
            if self._rank is not None:
                t.cc_rank, t.cc_world = self._rank
            place = lnc.core_of(self.grid) if self._core is not None else None
            for flat in range(int(np.prod(grid))):
                index = tuple(int(v) for v in np.unravel_index(flat, grid))
                if place is not None and place(index) != self._core:
                    continue               # the other core's instance
                t.grid, t.grid_index = grid, index
                t.grid_explicit = bool(self.grid)
                t.hbm_calls = 0
                ret = self.func(*pos, **kw)
            runtime_loops.check_closed(t)
            if last_use is None:             # the first pass measures liveness (and may be replayed)
                t.bound_ins, t.ret = ins, ret
                return t
            return (t,) + self._finish(t, ins, ret)
        finally:
            tracer._current = prev

    def _finish(self, t, ins, ret):
        """(program, inputs, outputs, structure) of the pass t that counts,
        its kernel having returned ret."""
        prev, tracer._current = tracer._current, t
        try:
            multi = isinstance(ret, (tuple, list))
            outs = list(ret) if multi else [ret]
            if ret is None:
                # the older convention (nki.trace kernels called with their
                # outputs, SDK test_sbuf_modulo_alloc.py): the arguments the
                # kernel wrote are its results, written in place
                written = {r[1] for i in t.instrs for r in i.writes if r[0] == "hbm"}
                outs, multi = [i for i, _ in ins if i.name in written], None
                if not outs:
                    raise NKIError(f"{self.func.__name__} returned nothing and wrote none of its arguments: "
                                   "return the HBM tensors it created with nl.ndarray(..., buffer=nl.shared_hbm)")
            for o in outs:
                # an argument returned whole is an output the kernel wrote
                # in place (NKI's output-argument kernels: nkilib's rope_hf);
                # a reshape of a whole tensor is that tensor (nkilib's
                # attention_block_tkg returns its caches so, qkv_tkg its output)
                if not isinstance(o, Tensor) or o.space != "hbm" or o.name not in t.tensors or \
                        not whole_view(o, t.tensors[o.name]):
                    raise NKIError(f"{self.func.__name__} must return the HBM tensors it created with "
                                   f"nl.ndarray(..., buffer=nl.shared_hbm) or arguments, whole (or reshaped); "
                                   f"got {o!r}")
            if self._core is not None:
                # shared HBM arrays not returned are bound from outside, one
                # buffer for both cores; private ones stay in this core's scratch
                returned = {o.name for o in outs}
                t.shared_external = {x.name for x in t.shared.values()
                                     if not x.private and x.name not in returned}
            if self._rank is not None:
                t.shared_external |= t.cc_staging     # ranks share the collectives' staging
            program = t.program([i for i, _ in ins], outs)
            return program, ins, outs, multi
        finally:
            tracer._current = prev

    def simulate(self, *args, trace=None, check_races=False, **kwargs):
        """(outputs as NumPy arrays, KernelResult) of one simulated run."""
        if self.grid and lnc.is_pair(self.target, self.grid):
            return self._simulate_pair(args, kwargs, trace, check_races)
        return self.run_traced(*self._traced(args, kwargs), trace=trace, check_races=check_races)

    def _device_inputs(self, ins):
        """{tensor name: (host array or device bytes, dtype)} of the inputs."""
        arrays = {}
        for t, a in ins:
            conv = None if isinstance(a, np.ndarray) else _convention_of(a)
            raw = None if conv is None else conv.device_bytes(a, t.dtype)
            if raw is not None:
                arrays[t.name] = (raw, t.dtype)
                continue
            a = a if conv is None else conv.host_array(a)
            if t.dtype in ("bf16", "fp8_e4m3", "fp8_e4m3fn", "fp8_e5m2") and a.dtype.name in EXT_TO_ISA:
                a = a.astype(np.float32)          # exact: the simulator rounds back to the same values
            arrays[t.name] = (a, t.dtype)
        return arrays

    def _result(self, cores, program, trace, races):
        """The KernelResult of a run: per-core stats merged (the latest end,
        engine and DMA activity as the mean of the cores' shares)."""
        total = max(st["total_ps"] for st in cores) or 1
        busy = {e: sum(st["engine_busy_ps"][e] for st in cores) / len(cores) for e in cores[0]["engine_busy_ps"]}
        result = KernelResult(total / 1e6, {e: 100.0 * v / total for e, v in busy.items()},
                              sum(st["hbm_read_bytes"] for st in cores), sum(st["hbm_write_bytes"] for st in cores),
                              sum(st["instructions"] for st in cores), program, cores[0],
                              str(trace) if trace else None, races,
                              100.0 * sum(st["dma_active_ps"] for st in cores) / len(cores) / total, cores)
        self.last_result = result
        Kernel.history.append((self.func.__name__, self.target, result))
        Kernel.runs += 1
        return result

    def run_traced(self, program, ins, outs, multi, trace=None, check_races=False):
        """Runs a traced program on the simulator: host arrays in (NumPy, or
        what a registered convention turns into NumPy), NumPy out."""
        races = find_races(program) if check_races else None
        made, written = _split_outputs(ins, outs)
        res = neuronsim.run(assemble(program), self._device_inputs(ins), made, read_back=written,
                            target=self.target, label=self.func.__name__, trace=trace, standalone=True)
        return _in_place(_values(res.outputs, outs, multi), ins, outs, multi), \
            self._result([res.stats], program, trace, races)

    def _simulate_pair(self, args, kwargs, trace, check_races):
        """An LNC=2 launch: each core's program traced on its own, both run
        as one paired core.  KernelResult.program is core 0's; .programs
        holds both."""
        for a in list(args) + list(kwargs.values()):
            if not isinstance(a, np.ndarray) and _convention_of(a) is not None:
                raise NKIError(f"{self.func.__name__}: LNC=2 launches (kernel[2]) take NumPy arrays in the "
                               "simulator; the torch plugin runs one core's program")
        traced = []
        for core in (0, 1):
            k = Kernel(self.func, self._target, self.grid)
            k._core = core
            traced.append(k._trace_full(args, kwargs))
        (t0, p0, ins0, outs0, multi), _ = traced
        p0, p1, outputs, written, aliases = _pair_bindings(self.func.__name__, *traced)
        races = (find_races(p0) + find_races(p1)) if check_races else None
        res = neuronsim.run_multi([assemble(p0), assemble(p1)], self._device_inputs(ins0), outputs, aliases=aliases,
                                  read_back=written,
                                  target=self.target, label=self.func.__name__, trace=trace, standalone=True)
        result = self._result(res.cores, p0, trace, races)
        result.programs = [p0, p1]
        return _in_place(_values(res.outputs, outs0, multi), ins0, outs0, multi), result

    def __call__(self, *args, **kwargs):
        if tracer._current is not None:            # a kernel called from a kernel: inline
            return self.func(*args, **kwargs)
        for a in list(args) + list(kwargs.values()):
            conv = None if isinstance(a, np.ndarray) else _convention_of(a)
            if conv is not None:
                return conv.run(self, *self._traced(args, kwargs))
        return self.simulate(*args, **kwargs)[0]


def jit(func=None, **kw):
    """@nki.jit / @nki.jit(...): the kernel, callable with NumPy arrays.
    platform_target= (NKI before 0.3, which the MXFP tutorial still passes:
    "trn3") names the target as target= does; without either it is
    NEURON_PLATFORM_TARGET_OVERRIDE's, else trn2."""
    target = kw.get("target") or kw.get("platform_target")
    if func is None:
        return lambda f: Kernel(f, target)
    return Kernel(func, target)


baremetal = jit
# @nki.trace (neuronxcc.nki.trace): the kernel as a framework calls it; here
# the same kernel object as @nki.jit
trace = jit


def simulate(kernel, *args, **kwargs):
    """(outputs, KernelResult) of one simulated run."""
    k = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    return k.simulate(*args, **kwargs)


def simulate_kernel(kernel, *args, **kwargs):
    return simulate(kernel, *args, **kwargs)[0]


@dataclass
class BenchmarkResult:
    latencies_us: list

    def percentile(self, p):
        return float(np.percentile(self.latencies_us, p))

    def get_latency_percentile(self, p):
        """benchmark_result.nc_latency.get_latency_percentile(99), in us as
        NKI reports it."""
        return self.percentile(p)

    @property
    def nc_latency(self):
        return self


class _Measured:
    """What nki.benchmark / nki.profile return: the kernel, callable (and
    launchable as m[grid](...)) like it, recording each run's result on
    itself (.result, .profile_summary, and what `record` adds)."""

    def __init__(self, kernel, trace_path, record, owner=None):
        self.kernel, self._trace_path, self._record = kernel, trace_path, record
        self._owner = owner or self
        if owner is None:
            self.result = self.profile_summary = self.benchmark_result = None

    def __getitem__(self, grid):
        return _Measured(self.kernel[grid], self._trace_path, self._record, self._owner)

    def __call__(self, *args, **kwargs):
        out, r = self.kernel.simulate(*args, trace=self._trace_path(), **kwargs)
        owner = self._owner
        owner.result = r
        owner.profile_summary = profile_summaries.summary(r, self.kernel.func.__name__, self.kernel.target)
        self._record(owner, r)
        if owner is not self:           # bench[grid](...) then bench[grid].benchmark_result, or bench's
            self.result, self.profile_summary = owner.result, owner.profile_summary
            self.benchmark_result = owner.benchmark_result
        return out


def _kernel_of(f, kw):
    return f if isinstance(f, Kernel) else Kernel(f, kw.get("target"))


def benchmark(func=None, warmup=2, iters=10, save_neff_name=None, save_trace_name=None, profile_json=None, **kw):
    """@nki.benchmark / nki.benchmark(kernel, ...): runs the kernel and keeps
    `iters` latencies in .benchmark_result.  The simulator is deterministic,
    so one simulated run gives them all (and there is nothing to warm up).
    save_trace_name writes the run's trace (Perfetto, whatever the suffix);
    save_neff_name writes the program (.nsasm text), where NKI writes a NEFF;
    profile_json writes the run's profile summary (profile_json.py; also kept in
    .profile_summary)."""
    def record(owner, r):
        if save_neff_name:
            with open(save_neff_name, "w", encoding="utf-8") as fh:
                fh.write(r.program)
        owner.benchmark_result = BenchmarkResult([r.latency_us] * max(1, iters))
        if profile_json:
            profile_summaries.write(profile_json, owner.profile_summary)

    def wrap(f):
        return _Measured(_kernel_of(f, kw), lambda: save_trace_name, record)
    return wrap(func) if func is not None else wrap


def profile(func=None, working_directory=".", save_neff_name="file.neff", save_trace_name="profile.ntff",
            overwrite=False, profile_nth=1, num_execs=None, **kw):
    """@nki.profile: runs the kernel num_execs times (default profile_nth)
    and profiles every profile_nth-th execution, as NKI's does: into
    working_directory (made if missing) go the program as save_neff_name
    (.nsasm text where NKI writes a NEFF), each profiled execution's trace
    -- STEM.ntff for execution 1, STEM_exec_N.ntff for execution N (Perfetto
    JSON, whatever the suffix) -- and its profile summary,
    json_reports/STEM[_exec_N].json (profile_json.py).  The simulator is
    deterministic: every execution is the same run, simulated once.  An
    artifact that exists already is an error unless overwrite=True."""
    nth = max(1, int(profile_nth))
    execs = nth if num_execs is None else max(1, int(num_execs))
    stem = os.path.splitext(os.path.basename(save_trace_name))[0]
    suffix = os.path.splitext(save_trace_name)[1] or ".ntff"
    profiled = list(range(nth, execs + 1, nth)) or [nth]

    def name(n, ext):
        return f"{stem}{ext}" if n == 1 else f"{stem}_exec_{n}{ext}"

    def artifacts():
        paths = [os.path.join(working_directory, save_neff_name)]
        paths += [os.path.join(working_directory, name(n, suffix)) for n in profiled]
        paths += [os.path.join(working_directory, "json_reports", name(n, ".json")) for n in profiled]
        return paths

    def trace_path():
        os.makedirs(os.path.join(working_directory, "json_reports"), exist_ok=True)
        if not overwrite:
            for p in artifacts():
                if os.path.exists(p):
                    raise NKIError(f"nki.profile: {p} exists (overwrite=True replaces profile artifacts)")
        return os.path.join(working_directory, name(profiled[0], suffix))

    def record(owner, r):
        with open(os.path.join(working_directory, save_neff_name), "w", encoding="utf-8") as fh:
            fh.write(r.program)
        first = os.path.join(working_directory, name(profiled[0], suffix))
        for n in profiled:
            if n != profiled[0]:
                shutil.copyfile(first, os.path.join(working_directory, name(n, suffix)))
            profile_summaries.write(os.path.join(working_directory, "json_reports", name(n, ".json")),
                                    owner.profile_summary)

    def wrap(f):
        return _Measured(_kernel_of(f, kw), trace_path, record)
    return wrap(func) if func is not None else wrap
