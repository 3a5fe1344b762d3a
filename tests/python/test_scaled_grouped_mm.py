"""torch._scaled_grouped_mm on `neuron` (PyTorch has no CPU kernel for it;
TorchNeuron supports it for MoE experts): fp8 e4m3fn groups with rowwise
fp32 scales, bf16 out, in its four layouts, against an fp32 reference of
the definition out_g = (a_g @ b_g) * scale_a_g[:, None] * scale_b_g[None, :];
fp8 widening copies exact over all 256 codes; bad arguments raise clearly."""
import pytest
import torch

import torch_neuronsim

NEURON = torch.device("neuron")
F8 = torch.float8_e4m3fn
G = torch.Generator().manual_seed(0)


def fp8(*shape):
    return (torch.randn(*shape, generator=G) * 4).to(F8)


def col_major(b):
    """b with its last two dims column-major, as the op requires"""
    return b.transpose(-2, -1).contiguous().transpose(-2, -1)


def scales(*shape):
    return torch.rand(*shape, generator=G) + 0.25


def reference(a, b, sa, sb, offs):
    af, bf = a.float(), b.float()
    if a.dim() == 3 and b.dim() == 3:
        return ((af @ bf) * sa[:, :, None] * sb[:, None, :]).bfloat16()
    ends = offs.tolist()
    starts = [0] + ends[:-1]
    if a.dim() == 2 and b.dim() == 3:
        out = torch.zeros(a.shape[0], b.shape[-1])
        for g, (lo, hi) in enumerate(zip(starts, ends)):
            out[lo:hi] = (af[lo:hi] @ bf[g]) * sa[lo:hi, None] * sb[g][None, :]
    elif a.dim() == 3:
        out = torch.zeros(a.shape[1], b.shape[-1])
        for g, (lo, hi) in enumerate(zip(starts, ends)):
            out[:, lo:hi] = (af[g] @ bf[:, lo:hi]) * sa[g][:, None] * sb[lo:hi][None, :]
    else:
        M, N = a.shape[0], b.shape[1]
        out = torch.zeros(len(ends), M, N)
        for g, (lo, hi) in enumerate(zip(starts, ends)):
            out[g] = (af[:, lo:hi] @ bf[lo:hi]) * sa[g * M:(g + 1) * M, None] * sb[g * N:(g + 1) * N][None, :]
    return out.bfloat16()


def check(a, b, sa, sb, offs=None):
    want = reference(a, b, sa, sb, offs)
    torch_neuronsim.reset_stats()
    d = lambda t: None if t is None else t.to(NEURON)
    got = torch._scaled_grouped_mm(d(a), col_major(d(b)), d(sa), d(sb), offs=d(offs),
                                   out_dtype=torch.bfloat16)
    assert torch_neuronsim.stats()["fallback_ops"] == {}
    assert got.dtype == torch.bfloat16 and got.shape == want.shape
    torch.testing.assert_close(got.cpu().float(), want.float(), rtol=1e-2, atol=1e-2)


def test_2d_tokens_by_3d_experts():
    """a MoE's routed tokens (rows grouped by expert) times each expert's weight"""
    a, b = fp8(40, 32), fp8(4, 32, 24)
    check(a, b, scales(40), scales(4, 24), torch.tensor([8, 8, 30, 37], dtype=torch.int32))


def test_3d_by_2d_column_groups():
    a, b = fp8(3, 16, 32), fp8(32, 30)
    check(a, b, scales(3, 16), scales(30), torch.tensor([10, 20, 30], dtype=torch.int32))


def test_2d_by_2d_k_groups():
    """the weight gradient's layout: groups along K, out [G, M, N]"""
    a, b = fp8(16, 48), fp8(48, 24)
    check(a, b, scales(3 * 16), scales(3 * 24), torch.tensor([16, 16, 48], dtype=torch.int32))


def test_3d_by_3d_batched():
    a, b = fp8(4, 16, 32), fp8(4, 32, 16)
    check(a, b, scales(4, 16), scales(4, 16))


def test_fp8_widening_is_exact_for_every_code():
    for dt in (torch.float8_e4m3fn, torch.float8_e5m2):
        x = torch.arange(256, dtype=torch.uint8).view(dt)
        torch_neuronsim.reset_stats()
        for o in (torch.float32, torch.bfloat16, torch.float16):
            got = x.to(NEURON).to(o).cpu()
            torch.testing.assert_close(got, x.to(o), rtol=0, atol=0, equal_nan=True)
        assert torch_neuronsim.stats()["fallback_ops"] == {}


@pytest.mark.parametrize("bad,match", [
    (dict(a=torch.randn(8, 16).bfloat16()), "float8_e4m3fn"),
    (dict(sa=torch.ones(8, dtype=torch.float64)), "float32"),
    (dict(offs=None), "int32 offs"),
    (dict(offs=torch.tensor([5, 3], dtype=torch.int32)), "non-decreasing"),
    (dict(sa=torch.ones(7)), "scale_a must have shape"),
    (dict(out_dtype=torch.float32), "bfloat16"),
])
def test_bad_arguments_raise_clearly(bad, match):
    args = dict(a=fp8(8, 16), b=fp8(2, 16, 8), sa=torch.ones(8), sb=torch.ones(2, 8),
                offs=torch.tensor([4, 8], dtype=torch.int32), out_dtype=torch.bfloat16)
    args.update(bad)
    d = lambda t: None if t is None else t.to(NEURON)
    with pytest.raises(RuntimeError, match=match):
        torch._scaled_grouped_mm(d(args["a"]), col_major(d(args["b"])), d(args["sa"]), d(args["sb"]),
                                 offs=d(args["offs"]), out_dtype=args["out_dtype"])
