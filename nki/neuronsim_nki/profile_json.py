"""A simulated kernel run as the hardware profiler summarises one: the
fields of the Summary table of Neuron Explorer's profile schema (AWS Neuron
SDK, tools/neuron-explorer/profile-schema-reference.rst, schema 7.4.0), with
the same names and units (seconds, bytes, percent), so a kernel-optimisation
loop that reads those fields from `neuron-explorer` / `neuron-profile` output
reads them here without hardware.  Only fields the simulator measures are
written; docs/nki.md lists them."""
from __future__ import annotations

import json
import os
import re

import neuronsim
from neuronsim import ENGINES

SCHEMA = "neuronsim-profile-summary/1"
_SPILL = re.compile(r"^; spill_save_bytes=(\d+) spill_reload_bytes=(\d+)$", re.M)


def summary(result, kernel, target):
    """The Summary fields of one KernelResult (a kernel `kernel` run on
    `target`).  An LNC=2 run's two cores count as one logical core, as its
    profile does: times over the run, activity as the cores' mean share,
    bytes, instructions and FLOPs summed."""
    cores = result.cores or [result.stats]
    total_s = result.latency_us * 1e-6

    def total(key):
        return sum(st[key] for st in cores)
    spills = [m for p in (result.programs or [result.program]) if p for m in [_SPILL.search(p[:4096])] if m]
    peak = neuronsim.chip_info(target)["peak_flops_per_second"] * len(cores)
    out = {
        "total_time": total_s,
        "dma_active_time": total_s * result.dma_active_percent / 100.0,
        "dma_active_time_percent": result.dma_active_percent,
        "dma_transfer_count": total("dma_transfers"),
        "dma_transfer_total_bytes": total("dma_bytes"),
        "hbm_read_bytes": total("hbm_read_bytes"),
        "hbm_write_bytes": total("hbm_write_bytes"),
        "sbuf_read_bytes": total("sbuf_read_bytes"),
        "sbuf_write_bytes": total("sbuf_write_bytes"),
        "psum_read_bytes": total("psum_read_bytes"),
        "psum_write_bytes": total("psum_write_bytes"),
        "spill_save_bytes": sum(int(m.group(1)) for m in spills),
        "spill_reload_bytes": sum(int(m.group(2)) for m in spills),
        "hardware_flops": total("matmul_flops"),
        "matmul_instruction_count": total("matmul_instructions"),
        "hfu_estimated_percent": 100.0 * total("matmul_flops") / (peak * total_s) if total_s else 0.0,
    }
    for e in ENGINES:
        pct = result.engine_active_percent[e]
        out[f"{e}_engine_active_time"] = total_s * pct / 100.0
        out[f"{e}_engine_active_time_percent"] = pct
        out[f"{e}_engine_instruction_count"] = sum(st["engine_instructions"][e] for st in cores)
    return {"schema": SCHEMA, "kernel": kernel, "target": target, "simulated": True,
            "instruction_count": total("instructions"), "summary": out}


def runs(summaries):
    """Several runs' summaries as one document (neuronsim nki run --profile-json)."""
    return {"schema": SCHEMA, "runs": list(summaries)}


def write(path, doc):
    """Writes doc (a summary(), or runs()) as JSON at path, whole or not at all."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
            fh.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
