"""Views public kernels take and return: tensor.view(dtype) (SDK
NkiTensor.view: the same bytes as another dtype, the last dimension scaled),
and a kernel returning a reshape of a whole tensor -- an argument it wrote
in place (nki-library's attention_block_tkg returns its KV caches so) or
an HBM array it made, also from an LNC=2 launch (qkv_tkg, mlp_tkg)."""
import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.language as nl


def test_view_reinterprets_hbm_and_tiles():
    @nki.jit
    def k(raw):
        out = nl.ndarray((128, 8), dtype=nl.int32, buffer=nl.shared_hbm)
        f = raw.view(nl.float32)                         # uint8 [128, 32] -> fp32 [128, 8]
        t = nl.load(f)
        nl.store(out, value=nl.copy(t.view(nl.int32)))   # an SBUF tile's bytes as int32
        return out
    x = np.random.default_rng(0).standard_normal((128, 8)).astype(np.float32)
    got = k(x.view(np.uint8).copy())
    np.testing.assert_array_equal(got, x.view(np.int32))


def test_view_refuses_what_does_not_split():
    @nki.jit
    def k(raw):
        raw.view(nl.float32)                            # 6 bytes per row: not whole fp32
        return raw
    with pytest.raises(nki.NKIError, match="does not split"):
        k(np.zeros((4, 6), np.uint8))


def test_a_returned_reshape_of_an_argument_is_that_argument_written_in_place():
    @nki.jit
    def k(cache, x):
        c = cache.reshape((4, 64))
        nl.store(c[0:4, 0:64], value=nl.add(nl.load(c[0:4, 0:64]), nl.load(x)))
        return c.reshape(cache.shape)
    cache = np.ones((2, 2, 64), np.float32)
    x = np.full((4, 64), 2.0, np.float32)
    out = k(cache, x)
    assert out is cache
    np.testing.assert_array_equal(cache, np.full((2, 2, 64), 3.0, np.float32))


def test_a_returned_reshape_of_a_made_array_from_an_lnc2_launch():
    @nki.jit
    def k(a):
        out = nl.ndarray((2, 128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        nl.store(out[i], value=nl.multiply(nl.load(a[i]), 2.0))
        return out.reshape((256, 64))
    a = np.random.default_rng(1).standard_normal((2, 128, 64)).astype(np.float32)
    got, r = nki.simulate(k[2], a)
    assert got.shape == (256, 64) and len(r.cores) == 2
    np.testing.assert_array_equal(got, 2.0 * a.reshape(256, 64))


def test_a_returned_slice_is_refused_by_name():
    @nki.jit
    def k(a):
        out = nl.ndarray((256, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out[0:128, :], value=nl.load(a))
        return out[0:128, :]
    with pytest.raises(nki.NKIError, match="whole"):
        k(np.zeros((128, 64), np.float32))
