/* SPDX-License-Identifier: BSD-3-Clause
 * weir: switching the workers to a new policy (switchover.h). The
 * management lcore builds each worker a fresh class tree from it and posts
 * it; each worker takes it between two bursts (lib/worker/worker.h: struct
 * weir_policy_switch), moving what it has queued. The old policy is freed
 * once every worker has acknowledged: a quiescent-state scheme with one
 * pointer per worker, no locks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_pause.h>

#include "switchover.h"
#include "policy_subs.h"
#include "rebalance.h"
#include "worker_view.h"

#define ACK_WAIT_US 5000000     /* a worker polls every few microseconds; 5 s is "stuck" */

struct weir_cbq *
weir_app_shaper(const struct weir_config *cfg, const struct weir_policy *pol, int dir, int socket)
{
	struct weir_cbq_class_conf *classes = malloc(((size_t)pol->tree[dir].n_classes + 1) *
						     sizeof(*classes));
	struct weir_cbq *c;

	if (classes == NULL)
		return NULL;
	const struct weir_cbq_conf conf = {
		.socket_id = socket,
		.tsc_hz = rte_get_tsc_hz(),
		/* n workers get 1/n of every rate to start with; the management
		 * lcore re-divides by demand (docs/multiworker.md). */
		.n_classes = weir_policy_cbq_classes(pol, dir, 1, cfg->n_workers, classes),
		.classes = classes,
		/* flow slots + frames without a flow + a queue per fifo leaf */
		.n_queues = cfg->flow_capacity + 1 + WEIR_POLICY_QUEUES_EXTRA(pol),
		.flow_limit = cfg->shape_flow_limit,
		.flow_quantum = cfg->shape_flow_quantum,
		.burst_us = cfg->shape_burst_us,
		.overhead = cfg->shape_overhead,
		.backlog_limit = weir_config_tree_backlog(cfg),
		.qm_params = &pol->tree[dir].qm_params,
	};

	c = weir_cbq_create(&conf);
	free(classes);
	return c;
}

void
weir_policy_accelerate(struct weir_policy *p, int socket)
{
	char err[256];
	uint64_t t0 = rte_rdtsc();
	int rc = weir_classifier_accelerate(p->classifier, socket, err, sizeof(err));

	/* No epoch: a new policy gets its epoch when it is switched to. */
	if (rc < 0)
		RTE_LOG(WARNING, USER1, "policy: %u rules stay on the first-match scan: %s\n",
			weir_classifier_n_rules(p->classifier), err);
	else if (rc > 0)
		RTE_LOG(INFO, USER1, "policy: %u rules compiled into ACL tries in %.1f ms\n",
			weir_classifier_n_rules(p->classifier),
			(double)(rte_rdtsc() - t0) * 1e3 / (double)rte_get_tsc_hz());
	/* Without its lookup a subscriber's flows would take the rules: loud. */
	if (weir_policy_subs_accelerate(p, socket, err, sizeof(err)) != 0)
		RTE_LOG(ERR, USER1, "policy: subscribers' address lookup not built, their flows "
			"take the rules: %s\n", err);
}

static uint32_t
wait_us(const struct weir_app *a)
{
	return a->switch_wait_us != 0 ? a->switch_wait_us : ACK_WAIT_US;
}

static bool
acked(const struct weir_worker *w, uint32_t epoch)
{
	/* Epochs only grow; serial comparison keeps that true across a wrap. */
	return (int32_t)(weir_worker_policy_acked(w) - epoch) >= 0;
}

/* Wait until every worker acknowledged `epoch` or the wait ends. The time
 * is measured: a signal cutting a sleep short must not shorten it. Returns
 * true (late) with *which = the first worker that has not. */
static bool
wait_acked(const struct weir_app *a, uint32_t epoch, unsigned int *which)
{
	const uint64_t hz = rte_get_timer_hz();
	const uint64_t end = rte_get_timer_cycles() + (uint64_t)wait_us(a) * hz / 1000000;
	unsigned int i;

	for (;;) {
		uint64_t now, left_us;

		for (i = 0; i < a->n_workers && acked(a->workers[i], epoch); i++)
			;
		if (i == a->n_workers)
			return false;
		now = rte_get_timer_cycles();
		if (now >= end)
			break;
		/* 1 ms sleeps; the last millisecond spins, so the wait ends on
		 * time even when it is shorter than a sleep's slack. */
		left_us = (end - now) * 1000000 / hz;
		if (left_us >= 1000)
			usleep(1000);
		else
			rte_pause();
	}
	*which = i;
	return true;
}

void
weir_reload_retire(struct weir_app *a)
{
	if (a->retire.policy == NULL && a->retire.sw == NULL)
		return;
	for (unsigned int i = 0; i < a->n_workers; i++)
		if (!acked(a->workers[i], a->retire.epoch))
			return;
	weir_policy_free(a->retire.policy);
	free(a->retire.sw);     /* every entry taken: the trees are the workers' */
	memset(&a->retire, 0, sizeof(a->retire));
	RTE_LOG(NOTICE, USER1, "every worker took policy %u; the previous one is freed\n",
		a->cfg.policy->epoch);
}

void
weir_reload_shutdown(struct weir_app *a)
{
	/* The workers are stopped: a late one takes its switch here, on this
	 * lcore, so its trees and the old policy end the usual way. */
	for (unsigned int i = 0; i < a->n_workers; i++)
		if (a->workers[i] != NULL)
			weir_worker_policy_take(a->workers[i]);
	weir_reload_retire(a);
}

static void
switch_free(struct weir_policy_switch *sw)
{
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		weir_cbq_free(sw->shaper[d]);
		rte_free(sw->cls_ctr[d]);
	}
}

/* What refuses a switch to np before anything is built: 0, or -1 with err. */
static int
apply_check(struct weir_app *a, const struct weir_policy *np, const struct weir_config *src,
	    char *err, size_t errlen)
{
	struct weir_policy *op = a->cfg.policy;

	err[0] = '\0';
	if (op == NULL || np == NULL) {
		snprintf(err, errlen, "%s:%d: turning shaping on or off needs a restart", src->path,
			 src->shaping_line[WEIR_PORT_LAN]);
		return -1;
	}
	for (int d = 0; d < WEIR_PORT__COUNT; d++)
		if ((op->tree[d].n_classes != 0) != (np->tree[d].n_classes != 0)) {
			snprintf(err, errlen, "%s:%d: shaping the %s direction or not needs a restart",
				 src->path, src->shaping_line[d],
				 d == WEIR_PORT_LAN ? "outbound" : "inbound");
			return -1;
		}
	/* One switch at a time: the management lcore is the only poster, so a
	 * worker still holding a posted switch (one that did not take the last
	 * within the wait) is found here, before anything is built or posted. */
	weir_reload_retire(a);
	for (unsigned int i = 0; i < a->n_workers; i++)
		if (weir_worker_switch_pending(a->workers[i]) ||
		    !acked(a->workers[i], op->epoch)) {
			/* (A worker clears pending just before it acks: until
			 * both, the previous switch is not retired either.) */
			snprintf(err, errlen, "worker %u has not taken policy %u yet: try again", i,
				 op->epoch);
			return -1;
		}
	return 0;
}

/* weir_policy_apply; built: np's tries were built already (by the compile
 * job, in build_us), which the switch's prepare time includes. */
static int
apply(struct weir_app *a, struct weir_policy *np, const struct weir_config *src, bool built,
      uint64_t build_us, char *err, size_t errlen)
{
	struct weir_policy *op = a->cfg.policy;
	struct weir_policy_switch *sw = NULL;
	struct weir_config tcfg;
	unsigned int i;
	bool late;
	uint64_t t0 = rte_rdtsc(), t_post;

	/* Here, after any compile off the loop: the policy in force, or a
	 * worker's state, may have changed meanwhile (a hook's switch). */
	if (apply_check(a, np, src, err, errlen) < 0)
		return -1;
	np->epoch = op->epoch + 1;
	if (!built)
		weir_policy_accelerate(np, (int)rte_socket_id());
	/* The trees follow the new file's tree parameters but keep the running
	 * flow capacity and worker count (those need a restart). */
	tcfg = *src;
	tcfg.flow_capacity = a->cfg.flow_capacity;
	tcfg.n_workers = a->n_workers;
	sw = calloc(a->n_workers, sizeof(*sw));
	if (sw == NULL)
		goto nomem;
	for (i = 0; i < a->n_workers; i++) {
		int socket = (int)rte_lcore_to_socket_id(a->cfg.worker_lcores[i]);

		sw[i].policy = np;
		for (int d = 0; d < WEIR_PORT__COUNT; d++) {
			if (np->tree[d].n_classes == 0)
				continue;
			sw[i].shaper[d] = weir_app_shaper(&tcfg, np, d, socket);
			sw[i].cls_ctr[d] = rte_zmalloc_socket("weir_class_ctr",
				np->tree[d].n_classes * sizeof(*sw[i].cls_ctr[d]), RTE_CACHE_LINE_SIZE,
				socket);
			if (sw[i].shaper[d] == NULL || sw[i].cls_ctr[d] == NULL)
				goto nomem;
		}
		/* A mode's per-flow state, if np is the first to use the mode. */
		if (weir_worker_policy_prepare(a->workers[i], np) != 0)
			goto nomem;
	}
	t_post = rte_rdtsc();
	/* Cannot fail: the directions were checked and no switch is pending. */
	for (i = 0; i < a->n_workers; i++)
		(void)weir_worker_policy_post(a->workers[i], &sw[i]);
	/* From here on np is in force: a worker may take it any time, so it is
	 * never the caller's to free again, whatever the wait below sees. */
	late = wait_acked(a, np->epoch, &i);
	/* Preparing (ACL tries, trees) and the workers' taking it: what a
	 * switch costs, for the stats file. */
	a->switch_prepare_us = build_us + (t_post - t0) * 1000000 / rte_get_tsc_hz();
	a->switch_take_us = (rte_rdtsc() - t_post) * 1000000 / rte_get_tsc_hz();
	a->cfg.policy = np;
	a->cfg.shape_flow_limit = src->shape_flow_limit;
	a->cfg.shape_flow_quantum = src->shape_flow_quantum;
	a->cfg.shape_burst_us = src->shape_burst_us;
	a->cfg.shape_overhead = src->shape_overhead;
	if (late) {
		/* The old policy is still the late worker's (and, until it takes
		 * the switch, so is its tree); sw[i] is the worker's to read.
		 * Both wait for weir_reload_retire(). */
		a->retire.policy = op;
		a->retire.sw = sw;
		a->retire.epoch = np->epoch;
		a->switches_late++;
		snprintf(err, errlen, "worker %u has not taken policy %u within %u ms; it is in "
			 "force, and the old policy is freed once that worker takes it", i, np->epoch,
			 wait_us(a) / 1000);
	} else {
		weir_policy_free(op);
		free(sw);       /* the trees and counters are the workers' now */
	}
	weir_rebalance_policy(a);
	a->reloads++;
	return late ? 1 : 0;
nomem:
	if (sw != NULL) {
		for (i = 0; i < a->n_workers; i++)
			switch_free(&sw[i]);
		free(sw);
	}
	if (err[0] == '\0')
		snprintf(err, errlen, "out of memory building the new class trees (raise EAL memory, -m)");
	return -1;
}

int
weir_policy_apply(struct weir_app *a, struct weir_policy *np, const struct weir_config *src,
		  char *err, size_t errlen)
{
	return apply(a, np, src, false, 0, err, errlen);
}

int
weir_policy_apply_built(struct weir_app *a, struct weir_policy *np, const struct weir_config *src,
			uint64_t build_us, char *err, size_t errlen)
{
	return apply(a, np, src, true, build_us, err, errlen);
}
