"""scaled_dot_product_attention's forward as one flash-attention program
(backend/programs/attention.c): CPU PyTorch's values, one program per call
whatever the mask, heads or layout, the scores never in HBM, faster in
simulated time than its steps one program each (NEURON_SIM_FUSION=0), the
shapes the kernel does not take run those steps, and a compiled graph
holds it as one region."""
import json

import pytest
import torch
import torch.nn.functional as F

import torch_neuronsim

NEURON = torch.device("neuron")
TOL = {torch.float32: dict(rtol=2e-5, atol=2e-5), torch.bfloat16: dict(rtol=3e-2, atol=3e-2),
       torch.float16: dict(rtol=3e-3, atol=3e-3)}


def qkv(b, h, kh, lq, s, d, dtype, seed=0, transposed=False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, lq, h, d, generator=g).to(dtype).transpose(1, 2) if transposed else \
        torch.randn(b, h, lq, d, generator=g).to(dtype)
    k = torch.randn(b, kh, s, d, generator=g).to(dtype)
    v = torch.randn(b, kh, s, d, generator=g).to(dtype)
    return q, k, v


def on_device(q, k, v, **kw):
    """SDPA on neuron: (result on the CPU, programs, stats)"""
    kw = {n: a.to(NEURON) if isinstance(a, torch.Tensor) else a for n, a in kw.items()}
    qd, kd, vd = q.to(NEURON), k.to(NEURON), v.to(NEURON)
    torch_neuronsim.reset_stats()
    out = F.scaled_dot_product_attention(qd, kd, vd, **kw)
    s = torch_neuronsim.stats()
    return out.cpu(), s


CASES = {
    # name: (b, h, kv heads, L, S, d, kwargs)
    "plain": (2, 4, 4, 16, 16, 32, {}),
    "causal": (1, 2, 2, 200, 200, 64, dict(is_causal=True)),
    "causal_rect": (1, 2, 2, 130, 700, 32, dict(is_causal=True)),   # top-left aligned, L < S
    "gqa": (2, 8, 2, 33, 600, 64, dict(enable_gqa=True)),
    "decode": (1, 4, 4, 1, 2048, 128, {}),
    "float_mask": (2, 2, 2, 130, 513, 48, "float"),
    "scale": (1, 3, 3, 17, 29, 16, dict(scale=0.3)),
    "head_dim_128": (1, 2, 1, 128, 128, 128, dict(is_causal=True, enable_gqa=True)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", sorted(CASES))
def test_one_program_with_cpu_values(case, dtype):
    b, h, kh, lq, s, d, kw = CASES[case]
    q, k, v = qkv(b, h, kh, lq, s, d, dtype, transposed=case == "gqa")
    if kw == "float":
        kw = dict(attn_mask=torch.randn(lq, s, generator=torch.Generator().manual_seed(3)).to(dtype))
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                          **{n: a.float() if isinstance(a, torch.Tensor) else a for n, a in kw.items()})
    got, st = on_device(q, k, v, **kw)
    assert st["programs_executed"] == 1 and st["cpu_fallbacks"] == 0, st["fallback_ops"]
    torch.testing.assert_close(got.float(), want, **TOL[dtype])


def test_bool_mask_and_fully_masked_rows():
    """The op itself takes a bool mask (true: take part); a row with nothing
    to attend to gives zeros, as PyTorch's _safe_softmax"""
    q, k, v = qkv(2, 2, 2, 9, 140, 16, torch.float32)
    m = torch.rand(2, 1, 9, 140, generator=torch.Generator().manual_seed(5)) > 0.4
    m[1, 0, 3] = False
    op = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
    torch_neuronsim.reset_stats()
    got = op(q.to(NEURON), k.to(NEURON), v.to(NEURON), m.to(NEURON))[0]
    assert torch_neuronsim.stats()["programs_executed"] == 1
    s = (q @ k.transpose(-2, -1)) / 4.0
    want = torch.ops.aten._safe_softmax(s.masked_fill(~m, float("-inf")), -1) @ v
    torch.testing.assert_close(got.cpu(), want, **TOL[torch.float32])
    assert got.cpu()[1, :, 3].abs().max() == 0


def test_scores_never_round_trip_hbm(monkeypatch):
    """HBM traffic is q, k, v in and the output out: the 2 x 1024 x 1024
    fp32 scores (8 MiB) stay in SBUF / PSUM; run as steps, they go out and
    back"""
    q, k, v = qkv(1, 2, 2, 1024, 1024, 64, torch.float32)
    _, st = on_device(q, k, v)
    assert st["hbm_read_bytes"] == 4 * (q.numel() + k.numel() + v.numel())
    assert st["hbm_write_bytes"] == 4 * q.numel()
    monkeypatch.setenv("NEURON_SIM_FUSION", "0")
    _, steps = on_device(q, k, v)
    scores = 2 * 1024 * 1024 * 4
    assert steps["hbm_write_bytes"] > scores and steps["hbm_read_bytes"] > scores


@pytest.mark.parametrize("case", ["causal", "decode", "gqa"])
def test_faster_than_its_steps(case, monkeypatch):
    b, h, kh, lq, s, d, kw = CASES[case]
    q, k, v = qkv(b, h, kh, lq, s, d, torch.bfloat16)
    fused, st = on_device(q, k, v, **kw)
    monkeypatch.setenv("NEURON_SIM_FUSION", "0")
    steps, st0 = on_device(q, k, v, **kw)
    assert st0["programs_executed"] > 1
    torch.testing.assert_close(fused, steps, **TOL[torch.bfloat16])
    # launch charges aside (one per program), the fused kernel takes less
    # device time than the steps' kernels together
    assert st["simulated_time_ns"] < st0["simulated_time_ns"]
    assert st["simulated_time_ns"] - 15_000 < st0["simulated_time_ns"] - 15_000 * st0["programs_executed"]


@pytest.mark.parametrize("case", ["head_dim_256", "dropout", "value_dim"])
def test_what_the_kernel_does_not_take_runs_the_steps(case):
    if case == "head_dim_256":   # over 128 partitions of contraction
        q, k, v = qkv(1, 2, 2, 8, 8, 256, torch.float32)
        kw = {}
    elif case == "value_dim":    # v's head dim differs from q's
        q, k, _ = qkv(1, 2, 2, 8, 8, 32, torch.float32)
        v = torch.randn(1, 2, 8, 16)
        kw = {}
    else:
        q, k, v = qkv(1, 2, 2, 8, 8, 32, torch.float32)
        kw = dict(dropout_p=0.5)
    got, st = on_device(q, k, v, **kw)
    assert st["programs_executed"] > 1 and st["cpu_fallbacks"] == 0
    assert got.shape == q.shape[:-1] + (v.shape[-1],)
    if case != "dropout":
        torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v), **TOL[torch.float32])


def test_compiled_graph_holds_one_attention_region(tmp_path, monkeypatch):
    """torch.compile: the SDPA node lowers to the flash program, linked into
    the graph's one program, with the values of eager"""
    monkeypatch.setenv("NEURON_SIM_COMPILE_CACHE_DIR", str(tmp_path))
    torch._dynamo.reset()

    def f(q, k, v):
        return F.scaled_dot_product_attention(q * 2.0, k, v, is_causal=True).relu()

    q, k, v = (t.to(NEURON) for t in qkv(1, 4, 4, 64, 64, 32, torch.float32))
    cf = torch.compile(f, backend="neuron")
    cf(q, k, v)
    path = tmp_path / "trace.json"
    torch_neuronsim.reset_stats()
    with torch_neuronsim.profile(path=str(path)):
        got = cf(q, k, v)
    st = torch_neuronsim.stats()
    assert st["programs_executed"] == 1 and st["compile"]["fallback_node_runs"] == 0
    torch.testing.assert_close(got.cpu(), f(q.cpu(), k.cpu(), v.cpu()), **TOL[torch.float32])
    # the linked program's DMA transfers are named after the FX node of their
    # part: the attention node is one part (p1), between the mul and the relu
    t = json.loads(path.read_text())
    parts = {e["name"].rsplit("_d", 1)[0] for e in t["traceEvents"] if e.get("ph") == "X" and ".p" in e["name"]}
    assert {p for p in parts if p.startswith("_scaled_dot_product_fused_attention")} == \
        {"_scaled_dot_product_fused_attention_ove.p1"}, parts
