"""The engines' PRNG instructions (rng, rand_set_state, rand_get_state)
against a Python XORWOW reference, and the NKI ISA's per-generation and
dtype rules for them."""
import numpy as np
import pytest

from nsim_util import run

M32 = 0xFFFFFFFF


def xorwow(s):
    t, x = s[4], s[0]
    s[4], s[3], s[2], s[1] = s[3], s[2], s[1], x
    t ^= t >> 2
    t ^= (t << 1) & M32
    t ^= x ^ ((x << 4) & M32)
    s[0] = t
    s[5] = (s[5] + 362437) & M32
    return (t + s[5]) & M32


def seeds(p, words, salt=0):
    return np.array([[(0x9E3779B9 * (i * words + w + 1 + salt)) & M32 or 1 for w in range(words)]
                     for i in range(p)], dtype=np.uint32)


def program(target, engine, p, words, n, dt):
    return f""".target {target}
.semaphores 2
.tensor s input uint32 [{p},{words}]
.tensor bits output {dt} [{p},{n}]
.tensor bits2 output {dt} [{p},{n}]
.tensor state output uint32 [{p},{words}]
.dma ls direct dst=sbuf:uint32[0:{p}]{{1x{words}}} src=hbm(s):uint32[{words}x{p}]{{1x{words}}}
.dma sb direct dst=hbm(bits):{dt}[{n}x{p}]{{1x{n}}} src=sbuf:{dt}[0:{p}]+4096{{1x{n}}}
.dma sb2 direct dst=hbm(bits2):{dt}[{n}x{p}]{{1x{n}}} src=sbuf:{dt}[0:{p}]+16384{{1x{n}}}
.dma ss direct dst=hbm(state):uint32[{words}x{p}]{{1x{words}}} src=sbuf:uint32[0:{p}]+512{{1x{words}}}
.engine sync
    dma_copy desc=ls queue=0 sem=0 value=1
    sem_wait sem=1 cond=is_ge value=1
    dma_copy desc=sb queue=0 sem=0 value=1
    dma_copy desc=sb2 queue=1 sem=0 value=1
    dma_copy desc=ss queue=2 sem=0 value=1
    sem_wait sem=0 cond=is_ge value=4
    end
.engine {engine}
    sem_wait sem=0 cond=is_ge value=1
    rand_set_state src=sbuf:uint32[0:{p}]{{1x{words}}}
    rng dst=sbuf:{dt}[0:{p}]+4096{{1x{n}}}
    rand_get_state dst=sbuf:uint32[0:{p}]+512{{1x{words}}}
    rand_set_state src=sbuf:uint32[0:{p}]{{1x{words}}}
    rng dst=sbuf:{dt}[0:{p}]+16384{{1x{n}}}
    sem_signal sem=1 op=add value=1
    end
"""


def reference(s, n, gens):
    """bits per lane (element k from generator k mod gens), final states"""
    s = [[int(v) for v in row] for row in s]
    out = np.zeros((len(s), n), dtype=np.uint64)
    for p, row in enumerate(s):
        st = [row[6 * g:6 * g + 6] for g in range(gens)]
        for k in range(n):
            out[p, k] = xorwow(st[k % gens])
        s[p] = sum(st, [])
    return out, np.array(s, dtype=np.uint32)


@pytest.mark.parametrize("target,engine,words", [("trn2", "gpsimd", 6), ("trn3", "gpsimd", 6),
                                                 ("trn3", "vector", 24)])
@pytest.mark.parametrize("dt", ["uint32", "int32", "uint16", "int8"])
@pytest.mark.parametrize("p", [1, 128])
def test_rng_matches_xorwow_and_reseeding_repeats(neuronsim, tmp_path, target, engine, words, dt, p):
    n = 37
    s = seeds(p, words)
    path = tmp_path / "p.nsasm"
    path.write_text(program(target, engine, p, words, n, dt))
    res, _ = run(neuronsim, path, {"s": s}, tmp_path)
    want, state = reference(s, n, words // 6)
    width = np.dtype(dt).itemsize * 8
    low = (want & ((1 << width) - 1)).astype(np.uint64)
    np.testing.assert_array_equal(res["bits"].astype(np.int64) & ((1 << width) - 1),
                                  low.astype(np.int64))
    np.testing.assert_array_equal(res["state"], state)
    # seeding again replays the same stream
    np.testing.assert_array_equal(res["bits2"], res["bits"])


def test_rng_bits_look_uniform(neuronsim, tmp_path):
    p, n = 128, 512
    path = tmp_path / "p.nsasm"
    path.write_text(program("trn2", "gpsimd", p, 6, n, "uint32"))
    res, _ = run(neuronsim, path, {"s": seeds(p, 6, salt=7)}, tmp_path)
    u = res["bits"].astype(np.float64) / 2.0 ** 32
    assert abs(u.mean() - 0.5) < 0.01
    hist = np.histogram(u, bins=16, range=(0, 1))[0]
    expected = u.size / 16
    chi2 = ((hist - expected) ** 2 / expected).sum()
    assert chi2 < 40          # 15 degrees of freedom: p ~ 5e-4 at 40
    # lanes are not copies of each other
    assert len({tuple(r[:8]) for r in res["bits"]}) == p


@pytest.mark.parametrize("target,engine,words,dt,message", [
    ("trn1", "gpsimd", 6, "uint32", "needs NeuronCore-v3 or newer on gpsimd"),
    ("trn2", "vector", 24, "uint32", "needs NeuronCore-v4 or newer on vector"),
    ("trn2", "gpsimd", 24, "uint32", "a gpsimd lane's XORWOW state is 6"),
    ("trn2", "gpsimd", 6, "fp32", "rng writes integers, not fp32"),
])
def test_rng_rules(neuronsim, tmp_path, target, engine, words, dt, message):
    path = tmp_path / "p.nsasm"
    path.write_text(program(target, engine, 4, words, 8, dt))
    _, r = run(neuronsim, path, {"s": seeds(4, words)}, tmp_path, check=False)
    assert r.returncode != 0
    assert message in r.stderr.decode(), r.stderr.decode()
