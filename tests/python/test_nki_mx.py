"""MX data on NeuronCore-v4 (nki.isa.quantize_mx, nki.isa.nc_matmul_mx):
each against NumPy implementations of the published semantics written
here from the API reference -- values packed four to an element (fp8:
byte q, fp4: nibble q, low first), one uint8 scale 2^(e - 127) per group of
8 partitions x 4 values, kept on the first 4 partitions of the group's
32-partition quadrant (from an offset 0 / 4 / 8 / 12), and quantize_mx's
block scale 2^(floor(log2 amax) - (Emax - 1)), twice the OCP sample's."""
import os
import subprocess
import sys

import ml_dtypes as mld
import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl

FP8 = {"e4m3": (mld.float8_e4m3fn, nl.float8_e4m3fn_x4, 8), "e5m2": (mld.float8_e5m2, nl.float8_e5m2_x4, 15)}


def scale_rows(P, off=0):
    """the scale operand's row of each data partition"""
    p = np.arange(P)
    return off + (p // 32) * 32 + (p % 32) // 8


def group_rows(P, off=0):
    """the scale operand's row of each group of 8 partitions"""
    g = np.arange(P // 8)
    return off + (g // 4) * 32 + g % 4


def dequant(words, scales, P, kind, off=0):
    """packed [P, F] words (uint32 fp8 / uint16 fp4) and the [*, F] scale
    tile -> the contraction rows [P, F, 4] as float64"""
    if kind == "fp4":
        b = words.astype(np.uint16)
        nib = np.stack([(b >> (4 * q)) & 0xF for q in range(4)], axis=-1).astype(np.uint8)
        vals = nib.view(mld.float4_e2m1fn).astype(np.float64)
    else:
        vals = words.view(np.uint8).reshape(*words.shape, 4).view(FP8[kind][0]).astype(np.float64)
    e = scales[scale_rows(P, off)].astype(np.float64)
    return vals * np.exp2(e - 127)[:, :, None]


def quantize_ref(x, kind):
    """(packed uint32 [P, F/4], scales [P//8, F/4]) of bf16 x [P, F]"""
    dt, _, emax = FP8[kind]
    P, F = x.shape
    g = np.abs(x.astype(np.float32)).reshape(P // 8, 8, F // 4, 4)
    ef = (g.view(np.uint32) >> 23 & 0xFF).max(axis=(1, 3)).astype(np.int64)
    zero = g.max(axis=(1, 3)) == 0
    sc = np.where(zero, 0, np.clip(ef - (emax - 1), 0, 255)).astype(np.uint8)
    q = x.astype(np.float64) / np.exp2(np.repeat(np.repeat(sc.astype(np.float64) - 127, 8, 0), 4, 1))
    return q.astype(dt).view(np.uint8).reshape(P, F // 4, 4).view(np.uint32)[..., 0], sc


def random_mx(rng, P, F, kind):
    """packed words and hardware-layout scales [P, F] of random MX data"""
    if kind == "fp4":
        words = rng.integers(0, 1 << 16, (P, F), dtype=np.uint32).astype(np.uint16)
        words &= 0x7777 | 0x8888 * rng.integers(0, 2, (P, F)).astype(np.uint16)
    else:
        v = (rng.standard_normal((P, F * 4)) * 4).astype(FP8[kind][0])
        words = v.view(np.uint8).reshape(P, F, 4).view(np.uint32)[..., 0].copy()
    scales = np.zeros((P, F), np.uint8)
    scales[group_rows(P)] = rng.integers(118, 130, (P // 8, F))
    return words, scales


X4 = {"e4m3": nl.float8_e4m3fn_x4, "e5m2": nl.float8_e5m2_x4, "fp4": nl.float4_e2m1fn_x4}


def on_trn3(case, *args):
    """case(*args) in a process of its own whose runtime runs trn3 (this
    one's may already run trn2 for the torch plugin)"""
    here = os.path.dirname(os.path.abspath(__file__))
    code = f"import sys; sys.path.insert(0, {here!r}); import test_nki_mx as m; m.{case}(*{args!r})"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"})
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.parametrize("skind,mkind,P,M,N", [("e4m3", "e4m3", 128, 128, 512), ("fp4", "e5m2", 64, 32, 96),
                                               ("fp4", "fp4", 32, 128, 8)])
def test_nc_matmul_mx_dequantizes_and_multiplies(skind, mkind, P, M, N):
    on_trn3("case_matmul", skind, mkind, P, M, N)


def case_matmul(skind, mkind, P, M, N):
    @nki.jit(platform_target="trn3")
    def k(sw, ss, mw, ms):
        s = nl.ndarray(sw.shape, dtype=X4[skind], buffer=nl.sbuf)
        m = nl.ndarray(mw.shape, dtype=X4[mkind], buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=sw.ap(dtype=X4[skind], pattern=[[M, P], [1, M]], offset=0))
        nisa.dma_copy(dst=m, src=mw.ap(dtype=X4[mkind], pattern=[[N, P], [1, N]], offset=0))
        s_sc = nl.ndarray(ss.shape, dtype=nl.uint8, buffer=nl.sbuf)
        m_sc = nl.ndarray(ms.shape, dtype=nl.uint8, buffer=nl.sbuf)
        nisa.dma_copy(dst=s_sc, src=ss)
        nisa.dma_copy(dst=m_sc, src=ms)
        acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=acc, stationary=s, moving=m, stationary_scale=s_sc, moving_scale=m_sc)
        res = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=res)
        return out
    rng = np.random.default_rng(P + M)
    sw, ss = random_mx(rng, P, M, skind)
    mw, ms = random_mx(rng, P, N, mkind)
    got = k(sw, ss, mw, ms)
    want = np.einsum("pmq,pnq->mn", dequant(sw, ss, P, skind), dequant(mw, ms, P, mkind))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("kind", ["e4m3", "e5m2"])
def test_quantize_mx_follows_the_api_reference(kind):
    """data bytes and scales exactly (an all-zero group gets 2^-127, scale 0);
    scales of a 128-partition tile land on partitions 0-3 of each quadrant"""
    on_trn3("case_quantize", kind)


def case_quantize(kind):
    @nki.jit(platform_target="trn3")
    def k(x):
        P, F = x.shape
        xs = nl.load(x)
        q = nl.ndarray((P, F // 4), dtype=X4[kind], buffer=nl.sbuf)
        sc = nl.ndarray((P, F // 4), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.memset(dst=sc, value=0)
        nisa.quantize_mx(dst=q, src=xs, dst_scale=sc)
        oq = nl.ndarray((P, F // 4), dtype=X4[kind], buffer=nl.shared_hbm)
        osc = nl.ndarray((P, F // 4), dtype=nl.uint8, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=oq, src=q)
        nisa.dma_copy(dst=osc, src=sc)
        return oq, osc
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((128, 256)) * np.exp2(rng.integers(-20, 20, (128, 1)))).astype(mld.bfloat16)
    x[8:16, 4:8] = 0
    got_q, got_s = k(x)
    want_q, want_s = quantize_ref(x, kind)
    assert got_q.dtype == np.uint32
    np.testing.assert_array_equal(got_q, want_q)
    np.testing.assert_array_equal(got_s[group_rows(128)], want_s)
    assert got_s[1, 1] == 0
    rest = np.ones(128, bool)
    rest[group_rows(128)] = False
    assert not got_s[rest].any()


def test_packed_scales_and_accumulation():
    """two quantize_mx into one scale tile (offsets 0 and 4 of each quadrant,
    the MXFP tutorial's packing), two nc_matmul_mx into one PSUM tile: the
    second adds (an accumulation group)"""
    on_trn3("case_packed")


def case_packed():
    @nki.jit(platform_target="trn3")
    def k(a, b):
        K, M = a.shape
        N = b.shape[1]
        sc = nl.ndarray((K, N // 4), dtype=nl.uint8, buffer=nl.sbuf)
        qa = nl.ndarray((K, M // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        qb = nl.ndarray((K, N // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.quantize_mx(dst=qa, src=nl.load(a), dst_scale=sc[0:, :M // 4])
        nisa.quantize_mx(dst=qb, src=nl.load(b), dst_scale=sc[4:, :])
        acc = nl.ndarray((M // 4, N // 4), dtype=nl.float32, buffer=nl.psum)
        for _ in nl.sequential_range(2):
            nisa.nc_matmul_mx(dst=acc, stationary=qa, moving=qb, stationary_scale=sc[0:, :M // 4],
                              moving_scale=sc[4:, :])
        out = nl.ndarray((M // 4, N // 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.copy(acc))
        return out
    rng = np.random.default_rng(3)
    a = rng.standard_normal((128, 512)).astype(mld.bfloat16)
    b = rng.standard_normal((128, 1024)).astype(mld.bfloat16)
    got = k(a, b)
    qa, sa = quantize_ref(a, "e4m3")
    qb, sb = quantize_ref(b, "e4m3")
    def hw(s, off):
        t = np.zeros((128 + off, s.shape[1]), np.uint8)
        t[group_rows(128, off)] = s
        return t
    want = 2 * np.einsum("pmq,pnq->mn", dequant(qa, hw(sa, 0), 128, "e4m3"), dequant(qb, hw(sb, 4), 128, "e4m3", 4))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_mx_needs_neuroncore_v4():
    @nki.jit(platform_target="trn2")
    def k(x):
        q = nl.ndarray((128, 16), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        sc = nl.ndarray((128, 16), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(dst=q, src=nl.load(x), dst_scale=sc)
        return x
    with pytest.raises(nki.NKIError, match="NeuronCore-v4"):
        k(np.zeros((128, 64), mld.bfloat16))


def test_mx_timing_is_four_times_bf16_and_quantize_takes_four_per_cycle():
    """TensorE: an MX matmul of a [128, N] moving tile takes the BF16 matmul's
    time for four times the contraction (trn3 arch guide); VectorE's
    quantize_mx takes 4 source elements per partition per cycle"""
    on_trn3("case_timing")


def case_timing():
    import neuronsim
    def busy(body, decl):
        prog = f""".target trn3
.semaphores 1
.scratch 0
{decl}
.engine tensor
{body}
    end
"""
        r = neuronsim.run(prog, {}, {}, target="trn3")
        return r.stats["engine_busy_ps"]
    mm = lambda dt, extra: (f"    load_stationary stationary=sbuf:{dt}[0:128]{{1x128}}{extra[0]}\n"
                           f"    multiply_moving dst=psum:fp32[0:128]{{1x512}} moving=sbuf:{dt}[0:128]+4096{{1x512}}{extra[1]}")
    bf = busy(mm("bf16", ("", "")), "")
    mx = busy(mm("fp8_e4m3_x4", (" scale=sbuf:uint8[0:128]+8192{1x128}", " moving_scale=sbuf:uint8[0:128]+9216{1x512}")), "")
    assert mx["tensor"] == bf["tensor"] > 0
    q = neuronsim.run(""".target trn3
.semaphores 1
.scratch 0
.engine vector
    quantize_mx dst=sbuf:fp8_e4m3_x4[0:128]+16384{1x2048} src=sbuf:bf16[0:128]{1x8192} scale=sbuf:uint8[0:128]+32768{1x2048}
    end
""", {}, {}, target="trn3")
    cyc_ps = 1e12 / 1.2e9        # VectorE at 1.2 GHz on NeuronCore-v4 (HARDWARE.md)
    busy_cycles = q.stats["engine_busy_ps"]["vector"] / cyc_ps
    assert 2048 <= busy_cycles < 2048 * 1.1
