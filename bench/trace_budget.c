/*
 * trace_budget.c -- how large a trace of a long run gets under the default
 * budget.  Drives the trace writer with the event mix of the eager Llama
 * example (per 19.2 us of simulated time: one 15 us launch gap, one program
 * of 5 engine instructions and 3 DMA transfers, HBM counter samples) for
 * the given simulated seconds, at each starting detail, and prints the file
 * size, where the writer changed detail and the host time.
 * Usage: bench/trace_budget [SECONDS (default 60)] [DIR (default /tmp)] [--keep]
 * (--keep leaves the files, e.g. to time `neuronsim trace summary` on them)
 */
#include "neuronsim/isa.h"
#include "writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 60.0;
	const char *dir = argc > 2 ? argv[2] : "/tmp";
	int keep = argc > 3 && !strcmp(argv[3], "--keep");
	if (seconds <= 0 || seconds > 3600) {
		fprintf(stderr, "usage: trace_budget [SECONDS in (0, 3600]] [DIR]\n");
		return 2;
	}
	static const char *details[] = { "instruction", "program", "utilization" };
	static const char *text = "tensor_tensor dst=sbuf:fp32[0:128]{1x64} src0=sbuf:fp32[0:128]{1x64} "
				  "src1=sbuf:fp32[0:128]+256{1x64} op=add";
	uint64_t period = 19200000, program_ps = 4200000, end = (uint64_t)(seconds * 1e12);
	printf("simulated run %.0f s, default budget %llu MB, eager Llama-like events\n", seconds,
	       (unsigned long long)(TRC_DEFAULT_MAX_BYTES >> 20));
	printf("%-12s %10s %12s %14s %10s\n", "detail", "MB", "programs", "events", "host s");
	for (int d = 0; d < 3; d++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/trace_budget_%s.pftrace", dir, details[d]);
		trc_writer *w = NULL;
		trc_options o = { TRC_FORMAT_PERFETTO, d, 0, "trn2", 78643200000000ull, 2900000000000ull };
		if (trc_writer_open(&w, path, &o)) {
			perror(path);
			return 1;
		}
		double t0 = now_s();
		uint64_t programs = 0, events = 0;
		for (uint64_t t = 15000000; t + program_ps < end; t += period, programs++) {
			for (int i = 0; i < 5; i++) {
				uint64_t s = t + 200000 + (uint64_t)i * 700000;
				trc_instr_event e = { 0, 1 + (i & 1) * 2, i, ISA_OP_tensor_tensor, s, s + 500000 + (programs % 13) * 1000,
						      98304, 8192, 0, text };
				w->obs.instr(w->obs.ctx, &e);
				events++;
			}
			for (int q = 0; q < 3; q++) {
				uint64_t s = t + (uint64_t)q * 1300000;
				trc_dma_event e = { 0, q, 16, (uint32_t)q, "load", s, s + 900000, 32768, q < 2 ? 32768 : 0,
						    q == 2 ? 32768 : 0 };
				w->obs.dma(w->obs.ctx, &e);
				events++;
			}
			for (int k = 0; k < 6; k++) {
				trc_counter_event c = { -1, k & 1 ? "HBM write GB/s" : "HBM read GB/s",
							t + (uint64_t)(k / 2) * 1000000, (double)((programs + k) % 50) };
				w->obs.counter(w->obs.ctx, &c);
				events++;
			}
			trc_program_event p = { 0, "aten::add", "program 12", t, t + program_ps, 98304, 0 };
			w->obs.program(w->obs.ctx, &p);
			events++;
		}
		if (trc_writer_close(w)) {
			fprintf(stderr, "%s: write error\n", path);
			return 1;
		}
		struct stat st;
		stat(path, &st);
		printf("%-12s %10.1f %12llu %14llu %10.2f\n", details[d], (double)st.st_size / 1048576.0,
		       (unsigned long long)programs, (unsigned long long)events, now_s() - t0);
		if (!keep)
			remove(path);
	}
	return 0;
}
