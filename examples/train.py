"""Supervised fine-tuning of a tiny Llama on the simulated `neuron` device.

A plain TRL SFTTrainer script -- no device argument anywhere: Transformers
and Accelerate pick `neuron` by themselves (see the README's Training
section).  The model is built from a config (random weights) and the
dataset is made in memory, so nothing is downloaded.  Each logged step
prints the loss, the simulated device time of the step on one NeuronCore
and the engines' utilization over its programs' run time; at the end, the
CPU fallbacks (0 expected) and a reload of the saved checkpoint on the CPU.

Run: python3 examples/train.py [--lora] [--steps N] [--bf16 | --fp32]"""
import argparse
import os
import tempfile

import torch
import transformers as T
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from trl import SFTConfig, SFTTrainer

import torch_neuronsim
from neuronsim import ENGINES   # the ISA's engine table


def tiny_llama(vocab):
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=vocab, hidden_size=256, intermediate_size=1024, num_attention_heads=4,
                        num_key_value_heads=2, num_hidden_layers=2, pad_token_id=0, eos_token_id=1)
    return T.LlamaForCausalLM(cfg)


def word_tokenizer(vocab):
    words = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{f"w{i}": i for i in range(3, vocab)}}
    tk = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return T.PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def dataset(vocab, rows=64, length=128):
    """sentences of a small repeating grammar, so the loss has something to learn"""
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(rows):
        start = int(torch.randint(3, vocab - 40, (1,), generator=g))
        words = [f"w{start + (i % 32)}" for i in range(length - 1)]
        out.append({"text": " ".join(words)})
    return Dataset.from_list(out)


class SimulatedStep(T.TrainerCallback):
    """per logged step: loss, simulated step time, engine utilization"""

    def on_step_begin(self, args, state, control, **kw):
        torch_neuronsim.reset_stats()

    def on_step_end(self, args, state, control, **kw):
        s = torch_neuronsim.stats()
        self.last = s

    def on_log(self, args, state, control, logs=None, **kw):
        s = getattr(self, "last", None)
        if not logs or "loss" not in logs or s is None:
            return
        run = max(1, s["kernel_time_ns"] * 1000)
        util = ", ".join(f"{e} {100 * s[e + '_busy_ps'] / run:.0f}%" for e in ENGINES)
        util += f"; DMA active {100 * s['dma_active_ps'] / run:.0f}%"
        print(f"step {state.global_step:3d}  loss {logs['loss']:.4f}  simulated step "
              f"{s['simulated_time_ns'] / 1e3:9.1f} us ({s['programs_executed']} programs, kernels "
              f"{s['kernel_time_ns'] / 1e3:.1f} us)  engines: {util}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--lora", action="store_true", help="train LoRA adapters (PEFT) instead of every weight")
    ap.add_argument("--fp32", action="store_true", help="fp32 instead of SFTConfig's bf16 default")
    args = ap.parse_args()
    vocab = 1000
    model = tiny_llama(vocab)
    peft_config = None
    if args.lora:
        from peft import LoraConfig
        peft_config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                                 lora_dropout=0.0, task_type="CAUSAL_LM")
    out_dir = tempfile.mkdtemp(prefix="neuronsim-sft-")
    config = SFTConfig(output_dir=out_dir, per_device_train_batch_size=4, max_steps=args.steps, logging_steps=1,
                       save_steps=args.steps, report_to=[], learning_rate=2e-3 if args.lora else 1e-3,
                       max_length=128, **({"bf16": False} if args.fp32 else {}))
    print(f"device {config.device}, bf16 {config.bf16}, {'LoRA' if args.lora else 'full'} fine-tuning, "
          f"target {torch_neuronsim.target()}")
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset(vocab), processing_class=word_tokenizer(vocab),
                         peft_config=peft_config, callbacks=[SimulatedStep()])
    torch_neuronsim.reset_stats()
    trainer.train()
    fallbacks = torch_neuronsim.stats()["fallback_ops"]
    print(f"CPU fallbacks in the last step: {sum(fallbacks.values())} {fallbacks or ''}")
    ckpt = os.path.join(out_dir, f"checkpoint-{args.steps}")
    if not args.lora:
        reloaded = T.LlamaForCausalLM.from_pretrained(ckpt)
        trained = {k: v.detach().cpu() for k, v in trainer.model.state_dict().items()}
        same = all(torch.equal(v, trained[k].to(v.dtype)) for k, v in reloaded.state_dict().items())
        print(f"checkpoint {ckpt} reloads on {next(reloaded.parameters()).device}: weights identical: {same}")
    else:
        print(f"adapter checkpoint: {ckpt}")


if __name__ == "__main__":
    main()
