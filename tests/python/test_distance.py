"""cdist and pdist (aten/linalg/distance.cpp) against CPU PyTorch: every p CPU
special-cases (0, 1, 2, inf) and a general one, each compute mode, batched
and broadcast operands, rows above the 25 where CPU switches to a matrix
product, empty coordinates, natively."""
import math

import pytest
import torch
import torch.nn.functional as F

import torch_neuronsim

MODES = ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"]


def close(fn, *args):
    before = torch_neuronsim.stats()["cpu_fallbacks"]
    got = fn(*[a.to("neuron") for a in args])
    assert torch_neuronsim.stats()["cpu_fallbacks"] == before, "ran on the CPU"
    torch.testing.assert_close(got.cpu(), fn(*args), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.5, math.inf, 0.5])
def test_cdist(p, mode):
    g = torch.Generator().manual_seed(1)
    for a, b in [((5, 5), (6, 5)), ((2, 5, 3), (2, 6, 3)), ((30, 4), (7, 4)), ((1, 0), (3, 0)), ((2, 1, 4, 3), (3, 5, 3))]:
        x1, x2 = torch.randn(a, generator=g), torch.randn(b, generator=g)
        if x1.numel():
            x1.view(-1)[0] = x2.view(-1)[0]   # a zero difference (p = 0 counts nonzero ones)
        close(lambda u, v: torch.cdist(u, v, p=p, compute_mode=mode), x1, x2)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.5, math.inf])
def test_pdist(p):
    g = torch.Generator().manual_seed(2)
    for shape in [(1, 1), (1, 5), (5, 1), (7, 3), (0, 3), (40, 6)]:
        close(lambda t: F.pdist(t, p=p), torch.randn(shape, generator=g))
