"""`neuronsim nki run FILE.py [--target TARGET] [--profile-json PATH] [ARGS...]`:
runs an NKI kernel file unmodified on the simulator (TARGET: a row of the
ISA's target table, e.g. trn2; PATH: where to write the profile summary of
every kernel run, neuronsim_nki.profile_json).  For this process only, the
imports `nki`, `nki.language`, `nki.isa`, `nki.collectives`, `nki.lnc`, `neuronxcc.nki`,
`neuronxcc.nki.language` and `neuronxcc.nki.isa` resolve to neuronsim_nki, and
`torch_neuronx` (with `nki`, `nki_op`) to torch_neuronsim's stand-in, even
where the AWS packages are installed (neuronsim_standins, its finder first).  At exit it prints a table of the
kernels the file simulated."""
from __future__ import annotations

import atexit
import os
import runpy
import sys

from neuronsim import ENGINES, TARGETS

from . import Kernel, profile_json


def install_aliases():
    """the stand-in import names (neuronsim_standins.ALIASES) ahead of any
    installed package, for this process; one already imported under such a
    name is an error (it would not be the simulator's)"""
    import neuronsim_standins
    for name in neuronsim_standins.ALIASES:
        existing = sys.modules.get(name)
        if existing is not None and not neuronsim_standins.is_standin(name):
            raise SystemExit(f"neuronsim nki run: a module '{name}' is already imported ({existing!r})")
    neuronsim_standins.install(force=True)


def report(out=sys.stdout):
    rows = Kernel.history
    if not rows:
        out.write("neuronsim nki run: no kernel was simulated\n")
        return
    out.write(f"\n{'kernel':28s} {'target':6s} {'latency us':>11s}  "
              + " ".join(f"{e:>7s}" for e in ENGINES)
              + f" {'dma':>7s} {'HBM MB':>8s}\n")
    if Kernel.runs > len(rows):
        out.write(f"({Kernel.runs - len(rows)} earlier runs not kept: the history holds the last {len(rows)})\n")
    for name, target, r in rows:
        act = " ".join(f"{r.engine_active_percent[e]:6.1f}%" for e in ENGINES)
        out.write(f"{name:28s} {target:6s} {r.latency_us:11.2f}  {act} {r.dma_active_percent:6.1f}% "
                  f"{(r.hbm_read_bytes + r.hbm_write_bytes) / 1e6:8.3f}\n")


def write_profiles(path):
    """The profile summary of every kernel run the history holds, as one
    JSON document at path."""
    runs = [profile_json.summary(r, name, target) for name, target, r in Kernel.history]
    if runs:
        profile_json.write(path, profile_json.runs(runs))
    else:
        sys.stderr.write("neuronsim nki run: no kernel was simulated; no profile written\n")


OPTIONS = ("--target", "--profile-json")


def main(argv=None):
    """--target / --profile-json may come before or after FILE; everything
    else after FILE goes to the script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    opts, file, rest = {}, None, []
    i = 0
    while i < len(argv):
        name = argv[i].split("=", 1)[0]
        if name in OPTIONS and name not in opts:
            if "=" in argv[i]:
                opts[name] = argv[i].split("=", 1)[1]
            elif i + 1 < len(argv):
                opts[name] = argv[i + 1]
                i += 1
            else:
                print(f"neuronsim nki run: {name} needs a value", file=sys.stderr)
                return 2
        elif file is None and argv[i] in ("-h", "--help"):
            print(__doc__)
            return 0
        elif file is None:
            file = argv[i]
        else:
            rest.append(argv[i])
        i += 1
    if file is None:
        print(f"usage: neuronsim nki run FILE.py [--target {'|'.join(TARGETS)}] [--profile-json PATH] [ARGS...]",
              file=sys.stderr)
        return 2
    target, profile_path = opts.get("--target"), opts.get("--profile-json")
    if profile_path is not None:
        parent = os.path.dirname(os.path.abspath(profile_path))
        if not os.path.isdir(parent):
            print(f"neuronsim nki run: --profile-json {profile_path}: no directory {parent}", file=sys.stderr)
            return 2
    if target is not None:
        if target not in TARGETS:
            print(f"neuronsim nki run: --target {target!r} ({', '.join(TARGETS)})", file=sys.stderr)
            return 2
        os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = target
    if not os.path.exists(file):
        print(f"neuronsim nki run: {file}: no such file", file=sys.stderr)
        return 1
    install_aliases()
    atexit.register(report)
    if profile_path is not None:
        atexit.register(write_profiles, profile_path)
    sys.argv = [file] + rest
    sys.path.insert(0, os.path.dirname(os.path.abspath(file)))
    runpy.run_path(file, run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
