"""Convolution on `neuron` (convolution_overrideable and its backward):
1-D and 2-D, stride, padding, dilation, groups and depthwise, forward and
backward against CPU PyTorch with zero fallbacks; a ResNet-style block (with
its batch norms and a group norm) and a 1-D convolution stack train like the
CPU and then infer like it; what the kernels do not cover
(transposed, 3-D) runs on the CPU, counted."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuronsim

NEURON = torch.device("neuron")

CASES = [
    ("1d", (2, 6, 20), (8, 6, 3), dict(stride=1, padding=1)),
    ("1d stride 2 dilation 2", (2, 6, 21), (8, 6, 3), dict(stride=2, padding=2, dilation=2)),
    ("1d depthwise causal (Mamba)", (2, 16, 12), (16, 1, 4), dict(padding=3, groups=16)),
    ("1d groups", (2, 8, 15), (12, 2, 3), dict(padding=1, groups=4)),
    ("2d", (2, 3, 9, 11), (5, 3, 3, 3), dict(padding=1)),
    ("2d stride 2", (2, 4, 10, 10), (6, 4, 3, 3), dict(stride=2, padding=1)),
    ("2d depthwise", (2, 8, 7, 7), (8, 1, 3, 3), dict(padding=1, groups=8)),
    ("2d 1x1", (2, 8, 5, 5), (4, 8, 1, 1), dict()),
    ("2d dilation 2", (1, 3, 12, 12), (4, 3, 3, 3), dict(padding=2, dilation=2)),
    ("2d rectangular", (1, 2, 9, 13), (3, 2, 2, 4), dict(stride=(2, 1), padding=(1, 2))),
]


@pytest.mark.parametrize("name,xs,ws,kw", CASES, ids=[c[0] for c in CASES])
def test_convolution_forward_and_backward_match_the_cpu(name, xs, ws, kw):
    g = torch.Generator().manual_seed(len(name))
    x = torch.randn(*xs, generator=g, requires_grad=True)
    w = torch.randn(*ws, generator=g, requires_grad=True)
    b = torch.randn(ws[0], generator=g, requires_grad=True)
    conv = F.conv1d if len(xs) == 3 else F.conv2d
    y = conv(x, w, b, **kw)
    gy = torch.randn(y.shape, generator=g)
    y.backward(gy)
    xd, wd, bd = (t.detach().to(NEURON).requires_grad_() for t in (x, w, b))
    torch_neuronsim.reset_stats()
    yd = conv(xd, wd, bd, **kw)
    yd.backward(gy.to(NEURON))
    assert torch_neuronsim.stats()["fallback_ops"] == {}
    torch.testing.assert_close(yd.detach().cpu(), y.detach(), rtol=1e-4, atol=1e-4)
    for d, r in ((xd, x), (wd, w), (bd, b)):
        torch.testing.assert_close(d.grad.cpu(), r.grad, rtol=1e-4, atol=1e-3)


class Block(torch.nn.Module):
    """a ResNet basic block: conv-BN-relu-conv-BN + a strided 1x1 conv-BN
    shortcut, then a group norm (batch norm in training and evaluation, its
    running statistics, group norm forward and backward all native)"""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = torch.nn.BatchNorm2d(cout)
        self.c2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = torch.nn.BatchNorm2d(cout)
        self.short = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, bias=False),
                                         torch.nn.BatchNorm2d(cout))
        self.gn = torch.nn.GroupNorm(2, cout)

    def forward(self, x):
        y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
        return self.gn(torch.relu(y + self.short(x)))


def conv_stack():
    return torch.nn.Sequential(torch.nn.Conv1d(4, 16, 5, padding=2), torch.nn.GELU(),
                               torch.nn.Conv1d(16, 16, 3, padding=2, dilation=2, groups=4), torch.nn.GELU(),
                               torch.nn.Conv1d(16, 8, 3, stride=2), torch.nn.Flatten(), torch.nn.LazyLinear(3))


@pytest.mark.parametrize("kind", ["resnet block", "1-d stack"])
def test_small_convolutional_models_train_like_the_cpu(kind):
    torch.manual_seed(0)
    if kind == "resnet block":
        model, x = torch.nn.Sequential(Block(3, 8, 2), torch.nn.Flatten(), torch.nn.Linear(8 * 5 * 5, 4)), \
            torch.randn(2, 3, 10, 10)
    else:
        model, x = conv_stack(), torch.randn(2, 4, 30)
        model(x)                                   # the lazy layer's shape
    target = torch.randn(2, model(x).shape[-1])
    dev_model = __import__("copy").deepcopy(model).to(NEURON)
    losses = {}
    for name, m, xx, tt in (("cpu", model, x, target), ("neuron", dev_model, x.to(NEURON), target.to(NEURON))):
        opt = torch.optim.SGD(m.parameters(), lr=0.05)
        torch_neuronsim.reset_stats()
        out = []
        for _ in range(3):
            loss = (m(xx) - tt).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            out.append(loss.item())
        losses[name] = out
        if name == "neuron":
            assert torch_neuronsim.stats()["fallback_ops"] == {}
    assert losses["neuron"] == pytest.approx(losses["cpu"], rel=1e-4)
    for p, q in zip(dev_model.parameters(), model.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-4)
    for p, q in zip(dev_model.buffers(), model.buffers()):      # running statistics, batch counts
        torch.testing.assert_close(p.cpu(), q, rtol=1e-4, atol=1e-5)
    # inference with the running statistics
    model.eval()
    dev_model.eval()
    torch_neuronsim.reset_stats()
    with torch.no_grad():
        torch.testing.assert_close(dev_model(x.to(NEURON)).cpu(), model(x), rtol=1e-4, atol=1e-4)
    assert torch_neuronsim.stats()["fallback_ops"] == {}


TRANSPOSED = [  # N, Cin, Cout, groups, k, stride, padding, output_padding, dilation, length
    (1, 3, 3, 1, 3, 2, 2, 1, 1, 4), (2, 2, 4, 2, 3, 3, 1, 2, 1, 4), (2, 4, 6, 2, 2, 1, 0, 0, 2, 5),
    (1, 1, 1, 1, 4, 2, 0, 0, 1, 4), (2, 6, 4, 2, 3, 2, 3, 1, 2, 6), (1, 2, 3, 1, 3, 1, 4, 0, 1, 7)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_transposed_and_3d_convolutions_run_natively(nd, dtype):
    """conv_transpose as the direct convolution it is the adjoint of (zeros
    between the input's elements, the flipped per-group weight; a padding
    above dilation (k - 1) crops), and 3-D convolutions by the same im2col
    (the 9-dim window view copied with its dims merged)"""
    g = torch.Generator().manual_seed(nd)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    tfn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
    fn = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
    for (n, cin, cout, gr, k, s, p, op, d, length) in TRANSPOSED:
        x = torch.randn((n, cin) + (length,) * nd, generator=g).to(dtype)
        w = torch.randn((cin, cout // gr) + (k,) * nd, generator=g).to(dtype)
        b = torch.randn(cout, generator=g).to(dtype)
        kw = dict(stride=s, padding=p, output_padding=op, groups=gr, dilation=d)
        torch_neuronsim.reset_stats()
        got = tfn(x.to(NEURON), w.to(NEURON), b.to(NEURON), **kw)
        assert torch_neuronsim.stats()["fallback_ops"] == {}
        torch.testing.assert_close(got.cpu(), tfn(x, w, b, **kw), **tol)
        w2 = torch.randn((cout, cin // gr) + (k,) * nd, generator=g).to(dtype)
        kw2 = dict(stride=s, padding=p, groups=gr, dilation=d)
        if (length + 2 * p - d * (k - 1)) > 0:
            got = fn(x.to(NEURON), w2.to(NEURON), b.to(NEURON), **kw2)
            assert torch_neuronsim.stats()["fallback_ops"] == {}
            torch.testing.assert_close(got.cpu(), fn(x, w2, b, **kw2), **tol)


def test_transposed_convolution_backward_runs_on_the_cpu_counted():
    x, w = torch.randn(1, 4, 6, 6), torch.randn(4, 2, 3, 3)
    xd, wd = x.to(NEURON).requires_grad_(), w.to(NEURON).requires_grad_()
    torch_neuronsim.reset_stats()
    F.conv_transpose2d(xd, wd, stride=2).sum().backward()
    assert torch_neuronsim.stats()["fallback_ops"] == {"aten::convolution_backward_overrideable": 1}
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    F.conv_transpose2d(xc, wc, stride=2).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(wd.grad.cpu(), wc.grad, rtol=1e-4, atol=1e-4)


def test_bad_convolution_arguments_raise_clearly():
    with pytest.raises(RuntimeError, match="Kernel size can.t be greater than actual input size"):
        F.conv1d(torch.randn(1, 2, 3).to(NEURON), torch.randn(4, 2, 5).to(NEURON))
