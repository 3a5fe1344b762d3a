"""The `neuron` TorchDynamo backend: `torch.compile(model, backend="neuron")`.

Dynamo captures FX graphs; AOTAutograd turns each into functionalized ATen
graphs -- forward and backward when gradients are needed, one inference
graph otherwise -- with the core ATen decompositions for every op the device
has no kernel of its own for.  Each ATen graph becomes a CompiledGraph
(graph.py): its nodes lowered by the kernel generators and linked by the C
graph compiler into one program per segment between host-bound nodes.

Compiled graphs are cached by graph code, input shapes / strides / dtypes,
target and plugin build: in memory, and on disk under
NEURON_SIM_COMPILE_CACHE_DIR (default $XDG_CACHE_HOME/neuronsim/compile, or
~/.cache/...; "off" disables it), so a new process does not compile again.
Counters: torch_neuronsim.stats()["compile"].  Shapes are static:
`dynamic=True` is refused with the Neuron compiler's message (NCC_EMOD025);
TORCH_LOGS=recompiles explains Dynamo's recompiles as for any backend.

Dynamo finds the backend through the package's `torch_dynamo_backends` entry
point (pyproject.toml), the public registration route: nothing here touches
Dynamo's registries."""
import hashlib
import itertools
import json
import os
import shutil
import tempfile

import torch

from . import graph as _graph
from .fusion import (fuse_matmul_epilogues, fuse_pointwise, fuse_residual_epilogues, reinplace_input_updates,
                     upload_host_scalars)

_graph_ids = itertools.count()
_FORMAT = 3      # bump when the disk layout or the linker's output changes


def _symbolic_input(gm, example_inputs):
    """what to name for a graph with symbolic sizes: the first tensor input
    with one ("input 'x' has shape (s0, 8)"), else a size input; or None"""
    places = [n for n in gm.graph.nodes if n.op == "placeholder"]
    # the traced (fake) values carry the symbolic sizes; the example inputs
    # may be real tensors plus separate size inputs
    values = [n.meta.get("example_value", t) for n, t in zip(places, example_inputs)]
    for n, t in zip(places, values):
        if isinstance(t, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in t.shape):
            return f"input '{n.name}' has shape (" + ", ".join(str(d) for d in t.shape) + ")"
    for n, t in zip(places, values):
        if isinstance(t, torch.SymInt):
            return f"size input '{n.name}' is symbolic"
    return None


# ----------------------------------------------------------------- the cache
def _cache_dir():
    d = os.environ.get("NEURON_SIM_COMPILE_CACHE_DIR")
    if d is not None:
        return None if d.strip().lower() in ("", "off", "0") else d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "neuronsim", "compile")


def _build_stamp():
    """the plugin build the cached programs came from"""
    from . import _lib_path
    st = os.stat(_lib_path)
    return f"{st.st_size}:{st.st_mtime_ns}"


def _arg_key(a):
    if isinstance(a, torch.Tensor):
        return ("T", str(a.dtype), a.device.type, tuple(a.shape), tuple(a.stride()), a.storage_offset())
    return ("V", repr(a))


class GraphCache:
    """compiled steps by key: in memory, and on disk as graph.json plus one
    .nsp per linked segment (no pickle: a cache directory is data)"""

    def __init__(self):
        self.memory = {}

    def key(self, cg, args):
        from . import target
        h = hashlib.sha256()
        h.update(repr((_FORMAT, target(), _build_stamp(), cg.gm.code, [_arg_key(a) for a in args])).encode())
        return h.hexdigest()

    def find(self, cg, args):
        key = cg.cache_key = self.key(cg, args)   # store() files the compiled steps under it
        hit = self.memory.get(key)
        if hit is not None:
            _graph.COUNTERS["compile_cache_hits"] += 1
            cg.fallbacks = dict(hit[1])
            return hit[0]
        _graph.COUNTERS["compile_cache_misses"] += 1
        d = _cache_dir()
        if d:
            loaded = self._load(os.path.join(d, key), cg)
            if loaded is not None:
                _graph.COUNTERS["disk_cache_hits"] += 1
                self.memory[key] = (loaded, dict(cg.fallbacks))
                return loaded
        return None

    def store(self, cg, args, steps):
        key = cg.cache_key
        self.memory[key] = (steps, dict(cg.fallbacks))
        d = _cache_dir()
        if d:
            try:
                self._save(os.path.join(d, key), cg, steps)
                _graph.COUNTERS["disk_cache_writes"] += 1
            except (OSError, TypeError, ValueError):
                pass   # a cache that cannot be written is only slower

    @staticmethod
    def _save(path, cg, steps):
        if os.path.isdir(path):
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = tempfile.mkdtemp(dir=os.path.dirname(path), prefix=".tmp-")
        try:
            out = []
            for k, (kind, x) in enumerate(steps):
                if kind in ("node", "const", "host", "pre"):
                    out.append({kind: x})
                    continue
                with open(os.path.join(tmp, f"seg{k}.nsp"), "wb") as f:
                    f.write(x.program.numpy().tobytes())
                out.append({"segment": k, "first": x.first, "last": x.last, "inputs": x.inputs,
                            "in_meta": x.in_meta, "in_overlaps": x.in_overlaps, "outputs": x.outputs,
                            "out_meta": x.out_meta,
                            "out_specs": [[torch.utils._pytree.treespec_dumps(spec), kinds]
                                          for spec, kinds in x.out_specs],
                            "plan": x.plan, "device": x.device})
            doc = {"format": _FORMAT, "graph": cg.name, "steps": out,
                   "fallbacks": {str(i): why for i, why in cg.fallbacks.items()}}
            with open(os.path.join(tmp, "graph.json"), "w") as f:
                json.dump(doc, f)
            os.rename(tmp, path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    @staticmethod
    def _load(path, cg):
        try:
            with open(os.path.join(path, "graph.json")) as f:
                doc = json.load(f)
            if doc.get("format") != _FORMAT:
                return None
            n = len(cg.nodes)
            steps = []
            for s in doc["steps"]:
                kind = next((k for k in ("node", "const", "host", "pre") if k in s), None)
                if kind:
                    if not 0 <= int(s[kind]) < n or (kind == "const") != (int(s[kind]) in cg.const) or \
                            (kind == "pre") != (int(s[kind]) in cg.prelude_set):
                        return None
                    steps.append((kind, int(s[kind])))
                    continue
                seg = _graph.Segment(int(s["first"]), int(s["last"]))
                if not 0 <= seg.first <= seg.last < n:
                    return None
                seg.inputs = [int(i) for i in s["inputs"]]
                seg.outputs = [int(i) for i in s["outputs"]]
                if not all(0 <= i < n for i in seg.inputs + seg.outputs):
                    return None
                seg.in_meta = [(m[0], tuple(m[1]), tuple(m[2])) for m in s["in_meta"]]
                seg.in_overlaps = [tuple(int(v) for v in o) for o in s["in_overlaps"]]
                seg.out_meta = [int(v) for v in s["out_meta"]]
                seg.out_specs = [(torch.utils._pytree.treespec_loads(spec), [tuple(k) for k in kinds])
                                 for spec, kinds in s["out_specs"]]
                seg.plan = [int(v) for v in s["plan"]]
                seg.device = int(s["device"])
                with open(os.path.join(path, f"seg{int(s['segment'])}.nsp"), "rb") as f:
                    seg.program = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
                steps.append(("segment", seg))
            cg.fallbacks = {int(i): why for i, why in doc.get("fallbacks", {}).items()}
            return steps
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None   # unreadable or foreign: compile again


_CACHE = GraphCache()


def clear_memory_cache():
    """forget compiled graphs kept in this process (the disk cache stays)"""
    _CACHE.memory.clear()


# --------------------------------------------------------------- AOTAutograd
def _has_device_kernel(op):
    """a neuron kernel for op, its out= form or its in-place form (structured
    kernels register one of them)"""
    base = op._schema.name
    names = [op.name(), base + ".out", base + "_"]
    if base.endswith("_"):
        names += [base[:-1], base[:-1] + ".out"]
    if op._overloadname not in ("default", ""):
        names += [f"{base}.{op._overloadname}_out", f"{base}_.{op._overloadname}"]
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for n in names:
        try:
            if has(n, "PrivateUse1"):
                return True
        except RuntimeError:
            pass
    return False


_DECOMP = None


def decompositions():
    """core ATen decompositions, except of ops the device has kernels for
    (a fused native kernel beats its decomposition)"""
    global _DECOMP
    if _DECOMP is None:
        from torch._decomp import core_aten_decompositions
        _DECOMP = {op: fn for op, fn in core_aten_decompositions().items()
                   if not (isinstance(op, torch._ops.OpOverload) and _has_device_kernel(op))}
    return _DECOMP


def _compiler(kind):
    def compile_graph(gm, example_inputs):
        from .profiler import is_active, range as profile_range
        name = f"compiled graph {next(_graph_ids)} ({kind}, {len(gm.graph.nodes)} nodes)"
        reinplace_input_updates(gm)
        upload_host_scalars(gm)
        fuse_matmul_epilogues(gm)
        fuse_residual_epilogues(gm)
        fuse_pointwise(gm)
        cg = _graph.CompiledGraph(gm, name, _CACHE)

        def run(args):
            # while profiling, the graph is a range over the programs it ran
            if not is_active():
                return cg(args)
            with profile_range(name):
                return cg(args)
        run._boxed_call = True
        run.compiled_graph = cg
        return run
    return compile_graph


def neuron_backend(gm: torch.fx.GraphModule, example_inputs):
    for t in example_inputs:
        if isinstance(t, torch.Tensor) and t.device.type not in ("neuron", "cpu", "meta"):
            raise RuntimeError(f"torch.compile(backend='neuron'): graph input on {t.device}; "
                               "move the model and inputs to the neuron device")
    # dynamic=True (Dynamo then assumes nothing static): the device compiler
    # needs every dimension fixed, as the Neuron compiler does (NCC_EMOD025).
    # Shapes Dynamo makes dynamic by itself after a shape change
    # (dynamic=None) are specialized again by AOTAutograd's static tracing.
    import torch._dynamo.config as dynamo_config
    sym = _symbolic_input(gm, example_inputs)
    if sym and not dynamo_config.assume_static_by_default:
        raise RuntimeError(
            f"torch.compile(backend='neuron'): Dynamic shape is not supported: {sym}. "
            "The Neuron compiler requires all tensor dimensions to be statically "
            "sized (NCC_EMOD025): compile with dynamic=False, and pad or bucket inputs to fixed "
            "sizes (sequence lengths to multiples of 128).")
    from torch._dynamo.backends.common import aot_autograd
    backend = aot_autograd(fw_compiler=_compiler("forward"), bw_compiler=_compiler("backward"),
                           inference_compiler=_compiler("inference"), decompositions=decompositions(),
                           keep_inference_input_mutations=True)
    return backend(gm, example_inputs)
