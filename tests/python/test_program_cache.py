"""The plugin's program cache is bounded (NEURON_SIM_PROGRAM_CACHE_MB):
loaded programs hold simulated HBM, and the least recently used are
unloaded past the limit, so varying shapes do not leak device memory."""
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import torch, torch_neuronsim
    lib = torch_neuronsim._lib
    torch_neuronsim.reset_stats()
    held = []
    for n in range(1, 2001):
        a = torch.randn(n + 3)
        b = torch.randn(n + 3)
        c = (a.to("neuron") * b.to("neuron") + 1.0).cpu()     # two programs per shape
        torch.testing.assert_close(c, a * b + 1.0, rtol=1e-6, atol=1e-6)
        if n in (1000, 2000):
            st = torch_neuronsim.stats()
            # device memory that is not PyTorch's: the loaded programs
            held.append(lib.neuron_device_memory_in_use() - torch.neuron.memory_reserved())
            assert st["program_cache_bytes"] <= st["program_cache_limit_bytes"], st
            assert held[-1] <= st["program_cache_limit_bytes"], (held, st)
    st = torch_neuronsim.stats()
    print(st["program_cache_evictions"], st["program_cache_misses"], st["program_cache_entries"],
          held[0], held[1], st["program_cache_limit_bytes"])
""")


def run(env_mb):
    env = dict(os.environ, NEURON_SIM="1")
    if env_mb is None:
        env.pop("NEURON_SIM_PROGRAM_CACHE_MB", None)
    else:
        env["NEURON_SIM_PROGRAM_CACHE_MB"] = env_mb
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return [int(v) for v in r.stdout.split()]


def test_distinct_shapes_stay_within_the_cache_limit():
    evictions, misses, entries, held_1000, held_2000, limit = run("2")
    assert limit == 2 << 20
    assert misses >= 4000 and evictions > 0 and evictions == misses - entries
    # bounded: the second thousand shapes did not add device memory
    assert held_2000 <= limit and held_2000 <= held_1000 * 1.1


def test_bad_cache_limit_is_a_clear_error():
    env = dict(os.environ, NEURON_SIM="1", NEURON_SIM_PROGRAM_CACHE_MB="lots")
    r = subprocess.run([sys.executable, "-c", "import torch; (torch.ones(3, device='neuron') + 1).cpu()"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode != 0 and "NEURON_SIM_PROGRAM_CACHE_MB='lots'" in r.stderr
