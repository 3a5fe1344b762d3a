"""Every kernel family on `neuron` against the CPU across tile boundaries.

    python3 bench/tile_sweep.py [--families matmul,conv,...] [--dtypes float32,bfloat16,...]
                                [--quick] [--seed 0] [--limit N] [--match TEXT] [--jobs 1]
                                [--timeout 60] [--json out.json] [--list]

Each family (`FAMILIES`, declared with their inputs in tile_families.py:
matmul, conv, sdpa, softmax, norm, reduce, index, cat, topk_sort, unary,
binary, compare, where, clamp, intops) has variants (one op
or one way of calling it), each with dimensions swept over SIZES = 1, 2, 127,
128, 129, 255, 256, 257, 511, 513 (SBUF's 128 partitions, PSUM's 512-column
banks, and the sizes either side), the dtypes it takes among float32 /
bfloat16 / float16 / int32 / int64, operand layouts and parameters (kernel
size, stride, padding, dim, keepdim, mask kind, ...).  A case is one variant
at one shape, dtype, layout and parameters (`cases`):

- full sweep: per variant the --quick cases, then every size on each
  dimension with the others at the variant's small `base`, every dtype with
  every layout, then a sample of the cross product drawn with --seed, up to
  BUDGET cases (all of it when smaller).  A shape whose cost (MACs or
  elements, `Variant.cost`) is over CAP is never drawn.
- --quick (tests/python/test_tile_sweep.py): per variant six shapes whose
  every dimension takes each of QUICK_SIZES = 127, 128, 129, 255, 257, 513 once
  (dimension j of shape r is QUICK_SIZES[(r + j) % 6]); a shape over
  QUICK_CAP is split into one shape per dimension, that dimension at its
  value and the others at `base`.  Dtypes, layouts and parameters are cycled
  over them, more shapes repeated when a variant has more dtypes or layouts
  than six.  Fixed: no seed.

Layouts (one letter per tensor operand; `make`): C contiguous, T the last two
dims stored transposed (`x.t()` of a contiguous tensor), L channels-last
(conv2d input and weight), S every other element of a twice as wide tensor
(`[..., ::2]`; the skipped elements are NaN, or 10^6 for integers, so a kernel
reading them shows), O a storage offset of one element, X expanded (stride 0)
from size 1 along dim 0 (the batch for bmm and attention's heads), and for a
second operand of elementwise ops R a row [1, C], K a column [R, 1], Z a 0-dim
tensor, N a Python scalar (broadcasting).  Inputs are drawn from a generator
seeded by the case id and --seed, so a case reproduces by its id.

Each case runs on the CPU and on `neuron` (its inputs moved as the same views
of copies of their storages, bench/opinfo.py's `to_device`) and the results
must agree in structure, dtype, shape and values (`compare`): integer and bool
exactly; float32 within rtol 1e-4 / atol 1e-4, bfloat16 and float16 within
1.6e-2 / 1.6e-2, atol multiplied by max(1, largest finite |CPU output|,
sqrt(K) for a contraction over K); NaN where the CPU has NaN.  A values
mismatch is a match (column fp64) when neuron is as close to the op evaluated
in float64 as the CPU is.  topk / sort: values identical, indices in range
and pointing at those values (`input.gather(dim, indices) == values`), each
index once per row; a stable sort's indices identical.  The plugin's CPU
fallback counter is read around the neuron run: a case is *native* when it
used no fallback.  A case the CPU rejects is "cpu_error" (not run).

Crash safety: cases run in worker processes (--jobs, OMP_NUM_THREADS=1), one
at a time; a worker killed by a signal records "crash" for its case, one
running longer than --timeout seconds is killed ("timeout"), and a fresh
worker carries on.  The table goes to stdout, progress to stderr.
"""
import argparse
import collections
import itertools
import json
import math
import os
import pathlib
import random
import signal
import sys
import time
import zlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import opinfo  # noqa: E402  (to_device, to_cpu, _first_line)
import workers  # noqa: E402  (the crash-safe worker processes)

from tile_families import (ALL, DTYPES, FAMILIES, FAMILY_DOC, FLOAT, INT, SIZES, VARIANT,  # noqa: E402,F401
                           VARIANTS, make, values)
import tile_families  # noqa: E402
QUICK_SIZES = (127, 128, 129, 255, 257, 513)
BUDGET = 1500         # cases per variant in the full sweep
MAX_SHAPES = 1000     # the full sweep's shapes per variant: the whole cross product up to this many
CAP = 2e8             # largest cost (MACs / elements) drawn in the full sweep
QUICK_CAP = 3e7       # ... in --quick
TOL = {"float32": (1e-4, 1e-4), "float64": (1e-4, 1e-4), "bfloat16": (1.6e-2, 1.6e-2),
       "float16": (1.6e-2, 1.6e-2)}

torch = F = None      # imported by the worker (`_load_torch`); the parent needs neither


def _load_torch():
    global torch, F
    torch, F = tile_families.load_torch()
    return torch


# -- the cases -----------------------------------------------------------------------------------
def case_id(c):
    dims = " ".join(f"{k}={v}" for k, v in c["dims"].items())
    params = "".join(f" {k}={v}" for k, v in c["params"].items())
    return f"{c['family']}/{c['op']} {dims} {c['dtype']} {c['layout']}{params}"


def _case(v, dims, dtype, layout, params):
    d, p = dict(dims), dict(params)
    if v.fix:
        v.fix(d, p)
    c = {"family": v.family, "op": v.op, "dims": d, "dtype": dtype, "layout": layout, "params": p}
    c["id"] = case_id(c)
    return c


def _cycle(v, i):
    """The I-th combination of V's parameters, each cycled on its own."""
    return {k: opts[i % len(opts)] for k, opts in v.params.items()}


def _split(v, dims, cap):
    """[DIMS] when V costs at most CAP there, else one shape per dimension
    (that dimension at its value, the others at V's base)."""
    if v.cost(dims, _cycle(v, 0)) <= cap:
        return [dims]
    out = []
    for k in v.dims:
        d = dict(v.base)
        d[k] = dims[k]
        out.append(d)
    return out


def quick_cases(v, dtypes):
    shapes = []
    for r in range(len(QUICK_SIZES)):
        dims = {k: QUICK_SIZES[(r + j) % len(QUICK_SIZES)] for j, k in enumerate(v.dims)}
        shapes += _split(v, dims, QUICK_CAP)
    nd, nl = len(dtypes), len(v.layouts)
    n = max(len(shapes), nd * nl, *(len(o) for o in v.params.values()), 1)
    return [_case(v, shapes[i % len(shapes)], dtypes[i % nd], v.layouts[(i // nd) % nl],
                  _cycle(v, i + i // len(shapes))) for i in range(n)]


def full_cases(v, dtypes, seed, budget=BUDGET):
    """V's --quick cases; every size on each dimension (the others at V's
    base); every dtype with every layout; then the cross product of the
    sizes (all of it up to MAX_SHAPES shapes, else a sample drawn with SEED;
    never a shape over CAP): with every dtype, layout and parameters when
    that makes at most BUDGET cases, else in passes over the shapes, each
    with a dtype, layout and parameters drawn, until BUDGET cases."""
    out = {}

    def add(c):
        out.setdefault(c["id"], c)
    for c in quick_cases(v, dtypes):
        add(c)
    i = 0
    for k in v.dims:                              # every size on every dimension
        for s in SIZES:
            d = dict(v.base)
            d[k] = s
            if v.cost(d, _cycle(v, i)) <= CAP:
                add(_case(v, d, dtypes[i % len(dtypes)], v.layouts[i % len(v.layouts)], _cycle(v, i)))
            i += 1
    mid = {k: (129, 257, 127, 255)[j % 4] for j, k in enumerate(v.dims)}
    mid = _split(v, mid, CAP)[0]
    for j, (dt, lay) in enumerate(itertools.product(dtypes, v.layouts)):     # every dtype x layout
        add(_case(v, mid, dt, lay, _cycle(v, j)))
    rng = random.Random(f"{seed}:{v.key}")
    if len(SIZES) ** len(v.dims) <= MAX_SHAPES:
        shapes = [dict(zip(v.dims, t)) for t in itertools.product(SIZES, repeat=len(v.dims))]
    else:
        shapes = [{k: rng.choice(SIZES) for k in v.dims} for _ in range(MAX_SHAPES)]
    rng.shuffle(shapes)
    combos = len(dtypes) * len(v.layouts) * math.prod(len(o) for o in v.params.values())
    if len(shapes) * combos + len(out) <= budget:     # small enough: all of it
        keys = list(v.params)
        for d in shapes:
            for dt, lay, *vals in itertools.product(dtypes, v.layouts, *v.params.values()):
                p = dict(zip(keys, vals))
                if v.cost(d, p) <= CAP:
                    add(_case(v, d, dt, lay, p))
        return list(out.values())
    for _ in range(combos):                       # passes over the shapes
        grew = False
        for d in shapes:
            if len(out) >= budget:
                return list(out.values())
            p = {k: rng.choice(o) for k, o in v.params.items()}
            if v.cost(d, p) > CAP:
                continue
            n = len(out)
            add(_case(v, d, rng.choice(dtypes), rng.choice(v.layouts), p))
            grew |= len(out) > n
        if not grew:
            break
    return list(out.values())


def cases(families=None, dtypes=None, quick=False, seed=0, limit=None, match=None):
    """The cases of FAMILIES (default all) in DTYPES (default all), --quick's
    or the full sweep's (seeded by SEED), at most LIMIT per family (its
    variants' lists interleaved, their first cases first), those whose id
    contains one of MATCH's strings."""
    fams = families or FAMILIES
    unknown = set(fams) - set(FAMILIES)
    if unknown:
        raise SystemExit(f"tile_sweep: no such family: {', '.join(sorted(unknown))} (have {', '.join(FAMILIES)})")
    out = []
    for fam in fams:
        lists = []
        for v in VARIANTS:
            if v.family != fam:
                continue
            dts = [d for d in v.dtypes if dtypes is None or d in dtypes]
            if not dts:
                continue
            cs = quick_cases(v, dts) if quick else full_cases(v, dts, seed)
            if match:
                cs = [c for c in cs if any(m in c["id"] for m in match)]
            lists.append(cs)
        merged = [c for group in itertools.zip_longest(*lists) for c in group if c is not None]
        out += merged[:limit] if limit else merged
    return out


# -- one case, in a worker ----------------------------------------------------------------------------
def _gen(c, seed):
    return torch.Generator().manual_seed(zlib.crc32(c["id"].encode()) + 1000003 * seed)


def build(c, seed=0):
    _load_torch()
    v = VARIANT[f"{c['family']}/{c['op']}"]
    return v.build(c["dims"], c["params"], c["dtype"], c["layout"], _gen(c, seed))


def tolerance(case_dtype, out_dtype):
    pairs = [TOL[n] for n in (case_dtype, out_dtype) if n in TOL]
    return (max(p[0] for p in pairs), max(p[1] for p in pairs)) if pairs else (0.0, 0.0)


def _name(dtype):
    return str(dtype).replace("torch.", "")


def _at(t, flat):
    idx = [int(i) for i in torch.unravel_index(torch.tensor(flat), t.shape)] if t.dim() else []
    return idx, t.reshape(-1)[flat].item()


def compare(want, got, case_dtype, K=None, exact=False, where="out"):
    """None when GOT (neuron's, on the CPU) matches WANT (the CPU's), else
    (one-line reason, max |error| or None)."""
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return f"{where}: {type(got).__name__}, expected {type(want).__name__} of {len(want)}", None
        for i, (w, g) in enumerate(zip(want, got)):
            r = compare(w, g, case_dtype, K, exact, f"{where}[{i}]")
            if r:
                return r
        return None
    if not isinstance(want, torch.Tensor):
        return None if got == want else (f"{where}: {got!r}, expected {want!r}", None)
    if not isinstance(got, torch.Tensor):
        return f"{where}: {type(got).__name__}, expected a tensor", None
    if got.dtype != want.dtype:
        return f"{where}: dtype {_name(got.dtype)}, expected {_name(want.dtype)}", None
    if got.shape != want.shape:
        return f"{where}: shape {list(got.shape)}, expected {list(want.shape)}", None
    if want.numel() == 0:
        return None
    if not want.is_floating_point() or exact:
        w, g = want.reshape(-1), got.reshape(-1)
        bad = (w != g) & ~(w.isnan() & g.isnan()) if want.is_floating_point() else w != g
        if not bool(bad.any()):
            return None
        n = int(bad.sum())
        first = int(bad.nonzero()[0])
        idx, gv = _at(got, first)
        err = float((g.double() - w.double()).abs()[bad].nan_to_num(float("inf")).max()) if want.dtype != torch.bool \
            else None
        return (f"{where}: {n}/{w.numel()} elements differ, first at {idx}: {gv!r}, expected {_at(want, first)[1]!r}",
                err)
    rtol, atol = tolerance(case_dtype, _name(want.dtype))
    w, g = want.double().reshape(-1), got.double().reshape(-1)
    fin = w[torch.isfinite(w)].abs()
    scale = max(1.0, float(fin.max()) if fin.numel() else 1.0, math.sqrt(K) if K else 1.0)
    atol *= scale
    nan_bad = w.isnan() != g.isnan()
    inf_bad = (w.isinf() | g.isinf()) & (w != g) & ~(w.isnan() | g.isnan())
    both = torch.isfinite(w) & torch.isfinite(g)
    err = torch.where(both, (g - w).abs(), torch.zeros_like(w))
    bad = nan_bad | inf_bad | (err > atol + rtol * w.abs())
    if not bool(bad.any()):
        return None
    n = int(bad.sum())
    maxerr = float(err.max())
    worst = int(torch.where(bad, torch.where(nan_bad | inf_bad, torch.full_like(err, math.inf), err),
                            torch.full_like(err, -1.0)).argmax())
    idx, gv = _at(got, worst)
    return (f"{where}: {n}/{w.numel()} out of tolerance (rtol {rtol:g}, atol {atol:.3g}); max |err| {maxerr:.3g}; "
            f"worst at {idx}: {gv!r}, expected {_at(want, worst)[1]!r}", maxerr)


def check_sorted(b, x, want, got, case_dtype):
    """topk / sort: values identical to the CPU's, indices in range, pointing
    at the values, once per row; a stable sort's indices the CPU's."""
    r = compare(want[0], got[0], case_dtype, exact=True, where="values")
    if r:
        return r
    wi, gi = want[1], got[1]
    if gi.dtype != wi.dtype or gi.shape != wi.shape:
        return f"indices: {_name(gi.dtype)}{list(gi.shape)}, expected {_name(wi.dtype)}{list(wi.shape)}", None
    if gi.numel() == 0:
        return None
    n = x.shape[b.dim]
    if bool(((gi < 0) | (gi >= n)).any()):
        return f"indices: out of range [0, {n}): {gi.min().item()}..{gi.max().item()}", None
    picked = x.gather(b.dim, gi)
    r = compare(got[0], picked, case_dtype, exact=True, where="x.gather(indices) vs values")
    if r:
        return r
    s = gi.sort(dim=b.dim).values
    if bool((s.diff(dim=b.dim) == 0).any()):
        return "indices: an index repeats within a row", None
    if b.stable:
        return compare(wi, gi, case_dtype, where="indices (stable sort)")
    return None


def _fallbacks():
    import torch_neuronsim
    s = torch_neuronsim.stats()
    return s["cpu_fallbacks"], s["fallback_ops"]


def _wide(v):
    if isinstance(v, torch.Tensor) and v.is_floating_point():
        return v.to(torch.float64)
    return v


def fp64_referee(b, want, got):
    """A reason when neuron's float outputs are no further from the op
    evaluated in float64 than the CPU's are (max |error|, NaN at the same
    places), else None."""
    ws = list(want) if isinstance(want, (tuple, list)) else [want]
    gs = list(got) if isinstance(got, (tuple, list)) else [got]
    if not all(isinstance(w, torch.Tensor) and w.is_floating_point() and isinstance(g, torch.Tensor)
               and g.dtype == w.dtype and g.shape == w.shape for w, g in zip(ws, gs)):
        return None
    try:
        ref = b.fn(*[_wide(a) for a in b.args])
    except Exception:  # noqa: BLE001
        return None
    rs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    errs = []
    for w, g, r in zip(ws, gs, rs):
        r = r.double()
        ea, eb = (w.double() - r).abs(), (g.double() - r).abs()
        if not torch.equal(ea.isnan(), eb.isnan()):
            return None
        ea, eb = ea.nan_to_num(0.0), eb.nan_to_num(0.0)
        if w.numel() and float(eb.max()) > float(ea.max()):
            return None
        errs.append((float(ea.max()) if w.numel() else 0.0, float(eb.max()) if w.numel() else 0.0))
    return "neuron as close to float64 as the CPU (max |err| " + \
        ", ".join(f"neuron {e[1]:.3g} / CPU {e[0]:.3g}" for e in errs) + ")"


def run_case(c, seed=0):
    """The record of case C: status match / mismatch / error / cpu_error /
    harness, reason, max_err, fallbacks and the ops that fell back."""
    _load_torch()
    rec = {k: c[k] for k in ("id", "family", "op", "dims", "dtype", "layout", "params")}
    t0 = time.monotonic()
    try:
        b = build(c, seed)
        dev = opinfo.to_device(b.args, "neuron")
    except Exception as e:  # noqa: BLE001
        rec.update(status="harness", reason=f"making the inputs: {opinfo._first_line(e)}", fallbacks=None,
                   fallback_ops=[])
        return rec
    n0, ops0 = _fallbacks()
    try:
        got = opinfo.to_cpu(b.fn(*dev))
    except Exception as e:  # noqa: BLE001
        got = e
    n1, ops1 = _fallbacks()
    rec.update(fallbacks=n1 - n0, fallback_ops=sorted(k for k, v in ops1.items() if v > ops0.get(k, 0)))
    try:
        want = b.fn(*b.args)
    except Exception as e:  # noqa: BLE001
        rec.update(status="cpu_error", reason=f"CPU raised {opinfo._first_line(e)}"
                   + ("" if isinstance(got, Exception) else "; neuron did not"))
        return rec
    if isinstance(got, Exception):
        rec.update(status="error", reason=opinfo._first_line(got))
        return rec
    if b.check == "close":
        why = compare(want, got, c["dtype"], b.K)
        if why:
            referee = fp64_referee(b, want, got)
            if referee:
                rec.update(status="match", fp64=True, reason=f"{referee}; {why[0]}", max_err=why[1])
                return rec
    else:
        why = check_sorted(b, b.args[0], want, got, c["dtype"])
    rec.update(status="mismatch" if why else "match", reason=why[0] if why else None,
               max_err=why[1] if why else None, seconds=round(time.monotonic() - t0, 3))
    return rec


def worker_main(seed):
    """Cases on stdin (one JSON line each), records on the original stdout
    (one JSON line each: ready / result); anything the ops print goes to stderr."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    import warnings
    warnings.simplefilter("ignore")
    _load_torch()
    import torch_neuronsim  # noqa: F401
    torch.set_num_threads(1)
    out.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        c = json.loads(line)
        try:
            rec = run_case(c, seed)
        except Exception as e:  # noqa: BLE001  (this script's own failure)
            rec = {k: c[k] for k in ("id", "family", "op", "dims", "dtype", "layout", "params")}
            rec.update(status="harness", reason=opinfo._first_line(e), fallbacks=None, fallback_ops=[])
        out.write(json.dumps({"result": rec}) + "\n")


# -- workers ---------------------------------------------------------------------------------------------
RECYCLE_RSS = 4 << 30   # a worker's host memory only grows (large cases leave it resident): replaced past 4 GiB


class Worker(workers.WorkerProcess):
    """A worker process running one case at a time; `run(case)` returns its
    record, "crash" when the process died, "timeout" when it took too long
    (the process is then replaced; so is one past RECYCLE_RSS)."""

    def __init__(self, seed=0):
        super().__init__(pathlib.Path(__file__).resolve(), ["--seed", str(seed)], name="tile_sweep")

    def run(self, c, timeout):
        if self.proc is not None and self.proc.poll() is not None:
            self.stop()                     # died between cases
        if self.proc is None:
            self.start()
        t0 = time.monotonic()
        self.send(c)                        # a dead worker: recorded as the crash it is, below
        msg = self.get(timeout)
        if isinstance(msg, dict) and "result" in msg:
            if self.rss() > RECYCLE_RSS:
                self.stop()                 # a fresh worker for the next case
            return msg["result"]
        rec = {k: c[k] for k in ("id", "family", "op", "dims", "dtype", "layout", "params")}
        if msg == "timeout":
            self.stop()
            rec.update(status="timeout", reason=f"no result after {timeout:g} s")
        else:
            self.proc.wait()
            rc = self.proc.returncode
            tail = self.stderr_tail()
            self.stop()
            try:
                sig = signal.Signals(-rc).name if rc < 0 else f"exit {rc}"
            except ValueError:
                sig = f"signal {-rc}"
            rec.update(status="crash", reason=sig + (f": {tail}" if tail else ""))
        rec.update(fallbacks=None, fallback_ops=[], seconds=round(time.monotonic() - t0, 3))
        return rec


def run_cases(cs, jobs=1, timeout=60.0, seed=0, progress=None):
    """The records of cases CS (in order), run in JOBS workers.
    PROGRESS(index, record) is called after each."""
    results = workers.run_pool(cs, lambda: Worker(seed), lambda w, c: w.run(c, timeout), jobs, progress)
    return [r for r in results if r is not None]


# -- the report -------------------------------------------------------------------------------------------
RUN = ("match", "mismatch", "error", "crash", "timeout")


def failing(records):
    return [r for r in records if r["status"] not in ("match", "cpu_error")]


def table(records):
    rows = collections.defaultdict(collections.Counter)
    variants = collections.defaultdict(set)
    for r in records:
        for name in (r["family"], "total"):
            rows[name][r["status"]] += 1
            rows[name]["native"] += r["status"] in RUN and r.get("fallbacks") == 0
            rows[name]["fp64"] += bool(r.get("fp64"))
            variants[name].add(r["op"] if name != "total" else f"{r['family']}/{r['op']}")
    lines = [f"{'family':10} {'variants':>8} {'cases':>6} {'pass%':>6} {'mismatch':>8} {'error':>6} {'crash':>6} "
             f"{'timeout':>7} {'native%':>7} {'fp64':>5} {'cpu_err':>7} {'harness':>7}"]
    for name in [f for f in FAMILIES if f in rows] + ["total"]:
        c = rows[name]
        run = sum(c[s] for s in RUN)
        pct = lambda n: f"{100.0 * n / run:.1f}" if run else "-"  # noqa: E731
        lines.append(f"{name:10} {len(variants[name]):8d} {run:6d} {pct(c['match']):>6} {c['mismatch']:8d} "
                     f"{c['error']:6d} {c['crash']:6d} {c['timeout']:7d} {pct(c['native']):>7} {c['fp64']:5d} "
                     f"{c['cpu_error']:7d} {c['harness']:7d}")
    lines.append("cases = run (match + mismatch + error + crash + timeout); pass% = matches / run; native% = run "
                 "with zero CPU fallbacks; fp64 = matches out of tolerance where neuron is as close to float64 as "
                 "the CPU; cpu_err = rejected by the CPU (not run); harness = inputs this script could not make")
    bad = failing(records)
    if bad:
        lines.append("")
        lines.append(f"failing cases ({len(bad)}): family/op dims dtype layout params: status: reason")
        for r in sorted(bad, key=lambda r: (FAMILIES.index(r["family"]), r["op"], r["status"], r["id"])):
            lines.append(f"  {r['id']}: {r['status']}: {r['reason']}")
    fb = collections.Counter(o for r in records for o in r.get("fallback_ops") or ())
    if fb:
        lines.append("")
        lines.append("CPU fallbacks: cases using each op's fallback:")
        lines.append("  " + ", ".join(f"{o} {n}" for o, n in fb.most_common()))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", help="comma-separated, of: " + "; ".join(f"{k} ({v})" for k, v in FAMILY_DOC.items()))
    ap.add_argument("--dtypes", help=f"comma-separated, of: {','.join(DTYPES)} (default all)")
    ap.add_argument("--quick", action="store_true", help="the CI subset (tests/python/test_tile_sweep.py)")
    ap.add_argument("--seed", type=int, default=0, help="draws the full sweep's sample and the inputs")
    ap.add_argument("--limit", type=int, help="at most N cases per family")
    ap.add_argument("--match", help="comma-separated: only cases whose id contains one of these")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    ap.add_argument("--json", help="write the records here")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        return worker_main(a.seed)
    dtypes = a.dtypes.split(",") if a.dtypes else None
    if dtypes and set(dtypes) - set(DTYPES):
        raise SystemExit(f"tile_sweep: dtypes are among {','.join(DTYPES)}")
    cs = cases(a.families.split(",") if a.families else None, dtypes, a.quick, a.seed, a.limit,
               a.match.split(",") if a.match else None)
    if a.list:
        for c in cs:
            print(c["id"])
        print(f"{len(cs)} cases", file=sys.stderr)
        return 0
    t0 = time.monotonic()
    per_family = collections.Counter(c["family"] for c in cs)
    seen = collections.defaultdict(collections.Counter)

    def progress(i, r):
        st = seen[r["family"]]
        st[r["status"]] += 1
        if r["status"] not in ("match", "cpu_error"):
            print(f"  {r['status']}: {r['id']}: {r['reason']}"[:400], file=sys.stderr, flush=True)
        if sum(st.values()) == per_family[r["family"]]:
            print(f"[{time.monotonic() - t0:6.0f}s] {r['family']}: {sum(st.values())} cases "
                  + " ".join(f"{k}={v}" for k, v in sorted(st.items())), file=sys.stderr, flush=True)

    print(f"tile_sweep: {len(cs)} cases", file=sys.stderr, flush=True)
    records = run_cases(cs, a.jobs, a.timeout, a.seed, progress)
    secs = time.monotonic() - t0
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "seconds": round(secs, 1), "records": records}, f, indent=1)
    print(table(records))
    print(f"\n{len(records)} cases in {secs:.0f} s")
    return 1 if failing(records) else 0


if __name__ == "__main__":
    sys.exit(main())
