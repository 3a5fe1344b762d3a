"""nki.typing (neuronxcc.nki.typing): the annotations published kernels put
on their arguments, `def kernel(a: nt.tensor[shape, dtype], ...)` and
`nt.mutable_tensor` for arguments a kernel writes.  Tracing reads shapes and
dtypes from the arguments themselves, so an annotation records what it says
and changes nothing."""
from __future__ import annotations


class _Annotation:
    def __init__(self, kind, args=()):
        self.kind, self.args = kind, args

    def __getitem__(self, args):
        return _Annotation(self.kind, args if isinstance(args, tuple) else (args,))

    def __repr__(self):
        return f"nki.typing.{self.kind}[{', '.join(map(repr, self.args))}]" if self.args else f"nki.typing.{self.kind}"


tensor = _Annotation("tensor")
mutable_tensor = _Annotation("mutable_tensor")
scalar = _Annotation("scalar")

__all__ = ["tensor", "mutable_tensor", "scalar"]
