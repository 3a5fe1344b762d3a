"""An independent reader of .pftrace files for the tests: the protobuf library
with message classes built from the checked-in schema by `protoc`, not the
project's own neuronsim_trace package, plus small helpers over the result."""
import pathlib
import shutil
import subprocess

import pytest
from neuronsim import ENGINE_TRACKS as _TRACK_ENGINES

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTO = ROOT / "traces" / "perfetto_trace.proto"
_classes = {}


def trace_class(tmp_path_factory):
    if "Trace" not in _classes:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        protoc = shutil.which("protoc")
        if not protoc:
            pytest.fail("protoc is not installed (scripts/setup.sh installs protobuf-compiler)")
        out = tmp_path_factory.mktemp("schema") / "schema.desc"
        subprocess.run([protoc, f"-I{PROTO.parent}", f"--descriptor_set_out={out}", PROTO.name],
                       check=True, capture_output=True)
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
        pool = descriptor_pool.DescriptorPool()
        for f in fds.file:
            pool.Add(f)
        _classes["Trace"] = message_factory.GetMessageClass(pool.FindMessageTypeByName("perfetto.protos.Trace"))
    return _classes["Trace"]


def decode_raw(path):
    """`protoc --decode_raw` over the file: a schema-free check of the wire format."""
    r = subprocess.run(["protoc", "--decode_raw"], stdin=open(path, "rb"), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


class Decoded:
    """Tracks and matched slices of a decoded Trace message."""

    def __init__(self, trace):
        self.tracks, self.process_of, self.slices, self.counters, self.instants = {}, {}, [], {}, []
        pnames, names, args, opened = {}, {}, {}, {}
        for p in trace.packet:
            assert p.trusted_packet_sequence_id == 1
            if p.HasField("interned_data"):
                names.update({e.iid: e.name for e in p.interned_data.event_names})
                args.update({e.iid: e.name for e in p.interned_data.debug_annotation_names})
            if p.HasField("track_descriptor"):
                td = p.track_descriptor
                if td.HasField("process"):
                    pnames[td.process.pid] = td.process.process_name
                    continue
                self.tracks[td.uuid] = td.name
                if td.HasField("thread"):
                    self.process_of[td.uuid] = pnames.get(td.thread.pid, "")
            if p.HasField("track_event"):
                te = p.track_event
                a = {args[d.name_iid]: (d.string_value if d.HasField("string_value") else d.uint_value)
                     for d in te.debug_annotations}
                name = names[te.name_iid] if te.HasField("name_iid") else te.name
                if te.type == te.TYPE_SLICE_BEGIN:
                    opened.setdefault(te.track_uuid, []).append((name, p.timestamp, a))
                elif te.type == te.TYPE_SLICE_END:
                    n, t0, a0 = opened[te.track_uuid].pop()
                    self.slices.append({"track": self.tracks[te.track_uuid], "uuid": te.track_uuid,
                                        "process": self.process_of.get(te.track_uuid, ""),
                                        "name": n, "start": t0, "end": p.timestamp, "args": a0})
                elif te.type == te.TYPE_COUNTER:
                    self.counters.setdefault(self.tracks[te.track_uuid], []).append(
                        (p.timestamp, te.double_counter_value))
                elif te.type == te.TYPE_INSTANT:
                    self.instants.append((name, a))
        assert not any(opened.values()), "unterminated slices"

    def on(self, track):
        return [s for s in self.slices if s["track"] == track]

    def busy_ps(self, track):
        return sum(s["args"]["duration_ps"] for s in self.on(track))


def read_pftrace(path, tmp_path_factory):
    return Decoded(trace_class(tmp_path_factory).FromString(pathlib.Path(path).read_bytes()))


ENGINE_TRACKS = {engine: track for track, engine in _TRACK_ENGINES.items()}   # "tensor" -> "TensorE"
