"""One-program forms of the optimizer's pointwise ops and of broadcasts by a
per-row column or a single element: results against CPU PyTorch, and each
op is exactly one device program (no composed ops, no write-back copy)."""
import pytest
import torch

import torch_neuronsim

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
TOL = {torch.float32: 2e-6, torch.bfloat16: 1e-2, torch.float16: 2e-3}


def programs(fn):
    torch_neuronsim.reset_stats()
    r = fn()
    s = torch_neuronsim.stats()
    return r, s["programs_executed"], s["cpu_fallbacks"]


def close(r, e, dt):
    assert r.dtype == e.dtype and r.shape == e.shape
    torch.testing.assert_close(r.cpu().float(), e.float(), rtol=TOL[dt], atol=TOL[dt])


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("value", [1.0, 0.3, -2.0])
def test_addcdiv_addcmul_in_place_are_one_program(dt, value):
    g = torch.Generator().manual_seed(0)
    s, a = (torch.randn(300, 257, generator=g).to(dt) for _ in range(2))
    b = (torch.rand(300, 257, generator=g) + 0.5).to(dt)
    for name in ("addcdiv_", "addcmul_"):
        S, A, B = s.to("neuron"), a.to("neuron"), b.to("neuron")
        ptr = S.data_ptr()
        _, n, fb = programs(lambda: getattr(S, name)(A, B, value=value))
        assert (n, fb) == (1, 0), name
        assert S.data_ptr() == ptr
        close(S, getattr(s.clone(), name)(a, b, value=value), dt)
    S = s.to("neuron")
    r, n, _ = programs(lambda: torch.addcdiv(S, A, B, value=value))
    assert n == 1
    close(r, torch.addcdiv(s, a, b, value=value), dt)


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("w", [0.1, 0.5, 0.9])
def test_lerp_in_place_is_one_program(dt, w):
    g = torch.Generator().manual_seed(1)
    a, b = (torch.randn(1000, 33, generator=g).to(dt) for _ in range(2))
    A, B = a.to("neuron"), b.to("neuron")
    _, n, fb = programs(lambda: A.lerp_(B, w))
    assert (n, fb) == (1, 0)
    close(A, a.clone().lerp_(b, w), dt)


def test_fused_ops_decline_to_composition_for_mixed_layouts():
    s = torch.randn(64, 48)
    t = torch.randn(48, 64).t()                     # strided operand: composed, still right
    S, T = s.to("neuron"), t.to("neuron")
    S.addcmul_(T, T, value=0.5)
    close(S, s.clone().addcmul_(t, t, value=0.5), torch.float32)


@pytest.mark.parametrize("dt", FLOATS + [torch.int32])
@pytest.mark.parametrize("op", [torch.mul, torch.add, torch.sub, torch.div, torch.maximum])
def test_per_row_and_single_element_broadcasts_match_cpu(dt, op):
    if dt == torch.int32 and op is torch.div:
        pytest.skip("true division of integers is a float result: another path")
    g = torch.Generator().manual_seed(2)
    a = (torch.randn(512, 300, generator=g) * 10).to(dt)
    for b in [(torch.randn(512, 1, generator=g) * 10).to(dt), torch.tensor(0.37 if dt.is_floating_point else 3).to(dt),
              torch.tensor([1.7 if dt.is_floating_point else 2]).to(dt)]:
        r, n, fb = programs(lambda: op(a.to("neuron"), b.to("neuron")))
        e = op(a, b)
        assert r.shape == e.shape and r.dtype == e.dtype
        assert torch.equal(r.cpu(), e), (op.__name__, list(b.shape))
        assert fb == 0
    if dt.is_floating_point:
        A, c = a.to("neuron"), torch.tensor(0.5, dtype=dt, device="neuron")
        _, n, _ = programs(lambda: A.mul_(c))        # clip_grad_norm_'s device coefficient
        assert n == 1


@pytest.mark.parametrize("dt", FLOATS + [torch.int32, torch.bool])
@pytest.mark.parametrize("shape", [(1,), (127, 129), (4, 1, 128, 128), (3, 513)])
def test_where_with_single_element_operands_reads_them_once(dt, shape):
    """where(m, a, b) and masked_fill with a 0-dim operand: one program,
    the value read once, not first expanded to the result's size"""
    g = torch.Generator().manual_seed(3)
    m = torch.rand(shape, generator=g) > 0.5
    a = torch.tensor(0.0 if dt.is_floating_point else 0, dtype=dt)
    b = torch.tensor(-3.0e4 if dt.is_floating_point else 1, dtype=dt)
    x = (torch.randn(shape, generator=g) * 5).to(dt)
    M, A, B, X = m.to("neuron"), a.to("neuron"), b.to("neuron"), x.to("neuron")
    torch_neuronsim.reset_stats()
    r = torch.where(M, A, B)
    s = torch_neuronsim.stats()
    assert torch.equal(r.cpu(), torch.where(m, a, b))
    assert s["programs_executed"] == 1
    assert s["hbm_read_bytes"] <= m.numel() + 2 * 128 * a.element_size()   # the mask, each value once per partition
    for v in (A, B):
        r = torch.where(M, v, X)
        assert torch.equal(r.cpu(), torch.where(m, v.cpu(), x))
        r = torch.where(M, X, v)
        assert torch.equal(r.cpu(), torch.where(m, x, v.cpu()))
    if dt is not torch.bool:
        _, n, fb = programs(lambda: X.masked_fill(M, 7))
        assert (n, fb) == (2, 0)            # the value's fill, the select
        assert torch.equal(X.masked_fill(M, A).cpu(), x.masked_fill(m, a))
