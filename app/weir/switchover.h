/* SPDX-License-Identifier: BSD-3-Clause
 * weir: switching a running appliance's workers to a new policy
 * (management lcore): what a reload (reload.c) and a hook's set_class
 * (hooks.c) both end with.
 */
#ifndef WEIR_SWITCHOVER_H
#define WEIR_SWITCHOVER_H

#include <stddef.h>
#include <stdint.h>

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

/* weir_policy_apply for a policy whose ACL tries are built already (the
 * reload's compile job, in build_us, which the switch's prepare time
 * includes). */
int weir_policy_apply_built(struct weir_app *a, struct weir_policy *np,
			    const struct weir_config *src, uint64_t build_us, char *err,
			    size_t errlen);

#endif /* WEIR_SWITCHOVER_H */
