"""The graph compiler's fused pointwise regions with broadcast operands and
casts (fusion.py, programs/fused.c): a per-row value ([.., 1]), the
trailing dims repeated (a norm's weight, rotary's [1, 1, S, D] tables) and
float-to-float casts join a region.  Values against CPU PyTorch across the
tile boundaries of rows, row length and repeat period; each region is one
program whose HBM traffic is its inputs once and its output once."""
import pytest
import torch

import torch_neuronsim

NEURON = torch.device("neuron")
BOUNDARY = [1, 127, 128, 129, 257, 513]


def compiled(fn, *args):
    """fn's compiled value (second call) and that call's stats; a fresh
    dynamo state, so every shape compiles statically"""
    torch._dynamo.reset()
    c = torch.compile(fn, backend="neuron", dynamic=False)
    dev = [a.to(NEURON) for a in args]
    with torch.no_grad():
        c(*dev)
        torch_neuronsim.reset_stats()
        got = c(*dev)
        s = torch_neuronsim.stats()
    return got.cpu(), s


def rms_tail(x, r, w):
    # RMSNorm after its reduction: the row's scale, the cast back, the weight
    return w * (x.float() * r).to(torch.bfloat16)


@pytest.mark.parametrize("rows", BOUNDARY)
@pytest.mark.parametrize("cols", [1, 127, 128, 129, 513, 1025])
def test_row_and_weight_broadcasts_with_casts_are_exact(rows, cols):
    g = torch.Generator().manual_seed(rows * 7 + cols)
    x = torch.randn(rows, cols, generator=g).to(torch.bfloat16)
    r = torch.rand(rows, 1, generator=g) + 0.5
    w = torch.randn(cols, generator=g).to(torch.bfloat16)
    got, s = compiled(rms_tail, x, r, w)
    want = rms_tail(x, r, w)
    assert got.dtype == want.dtype and got.shape == want.shape
    # fp32 products rounded once to bf16, as CPU's kernels round them
    assert torch.equal(got, want)
    assert s["programs_executed"] == 1 and s["cpu_fallbacks"] == 0
    assert s["hbm_write_bytes"] == want.nbytes          # one region: no intermediate leaves SBUF


@pytest.mark.parametrize("s_len", [1, 127, 129])
@pytest.mark.parametrize("d", [16, 128, 600])
def test_rotary_tables_repeat_over_batch_and_heads(s_len, d):
    g = torch.Generator().manual_seed(s_len + d)
    q = torch.randn(2, 3, s_len, d, generator=g)
    cos, sin = torch.randn(2, 1, 1, s_len, d, generator=g)

    def rope(q, cos, sin):
        return (q * cos + (q * 2.0 - 1.0) * sin).to(torch.bfloat16)
    got, s = compiled(rope, q, cos, sin)
    torch.testing.assert_close(got.float(), rope(q, cos, sin).float(), rtol=1e-2, atol=1e-2)
    assert s["programs_executed"] == 1 and s["hbm_write_bytes"] == got.nbytes


def test_a_region_reads_its_inputs_once_and_writes_once():
    """the weight is loaded once for the whole region (not per tile), the
    row values once, x once; out written once"""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, 128, generator=g).to(torch.bfloat16)
    r = torch.rand(4096, 1, generator=g)
    w = torch.randn(128, generator=g).to(torch.bfloat16)
    got, s = compiled(rms_tail, x, r, w)
    assert torch.equal(got, rms_tail(x, r, w))
    # the weight's copy: at most a partition row (512 elements) of each of 128 partitions
    hoisted = 128 * 512 * w.element_size()
    assert x.nbytes + r.nbytes < s["hbm_read_bytes"] <= x.nbytes + r.nbytes + hoisted
    assert s["hbm_write_bytes"] == x.nbytes


def test_mixed_float_operands_promote_as_eager():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(300, 77, generator=g).to(torch.float16)
    b = torch.randn(300, 77, generator=g)

    def f(a, b):
        return (a * b + a).sigmoid()
    got, s = compiled(f, a, b)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, f(a, b), rtol=1e-6, atol=1e-6)
    assert s["programs_executed"] == 1


def test_squares_and_reciprocals_fuse():
    x = torch.randn(129, 255) + 3.0

    def f(x):
        return x.pow(2) * 0.5 + x.pow(-1)
    got, s = compiled(f, x)
    torch.testing.assert_close(got, f(x), rtol=1e-6, atol=1e-6)
    assert s["programs_executed"] == 1 and s["hbm_read_bytes"] == x.nbytes


def test_a_broadcast_the_kernel_does_not_read_stays_a_node_of_its_own():
    """a column broadcast ([rows, 1] over [rows, cols] is a ROW; [1, cols, 1]
    over [b, cols, n] is neither): still right"""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 40, 50, generator=g)
    m = torch.randn(1, 40, 1, generator=g)

    def f(x, m):
        return (x * m + 1.0).exp()
    got, s = compiled(f, x, m)
    torch.testing.assert_close(got, f(x, m), rtol=1e-6, atol=1e-6)
    assert s["cpu_fallbacks"] == 0


def test_input_modes_come_from_the_library():
    mode = torch.ops.neuronsim.fused_input_mode
    c = torch.ops.neuronsim.fused_constants()
    assert mode([4, 128, 128], [4, 128, 128]) == c["FULL"]
    assert mode([4, 128, 1], [4, 128, 128]) == c["ROW"]
    assert mode([128], [4, 128, 128]) == c["PERIOD"]
    assert mode([1, 1, 128, 32], [4, 4, 128, 32]) == c["PERIOD"]
    assert mode([1, 40, 1], [3, 40, 50]) == -1
    assert mode([2, 128], [4, 128]) == -1


def test_a_cast_read_by_several_regions_is_computed_in_each():
    """RMSNorm: x.float() feeds both the square (before the mean) and the
    scaling (after it); each region casts x itself instead of reading an
    fp32 copy of x written to HBM"""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2048, 128, generator=g).to(torch.bfloat16)
    w = torch.randn(128, generator=g).to(torch.bfloat16)

    def rms(x, w):
        xf = x.float()
        return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)
    got, s = compiled(rms, x, w)
    torch.testing.assert_close(got.float(), rms(x, w).float(), rtol=1e-2, atol=1e-2)
    n, rows = x.numel(), x.shape[0]
    # written: the squares (fp32, for the mean), the row values, the result -- no fp32 copy of x
    assert s["hbm_write_bytes"] <= 4 * n + 2 * n + 4 * 4 * rows, s["hbm_write_bytes"]
