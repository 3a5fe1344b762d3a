/*
 * cli_trace.c -- `neuronsim trace summary|diff|report`: the trace tools are
 * Python (traces/python/neuronsim_trace: protobuf decoding, tables, HTML);
 * this command runs them with the build's copy of the package first on
 * PYTHONPATH, so they work from a build tree without installing anything.
 * NEURONSIM_PYTHON names the interpreter (default python3).
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef NSIM_TRACE_PYDIR
#define NSIM_TRACE_PYDIR ""
#endif

int nsim_cli_trace(int argc, char **argv)
{
	const char *py = getenv("NEURONSIM_PYTHON");
	if (!py || !*py)
		py = "python3";
	if (NSIM_TRACE_PYDIR[0]) {
		const char *old = getenv("PYTHONPATH");
		size_t n = strlen(NSIM_TRACE_PYDIR) + (old ? strlen(old) : 0) + 2;
		char *path = malloc(n);
		if (!path)
			return NSIM_EXIT_BAD;
		snprintf(path, n, "%s%s%s", NSIM_TRACE_PYDIR, old && *old ? ":" : "", old && *old ? old : "");
		setenv("PYTHONPATH", path, 1);
		free(path);
	}
	if (argc > 64) {
		fprintf(stderr, "neuronsim trace: too many arguments\n");
		return NSIM_EXIT_USAGE;
	}
	char *args[64 + 4];
	int n = 0;
	args[n++] = (char *)py;
	args[n++] = "-m";
	args[n++] = "neuronsim_trace";
	for (int i = 1; i < argc; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	execvp(py, args);
	fprintf(stderr, "neuronsim trace: cannot run %s: %s (the trace tools need Python 3 with "
		"the protobuf package; scripts/setup.sh installs them)\n", py, strerror(errno));
	return NSIM_EXIT_BAD;
}
