"""The `neuron` TorchDynamo backend: `torch.compile(model, backend="neuron")`.

A captured FX graph runs op by op on the device through the same native
kernels (and counted CPU fallback) as eager mode, so compiled and eager runs
give the same values and simulated timings.  Graph-level kernel fusion is not
done yet: compiling saves Python overhead, not simulated device time.
Transformers' `generate()` compiles decoding steps with this backend when the
model is on `neuron` and uses a static cache.

Dynamo finds the backend through the package's `torch_dynamo_backends` entry
point (pyproject.toml), the public registration route: nothing here touches
Dynamo's registries."""
import itertools

import torch

_graph_ids = itertools.count()


def neuron_backend(gm: torch.fx.GraphModule, example_inputs):
    for t in example_inputs:
        if isinstance(t, torch.Tensor) and t.device.type not in ("neuron", "cpu", "meta"):
            raise RuntimeError(f"torch.compile(backend='neuron'): graph input on {t.device}; "
                               "move the model and inputs to the neuron device")
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
