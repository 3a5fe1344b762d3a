#!/usr/bin/env python3
"""The architecture sweep: every causal-LM model type of the installed
Transformers (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) built tiny from its default
config, run on the CPU and on `neuron`, compared and its CPU fallbacks
counted per op.  Prints a row per architecture and the totals:

    python3 bench/models.py [--only llama,mixtral] [--timeout 180] [--jobs 2]
                            [--json results.json]

Per architecture, in a worker process (a crash or a hang costs that
architecture only; --timeout bounds each one's wall time):
  1. the default config shrunk (bench/model_sweep.py: every size field it
     has -- layers, hidden and head sizes, heads, experts, per-layer lists
     -- cut to a tiny model), the model built with seed 0 in fp32, eval;
  2. on the CPU: logits of a fixed 8-token prompt and a greedy generate of
     4 new tokens.  A config that cannot be built or run on the CPU is
     skipped and reported with the error (it says nothing about `neuron`);
  3. the same on `neuron` (a copy of the CPU model's weights): logits
     compared within fp32 tolerance (|d| <= 1e-3 + 1e-3 |cpu|, over the max
     |cpu| logit scale), the generated tokens compared exactly, and every
     CPU fallback the run took counted by op (torch_neuronsim.stats()).

Status per architecture: match (logits and tokens), mismatch, error
(neuron raised), timeout, skipped (CPU could not build or run it).  The
totals are over the architectures that run on the CPU."""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def model_types():
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    return list(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


class Worker:
    """a persistent worker (bench/model_sweep.py --worker): one architecture
    per request line, one JSON result line back"""

    def __init__(self):
        env = dict(os.environ, NEURON_SIM="1", PYTHONWARNINGS="ignore", TOKENIZERS_PARALLELISM="false")
        self.p = subprocess.Popen([sys.executable, os.path.join(HERE, "model_sweep.py"), "--worker"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, env=env)

    def run(self, arch, timeout):
        import selectors
        self.p.stdin.write(arch + "\n")
        self.p.stdin.flush()
        sel = selectors.DefaultSelector()
        sel.register(self.p.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                self.kill()
                return {"arch": arch, "status": "timeout", "detail": f"over {timeout:.0f} s"}
            line = self.p.stdout.readline()
            if not line:
                rc = self.p.wait()
                return {"arch": arch, "status": "error", "detail": f"the worker died (exit {rc})"}
            if line.startswith("{"):
                return json.loads(line)

    def kill(self):
        try:
            self.p.kill()
            self.p.wait()
        except Exception:
            pass


def sweep(archs, timeout, jobs):
    from concurrent.futures import ThreadPoolExecutor
    import threading
    results, lock, queue = {}, threading.Lock(), list(archs)

    def drain():
        w = Worker()
        while True:
            with lock:
                if not queue:
                    break
                arch = queue.pop(0)
            t0 = time.monotonic()
            r = w.run(arch, timeout)
            r["seconds"] = round(time.monotonic() - t0, 1)
            with lock:
                results[arch] = r
                print(f"  {arch}: {r['status']} ({r['seconds']} s)", file=sys.stderr, flush=True)
            if r["status"] in ("timeout", "error") and w.p.poll() is not None:
                w = Worker()
        w.kill()

    with ThreadPoolExecutor(jobs) as ex:
        for f in [ex.submit(drain) for _ in range(jobs)]:
            f.result()
    return [results[a] for a in archs]


def table(rows):
    print("| architecture | status | zero fallbacks | fallbacks (op: count) | note |")
    print("|---|---|---|---|---|")
    for r in rows:
        fb = r.get("fallbacks") or {}
        ops = ", ".join(f"{op}: {n}" for op, n in sorted(fb.items(), key=lambda kv: -kv[1])[:6])
        if len(fb) > 6:
            ops += f", ... ({len(fb)} ops)"
        zero = "" if r["status"] in ("skipped", "timeout", "error") else ("yes" if not fb else "no")
        note = (r.get("detail") or "").replace("|", "/").replace("\n", " ")[:110]
        print(f"| {r['arch']} | {r['status']} | {zero} | {ops} | {note} |")
    ran = [r for r in rows if r["status"] != "skipped"]
    match = [r for r in ran if r["status"] == "match"]
    zero = [r for r in match if not r.get("fallbacks")]
    ops = {}
    for r in ran:
        for op, n in (r.get("fallbacks") or {}).items():
            ops.setdefault(op, []).append(r["arch"])
    print(f"\n{len(rows)} causal-LM architectures; {len(rows) - len(ran)} skipped (not built or not run on the CPU "
          f"from a shrunk default config); of the {len(ran)} that run on the CPU: {len(match)} match on neuron "
          f"({100 * len(match) / max(len(ran), 1):.1f}%), {len(zero)} of them with zero CPU fallbacks "
          f"({100 * len(zero) / max(len(ran), 1):.1f}% of those that run)")
    for k in ("mismatch", "error", "timeout"):
        n = sum(r["status"] == k for r in ran)
        if n:
            print(f"  {k}: {n}")
    if ops:
        print("\nfallback ops by the number of architectures that hit them:")
        for op, archs in sorted(ops.items(), key=lambda kv: -len(kv[1])):
            print(f"  {op}: {len(archs)} ({', '.join(archs[:8])}{', ...' if len(archs) > 8 else ''})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--only", help="comma-separated model types (default: every causal-LM type)")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per architecture (default 180)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--json", help="write the per-architecture results here")
    args = ap.parse_args()
    archs = model_types()
    if args.only:
        want = args.only.split(",")
        unknown = [a for a in want if a not in archs]
        if unknown:
            print(f"models.py: not causal-LM model types here: {', '.join(unknown)}", file=sys.stderr)
            return 2
        archs = want
    import transformers
    print(f"Transformers {transformers.__version__}: {len(archs)} causal-LM architectures, "
          f"{args.jobs} workers, {args.timeout:.0f} s each at most", file=sys.stderr)
    rows = sweep(archs, args.timeout, max(1, args.jobs))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
