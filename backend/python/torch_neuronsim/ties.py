"""Keeping shared (tied) parameters shared when a module moves to `neuron`.

torch.nn.Module._apply keeps a parameter object (and so its sharing between
modules, e.g. a language model's tied input embedding and output head) only
when the converted tensor's type may be shallow-copied into it, which
PyTorch allows for its built-in dense backends but not for a PrivateUse1
device.  Converting to `neuron` therefore makes a new Parameter per module,
and a tied weight silently becomes two weights that train apart (real
torch-xla devices have the same problem; Transformers' Trainer re-ties
after moving to XLA).  The wrapper installed here records which modules
shared a parameter or buffer before the conversion and, where the
conversion split them, puts the first converted tensor back in every
place.  Conversions that keep parameter objects (CPU, CUDA) leave nothing
to re-tie, so they behave exactly as before."""
import threading

import torch

_state = threading.local()


def _shared_slots(module):
    """[(slots, was)] for every parameter / buffer held in more than one place"""
    seen = {}
    for _, m in module.named_modules(remove_duplicate=False):
        for kind in ("_parameters", "_buffers"):
            for name, t in getattr(m, kind).items():
                if t is not None:
                    seen.setdefault(id(t), (t, []))[1].append((m, kind, name))
    return [(slots, t) for t, slots in seen.values() if len(slots) > 1]


def _retie(shared):
    for slots, was in shared:
        m0, kind0, name0 = slots[0]
        first = getattr(m0, kind0)[name0]
        if first is was:
            continue                     # not converted apart: nothing to do
        for m, kind, name in slots[1:]:
            if getattr(m, kind)[name] is not first:
                getattr(m, kind)[name] = first


def install():
    if getattr(torch.nn.Module._apply, "_neuron_keeps_ties", False):
        return
    original = torch.nn.Module._apply

    def _apply(self, fn, *args, **kwargs):
        if getattr(_state, "active", False):         # a submodule of the call being handled
            return original(self, fn, *args, **kwargs)
        shared = _shared_slots(self)
        _state.active = True
        try:
            out = original(self, fn, *args, **kwargs)
        finally:
            _state.active = False
        if shared:
            _retie(shared)
        return out

    _apply._neuron_keeps_ties = True
    _apply.__wrapped__ = original
    _apply.__doc__ = original.__doc__
    torch.nn.Module._apply = _apply
