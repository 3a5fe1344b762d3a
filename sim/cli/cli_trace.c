/*
 * cli_trace.c -- `neuronsim trace summary|diff|report|merge`: the trace tools are
 * Python (traces/python/neuronsim_trace: protobuf decoding, tables, HTML).
 */
#include "cli.h"

#ifndef NSIM_TRACE_PYDIR
#define NSIM_TRACE_PYDIR ""
#endif

int nsim_cli_trace(int argc, char **argv)
{
	return nsim_cli_exec_python(NSIM_TRACE_PYDIR, "neuronsim_trace", argc - 1, argv + 1);
}
