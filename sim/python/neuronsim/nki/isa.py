"""nki.isa on the simulator: engine instructions by name.  Each accepts the
documented form with a destination (dst=...) and, where NKI had one, the
older form that returns a new tile."""
from __future__ import annotations

from . import language as nl
from .tensor import Tensor, isa_dtype, new_tile
from .tracer import fail


def _ret(dst, out):
    if dst is None:
        return out
    nl._assign(dst, out)
    return dst


def nc_matmul(*args, stationary=None, moving=None, dst=None, accumulate=None, **kw):
    """dst[M, N] (+)= stationary[K, M]^T @ moving[K, N] on TensorE.

    Forms: nc_matmul(dst, stationary, moving) and keywords (dst= given: the
    result goes there; accumulate None follows NKI's accumulation groups --
    the first matmul into a PSUM tile overwrites it, the next ones add, until
    another instruction uses the tile); nc_matmul(stationary, moving) returns
    a new PSUM tile."""
    if len(args) == 3:
        dst, stationary, moving = args
    elif len(args) == 2:
        stationary, moving = args
    elif len(args) == 1:
        stationary = args[0]
    res = nl.matmul(stationary, moving, transpose_x=True)
    if dst is None:
        return res
    nl._place_matmul(res, dst, accumulate=accumulate)
    return dst


def nc_transpose(data=None, dst=None, engine=None, **kw):
    return _ret(dst, nl.transpose(data))


def tensor_tensor(data1=None, data2=None, op=None, dst=None, dtype=None, **kw):
    return _ret(dst, nl._binary(data1, data2, op, dtype))


def tensor_scalar(data=None, op0=None, operand0=None, reverse0=False, op1=None, operand1=None, reverse1=False,
                  dst=None, dtype=None, **kw):
    out = nl._tensor_scalar(data, operand0, nl.op_name(op0), dtype, reverse0)
    if op1 is not None:
        out = nl._tensor_scalar(out, operand1, nl.op_name(op1), dtype, reverse1)
    return _ret(dst, out)


_ACT = {"exp": "exp", "log": "log", "tanh": "tanh", "sigmoid": "sigmoid", "relu": "relu", "sqrt": "sqrt",
        "rsqrt": "rsqrt", "reciprocal": "reciprocal", "square": "square", "gelu": "gelu", "silu": "silu",
        "copy": "identity", "identity": "identity", "abs": "abs", "sin": "sin", "cos": "cos", "erf": "erf",
        "softplus": "softplus", "gelu_apprx_tanh": "gelu_tanh"}


def activation(op=None, data=None, bias=None, scale=1.0, dst=None, dtype=None, **kw):
    name = getattr(op, "__name__", str(op))
    if name not in _ACT:
        fail(f"unsupported activation {op!r}")
    return _ret(dst, nl._activation(_ACT[name], data, dtype, scale, bias))


def tensor_reduce(op=None, data=None, axis=None, dst=None, dtype=None, negate=False, keepdims=False, **kw):
    alu = nl.op_name(op)
    return _ret(dst, nl._reduce(alu, data, axis, dtype, keepdims, negate))


def tensor_copy(src=None, dst=None, dtype=None, engine=None, **kw):
    return _ret(dst, nl.copy(src, dtype=dtype))


def memset(dst=None, value=0.0, shape=None, dtype=None, **kw):
    if dst is None:
        dst = new_tile("sbuf", shape, isa_dtype(dtype), "nisa.memset result")
    nl._memset(dst, value)
    return dst


def dma_copy(dst=None, src=None, **kw):
    if not isinstance(dst, Tensor) or not isinstance(src, Tensor):
        fail("nisa.dma_copy takes dst= and src= tensors")
    nl._dma(dst, src)
    return dst


def iota(expr=None, dtype=None, dst=None, **kw):
    fail("nisa.iota is not supported yet")
