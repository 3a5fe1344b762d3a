"""bench/fidelity.py's own machinery: the SDK page's kernels are taken as
printed, and a kernel's DMA activity is reported as the profiler defines it
(time when at least one DMA packet is transferring: SDK
tools/neuron-explorer/profile-schema-reference.rst)."""

import numpy as np
from nsim_util import load_bench

import neuronsim_nki as nki
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl



PAGE = """Intro text.

.. code-block:: python

    import nki
    @nki.jit
    def k1(a):
      return a

Prose between.

.. tabs::

   .. tab:: PyTorch

      .. code-block:: python

          import torch
          print("a driver, not a kernel")

.. code-block:: python

    @nki.jit
    def k2(a):
      x = 1

      return a
after the block
"""


def test_doc_kernels_are_the_jit_blocks_as_printed(tmp_path):
    page = tmp_path / "kernel-optimization.rst"
    page.write_text(PAGE)
    blocks = load_bench("fidelity").doc_kernels(page)
    assert len(blocks) == 2
    assert blocks[0].startswith("import nki\n@nki.jit\ndef k1(a):")
    # a blank line inside a block does not end it; the dedent keeps its own indentation
    assert "  x = 1\n\n  return a" in blocks[1] and "after the block" not in blocks[1]


def test_dma_active_is_the_union_of_dma_engine_activity():
    @nki.jit
    def copy(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nl.store(out, value=t)
        return out
    a = np.random.default_rng(0).random((128, 2048), dtype=np.float32)
    got, res = nki.simulate(copy, a)
    np.testing.assert_array_equal(got, a)
    st = res.stats
    # 16 engines move the rows side by side: the union is far below their summed busy time
    assert 0 < st["dma_active_ps"] < st["dma_busy_ps"] / 8
    assert 0 < res.dma_active_percent <= 100.0
    assert abs(res.dma_active_percent - 100.0 * st["dma_active_ps"] / st["total_ps"]) < 1e-9
