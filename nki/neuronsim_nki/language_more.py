"""The rest of the SDK's nki.language (nki/api/nki/language): bitwise and
logical operations and shifts (the engines' ALU operations of those names),
var / all reductions, softmax and rms_norm (compositions of the engines'
instructions, as the SDK's own nki-stdlib composes them), expand_dims, the
buffer predicates, MemoryRegion / NkiTensor, and `with nl.no_reorder():`.

What this module does not provide is refused by name (language.__getattr__):
the random-number functions (rand, random_seed, dropout) need device
state the simulator does not have; abs_max / abs_min are NeuronCore-v4 ALU operations it lacks;
gather_flattened, prelu and average are not supported yet."""
from __future__ import annotations

import contextlib
import enum

from . import tracer
from .dtype_keys import SIZES
from .tensor import NKI_NAMES, Tensor
from .tracer import fail

# documented nki.language names the simulator refuses, and why
DECLINED = {
    "rand": "the simulator has no device random-number generator",
    "random_seed": "the simulator has no device random-number generator",
    "dropout": "the simulator has no device random-number generator",
    "abs_max": "a NeuronCore-v4 ALU operation the simulator's ISA does not have",
    "abs_min": "a NeuronCore-v4 ALU operation the simulator's ISA does not have",
    "prelu": "an activation function the simulator's ISA does not have",
}

INT_DTYPES = ("int8", "int16", "int32", "uint8", "uint16", "uint32")


def _nl():
    from . import language
    return language


def _ints(what, *xs):
    """bitwise operations and shifts take integer tiles (SDK: "Inputs must
    be integer typed"); numbers are fine"""
    for x in xs:
        if isinstance(x, Tensor) and x.dtype not in INT_DTYPES:
            fail(f"nl.{what} takes integer tiles, not {NKI_NAMES.get(x.dtype, x.dtype)}")
        if not isinstance(x, Tensor) and isinstance(x, float) and not x.is_integer():
            fail(f"nl.{what}: {x!r} is not an integer")


def _bitwise(alu, what):
    def f(x, y, dtype=None, **kw):
        _ints(what, x, y)
        return _nl()._binary(x, y, alu, dtype)
    f.__name__ = what
    f.__doc__ = f"x {alu} y elementwise on integer tiles (the ALU's {alu}; SDK nl.{what})."
    return f


bitwise_and = _bitwise("bitwise_and", "bitwise_and")
bitwise_or = _bitwise("bitwise_or", "bitwise_or")
bitwise_xor = _bitwise("bitwise_xor", "bitwise_xor")
left_shift = _bitwise("shift_left", "left_shift")
right_shift = _bitwise("shift_right", "right_shift")


def invert(x, dtype=None, **kw):
    """Bitwise NOT of an integer tile: XOR with all ones (SDK nl.invert)."""
    _ints("invert", x)
    if not isinstance(x, Tensor):
        fail("nl.invert takes a tile")
    ones = -1 if str.__str__(x.dtype).startswith("int") else (1 << 8 * SIZES[x.dtype]) - 1
    return _nl()._binary(x, ones, "bitwise_xor", dtype)


def _logical(alu):
    def f(x, y, dtype=None, **kw):
        return _nl()._binary(x, y, alu, dtype)
    f.__name__ = alu
    f.__doc__ = f"1 where x {alu[8:]} y holds of their truth values (nonzero), else 0 (the ALU's {alu})."
    return f


logical_and = _logical("logical_and")
logical_or = _logical("logical_or")
logical_xor = _logical("logical_xor")


def logical_not(x, dtype=None, **kw):
    """1 where x is 0, else 0: the SDK's "XOR with 1" of boolean-like
    (0 / 1) tiles, taken as a logical XOR so that any nonzero is true."""
    if not isinstance(x, Tensor):
        fail("nl.logical_not takes a tile")
    return _nl()._binary(x, 1, "logical_xor", dtype)


def _free_axes(what, x, axis):
    axes = tuple(a % len(x.shape) for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    if 0 in axes:
        fail(f"nl.{what}: axis must be free dimensions, not the partition dimension (0)")
    return axes


def var(x, axis, dtype=None, keepdims=False, **kw):
    """Variance along free axes, NumPy's (the mean of squared deviations
    from the mean), computed in fp32; the result keeps the reduced axes as
    1, as the SDK's does whatever keepdims says."""
    nl = _nl()
    x = nl._operand(x)
    axes = _free_axes("var", x, axis)
    m = nl.mean(x, axes, dtype="fp32", keepdims=True)
    d = nl.subtract(x, m.broadcast_to(x.shape) if m.shape != x.shape else m, dtype="fp32")
    return nl.mean(nl.multiply(d, d, dtype="fp32"), axes, dtype=dtype or x.dtype, keepdims=True)


def all(x, axis, dtype=None, **kw):  # noqa: A001
    """1 where every element along the free axes is nonzero, else 0 (the
    minimum of x != 0)."""
    nl = _nl()
    x = nl._operand(x)
    axes = _free_axes("all", x, axis)
    return nl.min(nl.not_equal(x, 0, dtype="fp32"), axes, dtype=dtype or x.dtype, keepdims=True)


def softmax(x, axis=-1, dtype=None, **kw):
    """exp(x - max) / sum(exp(x - max)) along free axes, in fp32: the row's
    maximum as the exponent's bias, the sum taken by the same ScalarE
    instruction (its reduce), one reciprocal and a multiply."""
    nl = _nl()
    x = nl._operand(x)
    axes = _free_axes("softmax", x, axis)
    if len(x.shape) != 2 or axes != (1,):
        fail(f"nl.softmax of a {list(x.shape)} tile along axes {list(axes)}: a [P, F] tile along axis 1 is "
             "supported by the simulator")
    neg_max = nl._reduce("max", x, 1, "fp32", keepdims=True, negate=True)
    total = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    e = nl._activation("exp", x, "fp32", bias=neg_max, reduce_op=nl.add, reduce_res=total)
    return nl.multiply(e, nl.reciprocal(total), dtype=dtype or x.dtype)


def rms_norm(x, w, axis, n, epsilon=1e-06, dtype=None, compute_dtype=None, **kw):
    """x / sqrt(sum(x^2) / n + epsilon) * w along axis (SDK nl.rms_norm),
    computed in compute_dtype (fp32 unless given)."""
    nl = _nl()
    x, w = nl._operand(x), nl._operand(w)
    axes = _free_axes("rms_norm", x, axis)
    if len(x.shape) != 2 or axes != (1,):
        fail(f"nl.rms_norm of a {list(x.shape)} tile along axes {list(axes)}: a [P, F] tile along axis 1 is "
             "supported by the simulator")
    cdt = compute_dtype or "fp32"
    ssq = nl.sum(nl.multiply(x, x, dtype=cdt), 1, dtype="fp32", keepdims=True)
    r = nl.rsqrt(nl.add(nl.multiply(ssq, 1.0 / n), float(epsilon)))
    y = nl.multiply(x, r, dtype=cdt)
    if isinstance(w, Tensor) and w.shape != y.shape and w.shape[0] == 1 and y.shape[0] != 1:
        w = w.broadcast_to(y.shape)
    return nl.multiply(y, w, dtype=dtype or x.dtype)


def expand_dims(x, axis, **kw):
    """A view of x with a unit axis inserted at `axis` (of the result's
    axes); the partition axis stays first."""
    if not isinstance(x, Tensor):
        fail("nl.expand_dims takes a tile")
    nd = len(x.shape) + 1
    a = axis % nd if isinstance(axis, int) and -nd <= axis < nd else None
    if a is None or a == 0:
        fail(f"nl.expand_dims(axis={axis!r}) of a {list(x.shape)} tile: an axis 1..{nd - 1} (the partition axis "
             "stays first)")
    shape = list(x.shape)
    shape.insert(a, 1)
    return x.reshape(tuple(shape))


class MemoryRegion(str, enum.Enum):
    """The SDK's memory region constants; each equals the nl buffer of its
    name (nl.sbuf == MemoryRegion.sbuf)."""
    sbuf = "sbuf"
    psum = "psum"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"

    def __str__(self):
        return self.value


def _buffer_name(buffer):
    return getattr(buffer, "value", buffer)


def is_hbm(buffer):
    """Whether buffer is any HBM type."""
    return _buffer_name(buffer) in ("hbm", "shared_hbm", "private_hbm")


def is_psum(buffer):
    return _buffer_name(buffer) == "psum"


def is_sbuf(buffer):
    return _buffer_name(buffer) == "sbuf"


def is_on_chip(buffer):
    """Whether buffer is SBUF or PSUM."""
    return _buffer_name(buffer) in ("sbuf", "psum")


NkiTensor = Tensor

bypass = "bypass"       # the ALU's pass-through operation, as an op= argument


@contextlib.contextmanager
def no_reorder():
    """`with nl.no_reorder():` -- the instructions traced in the block keep
    their program order on their engines, as a loop under
    nki.compiler.no_reorder() does (schedule.py)."""
    t = tracer.current()
    t.no_reorder += 1
    try:
        yield
    finally:
        t.no_reorder -= 1
