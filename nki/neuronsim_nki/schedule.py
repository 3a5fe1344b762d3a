"""Instruction scheduling, as the hardware compiler does it: the traced
instructions in an order that keeps every dependency but lets an engine run
independent work (the next iteration of an affine_range loop) while an
instruction waits for the result of the one before it.

Why: a compute instruction's result is readable ~100 cycles after it issues
(HW: "static overhead for dependent or tiny instructions"), so an engine
running a chain of dependent instructions in program order idles between
them; the published profiles of kernels whose loop iterations are
independent show no such gaps (Mamba v2: VectorE active 99.63%, SDK
nki/guides/tutorials/fused_mamba.rst, figure mamba_v2).

List scheduling over the dependency graph with a rough timing estimate
(engine clocks, max(min_ii, N) per instruction, a result readable
static_overhead cycles after it issues, DMA at the engines' rate after the
descriptor latency: the chip row's figures, neuronsim.chip_info); ties keep
program order, so the result is
deterministic.  Only VectorE and ScalarE instructions move relative to each
other: TensorE's LoadStationary / MultiplyMoving pairs and accumulation
groups, GpSimd, the PRNG state and DMA triggers keep their program order per
engine."""
from __future__ import annotations

import heapq

REORDERED = ("vector", "scalar")
KEEP_ORDER_OPS = ("rng", "rand_set_state", "rand_get_state", "sem_signal", "sem_wait")


def _elems(ins):
    """Largest per-partition element count among the on-chip operands
    (bytes / 4: an estimate, enough to rank instructions)."""
    n = 1
    for r in ins.reads + ins.writes:
        if r[0] != "hbm":
            n = max(n, (r[5] - r[4]) // 4)
    return n


def _cost_ns(ins, chip, dma_rate):
    clocks = chip["clock_mhz"]
    if ins.dma is not None:
        b = 0
        for r in ins.writes:
            b = max(b, (r[5] - r[4]) * max(1, r[3] - r[2]))
        return 50.0, chip["dma_issue_latency_ps"] / 1000.0 + b / dma_rate   # issue, completion
    cyc = max(chip["min_ii"], _elems(ins))
    if ins.text.startswith("tensor_tensor") and len(ins.reads) >= 2:
        cyc *= 2
    ns = cyc * 1000.0 / clocks.get(ins.engine, 1000)
    return ns, ns + chip["static_overhead"] * 1000.0 / clocks.get(ins.engine, 1000)


def schedule(instrs, chip):
    """The instructions in scheduled order (a permutation of instrs), for the
    chip row `chip` (neuronsim.chip_info)."""
    dma_bytes_per_ns = chip["dma_engines"] * chip["dma_engine_bytes_per_second"] / 1e9
    n = len(instrs)
    pos = {id(ins): k for k, ins in enumerate(instrs)}
    succ = [[] for _ in range(n)]
    npred = [0] * n
    last_on = {}
    for k, ins in enumerate(instrs):
        preds = {pos[id(d)] for d in ins.deps if id(d) in pos}
        # program order kept where moving would change meaning
        keep = ins.engine not in REORDERED or ins.text.split(" ", 1)[0] in KEEP_ORDER_OPS
        key = ins.engine if keep else None
        if key is not None and key in last_on:
            preds.add(last_on[key])
        if ins.dma is not None and "dma" in last_on:
            preds.add(last_on["dma"])        # triggers in program order (DMA slot reuse)
        if key is not None:
            last_on[key] = k
        if ins.dma is not None:
            last_on["dma"] = k
        preds.discard(k)
        npred[k] = len(preds)
        for p in preds:
            succ[p].append(k)
    ready_at = [0.0] * n                     # when its inputs are available
    engine_free = {}
    ready = {}                               # engine -> heap of (ready_at, index)
    for k in range(n):
        if npred[k] == 0:
            heapq.heappush(ready.setdefault(instrs[k].engine, []), (0.0, k))
    order = []
    while len(order) < n:
        best = None
        for e, h in ready.items():
            if not h:
                continue
            t = max(engine_free.get(e, 0.0), h[0][0])
            if best is None or (t, h[0][1]) < best[0]:
                best = ((t, h[0][1]), e)
        (start, k), e = best
        heapq.heappop(ready[e])
        ins = instrs[k]
        busy, done = _cost_ns(ins, chip, dma_bytes_per_ns)
        engine_free[e] = start + busy
        order.append(ins)
        for s in succ[k]:
            ready_at[s] = max(ready_at[s], start + done)
            npred[s] -= 1
            if npred[s] == 0:
                heapq.heappush(ready.setdefault(instrs[s].engine, []), (ready_at[s], s))
    return order
