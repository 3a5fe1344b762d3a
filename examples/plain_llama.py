"""A tiny Llama (RMSNorm, rotary, grouped-query attention, SwiGLU) in plain torch --
no Transformers needed: its forward on `neuron` against the CPU.  What
scripts/check_wheel.sh runs in a fresh environment holding only torch and the
wheel: NEURON_SIM=1 NEURON_STRICT=1 python3 examples/plain_llama.py"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuronsim


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d))

    def forward(self, x):
        return self.w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


def rope(x, pos):
    d = x.shape[-1]
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, device=x.device).float() / d))
    f = pos[:, None].float() * inv[None, :]
    cos, sin = torch.cat([f.cos()] * 2, -1), torch.cat([f.sin()] * 2, -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Block(nn.Module):
    def __init__(self, d=64, heads=4, kv=2, ff=128):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv, d // heads
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.q, self.k, self.v = nn.Linear(d, d, bias=False), nn.Linear(d, kv * self.hd, bias=False), \
            nn.Linear(d, kv * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate, self.up, self.down = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False), \
            nn.Linear(ff, d, bias=False)

    def forward(self, x):
        b, s, d = x.shape
        pos = torch.arange(s, device=x.device)
        h = self.n1(x)
        q = rope(self.q(h).view(b, s, self.h, self.hd).transpose(1, 2), pos)
        k = rope(self.k(h).view(b, s, self.kv, self.hd).transpose(1, 2), pos)
        v = self.v(h).view(b, s, self.kv, self.hd).transpose(1, 2)
        k, v = k.repeat_interleave(self.h // self.kv, 1), v.repeat_interleave(self.h // self.kv, 1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
        x = x + self.o(a)
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class TinyLlama(nn.Module):
    def __init__(self, vocab=256, d=64, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))
        self.norm, self.head = RMSNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


torch.manual_seed(0)
model = TinyLlama().eval()
ids = torch.randint(0, 256, (2, 17))
with torch.no_grad():
    want = model(ids)
    got = model.to("neuron")(ids.to("neuron")).cpu()
print("max |neuron - cpu|", (got - want).abs().max().item(), "fallbacks", torch_neuronsim.stats()["cpu_fallbacks"])
assert torch.allclose(got, want, rtol=1e-4, atol=1e-4)
print("ok")
