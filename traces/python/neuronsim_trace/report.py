"""A self-contained HTML report of a trace or summary: headline metrics, an
engine timeline overview (busy fraction of each track per time bin), engine
utilization bars, a roofline of programs (arithmetic intensity against
achieved FLOP/s under the device's compute and HBM ceilings) and the top
programs and opcodes by time.  Inline SVG and CSS only: no scripts, no
network, so it renders anywhere (CI artifacts, headless browsers)."""
from __future__ import annotations

import html
import math

from . import ENGINES, Track

COLORS = {"engine": "#2f6fb3", "dma": "#c9781c", "programs": "#3b8f4a"}
BINS = 400


def _esc(s):
    return html.escape(str(s), quote=True)


def _num(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    return f"{v:,}" if isinstance(v, int) else _esc(v)


def _spread(row, a, b, weight=1.0):
    """Adds [a, b) (in bins) to row, weighted."""
    i = int(a)
    while i < BINS and i <= b:
        lo, hi = max(a, i), min(b, i + 1)
        if hi > lo:
            row[i] += (hi - lo) * weight
        i += 1


def _timeline(p):
    """One row per track with slices or utilization windows; each bin shaded
    by its busy fraction."""
    tracks = [t for t in p.tracks.values() if t.kind in ("engine", "dma", "programs")]
    spans = [s for s in p.slices if s.track in {t.uuid for t in tracks}]
    # utilization counters ("TensorE busy %") draw on the engine's row
    util = {}
    for uuid, samples in p.counters.items():
        tr = p.tracks.get(uuid)
        if tr and tr.name.endswith(" busy %") and len(samples) > 1:
            util[(tr.process, tr.name[:-len(" busy %")])] = samples
    rows = {(t.process, t.name): t for t in tracks}
    for (proc, name) in util:
        if (proc, name) not in rows:
            t = Track(-len(rows) - 1, name, proc, "dma" if name.startswith("DMA") else "engine")
            rows[(proc, name)] = t
            tracks.append(t)
    times = [s.start_ns for s in spans] + [v[0][0] for v in util.values()]
    ends = [s.end_ns for s in spans] + [v[-1][0] for v in util.values()]
    if not times:
        return "<p>No slices in this file (a summary has no timeline).</p>"
    t0, t1 = min(times), max(ends)
    width = max(t1 - t0, 1e-9)
    busy = {t.uuid: [0.0] * BINS for t in tracks}
    for s in spans:
        _spread(busy[s.track], (s.start_ns - t0) / width * BINS, (s.end_ns - t0) / width * BINS)
    for key, samples in util.items():
        row = busy[rows[key].uuid]
        for (a, v), (b, _) in zip(samples, samples[1:]):
            _spread(row, (a - t0) / width * BINS, (b - t0) / width * BINS, v / 100)
    order = {"programs": 0, "engine": 1, "dma": 2}
    tracks.sort(key=lambda t: (t.process, order[t.kind], t.uuid))
    row_h, label_w, plot_w = 18, 250, 800
    h = row_h * len(tracks) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + 40}" height="{h}" '
           f'class="timeline">']
    for n, t in enumerate(tracks):
        y = n * row_h
        out.append(f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end">'
                   f'{_esc((t.process + " / ") if t.process else "")}{_esc(t.name)}</text>')
        out.append(f'<rect x="{label_w}" y="{y + 2}" width="{plot_w}" height="{row_h - 4}" fill="#f1f1f1"/>')
        col = COLORS[t.kind]
        for i, f in enumerate(busy[t.uuid]):
            if f > 0.001:
                out.append(f'<rect x="{label_w + i * plot_w / BINS:.1f}" y="{y + 2}" '
                           f'width="{plot_w / BINS + 0.3:.2f}" height="{row_h - 4}" fill="{col}" '
                           f'fill-opacity="{min(f, 1.0):.2f}"/>')
    y = row_h * len(tracks) + 16
    for k in range(5):
        x = label_w + k * plot_w / 4
        out.append(f'<text x="{x:.0f}" y="{y}" text-anchor="middle">{(t0 + k * width / 4) / 1000:.1f} us</text>')
    out.append("</svg>")
    return "".join(out)


def _bars(m):
    out = ['<table class="bars">']
    for e in ENGINES:
        v = float(m.get(f"{e}_engine_active_time_percent", 0.0))
        out.append(f'<tr><td>{e}</td><td><div class="bar"><div style="width:{min(v, 100):.1f}%"></div></div>'
                   f'</td><td>{v:.1f}%</td></tr>')
    if "dma_active_time_percent" in m:
        v = float(m["dma_active_time_percent"])
        out.append(f'<tr><td>dma</td><td><div class="bar"><div style="width:{min(v, 100):.1f}%;'
                   f'background:#c9781c"></div></div></td><td>{v:.1f}%</td></tr>')
    out.append("</table>")
    return "".join(out)


def _roofline(p):
    """Programs as points: x = FLOPs per HBM byte, y = achieved FLOP/s."""
    peak = float(p.device.get("peak_flops_per_second") or p.metrics.get("peak_flops_per_second") or 0)
    bw = float(p.device.get("hbm_bytes_per_second") or 0)
    pts = [(k, v) for k, v in p.programs.items() if v[1] > 0 and v[2] > 0 and v[3] > 0]
    if not peak or not pts:
        return ("<p>No roofline: it needs the device's peaks and programs with FLOPs and HBM bytes "
                "(a summary JSON from a profile carries both).</p>")
    W, H, L, B = 660, 360, 70, 40
    xs = [v[2] / v[3] for _, v in pts]
    ys = [v[2] / (v[1] * 1e-9) for _, v in pts]
    x_lo = 10 ** math.floor(math.log10(min(xs + [peak / bw if bw else 1]) / 2))
    x_hi = 10 ** math.ceil(math.log10(max(xs + [peak / bw if bw else 1]) * 2))
    y_hi = 10 ** math.ceil(math.log10(peak * 1.5))
    y_lo = 10 ** math.floor(math.log10(max(min(ys) / 2, y_hi * 1e-7)))

    def X(v):
        return L + (math.log10(v) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * (W - L - 10)

    def Y(v):
        v = max(v, y_lo)
        return H - B - (math.log10(v) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)) * (H - B - 10)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" class="roofline">',
           f'<rect x="{L}" y="10" width="{W - L - 10}" height="{H - B - 10}" fill="#fafafa" stroke="#999"/>']
    # the ceilings: min(peak, intensity x bandwidth)
    n = 60
    line = []
    for i in range(n + 1):
        x = x_lo * (x_hi / x_lo) ** (i / n)
        line.append(f"{X(x):.1f},{Y(min(peak, x * bw) if bw else peak):.1f}")
    out.append(f'<polyline points="{" ".join(line)}" fill="none" stroke="#b22" stroke-width="2"/>')
    out.append(f'<text x="{W - 14}" y="{Y(peak) - 4:.0f}" text-anchor="end" fill="#b22">'
               f'TensorE peak {peak / 1e12:.1f} TFLOP/s</text>')
    total = sum(v[1] for _, v in pts)
    for (k, v), x, y in zip(pts, xs, ys):
        r = 3 + 9 * math.sqrt(v[1] / total)
        out.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="{r:.1f}" fill="#2f6fb3" fill-opacity="0.6">'
                   f'<title>{_esc(k)}: {x:.3g} FLOP/B, {y / 1e12:.3g} TFLOP/s</title></circle>')
    for v in (x_lo, x_hi):
        out.append(f'<text x="{X(v):.0f}" y="{H - B + 16}" text-anchor="middle">{v:g}</text>')
    out.append(f'<text x="{(W + L) / 2:.0f}" y="{H - 6}" text-anchor="middle">FLOPs per HBM byte</text>')
    for v in (y_lo, y_hi):
        out.append(f'<text x="{L - 4}" y="{Y(v) + 4:.0f}" text-anchor="end">{v / 1e12:g}T</text>')
    out.append("</svg>")
    return "".join(out)


def _top_tables(p, top=20):
    out = []
    if p.programs:
        total = sum(v[1] for v in p.programs.values()) or 1
        out.append("<h2>Top programs / PyTorch ops by time</h2><table class='data'><tr><th>program / op</th>"
                   "<th>count</th><th>time (us)</th><th>% time</th><th>FLOPs</th><th>HBM bytes</th></tr>")
        for k, v in sorted(p.programs.items(), key=lambda kv: (-kv[1][1], kv[0]))[:top]:
            out.append(f"<tr><td>{_esc(k)}</td><td>{v[0]:,}</td><td>{v[1] / 1000:.3f}</td>"
                       f"<td>{100 * v[1] / total:.1f}</td><td>{v[2]:,}</td><td>{v[3]:,}</td></tr>")
        out.append("</table>")
    if p.opcodes:
        out.append("<h2>Top instructions by time</h2><table class='data'><tr><th>engine</th><th>opcode</th>"
                   "<th>count</th><th>time (us)</th></tr>")
        for (e, o), (c, t) in sorted(p.opcodes.items(), key=lambda kv: (-kv[1][1], kv[0]))[:top]:
            out.append(f"<tr><td>{_esc(e)}</td><td>{_esc(o)}</td><td>{c:,}</td><td>{t / 1000:.3f}</td></tr>")
        out.append("</table>")
    return "".join(out)


CSS = """body{font-family:sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #ccc;border-radius:6px;padding:8px 12px;
min-width:150px;background:#f6f8fb}.card b{display:block;font-size:18px}
svg text{font-size:11px;font-family:sans-serif}
.bars td{padding:2px 8px}.bar{width:420px;height:14px;background:#eee}.bar div{height:14px;background:#2f6fb3}
table.data{border-collapse:collapse}table.data td,table.data th{border:1px solid #ddd;padding:3px 8px;
text-align:right}table.data td:first-child{text-align:left}"""


def write_report(p, path):
    m = p.metrics
    cards = []
    for k in ("target", "total_time", "mfu_estimated_percent", "mbu_estimated_percent", "model_flops",
              "hbm_read_bytes", "hbm_write_bytes", "dma_transfer_count", "program_count"):
        if k in m:
            v = m[k]
            shown = f"{v * 1e6:.3f} us" if k == "total_time" else _num(v)
            cards.append(f'<div class="card">{_esc(k)}<b>{shown}</b></div>')
    body = [f"<h1>neuronsim profile: {_esc(p.source)}</h1>", f'<div class="cards">{"".join(cards)}</div>',
            "<h2>Engine timeline (shade: busy fraction per time bin)</h2>", _timeline(p),
            "<h2>Engine utilization</h2>", _bars(m), "<h2>Roofline</h2>", _roofline(p), _top_tables(p)]
    if p.notes:
        body.append("<h2>Notes</h2><ul>" + "".join(f"<li>{t / 1000:.3f} us: {_esc(n)}</li>" for t, n in p.notes)
                    + "</ul>")
    doc = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>neuronsim profile</title>"
           f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)
