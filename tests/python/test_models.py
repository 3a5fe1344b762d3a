"""Transformers models built from configs (random weights, no download) on
the `neuron` device: forward passes of Llama, Qwen2, GPT-2 and BERT run with
zero CPU fallbacks under NEURON_STRICT=1 in fp32 and bf16 and match CPU;
greedy generation with a static cache matches CPU's tokens; the `neuron`
torch.compile backend gives eager's values."""
import pytest
import torch
import transformers as T

import torch_neuronsim

NEURON = torch.device("neuron")


def build(name):
    small = dict(vocab_size=1000, num_hidden_layers=2)
    if name == "llama":
        cfg = T.LlamaConfig(hidden_size=128, intermediate_size=256, num_attention_heads=4,
                            num_key_value_heads=2, **small)
        return T.LlamaForCausalLM(cfg)
    if name == "qwen2":
        cfg = T.Qwen2Config(hidden_size=128, intermediate_size=256, num_attention_heads=4,
                            num_key_value_heads=2, **small)
        return T.Qwen2ForCausalLM(cfg)
    if name == "gpt2":
        cfg = T.GPT2Config(vocab_size=1000, n_embd=128, n_layer=2, n_head=4, n_positions=256,
                           bos_token_id=0, eos_token_id=0)
        return T.GPT2LMHeadModel(cfg)
    cfg = T.BertConfig(hidden_size=128, intermediate_size=256, num_attention_heads=4, **small)
    return T.BertModel(cfg)


TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.bfloat16: dict(rtol=5e-2, atol=5e-2)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", ["llama", "qwen2", "gpt2", "bert"])
def test_forward_is_native_and_matches_cpu(name, dtype, monkeypatch):
    torch.manual_seed(0)
    model = build(name).eval().to(dtype)
    ids = torch.randint(0, 1000, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, :3] = 0                       # a padded sequence: the attention mask path
    with torch.no_grad():
        want = model(ids, attention_mask=mask)[0]
        model.to(NEURON)
        monkeypatch.setenv("NEURON_STRICT", "1")
        torch_neuronsim.reset_stats()
        got = model(ids.to(NEURON), attention_mask=mask.to(NEURON))[0]
        s = torch_neuronsim.stats()
    assert s["cpu_fallbacks"] == 0, s["fallback_ops"]
    assert "aten::mm" in s["native_ops"] or "aten::addmm" in s["native_ops"]
    assert got.dtype == want.dtype and got.shape == want.shape
    # padded rows of a causal model see only their own tokens; compare all
    torch.testing.assert_close(got.cpu().float(), want.float(), **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", ["llama", "qwen2", "gpt2"])
def test_greedy_generate_with_static_cache_is_native(name, dtype, monkeypatch):
    """generate() under NEURON_STRICT=1: the model steps and the loop's
    integer bookkeeping (stopping criteria, int64 masks) all on the device.
    fp32 tokens equal CPU's; bf16 ones must each be a CPU greedy choice for
    their prefix (teacher-forced), as near-tied logits may round either way."""
    torch.manual_seed(0)
    model = build(name).eval().to(dtype)
    ids = torch.randint(1, 1000, (1, 10))
    gen = dict(max_new_tokens=6, do_sample=False, cache_implementation="static", pad_token_id=0)
    with torch.no_grad():
        want = model.generate(ids, **gen)
        model.to(NEURON)
        monkeypatch.setenv("NEURON_STRICT", "1")
        torch_neuronsim.reset_stats()
        got = model.generate(ids.to(NEURON), **gen).cpu()
        s = torch_neuronsim.stats()
        monkeypatch.delenv("NEURON_STRICT")
        model.to("cpu")
        logits = model(got).logits[0, 9:-1].float()
    assert s["cpu_fallbacks"] == 0, s["fallback_ops"]
    assert s["native_ops"]["aten::index_copy"]["count"] > 0      # the static cache update
    assert s["native_ops"]["aten::argmax"]["count"] >= 6         # greedy picks
    if dtype == torch.float32:
        assert torch.equal(got, want)
    chosen = logits.gather(1, got[0, 10:, None])[:, 0]
    assert (logits.max(dim=1).values - chosen).max() <= (1e-4 if dtype == torch.float32 else 0.25)


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_sampling_generate_is_native_and_repeatable(name, monkeypatch):
    """generate(do_sample=True) with temperature, top-k and top-p under
    NEURON_STRICT=1: the softmax, top-k filter, top-p's full-vocabulary sort
    and scatter, and the multinomial draw run on the device, and the same
    torch seed gives the same tokens."""
    torch.manual_seed(0)
    model = build(name).eval().to(NEURON)
    ids = torch.randint(1, 1000, (2, 8)).to(NEURON)
    gen = dict(max_new_tokens=5, do_sample=True, temperature=0.7, top_k=20, top_p=0.9,
               cache_implementation="static", pad_token_id=0, attention_mask=torch.ones_like(ids))
    monkeypatch.setenv("NEURON_STRICT", "1")
    runs = []
    with torch.no_grad():
        for _ in range(2):
            torch.manual_seed(123)
            torch_neuronsim.reset_stats()
            runs.append(model.generate(ids, **gen).cpu())
            s = torch_neuronsim.stats()
            assert s["cpu_fallbacks"] == 0, s["fallback_ops"]
            assert s["native_ops"]["aten::multinomial"]["count"] >= 5  # the draws
            assert s["native_ops"]["aten::sort"]["count"] >= 5         # top-p
    assert torch.equal(runs[0], runs[1])
    assert runs[0].shape == (2, 13)
    # each sampled token is among the top 20 logits of its prefix
    with torch.no_grad():
        logits = model(runs[0].to(NEURON)).logits.cpu()[:, 7:-1].float()
    top = logits.topk(20, dim=-1).indices
    assert (top == runs[0][:, 8:, None]).any(-1).all()


def test_compile_backend_matches_eager():
    torch.manual_seed(0)
    model = build("llama").eval().to(NEURON)
    ids = torch.randint(0, 1000, (1, 8)).to(NEURON)
    with torch.no_grad():
        eager = model(ids).logits.cpu()
        compiled = torch.compile(model, backend="neuron")
        torch_neuronsim.reset_stats()
        got = compiled(ids).logits.cpu()
    assert torch.equal(got, eager)
    assert torch_neuronsim.stats()["native_ops"]["aten::mm"]["count"] > 0
