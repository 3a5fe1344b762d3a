"""Reading neuronsim traces and summaries (no torch needed).

`load(path)` reads a Perfetto trace (.pftrace, decoded with the protobuf
library against traces/perfetto_trace.proto), a Chrome trace-event JSON, or a
summary JSON (ours, or any export using the Neuron profiler's metric names),
and returns a `Profile`: profiler metrics, a per-opcode table, a per-program
(PyTorch op) table and, for traces, the slices and counters themselves.
`neuronsim trace summary|diff|report` (python -m neuronsim_trace) is built on it.
"""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

# the engines and their trace track names ("TensorE" -> "tensor") are the
# library's (include/neuronsim/isa.h, nsim_trace_track_name)
from neuronsim import ENGINE_TRACKS, ENGINES

_HERE = pathlib.Path(__file__).resolve().parent
_PROTO = _HERE.parents[1] / "perfetto_trace.proto"     # traces/perfetto_trace.proto


class TraceError(Exception):
    """A file that is not a trace or summary this module can read."""


@dataclass
class Track:
    uuid: int
    name: str
    process: str = ""
    kind: str = "other"          # engine | dma | programs | counter | notes | collectives | other


@dataclass
class Slice:
    track: int
    name: str
    cat: str
    start_ns: float
    end_ns: float
    args: dict

    @property
    def duration_ps(self):
        """Exact duration: the writer's picoseconds when recorded."""
        if "duration_ps" in self.args:
            return int(self.args["duration_ps"])
        return round((self.end_ns - self.start_ns) * 1000)


@dataclass
class Profile:
    source: str
    kind: str                                   # perfetto | chrome | summary
    metrics: dict = field(default_factory=dict)
    opcodes: dict = field(default_factory=dict)     # (engine, opcode) -> [count, time_ns]
    programs: dict = field(default_factory=dict)    # label -> [count, time_ns, flops, hbm_bytes]
    tracks: dict = field(default_factory=dict)      # uuid -> Track
    slices: list = field(default_factory=list)
    counters: dict = field(default_factory=dict)    # uuid -> [(ts_ns, value)]
    device: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


# ----------------------------------------------------------------- schema

_classes = None


def _descriptor_set() -> bytes:
    """The compiled schema: the build's copy, else protoc on the .proto."""
    built = _HERE / "perfetto_trace.desc"
    if built.exists() and (not _PROTO.exists() or built.stat().st_mtime >= _PROTO.stat().st_mtime):
        return built.read_bytes()
    protoc = shutil.which("protoc")
    if not protoc or not _PROTO.exists():
        raise TraceError("the Perfetto schema is not built (run the CMake build) and protoc "
                         "is not available to compile traces/perfetto_trace.proto")
    with tempfile.TemporaryDirectory() as d:
        out = pathlib.Path(d) / "schema.desc"
        subprocess.run([protoc, f"-I{_PROTO.parent}", f"--descriptor_set_out={out}", _PROTO.name],
                       check=True, capture_output=True)
        return out.read_bytes()


def schema():
    """{message name: class} for perfetto.protos.* of the checked-in schema."""
    global _classes
    if _classes is None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        fds = descriptor_pb2.FileDescriptorSet.FromString(_descriptor_set())
        pool = descriptor_pool.DescriptorPool()
        for f in fds.file:
            pool.Add(f)
        _classes = {}
        for f in fds.file:
            for m in f.message_type:
                full = f"{f.package}.{m.name}"
                _classes[m.name] = message_factory.GetMessageClass(pool.FindMessageTypeByName(full))
    return _classes


def _packets(data: bytes):
    """Yields each TracePacket's bytes: the file is a Trace, field 1 repeated
    (tag 0x0a, varint length, bytes), read one packet at a time."""
    from google.protobuf.internal.decoder import _DecodeVarint
    pos, n = 0, len(data)
    while pos < n:
        if data[pos] != 0x0A:
            raise TraceError(f"not a Perfetto trace: byte {pos} is 0x{data[pos]:02x}, not a packet tag")
        try:
            size, pos = _DecodeVarint(data, pos + 1)
        except Exception as e:
            raise TraceError(f"truncated packet length at byte {pos}") from e
        if pos + size > n:
            raise TraceError(f"truncated packet at byte {pos}: {size} bytes announced, {n - pos} left")
        yield data[pos:pos + size]
        pos += size


def _kind_of(name: str) -> str:
    if name in ENGINE_TRACKS:
        return "engine"
    if name.startswith("DMA queue"):
        return "dma"
    if name.startswith("Programs"):
        return "programs"
    if name == "Trace notes":
        return "notes"
    if name == "Collectives":
        return "collectives"
    return "other"


# ----------------------------------------------------------------- readers

def _read_perfetto(path, data, prof):
    TracePacket = schema()["TracePacket"]
    names, cats, argnames = {}, {}, {}
    processes, pids, open_slices = {}, {}, {}
    for raw in _packets(data):
        p = TracePacket.FromString(raw)
        if p.HasField("interned_data"):
            i = p.interned_data
            names.update({e.iid: e.name for e in i.event_names})
            cats.update({e.iid: e.name for e in i.event_categories})
            argnames.update({e.iid: e.name for e in i.debug_annotation_names})
        if p.HasField("track_descriptor"):
            td = p.track_descriptor
            if td.HasField("process"):
                processes[td.uuid] = td.process.process_name
                pids[td.process.pid] = td.process.process_name
                continue
            proc = ""
            if td.HasField("thread"):
                proc = pids.get(td.thread.pid, "")
            elif td.HasField("parent_uuid"):
                proc = processes.get(td.parent_uuid, "")
            kind = "counter" if td.HasField("counter") else _kind_of(td.name)
            prof.tracks[td.uuid] = Track(td.uuid, td.name, proc, kind)
        if p.HasField("track_event"):
            te, ts = p.track_event, p.timestamp
            if te.type == te.TYPE_COUNTER:
                prof.counters.setdefault(te.track_uuid, []).append((ts, te.double_counter_value))
                continue
            args = {}
            for a in te.debug_annotations:
                key = argnames.get(a.name_iid, a.name) if a.HasField("name_iid") else a.name
                args[key] = a.string_value if a.HasField("string_value") else (
                    a.uint_value if a.HasField("uint_value") else
                    a.int_value if a.HasField("int_value") else a.double_value)
            name = names.get(te.name_iid, "?") if te.HasField("name_iid") else te.name
            cat = cats.get(te.category_iids[0], "") if te.category_iids else ""
            if te.type == te.TYPE_SLICE_BEGIN:
                open_slices.setdefault(te.track_uuid, []).append((name, cat, ts, args))
            elif te.type == te.TYPE_SLICE_END:
                stack = open_slices.get(te.track_uuid)
                if not stack:
                    raise TraceError(f"slice end without a begin on track {te.track_uuid} at {ts} ns")
                n, c, t0, a = stack.pop()
                prof.slices.append(Slice(te.track_uuid, n, c, t0, ts, a))
            elif te.type == te.TYPE_INSTANT:
                if name == "device":
                    prof.device = dict(args)
                else:
                    prof.notes.append((ts, name))
    left = sum(len(v) for v in open_slices.values())
    if left:
        raise TraceError(f"{left} slices begin but never end")


def _read_chrome(path, doc, prof):
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    procs, threads, counter_ids = {}, {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e["pid"]] = e["args"]["name"]
    for e in events:
        ph = e.get("ph")
        if ph == "M" and e.get("name") == "thread_name":
            key = (e["pid"], e["tid"])
            threads[key] = len(threads) + 1
            name = e["args"]["name"]
            prof.tracks[threads[key]] = Track(threads[key], name, procs.get(e["pid"], ""), _kind_of(name))
        elif ph == "X":
            key = (e["pid"], e.get("tid", 0))
            if key not in threads:
                threads[key] = len(threads) + 1
                prof.tracks[threads[key]] = Track(threads[key], f"tid {key[1]}", procs.get(key[0], ""))
            t0 = float(e["ts"]) * 1000
            prof.slices.append(Slice(threads[key], e["name"], e.get("cat", ""), t0,
                                     t0 + float(e.get("dur", 0)) * 1000, dict(e.get("args", {}))))
        elif ph == "C":
            key = (e["pid"], e["name"])
            if key not in counter_ids:
                counter_ids[key] = 100000 + len(counter_ids)
                prof.tracks[counter_ids[key]] = Track(counter_ids[key], e["name"], procs.get(e["pid"], ""),
                                                      "counter")
            prof.counters.setdefault(counter_ids[key], []).append(
                (float(e["ts"]) * 1000, float(e["args"].get("value", 0))))
        elif ph == "i":
            if e.get("name") == "device":
                prof.device = dict(e.get("args", {}))
            else:
                prof.notes.append((float(e["ts"]) * 1000, e["name"]))


def _trace_metrics(prof):
    """Profiler metrics computed from a trace's slices (see README: a trace
    carries instructions that take time; control instructions are not drawn)."""
    m = {}
    busy = dict.fromkeys(ENGINES, 0)
    count = dict.fromkeys(ENGINES, 0)
    flops = mm = 0
    dma_n = dma_bytes = hbm_r = hbm_w = 0
    t_lo, t_hi = None, None
    for s in prof.slices:
        tr = prof.tracks.get(s.track)
        kind = tr.kind if tr else "other"
        if kind in ("engine", "dma", "programs"):
            # programs carry exact picoseconds; other slices' ns bound them
            lo = int(s.args["start_ps"]) if "start_ps" in s.args else round(s.start_ns * 1000)
            hi = lo + s.duration_ps if "start_ps" in s.args else round(s.end_ns * 1000)
            t_lo = lo if t_lo is None else min(t_lo, lo)
            t_hi = hi if t_hi is None else max(t_hi, hi)
        if kind == "engine":
            eng = ENGINE_TRACKS[tr.name]
            if s.cat == "aggregate":
                busy[eng] += int(s.args.get("busy_ps", 0))
                count[eng] += int(s.args.get("instructions", 0))
            else:
                busy[eng] += s.duration_ps
                count[eng] += 1
                row = prof.opcodes.setdefault((eng, s.name), [0, 0.0])
                row[0] += 1
                row[1] += s.duration_ps / 1000
                mm += s.name == "multiply_moving"
            flops += int(s.args.get("flops", 0))
        elif kind == "dma":
            if s.cat == "aggregate":
                dma_n += int(s.args.get("transfers", 0))
            else:
                dma_n += 1
                hbm_r += int(s.args.get("hbm_read_bytes", 0))
                hbm_w += int(s.args.get("hbm_write_bytes", 0))
            dma_bytes += int(s.args.get("bytes", 0))
        elif kind == "programs":
            row = prof.programs.setdefault(s.name, [0, 0.0, 0, 0])
            row[0] += 1
            row[1] += s.duration_ps / 1000
    # utilization windows (a trace past its budget's 3/4, or detail
    # "utilization"): busy % as a step function, integrated
    for uuid, samples in prof.counters.items():
        tr = prof.tracks.get(uuid)
        name = tr.name[:-len(" busy %")] if tr and tr.name.endswith(" busy %") else None
        if name not in ENGINE_TRACKS or len(samples) < 2:
            continue
        for (t0, v), (t1, _) in zip(samples, samples[1:]):
            busy[ENGINE_TRACKS[name]] += round(v / 100 * (t1 - t0) * 1000)
        lo, hi = round(samples[0][0] * 1000), round(samples[-1][0] * 1000)
        t_lo = lo if t_lo is None else min(t_lo, lo)
        t_hi = hi if t_hi is None else max(t_hi, hi)
    _attribute(prof)
    span_ps = (t_hi or 0) - (t_lo or 0)
    m["total_time"] = span_ps * 1e-12
    m["total_time_ps"] = span_ps
    # what a trace with only per-program slices or utilization windows
    # cannot say exactly is left out rather than reported as 0
    complete = not any(s.cat == "aggregate" for s in prof.slices) and \
        not any(t.name.endswith(" busy %") for t in prof.tracks.values())
    peak = float(prof.device.get("peak_flops_per_second", 0))
    hbm_peak = float(prof.device.get("hbm_bytes_per_second", 0))
    secs = m["total_time"]
    if complete:
        m["model_flops"] = m["hardware_flops"] = flops
        if peak and secs:
            m["mfu_estimated_percent"] = 100.0 * flops / secs / peak
        m["dma_transfer_count"], m["dma_transfer_total_bytes"] = dma_n, dma_bytes
        m["matmul_instruction_count"] = mm
    else:
        # HBM traffic from the bandwidth counters (GB/s x ns = bytes)
        hbm_r, hbm_w = (round(sum(v * (t1 - t0) for (t0, v), (t1, _) in zip(c, c[1:])))
                        for c in (_counter(prof, "HBM read GB/s"), _counter(prof, "HBM write GB/s")))
    m["hbm_read_bytes"], m["hbm_write_bytes"] = hbm_r, hbm_w
    if hbm_peak and secs:
        m["mbu_estimated_percent"] = 100.0 * (hbm_r + hbm_w) / secs / hbm_peak
    for e in ENGINES:
        m[f"{e}_engine_active_time_ps"] = busy[e]
        m[f"{e}_engine_active_time_percent"] = 100.0 * busy[e] / span_ps if span_ps else 0.0
        # control instructions (semaphores, barriers, end) take no time and
        # are not drawn: a trace counts the timed ones only
        if complete:
            m[f"{e}_engine_timed_instruction_count"] = count[e]
    if prof.device.get("target"):
        m["target"] = prof.device["target"]
    return m


def _counter(prof, name):
    """Samples of the counter track called `name` (all processes), in time order."""
    out = []
    for uuid, samples in prof.counters.items():
        tr = prof.tracks.get(uuid)
        if tr and tr.name == name:
            out += samples
    return sorted(out)


def _attribute(prof):
    """Per program: the FLOPs of the instructions and the HBM bytes of the
    transfers that start inside its slice on the same core."""
    import bisect
    progs = {}
    for s in prof.slices:
        tr = prof.tracks.get(s.track)
        if tr and tr.kind == "programs":
            progs.setdefault(tr.process, []).append(s)
    for v in progs.values():
        v.sort(key=lambda s: s.start_ns)
    starts = {k: [s.start_ns for s in v] for k, v in progs.items()}
    for s in prof.slices:
        tr = prof.tracks.get(s.track)
        if not tr or tr.kind not in ("engine", "dma") or tr.process not in progs:
            continue
        i = bisect.bisect_right(starts[tr.process], s.start_ns) - 1
        if i < 0 or s.start_ns > progs[tr.process][i].end_ns:
            continue
        row = prof.programs[progs[tr.process][i].name]
        row[2] += int(s.args.get("flops", 0))
        row[3] += int(s.args.get("hbm_read_bytes", 0)) + int(s.args.get("hbm_write_bytes", 0))


def _read_summary(doc, prof):
    for k, v in doc.items():
        if isinstance(v, (int, float, str)) and not isinstance(v, bool):
            prof.metrics[k] = v
    for o in doc.get("opcodes", []):
        prof.opcodes[(o["engine"], o["opcode"])] = [o["instruction_count"], o["instruction_time_ns"]]
    for p in doc.get("programs", []):
        prof.programs[p["label"]] = [p["count"], p["time_ns"], p.get("flops", 0), p.get("hbm_bytes", 0)]


def load(path) -> Profile:
    """Reads a .pftrace, a Chrome JSON trace or a summary JSON."""
    path = pathlib.Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TraceError(f"{path}: {e.strerror}") from e
    if data[:1] in (b"{", b"[") or data[:3] == b"\xef\xbb\xbf":
        try:
            doc = json.loads(data)
        except ValueError as e:
            raise TraceError(f"{path}: not valid JSON: {e}") from e
        if isinstance(doc, list) or "traceEvents" in doc:
            prof = Profile(str(path), "chrome")
            _read_chrome(path, doc, prof)
            prof.metrics = _trace_metrics(prof)
        else:
            prof = Profile(str(path), "summary")
            _read_summary(doc, prof)
        return prof
    prof = Profile(str(path), "perfetto")
    try:
        _read_perfetto(path, data, prof)
    except TraceError as e:
        raise TraceError(f"{path}: {e}") from None
    except Exception as e:   # protobuf's DecodeError and friends
        raise TraceError(f"{path}: not a Perfetto trace ({type(e).__name__}: {e})") from None
    prof.metrics = _trace_metrics(prof)
    return prof


def engine_busy_ps(prof: Profile) -> dict:
    """{engine: busy picoseconds} from the engine tracks' slices."""
    return {e: prof.metrics.get(f"{e}_engine_active_time_ps", 0) for e in ENGINES}


__all__ = ["load", "Profile", "Slice", "Track", "TraceError", "schema", "engine_busy_ps", "ENGINES"]
