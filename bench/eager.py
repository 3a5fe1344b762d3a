#!/usr/bin/env python3
"""bench/eager.py -- eager-mode costs of the `neuron` device, as tables.

1. Host microseconds per small op on a program-cache hit (target <= 30 us),
   next to the same op on CPU PyTorch.
2. Memory-bound elementwise ops on large tensors: simulated time, the
   bandwidth it implies, and the physical bounds it may not beat (the core's
   DMA peak, 16 engines x 27.2 GB/s, and the chip's HBM bandwidth).

3. TensorE: a big bf16 matmul's simulated time against TensorE's peak.
4. A small Llama-architecture forward (Transformers config, random
   weights): host time on `neuron` (full mode: values and timing) divided by
   host time on CPU PyTorch (target <= 3x), with the simulated device time.

The bounds come from the chip table (neuronsim.chip_info).

Run: python3 bench/eager.py [--target TARGET] [--reps N]"""
import argparse
import os
import time
import warnings

import neuronsim


def per_op_us(fn, reps):
    for _ in range(20):
        fn()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="trn2", choices=neuronsim.TARGETS)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--big-mib", type=int, default=256, help="size of each big operand")
    ap.add_argument("--mm", type=int, default=4096, help="square bf16 matmul size")
    args = ap.parse_args()
    os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = args.target
    os.environ.setdefault("NEURON_SIM", "1")
    warnings.filterwarnings("ignore")
    import torch
    import torch.nn.functional as F
    import torch_neuronsim

    ops = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b,
           "relu": lambda a, b: torch.relu(a), "gelu": lambda a, b: F.gelu(a),
           "exp": lambda a, b: torch.exp(a)}
    print(f"target {args.target}; small ops on 1024 fp32 elements, {args.reps} reps")
    print(f"{'op':8} {'neuron us/op':>13} {'cpu us/op':>10} {'fallbacks':>9}")
    a, b = torch.randn(1024), torch.randn(1024)
    na, nb = a.to("neuron"), b.to("neuron")
    for name, f in ops.items():
        torch_neuronsim.reset_stats()
        us = per_op_us(lambda: f(na, nb), args.reps)
        fb = torch_neuronsim.stats()["cpu_fallbacks"]
        cpu = per_op_us(lambda: f(a, b), args.reps)
        print(f"{name:8} {us:13.1f} {cpu:10.1f} {fb:9d}")

    chip = neuronsim.chip_info(args.target)
    dma_gbps, hbm_gbps = chip["dma_engine_bytes_per_second"] / 1e9, chip["hbm_bytes_per_second"] / 1e9
    n = args.big_mib * 2**20 // 4
    peak = min(chip["dma_engines"] * dma_gbps, hbm_gbps)
    print(f"\nmemory-bound ops on {args.big_mib} MiB fp32 operands "
          f"(bound: min(DMA {chip['dma_engines']} x {dma_gbps}, HBM {hbm_gbps:.0f})"
          f" = {peak:.1f} GB/s)")
    print(f"{'op':8} {'moved MiB':>10} {'sim us':>10} {'GB/s':>8} {'% of bound':>10} "
          f"{'host s':>7}")
    big_a = torch.ones(n, device="neuron")
    big_b = torch.full((n,), 2.0, device="neuron")
    for name, f, moved in (("add", lambda: big_a + big_b, 3), ("relu", lambda: torch.relu(big_a), 2)):
        torch_neuronsim.reset_stats()
        t = time.perf_counter()
        out = f()
        host = time.perf_counter() - t
        del out
        ns = torch_neuronsim.stats()["kernel_time_ns"]
        nbytes = moved * n * 4
        gbps = nbytes / ns
        print(f"{name:8} {nbytes / 2**20:10.0f} {ns / 1e3:10.1f} {gbps:8.1f} "
              f"{100 * gbps / peak:9.1f}% {host:7.2f}")

    del big_a, big_b
    tensor_ghz = chip["clock_mhz"]["tensor"] / 1000
    m = args.mm
    x = torch.empty(m, m, dtype=torch.bfloat16, device="neuron")
    torch_neuronsim.reset_stats()
    t = time.perf_counter()
    x @ x
    host = time.perf_counter() - t
    s = torch_neuronsim.stats()
    ps = s["native_ops"]["aten::mm"]["simulated_ps"]
    peak_ps = m ** 3 / (128 * 128) / tensor_ghz * 1e3
    print(f"\nTensorE: {m}x{m}x{m} bf16 matmul (peak: 128x128 MACs/cycle at {tensor_ghz} GHz)")
    print(f"{'sim us':>10} {'peak us':>10} {'% of peak':>10} {'TFLOPS':>8} {'host s':>7}")
    print(f"{ps / 1e6:10.1f} {peak_ps / 1e6:10.1f} {100 * peak_ps / ps:9.1f}% "
          f"{2 * m ** 3 / ps:8.1f} {host:7.2f}")
    del x

    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        print("\n(transformers is not installed: the Llama forward is not measured)")
        return
    print("\nsmall Llama forward (2 layers, hidden 256, 4 heads, seq 32, fp32), host seconds "
          "per forward")
    print(f"{'device':8} {'host ms':>9} {'ratio':>7} {'programs':>9} {'fallbacks':>9} {'device us':>9}")
    cfg = LlamaConfig(vocab_size=2048, hidden_size=256, intermediate_size=640, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 2048, (1, 32))
    times = {}
    with torch.no_grad():
        for dev in ("cpu", "neuron"):
            model.to(dev)
            i = ids.to(dev)
            for _ in range(3):
                model(i).logits.cpu()
            torch_neuronsim.reset_stats()
            reps = 10
            t = time.perf_counter()
            for _ in range(reps):
                model(i).logits.cpu()
            times[dev] = (time.perf_counter() - t) / reps
            s = torch_neuronsim.stats()
            sim = s["simulated_time_ns"] / reps / 1e3 if dev == "neuron" else 0.0
            print(f"{dev:8} {times[dev] * 1e3:9.1f} {times[dev] / times['cpu']:7.2f} "
                  f"{s['programs_executed'] // reps:9d} {s['cpu_fallbacks'] // reps:9d} {sim:9.1f}")


if __name__ == "__main__":
    main()
