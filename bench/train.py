"""Training-step benchmark of a tiny Llama on the simulated `neuron` device.

Prints two tables:
1. Host time per training step (forward with sdpa, backward, clip_grad_norm_,
   AdamW) on `neuron` over CPU PyTorch on this machine (target <= 3x,
   moonshot 1.5x), after one warm-up step each; the two devices take turns
   step by step, and the table gives the median step, the fastest step and
   the per-round ratio's range (a shared VM's speed drifts by tens of %).
2. Per target (neuronsim.TARGETS; each in its own process, one simulated chip
   per process): the simulated device time of one step on one NeuronCore --
   as the stream clock counts it (launch overheads + kernels + host-link
   copies) and its kernel part alone -- and the model FLOPs utilization it
   implies: 6 * parameters * tokens plus attention's 12 * layers * hidden *
   seq * tokens, over step time * the core's bf16 TensorE peak.

Run: python3 bench/train.py [--rounds R] [--steps N] [--batch B] [--seq S] [--amp bf16|none]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def build(args):
    import torch
    import transformers as T
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=4096, hidden_size=args.hidden, intermediate_size=4 * args.hidden,
                        num_attention_heads=args.hidden // 64, num_key_value_heads=max(1, args.hidden // 128),
                        num_hidden_layers=args.layers, max_position_embeddings=max(512, args.seq))
    return T.LlamaForCausalLM(cfg), cfg


def model_flops(cfg, args, model):
    emb = cfg.vocab_size * cfg.hidden_size
    n = sum(p.numel() for p in model.parameters()) - emb          # the lm_head stays in (a matmul)
    tokens = args.batch * args.seq
    return 6 * n * tokens + 12 * cfg.num_hidden_layers * cfg.hidden_size * args.seq * tokens


def step_fn(model, dev, args):
    """one training step of `model` on `dev` as a function (after a warm-up
    step: program generation, caches); returns the loss"""
    import torch
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 4096, (args.batch, args.seq), generator=g).to(dev)

    def one():
        with torch.autocast(dev.type if hasattr(dev, "type") else dev, dtype=torch.bfloat16,
                            enabled=args.amp == "bf16"):
            loss = model(ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        return loss.item()                              # .item() waits for the device

    one()
    return one


def steps(model, dev, args, n, after_warmup=None):
    """mean host seconds per step over n steps after the warm-up"""
    one = step_fn(model, dev, args)
    if after_warmup:
        after_warmup()
    t = time.perf_counter()
    for _ in range(n):
        one()
    return (time.perf_counter() - t) / n


def interleaved(fns, n):
    """host seconds of each of n steps of every function, the functions
    taking turns step by step: a shared machine's slow spells (other tenants,
    frequency changes) then fall on both sides of the ratio alike"""
    times = [[] for _ in fns]
    for _ in range(n):
        for f, ts in zip(fns, times):
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
    return times


def sim_only(args):
    """one target (this process's simulated chip): simulated step time and MFU"""
    import torch
    import neuronsim
    import torch_neuronsim
    model, cfg = build(args)
    dev = torch.device("neuron")
    model.to(dev)
    host = steps(model, dev, args, args.steps, after_warmup=torch_neuronsim.reset_stats)
    s = torch_neuronsim.stats()
    runs = args.steps                                  # the timed steps, after the warm-up
    chip = neuronsim.chip_info(torch_neuronsim.target())
    step_ns = s["simulated_time_ns"] / runs
    kernel_ns = s["kernel_time_ns"] / runs
    flops = model_flops(cfg, args, model)
    print(json.dumps({"target": torch_neuronsim.target(), "step_ns": step_ns, "kernel_ns": kernel_ns,
                      "launch_ns": s["launch_time_ns"] / runs, "programs": s["programs_executed"] / runs,
                      "fallbacks": s["cpu_fallbacks"], "flops": flops,
                      "mfu": flops / (step_ns * 1e-9 * chip["peak_flops_per_second"]),
                      "mfu_kernels": flops / (kernel_ns * 1e-9 * chip["peak_flops_per_second"]),
                      "host_s": host}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3, help="timed steps per target (simulated table)")
    ap.add_argument("--rounds", type=int, default=12, help="timed steps per device (host table)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--amp", default="bf16", choices=["bf16", "none"])
    ap.add_argument("--sim-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.sim_only:
        return sim_only(args)

    import copy
    import torch
    import torch_neuronsim  # noqa: F401
    model, cfg = build(args)
    print(f"tiny Llama: hidden {args.hidden}, {args.layers} layers, "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters; batch {args.batch} x "
          f"{args.seq} tokens; autocast {args.amp}; AdamW + clip_grad_norm_")
    dev = torch.device("neuron")
    cpu_step = step_fn(copy.deepcopy(model), torch.device("cpu"), args)
    neuron_step = step_fn(copy.deepcopy(model).to(dev), dev, args)
    cpu, neuron = interleaved([cpu_step, neuron_step], args.rounds)
    ratios = sorted(n / c for c, n in zip(cpu, neuron))
    med = statistics.median
    print(f"\nhost time per step ({args.rounds} steps each, CPU and neuron taking turns)")
    print(f"{'':>7} {'cpu s':>7} {'neuron s':>9} {'ratio':>6}  (target <= 3x, moonshot 1.5x)")
    print(f"{'median':>7} {med(cpu):7.3f} {med(neuron):9.3f} {med(ratios):5.2f}x")
    print(f"{'min':>7} {min(cpu):7.3f} {min(neuron):9.3f} {min(neuron) / min(cpu):5.2f}x")
    print(f"{'range':>7} {'':>7} {'':>9} {ratios[0]:.2f}-{ratios[-1]:.2f}x (per round)")

    print("\nsimulated step on one NeuronCore")
    print(f"{'target':>6} {'step us':>9} {'kernels us':>11} {'launch us':>10} {'programs':>9} "
          f"{'MFU':>6} {'MFU(kern)':>9} {'fallbacks':>9}")
    import neuronsim
    for target in neuronsim.TARGETS:
        env = dict(os.environ, NEURON_SIM="1", NEURON_PLATFORM_TARGET_OVERRIDE=target)
        cmd = [sys.executable, __file__, "--sim-only", "--steps", str(args.steps), "--batch", str(args.batch),
               "--seq", str(args.seq), "--hidden", str(args.hidden), "--layers", str(args.layers),
               "--amp", args.amp]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"{r['target']:>6} {r['step_ns'] / 1e3:9.1f} {r['kernel_ns'] / 1e3:11.1f} "
              f"{r['launch_ns'] / 1e3:10.1f} {r['programs']:9.0f} {100 * r['mfu']:5.2f}% "
              f"{100 * r['mfu_kernels']:8.2f}% {r['fallbacks']:9d}")
    print(f"\nmodel FLOPs per step: {model_flops(cfg, args, model) / 1e9:.2f} G (6 N T + attention)")


if __name__ == "__main__":
    main()
