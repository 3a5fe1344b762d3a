"""Unmodified Hugging Face training scripts on `neuron`: Transformers'
Trainer and TRL's SFTTrainer (bf16, its default) pick the device by
themselves (no device argument anywhere), train natively, and save
checkpoints that load on the CPU with the trained weights; PEFT LoRA trains
only the adapters.  The torch_neuronx stand-in never hides an installed
torch_neuronx."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import transformers as T
from datasets import Dataset

import torch_neuronsim

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def tiny_llama():
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=1000, hidden_size=128, intermediate_size=256, num_attention_heads=4,
                        num_key_value_heads=2, num_hidden_layers=2, pad_token_id=0)
    return T.LlamaForCausalLM(cfg)


def token_rows(n=16, length=128):
    g = torch.Generator().manual_seed(0)
    return [{"input_ids": torch.randint(3, 1000, (length,), generator=g).tolist()} for _ in range(n)]


def word_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{f"w{i}": i for i in range(3, 1000)}}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return T.PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def cpu_state(model):
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def train_strict(trainer, monkeypatch):
    """trainer.train() under NEURON_STRICT=1; the plugin's stats of the run"""
    monkeypatch.setenv("NEURON_STRICT", "1")
    torch_neuronsim.reset_stats()
    trainer.train()
    monkeypatch.delenv("NEURON_STRICT")
    s = torch_neuronsim.stats()
    assert s["cpu_fallbacks"] == 0, s["fallback_ops"]
    return s


def test_trainer_picks_neuron_trains_natively_and_saves_a_cpu_checkpoint(tmp_path, monkeypatch):
    model = tiny_llama()
    before = cpu_state(model)
    ds = Dataset.from_list([dict(r, labels=r["input_ids"]) for r in token_rows()])
    args = T.TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4, max_steps=3,
                               logging_steps=1, save_steps=3, report_to=[], learning_rate=1e-3)
    assert args.device.type == "neuron"
    trainer = T.Trainer(model=model, args=args, train_dataset=ds)
    train_strict(trainer, monkeypatch)
    assert next(model.parameters()).device.type == "neuron"
    after = cpu_state(model)
    assert any(not torch.equal(before[k], after[k]) for k in after)
    reloaded = T.LlamaForCausalLM.from_pretrained(str(tmp_path / "checkpoint-3"))
    assert next(reloaded.parameters()).device.type == "cpu"
    for k, v in cpu_state(reloaded).items():
        assert torch.equal(v, after[k]), k
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 3 and all(l == l for l in losses)


def test_sft_trainer_trains_in_bf16_on_neuron(tmp_path, monkeypatch):
    from trl import SFTConfig, SFTTrainer
    args = SFTConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, max_steps=2, logging_steps=1,
                     save_steps=2, report_to=[])
    assert args.bf16 and args.device.type == "neuron"
    model = tiny_llama()
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(token_rows(length=100)),
                         processing_class=word_tokenizer())
    s = train_strict(trainer, monkeypatch)
    assert s["native_ops"]["aten::mm"]["count"] > 0
    reloaded = T.LlamaForCausalLM.from_pretrained(str(tmp_path / "checkpoint-2"))
    trained = cpu_state(model)
    for k, v in cpu_state(reloaded).items():
        assert torch.equal(v, trained[k].to(v.dtype)), k


def test_peft_lora_trains_only_the_adapters(tmp_path, monkeypatch):
    from peft import LoraConfig, get_peft_model
    model = get_peft_model(tiny_llama(), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                    lora_dropout=0.0, task_type="CAUSAL_LM"))
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    ds = Dataset.from_list([dict(r, labels=r["input_ids"]) for r in token_rows(8)])
    args = T.TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4, max_steps=2,
                               report_to=[], learning_rate=1e-2, save_strategy="no")
    train_strict(T.Trainer(model=model, args=args, train_dataset=ds), monkeypatch)
    changed = {k for k, v in model.named_parameters() if not torch.equal(v.detach().cpu(), before[k].cpu())}
    assert changed and all("lora_" in k for k in changed), changed
    assert any("lora_A" in k for k in changed) and any("lora_B" in k for k in changed)


def test_device_map_auto_places_a_checkpoint_on_neuron(tmp_path):
    """from_pretrained(device_map="auto"): Accelerate spreads the layers over
    the NeuronCores (its balanced map), and the forward gives CPU's logits.
    Activations crossing cores move as DMA programs, not through the host."""
    model = tiny_llama()
    model.save_pretrained(str(tmp_path))
    ids = torch.randint(0, 1000, (1, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = model(ids).logits
        placed = T.AutoModelForCausalLM.from_pretrained(str(tmp_path), device_map="auto")
        devices = {p.device.type for p in placed.parameters()}
        first = next(placed.parameters()).device
        x = ids.to(first)
        before = torch_neuronsim.stats()["cpu_fallbacks"]
        got = placed(x).logits
        fallbacks = torch_neuronsim.stats()["cpu_fallbacks"] - before
    assert devices == {"neuron"} and set(placed.hf_device_map.values()) <= set(range(8))
    assert len({p.device for p in placed.parameters()}) > 1, placed.hf_device_map
    assert fallbacks == 0
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)


def run_python(code, env_extra=None, path_extra=None):
    env = dict(os.environ, NEURON_SIM="1", **(env_extra or {}))
    if path_extra:
        env["PYTHONPATH"] = os.pathsep.join([path_extra, env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


DETECT = """
    import torch, importlib.util
    from transformers.utils import is_torch_neuron_available
    from accelerate.utils import is_neuron_available
    spec = importlib.util.find_spec("torch_neuronx")
    print(spec.origin if spec else None, is_torch_neuron_available(), is_neuron_available())
"""


def test_libraries_detect_the_simulated_device_through_the_standin():
    origin, hf, acc = run_python(DETECT).split()
    assert origin.endswith(os.path.join("torch_neuronsim", "neuronx.py")) and hf == acc == "True"


def test_an_installed_torch_neuronx_is_never_shadowed(tmp_path):
    real = tmp_path / "torch_neuronx"
    real.mkdir()
    (real / "__init__.py").write_text("REAL = True\n")
    origin, _, _ = run_python(DETECT, path_extra=str(tmp_path)).split()
    assert origin == str(real / "__init__.py")


def test_the_standin_can_be_turned_off():
    origin, hf, acc = run_python(DETECT, env_extra={"NEURONSIM_TORCH_NEURONX": "0"}).split()
    assert origin == "None" and hf == acc == "False"


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_the_training_example_runs(lora):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cmd = [sys.executable, os.path.join(root, "examples", "train.py"), "--steps", "2"] + (["--lora"] if lora else [])
    r = subprocess.run(cmd, env=dict(os.environ, NEURON_SIM="1"), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "device neuron:0, bf16 True" in out
    assert out.count("loss ") == 2 and "simulated step" in out and "engines: tensor" in out
    assert "CPU fallbacks in the last step: 0" in out
    assert ("adapter checkpoint" in out) if lora else ("weights identical: True" in out)


def test_the_seed_scenario_in_values_mode_matches_one_cpu_process(tmp_path):
    """examples/sft_distributed.py on 4 ranks (TP 2 x FSDP 2) under torchrun:
    TRL's SFTTrainer with evaluation steps, torch_compile=True (no backend
    named) and TRL's gradient checkpointing, NEURON_STRICT=1 -- no CPU
    fallback, the losses of one CPU process with the same global batch, and
    a checkpoint that loads on the CPU with the trained weights"""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = tmp_path / "result.json"
    env = dict(os.environ, NEURON_SIM="1", NEURON_STRICT="1", NEURON_SIM_COMPILE_CACHE_DIR="off")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
                        os.path.join(root, "examples", "sft_distributed.py"), "--mode", "values",
                        "--checkpoint", str(tmp_path / "ckpt"), "--json", str(out)],
                       env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-4000:]
    import json
    res = json.loads(out.read_text())
    assert res["fallbacks"] == 0 and res["gradient_checkpointing"] and res["torch_compile"]
    assert res["compile"]["graphs_compiled"] > 0
    assert len(res["losses"]) == 3 and len(res["evals"]) == 2
    assert res["max_rel_diff"] < 1e-3, (res["losses"], res["reference_losses"])
    assert res["reload_identical"]
    assert [row["step"] for row in res["steps"]] == [1, 2, 3] and all(row["step_ms"] > 0 for row in res["steps"])
