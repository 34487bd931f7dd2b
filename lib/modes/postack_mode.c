/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the postack mode (lib/modes/mode.h, lib/modes/postack_mode.h): which ACKs the
 * ACK store holds, and when they go, for a postack leaf.
 */
#include <netinet/in.h>

#include "mbuf_meta.h"
#include "mode.h"
#include "postack_mode.h"
#include "ackstore_int.h"
#include "tcpwin.h"
#include "pace.h"
#include "pace_state.h"
#include "mode_svc.h"


/* The path's round trip for data direction d, both sides of the gateway
 * (the handshake's halves); 0 while either is unknown. */
static inline uint64_t
postack_path_rtt(const struct weir_postack *pa, int d, uint32_t slot)
{
	const uint32_t snd = pa->q[d][slot].rtt, rcv = pa->q[d ^ 1][slot].rtt;

	return snd != 0 && rcv != 0 ? (uint64_t)snd + rcv : 0;
}

/*
 * The hold window: the most window any ACK of the flow (passed or held,
 * but not one bringing SACK news, sack_news) may show past its cumulative
 * ACK: ack_limit segments beyond what the flow's share of the class's ceil
 * carries over the path's round trip. Receivers advertise megabytes, and
 * every byte of window a sender may use beyond its share's BDP ends up as
 * ACKs held here: past the BDP, the ACKs for ack_limit segments, the most
 * that can then wait here, stay within ack_limit. Without the BDP term a
 * flow whose BDP is above ack_limit segments is window-limited whenever a
 * held ACK sets its edge (docs/results/ack-modes). Frame bytes, not
 * payload: a bound, a few percent loose, and no division per ACK. Round trip unknown: ack_limit segments.
 * f->mss[a]: what the ACK's sender said it can receive, the segment size
 * the data sender uses.
 */
static uint32_t
postack_hold_window(const struct weir_mode_svc *w, const struct weir_flow *f, int a, uint32_t slot,
		    uint32_t leaf)
{
	const int d = a ^ 1;
	const uint64_t rtt = postack_path_rtt(w->pa, d, slot);
	uint64_t lim = (uint64_t)w->pa->ack_limit * f->mss[a];

	if (rtt != 0)
		lim += weir_win_bdp(w->cls_ctr[d][leaf].ceil_share_bytes_per_tick, rtt, 1u << 16);
	return (uint32_t)RTE_MIN(lim, (uint64_t)INT32_MAX);
}

/* PostACK's window clamp with the share clamp off: ACK m cut to the hold
 * window. */
void
weir_postack_mode_clamp(struct weir_mode_svc *w, const struct weir_flow *f, struct rte_mbuf *m,
	      const struct weir_pkt *p, int a, uint32_t slot, uint32_t leaf)
{
	if (weir_postack_cut_window(w->pa, f, m, p, a, slot, postack_hold_window(w, f, a, slot, leaf)))
		w->ctr.port[a].win_clamped++;
}

/*
 * postack's share clamp. Holding ACKs bounds the data
 * queued here, not the sender's window: nothing is dropped, so cwnd grows
 * until ack_limit and the socket buffers stop it, the delay moves into
 * the senders (docs/results/ack-modes), and held ACKs released at the end
 * let them dump those windows into the queues. So every ACK of the flow's data,
 * passed or held, advertises at most its share of the class (of its ceil:
 * borrowing stays possible) times the path's round trip, both sides of the
 * gateway from the handshake (as ipabr starts from), plus a target of
 * max(2 MSS, share x clamp_target): 2 MSS so a delayed ACK (every second
 * segment) leaves the window-limited sender something to send, share x
 * 5 ms so the class's standing queue is its rate x 5 ms (CoDel's target)
 * whatever the flow count. share x RTT is raised by clamp_margin (a
 * fraction of it) so a loss's multiplicative decrease leaves the window at
 * the BDP or above, not the link idle (docs/results/postack-clamp). The
 * same Eq. 4.6 arithmetic as ipabr (lib/modes/tcpwin.h), at most the hold window
 * (postack_hold_window). A young flow gets the larger of that and the young
 * budget divided among the class's active flows (weir_postack_young_window):
 * a lone short transfer keeps its head start, and many flows starting
 * together in a small class do not each get the whole budget of window. A flow whose round trip or window scale is unknown is left
 * alone, counted. Returns true when it applied: the ACK's edge is then
 * noted (a later note from its unrewritten window would undo the cut).
 */
static bool
postack_share_clamp(struct weir_mode_svc *w, const struct weir_flow *f, struct rte_mbuf *m,
		    const struct weir_pkt *p, int a, uint32_t slot, uint32_t leaf)
{
	struct weir_postack *pa = w->pa;
	const int d = a ^ 1;
	uint64_t rtt;
	uint32_t lim;

	if (!pa->share_clamp)
		return false;
	rtt = postack_path_rtt(pa, d, slot);
	if (rtt == 0 || weir_ack_wscale(f, a) < 0) {
		pa->st.clamp_unknown++;
		return false;
	}
	lim = weir_postack_share_window(w->cls_ctr[d][leaf].ceil_share_bytes_per_tick, rtt,
					pa->clamp_target, f->mss[a], pa->clamp_margin16);
	if (weir_mode_young(w, f, d, leaf))
		lim = weir_postack_young_window(lim, weir_cbq_young_budget(w->shaper[d], leaf),
						w->cls_ctr[d][leaf].active);
	if (weir_postack_cut_window(pa, f, m, p, a, slot,
				    RTE_MIN(lim, postack_hold_window(w, f, a, slot, leaf))))
		w->ctr.port[a].win_clamped++;
	return true;
}

/* A 32-bit sequence number at byte offset off of frame m (any alignment). */
static inline uint32_t
seq_at(const struct rte_mbuf *m, uint32_t off)
{
	uint32_t v;

	memcpy(&v, rte_pktmbuf_mtod_offset(m, const uint8_t *, off), sizeof(v));
	return rte_be_to_cpu_32(v);
}

/* A D-SACK (RFC 2883): the first block reports data received twice and
 * answers a spurious retransmission, not a hole. Its two forms: the block
 * below the cumulative ACK, or contained in the second block (sec. 4.2). */
static inline bool
dsack(const struct rte_mbuf *m, const struct weir_pkt *p)
{
	const uint32_t off = p->l4_off + p->sack_off;
	uint32_t l1 = seq_at(m, off), r1 = seq_at(m, off + 4), l2, r2;

	if (weir_seq_lt(l1, p->ack))
		return true;
	if (p->sack_n < 2)
		return false;
	l2 = seq_at(m, off + 8);
	r2 = seq_at(m, off + 12);
	return !weir_seq_lt(l1, l2) && !weir_seq_lt(r2, r1);
}

/* Did this gateway drop data of direction d at or past `hole` (the
 * cumulative ACK of an ACK reporting a hole)? Then the loss is its own. */
static inline bool
own_drop(const struct weir_postack *pa, int d, uint32_t slot, uint32_t hole)
{
	const struct weir_postack_q *q = &pa->q[d][slot];

	return (q->flags & WEIR_PAQ_DROP_VALID) && !weir_seq_lt(q->drop_seq, hole);
}

/* The gateway dropped a data segment of f travelling d: remember its seq,
 * so a SACK reporting that hole is known to be this gateway's (own_drop). */
void
weir_postack_mode_dropped(struct weir_mode_svc *w, const struct weir_flow *f, struct rte_mbuf *m, int d)
{
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
	struct weir_postack_q *q;

	if (p->l4proto != IPPROTO_TCP || p->payload_len == 0)
		return;
	q = &w->pa->q[d][weir_flow_slot(w->flows, f)];
	if (!(q->flags & WEIR_PAQ_DROP_VALID) || weir_seq_lt(q->drop_seq, p->seq)) {
		q->drop_seq = p->seq;
		q->flags |= WEIR_PAQ_DROP_VALID;
	}
}

/*
 * SACK blocks: the receiver holds data past a hole (RFC 2018), a loss the
 * sender has to hear of now. Held behind the flow's ACK queue, the news
 * would wait as long as that queue takes to drain (seconds at a few KB/s)
 * while the hole stalls delivery. What is held goes first (order), then
 * this one, and so on for each ACK until the hole is filled; the sender's
 * own loss response keeps the data it sends meanwhile in check. Not when
 * the hole is one this gateway made (own_drop): the flow is over its
 * share, and a burst of released ACKs would bring a burst of data into a
 * full queue. Nor for a D-SACK. Returns
 * true when the ACK is such news and goes on.
 */
bool
weir_postack_mode_sack_news(struct weir_mode_svc *w, const struct weir_flow *f, const struct rte_mbuf *m,
	  const struct weir_pkt *p, int a, uint32_t slot, uint32_t held, bool noted)
{
	const int d = a ^ 1;
	struct weir_postack_q *q = &w->pa->q[d][slot];

	/* A mark the cumulative ACK has passed is repaired: forget it, or 2 GiB
	 * on the comparison below turns round and every hole looks like ours. */
	if ((q->flags & WEIR_PAQ_DROP_VALID) && weir_seq_lt(q->drop_seq, p->ack))
		q->flags &= (uint8_t)~WEIR_PAQ_DROP_VALID;
	if (!(p->flags & WEIR_PF_TCP_SACK) || dsack(m, p) || own_drop(w->pa, d, slot, p->ack))
		return false;
	if (held > 0)
		weir_mode_release(w, d, slot, UINT32_MAX, WEIR_PA_FLUSH);
	if (!noted)
		weir_postack_note_edge(w->pa, f, p, a, slot);
	weir_postack_asked(w->pa, d, slot, weir_postack_ack_adv(w->pa, d, slot, p->ack));
	w->ctr.port[a].sack_passed++;
	return true;
}

/* How much is on its way is weighed against the sender's BDP plus this
 * fraction of it (a shift): the data queue's steady share of the loop. */
#define WEIR_PA_TARGET_SHIFT 1

/*
 * Is flow f over its share in data direction d, with qlen of its packets
 * queued? Fig. 14's rule says yes from one packet on: right for a sender
 * beside the gateway, whose data is back a moment after its ACK goes. A
 * sender a round trip away (a download's, across the WAN) cannot refill
 * the queue before the share drains it, so holding its ACKs from one
 * queued packet on leaves the class idle (docs/results/ack-modes). And gating on the queue alone closes a loop
 * whose delay is that round trip (docs/results/fct/ack-loop.md): releases stop while the queue is long, a
 * round trip later nothing arrives and it runs dry, then the data of the
 * ACKs paced out meanwhile comes back as a burst. So the data the ACKs
 * let go asked for and that has not arrived counts as queued (a Smith
 * predictor: the loop's delay taken out of what it sees): the flow is
 * over when queued and on its way exceed its sender's BDP and half again.
 * In steady state about a BDP is on its way, half a BDP queued. A sender
 * under two segments of BDP away (on the LAN) keeps the rule as it was:
 * over from half its BDP queued, which is one packet, the paper's rule.
 */
static inline bool
postack_over(const struct weir_mode_svc *w, const struct weir_flow *f, int d, uint32_t slot,
	     uint32_t leaf, uint32_t qlen, uint64_t now)
{
	const uint64_t seg = f->mss[d ^ 1] ? f->mss[d ^ 1] : 1460;
	const uint64_t bdp = weir_postack_mode_bdp(w, d, slot, leaf);

	/* A sender whose data is back before its share drains what one
	 * delayed ACK asks for (two segments): the paper's rule, as before. */
	if (bdp < 2 * seg)
		return (uint64_t)qlen * seg > bdp >> 1;
	return (uint64_t)qlen * seg + weir_postack_on_way(w->pa, d, slot, now) > bdp + (bdp >> WEIR_PA_TARGET_SHIFT);
}

/*
 * PostACK for a pure ACK travelling a (data direction d = a ^ 1). It is
 * held while the flow is over its share in direction d (postack_over) or
 * ACKs of it are held already (order); once it is not, the oldest held one
 * is released first (the rule's qlen == 0 case: the sender must not
 * stall). A held ACK is never behind a frame of its own direction still
 * in the class tree: it is held only while that queue is empty.
 */
static enum weir_verdict
postack_ack(struct weir_mode_svc *w, struct weir_flow *f, struct rte_mbuf *m,
	    const struct weir_pkt *p, int a, uint32_t slot, uint32_t leaf, uint32_t held,
	    uint64_t now)
{
	const int d = a ^ 1;
	const bool clamped = postack_share_clamp(w, f, m, p, a, slot, leaf);
	bool over;

	if (weir_postack_mode_sack_news(w, f, m, p, a, slot, held, clamped))
		return WEIR_V_PASS;
	if (weir_mode_data_qlen(w, f, a, slot) != 0)
		goto pass;      /* earlier frames of this direction still queued: keep order */
	/* A young flow is served ahead of the bulk ones (lib/sched/drr.h) at more
	 * than its share: holding it to its share's BDP would cap its slow
	 * start at a few segments beside bulk flows. */
	if (held == 0 && weir_mode_young(w, f, d, leaf))
		goto pass;
	over = postack_over(w, f, d, slot, leaf, weir_mode_data_qlen(w, f, d, slot), now);
	if (held == 0 && !over)
		goto pass;      /* not over its share: it goes on */
	if (held > 0 && !over)
		weir_mode_release(w, d, slot, 1, WEIR_PA_RULE);
	if (!clamped)
		weir_postack_mode_clamp(w, f, m, p, a, slot, leaf);
	return weir_mode_hold(w, f, d, slot, m, now);
pass:
	if (!clamped)
		weir_postack_mode_clamp(w, f, m, p, a, slot, leaf);
	weir_postack_asked(w->pa, d, slot, weir_postack_ack_adv(w->pa, d, slot, p->ack));
	return WEIR_V_PASS;
}

/* The release rule (Fig. 14): a data packet sent with at most one more of
 * its flow's queued behind it gets one held ACK back; for a far sender,
 * while what is queued behind it (less one) and on its way is within its
 * room (postack_over). */
static void
postack_sent(struct weir_mode_svc *w, struct rte_mbuf *m, int d, uint32_t slot, uint32_t leaf,
	     uint32_t qlen, uint64_t now)
{
	RTE_SET_USED(m);
	if (weir_postack_len(w->pa, d, slot) > 0 &&
	    !postack_over(w, weir_flow_by_slot(w->flows, slot), d, slot, leaf, qlen ? qlen - 1 : 0, now))
		weir_mode_release(w, d, slot, 1, WEIR_PA_RULE);
}

/* The watchdog's verdict on a PostACK flow holding ACKs: all of them once
 * the data has stopped, one per fair-share gap while its data queue is
 * empty and the sender still sends. */
static uint32_t
postack_tick(struct weir_mode_svc *w, const struct weir_flow *f, int d, uint32_t slot, uint32_t leaf,
	     uint64_t now, uint32_t held, enum weir_postack_why *why)
{
	if (weir_mode_data_qlen(w, f, d, slot) != 0) {
		w->tcr->f[d][slot].next_release = 0;    /* restart the clock below when it starves */
		return 0;       /* backlogged: the dequeue rule clocks its ACKs */
	}
	*why = WEIR_PA_IDLE;
	if (weir_postack_idle(w->pa, d, slot, now, f->last_tsc))
		return held;
	/* Queue empty, ACKs held, sender not idle: the flow is getting less
	 * than its share, and with no data queued no dequeue will release
	 * anything for a whole round trip to its sender (a download's is a
	 * WAN one: Appendix A). Release at its fair share's pace meanwhile,
	 * MSS / (class rate / flows), so the data it asks for arrives at the
	 * rate DRR will serve it; once it queues again the rule takes over. */
	*why = WEIR_PA_PACED;
	if (postack_over(w, f, d, slot, leaf, 0, now))
		return 0;       /* what it asked for is on its way: wait for it */
	return weir_tcr_pace_due(w, f, d, slot, leaf, now, held);
}

const struct weir_mode_ops weir_mode_postack = {
	.name = "postack",
	.flags = WEIR_MODEF_ACKS,
	.ack = postack_ack,
	.sent = postack_sent,
	.dropped = weir_postack_mode_dropped,
	.tick = postack_tick,
};
