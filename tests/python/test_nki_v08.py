"""Our own kernels written the NKI 0.8 way (dst-first nisa calls, buffers
as objects, nl.fori_loop) next to the same kernels in the older style, each
checked against NumPy."""
import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl

RNG = np.random.default_rng(8)


@nki.jit
def add_rows_v08(a, b):
    """out = a + b over row tiles of 128, dst-first calls in a fori_loop."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape

    def body(i):
        ta = nl.ndarray((128, cols), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, cols), dtype=a.dtype, buffer=nl.sbuf)
        tc = nl.ndarray((128, cols), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=tb, src=b[i * 128:(i + 1) * 128, :])
        nisa.tensor_tensor(tc, ta, tb, nl.add)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=tc)
    nl.fori_loop(0, rows // 128, body)
    return out


@nki.jit
def add_rows_old(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        ta = nl.load(a[i * 128:(i + 1) * 128, :])
        tb = nl.load(b[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nisa.tensor_tensor(ta, tb, op=nl.add))
    return out


@nki.jit
def matmul_v08(lhsT, rhs):
    """out[M, N] = lhsT^T @ rhs, K accumulated in PSUM over a fori_loop."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)

    def body(k):
        s = nl.ndarray((128, M), dtype=lhsT.dtype, buffer=nl.sbuf)
        m = nl.ndarray((128, N), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=lhsT[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=m, src=rhs[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(acc, s, m)
    nl.fori_loop(0, K // 128, body)
    res = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(res, acc)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit
def softmax_v08(x):
    """Row softmax with dst-first activation / tensor_reduce / tensor_scalar."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    P, F = x.shape
    t = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    mx = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(mx, nl.maximum, t, axis=1, negate=True)
    e = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(e, nl.exp, t, bias=mx)
    s = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(s, nl.add, e, axis=1)
    r = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(r, s)
    y = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(y, e, nl.multiply, r)
    nisa.dma_copy(dst=out, src=y)
    return out


def test_add_v08_and_old_style_match_numpy():
    a = RNG.standard_normal((512, 256)).astype(np.float32)
    b = RNG.standard_normal((512, 256)).astype(np.float32)
    np.testing.assert_array_equal(add_rows_v08(a, b), a + b)
    np.testing.assert_array_equal(add_rows_old(a, b), a + b)


def test_matmul_v08_matches_numpy():
    lhsT = RNG.standard_normal((512, 128)).astype(np.float16)
    rhs = RNG.standard_normal((512, 512)).astype(np.float16)
    want = lhsT.astype(np.float32).T @ rhs.astype(np.float32)
    np.testing.assert_allclose(matmul_v08(lhsT, rhs), want, rtol=2e-3, atol=2e-2)


def test_softmax_v08_matches_numpy():
    x = RNG.standard_normal((128, 384)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(softmax_v08(x), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_fori_loop_refuses_bounds_it_cannot_know():
    import pytest

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.fori_loop(0, 2.5, lambda i: None)
        return out
    with pytest.raises(nki.NKIError, match="upper=2.5"):
        k(np.ones((128, 4), np.float32))


def test_iota_and_affine_select_take_access_patterns():
    """NKI 0.8: iota(dst, pattern, offset, channel_multiplier) and
    affine_select(dst, pattern, channel_multiplier, on_true_tile,
    on_false_value, cmp_op=, offset=) with [[step, num], ...] patterns; the
    nl comparisons are operators and elementwise functions."""
    @nki.jit
    def k(a):
        out = nl.ndarray((3, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        idx = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.sbuf)
        nisa.iota(idx, [[8, 8], [1, 8]], offset=3, channel_multiplier=100)
        f = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(f, idx)
        nl.store(out[0], value=f)
        x = nl.load(a)
        m = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.affine_select(m, [[-1, 64]], 1, x, -9.0, cmp_op=nl.greater_equal)    # p - j >= 0
        nl.store(out[1], value=m)
        nl.store(out[2], value=nl.less(x, 0.5, dtype=nl.float32))
        return out
    a = np.random.default_rng(0).random((128, 64), dtype=np.float32)
    y, _ = nki.simulate(k, a)
    p, j = np.arange(128)[:, None], np.arange(64)[None, :]
    np.testing.assert_array_equal(y[0], 3 + 100 * p + 8 * (j // 8) + j % 8)
    np.testing.assert_array_equal(y[1], np.where(p - j >= 0, a, -9.0))
    np.testing.assert_array_equal(y[2], (a < 0.5).astype(np.float32))

    @nki.jit
    def bad(a):
        out = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.shared_hbm)
        idx = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.sbuf)
        nisa.iota(idx, [[1, 60]])
        nl.store(out, value=idx)
        return out
    with pytest.raises(nki.NKIError, match="pattern covers 60 elements per partition"):
        nki.simulate(bad, a)


def test_tensor_ap_while_loop_and_registers():
    """tensor.ap(pattern=[[stride, count], ...], offset=) views storage
    explicitly (on HBM and on chip); nl.while_loop runs while its condition,
    known while tracing (an int or a register from register_alloc /
    register_move), is nonzero; a condition loaded from device memory is
    refused by name."""
    @nki.jit
    def odd_columns(a):
        out = nl.ndarray((64, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a.ap(pattern=[[64, 64], [1, 32]]))              # every other row
        y = nl.ndarray((64, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(y, x.ap(pattern=[[32, 64], [2, 16]], offset=1))   # the odd columns
        nl.store(out, value=y)
        return out
    a = np.random.default_rng(1).random((128, 32), dtype=np.float32)
    np.testing.assert_array_equal(nki.simulate(odd_columns, a)[0], a[::2, 1::2])

    @nki.jit
    def halvings(a):
        out = nl.ndarray((4, 128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        r = nisa.register_alloc(8)
        step = [0]

        def body(c):
            nl.store(out[step[0]], value=nl.multiply(x, float(int(c))))
            step[0] += 1
            nisa.register_move(c, int(c) // 2)
            return c
        nl.while_loop(r, body)
        return out
    y, _ = nki.simulate(halvings, a)
    np.testing.assert_allclose(y, np.stack([a * 8, a * 4, a * 2, a]), rtol=1e-6)

    @nki.jit
    def dynamic(a, n):
        out = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        r = nisa.register_alloc()
        nisa.register_load(r, nl.load(n))
        nl.while_loop(r, lambda c: 0)
        nl.store(out, value=nl.load(a))
        return out
    # a condition read on the device: a run-time loop (test_nki_runtime_loops.py)
    for n in (0, 1):
        np.testing.assert_array_equal(nki.simulate(dynamic, a, np.full((1, 1), n, np.int32))[0], a)
    with pytest.raises(nki.NKIError, match="outside"):
        @nki.jit
        def past_end(a):
            out = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
            nl.store(out, value=nl.load(a.ap(pattern=[[64, 128], [1, 32]])))
            return out
        nki.simulate(past_end, a)


TRN3_KERNELS = """
import numpy as np
import nki, nki.language as nl, nki.isa as nisa


@nki.jit
def act2(a, s):
    out = nl.ndarray((3, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    x, sc = nl.load(a), nl.load(s)
    forms = [(nl.multiply, nl.add, False), (nl.multiply, nl.subtract, True), (nl.subtract, None, False)]
    for i, (o0, o1, r1) in enumerate(forms):
        y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activate2(y, nl.exp, x, imm0=sc if i == 0 else 0.5, imm1=0.25, op0=o0, op1=o1, reverse1=r1)
        nl.store(out[i], value=y)
    return out


@nki.jit
def softmax(a):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    m = nl.max(x, axis=1, keepdims=True)
    e = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.exponential(e, x, max_value=m, reduce_res=s, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nl.store(out, value=nl.divide(e, s))
    return out
"""

TRN3_CHECKS = """
rng = np.random.default_rng(0)
a, s = rng.random((128, 64), dtype=np.float32), rng.random((128, 1), dtype=np.float32)
y, r = nki.simulate(act2, a, s)
np.testing.assert_allclose(y[0], np.exp(a * s + 0.25), rtol=1e-5)
np.testing.assert_allclose(y[1], np.exp(0.25 - a * 0.5), rtol=1e-5)
np.testing.assert_allclose(y[2], np.exp(a - 0.5), rtol=1e-5)
assert r.program.count("activation ") == 3
b = rng.standard_normal((128, 256)).astype(np.float32)
y, r = nki.simulate(softmax, b)
ref = np.exp(b - b.max(1, keepdims=True))
np.testing.assert_allclose(y, ref / ref.sum(1, keepdims=True), rtol=1e-5)
assert r.program.count("exponential ") == 1
print("trn3 ok")
"""


def test_activate2_and_exponential_on_neuroncore_v4(tmp_path, neuronsim):
    """NeuronCore-v4 (trn3) only, as documented: nisa.activate2(dst, op, data,
    imm0, imm1, op0, op1, reverse0/1) -- each published (op0, op1) pair as
    ScalarE's func(data * scale + bias) -- and nisa.exponential(dst, src,
    max_value, reduce_res), one VectorE instruction writing exp(src - max)
    and the row sums (a softmax with it matches NumPy).  Run on trn3 in a
    process of its own (this one's runtime runs trn2); refused on trn2, by
    the frontend and by the ISA's validator."""
    import subprocess
    script = tmp_path / "k3.py"
    script.write_text(TRN3_KERNELS + TRN3_CHECKS)
    r = subprocess.run([str(neuronsim), "nki", "run", "--target", "trn3", str(script)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "trn3 ok" in r.stdout
    ns = {}
    exec(compile(TRN3_KERNELS.replace("import nki, nki.language as nl, nki.isa as nisa",
                                      "import neuronsim_nki as nki\nimport neuronsim_nki.language as nl\n"
                                      "import neuronsim_nki.isa as nisa"), "k3", "exec"), ns)
    a = np.zeros((128, 64), np.float32)
    for k, args, name in ((ns["act2"], (a, a[:, :1]), "activate2"), (ns["softmax"], (np.zeros((128, 256), np.float32),),
                                                                      "exponential")):
        k._target = "trn2"
        with pytest.raises(nki.NKIError, match=f"{name} needs NeuronCore-v4"):
            nki.simulate(k, *args)
    import neuronsim
    prog = (".target trn2\n.engine vector\nexponential dst=sbuf:fp32[0:128]{1x8} src=sbuf:fp32[0:128]+64{1x8} "
            "max=0.0\nend\n")
    with pytest.raises(neuronsim.NeuronSimError, match="NeuronCore-v4"):
        neuronsim.assemble(prog)
