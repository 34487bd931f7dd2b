/* SPDX-License-Identifier: BSD-3-Clause
 * weir: a worker's making and unmaking (lib/worker/worker.h). Cold: once per
 * worker. What the caller hands in (flow table, shapers, the ACK store)
 * is the worker's after a successful create and stays the caller's after a
 * failed one.
 */
#include <errno.h>
#include <stdbool.h>

#include <rte_cycles.h>
#include <rte_malloc.h>

#include "mode.h"
#include "ackstore_int.h"
#include "pace_state.h"
#include "worker_int.h"

/* Everything create allocated, and with `handed` the parts handed in too
 * (the ACK store and the trees: a worker that was made owns them). */
static void
unmake(struct weir_worker *w, bool handed)
{
	weir_wk_markers_drop(w);
	for (unsigned int m = 0; m < WEIR_MODE__COUNT; m++)
		if (weir_modes[m]->fini != NULL)
			weir_modes[m]->fini(&w->svc);     /* each copes with its init not run */
	if (handed) {
		weir_postack_free(w->svc.pa);
		weir_cbq_free(w->svc.shaper[0]);
		weir_cbq_free(w->svc.shaper[1]);
	}
	weir_tcr_free(w->svc.tcr);
	weir_sa_table_free(w->sa);
	weir_tcpm_table_free(w->tcpm);
	rte_free(w->svc.cls_ctr[0]);
	rte_free(w->svc.cls_ctr[1]);
	rte_free(w);
}

/* The shaped part: policy, ACK control, the modes' state, class counters,
 * markers. 0 or -errno. */
static int
make_shaped(struct weir_worker *w, const struct weir_policy *pol,
	    struct weir_cbq *const shaper[WEIR_PORT__COUNT], int socket_id)
{
	const uint32_t n_flows = weir_flow_table_capacity(w->svc.flows);

	w->svc.policy = pol;
	w->svc.pa = w->conf.postack;
	if (w->svc.pa != NULL && (w->svc.tcr = weir_tcr_create(n_flows, socket_id)) == NULL)
		return -ENOMEM;
	for (unsigned int m = 0; m < WEIR_MODE__COUNT; m++)
		if (weir_modes[m]->init != NULL && weir_modes[m]->init(&w->svc, n_flows, socket_id) != 0)
			return -ENOMEM;
	if (weir_worker_policy_prepare(w, pol) != 0)
		return -ENOMEM;
	w->epoch16 = weir_wk_epoch16(pol->epoch);
	w->policy_acked = pol->epoch;
	w->svc.gen8 = 1;
	w->unmanaged_qid = n_flows;
	/* Queue entries beyond what a core's own caches hold (1 MiB of them
	 * a direction, 32K flows): worth asking for a burst ahead, else not. */
	w->prefetch_state = (uint64_t)n_flows * sizeof(struct weir_drr_q) > (1u << 20);
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		w->svc.shaper[d] = shaper[d];
		if (shaper[d] == NULL)
			continue;
		w->svc.cls_ctr[d] = rte_zmalloc_socket("weir_class_ctr",
			pol->tree[d].n_classes * sizeof(*w->svc.cls_ctr[d]), RTE_CACHE_LINE_SIZE,
			socket_id);
		if (w->svc.cls_ctr[d] == NULL)
			return -ENOMEM;
	}
	return weir_wk_markers_build(w, socket_id) != 0 ? -ENOMEM : 0;
}

struct weir_worker *
weir_worker_create(const struct weir_worker_conf *conf, struct weir_flow_table *flows,
		   struct weir_cbq *const shaper[WEIR_PORT__COUNT], int socket_id)
{
	const struct weir_policy *pol = conf->policy;
	bool shaped = shaper != NULL && (shaper[0] != NULL || shaper[1] != NULL);
	struct weir_worker *w;

	if (conf->burst == 0 || conf->burst > WEIR_BURST_MAX)
		return NULL;
	/* A flow's queue id is its flow slot; its leaf comes from the policy,
	 * whose trees the shapers must have been built from. ACKs are held
	 * against a class tree's data queues. */
	if (shaped && (flows == NULL || pol == NULL))
		return NULL;
	if (conf->postack != NULL && !shaped)
		return NULL;
	for (int d = 0; shaped && d < WEIR_PORT__COUNT; d++)
		if ((shaper[d] != NULL) != (pol->tree[d].n_classes != 0))
			return NULL;
	w = rte_zmalloc_socket("weir_worker", sizeof(*w), RTE_CACHE_LINE_SIZE, socket_id);
	if (w == NULL)
		return NULL;
	w->conf = *conf;
	w->svc.conf = (struct weir_mode_conf){
		.pep_copies = conf->pep_copies,
		.pep_wm_measured = conf->pep_wm_measured,
		.ipabr_no_sws_credit = conf->ipabr_no_sws_credit,
		.ipabr_headroom_us = conf->ipabr_headroom_us,
	};
	w->svc.flows = flows;
	w->svc.tsc_hz = conf->tsc_hz ? conf->tsc_hz : rte_get_tsc_hz();
	w->svc.tsc_per_us = RTE_MAX(w->svc.tsc_hz / 1000000, (uint64_t)1);
	w->mal_bucket.tokens = (uint64_t)conf->malformed_pps << 20;    /* full at start */
	w->l3c_bucket.tokens = (uint64_t)conf->l3_control_pps << 20;
	for (unsigned int m = 0; m < WEIR_MODE__COUNT; m++)
		if (weir_modes[m]->poll != NULL)
			w->polled[w->n_polled++] = weir_modes[m];
	/* An SA is a flow; records for a few thousand (lib/flow/sa_seq.h). */
	if (flows != NULL && (w->sa = weir_sa_table_create(weir_flow_table_capacity(flows),
							   WEIR_SA_TABLE_CAP, socket_id)) == NULL) {
		unmake(w, false);
		return NULL;
	}
	if (flows != NULL && conf->tcp_measure &&
	    (w->tcpm = weir_tcpm_table_create(weir_flow_table_capacity(flows), socket_id)) == NULL) {
		unmake(w, false);
		return NULL;
	}
	if (shaped && make_shaped(w, pol, shaper, socket_id) != 0) {
		unmake(w, false);       /* conf->postack and the trees stay the caller's */
		return NULL;
	}
	return w;
}

/* Does any mode still owe a receiver data (its owed hook)? */
static bool
stop_owed(const struct weir_worker *w)
{
	for (unsigned int m = 0; m < WEIR_MODE__COUNT; m++)
		if (weir_modes[m]->owed != NULL && weir_modes[m]->owed(&w->svc))
			return true;
	return false;
}

bool
weir_worker_stopping(struct weir_worker *w, uint64_t now)
{
	if (w->stop_at == 0) {
		w->stop_at = now + (uint64_t)w->conf.stop_drain_us * w->svc.tsc_per_us;
		for (unsigned int m = 0; m < WEIR_MODE__COUNT; m++)
			if (weir_modes[m]->drain_begin != NULL)
				weir_modes[m]->drain_begin(&w->svc);
	}
	if (!stop_owed(w))
		return true;
	if (now < w->stop_at)
		return false;
	for (unsigned int m = 0; m < WEIR_MODE__COUNT; m++)
		if (weir_modes[m]->give_up_all != NULL)
			weir_modes[m]->give_up_all(&w->svc);
	weir_worker_tx(w);
	return true;
}

void
weir_worker_free(struct weir_worker *w)
{
	if (w == NULL)
		return;
	weir_worker_flush_queues(w);
	unmake(w, true);
}
