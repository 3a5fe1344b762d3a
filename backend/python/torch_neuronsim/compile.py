"""The `neuron` TorchDynamo backend: `torch.compile(model, backend="neuron")`.

A captured FX graph runs op by op on the device through the same native
kernels (and counted CPU fallback) as eager mode, so compiled and eager runs
give the same values and simulated timings.  Graph-level kernel fusion is not
done yet: compiling saves Python overhead, not simulated device time.
Transformers' `generate()` compiles decoding steps with this backend when the
model is on `neuron` and uses a static cache.  Shapes are static:
`dynamic=True` is refused with the Neuron compiler's message (NCC_EMOD025).

Dynamo finds the backend through the package's `torch_dynamo_backends` entry
point (pyproject.toml), the public registration route: nothing here touches
Dynamo's registries."""
import itertools

import torch

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


def neuron_backend(gm: torch.fx.GraphModule, example_inputs):
    for t in example_inputs:
        if isinstance(t, torch.Tensor) and t.device.type not in ("neuron", "cpu", "meta"):
            raise RuntimeError(f"torch.compile(backend='neuron'): graph input on {t.device}; "
                               "move the model and inputs to the neuron device")
    # dynamic=True (Dynamo then assumes nothing static): the device compiler
    # needs every dimension fixed, as the Neuron compiler does (NCC_EMOD025).
    # Shapes Dynamo makes dynamic by itself after a shape change
    # (dynamic=None) still run, op by op.
    import torch._dynamo.config as dynamo_config
    sym = _symbolic_input(gm, example_inputs)
    if sym and not dynamo_config.assume_static_by_default:
        raise RuntimeError(
            f"torch.compile(backend='neuron'): Dynamic shape is not supported: {sym}. "
            "The Neuron compiler requires all tensor dimensions to be statically "
            "sized (NCC_EMOD025): compile with dynamic=False, and pad or bucket inputs to fixed "
            "sizes (sequence lengths to multiples of 128).")
    from .profiler import is_active, range as profile_range
    name = f"compiled graph {next(_graph_ids)} ({len(gm.graph.nodes)} nodes)"
    forward = gm.forward

    def run(*args):
        # while profiling, the graph is a range over the programs its ops ran
        if not is_active():
            return forward(*args)
        with profile_range(name):
            return forward(*args)
    return run
