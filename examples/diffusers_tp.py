"""Diffusers' tensor parallelism on `neuron`: the Flux and QwenImage
pipelines of examples/diffusers_pipelines.py with their transformer sharded
over the ranks by diffusers' own path (`enable_parallelism(
TensorParallelConfig(mesh=DeviceMesh("neuron", ...)))`, which takes its
Neuron pre-shard backend), one NeuronCore per rank, against the pipeline run
in one process on the CPU.

    NEURON_SIM=1 NEURON_STRICT=1 torchrun --nproc-per-node 2 examples/diffusers_tp.py [flux] [qwenimage]

Rank 0 prints, per pipeline, the largest pixel difference from the CPU
image, the transformer parameters this rank holds against the whole model's,
and the CPU fallbacks; the exit status is non-zero if any pipeline differs.
"""
import os
import sys

import torch
import torch.distributed as dist

import torch_neuronsim

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffusers_pipelines as dp  # noqa: E402

# tensor parallelism splits attention heads: the sizes of diffusers' own TP
# tests where the pipeline tests' differ (QwenImage: 4 heads, not 3)
TP_SIZES = {"flux": {}, "qwenimage": {"heads": 4}}


def held(module):
    """parameters of `module` on this rank, and of the whole model"""
    from torch.distributed.tensor import DTensor
    local = sum(p.to_local().numel() if isinstance(p, DTensor) else p.numel() for p in module.parameters())
    return local, sum(p.numel() for p in module.parameters())


def run(name, mesh, device):
    from diffusers import TensorParallelConfig
    want = None
    if dist.get_rank() == 0:
        pipe, kwargs = dp.build(name, **TP_SIZES[name])
        with torch.no_grad():
            want = pipe(**kwargs, generator=torch.Generator("cpu").manual_seed(0), output_type="pt").images.float()
    pipe, kwargs = dp.build(name, **TP_SIZES[name])        # the same seeded weights on every rank
    torch_neuronsim.reset_stats()
    pipe.transformer.enable_parallelism(config=TensorParallelConfig(mesh=mesh))
    pipe = pipe.to(device)
    with torch.no_grad():
        got = pipe(**kwargs, generator=torch.Generator("cpu").manual_seed(0), output_type="pt").images.float().cpu()
    torch.neuron.synchronize()
    local, total = held(pipe.transformer)
    fallbacks = torch_neuronsim.stats()["cpu_fallbacks"]
    if want is None:
        return True
    err = (got - want).abs().max().item()
    ok = err <= 2e-3 and fallbacks == 0 and local < total
    print(f"| {name} | {dist.get_world_size()} | {'x'.join(map(str, got.shape))} | {err:.3g} | {local} of {total} "
          f"| {fallbacks} |" + ("" if ok else "  MISMATCH"), flush=True)
    return ok


def main(argv=None):
    names = (argv if argv is not None else sys.argv[1:]) or list(TP_SIZES)
    dp.quiet()
    dist.init_process_group(backend="neuron")
    device = torch.device("neuron", torch.neuron.current_device())
    from torch.distributed.device_mesh import DeviceMesh
    mesh = DeviceMesh("neuron", list(range(dist.get_world_size())))
    if dist.get_rank() == 0:
        print("| pipeline | ranks | image | max abs diff vs CPU | transformer parameters on rank 0 | CPU fallbacks |")
        print("|---|---|---|---|---|---|", flush=True)
    ok = all([run(n, mesh, device) for n in names])
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
