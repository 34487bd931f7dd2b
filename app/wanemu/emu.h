/* SPDX-License-Identifier: BSD-3-Clause
 * weir-wanemu: the emulator's state, shared by its parts (cli, port, stats,
 * main loop). One weir-side interface, N path interfaces, and per path two
 * emulated directions.
 */
#ifndef WANEMU_EMU_H
#define WANEMU_EMU_H

#include <net/if.h>
#include <stdio.h>
#include <stdint.h>

#include "link.h"
#include "mac.h"

#define MAX_PATHS 16

enum { TO_PATH = 0, TO_WEIR = 1 };

struct path {
	char ifname[IFNAMSIZ];
	int fd;
	struct link dir[2];     /* [TO_PATH] frames from weir, [TO_WEIR] frames from the host */
};

struct emu {
	char weir_if[IFNAMSIZ];
	int weir_fd;
	struct path paths[MAX_PATHS];
	int n_paths;
	uint64_t rng;
	const char *stats_file;
	double stats_interval;  /* seconds */
	int verbose;
	uint64_t rx_bad;        /* truncated (bigger than FRAME_MAX) or runt frames */
	struct mac_table macs;
	/* --core: one link every frame from weir crosses before its path (a
	 * shared bottleneck, e.g. with RIO); has_core 0 = none. */
	int has_core;
	struct link core;
};

/* cli.c: fill `e` from argv; on any bad argument print a message naming it
 * and exit(2). */
void emu_parse_args(struct emu *e, int argc, char **argv);

/* stats.c */
void stats_print(const struct emu *e, FILE *out);
void stats_write_file(const struct emu *e);

#endif /* WANEMU_EMU_H */
