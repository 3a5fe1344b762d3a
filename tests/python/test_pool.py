"""Pooling, unpooling and resampling composed from native kernels
(aten/nn/pool.cpp) against CPU PyTorch, natively (no CPU fallback): window
geometries (kernel, stride, padding, dilation, ceil mode) over sizes across
tile boundaries, NaN and -inf in windows, CPU's errors."""
import itertools

import pytest
import torch
import torch.nn.functional as F

import torch_neuronsim
from nsim_util import assert_native_matches

NEURON = torch.device("neuron")


native = assert_native_matches


GEOMETRY = [(2, None, 0, 1, False), (3, 2, 1, 1, True), (3, 1, 1, 2, False), (4, 3, 2, 1, True), (1, 1, 0, 1, False)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("hw", [(1, 7), (7, 129), (129, 5)], ids=str)
def test_pooling(dtype, hw):
    g = torch.Generator().manual_seed(sum(hw))
    x = torch.randn(2, 3, *hw, generator=g).to(dtype)
    for k, s, p, d, ceil in GEOMETRY:
        if k > min(hw) + 2 * p or (k - 1) * d + 1 > min(hw) + 2 * p:
            continue
        native(lambda t: F.max_pool2d(t, k, s, p, d, ceil_mode=ceil, return_indices=True), x)
        if d == 1:
            for cip in (True, False):
                native(lambda t: F.avg_pool2d(t, k, s, p, ceil_mode=ceil, count_include_pad=cip), x)
            native(lambda t: F.avg_pool2d(t, k, s, p, ceil_mode=ceil, divisor_override=3), x)
    for o in [(1, 1), (3, 2), hw]:
        native(lambda t: F.adaptive_avg_pool2d(t, o), x)
        native(lambda t: F.adaptive_max_pool2d(t, o, return_indices=True), x)


def test_max_pool_nan_and_negative_infinity():
    x = torch.full((1, 1, 4, 4), -float("inf"))
    x[0, 0, 3, 3] = float("nan")
    native(lambda t: F.max_pool2d(t, 3, 1, 1, return_indices=True), x)   # padded windows of -inf: first in-bounds index
    native(lambda t: F.max_pool2d(t, 2, 2, return_indices=True), x)


def test_max_pool_backward_and_unpool():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 9, 11, generator=g)
    v, i = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    native(lambda t, j: F.max_unpool2d(t, j, 3, 2, 1, output_size=x.shape[-2:]), v, i)
    xr = x.to(NEURON).requires_grad_()
    F.max_pool2d(xr, 3, 2, 1).sum().backward()
    xc = x.clone().requires_grad_()
    F.max_pool2d(xc, 3, 2, 1).sum().backward()
    torch.testing.assert_close(xr.grad.cpu(), xc.grad)
    with pytest.raises(RuntimeError, match="invalid max index"):
        F.max_unpool2d(v.to(NEURON), i.to(NEURON) + 1000, 3, 2, 1, output_size=x.shape[-2:])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("size", [(1, 1), (5, 7), (13, 129), (128, 3)], ids=str)
def test_upsampling(dtype, size):
    g = torch.Generator().manual_seed(size[0])
    x = torch.randn(2, 3, 5, 6, generator=g).to(dtype)
    # bilinear in bf16 runs on the CPU (its rounding schedule is CPU's own)
    modes = ["nearest", "nearest-exact"] + (["bilinear"] if dtype == torch.float32 else [])
    for mode, align in itertools.product(modes, [None, True, False]):
        if (align is None) != mode.startswith("nearest"):
            continue
        native(lambda t: F.interpolate(t, size=size, mode=mode, align_corners=align), x)
    for sf in (0.5, 2.0, 2.7):
        native(lambda t: F.interpolate(t, scale_factor=sf, mode="nearest"), x)
        if dtype == torch.float32:
            native(lambda t: F.interpolate(t, scale_factor=sf, mode="bilinear", align_corners=False), x)
    native(lambda t: F.interpolate(t, size=size[1], mode="linear", align_corners=False), x[:, :, 0])
    native(lambda t: F.interpolate(t, size=size[1], mode="nearest"), x[:, :, 0])


def test_pool_errors_as_cpu():
    x = torch.randn(1, 1, 4, 4, device=NEURON)
    with pytest.raises(RuntimeError, match="pad should be"):
        F.max_pool2d(x, 2, 1, 2)
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.avg_pool2d(x, 5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_padding_im2col_shuffle_adaptive3d(dtype):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 6, 9, 129, generator=g).to(dtype)
    for pad in [(1, 2), (3, 0), (-1, 2)]:
        native(lambda t: F.pad(t, pad, mode="replicate"), x[:, :, 0])
        if min(pad) >= 0:
            native(lambda t: F.pad(t, pad, mode="reflect"), x[:, :, 0])
    native(lambda t: F.pad(t, (1, 2, 3, 0), mode="replicate"), x)
    native(lambda t: F.pad(t, (-2, 1, 1, -3), mode="replicate"), x)
    native(lambda t: F.unfold(t, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), x)
    native(lambda t: F.channel_shuffle(t, 3), x)
    if dtype == torch.float32:   # bf16: CPU's 3-D kernel accumulates in bf16; it runs there
        native(lambda t: F.adaptive_avg_pool3d(t, (2, 4, 7)), x)
    with pytest.raises(RuntimeError):
        F.pad(x[:, :, 0].to(NEURON), (200, 1), mode="reflect")


POOL3D = [dict(kernel_size=3, stride=2, ceil_mode=True), dict(kernel_size=2),
          dict(kernel_size=(2, 3, 2), stride=(1, 2, 1), padding=(1, 1, 0)), dict(kernel_size=2, stride=1, padding=1)]


@pytest.mark.parametrize("shape", [(1, 2, 3, 6, 5), (2, 3, 4, 4, 4), (2, 5, 5, 5), (1, 2, 7, 9, 8)], ids=str)
def test_pooling_in_3d(shape):
    """max / average / adaptive max pooling over three spatial dims by the
    same windows as 2-D (first maximum, CPU's divisors and indices); CPU's
    avg_pool3d has no bf16 kernel: its NotImplementedError"""
    g = torch.Generator().manual_seed(len(shape))
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(shape, generator=g).to(dtype)
        for kw in POOL3D + [dict(kernel_size=3, stride=2, dilation=(1, 2, 1), ceil_mode=True)]:
            assert_native_matches(lambda t: F.max_pool3d(t, return_indices=True, **kw), x)
        assert_native_matches(lambda t: F.adaptive_max_pool3d(t, (2, 3, 1), return_indices=True), x)
    x = torch.randn(shape, generator=g)
    for kw in POOL3D:
        for cip in (True, False):
            assert_native_matches(lambda t: F.avg_pool3d(t, count_include_pad=cip, **kw), x)
        assert_native_matches(lambda t: F.avg_pool3d(t, divisor_override=3, **kw), x)
    with pytest.raises(NotImplementedError):
        F.avg_pool3d(x.bfloat16().to("neuron"), 2)


def test_max_pool3d_kernel_over_the_input_with_padding():
    """CPU's max_pool3d skips average pooling's input-size check"""
    assert_native_matches(lambda t: F.max_pool3d(t, 3, 1, 1), torch.randn(1, 1, 2, 2, 2))
