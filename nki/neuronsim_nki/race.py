"""Race detector for .nsasm programs: any two instructions on different
engines (DMA transfers count as their own agents) that touch overlapping
SBUF/PSUM bytes, one of them writing, with no semaphore ordering between
them.

Happens-before comes from the synchronisation the program states:
- program order on each engine; a `barrier` (or `fence`) orders everything
  before it on every engine before everything after it; a fence also sets
  its semaphores back to 0; a `branch` is not followed: a run-time loop's
  body is read once, which covers every iteration because the loop's
  iterations are separated by fences, and its branch back to the fence
  counts as meeting that fence again (the code after the loop runs after it);
- `sem_signal` lands after every earlier instruction of its engine;
- a DMA's completion increment lands after the transfer, which starts after
  everything before its `dma_copy` on the issuing engine;
- `sem_wait sem=S cond=is_ge value=V` waits for V increments of S: the
  first V to land in an execution that lands every DMA as soon as it is
  issued.  That is exact when a semaphore has one producer chain (one
  engine's signals, or DMAs on a slot whose next user waits for the
  previous one, as neuronsim_nki emits) or when V is every increment the
  semaphore gets; with several unordered producers and V short of all of
  them it over-approximates the ordering (it may miss a race there, but
  does not invent one).
Vector clocks over the engines and transfers decide ordering.

The program is read through the C assembler and decoder
(neuronsim.program.decode): which operands an instruction reads and writes
is the ISA's format table's (isa_formats.def roles, multiply_moving's
accumulating destination read too), never a guess from program text.
"""
from __future__ import annotations

from dataclasses import dataclass

from .dtype_keys import SIZES
from neuronsim.program import decode

ON_CHIP = ("sbuf", "psum")
SEM_NONE = 0xFFFFFFFF                                # isa.h ISA_SEM_NONE: no semaphore


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


def _back_to_fence(ins, stream):
    """An unconditional branch back to a fence: a run-time loop's end
    (runtime_loops.py), after which the program goes on past that fence."""
    return ins.op == "branch" and ins.values["a"] == 64 and ins.values["to"] < len(stream) and \
        stream[ins.values["to"]].op == "fence"


def _access(ap, write):
    b0, b1 = ap.byte_range(SIZES.get(ap.dtype, 4))
    return Access(ap.space, ap.start, ap.start + ap.nparts, b0, b1, write)


def _accesses(ins, dma):
    """SBUF/PSUM accesses of one decoded instruction."""
    out = []
    if ins.op == "dma_copy":
        _, mode, aps = dma[ins.values["desc"]]
        used = ("dst", "src") if mode == "direct" else ("dst", "src", "index")
        return [_access(aps[k], k == "dst") for k in used if aps[k].space in ON_CHIP]
    for o in ins.operands:
        if o.ap.space not in ON_CHIP:
            continue
        if o.writes:
            out.append(_access(o.ap, True))
        if o.reads:
            out.append(_access(o.ap, False))
    return out


def _where(ins, source_lines):
    """The instruction's source comment (neuronsim_nki writes the kernel's
    file:line there), else its .nsasm line."""
    if 0 < ins.line <= len(source_lines):
        comment = source_lines[ins.line - 1].partition(";")[2].strip()
        if comment:
            return comment
    return f"line {ins.line}" if ins.line else f"#{ins.index}"


def find_races(program, limit=20):
    """Races of a program (.nsasm text or .nsp bytes), at most `limit`."""
    prog = decode(program)
    source_lines = program.splitlines() if isinstance(program, str) else []
    streams, dmas = prog.streams, prog.dma
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
                ins = streams[e][pc[e]]
                op, where = ins.op, _where(ins, source_lines)
                vc = clock[e]
                if op == "sem_wait":
                    sem, need, cond = ins.values["sem"], ins.values["value"], ins.values["cond"]
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
                    if ins.values.get("op") != "sub":         # a decrement lets no wait through
                        land(ins.values["sem"], ins.values["value"], vc)
                elif op == "dma_copy":
                    agent = f"dma#{len(agents)}"
                    agents.append(agent)
                    dvc = dict(vc)
                    dvc[agent] = 1
                    name = dmas[ins.values["desc"]][0]
                    events.append((agent, 1, dict(dvc), _accesses(ins, dmas), f"{e} desc={name} ({where})"))
                    if ins.values["sem"] != SEM_NONE:
                        pending_dma.append((ins.values["sem"], ins.values["value"], dvc))
                elif op in ("barrier", "fence") or _back_to_fence(ins, streams[e]):
                    # every engine with a stream meets here; all see each other's past
                    # (a loop's branch back to its fence: what follows runs after that fence)
                    at_barrier[e] = vc
                    if len(at_barrier) < len(engines):
                        break
                    if op != "barrier":              # its semaphores start again from 0
                        fence = ins if op == "fence" else streams[e][ins.values["to"]]
                        for sem in [s for s in incs if s < fence.values["sems"]]:
                            del incs[sem]
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
                    acc = _accesses(ins, dmas)
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
        races.append(Race(", ".join(f"{e} at {_where(streams[e][pc[e]], source_lines)}" for e in blocked), "",
                          "semaphores",
                          "these engines wait for signals that never come (deadlock)"))
    return races


def main(argv=None):
    """python3 -m neuronsim_nki.race PROG.nsasm...: exit 1 if any has a race."""
    import sys
    paths = (argv if argv is not None else sys.argv[1:])
    if not paths:
        print("usage: python3 -m neuronsim_nki.race PROG.nsasm...", file=sys.stderr)
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
