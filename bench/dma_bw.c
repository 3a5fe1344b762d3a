/*
 * dma_bw.c -- simulated DMA bandwidth as a table: one core with 1..16 DMA
 * engines busy (HBM -> SBUF), then 1..N cores with all 16 engines copying
 * HBM -> HBM, against the published limits (per engine 27.2 GB/s
 * theoretical, 17/23/33 B/ns sustained; chip HBM 820 GB/s, 2.9 TB/s,
 * 4.9 TB/s).  Usage: bench/dma_bw [TARGET] (a row of the ISA's target table)
 */
#include "neuronsim/isa.h"
#include "neuronsim/runtime.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint8_t *program(const char *target, int rows, bool to_hbm, size_t *len)
{
	char dst[96], text[2048];
	if (to_hbm)
		snprintf(dst, sizeof(dst), "hbm(b):fp32[4096x%d]{1x4096}", rows);
	else
		snprintf(dst, sizeof(dst), "sbuf:fp32[0:%d]{1x4096}", rows);
	snprintf(text, sizeof(text),
		 ".target %s\n.semaphores 1\n.tensor a input fp32 [%d,4096]\n.tensor b output fp32 [%d,4096]\n"
		 ".dma c direct dst=%s src=hbm(a):fp32[4096x%d]{1x4096}\n.engine sync\n"
		 "dma_copy desc=c queue=0 sem=0\ndma_copy desc=c queue=1 sem=0\n"
		 "dma_copy desc=c queue=2 sem=0\ndma_copy desc=c queue=3 sem=0\n"
		 "sem_wait sem=0 value=4\nend\n",
		 target, rows, rows, dst, rows);
	isa_program *p = NULL;
	isa_diag d;
	uint8_t *bin = NULL;
	if (isa_asm(text, strlen(text), &p, &d) || isa_program_encode(p, &bin, len, &d)) {
		fprintf(stderr, "dma_bw: %s\n%s", d.msg, text);
		exit(1);
	}
	isa_program_free(p);
	return bin;
}

static double run(uint8_t *bin, size_t len, int cores, int rows)
{
	nsim_model *m[64] = { 0 };
	nsim_tensor_set *in[64] = { 0 }, *out[64] = { 0 };
	nsim_tensor *t[128] = { 0 };
	for (int c = 0; c < cores; c++) {
		if (nsim_load(bin, len, c, &m[c]) ||
		    nsim_tensor_allocate(c, (uint64_t)rows * 4096 * 4, "a", &t[2 * c]) ||
		    nsim_tensor_allocate(c, (uint64_t)rows * 4096 * 4, "b", &t[2 * c + 1])) {
			fprintf(stderr, "dma_bw: %s\n", nsim_last_error());
			exit(1);
		}
		nsim_tensor_set_create(&in[c]);
		nsim_tensor_set_create(&out[c]);
		nsim_tensor_set_add(in[c], "a", t[2 * c]);
		nsim_tensor_set_add(out[c], "b", t[2 * c + 1]);
	}
	if (nsim_execute_multi(m, (const nsim_tensor_set *const *)in, out, cores)) {
		fprintf(stderr, "dma_bw: %s\n", nsim_last_error());
		exit(1);
	}
	uint64_t bytes = 0, span = 0;
	for (int c = 0; c < cores; c++) {
		nsim_exec_stats s;
		nsim_model_stats(m[c], &s);
		bytes += s.dma_bytes;
		span = s.total_ps > span ? s.total_ps : span;
		nsim_unload(m[c]);
		nsim_tensor_set_free(in[c]);
		nsim_tensor_set_free(out[c]);
		nsim_tensor_free(t[2 * c]);
		nsim_tensor_free(t[2 * c + 1]);
	}
	return bytes / ((double)span * 1e-12) * 1e-9;   /* GB/s over the whole run */
}

int main(int argc, char **argv)
{
	const char *target = argc > 1 ? argv[1] : "trn2";
	nsim_config cfg = { target, NSIM_MODE_TIMING, 0, 0 };
	if (argc > 2 || nsim_init_config(&cfg)) {
		char known[128];
		isa_target_list(known, sizeof(known), "|");
		fprintf(stderr, "dma_bw: %s\nusage: dma_bw [%s]\n", argc > 2 ? "one target at most" : nsim_last_error(),
			known);
		return 1;
	}
	printf("%s: one core, 4 x (rows x 16 KiB) HBM -> SBUF, one row per DMA engine\n", target);
	printf("%8s %12s %14s\n", "engines", "GB/s", "GB/s/engine");
	for (int rows = 1; rows <= 16; rows *= 2) {
		size_t len;
		uint8_t *bin = program(target, rows, false, &len);
		double bw = run(bin, len, 1, rows);
		printf("%8d %12.1f %14.2f\n", rows, bw, bw / rows);
		free(bin);
	}
	printf("\n%s: N cores, each 4 x (128 x 16 KiB) HBM -> HBM on 16 DMA engines"
	       " (each byte crosses HBM twice)\n", target);
	printf("%8s %12s %18s\n", "cores", "copy GB/s", "HBM traffic GB/s");
	for (int c = 1; c <= nsim_core_count(); c *= 2) {
		size_t len;
		uint8_t *bin = program(target, 128, true, &len);
		double bw = run(bin, len, c, 128);
		printf("%8d %12.1f %18.1f\n", c, bw, 2 * bw);
		free(bin);
	}
	printf("\n(times include the ~1.3 us DMA issue latency once per run)\n");
	nsim_close();
	return 0;
}
