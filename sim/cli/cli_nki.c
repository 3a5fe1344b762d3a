/*
 * cli_nki.c -- `neuronsim nki run FILE.py [--target T] [ARGS]`: runs an NKI
 * kernel file on the simulator through the NKI frontend, the Python package
 * neuronsim_nki (nki/), which runs it through the bindings (sim/python).
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#ifndef NSIM_PYDIR
#define NSIM_PYDIR ""
#endif

int nsim_cli_nki(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "run") != 0) {
		char targets[128];
		nsim_cli_targets(targets, sizeof(targets));
		fprintf(stderr, "usage: neuronsim nki run FILE.py [--target %s] [ARGS...]\n", targets);
		return NSIM_EXIT_USAGE;
	}
	return nsim_cli_exec_python(NSIM_PYDIR, "neuronsim_nki.run", argc - 2, argv + 2);
}
