"""NKI kernels for the simulator's tests, written against the documented
nki.language / nki.isa API (tutorial structure; no code copied)."""
import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl


@nki.jit
def tensor_add(a_input, b_input):
    assert a_input.shape == b_input.shape and a_input.shape[0] <= nl.tile_size.pmax
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    nl.store(c_output, value=nl.add(nl.load(a_input), nl.load(b_input)))
    return c_output


@nki.jit
def tensor_add_isa(a_input, b_input):
    """The newer style: explicit buffers, nisa.dma_copy and dst= operands."""
    a_tile = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_tile, src=a_input)
    b_tile = nl.ndarray(b_input.shape, dtype=b_input.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=b_tile, src=b_input)
    c_tile = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.add)
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=c_output, src=c_tile)
    return c_output


@nki.jit
def matmul_tiled(lhsT, rhs):
    """result[M, N] = lhsT[K, M]^T @ rhs[K, N], tiled 128 x 128 x 512."""
    K, M = lhsT.shape
    K_, N = rhs.shape
    assert K == K_
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    TM, TK, TN = nl.tile_size.gemm_stationary_fmax, nl.tile_size.pmax, nl.tile_size.gemm_moving_fmax
    for m in nl.affine_range(M // TM):
        for n in nl.affine_range(N // TN):
            acc = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                lhsT_tile = nl.ndarray((TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                lhsT_tile[...] = nl.load(lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
                rhs_tile[...] = nl.load(rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                acc += nl.matmul(lhsT_tile[...], rhs_tile[...], transpose_x=True)
            out = nl.copy(acc, dtype=result.dtype)
            nl.store(result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], value=out)
    return result


@nki.jit
def softmax_rows(x):
    """Row softmax of x[P, F] (P <= 128), numerically stable."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(x.shape[0])[:, None], nl.arange(x.shape[1])[None, :]
    t = nl.load(x[i_p, i_f])
    m = nl.max(t, axis=1, keepdims=True)
    e = nl.exp(nl.subtract(t, m))
    s = nl.sum(e, axis=1, keepdims=True)
    nl.store(out[i_p, i_f], value=nl.multiply(e, nl.reciprocal(s)))
    return out


@nki.jit
def rmsnorm(x, gamma, eps=1e-6):
    """y = x / sqrt(mean(x^2) + eps) * gamma, rows tiled by 128."""
    N, D = x.shape
    out = nl.ndarray((N, D), dtype=x.dtype, buffer=nl.shared_hbm)
    g_b = nl.load(gamma.reshape((1, D))).broadcast_to((nl.tile_size.pmax, D))
    for i in nl.affine_range((N + 127) // 128):
        rows = min(128, N - i * 128)
        t = nl.load(x[i * 128:i * 128 + rows, :])
        ms = nl.mean(nl.square(t), axis=1, keepdims=True)
        r = nl.rsqrt(nl.add(ms, eps))
        y = nl.multiply(nl.multiply(t, r), g_b[0:rows, :])
        nl.store(out[i * 128:i * 128 + rows, :], value=y)
    return out


@nki.jit
def layernorm(x, gamma, beta, eps=1e-5):
    """y = (x - mean) / sqrt(var + eps) * gamma + beta over the last axis."""
    N, D = x.shape
    out = nl.ndarray((N, D), dtype=x.dtype, buffer=nl.shared_hbm)
    g_b = nl.load(gamma).broadcast_to((128, D))
    b_b = nl.load(beta).broadcast_to((128, D))
    for i in nl.affine_range(N // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        mu = nl.mean(t, axis=1, keepdims=True)
        xc = nl.subtract(t, mu)
        var = nl.mean(nl.multiply(xc, xc), axis=1, keepdims=True)
        r = nl.rsqrt(nl.add(var, eps))
        y = nl.add(nl.multiply(nl.multiply(xc, r), g_b), b_b)
        nl.store(out[i * 128:(i + 1) * 128, :], value=y)
    return out


@nki.jit
def transpose_2d(x):
    """out = x^T for x[M, N], M and N multiples of 128, by 128x128 TensorE
    transposes."""
    M, N = x.shape
    out = nl.ndarray((N, M), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(M // 128):
        for j in nl.affine_range(N // 128):
            t = nl.load(x[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128])
            tt = nl.copy(nl.transpose(t), dtype=x.dtype)
            nl.store(out[j * 128:(j + 1) * 128, i * 128:(i + 1) * 128], value=tt)
    return out


@nki.jit
def attention_fwd(q, k, v, scale=1.0):
    """Fused single-head attention: out[Sq, d] = softmax(scale * q^T k) v for
    q[d, Sq], k[d, Sk], v[Sk, d] (d <= 128 on the partitions, Sk <= 512,
    Sq and Sk multiples of 128).  Scores stay on chip; P^T blocks come from
    TensorE transposes; the row sum divides the output at the end."""
    d, Sq = q.shape
    _, Sk = k.shape
    out = nl.ndarray((Sq, d), dtype=q.dtype, buffer=nl.shared_hbm)
    k_t = nl.load(k)
    v_tiles = [nl.load(v[j * 128:(j + 1) * 128, :]) for j in nl.affine_range(Sk // 128)]
    for i in nl.affine_range(Sq // 128):
        q_t = nl.load(q[:, i * 128:(i + 1) * 128])
        s = nl.multiply(nl.matmul(q_t, k_t, transpose_x=True), scale)
        m = nl.max(s, axis=1, keepdims=True)
        p = nl.exp(nl.subtract(s, m))
        row_sum = nl.sum(p, axis=1, keepdims=True)
        acc = nl.zeros((128, d), nl.float32, buffer=nl.psum)
        for j in nl.affine_range(Sk // 128):
            p_t = nl.copy(nl.transpose(p[:, j * 128:(j + 1) * 128]))
            acc += nl.matmul(p_t, v_tiles[j], transpose_x=True)
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.multiply(acc, nl.reciprocal(row_sum)))
    return out


@nki.jit
def selective_scan(u, delta, A, B, C):
    """A diagonal selective scan (Mamba's S6 recurrence) per channel:
    h_t = exp(delta_t * A) * h_{t-1} + delta_t * B_t * u_t, y_t = C_t * h_t,
    for u, delta [ch, L] (channels on the partitions), A [ch, 1], B, C [1, L]."""
    ch, L = u.shape
    y_out = nl.ndarray((ch, L), dtype=u.dtype, buffer=nl.shared_hbm)
    u_t, dt_t, a_t = nl.load(u), nl.load(delta), nl.load(A)
    b_b = nl.load(B).broadcast_to((ch, L))
    c_b = nl.load(C).broadcast_to((ch, L))
    d_a = nl.exp(nl.multiply(dt_t, a_t))
    d_bu = nl.multiply(nl.multiply(dt_t, b_b), u_t)
    h = nl.zeros((ch, 1), nl.float32)
    y = nl.ndarray((ch, L), dtype=nl.float32, buffer=nl.sbuf)
    for t in nl.sequential_range(L):
        h = nl.add(nl.multiply(d_a[:, t:t + 1], h), d_bu[:, t:t + 1])
        y[:, t:t + 1] = nl.multiply(h, c_b[:, t:t + 1])
    nl.store(y_out, value=y)
    return y_out


@nki.jit
def add_spmd(a, b):
    """One [128, 512] tile per instance of a 2-D launch grid:
    add_spmd[rows // 128, cols // 512](a, b)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    j = nl.program_id(1) * 512 + nl.arange(512)[None, :]
    nl.store(out[i, j], value=nl.load(a[i, j]) + nl.load(b[i, j]))
    return out


@nki.jit
def matmul_isa_groups(lhsT, rhs):
    """nisa.nc_matmul into an uninitialized PSUM tile: the first matmul of a
    group overwrites, the next ones accumulate; after the tile is copied out
    a new group starts (the second output reuses the same PSUM tile)."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((2, M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    for rep in nl.sequential_range(2):
        for k in nl.affine_range(K // 128):
            a = nl.ndarray((128, M), dtype=lhsT.dtype, buffer=nl.sbuf)
            b = nl.ndarray((128, N), dtype=rhs.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a, src=lhsT[k * 128:(k + 1) * 128, :])
            nisa.dma_copy(dst=b, src=rhs[k * 128:(k + 1) * 128, :])
            nisa.nc_matmul(dst=acc, stationary=a, moving=b)
        res = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out[rep], src=res)
    return out


@nki.jit
def scale_rows_masked(x, factor=2.0):
    """Rows in tiles of 128 with the last tile partial: masked load/store
    (mask=(i * 128 + ip < N), NKI's tail idiom)."""
    N, D = x.shape
    out = nl.ndarray((N, D), dtype=x.dtype, buffer=nl.shared_hbm)
    ip, jf = nl.mgrid[0:128, 0:D]
    for i in nl.affine_range((N + 127) // 128):
        t = nl.load(x[i * 128 + ip, jf], mask=(i * 128 + ip < N))
        nl.store(out[i * 128 + ip, jf], value=nl.multiply(t, factor), mask=(i * 128 + ip < N))
    return out


@nki.jit
def swap_free_axes(x, f1, f2):
    """Per row of x[P, f1 * f2], transpose the f1 x f2 matrix the row holds,
    with index-grid access patterns (i_f2 * f1 + i_f1) on an SBUF copy."""
    P = x.shape[0]
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    ip, i1, i2 = nl.mgrid[0:P, 0:f1, 0:f2]
    r = nl.ndarray((P, f1 * f2), dtype=x.dtype, buffer=nl.sbuf)
    r[ip, i2 * f1 + i1] = nl.copy(t[ip, i1 * f2 + i2])
    nl.store(out, value=r)
    return out


@nki.jit
def selective_scan_isa(u, delta, A, B, C):
    """selective_scan with the recurrence as one nisa.tensor_tensor_scan
    (h_t = dA_t * h_{t-1} + dBu_t along the free axis) instead of a loop."""
    ch, L = u.shape
    y_out = nl.ndarray((ch, L), dtype=u.dtype, buffer=nl.shared_hbm)
    u_t, dt_t = nl.load(u), nl.load(delta)
    d_a = nisa.activation(op=nl.exp, data=dt_t, scale=nl.load(A))
    d_bu = nl.multiply(nl.multiply(dt_t, nl.load(B).broadcast_to((ch, L))), u_t)
    h = nisa.tensor_tensor_scan(d_a, d_bu, initial=0.0, op0=nl.multiply, op1=nl.add)
    nl.store(y_out, value=nl.multiply(h, nl.load(C).broadcast_to((ch, L))))
    return y_out


@nki.jit
def causal_mask(scores, fill=-9984.0):
    """scores[q, k] where k <= q, fill elsewhere (nisa.affine_select with
    the predicate i_q - i_k >= 0), plus the key index of every element
    (nisa.iota)."""
    Q, K = scores.shape
    out = nl.ndarray((Q, K), dtype=scores.dtype, buffer=nl.shared_hbm)
    keys = nl.ndarray((Q, K), dtype=nl.float32, buffer=nl.shared_hbm)
    i_q, i_k = nl.mgrid[0:Q, 0:K]
    nl.store(out, value=nisa.affine_select(pred=(i_q - i_k >= 0), on_true_tile=nl.load(scores),
                                           on_false_value=fill))
    nl.store(keys, value=nisa.iota(i_k + 0 * i_q, dtype=nl.float32))
    return out, keys


def spilling_sum(scaled):
    """A kernel whose live tiles do not fit SBUF: out = sum of a's 120
    [128, 512] column blocks (each doubled first when `scaled`, so it is
    written after its load), 120 x 2 KiB per partition live at once:
    240 KiB > SBUF's 192 / 224 KiB."""
    @nki.jit
    def spilling(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        tiles = []
        for i in range(120):
            t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a[:, i * 512:(i + 1) * 512])
            if scaled:
                nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
            tiles.append(t)
        acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=acc, src=tiles[0])
        for i in range(1, 120):
            nisa.tensor_tensor(dst=acc, data1=acc, data2=tiles[i], op=nl.add)
        nl.store(out, value=acc)
        return out
    return spilling
