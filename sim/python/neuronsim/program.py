"""A program as the C decoder sees it: `decode(text_or_bytes)` assembles
.nsasm text (or loads .nsp bytes) with libneuronsim.so and returns its
instructions engine by engine, each operand named by the field the ISA's
format table (isa/isa_formats.def) gives it, with its read/write role.

Nothing here parses instruction syntax: the assembler and loader do, and the
structs below mirror include/neuronsim/isa.h (their sizes are checked
against the library's at first use).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

from . import (ROLE_READ, ROLE_READ_IF_ACCUMULATE, ROLE_WRITE, NeuronSimError, _Diag, _load, domain, op_fields,
               tables)

_MAX_DIMS, _MAX_AP, _MAX_NAME, _MAX_RANK, _QUADRANT = 4, 5, 63, 8, 32   # isa.h limits (layouts are size-checked)


class _Ap(ctypes.Structure):
    _fields_ = [("space", ctypes.c_uint8), ("dtype", ctypes.c_uint8), ("start", ctypes.c_uint8),
                ("ndims", ctypes.c_uint8), ("nparts", ctypes.c_uint32), ("tensor", ctypes.c_uint32),
                ("pstride", ctypes.c_int64), ("offset", ctypes.c_uint64),
                ("stride", ctypes.c_int32 * _MAX_DIMS), ("size", ctypes.c_uint32 * _MAX_DIMS)]


class _Imm(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint8), ("bits", ctypes.c_uint32)]


class _Instr(ctypes.Structure):
    _fields_ = [("opcode", ctypes.c_uint8), ("ap_mask", ctypes.c_uint8), ("e", ctypes.c_uint8 * 2),
                ("flags", ctypes.c_uint16), ("nivec", ctypes.c_uint8), ("pad_", ctypes.c_uint8),
                ("u", ctypes.c_uint32 * 4), ("imm", _Imm * 3), ("ivec", ctypes.c_int32 * _MAX_DIMS),
                ("ap", _Ap * _MAX_AP), ("pmap", ctypes.c_uint8 * _QUADRANT)]


class _Tensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * (_MAX_NAME + 1)), ("dtype", ctypes.c_uint8), ("kind", ctypes.c_uint8),
                ("rank", ctypes.c_uint8), ("shape", ctypes.c_uint64 * _MAX_RANK), ("offset", ctypes.c_uint64)]


class _DmaDesc(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * (_MAX_NAME + 1)), ("mode", ctypes.c_uint8), ("oob_skip", ctypes.c_uint8),
                ("dst", _Ap),
                ("src", _Ap), ("index", _Ap)]


def _program_struct(engines):
    class _Program(ctypes.Structure):
        _fields_ = [("target", ctypes.c_uint8), ("num_semaphores", ctypes.c_uint32),
                    ("scratch_bytes", ctypes.c_uint64), ("tensors", ctypes.POINTER(_Tensor)),
                    ("n_tensors", ctypes.c_uint32), ("cap_tensors", ctypes.c_uint32),
                    ("consts", ctypes.c_void_p), ("consts_size", ctypes.c_uint64), ("cap_consts", ctypes.c_uint64),
                    ("dma", ctypes.POINTER(_DmaDesc)), ("n_dma", ctypes.c_uint32), ("cap_dma", ctypes.c_uint32),
                    ("stream", ctypes.POINTER(_Instr) * engines), ("n_instr", ctypes.c_uint32 * engines),
                    ("cap_instr", ctypes.c_uint32 * engines)]
    return _Program


@dataclass(frozen=True)
class Ap:
    """An access pattern: `space` ("sbuf", "psum", "hbm"), partitions
    [start, start + nparts), byte `offset`, free dims (stride, size) in
    elements of `dtype`."""
    space: str
    dtype: str
    start: int
    nparts: int
    offset: int
    dims: tuple
    tensor: int = 0

    def byte_range(self, esize):
        """[lo, hi) bytes inside each partition the pattern touches."""
        lo = hi = 0
        for stride, size in self.dims:
            ext = stride * (size - 1)
            lo, hi = lo + min(0, ext), hi + max(0, ext)
        return self.offset + lo * esize, self.offset + (hi + 1) * esize


@dataclass(frozen=True)
class Operand:
    key: str            # the format's keyword: "dst", "moving", ...
    ap: Ap
    reads: bool
    writes: bool


@dataclass
class Instr:
    engine: str
    index: int
    op: str
    line: int                                 # .nsasm line (0 for a loaded binary)
    operands: list = field(default_factory=list)
    values: dict = field(default_factory=dict)   # non-operand fields: sem, value, cond, desc, ...


@dataclass
class Program:
    target: str
    streams: dict                             # engine -> [Instr]
    dma: list                                 # [(name, mode, {"dst": Ap, "src": Ap, "index": Ap})]


_checked = False


def _lib():
    global _checked
    lib = _load()
    if not _checked:
        vp = ctypes.c_void_p
        lib.isa_asm_lines.restype = ctypes.c_int
        lib.isa_asm_lines.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(vp),
                                      ctypes.POINTER(ctypes.POINTER(ctypes.c_int)), ctypes.POINTER(_Diag)]
        lib.isa_program_load.restype = ctypes.c_int
        lib.isa_program_load.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(vp), ctypes.POINTER(_Diag)]
        for cname, pyt in (("isa_ap", _Ap), ("isa_imm", _Imm), ("isa_instr", _Instr), ("isa_tensor", _Tensor),
                           ("isa_dma_desc", _DmaDesc), ("isa_program", _program_struct(len(tables().ENGINES)))):
            if lib.nsim_struct_size(cname.encode()) != ctypes.sizeof(pyt):
                raise NeuronSimError(f"libneuronsim.so's {cname} layout differs from neuronsim.program's (rebuild)")
        _checked = True
    return lib


def _ap(a):
    t = tables()
    dt = tuple(t.DTYPE_SIZES)                           # isa dtype index 1.. in table order
    return Ap(t.SPACES[a.space], dt[a.dtype - 1] if 0 < a.dtype <= len(dt) else "invalid", a.start, a.nparts,
              a.offset, tuple((a.stride[k], a.size[k]) for k in range(min(a.ndims, _MAX_DIMS))), a.tensor)


def _enum_name(dom, index):
    """An enumerated field holds its domain index (isa_enum_from_name)."""
    names = domain(dom)
    return names[index] if index < len(names) else f"<{index}>"


def _instr(engine, index, raw, line):
    t = tables()
    op = t.OPCODES[raw.opcode]
    ins = Instr(engine, index, op, line)
    accumulate = False
    for f in op_fields(op):
        if f["kind"] == "flag":
            ins.values[f["key"]] = bool(raw.flags & f["default"])
            if f["key"] == "accumulate":
                accumulate = ins.values[f["key"]]
    for f in op_fields(op):
        kind, slot = f["kind"], f["ap_slot"]
        if slot >= 0 and raw.ap_mask & (1 << slot):
            role = f["role"]
            reads = bool(role & ROLE_READ) or bool(role & ROLE_READ_IF_ACCUMULATE and accumulate)
            ins.operands.append(Operand(f["key"], _ap(raw.ap[slot]), reads, bool(role & ROLE_WRITE)))
        elif kind == "enum":
            ins.values[f["key"]] = _enum_name(f["domain"], raw.e[f["slot"]])
        elif kind in ("u32", "sem", "desc"):
            ins.values[f["key"]] = raw.u[f["slot"]]
        elif kind == "pmap":
            ins.values[f["key"]] = list(raw.pmap)
    return ins


def decode(program) -> Program:
    """.nsasm text (assembled and validated) or .nsp bytes (loaded and
    validated) -> Program; NeuronSimError names what was wrong."""
    lib = _lib()
    prog, diag, lines = ctypes.c_void_p(), _Diag(), ctypes.POINTER(ctypes.c_int)()
    if isinstance(program, str):
        raw = program.encode()
        st = lib.isa_asm_lines(raw, len(raw), ctypes.byref(prog), ctypes.byref(lines), ctypes.byref(diag))
        what = "assembling"
    else:
        raw = bytes(program)
        st = lib.isa_program_load(raw, len(raw), ctypes.byref(prog), ctypes.byref(diag))
        what = "loading"
    if st:
        raise NeuronSimError(f"{what}: {diag.msg.decode()}")
    try:
        engines = tables().ENGINES
        p = ctypes.cast(prog, ctypes.POINTER(_program_struct(len(engines)))).contents
        streams, k = {}, 0
        for e, name in enumerate(engines):
            out = []
            for i in range(p.n_instr[e]):
                out.append(_instr(name, i, p.stream[e][i], lines[k] if lines else 0))
                k += 1
            if out:
                streams[name] = out
        modes = [lib.isa_table_entry(lib.isa_table_from_name(b"dma_modes"), m).decode()
                 for m in range(lib.isa_table_size(lib.isa_table_from_name(b"dma_modes")))]
        dma = [(d.name.decode(), modes[d.mode], {"dst": _ap(d.dst), "src": _ap(d.src), "index": _ap(d.index)})
               for d in (p.dma[i] for i in range(p.n_dma))]
        return Program(tables().TARGETS[p.target - 1], streams, dma)
    finally:
        lib.isa_program_free(prog)
        if lines:
            lib.nsim_buffer_free(ctypes.cast(lines, ctypes.c_void_p))
