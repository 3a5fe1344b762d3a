/*
 * summary.c -- the summary JSON (see summary.h).
 *
 * MFU is model FLOPs over (time x TensorE's bf16 peak, 2 x 128 x 128 per
 * cycle); MBU is HBM bytes over (time x the chip's HBM bandwidth).  Model
 * and hardware FLOPs are the same here: the simulator counts the matmul
 * work the program does, with nothing recomputed.
 */
#include "summary.h"

#include "writer.h"

#include <inttypes.h>
#include <stdbool.h>

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

uint64_t nsim_summary_peak_flops(const dm_chip *chip)
{
	return 2ull * 128 * 128 * chip->clock_mhz[ISA_ENGINE_TENSOR] * 1000000ull;
}

int nsim_summary_write(FILE *f, const dm_chip *chip, const nsim_exec_stats *s, uint64_t span_ps,
		       uint64_t programs, const nsim_summary_row *rows, int nrows)
{
	static const char *names[] = { "tensor", "vector", "scalar", "gpsimd", "sync" };
	double secs = (double)span_ps * 1e-12;
	double peak = (double)nsim_summary_peak_flops(chip);
	double hbm_peak = (double)chip->hbm_rate * 1e6;
	fprintf(f, "{\n  \"target\": \"%s\",\n", chip->name);
	fprintf(f, "  \"total_time\": %.12g,\n", secs);
	fprintf(f, "  \"total_time_ps\": %" PRIu64 ",\n", span_ps);
	fprintf(f, "  \"device_busy_time_ps\": %" PRIu64 ",\n", s->total_ps);
	fprintf(f, "  \"program_count\": %" PRIu64 ",\n", programs);
	fprintf(f, "  \"neuroncore_cycle_count\": %" PRIu64 ",\n",
		span_ps * chip->clock_mhz[ISA_ENGINE_TENSOR] / 1000000u);
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
	/* busy time summed over the DMA engines, over the span on all of them */
	fprintf(f, "  \"dma_active_time_percent\": %.6g,\n",
		span_ps && chip->dma_engines
			? 100.0 * (double)s->dma_busy_ps / ((double)span_ps * chip->dma_engines) : 0.0);
	fprintf(f, "  \"matmul_instruction_count\": %" PRIu64 ",\n", s->matmul_instructions);
	for (int k = 0; k < ISA_NUM_ENGINES; k++) {
		fprintf(f, "  \"%s_engine_active_time_percent\": %.6g,\n", names[k],
			pct(s->engine_busy_ps[k], span_ps));
		fprintf(f, "  \"%s_engine_active_time_ps\": %" PRIu64 ",\n", names[k], s->engine_busy_ps[k]);
		fprintf(f, "  \"%s_engine_instruction_count\": %" PRIu64 ",\n", names[k],
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
				first ? "" : ",", names[k], isa_op_name(op), s->op_instructions[k][op],
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

void nsim_stats_add(nsim_exec_stats *dst, const nsim_exec_stats *src)
{
	/* every field is a uint64_t counter: add them as an array */
	uint64_t *d = (uint64_t *)dst;
	const uint64_t *s = (const uint64_t *)src;
	for (size_t i = 0; i < sizeof(*dst) / sizeof(uint64_t); i++)
		d[i] += s[i];
}
