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
 * here). Takes np on success; the old policy is freed once every worker
 * has let go of it. */
int weir_policy_apply(struct weir_app *a, struct weir_policy *np, const struct weir_config *src,
		      char *err, size_t errlen);

#endif /* WEIR_RELOAD_H */
