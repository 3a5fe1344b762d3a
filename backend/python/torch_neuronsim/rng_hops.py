"""Random ops in checkpointed regions under torch.compile, on `neuron`.

A region under activation checkpointing (torch.utils.checkpoint, which TRL
and Transformers turn on by default for training) is recomputed in the
backward graph.  AOTAutograd's partitioner keeps a random op there
(dropout, and SDPA, which is tagged random because it may drop out) drawing
the same numbers as in the forward by wrapping it in two higher-order ops:
run_and_save_rng_state (forward: the generator's state, then the op) and
run_with_rng_state (backward: the op under that state).  PyTorch implements
them per device in a fixed table (cuda, cpu, hpu, xpu) and stops with
"Backend not supported for neuron" for any other.

install() adds `neuron` beside them: the state is the device generator's
(torch.neuron.get/set_rng_state of the op's device), as the CUDA entries
use torch.cuda's.  Every other device keeps PyTorch's own implementation.
"""
import operator

import torch
from torch._C import DispatchKey


def _on_neuron(args, kwargs):
    """whether the op computes on a neuron device (its device= or first tensor)"""
    dev = kwargs.get("device")
    if dev is not None:
        return torch.device(dev).type == "neuron"
    return next((a.device.type == "neuron" for a in args if isinstance(a, torch.Tensor)), False)


def _neuron_index(args, kwargs):
    """the neuron device the op runs on: its device= index or its first
    tensor's; None is the current device (an unindexed device="neuron")"""
    dev = kwargs.get("device")
    if dev is not None:
        return torch.device(dev).index
    return next((a.device.index for a in args if isinstance(a, torch.Tensor)), None)


def _save(op, *args, **kwargs):
    idx = _neuron_index(args, kwargs)
    return torch.neuron.get_rng_state(idx), op(*args, **kwargs)


def _replay(rng_state, op, *args, **kwargs):
    idx = _neuron_index(args, kwargs)
    current = torch.neuron.get_rng_state(idx)
    torch.neuron.set_rng_state(rng_state.cpu(), idx)
    try:
        return op(*args, **kwargs)
    finally:
        torch.neuron.set_rng_state(current, idx)


def _route(hop, neuron_impl, skip):
    """hop's device selection, with neuron routed to neuron_impl; `skip` is
    how many leading arguments precede the op's own (the op; the state and
    the op)"""
    from torch._higher_order_ops.utils import registered_hop_fake_fns
    original = hop.py_kernels[DispatchKey.BackendSelect]

    def select(*args, **kwargs):
        if _on_neuron(args[skip:], kwargs):
            return neuron_impl(*args, **kwargs)
        return original(*args, **kwargs)
    select._neuronsim = True
    hop.py_kernels[DispatchKey.BackendSelect] = select
    # the fake and proxy-mode implementations call the original selection by
    # its name in the function that defined them (a shared closure cell)
    users = list(hop.py_kernels.values()) + [registered_hop_fake_fns.get(hop)]
    for fn in users:
        code = getattr(fn, "__code__", None)
        if code is None or not fn.__closure__:
            continue
        for name, cell in zip(code.co_freevars, fn.__closure__):
            if name == "impl_backend_select" and cell.cell_contents is original:
                cell.cell_contents = select
    hop.py_impl(DispatchKey.PrivateUse1)(neuron_impl)
    hop._dispatch_cache.clear()


def install():
    from torch._prims import rng_prims
    for hop, impl, skip in ((rng_prims.run_and_save_rng_state, _save, 1),
                            (rng_prims.run_with_rng_state, _replay, 2)):
        if getattr(hop.py_kernels.get(DispatchKey.BackendSelect), "_neuronsim", False):
            continue
        _route(hop, impl, skip)


# ------------------------------------------------ calls that draw nothing
def _draws_nothing(op, args, kwargs):
    """whether a call of a random-tagged op uses no random numbers: SDPA
    without dropout (the tag is there because it may drop out), dropout
    with p = 0 or outside training"""
    aten = torch.ops.aten
    if op == aten._scaled_dot_product_fused_attention_overrideable.default:
        p = args[4] if len(args) > 4 else kwargs.get("dropout_p", 0.0)
        return isinstance(p, (int, float)) and p == 0
    if op == aten.native_dropout.default:
        p = args[1] if len(args) > 1 else kwargs.get("p")
        train = args[2] if len(args) > 2 else kwargs.get("train")
        return (isinstance(p, (int, float)) and p == 0) or train is False
    return False


def unwrap_calls_that_draw_nothing(gm):
    """run_and_save_rng_state(op, ...) / run_with_rng_state(state, op, ...)
    around a call that draws no random number (an SDPA without dropout under
    activation checkpointing) become the plain call: its result does not
    depend on the generator, so nothing needs saving or replaying.  The
    forward's saved state becomes an empty host tensor (a graph constant),
    which the backward ignores.  Without the wrappers the call stays in the
    graph's linked program: the saved state is a host tensor, which would
    split it.  Returns how many calls were unwrapped."""
    from torch._prims import rng_prims
    save, replay = rng_prims.run_and_save_rng_state, rng_prims.run_with_rng_state
    changed = 0
    graph = gm.graph
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target not in (save, replay):
            continue
        skip = 1 if n.target is save else 2
        op, args = n.args[skip - 1], tuple(n.args[skip:])
        if not _draws_nothing(op, args, n.kwargs):
            continue
        with graph.inserting_before(n):
            call = graph.call_function(op, args, dict(n.kwargs))
            call.meta = dict(n.meta)
            if n.target is replay:
                n.replace_all_uses_with(call)
            else:
                call.meta["val"] = n.meta["val"][1] if "val" in n.meta else None
                state = graph.call_function(torch.ops.aten.empty.memory_format, ([0],),
                                            {"dtype": torch.uint8, "device": torch.device("cpu")})
                if "val" in n.meta:
                    state.meta["val"] = n.meta["val"][0]
                for user in list(n.users):
                    if user.op == "call_function" and user.target is operator.getitem:
                        user.replace_all_uses_with(state if user.args[1] == 0 else call)
                        graph.erase_node(user)
        graph.erase_node(n)
        changed += 1
    if changed:
        graph.lint()
        gm.recompile()
    return changed
