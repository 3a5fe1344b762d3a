/*
 * cli_nki.c -- `neuronsim nki run FILE.py [--target T] [ARGS]`: runs an NKI
 * kernel file on the simulator through the Python package neuronsim.nki
 * (sim/python), which this puts first on PYTHONPATH so the command works
 * from a build tree.  NEURONSIM_PYTHON names the interpreter.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef NSIM_PYDIR
#define NSIM_PYDIR ""
#endif

int nsim_cli_nki(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "run") != 0) {
		fprintf(stderr, "usage: neuronsim nki run FILE.py [--target trn1|trn2|trn3] [ARGS...]\n");
		return NSIM_EXIT_USAGE;
	}
	if (argc > 64) {
		fprintf(stderr, "neuronsim nki: too many arguments\n");
		return NSIM_EXIT_USAGE;
	}
	const char *py = getenv("NEURONSIM_PYTHON");
	if (!py || !*py)
		py = "python3";
	if (NSIM_PYDIR[0]) {
		const char *old = getenv("PYTHONPATH");
		size_t n = strlen(NSIM_PYDIR) + (old ? strlen(old) : 0) + 2;
		char *path = malloc(n);
		if (!path)
			return NSIM_EXIT_BAD;
		snprintf(path, n, "%s%s%s", NSIM_PYDIR, old && *old ? ":" : "", old && *old ? old : "");
		setenv("PYTHONPATH", path, 1);
		free(path);
	}
	char *args[64 + 4];
	int n = 0;
	args[n++] = (char *)py;
	args[n++] = "-m";
	args[n++] = "neuronsim.nki.run";
	for (int i = 2; i < argc; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	execvp(py, args);
	fprintf(stderr, "neuronsim nki: cannot run %s: %s\n", py, strerror(errno));
	return NSIM_EXIT_BAD;
}
