"""Batch norm and group norm on `neuron` as native kernels: forward in
training (the running statistics updated in place, unbiased variance) and in
evaluation, backward in both, with and without affine parameters or running
statistics, fp32 and bf16, [N, C], [N, C, L] and [N, C, H, W]; group norm's
backward; var_mean.  Values against CPU PyTorch, zero fallbacks; a float64
batch norm runs on the CPU, counted, and still updates its running stats."""
import copy

import pytest
import torch
import torch.nn.functional as F

import torch_neuronsim

NEURON = torch.device("neuron")


def run_both(module, x, train=True, input_grad=True):
    """(output, input grad, param grads, buffers) on CPU and on neuron"""
    dev = copy.deepcopy(module).to(NEURON)
    res = []
    for m, xx in ((module, x), (dev, x.to(NEURON))):
        m.train(train)
        xx = xx.detach().clone().requires_grad_(input_grad)
        ramp = torch.linspace(-1, 1, x.numel()).view(x.shape).to(xx.device)   # a gradient that varies
        torch_neuronsim.reset_stats()
        y = m(xx)
        (y.float() * ramp).sum().backward()
        res.append((y, xx.grad, [p.grad for p in m.parameters()], list(m.buffers()),
                    torch_neuronsim.stats()["fallback_ops"]))
    return res


def close(a, b, tol):
    if a is None or b is None:
        assert a is None and b is None
        return
    torch.testing.assert_close(b.cpu().float(), a.float(), rtol=tol, atol=tol)


SHAPES = [(6, 5), (4, 5, 7), (3, 5, 4, 6)]


@pytest.mark.parametrize("shape", SHAPES, ids=["NC", "NCL", "NCHW"])
@pytest.mark.parametrize("affine,track", [(True, True), (False, True), (True, False)])
@pytest.mark.parametrize("train", [True, False])
def test_batch_norm_matches_the_cpu(shape, affine, track, train):
    torch.manual_seed(len(shape))
    bn = {2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm1d, 4: torch.nn.BatchNorm2d}[len(shape)](
        5, affine=affine, track_running_stats=track, momentum=0.3)
    if track:   # running statistics away from their initial values
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
    x = torch.randn(*shape) * 3 + 1
    cpu, dev = run_both(bn, x, train)
    assert dev[4] == {}
    for a, b in zip(cpu[:2], dev[:2]):
        close(a, b, 1e-4)
    for a, b in zip(cpu[2] + cpu[3], dev[2] + dev[3]):
        close(a, b, 1e-4)


def test_batch_norm_first_layer_without_input_grad():
    """the backward's output mask leaves the input's gradient out"""
    bn = torch.nn.BatchNorm2d(4)
    cpu, dev = run_both(bn, torch.randn(2, 4, 3, 3), input_grad=False)
    assert dev[4] == {} and dev[1] is None
    for a, b in zip(cpu[2], dev[2]):
        close(a, b, 1e-4)


def test_batch_norm_bf16():
    bn = torch.nn.BatchNorm2d(6).bfloat16()
    cpu, dev = run_both(bn, torch.randn(2, 6, 4, 4).bfloat16())
    assert dev[4] == {}
    assert dev[0].dtype == torch.bfloat16
    for a, b in zip(list(cpu[:2]) + cpu[2] + cpu[3], list(dev[:2]) + dev[2] + dev[3]):
        close(a, b, 3e-2)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((3, 8, 4, 4), 2), ((2, 4, 3, 3), 4)])
def test_group_norm_forward_and_backward(shape, groups, affine):
    torch.manual_seed(groups)
    gn = torch.nn.GroupNorm(groups, shape[1], affine=affine)
    if affine:
        with torch.no_grad():
            gn.weight.uniform_(0.5, 2)
            gn.bias.uniform_(-1, 1)
    cpu, dev = run_both(gn, torch.randn(*shape) * 2 - 1)
    assert dev[4] == {}
    for a, b in zip(list(cpu[:2]) + cpu[2], list(dev[:2]) + dev[2]):
        close(a, b, 1e-4)


@pytest.mark.parametrize("dim,correction,keepdim", [(None, 1, False), ((1,), 0, True), ((0, 2), 1, False),
                                                    ((-1,), 2, True)])
def test_var_mean(dim, correction, keepdim):
    x = torch.randn(4, 5, 6) * 3
    want = torch.var_mean(x, dim=dim, correction=correction, keepdim=keepdim)
    torch_neuronsim.reset_stats()
    got = torch.var_mean(x.to(NEURON), dim=dim, correction=correction, keepdim=keepdim)
    assert torch_neuronsim.stats()["fallback_ops"] == {}
    for g, w in zip(got, want):
        assert g.shape == w.shape
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5)


def test_float64_batch_norm_runs_on_the_cpu_and_keeps_its_running_stats():
    bn = torch.nn.BatchNorm1d(3).double()
    dev = copy.deepcopy(bn).to(NEURON)
    x = torch.randn(5, 3, dtype=torch.float64)
    torch_neuronsim.reset_stats()
    y = dev(x.to(NEURON))
    assert torch_neuronsim.stats()["fallback_ops"] == {"aten::native_batch_norm": 1}
    torch.testing.assert_close(y.cpu(), bn(x))
    torch.testing.assert_close(dev.running_mean.cpu(), bn.running_mean)
    torch.testing.assert_close(dev.running_var.cpu(), bn.running_var)


def test_functional_batch_norm_without_running_stats_in_eval_raises():
    x = torch.randn(4, 3, device=NEURON)
    with pytest.raises(RuntimeError, match="running_mean"):
        torch.ops.aten.native_batch_norm(x, None, None, None, None, False, 0.1, 1e-5)


def test_functional_batch_norm_forms_used_by_compile():
    """_native_batch_norm_legit (running stats written), .no_stats and
    _no_training: the forms torch.compile's decompositions call"""
    aten = torch.ops.aten
    x, w, b = torch.randn(4, 3, 5), torch.rand(3) + 0.5, torch.randn(3)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    rm0, rv0 = rm.clone(), rv.clone()          # for the inference form (the training one writes rm, rv)
    d = lambda t: t.to(NEURON)
    torch_neuronsim.reset_stats()
    rm_d, rv_d = d(rm), d(rv)
    got = [aten._native_batch_norm_legit(d(x), d(w), d(b), rm_d, rv_d, True, 0.2, 1e-5),
           aten._native_batch_norm_legit.no_stats(d(x), d(w), d(b), True, 0.2, 1e-5),
           aten._native_batch_norm_legit_no_training(d(x), d(w), d(b), d(rm0), d(rv0), 0.2, 1e-5)]
    assert torch_neuronsim.stats()["fallback_ops"] == {}
    want = [aten._native_batch_norm_legit(x, w, b, rm, rv, True, 0.2, 1e-5),
            aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.2, 1e-5),
            aten._native_batch_norm_legit_no_training(x, w, b, rm0, rv0, 0.2, 1e-5)]
    for gs, ws in zip(got, want):
        for g, w_ in zip(gs, ws):
            assert g.shape == w_.shape
            torch.testing.assert_close(g.cpu(), w_, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rm_d.cpu(), rm)
    torch.testing.assert_close(rv_d.cpu(), rv)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mse_loss_forward_and_backward(reduction, dtype):
    g = torch.Generator().manual_seed(5)
    x, t = torch.randn(6, 7, generator=g).to(dtype), torch.randn(6, 7, generator=g).to(dtype)
    a, b = x.clone().requires_grad_(), x.to(NEURON).requires_grad_()
    want = F.mse_loss(a, t, reduction=reduction)
    tn = t.to(NEURON)
    torch_neuronsim.reset_stats()
    got = F.mse_loss(b, tn, reduction=reduction)
    got.float().sum().backward()
    assert torch_neuronsim.stats()["fallback_ops"] == {}
    want.float().sum().backward()
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu().float(), want.float(), rtol=tol, atol=tol)
    torch.testing.assert_close(b.grad.cpu().float(), a.grad.float(), rtol=tol, atol=tol)
