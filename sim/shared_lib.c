/*
 * shared_lib.c -- libneuronsim.so, the one runtime library of a process:
 * the instruction-set and runtime C APIs (include/neuronsim/isa.h,
 * runtime.h).  The layers' static libraries are linked whole
 * (sim/CMakeLists.txt); a library target needs a source of its own, and
 * this one holds the library's version.
 */
#include "neuronsim/runtime.h"

const char *nsim_version(void)
{
	return NSIM_VERSION;
}
