"""How the NKI frontend places DMAs the way the hardware compiler does: which
tiles go when SBUF overflows (the most reused stay, room is contiguous).
Each against NumPy, each placement checked in the program."""
import numpy as np

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl

RNG = np.random.default_rng(15)


@nki.jit
def reused_and_streamed(lhsT, rhs):
    """A blocked matmul whose two operand blocks do not fit SBUF together:
    2 x 48 stationary tiles (512 B per partition each) reused by every
    block of rhs, 2 x 48 moving tiles (2 KiB) per block: 240 KiB > 224."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    stat = [[None] * (K // 128) for _ in range(M // 128)]
    for bm in range(M // 128):
        for k in range(K // 128):
            stat[bm][k] = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=stat[bm][k], src=lhsT[k * 128:(k + 1) * 128, bm * 128:(bm + 1) * 128])
    for n in nl.affine_range(N // 1024):
        mov = [[None] * (K // 128) for _ in range(2)]
        for bn in range(2):
            for k in range(K // 128):
                mov[bn][k] = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
                c0 = n * 1024 + bn * 512
                nisa.dma_copy(dst=mov[bn][k], src=rhs[k * 128:(k + 1) * 128, c0:c0 + 512])
        for bm in range(M // 128):
            for bn in range(2):
                acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
                for k in range(K // 128):
                    nisa.nc_matmul(acc, stat[bm][k], mov[bn][k])
                res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(res, acc)
                c0 = n * 1024 + bn * 512
                nisa.dma_copy(dst=out[bm * 128:(bm + 1) * 128, c0:c0 + 512], src=res)
    return out


def test_spilling_keeps_the_most_reused_tiles_and_makes_contiguous_room():
    """The stationary block (used by every rhs block) stays: each of its
    tiles is loaded once, the rhs tiles are loaded again for the second
    stationary tile that uses them -- evicting what has the fewest uses
    left, a whole contiguous window at a time (tracer.room).  The published
    matmul v4 profile moves the bytes this does (CALIBRATION C-11: MBU
    42.55% over 28.42 ms, v3 43.87% over 28.20 ms); evicting by furthest
    next use alone loads stationary tiles again in every block."""
    K, M, N = 48 * 128, 256, 2048
    lhsT = RNG.random((K, M), dtype=np.float32)
    rhs = RNG.random((K, N), dtype=np.float32)
    got, res = nki.simulate(reused_and_streamed, lhsT, rhs)
    np.testing.assert_allclose(got, lhsT.T @ rhs, rtol=1e-4)
    loads = [line for line in res.program.splitlines() if line.startswith(".dma ")]
    assert sum("src=hbm(lhsT)" in line for line in loads) == 2 * 48
    rhs_loads = sum("src=hbm(rhs)" in line for line in loads)
    assert 2 * 2 * 48 < rhs_loads <= 2 * 2 * 2 * 48      # loaded again, at most once per use
    assert not any(line.startswith(".tensor spill") for line in res.program.splitlines())
