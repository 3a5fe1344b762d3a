"""The copy kernel's three shapes of work and the one-launch multi-tensor ops.

copy.c moves a strided copy straight HBM to HBM when both sides share
contiguous runs; a broadcast source (stride 0) is loaded once into SBUF and
widened on VectorE; a transpose (source and destination contiguous along
different dims) is turned round on TensorE.  Values must equal CPU PyTorch
bit for bit on every path, across tile boundaries, and the time must be that
of the bytes moved -- never faster than the DMA peak, never the
descriptor-per-element cost of the straight path.

A `_foreach_*` op, a fused optimizer step and cat run their per-tensor
programs linked into one (runtime/batch.cpp): one launch, same values."""
import itertools

import pytest
import torch

import neuronsim
import torch_neuronsim

NEURON = torch.device("neuron")
EDGES = [1, 127, 128, 129, 255, 257, 513]


def _timed(fn):
    fn()
    torch_neuronsim.reset_stats()
    out = fn()
    s = torch_neuronsim.stats()
    return out, s


def _values(shape, dtype, g):
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    x = torch.randint(-100 if dtype.is_signed else 0, 100, shape, generator=g, dtype=dtype)
    return x * (2 ** 40) + 7 if dtype == torch.int64 else x


def _bits(t):
    return t.view({torch.float32: torch.int32, torch.bfloat16: torch.int16,
                   torch.float16: torch.int16}.get(t.dtype, t.dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool,
                                   torch.uint8])
def test_broadcasts_match_cpu_across_tile_edges(dtype):
    g = torch.Generator().manual_seed(0)
    for r, c in itertools.product(EDGES, [1, 128, 129, 513]):
        for src, dst in [((r, 1), (r, c)), ((1, c), (r, c)), ((), (r, c)), ((r, 1, 1), (r, 3, c))]:
            x = _values(src, dtype, g)
            got = x.to(NEURON).expand(dst).contiguous().cpu()
            assert torch.equal(got, x.expand(dst)), (src, dst, dtype)


def test_broadcast_keeps_special_values_and_casts():
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-40, 3.0]).reshape(6, 1)
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        v = x.to(dt)
        assert torch.equal(_bits(v.to(NEURON).expand(6, 5000).contiguous().cpu()),
                           _bits(v.expand(6, 5000).contiguous()))
        for dt2 in (torch.float32, torch.bfloat16, torch.float16):
            # (a NaN's payload after a cast is the DMA's, as on every copy path)
            got = v.to(NEURON).expand(6, 5000).to(dt2).cpu()
            torch.testing.assert_close(got, v.expand(6, 5000).to(dt2), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16),
                                     (torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32),
                                     (torch.float16, torch.float32)])
def test_transposes_match_cpu_across_tile_edges(src, dst):
    g = torch.Generator().manual_seed(1)
    for m, k in itertools.product(EDGES, EDGES):
        x = torch.randn(m, k, generator=g).to(src)
        assert torch.equal(x.to(NEURON).t().to(dst).contiguous().cpu(), x.t().to(dst).contiguous()), (m, k)


def test_permutes_slices_and_special_values():
    g = torch.Generator().manual_seed(2)
    for shape, perm in [((3, 129, 257), (0, 2, 1)), ((4, 4, 128, 32), (0, 2, 3, 1)), ((2, 3, 130, 9), (3, 1, 2, 0)),
                        ((5, 200, 7, 33), (0, 3, 2, 1))]:
        for dt in (torch.float32, torch.bfloat16, torch.int64, torch.int32):
            x = (torch.randn(shape, generator=g) * 100).to(dt)
            assert torch.equal(x.to(NEURON).permute(*perm).contiguous().cpu(), x.permute(*perm).contiguous())
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-40, 1e38] * 50).reshape(20, 15)
    for dt in (torch.float32, torch.bfloat16):
        v = special.to(dt)
        assert torch.equal(_bits(v.to(NEURON).t().contiguous().cpu()), _bits(v.t().contiguous()))
    # a transposed source into a strided slice of a larger destination
    x = torch.randn(300, 400, generator=g)
    out = torch.zeros(500, 600, device=NEURON)
    out[10:410, 5:305].copy_(x.to(NEURON).t())
    ref = torch.zeros(500, 600)
    ref[10:410, 5:305].copy_(x.t())
    assert torch.equal(out.cpu(), ref)
    # .float() of a transposed slice: a column-major result
    buf = torch.randn(508, 1024, generator=g).bfloat16()
    got = buf.to(NEURON)[:, :1000].t().float()
    assert got.stride() == (1, 1000) and torch.equal(got.cpu(), buf[:, :1000].t().float())


def _peak_ns(nbytes):
    chip = neuronsim.chip_info(torch_neuronsim.target())
    gbps = min(chip["dma_engines"] * chip["dma_engine_bytes_per_second"], chip["hbm_bytes_per_second"]) / 1e9
    return nbytes / gbps


@pytest.mark.parametrize("case", ["transpose", "column-major cast", "batched transpose", "row broadcast",
                                  "scalar broadcast", "head permute"])
def test_copies_cost_their_bytes_not_their_elements(case):
    """Each moves ~0.25-2 MB: at least the DMA/HBM peak's time for its bytes,
    and within 4x of a contiguous copy of the same bytes (the straight path
    took 30-250x: a descriptor per element, or a whole copy on one of the
    16 DMA engines)."""
    x = {"transpose": lambda: torch.randn(128, 1000, device=NEURON),
         "column-major cast": lambda: torch.randn(508, 1024, device=NEURON).bfloat16()[:, :1000],
         "batched transpose": lambda: torch.randn(4, 128, 128, device=NEURON),
         "row broadcast": lambda: torch.randn(508, 1, device=NEURON),
         "scalar broadcast": lambda: torch.tensor(-float("inf"), device=NEURON),
         "head permute": lambda: torch.randn(4, 4, 128, 32, device=NEURON)}[case]()
    fn = {"transpose": lambda: x.t().contiguous(),
          "column-major cast": lambda: x.t().float(),
          "batched transpose": lambda: x.transpose(1, 2).contiguous(),
          "row broadcast": lambda: x.expand(508, 1000).contiguous(),
          "scalar broadcast": lambda: x.expand(508, 1000).contiguous(),
          "head permute": lambda: x.transpose(1, 2).contiguous()}[case]
    out, s = _timed(fn)
    assert s["programs_executed"] == 1 and s["cpu_fallbacks"] == 0
    plain = torch.empty(out.numel(), dtype=out.dtype, device=NEURON)
    _, base = _timed(lambda: plain.clone())
    ns = s["kernel_time_ns"]
    assert ns >= _peak_ns(out.numel() * out.element_size()), (case, ns)
    assert ns <= 4 * base["kernel_time_ns"], (case, ns, base["kernel_time_ns"])


def _lists(n=9, seed=3):
    g = torch.Generator().manual_seed(seed)
    shapes = [(128, 256), (256,), (1000, 128), (3, 5, 7), (1,), (129, 257), (513,), (2, 2), (64, 64)][:n]
    return [torch.randn(s, generator=g) for s in shapes]


def test_foreach_ops_are_one_launch_with_cpu_values():
    cpu = _lists()
    dev = [t.to(NEURON) for t in cpu]
    norms, s = _timed(lambda: torch._foreach_norm(dev))
    assert s["programs_executed"] == 1 and s["cpu_fallbacks"] == 0
    torch.testing.assert_close([n.cpu() for n in norms], torch._foreach_norm(cpu), rtol=1e-5, atol=0)
    torch_neuronsim.reset_stats()
    torch._foreach_mul_(dev, torch.tensor(0.5, device=NEURON))
    torch._foreach_add_(dev, 1.0)
    torch._foreach_addcmul_(dev, dev, dev, value=0.25)
    s = torch_neuronsim.stats()
    assert s["programs_executed"] == 3, s["programs_executed"]
    torch._foreach_mul_(cpu, torch.tensor(0.5))
    torch._foreach_add_(cpu, 1.0)
    torch._foreach_addcmul_(cpu, cpu, cpu, value=0.25)
    for a, b in zip(dev, cpu):   # (addcmul rounds as the per-tensor kernel does: within an ulp of CPU's)
        torch.testing.assert_close(a.cpu(), b, rtol=2e-7, atol=0)
    # one launch charge instead of one per tensor: less simulated time than the loop
    torch_neuronsim.reset_stats()
    torch._foreach_add_(dev, 1.0)
    one = torch_neuronsim.stats()
    torch_neuronsim.reset_stats()
    for t in dev:
        t.add_(1.0)
    loop = torch_neuronsim.stats()
    assert one["launch_time_ns"] * len(dev) == loop["launch_time_ns"]
    assert one["simulated_time_ns"] < loop["simulated_time_ns"]


def test_one_launch_on_the_timeline_and_the_host_sees_its_results():
    dev = [t.to(NEURON) for t in _lists()]
    torch_neuronsim.reset_stats()
    torch._foreach_add_(dev, 2.0)
    ops = [r["op"] for r in torch_neuronsim.device_timeline()]
    assert ops == ["aten::_foreach_add_"], ops
    # a host read right after (and of every list member) sees the writes
    assert all(bool((a.cpu() == b + 2.0).all()) for a, b in zip(dev, _lists()))


def test_fused_adamw_and_cat_are_one_launch():
    cpu = _lists()
    params = [torch.nn.Parameter(t.clone()) for t in cpu]
    dparams = [torch.nn.Parameter(t.to(NEURON)) for t in cpu]
    grads = [torch.randn_like(t) for t in cpu]
    for p, dp, gr in zip(params, dparams, grads):
        p.grad, dp.grad = gr.clone(), gr.to(NEURON)
    opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, fused=True)
    dopt = torch.optim.AdamW(dparams, lr=1e-2, weight_decay=0.1, fused=True)
    for _ in range(2):
        opt.step()
        torch_neuronsim.reset_stats()
        dopt.step()
        ops = [r["op"] for r in torch_neuronsim.device_timeline()]
        assert ops.count("aten::_fused_adamw_") == 1, ops
    for p, dp in zip(params, dparams):
        torch.testing.assert_close(dp.detach().cpu(), p.detach(), rtol=1e-6, atol=1e-7)
    parts = [t.reshape(-1)[:5] for t in cpu] + [torch.randn(3)]
    out, s = _timed(lambda: torch.cat([t.to(NEURON) for t in parts]))
    assert torch.equal(out.cpu(), torch.cat(parts))
    assert [r["op"] for r in torch_neuronsim.device_timeline()].count("aten::cat") == 1
