/* SPDX-License-Identifier: BSD-3-Clause
 * weir-bench*: what every benchmark main does the same way. EAL comes up
 * from the command line (each program runs in memory, so the usual
 * arguments are --no-huge --no-pci -l 0), and the program's own options
 * follow "--" for getopt_long.
 */
#ifndef WEIR_BENCH_HARNESS_H
#define WEIR_BENCH_HARNESS_H

#include <stdint.h>

/* EAL up; *argc and *argv then hold what follows EAL's arguments. Exits
 * with status 1 when EAL cannot start: no figure without it. */
void bench_init(int *argc, char ***argv);
/* EAL down, at the end of main. */
void bench_fini(void);
/* A comma-separated list of numbers (decimal, 0x hex) into out, at most
 * max of them: how many. s is cut up. */
unsigned int bench_list(char *s, uint32_t *out, unsigned int max);

#endif /* WEIR_BENCH_HARNESS_H */
