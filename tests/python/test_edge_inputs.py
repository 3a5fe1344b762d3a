"""Ordinary inputs that broke kernels written around other shapes: row
counts one past a tile with K over a tile, NaN and infinities through
activations, indices past 2^32, storages that grow, overlapping outputs,
a forked child.  Each case failed (wrong value, crash or wrong error) on
4b2368c; each compares with CPU PyTorch."""
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_neuronsim

NEURON = torch.device("neuron")


def _cpu_and_neuron(fn, *args):
    """fn on the CPU and on `neuron` (args moved), the neuron result on the CPU."""
    want = fn(*args)
    got = fn(*[a.to(NEURON) if isinstance(a, torch.Tensor) else a for a in args])
    return want, got.cpu()


# --------------------------------------------------------------- matmul tails

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m", [129, 257, 385, 513])
@pytest.mark.parametrize("k", [129, 256, 1024])
def test_matmul_row_tail_with_k_over_a_tile(m, k, dtype):
    """A last m-tile of 1 row (M = 129) after full ones with K > 128: the
    generator sized every m-tile's loads by the last tile's layout and read
    past a (`access pattern outside its memory`)."""
    g = torch.Generator().manual_seed(m * 7 + k)
    a = torch.randn(m, k, generator=g).to(dtype)
    b = torch.randn(k, 64, generator=g).to(dtype)
    want = (a.float() @ b.float())
    got = (a.to(NEURON) @ b.to(NEURON)).cpu().float()
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got, want, rtol=tol, atol=tol * math.sqrt(k))


def test_linear_129_tokens():
    """A 129-token prompt through a 256 -> 256 Linear (the issue's example)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 256)
    x = torch.randn(1, 129, 256)
    want = lin(x)
    got = lin.to(NEURON)(x.to(NEURON)).cpu()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------- NaN and infinities

SPECIAL = torch.tensor([math.nan, math.inf, -math.inf, 0.0, 1.0, -1.0, 1e30, -1e30, 3.5, -3.5])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name,fn", [
    ("relu", torch.relu),
    ("gelu", F.gelu),
    ("gelu_tanh", lambda t: F.gelu(t, approximate="tanh")),
    ("silu", F.silu),
    ("sigmoid", torch.sigmoid),
    ("floor", torch.floor),
    ("linear_relu", lambda t: torch.relu(t.view(-1, 1) @ torch.ones(1, 3, dtype=t.dtype, device=t.device))),
])
def test_special_values_through_activations(name, fn, dtype):
    """relu(NaN) was 0 (a diverging network's NaNs vanished behind Linear +
    ReLU), gelu(+inf) inf where CPU gives NaN, floor(+-inf) NaN."""
    want, got = _cpu_and_neuron(fn, SPECIAL.to(dtype))
    torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-2, atol=1e-2)


def test_relu_nan_compiled():
    """The compiled path uses the same activation instruction."""
    def f(x):
        return torch.relu(x * 2.0)
    x = SPECIAL.clone()
    got = torch.compile(f, backend="neuron")(x.to(NEURON)).cpu()
    torch.testing.assert_close(got, f(x), equal_nan=True)


# ------------------------------------------------------ storages that grow

def test_resize_grows_and_keeps_values():
    """resize_ ran the CPU implementation, which memcpy's the old bytes from
    a simulated HBM address on the host: SIGSEGV."""
    a = torch.arange(2.0, device=NEURON)
    a.resize_(9)
    assert a.shape == (9,)
    assert a.cpu()[:2].tolist() == [0.0, 1.0]
    a.resize_(3, 4)
    assert a.shape == (3, 4) and a.cpu().view(-1)[:2].tolist() == [0.0, 1.0]
    z = torch.zeros(1, 2, 3, 4, device=NEURON)
    z.resize_(2, 3, 4, 5, memory_format=torch.channels_last)
    assert z.stride() == torch.empty(2, 3, 4, 5).resize_(2, 3, 4, 5, memory_format=torch.channels_last).stride()


@pytest.mark.parametrize("name,fn,args", [
    ("add", torch.add, ((5,), (5,))),
    ("mul", torch.mul, ((5,), (5,))),
    ("mm", torch.mm, ((3, 4), (4, 5))),
    ("exp", torch.exp, ((6,),)),
    ("sum", lambda x, out: torch.sum(x, 0, out=out), ((6, 4),)),
])
def test_out_of_the_wrong_size(name, fn, args):
    """An out= smaller than the result is resized."""
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(*s, generator=g) for s in args]
    want = torch.zeros(1)
    got = torch.zeros(1, device=NEURON)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # "An output with one or more elements was resized"
        fn(*xs, out=want)
        fn(*[x.to(NEURON) for x in xs], out=got)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


def test_set_past_the_storage():
    x = torch.zeros(2, device=NEURON)
    x.set_(torch.arange(3.0, device=NEURON).untyped_storage(), 0, (10,), (1,))
    assert x.shape == (10,) and x.untyped_storage().nbytes() == 40
    assert x.cpu()[:3].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(RuntimeError, match="invalid storage offset"):
        x.set_(x.untyped_storage(), -1, (2,), (1,))


# ---------------------------------------------------------- index bounds

def _table(dev):
    return torch.arange(20.0).view(5, 4).to(dev)


def _rows(bad):
    return torch.tensor([1, bad])


INDEX_OPS = {
    "index_select": lambda d, i: _table(d).index_select(0, i.to(d)),
    "embedding": lambda d, i: F.embedding(i.to(d), _table(d)),
    "gather": lambda d, i: _table(d).gather(0, i.view(2, 1).expand(2, 4).contiguous().to(d)),
    "getitem": lambda d, i: _table(d)[i.to(d)],
    "getitem_2d": lambda d, i: _table(d)[torch.zeros(2, dtype=torch.long).to(d), i.to(d)],
    # a bad column index in the last row: its flat position (-1 or past the row) plus the row's
    # offset lands inside the table, so only a per-dim check catches it
    "getitem_2d_row3": lambda d, i: _table(d)[torch.full((2,), 3, dtype=torch.long).to(d), i.to(d)],
    "setitem_2d_row3": lambda d, i: _table(d).__setitem__((torch.full((2,), 3, dtype=torch.long).to(d), i.to(d)),
                                                          2.0),
    "setitem": lambda d, i: _table(d).__setitem__(i.to(d), 2.0),
    "index_put_": lambda d, i: _table(d).index_put_((i.to(d),), torch.ones(2, 4).to(d)),
    "index_add_": lambda d, i: _table(d).index_add_(0, i.to(d), torch.ones(2, 4).to(d)),
    "index_copy_": lambda d, i: _table(d).index_copy_(0, i.to(d), torch.ones(2, 4).to(d)),
    "scatter_": lambda d, i: _table(d).scatter_(0, i.view(2, 1).expand(2, 4).contiguous().to(d),
                                                torch.ones(2, 4).to(d)),
    "scatter_add_": lambda d, i: _table(d).scatter_add_(0, i.view(2, 1).expand(2, 4).contiguous().to(d),
                                                        torch.ones(2, 4).to(d)),
}


@pytest.mark.parametrize("bad", [4, 5, 7, 2**32, 2**32 + 1, 2**40 + 3, -1, -6, -2**32 + 1])
@pytest.mark.parametrize("op", sorted(INDEX_OPS))
def test_index_out_of_bounds_raises_as_cpu(op, bad):
    """An int64 index of 2^32 and more used only its low word (index_select,
    gather, t[idx] read the wrong row; index_put_ / index_add_ wrote it);
    gather index 4 of a 4-column row read the next row's element; faults read
    `NSIM_EXEC_OOB ... index[9] = 20`.  Now: CPU's value, or CPU's exception
    type with CPU's message."""
    fn = INDEX_OPS[op]
    idx = _rows(bad)
    try:
        want = fn("cpu", idx)
    except Exception as e:  # noqa: BLE001 -- the CPU's exception is the reference
        with pytest.raises(type(e)) as got:
            fn("neuron", idx)
        assert type(got.value) is type(e)
        assert str(got.value).splitlines()[0] == str(e).splitlines()[0]
        return
    got = fn("neuron", idx)
    if want is not None:
        torch.testing.assert_close(got.cpu(), want)


def test_int32_indices_in_range_still_native():
    t = torch.arange(20.0).view(5, 4)
    i = torch.tensor([4, 0, 3], dtype=torch.int32)
    torch_neuronsim.reset_stats()
    got = t.to(NEURON).index_select(0, i.to(NEURON)).cpu()
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0
    torch.testing.assert_close(got, t.index_select(0, i))


# ------------------------------------------- conjugate views, fft of reals

@pytest.mark.parametrize("name", ["ifft", "hfft", "ihfft", "hfft2", "hfftn", "ihfftn"])
def test_fft_of_a_real_input(name):
    """fft.ifft / hfft / ihfft of a real tensor: the CPU-fallback's complex
    result is conjugated lazily, and copying a conjugate view through the
    generic conjugate fallback recursed (clone -> copy_ -> _copy_from ->
    clone ...) until the stack overflowed: SIGSEGV."""
    x = torch.randn(5, 6, 7, generator=torch.Generator().manual_seed(3))
    fn = getattr(torch.fft, name)
    kw = dict(n=10, dim=1, norm="ortho") if not name.endswith(("2", "n")) else {}
    torch.testing.assert_close(fn(x.to(NEURON), **kw).cpu(), fn(x, **kw), rtol=1e-4, atol=1e-4)


def test_copies_of_conjugate_and_negative_views():
    c = torch.randn(4, dtype=torch.cfloat, generator=torch.Generator().manual_seed(4))
    d = c.to(NEURON)
    assert torch.equal(d.conj().cpu(), c.conj())
    assert torch.equal(d.conj().clone().cpu(), c.conj())
    assert torch.equal(c.conj().to(NEURON).cpu(), c.conj())
    assert torch.equal(d.conj().imag.cpu(), c.conj().imag)
    e = torch.zeros(4, dtype=torch.cfloat, device=NEURON)
    e.conj().copy_(c)
    assert torch.equal(e.cpu(), c.conj())


def test_cat_into_an_empty_out():
    """_copy_from_and_resize ran the CPU resize_ (a host memcpy of device bytes)."""
    o = torch.zeros(0, device=NEURON)
    torch.cat([torch.zeros(0, device=NEURON), torch.ones(4, 6, device=NEURON)], 0, out=o)
    assert o.shape == (4, 6) and torch.equal(o.cpu(), torch.ones(4, 6))


# --------------------------------------------------- overlapping outputs

def _expand_add(d):
    return torch.zeros(4, 1, device=d).expand(4, 4).add_(1)


def _shifted_add(d):
    a = torch.arange(5.0, device=d)
    a[1:].add_(a[:-1])
    return a


def _add_out_expanded(d):
    o = torch.zeros(1, device=d).expand(4)
    return torch.add(torch.ones(4, device=d), 1, out=o)


def _copy_into_expanded(d):
    return torch.zeros(1, device=d).expand(5).copy_(torch.arange(5.0, device=d))


def _mul_out_shifted(d):
    a = torch.arange(5.0, device=d)
    return torch.mul(a[:-1], 2, out=a[1:])


def _exp_out_shifted(d):
    a = torch.arange(5.0, device=d)
    return torch.exp(a[:-1], out=a[1:])


@pytest.mark.parametrize("fn", [_expand_add, _shifted_add, _add_out_expanded, _copy_into_expanded,
                                _mul_out_shifted, _exp_out_shifted], ids=lambda f: f.__name__[1:])
def test_overlapping_outputs_raise_as_cpu(fn):
    """Computed silently on neuron where CPU's TensorIterator raises."""
    with pytest.raises(RuntimeError, match="unsupported operation") as want:
        fn("cpu")
    with pytest.raises(RuntimeError, match="unsupported operation") as got:
        fn("neuron")
    assert str(got.value).split(".")[0] == str(want.value).split(".")[0]


def test_in_place_on_itself_still_allowed():
    a = torch.arange(5.0)
    d = a.to(NEURON)
    d.add_(d)
    assert torch.equal(d.cpu(), a + a)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_into_an_expanded_tensor(accumulate):
    """zeros(1).expand(5)[tensor([1, 3])] = 2.0 lost the write (CPU writes
    the one shared element, with a deprecation warning)."""
    def f(d):
        z = torch.zeros(1, 3, device=d).expand(4, 3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            z.index_put_((torch.tensor([1, 3, 0], device=d),),
                         torch.arange(9.0, device=d).view(3, 3), accumulate=accumulate)
        return z
    torch.testing.assert_close(f(NEURON).cpu(), f("cpu"))
    z = torch.zeros(1, device=NEURON).expand(5)
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 5"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            z[torch.tensor([1, 7], device=NEURON)] = 2.0


# ------------------------------------------------------------------ fork

FORK_SNIPPET = r"""
import os, sys, torch
x = torch.randn(512, 1024, device="neuron")      # 2 MiB: a host copy big enough to run in parallel
assert torch.equal((x * 2).cpu(), x.cpu() * 2)
pid = os.fork()
if pid == 0:
    ok = torch.equal((x * 3).cpu(), x.cpu() * 3) and torch.equal(torch.ones(300, 1024).to("neuron").cpu(),
                                                                  torch.ones(300, 1024))
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print("child status", os.waitstatus_to_exitcode(status))
"""


def test_forked_child_uses_the_device():
    """The child's first device-to-host copy of 1 MiB or more never returned
    (libgomp's pool does not survive fork)."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, NEURON_SIM="1")
    # a hang is the failure being tested: bounded, so the suite reports it
    r = subprocess.run([sys.executable, "-c", FORK_SNIPPET], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "child status 0" in r.stdout, r.stdout + r.stderr


BACKWARD_THEN_EXIT = """
import torch
x = torch.randn(4, 4, device="neuron", requires_grad=True)
(x * 2).sum().backward()
"""


def test_script_ending_right_after_backward_exits_cleanly():
    """A script whose last statement was a backward on the device aborted at
    exit in most runs (status 134, "terminate called without an active
    exception"): an autograd device thread dropped the graph, which holds a
    Python object, after the interpreter began to shut down."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, NEURON_SIM="1")
    codes = [subprocess.run([sys.executable, "-c", BACKWARD_THEN_EXIT], env=env, capture_output=True,
                            text=True, timeout=300).returncode for _ in range(6)]
    assert codes == [0] * 6, codes


# ------------------------------------------------------- integer sums

@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.bool, torch.int32])
@pytest.mark.parametrize("shape,dim", [((1000, 777), None), ((1000, 777), 1), ((3, 200000), 1), ((70000, 3), 0),
                                       ((5,), None), ((2, 3, 4), (0, 2))], ids=str)
def test_integer_sum_exact(dtype, shape, dim):
    g = torch.Generator().manual_seed(5)
    if dtype == torch.bool:
        x = torch.rand(shape, generator=g) > 0.5
    else:
        info = torch.iinfo(dtype)
        x = torch.randint(info.min, info.max, shape, generator=g, dtype=torch.int64).to(dtype)
    want = x.sum() if dim is None else x.sum(dim)
    got = (x.to(NEURON).sum() if dim is None else x.to(NEURON).sum(dim)).cpu()
    assert got.dtype == want.dtype and torch.equal(got, want)


def test_narrow_integer_sum_memory_is_bounded():
    """sum of a 256 MiB uint8 tensor widened it all to int64 (5.4 GiB of
    device memory, 15.8 s); now the input plus one 16 MiB fp32 slab."""
    n = 64 << 20
    x = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=torch.Generator().manual_seed(6))
    d = x.to(NEURON)
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    got = int(d.sum().cpu())
    assert got == int(x.sum())
    assert torch.neuron.max_memory_allocated() - base <= (16 << 20) + (1 << 20)


# --------------------------------------- reduced-precision intermediates

def test_fp16_variance_past_65504():
    """var / std over everything of an fp16 tensor held the sum of squares
    in fp16: inf once it passed 65504 (CPU: fp32 opmath, rounded once)."""
    x = torch.randn(70000, generator=torch.Generator().manual_seed(0)).half()
    for fn in (torch.var, torch.std):
        got = fn(x.to(NEURON)).cpu()
        assert torch.isfinite(got) and torch.equal(got, fn(x)), (fn, got, fn(x))


def test_fp16_softplus_below_the_threshold():
    x = torch.tensor([8.0, 10.0, 12.0, 15.0, 19.0, 25.0], dtype=torch.float16)
    torch.testing.assert_close(F.softplus(x.to(NEURON)).cpu(), F.softplus(x))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_duplicate_index_accumulation_rounds_once(dtype):
    """index_add / scatter_add with 511 duplicates of one row: the DMA's
    read-modify-write rounded every add to bf16 (20x the CPU's error)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 257, generator=g).to(dtype)
    src = torch.randn(511, 257, generator=g).to(dtype)
    i = torch.zeros(511, dtype=torch.long)
    j = torch.zeros(511, 257, dtype=torch.long)
    got = x.to(NEURON).index_add(0, i.to(NEURON), src.to(NEURON)).cpu()
    assert torch.equal(got, x.index_add(0, i, src))
    got = x.to(NEURON).scatter_add(0, j.to(NEURON), src.to(NEURON)).cpu()
    assert torch.equal(got, x.scatter_add(0, j, src))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [1, 3, 33, 127])
def test_attention_with_an_odd_head_dim(dtype, d):
    """A bf16 / fp16 head_dim of odd size under 128 left the fp32 regions
    after it misaligned: generating the attention kernel failed."""
    g = torch.Generator().manual_seed(d)
    q, k, v = (torch.randn(1, 2, 5, d, generator=g).to(dtype) for _ in range(3))
    for causal in (False, True):
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        got = F.scaled_dot_product_attention(q.to(NEURON), k.to(NEURON), v.to(NEURON), is_causal=causal)
        torch.testing.assert_close(got.cpu().float(), want, rtol=3e-2, atol=3e-2)


# ------------------------------------------------- bounded host memory

CACHE_SNIPPET = r"""
import torch
keep = torch.zeros(1 << 20, device="neuron")           # 4 MiB live
for i in range(40):                                      # freed blocks of growing sizes
    t = torch.empty((1 << 20) + i * 65536, device="neuron")
    del t
print(torch.neuron.memory_reserved() - torch.neuron.memory_allocated())
"""


def test_allocator_cache_is_bounded():
    """Simulated HBM is host memory: the caching allocator's free blocks are
    capped by NEURON_SIM_ALLOCATOR_CACHE_MB, the largest released first (a
    sweep of growing shapes reached 14 GB resident with nothing allocated)."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, NEURON_SIM="1", NEURON_SIM_ALLOCATOR_CACHE_MB="16")
    r = subprocess.run([sys.executable, "-c", CACHE_SNIPPET], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cached = int(r.stdout.strip().splitlines()[-1])
    assert 0 < cached <= 16 << 20


# ------------------------------------------------- review findings

def test_round_between_2_22_and_2_23_and_with_decimals():
    x = torch.tensor([4194304.5, 5000000.5, -6000000.5, 2.5, -2.5, 0.5, 1.5])
    assert torch.equal(torch.round(x.to(NEURON)).cpu(), torch.round(x))
    y = torch.randn(20000, generator=torch.Generator().manual_seed(9)) * 1000
    for d in (2, 3, -2):
        assert torch.equal(torch.round(y.to(NEURON), decimals=d).cpu(), torch.round(y, decimals=d))
    h = torch.arange(-65504, 65504, 3.7).half()
    torch.testing.assert_close(torch.round(h.to(NEURON), decimals=2).cpu(), torch.round(h, decimals=2),
                               equal_nan=True, rtol=0, atol=0)


def test_log2_of_powers_of_two_is_exact():
    x = torch.tensor([8192.0, 32768.0, 2.0 ** 26])
    assert torch.equal(torch.log2(x.to(NEURON)).cpu(), torch.log2(x))
    assert torch.equal(torch.log10(torch.tensor([1e9]).to(NEURON)).cpu(), torch.log10(torch.tensor([1e9])))


def test_copy_into_a_negative_view_casts_first():
    z = torch.tensor([1 + 2j, 3 + 4j])
    zd = z.to(NEURON)
    zd.conj().imag.copy_(torch.tensor([5, 250], dtype=torch.uint8, device=NEURON))
    z.conj().imag.copy_(torch.tensor([5, 250], dtype=torch.uint8))
    assert torch.equal(zd.cpu(), z)


def test_an_expanded_out_that_the_op_resizes():
    """CPU resizes an out= of the wrong size before any overlap check."""
    o = torch.zeros(1, device=NEURON).expand(3)
    torch.logcumsumexp(torch.randn(4, device=NEURON), 0, out=o)
    assert o.shape == (4,)


def test_index_put_into_an_expanded_tensor_with_host_indices():
    z = torch.zeros(1, device=NEURON).expand(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z[torch.tensor([1, 3])] = 2.0
    assert torch.equal(z.cpu(), torch.full((5,), 2.0))


def test_one_dimensional_index_add_as_cpu():
    """CPU's 1-D index_add adds in the tensor's dtype (bf16 stalls at 256
    when adding ones) and words a bad index as index_select does."""
    i = torch.zeros(1000, dtype=torch.long)
    s = torch.ones(1000, dtype=torch.bfloat16)
    x = torch.zeros(3, dtype=torch.bfloat16)
    assert torch.equal(x.to(NEURON).index_add(0, i.to(NEURON), s.to(NEURON)).cpu(), x.index_add(0, i, s))
    with pytest.raises(IndexError, match="index out of range in self"):
        torch.zeros(3, device=NEURON).index_add(0, torch.tensor([4], device=NEURON), torch.ones(1, device=NEURON))


def test_empty_reductions_products_pads_and_pools_stay_native():
    """nothing to reduce: CPU's 0 (sum) and NaN (mean, var, std); a product
    over an empty inner dim is zeros (+ bias); empty batches through pads
    and adaptive pools"""
    import torch.nn.functional as F
    from nsim_util import assert_native_matches
    for shape in [(0,), (0, 3), (2, 0, 3)]:
        x = torch.zeros(shape)
        for fn in (torch.sum, torch.mean, torch.var, lambda t: t.sum(0), lambda t: t.mean(-1, True),
                   lambda t: torch.var_mean(t, unbiased=False), lambda t: torch.std_mean(t, 0), lambda t: t.std(0)):
            assert_native_matches(fn, x)
    assert_native_matches(lambda a, b: a @ b, torch.randn(5, 0), torch.randn(0, 10))
    assert_native_matches(lambda c, a, b: torch.addmm(c, a, b), torch.randn(10), torch.randn(5, 0), torch.randn(0, 10))
    assert_native_matches(lambda t: F.pad(t, (1, 2), "reflect"), torch.randn(0, 3, 3))
    assert_native_matches(lambda t: F.pad(t, (1, 2), "replicate"), torch.randn(0, 3, 3))
    assert_native_matches(lambda t: F.adaptive_avg_pool2d(t, 5), torch.randn(0, 8, 8, 8))
    assert_native_matches(lambda t: F.adaptive_avg_pool1d(t, 5), torch.randn(0, 8, 8))
    assert_native_matches(lambda t: F.adaptive_avg_pool3d(t, (5, 7, 4)), torch.randn(0, 8, 8, 8, 8))


# ----------------------------------------- what Diffusers' neuron paths pass
# Diffusers on `neuron` turns int64 indices into int32 and indexes by boolean
# masks; T5 casts log(0) = -inf to int64.  Each ran on the CPU (a counted
# fallback) before issue 39.

@pytest.mark.parametrize("op", ["scatter", "scatter_", "scatter_add", "scatter_reduce"])
def test_scatter_family_takes_int32_indices(op):
    """CPU PyTorch takes int32 indices for scatter (Flux2-klein's unpacking)"""
    g = torch.Generator().manual_seed(3)
    x, src = torch.randn(9, 6, generator=g), torch.randn(4, 6, generator=g)
    idx = torch.randint(0, 9, (4, 6), generator=g, dtype=torch.int32)
    fns = {"scatter": lambda x, i, s: x.scatter(0, i, s),
           "scatter_": lambda x, i, s: x.clone().scatter_(0, i, s),
           "scatter_add": lambda x, i, s: x.scatter_add(0, i, s),
           "scatter_reduce": lambda x, i, s: x.scatter_reduce(0, i, s, "amax")}
    if op == "scatter" or op == "scatter_":     # unique targets: CPU's order of duplicate writes is unspecified
        idx = torch.stack([torch.randperm(9, generator=g)[:4] for _ in range(6)], 1).to(torch.int32)
    torch_neuronsim.reset_stats()
    want, got = _cpu_and_neuron(fns[op], x, idx, src)
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0
    torch.testing.assert_close(got, want)
    with pytest.raises(RuntimeError, match="out of bounds"):
        fns[op](x.to(NEURON), torch.full((4, 6), 9, dtype=torch.int32, device=NEURON), src.to(NEURON)).cpu()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_float_to_int64_beyond_int32_is_bit_exact(dtype):
    """x86's conversion: truncation, INT64_MIN for NaN, infinities and
    |x| >= 2^63; exact for every integer-valued float in between"""
    vals = [0.0, -0.5, 2.7, -2.7, 2.0 ** 31, -2.0 ** 31, -2.0 ** 31 - 256, 2.0 ** 32 + 512, 1e10, -1.5e18,
            2.0 ** 62, -2.0 ** 63, 2.0 ** 63, 1e30, math.inf, -math.inf, math.nan, 16777217.0, -987654321.0]
    g = torch.Generator().manual_seed(11)
    rnd = torch.randn(3000, generator=g) * torch.exp2(torch.randint(0, 70, (3000,), generator=g).float())
    x = torch.cat([torch.tensor(vals), rnd]).to(dtype)
    torch_neuronsim.reset_stats()
    want, got = _cpu_and_neuron(lambda t: t.to(torch.long), x)
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0
    assert torch.equal(got, want)
    want, got = _cpu_and_neuron(lambda t: t[:2000].view(40, 50).t().to(torch.long), x)   # strided
    assert torch.equal(got, want)


@pytest.mark.parametrize("case", ["2d mask", "1d mask", "middle dim", "all false", "all true", "uint8", "with slice"])
def test_boolean_mask_indexing_on_the_device(case):
    g = torch.Generator().manual_seed(5)
    h = torch.randn(2, 7, 5, generator=g)
    m2, m1 = torch.rand(2, 7, generator=g) > 0.4, torch.rand(7, generator=g) > 0.5
    fns = {"2d mask": lambda h: h[m2.to(h.device)], "1d mask": lambda h: h[0][m1.to(h.device)],
           "middle dim": lambda h: h[:, m1.to(h.device)],
           "all false": lambda h: h[torch.zeros(2, 7, dtype=torch.bool, device=h.device)],
           "all true": lambda h: h[torch.ones(2, 7, dtype=torch.bool, device=h.device)],
           "uint8": lambda h: h[m2.to(torch.uint8).to(h.device)],
           "with slice": lambda h: h[:, m1.to(h.device), 1:3]}
    torch_neuronsim.reset_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # uint8 masks are deprecated on the CPU too
        want, got = _cpu_and_neuron(fns[case], h)
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0
    assert torch.equal(got, want)
    with pytest.raises(IndexError):
        h.to(NEURON)[torch.zeros(3, dtype=torch.bool, device=NEURON)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_int64_to_float_rounds_once_for_every_value(dtype):
    """one round-to-nearest-even of the 64-bit value, as the CPU converts
    (half-way cases above 2^31 rounded twice before), with no value read on
    the host, so the cast lowers into a compiled graph's program"""
    g = torch.Generator().manual_seed(2)
    base = torch.randint(1 << 23, 1 << 24, (3000,), generator=g, dtype=torch.int64)
    k = torch.randint(1, 39, (3000,), generator=g)
    half = (base << k) + (torch.ones_like(base) << (k - 1))
    rnd = torch.randint(-2 ** 63, 2 ** 63 - 1, (3000,), generator=g, dtype=torch.int64)
    x = torch.cat([torch.tensor([0, -1, 2 ** 31, -2 ** 31, 2 ** 32 + 1, 2 ** 63 - 1, -2 ** 63, 16777217]),
                   half, -half, rnd, rnd >> torch.randint(0, 64, (3000,), generator=g)])
    torch_neuronsim.reset_stats()
    want, got = _cpu_and_neuron(lambda t: t.to(dtype), x)
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0
    assert torch.equal(got, want)
