"""The matrix-multiplication tutorial's optimization stages as our own NKI
kernels (same structure, written against the documented API): each stage
should be faster on the simulator than the one before.
result[M, N] = lhsT[K, M]^T @ rhs[K, N]."""
import neuronsim_nki as nki
import neuronsim_nki.language as nl

TM, TK, TN = 128, 128, 512     # gemm_stationary_fmax, pmax, gemm_moving_fmax


@nki.jit
def matmul_tiled(lhsT, rhs):
    """Stage 1: every output tile loads its operand tiles."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        for n in nl.affine_range(N // TN):
            acc = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                a = nl.load(lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
                b = nl.load(rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                acc += nl.matmul(a, b, transpose_x=True)
            nl.store(result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], value=nl.copy(acc, dtype=result.dtype))
    return result


@nki.jit
def matmul_hoisted(lhsT, rhs):
    """Stage 2: the stationary tiles of a row block are loaded once and
    reused for every column tile."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        a_tiles = [nl.load(lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM]) for k in nl.affine_range(K // TK)]
        for n in nl.affine_range(N // TN):
            b_tiles = [nl.load(rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN]) for k in nl.affine_range(K // TK)]
            acc = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                acc += nl.matmul(a_tiles[k], b_tiles[k], transpose_x=True)
            nl.store(result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], value=nl.copy(acc, dtype=result.dtype))
    return result


@nki.jit
def matmul_blocked(lhsT, rhs, tiles_m=2, tiles_n=2):
    """Stage 3: blocks of the free dimensions: one DMA brings a [TK, BM]
    or [TK, BN] block, and each moving block serves tiles_m stationaries."""
    K, M = lhsT.shape
    _, N = rhs.shape
    BM, BN = TM * tiles_m, TN * tiles_n
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // BM):
        a_blocks = [nl.load(lhsT[k * TK:(k + 1) * TK, m * BM:(m + 1) * BM]) for k in nl.affine_range(K // TK)]
        for n in nl.affine_range(N // BN):
            b_blocks = [nl.load(rhs[k * TK:(k + 1) * TK, n * BN:(n + 1) * BN]) for k in nl.affine_range(K // TK)]
            for bm in nl.affine_range(tiles_m):
                for bn in nl.affine_range(tiles_n):
                    acc = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(K // TK):
                        acc += nl.matmul(a_blocks[k][:, bm * TM:(bm + 1) * TM],
                                         b_blocks[k][:, bn * TN:(bn + 1) * TN], transpose_x=True)
                    nl.store(result[m * BM + bm * TM:m * BM + (bm + 1) * TM, n * BN + bn * TN:n * BN + (bn + 1) * TN],
                             value=nl.copy(acc, dtype=result.dtype))
    return result


@nki.jit
def matmul_optimized(lhsT, rhs, tiles_m=4, tiles_n=2):
    """Stage 4: larger blocks, results gathered in an SBUF block and stored
    with one DMA per block row, PSUM evacuated on ScalarE while VectorE
    and the DMAs carry on."""
    K, M = lhsT.shape
    _, N = rhs.shape
    BM, BN = TM * tiles_m, TN * tiles_n
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // BM):
        a_blocks = [nl.load(lhsT[k * TK:(k + 1) * TK, m * BM:(m + 1) * BM]) for k in nl.affine_range(K // TK)]
        for n in nl.affine_range(N // BN):
            b_blocks = [nl.load(rhs[k * TK:(k + 1) * TK, n * BN:(n + 1) * BN]) for k in nl.affine_range(K // TK)]
            for bm in nl.affine_range(tiles_m):
                out = nl.ndarray((TM, BN), dtype=result.dtype, buffer=nl.sbuf)
                for bn in nl.affine_range(tiles_n):
                    acc = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(K // TK):
                        acc += nl.matmul(a_blocks[k][:, bm * TM:(bm + 1) * TM],
                                         b_blocks[k][:, bn * TN:(bn + 1) * TN], transpose_x=True)
                    nki.isa.activation(op=nl.copy, data=acc, dst=out[:, bn * TN:(bn + 1) * TN])
                nl.store(result[m * BM + bm * TM:m * BM + (bm + 1) * TM, n * BN:(n + 1) * BN], value=out)
    return result


STAGES = [matmul_tiled, matmul_hoisted, matmul_blocked, matmul_optimized]
