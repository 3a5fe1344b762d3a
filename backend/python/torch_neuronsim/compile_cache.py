"""The compile cache of the `neuron` backend: compiled steps by key (graph
code, input geometry, target, plugin build), in memory and on disk under
NEURON_SIM_COMPILE_CACHE_DIR (default $XDG_CACHE_HOME/neuronsim/compile, or
~/.cache/...; "off" disables it) as graph.json plus one .nsp per linked
segment -- no pickle: a cache directory is data.

Every graph compiled or loaded is also recorded as a cache artifact of type
"neuronsim_graph", so torch.compiler.save_cache_artifacts() carries it and
torch.compiler.load_cache_artifacts() puts it where the next compile of the
same graph finds it (the disk cache, or this process when that is off).
The artifact types are PyTorch's torch.compiler._cache registry, the one
route save/load_cache_artifacts has; without it (a PyTorch that moved it)
the cache works the same and only the artifacts are missing."""
import hashlib
import json
import os
import re
import shutil
import tempfile

import torch

from . import graph as _graph

_FORMAT = 3      # bump when the disk layout or the linker's output changes
ARTIFACT_TYPE = "neuronsim_graph"
_KEY = re.compile(r"[0-9a-f]{64}\Z")
_FILE = re.compile(r"(graph\.json|seg[0-9]{1,6}\.nsp)\Z")
_MAX_BUNDLE = 1 << 30


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


# ------------------------------------------------------ files of one entry
def _files(cg, steps):
    """{file name: bytes} of compiled steps: graph.json and seg<k>.nsp"""
    files, out = {}, []
    for k, (kind, x) in enumerate(steps):
        if kind in ("node", "const", "host", "pre"):
            out.append({kind: x})
            continue
        files[f"seg{k}.nsp"] = x.program.numpy().tobytes()
        out.append({"segment": k, "first": x.first, "last": x.last, "inputs": x.inputs,
                    "in_meta": x.in_meta, "in_overlaps": x.in_overlaps, "outputs": x.outputs,
                    "out_meta": x.out_meta,
                    "out_specs": [[torch.utils._pytree.treespec_dumps(spec), kinds] for spec, kinds in x.out_specs],
                    "plan": x.plan, "device": x.device})
    doc = {"format": _FORMAT, "graph": cg.name, "steps": out,
           "fallbacks": {str(i): why for i, why in cg.fallbacks.items()}}
    files["graph.json"] = json.dumps(doc).encode()
    return files


def _steps(files, cg):
    """compiled steps from an entry's files, checked against cg's graph; None
    when they are unreadable or do not fit it (then it is compiled again)"""
    try:
        doc = json.loads(files["graph.json"])
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
            seg.program = torch.frombuffer(bytearray(files[f"seg{int(s['segment'])}.nsp"]), dtype=torch.uint8)
            steps.append(("segment", seg))
        cg.fallbacks = {int(i): why for i, why in doc.get("fallbacks", {}).items()}
        return steps
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def _read_dir(path):
    try:
        files = {}
        for name in os.listdir(path):
            if _FILE.match(name):
                with open(os.path.join(path, name), "rb") as f:
                    files[name] = f.read()
        return files
    except OSError:
        return None


def _write_dir(path, files):
    """the entry's files into directory `path`, atomically (a rename)"""
    if os.path.isdir(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = tempfile.mkdtemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        for name, data in files.items():
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(data)
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# --------------------------------------------------------------- artifacts
def _bundle(files):
    """one entry's files as bytes: a JSON index line, then the contents"""
    index = [[name, len(data)] for name, data in sorted(files.items())]
    return json.dumps(index).encode() + b"\n" + b"".join(data for _, data in sorted(files.items()))


def _unbundle(blob):
    """{name: bytes} of a bundle; ValueError naming what is wrong"""
    if len(blob) > _MAX_BUNDLE:
        raise ValueError(f"{ARTIFACT_TYPE} artifact of {len(blob)} bytes is over the {_MAX_BUNDLE}-byte limit")
    head, sep, body = blob.partition(b"\n")
    if not sep:
        raise ValueError(f"{ARTIFACT_TYPE} artifact has no index line")
    files, at = {}, 0
    for entry in json.loads(head):
        name, size = entry
        if not isinstance(name, str) or not _FILE.match(name) or not isinstance(size, int) or size < 0 \
                or at + size > len(body):
            raise ValueError(f"{ARTIFACT_TYPE} artifact: bad file entry {entry!r}")
        files[name] = body[at:at + size]
        at += size
    if at != len(body) or "graph.json" not in files:
        raise ValueError(f"{ARTIFACT_TYPE} artifact: index and contents disagree")
    return files


_PRELOADED = {}   # key -> files, from load_cache_artifacts while the disk cache is off


def _populate(key, blob):
    """an artifact's entry where the cache finds it: the disk cache, or
    this process's preloaded entries when the disk cache is off"""
    if not _KEY.match(key):
        raise ValueError(f"{ARTIFACT_TYPE} artifact: key {key!r} is not a compile-cache key")
    files = _unbundle(blob)
    d = _cache_dir()
    if d is None:
        _PRELOADED[key] = files
        return
    _write_dir(os.path.join(d, key), files)


def _record(key, files):
    try:
        from torch.compiler._cache import CacheArtifactManager
    except ImportError:
        return
    CacheArtifactManager.record_artifact(ARTIFACT_TYPE, key, _bundle(files))


def _register_artifact_type():
    try:
        from torch.compiler._cache import CacheArtifact, CacheArtifactFactory
    except ImportError:
        return False

    class NeuronGraphArtifact(CacheArtifact):
        def populate_cache(self):
            _populate(self.key, self.content)

        @staticmethod
        def type():
            return ARTIFACT_TYPE

    try:
        CacheArtifactFactory.register(NeuronGraphArtifact)
    except AssertionError:   # registered already (the module was reloaded)
        pass
    return True


ARTIFACTS = _register_artifact_type()


# ------------------------------------------------------------------- cache
class GraphCache:
    """compiled steps by key: in memory, and on disk as graph.json plus one
    .nsp per linked segment"""

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
        files = _PRELOADED.get(key) if d is None else _read_dir(os.path.join(d, key))
        steps = _steps(files, cg) if files else None
        if steps is None:
            return None
        _graph.COUNTERS["disk_cache_hits"] += 1
        self.memory[key] = (steps, dict(cg.fallbacks))
        _record(key, files)
        return steps

    def store(self, cg, args, steps):
        key = cg.cache_key
        self.memory[key] = (steps, dict(cg.fallbacks))
        try:
            files = _files(cg, steps)
        except (TypeError, ValueError):
            return   # steps that cannot be written (a foreign spec): kept in memory only
        _record(key, files)
        d = _cache_dir()
        if d:
            try:
                _write_dir(os.path.join(d, key), files)
                _graph.COUNTERS["disk_cache_writes"] += 1
            except OSError:
                pass   # a cache that cannot be written is only slower


CACHE = GraphCache()


def clear_memory_cache():
    """forget compiled graphs kept in this process (the disk cache stays)"""
    CACHE.memory.clear()
    _PRELOADED.clear()
