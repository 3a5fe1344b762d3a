/*
 * cli.h -- subcommands of the `neuronsim` tool.  Each returns the process
 * exit status: 0 success, 1 bad input (message on stderr), 2 usage error.
 */
#ifndef NSIM_SIM_CLI_H
#define NSIM_SIM_CLI_H

#include <stddef.h>

#define NSIM_EXIT_OK    0
#define NSIM_EXIT_BAD   1
#define NSIM_EXIT_USAGE 2

int nsim_cli_asm(int argc, char **argv);
int nsim_cli_disasm(int argc, char **argv);
int nsim_cli_validate(int argc, char **argv);
int nsim_cli_isa(int argc, char **argv);
int nsim_cli_trace(int argc, char **argv);
int nsim_cli_nki(int argc, char **argv);
/* exec python3 -m module argv[0..argc) with pydir first on PYTHONPATH (cli_python.c) */
int nsim_cli_exec_python(const char *pydir, const char *module, int argc, char **argv);
int nsim_cli_run(int argc, char **argv);
int nsim_cli_collective(int argc, char **argv);
/* the target names from the ISA's target table, "trn1|trn2|..." (cli_isa.c) */
void nsim_cli_targets(char *buf, size_t size);

#endif
