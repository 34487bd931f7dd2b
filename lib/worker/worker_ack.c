/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the worker's side of the mode interface (lib/modes/mode.h) for modes that
 * control ACKs: which mode a TCP packet's ACKs belong to, the ACK store's
 * hold and release into the out-arrays, the handshake's timing, the
 * watchdog's question to a mode, and a flow's end. The decisions are the
 * modes' (lib/modes/postack_mode.c, postack_paced.c, tcr.c, ipabr.c, pep.c) and
 * the last miles' (lib/worker/lastmile.h, whose clamp is here); this is where the
 * worker asks them.
 */
#include <rte_common.h>

#include "cbq.h"
#include "lastmile.h"
#include "mbuf_meta.h"
#include "mode.h"
#include "ackstore_int.h"
#include "tcpwin.h"
#include "worker.h"
#include "worker_int.h"

unsigned int
weir_mode_release(struct weir_mode_svc *s, int d, uint32_t slot, uint32_t max,
		  enum weir_postack_why why)
{
	struct weir_worker *w = weir_wk_of(s);
	struct rte_mbuf *acks[WEIR_BURST_MAX];
	unsigned int n, total = 0;

	/* Held ACKs of data direction d travel the other way: out of port d. */
	while (total < max &&
	       (n = weir_postack_release(w->svc.pa, d, slot, acks, RTE_MIN(max - total, (uint32_t)WEIR_BURST_MAX),
					 why)) > 0) {
		for (unsigned int i = 0; i < n; i++) {
			/* They travel d ^ 1: a TSval they carry leaves now. */
			if (w->tcpm != NULL)
				weir_wk_tcpm_departed(w, acks[i], slot, d ^ 1, w->tcpm_now);
			weir_worker_out(&w->svc, d, acks[i]);
		}
		total += n;
	}
	return total;
}

/* Flow f ends here: the ACKs it holds go, and each mode of its leaves
 * gives back what it kept. */
void
weir_wk_mode_end(struct weir_worker *w, struct weir_flow *f)
{
	uint32_t slot = weir_flow_slot(w->svc.flows, f);

	if (unlikely(f->shape & WEIR_FSH_PEP))
		weir_mode_keeper->kept_end(&w->svc, f, slot); /* whatever the class is now */

	if (w->svc.pa != NULL)
		for (int d = 0; d < WEIR_PORT__COUNT; d++)
			if (weir_postack_len(w->svc.pa, d, slot) > 0)
				weir_mode_release(&w->svc, d, slot, UINT32_MAX, WEIR_PA_FLUSH);
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		uint32_t leaf = weir_wk_flow_leaf(w, f, d);
		const struct weir_mode_ops *ops;

		if (leaf == WEIR_CBQ_NONE)
			continue;
		ops = weir_mode(w->svc.policy->targets[f->class_id].mode[d]);
		if (ops->end != NULL && (d == 0 || ops != weir_mode(w->svc.policy->targets[f->class_id].mode[0])))
			ops->end(&w->svc, f, slot);
	}
}

/* The advertised-window clamp: a TCP segment travelling a of a flow of
 * target t (t->lm_flags != 0), sent by the last-mile host, gets its window
 * cut to the pipe plus the buffer, in segments (weir_lastmile_limit),
 * never raised, never left of an edge already shown
 * (weir_postack_cut_window). A SYN's (unscaled) window is cut too, so the
 * sender's first flight fits; later segments need the handshake (window
 * scale). Returns true when the window was rewritten. A SYN's cut is
 * counted here; an ACK's is marked (weir_pkt.lm_cut) and counted by the
 * worker once the ACK's mode had its say (lm_settle), only if no smaller
 * cut of the mode replaced it: the smallest limit wins, whatever the order. */
static bool
lm_clamp(struct weir_worker *w, const struct weir_flow *f, struct rte_mbuf *m,
	 const struct weir_pkt *p, int a, uint32_t slot, const struct weir_policy_target *t)
{
	/* The host behind the last mile sends its ACKs towards the other port:
	 * from the LAN (travelling out) unless it is a WAN host. */
	const int host_a = (t->lm_flags & WEIR_LM_WAN) ? WEIR_DIR_IN : WEIR_DIR_OUT;

	const uint32_t limit = weir_lastmile_limit(t, f->mss[a]);

	if (a != host_a || w->svc.pa == NULL || (p->tcp_flags & WEIR_TCP_RST))
		return false;
	if (p->tcp_flags & WEIR_TCP_SYN) {
		/* A SYN's window is never scaled (RFC 7323 2.2): cut it as it is,
		 * so even the sender's first flight fits the last hop. No mode
		 * cuts a SYN: this cut is final. */
		if (p->win <= limit)
			return false;
		weir_ack_set_win(m, p, (uint16_t)RTE_MIN(limit, (uint32_t)UINT16_MAX));
		w->svc.ctr.port[a].lm_clamped++;
		return true;
	}
	if (!(p->tcp_flags & WEIR_TCP_ACK) || !weir_postack_cut_unnoted(w->svc.pa, f, m, p, a, slot, limit))
		return false;
	/* Not final: the mode's own cut may go lower (never higher: it starts
	 * from the window on the frame). Every later reader of the ACK (the
	 * mode's cut and notes) sees the last mile's window; the worker counts
	 * it and notes its edge once the mode is done, if it is still the
	 * window the ACK leaves with (weir_wk_lm_settle). */
	weir_mbuf_meta(m)->pkt.win = weir_ack_win(m, p);
	weir_mbuf_meta(m)->pkt.lm_cut = 1;
	return true;
}

/* ACK m (travelling a) whose window a last mile cut (weir_pkt.lm_cut),
 * now that its mode had its say: the cut took effect if the window the
 * last mile wrote is still the one on the frame (a smaller cut of the mode
 * replaced it otherwise, and noted its own edge). Only then is it counted
 * and its edge noted: the edge the sender is shown, and no higher. */
static void
lm_settle(struct weir_worker *w, const struct weir_flow *f, struct rte_mbuf *m, int a,
	  uint32_t slot)
{
	struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;

	if (!p->lm_cut)
		return;
	p->lm_cut = 0;
	if (weir_ack_win(m, p) != p->win)
		return;
	w->svc.ctr.port[a].lm_clamped++;
	weir_postack_note_edge(w->svc.pa, f, p, a, slot);
}

enum weir_verdict
weir_mode_hold(struct weir_mode_svc *s, struct weir_flow *f, int d, uint32_t slot,
	       struct rte_mbuf *m, uint64_t now)
{
	struct weir_worker *w = weir_wk_of(s);
	struct rte_mbuf *evicted;
	unsigned int n_ev;
	int held;

	/* Settled before the store takes m (it may keep a copy, not m). */
	lm_settle(w, f, m, d ^ 1, slot);
	f->shape |= (uint8_t)WEIR_FSH_HELD(d);
	held = weir_postack_hold(w->svc.pa, d, slot, m, now, &evicted, &n_ev);
	if (n_ev > 0)
		weir_worker_out(&w->svc, d, evicted);
	if (held)
		return WEIR_V_TAKEN;
	/* No record free: what is held goes, then m after it. */
	weir_mode_release(&w->svc, d, slot, UINT32_MAX, WEIR_PA_FLUSH);
	return WEIR_V_PASS;
}

uint32_t
weir_mode_data_qlen(const struct weir_mode_svc *s, const struct weir_flow *f, int d, uint32_t slot)
{
	const struct weir_worker *w = weir_wk_of_c(s);
	uint32_t leaf;

	if (w->svc.shaper[d] == NULL)
		return 0;
	leaf = weir_wk_flow_leaf(w, f, d);
	/* A fifo leaf's frames share one queue: any of them may be the flow's. */
	if (leaf != WEIR_CBQ_NONE &&
	    (weir_mode(w->svc.policy->targets[f->class_id].mode[d])->flags & WEIR_MODEF_SHARED_QUEUE))
		return weir_cbq_leaf_qlen(w->svc.shaper[d], leaf);
	return weir_drr_qlen(weir_cbq_qtab(w->svc.shaper[d]), slot);
}

/* Young, and ahead of someone: some flow active in the class has sent its
 * budget. When every active flow is young (many flows starting together in
 * a small class) the new-flows list puts nobody ahead, and exempting them
 * all from the ACK modes would leave TCR and postack-paced without control
 * (docs/results/young-active). */
bool
weir_mode_young(const struct weir_mode_svc *s, const struct weir_flow *f, int d, uint32_t leaf)
{
	const struct weir_worker *w = weir_wk_of_c(s);
	const struct weir_class_counters *c = &w->svc.cls_ctr[d][leaf];

	return w->svc.shaper[d] != NULL &&
	       weir_cbq_young(w->svc.shaper[d], leaf, weir_flow_slot(w->svc.flows, f), f->bytes[d]) &&
	       c->active > c->young;
}

/* A handshake packet: time both sides (lib/modes/ackstore.c); once both are
 * known, each direction's CoDel follows the flow's round trip. */
static void
handshake(struct weir_worker *w, const struct weir_flow *f, const struct weir_pkt *p, int a,
	  uint32_t slot, uint64_t now)
{
	uint64_t rtt;

	weir_postack_track(w->svc.pa, f, p, a, slot, now);
	rtt = (uint64_t)weir_postack_measured_rtt(w->svc.pa, 0, slot) *
	      weir_postack_measured_rtt(w->svc.pa, 1, slot);
	if (rtt == 0)
		return;         /* a side still unknown */
	rtt = (uint64_t)weir_postack_measured_rtt(w->svc.pa, 0, slot) +
	      weir_postack_measured_rtt(w->svc.pa, 1, slot);
	for (int d = 0; d < WEIR_PORT__COUNT; d++)
		if (w->svc.shaper[d] != NULL)
			weir_cbq_flow_rtt(w->svc.shaper[d], slot, rtt);
}

/*
 * A TCP packet of flow f travelling a, with ACK control on (an ACK store):
 * its ACKs answer data direction d = a ^ 1. Anything but a pure ACK (data,
 * SYN, FIN, RST) first releases what the flow holds, so nothing overtakes
 * a held ACK; FIN and RST release both directions' (the connection is
 * ending). A pure ACK is the mode's of direction d to decide. Returns true
 * when the mode took the packet.
 */
bool
weir_wk_ack_control(struct weir_worker *w, struct weir_flow *f, struct rte_mbuf *m, enum weir_dir a,
	    uint64_t now)
{
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
	const int d = a ^ 1;
	const uint32_t slot = weir_flow_slot(w->svc.flows, f);
	const struct weir_mode_ops *ops;
	enum weir_verdict v = WEIR_V_PASS;
	bool lm = false;
	uint32_t leaf;
	uint32_t held;

	/* Only handshake packets time anything: no call for the rest. */
	if (unlikely((p->tcp_flags & WEIR_TCP_SYN) || f->pkts[a] == 2))
		handshake(w, f, p, a, slot, now);
	/* A signed connection (TCP-MD5/AO): its signature covers the window
	 * and the ACK, so no clamp, ACK mode or pep may touch, hold or answer
	 * it. The one check for them all; it never held an ACK or had pep. */
	if (unlikely(p->tcp_signed))
		return false;
	/* pep's state outlives its class (lib/modes/mode.h, weir_mode_keeper): a
	 * flow it keeps copies for has all its TCP packets looked at, and R's
	 * ACKs for data the gateway already acknowledged are taken. */
	if (unlikely(f->shape & WEIR_FSH_PEP) &&
	    weir_mode_keeper->kept_packet(&w->svc, f, m, p, a, slot, now))
		return true;
	/* The flow entry says whether ACKs may be held: the store is not
	 * touched for flows that never held any. */
	held = 0;
	if (f->shape & WEIR_FSH_HELD(d)) {
		held = weir_postack_len(w->svc.pa, d, slot);
		if (held == 0)
			f->shape &= (uint8_t)~WEIR_FSH_HELD(d);
	}
	/* A last mile: its host's windows clamped to its pipe + buffer. Its
	 * cut of an ACK is settled once the mode had its say (lm_settle). */
	if (unlikely(w->svc.policy->targets[f->class_id].lm_flags != 0))
		lm = lm_clamp(w, f, m, p, a, slot, &w->svc.policy->targets[f->class_id]);
	if ((p->tcp_flags & (WEIR_TCP_SYN | WEIR_TCP_FIN | WEIR_TCP_RST | WEIR_TCP_URG |
			     WEIR_TCP_ACK)) != WEIR_TCP_ACK || p->payload_len > 0) {
		if (held > 0)
			weir_mode_release(&w->svc, d, slot, UINT32_MAX, WEIR_PA_FLUSH);
		if ((p->tcp_flags & (WEIR_TCP_FIN | WEIR_TCP_RST)) && (f->shape & WEIR_FSH_HELD(a)))
			weir_mode_release(&w->svc, a, slot, UINT32_MAX, WEIR_PA_FLUSH);
		if ((p->tcp_flags & (WEIR_TCP_ACK | WEIR_TCP_RST)) == WEIR_TCP_ACK) {
			ops = weir_mode(w->svc.policy->targets[f->class_id].mode[d]);
			if (ops->uncut != NULL)
				ops->uncut(&w->svc, f, p, a, slot);
		}
	} else {
		leaf = w->svc.policy->targets[f->class_id].leaf[d];
		ops = weir_mode(w->svc.policy->targets[f->class_id].mode[d]);
		/* Unshaped, or out of per-flow fairness: no ACK mode. */
		if (leaf != WEIR_CBQ_NONE && !weir_lastmile_exempt(w->svc.policy, f) && ops->ack != NULL)
			v = ops->ack(&w->svc, f, m, p, a, slot, leaf, held, now);
	}
	/* Taken: m is the mode's (weir_mode_hold settled it); dropped: it is
	 * never shown. */
	if (unlikely(lm) && v == WEIR_V_PASS)
		lm_settle(w, f, m, a, slot);
	return v != WEIR_V_PASS;
}

/* The watchdog's look at a flow holding ACKs: its mode's tick says how
 * many go. Held ACKs no mode controls any more (the flow was moved) go
 * once the flow is idle. */
uint32_t
weir_wk_ring_decide(void *arg, int d, uint32_t slot, uint64_t now, uint32_t held,
	    enum weir_postack_why *why)
{
	struct weir_worker *w = arg;
	const struct weir_flow *f = weir_flow_by_slot(w->svc.flows, slot);
	uint32_t leaf = weir_wk_flow_leaf(w, f, d);
	const struct weir_mode_ops *ops;

	if (leaf != WEIR_CBQ_NONE) {
		ops = weir_mode(w->svc.policy->targets[f->class_id].mode[d]);
		if (ops->tick != NULL)
			return ops->tick(&w->svc, f, d, slot, leaf, now, held, why);
	}
	if (weir_mode_data_qlen(&w->svc, f, d, slot) != 0)
		return 0;
	*why = WEIR_PA_IDLE;
	return weir_postack_idle(w->svc.pa, d, slot, now, f->last_tsc) ? held : 0;
}
