"""nki.language's control surface on the simulator: loop ranges
(affine/sequential/static, fori_loop, while_loop; nl.dynamic_range and
`while reg:` on registers read at run time are runtime_loops.py's), sequencer registers,
the SPMD launch grid (program_id, num_programs, program_ndim, spmd_dim)
and float limits (finfo).  These loops run while tracing: their bounds and
conditions must be known then.
Re-exported by language.py."""
from __future__ import annotations

import sys

from . import tracer
from .tensor import isa_dtype
from .tracer import fail


def fori_loop(lower, upper, body_fun, step=1, unroll=False, **kw):
    """nl.fori_loop(lower, upper, body_fun, step=1): body_fun(i) for i in
    range(lower, upper, step).  With bounds known while tracing (Python
    ints) the body is traced once per iteration, the instructions the device
    loop runs; with a bound in a register read at run time
    (nisa.register_load) it is a run-time loop (runtime_loops.py), i its
    index as an NkiScalar; an NkiScalar bound is refused by name."""
    if any(isinstance(v, VirtualRegister) and v.reg is not None for v in (lower, upper)):
        from .runtime_loops import DynamicRange
        if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
            fail(f"nl.fori_loop step={step!r}: a positive int")
        for i in DynamicRange(lower, upper, step):
            body_fun(i)
        return
    for what, v in (("lower", lower), ("upper", upper)):
        if isinstance(v, bool) or not isinstance(v, int):
            fail(f"nl.fori_loop {what}={v!r}: ints, or registers loaded with nisa.register_load (an "
                 "NkiScalar, computed at run time, is not supported as a bound)")
    if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
        fail(f"nl.fori_loop step={step!r}: a positive int")
    for i in range(lower, upper, step):
        body_fun(i)


class VirtualRegister:
    """A sequencer register (nisa.register_alloc).  While its value is known
    while tracing (an int, register_move of one) loops (nl.fori_loop,
    nl.while_loop) and index arithmetic read it as an int; once
    nisa.register_load reads it from device memory it is a run-time
    register (`reg`, the same sequencer register on every engine), which
    nl.dynamic_range takes as a bound and `while reg:` tests on the device
    (runtime_loops.py)."""

    def __init__(self, value=0):
        self.value = int(value)
        self.reg = None

    def __int__(self):
        if self.reg is not None:
            fail("a register loaded from device memory (nisa.register_load) has no value while tracing: use it "
                 "as an nl.dynamic_range bound or in `while reg:`")
        return self.value

    __index__ = __int__

    def _compare(self, other, eq):
        if self.reg is not None or getattr(other, "reg", None) is not None:
            fail("comparing a register loaded from device memory: its value is not known while tracing "
                 "(`while reg:` tests it on the device)")
        same = self.value == getattr(other, "value", other)
        return same if eq else not same

    def __eq__(self, other):
        return self._compare(other, True)

    def __ne__(self, other):
        return self._compare(other, False)

    __hash__ = object.__hash__

    def __bool__(self):
        if self.reg is None:
            return self.value != 0
        from .runtime_loops import while_test
        return while_test(self)

    def __repr__(self):
        return f"VirtualRegister({self.value})" if self.reg is None else f"VirtualRegister(reg={self.reg})"


WHILE_LOOP_LIMIT = 1 << 20      # iterations a traced while_loop may run


def _static_int(v):
    """v as a trace-time int (an int, or a register holding one), else None."""
    if isinstance(v, VirtualRegister) and v.reg is not None:
        return None
    v = getattr(v, "value", v)
    return None if isinstance(v, bool) or not isinstance(v, int) else v


def while_loop(init, body_fun, **kw):
    """nl.while_loop(init, body_fun): r = init; while r != 0: r = body_fun(r).
    A condition known while tracing (an int, or a register set from one
    with nisa.register_alloc / register_move) unrolls: the body is traced
    once per iteration, as the device loop runs it.  A condition read from
    device memory (nisa.register_load) makes a run-time loop
    (runtime_loops.run_while)."""
    if isinstance(init, VirtualRegister) and init.reg is not None:
        from .runtime_loops import run_while
        return run_while(init, body_fun)
    r = _static_int(init)
    if r is None:
        fail(f"nl.while_loop init={init!r}: an int or a register (nisa.register_alloc / register_load)")
    n = 0
    while r != 0:
        n += 1
        if n > WHILE_LOOP_LIMIT:
            fail(f"nl.while_loop ran {WHILE_LOOP_LIMIT} iterations without its condition reaching 0")
        nxt = body_fun(VirtualRegister(r))
        r = _static_int(nxt)
        if r is None:
            fail(f"nl.while_loop body returned {nxt!r}: the next condition must be known while tracing "
                 "(an int or a register holding one)")


class nc:
    """nl.nc(n): the NeuronCores of a logical core an SPMD grid dimension is
    spread over (nl.spmd_dim(size, nl.nc(2)))."""

    def __init__(self, n):
        self.n = int(n)


class _SpmdDim(int):
    """A launch-grid dimension made by nl.spmd_dim: an int (its instance
    count) that remembers how many cores it is spread over."""
    cores = 1


def spmd_dim(size, cores=None):
    """A launch-grid dimension of `size` instances on each of `cores`
    (nl.nc(n)): size * n instances, core k taking those whose index along
    the dimension is k modulo n.  With nl.nc(2) on NeuronCore-v3 and later
    the two cores of an LNC=2 pair run their instances concurrently (see
    lnc.py); otherwise the instances run one after another in one program."""
    if cores is not None and not isinstance(cores, nc):
        fail(f"nl.spmd_dim(size, nl.nc(n)): got {cores!r}")
    d = _SpmdDim(int(size) * (cores.n if cores is not None else 1))
    d.cores = cores.n if cores is not None else 1
    return d


class _Loop:
    """One level of the NKI loops being traced: the source line of its
    range call, and how often each declaration site has run in the
    current iteration."""
    __slots__ = ("site", "seen")

    def __init__(self, site):
        self.site, self.seen = site, {}


class _DeviceRange:
    """The iterations of nl.affine_range / nl.sequential_range: a range,
    traced iteration by iteration like any other, that keeps its level on
    the trace's loop stack while it runs.  The NKI compiler traces such a
    loop's body once, so a declaration in it is one declaration whatever the
    iteration (language.ndarray keys nki.compiler placements by it: a
    kernel that bumps a Python address counter in the body gets the same
    addresses every iteration, as on the device).  nl.static_range is a
    plain range: the compiler unrolls it, running the body per iteration."""
    __slots__ = ("r", "site", "ordered")

    def __init__(self, r, site, directives=None):
        self.r, self.site = r, site
        ds = directives if isinstance(directives, (tuple, list)) else (directives,)
        self.ordered = any(getattr(d, "keeps_order", False) for d in ds)

    def __len__(self):
        return len(self.r)

    def __getitem__(self, k):
        return self.r[k]

    def __repr__(self):
        return repr(self.r)

    def __iter__(self):
        t = tracer._current
        if t is None:
            yield from self.r
            return
        level = _Loop(self.site)
        t.loop_stack.append(level)
        t.no_reorder += self.ordered
        try:
            for i in self.r:
                level.seen.clear()
                yield i
        finally:
            t.loop_stack[:] = [x for x in t.loop_stack if x is not level]
            t.no_reorder -= self.ordered


def _caller_site():
    """(file, line) of the innermost frame outside this package: the
    kernel code that called into the NKI surface."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(tracer._PACKAGE_DIR):
        f = f.f_back
    return (f.f_code.co_filename, f.f_lineno) if f is not None else ("<kernel>", 0)


def affine_range(*args, directives=None, **kw):
    """Iterations may overlap on the hardware (no loop-carried dependency).
    directives: nki.compiler.no_reorder() keeps the body's instructions in
    program order; multi_buffer(n) is a hint (compiler.py)."""
    return _DeviceRange(range(*args), _caller_site(), directives)


def sequential_range(*args, directives=None, **kw):
    return _DeviceRange(range(*args), _caller_site(), directives)


def static_range(*args, **kw):
    return range(*args)


def range_(*args, **kw):
    """nl.range: the NKI compiler's frontend (KLR, NKI/Annotations.lean:
    checkName / rangeType) reads any `<module>.range` as Python's range,
    a static range unrolled at trace time; nki-library's mxfp_load_utils
    loops so."""
    return range(*args)


def declaration_key():
    """What identifies the nl.ndarray call being traced as the NKI compiler
    sees it: its source line under the enclosing device loops' lines and
    its count within the current iteration (a Python loop or helper inside
    the body declares anew each time); None outside device loops."""
    t = tracer.current()
    if not t.loop_stack:
        return None
    site = _caller_site()
    seen = t.loop_stack[-1].seen
    n = seen[site] = seen.get(site, -1) + 1
    return tuple(x.site for x in t.loop_stack), site, n


def program_id(axis=0):
    """This instance's index along `axis` of the SPMD launch grid."""
    t = tracer.current()
    return t.grid_index[axis] if axis < len(t.grid_index) else 0


def num_programs(axes=0, axis=None):
    """Programs of the launch grid along axes (an axis, or a tuple of them:
    their product; None: the whole grid).  `axis=` is the older keyword."""
    t = tracer.current()
    axes = axis if axis is not None else axes
    if axes is None:
        axes = tuple(range(len(t.grid)))
    n = 1
    for a in (axes if isinstance(axes, (tuple, list)) else (axes,)):
        n *= t.grid[a] if a < len(t.grid) else 1
    return n


def program_ndim():
    """The number of dimensions of the SPMD launch grid (0 without one)."""
    t = tracer.current()
    return len(t.grid) if t.grid_explicit else 0


class _FInfo:
    def __init__(self, bits, eps, tiny, mx):
        self.bits, self.eps, self.tiny, self.max, self.min = bits, eps, tiny, mx, -mx
        self.smallest_normal = tiny


_FINFO = {"fp32": _FInfo(32, 2.0 ** -23, 2.0 ** -126, float.fromhex("0x1.fffffep127")),
          "bf16": _FInfo(16, 2.0 ** -7, 2.0 ** -126, float.fromhex("0x1.fep127")),
          "fp16": _FInfo(16, 2.0 ** -10, 2.0 ** -14, 65504.0),
          "fp8_e4m3": _FInfo(8, 2.0 ** -3, 2.0 ** -6, 240.0),
          "fp8_e4m3fn": _FInfo(8, 2.0 ** -3, 2.0 ** -6, 448.0),
          "fp8_e5m2": _FInfo(8, 2.0 ** -2, 2.0 ** -14, 57344.0)}


def finfo(dtype):
    """Machine limits of a float dtype (bits, eps, tiny, max, min), as
    numpy.finfo gives them, bf16 and fp8 included."""
    dt = isa_dtype(dtype)
    if dt not in _FINFO:
        fail(f"nl.finfo({dtype!r}): a float dtype (float32, bfloat16, float16, float8_e4m3, float8_e4m3fn, float8_e5m2)")
    return _FINFO[dt]
