"""Short rows packed onto the partitions, and sums over a middle dim.

A per-row operand of a binary op ([..., 1] against [..., 32]) and a
reduction over a short last dim put `pack` whole rows on each partition
(elementwise.c, rows.c); a sum over a few rows of a middle dim adds them on
VectorE (rows.c's slab sum) instead of a TensorE product per slab.  Values
as CPU PyTorch's (bit for bit where the fold is the same), across tile
edges; time of the bytes, not of 128-row tiles of 32 columns."""
import itertools

import pytest
import torch

import torch_neuronsim

NEURON = torch.device("neuron")
ROWS = [255, 256, 257, 383, 2048, 4099, 513 * 128 + 5]


def _timed(fn):
    fn()
    torch_neuronsim.reset_stats()
    out = fn()
    return out, torch_neuronsim.stats()["kernel_time_ns"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64])
def test_per_row_operands_match_cpu(dtype):
    g = torch.Generator().manual_seed(0)
    for rows, cols in itertools.product(ROWS, [1, 2, 31, 32, 100, 511]):
        a = (torch.randn(rows, cols, generator=g) * 10).to(dtype)
        b = (torch.randn(rows, 1, generator=g) * 10 + 0.5).to(dtype)
        ops = (torch.mul, torch.add, torch.sub, torch.maximum) + ((torch.div,) if dtype.is_floating_point else ())
        for op in ops:
            assert torch.equal(op(a.to(NEURON), b.to(NEURON)).cpu(), op(a, b)), (rows, cols, op.__name__)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_short_row_reductions_fold_as_one_row_per_partition(dtype):
    """Packed rows reduce exactly as unpacked ones: chunks of under 256 rows
    (never packed) give the same bits; and match CPU within tolerance."""
    g = torch.Generator().manual_seed(1)
    for cols in (1, 7, 32, 100, 256):
        x = torch.randn(4099, cols, generator=g).to(dtype)
        x[5, 0], x[7, cols - 1] = float("nan"), float("inf")
        d = x.to(NEURON)
        for f in (lambda t: t.sum(-1), lambda t: t.mean(-1), lambda t: t.amax(-1), lambda t: t.amin(-1),
                  lambda t: t.sum(-1, dtype=torch.float32)):
            whole = f(d).cpu()
            parts = torch.cat([f(d[i:i + 200]).cpu() for i in range(0, 4099, 200)])
            torch.testing.assert_close(whole, parts, rtol=0, atol=0, equal_nan=True, msg=str(cols))
            # (a 256-long fp32 row folds in order; CPU's cascade differs by ulps)
            tol = 2e-5 if dtype == torch.float32 else 2e-2
            torch.testing.assert_close(whole, f(x), equal_nan=True, rtol=tol, atol=tol)


def test_middle_dim_sums_match_cpu():
    g = torch.Generator().manual_seed(2)
    for shape, dims in [((4, 2, 2, 128, 32), (2,)), ((8, 3, 4096), (1,)), ((1, 16, 129), (1,)),
                        ((5, 7, 1000), (1,)), ((2, 4, 513, 3), (1,)), ((3, 2, 5, 257), (1, 2)), ((6, 2, 128), (1,))]:
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            x = torch.randn(shape, generator=g).to(dt)
            for f in (lambda t: t.sum(dims, keepdim=True), lambda t: t.mean(dims),
                      lambda t: t.sum(dims, dtype=torch.float32)):
                got, want = f(x.to(NEURON)).cpu(), f(x)
                rows = 1
                for d in dims:
                    rows *= shape[d]
                if dt == torch.float32 and rows <= 4:
                    assert torch.equal(got, want), (shape, dims)   # added in order, as CPU
                else:
                    torch.testing.assert_close(got, want, **({} if dt == torch.float32 else
                                                             {"rtol": 1e-2, "atol": 1e-2}))


def test_short_rows_cost_their_bytes():
    """[4, 128, 4, 32] * [4, 128, 4, 1] and its mean over the last dim within
    2x of a plain same-shape elementwise op over as many bytes, GQA's
    gradient sum over a dim of 2 within 3x (its 8 slabs are tiles of their
    own) -- they were 4.5x, 4.4x and 17x (16 tiles of 32 columns, a TensorE
    product per slab)."""
    a = torch.randn(4, 128, 4, 32, device=NEURON)
    r = torch.randn(4, 128, 4, 1, device=NEURON)
    same = torch.randn(4, 128, 4, 32, device=NEURON)
    _, plain = _timed(lambda: a * same)
    _, row = _timed(lambda: a * r)
    _, mean = _timed(lambda: a.mean(-1, keepdim=True))
    x = torch.randn(4, 2, 2, 128, 32, device=NEURON)
    _, slab = _timed(lambda: x.sum(2, keepdim=True))
    assert row <= 2 * plain and mean <= 2 * plain and slab <= 3 * plain, (plain, row, mean, slab)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_trailing_dims_operands_match_cpu(dtype):
    """b over a's trailing dims ([1, 1, S, D] cos over [B, H, S, D]), also
    under a transposed view of a, and a [cols] row over few long rows."""
    g = torch.Generator().manual_seed(3)
    cases = [((4, 4, 128, 32), (1, 1, 128, 32)), ((4, 4, 128, 32), (128, 32)), ((2, 129, 257), (1, 129, 257)),
             ((3, 1024), (1024,)), ((7, 2048), (2048,)), ((2, 3, 1000), (3, 1000)), ((100, 4096), (4096,)),
             ((1, 8192), (8192,)), ((5, 3), (1, 3)), ((6, 4, 2), (1, 4, 1))]
    for ash, bsh in cases:
        a = (torch.randn(ash, generator=g) * 10).to(dtype)
        b = (torch.randn(bsh, generator=g) * 10 + 0.5).to(dtype)
        for op in (torch.mul, torch.add, torch.sub, torch.maximum):
            assert torch.equal(op(a.to(NEURON), b.to(NEURON)).cpu(), op(a, b)), (ash, bsh, op.__name__)
            assert torch.equal(op(b.to(NEURON), a.to(NEURON)).cpu(), op(b, a)), (ash, bsh, op.__name__)
    heads = (torch.randn(4, 128, 4, 32, generator=g) * 10).to(dtype)
    cos = (torch.randn(1, 1, 128, 32, generator=g) * 10).to(dtype)
    view = heads.to(NEURON).transpose(1, 2)
    assert torch.equal((view * cos.to(NEURON)).cpu(), heads.transpose(1, 2) * cos)


def test_trailing_dims_operand_costs_one_program():
    """rotary's cos times q: one broadcast program over all 128 partitions,
    within 1.5x of a same-shape product (it was an expanding copy of cos and
    the product: 2x)"""
    q = torch.randn(4, 4, 128, 32, device=NEURON)
    cos = torch.randn(1, 1, 128, 32, device=NEURON)
    same = torch.randn(4, 4, 128, 32, device=NEURON)
    _, plain = _timed(lambda: q * same)
    torch_neuronsim.reset_stats()
    _, rot = _timed(lambda: q * cos)
    assert torch_neuronsim.stats()["programs_executed"] == 1
    assert rot <= 1.5 * plain, (rot, plain)


def test_whole_tensor_reductions_spread_over_the_partitions():
    """sum / mean / amax / amin of a whole tensor: up to 128 equal chunks,
    one to a partition, then their fp32 partials -- values as CPU's within
    fp32 summation tolerance (NaN and inf kept), time within 2x of a plain
    elementwise op over the tensor (on one partition it was 4.6x)"""
    g = torch.Generator().manual_seed(4)
    for n in (4096, 4097, 16384, 65536, 128 * 1000, 1000 * 127, 3 * 5 * 7 * 11 * 13):
        for dt in (torch.float32, torch.bfloat16):
            x = torch.randn(n, generator=g).to(dt)
            d = x.to(NEURON)
            tol = {"rtol": 1e-5, "atol": 1e-4} if dt == torch.float32 else {"rtol": 2e-2, "atol": 0.5}
            for f in (lambda t: t.sum(), lambda t: t.mean(), lambda t: t.sum(dtype=torch.float32)):
                torch.testing.assert_close(f(d).cpu().float(), f(x).float(), **tol)
            for f in (lambda t: t.amax(), lambda t: t.amin()):
                assert torch.equal(f(d).cpu(), f(x))
    x = torch.randn(16384, generator=g)
    x[100], x[200] = float("nan"), float("inf")
    assert torch.isnan(x.to(NEURON).sum().cpu()) and torch.isnan(x.to(NEURON).amax().cpu())
    t = torch.randn(128, 128, device=NEURON)
    _, plain = _timed(lambda: t * 2.0)
    _, whole = _timed(lambda: t.sum())
    assert whole <= 2 * plain, (whole, plain)
