"""nki.isa instructions that move data across partitions or copy under a
predicate (nc_stream_shuffle, ...), each against a NumPy form of the SDK's
documented semantics, across quadrant and tile boundaries."""
import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl


def _shuffled(x, mask, dst):
    """SDK semantics: dst partition 32q + i = x partition 32q + mask[i]; 255 keeps dst's."""
    out = dst.copy()
    for p in range(out.shape[0]):
        m = mask[p % 32]
        if m != 255:
            out[p] = x[p // 32 * 32 + m]
    return out


@pytest.mark.parametrize("P", [1, 31, 32, 33, 64, 96, 127, 128])
@pytest.mark.parametrize("F", [1, 129])
def test_stream_shuffle_matches_numpy_in_place(P, F):
    rng = np.random.default_rng(P * 1000 + F)
    # entry i may read partition m of every quadrant that has a partition i: m below the last one's size
    last = {i: min(32, P - (max(q for q in range(4) if 32 * q + i < P) if i < P else 0) * 32) for i in range(32)}
    mask = [int(m) % last[i] if rng.random() > 0.2 else 255 for i, m in enumerate(rng.integers(0, 32, 32))]

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        a = nl.load(x)
        nisa.nc_stream_shuffle(dst=a, src=a, shuffle_mask=mask)
        nl.store(out, value=a)
        return out
    x = rng.standard_normal((P, F)).astype(np.float32)
    np.testing.assert_array_equal(k(x), _shuffled(x, mask, x))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.float16])
def test_stream_shuffle_moves_values_exactly(dtype):
    """One dtype in and out: integers above 2^24 come through unchanged."""
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(dst=b, src=nl.load(x), shuffle_mask=[31 - i for i in range(32)])
        nl.store(out, value=b)
        return out
    x = (np.arange(128 * 8).reshape(128, 8) + (1 << 30 if np.dtype(dtype).kind in "iu" else 0)).astype(dtype)
    np.testing.assert_array_equal(k(x), _shuffled(x, [31 - i for i in range(32)], x))


def test_stream_shuffle_broadcasts_one_partition_into_another_quadrant():
    """SDK example 2 and nkilib's moe_cte_utils: a one-partition src, mask
    all zeros, into 32 partitions starting at another quadrant."""
    @nki.jit
    def k(x):
        out = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
        b = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(b, value=-1.0)
        a = nl.load(x)
        nisa.nc_stream_shuffle(dst=b[64:96, :], src=a[0:1, :], shuffle_mask=[0] * 32)
        nl.store(out, value=b)
        return out
    x = np.random.default_rng(3).standard_normal((1, 40)).astype(np.float32)
    want = np.full((128, 40), -1.0, np.float32)
    want[64:96] = x[0]
    np.testing.assert_array_equal(k(x), want)


def test_stream_shuffle_refusals_name_the_kernel_line():
    """The validator's rules (SDK): start partitions by active quadrants,
    partitions the mask reads inside src, same dtype, a 32-entry mask."""
    def kernel(dst_lo, src_lo, n, mask, dt=nl.float32):
        @nki.jit
        def k(x):
            out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
            a = nl.load(x)
            b = nl.ndarray((128, 8), dtype=dt, buffer=nl.sbuf)
            nisa.nc_stream_shuffle(dst=b[dst_lo:dst_lo + n, :], src=a[src_lo:src_lo + n, :], shuffle_mask=mask)
            nl.store(out, value=a)
            return out
        return k
    x = np.zeros((128, 8), np.float32)
    ident = list(range(32))
    kernel(32, 0, 32, ident)(x)                                  # one quadrant: any quadrant start
    with pytest.raises(nki.NKIError, match=r"test_nki_partition_ops.py:\d+.*multiple of 64"):
        kernel(32, 0, 64, ident)(x)                              # two quadrants: 0 or 64
    with pytest.raises(nki.NKIError, match="reads src partition 20; src has 16"):
        kernel(0, 0, 16, [20] + ident[1:])(x)
    with pytest.raises(nki.NKIError, match="src fp32|moves data as it is"):
        kernel(0, 0, 32, ident, nl.bfloat16)(x)
    with pytest.raises(nki.NKIError, match="32 entries"):
        kernel(0, 0, 32, ident[:31])(x)
