/* SPDX-License-Identifier: BSD-3-Clause
 * weir: a worker's rare events, between bursts and never per packet:
 * policy switches posted by the management lcore, hook commands moving
 * flows, and the class rates the rebalancer divides among workers.
 */
#include <errno.h>

#include <rte_cycles.h>
#include <rte_malloc.h>

#include "mbuf_meta.h"
#include "mode.h"
#include "ackstore_int.h"
#include "pace_state.h"
#include "worker_int.h"

/* ---- policy switches (rare: between bursts, not per packet) ---- */

int
weir_worker_policy_prepare(struct weir_worker *w, const struct weir_policy *p)
{
	for (unsigned int m = 0; m < WEIR_MODE__COUNT; m++) {
		int rc = weir_modes[m]->prepare != NULL ? weir_modes[m]->prepare(&w->svc, p) : 0;

		if (rc != 0)
			return rc;
	}
	return 0;
}

int
weir_worker_policy_post(struct weir_worker *w, struct weir_policy_switch *sw)
{
	struct weir_policy_switch *none = NULL;
	int rc;

	if (w->svc.policy == NULL || sw == NULL || sw->policy == NULL)
		return -EINVAL;
	for (int d = 0; d < WEIR_PORT__COUNT; d++)
		if ((sw->shaper[d] != NULL) != (w->svc.shaper[d] != NULL) ||
		    (sw->shaper[d] != NULL) != (sw->policy->tree[d].n_classes != 0) ||
		    (sw->shaper[d] != NULL && sw->cls_ctr[d] == NULL))
			return -EINVAL;
	if (__atomic_load_n(&w->pending, __ATOMIC_ACQUIRE) != NULL)
		return -EBUSY;
	rc = weir_worker_policy_prepare(w, sw->policy);
	if (rc != 0)
		return rc;
	if (!__atomic_compare_exchange_n(&w->pending, &none, sw, false, __ATOMIC_RELEASE,
					 __ATOMIC_RELAXED))
		return -EBUSY;
	return 0;
}

static void
flush_holder(void *arg, int d, uint32_t slot)
{
	struct weir_worker *w = arg;

	weir_mode_release(&w->svc, d, slot, UINT32_MAX, WEIR_PA_FLUSH);
}

/* The flow a frame from a fifo leaf's shared queue belongs to. */
static struct weir_flow *
flow_of_frame(struct weir_worker *w, struct rte_mbuf *m)
{
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
	struct weir_flow_key key;
	struct weir_flow *f = NULL;

	if (weir_flow_key_make(rte_pktmbuf_mtod(m, const uint8_t *), p, &key) != 0)
		return NULL;
	weir_flow_lookup_bulk(w->svc.flows, &key, 1, rte_rdtsc(), &f);
	return f;
}

/* Move a packet of the old tree of direction d into the new one: its flow
 * is re-classified under the new policy first if it was not yet. The new
 * tree takes it past its limits (it was admitted once). */
static void
requeue_one(struct weir_worker *w, int d, struct weir_flow *f, struct rte_mbuf *m)
{
	const struct weir_policy_target *t;

	if (f != NULL && f->policy_epoch != w->epoch16)
		weir_wk_classify_flow(w, f, rte_pktmbuf_mtod(m, const uint8_t *), &weir_mbuf_meta(m)->pkt,
			      (enum weir_dir)d);
	t = &w->svc.policy->targets[f != NULL ? f->class_id : WEIR_TARGET_DEFAULT];
	if (t->leaf[d] == WEIR_CBQ_NONE ||
	    weir_cbq_requeue(w->svc.shaper[d], t->leaf[d], weir_wk_shaped_qid(w, t, d, f), m) != 0) {
		weir_worker_out(&w->svc, d ^ 1, m);   /* no class for it: it goes on unshaped */
		return;
	}
	w->requeued++;
}

static void
requeue_tree(struct weir_worker *w, int d, struct weir_cbq *old)
{
	struct rte_mbuf *pkts[WEIR_BURST_MAX];
	uint32_t leaf = 0;
	uint32_t qid;
	unsigned int n;

	while ((n = weir_cbq_drain_next(old, &leaf, &qid, pkts, WEIR_BURST_MAX)) > 0) {
		struct weir_flow *f = qid < w->unmanaged_qid ? weir_flow_by_slot(w->svc.flows, qid) : NULL;

		for (unsigned int i = 0; i < n; i++)
			requeue_one(w, d, qid > w->unmanaged_qid ? flow_of_frame(w, pkts[i]) : f, pkts[i]);
	}
}

int
weir_worker_policy_take(struct weir_worker *w)
{
	struct weir_policy_switch *sw = __atomic_load_n(&w->pending, __ATOMIC_ACQUIRE);
	struct weir_cbq *old[WEIR_PORT__COUNT];
	struct weir_class_counters *old_ctr[WEIR_PORT__COUNT];

	if (sw == NULL)
		return 0;
	/* Held ACKs first: they answer data queued in the old trees. */
	if (w->svc.pa != NULL)
		weir_postack_for_each_holder(w->svc.pa, flush_holder, w);
	/* Frames a marker holds left the old tree already: they go on (red,
	 * in order) before anything of the new policy. */
	weir_wk_markers_release(w);
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		old[d] = w->svc.shaper[d];
		old_ctr[d] = w->svc.cls_ctr[d];
		w->svc.shaper[d] = sw->shaper[d];
		w->svc.cls_ctr[d] = sw->cls_ctr[d];
		w->next_tsc[d] = 0;
	}
	w->svc.policy = sw->policy;
	w->epoch16 = weir_wk_epoch16(sw->policy->epoch);
	/* Every flow's class_id is now of an older generation: re-classified
	 * (and counted again) on its next packet, or right below if it has
	 * packets waiting. */
	if (w->svc.gen8 == UINT8_MAX) {
		/* The generation wraps: a flow idle since generation 1 would look
		 * current again. Once every 255 switches, forget every flow's. */
		for (uint32_t s = 0; s < w->unmanaged_qid; s++)
			weir_flow_by_slot(w->svc.flows, s)->class_gen = 0;
		w->svc.gen8 = 1;
	} else {
		w->svc.gen8++;
	}
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		if (old[d] != NULL) {
			requeue_tree(w, d, old[d]);
			weir_cbq_free(old[d]);
		}
		rte_free(old_ctr[d]);
	}
	/* Markers of the new policy (allocation fails: the classes only shape,
	 * counted as a switch without markers). */
	if (weir_wk_markers_build(w, (int)rte_socket_id()) != 0) {
		weir_wk_markers_drop(w);
		w->marker_fail++;
	}
	w->policy_switches++;
	__atomic_store_n(&w->pending, NULL, __ATOMIC_RELAXED);
	__atomic_store_n(&w->policy_acked, sw->policy->epoch, __ATOMIC_RELEASE);
	return 1;
}

/* Hook decisions from the management lcore: move flows to other classes. */
unsigned int
weir_worker_cmds(struct weir_worker *w)
{
	struct weir_flow_cmd c[32];
	unsigned int n = rte_ring_sc_dequeue_burst_elem(w->conf.cmds, c, sizeof(c[0]), RTE_DIM(c),
							NULL);

	for (unsigned int i = 0; i < n; i++) {
		struct weir_flow *f;

		if (c[i].slot >= w->unmanaged_qid || c[i].epoch != w->svc.policy->epoch ||
		    c[i].target >= w->svc.policy->n_targets ||
		    (f = weir_flow_by_slot(w->svc.flows, c[i].slot))->first_tsc != c[i].first_tsc ||
		    f->first_tsc == 0) {
			w->cmds_stale++;
			continue;
		}
		if (f->class_id != c[i].target || f->class_gen != w->svc.gen8) {
			weir_wk_flow_uncount(w, f);
			f->shape &= (uint8_t)~WEIR_FSH_REFUSED;
			weir_wk_admit_flow(w, f, c[i].target);  /* moves what it has queued, in order */
		}
		f->shape |= WEIR_FSH_HOOKED;
		w->cmds_applied++;
	}
	return n;
}

unsigned int
weir_worker_share_apply(struct weir_worker *w)
{
	const struct weir_share_box *b = w->conf.share_box;
	uint32_t seq = __atomic_load_n(&b->seq, __ATOMIC_ACQUIRE);
	unsigned int changed = 0;

	if (seq & 1)
		return 0;       /* being written: next loop */
	if (b->epoch != w->svc.policy->epoch) {
		/* For an older policy: stale, handled. For a later one, whose
		 * switch this worker has not taken yet: not handled, so it is
		 * applied once that policy runs. The rebalancer posts again only
		 * when the split moves by 1/64 (weir_share_moved): marked handled
		 * here, the worker kept its new trees' 1/n split indefinitely. */
		if ((int32_t)(b->epoch - w->svc.policy->epoch) < 0)
			w->share_seq = seq;
		return 0;
	}
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		struct weir_cbq *sh = w->svc.shaper[d];
		uint16_t n = b->n_classes[d];
		struct weir_cbq_stats st;

		if (sh == NULL || n != weir_share_box_classes(w->svc.policy->tree[d].n_classes))
			continue;
		for (uint16_t c = 0; c < n; c++) {
			uint64_t rate = __atomic_load_n(&b->rate[d][c], __ATOMIC_RELAXED);
			uint64_t ceil = __atomic_load_n(&b->ceil[d][c], __ATOMIC_RELAXED);

			if (weir_cbq_stats(sh, c, &st) != 0 ||
			    (st.rate_bps == rate && (c == 0 || st.ceil_bps == ceil)))
				continue;
			/* A torn pair (rate from one write, ceil from the next) is
			 * refused; the seq check below has us come back for it. */
			if (weir_cbq_set_rate(sh, c, rate, ceil) == 0) {
				const struct weir_policy_tree *t = &w->svc.policy->tree[d];

				changed++;
				if (!t->classes[c].is_leaf)
					continue;
				weir_wk_share_update(w, d, c);
				/* A marker's contract follows the class's rate on
				 * this worker (its part of the class's traffic). */
				if (t->classes[c].marker.type != WEIR_MARK_NONE)
					weir_markers_set_share(w->markers[d], &t->classes[c].marker, c, rate,
							       t->classes[c].cbq.rate, rte_rdtsc());
			}
		}
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&b->seq, __ATOMIC_RELAXED) == seq)
		w->share_seq = seq;
	return changed;
}

