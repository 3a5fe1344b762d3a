/*
 * summary.c -- the summary JSON (see summary.h); moved here from sim/ so
 * everything users read is written by traces/.
 *
 * MFU is model FLOPs over (time x TensorE's bf16 peak, 2 x 128 x 128 per
 * cycle); MBU is HBM bytes over (time x the chip's HBM bandwidth).  Model
 * and hardware FLOPs are the same here: the simulator counts the matmul
 * work the program does, with nothing recomputed.
 */
#include "summary.h"

#include "writer.h"

#include "neuronsim/isa.h"

#include <inttypes.h>
#include <stdbool.h>

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

int trc_summary_write(FILE *f, const trc_device *dev, const nsim_exec_stats *s, uint64_t span_ps,
		      uint64_t programs, const trc_summary_row *rows, int nrows)
{
	double secs = (double)span_ps * 1e-12;
	double peak = (double)dev->peak_flops_per_second;
	double hbm_peak = (double)dev->hbm_bytes_per_second;
	fprintf(f, "{\n  \"target\": \"%s\",\n", dev->target);
	fprintf(f, "  \"total_time\": %.12g,\n", secs);
	fprintf(f, "  \"total_time_ps\": %" PRIu64 ",\n", span_ps);
	fprintf(f, "  \"device_busy_time_ps\": %" PRIu64 ",\n", s->total_ps);
	fprintf(f, "  \"program_count\": %" PRIu64 ",\n", programs);
	fprintf(f, "  \"neuroncore_cycle_count\": %" PRIu64 ",\n",
		span_ps * dev->tensor_clock_mhz / 1000000u);
	fprintf(f, "  \"model_flops\": %" PRIu64 ",\n  \"hardware_flops\": %" PRIu64 ",\n", s->matmul_flops,
		s->matmul_flops);
	fprintf(f, "  \"peak_flops_per_second\": %.12g,\n", peak);
	fprintf(f, "  \"mfu_estimated_percent\": %.6g,\n",
		secs > 0 ? 100.0 * (double)s->matmul_flops / secs / peak : 0.0);
	fprintf(f, "  \"mbu_estimated_percent\": %.6g,\n",
		secs > 0 ? 100.0 * (double)(s->hbm_read_bytes + s->hbm_write_bytes) / secs / hbm_peak : 0.0);
	fprintf(f, "  \"hbm_read_bytes\": %" PRIu64 ",\n  \"hbm_write_bytes\": %" PRIu64 ",\n",
		s->hbm_read_bytes, s->hbm_write_bytes);
	fprintf(f, "  \"sbuf_read_bytes\": %" PRIu64 ",\n  \"sbuf_write_bytes\": %" PRIu64 ",\n",
		s->sbuf_read_bytes, s->sbuf_write_bytes);
	fprintf(f, "  \"psum_read_bytes\": %" PRIu64 ",\n  \"psum_write_bytes\": %" PRIu64 ",\n",
		s->psum_read_bytes, s->psum_write_bytes);
	fprintf(f, "  \"dma_transfer_count\": %" PRIu64 ",\n  \"dma_transfer_total_bytes\": %" PRIu64 ",\n",
		s->dma_transfers, s->dma_bytes);
	/* the profiler's definition: time when at least one DMA packet is
	 * transferring (profile-schema-reference.rst), not busy time summed
	 * over the engines; that average stays as dma_engine_utilization */
	fprintf(f, "  \"dma_active_time_percent\": %.6g,\n", pct(s->dma_active_ps, span_ps));
	fprintf(f, "  \"dma_engine_utilization_percent\": %.6g,\n",
		span_ps && dev->dma_engines
			? 100.0 * (double)s->dma_busy_ps / ((double)span_ps * dev->dma_engines) : 0.0);
	fprintf(f, "  \"matmul_instruction_count\": %" PRIu64 ",\n", s->matmul_instructions);
	for (int k = 0; k < ISA_NUM_ENGINES; k++) {
		fprintf(f, "  \"%s_engine_active_time_percent\": %.6g,\n", isa_engine_name(k),
			pct(s->engine_busy_ps[k], span_ps));
		fprintf(f, "  \"%s_engine_active_time_ps\": %" PRIu64 ",\n", isa_engine_name(k),
			s->engine_busy_ps[k]);
		fprintf(f, "  \"%s_engine_instruction_count\": %" PRIu64 ",\n", isa_engine_name(k),
			s->engine_instructions[k]);
	}
	fprintf(f, "  \"instruction_count\": %" PRIu64 ",\n", s->instructions);
	/* the profiler's per-opcode table: engine, opcode, count, busy time */
	fprintf(f, "  \"opcodes\": [");
	bool first = true;
	for (int k = 0; k < ISA_NUM_ENGINES; k++)
		for (int op = 0; op < ISA_NUM_OPS; op++) {
			if (!s->op_instructions[k][op])
				continue;
			fprintf(f, "%s\n    {\"engine\": \"%s\", \"opcode\": \"%s\", \"instruction_count\": %" PRIu64
				", \"instruction_time_ns\": %.3f}",
				first ? "" : ",", isa_engine_name(k), isa_op_name(op), s->op_instructions[k][op],
				(double)s->op_busy_ps[k][op] / 1000.0);
			first = false;
		}
	fprintf(f, "\n  ],\n  \"programs\": [");
	for (int i = 0; i < nrows; i++) {
		char label[sizeof(rows[i].label) * 6];
		trc_json_escape(label, sizeof(label), rows[i].label);
		fprintf(f, "%s\n    {\"label\": \"%s", i ? "," : "", label);
		fprintf(f, "\", \"count\": %" PRIu64 ", \"time_ns\": %.3f, \"flops\": %" PRIu64
			", \"hbm_bytes\": %" PRIu64 "}",
			rows[i].count, (double)rows[i].time_ps / 1000.0, rows[i].flops, rows[i].hbm_bytes);
	}
	fprintf(f, "%s]\n}\n", nrows ? "\n  " : "");
	return ferror(f) ? -1 : 0;
}
