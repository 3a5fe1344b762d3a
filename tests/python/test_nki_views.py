"""Views public kernels take and return: tensor.view(dtype) (SDK
NkiTensor.view: the same bytes as another dtype, the last dimension scaled),
and a kernel returning a reshape of a whole tensor -- an argument it wrote
in place (nki-library's attention_block_tkg returns its KV caches so) or
an HBM array it made, also from an LNC=2 launch (qkv_tkg, mlp_tkg); the
SDK NkiTensor view methods (permute, slice, rearrange, ...)."""
import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
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


def test_nki_tensor_view_methods_match_numpy():
    """SDK NkiTensor view methods (NKI 0.5): permute, broadcast, expand_dim,
    squeeze_dim, reshape_dim, flatten_dims, rearrange, slice, select on a
    tile and on an HBM tensor, each read back against the NumPy view;
    get_pattern / is_contiguous / is_indirect; moving the partition
    dimension or merging non-adjacent dimensions is refused by name."""
    a = np.arange(128 * 24, dtype=np.float32).reshape(128, 24)

    def run(fn):
        @nki.jit
        def k(x):
            v = fn(nl.load(x))
            out = nl.ndarray(v.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            r = nl.ndarray(v.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=r, src=v)
            nl.store(out, value=r)
            return out
        return nki.simulate(k, a)[0]

    a46 = a.reshape(128, 4, 6)
    cases = [
        (lambda t: t.reshape_dim(1, (4, -1)), a46),
        (lambda t: t.reshape_dim(1, (4, 6)).permute((0, 2, 1)), a46.transpose(0, 2, 1)),
        (lambda t: t.rearrange(("b", ("h", "w")), ("b", "w", "h"), {"h": 4}), a46.transpose(0, 2, 1)),
        (lambda t: t.rearrange(("b", ("h", "w", "c")), ("b", "c", ("h", "w")), {"h": 2, "w": 3}),
         a.reshape(128, 2, 3, 4).transpose(0, 3, 1, 2).reshape(128, 4, 6)),
        (lambda t: t.slice(1, 8, 24, 2), a[:, 8:24:2]),
        (lambda t: t.reshape_dim(1, (4, 6)).select(1, 2), a46[:, 2]),
        (lambda t: t.slice(1, 0, 6).expand_dim(1).broadcast(1, 3), np.broadcast_to(a[:, None, 0:6], (128, 3, 6))),
        (lambda t: t.slice(1, 0, 6).expand_dim(1).squeeze_dim(1), a[:, 0:6]),
        (lambda t: t.reshape_dim(1, (2, 3, 4)).flatten_dims(1, 2), a.reshape(128, 6, 4)),
    ]
    for i, (fn, want) in enumerate(cases):
        got = run(fn)
        assert got.shape == want.shape and np.array_equal(got, want), i
    seen = {}

    @nki.jit
    def h(x):
        t = nl.load(x)
        seen["pattern"] = (t.get_pattern(), x.get_pattern(), t.is_contiguous(),
                           t.slice(1, 0, 24, 2).is_contiguous(), t.is_indirect())
        for fn in (lambda: t.permute((1, 0)), lambda: t.reshape_dim(1, (4, 6)).permute((0, 2, 1)).flatten_dims(1, 2),
                   lambda: t.broadcast(1, 4), lambda: t.reshape_dim(1, (5, -1))):
            with pytest.raises(nki.NKIError, match="partition dimension|not contiguous|not 1|does not split"):
                fn()
        v = x.reshape_dim(1, (4, 6)).permute((0, 2, 1))       # HBM: any order
        out = nl.ndarray((128, 6, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(v))
        return out
    np.testing.assert_array_equal(nki.simulate(h, a)[0], a46.transpose(0, 2, 1))
    assert seen["pattern"] == ([[24, 128], [1, 24]], [[24, 128], [1, 24]], True, False, False)
