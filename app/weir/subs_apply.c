/* SPDX-License-Identifier: BSD-3-Clause
 * weir: put a changed subscriber set in force (subs_apply.h).
 *
 * Plans of existing subscribers change in place on every worker
 * (subs_live.c: class commands, counters and queues kept). Anything else
 * (subscribers, prefixes or nodes added or removed) is a switch: the policy
 * in force is rebuilt with the next set in place of its own (the config's
 * own classes and rules kept) and every worker switches at once (queued
 * packets keep their order, nothing is dropped by the switch).
 */
#include <stdio.h>
#include <stdlib.h>

#include <rte_log.h>

#include "app.h"
#include "policy_subs.h"
#include "switchover.h"
#include "subs_apply.h"
#include "subs_live.h"

/* The policy in force with subscriber set s in place of its own: the
 * trees' own classes kept, the subscribers' rebuilt. NULL with err; *full
 * set when the class tree cannot hold them. */
static struct weir_policy *
policy_with_subs(const struct weir_app *a, const struct weir_policy *p,
		 const struct weir_subs *s, bool *full, char *err, size_t errlen)
{
	struct weir_policy_conf pc = p->src.conf;
	struct weir_policy_class_conf *cls[WEIR_POLICY_DIRS] = { NULL, NULL };
	struct weir_policy_err perr;
	struct weir_policy *np = NULL;

	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		struct weir_policy_tree_conf *tc = &pc.tree[d];

		if (tc->rate == 0 || tc->n_classes == 0)
			continue;
		if ((uint64_t)pc.subs_base[d] + weir_subs_class_count(s) + 1 >
		    WEIR_POLICY_MAX_CLASSES)
			*full = true;
		cls[d] = weir_subs_classes(s, d, tc->rate, a->cfg.subs_parent, tc->classes,
					   pc.subs_base[d], tc->mode, err, errlen);
		if (cls[d] == NULL)
			goto out;
		tc->classes = cls[d];
		tc->n_classes = (uint16_t)(pc.subs_base[d] + weir_subs_class_count(s));
	}
	pc.subs = s;
	np = weir_policy_build(&pc, 0, &perr);
	if (np == NULL)
		snprintf(err, errlen, "%s", perr.msg);
out:
	free(cls[0]);
	free(cls[1]);
	return np;
}

int
subs_apply(struct weir_app *a, struct weir_subs *next, const struct weir_sub_diff *d,
	   char *err, size_t errlen)
{
	const struct weir_policy *p = a->cfg.policy;
	struct weir_sub_diff own;
	struct weir_policy *np;
	bool full = false;
	int rc;

	if (p == NULL || p->subs == NULL) {
		weir_subs_free(next);
		snprintf(err, errlen, "no subscribers: the config has no 'subscribers'");
		return WEIR_SUBS_REFUSED;
	}
	if (d == NULL) {
		weir_subs_diff(p->subs, next, &own, NULL, NULL);
		d = &own;
	}
	if (!subs_diff_any(d)) {
		weir_subs_free(next);
		return 0;
	}
	rc = subs_live_apply(a, p->subs, next, d, err, errlen);
	if (rc != 0) {
		weir_subs_free(next);   /* the policy took its own reference when in force */
		if (rc < 0)
			return WEIR_SUBS_REFUSED;
		err[0] = '\0';
		return WEIR_SUBS_IN_PLACE;
	}
	if (a->cfg.subs_max != 0 && weir_subs_count(next) > a->cfg.subs_max) {
		snprintf(err, errlen, "%u subscribers, more than this box takes "
			 "('subscribers.max' = %u)", weir_subs_count(next), a->cfg.subs_max);
		weir_subs_free(next);
		a->subs_full++;
		return WEIR_SUBS_FULL;
	}
	np = policy_with_subs(a, p, next, &full, err, errlen);
	weir_subs_free(next);   /* np holds its own reference */
	if (np == NULL) {
		if (full)
			a->subs_full++;
		return full ? WEIR_SUBS_FULL : WEIR_SUBS_REFUSED;
	}
	rc = weir_policy_apply(a, np, &a->cfg, err, errlen);
	if (rc < 0) {
		weir_policy_free(np);
		return WEIR_SUBS_REFUSED;
	}
	if (rc > 0)
		RTE_LOG(WARNING, USER1, "%s\n", err);
	err[0] = '\0';
	RTE_LOG(NOTICE, USER1, "policy %u in force (subscribers: %u added, %u removed, "
		"%u changed)\n", a->cfg.policy->epoch, d->n[WEIR_SUB_ADDED],
		d->n[WEIR_SUB_REMOVED], d->n[WEIR_SUB_RATES] + d->n[WEIR_SUB_CHANGED]);
	return 0;
}
