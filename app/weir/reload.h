/* SPDX-License-Identifier: BSD-3-Clause
 * weir: switching a running appliance to a new policy (management lcore).
 */
#ifndef WEIR_RELOAD_H
#define WEIR_RELOAD_H

#include <stddef.h>

#include "app.h"

/* One direction's class tree for one worker on `socket`, from policy pol
 * with every rate at num/den (a worker's first share), with the tree
 * parameters (limits, quantum, overhead) of cfg. */
struct weir_cbq *weir_app_shaper(const struct weir_config *cfg, const struct weir_policy *pol,
				 int dir, int socket);

/* Give a policy's classifier its ACL tries, in EAL memory on `socket`,
 * when it has enough rules (before the policy reaches the workers; any
 * thread once EAL is up). A failure is logged and the scan stays. */
void weir_policy_accelerate(struct weir_policy *p, int socket);

/* Switch every worker to np (compiled, not yet in use; its epoch is set
 * here). -1: nothing was posted, np is still the caller's, err says why.
 * 0: np is in force and the old policy is freed. 1: np is in force (it was
 * posted, so the app owns it from then on) but a worker had not taken it
 * when the wait ended; err says which, and the old policy waits for
 * weir_reload_retire(). Never free np after 0 or 1. */
int weir_policy_apply(struct weir_app *a, struct weir_policy *np, const struct weir_config *src,
		      char *err, size_t errlen);

/* Every management wake: free what a late switch left (the old policy,
 * the posted switch array) once every worker acknowledged it. */
void weir_reload_retire(struct weir_app *a);

/* Shutdown, workers stopped: a late worker takes its switch on the calling
 * lcore, then everything retires. Before the workers are freed. */
void weir_reload_shutdown(struct weir_app *a);

/* How a reload ended, on the management lcore: rc as weir_mgmt_reload. */
typedef void weir_reload_done_fn(struct weir_app *app, int rc, void *arg);

/* SIGHUP, POST /api/v1/policy/reload, PUT /api/v1/policy: re-read the
 * config file, run its script, compile its policy and build the ACL tries
 * off the loop (compile_job.h), then switch on the loop. 1: under way,
 * done(app, rc, arg) comes from a later management wake (done may be
 * NULL). -1: refused now (a switch is already under way, or no memory),
 * done is not called, app->reload_error says why. */
int weir_mgmt_reload_start(struct weir_app *app, weir_reload_done_fn *done, void *arg);

/* The same, waited for: 0 (app->reload_error says if a worker takes it
 * late), or -1 with the running policy kept and app->reload_error saying
 * why (FILE:LINE: ... for the file's errors). A switch under way is waited
 * for first. */
int weir_mgmt_reload(struct weir_app *app);

#endif /* WEIR_RELOAD_H */
