/* SPDX-License-Identifier: BSD-3-Clause
 * weir: keep class rates right in total across workers (management lcore).
 *
 * Every wake of the management loop (10 ms) with two or more shaping
 * workers: sample each leaf's backlogged flows on every worker, re-divide
 * every class's rate and ceiling by demand (lib/worker/share.h) and post each
 * worker its part. The workers read their trees' counters only; nothing
 * here touches the fast path beyond one mailbox per worker.
 */
#include <rte_cycles.h>
#include <rte_malloc.h>

#include "rebalance.h"
#include "mode.h"
#include "worker_view.h"

int
weir_rebalance_init(struct weir_app *a)
{
	const struct weir_policy *pol = a->cfg.policy;

	if (a->cfg.n_workers < 2 || pol == NULL)
		return 0;       /* one tree holds the whole rate: nothing to share */
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		if (pol->tree[d].n_classes == 0)
			continue;
		a->share[d] = weir_share_create(&pol->tree[d], a->cfg.n_workers);
		if (a->share[d] == NULL)
			return -1;
	}
	if (a->share[0] == NULL && a->share[1] == NULL)
		return 0;
	for (unsigned int i = 0; i < a->cfg.n_workers; i++) {
		a->share_box[i] = rte_zmalloc("weir_share_box", sizeof(*a->share_box[i]),
					      RTE_CACHE_LINE_SIZE);
		if (a->share_box[i] == NULL)
			return -1;
	}
	return 0;
}

/*
 * A leaf's demand on a worker: its flows held back there (backlogged).
 * A mode that sizes its flows' windows to the worker's part of the class
 * (tcr, ipabr) keeps their queues short by design, so its flows also count
 * while they send (active): else a TCR flow alone on a worker sizes its
 * window to that worker's small part, queues nothing, and keeps the part
 * small. Not for postack's modes, whose flows queue: there an idle
 * connection counted active on the other worker holds part of the class
 * idle.
 * In tcr and ipabr an idle or light connection counted so is weighed by
 * what it used of its share (weir_share_sample_use, lib/worker/share.h).
 */
static uint32_t
demand(const struct weir_policy_class *k, const struct weir_class_view *v)
{
	if (weir_mode(k->mode)->flags & WEIR_MODEF_WINDOW)
		return RTE_MAX(v->cbq.backlogged, v->active);
	return v->cbq.backlogged;
}

void
weir_rebalance(struct weir_app *a)
{
	const struct weir_policy *pol = a->cfg.policy;
	struct weir_class_view v;

	if (a->share_box[0] == NULL)
		return;
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		struct weir_share *s = a->share[d];

		if (s == NULL)
			continue;
		for (unsigned int w = 0; w < a->n_workers; w++)
			for (uint16_t c = 0; c < s->n_classes; c++)
				/* A worker still on the previous policy keeps
				 * its last sample until it takes this one. */
				if (pol->tree[d].classes[c].is_leaf &&
				    weir_worker_class_view(a->workers[w], pol, d, c, &v) == 0) {
					weir_share_sample(s, w, c, demand(&pol->tree[d].classes[c], &v));
					weir_share_sample_use(s, w, c, v.heavy, v.active - v.heavy,
							      v.light_bps);
				}
		weir_share_split(s);
	}
	for (unsigned int w = 0; w < a->n_workers; w++)
		if (weir_share_moved(a->share_box[w], pol->epoch, a->share, w)) {
			weir_share_publish(a->share_box[w], pol->epoch, a->share, w);
			a->rebalances++;
		}
}

void
weir_rebalance_free(struct weir_app *a)
{
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		weir_share_free(a->share[d]);
		a->share[d] = NULL;
	}
	for (unsigned int i = 0; i < WEIR_MAX_WORKERS; i++) {
		rte_free(a->share_box[i]);
		a->share_box[i] = NULL;
	}
}

void
weir_rebalance_policy(struct weir_app *a)
{
	if (a->share_box[0] == NULL)
		return;         /* one worker: its trees hold the whole rates */
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		weir_share_free(a->share[d]);
		a->share[d] = a->cfg.policy->tree[d].n_classes != 0 ?
			      weir_share_create(&a->cfg.policy->tree[d], a->n_workers) : NULL;
	}
}
