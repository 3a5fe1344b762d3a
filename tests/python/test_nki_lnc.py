"""Kernel HBM arrays, LNC=2 launches (kernel[2] on NeuronCore-v3+: two
physical cores as one logical core), nki.isa sendrecv / core_barrier and
nki.collectives -- each against NumPy.  Sources: SDK nki/api/nki/__init__.py
(jit: "The LNC degree can be set at the callsite using bracket syntax:
kernel[lnc](args)"), nki/api/nki/isa/__init__.py (sendrecv, core_barrier),
nki/guides/nki_simulator.rst ("For LNC2 kernels (kernel[2]) ... each with its
own program_id. Input arrays use shared_hbm buffers")."""
import numpy as np
import pytest

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl


def test_hbm_arrays_a_kernel_keeps_to_itself_live_in_its_scratch():
    @nki.jit
    def k(a):
        tmp = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        priv = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.private_hbm)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(tmp, value=nl.load(a))
        nl.store(priv, value=nl.multiply(nl.load(tmp), 3.0))
        nl.store(out, value=nl.add(nl.load(priv), 1.0))
        return out
    a = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    out, r = nki.simulate(k, a)
    np.testing.assert_allclose(out, a * 3 + 1, rtol=1e-6)
    assert "internal fp32 [128,64]" in r.program
