"""Coverage-guided fuzz target (atheris, libFuzzer's engine) for the
compile cache's untrusted inputs: the bytes torch.compiler.
load_cache_artifacts hands populate_cache, and the graph document an
intact entry carries.

    python3 tests/fuzz/fuzz_compile_cache.py [libFuzzer flags: -runs=N -max_total_time=S DIR]

Properties: _unbundle(bytes) returns an intact entry (graph.json present)
or raises ValueError -- never anything else; an intact entry's files turn
into compiled steps through _steps, whose graph checks hold (every node
index inside the graph), or into None.  Half the inputs are sealed with a
correct digest first, so the fuzzer reaches the graph document's reader
rather than stopping at the digest check.  scripts/fuzz.sh runs it after
the C targets; tests/python/test_compile.py replays a seeded sweep in CI."""
import importlib
import sys
import types

import atheris
import torch  # noqa: F401  (loads torch_neuronsim, uninstrumented: only the cache module is the target)

sys.modules.pop("torch_neuronsim.compile_cache", None)
with atheris.instrument_imports():
    cc = importlib.import_module("torch_neuronsim.compile_cache")

GRAPH = types.SimpleNamespace(nodes=list(range(8)), const={1}, prelude_set={2}, fallbacks={})


def check_steps(files):
    steps = cc._steps(files, GRAPH)
    if steps is None:
        return
    n = len(GRAPH.nodes)
    for kind, x in steps:
        if kind == "segment":
            assert 0 <= x.first <= x.last < n
            assert all(0 <= i < n for i in x.inputs + x.outputs)
        else:
            assert 0 <= x < n


def one_input(data):
    if not data:
        return
    if data[0] & 1:   # a sealed entry: graph.json (and a segment) from the rest
        body = data[1:]
        cut = body.find(b"\0")
        files = {"graph.json": body if cut < 0 else body[:cut]}
        if cut >= 0:
            files["seg0.nsp"] = body[cut + 1:]
        blob = cc._bundle(files)
    else:
        blob = data[1:]
    try:
        files = cc._unbundle(blob)
    except ValueError:
        return
    assert "graph.json" in files and "sha256" not in files
    check_steps(files)


# valid entries to start from (JSON is parsed in C, which gives the fuzzer no
# coverage to climb towards a well-formed document on its own)
SEEDS = [
    b'{"format": 5, "graph": "g", "steps": []}',
    b'{"format": 5, "graph": "g", "steps": [{"node": 0}, {"const": 1}, {"pre": 2}, {"host": 3}]}',
    b'{"format": 5, "graph": "g", "fallbacks": {"3": "why"}, "steps": [{"segment": 0, "first": 0, '
    b'"last": 3, "inputs": [0], "outputs": [3], "in_meta": [["float32", [4], [1]]], "in_overlaps": [], '
    b'"out_dtypes": ["torch.float32"], "out_meta": [1, 4, 1], "out_specs": [], "plan": [0, 1], "device": 0}]}'
    b'\0NSPG',
]


def seed(corpus):
    """write the seeds into an empty corpus directory"""
    import os
    if os.path.isdir(corpus) and not os.listdir(corpus):
        for i, s in enumerate(SEEDS):
            with open(os.path.join(corpus, f"seed{i}"), "wb") as f:
                f.write(b"\1" + s)


def main():
    for a in sys.argv[1:]:
        if not a.startswith("-"):
            seed(a)
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
