/* SPDX-License-Identifier: BSD-3-Clause
 * weir: subscriber plan changes put in force without a policy switch
 * (docs/subscribers.md "Live changes").
 *
 * Each worker has a ring of class commands (lib/worker/class_cmd.h); a plan
 * change of subscribers that exist in both sets with the same devices and
 * node (rates, shaping off/on) becomes one WEIR_CLASS_SET per changed leaf
 * per worker. The worker applies it between bursts: queued packets, their
 * order and every counter stay. Anything else (subscribers or prefixes
 * added or removed, nodes changed) still needs a policy switch.
 */
#ifndef WEIR_SUBS_LIVE_H
#define WEIR_SUBS_LIVE_H

#include <stddef.h>

#include <jansson.h>

#include "app.h"
#include "subscriber.h"

struct weir_worker_conf;

/* Slots of each worker's class-command ring: a larger batch waits for the
 * worker to take the first ones. */
#define SUBS_LIVE_RING 16384

/* The rings (one per configured worker), before the workers are created.
 * 0, or -1 with err. */
int subs_live_init(struct weir_app *a, char *err, size_t errlen);
/* Worker i's conf gets its ring. */
void subs_live_worker_conf(struct weir_app *a, unsigned int i, struct weir_worker_conf *wc);
/* After the workers stopped. */
void subs_live_fini(struct weir_app *a);

/* Worker i's class-command figures for /api/v1/stats: applied, failed,
 * stale, last_err, lat_last_us, lat_max_us. */
json_t *subs_live_worker_json(const struct weir_app *a, unsigned int i);

/* Management's figures of changes put in force in place: applies,
 * leaf_changes, last_leaf_changes, last_us and max_us (from the call until
 * every worker took its commands). */
json_t *subs_live_json(void);

/*
 * Put the change from `cur` (the set in force) to `next` (d: their diff,
 * weir_subs_diff) in force on every worker through WEIR_CLASS_SET
 * commands, and in what management shows (the policy's class figures and
 * its subscriber set, which becomes `next`: the policy takes a reference)
 * without restarting counters or queues. Returns once every worker took
 * its commands (or after a bounded wait: they are in the rings).
 *   1  done;
 *   0  the change needs a policy switch (added or removed subscribers,
 *      other devices or node, nodes changed, no class rings): nothing done;
 *  <0  err says why (a worker's tree refused a change).
 */
int subs_live_apply(struct weir_app *a, const struct weir_subs *cur, const struct weir_subs *next,
		    const struct weir_sub_diff *d, char *err, size_t errlen);

#endif /* WEIR_SUBS_LIVE_H */
