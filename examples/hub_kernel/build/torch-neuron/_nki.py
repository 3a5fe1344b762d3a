"""NKI kernels of neuronsim-layers: RMSNorm and SiLU-and-mul over rows.

Both take a 2-D HBM tensor of rows and walk it in tiles of 128 rows (the
partition dimension; the last tile masked) by column chunks of at most
COLUMNS elements, so any row count and any row length fit SBUF.  They
compute in fp32 and round where the reference PyTorch modules round:
Llama's RMSNorm rounds the normalised row to the input's dtype before it
multiplies by the weight; SiLU-and-mul rounds silu(a) before the product.
"""
import nki
import nki.language as nl

COLUMNS = 2048          # elements per partition per chunk: 8 KiB of fp32


def _chunks(d):
    """column chunks (start, width) covering [0, d), widths fixed at trace time"""
    return [(c, min(COLUMNS, d - c)) for c in range(0, d, COLUMNS)]


@nki.jit
def rms_norm_kernel(x, weight, eps):
    """out[r, :] = weight * round_x(x[r, :] * rsqrt(mean(x[r, :]^2) + eps))"""
    n, d = x.shape
    out_dtype = x.dtype if x.dtype == weight.dtype else nl.float32
    out = nl.ndarray((n, d), dtype=out_dtype, buffer=nl.shared_hbm)
    chunks = _chunks(d)
    for t in nl.affine_range((n + 127) // 128):
        ip = t * 128 + nl.arange(128)[:, None]
        rows = ip < n
        # sum of squares, chunk by chunk, in fp32
        ssq = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        tiles = []
        for c0, w in chunks:
            jf = c0 + nl.arange(w)[None, :]
            xt = nl.load(x[ip, jf], mask=rows)
            ssq += nl.sum(nl.multiply(xt, xt, dtype=nl.float32), axis=[1])
            if len(chunks) == 1:
                tiles.append(xt)
        r = nl.rsqrt(nl.add(nl.multiply(ssq, 1.0 / d), eps))
        for k, (c0, w) in enumerate(chunks):
            jf = c0 + nl.arange(w)[None, :]
            xt = tiles[k] if tiles else nl.load(x[ip, jf], mask=rows)
            wt = nl.load(weight[0:1, c0:c0 + w]).broadcast_to((128, w))
            y = nl.multiply(xt, r, dtype=x.dtype)
            nl.store(out[ip, jf], value=nl.multiply(y, wt, dtype=out_dtype), mask=rows)
    return out


@nki.jit
def silu_and_mul_kernel(x):
    """out[r, :] = round(silu(x[r, :d])) * x[r, d:]  for x of [n, 2d]"""
    n, d2 = x.shape
    d = d2 // 2
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range((n + 127) // 128):
        ip = t * 128 + nl.arange(128)[:, None]
        rows = ip < n
        for c0, w in _chunks(d):
            jf = c0 + nl.arange(w)[None, :]
            gate = nl.load(x[ip, jf], mask=rows)
            up = nl.load(x[ip, d + jf], mask=rows)
            nl.store(out[ip, jf], value=nl.multiply(nl.silu(gate, dtype=x.dtype), up, dtype=x.dtype), mask=rows)
    return out
