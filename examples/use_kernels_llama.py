"""Transformers' `use_kernels` on `neuron`: a Llama whose RMSNorm modules are
replaced by the NKI kernel of the example Hub kernel repository
(examples/hub_kernel, `build/torch-neuron`), loaded by the Kernels library,
with its logits against the CPU model's.

    NEURON_SIM=1 python3 examples/use_kernels_llama.py [--repo DIR] [--dtype bfloat16] [--compile]

Two ways Transformers takes a local kernel repository, both shown here:
  --via config   model.set_use_kernels(True, KernelConfig({...}, use_local_kernel=True))
  --via mapping  kernels.register_kernel_mapping({...}) then from_pretrained(..., use_kernels=True)
(from_pretrained(use_kernels=True, kernel_config=<local KernelConfig>) fails
in Transformers 5.24 itself, on every device: its loader rewrites the mapping
into (repo, metadata) tuples that the local branch then splits as strings.)
"""
import argparse
import os
import sys
import tempfile
from pathlib import Path

import torch

import torch_neuronsim  # noqa: F401  (registers the neuron device)

HERE = Path(__file__).resolve().parent


def tiny_llama(directory, dtype):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=320, hidden_size=192, intermediate_size=384, num_hidden_layers=2,
                      num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=256)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).to(dtype).save_pretrained(directory)


def load_with_kernels(directory, repo, via, dtype):
    from transformers import KernelConfig, LlamaForCausalLM
    if via == "config":
        model = LlamaForCausalLM.from_pretrained(directory, device_map="neuron", dtype=dtype).eval()
        model.set_use_kernels(True, KernelConfig({"RMSNorm": f"{repo}:RMSNorm"}, use_local_kernel=True))
    else:
        from kernels import LocalLayerRepository, Mode, register_kernel_mapping
        layer = LocalLayerRepository(repo_path=Path(repo), layer_name="RMSNorm")
        register_kernel_mapping({"RMSNorm": {"neuron": {Mode.INFERENCE: layer, Mode.TRAINING: layer}}})
        model = LlamaForCausalLM.from_pretrained(directory, device_map="neuron", dtype=dtype,
                                                 use_kernels=True).eval()
    return model


def replaced_norms(model, repo):
    """names of the RMSNorm modules whose forward is the kernel repository's
    (the Kernels library imports a build once: this is the module it loaded)"""
    from kernels import get_local_kernel
    kernel_forward = get_local_kernel(Path(repo)).layers.RMSNorm.forward
    return [name for name, m in model.named_modules()
            if type(m).__name__ == "LlamaRMSNorm" and getattr(m.forward, "__func__", None) is kernel_forward]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", default=str(HERE / "hub_kernel"), help="the kernel repository (Hub layout)")
    ap.add_argument("--via", choices=("config", "mapping"), default="config")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    ap.add_argument("--compile", action="store_true", help="run the neuron model under torch.compile(backend='neuron')")
    a = ap.parse_args(argv)
    dtype = getattr(torch, a.dtype)
    from transformers import LlamaForCausalLM
    with tempfile.TemporaryDirectory() as d:
        tiny_llama(d, dtype)
        cpu = LlamaForCausalLM.from_pretrained(d, dtype=dtype).eval()
        dev = load_with_kernels(d, a.repo, a.via, dtype)
    names = replaced_norms(dev, a.repo)
    total = sum(type(m).__name__ == "LlamaRMSNorm" for m in dev.modules())
    print(f"RMSNorm modules running the kernel repository's NKI kernel: {len(names)} of {total}")
    ids = torch.randint(0, cpu.config.vocab_size, (2, 37), generator=torch.Generator().manual_seed(1))
    run = torch.compile(dev, backend="neuron") if a.compile else dev
    with torch.no_grad():
        want = cpu(ids).logits.float()
        got = run(ids.to("neuron")).logits.float().cpu()
    err = (want - got).abs().max().item()
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    print(f"logits {tuple(got.shape)} {a.dtype}: max |neuron - cpu| = {err:.3g} (tolerance {tol})")
    ok = len(names) == total and err <= tol
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
