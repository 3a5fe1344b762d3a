"""The rest of the SDK's nki.language (language_more.py), each against
NumPy: bitwise / logical operations and shifts on every integer dtype, var,
all, softmax, rms_norm, expand_dims, the buffer predicates, no_reorder;
integer constants exact; .base_tensor of whole tensors; the names the
simulator refuses say why; nisa.select_reduce and
nisa.tensor_scalar_cumulative (lowered onto the ISA's instructions)."""
import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl


def _run(fn, *arrs):
    @nki.jit
    def k(a, b):
        r = fn(nl.load(a), nl.load(b))
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out
    return nki.simulate(k, *arrs)[0]


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32])
def test_bitwise_operations_and_shifts_match_numpy(dt):
    rng = np.random.default_rng(np.dtype(dt).itemsize + np.issubdtype(dt, np.signedinteger))
    info = np.iinfo(dt)
    a, b = (rng.integers(info.min, info.max, (128, 12), endpoint=True).astype(dt) for _ in range(2))
    s = rng.integers(0, 8, (128, 12)).astype(dt)
    cases = [(nl.bitwise_and, a, b, a & b), (nl.bitwise_or, a, b, a | b), (nl.bitwise_xor, a, b, a ^ b),
             (nl.left_shift, a, s, np.left_shift(a, s)), (nl.right_shift, a, s, np.right_shift(a, s))]
    for f, x, y, want in cases:
        got = _run(lambda p, q: f(p, q), x, y)
        assert got.dtype == want.dtype and np.array_equal(got, want), f.__name__
    np.testing.assert_array_equal(_run(lambda p, q: nl.invert(p), a, b), ~a)
    # a number as the other operand: an integer immediate, exact
    np.testing.assert_array_equal(_run(lambda p, q: nl.bitwise_and(p, 0x5a), a, b), a & dt(0x5a))
    np.testing.assert_array_equal(_run(lambda p, q: nl.right_shift(p, 3), a, b), np.right_shift(a, dt(3)))


def test_bitwise_operations_refuse_float_tiles():
    x = np.ones((4, 4), np.float32)
    with pytest.raises(nki.NKIError, match="nl.bitwise_and takes integer tiles, not float32"):
        _run(lambda p, q: nl.bitwise_and(p, q), x, x)
    with pytest.raises(nki.NKIError, match="nl.invert takes integer tiles"):
        _run(lambda p, q: nl.invert(p), x, x)


def test_logical_operations_take_truth_values():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 2, (128, 16)).astype(np.float32)
    y = rng.integers(0, 2, (128, 16)).astype(np.float32)
    y[0, :4] = [0.0, 3.0, -2.0, 0.5]                 # any nonzero is true
    for f, ref in ((nl.logical_and, np.logical_and), (nl.logical_or, np.logical_or),
                   (nl.logical_xor, np.logical_xor)):
        np.testing.assert_array_equal(_run(lambda p, q: f(p, q), x, y), ref(x, y).astype(np.float32))
    np.testing.assert_array_equal(_run(lambda p, q: nl.logical_not(p), x, y), np.logical_not(x).astype(np.float32))


def test_var_all_softmax_rms_norm():
    rng = np.random.default_rng(6)
    z = rng.standard_normal((128, 40)).astype(np.float32)
    np.testing.assert_allclose(_run(lambda p, q: nl.var(p, 1), z, z)[:, 0], z.var(axis=1), rtol=1e-5, atol=1e-6)
    zz = z.copy()
    zz[5, 3] = 0.0
    np.testing.assert_array_equal(_run(lambda p, q: nl.all(p, axis=1), zz, zz)[:, 0],
                                  np.all(zz, axis=1).astype(np.float32))
    e = np.exp(z - z.max(1, keepdims=True))
    np.testing.assert_allclose(_run(lambda p, q: nl.softmax(p, axis=1), z, z), e / e.sum(1, keepdims=True),
                               rtol=1e-5, atol=1e-7)
    w = rng.standard_normal((1, 40)).astype(np.float32)
    want = z / np.sqrt((z * z).sum(1, keepdims=True) / 40 + 1e-6) * w
    np.testing.assert_allclose(_run(lambda p, q: nl.rms_norm(p, q, axis=1, n=40), z, w), want, rtol=1e-5,
                               atol=1e-5)
    got = _run(lambda p, q: nl.expand_dims(p, 1), z, z)
    assert got.shape == (128, 1, 40) and np.array_equal(got[:, 0], z)
    with pytest.raises(nki.NKIError, match="not the partition dimension"):
        _run(lambda p, q: nl.var(p, 0), z, z)


def test_buffers_predicates_and_no_reorder():
    assert nl.is_sbuf(nl.sbuf) and nl.is_psum(nl.psum) and nl.is_on_chip(nl.psum) and not nl.is_on_chip(nl.hbm)
    assert nl.is_hbm(nl.shared_hbm) and nl.is_hbm(nl.MemoryRegion.private_hbm) and nl.MemoryRegion.sbuf == nl.sbuf
    seen = {}

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        seen["tensor"] = isinstance(t, nl.NkiTensor) and nl.is_sbuf(t.buffer) and nl.is_hbm(a.buffer)
        with nl.no_reorder():
            u = nl.multiply(t, 2.0)
            nl.store(out, value=nl.add(u, 1.0))
        return out
    a = np.arange(512, dtype=np.float32).reshape(128, 4)
    np.testing.assert_array_equal(nki.simulate(k, a)[0], a * 2 + 1)
    assert seen == {"tensor": True}


@pytest.mark.parametrize("dt, v", [(nl.int32, 123456789), (nl.int32, -2 ** 31), (nl.uint32, 4000000001),
                                   (nl.uint16, 65535), (nl.int8, -128)])
def test_integer_constants_are_exact(dt, v):
    """nl.full of an integer tile holds the integer itself (the ISA's
    integer immediate), where an fp32 immediate rounds past 2^24."""
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), dtype=dt, buffer=nl.shared_hbm)
        nl.store(out, value=nl.full((128, 4), v, dtype=dt))
        return out
    got = nki.simulate(k, np.zeros((1, 1), np.float32))[0]
    assert (got.astype(np.int64) == v).all(), got[0, 0]


def test_base_tensor_of_whole_tensors():
    """nki-library reads .base_tensor of kernel arguments and tiles (its MX
    MoE paths): a whole tensor is its own base; of part of one it is
    refused by name."""
    seen = {}

    @nki.jit
    def k(a):
        t = nl.ndarray((128, 2, 64), dtype=nl.float32, buffer=nl.sbuf)
        seen["whole"] = (t.base_tensor is t, a.base_tensor is a)
        for name, view in (("tile part", lambda: t[:, 1, :]), ("arg part", lambda: a[0:64, :])):
            with pytest.raises(nki.NKIError, match="base_tensor of a view of part of a tensor"):
                view().base_tensor
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a.base_tensor))
        return out
    a = np.ones((128, 128), np.float32)
    np.testing.assert_array_equal(nki.simulate(k, a)[0], a)
    assert seen == {"whole": (True, True)}


@pytest.mark.parametrize("name, why", [("dropout", "random-number generator"),
                                       ("rand", "random-number generator"), ("abs_max", "NeuronCore-v4"),
                                       ("gather_flattened", "not supported by the simulator yet")])
def test_names_the_simulator_refuses_say_why(name, why):
    with pytest.raises(nki.NKIError, match=why):
        getattr(nl, name)


@pytest.mark.parametrize("rev", [False, True])
def test_select_reduce(rev):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((128, 20)).astype(np.float32)
    p = rng.integers(0, 2, (128, 20)).astype(np.uint8)
    col = rng.standard_normal((128, 1)).astype(np.float32)

    @nki.jit
    def k(x, p, col):
        out = nl.ndarray((128, 20), dtype=nl.float32, buffer=nl.shared_hbm)
        mx = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        d = nl.ndarray((128, 20), dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(dst=d, predicate=nl.load(p), on_true=nl.load(x), on_false=nl.load(col) if rev else -5.0,
                           reduce_res=r, reduce_cmd=nisa.reduce_cmd.reset_reduce, reverse_pred=rev)
        nl.store(out, value=d)
        nl.store(mx, value=r)
        return out, mx
    o, m = nki.simulate(k, x, p, col)[0]
    want = np.where((p == 0) if rev else (p != 0), x, col if rev else -5.0)
    np.testing.assert_array_equal(o, want)
    np.testing.assert_array_equal(m[:, 0], want.max(axis=1))


@pytest.mark.parametrize("op1, start, ref", [
    (nl.add, None, lambda y, s: np.cumsum(y, axis=1)),
    (nl.maximum, None, lambda y, s: np.maximum.accumulate(y, axis=1)),
    (nl.multiply, None, lambda y, s: np.cumprod(y, axis=1)),
    (nl.subtract, 3.0, None)])
def test_tensor_scalar_cumulative(op1, start, ref):
    """reg = op1(op0(src[i], imm0), reg), from op1's identity or imm1"""
    x = np.random.default_rng(2).standard_normal((128, 20)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        cmd = nisa.reduce_cmd.load_reduce if start is not None else nisa.reduce_cmd.reset_reduce
        nisa.tensor_scalar_cumulative(dst=d, src=nl.load(x), op0=nl.multiply, op1=op1, imm0=0.5, imm1=start,
                                      reduce_cmd=cmd)
        nl.store(out, value=d)
        return out
    got = nki.simulate(k, x)[0]
    y = x * np.float32(0.5)
    if ref is not None:
        want = ref(y, start)
    else:
        reg, want = np.full(128, start, np.float32), np.zeros_like(y)
        for i in range(y.shape[1]):
            reg = y[:, i] - reg
            want[:, i] = reg
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
