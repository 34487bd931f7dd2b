/* SPDX-License-Identifier: BSD-3-Clause
 * weir: subscriber plan changes without a policy switch (subs_live.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_ring.h>

#include "class_cmd.h"
#include "policy_subs.h"
#include "share.h"
#include "subs_live.h"
#include "worker.h"

/* How long a change waits for a full ring, and for every worker to take it. */
#define SUBS_LIVE_WAIT_US 2000000

int
subs_live_init(struct weir_app *a, char *err, size_t errlen)
{
	for (unsigned int i = 0; i < a->cfg.n_workers; i++) {
		char name[RTE_RING_NAMESIZE];

		snprintf(name, sizeof(name), "weir_cls_%u", i);
		a->class_ring[i] = weir_class_cmd_ring(name, SUBS_LIVE_RING,
					(int)rte_lcore_to_socket_id(a->cfg.worker_lcores[i]));
		if (a->class_ring[i] == NULL) {
			snprintf(err, errlen, "cannot create worker %u's class-command ring (%u slots): %s "
				 "(raise EAL memory, -m)", i, SUBS_LIVE_RING, rte_strerror(rte_errno));
			return -1;
		}
	}
	return 0;
}

void
subs_live_worker_conf(struct weir_app *a, unsigned int i, struct weir_worker_conf *wc)
{
	wc->class_cmds = a->class_ring[i];
}

void
subs_live_fini(struct weir_app *a)
{
	for (unsigned int i = 0; i < WEIR_MAX_WORKERS; i++) {
		rte_ring_free(a->class_ring[i]);
		a->class_ring[i] = NULL;
	}
}

json_t *
subs_live_worker_json(const struct weir_app *a, unsigned int i)
{
	struct weir_class_cmd_stats st;
	const double us = (double)rte_get_tsc_hz() / 1e6;

	weir_worker_class_cmd_stats(a->workers[i], &st);
	return json_pack("{s:I, s:I, s:I, s:i, s:f, s:f}", "applied", (json_int_t)st.applied,
			 "failed", (json_int_t)st.failed, "stale", (json_int_t)st.stale,
			 "last_err", st.last_err, "lat_last_us", (double)st.lat_last / us,
			 "lat_max_us", (double)st.lat_max / us);
}

/* Management's own figures of the changes it put in force (management
 * lcore only). */
static struct {
	uint64_t applies;       /* changes put in force in place */
	uint64_t leaves;        /* leaf plans changed by them */
	uint32_t last_leaves;
	uint64_t last_tsc, max_tsc;     /* from the call (the PATCH's copy of the set included)
					 * until every worker took its commands */
} live_st;

json_t *
subs_live_json(void)
{
	const double us = (double)rte_get_tsc_hz() / 1e6;

	return json_pack("{s:I, s:I, s:I, s:f, s:f}", "applies", (json_int_t)live_st.applies,
			 "leaf_changes", (json_int_t)live_st.leaves,
			 "last_leaf_changes", (json_int_t)live_st.last_leaves,
			 "last_us", (double)live_st.last_tsc / us, "max_us", (double)live_st.max_tsc / us);
}

/* One leaf's new plan in one tree. */
struct leaf_change {
	uint8_t dir;
	uint32_t cls;
	uint64_t rate, ceil;
};

struct changes {
	struct leaf_change *v;
	uint32_t n, cap;
};

static int
changes_add(struct changes *c, uint8_t dir, uint32_t cls, uint64_t rate, uint64_t ceil)
{
	if (c->n == c->cap) {
		uint32_t cap = c->cap ? c->cap * 2 : 64;
		struct leaf_change *v = realloc(c->v, (size_t)cap * sizeof(*v));

		if (v == NULL)
			return -1;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = (struct leaf_change){ .dir = dir, .cls = cls, .rate = rate, .ceil = ceil };
	return 0;
}

/* Can subscriber i change in place: the same id at the same index (the
 * policy's lookup and targets are by index), the same node, devices and box? */
static bool
same_place(const struct weir_subs *cur, const struct weir_subs *next, uint32_t i)
{
	const struct weir_sub *x = weir_subs_get(cur, i), *y = weir_subs_get(next, i);
	const struct weir_sub_prefix *px = weir_subs_prefixes(cur), *py = weir_subs_prefixes(next);

	if (strcmp(x->id, y->id) != 0 || x->node != y->node || x->box != y->box ||
	    x->n_prefixes != y->n_prefixes || x->n_macs != y->n_macs)
		return false;
	for (uint32_t k = 0; k < x->n_prefixes; k++) {
		const struct weir_sub_prefix *a = &px[x->first_prefix + k], *b = &py[y->first_prefix + k];

		if (a->family != b->family || a->len != b->len || memcmp(a->addr, b->addr, 16) != 0)
			return false;
	}
	return x->n_macs == 0 || memcmp(&weir_subs_macs(cur)[x->first_mac],
					&weir_subs_macs(next)[y->first_mac],
					x->n_macs * sizeof(struct weir_sub_mac)) == 0;
}

static bool
same_plan(const struct weir_sub *x, const struct weir_sub *y)
{
	return x->flags == y->flags && memcmp(x->min, y->min, sizeof(x->min)) == 0 &&
	       memcmp(x->max, y->max, sizeof(x->max)) == 0;
}

/* Subscriber i's leaves whose plan moves, into c. 0, 1 (not in place: a
 * switch), -1 (no memory). */
static int
sub_changes(const struct weir_policy *p, const struct weir_subs *next, uint32_t i,
	    struct changes *c)
{
	char name[WEIR_POLICY_NAME_LEN];

	weir_subs_class_name(next, i, name);
	for (uint8_t d = 0; d < WEIR_POLICY_DIRS; d++) {
		const struct weir_policy_tree *t = &p->tree[d];
		uint32_t k = p->targets[p->sub_target[i]].leaf[d];
		uint64_t rate, ceil;

		if (t->n_classes == 0 || k == WEIR_CBQ_NONE || k >= t->n_classes)
			continue;
		/* A direction without the subscriber's leaf uses the default class. */
		if (strcmp(t->classes[k].name, name) != 0)
			continue;
		weir_subs_leaf_plan(next, i, d, p->src.conf.tree[d].rate, &rate, &ceil);
		if (rate == t->classes[k].cbq.rate && ceil == t->classes[k].cbq.ceil)
			continue;
		if (ceil > t->classes[t->classes[k].cbq.parent].cbq.ceil)
			return 1;       /* above its parent: the policy's own checks decide */
		if (changes_add(c, d, k, rate, ceil) != 0)
			return -1;
	}
	return 0;
}

/* Every changed leaf of next against the policy in force. 1: in place;
 * 0: needs a switch; -1: no memory. */
static int
collect(const struct weir_policy *p, const struct weir_subs *cur, const struct weir_subs *next,
	struct changes *c)
{
	const uint32_t n = weir_subs_count(next);

	if (n != weir_subs_count(cur))
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		int rc;

		if (same_plan(weir_subs_get(cur, i), weir_subs_get(next, i))) {
			if (strcmp(weir_subs_get(cur, i)->id, weir_subs_get(next, i)->id) != 0)
				return 0;
			continue;
		}
		if (!same_place(cur, next, i))
			return 0;
		rc = sub_changes(p, next, i, c);
		if (rc != 0)
			return rc < 0 ? -1 : 0;
	}
	return 1;
}

/* Worker w's part of a leaf's new rate: as the rate-sharing split gives
 * it the old one now (the split follows the policy's figures within its
 * next round); 1/n without a split, and for the classes the share box does
 * not carry (they keep the even split they were built with). */
static uint64_t
worker_part(const struct weir_app *a, const struct weir_policy_class *pc, uint8_t dir,
	    uint32_t cls, unsigned int w, uint64_t v, bool ceil)
{
	const struct weir_share *s = a->share[dir];
	uint64_t part, whole;

	if (a->n_workers <= 1)
		return v;
	if (s == NULL || cls >= weir_share_box_classes(s->n_classes))
		return RTE_MAX(v / a->n_workers, WEIR_CBQ_SHARE_MIN);
	part = ceil ? weir_share_ceil(s, w, cls) : weir_share_rate(s, w, cls);
	whole = ceil ? pc->cbq.ceil : pc->cbq.rate;
	if (whole == 0 || part == 0)
		return RTE_MAX(v / a->n_workers, WEIR_CBQ_SHARE_MIN);
	return RTE_MAX((uint64_t)((unsigned __int128)v * part / whole), WEIR_CBQ_SHARE_MIN);
}

static uint64_t
cmds_done(const struct weir_app *a, unsigned int w, uint64_t *failed)
{
	struct weir_class_cmd_stats st;

	weir_worker_class_cmd_stats(a->workers[w], &st);
	if (failed != NULL)
		*failed = st.failed;
	return st.applied + st.failed + st.stale;
}

/* Post every change to worker w. 0, or -1 when its ring stayed full. */
static int
post_worker(const struct weir_app *a, const struct weir_policy *p, unsigned int w,
	    const struct changes *c, uint64_t deadline)
{
	for (uint32_t j = 0; j < c->n; j++) {
		const struct leaf_change *lc = &c->v[j];
		const struct weir_policy_class *pc = &p->tree[lc->dir].classes[lc->cls];
		struct weir_class_cmd cmd = {
			.op = WEIR_CLASS_SET, .dir = lc->dir, .epoch = p->epoch, .cls = lc->cls,
			.conf = pc->cbq,
		};

		cmd.conf.rate = worker_part(a, pc, lc->dir, lc->cls, w, lc->rate, false);
		cmd.conf.ceil = RTE_MAX(worker_part(a, pc, lc->dir, lc->cls, w, lc->ceil, true),
					cmd.conf.rate);
		while (weir_class_cmd_post(a->class_ring[w], &cmd) != 0) {
			if (rte_rdtsc() > deadline)
				return -1;
			rte_delay_us_sleep(20);
		}
	}
	return 0;
}

/* Management's view: the policy's class figures (what /classes, the
 * subscriber API and the rate-sharing split read) and its subscriber set.
 * Plain 64-bit stores: a worker reading a class's rate for a marker's share
 * sees the old or the new figure. */
static void
show_changes(struct weir_policy *p, const struct weir_subs *cur, const struct weir_subs *next,
	     const struct changes *c)
{
	for (uint32_t j = 0; j < c->n; j++) {
		const struct leaf_change *lc = &c->v[j];
		struct weir_policy_class *pc = &p->tree[lc->dir].classes[lc->cls];
		struct weir_policy_class_conf *sc = p->src.classes[lc->dir];

		pc->cbq.rate = lc->rate;
		pc->cbq.ceil = lc->ceil;
		/* The policy's own source (what a later class change rebuilds from):
		 * class k of the tree is entry k - 1 there, the root not being listed. */
		if (sc != NULL && lc->cls >= 1 && lc->cls <= p->src.conf.tree[lc->dir].n_classes &&
		    strcmp(sc[lc->cls - 1].name, pc->name) == 0) {
			sc[lc->cls - 1].rate = lc->rate;
			sc[lc->cls - 1].ceil = lc->ceil;
		}
	}
	weir_subs_ref(next);
	p->subs = next;
	p->src.conf.subs = next;
	weir_subs_free((struct weir_subs *)(uintptr_t)cur);
}

static int
apply_from(struct weir_app *a, const struct weir_subs *cur, const struct weir_subs *next,
	   const struct weir_sub_diff *d, char *err, size_t errlen, uint64_t t0)
{
	struct weir_policy *p = a->cfg.policy;
	struct changes c = { 0 };
	uint64_t before[WEIR_MAX_WORKERS], failed0[WEIR_MAX_WORKERS], failed = 0;
	uint64_t deadline;
	int rc;

	if (p == NULL || p->subs != cur || cur == NULL || next == NULL || a->n_workers == 0 ||
	    a->class_ring[0] == NULL || p->sub_target == NULL)
		return 0;
	if (d->n[WEIR_SUB_ADDED] != 0 || d->n[WEIR_SUB_REMOVED] != 0 || d->nodes_changed)
		return 0;
	rc = collect(p, cur, next, &c);
	if (rc <= 0) {
		free(c.v);
		if (rc < 0)
			snprintf(err, errlen, "out of memory");
		return rc;
	}
	deadline = rte_rdtsc() + rte_get_tsc_hz() / 1000000 * SUBS_LIVE_WAIT_US;
	for (unsigned int w = 0; w < a->n_workers; w++)
		before[w] = cmds_done(a, w, &failed0[w]);
	for (unsigned int w = 0; w < a->n_workers; w++)
		if (post_worker(a, p, w, &c, deadline) != 0) {
			/* Only a worker that stopped taking commands gets here. */
			snprintf(err, errlen, "worker %u did not take its class changes within %u ms; "
				 "the plan is partly in force (reload the subscribers)", w,
				 SUBS_LIVE_WAIT_US / 1000);
			show_changes(p, cur, next, &c);
			free(c.v);
			return -1;
		}
	show_changes(p, cur, next, &c);
	/* In force: every worker took what was posted to it. */
	for (unsigned int w = 0; w < a->n_workers; w++) {
		uint64_t f;

		while (cmds_done(a, w, &f) < before[w] + c.n && rte_rdtsc() < deadline)
			rte_delay_us_sleep(20);
		failed += f - failed0[w];
	}
	live_st.applies++;
	live_st.leaves += c.n;
	live_st.last_leaves = c.n;
	live_st.last_tsc = rte_rdtsc() - t0;
	live_st.max_tsc = RTE_MAX(live_st.max_tsc, live_st.last_tsc);
	RTE_LOG(INFO, USER1, "subscribers: %u leaf plans changed in place on %u workers\n", c.n,
		a->n_workers);
	free(c.v);
	if (failed != 0) {
		snprintf(err, errlen, "%llu class changes were refused by the workers' trees; the plan "
			 "is partly in force (reload the subscribers)", (unsigned long long)failed);
		return -1;
	}
	return 1;
}

int
subs_live_apply(struct weir_app *a, const struct weir_subs *cur, const struct weir_subs *next,
		const struct weir_sub_diff *d, char *err, size_t errlen)
{
	return apply_from(a, cur, next, d, err, errlen, rte_rdtsc());
}
