/*
 * cli_program.c -- `neuronsim asm | disasm | validate`: the program tools.
 * Files are untrusted: they are read whole (bounded), decoded or parsed and
 * validated by the isa library, and every rejection is printed as
 * "neuronsim: FILE: message" with exit status 1.
 */
#include "cli.h"

#include "neuronsim/isa.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

#define MAX_INPUT_BYTES (2ull << 30)

static int read_file(const char *path, unsigned char **out, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	size_t n = 0, cap = 0;

	if (!f) {
		fprintf(stderr, "neuronsim: %s: %s\n", path, strerror(errno));
		return NSIM_EXIT_BAD;
	}
	for (;;) {
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 65536;
			if (ncap > MAX_INPUT_BYTES + 1)
				ncap = MAX_INPUT_BYTES + 1;
			if (ncap == cap) {
				fprintf(stderr, "neuronsim: %s: larger than %llu bytes\n", path,
					MAX_INPUT_BYTES);
				goto close_file;
			}
			unsigned char *nb = realloc(buf, ncap);
			if (!nb) {
				fprintf(stderr, "neuronsim: %s: out of memory\n", path);
				goto close_file;
			}
			buf = nb;
			cap = ncap;
		}
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0) {
			if (ferror(f)) {
				fprintf(stderr, "neuronsim: %s: read error\n", path);
				goto close_file;
			}
			break;
		}
	}
	fclose(f);
	*out = buf;
	*len = n;
	return NSIM_EXIT_OK;

close_file:
	fclose(f);
	free(buf);
	return NSIM_EXIT_BAD;
}

static int write_file(const char *path, const void *data, size_t len)
{
	FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "wb");
	if (!f) {
		fprintf(stderr, "neuronsim: %s: %s\n", path, strerror(errno));
		return NSIM_EXIT_BAD;
	}
	bool ok = fwrite(data, 1, len, f) == len;
	if (f != stdout)
		ok = (fclose(f) == 0) && ok;
	else
		ok = (fflush(f) == 0) && ok;
	if (!ok) {
		fprintf(stderr, "neuronsim: %s: write error\n", path);
		return NSIM_EXIT_BAD;
	}
	return NSIM_EXIT_OK;
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* .nsp is binary and .nsasm text whatever they hold (so an empty or damaged
 * .nsp is reported as such); other names are sniffed by the magic. */
static bool is_binary(const char *path, const unsigned char *buf, size_t len)
{
	if (has_suffix(path, ".nsp"))
		return true;
	if (has_suffix(path, ".nsasm"))
		return false;
	return len >= 8 && memcmp(buf, ISA_MAGIC, 8) == 0;
}

/* Loads either form. */
static int load_any(const char *path, isa_program **out)
{
	unsigned char *buf;
	size_t len;
	isa_diag diag = { 0 };
	int rc = read_file(path, &buf, &len);
	if (rc)
		return rc;
	isa_status st = is_binary(path, buf, len) ? isa_program_load(buf, len, out, &diag)
					    : isa_asm((const char *)buf, len, out, &diag);
	free(buf);
	if (st != ISA_OK) {
		fprintf(stderr, "neuronsim: %s: %s\n", path, diag.msg);
		return NSIM_EXIT_BAD;
	}
	return NSIM_EXIT_OK;
}

/* Parses "IN [-o OUT]"; returns 0 or a usage exit code. */
static int in_out_args(int argc, char **argv, const char *usage, const char **in,
		       const char **out)
{
	*in = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
			*out = argv[++i];
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			printf("usage: %s\n", usage);
			return -1;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "neuronsim: unknown option '%s'\nusage: %s\n", argv[i], usage);
			return NSIM_EXIT_USAGE;
		} else if (!*in) {
			*in = argv[i];
		} else {
			fprintf(stderr, "neuronsim: unexpected argument '%s'\nusage: %s\n", argv[i],
				usage);
			return NSIM_EXIT_USAGE;
		}
	}
	if (!*in || !*out) {
		fprintf(stderr, "usage: %s\n", usage);
		return NSIM_EXIT_USAGE;
	}
	return 0;
}

/* A program in one form, out in another: `emit` is isa_program_encode or a
 * wrapper of isa_disasm with the same shape. */
typedef isa_status (*emit_fn)(const isa_program *p, void **out, size_t *len, isa_diag *diag);

static isa_status emit_binary(const isa_program *p, void **out, size_t *len, isa_diag *diag)
{
	return isa_program_encode(p, (uint8_t **)out, len, diag);
}

static isa_status emit_text(const isa_program *p, void **out, size_t *len, isa_diag *diag)
{
	return isa_disasm(p, (char **)out, len, diag);
}

static int convert(int argc, char **argv, const char *usage, const char *default_out,
		   emit_fn emit)
{
	const char *in, *out = default_out;
	int rc = in_out_args(argc, argv, usage, &in, &out);
	if (rc)
		return rc < 0 ? NSIM_EXIT_OK : rc;

	isa_program *p;
	if ((rc = load_any(in, &p)))
		return rc;
	void *data;
	size_t len;
	isa_diag diag = { 0 };
	if (emit(p, &data, &len, &diag) != ISA_OK) {
		fprintf(stderr, "neuronsim: %s: %s\n", in, diag.msg);
		rc = NSIM_EXIT_BAD;
		goto free_program;
	}
	rc = write_file(out, data, len);
	free(data);
free_program:
	isa_program_free(p);
	return rc;
}

int nsim_cli_asm(int argc, char **argv)
{
	return convert(argc, argv, "neuronsim asm IN.nsasm -o OUT.nsp", NULL, emit_binary);
}

int nsim_cli_disasm(int argc, char **argv)
{
	return convert(argc, argv,
		       "neuronsim disasm IN.nsp [-o OUT.nsasm]   (text to stdout by default)", "-",
		       emit_text);
}

static void print_summary(const char *path, const isa_program *p)
{
	const isa_target_info *ti = isa_target_get(p->target);
	printf("%s: valid %s program for %s (%s)\n", path, "neuronsim", ti->name, ti->core);
	unsigned kinds[ISA_NUM_TENSOR_KINDS] = { 0 };
	for (uint32_t i = 0; i < p->n_tensors; i++)
		kinds[p->tensors[i].kind]++;
	printf("  tensors      %u (%u input, %u output, %u internal, %u const)\n", p->n_tensors,
	       kinds[ISA_TK_INPUT], kinds[ISA_TK_OUTPUT], kinds[ISA_TK_INTERNAL],
	       kinds[ISA_TK_CONST]);
	printf("  dma blocks   %u\n", p->n_dma);
	printf("  semaphores   %u\n", p->num_semaphores);
	printf("  scratch      %llu bytes, constants %llu bytes\n",
	       (unsigned long long)p->scratch_bytes, (unsigned long long)p->consts_size);
	printf("  instructions %llu:", (unsigned long long)isa_program_instr_count(p));
	for (int e = 0; e < ISA_NUM_ENGINES; e++)
		printf(" %s %u%s", isa_engine_name(e), p->n_instr[e], e + 1 < ISA_NUM_ENGINES ? "," : "\n");
}

int nsim_cli_validate(int argc, char **argv)
{
	const char *usage = "neuronsim validate [-q] FILE...   (.nsp or .nsasm)";
	bool quiet = false;
	int files = 0, bad = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-q") == 0) {
			quiet = true;
			continue;
		}
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			printf("usage: %s\n", usage);
			return NSIM_EXIT_OK;
		}
		if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "neuronsim: unknown option '%s'\nusage: %s\n", argv[i], usage);
			return NSIM_EXIT_USAGE;
		}
		files++;
		isa_program *p;
		if (load_any(argv[i], &p)) {
			bad++;
			continue;
		}
		if (!quiet)
			print_summary(argv[i], p);
		isa_program_free(p);
	}
	if (!files) {
		fprintf(stderr, "usage: %s\n", usage);
		return NSIM_EXIT_USAGE;
	}
	return bad ? NSIM_EXIT_BAD : NSIM_EXIT_OK;
}
