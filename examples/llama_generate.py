"""A small Llama-architecture model on the simulated `neuron` device.

Builds the model from a Transformers config (random weights, nothing is
downloaded), checks the neuron forward's logits against CPU PyTorch,
generates tokens greedily with a static KV cache on both devices and
compares them, then prints host speed, simulated device time per token and
the per-engine utilization of the simulated NeuronCore.

    python examples/llama_generate.py [--dtype float32|bfloat16] [--tokens N]
                                      [--layers N] [--hidden N] [--strict]

--strict runs the forward pass and generation under NEURON_STRICT=1: any CPU
fallback is an error.
"""
import argparse
import os
import time

os.environ.setdefault("NEURON_SIM", "1")

import torch  # noqa: E402
import torch_neuronsim  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from neuronsim import ENGINES  # noqa: E402  (the ISA's engine table)


def device_time_ps():
    """The simulated clock of the current neuron stream (programs + copies)."""
    s = torch.neuron.current_stream()
    return torch_neuronsim.device._stream_time_ps(s.device.index, s.stream_id)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--prompt", type=int, default=32, help="prompt length")
    ap.add_argument("--strict", action="store_true")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)

    cfg = LlamaConfig(vocab_size=2048, hidden_size=args.hidden, intermediate_size=2 * args.hidden + 128,
                      num_hidden_layers=args.layers, num_attention_heads=max(1, args.hidden // 64),
                      num_key_value_heads=max(1, args.hidden // 128), max_position_embeddings=512)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval().to(dtype)
    ids = torch.randint(0, cfg.vocab_size, (1, args.prompt))
    gen = dict(max_new_tokens=args.tokens, do_sample=False, cache_implementation="static",
               pad_token_id=0)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"model: Llama, {args.layers} layers, hidden {args.hidden}, {cfg.num_attention_heads} heads "
          f"({cfg.num_key_value_heads} kv), {nparams / 1e6:.1f} M parameters, {args.dtype}; "
          f"target {torch_neuronsim.target()}")

    with torch.no_grad():
        t = time.perf_counter()
        ref_logits = model(ids).logits
        cpu_fwd = time.perf_counter() - t
        ref_tokens = model.generate(ids, **gen)[0, args.prompt:]

        model = model.to("neuron")
        nids = ids.to("neuron")
        model(nids)                      # warm-up: generates and caches the programs
        if args.strict:
            os.environ["NEURON_STRICT"] = "1"
        torch_neuronsim.reset_stats()
        t = time.perf_counter()
        logits = model(nids).logits.cpu()
        dev_fwd = time.perf_counter() - t
        os.environ.pop("NEURON_STRICT", None)
        fwd_stats = torch_neuronsim.stats()

    tol = 1e-4 if dtype == torch.float32 else 5e-2
    err = (logits.float() - ref_logits.float()).abs().max().item()
    ok = torch.allclose(logits.float(), ref_logits.float(), rtol=tol, atol=tol)
    print(f"forward: logits {tuple(logits.shape)} max |neuron - cpu| = {err:.3g} "
          f"({'OK' if ok else 'MISMATCH'}, tolerance {tol}); "
          f"host {dev_fwd * 1e3:.1f} ms (CPU PyTorch {cpu_fwd * 1e3:.1f} ms); "
          f"{fwd_stats['programs_executed']} programs, {fwd_stats['cpu_fallbacks']} CPU fallbacks; "
          f"simulated {fwd_stats['kernel_time_ns'] / 1e3:.1f} us in programs "
          f"({fwd_stats['simulated_time_ns'] / 1e3:.1f} us of device time with launches and copies)")

    with torch.no_grad():
        if args.strict:
            os.environ["NEURON_STRICT"] = "1"
        torch_neuronsim.reset_stats()
        t0_ps = device_time_ps()
        t = time.perf_counter()
        out = model.generate(nids, **gen)
        host = time.perf_counter() - t
        sim_ps = device_time_ps() - t0_ps
        os.environ.pop("NEURON_STRICT", None)
        s = torch_neuronsim.stats()
        # Teacher-forced check on CPU: every token neuron picked must be a
        # greedy choice of the CPU model given the same prefix (its CPU logit
        # within the dtype tolerance of the best one), so bf16 near-ties that
        # round the other way are not counted as errors.
        seq = out.cpu()
        cpu_model = model.to("cpu")
        step_logits = cpu_model(seq).logits[0, args.prompt - 1:-1].float()
        chosen = step_logits.gather(1, seq[0, args.prompt:, None])[:, 0]
        gap = (step_logits.max(dim=1).values - chosen).max().item()
    tokens = seq[0, args.prompt:]
    same = torch.equal(tokens, ref_tokens)
    greedy_ok = gap <= (1e-4 if dtype == torch.float32 else 0.25)
    print(f"generate: {len(tokens)} tokens {tokens.tolist()}")
    print(f"  identical to CPU PyTorch greedy decoding: {'yes' if same else 'no'}; every token a "
          f"CPU greedy choice for its prefix (max logit gap {gap:.3g}): {'yes' if greedy_ok else 'NO'}")
    print(f"  host: {len(tokens) / host:.1f} tokens/s ({host:.2f} s)")
    print(f"  simulated device time: {sim_ps / 1e6:.1f} us total, {sim_ps / 1e6 / len(tokens):.1f} us "
          f"per token (incl. prefill and {s['programs_executed']} program launches)")
    busy_total = s["kernel_time_ns"] * 1000
    if busy_total:
        util = ", ".join(f"{e} {100 * s[e + '_busy_ps'] / busy_total:.1f}%" for e in ENGINES)
        print(f"  engine utilization over the programs' run time: {util}; "
              f"DMA {s['dma_bytes'] / 2**20:.1f} MiB, HBM read {s['hbm_read_bytes'] / 2**20:.1f} MiB")
    top = sorted(s["native_ops"].items(), key=lambda kv: -kv[1]["simulated_ps"])[:8]
    print("  top ops by simulated time: " + ", ".join(
        f"{op} {v['simulated_ps'] / 1e6:.1f} us ({v['count']}x)" for op, v in top))
    if s["cpu_fallbacks"]:
        fb = sorted(s["fallback_ops"].items(), key=lambda kv: -kv[1])
        print(f"  CPU fallbacks during generate: {s['cpu_fallbacks']} "
              f"({', '.join(f'{k} x{v}' for k, v in fb)})")
    return 0 if ok and greedy_ok and (same or dtype != torch.float32) else 1


if __name__ == "__main__":
    raise SystemExit(main())
