"""`neuronsim trace merge`: per-rank traces of a distributed run (each rank
profiles its own simulated device) joined into one trace -- a Perfetto
trace (.pftrace, the schema in traces/perfetto_trace.proto) or a Chrome
trace-event JSON (any other name), both of which Perfetto's UI opens: one
process per rank, named "rank R" (or the given labels), a track per track
of that rank's trace (engines, DMA queues, programs, ranges, collectives
and counters) named "<process> / <track>", every slice and counter sample
at its simulated time.  Ranks' clocks are comparable: the c10d backend
reconciles them at each collective, so a collective lines up across
ranks."""
from __future__ import annotations

import json

from . import TraceError, load, schema


def _ranks(paths, labels):
    """(label, Profile) per rank, every input checked before anything is written"""
    if not paths:
        raise TraceError("merge: no traces given")
    if labels is not None and len(labels) != len(paths):
        raise TraceError(f"merge: {len(labels)} labels for {len(paths)} traces")
    out = []
    for r, path in enumerate(paths):
        prof = load(path)
        if prof.kind == "summary":
            raise TraceError(f"merge: {path} is a summary, not a trace")
        out.append((labels[r] if labels else f"rank {r}", prof))
    return out


def _track_name(t):
    return f"{t.process} / {t.name}" if t.process and t.process != t.name else t.name


def _write_chrome(ranks, output):
    events, nslices, nsamples = [], 0, 0
    for r, (label, prof) in enumerate(ranks):
        pid = r + 1
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": label}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": r}})
        tids = {}
        for tid, (uuid, t) in enumerate(sorted(prof.tracks.items()), start=1):
            if t.kind == "counter":
                continue
            tids[uuid] = tid
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"name": _track_name(t)}})
            events.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"sort_index": tid}})
        for s in prof.slices:
            if s.track not in tids:
                continue
            events.append({"name": s.name, "cat": s.cat, "ph": "X", "pid": pid, "tid": tids[s.track],
                           "ts": s.start_ns / 1000, "dur": (s.end_ns - s.start_ns) / 1000, "args": s.args})
            nslices += 1
        for uuid, samples in prof.counters.items():
            t = prof.tracks.get(uuid)
            name = t.name if t else f"counter {uuid}"
            for ts, v in samples:
                events.append({"name": name, "ph": "C", "pid": pid, "ts": ts / 1000, "args": {"value": v}})
                nsamples += 1
        for ts, note in prof.notes:
            events.append({"name": note, "ph": "i", "s": "p", "pid": pid, "ts": ts / 1000})
    with open(output, "w") as f:
        json.dump({"displayTimeUnit": "ns", "traceEvents": events}, f)
    return nslices, nsamples


def _annotation(DebugAnnotation, key, value):
    a = DebugAnnotation(name=str(key))
    if isinstance(value, bool):
        a.bool_value = value
    elif isinstance(value, int) and 0 <= value < 1 << 64:
        a.uint_value = value
    elif isinstance(value, int) and -(1 << 63) <= value < 0:
        a.int_value = value
    elif isinstance(value, float):
        a.double_value = value
    else:
        a.string_value = str(value)
    return a


def _write_perfetto(ranks, output):
    """Track descriptors first (a process track per rank, its tracks below
    it), then every event in time order on one packet sequence: at equal
    times a slice that ends goes before one that begins, an enclosing slice
    begins before and ends after what it encloses."""
    from google.protobuf.internal.encoder import _VarintBytes
    m = schema()
    Packet, Track, Event, Ann = m["TracePacket"], m["TrackDescriptor"], m["TrackEvent"], m["DebugAnnotation"]
    head, timed, nslices, nsamples = [], [], 0, 0
    next_uuid = 1
    for r, (label, prof) in enumerate(ranks):
        proc_uuid, next_uuid = next_uuid, next_uuid + 1
        head.append(Packet(track_descriptor=Track(uuid=proc_uuid, name=label, process=m["ProcessDescriptor"](
            pid=r + 1, process_name=label))))
        uuids = {}
        for uuid, t in sorted(prof.tracks.items()):
            uuids[uuid], next_uuid = next_uuid, next_uuid + 1
            td = Track(uuid=uuids[uuid], name=_track_name(t), parent_uuid=proc_uuid)
            if t.kind == "counter":
                td.counter.SetInParent()
            head.append(Packet(track_descriptor=td))
        notes_uuid, next_uuid = next_uuid, next_uuid + 1
        if prof.notes:
            head.append(Packet(track_descriptor=Track(uuid=notes_uuid, name="Trace notes", parent_uuid=proc_uuid)))
        for s in prof.slices:
            if s.track not in uuids:
                continue
            t0, t1 = round(s.start_ns), round(s.end_ns)
            begin = Event(type=Event.TYPE_SLICE_BEGIN, track_uuid=uuids[s.track], name=s.name,
                          categories=[s.cat] if s.cat else [],
                          debug_annotations=[_annotation(Ann, k, v) for k, v in s.args.items()])
            end = Event(type=Event.TYPE_SLICE_END, track_uuid=uuids[s.track])
            timed.append(((t0, 1, -t1), begin))
            timed.append(((t1, 0 if t1 > t0 else 2, -t0), end))
            nslices += 1
        for uuid, samples in prof.counters.items():
            if uuid not in uuids:
                continue
            for ts, v in samples:
                timed.append(((round(ts), 1, 0), Event(type=Event.TYPE_COUNTER, track_uuid=uuids[uuid],
                                                       double_counter_value=float(v))))
                nsamples += 1
        for ts, note in prof.notes:
            timed.append(((round(ts), 1, 0), Event(type=Event.TYPE_INSTANT, track_uuid=notes_uuid, name=note)))
    timed.sort(key=lambda e: e[0])   # stable: a track's own order is kept at equal keys
    with open(output, "wb") as f:
        packets = head + [Packet(timestamp=key[0], track_event=ev) for key, ev in timed]
        for p in packets:
            p.trusted_packet_sequence_id = 1
            raw = p.SerializeToString()
            f.write(b"\x0a" + _VarintBytes(len(raw)) + raw)
    return nslices, nsamples


def merge(paths, output, labels=None):
    """Reads every trace in `paths` (Perfetto or Chrome JSON) and writes the
    joined trace to `output` (.pftrace: Perfetto, else Chrome JSON); returns
    (ranks, slices, counter samples)."""
    ranks = _ranks(paths, labels)
    write = _write_perfetto if str(output).endswith(".pftrace") else _write_chrome
    nslices, nsamples = write(ranks, output)
    return len(ranks), nslices, nsamples
