"""Training on `neuron`: every backward kernel's gradients against CPU
PyTorch (fp32 tight, bf16 loose), each run under NEURON_STRICT=1 so a CPU
fallback fails the test; the optimizers' steps (foreach and fused), gradient
clipping and AMP loss scaling against CPU; tied weights staying tied."""
import copy

import pytest
import torch
import torch.nn.functional as F

import torch_neuronsim

NEURON = torch.device("neuron")
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=4e-2, atol=4e-2)}


def grads_match(fn, inputs, dtype=torch.float32, tol=None, grad_of=None, monkeypatch=None):
    """fn(*inputs) on CPU and on neuron (strict); the outputs and the
    gradients of every float input (or those listed in grad_of) must match"""
    tol = tol or TOL[dtype]
    want_of = [i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if grad_of is not None:
        want_of = grad_of

    def run(dev):
        xs = []
        for i, t in enumerate(inputs):
            if isinstance(t, torch.Tensor):
                t = t.to(dev)
                if i in want_of:
                    t = t.to(dtype).detach().requires_grad_()
            xs.append(t)
        out = fn(*xs)
        torch.manual_seed(5)
        up = torch.randn(out.shape, dtype=torch.float32).to(dtype).to(dev)
        (out * up).sum().backward() if out.dim() else out.backward()
        return out, [xs[i].grad for i in want_of]

    want, wgrads = run("cpu")
    monkeypatch.setenv("NEURON_STRICT", "1")
    torch_neuronsim.reset_stats()
    got, ggrads = run(NEURON)
    s = torch_neuronsim.stats()
    monkeypatch.delenv("NEURON_STRICT")
    assert s["cpu_fallbacks"] == 0, s["fallback_ops"]
    torch.testing.assert_close(got.cpu().float(), want.float(), **tol)
    for w, g in zip(wgrads, ggrads):
        assert g is not None and g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.cpu().float(), w.float(), **tol)
    return s


DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])


def rnd(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@DTYPES
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "softmax_dim0"])
def test_softmax_backward(op, dtype, monkeypatch):
    fn = {"softmax": lambda x: torch.softmax(x, -1), "log_softmax": lambda x: torch.log_softmax(x, -1),
          "softmax_dim0": lambda x: torch.softmax(x, 0)}[op]
    s = grads_match(fn, [rnd(6, 33)], dtype, monkeypatch=monkeypatch)
    assert any(k.startswith("aten::") for k in s["native_ops"])


@DTYPES
@pytest.mark.parametrize("act", ["relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid"])
def test_activation_backward(act, dtype, monkeypatch):
    fn = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
          "silu": F.silu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}[act]
    x = rnd(4, 50) * 3
    x[0, :5] = 0.0                          # relu's threshold itself: gradient 0 there, as CPU
    grads_match(fn, [x], dtype, monkeypatch=monkeypatch)


@DTYPES
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
def test_layer_norm_backward(affine, dtype, monkeypatch):
    if affine:
        fn = lambda x, w, b: F.layer_norm(x, (40,), w, b)  # noqa: E731
        ins = [rnd(3, 5, 40), rnd(40, seed=1) + 1, rnd(40, seed=2)]
    else:
        fn = lambda x: F.layer_norm(x, (40,))  # noqa: E731
        ins = [rnd(3, 5, 40)]
    tol = TOL[dtype] if dtype == torch.float32 else dict(rtol=6e-2, atol=6e-2)
    grads_match(fn, ins, dtype, tol=tol, monkeypatch=monkeypatch)


@DTYPES
def test_rms_norm_backward(dtype, monkeypatch):
    """F.rms_norm and the pow / mean / rsqrt form Llama's RMSNorm uses"""
    def llama_rms(x, w):
        v = x.float().pow(2).mean(-1, keepdim=True)
        return w * (x.float() * torch.rsqrt(v + 1e-6)).to(x.dtype)
    ins = [rnd(2, 7, 48), rnd(48, seed=1)]
    grads_match(lambda x, w: F.rms_norm(x, (48,), w, 1e-6), ins, dtype, monkeypatch=monkeypatch)
    grads_match(llama_rms, ins, dtype, monkeypatch=monkeypatch)


@DTYPES
def test_linear_and_matmul_backward(dtype, monkeypatch):
    grads_match(F.linear, [rnd(2, 9, 32), rnd(24, 32, seed=1), rnd(24, seed=2)], dtype, monkeypatch=monkeypatch)
    grads_match(torch.matmul, [rnd(3, 9, 16), rnd(3, 16, 5, seed=1)], dtype, monkeypatch=monkeypatch)
    grads_match(torch.bmm, [rnd(2, 4, 8), rnd(2, 8, 3, seed=1)], dtype, monkeypatch=monkeypatch)


@pytest.mark.parametrize("case", ["mean", "sum", "none", "ignore", "smoothing", "weight", "all_ignored",
                                  "unbatched"])
def test_cross_entropy_forward_and_backward(case, monkeypatch):
    x = rnd(12, 10)
    t = torch.randint(0, 10, (12,), generator=torch.Generator().manual_seed(3))
    kw = {}
    if case in ("sum", "none"):
        kw["reduction"] = case
    if case == "ignore":
        t[::3] = -100
    if case == "all_ignored":
        t[:] = -100
        kw["reduction"] = "sum"             # (mean of nothing is NaN on both)
    if case == "smoothing":
        kw["label_smoothing"] = 0.1
        t[1] = -100
    if case == "weight":
        kw["weight"] = rnd(10, seed=4).abs() + 0.1
        t[2] = 7
    if case == "unbatched":
        x, t = x[0], t[0]
    ins = [x, t] + ([kw.pop("weight")] if "weight" in kw else [])
    fn = (lambda x, t, w: F.cross_entropy(x, t, weight=w, **kw)) if len(ins) == 3 else \
        (lambda x, t: F.cross_entropy(x, t, **kw))
    grads_match(fn, ins, grad_of=[0], monkeypatch=monkeypatch)


def test_nll_loss_rejects_a_target_out_of_range():
    x = torch.randn(3, 5).log_softmax(-1).to(NEURON)
    with pytest.raises(IndexError, match="out of bounds"):
        F.nll_loss(x, torch.tensor([0, 5, 1]).to(NEURON))


@DTYPES
@pytest.mark.parametrize("kind", ["plain", "padding_idx", "freq"])
def test_embedding_backward(kind, dtype, monkeypatch):
    idx = torch.tensor([[1, 4, 4, 0], [2, 4, 9, 1]])
    kw = {"padding_idx": dict(padding_idx=4), "freq": dict(scale_grad_by_freq=True)}.get(kind, {})
    grads_match(lambda w, i: F.embedding(i, w, **kw), [rnd(10, 6), idx], dtype, monkeypatch=monkeypatch)


@DTYPES
def test_reduction_and_indexing_backwards(dtype, monkeypatch):
    idx = torch.tensor([[0, 2], [1, 1], [3, 0]])
    grads_match(lambda x: x.sum((0, 2)), [rnd(3, 4, 5)], dtype, monkeypatch=monkeypatch)
    grads_match(lambda x: x.mean(1), [rnd(3, 4, 5)], dtype, monkeypatch=monkeypatch)
    grads_match(lambda x, i: x.gather(1, i), [rnd(3, 4), idx], dtype, monkeypatch=monkeypatch)
    grads_match(lambda x: x.index_select(0, torch.tensor([2, 0, 2]).to(x.device)), [rnd(4, 3)], dtype,
                monkeypatch=monkeypatch)
    grads_match(lambda x: x[:, 1:3] * 2, [rnd(4, 5)], dtype, monkeypatch=monkeypatch)


def sdpa_inputs(mask_kind, gqa):
    B, Hq, L, S, E = 2, 4, 7, 7, 16
    Hk = 2 if gqa else Hq
    q, k, v = rnd(B, Hq, L, E), rnd(B, Hk, S, E, seed=1), rnd(B, Hk, S, E, seed=2)
    mask = None
    if mask_kind == "additive":
        mask = rnd(B, 1, L, S, seed=3)
    elif mask_kind == "boolean":
        mask = torch.rand(B, 1, L, S, generator=torch.Generator().manual_seed(4)) > 0.3
        mask[..., 0] = True
    elif mask_kind == "masked_row":     # a query row that sees nothing: zeros, zero gradient
        mask = torch.ones(B, 1, L, S, dtype=torch.bool)
        mask[:, :, 2] = False
    return q, k, v, mask


@DTYPES
@pytest.mark.parametrize("gqa", [False, True], ids=["mha", "gqa"])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "additive", "boolean", "masked_row"])
def test_sdpa_backward(mask_kind, gqa, dtype, monkeypatch):
    q, k, v, mask = sdpa_inputs(mask_kind, gqa)

    def fn(q, k, v, *m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m[0] if m else None,
                                              is_causal=mask_kind == "causal", enable_gqa=gqa)
    ins = [q, k, v] + ([mask] if mask is not None else [])
    s = grads_match(fn, ins, dtype, grad_of=[0, 1, 2], monkeypatch=monkeypatch)
    assert s["native_ops"]["aten::bmm"]["count"] >= 4     # forward and backward products on TensorE


def test_sdpa_backward_with_broadcast_batch_dims(monkeypatch):
    """k / v shared across the batch ([1, H, S, E]): their gradients summed back"""
    q, k, v, _ = sdpa_inputs("none", False)
    grads_match(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                [q, k[:1], v[:1]], monkeypatch=monkeypatch)


def test_sdpa_dropout_backward_regenerates_the_forward_mask(monkeypatch):
    """with dropout the forward is a function of the generator's seed: its
    gradient must match central differences of that function"""
    q, k, v, _ = sdpa_inputs("none", True)
    q, k, v = (t.to(NEURON) for t in (q, k, v))
    up = rnd(*q.shape, seed=9).to(NEURON)

    def f(q):
        torch.manual_seed(3)
        return (F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, enable_gqa=True) * up).sum()
    monkeypatch.setenv("NEURON_STRICT", "1")
    qq = q.clone().requires_grad_()
    f(qq).backward()
    d = rnd(*q.shape, seed=8).to(NEURON)
    eps = 1e-2
    numeric = (f(q + eps * d) - f(q - eps * d)).item() / (2 * eps)
    analytic = (qq.grad * d).sum().item()
    assert abs(numeric - analytic) <= 2e-2 * max(1.0, abs(analytic)), (numeric, analytic)
    assert f(q).item() != (F.scaled_dot_product_attention(q, k, v, enable_gqa=True) * up).sum().item()


def test_sdpa_backward_gives_the_additive_mask_its_gradient(monkeypatch):
    q, k, v, mask = sdpa_inputs("additive", False)
    grads_match(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), [q, k, v, mask],
                monkeypatch=monkeypatch)


def test_dropout_backward_uses_the_forward_mask(monkeypatch):
    x = rnd(64, 64).to(NEURON).requires_grad_()
    monkeypatch.setenv("NEURON_STRICT", "1")
    torch_neuronsim.reset_stats()
    torch.manual_seed(0)
    y = F.dropout(x, p=0.25, training=True)
    y.sum().backward()
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0, torch_neuronsim.stats()["fallback_ops"]
    y, g, xc = y.detach().cpu(), x.grad.cpu(), x.detach().cpu()
    kept = y != 0
    assert 0.65 < kept.float().mean().item() < 0.85
    torch.testing.assert_close(y[kept], xc[kept] / 0.75)
    torch.testing.assert_close(g, kept.float() / 0.75)
    torch.manual_seed(0)
    again = F.dropout(x.detach(), p=0.25, training=True).cpu()
    assert torch.equal(again, y)                      # the device generator: repeatable


# ---- optimizers -------------------------------------------------------------------

def make_params(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(5, 7, generator=g), torch.randn(7, generator=g), torch.randn(3, 4, 2, generator=g)]


def optimizer_steps(dev, make_opt, steps=4, clip=None, scaler_dev=None):
    params = [p.clone().to(dev).requires_grad_() for p in make_params()]
    opt = make_opt(params)
    scaler = torch.amp.GradScaler(scaler_dev, init_scale=2.0 ** 8, growth_interval=2) if scaler_dev else None
    for i in range(steps):
        g = make_params(seed=10 + i)
        loss = sum((p * gg.to(dev)).sum() + (p * p).sum() * 0.1 for p, gg in zip(params, g))
        if scaler:
            if i == 1:                                    # an overflow: the step is skipped, scale backs off
                loss = loss * float("inf")
            scaler.scale(loss).backward()
            if clip:
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(params, clip)
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(params, clip, norm_type=clip_type)
            opt.step()
        opt.zero_grad()
    return [p.detach().cpu() for p in params], (scaler.get_scale() if scaler else None)


clip_type = 2.0
OPTS = {
    "sgd_momentum": lambda ps, **kw: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01, **kw),
    "sgd_nesterov": lambda ps, **kw: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, **kw),
    "adam": lambda ps, **kw: torch.optim.Adam(ps, lr=0.01, weight_decay=0.01, **kw),
    "adam_amsgrad": lambda ps, **kw: torch.optim.Adam(ps, lr=0.01, amsgrad=True, **kw),
    "adamw": lambda ps, **kw: torch.optim.AdamW(ps, lr=0.01, **kw),
}


@pytest.mark.parametrize("impl", ["foreach", "fused", "for_loop"])
@pytest.mark.parametrize("name", list(OPTS))
def test_optimizer_steps_match_cpu(name, impl, monkeypatch):
    kw = {"foreach": dict(foreach=True), "fused": dict(fused=True), "for_loop": dict(foreach=False)}[impl]
    make = lambda ps: OPTS[name](ps, **kw)  # noqa: E731
    want, _ = optimizer_steps("cpu", make)
    monkeypatch.setenv("NEURON_STRICT", "1")
    torch_neuronsim.reset_stats()
    got, _ = optimizer_steps(NEURON, make)
    s = torch_neuronsim.stats()
    assert s["cpu_fallbacks"] == 0, s["fallback_ops"]
    if impl == "fused":
        assert any(k.startswith("aten::_fused_") or k in ("aten::mul", "aten::add") for k in s["native_ops"])
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("norm_type", [2.0, float("inf"), 1.0])
def test_clip_grad_norm_matches_cpu(norm_type, monkeypatch):
    global clip_type
    clip_type = norm_type
    make = lambda ps: torch.optim.SGD(ps, lr=0.1)  # noqa: E731
    want, _ = optimizer_steps("cpu", make, clip=0.5)
    monkeypatch.setenv("NEURON_STRICT", "1")
    torch_neuronsim.reset_stats()
    got, _ = optimizer_steps(NEURON, make, clip=0.5)
    clip_type = 2.0
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0, torch_neuronsim.stats()["fallback_ops"]
    assert "aten::sum" in torch_neuronsim.stats()["native_ops"] or norm_type == float("inf")
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=2e-6, atol=2e-6)


def test_amp_unscale_and_scale_update_kernels(monkeypatch):
    """GradScaler's two device ops, natively: the overflow check with
    unscaling, and the scale / growth-tracker update (its three cases)"""
    grads = [rnd(5, 3), rnd(7, seed=1)]
    monkeypatch.setenv("NEURON_STRICT", "1")
    torch_neuronsim.reset_stats()
    dev = [g.to(NEURON) for g in grads]
    found = torch.zeros(1).to(NEURON)
    torch._amp_foreach_non_finite_check_and_unscale_(dev, found, torch.full((1,), 0.25).to(NEURON))
    assert found.item() == 0.0
    for g, d in zip(grads, dev):
        torch.testing.assert_close(d.cpu(), g * 0.25, rtol=0, atol=0)
    dev[1][3] = float("nan")
    torch._amp_foreach_non_finite_check_and_unscale_(dev, found, torch.ones(1).to(NEURON))
    assert found.item() == 1.0
    for found_inf, tracker, want_scale, want_tracker in [(1.0, 1, 512.0, 0), (0.0, 0, 1024.0, 1),
                                                        (0.0, 1, 2048.0, 0)]:
        scale = torch.full((1,), 1024.0).to(NEURON)
        t = torch.full((1,), tracker, dtype=torch.int32).to(NEURON)
        torch._amp_update_scale_(scale, t, torch.full((1,), found_inf).to(NEURON), 2.0, 0.5, 2)
        assert (scale.item(), t.item()) == (want_scale, want_tracker)
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0, torch_neuronsim.stats()["fallback_ops"]


@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
def test_grad_scaler_unscales_skips_overflow_and_updates_the_scale(fused):
    """torch.amp.GradScaler("neuron") end to end.  Its unscale_ takes the
    scale's reciprocal in fp64 (`scale.double().reciprocal().float()`), a
    type the device does not have: that one-element step is the only work
    on the CPU."""
    make = lambda ps: torch.optim.AdamW(ps, lr=0.01, fused=fused, foreach=None if fused else True)  # noqa: E731
    want, want_scale = optimizer_steps("cpu", make, clip=1.0, scaler_dev="cpu")
    torch_neuronsim.reset_stats()
    got, got_scale = optimizer_steps(NEURON, make, clip=1.0, scaler_dev="neuron")
    s = torch_neuronsim.stats()
    assert set(s["fallback_ops"]) <= {"aten::copy_", "aten::reciprocal"}, s["fallback_ops"]
    assert "aten::_amp_foreach_non_finite_check_and_unscale_" not in s["fallback_ops"]
    # 2^8, halved by the overflow at step 1, doubled after 2 good steps
    assert want_scale == got_scale == 2.0 ** 8
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=2e-6, atol=2e-6)


def test_tied_weights_stay_tied_on_the_device():
    lin = torch.nn.Linear(6, 10, bias=False)
    emb = torch.nn.Embedding(10, 6)
    emb.weight = lin.weight
    model = torch.nn.ModuleDict({"emb": emb, "head": lin})
    moved = copy.deepcopy(model).to(NEURON)
    assert moved["emb"].weight is moved["head"].weight
    assert moved["emb"].weight.device.type == "neuron"
    back = moved.to("cpu")
    assert back["emb"].weight is back["head"].weight
    solo = torch.nn.Linear(3, 3).to(NEURON)         # nothing shared: ordinary conversion
    assert solo.weight.device.type == "neuron" and solo.bias.device.type == "neuron"


def train_losses(model, dev, steps=10):
    model = copy.deepcopy(model).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 1000, (2, 16), generator=torch.Generator().manual_seed(1)).to(dev)
    losses = []
    for _ in range(steps):
        out = model(ids, labels=ids)          # the models' default attention: sdpa
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        losses.append(out.loss.item())
    return losses


@pytest.mark.parametrize("name", ["llama", "qwen2", "gpt2"])
def test_ten_training_steps_are_native_and_match_cpu(name, monkeypatch):
    """forward (sdpa), backward, clip_grad_norm_, AdamW: 10 steps under
    NEURON_STRICT=1, fp32 losses equal to CPU's within 1e-5 relative"""
    from test_models import build
    torch.manual_seed(0)
    model = build(name)
    if name == "gpt2":                        # dropout draws differ between devices' generators
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
    assert model.config._attn_implementation == "sdpa"
    want = train_losses(model, "cpu")
    monkeypatch.setenv("NEURON_STRICT", "1")
    torch_neuronsim.reset_stats()
    got = train_losses(model, NEURON)
    s = torch_neuronsim.stats()
    assert s["cpu_fallbacks"] == 0, s["fallback_ops"]
    assert "aten::_scaled_dot_product_fused_attention_overrideable_backward" not in s["fallback_ops"]
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-5, atol=0)
    assert want[-1] < want[0] - 0.5           # it learns the batch


def test_gpt2_trains_natively_with_its_default_dropout(monkeypatch):
    from test_models import build
    torch.manual_seed(0)
    model = build("gpt2")
    monkeypatch.setenv("NEURON_STRICT", "1")
    torch_neuronsim.reset_stats()
    losses = train_losses(model, NEURON, steps=3)
    s = torch_neuronsim.stats()
    assert s["cpu_fallbacks"] == 0, s["fallback_ops"]
    assert "aten::native_dropout" in s["native_ops"] or "aten::uniform_" in s["native_ops"]
    assert all(l == l for l in losses)
