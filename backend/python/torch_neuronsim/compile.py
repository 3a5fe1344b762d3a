"""The `neuron` TorchDynamo backend: `torch.compile(model, backend="neuron")`.

Dynamo captures FX graphs; AOTAutograd turns each into functionalized ATen
graphs -- forward and backward when gradients are needed, one inference
graph otherwise -- with the core ATen decompositions for every op the device
has no kernel of its own for.  Each ATen graph becomes a CompiledGraph
(graph.py): its nodes lowered by the kernel generators and linked by the C
graph compiler into one program per segment between host-bound nodes.

Compiled graphs are cached by graph code, input shapes / strides / dtypes,
target and plugin build: in memory, and on disk under
NEURON_SIM_COMPILE_CACHE_DIR (default $XDG_CACHE_HOME/neuronsim/compile, or
~/.cache/...; "off" disables it), so a new process does not compile again;
torch.compiler.save/load_cache_artifacts carry them (compile_cache.py).
Counters: torch_neuronsim.stats()["compile"].  Shapes are static:
`dynamic=True` is refused with the Neuron compiler's message (NCC_EMOD025);
TORCH_LOGS=recompiles explains Dynamo's recompiles as for any backend.

Dynamo finds the backend through the package's `torch_dynamo_backends` entry
point (pyproject.toml), the public registration route.  `torch.compile(model)`
with no backend names Inductor, which has no code generator for the device:
install_default_backend() hands this backend the graphs on neuron tensors
(and Inductor every other graph, unchanged)."""
import itertools

import torch

from . import graph as _graph
from .bounds import narrow_bounded_casts, output_bounds
from .rng_hops import unwrap_calls_that_draw_nothing
from .neuron_dynamo_backend import model_name
from .compile_cache import CACHE as _CACHE
from .compile_cache import clear_memory_cache  # noqa: F401  (part of this module's API)
from .fusion import (fuse_matmul_epilogues, fuse_pointwise, fuse_residual_epilogues, reinplace_input_updates,
                     upload_host_scalars)

_graph_ids = itertools.count()


def _symbolic_input(gm, example_inputs):
    """what to name for a graph with symbolic sizes: the first tensor input
    with one ("input 'x' has shape (s0, 8)"), else a size input; or None"""
    places = [n for n in gm.graph.nodes if n.op == "placeholder"]
    # the traced (fake) values carry the symbolic sizes; the example inputs
    # may be real tensors plus separate size inputs
    values = [n.meta.get("example_value", t) for n, t in zip(places, example_inputs)]
    for n, t in zip(places, values):
        if isinstance(t, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in t.shape):
            return f"input '{n.name}' has shape (" + ", ".join(str(d) for d in t.shape) + ")"
    for n, t in zip(places, values):
        if isinstance(t, torch.SymInt):
            return f"size input '{n.name}' is symbolic"
    return None


# --------------------------------------------------------------- AOTAutograd
def _has_device_kernel(op):
    """a neuron kernel for op, its out= form or its in-place form (structured
    kernels register one of them)"""
    base = op._schema.name
    names = [op.name(), base + ".out", base + "_"]
    if base.endswith("_"):
        names += [base[:-1], base[:-1] + ".out"]
    if op._overloadname not in ("default", ""):
        names += [f"{base}.{op._overloadname}_out", f"{base}_.{op._overloadname}"]
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for n in names:
        try:
            if has(n, "PrivateUse1"):
                return True
        except RuntimeError:
            pass
    return False


_DECOMP = None


def decompositions():
    """core ATen decompositions, except of ops the device has kernels for
    (a fused native kernel beats its decomposition)"""
    global _DECOMP
    if _DECOMP is None:
        from torch._decomp import core_aten_decompositions
        _DECOMP = {op: fn for op, fn in core_aten_decompositions().items()
                   if not (isinstance(op, torch._ops.OpOverload) and _has_device_kernel(op))}
    return _DECOMP


def _compiler(kind, saved_bounds):
    """the AOTAutograd compiler of `kind`; saved_bounds: the int64 bounds a
    forward graph hands to its backward (one dict per joint graph)"""
    def compile_graph(gm, example_inputs):
        from .profiler import is_active, range as profile_range
        name = f"compiled graph {next(_graph_ids)} ({kind}, {len(gm.graph.nodes)} nodes)"
        if model_name() is not None:           # torch_neuronx.neuron_dynamo_backend.set_model_name
            name = f"{model_name()}: {name}"
        reinplace_input_updates(gm)
        unwrap_calls_that_draw_nothing(gm)
        narrow_bounded_casts(gm, saved_bounds if kind == "backward" else None)
        if kind == "forward":
            saved_bounds.update(output_bounds(gm))
        upload_host_scalars(gm)
        fuse_matmul_epilogues(gm)
        fuse_residual_epilogues(gm)
        fuse_pointwise(gm)
        cg = _graph.CompiledGraph(gm, name, _CACHE)

        def run(args):
            # while profiling, the graph is a range over the programs it ran
            if not is_active():
                return cg(args)
            with profile_range(name):
                return cg(args)
        run._boxed_call = True
        run.compiled_graph = cg
        return run
    return compile_graph


def neuron_backend(gm: torch.fx.GraphModule, example_inputs):
    from . import rng_hops
    rng_hops.install()          # random ops in checkpointed regions (once)
    for t in example_inputs:
        if isinstance(t, torch.Tensor) and t.device.type not in ("neuron", "cpu", "meta"):
            raise RuntimeError(f"torch.compile(backend='neuron'): graph input on {t.device}; "
                               "move the model and inputs to the neuron device")
    # dynamic=True (Dynamo then assumes nothing static): the device compiler
    # needs every dimension fixed, as the Neuron compiler does (NCC_EMOD025).
    # Shapes Dynamo makes dynamic by itself after a shape change
    # (dynamic=None) are specialized again by AOTAutograd's static tracing.
    import torch._dynamo.config as dynamo_config
    sym = _symbolic_input(gm, example_inputs)
    if sym and not dynamo_config.assume_static_by_default:
        raise RuntimeError(
            f"torch.compile(backend='neuron'): Dynamic shape is not supported: {sym}. "
            "The Neuron compiler requires all tensor dimensions to be statically "
            "sized (NCC_EMOD025): compile with dynamic=False, and pad or bucket inputs to fixed "
            "sizes (sequence lengths to multiples of 128).")
    from torch._dynamo.backends.common import aot_autograd
    saved_bounds = {}
    backend = aot_autograd(fw_compiler=_compiler("forward", saved_bounds),
                           bw_compiler=_compiler("backward", saved_bounds),
                           inference_compiler=_compiler("inference", saved_bounds), decompositions=decompositions(),
                           keep_inference_input_mutations=True)
    return backend(gm, example_inputs)


def _on_neuron(gm, example_inputs):
    """whether a captured graph computes on the neuron device: a tensor input,
    parameter or buffer of it there, or a node making a tensor there"""
    tensors = [t for t in example_inputs if isinstance(t, torch.Tensor)]
    if isinstance(gm, torch.nn.Module):
        tensors += list(gm.parameters()) + list(gm.buffers())
    if any(t.device.type == "neuron" for t in tensors):
        return True
    graph = getattr(gm, "graph", None)
    for n in graph.nodes if graph is not None else ():
        dev = n.kwargs.get("device")
        if dev is not None and torch.device(dev).type == "neuron":
            return True
    return False


def install_default_backend():
    """`torch.compile(model)` with no backend named (or backend="inductor",
    the same entry) compiles graphs on neuron tensors with this backend, as
    the default backend of a device's own PyTorch build would: Inductor has no
    code generator for the device (it stops with `KeyError: 'neuron'`).  Graphs on any other device still go
    to Inductor unchanged; Inductor's options (mode, options=) do not apply
    to the neuron compiler and are ignored for its graphs."""
    wrapper = torch._TorchCompileInductorWrapper
    if getattr(wrapper.__call__, "_neuron_default", False):
        return
    inductor_call = wrapper.__call__

    def __call__(self, model_, inputs_, **kw):
        if _on_neuron(model_, inputs_):
            return neuron_backend(model_, inputs_)
        return inductor_call(self, model_, inputs_, **kw)
    __call__._neuron_default = True
    wrapper.__call__ = __call__
