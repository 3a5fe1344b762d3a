/*
 * cli_collective.c -- `neuronsim collective`: the collective model's table
 * in nccom-test's shape (size, time, algbw and busbw in GiB/s, algorithm),
 * so a user can set the simulator's figures beside a real run's.
 *
 *   neuronsim collective [-r RANKS] [-b MINBYTES] [-e MAXBYTES] [-f FACTOR]
 *                        [--target T] OP
 * OP: nccom-test's names (allr, allg, redsc, alltoall) or the model's
 * (all_reduce, all_gather, reduce_scatter, broadcast, all_to_all,
 * send_recv, barrier).  Sizes take kb / mb / gb suffixes (powers of 1024).
 */
#include "cli.h"

#include "neuronsim/runtime.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *alias, *op; } aliases[] = {
	{ "allr", "all_reduce" }, { "allg", "all_gather" }, { "redsc", "reduce_scatter" },
	{ "alltoall", "all_to_all" }, { "bcast", "broadcast" }, { "sendrecv", "send_recv" },
};

static int usage(void)
{
	fprintf(stderr, "usage: neuronsim collective [-r RANKS] [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] "
			"[--target T] OP\n  OP: allr, allg, redsc, alltoall, bcast, sendrecv, barrier "
			"(or all_reduce, all_gather, ...)\n  sizes: bytes with an optional kb, mb or gb suffix\n");
	return NSIM_EXIT_USAGE;
}

/* "64kb" -> 65536; false on anything else */
static bool parse_size(const char *s, uint64_t *out)
{
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s || errno || *s == '-')
		return false;
	uint64_t mul = 1;
	if (*end) {
		char u[3] = { (char)tolower((unsigned char)end[0]), end[1] ? (char)tolower((unsigned char)end[1]) : 0, 0 };
		if (end[1] && end[2])
			return false;
		mul = !strcmp(u, "kb") || !strcmp(u, "k") ? 1ull << 10 : !strcmp(u, "mb") || !strcmp(u, "m") ? 1ull << 20
		      : !strcmp(u, "gb") || !strcmp(u, "g")                     ? 1ull << 30 : 0;
		if (!mul)
			return false;
	}
	if (v > (1ull << 50) / mul)
		return false;
	*out = v * mul;
	return true;
}

int nsim_cli_collective(int argc, char **argv)
{
	uint64_t lo = 1 << 10, hi = 1 << 30, factor = 4;
	unsigned long ranks = 2;
	const char *target = getenv("NEURON_PLATFORM_TARGET_OVERRIDE"), *op = NULL;
	if (!target || !*target)
		target = "trn2";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool has = i + 1 < argc;
		if ((!strcmp(a, "-r") || !strcmp(a, "--nworkers")) && has) {
			char *end;
			ranks = strtoul(argv[++i], &end, 10);
			if (*end || ranks == 0 || ranks > 65536) {
				fprintf(stderr, "neuronsim collective: ranks '%s': a count from 1 to 65536\n", argv[i]);
				return NSIM_EXIT_USAGE;
			}
		} else if ((!strcmp(a, "-b") || !strcmp(a, "--minbytes")) && has) {
			if (!parse_size(argv[++i], &lo))
				return fprintf(stderr, "neuronsim collective: bad size '%s'\n", argv[i]), NSIM_EXIT_USAGE;
		} else if ((!strcmp(a, "-e") || !strcmp(a, "--maxbytes")) && has) {
			if (!parse_size(argv[++i], &hi))
				return fprintf(stderr, "neuronsim collective: bad size '%s'\n", argv[i]), NSIM_EXIT_USAGE;
		} else if ((!strcmp(a, "-f") || !strcmp(a, "--stepfactor")) && has) {
			if (!parse_size(argv[++i], &factor) || factor < 2)
				return fprintf(stderr, "neuronsim collective: step factor '%s': 2 or more\n", argv[i]),
				       NSIM_EXIT_USAGE;
		} else if (!strcmp(a, "--target") && has) {
			target = argv[++i];
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage();
			return NSIM_EXIT_OK;
		} else if (a[0] != '-' && !op) {
			op = a;
		} else {
			fprintf(stderr, "neuronsim collective: unexpected argument '%s'\n", a);
			return usage();
		}
	}
	if (!op || lo > hi)
		return usage();
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (!strcmp(op, aliases[i].alias))
			op = aliases[i].op;
	nsim_collective_cost probe;
	if (nsim_collective_estimate(target, op, (uint32_t)ranks, lo, &probe) != NSIM_SUCCESS) {
		fprintf(stderr, "neuronsim collective: %s\n", nsim_last_error());
		return NSIM_EXIT_BAD;
	}
	printf("%14s %12s %10s %12s %12s  %s\n", "size(B)", "ranks", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
	       "algorithm");
	double n = (double)ranks, sum = 0;
	int rows = 0;
	for (uint64_t s = lo; s <= hi; s = s > hi / factor ? hi + 1 : s * factor) {
		nsim_collective_cost c;
		if (nsim_collective_estimate(target, op, (uint32_t)ranks, s, &c) != NSIM_SUCCESS) {
			fprintf(stderr, "neuronsim collective: %s\n", nsim_last_error());
			return NSIM_EXIT_BAD;
		}
		double us = (double)c.ps / 1e6;
		double alg = us > 0 ? (double)s / (us * 1e-6) / (double)(1ull << 30) : 0;
		double f = !strcmp(op, "all_reduce") ? 2 * (n - 1) / n
			   : !strcmp(op, "all_gather") || !strcmp(op, "reduce_scatter") || !strcmp(op, "all_to_all")
				   ? (n - 1) / n
				   : 1.0;
		printf("%14llu %12lu %10.1f %12.2f %12.2f  %s\n", (unsigned long long)s, ranks, us, alg, alg * f,
		       c.algorithm);
		sum += alg * f;
		rows++;
		if (s == 0)
			break;
	}
	printf("Avg bus bandwidth: %.4fGB/s (%s, modeled: device_model/collectives.c)\n", rows ? sum / rows : 0.0,
	       target);
	return NSIM_EXIT_OK;
}
