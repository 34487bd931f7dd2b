/* SPDX-License-Identifier: BSD-3-Clause
 * weir-wanemu: counters as JSON, on stdout at exit and atomically into the
 * --stats file, so tests read either a whole old file or a whole new one.
 */
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "emu.h"

static void
print_link(FILE *out, const char *name, const struct link *l, int last)
{
	const struct link_stats *s = &l->st;

	fprintf(out, "\"%s\": {\"rx\": %lu, \"tx\": %lu, \"tx_bytes\": %lu, \"dropped_random\": %lu, "
		"\"dropped_periodic\": %lu, \"dropped_queue\": %lu, \"dropped_send\": %lu, "
		"\"queue_peak\": %u, \"inflight_peak\": %u, \"rate_bps\": %lu, \"corrupted\": %lu", name, (unsigned long)s->rx,
		(unsigned long)s->tx, (unsigned long)s->tx_bytes, (unsigned long)s->drop_random,
		(unsigned long)s->drop_periodic, (unsigned long)s->drop_queue,
		(unsigned long)s->drop_send, s->backlog_peak, s->inflight_peak,
		(unsigned long)l->p.rate_bps, (unsigned long)s->corrupted);
	if (l->p.rio.on)
		fprintf(out, ", \"rio\": {\"rx_in\": %lu, \"rx_out\": %lu, \"dropped_in\": %lu, "
			"\"dropped_out\": %lu, \"avg_in\": %.1f, \"avg\": %.1f}",
			(unsigned long)l->rio_st.rx[RIO_IN], (unsigned long)l->rio_st.rx[RIO_OUT],
			(unsigned long)l->rio_st.drop[RIO_IN], (unsigned long)l->rio_st.drop[RIO_OUT],
			l->rio.avg[RIO_IN], l->rio.avg[RIO_OUT]);
	fprintf(out, "}%s", last ? "" : ", ");
}

void
stats_print(const struct emu *e, FILE *out)
{
	fprintf(out, "{\"rx_bad\": %lu, \"paths\": {", (unsigned long)e->rx_bad);
	for (int i = 0; i < e->n_paths; i++) {
		fprintf(out, "\"%s\": {", e->paths[i].ifname);
		print_link(out, "to_path", &e->paths[i].dir[TO_PATH], 0);
		print_link(out, "to_weir", &e->paths[i].dir[TO_WEIR], 1);
		fprintf(out, "}%s", i + 1 < e->n_paths ? ", " : "");
	}
	fprintf(out, "}");
	if (e->has_core) {
		fprintf(out, ", \"core\": {");
		print_link(out, "to_path", &e->core, 1);
		fprintf(out, "}");
	}
	fprintf(out, "}\n");
}

void
stats_write_file(const struct emu *e)
{
	char tmp[PATH_MAX];
	FILE *f;

	if (e->stats_file == NULL)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", e->stats_file);   /* cli.c bounds the name */
	f = fopen(tmp, "w");
	if (f == NULL)
		return;
	stats_print(e, f);
	/* Same directory, so rename() replaces the file atomically. */
	if (fclose(f) == 0)
		rename(tmp, e->stats_file);
	else
		unlink(tmp);
}
