/*
 * cli_run.c -- `neuronsim run`: load a program, bind .npy inputs, execute on
 * the simulated core through the runtime API, write outputs, print a summary
 * and optionally write a summary JSON and a trace (Perfetto .pftrace, or
 * Chrome JSON for a .json name).
 *
 * Input files: the tensor's own dtype, or float32 for any float tensor
 * (converted with round-to-nearest-even; this is how bf16, fp8 and tf32 data
 * get in, since NumPy has no such dtypes).  Outputs: the tensor's dtype where
 * NumPy has it, else float32 (exact widening).
 */
#include "cli.h"

#include "neuronsim/isa.h"
#include "neuronsim/runtime.h"
#include "npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_BINDS 64

typedef struct bind {
	const char *name, *path;
} bind;

static void print_usage(FILE *f)
{
	char targets[128];
	nsim_cli_targets(targets, sizeof(targets));
	fprintf(f, "usage: neuronsim run PROG [--target %s] [--mode full|timing|functional]\n"
		   "              [--input NAME=FILE.npy ...] [--output NAME=FILE.npy ...]\n"
		   "              [--summary FILE.json] [--trace FILE.pftrace|FILE.json]\n"
		   "              [--trace-detail instruction|program|utilization] [--trace-max-mb N]\n"
		   "              [--check-numerics]\n", targets);
}

static int read_program(const char *path, uint8_t **bin, size_t *len, isa_program **prog)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return NSIM_EXIT_BAD;
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	if (n < 0 || n > (1L << 30)) {
		fclose(f);
		fprintf(stderr, "neuronsim: %s: unreadable or larger than 1 GiB\n", path);
		return NSIM_EXIT_BAD;
	}
	char *buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fclose(f);
		free(buf);
		fprintf(stderr, "neuronsim: %s: read error\n", path);
		return NSIM_EXIT_BAD;
	}
	fclose(f);
	isa_diag d = { 0 };
	bool binary = n >= 8 && memcmp(buf, ISA_MAGIC, 8) == 0;
	isa_status st = binary ? isa_program_load(buf, (size_t)n, prog, &d)
			       : isa_asm(buf, (size_t)n, prog, &d);
	free(buf);
	if (st == ISA_OK)
		st = isa_program_encode(*prog, bin, len, &d);
	if (st != ISA_OK) {
		fprintf(stderr, "neuronsim: %s: %s\n", path, d.msg);
		isa_program_free(*prog);
		*prog = NULL;
		return NSIM_EXIT_BAD;
	}
	return NSIM_EXIT_OK;
}

/* copies npy data into the tensor's bytes, converting float32/16 to narrow floats */
static int load_input(const isa_tensor *t, const char *path, nsim_tensor *dev)
{
	npy_array a;
	char err[256];
	if (npy_read(path, &a, err, sizeof(err))) {
		fprintf(stderr, "neuronsim: %s\n", err);
		return NSIM_EXIT_BAD;
	}
	uint64_t count = 1;
	for (unsigned d = 0; d < t->rank; d++)
		count *= t->shape[d];
	bool shape_ok = a.rank == t->rank;
	for (unsigned d = 0; shape_ok && d < t->rank; d++)
		shape_ok = a.shape[d] == t->shape[d];
	int rc = NSIM_EXIT_BAD;
	if (!shape_ok) {
		fprintf(stderr, "neuronsim: %s: shape does not match tensor '%s' (rank %u, %llu elements)\n",
			path, t->name, t->rank, (unsigned long long)count);
		goto free_array;
	}
	unsigned esz = isa_dtype_size(t->dtype);
	uint8_t *buf = malloc(count * esz + 1);
	if (!buf)
		goto free_array;
	if (a.isa_dtype == t->dtype) {
		memcpy(buf, a.data, count * esz);
	} else if (isa_dtype_is_float(t->dtype) &&
		   (a.isa_dtype == ISA_DT_fp32 || a.isa_dtype == ISA_DT_fp16)) {
		nsim_convert(t->dtype, buf, a.isa_dtype, a.data, count);
	} else {
		fprintf(stderr, "neuronsim: %s: dtype %s cannot feed %s tensor '%s'\n", path, a.descr,
			isa_dtype_name(t->dtype), t->name);
		free(buf);
		goto free_array;
	}
	if (nsim_tensor_write(dev, buf, 0, count * esz) == NSIM_SUCCESS)
		rc = NSIM_EXIT_OK;
	else
		fprintf(stderr, "neuronsim: %s\n", nsim_last_error());
	free(buf);
free_array:
	npy_free(&a);
	return rc;
}

static int save_output(const isa_tensor *t, const char *path, nsim_tensor *dev)
{
	uint64_t bytes = isa_tensor_bytes(t), count = bytes / isa_dtype_size(t->dtype);
	uint8_t *buf = malloc(bytes + 1);
	float *wide = NULL;
	char err[256];
	int rc = NSIM_EXIT_BAD;
	if (!buf || nsim_tensor_read(dev, buf, 0, bytes) != NSIM_SUCCESS)
		goto free_buf;
	const char *descr = npy_descr_of(t->dtype);
	const void *data = buf;
	uint64_t out_bytes = bytes;
	if (!descr) {
		wide = malloc(count * sizeof(float) + 1);
		if (!wide)
			goto free_buf;
		if (nsim_convert(ISA_DT_fp32, wide, t->dtype, buf, count)) {
			fprintf(stderr, "neuronsim: %s: %s\n", path, nsim_last_error());
			goto free_buf;
		}
		descr = "<f4";
		data = wide;
		out_bytes = count * sizeof(float);
	}
	if (npy_write(path, descr, t->rank, t->shape, data, out_bytes, err, sizeof(err)))
		fprintf(stderr, "neuronsim: %s\n", err);
	else
		rc = NSIM_EXIT_OK;
free_buf:
	free(wide);
	free(buf);
	return rc;
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void print_summary(const isa_program *p, const nsim_exec_stats *s, const nsim_chip_info *chip,
			  FILE *f)
{
	double secs = (double)s->total_ps * 1e-12;
	double peak = (double)chip->peak_flops_per_second;   /* bf16 flop/s */
	fprintf(f, "simulated time      %.3f us (%s, %s)\n", secs * 1e6, chip->target, chip->core_name);
	fprintf(f, "instructions        %llu\n", (unsigned long long)s->instructions);
	for (int k = 0; k < ISA_NUM_ENGINES; k++)
		if (p->n_instr[k])
			fprintf(f, "  %-7s engine    %5.1f%% busy, %llu instructions\n", isa_engine_name(k),
				pct(s->engine_busy_ps[k], s->total_ps),
				(unsigned long long)s->engine_instructions[k]);
	fprintf(f, "matmul              %llu instructions, %.3f TFLOPS achieved (%.1f%% of %.1f bf16 peak)\n",
		(unsigned long long)s->matmul_instructions,
		secs > 0 ? (double)s->matmul_flops / secs * 1e-12 : 0.0,
		secs > 0 ? 100.0 * (double)s->matmul_flops / secs / peak : 0.0, peak * 1e-12);
	fprintf(f, "dma                 %llu transfers, %llu bytes\n",
		(unsigned long long)s->dma_transfers, (unsigned long long)s->dma_bytes);
	fprintf(f, "hbm                 %llu read + %llu written bytes, %.2f GB/s\n",
		(unsigned long long)s->hbm_read_bytes, (unsigned long long)s->hbm_write_bytes,
		secs > 0 ? (double)(s->hbm_read_bytes + s->hbm_write_bytes) / secs * 1e-9 : 0.0);
}

static const char *bound_path(const bind *b, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(b[i].name, name))
			return b[i].path;
	return NULL;
}

static int add_bind(bind *b, int *n, char *arg, const char *opt)
{
	char *eq = strchr(arg, '=');
	if (!eq || eq == arg || !eq[1] || *n >= MAX_BINDS) {
		fprintf(stderr, "neuronsim: %s expects NAME=FILE.npy, got '%s'\n", opt, arg);
		return -1;
	}
	*eq = '\0';
	b[*n].name = arg;
	b[(*n)++].path = eq + 1;
	return 0;
}

int nsim_cli_run(int argc, char **argv)
{
	const char *prog_path = NULL, *target = NULL, *summary = NULL, *trace = NULL, *mode = NULL;
	int detail = 0;
	uint64_t max_bytes = 0;
	bind ins[MAX_BINDS], outs[MAX_BINDS];
	int nin = 0, nout = 0, check = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool has_val = i + 1 < argc;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			print_usage(stdout);
			return NSIM_EXIT_OK;
		} else if (!strcmp(a, "--target") && has_val) {
			target = argv[++i];
		} else if (!strcmp(a, "--mode") && has_val) {
			mode = argv[++i];
		} else if (!strcmp(a, "--input") && has_val) {
			if (add_bind(ins, &nin, argv[++i], "--input"))
				return NSIM_EXIT_USAGE;
		} else if (!strcmp(a, "--output") && has_val) {
			if (add_bind(outs, &nout, argv[++i], "--output"))
				return NSIM_EXIT_USAGE;
		} else if (!strcmp(a, "--summary") && has_val) {
			summary = argv[++i];
		} else if (!strcmp(a, "--trace") && has_val) {
			trace = argv[++i];
		} else if (!strcmp(a, "--trace-detail") && has_val) {
			const char *d = argv[++i];
			if (strcmp(d, "instruction") && strcmp(d, "program") && strcmp(d, "utilization")) {
				fprintf(stderr, "neuronsim: --trace-detail '%s' (instruction, program or utilization)\n",
					d);
				return NSIM_EXIT_USAGE;
			}
			detail = !strcmp(d, "program") ? 1 : !strcmp(d, "utilization") ? 2 : 0;
		} else if (!strcmp(a, "--trace-max-mb") && has_val) {
			char *end = NULL;
			unsigned long long mb = strtoull(argv[++i], &end, 10);
			if (!end || *end || mb == 0 || mb >= (1ull << 40)) {
				fprintf(stderr, "neuronsim: --trace-max-mb '%s' is not a size in MB\n", argv[i]);
				return NSIM_EXIT_USAGE;
			}
			max_bytes = (uint64_t)mb << 20;
		} else if (!strcmp(a, "--check-numerics")) {
			check = 1;
		} else if (a[0] != '-' && !prog_path) {
			prog_path = a;
		} else {
			fprintf(stderr, "neuronsim: unexpected argument '%s'\n", a);
			print_usage(stderr);
			return NSIM_EXIT_USAGE;
		}
	}
	if (!prog_path) {
		print_usage(stderr);
		return NSIM_EXIT_USAGE;
	}
	int imode = -1;
	if (mode) {
		imode = !strcmp(mode, "full") ? NSIM_MODE_FULL : !strcmp(mode, "timing") ? NSIM_MODE_TIMING
			: !strcmp(mode, "functional") ? NSIM_MODE_FUNCTIONAL : -2;
		if (imode == -2) {
			fprintf(stderr, "neuronsim: --mode %s (full, timing or functional)\n", mode);
			return NSIM_EXIT_USAGE;
		}
	}

	uint8_t *bin = NULL;
	size_t len = 0;
	isa_program *p = NULL;
	int rc = read_program(prog_path, &bin, &len, &p);
	if (rc)
		return rc;
	if (!target && !getenv("NEURON_PLATFORM_TARGET_OVERRIDE"))
		target = isa_target_name(p->target);
	/* progress on a terminal only: logs and pipes stay clean */
	nsim_config cfg = { target, imode, check, isatty(STDERR_FILENO) };
	nsim_tensor *dev[ISA_MAX_TENSORS > 4096 ? 4096 : ISA_MAX_TENSORS] = { 0 };
	nsim_tensor_set *in_set = NULL, *out_set = NULL;
	nsim_model *m = NULL;
	nsim_status st;
	rc = NSIM_EXIT_BAD;

	if ((st = nsim_init_config(&cfg))) {
		fprintf(stderr, "neuronsim: %s\n", nsim_last_error());
		goto free_program;
	}
	nsim_chip_info chip;
	if ((st = nsim_chip_info_get(NULL, &chip))) {
		fprintf(stderr, "neuronsim: %s\n", nsim_last_error());
		goto close_runtime;
	}
	if ((st = nsim_load(bin, len, 0, &m)) || (st = nsim_tensor_set_create(&in_set)) ||
	    (st = nsim_tensor_set_create(&out_set))) {
		fprintf(stderr, "neuronsim: %s: %s\n", prog_path, nsim_last_error());
		goto close_runtime;
	}
	if (p->n_tensors > 4096) {
		fprintf(stderr, "neuronsim: %u tensors; run binds at most 4096\n", p->n_tensors);
		goto close_runtime;
	}
	for (int i = 0; i < nin; i++)
		if (isa_program_find_tensor(p, ins[i].name) < 0 ||
		    p->tensors[isa_program_find_tensor(p, ins[i].name)].kind != ISA_TK_INPUT) {
			fprintf(stderr, "neuronsim: --input %s: the program has no input tensor of that name\n",
				ins[i].name);
			goto close_runtime;
		}
	for (int i = 0; i < nout; i++)
		if (isa_program_find_tensor(p, outs[i].name) < 0 ||
		    p->tensors[isa_program_find_tensor(p, outs[i].name)].kind != ISA_TK_OUTPUT) {
			fprintf(stderr, "neuronsim: --output %s: the program has no output tensor of that name\n",
				outs[i].name);
			goto close_runtime;
		}
	for (uint32_t i = 0; i < p->n_tensors; i++) {
		const isa_tensor *t = &p->tensors[i];
		if (t->kind != ISA_TK_INPUT && t->kind != ISA_TK_OUTPUT)
			continue;
		if ((st = nsim_tensor_allocate(0, isa_tensor_bytes(t), t->name, &dev[i]))) {
			fprintf(stderr, "neuronsim: tensor '%s': %s\n", t->name, nsim_last_error());
			goto free_tensors;
		}
		nsim_tensor_memset(dev[i], 0, 0, isa_tensor_bytes(t));
		if (t->kind == ISA_TK_INPUT) {
			const char *path = bound_path(ins, nin, t->name);
			if (!path) {
				fprintf(stderr, "neuronsim: input tensor '%s' needs --input %s=FILE.npy\n",
					t->name, t->name);
				goto free_tensors;
			}
			if (load_input(t, path, dev[i]))
				goto free_tensors;
			nsim_tensor_set_add(in_set, t->name, dev[i]);
		} else {
			nsim_tensor_set_add(out_set, t->name, dev[i]);
		}
	}
	nsim_profile_options po = { trace, NULL, detail, max_bytes };
	if (trace && nsim_profile_start_opts(&po)) {
		fprintf(stderr, "neuronsim: %s\n", nsim_last_error());
		goto free_tensors;
	}
	const char *base = strrchr(prog_path, '/');
	nsim_exec_options eo = { base ? base + 1 : prog_path, 0, 0 };   /* the program alone */
	st = nsim_execute_ex(m, in_set, out_set, &eo);
	if (trace && nsim_profile_stop())
		fprintf(stderr, "neuronsim: %s\n", nsim_last_error());
	if (st) {
		fprintf(stderr, "neuronsim: %s: %s: %s\n", prog_path, nsim_status_name(st), nsim_last_error());
		goto free_tensors;
	}
	nsim_exec_stats stats;
	nsim_model_stats(m, &stats);
	print_summary(p, &stats, &chip, stdout);
	rc = NSIM_EXIT_OK;
	for (uint32_t i = 0; i < p->n_tensors; i++) {
		const char *path = p->tensors[i].kind == ISA_TK_OUTPUT
					   ? bound_path(outs, nout, p->tensors[i].name) : NULL;
		if (path && save_output(&p->tensors[i], path, dev[i]))
			rc = NSIM_EXIT_BAD;
	}
	if (summary && nsim_summary_write(summary, &stats, base ? base + 1 : prog_path)) {
		fprintf(stderr, "neuronsim: %s\n", nsim_last_error());
		rc = NSIM_EXIT_BAD;
	}

free_tensors:
	for (uint32_t i = 0; i < p->n_tensors && i < 4096; i++)
		nsim_tensor_free(dev[i]);
close_runtime:
	nsim_tensor_set_free(in_set);
	nsim_tensor_set_free(out_set);
	if (m)
		nsim_unload(m);
	nsim_close();
free_program:
	free(bin);
	isa_program_free(p);
	return rc;
}
