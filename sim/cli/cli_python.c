/*
 * cli_python.c -- running the Python halves of the CLI (`neuronsim trace`,
 * `neuronsim nki`): the package directory first on PYTHONPATH, so they work
 * from a build tree without installing anything, then exec the module.
 * NEURONSIM_PYTHON names the interpreter (default python3).
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int nsim_cli_exec_python(const char *pydir, const char *module, int argc, char **argv)
{
	const char *py = getenv("NEURONSIM_PYTHON");
	if (!py || !*py)
		py = "python3";
	if (argc > 64) {
		fprintf(stderr, "neuronsim: too many arguments\n");
		return NSIM_EXIT_USAGE;
	}
	if (pydir && *pydir) {
		const char *old = getenv("PYTHONPATH");
		size_t n = strlen(pydir) + (old ? strlen(old) : 0) + 2;
		char *path = malloc(n);
		if (!path)
			return NSIM_EXIT_BAD;
		snprintf(path, n, "%s%s%s", pydir, old && *old ? ":" : "", old && *old ? old : "");
		setenv("PYTHONPATH", path, 1);
		free(path);
	}
	char *args[64 + 4];
	int n = 0;
	args[n++] = (char *)py;
	args[n++] = "-m";
	args[n++] = (char *)module;
	for (int i = 0; i < argc; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	execvp(py, args);
	fprintf(stderr, "neuronsim: cannot run %s -m %s: %s (the Python tools need Python 3 with numpy and "
		"protobuf; scripts/setup.sh installs them)\n", py, module, strerror(errno));
	return NSIM_EXIT_BAD;
}
