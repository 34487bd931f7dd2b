/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the counters snapshot (stats.c). What REST, /metrics, telemetry and
 * the stats file all read; it reads the workers through worker_view.h and
 * imports none of them.
 */
#ifndef WEIR_STATS_H
#define WEIR_STATS_H

#include <stdio.h>
#include <jansson.h>

#include "app.h"

/* Print the counters in the one human-readable form the appliance uses. */
void weir_stats_print(const struct weir_app *app, FILE *out);

/* The whole counters snapshot (what the stats file holds), new reference. */
json_t *weir_stats_json(const struct weir_app *app);

/* Write the counters as JSON to cfg.stats_file (atomically: temp + rename). */
int weir_stats_write_file(const struct weir_app *app);

#endif /* WEIR_STATS_H */
