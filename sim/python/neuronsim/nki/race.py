"""Race detector for .nsasm programs: any two instructions on different
engines (DMA transfers count as their own agents) that touch overlapping
SBUF/PSUM bytes, one of them writing, with no semaphore ordering between
them.

Happens-before comes from the synchronisation the program states:
- program order on each engine; a `barrier` orders everything before it on
  every engine before everything after it;
- `sem_signal` lands after every earlier instruction of its engine;
- a DMA's completion increment lands after the transfer, which starts after
  everything before its `dma_copy` on the issuing engine;
- `sem_wait sem=S cond=is_ge value=V` waits for V increments of S: the
  first V to land in an execution that lands every DMA as soon as it is
  issued.  That is exact when a semaphore has one producer chain (one
  engine's signals, or DMAs on a slot whose next user waits for the
  previous one, as neuronsim.nki emits) or when V is every increment the
  semaphore gets; with several unordered producers and V short of all of
  them it over-approximates the ordering (it may miss a race there, but
  does not invent one).
Vector clocks over the engines and transfers decide ordering.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from neuronsim import DTYPE_SIZES as SIZES

AP_RE = re.compile(r"(sbuf|psum):(\w+)\[(\d+):(\d+)\](?:\+(\d+))?\{([^}]*)\}")
WRITE_FIELDS = ("dst", "reduce_dst", "stationary_out")


@dataclass
class Access:
    space: str
    p0: int
    p1: int
    b0: int
    b1: int
    write: bool


@dataclass
class Race:
    first: str          # "engine #index (source)"
    second: str
    space: str
    detail: str

    def __str__(self):
        return f"race on {self.space} ({self.detail}): {self.first} and {self.second} are not ordered"


def _ap_range(m):
    space, dt, p0, p1, off, dims = m.groups()
    esz = SIZES.get(dt, 4)
    lo = hi = 0
    for d in dims.split(","):
        s, n = (int(v) for v in d.split("x"))
        ext = s * (n - 1)
        lo, hi = lo + min(0, ext), hi + max(0, ext)
    base = int(off or 0)
    return space, int(p0), int(p1), base + lo * esz, base + (hi + 1) * esz


def _accesses(text, dma_table, accumulate_reads=True):
    """SBUF/PSUM accesses of one instruction line (operands named field=AP)."""
    out = []
    op = text.split()[0]
    if op == "dma_copy":
        desc = re.search(r"desc=(\S+)", text).group(1)
        for field, ap in dma_table.get(desc, []):
            for m in AP_RE.finditer(ap):
                sp, p0, p1, b0, b1 = _ap_range(m)
                out.append(Access(sp, p0, p1, b0, b1, field == "dst"))
        return out
    for fm in re.finditer(r"(\w+)=((?:sbuf|psum):\w+\[\d+:\d+\](?:\+\d+)?\{[^}]*\})", text):
        field, ap = fm.group(1), fm.group(2)
        sp, p0, p1, b0, b1 = _ap_range(AP_RE.match(ap))
        write = field in WRITE_FIELDS
        out.append(Access(sp, p0, p1, b0, b1, write))
        if write and op == "multiply_moving" and " accumulate" in text:
            out.append(Access(sp, p0, p1, b0, b1, False))
    return out


def _parse(program):
    streams, dmas, engine = {}, {}, None
    for n, raw in enumerate(program.splitlines(), 1):
        code, _, comment = raw.partition(";")
        code = code.strip()
        if not code:
            continue
        if code.startswith(".dma"):
            parts = code.split()
            dmas[parts[1]] = [(f.split("=", 1)[0], f.split("=", 1)[1]) for f in parts[3:] if "=" in f]
        elif code.startswith(".engine"):
            engine = code.split()[1]
            streams[engine] = []
        elif not code.startswith(".") and engine:
            streams[engine].append((code, comment.strip() or f"line {n}"))
    return streams, dmas


def find_races(program: str, limit=20):
    """Races of an .nsasm program text, at most `limit`."""
    streams, dmas = _parse(program)
    engines = sorted(streams)
    agents = list(engines)                           # + one per DMA transfer
    pc = dict.fromkeys(engines, 0)
    clock = {e: {e: 0} for e in engines}             # vector clock of each engine's next instruction
    incs = {}                                        # sem -> [vector clock at that increment]
    pending_dma = []                                 # (sem, value, clock) issued, not yet landed
    events = []                                      # (agent, tick, clock copy, accesses, where)

    def join(a, b):
        for k, v in b.items():
            if a.get(k, -1) < v:
                a[k] = v

    def land(sem, value, vc):
        for _ in range(value):
            incs.setdefault(sem, []).append(dict(vc))

    at_barrier = {}                                  # engine -> clock while it waits at a barrier
    progress = True
    while progress:
        progress = False
        # DMA completions land as soon as issued (their clocks carry the transfer)
        for sem, value, vc in pending_dma:
            land(sem, value, vc)
        pending_dma.clear()
        for e in engines:
            while pc[e] < len(streams[e]):
                text, where = streams[e][pc[e]]
                op = text.split()[0]
                vc = clock[e]
                if op == "sem_wait":
                    sem = re.search(r"sem=(\d+)", text).group(1)
                    m = re.search(r"value=(\d+)", text)
                    need = int(m.group(1)) if m else 1
                    cond = (re.search(r"cond=(\w+)", text) or [None, "is_ge"])[1]
                    have = incs.get(sem, [])
                    if cond in ("is_ge", "is_gt"):
                        need += cond == "is_gt"
                        if len(have) < need:
                            break                     # blocked: try other engines
                        for h in have[:need]:      # the first V to land
                            join(vc, h)
                    else:
                        for h in have:                 # other conditions: everything so far
                            join(vc, h)
                elif op == "sem_signal":
                    sem = re.search(r"sem=(\d+)", text).group(1)
                    m = re.search(r"value=(\d+)", text)
                    land(sem, int(m.group(1)) if m else 1, vc)
                elif op == "dma_copy":
                    agent = f"dma#{len(agents)}"
                    agents.append(agent)
                    dvc = dict(vc)
                    dvc[agent] = 1
                    events.append((agent, 1, dict(dvc), _accesses(text, dmas), f"{e} {text.split()[1]} ({where})"))
                    sem = re.search(r"sem=(\d+)", text)
                    if sem:
                        m = re.search(r"value=(\d+)", text)
                        pending_dma.append((sem.group(1), int(m.group(1)) if m else 1, dvc))
                elif op == "barrier":
                    # every engine with a stream meets here; all see each other's past
                    at_barrier[e] = vc
                    if len(at_barrier) < len(engines):
                        break
                    met = {}
                    for c in at_barrier.values():
                        join(met, c)
                    for x, c in at_barrier.items():
                        join(c, met)
                        if x != e:                   # the others move past their barrier
                            c[x] = c.get(x, 0) + 1
                            pc[x] += 1
                    at_barrier.clear()
                elif op not in ("end", "nop"):
                    acc = _accesses(text, dmas)
                    if acc:
                        events.append((e, vc[e], dict(vc), acc, f"{e} {op} ({where})"))
                vc[e] = vc.get(e, 0) + 1
                pc[e] += 1
                progress = True
            if pending_dma:
                progress = True
    races = []

    def before(a, b):
        agent, tick = a[0], a[1]
        return b[2].get(agent, -1) >= tick + (0 if agent.startswith("dma#") else 1) or \
            (agent == b[0] and tick < b[1])

    for i in range(len(events)):
        for j in range(i + 1, len(events)):
            a, b = events[i], events[j]
            if a[0] == b[0]:
                continue
            for x in a[3]:
                for y in b[3]:
                    if (x.write or y.write) and x.space == y.space and x.p0 < y.p1 and y.p0 < x.p1 \
                            and x.b0 < y.b1 and y.b0 < x.b1:
                        if not before(a, b) and not before(b, a):
                            races.append(Race(a[4], b[4], x.space,
                                              f"partitions [{max(x.p0, y.p0)}, {min(x.p1, y.p1)}), bytes "
                                              f"[{max(x.b0, y.b0)}, {min(x.b1, y.b1)})"))
                            if len(races) >= limit:
                                return races
                        break
                else:
                    continue
                break
    blocked = [e for e in engines if pc[e] < len(streams[e])]
    if blocked:
        races.append(Race(", ".join(f"{e} at {streams[e][pc[e]][1]}" for e in blocked), "", "semaphores",
                          "these engines wait for signals that never come (deadlock)"))
    return races


def main(argv=None):
    """python3 -m neuronsim.nki.race PROG.nsasm...: exit 1 if any has a race."""
    import sys
    paths = (argv if argv is not None else sys.argv[1:])
    if not paths:
        print("usage: python3 -m neuronsim.nki.race PROG.nsasm...", file=sys.stderr)
        return 2
    bad = 0
    for p in paths:
        with open(p, encoding="utf-8") as f:
            races = find_races(f.read())
        for r in races:
            print(f"{p}: {r}")
        bad += bool(races)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
