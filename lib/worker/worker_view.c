/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the management lcore's view of a running worker (worker_view.h).
 * The one file outside the worker that knows struct weir_worker's layout
 * (and PostACK's per-flow record): keep it small.
 */
#include <errno.h>
#include <string.h>

#include <rte_cycles.h>

#include "drr.h"
#include "worker.h"
#include "worker_int.h"
#include "worker_view.h"

uint32_t
weir_worker_policy_acked(const struct weir_worker *w)
{
	/* Release-stored by the worker after it freed the old trees and
	 * stored the new ones: after this load they are visible. */
	return __atomic_load_n(&w->policy_acked, __ATOMIC_ACQUIRE);
}

void
weir_worker_stop(struct weir_worker *w)
{
	w->stop = true;
}

bool
weir_worker_switch_pending(const struct weir_worker *w)
{
	return __atomic_load_n(&w->pending, __ATOMIC_ACQUIRE) != NULL;
}

bool
weir_worker_view_current(const struct weir_worker *w, const struct weir_policy *p)
{
	return p != NULL && weir_worker_policy_acked(w) == p->epoch;
}

int
weir_worker_class_view(const struct weir_worker *w, const struct weir_policy *p, int dir,
		       uint32_t cls, struct weir_class_view *out)
{
	const struct weir_class_counters *cc;

	memset(out, 0, sizeof(*out));
	if (!weir_worker_view_current(w, p))
		return -EAGAIN;
	if (w->svc.shaper[dir] == NULL || cls >= p->tree[dir].n_classes ||
	    weir_cbq_stats(w->svc.shaper[dir], cls, &out->cbq) != 0)
		return -ENOENT;
	cc = &w->svc.cls_ctr[dir][cls];
	out->flows = cc->flows;
	/* A period rolls on the class's next packet: one that ended a whole
	 * period ago with none since counts nobody (else flows that stopped
	 * kept their worker's part of the class). */
	if (rte_get_tsc_cycles() < cc->period_end + cc->period_len) {
		out->active = cc->active;
		out->heavy = RTE_MIN(cc->heavy, cc->active);
		out->light_bps = (double)weir_class_light_bps(w, cc);
	}
	out->admitted = cc->admitted;
	out->refused = cc->refused;
	out->diverted = cc->diverted;
	out->has_qm = weir_cbq_qm_stats(w->svc.shaper[dir], cls, &out->qm) == 0;
	return 0;
}

int
weir_worker_marker_view(const struct weir_worker *w, const struct weir_policy *p, int dir,
			uint32_t cls, struct weir_marker_counters *out)
{
	memset(out, 0, sizeof(*out));
	if (!weir_worker_view_current(w, p))
		return -EAGAIN;
	if (cls >= p->tree[dir].n_classes || p->tree[dir].classes[cls].marker.type == WEIR_MARK_NONE)
		return -ENOENT;
	return weir_markers_counters(w->markers[dir], cls, out) == 0 ? 0 : -ENOENT;
}

int
weir_worker_flow_view(const struct weir_worker *w, const struct weir_policy *p, uint32_t slot,
		      const struct weir_flow *f, int dir, struct weir_flow_view *out)
{
	memset(out, 0, sizeof(*out));
	out->leaf = out->target = -1;
	if (!weir_worker_view_current(w, p))
		return -EAGAIN;
	/* class_id is of the worker's generation gen8 (stable while it runs
	 * p); bounds checked against p since the entry is the caller's copy
	 * of one the worker may have been rewriting. */
	if (f->class_gen != 0 && f->class_gen == w->svc.gen8 && f->class_id < p->n_targets &&
	    p->tree[dir].n_classes != 0) {
		uint32_t leaf = p->targets[f->class_id].leaf[dir];

		if (leaf < p->tree[dir].n_classes) {
			out->leaf = leaf;
			out->target = f->class_id;
		}
	}
	if (slot >= w->unmanaged_qid)
		return 0;
	if (w->svc.shaper[dir] != NULL) {
		out->shaped = true;
		out->queued_pkts = weir_drr_qlen(weir_cbq_qtab(w->svc.shaper[dir]), slot);
	}
	if (w->svc.pa != NULL) {
		out->postack = true;
		out->acks_held = weir_postack_held(w->svc.pa, dir, slot);
		out->rtt_ticks = weir_postack_measured_rtt(w->svc.pa, dir, slot);
	}
	return 0;
}

int
weir_worker_postack_stats(const struct weir_worker *w, struct weir_postack_stats *out)
{
	if (w->svc.pa == NULL) {
		memset(out, 0, sizeof(*out));
		return -ENOENT;
	}
	*out = *weir_postack_stats(w->svc.pa);
	return 0;
}

void
weir_worker_port_counters(const struct weir_worker *w, struct weir_worker_counters *out)
{
	*out = w->svc.ctr;
}

void
weir_worker_info(const struct weir_worker *w, struct weir_worker_info *out)
{
	memset(out, 0, sizeof(*out));
	out->queue = w->conf.queue;
	out->loops = w->svc.ctr.loops;
	out->idle_loops = w->svc.ctr.idle_loops;
	out->sleeps = w->svc.ctr.sleeps;
	out->busy_tsc = w->svc.ctr.busy_tsc;
	out->rate_updates = w->share_seq / 2;   /* a seqlock: two steps per update */
	out->policy_acked = __atomic_load_n(&w->policy_acked, __ATOMIC_ACQUIRE);
	out->policy_switches = w->policy_switches;
	out->requeued = w->requeued;
	out->events_sent = w->events_sent;
	out->events_dropped = w->events_dropped;
	out->cmds_applied = w->cmds_applied;
	out->cmds_stale = w->cmds_stale;
}

void
weir_worker_set_flow_events(struct weir_worker *w, bool new_flow, bool end_flow)
{
	if (w->conf.events == NULL)
		return;
	w->conf.new_flow_events = new_flow;
	w->conf.end_flow_events = end_flow;
}

int
weir_worker_sa_view(const struct weir_worker *w, uint32_t slot, const struct weir_flow *f,
		    struct weir_sa_seq *out)
{
	if (weir_sa_table_peek(w->sa, slot, out) != 0)
		return -ENOENT;
	return out->owner == f->first_tsc ? 0 : -ENOENT;
}

static void
tcp_side(const struct weir_worker *w, const struct weir_tcpm_dir *s, uint32_t now,
	 struct weir_tcp_side_view *out)
{
	const uint64_t unit_ns_num = (uint64_t)1000000 << WEIR_TCPM_SHIFT;  /* us x 2^shift */
	const uint64_t hz = w->svc.tsc_hz;

	out->samples = s->samples;
	out->sample_age_us = UINT64_MAX;
	if (s->samples == 0)
		return;
	out->rtt_us = (uint32_t)((uint64_t)s->rtt_last * unit_ns_num / hz);
	out->rtt_min_us = (uint32_t)((uint64_t)s->rtt_min * unit_ns_num / hz);
	out->srtt_us = (uint32_t)((uint64_t)(s->srtt8 >> 3) * unit_ns_num / hz);
	out->sample_age_us = (uint64_t)(uint32_t)(now - s->rtt_at) * unit_ns_num / hz;
}

static void
tcp_sent(const struct weir_tcpm_dir *s, struct weir_tcp_sent_view *out)
{
	out->retrans_segs = s->retrans_segs;
	out->retrans_bytes = s->retrans_bytes;
	out->ooo = s->ooo;
	out->dupacks = s->dupacks;
}

int
weir_worker_tcp_view(const struct weir_worker *w, uint32_t slot, const struct weir_flow *f,
		     struct weir_tcp_view *out)
{
	struct weir_tcpm r;
	uint32_t now;

	memset(out, 0, sizeof(*out));
	out->lan.sample_age_us = out->wan.sample_age_us = UINT64_MAX;
	if (w->tcpm == NULL || weir_tcpm_peek(w->tcpm, slot, f->first_tsc, &r) != 0)
		return -ENOENT;
	now = weir_tcpm_time(rte_rdtsc());
	/* Samples completed by segments travelling out are the LAN side's. */
	tcp_side(w, &r.d[WEIR_DIR_OUT], now, &out->lan);
	tcp_side(w, &r.d[WEIR_DIR_IN], now, &out->wan);
	tcp_sent(&r.d[WEIR_DIR_OUT], &out->out);
	tcp_sent(&r.d[WEIR_DIR_IN], &out->in);
	return 0;
}

void
weir_worker_tcp_totals(const struct weir_worker *w, struct weir_tcp_totals *out)
{
	memset(out, 0, sizeof(*out));
	if (w->tcpm == NULL)
		return;
	out->segs = w->tcpm_st.segs;
	out->samples = w->tcpm_st.samples;
	out->retrans_segs = w->tcpm_st.retrans_segs;
	out->ooo = w->tcpm_st.ooo;
	out->dupacks = w->tcpm_st.dupacks;
}

const struct weir_mode_svc *
weir_worker_modes_view(const struct weir_worker *w)
{
	return &w->svc;
}
