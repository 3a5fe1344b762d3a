"""`neuronsim trace merge`: per-rank traces of a distributed run (each rank
profiles its own simulated device) joined into one Chrome trace-event JSON
file, which Perfetto's UI opens: one process per rank, named "rank R" (or
the given labels), a thread per track of that rank's trace (engines, DMA
queues, programs, ranges -- collectives among them -- and counters) named
"<process> / <track>", every slice and counter sample at its simulated
time.  Ranks' clocks are comparable: the c10d backend reconciles them at
each collective, so a collective lines up across ranks."""
from __future__ import annotations

import json

from . import TraceError, load


def merge(paths, output, labels=None):
    """Reads every trace in `paths` (Perfetto or Chrome JSON) and writes the
    joined trace to `output`; returns (ranks, slices, counter samples)."""
    if not paths:
        raise TraceError("merge: no traces given")
    if labels is not None and len(labels) != len(paths):
        raise TraceError(f"merge: {len(labels)} labels for {len(paths)} traces")
    events, nslices, nsamples = [], 0, 0
    for r, path in enumerate(paths):
        prof = load(path)
        if prof.kind == "summary":
            raise TraceError(f"merge: {path} is a summary, not a trace")
        pid = r + 1
        label = labels[r] if labels else f"rank {r}"
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": label}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": r}})
        tids = {}
        for tid, (uuid, t) in enumerate(sorted(prof.tracks.items()), start=1):
            if t.kind == "counter":
                continue
            tids[uuid] = tid
            name = f"{t.process} / {t.name}" if t.process and t.process != t.name else t.name
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
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
    return len(paths), nslices, nsamples
