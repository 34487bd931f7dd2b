/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the Lua policy's hooks, run on the management lcore.
 */
#ifndef WEIR_HOOKS_H
#define WEIR_HOOKS_H

#include <stddef.h>

#include "app.h"

/* With policy.script: open the script's live engine, make its compiled
 * policy the one in force, and create each worker's event and command
 * rings (before the workers start). 0, or -1 with err. */
int weir_hooks_init(struct weir_app *a, char *err, size_t errlen);
/* Wire a worker's conf to its rings (start_workers). */
void weir_hooks_worker_conf(struct weir_app *a, unsigned int i, struct weir_worker_conf *wc);
/* Every management wake: due timers, flow events to on_flow / on_flow_end
 * for at most app->hook_budget_us of the wake (events left wait in their
 * rings), and a policy switch if a hook changed a class. */
void weir_hooks_poll(struct weir_app *a);
/* Every stats interval: on_stats with class and LAN host totals. */
void weir_hooks_stats(struct weir_app *a);
/* A reload opened a new engine (or none): it replaces the old one. */
void weir_hooks_replace(struct weir_app *a, struct weir_lua *l);
void weir_hooks_free(struct weir_app *a);

#endif /* WEIR_HOOKS_H */
