"""torch_neuronsim.nki: NKI kernels on the simulated `neuron` device.

The frontend is neuronsim_nki (nki/ in the tree, no torch needed); this
module is its torch calling convention.  Importing it registers that
convention: a kernel called with `neuron` tensors runs on their device like a
native op (charged to the current stream, named nki::<kernel> in traces and
stats); with NumPy arrays it returns NumPy arrays, as neuronsim_nki does.
Everything neuronsim_nki exports is re-exported here, and
torch_neuronsim.nki.language / .isa are its modules.
"""
import collections
import sys

import torch

import neuronsim
import neuronsim_nki as _nki
from neuronsim_nki.dtype_keys import IsaKeyed

# torch dtypes a kernel argument may have -> ISA dtype names
_TORCH_TO_ISA = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.int32: "int32",
                 torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8", torch.uint16: "uint16",
                 torch.uint32: "uint32"}
_ISA_TO_TORCH = IsaKeyed({v: k for k, v in _TORCH_TO_ISA.items()})


_BLOBS = collections.OrderedDict()   # program text -> its assembled bytes (a CPU uint8 tensor)
_BLOB_LIMIT = 64


def _assembled(program):
    """the program's binary, assembled once per program text (a kernel's
    traced program is reused call to call: Kernel's trace cache)"""
    blob = _BLOBS.get(program)
    if blob is None:
        blob = _BLOBS[program] = torch.frombuffer(bytearray(_nki.assemble(program)), dtype=torch.uint8)
        if len(_BLOBS) > _BLOB_LIMIT:
            _BLOBS.popitem(last=False)
    else:
        _BLOBS.move_to_end(program)
    return blob


def _no_data(t):
    return t.device.type == "meta" or torch._subclasses.fake_tensor.is_fake(t)


class TorchConvention(_nki.Convention):
    """`neuron` tensors in, `neuron` tensors out (torch.ops.neuronsim.run_program)."""

    def accepts(self, value):
        return isinstance(value, torch.Tensor)

    def isa_dtype(self, value):
        return _TORCH_TO_ISA.get(value.dtype)

    def host_array(self, value):
        t = value.detach().cpu()
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()

    def device_bytes(self, value, dtype):
        t = value.detach()
        if dtype != "bf16" or t.dtype != torch.bfloat16 or t.device.type != "cpu":
            return None
        return t.contiguous().view(torch.int16).numpy().tobytes()

    def run(self, kernel, program, ins, outs, multi):
        if any(_no_data(a) for _, a in ins):
            # fake / meta tensors (torch.compile's tracing, a custom op's fake
            # implementation): the traced outputs' shapes and dtypes, no run
            dev = ins[0][1].device
            res = [torch.empty(o.shape, dtype=_ISA_TO_TORCH[o.dtype], device=dev) for o in outs]
            return _nki.shaped(res, multi)
        devices = {a.device.type for _, a in ins}
        if devices == {"cpu"}:
            # CPU tensors (bf16 included, which NumPy has not): simulated like
            # NumPy arrays, results back as CPU tensors of the output dtypes
            values, _ = kernel.run_traced(program, ins, outs, multi is not False)
            values = values if multi is not False else (values,)
            res = [torch.from_numpy(v).to(_ISA_TO_TORCH[o.dtype]) for v, o in zip(values, outs)]
            # an argument the kernel returns was written in place: so is the
            # caller's tensor, which is the result
            args = {t.name: a for t, a in ins}
            for k_, (v, o) in enumerate(zip(res, outs)):
                if o.name in args:
                    args[o.name].copy_(v)
                    res[k_] = args[o.name]
            return _nki.shaped(res, multi)
        if devices != {"neuron"} and ins:
            raise _nki.NKIError(f"{kernel.func.__name__}: arguments on {sorted(devices)}; NKI kernels run on "
                                "`neuron` tensors, CPU tensors or NumPy arrays, one kind per call")
        dev = ins[0][1].device if ins else torch.device("neuron")
        # an argument the kernel returns was written in place: the result is
        # that tensor (its contents copied back when it was not contiguous)
        args = {t.name: a for t, a in ins}
        made = [o for o in outs if o.name not in args]
        results = {o.name: torch.empty(o.shape, dtype=_ISA_TO_TORCH[o.dtype], device=dev) for o in made}
        flat = [a.contiguous() for _, a in ins]
        blob = _assembled(program)
        torch.ops.neuronsim.run_program(blob, f"nki::{kernel.func.__name__}", [t.name for t, _ in ins], flat,
                                        [o.name for o in made], [results[o.name] for o in made])
        for (t, a), c in zip(ins, flat):
            if c is not a and any(o.name == t.name for o in outs):
                a.copy_(c)
        res = [results[o.name] if o.name in results else args[o.name] for o in outs]
        return _nki.shaped(res, multi)


_nki.register_convention(TorchConvention())


def nki_op(name, mutates_args=(), device_types=None, schema=None):
    """@nki_op("mylib::my_op", mutates_args={}): the decorated function --
    which calls NKI kernels on its tensors -- becomes the PyTorch custom
    operator `name` (torch.library.custom_op; explicit type annotations
    give its schema), callable as a function and as torch.ops.mylib.my_op,
    in eager mode and under torch.compile.  For training, give it a
    backward with .register_autograd(backward, setup_context=...), as
    torch.library documents (the SDK's pytorch-native-overview.rst).  Its
    fake implementation, which torch.compile traces with, is the function
    itself (kernels called with fake tensors trace and return outputs of the
    traced shapes); register_fake replaces it.  Kernels compile once per
    input shapes, dtypes and other argument values (the trace cache)."""
    def wrap(fn):
        op = torch.library.custom_op(name, fn, mutates_args=mutates_args if mutates_args is not None else (),
                                     device_types=device_types, schema=schema)
        # the fake (meta) implementation by default: the function itself,
        # whose kernels, given fake tensors, trace and return their outputs'
        # shapes without running; .register_fake replaces it
        if getattr(op, "_abstract_fn", False) is None:
            op._abstract_fn = fn
        return op
    return wrap

globals().update({name: getattr(_nki, name) for name in _nki.__all__})
__all__ = list(_nki.__all__) + ["TorchConvention", "nki_op"]
sys.modules[__name__ + ".language"] = _nki.language
sys.modules[__name__ + ".isa"] = _nki.isa
