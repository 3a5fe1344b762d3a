"""Diffusers pipelines on `neuron` against the CPU: Stable Diffusion 1.x, SDXL,
PixArt-alpha, Flux, Flux2-klein and QwenImage, built from the tiny component
sizes diffusers' own tests use (tests/pipelines/*/test_*.py), with nothing
downloaded: the tokenizers are built here from small vocabularies, and the T5
encoder takes the sizes of hf-internal-testing/tiny-random-t5 (d_model 32,
d_ff 37, d_kv 8, 4 heads, 5 layers, vocabulary 1103).

    NEURON_SIM=1 NEURON_STRICT=1 python3 examples/diffusers_pipelines.py [NAME...] [--compile]

Each pipeline runs twice from the same seeded components, on the CPU and on
`neuron` (its denoiser, VAE and text encoders compiled with
torch.compile(backend="neuron", fullgraph=True) under --compile, as
diffusers' Neuron tests compile them), and the table gives the largest pixel
difference and the CPU fallbacks counted on `neuron`.  Diffusers takes its
Neuron paths (random latents and timesteps made on the CPU, no float64 /
int64 on the device) because `torch_neuronx` and its package metadata are
there (the simulator's stand-ins, docs/nki.md "Import names").
"""
import argparse
import json
import os
import sys
import tempfile
import time

import torch

import torch_neuronsim

# ------------------------------------------------------------- tokenizers
# Byte-level vocabularies with no merges: every character is a token.  What
# the pipelines need of a tokenizer is its class, special tokens, padding,
# truncation and (Flux2-klein) a chat template; the CPU and neuron runs see
# the same ids, so the comparison does not depend on the vocabulary.


def _byte_chars():
    """GPT-2's byte-to-unicode table: the base alphabet of byte-level BPE"""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def clip_tokenizer():
    from transformers import CLIPTokenizer
    chars = _byte_chars()
    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({c + "</w>": 256 + i for i, c in enumerate(chars)})
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)          # the highest id, as in CLIP's vocabulary
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)


def t5_tokenizer():
    from transformers import T5Tokenizer
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -2.0)]
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'-"
    pieces += [("\u2581" + c, -3.0) for c in alphabet] + [(c, -4.0) for c in alphabet]
    return T5Tokenizer(vocab=pieces, extra_ids=0, model_max_length=512)


_CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
           "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def qwen_tokenizer():
    from transformers import Qwen2Tokenizer
    vocab = {c: i for i, c in enumerate(_byte_chars())}
    tok = Qwen2Tokenizer(vocab=vocab, merges=[], model_max_length=32768)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.chat_template = _CHATML
    return tok


# ------------------------------------------------------------- components
def _clip_config(hidden, intermediate, layers, heads, projection=None):
    from transformers import CLIPTextConfig
    kw = dict(projection_dim=projection, hidden_act="gelu") if projection else {}
    return CLIPTextConfig(bos_token_id=0, eos_token_id=2, hidden_size=hidden, intermediate_size=intermediate,
                          layer_norm_eps=1e-05, num_attention_heads=heads, num_hidden_layers=layers,
                          pad_token_id=1, vocab_size=1000, **kw)


def _t5_encoder():
    from transformers import T5Config, T5EncoderModel
    torch.manual_seed(0)
    return T5EncoderModel(T5Config(vocab_size=1103, d_model=32, d_ff=37, d_kv=8, num_heads=4, num_layers=5,
                                   num_decoder_layers=5, relative_attention_num_buckets=8,
                                   layer_norm_epsilon=1e-6, pad_token_id=0, eos_token_id=1,
                                   decoder_start_token_id=0))


def sd():
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextModel
    torch.manual_seed(0)
    unet = UNet2DConditionModel(block_out_channels=(4, 8), layers_per_block=1, sample_size=32, in_channels=4,
                                out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=8,
                                norm_num_groups=2)
    torch.manual_seed(0)
    vae = AutoencoderKL(block_out_channels=[4, 8], in_channels=3, out_channels=3,
                        down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
                        latent_channels=4, norm_num_groups=2)
    torch.manual_seed(0)
    te = CLIPTextModel(_clip_config(8, 16, 2, 2))
    sched = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                          set_alpha_to_one=False)
    pipe = StableDiffusionPipeline(unet=unet, scheduler=sched, vae=vae, text_encoder=te, tokenizer=clip_tokenizer(),
                                   safety_checker=None, feature_extractor=None, image_encoder=None,
                                   requires_safety_checker=False)
    return pipe, dict(prompt="A painting of a squirrel eating a burger", num_inference_steps=2, guidance_scale=6.0)


def sdxl():
    from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionXLPipeline, UNet2DConditionModel
    from transformers import CLIPTextModel, CLIPTextModelWithProjection
    torch.manual_seed(0)
    unet = UNet2DConditionModel(block_out_channels=(2, 4), layers_per_block=2, sample_size=32, in_channels=4,
                                out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), attention_head_dim=(2, 4),
                                use_linear_projection=True, addition_embed_type="text_time",
                                addition_time_embed_dim=8, transformer_layers_per_block=(1, 2),
                                projection_class_embeddings_input_dim=80, cross_attention_dim=64, norm_num_groups=1)
    sched = EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, steps_offset=1,
                                   beta_schedule="scaled_linear", timestep_spacing="leading")
    torch.manual_seed(0)
    vae = AutoencoderKL(block_out_channels=[32, 64], in_channels=3, out_channels=3,
                        down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
                        latent_channels=4, sample_size=128)
    torch.manual_seed(0)
    cfg = _clip_config(32, 37, 5, 4, projection=32)
    te, te2 = CLIPTextModel(cfg), CLIPTextModelWithProjection(cfg)
    pipe = StableDiffusionXLPipeline(unet=unet, scheduler=sched, vae=vae, text_encoder=te, tokenizer=clip_tokenizer(),
                                     text_encoder_2=te2, tokenizer_2=clip_tokenizer(), image_encoder=None,
                                     feature_extractor=None)
    return pipe, dict(prompt="A painting of a squirrel eating a burger", num_inference_steps=2, guidance_scale=5.0)


def pixart():
    from diffusers import AutoencoderKL, DDIMScheduler, PixArtAlphaPipeline, PixArtTransformer2DModel
    torch.manual_seed(0)
    tr = PixArtTransformer2DModel(sample_size=8, num_layers=2, patch_size=2, attention_head_dim=8,
                                  num_attention_heads=3, caption_channels=32, in_channels=4, cross_attention_dim=24,
                                  out_channels=8, attention_bias=True, activation_fn="gelu-approximate",
                                  num_embeds_ada_norm=1000, norm_type="ada_norm_single",
                                  norm_elementwise_affine=False, norm_eps=1e-6)
    torch.manual_seed(0)
    vae = AutoencoderKL()
    pipe = PixArtAlphaPipeline(transformer=tr.eval(), vae=vae.eval(), scheduler=DDIMScheduler(),
                               text_encoder=_t5_encoder(), tokenizer=t5_tokenizer())
    return pipe, dict(prompt="A painting of a squirrel eating a burger", num_inference_steps=2, guidance_scale=5.0,
                      use_resolution_binning=False)


def flux():
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
    from transformers import CLIPTextModel
    torch.manual_seed(0)
    tr = FluxTransformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16,
                                num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=32,
                                axes_dims_rope=[4, 4, 8])
    torch.manual_seed(0)
    te = CLIPTextModel(_clip_config(32, 37, 5, 4, projection=32))
    te2 = _t5_encoder()
    torch.manual_seed(0)
    vae = AutoencoderKL(sample_size=32, in_channels=3, out_channels=3, block_out_channels=(4,), layers_per_block=1,
                        latent_channels=1, norm_num_groups=1, use_quant_conv=False, use_post_quant_conv=False,
                        shift_factor=0.0609, scaling_factor=1.5035)
    pipe = FluxPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), text_encoder=te, text_encoder_2=te2,
                        tokenizer=clip_tokenizer(), tokenizer_2=t5_tokenizer(), transformer=tr, vae=vae,
                        image_encoder=None, feature_extractor=None)
    return pipe, dict(prompt="A painting of a squirrel eating a burger", num_inference_steps=2, guidance_scale=5.0,
                      height=8, width=8, max_sequence_length=48)


def flux2_klein():
    from diffusers import AutoencoderKLFlux2, FlowMatchEulerDiscreteScheduler, Flux2KleinPipeline, \
        Flux2Transformer2DModel
    from transformers import Qwen3Config, Qwen3ForCausalLM
    torch.manual_seed(0)
    tr = Flux2Transformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
                                 attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
                                 timestep_guidance_channels=256, axes_dims_rope=[4, 4, 4, 4], guidance_embeds=False)
    torch.manual_seed(0)
    te = Qwen3ForCausalLM(Qwen3Config(intermediate_size=16, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                      num_key_value_heads=2, vocab_size=151936, max_position_embeddings=512))
    torch.manual_seed(0)
    vae = AutoencoderKLFlux2(sample_size=32, in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",),
                             up_block_types=("UpDecoderBlock2D",), block_out_channels=(4,), layers_per_block=1,
                             latent_channels=1, norm_num_groups=1, use_quant_conv=False, use_post_quant_conv=False)
    pipe = Flux2KleinPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), text_encoder=te, tokenizer=qwen_tokenizer(),
                              transformer=tr, vae=vae)
    return pipe, dict(prompt="a dog is dancing", num_inference_steps=2, guidance_scale=4.0, height=8, width=8,
                      max_sequence_length=64, text_encoder_out_layers=(1,))


def qwenimage(heads=3):
    from diffusers import AutoencoderKLQwenImage, FlowMatchEulerDiscreteScheduler, QwenImagePipeline, \
        QwenImageTransformer2DModel
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    torch.manual_seed(0)
    tr = QwenImageTransformer2DModel(patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16,
                                     num_attention_heads=heads, joint_attention_dim=16, guidance_embeds=False,
                                     axes_dims_rope=(8, 4, 4))
    torch.manual_seed(0)
    vae = AutoencoderKLQwenImage(base_dim=24, z_dim=4, dim_mult=[1, 2, 4], num_res_blocks=1,
                                 temperal_downsample=[False, True], latents_mean=[0.0] * 4, latents_std=[1.0] * 4)
    torch.manual_seed(0)
    cfg = Qwen2_5_VLConfig(
        text_config={"hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "num_key_value_heads": 2, "rope_theta": 1000000.0,
                     "rope_scaling": {"mrope_section": [1, 1, 2], "rope_type": "default", "type": "default"}},
        vision_config={"depth": 2, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2, "out_hidden_size": 16},
        hidden_size=16, vocab_size=152064, vision_end_token_id=151653, vision_start_token_id=151652,
        vision_token_id=151654)
    te = Qwen2_5_VLForConditionalGeneration(cfg).eval()
    pipe = QwenImagePipeline(transformer=tr, vae=vae, scheduler=FlowMatchEulerDiscreteScheduler(), text_encoder=te,
                             tokenizer=qwen_tokenizer())
    return pipe, dict(prompt="dance monkey", negative_prompt="bad quality", num_inference_steps=2, guidance_scale=3.0,
                      true_cfg_scale=1.0, height=32, width=32, max_sequence_length=16)


PIPELINES = {"sd": sd, "sdxl": sdxl, "pixart": pixart, "flux": flux, "flux2_klein": flux2_klein,
             "qwenimage": qwenimage}
# what diffusers' Neuron tests compile (tests/pipelines/*: the denoiser, the VAE, the text encoders)
COMPILED = ("unet", "transformer", "vae", "text_encoder", "text_encoder_2")


def quiet():
    """the libraries' advice about loading real checkpoints is noise here"""
    import warnings
    from diffusers.utils import logging as dlog
    from transformers.utils import logging as tlog
    dlog.set_verbosity_error()
    tlog.set_verbosity_error()
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


def build(name, **sizes):
    pipe, kwargs = PIPELINES[name](**sizes)
    for module in pipe.components.values():
        if isinstance(module, torch.nn.Module):
            module.eval()             # as from_pretrained leaves them: no dropout
    pipe.set_progress_bar_config(disable=True)
    return pipe, kwargs


def run(name, device="cpu", compile=False, dtype=torch.float32):
    """the pipeline's image as a float tensor [batch, 3, H, W] on the CPU"""
    pipe, kwargs = build(name)
    pipe = pipe.to(device=device, dtype=dtype)
    if compile:
        from transformers import PreTrainedModel
        from transformers.utils.output_capturing import install_all_output_capturing_hooks
        for attr in COMPILED:
            module = getattr(pipe, attr, None)
            if module is None:
                continue
            if isinstance(module, PreTrainedModel):
                # Transformers installs its output-capturing hooks on first call
                # under a lock that fullgraph compilation cannot enter; diffusers'
                # Neuron tests install them first the same way
                install_all_output_capturing_hooks(module)
            setattr(pipe, attr, torch.compile(module.eval(), backend="neuron", fullgraph=True))
    with torch.no_grad():
        out = pipe(**kwargs, generator=torch.Generator("cpu").manual_seed(0), output_type="pt").images
    return out.float().cpu()


def compare(name, compile=False, dtype=torch.float32):
    """the pipeline on the CPU and on `neuron`: the largest pixel difference,
    CPU fallbacks (and their ops), compiled graphs and the nodes of theirs
    that ran eagerly, simulated device time, host seconds"""
    want = run(name, "cpu", dtype=dtype)
    torch_neuronsim.reset_stats()
    t = time.perf_counter()
    got = run(name, "neuron", compile=compile, dtype=dtype)
    host = time.perf_counter() - t
    if got.shape != want.shape:
        raise AssertionError(f"{name}: image {tuple(got.shape)} on neuron, {tuple(want.shape)} on the CPU")
    st = torch_neuronsim.stats()
    r = dict(pipeline=name, mode="compiled" if compile else "eager", dtype=str(dtype).split(".")[-1],
             shape=tuple(got.shape), max_abs_diff=(got - want).abs().max().item(), fallbacks=st["cpu_fallbacks"],
             fallback_ops=st["fallback_ops"], graphs=st["compile"]["graphs_compiled"],
             eager_nodes=st["compile"]["fallback_nodes"], device_ms=st["simulated_time_ns"] / 1e6, host_s=host)
    if dtype != torch.float32:
        # two bf16 runs may part by several ulps; what matters is that
        # neuron's is as close to the float32 image as the CPU's is
        ref = run(name, "cpu")
        r["fp32_err_cpu"] = (want - ref).abs().max().item()
        r["fp32_err_neuron"] = (got - ref).abs().max().item()
    return r


def close_enough(r, tolerance=2e-3):
    """float32: within `tolerance` of the CPU image; lower precision: as close
    to the float32 image as the CPU's own run at that precision (1.5x, plus
    one bf16 ulp at 1.0)"""
    if "fp32_err_cpu" in r:
        return r["fp32_err_neuron"] <= 1.5 * r["fp32_err_cpu"] + 2 ** -7
    return r["max_abs_diff"] <= tolerance


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", choices=[[]] + list(PIPELINES), default=[])
    ap.add_argument("--compile", action="store_true", help="compile as diffusers' Neuron tests do")
    ap.add_argument("--tolerance", type=float, default=2e-3, help="largest pixel difference (images in [0, 1])")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                    help="the pipelines' dtype (bfloat16: judged against the float32 image, as the CPU's bf16 run is)")
    ap.add_argument("--json", help="also write the rows to this file")
    a = ap.parse_args(argv)
    quiet()
    rows, bad = [], 0
    dtype = getattr(torch, a.dtype)
    print("| pipeline | mode | dtype | image | max abs diff | vs float32: neuron / CPU | CPU fallbacks "
          "| graphs (eager nodes) | device ms | host s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in a.names or list(PIPELINES):
        r = compare(name, compile=a.compile, dtype=dtype)
        ok = close_enough(r, a.tolerance) and r["fallbacks"] == 0 and r["eager_nodes"] == 0
        bad += not ok
        rows.append(r)
        vs32 = f"{r['fp32_err_neuron']:.3g} / {r['fp32_err_cpu']:.3g}" if "fp32_err_cpu" in r else ""
        print(f"| {name} | {r['mode']} | {r['dtype']} | {'x'.join(map(str, r['shape']))} | {r['max_abs_diff']:.3g} "
              f"| {vs32} | {r['fallbacks']} | {r['graphs']} ({r['eager_nodes']}) | {r['device_ms']:.3f} "
              f"| {r['host_s']:.1f} |" + ("" if ok else f"  MISMATCH {r['fallback_ops'] or ''}"), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
