/*
 * sim_speed.c -- how fast the simulator runs, as a table:
 *   program, mode, host seconds, simulated time, simulated cycles per host
 *   second (engine clock of the busiest engine), and in full mode the ratio
 *   of host time to plain OpenBLAS doing the same matmul FLOPs.
 * Programs: matmul-heavy (back-to-back bf16 128x128x512 LoadStationary +
 * MultiplyMoving) and vector-heavy (tensor_scalar / tensor_tensor over
 * 128 x 512 fp32 tiles).  Usage: bench/sim_speed [REPEAT]
 */
#define _POSIX_C_SOURCE 200809L
#include "neuronsim/isa.h"
#include "neuronsim/runtime.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char *matmul_text(int n_mm)
{
	size_t cap = (size_t)n_mm * 200 + 256, len = 0;
	char *t = malloc(cap);
	len += (size_t)snprintf(t + len, cap - len, ".target trn2\n.engine tensor\n");
	for (int i = 0; i < n_mm; i++)
		len += (size_t)snprintf(t + len, cap - len,
					"load_stationary stationary=sbuf:bf16[0:128]+%d{1x128}\n"
					"multiply_moving dst=psum:fp32[0:128]+%d{1x512} moving=sbuf:bf16[0:128]+%d{1x512}%s\n",
					(i % 4) * 256, (i % 8) * 2048, 1024 + (i % 16) * 1024,
					i >= 8 ? " accumulate" : "");
	snprintf(t + len, cap - len, "end\n");
	return t;
}

static char *vector_text(int n)
{
	size_t cap = (size_t)n * 260 + 256, len = 0;
	char *t = malloc(cap);
	len += (size_t)snprintf(t + len, cap - len, ".target trn2\n.engine vector\n");
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(t + len, cap - len, i % 2
			? "tensor_tensor dst=sbuf:fp32[0:128]+%d{1x512} src0=sbuf:fp32[0:128]{1x512} src1=sbuf:fp32[0:128]+2048{1x512} op=add\n"
			: "tensor_scalar dst=sbuf:fp32[0:128]+%d{1x512} src=sbuf:fp32[0:128]{1x512} op0=multiply scalar0=1.5 op1=add scalar1=0.5\n",
			4096 + (i % 32) * 2048);
	snprintf(t + len, cap - len, "end\n");
	return t;
}

static int load(const char *text, nsim_model **m)
{
	isa_program *p = NULL;
	isa_diag d;
	uint8_t *bin;
	size_t len;
	if (isa_asm(text, strlen(text), &p, &d) || isa_program_encode(p, &bin, &len, &d)) {
		fprintf(stderr, "sim_speed: %s\n", d.msg);
		return -1;
	}
	isa_program_free(p);
	int rc = nsim_load(bin, len, 0, m) ? -1 : 0;
	free(bin);
	return rc;
}

static double blas_seconds(int n_mm)
{
	float *a = calloc(128 * 128, 4), *b = calloc(128 * 512, 4), *c = calloc(128 * 512, 4);
	for (int i = 0; i < 128 * 512; i++)
		b[i] = (float)(i % 7) * 0.25f;
	for (int i = 0; i < 128 * 128; i++)
		a[i] = (float)(i % 5) * 0.5f;
	double t0 = now();
	for (int i = 0; i < n_mm; i++)
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, 128, 512, 128, 1.0f, a, 128, b, 512,
			    i ? 1.0f : 0.0f, c, 512);
	double t = now() - t0;
	free(a), free(b), free(c);
	return t;
}

int main(int argc, char **argv)
{
	int repeat = argc > 1 ? atoi(argv[1]) : 1;
	if (repeat < 1)
		repeat = 1;
	const int n_mm = 2000 * repeat, n_vec = 4000 * repeat;
	static const char *modes[] = { "full", "timing", "functional" };
	struct { const char *name; char *text; int mhz; } progs[] = {
		{ "matmul-heavy", matmul_text(n_mm), 2400 },   /* TensorE clock, trn2 */
		{ "vector-heavy", vector_text(n_vec), 960 },   /* VectorE clock, trn2 */
	};
	/* the simulator runs OpenBLAS on one thread (fixed summation order); the
	 * baseline gets the same */
	openblas_set_num_threads(1);
	double blas = blas_seconds(n_mm);

	printf("%-13s %-10s %8s %8s %12s %14s %10s\n", "program", "mode", "instrs", "host_s",
	       "sim_us", "sim_cycles/s", "vs_blas");
	for (int pi = 0; pi < 2; pi++) {
		for (int mi = 0; mi < 3; mi++) {
			nsim_config cfg = { "trn2", mi, 0, 0 };
			if (nsim_init_config(&cfg)) {
				fprintf(stderr, "sim_speed: %s\n", nsim_last_error());
				return 1;
			}
			nsim_model *m;
			if (load(progs[pi].text, &m))
				return 1;
			double t0 = now();
			nsim_status st = nsim_execute(m, NULL, NULL);
			double host = now() - t0;
			nsim_exec_stats s;
			nsim_model_stats(m, &s);
			if (st) {
				fprintf(stderr, "sim_speed: %s\n", nsim_last_error());
				return 1;
			}
			double cycles = (double)s.total_ps * progs[pi].mhz / 1e6;
			char ratio[32] = "-";
			if (pi == 0 && mi == 0)
				snprintf(ratio, sizeof(ratio), "%.2fx", host / blas);
			printf("%-13s %-10s %8llu %8.3f %12.1f %14.3g %10s\n", progs[pi].name, modes[mi],
			       (unsigned long long)s.instructions, host, s.total_ps / 1e6,
			       mi == 2 ? 0.0 : cycles / host, ratio);
			nsim_unload(m);
			nsim_close();
		}
	}
	printf("\nplain OpenBLAS sgemm, %d x (128x128x512), 1 thread: %.3f s\n", n_mm, blas);
	printf("sim_cycles/s counts cycles of the program's engine clock (TensorE 2.4 GHz,"
	       " VectorE 0.96 GHz); functional mode has no simulated time.\n");
	free(progs[0].text);
	free(progs[1].text);
	return 0;
}
