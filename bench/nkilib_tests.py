"""nki-library's own integration tests, run unmodified in the library's own
simulation mode with neuronsim as its simulator (bench/nkilib_plugin.py),
one test file at a time; prints a table of passed / failed / skipped /
errors and host seconds per file.

  python3 bench/nkilib_tests.py PATH/TO/nki-library [FILE_OR_DIR ...] [--all] [--timeout S] [-k EXPR]

PATH is a checkout of aws-neuron/nki-library (its test/ and src/); FILE_OR_DIR
(relative to PATH) narrows the run, default test/integration.  The harness
skips its large shapes in simulation unless --all (its
NKILIB_SIMULATION_RUN_ALL=1).  The library's test extras (its pyproject's
[test]) must be installed; scripts/setup.sh installs them, pinned.  Exit
status 1 when a file fails, errors or times out."""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
COUNTS = ("passed", "failed", "skipped", "error", "errors", "xfailed", "xpassed", "deselected")


def summary(line):
    """{outcome: count} from pytest's last line ('3 passed, 1 skipped in 2.1s')."""
    out = {}
    for n, what in re.findall(r"(\d+) (\w+)", line):
        if what in COUNTS:
            what = "error" if what == "errors" else what
            out[what] = out.get(what, 0) + int(n)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo", type=pathlib.Path)
    ap.add_argument("paths", nargs="*", default=["test/integration"])
    ap.add_argument("--all", action="store_true", help="also the shapes the harness skips in simulation")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per test file (default 1800)")
    ap.add_argument("-k", dest="keyword", help="pytest -k expression")
    args = ap.parse_args(argv)
    repo = args.repo.resolve()
    if not (repo / "test" / "conftest.py").is_file() or not (repo / "src" / "nkilib_src").is_dir():
        ap.error(f"{repo} is not a checkout of aws-neuron/nki-library (no test/conftest.py, src/nkilib_src)")
    files = []
    for p in args.paths:
        p = (repo / p).resolve()
        if repo not in p.parents and p != repo:
            ap.error(f"{p} is outside {repo}")
        files += sorted(p.rglob("test_*.py")) if p.is_dir() else [p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(repo / "src"),
                                                       os.environ.get("PYTHONPATH", "")]))
    if args.all:
        env["NKILIB_SIMULATION_RUN_ALL"] = "1"
    rows, bad = [], 0
    print(f"{'test file':<72} {'pass':>5} {'fail':>5} {'skip':>5} {'err':>4} {'s':>7}")
    for f in files:
        cmd = [sys.executable, "-m", "pytest", "-p", "nkilib_plugin", "-p", "no:cacheprovider", "-q",
               "--test-mode=simulation", str(f.relative_to(repo))]
        if args.keyword:
            cmd += ["-k", args.keyword]
        t0 = time.monotonic()
        try:
            r = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=args.timeout)
            lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
            counts = summary(lines[-1] if lines else "")
            if not counts and r.returncode not in (0, 5):
                counts = {"error": 1}
        except subprocess.TimeoutExpired:
            counts = {"error": 1, "timeout": 1}
        secs = time.monotonic() - t0
        bad += bool(counts.get("failed") or counts.get("error"))
        name = str(f.relative_to(repo))
        rows.append((name, counts, secs))
        print(f"{name[-72:]:<72} {counts.get('passed', 0):>5} {counts.get('failed', 0):>5} "
              f"{counts.get('skipped', 0):>5} {counts.get('error', 0):>4} {secs:>7.1f}"
              + ("  (timeout)" if counts.get("timeout") else ""), flush=True)
    total = {k: sum(c.get(k, 0) for _, c, _ in rows) for k in ("passed", "failed", "skipped", "error")}
    print(f"{'total':<72} {total['passed']:>5} {total['failed']:>5} {total['skipped']:>5} {total['error']:>4} "
          f"{sum(s for *_, s in rows):>7.1f}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
