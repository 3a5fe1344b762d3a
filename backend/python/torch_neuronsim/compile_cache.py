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
import stat
import tempfile

import torch

from . import graph as _graph

_FORMAT = 5      # bump when the disk layout or the linker's output changes
ARTIFACT_TYPE = "neuronsim_graph"
_KEY = re.compile(r"[0-9a-f]{64}\Z")
_FILE = re.compile(r"(graph\.json|seg[0-9]{1,6}\.nsp|sha256)\Z")
_MAX_BUNDLE = 1 << 30      # one entry's files together, on disk or as an artifact
_DIGEST = "sha256"         # the entry's file holding the hash of its other files


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
                    "out_dtypes": [str(t) for t in x.out_dtypes], "out_meta": x.out_meta,
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
            dtypes = {str(t): t for t in _graph._RETURNED_DTYPES}
            if not all(isinstance(d, str) and d in dtypes for d in s["out_dtypes"]):
                return None
            seg.out_dtypes = [dtypes[d] for d in s["out_dtypes"]]
            seg.out_meta = [int(v) for v in s["out_meta"]]
            seg.out_specs = [(torch.utils._pytree.treespec_loads(spec), [tuple(k) for k in kinds])
                             for spec, kinds in s["out_specs"]]
            seg.plan = [int(v) for v in s["plan"]]
            seg.device = int(s["device"])
            seg.program = torch.frombuffer(bytearray(files[f"seg{int(s['segment'])}.nsp"]), dtype=torch.uint8)
            steps.append(("segment", seg))
        cg.fallbacks = {int(i): why for i, why in doc.get("fallbacks", {}).items()}
        return steps
    except Exception:   # noqa: BLE001 -- untrusted data: any failure to read it is a miss
        return None


def _digest(files):
    """the hash of an entry's files (all but the digest itself), names and sizes included"""
    h = hashlib.sha256()
    for name, data in sorted(files.items()):
        if name != _DIGEST:
            h.update(f"{name}\0{len(data)}\0".encode())
            h.update(data)
    return h.hexdigest().encode()


def _sealed(files):
    """the files with their digest added"""
    return dict(files, **{_DIGEST: _digest(files)})


def _intact(files):
    """the files (less the digest) when their digest matches, else None"""
    if files is None or files.get(_DIGEST) != _digest(files) or "graph.json" not in files:
        return None
    return {n: d for n, d in files.items() if n != _DIGEST}


def _read_regular(path, limit):
    """the bytes of `path` when it is a regular file of at most `limit` bytes
    (not a link, FIFO, socket or device: opened without following links and
    without blocking, checked on the open descriptor), else None"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        chunks, left = [], limit + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
        return data if len(data) <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_dir(path):
    """an entry's files when `path` is a real directory whose files are all
    regular, within the size limit and match their digest; else None (a
    miss: the entry is compiled again and rewritten)"""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return None
        names = [n for n in os.listdir(path) if _FILE.match(n)]
    except OSError:
        return None
    files, left = {}, _MAX_BUNDLE
    for name in names:
        data = _read_regular(os.path.join(path, name), left)
        if data is None:
            return None
        files[name] = data
        left -= len(data)
    return _intact(files)


def _write_dir(path, files):
    """the entry's files (sealed with their digest) into directory `path`,
    atomically (a rename); an entry already there is kept when intact and
    replaced when damaged (or not a directory)"""
    if _read_dir(path) is not None:
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = tempfile.mkdtemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        for name, data in _sealed(files).items():
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(data)
        if os.path.lexists(path):   # damaged: moved aside, then removed
            old = tempfile.mkdtemp(dir=os.path.dirname(path), prefix=".old-")
            os.rename(path, os.path.join(old, "entry"))
            shutil.rmtree(old, ignore_errors=True)
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# --------------------------------------------------------------- artifacts
def _bundle(files):
    """one entry's files (sealed with their digest) as bytes: a JSON index
    line, then the contents"""
    files = sorted(_sealed(files).items())
    index = [[name, len(data)] for name, data in files]
    return json.dumps(index).encode() + b"\n" + b"".join(data for _, data in files)


def _unbundle(blob):
    """{name: bytes} of a bundle, its digest checked; ValueError naming what
    is wrong, for any bytes"""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise ValueError(f"{ARTIFACT_TYPE} artifact is {type(blob).__name__}, not bytes")
    blob = bytes(blob)
    if len(blob) > _MAX_BUNDLE:
        raise ValueError(f"{ARTIFACT_TYPE} artifact of {len(blob)} bytes is over the {_MAX_BUNDLE}-byte limit")
    head, sep, body = blob.partition(b"\n")
    if not sep:
        raise ValueError(f"{ARTIFACT_TYPE} artifact has no index line")
    try:
        index = json.loads(head)
    except (ValueError, RecursionError) as e:   # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ValueError(f"{ARTIFACT_TYPE} artifact: unreadable index line ({e.__class__.__name__})") from None
    if not isinstance(index, list):
        raise ValueError(f"{ARTIFACT_TYPE} artifact: the index is not a list")
    files, at = {}, 0
    for entry in index:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and
                _FILE.match(entry[0]) and type(entry[1]) is int and 0 <= entry[1] <= len(body) - at and
                entry[0] not in files):
            raise ValueError(f"{ARTIFACT_TYPE} artifact: bad file entry {str(entry)[:80]}")
        files[entry[0]] = body[at:at + entry[1]]
        at += entry[1]
    if at != len(body):
        raise ValueError(f"{ARTIFACT_TYPE} artifact: index and contents disagree")
    intact = _intact(files)
    if intact is None:
        raise ValueError(f"{ARTIFACT_TYPE} artifact: contents do not match their sha256 (damaged)")
    return intact


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
