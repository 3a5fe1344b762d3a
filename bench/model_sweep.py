"""One architecture of the sweep (bench/models.py): its default config shrunk
to a tiny model, run on the CPU and on `neuron`, compared.

    python3 bench/model_sweep.py ARCH        one architecture, its result as JSON
    python3 bench/model_sweep.py --worker    architectures from stdin, a JSON line each

`tiny_config(model_type)` is also what the tests build their tiny MoE / SSM
models from."""
import json
import re
import sys
import traceback

# size fields by name pattern -> the tiny value (a field is cut, never grown)
_SIZES = [
    (r"^(num_hidden_layers|n_layers?|num_layers|decoder_layers|num_decoder_layers|n_layer)$", 2),
    (r"^(encoder_layers|num_encoder_layers)$", 2),
    (r"^(hidden_size|d_model|n_embd|embed_dim|model_dim|dim|word_embed_proj_dim|text_hidden_size|"
     r"embedding_dim|attention_hidden_size)$", 64),
    (r"^(num_blocks)$", 2),
    (r"^(rotary_dim)$", 16),
    (r"^(attn_layer_period)$", 2),
    (r"^(mamba_dt_rank)$", 8),
    (r"^(n_groups|mamba_n_groups|mamba_ngroups)$", 1),
    (r"^(intermediate_size|intermediate_size_mlp|ffn_dim|n_inner|ffn_hidden_size|d_ff|inner_hidden_size|decoder_ffn_dim|"
     r"encoder_ffn_dim|hidden_dim|mlp_dim)$", 128),
    (r"^(moe_intermediate_size|shared_expert_intermediate_size|expert_intermediate_size|"
     r"moe_ffn_hidden_size|ffn_hidden_size_moe)$", 64),
    (r"^(num_attention_heads|n_head|num_heads|n_heads|encoder_attention_heads|decoder_attention_heads)$", 4),
    (r"^(num_key_value_heads|n_kv_heads|num_kv_heads|multi_query_group_num|n_head_kv|num_kv)$", 2),
    (r"^(head_dim|kv_channels|attention_head_size|qk_nope_head_dim|qk_rope_head_dim|v_head_dim|"
     r"attention_head_dim|global_head_dim)$", 16),
    (r"^(q_lora_rank|kv_lora_rank|index_head_dim)$", 32),
    (r"^(num_experts|n_routed_experts|num_local_experts|moe_num_experts|num_routed_experts)$", 4),
    (r"^(num_experts_per_tok|moe_topk|num_experts_per_token|moe_k|top_k|n_group|topk_group)$", 2),
    (r"^(n_shared_experts|num_shared_experts|moe_num_shared_experts)$", 1),
    (r"^(state_size|ssm_state_size|mamba_d_state)$", 16),
    (r"^(mamba_n_heads|mamba_num_heads|linear_num_value_heads|linear_num_key_heads)$", 4),
    (r"^(mamba_d_head|mamba_head_dim|linear_key_head_dim|linear_value_head_dim)$", 16),
    (r"^(time_step_rank)$", 8),
    (r"^(max_position_embeddings|n_positions|n_ctx|max_sequence_length|seq_length)$", 256),
    (r"^(sliding_window|attention_window|local_window_size)$", 64),
]
_SIZE_RES = [(re.compile(p), v) for p, v in _SIZES]


def _shrink(cfg, seen):
    """cuts every size field of cfg (and its sub-configs) in place; per-layer
    lists follow the new layer count"""
    if id(cfg) in seen:
        return
    seen.add(id(cfg))
    # multi-head (not grouped) attention stays so: kv heads = heads after the cut
    mha = getattr(cfg, "num_key_value_heads", None) == getattr(cfg, "num_attention_heads", 0)
    old_layers = {}
    for key in list(vars(cfg)):
        val = getattr(cfg, key, None)
        if hasattr(val, "to_dict") and hasattr(val, "model_type"):
            _shrink(val, seen)
            continue
        if isinstance(val, bool) or not isinstance(val, int):
            continue
        for rx, tiny in _SIZE_RES:
            if rx.match(key) and val > tiny:
                if "layer" in key:
                    old_layers[key] = val
                setattr(cfg, key, tiny)
                break
    if mha and isinstance(getattr(cfg, "num_attention_heads", None), int):
        cfg.num_key_value_heads = cfg.num_attention_heads
    # a period / offset pattern of layer kinds: the second of the two layers
    # takes the other kind
    if isinstance(getattr(cfg, "attn_layer_offset", None), int):
        cfg.attn_layer_offset = 1
    # lists with an entry per layer (layer_types, per-layer windows...): the
    # first layer and the first of another kind, so hybrids keep both kinds
    for old in set(old_layers.values()):
        keep = None
        for key in sorted(vars(cfg)):
            val = getattr(cfg, key, None)
            if isinstance(val, (list, tuple)) and len(val) == old and old > 2 and keep is None and \
                    all(isinstance(v, str) for v in val):
                keep = [0, next((i for i, v in enumerate(val) if v != val[0]), 1)]
        keep = keep or [0, 1]
        for key in list(vars(cfg)):
            val = getattr(cfg, key, None)
            if isinstance(val, (list, tuple)) and len(val) == old and old > 2:
                setattr(cfg, key, type(val)(val[i] for i in keep))
    # state-space blocks: heads x head size = expand x hidden
    hidden, expand = getattr(cfg, "hidden_size", None), getattr(cfg, "expand", getattr(cfg, "mamba_expand", None))
    if isinstance(hidden, int) and isinstance(expand, int):
        for heads, dim in (("num_heads", "head_dim"), ("mamba_n_heads", "mamba_d_head"),
                           ("mamba_num_heads", "mamba_head_dim"), ("n_mamba_heads", "mamba_headdim")):
            h = getattr(cfg, heads, None)
            if isinstance(h, int) and isinstance(getattr(cfg, dim, None), int) and (expand * hidden) % h == 0:
                setattr(cfg, dim, expand * hidden // h)
        if isinstance(getattr(cfg, "mamba_d_ssm", None), int):
            cfg.mamba_d_ssm = expand * hidden
    # attention fields a default config leaves None for its __init__ to
    # derive (which the model reads before that happens): the usual values
    heads = getattr(cfg, "num_attention_heads", None)
    if isinstance(heads, int) and isinstance(hidden, int) and heads:
        if hasattr(cfg, "head_dim") and cfg.head_dim is None:
            cfg.head_dim = hidden // heads
        if hasattr(cfg, "num_key_value_heads") and cfg.num_key_value_heads is None:
            cfg.num_key_value_heads = heads
    # a MoE config whose expert counts are left None (dots1): a small router
    if getattr(cfg, "n_routed_experts", 0) is None and isinstance(getattr(cfg, "moe_intermediate_size", None), int):
        cfg.n_routed_experts = 4
        if getattr(cfg, "n_shared_experts", 0) is None:
            cfg.n_shared_experts = 1
    # a router the default config leaves without its k
    experts = getattr(cfg, "n_routed_experts", getattr(cfg, "num_experts", None))
    if isinstance(experts, int) and hasattr(cfg, "num_experts_per_tok") and cfg.num_experts_per_tok is None:
        cfg.num_experts_per_tok = 2


def tiny_config(model_type):
    """the default config of `model_type`, every size field cut to a tiny model"""
    from transformers import AutoConfig
    cfg = AutoConfig.for_model(model_type)
    _shrink(cfg, set())
    # a consistent attention shape: heads x head_dim need not equal hidden,
    # but the kv heads must divide the heads
    for c in [cfg] + [getattr(cfg, k) for k in vars(cfg) if hasattr(getattr(cfg, k, None), "model_type")]:
        h, kv = getattr(c, "num_attention_heads", None), getattr(c, "num_key_value_heads", None)
        if isinstance(h, int) and isinstance(kv, int) and kv and h % kv:
            c.num_key_value_heads = 1
        # multi-head latent attention: q / k head = its no-rope and rope parts
        nope, rope = getattr(c, "qk_nope_head_dim", None), getattr(c, "qk_rope_head_dim", None)
        if isinstance(nope, int) and isinstance(rope, int) and isinstance(getattr(c, "qk_head_dim", None), int):
            c.qk_head_dim = nope + rope
    if hasattr(cfg, "use_cache"):
        cfg.use_cache = True
    return cfg


def _close(a, b):
    """|a - b| <= 1e-3 + 1e-3 |b|, with the tolerance on the logits' scale"""
    import torch
    a, b = a.float(), b.float()
    if a.shape != b.shape or not torch.isfinite(b).all():
        return a.shape == b.shape and torch.equal(torch.isfinite(a), torch.isfinite(b))
    scale = max(1.0, b.abs().max().item())
    return bool(((a - b).abs() <= 1e-3 * scale + 1e-3 * b.abs()).all())


def run_one(arch):
    import torch
    import transformers as T
    import torch_neuronsim
    out = {"arch": arch}
    try:
        cfg = tiny_config(arch)
        torch.manual_seed(0)
        model = T.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
        vocab = getattr(cfg, "vocab_size", None) or getattr(getattr(cfg, "text_config", None), "vocab_size", 100)
        ids = torch.randint(3, min(int(vocab), 1000), (1, 8), generator=torch.Generator().manual_seed(1))
        gen_kw = dict(max_new_tokens=4, do_sample=False, min_new_tokens=4)
        with torch.no_grad():
            ref = model(ids).logits
            ref_gen = model.generate(ids, attention_mask=torch.ones_like(ids), **gen_kw)
    except Exception as e:
        out.update(status="skipped", detail=f"CPU: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
                   if str(e) else f"CPU: {type(e).__name__}")
        return out
    out["params"] = sum(p.numel() for p in model.parameters())
    try:
        dev = torch.device("neuron")
        model = model.to(dev)
        torch_neuronsim.reset_stats()
        with torch.no_grad():
            got = model(ids.to(dev)).logits.cpu()
            got_gen = model.generate(ids.to(dev), attention_mask=torch.ones_like(ids).to(dev), **gen_kw).cpu()
        out["fallbacks"] = torch_neuronsim.stats()["fallback_ops"]
    except Exception as e:
        out["fallbacks"] = torch_neuronsim.stats()["fallback_ops"]
        tb = traceback.extract_tb(e.__traceback__)
        where = next((f"{f.filename.split('/')[-1]}:{f.lineno}" for f in reversed(tb)
                      if "transformers" in f.filename), "")
        out.update(status="error", detail=f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''} "
                   f"{where}".strip())
        return out
    logits_ok = _close(got, ref)
    tokens_ok = torch.equal(got_gen, ref_gen)
    out["status"] = "match" if logits_ok and tokens_ok else "mismatch"
    if not logits_ok:
        out["detail"] = f"logits differ by {(got - ref).abs().max().item():.3g}"
    elif not tokens_ok:
        out["detail"] = f"tokens {got_gen[0, 8:].tolist()} vs CPU {ref_gen[0, 8:].tolist()}"
    return out


def main():
    if sys.argv[1:] == ["--worker"]:
        import warnings
        warnings.filterwarnings("ignore")
        for line in sys.stdin:
            arch = line.strip()
            if not arch:
                continue
            try:
                r = run_one(arch)
            except BaseException as e:   # keep the worker alive for the next one
                r = {"arch": arch, "status": "error", "detail": f"{type(e).__name__}: {e}"[:200]}
            sys.stdout.write(json.dumps(r) + "\n")
            sys.stdout.flush()
        return 0
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(run_one(sys.argv[1]), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
