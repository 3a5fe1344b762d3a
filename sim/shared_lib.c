/*
 * shared_lib.c -- libneuronsim.so: the instruction-set and runtime C APIs
 * (include/neuronsim/isa.h, runtime.h) as one shared library, for callers
 * without torch (the Python package `neuronsim`, loaded with ctypes).  The
 * static libraries are linked whole (sim/CMakeLists.txt); a library needs a
 * source of its own, and this marker lets a caller tell the two libraries
 * that carry the API apart (the torch plugin's does not have it).
 */
#include "neuronsim/runtime.h"

extern const int nsim_standalone_library;
const int nsim_standalone_library = 1;
