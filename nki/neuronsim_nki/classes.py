"""nl.NKIObject: NKI's user-defined classes (SDK nki-language-guide.rst,
"Class Support"), as the NKI compiler builds them."""
from __future__ import annotations

import dataclasses

from .tracer import fail


class _NKIClass(type):
    """Makes NKIObject classes: see NKIObject."""

    def __call__(cls, *args, **kwargs):
        own = next((c for c in cls.__mro__ if c is not NKIObject and c is not object and "__init__" in c.__dict__),
                   None)
        if own is not None and not _generated_init(own):
            return super().__call__(*args, **kwargs)
        obj = cls.__new__(cls)
        _nki_init(obj, args, kwargs)
        return obj


class NKIObject(metaclass=_NKIClass):
    """The base of NKI classes (SDK nki-language-guide.rst, "Class
    Support"): every class is a data class, with or without @dataclass --
    when the class defines no __init__ of its own, the compiler's is used:
    positional arguments fill the annotated fields in order (base classes'
    first), keywords set any attribute, a field left out takes its class
    default or None; then __post_init__ runs."""


def _generated_init(cls):
    """cls's __init__ is the one @dataclass wrote (NKI compiles the class as
    if it had none)."""
    init = cls.__dict__.get("__init__")
    return getattr(getattr(init, "__code__", None), "co_filename", "") == "<string>" and \
        getattr(cls, "__dataclass_fields__", None) is not None


def _nki_init(obj, args, kwargs):
    fields = []
    for c in reversed(type(obj).__mro__):
        for n in c.__dict__.get("__annotations__", {}):
            if n not in fields:
                fields.append(n)
    if len(args) > len(fields):
        fail(f"{type(obj).__name__}() takes {len(fields)} positional arguments ({', '.join(fields)}), "
             f"{len(args)} given")
    dc = getattr(type(obj), "__dataclass_fields__", {})
    for n, v in zip(fields, args):
        object.__setattr__(obj, n, v)
    for n in fields[len(args):]:
        if n in kwargs:
            continue
        f = dc.get(n)
        if f is not None and f.default_factory is not dataclasses.MISSING:
            v = f.default_factory()
        elif f is not None and f.default is not dataclasses.MISSING:
            v = f.default
        else:
            v = getattr(type(obj), n, None)
        object.__setattr__(obj, n, v)
    for n, v in kwargs.items():
        object.__setattr__(obj, n, v)
    post = getattr(obj, "__post_init__", None)
    if post is not None:
        post()
