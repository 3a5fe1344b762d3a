/*
 * runtime_state.c -- the runtime's one state (rt) and its error reporting:
 * the per-thread last error every failing call leaves, and the status
 * names.  What every runtime file depends on, and which depends on none of
 * them, so runtime.c, runtime_info.c and profile.c use it without calling
 * into each other.
 */
#include "runtime_internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

rt_state rt = { .lock = PTHREAD_MUTEX_INITIALIZER, .profile_lock = PTHREAD_MUTEX_INITIALIZER,
	  .hbm_lock = PTHREAD_MUTEX_INITIALIZER };

static _Thread_local char last_error[512];

nsim_status rt_fail(nsim_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	if (rt.log_level >= 1)
		fprintf(stderr, "neuronsim: %s: %s\n", nsim_status_name(st), last_error);
	return st;
}

const char *nsim_last_error(void)
{
	return last_error;
}

const char *nsim_status_name(nsim_status st)
{
	switch (st) {
	case NSIM_SUCCESS:        return "NSIM_SUCCESS";
	case NSIM_FAILURE:        return "NSIM_FAILURE";
	case NSIM_INVALID:        return "NSIM_INVALID";
	case NSIM_INVALID_HANDLE: return "NSIM_INVALID_HANDLE";
	case NSIM_RESOURCE:       return "NSIM_RESOURCE";
	case NSIM_TIMEOUT:        return "NSIM_TIMEOUT";
	case NSIM_UNINITIALIZED:  return "NSIM_UNINITIALIZED";
	case NSIM_EXEC_BAD_INPUT: return "NSIM_EXEC_BAD_INPUT";
	case NSIM_EXEC_NUM_ERR:   return "NSIM_EXEC_NUM_ERR";
	case NSIM_EXEC_ERR:       return "NSIM_EXEC_ERR";
	case NSIM_EXEC_NC_BUSY:   return "NSIM_EXEC_NC_BUSY";
	case NSIM_EXEC_OOB:       return "NSIM_EXEC_OOB";
	default:                  return "NSIM_UNKNOWN";
	}
}
