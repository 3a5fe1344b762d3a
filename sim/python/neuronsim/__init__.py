"""neuronsim: Python bindings to the simulator's C API (no torch needed).

    import neuronsim
    res = neuronsim.run(program_text, {"x": x}, {"y": ((128, 512), "fp32")}, target="trn2")
    res.outputs["y"], res.stats["total_ps"]

`assemble(text)` turns .nsasm text into the binary program (errors name the
line and field); `run()` loads a program on simulated core 0, binds NumPy
arrays as its input tensors, executes it and returns the outputs and the
execution's statistics, optionally writing a trace and a summary.  The
library is build/…/sim/python/neuronsim/lib/libneuronsim.so (the same C code
the `neuronsim` CLI and the torch plugin use); one runtime per process.
"""
from __future__ import annotations

import ctypes
import functools
import os
import pathlib
import threading
from dataclasses import dataclass, field

import numpy as np

__all__ = ["NeuronSimError", "NeuronSimIndexError", "assemble", "run", "Result", "DTYPES", "MX_HOST", "DTYPE_SIZES", "to_device", "from_device",
           "target_info", "chip_info", "collective_estimate", "COLLECTIVES", "run_multi", "memory_allocated", "running_target", "tables", "op_fields",
           "ENGINES", "ENGINE_TRACKS", "OPCODES", "TARGETS", "ACTIVATIONS", "ALU_OPS"]

_HERE = pathlib.Path(__file__).resolve().parent


class NeuronSimError(RuntimeError):
    """A failing simulator call; the message is the runtime's or assembler's
    (an assembler error also carries .line, the text's line, and .field)."""
    line, field = 0, ""


class NeuronSimIndexError(NeuronSimError, IndexError):
    """A program's access outside its tensor (NSIM_EXEC_OOB: a gather index
    past the table, a run-time offset past the end): an IndexError, as
    PyTorch raises for a bad index."""


class _Diag(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("engine", ctypes.c_int), ("index", ctypes.c_int64),
                ("line", ctypes.c_int), ("field", ctypes.c_char * 32), ("msg", ctypes.c_char * 320)]


class _Config(ctypes.Structure):
    _fields_ = [("target", ctypes.c_char_p), ("mode", ctypes.c_int), ("check_numerics", ctypes.c_int),
                ("progress", ctypes.c_int)]


NSIM_EXEC_STANDALONE = 1            # include/neuronsim/runtime.h
NSIM_EXEC_DATA_CONTROL = 2          # include/neuronsim/runtime.h: the inputs hold values


class _ExecOptions(ctypes.Structure):
    _fields_ = [("label", ctypes.c_char_p), ("not_before_ps", ctypes.c_uint64), ("flags", ctypes.c_uint32)]


class _TargetInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("code", ctypes.c_uint8), ("core", ctypes.c_char_p),
                ("core_version", ctypes.c_uint), ("sbuf_partition_bytes", ctypes.c_uint32),
                ("psum_partition_bytes", ctypes.c_uint32), ("psum_banks", ctypes.c_uint32),
                ("mm_max_n_fp32", ctypes.c_uint32), ("mm_max_n_16bit", ctypes.c_uint32),
                ("has_double_row", ctypes.c_bool)]


class _ProfileOptions(ctypes.Structure):
    _fields_ = [("trace_path", ctypes.c_char_p), ("summary_path", ctypes.c_char_p), ("detail", ctypes.c_int),
                ("max_bytes", ctypes.c_uint64)]


class _FieldInfo(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p), ("kind", ctypes.c_char_p), ("ap_slot", ctypes.c_int),
                ("role", ctypes.c_uint), ("domain", ctypes.c_char_p), ("slot", ctypes.c_uint),
                ("dflt", ctypes.c_uint32), ("max", ctypes.c_uint32)]


class _ChipInfo(ctypes.Structure):
    _fields_ = [("target", ctypes.c_char_p), ("core_name", ctypes.c_char_p), ("hbm_standard", ctypes.c_char_p),
                ("cores", ctypes.c_uint32), ("clock_mhz", ctypes.c_uint32 * 5), ("dma_engines", ctypes.c_uint32),
                ("dma_queues", ctypes.c_uint32), ("dma_engine_bytes_per_second", ctypes.c_uint64),
                ("hbm_stacks", ctypes.c_uint32), ("hbm_bytes", ctypes.c_uint64),
                ("hbm_bytes_per_second", ctypes.c_uint64), ("peak_flops_per_second", ctypes.c_uint64),
                ("exec_startup_ps", ctypes.c_uint64), ("exec_teardown_ps", ctypes.c_uint64),
                ("peer_signal_ps", ctypes.c_uint64), ("min_ii", ctypes.c_uint32),
                ("static_overhead", ctypes.c_uint32), ("scalar_overhead", ctypes.c_uint32),
                ("dma_issue_latency_ps", ctypes.c_uint64)]


class _CollectiveCost(ctypes.Structure):
    _fields_ = [("ps", ctypes.c_uint64), ("algorithm", ctypes.c_char_p), ("steps", ctypes.c_uint32),
                ("rings", ctypes.c_uint32), ("wire_bytes", ctypes.c_uint64)]


# operand roles of isa_field_info.role (isa.h): part of the library's ABI
ROLE_READ, ROLE_WRITE, ROLE_READ_IF_ACCUMULATE = 0x1, 0x2, 0x4

_lib = None
_lock = threading.Lock()
_target = None


def library_path() -> pathlib.Path:
    return pathlib.Path(os.environ.get("NEURONSIM_LIBRARY", _HERE / "lib" / "libneuronsim.so"))


def _load():
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    if not path.exists():
        raise NeuronSimError(f"{path} is missing: build the project first (scripts/setup.sh)")
    lib = ctypes.CDLL(str(path))
    vp, u64, i32 = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int
    sigs = {
        "isa_asm": (i32, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(vp), ctypes.POINTER(_Diag)]),
        "isa_program_encode": (i32, [vp, ctypes.POINTER(vp), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(_Diag)]),
        "isa_program_free": (None, [vp]),
        "nsim_buffer_free": (None, [vp]),
        "nsim_struct_size": (ctypes.c_size_t, [ctypes.c_char_p]),
        "nsim_init_config": (i32, [ctypes.POINTER(_Config)]),
        "nsim_close": (None, []),
        "nsim_last_error": (ctypes.c_char_p, []),
        "nsim_status_name": (ctypes.c_char_p, [i32]),
        "nsim_target_name": (ctypes.c_char_p, []),
        "nsim_memory_allocated": (u64, []),
        "nsim_load": (i32, [ctypes.c_char_p, ctypes.c_size_t, i32, ctypes.POINTER(vp)]),
        "nsim_unload": (i32, [vp]),
        "nsim_tensor_allocate": (i32, [i32, u64, ctypes.c_char_p, ctypes.POINTER(vp)]),
        "nsim_tensor_free": (None, [vp]),
        "nsim_tensor_write": (i32, [vp, ctypes.c_char_p, u64, u64]),
        "nsim_tensor_read": (i32, [vp, vp, u64, u64]),
        "nsim_tensor_set_create": (i32, [ctypes.POINTER(vp)]),
        "nsim_tensor_set_add": (i32, [vp, ctypes.c_char_p, vp]),
        "nsim_tensor_set_free": (None, [vp]),
        "nsim_execute_ex": (i32, [vp, vp, vp, ctypes.POINTER(_ExecOptions)]),
        "nsim_execute_multi_ex": (i32, [ctypes.POINTER(vp), ctypes.POINTER(vp), ctypes.POINTER(vp), i32,
                                        ctypes.POINTER(_ExecOptions)]),
        "nsim_model_stats": (i32, [vp, vp]),
        "nsim_profile_start_opts": (i32, [ctypes.POINTER(_ProfileOptions)]),
        "nsim_profile_stop": (i32, []),
        "isa_target_from_name": (i32, [ctypes.c_char_p]),
        "isa_target_get": (ctypes.POINTER(_TargetInfo), [i32]),
        "isa_target_has": (ctypes.c_bool, [i32, i32]),
        "isa_feature_first_core": (ctypes.c_uint, [i32]),
        "isa_table_from_name": (i32, [ctypes.c_char_p]),
        "isa_table_size": (ctypes.c_uint, [i32]),
        "isa_table_entry": (ctypes.c_char_p, [i32, ctypes.c_uint]),
        "isa_dtype_size": (ctypes.c_uint, [i32]),
        "isa_dtype_is_float": (ctypes.c_bool, [i32]),
        "isa_alu_needs_integers": (ctypes.c_bool, [i32]),
        "isa_op_field_count": (ctypes.c_uint, [i32]),
        "isa_op_field": (ctypes.c_bool, [i32, ctypes.c_uint, ctypes.POINTER(_FieldInfo)]),
        "isa_domain_size": (ctypes.c_uint, [ctypes.c_char_p]),
        "isa_domain_name": (ctypes.c_char_p, [ctypes.c_char_p, ctypes.c_uint]),
        "nsim_stats_field": (ctypes.c_char_p, [ctypes.c_uint, ctypes.POINTER(ctypes.c_uint)]),
        "nsim_chip_info_get": (i32, [ctypes.c_char_p, ctypes.POINTER(_ChipInfo)]),
        "nsim_trace_track_name": (ctypes.c_char_p, [i32]),
        "nsim_convert": (i32, [i32, vp, i32, vp, u64]),
        "nsim_collective_estimate": (i32, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32, u64,
                                           ctypes.POINTER(_CollectiveCost)]),
        "nsim_collective_estimate_ranks": (i32, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint32),
                                                 ctypes.c_uint32, u64, ctypes.POINTER(_CollectiveCost)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    for cname, pyt in (("isa_diag", _Diag), ("nsim_config", _Config), ("nsim_exec_options", _ExecOptions),
                       ("isa_target_info", _TargetInfo), ("nsim_profile_options", _ProfileOptions),
                       ("isa_field_info", _FieldInfo), ("nsim_chip_info", _ChipInfo),
                       ("nsim_collective_cost", _CollectiveCost)):
        if lib.nsim_struct_size(cname.encode()) != ctypes.sizeof(pyt):
            raise NeuronSimError(f"{path}: its {cname} layout differs from these bindings' (rebuild)")
    _lib = lib
    return lib


def _check(st, what):
    if st:
        lib = _load()
        name = lib.nsim_status_name(st).decode()
        cls = NeuronSimIndexError if name == "NSIM_EXEC_OOB" else NeuronSimError
        raise cls(f"{what}: {name}: {lib.nsim_last_error().decode()}")


def assemble(text: str) -> bytes:
    """.nsasm text -> program bytes (.nsp); NeuronSimError names line and field."""
    lib = _load()
    prog, diag = ctypes.c_void_p(), _Diag()
    raw = text.encode()
    if lib.isa_asm(raw, len(raw), ctypes.byref(prog), ctypes.byref(diag)):
        err = NeuronSimError(f"assembling: {diag.msg.decode()}")
        err.line, err.field = diag.line, diag.field.decode()     # the text's line (1-based; 0: none)
        raise err
    buf, n = ctypes.c_void_p(), ctypes.c_size_t()
    try:
        if lib.isa_program_encode(prog, ctypes.byref(buf), ctypes.byref(n), ctypes.byref(diag)):
            raise NeuronSimError(f"encoding: {diag.msg.decode()}")
        return ctypes.string_at(buf, n.value)
    finally:
        lib.isa_program_free(prog)
        if buf:
            lib.nsim_buffer_free(buf)


def target_info(target: str) -> dict:
    """The target's on-chip geometry, from the ISA's target table, and the
    instruction-set features its core has (isa_features.def)."""
    lib = _load()
    code = lib.isa_target_from_name(target.encode())
    info = lib.isa_target_get(code)
    if not info:
        raise NeuronSimError(f"unknown target {target!r} ({', '.join(tables().TARGETS)})")
    t = info.contents
    out = {k: getattr(t, k) for k in ("core_version", "sbuf_partition_bytes", "psum_partition_bytes",
                                      "psum_banks", "mm_max_n_fp32", "mm_max_n_16bit")}
    # the features its core has, as the library decides (isa_target_has)
    out["features"] = frozenset(f for i, f in enumerate(tables().FEATURES) if lib.isa_target_has(code, i))
    return out


def chip_info(target=None) -> dict:
    """The chip `target` simulates (None: the running runtime's), from the
    device model's chip table: core name, HBM standard, cores, per-engine
    clocks (MHz), DMA engines, queues and per-engine rate, HBM stacks, bytes
    and bandwidth, TensorE bf16 peak FLOP/s, a standalone execution's NEFF
    start-up and tear-down (ps), the cost model's per-instruction minimum
    (min_ii) and result latencies (static_overhead, scalar_overhead; cycles)
    and a DMA's issue latency (ps)."""
    lib = _load()
    info = _ChipInfo()
    if lib.nsim_chip_info_get(target.encode() if target else None, ctypes.byref(info)):
        known = ", ".join(tables().TARGETS)
        raise NeuronSimError(f"unknown target {target!r} ({known})" if target else "no runtime is running")
    out = {k: getattr(info, k) for k, _ in _ChipInfo._fields_}
    for k in ("target", "core_name", "hbm_standard"):
        out[k] = out[k].decode()
    out["clock_mhz"] = dict(zip(tables().ENGINES, info.clock_mhz))
    return out


COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv", "barrier")


def collective_estimate(op: str, ranks, nbytes: int, target=None) -> dict:
    """The modeled time of collective `op` over `ranks` NeuronCores moving
    `nbytes` (nccom-test's size: all_gather's gathered output,
    reduce_scatter's whole input), on `target` (None: the running
    runtime's): {"us", "algorithm", "steps", "rings", "wire_bytes"}, plus
    nccom-test's algbw and busbw in GiB/s.  `ranks` is a count (the first
    that many NeuronCores) or the group's global ranks (rank r is
    NeuronCore r: a strided group spans more chips than a contiguous one)."""
    lib = _load()
    cost = _CollectiveCost()
    what = f"collective_estimate({op!r}, {ranks if isinstance(ranks, int) else len(ranks)}, {nbytes})"
    if isinstance(ranks, int):
        n = ranks
        _check(lib.nsim_collective_estimate(target.encode() if target else None, op.encode(), int(ranks),
                                            int(nbytes), ctypes.byref(cost)), what)
    else:
        group = [int(r) for r in ranks]
        if any(r < 0 for r in group):
            raise ValueError(f"{what}: negative rank in the group")
        n = len(group)
        arr = (ctypes.c_uint32 * max(n, 1))(*group)
        _check(lib.nsim_collective_estimate_ranks(target.encode() if target else None, op.encode(), arr, n,
                                                  int(nbytes), ctypes.byref(cost)), what)
    us = cost.ps / 1e6
    algbw = nbytes / (us * 1e-6) / 2**30 if us else 0.0
    factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n,
              "reduce_scatter": (n - 1) / n, "all_to_all": (n - 1) / n}.get(op, 1.0)
    return {"us": us, "algorithm": cost.algorithm.decode(), "steps": cost.steps, "rings": cost.rings,
            "wire_bytes": cost.wire_bytes, "algbw": algbw, "busbw": algbw * factor}


# ---------------------------------------------------------------- tables
# The instruction set's tables, read from the library (include/neuronsim/
# *.def are their only description): module attributes ENGINES, OPCODES,
# TARGETS, DTYPE_SIZES, ... are looked up here on first use.

@functools.cache
def tables():
    """The ISA's name tables as the library declares them."""
    lib = _load()

    def names(table, first=0):
        t = lib.isa_table_from_name(table.encode())
        return tuple(lib.isa_table_entry(t, i).decode() for i in range(first, lib.isa_table_size(t)))

    dtypes = lib.isa_table_from_name(b"dtypes")
    stat_fields, i, words = [], 0, ctypes.c_uint()
    while (name := lib.nsim_stats_field(i, ctypes.byref(words))) is not None:
        stat_fields.append((name.decode(), words.value))
        i += 1
    if not stat_fields:
        raise NeuronSimError(f"{library_path()}: nsim_stats_field lists no fields (its table and "
                             "nsim_exec_stats disagree)")
    engines = names("engines")
    if lib.nsim_struct_size(b"nsim_exec_stats") != 8 * sum(n for _, n in stat_fields):
        raise NeuronSimError(f"{library_path()}: nsim_exec_stats is not the fields nsim_stats_field lists")
    return _Tables(
        ENGINES=engines,
        ENGINE_TRACKS={lib.nsim_trace_track_name(e).decode(): name for e, name in enumerate(engines)},
        OPCODES=names("ops"),
        TARGETS=names("targets", 1),
        ACTIVATIONS=names("acts"),
        ALU_OPS=names("alus"),
        INT_ALU_OPS=tuple(name for i, name in enumerate(names("alus")) if lib.isa_alu_needs_integers(i)),
        SPACES=names("spaces"),
        FEATURES={name: lib.isa_feature_first_core(i) for i, name in enumerate(names("features"))},
        DTYPE_SIZES={lib.isa_table_entry(dtypes, d).decode(): lib.isa_dtype_size(d)
                     for d in range(1, lib.isa_table_size(dtypes))},
        FLOAT_DTYPES=tuple(lib.isa_table_entry(dtypes, d).decode() for d in range(1, lib.isa_table_size(dtypes))
                           if lib.isa_dtype_is_float(d)),
        STAT_FIELDS=tuple(stat_fields),
    )


@dataclass(frozen=True)
class _Tables:
    ENGINES: tuple
    ENGINE_TRACKS: dict
    OPCODES: tuple
    TARGETS: tuple
    ACTIVATIONS: tuple
    ALU_OPS: tuple
    INT_ALU_OPS: tuple  # the ALU operations that take integer operands only (isa_alu.def: ISA_AU_INT)
    SPACES: tuple
    FEATURES: dict      # feature -> the first NeuronCore version with it (isa_features.def)
    DTYPE_SIZES: dict
    FLOAT_DTYPES: tuple  # the floating-point dtypes (isa_dtype.def class FLOAT; fp8 included)
    STAT_FIELDS: tuple


@functools.cache
def op_fields(op: str) -> tuple:
    """Operand fields of instruction `op` in text order, as isa_formats.def
    declares them: dicts of key, kind, ap_slot, role (ROLE_* bits), domain,
    slot, default, max."""
    lib = _load()
    if op not in tables().OPCODES:
        raise NeuronSimError(f"unknown instruction {op!r}")
    code, out, info = tables().OPCODES.index(op), [], _FieldInfo()
    for i in range(lib.isa_op_field_count(code)):
        lib.isa_op_field(code, i, ctypes.byref(info))
        out.append({"key": info.key.decode(), "kind": info.kind.decode(), "ap_slot": info.ap_slot,
                    "role": info.role, "domain": info.domain.decode() if info.domain else None,
                    "slot": info.slot, "default": info.dflt, "max": info.max})
    return tuple(out)


@functools.cache
def domain(name: str) -> tuple:
    """The names of an enumeration domain of operand fields ("act", "alu",
    "perf", "semop") in code order."""
    lib = _load()
    n = lib.isa_domain_size(name.encode())
    if not n:
        raise NeuronSimError(f"unknown enumeration domain {name!r}")
    return tuple(lib.isa_domain_name(name.encode(), i).decode() for i in range(n))


def __getattr__(name):
    if name in _Tables.__dataclass_fields__:
        return getattr(tables(), name)
    raise AttributeError(f"module 'neuronsim' has no attribute {name!r}")


def init(target="trn2"):
    """Joins the process's one runtime for `target`, starting it if nobody
    has.  The runtime is shared with everything else in the process that
    uses libneuronsim.so (the torch plugin): a runtime these bindings started
    is restarted for another target while it holds no device memory; one
    started elsewhere, or holding memory, is never closed under its owner."""
    global _target
    lib = _load()
    with _lock:
        running = lib.nsim_target_name()
        running = running.decode() if running else None
        if running == target:
            return
        if running is not None:
            if _target != running or lib.nsim_memory_allocated():
                raise NeuronSimError(
                    f"the process's simulator runtime already runs {running} "
                    f"({'started by another user of libneuronsim.so, e.g. the torch plugin' if _target != running else 'device memory is in use'}); "
                    f"it cannot also run {target}: use target={running!r}, or set "
                    f"NEURON_PLATFORM_TARGET_OVERRIDE={target} before the process starts")
            lib.nsim_close()
        cfg = _Config(target.encode(), -1, 0, 0)
        _check(lib.nsim_init_config(ctypes.byref(cfg)), f"starting the {target} runtime")
        _target = target


def memory_allocated() -> int:
    """Bytes of simulated HBM in live tensors and loaded programs, over the
    whole process's runtime (the torch plugin's tensors included)."""
    return int(_load().nsim_memory_allocated())


def running_target():
    """The target the process's runtime runs, or None when none is started."""
    name = _load().nsim_target_name()
    return name.decode() if name else None


# ---------------------------------------------------------------- dtypes

DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": None, "int32": np.int32, "int16": np.int16,
          "int8": np.int8, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
          "fp8_e4m3": None, "fp8_e4m3fn": None, "fp8_e5m2": None}
# NumPy has no fp8 types: host data is float32, converted by the library with
# the engines' numerics (nsim_convert), or already the device bytes when the
# array is ml_dtypes' type of the same encoding
_FP8_HOST = {"fp8_e4m3": "float8_e4m3", "fp8_e4m3fn": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}
# MX data (four fp8 / fp4 values packed per element) has no value a host type
# could hold: on the host it is the packed words, bound and returned as is
MX_HOST = {"fp8_e4m3_x4": np.uint32, "fp8_e5m2_x4": np.uint32, "fp4_e2m1_x4": np.uint16}


def _convert(dst_dtype, src_dtype, data: bytes, n: int) -> bytes:
    """n elements of src_dtype -> dst_dtype bytes by the library (nsim_convert)."""
    lib, names = _load(), list(tables().DTYPE_SIZES)       # dtype codes from 1, the table's order
    out = ctypes.create_string_buffer(max(n * tables().DTYPE_SIZES[dst_dtype], 1))
    src = ctypes.create_string_buffer(data, max(len(data), 1))
    _check(lib.nsim_convert(names.index(dst_dtype) + 1, out, names.index(src_dtype) + 1, src, n),
           f"converting {src_dtype} to {dst_dtype}")
    return out.raw[:n * tables().DTYPE_SIZES[dst_dtype]]


def _size(dtype):
    """Bytes per element of a dtype NumPy data can be bound as."""
    dtype = str.__str__(dtype)
    if dtype not in DTYPES and dtype not in MX_HOST:
        raise NeuronSimError(f"dtype {dtype!r} is not supported by these bindings ({', '.join([*DTYPES, *MX_HOST])})")
    return tables().DTYPE_SIZES[dtype]


def to_device(arr, dtype: str) -> bytes:
    """Array -> the tensor's bytes in `dtype` (bf16 rounded to nearest even).
    dtype is an ISA name, a str or a str subclass that may hash otherwise
    (the NKI frontend's tensor dtypes): the tables look up its plain value."""
    dtype = str.__str__(dtype)
    _size(dtype)
    a = np.ascontiguousarray(arr)
    if dtype in MX_HOST:
        return a.tobytes()          # the packed words (any host type: the bytes are the data)
    if dtype in _FP8_HOST:
        if a.dtype.name == _FP8_HOST[dtype]:
            return a.view(np.uint8).tobytes()
        return _convert(dtype, "fp32", np.ascontiguousarray(a, dtype=np.float32).tobytes(), a.size)
    if dtype == "bf16":
        u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
        nan = np.isnan(a.astype(np.float32))
        r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        r[nan] = 0x7FC0
        return r.tobytes()
    return np.ascontiguousarray(a, dtype=DTYPES[dtype]).tobytes()


def from_device(buf: bytes, dtype: str, shape) -> np.ndarray:
    """The tensor's bytes -> array (bf16 and fp8 widened exactly to float32;
    MX data as its packed words, MX_HOST); dtype as to_device takes it."""
    dtype = str.__str__(dtype)
    if dtype in MX_HOST:
        return np.frombuffer(buf, dtype=MX_HOST[dtype]).reshape(shape).copy()
    if dtype in _FP8_HOST:
        n = len(buf)
        return np.frombuffer(_convert("fp32", dtype, buf, n), dtype=np.float32).reshape(shape).copy()
    if dtype == "bf16":
        u = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
        return u.view(np.float32).reshape(shape)
    return np.frombuffer(buf, dtype=DTYPES[dtype]).reshape(shape).copy()


# -------------------------------------------------------------------- run

@dataclass
class Result:
    outputs: dict
    stats: dict = field(default_factory=dict)
    cores: list = field(default_factory=list)     # run_multi: each program's stats

    @property
    def latency_us(self):
        return self.stats["total_ps"] / 1e6


def _stats(words):
    out, i, engines = {}, 0, tables().ENGINES
    for name, n in tables().STAT_FIELDS:
        out[name] = words[i] if n == 1 else list(words[i:i + n])
        i += n
    out["engine_busy_ps"] = dict(zip(engines, out["engine_busy_ps"]))
    out["engine_instructions"] = dict(zip(engines, out["engine_instructions"]))
    del out["op_instructions"], out["op_busy_ps"]
    return out


def run(program, inputs: dict, outputs: dict, *, read_back=None, target="trn2", label=None, trace=None,
        summary=None, trace_detail=0, standalone=False) -> Result:
    """Executes `program` (bytes or .nsasm text) on core 0.

    inputs: {tensor name: (array, dtype)} or {name: array} (dtype from the
    array: float32 -> fp32, ...); outputs: {name: (shape, dtype)}.  trace /
    summary: paths written for this execution (a .json trace is Chrome JSON).
    read_back: {input name: (shape, dtype)} of inputs the program writes in
    place, returned among the outputs with their contents after the run.
    standalone: time it as a whole NEFF execution (nki.benchmark, the
    profiler), the runtime's start-up and tear-down included
    (NSIM_EXEC_STANDALONE)."""
    return run_multi([program], inputs, outputs, read_back=read_back, target=target, label=label, trace=trace,
                     summary=summary, trace_detail=trace_detail, standalone=standalone)


def run_multi(programs, inputs: dict, outputs: dict, *, aliases=None, read_back=None, target="trn2", label=None,
              trace=None, summary=None, trace_detail=0, standalone=False) -> Result:
    """Executes programs[i] on core i, all in one simulated timeline
    (nsim_execute_multi): programs 2j and 2j+1 are a paired core (LNC=2),
    and every program sees the same HBM buffers.

    inputs / outputs as for run(): one buffer per name, bound in every
    program under that name; aliases[i] ({program tensor name: buffer name})
    binds program i's tensor to a buffer of another name; read_back as for
    run().  The Result's stats are program 0's; .cores holds each program's."""
    lib = _load()
    for name in read_back or {}:
        if name not in inputs or name in outputs:
            raise NeuronSimError(f"run: read_back names '{name}', which is not an input (or is also an output)")
    init(target)
    programs = [assemble(p) if isinstance(p, str) else p for p in programs]
    aliases = aliases or [{} for _ in programs]
    if len(aliases) != len(programs):
        raise NeuronSimError(f"run_multi: {len(aliases)} alias maps for {len(programs)} programs")
    models, tensors, sets = [], [], []
    profiling = False
    try:
        for i, program in enumerate(programs):
            m = ctypes.c_void_p()
            _check(lib.nsim_load(program, len(program), i, ctypes.byref(m)), f"loading the program on core {i}")
            models.append(m)
        buffers, outs = {}, {}
        for name, spec in inputs.items():
            arr, dtype = spec if isinstance(spec, tuple) else (spec, _dtype_of(spec))
            # bytes: already the tensor's device bytes (e.g. bf16 bits)
            data = bytes(arr) if isinstance(arr, (bytes, bytearray, memoryview)) else to_device(arr, dtype)
            t = ctypes.c_void_p()
            _check(lib.nsim_tensor_allocate(0, max(len(data), 1), name.encode(), ctypes.byref(t)),
                   f"allocating input '{name}'")
            tensors.append(t)
            _check(lib.nsim_tensor_write(t, data, 0, len(data)), f"writing input '{name}'")
            buffers[name] = (t, 0)
            if name in (read_back or {}):
                shape, dtype_ = read_back[name]
                nbytes = int(np.prod(shape)) * _size(dtype_)
                if nbytes > len(data):
                    raise NeuronSimError(f"run: read_back '{name}' {list(shape)} {dtype_} is larger than the input")
                outs[name] = (t, shape, dtype_, nbytes)
        for name, (shape, dtype) in outputs.items():
            nbytes = int(np.prod(shape)) * _size(dtype)
            t = ctypes.c_void_p()
            _check(lib.nsim_tensor_allocate(0, max(nbytes, 1), name.encode(), ctypes.byref(t)),
                   f"allocating output '{name}'")
            tensors.append(t)
            buffers[name] = (t, 1)
            outs[name] = (t, shape, dtype, nbytes)
        for i in range(len(programs)):
            pair = [ctypes.c_void_p(), ctypes.c_void_p()]
            sets.append(pair)
            for s_ in pair:
                _check(lib.nsim_tensor_set_create(ctypes.byref(s_)), "tensor set")
            bound = dict(buffers)
            for pname, bname in aliases[i].items():
                if bname not in buffers:
                    raise NeuronSimError(f"run_multi: program {i} binds '{pname}' to '{bname}', which is neither "
                                         "an input nor an output")
                bound[pname] = buffers[bname]
            for name, (t, kind) in bound.items():
                _check(lib.nsim_tensor_set_add(pair[kind], name.encode(), t), f"binding '{name}'")
        if trace or summary:
            po = _ProfileOptions(str(trace).encode() if trace else None,
                                 str(summary).encode() if summary else None, trace_detail, 0)
            _check(lib.nsim_profile_start_opts(ctypes.byref(po)), "starting the trace")
            profiling = True
        # the arrays written above are real values: a run-time loop's
        # branches may be decided from them even in timing-only mode
        eo = _ExecOptions(label.encode() if label else None, 0,
                          NSIM_EXEC_DATA_CONTROL | (NSIM_EXEC_STANDALONE if standalone else 0))
        n = len(programs)
        st = lib.nsim_execute_multi_ex((ctypes.c_void_p * n)(*models), (ctypes.c_void_p * n)(*[p[0] for p in sets]),
                                       (ctypes.c_void_p * n)(*[p[1] for p in sets]), n, ctypes.byref(eo))
        if profiling:
            profiling = False
            _check(lib.nsim_profile_stop(), "writing the trace")
        _check(st, "executing the program" if n == 1 else "executing the programs")
        per_core = []
        for m in models:
            words = (ctypes.c_uint64 * sum(k for _, k in tables().STAT_FIELDS))()
            _check(lib.nsim_model_stats(m, ctypes.byref(words)), "statistics")
            per_core.append(_stats(list(words)))
        result = {}
        for name, (t, shape, dtype, nbytes) in outs.items():
            buf = ctypes.create_string_buffer(max(nbytes, 1))
            _check(lib.nsim_tensor_read(t, buf, 0, nbytes), f"reading output '{name}'")
            result[name] = from_device(buf.raw[:nbytes], dtype, shape)
        return Result(result, per_core[0], per_core)
    finally:
        if profiling:
            lib.nsim_profile_stop()
        for pair in sets:
            for s_ in pair:
                if s_:
                    lib.nsim_tensor_set_free(s_)
        for t in tensors:
            lib.nsim_tensor_free(t)
        for m in models:
            lib.nsim_unload(m)


def _dtype_of(arr):
    for name, np_t in DTYPES.items():
        if np_t is not None and np.asarray(arr).dtype == np_t:
            return name
    raise NeuronSimError(f"no device dtype for NumPy {np.asarray(arr).dtype}; pass (array, dtype)")
