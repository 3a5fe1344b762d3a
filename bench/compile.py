#!/usr/bin/env python3
"""bench/compile.py -- eager vs torch.compile(backend="neuron") on the small
Llama of the tests (hidden 128, 2 layers, vocab 1000): forward, one decode
step with a static cache, and one training step (forward, backward, AdamW);
and TRL's SFTTrainer step on one core (a Qwen3 of the same size, bf16, TRL's
gradient checkpointing, rows padded to 128) eager vs `torch_compile=True`.

Per workload and mode: compile time (the first call: capture and link),
host time per later call, simulated device time per call (stream time,
launch charges included), programs per call, and TensorE utilization (its
busy time over the simulated time).  Host times are medians of --calls
calls; simulated figures are exact and the same on every run.

    python3 bench/compile.py [--calls 5] [--target trn2]
"""
import argparse
import copy
import os
import statistics
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--target", default=None, help="trn1 | trn2 | trn3 (NEURON_PLATFORM_TARGET_OVERRIDE)")
    args = ap.parse_args()
    if args.target:
        os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = args.target
    os.environ.setdefault("NEURON_SIM", "1")
    # a fresh disk cache: the compile column is a real compile
    os.environ["NEURON_SIM_COMPILE_CACHE_DIR"] = tempfile.mkdtemp(prefix="neuronsim-bench-compile-")
    import torch
    import transformers as T
    from transformers import StaticCache
    import torch_neuronsim

    dev = torch.device("neuron")
    cfg = T.LlamaConfig(hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2,
                        vocab_size=1000, num_hidden_layers=2)
    torch.manual_seed(0)
    base = T.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 1000, (2, 16)).to(dev)

    def forward_case(compiled):
        m = copy.deepcopy(base).to(dev)
        fn = torch.compile(m, backend="neuron") if compiled else m

        def call():
            with torch.no_grad():
                return fn(ids).logits
        return call

    def decode_case(compiled):
        m = copy.deepcopy(base).to(dev)
        fn = torch.compile(m, backend="neuron") if compiled else m
        cache = StaticCache(config=cfg, max_cache_len=64)
        prompt = torch.randint(0, 1000, (1, 8)).to(dev)
        tok = torch.tensor([[5]]).to(dev)
        with torch.no_grad():
            fn(input_ids=prompt, past_key_values=cache, cache_position=torch.arange(8).to(dev), use_cache=True)
        pos = torch.tensor([8]).to(dev)

        def call():   # the same position each call: one static-shape step
            with torch.no_grad():
                return fn(input_ids=tok, past_key_values=cache, cache_position=pos, use_cache=True).logits
        return call

    def train_case(compiled):
        m = copy.deepcopy(base).to(dev).train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)

        def step():
            loss = m(ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss
        fn = torch.compile(step, backend="neuron") if compiled else step
        return fn

    cases = [("forward", forward_case), ("decode step", decode_case), ("training step", train_case)]
    rows = []
    for name, make in cases:
        for compiled in (False, True):
            torch._dynamo.reset()
            call = make(compiled)
            t0 = time.perf_counter()
            call().cpu()
            first = time.perf_counter() - t0
            host, sims, progs, util = [], [], [], []
            for _ in range(args.calls):
                torch_neuronsim.reset_stats()
                t0 = time.perf_counter()
                call().cpu()
                host.append(time.perf_counter() - t0)
                s = torch_neuronsim.stats()
                sims.append(s["simulated_time_ns"])
                progs.append(s["programs_executed"])
                util.append(s["tensor_busy_ps"] / 1000 / max(1, s["simulated_time_ns"]))
            rows.append((name, "compiled" if compiled else "eager", first if compiled else None,
                         statistics.median(host), sims[-1] / 1000, progs[-1], 100 * util[-1],
                         s["compile"]["fallback_node_runs"] if compiled else None))

    rows += sft_rows(args.calls)
    cases.append(("SFT step (TRL)", None))

    print(f"target {torch_neuronsim.target()}, {args.calls} timed calls after the first")
    head = ("workload", "mode", "compile s", "host ms/call", "sim us/call", "programs/call", "TensorE util %",
            "eager nodes/call")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, mode, first, host, sim, progs, util, fb in rows:
        print(f"| {name} | {mode} | {'' if first is None else f'{first:.2f}'} | {host * 1000:.1f} | {sim:.1f} | "
              f"{progs} | {util:.2f} | {'' if fb is None else fb} |")
    by = {(r[0], r[1]): r for r in rows}
    for name, _ in cases:
        e, c = by[(name, "eager")], by[(name, "compiled")]
        print(f"{name}: compiled is {e[4] / c[4]:.2f}x faster in simulated time, {e[3] / c[3]:.2f}x in host time")
    return 0


def sft_rows(calls):
    """TRL's SFTTrainer on one core, eager and torch_compile=True (no backend
    named): per optimizer step after the first, the rows main() prints"""
    import tempfile

    import torch
    import transformers as T
    from datasets import Dataset
    from tokenizers import Tokenizer, models, pre_tokenizers
    from trl import SFTConfig, SFTTrainer

    import torch_neuronsim

    words = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{f"w{i}": i for i in range(3, 1000)}}
    tk = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = T.PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    g = torch.Generator().manual_seed(0)
    data = Dataset.from_list([{"text": " ".join(f"w{int(t)}" for t in torch.randint(3, 1000, (140,), generator=g))}
                              for _ in range(4 * (calls + 1))])
    cfg = T.Qwen3Config(vocab_size=1000, hidden_size=128, intermediate_size=256, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=32, num_hidden_layers=2, pad_token_id=0, eos_token_id=1)

    class Meter(T.TrainerCallback):
        def __init__(self):
            self.steps = []

        def on_step_begin(self, args, state, control, **kw):
            torch_neuronsim.reset_stats()
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            s = torch_neuronsim.stats()
            self.steps.append((time.perf_counter() - self.t0, s))

    rows = []
    for compiled in (False, True):
        torch._dynamo.reset()
        torch.manual_seed(0)
        meter = Meter()
        config = SFTConfig(output_dir=tempfile.mkdtemp(prefix="bench-sft-"), max_steps=calls + 1,
                           per_device_train_batch_size=4, bf16=True, torch_compile=compiled, report_to=[],
                           logging_steps=1000, save_strategy="no", max_length=128, disable_tqdm=True,
                           learning_rate=1e-3)
        SFTTrainer(model=T.Qwen3ForCausalLM(cfg), args=config, train_dataset=data, processing_class=tok,
                   callbacks=[meter]).train()
        first, later = meter.steps[0], meter.steps[1:]
        s = later[-1][1]
        rows.append(("SFT step (TRL)", "compiled" if compiled else "eager", first[0] if compiled else None,
                     statistics.median(h for h, _ in later), s["simulated_time_ns"] / 1000, s["programs_executed"],
                     100 * s["tensor_busy_ps"] / 1000 / max(1, s["simulated_time_ns"]),
                     s["compile"]["fallback_node_runs"] if compiled else None))
    return rows


if __name__ == "__main__":
    sys.exit(main())
