/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the management lcore's loop (mgmt.c), the one place that calls
 * into every management part: REST, reloads, the rebalancer, the hooks,
 * the stats file and telemetry. None of those call back into it.
 */
#ifndef WEIR_MGMT_H
#define WEIR_MGMT_H

#include "app.h"

/* Serve REST, take SIGHUP reloads, rebalance, run hooks and publish the
 * stats every interval, until app->quit. */
void weir_mgmt_loop(struct weir_app *app);

#endif /* WEIR_MGMT_H */
