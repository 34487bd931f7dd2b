/* SPDX-License-Identifier: BSD-3-Clause
 * weir: a worker's part in packet capture (lib/observe/capture.h): the frames a
 * running capture wants, copied as they arrive and handed to the
 * management lcore with what weir did with them. Only frames of a worker
 * with a tap come here (worker.c's frame_captured).
 */
#include <rte_mbuf.h>

#include "capture.h"
#include "mbuf_meta.h"
#include "worker_int.h"
#include "worker_view.h"

/* Frame m's leaf class in direction d: its flow's under the policy in
 * force, the default class's for frames without a flow; WEIR_CAP_CLS_ANY
 * while its flow is not classified yet (before) or WEIR_CBQ_NONE (after). */
static uint32_t
frame_class(const struct weir_worker *w, const struct weir_flow *f, int d, bool decided)
{
	if (w->svc.policy == NULL || w->svc.shaper[d] == NULL)
		return WEIR_CBQ_NONE;
	if (f == NULL)
		return w->svc.policy->targets[0].leaf[d];
	if (f->policy_epoch != w->epoch16)
		return decided ? WEIR_CBQ_NONE : WEIR_CAP_CLS_ANY;
	return weir_wk_flow_leaf(w, f, d);
}

struct rte_mbuf *
weir_wk_cap_pre(struct weir_worker *w, struct rte_mbuf *m, struct weir_flow *f,
		enum weir_port_role from, uint8_t *mask)
{
	const struct weir_cap_tap *t = w->cap;

	*mask = weir_cap_tap_match(t, m, &weir_mbuf_meta(m)->pkt, from,
				   frame_class(w, f, from, false));
	if (*mask == 0)
		return NULL;
	return weir_cap_copy(t, w->conf.cap_pool, &w->cap_ctr, m, *mask);
}

void
weir_wk_cap_post(struct weir_worker *w, struct rte_mbuf *cp, uint8_t mask, uint32_t orig_len,
		 struct weir_flow *f, enum weir_port_role from, enum weir_cap_verdict v,
		 uint64_t now)
{
	const struct weir_cap_tap *t = w->cap;
	const uint32_t cls = frame_class(w, f, from, true);
	struct weir_cap_rec rec = {
		.m = cp, .tsc = now, .orig_len = orig_len,
		.target = f != NULL && f->policy_epoch == w->epoch16 ? f->class_id : 0,
		.gen = t->gen, .cls = cls, .verdict = (uint8_t)v, .dir = (uint8_t)from,
	};

	/* A new flow's class is known now: a class filter decides again. */
	rec.mask = weir_cap_tap_class(t, mask, from, cls);
	if (rec.mask == 0) {
		rte_pktmbuf_free(cp);
		return;
	}
	weir_cap_push(w->conf.cap_ring, &w->cap_ctr, &rec);
}

/* ---- the management lcore's side (worker_view.h) ---- */

void
weir_worker_cap_post(struct weir_worker *w, const struct weir_cap_tap *t)
{
	__atomic_store_n(&w->cap_post, t, __ATOMIC_RELEASE);
}

bool
weir_worker_cap_taken(const struct weir_worker *w, const struct weir_cap_tap *t)
{
	return __atomic_load_n(&w->cap, __ATOMIC_ACQUIRE) == t;
}

void
weir_worker_cap_counters(const struct weir_worker *w, struct weir_cap_counters *out)
{
	*out = w->cap_ctr;
}
