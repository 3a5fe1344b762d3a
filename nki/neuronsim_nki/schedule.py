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
engine, as does everything traced in a loop the kernel marks
nki.compiler.no_reorder() (SDK: an OperationOrderGuard "to prevent
operation reordering")."""
from __future__ import annotations

import heapq

REORDERED = ("vector", "scalar")
KEEP_ORDER_OPS = ("rng", "rand_set_state", "rand_get_state", "sem_signal", "sem_wait")


def _costs(chip):
    """cost(ins) -> (issue ns, completion ns): the estimate schedule() ranks
    by.  Compute: max(min_ii, the largest on-chip operand's per-partition
    bytes / 4 -- enough to rank instructions) cycles at the engine's clock,
    twice that for a two-input tensor_tensor, the result readable
    static_overhead cycles later; DMA: issued in 50 ns, landed after the
    descriptor latency plus its bytes at the DMA engines' rate."""
    clocks = chip["clock_mhz"]
    min_ii, overhead = chip["min_ii"], chip["static_overhead"]
    dma_latency = chip["dma_issue_latency_ps"] / 1000.0
    dma_rate = chip["dma_engines"] * chip["dma_engine_bytes_per_second"] / 1e9     # bytes per ns

    def cost(ins):
        if ins.dma is not None:
            b = 0
            for r in ins.writes:
                b = max(b, (r[5] - r[4]) * max(1, r[3] - r[2]))
            return 50.0, dma_latency + b / dma_rate
        n = 1
        for rs in (ins.reads, ins.writes):
            for r in rs:
                if r[0] != "hbm" and (r[5] - r[4]) // 4 > n:
                    n = (r[5] - r[4]) // 4
        cyc = n if n > min_ii else min_ii
        if len(ins.reads) >= 2 and ins.text.startswith("tensor_tensor"):
            cyc *= 2
        per = 1000.0 / clocks.get(ins.engine, 1000)
        return cyc * per, (cyc + overhead) * per
    return cost


def schedule(instrs, chip):
    """The instructions in scheduled order (a permutation of instrs), for the
    chip row `chip` (neuronsim.chip_info)."""
    cost = _costs(chip)
    n = len(instrs)
    pos = {id(ins): k for k, ins in enumerate(instrs)}
    succ = [[] for _ in range(n)]
    npred = [0] * n
    last_on = {}
    for k, ins in enumerate(instrs):
        preds = {pos[i] for i in map(id, ins.deps) if i in pos}
        # program order kept where moving would change meaning
        keep = ins.engine not in REORDERED or ins.ordered or ins.text.split(" ", 1)[0] in KEEP_ORDER_OPS
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
    heaps = list(ready.items())
    order = []
    push, pop = heapq.heappush, heapq.heappop
    while len(order) < n:
        best = None
        for e, h in heaps:
            if h:
                t = engine_free.get(e, 0.0)
                head = h[0]
                if head[0] > t:
                    t = head[0]
                if best is None or t < best[0] or (t == best[0] and head[1] < best[1]):
                    best = (t, head[1], e, h)
        start, k, e, h = best
        pop(h)
        ins = instrs[k]
        busy, done = cost(ins)
        engine_free[e] = start + busy
        order.append(ins)
        done += start
        for s in succ[k]:
            if done > ready_at[s]:
                ready_at[s] = done
            npred[s] -= 1
            if npred[s] == 0:
                e2 = instrs[s].engine
                h2 = ready.get(e2)
                if h2 is None:
                    h2 = ready[e2] = []
                    heaps.append((e2, h2))
                push(h2, (ready_at[s], s))
    return order
