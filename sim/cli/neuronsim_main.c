/*
 * neuronsim_main.c -- the `neuronsim` command: dispatches to subcommands.
 */
#include "cli.h"

#include "neuronsim/isa.h"

#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} commands[] = {
	{ "asm",      nsim_cli_asm,      "assemble a text program: asm IN.nsasm -o OUT.nsp" },
	{ "disasm",   nsim_cli_disasm,   "disassemble a binary program: disasm IN.nsp [-o OUT]" },
	{ "validate", nsim_cli_validate, "check programs (either form) and summarize them" },
	{ "run",      nsim_cli_run,      "execute a program on the simulated core: run PROG --input N=F.npy ..." },
	{ "isa",      nsim_cli_isa,      "list the instructions, or one's fields: isa [NAME...]" },
	{ "nki",      nsim_cli_nki,      "run an NKI kernel file on the simulator: nki run FILE.py [--target T]" },
	{ "trace",    nsim_cli_trace,    "trace tools: trace summary FILE | diff A B | report FILE -o OUT.html | merge R0 R1.. -o OUT" },
	{ "collective", nsim_cli_collective,
	  "modeled collective times, nccom-test style: collective [-r N] [-b MIN] [-e MAX] [-f F] OP" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: neuronsim COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
	fprintf(f, "\nexit status: 0 success, 1 bad input, 2 usage error\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return NSIM_EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return NSIM_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("neuronsim %s (program format %u.%u)\n", NSIM_VERSION,
		       ISA_FORMAT_VERSION_MAJOR, ISA_FORMAT_VERSION_MINOR);
		return NSIM_EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "neuronsim: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return NSIM_EXIT_USAGE;
}
