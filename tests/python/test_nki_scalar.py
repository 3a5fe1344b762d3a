"""nki.isa.scalar_load / scalar_store and NkiScalar arithmetic and dynamic
addressing, against NumPy.  Source: SDK nki/deep-dives/nki-scalar.rst (its
scalar_arithmetic example: i * 4 + 1), nki.isa.NkiScalar ("100000 * 100000
yields 1410065408"), nki.isa.scalar_load / scalar_store reference pages."""
import numpy as np
import pytest

import neuronsim
import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl


def _one(v):
    return np.array([[v]], np.int32)


def _expr_kernel(expr):
    @nki.jit
    def k(a, b):
        ta = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a)
        i = nisa.scalar_load(ta)
        j = nisa.scalar_load(b)                 # straight from HBM
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.scalar_store(out, expr(i, j))      # to HBM through SBUF
        return out
    return k


@pytest.mark.parametrize("expr,ref", [
    (lambda i, j: i * 4 + 1, lambda a, b: a * 4 + 1),
    (lambda i, j: 10 - i, lambda a, b: 10 - a),
    (lambda i, j: -i + j * j, lambda a, b: -a + b * b),
    (lambda i, j: (i - j) * 3, lambda a, b: (a - b) * 3),
])
def test_scalar_arithmetic_matches_python(expr, ref):
    k = _expr_kernel(expr)
    for a, b in ((5, 2), (-7, 11), (0, 0)):
        assert int(k(_one(a), _one(b))[0, 0]) == ref(a, b)


def test_32_bit_scalars_wrap():
    k = _expr_kernel(lambda i, j: i * j)
    assert int(k(_one(100000), _one(100000))[0, 0]) == 1410065408
    k = _expr_kernel(lambda i, j: i + 1)
    assert int(k(_one(2**31 - 1), _one(0))[0, 0]) == -2**31


@nki.jit
def pick(table, idx):
    _, H, W = table.shape
    out = nl.ndarray((H, W), dtype=table.dtype, buffer=nl.shared_hbm)
    i = nisa.scalar_load(idx)
    nisa.dma_copy(dst=out, src=table.ap(pattern=[[W, H], [1, W]], scalar_offset=i * 1, indirect_dim=0))
    return out


def test_a_scalar_offset_moves_the_dma_at_run_time():
    x = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(np.float32)
    for k in range(4):
        np.testing.assert_array_equal(pick(x, _one(k)), x[k])
    # one program for every index: the offset is read on the device
    assert pick.trace(x, _one(0))[0] == pick.trace(x, _one(3))[0]
    with pytest.raises(neuronsim.NeuronSimError, match="reaches past"):
        pick(x, _one(4))


def test_a_scalar_offset_on_the_destination_and_through_nl_load():
    @nki.jit
    def place(src, idx):
        out = nl.ndarray((4, 128, 8), dtype=src.dtype, buffer=nl.shared_hbm)
        zero = nl.zeros((128, 8), dtype=src.dtype)
        for b in range(4):
            nl.store(out[b], value=zero)
        i = nisa.scalar_load(idx)
        t = nl.load(src.ap(pattern=[[8, 128], [1, 8]], scalar_offset=i, indirect_dim=0))
        nisa.dma_copy(dst=out.ap(pattern=[[8, 128], [1, 8]], scalar_offset=3 - i, indirect_dim=0), src=t)
        return out
    src = np.random.default_rng(1).standard_normal((2, 128, 8)).astype(np.float32)
    out = place(src, _one(1))
    np.testing.assert_array_equal(out[2], src[1])
    assert not out[[0, 1, 3]].any()


def test_scalar_misuse_is_refused_by_name():
    def run(body):
        @nki.jit
        def k(a):
            out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
            body(a, out)
            return out
        return k(_one(1))
    with pytest.raises(nki.NKIError, match="run time"):
        run(lambda a, out: nl.fori_loop(0, nisa.scalar_load(a), lambda i, c: c, 0))
    with pytest.raises(nki.NKIError, match="cannot be used"):
        run(lambda a, out: nisa.scalar_load(a) < 3)
    with pytest.raises(nki.NKIError, match="run time"):
        run(lambda a, out: out[nisa.scalar_load(a)])
    with pytest.raises(nki.NKIError, match="NkiScalar"):
        run(lambda a, out: nisa.scalar_store(out, 5))
    with pytest.raises(nki.NKIError, match="64 registers"):
        run(lambda a, out: [nisa.scalar_load(a) for _ in range(65)])

    @nki.jit
    def wide(a):
        nisa.scalar_load(a)
        return nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    with pytest.raises(nki.NKIError, match="int64"):
        wide(np.array([[1]], np.int64))
    with pytest.raises(nki.NKIError, match="unsigned"):
        wide(np.array([[1]], np.uint32))


def test_registers_are_reused_once_a_scalar_is_dropped():
    k = _expr_kernel(lambda i, j: sum((i * n for n in range(100)), j))     # a few alive at a time
    a, b = 3, 4
    assert int(k(_one(a), _one(b))[0, 0]) == b + sum(a * n for n in range(100))
