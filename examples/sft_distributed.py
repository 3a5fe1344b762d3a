"""The seed scenario: TRL SFT of a Qwen3 model over TP x FSDP ranks.

A plain TRL script -- SFTTrainer, TRL's defaults (gradient checkpointing,
padding to multiples of 128 on `neuron`), bf16, evaluation steps,
`torch_compile=True` -- whose model is sharded at load by Transformers'
`DistributedConfig(tp_size=..., fsdp_size=...)`.  Nothing in the training
code names the device: Transformers, Accelerate and TRL pick `neuron` by
themselves, and torch.compile's default backend compiles neuron graphs with
the neuron compiler.  --lora trains LoRA adapters (r 32, alpha 16) instead
of every weight.

Two modes:

  values  a tiny Qwen3 config on 4 ranks (TP 2 x FSDP 2), every value computed:

            torchrun --nproc-per-node 4 examples/sft_distributed.py --mode values

          Rank 0 then runs the same global batch in one CPU process and prints
          both loss curves, and reloads the saved checkpoint on the CPU to
          compare it with the trained weights.

  timing  Qwen3-1.7B's real dimensions on 32 ranks (TP 4 x FSDP 8) in ONE host
          process standing for every rank (torch_neuronsim.distributed.
          SymmetricStore; NEURON_SIM_MODE=timing: nothing is computed, the
          weights are a zero checkpoint written once):

            python3 examples/sft_distributed.py --mode timing

Per step it prints the predicted trn2 step time (rank 0's simulated device
clock over the step), tokens/s over all ranks, MFU (model FLOPs: 6 x
parameters per token plus attention's 12 x layers x heads x head_dim x
sequence, or 4 x parameters under LoRA, whose frozen weights get no
gradient; against the chip's bf16 TensorE peak per rank), the communication
the compute stream stood still for (exposed) and the host time the step
took.  Nothing is downloaded: the model comes from a config, the tokenizer
is a word-level one built here and the dataset is made in memory (rows of
exactly --seq tokens, so every step processes batch x seq tokens per rank).

Limits of the pinned libraries, not of the device: PEFT 0.21.2 cannot shard
LoRA adapters on a 2-D (FSDP x TP) mesh (the first forward fails on the CPU
with Gloo as well), so --lora needs --tp 1 or --fsdp 1."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def _mode(argv):
    """--mode's value, read before torch is imported (timing mode must be
    set before the runtime starts)"""
    for i, a in enumerate(argv):
        if a == "--mode" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--mode="):
            return a.split("=", 1)[1]
    return "values"


if _mode(sys.argv[1:]) == "timing":       # nothing computed
    os.environ.setdefault("NEURON_SIM_MODE", "timing")

import torch  # noqa: E402
import transformers as T  # noqa: E402
from datasets import Dataset  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402

import neuronsim  # noqa: E402
import torch_neuronsim  # noqa: E402

TINY = dict(vocab_size=160, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, num_hidden_layers=2, max_position_embeddings=512, tie_word_embeddings=False)
# Qwen3-1.7B (config.json of Qwen/Qwen3-1.7B)
QWEN3_1_7B = dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_attention_heads=16,
                  num_key_value_heads=8, head_dim=128, num_hidden_layers=28, max_position_embeddings=40960,
                  tie_word_embeddings=True, rope_theta=1000000.0)


def rank():
    return int(os.environ.get("RANK", "0"))


def word_tokenizer(vocab):
    words = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{f"w{i}": i for i in range(3, min(vocab, 4096))}}
    tk = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return T.PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def dataset(rows, seq, seed):
    """sentences of a small repeating grammar (so the loss has something to
    learn), each longer than seq words: every row is truncated to seq tokens"""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(rows):
        start = int(torch.randint(3, 100, (1,), generator=g))
        out.append({"text": " ".join(f"w{start + (i % 32)}" for i in range(seq + 8))})
    return Dataset.from_list(out)


def checkpoint(path, cfg, zeros):
    """a standard checkpoint of a Qwen3 of config cfg: random weights, or
    zeros (timing mode: written tensor by tensor from a meta-device model,
    never holding the model in host memory twice).  Rank 0 writes it; the
    others wait for it: it exists before any process group does."""
    done = os.path.join(path, "READY")
    if rank() == 0 and not os.path.exists(done):
        os.makedirs(path, exist_ok=True)
        config = T.Qwen3Config(**cfg, pad_token_id=0, eos_token_id=1)
        if zeros:
            from safetensors.torch import save_file
            with torch.device("meta"):
                model = T.Qwen3ForCausalLM(config)
            tensors = {k: torch.zeros(v.shape, dtype=torch.bfloat16) for k, v in model.state_dict().items()
                       if not (cfg["tie_word_embeddings"] and k == "lm_head.weight")}
            save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
            config.save_pretrained(path)
        else:
            torch.manual_seed(0)
            T.Qwen3ForCausalLM(config).save_pretrained(path)
        word_tokenizer(cfg["vocab_size"]).save_pretrained(path)
        open(done, "w").close()
    while not os.path.exists(done):
        time.sleep(0.2)
    return path


def model_flops_per_token(cfg, params, seq, lora):
    """training FLOPs per token: 6 x parameters (forward 2, backward 4; 4
    under LoRA: no gradients of frozen weights) plus attention's scores and
    values, 12 x layers x heads x head_dim x sequence (PaLM's MFU, appendix B)"""
    attn = 12 * cfg["num_hidden_layers"] * cfg["num_attention_heads"] * cfg["head_dim"] * seq
    return (4 if lora else 6) * params + attn


class StepReport(T.TrainerCallback):
    """per optimizer step: rank 0's simulated step time, tokens/s and MFU
    over all ranks, exposed communication, host time"""

    def __init__(self, tokens_per_step, flops_per_token, ranks):
        self.tokens, self.flops, self.ranks = tokens_per_step, flops_per_token, ranks
        torch.neuron.device_count()              # the runtime is up: the chip's figures
        self.peak = neuronsim.chip_info()["peak_flops_per_second"]
        self.rows = []

    def on_step_begin(self, args, state, control, **kw):
        self.start = torch.neuron.Event(enable_timing=True)
        self.start.record()
        self.exposed0 = torch_neuronsim.stats()["collective_exposed_ns"]
        self.host0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        end = torch.neuron.Event(enable_timing=True)
        end.record()
        step_s = self.start.elapsed_time(end) / 1e3
        row = {"step": state.global_step, "step_ms": step_s * 1e3,
               "tokens_per_s": self.tokens / step_s if step_s else 0.0,
               "mfu_pct": 100 * self.tokens * self.flops / step_s / (self.peak * self.ranks) if step_s else 0.0,
               "exposed_comm_ms": (torch_neuronsim.stats()["collective_exposed_ns"] - self.exposed0) / 1e6,
               "host_s": time.perf_counter() - self.host0}
        self.rows.append(row)
        if rank() == 0:
            print(f"[step {row['step']}] trn2 {row['step_ms']:.3f} ms | {row['tokens_per_s']:.0f} tokens/s | "
                  f"MFU {row['mfu_pct']:.2f}% | exposed comm {row['exposed_comm_ms']:.3f} ms | "
                  f"host {row['host_s']:.1f} s", flush=True)


def train(args):
    from peft import LoraConfig
    from trl import SFTConfig, SFTTrainer

    timing = args.mode == "timing"
    cfg = QWEN3_1_7B if timing else TINY
    tp, fsdp = (1, 1) if args.reference else (args.tp, args.fsdp)
    if timing:
        # one process for every rank: its groups move no data and charge the
        # collective model's time for their real size
        import torch.distributed as dist
        from torch_neuronsim.distributed import SymmetricStore
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE=str(tp * fsdp), LOCAL_WORLD_SIZE="1")
        dist.init_process_group("neuron", store=SymmetricStore(), rank=0, world_size=tp * fsdp)
    ckpt = checkpoint(args.checkpoint, cfg, zeros=timing)
    tok = T.AutoTokenizer.from_pretrained(ckpt)
    kw = {} if args.reference else {"distributed_config": T.DistributedConfig(tp_size=tp, fsdp_size=fsdp)}
    model = T.AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.bfloat16, **kw)
    batch = args.batch * (args.fsdp if args.reference else 1)        # the same global batch
    out = tempfile.mkdtemp(prefix="sft-")
    config = SFTConfig(output_dir=out, max_steps=args.steps, per_device_train_batch_size=batch,
                       per_device_eval_batch_size=batch, learning_rate=1e-3, lr_scheduler_type="constant",
                       logging_steps=1, eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no",
                       bf16=True, torch_compile=not (args.reference or args.eager), report_to=[], seed=0,
                       data_seed=0, dataloader_drop_last=True, use_cpu=args.reference, max_length=args.seq,
                       disable_tqdm=True)
    lora = LoraConfig(r=32, lora_alpha=16, lora_dropout=0.0, task_type="CAUSAL_LM") if args.lora else None
    with torch.device("meta"):          # the whole model's parameters, however it is sharded
        params = sum(p.numel() for p in T.Qwen3ForCausalLM(T.Qwen3Config(**cfg)).parameters())
    dp = 1 if args.reference else fsdp
    report = StepReport(tokens_per_step=args.batch * fsdp * args.seq if not args.reference else batch * args.seq,
                        flops_per_token=model_flops_per_token(cfg, params, args.seq, args.lora),
                        ranks=tp * dp)
    rows = args.steps * batch * dp
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset(rows, args.seq, 1),
                         eval_dataset=dataset(2 * batch * dp, args.seq, 2), processing_class=tok, peft_config=lora,
                         callbacks=[report])
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    evals = [h["eval_loss"] for h in trainer.state.log_history if "eval_loss" in h]
    final = os.path.join(out, "final")
    trainer.save_model(final)
    return trainer, losses, evals, final, report.rows, config


def full_state(model):
    """the trained weights as whole CPU tensors (a collective under FSDP / TP)"""
    from torch.distributed.tensor import DTensor
    return {k: (v.full_tensor() if isinstance(v, DTensor) else v).detach().cpu()
            for k, v in model.state_dict().items()}


def print_table(rows, host_total):
    print("| step | trn2 step ms | tokens/s | MFU % | exposed comm ms | host s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['step']} | {r['step_ms']:.3f} | {r['tokens_per_s']:.0f} | {r['mfu_pct']:.2f} | "
              f"{r['exposed_comm_ms']:.3f} | {r['host_s']:.1f} |")
    print(f"host time: {host_total:.1f} s in all")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("values", "timing"), default="values")
    p.add_argument("--tp", type=int, default=None, help="tensor-parallel size (values 2, timing 4)")
    p.add_argument("--fsdp", type=int, default=None, help="FSDP size (values 2, timing 8)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--eval-steps", type=int, default=2)
    p.add_argument("--batch", type=int, default=None, help="per-device batch (values 2, timing 1)")
    p.add_argument("--seq", type=int, default=None, help="tokens per row (values 128, timing 1024)")
    p.add_argument("--lora", action="store_true", help="LoRA (r 32, alpha 16) instead of full fine-tuning")
    p.add_argument("--eager", action="store_true", help="without torch.compile")
    p.add_argument("--checkpoint", help="where the generated checkpoint lives (default: a temp dir per mode)")
    p.add_argument("--reference", action="store_true", help=argparse.SUPPRESS)   # the CPU comparison run
    p.add_argument("--json", help="write the losses, step rows and checks here")
    args = p.parse_args()
    timing = args.mode == "timing"
    for k, values_default, timing_default in (("tp", 2, 4), ("fsdp", 2, 8), ("batch", 2, 1), ("seq", 128, 1024)):
        if getattr(args, k) is None:
            setattr(args, k, timing_default if timing else values_default)
    if args.checkpoint is None:
        args.checkpoint = os.path.join(tempfile.gettempdir(), f"neuronsim-sft-qwen3-{args.mode}")
    if args.seq % 128:
        p.error("--seq must be a multiple of 128 (TRL pads to multiples of 128 on neuron)")
    if args.lora and args.tp > 1 and args.fsdp > 1 and not args.reference:
        p.error("--lora on a TP x FSDP mesh: PEFT 0.21.2 cannot shard adapters on a 2-D mesh (it fails on the "
                "CPU too); use --tp 1 or --fsdp 1 with --lora, or full fine-tuning")
    host0 = time.perf_counter()
    trainer, losses, evals, final, rows, config = train(args)
    result = {"losses": losses, "evals": evals, "checkpoint": final, "steps": rows,
              "fallbacks": torch_neuronsim.stats()["cpu_fallbacks"], "compile": torch_neuronsim.stats()["compile"],
              "gradient_checkpointing": config.gradient_checkpointing, "torch_compile": config.torch_compile}
    if not args.reference and not timing:
        weights = full_state(trainer.model)
    if rank() == 0 and not args.reference:
        print_table(rows, time.perf_counter() - host0)
    if rank() == 0 and not args.reference and not timing:
        # the same global batch in one CPU process, and the checkpoint on the CPU
        ref_json = os.path.join(tempfile.mkdtemp(prefix="sft-ref-"), "ref.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--reference", "--json", ref_json,
               *(f"--{k}={getattr(args, k)}" for k in ("tp", "fsdp", "steps", "batch", "seq")),
               f"--eval-steps={args.eval_steps}", f"--checkpoint={args.checkpoint}"]
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE",
                                                               "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        with open(ref_json) as f:
            ref = json.load(f)
        rel = max(abs(a - b) / abs(b) for a, b in zip(losses + evals, ref["losses"] + ref["evals"]))
        reloaded = T.AutoModelForCausalLM.from_pretrained(final, dtype=torch.bfloat16).state_dict()
        same = all(torch.equal(reloaded[k], v) for k, v in weights.items() if k in reloaded)
        result.update(reference_losses=ref["losses"], reference_evals=ref["evals"], max_rel_diff=rel,
                      reload_identical=same and set(weights) >= set(reloaded))
        print("losses     ", [f"{x:.5f}" for x in losses], "evals", [f"{x:.5f}" for x in evals])
        print("CPU (1 proc)", [f"{x:.5f}" for x in ref["losses"]], "evals", [f"{x:.5f}" for x in ref["evals"]])
        print(f"max relative difference {rel:.2e}; checkpoint reloads on the CPU with identical weights: "
              f"{result['reload_identical']}; CPU fallbacks {result['fallbacks']}")
    if args.json and rank() == 0:
        with open(args.json, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    sys.exit(main())
