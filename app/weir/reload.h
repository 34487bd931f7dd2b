/* SPDX-License-Identifier: BSD-3-Clause
 * weir: reloading the policy of a running appliance (management lcore).
 */
#ifndef WEIR_RELOAD_H
#define WEIR_RELOAD_H

#include <stddef.h>

#include "app.h"
#include "switchover.h"

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
