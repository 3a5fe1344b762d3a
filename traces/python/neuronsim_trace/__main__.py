"""neuronsim trace summary|diff|report -- also `python3 -m neuronsim_trace`.

  summary FILE                 metrics, engines, top opcodes and programs as tables
  diff A B [--fail-above PCT]  per-metric, per-opcode and per-program deltas
                               (e.g. simulator vs a real-hardware export of the same
                               metric names); exit 1 if a metric moved more than PCT%
  report FILE -o OUT.html      a self-contained HTML page: timeline overview,
                               utilization bars, roofline of programs, top ops

FILE is a .pftrace, a Chrome trace JSON or a summary JSON.
"""
from __future__ import annotations

import argparse
import sys

from . import ENGINES, TraceError, load

HEADLINE = ["target", "total_time", "neuroncore_cycle_count", "program_count", "model_flops",
            "mfu_estimated_percent", "mbu_estimated_percent", "hbm_read_bytes", "hbm_write_bytes",
            "sbuf_read_bytes", "sbuf_write_bytes", "psum_read_bytes", "psum_write_bytes",
            "dma_transfer_count", "dma_transfer_total_bytes", "dma_active_time_percent",
            "matmul_instruction_count", "instruction_count"]


def fmt(v):
    if isinstance(v, str):
        return v
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) < 1e-3 or abs(v) >= 1e9:
            return f"{v:.4g}"
        return f"{v:.4f}".rstrip("0").rstrip(".")
    return f"{v:,}"


def table(rows, header, out):
    cols = [header] + [[fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(header))]
    for n, r in enumerate(cols):
        out.write("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                            for i, c in enumerate(r)).rstrip() + "\n")
        if n == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")


def cmd_summary(args, out=sys.stdout):
    p = load(args.file)
    m = p.metrics
    out.write(f"{p.source} ({p.kind})\n\n")
    table([[k, m[k]] for k in HEADLINE if k in m], ["metric", "value"], out)
    out.write("\n")
    timed = p.kind != "summary"
    key = "timed_instruction_count" if timed else "instruction_count"
    rows = [[e, m.get(f"{e}_engine_active_time_percent", 0.0), m.get(f"{e}_engine_{key}", 0)]
            for e in ENGINES]
    table(rows, ["engine", "active %", "timed instructions" if timed else "instructions"], out)
    if p.opcodes:
        out.write("\n")
        ops = sorted(p.opcodes.items(), key=lambda kv: (-kv[1][1], kv[0]))[:args.top]
        table([[f"{e}:{o}", c, t / 1000] for (e, o), (c, t) in ops],
              ["opcode", "count", "time (us)"], out)
    if p.programs:
        out.write("\n")
        total = sum(v[1] for v in p.programs.values()) or 1
        progs = sorted(p.programs.items(), key=lambda kv: (-kv[1][1], kv[0]))[:args.top]
        table([[k, v[0], v[1] / 1000, 100 * v[1] / total] for k, v in progs],
              ["program / op", "count", "time (us)", "% time"], out)
    if p.notes:
        out.write("\n" + "\n".join(f"note at {t / 1000:.3f} us: {n}" for t, n in p.notes) + "\n")
    return 0


def delta_row(name, a, b):
    if a is None or b is None:
        return [name, "-" if a is None else a, "-" if b is None else b, "",
                "only in B" if a is None else "only in A"], 0.0
    if isinstance(a, str) or isinstance(b, str):
        return [name, a, b, "", "" if a == b else "differs"], 0.0
    a0, b0 = a, b
    d = b0 - a0
    pct = (100.0 * d / abs(a0)) if a0 else (0.0 if not d else float("inf"))
    return [name, a0, b0, d, f"{pct:+.2f}%" if pct != float("inf") else "new"], abs(pct)


def cmd_diff(args, out=sys.stdout):
    a, b = load(args.a), load(args.b)
    out.write(f"A: {a.source} ({a.kind})\nB: {b.source} ({b.kind})\n\n")
    keys = [k for k in a.metrics if k in b.metrics] + \
           [k for k in b.metrics if k not in a.metrics] + [k for k in a.metrics if k not in b.metrics]
    rows, worst, worst_key = [], 0.0, None
    for k in dict.fromkeys(keys):
        row, pct = delta_row(k, a.metrics.get(k), b.metrics.get(k))
        rows.append(row)
        if k in a.metrics and k in b.metrics and pct > worst:
            worst, worst_key = pct, k
    table(rows, ["metric", "A", "B", "B-A", "change"], out)
    for title, ta, tb, idx, label in (("opcode", a.opcodes, b.opcodes, 1, "time (ns)"),
                                      ("program / op", a.programs, b.programs, 1, "time (ns)")):
        names = sorted(set(ta) | set(tb), key=lambda k: -max(ta.get(k, [0, 0])[idx], tb.get(k, [0, 0])[idx]))
        if not names:
            continue
        out.write("\n")
        rows = []
        names = [k for k in names if ta.get(k, [0, 0])[idx] or tb.get(k, [0, 0])[idx]]
        for k in names[:args.top]:
            row, _ = delta_row(":".join(k) if isinstance(k, tuple) else k,
                               ta.get(k, [0, 0])[idx] if k in ta else None,
                               tb.get(k, [0, 0])[idx] if k in tb else None)
            rows.append(row)
        table(rows, [title + " " + label, "A", "B", "B-A", "change"], out)
    if args.fail_above is not None and worst > args.fail_above:
        out.write(f"\n{worst_key} changed by {worst:.2f}% (> {args.fail_above}%)\n")
        return 1
    return 0


def cmd_report(args, out=sys.stdout):
    from .report import write_report
    p = load(args.file)
    write_report(p, args.output)
    out.write(f"wrote {args.output}\n")
    return 0


def cmd_merge(args, out=sys.stdout):
    from .merge import merge
    labels = args.labels.split(",") if args.labels else None
    ranks, slices, samples = merge(args.files, args.output, labels)
    out.write(f"wrote {args.output}: {ranks} ranks, {slices} slices, {samples} counter samples\n")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="neuronsim trace", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary", help="tables of a trace's or summary's metrics")
    s.add_argument("file")
    s.add_argument("--top", type=int, default=15, help="rows of the opcode and program tables")
    d = sub.add_parser("diff", help="per-metric and per-op deltas of two traces / summaries")
    d.add_argument("a")
    d.add_argument("b")
    d.add_argument("--top", type=int, default=20)
    d.add_argument("--fail-above", type=float, default=None, metavar="PCT",
                   help="exit 1 when a metric in both files differs by more than PCT percent")
    r = sub.add_parser("report", help="a self-contained HTML report")
    r.add_argument("file")
    r.add_argument("-o", "--output", required=True)
    m = sub.add_parser("merge", help="per-rank traces into one trace, one process per rank")
    m.add_argument("files", nargs="+", help="rank 0's trace, rank 1's, ...")
    m.add_argument("-o", "--output", required=True, help="the joined trace: .pftrace (Perfetto), else Chrome trace-event JSON")
    m.add_argument("--labels", help="comma-separated process names (default: rank 0, rank 1, ...)")
    args = ap.parse_args(argv)
    try:
        return {"summary": cmd_summary, "diff": cmd_diff, "report": cmd_report,
                "merge": cmd_merge}[args.cmd](args)
    except TraceError as e:
        sys.stderr.write(f"neuronsim trace: {e}\n")
        return 1
    except BrokenPipeError:
        return 0
    except OSError as e:
        sys.stderr.write(f"neuronsim trace: {e}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
