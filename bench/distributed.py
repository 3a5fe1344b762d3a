#!/usr/bin/env python3
"""Distributed training on simulated NeuronCores: a small Llama's training
step under DDP, FSDP2 and TP x FSDP (a 2D DeviceMesh) on 2, 4 and 8 ranks
(torchrun, one process per rank, the c10d backend "neuron"), printed as a
table: simulated step time (the slowest rank's stream), the collectives'
time as a share of it ("comm %": they run on the device's collective
stream, beside compute) and the share the compute stream stood still
waiting for them ("exposed %"), collectives per step and MFU (6 x
parameters x tokens per second over the ranks' TensorE bf16 peak).

    python3 bench/distributed.py [--ranks 2,4,8] [--modes ddp,fsdp2,tp_fsdp]

Simulated times are deterministic; the host time to run them is not shown."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

CFG = dict(hidden_size=256, intermediate_size=512, num_attention_heads=8, num_key_value_heads=8, vocab_size=1000,
           num_hidden_layers=2)
BATCH, SEQ = 8, 64       # the global batch: each data-parallel rank takes its share


def worker(mode, out):
    import torch
    import torch.distributed as dist
    import transformers as T
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    import neuronsim
    import torch_neuronsim
    from torch_neuronsim.device import _stream_time_ps, current_stream

    dist.init_process_group(backend="neuron")
    r, n = dist.get_rank(), dist.get_world_size()
    dev = torch.device("neuron", torch.neuron.current_device())   # LOCAL_RANK
    torch.manual_seed(0)
    model = T.LlamaForCausalLM(T.LlamaConfig(**CFG)).to(dev)
    params = sum(p.numel() for p in model.parameters())
    tp = 1
    if mode == "ddp":
        dp = n
        run = torch.nn.parallel.DistributedDataParallel(model)
    elif mode == "fsdp2":
        dp = n
        for layer in model.model.layers:
            fully_shard(layer)
        run = fully_shard(model)
    else:                                   # TP within pairs, FSDP across them
        tp = 2
        dp = n // tp
        mesh = init_device_mesh("neuron", (dp, tp), mesh_dim_names=("dp", "tp"))
        for layer in model.model.layers:
            parallelize_module(layer.self_attn, mesh["tp"], {"q_proj": ColwiseParallel(), "k_proj": ColwiseParallel(),
                                                             "v_proj": ColwiseParallel(),
                                                             "o_proj": RowwiseParallel()})
            parallelize_module(layer.mlp, mesh["tp"], {"gate_proj": ColwiseParallel(), "up_proj": ColwiseParallel(),
                                                       "down_proj": RowwiseParallel()})
            fully_shard(layer, mesh=mesh["dp"])
        run = fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    data = torch.randint(0, CFG["vocab_size"], (BATCH, SEQ), generator=torch.Generator().manual_seed(1))
    share = BATCH // dp
    rank_dp = r // tp
    mine = data[rank_dp * share:(rank_dp + 1) * share].to(dev)

    def step():
        loss = run(mine, labels=mine).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    step()                                  # warm-up: program caches, optimizer state
    dist.barrier()
    sid = current_stream(dev).stream_id
    t0 = _stream_time_ps(0, sid)
    torch_neuronsim.reset_stats()
    loss = step()
    dist.barrier()
    s = torch_neuronsim.stats()
    t = torch.tensor([_stream_time_ps(0, sid) - t0, s["collective_time_ns"] * 1000, s["collectives"],
                      s["collective_exposed_ns"] * 1000], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if r == 0:
        step_ps, coll_ps, colls, exposed_ps = t.tolist()
        peak = neuronsim.chip_info()["peak_flops_per_second"]
        flops = 6 * params * BATCH * SEQ
        with open(out, "w") as f:
            json.dump({"mode": mode, "ranks": n, "dp": dp, "tp": tp, "params": params, "loss": loss.item(),
                       "step_us": step_ps / 1e6, "comm_pct": 100 * coll_ps / step_ps, "collectives": colls,
                       "exposed_pct": 100 * exposed_ps / step_ps,
                       "mfu_pct": 100 * flops / (step_ps * 1e-12) / (peak * n)}, f)
    dist.destroy_process_group()


LAYER8B = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
               num_hidden_layers=1, vocab_size=1024, max_position_embeddings=8192)


def symmetric_layer(tp, fsdp, seq, out):
    """A Llama-8B-shaped decoder layer (bf16) sharded TP x FSDP over tp x fsdp
    ranks, one training step in timing-only mode with this process standing
    for every rank (SymmetricStore): the collective model sees the real
    group sizes on the target's topology."""
    import torch
    import torch.distributed as dist
    import transformers as T
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    import neuronsim
    import torch_neuronsim
    from torch_neuronsim.device import _stream_time_ps, current_stream
    from torch_neuronsim.distributed import SymmetricStore

    n = tp * fsdp
    dist.init_process_group("neuron", store=SymmetricStore(), rank=0, world_size=n)
    mesh = init_device_mesh("neuron", (fsdp, tp), mesh_dim_names=("dp", "tp"))
    cfg = T.LlamaConfig(**LAYER8B)
    cfg._attn_implementation = "sdpa"
    with torch.device("meta"):
        layer = LlamaDecoderLayer(cfg, 0).to(torch.bfloat16)
    params = sum(p.numel() for p in layer.parameters())
    parallelize_module(layer.self_attn, mesh["tp"], {"q_proj": ColwiseParallel(), "k_proj": ColwiseParallel(),
                                                     "v_proj": ColwiseParallel(), "o_proj": RowwiseParallel()})
    parallelize_module(layer.mlp, mesh["tp"], {"gate_proj": ColwiseParallel(), "up_proj": ColwiseParallel(),
                                               "down_proj": RowwiseParallel()})
    fully_shard(layer, mesh=mesh["dp"])
    layer.to_empty(device="neuron")
    rot = LlamaRotaryEmbedding(cfg).to("neuron")
    x = torch.randn(1, seq, cfg.hidden_size, dtype=torch.bfloat16, device="neuron")
    pos = torch.arange(seq, device="neuron").unsqueeze(0)
    pe = tuple(t.to(torch.bfloat16) for t in rot(x, pos))
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-4, foreach=False)

    def step():
        y = layer(x, position_embeddings=pe, position_ids=pos)
        y = y[0] if isinstance(y, tuple) else y
        y.float().pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    step()
    sid = current_stream(0).stream_id
    t0 = _stream_time_ps(0, sid)
    torch_neuronsim.reset_stats()
    step()
    st = torch_neuronsim.stats()
    step_ps = _stream_time_ps(0, sid) - t0
    peak = neuronsim.chip_info()["peak_flops_per_second"]
    flops = 6 * params * seq * fsdp          # every data-parallel group's tokens
    with open(out, "w") as f:
        json.dump({"mode": "tp_fsdp (timing-only, 1 process)", "ranks": n, "dp": fsdp, "tp": tp, "params": params,
                   "loss": float("nan"), "step_us": step_ps / 1e6,
                   "comm_pct": 100 * st["collective_time_ns"] * 1000 / step_ps, "collectives": st["collectives"],
                   "exposed_pct": 100 * st["collective_exposed_ns"] * 1000 / step_ps,
                   "mfu_pct": 100 * flops / (step_ps * 1e-12) / (peak * n)}, f)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2,4,8")
    ap.add_argument("--modes", default="ddp,fsdp2,tp_fsdp")
    ap.add_argument("--layer", default="8x16", help="TPxFSDP of the timing-only Llama-8B layer ('' to skip)")
    ap.add_argument("--seq", type=int, default=2048, help="tokens per data-parallel rank of that layer")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker == "layer":
        tp, fsdp = (int(v) for v in args.layer.split("x"))
        return symmetric_layer(tp, fsdp, args.seq, args.out)
    if args.worker:
        return worker(args.worker, args.out)
    env = dict(os.environ, NEURON_SIM="1")
    rows = []
    for n in [int(k) for k in args.ranks.split(",")]:
        for mode in args.modes.split(","):
            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n),
                       __file__, "--worker", mode, "--out", f.name]
                r = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"{mode} on {n} ranks failed:\n{r.stderr[-3000:]}", file=sys.stderr)
                    return 1
                rows.append(json.load(open(f.name)))
    if args.layer:
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            r = subprocess.run([sys.executable, __file__, "--worker", "layer", "--layer", args.layer,
                                "--seq", str(args.seq), "--out", f.name],
                               env=dict(env, NEURON_SIM_MODE="timing"), capture_output=True, text=True)
            if r.returncode != 0:
                print(f"the {args.layer} layer failed:\n{r.stderr[-3000:]}", file=sys.stderr)
                return 1
            layer = json.load(open(f.name))
    import neuronsim
    print(f"Llama {CFG['num_hidden_layers']} layers, hidden {CFG['hidden_size']}, {rows[0]['params'] / 1e6:.2f} M "
          f"parameters, global batch {BATCH} x {SEQ} tokens, fp32; target {neuronsim.chip_info('trn2')['target']}")
    head = ("mode", "ranks", "dp x tp", "sim step us", "comm %", "exposed %", "collectives/step", "MFU %",
            "rank 0 loss")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for x in rows:
        print(f"| {x['mode']} | {x['ranks']} | {x['dp']} x {x['tp']} | {x['step_us']:.1f} | {x['comm_pct']:.1f} | "
              f"{x['exposed_pct']:.1f} | {x['collectives']:.0f} | {x['mfu_pct']:.3f} | {x['loss']:.4f} |")
    if args.layer:
        x = layer
        print(f"\nLlama-8B-shaped decoder layer ({x['params'] / 1e6:.0f} M parameters, bf16), {args.seq} tokens per "
              f"data-parallel rank, one process standing for all ranks (NEURON_SIM_MODE=timing):")
        print("| " + " | ".join(head[:-1]) + " |")
        print("|" + "---|" * (len(head) - 1))
        print(f"| {x['mode']} | {x['ranks']} | {x['dp']} x {x['tp']} | {x['step_us']:.1f} | {x['comm_pct']:.1f} | "
              f"{x['exposed_pct']:.1f} | {x['collectives']:.0f} | {x['mfu_pct']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
