/* SPDX-License-Identifier: BSD-3-Clause
 * weir: a flow's class on this worker, once per flow and policy epoch, not
 * per packet: classification (the policy's rules, then the hooks' events),
 * admission against a class's flow_min (or its fallback), and the flow
 * counts that admission and the shares read. The per-packet check that
 * calls these is shape_flow in lib/worker/worker.c.
 */
#include <rte_common.h>

#include "cbq.h"
#include "ackstore_int.h"
#include "pace_state.h"
#include "worker.h"
#include "worker_int.h"

/* Add delta to the flow counts of the flow's classes. */
static void
flow_count(struct weir_worker *w, const struct weir_flow *f, int32_t delta)
{
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		uint32_t leaf = weir_wk_flow_leaf(w, f, d);

		if (leaf == WEIR_CBQ_NONE)
			continue;
		w->svc.cls_ctr[d][leaf].flows += (uint32_t)delta;
		if (w->svc.cls_ctr[d][leaf].share_bytes_per_tick == 0)
			weir_wk_share_update(w, d, leaf);       /* a fresh class: the whole rate, until flows send */
	}
}

void
weir_wk_flow_uncount(struct weir_worker *w, struct weir_flow *f)
{
	if (f->shape & WEIR_FSH_COUNTED) {
		if (f->class_gen == w->svc.gen8) {  /* else counted in counters since replaced */
			flow_count(w, f, -1);
			for (int d = 0; d < WEIR_PORT__COUNT; d++) {
				uint32_t leaf = weir_wk_flow_leaf(w, f, d);

				const struct weir_mode_ops *ops;

				if (leaf == WEIR_CBQ_NONE)
					continue;
				weir_wk_active_forget(w, f, d, leaf);
				ops = weir_mode(w->svc.policy->targets[f->class_id].mode[d]);
				if (ops->leave != NULL)
					ops->leave(&w->svc, f, d, weir_flow_slot(w->svc.flows, f), leaf);
			}
		}
		f->shape &= (uint8_t)~WEIR_FSH_COUNTED;
	}
}

/* May one more flow join `leaf` without pushing its per-flow share below
 * the class's flow_min? The class's rate here is this worker's share of it
 * (what its tree is set to), so (n + 1) x flow_min <= rate: no division. */
static inline bool
leaf_admits(const struct weir_worker *w, int d, uint32_t leaf)
{
	const struct weir_policy_class *k = &w->svc.policy->tree[d].classes[leaf];

	return k->flow_min == 0 ||
	       (uint64_t)(w->svc.cls_ctr[d][leaf].flows + 1) * k->flow_min <=
	       weir_cbq_rate(w->svc.shaper[d], leaf);
}

/* Put flow f in target `target` (moving anything it has queued), or apply
 * the refusing class's admission action. Returns false when the flow is
 * refused: its packets are dropped until a later packet finds room. */
bool
weir_wk_admit_flow(struct weir_worker *w, struct weir_flow *f, uint16_t target)
{
	const struct weir_policy *pol = w->svc.policy;
	uint32_t slot = weir_flow_slot(w->svc.flows, f);
	uint32_t old[WEIR_PORT__COUNT] = { weir_wk_flow_leaf(w, f, 0), weir_wk_flow_leaf(w, f, 1) };
	bool refused = false;

	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		uint32_t leaf = pol->targets[target].leaf[d];
		const struct weir_policy_class *k;

		if (leaf == WEIR_CBQ_NONE || leaf_admits(w, d, leaf))
			continue;
		k = &pol->tree[d].classes[leaf];
		if (!(f->shape & WEIR_FSH_REFUSED))
			w->svc.cls_ctr[d][leaf].refused++;  /* once per flow, not per retry */
		if (k->admit == WEIR_ADMIT_FALLBACK) {
			w->svc.cls_ctr[d][leaf].diverted++;
			target = k->fallback_target;    /* not admission-checked: the way out */
			break;
		}
		refused = true;
		break;
	}
	f->class_id = target;
	f->class_gen = w->svc.gen8;
	/* Packets of it still waiting (a reused 4-tuple, a policy change, a
	 * hook's move) follow it, in order, ahead of this one, refused or not:
	 * its queue lives in the leaf its class names (drain, expiry and the
	 * next move look there). ACKs held against its old class go now. */
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		uint32_t leaf = weir_wk_flow_leaf(w, f, d);

		if (leaf == WEIR_CBQ_NONE || old[d] == leaf || old[d] == WEIR_CBQ_NONE)
			continue;
		weir_cbq_move(w->svc.shaper[d], slot, old[d], leaf);
		if (w->svc.pa != NULL && weir_postack_len(w->svc.pa, d, slot) > 0)
			weir_mode_release(&w->svc, d, slot, UINT32_MAX, WEIR_PA_FLUSH);
	}
	if (refused) {
		f->shape |= WEIR_FSH_REFUSED;
		return false;
	}
	f->shape = (uint8_t)((f->shape & ~WEIR_FSH_REFUSED) | WEIR_FSH_COUNTED);
	flow_count(w, f, 1);
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		uint32_t leaf = weir_wk_flow_leaf(w, f, d);

		if (leaf == WEIR_CBQ_NONE)
			continue;
		w->svc.cls_ctr[d][leaf].admitted++;
		weir_drr_set_weight(weir_cbq_qtab(w->svc.shaper[d]), slot, pol->targets[target].weight);
	}
	return true;
}

/* Classify a new flow (or one whose policy changed) by this packet. */
bool
weir_wk_classify_flow(struct weir_worker *w, struct weir_flow *f, const uint8_t *frame,
	      const struct weir_pkt *p, enum weir_dir dir)
{
	struct weir_cls_tuple t;

	weir_classify_tuple_make(frame, p, dir, &t);
	if (f->policy_epoch == 0) {
		if (w->svc.pa != NULL) {
			weir_postack_reset(w->svc.pa, weir_flow_slot(w->svc.flows, f));
			weir_tcr_reset(w->svc.tcr, weir_flow_slot(w->svc.flows, f));
		}
		for (unsigned int m = 0; m < WEIR_MODE__COUNT; m++)
			if (weir_modes[m]->reset != NULL)
				weir_modes[m]->reset(&w->svc, weir_flow_slot(w->svc.flows, f));
		for (int d = 0; d < WEIR_PORT__COUNT; d++)
			if (w->svc.shaper[d] != NULL)
				weir_cbq_flow_new(w->svc.shaper[d], weir_flow_slot(w->svc.flows, f));
		/* First packet: it tells who opened the flow; remember it for
		 * re-classification, where the packet at hand may be a reply. */
		if (t.init_dir == WEIR_DIR_IN)
			f->shape |= WEIR_FSH_INIT_IN;
		else
			f->shape &= (uint8_t)~WEIR_FSH_INIT_IN;
	} else {
		t.init_dir = (f->shape & WEIR_FSH_INIT_IN) ? WEIR_DIR_IN : WEIR_DIR_OUT;
	}
	bool first = f->policy_epoch == 0, ok;

	weir_wk_flow_uncount(w, f);
	f->shape &= (uint8_t)~(WEIR_FSH_REFUSED | (first ? WEIR_FSH_LAN_HI | WEIR_FSH_HOOKED : 0));
	f->policy_epoch = w->epoch16;
	ok = weir_wk_admit_flow(w, f, weir_policy_classify(w->svc.policy, &t));
	/* The hooks hear of every new flow, and again of a flow they moved
	 * when a new policy re-classified it by its rules (their decision
	 * was for the old one). */
	if (w->conf.events != NULL && (first || (f->shape & WEIR_FSH_HOOKED)))
		weir_wk_event_new(w, f, &t, frame, p);
	return ok;
}
