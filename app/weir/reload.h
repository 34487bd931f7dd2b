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

/* Give a policy's classifier its ACL tries when it has enough rules (needs
 * EAL; before the policy reaches the workers). A failure is logged and the
 * scan stays. */
void weir_policy_accelerate(struct weir_policy *p);

/* Re-read the configuration file and switch every worker to its policy.
 * On any error (the file's, or a change that needs a restart) the running
 * policy stays and err says why (FILE:LINE: ... for the file's errors). */
int weir_reload(struct weir_app *a, char *err, size_t errlen);

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

/* SIGHUP or POST /api/v1/policy/reload: re-read the config and switch to
 * its policy now. 0 (app->reload_error says if a worker takes it late), or
 * -1 with the running policy kept and app->reload_error saying why. */
int weir_mgmt_reload(struct weir_app *app);

#endif /* WEIR_RELOAD_H */
