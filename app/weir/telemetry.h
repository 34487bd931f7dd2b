/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the counters on DPDK's telemetry socket (/weir/status, /weir/classes,
 * /weir/counters), for dpdk-telemetry.py and other EAL-aware tools.
 *
 * The callbacks run on DPDK's telemetry thread, which must not read the
 * appliance's live state (the management lcore owns it): they answer from
 * a copy of the stats snapshot the management loop publishes each stats
 * interval.
 */
#ifndef WEIR_TELEMETRY_H
#define WEIR_TELEMETRY_H

#include "app.h"

/* Register the commands and publish a first snapshot (after EAL init). */
void weir_telemetry_init(struct weir_app *a);

/* Replace the snapshot the commands answer from (management lcore). */
void weir_telemetry_publish(const struct weir_app *a);

/* Drop the snapshot: the commands answer nothing from now on. */
void weir_telemetry_stop(void);

#endif /* WEIR_TELEMETRY_H */
