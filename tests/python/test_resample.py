"""Bicubic / trilinear upsampling and grid_sampler (aten/nn/resample.cpp)
against CPU PyTorch, fp32, natively: sizes up and down across tile
boundaries, both align_corners, every padding mode, grids reaching past
the input, NaN and infinite coordinates; bf16 / fp16 run on the CPU,
counted (CPU rounds their intermediate steps)."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuronsim
from nsim_util import assert_native_matches

SIZES = [(4, 4, 3, 3), (4, 5, 3, 4), (5, 6, 13, 129), (7, 9, 15, 4), (1, 1, 3, 3), (3, 2, 127, 1)]


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("h,w,oh,ow", SIZES)
def test_bicubic_and_trilinear(h, w, oh, ow, align):
    g = torch.Generator().manual_seed(h * w)
    x = torch.randn(2, 3, h, w, generator=g)
    assert_native_matches(lambda t: F.interpolate(t, size=(oh, ow), mode="bicubic", align_corners=align), x)
    x3 = torch.randn(2, 3, h, w, 3, generator=g)
    assert_native_matches(lambda t: F.interpolate(t, size=(oh, ow, 5), mode="trilinear", align_corners=align), x3)


def test_upsampling_by_scale_factor():
    x = torch.randn(1, 2, 5, 5, generator=torch.Generator().manual_seed(1))
    assert_native_matches(lambda t: F.interpolate(t, scale_factor=1.7, mode="bicubic"), x)
    assert_native_matches(lambda t: F.interpolate(t, scale_factor=0.6, mode="trilinear"), x.unsqueeze(2).repeat(1, 1, 4, 1, 1))


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample(mode, pad, align):
    g = torch.Generator().manual_seed(3)
    kw = dict(mode=mode, padding_mode=pad, align_corners=align)
    x = torch.randn(2, 3, 5, 20, generator=g)
    grid = torch.rand(2, 13, 10, 2, generator=g) * 2.4 - 1.2
    grid[0, 0, 0, 0] = float("nan")
    grid[0, 1, 1] = torch.tensor([float("inf"), 0.0])
    grid[1, 2, 3] = torch.tensor([0.5, -float("inf")])
    assert_native_matches(lambda a, b: F.grid_sample(a, b, **kw), x, grid)
    x3 = torch.randn(2, 3, 5, 6, 7, generator=g)
    g3 = torch.rand(2, 4, 3, 2, 3, generator=g) * 2.4 - 1.2
    assert_native_matches(lambda a, b: F.grid_sample(a, b, **kw), x3, g3)


def test_reduced_precision_runs_on_the_cpu_counted():
    x = torch.randn(1, 2, 4, 4).bfloat16()
    torch_neuronsim.reset_stats()
    got = F.interpolate(x.to("neuron"), size=(7, 7), mode="bicubic")
    assert torch_neuronsim.stats()["fallback_ops"] == {"aten::upsample_bicubic2d.out": 1}
    assert torch.equal(got.cpu(), F.interpolate(x, size=(7, 7), mode="bicubic"))
