
/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the postack-paced mode (lib/modes/mode.h): a postack leaf's ACKs let go
 * on the class's and the flow's clocks (Fig. 4) rather than with its data.
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

#define WEIR_PACED_BACKLOG 4u      /* packets a postack-paced class may have queued, at least */
/* A class backlog of at most this many packets a backlogged flow is the
 * paced flows' own (Fig. 8: 20-27 packets over 15-25 flows); more is a few
 * long queues that do not answer pacing (a UDP flood at its flow_limit). */
#define WEIR_PACED_SPREAD 4u

/* Has the class, qlen packets queued, WEIR_PACED_BACKLOG packets plus a
 * millisecond's worth (ms_ticks / cgap, cgap the ticks of one MSS at its
 * rate), counting
 * as queued what the flow's released ACKs asked for beyond its sender's
 * BDP (`extra` bytes, negative when less than a BDP is on its way: the
 * round trip's worth of data that has to be in flight for the queue not to
 * run dry, docs/results/fct/ack-loop.md)? Compared as
 * qlen + x - B >= ms / cgap, i.e. ms x seg < ((qlen - B + 1) x seg + extra)
 * x cgap, x = extra / seg: no division per tick. */
static inline bool
paced_backlogged(uint32_t qlen, uint64_t ms_ticks, uint64_t cgap, int64_t extra, uint32_t seg)
{
	const int64_t b = ((int64_t)qlen - WEIR_PACED_BACKLOG) * seg + extra;

	return b >= 0 && (int64_t)(ms_ticks * seg) < (b + seg) * (int64_t)(cgap | 1);
}

/*
 * postack-paced: the paper's first efficient PostACK (Sec. 3.2, Fig. 4),
 * an on-off variant of ACK pacing. Each flow's ACKs leave one per MSS at
 * its share of the class, and a flow that sent more than one data packet
 * for an ACK (slow start, delayed ACKs) has its next ticks skipped, one
 * per extra packet (`out`, Fig. 4's i.out), so the data arriving for the
 * class matches what it sends and each flow gets its share in packets.
 * Three departures from Fig. 4, each measured (docs/postack.md):
 *  - the share is the class rate over the flows holding ACKs (at most the
 *    class's flows), not over every live flow: counting idle connections
 *    is what makes TCR slow, and a paced flow is one holding ACKs;
 *  - a class clock spaces all releases one MSS at the class rate apart,
 *    and none is made while the class has a few packets queued (or a
 *    millisecond of them): the flows' ticks alone fire together and leave
 *    the backlog a random walk (open loop);
 *  - ticks are skipped only while the class has a queue (below).
 * The pace does not follow borrowing. Returns 1 when an ACK may go now.
 */
static uint32_t
paced_tick(struct weir_mode_svc *w, const struct weir_flow *f, int d, uint32_t slot, uint32_t leaf,
	   uint64_t now, bool arrival)
{
	struct weir_tcr_flow *tf = &w->tcr->f[d][slot];
	struct weir_class_counters *c = &w->cls_ctr[d][leaf];
	const uint32_t flows = c->active ? c->active : 1;
	const uint32_t seg = f->mss[d ^ 1] ? f->mss[d ^ 1] : 1460;
	const int64_t bdp = (int64_t)weir_postack_mode_bdp(w, d, slot, leaf);
	const int64_t on_way = bdp ? (int64_t)weir_postack_on_way(w->pa, d, slot, now) : 0;
	const uint32_t lqlen = weir_cbq_leaf_qlen(w->shaper[d], leaf);
	uint64_t cgap, fgap;

	/* A far sender (two segments of BDP or more) whose own data queued
	 * and on its way falls short of its BDP: a round trip from now its
	 * share runs dry whatever the clocks say (they only ever lose time: a
	 * late look at the flow is not made up). An ACK goes now; what it
	 * asks for counts on its way at once, so this stops as soon as enough
	 * is asked for. The flow's own queue, not the class's: beside other
	 * flows' packets the class queue hides a flow's empty pipe and leaves
	 * the class underfilled (docs/postack.md, docs/results/ack-modes). */
	if (bdp >= 2 * (int64_t)seg &&
	    (int64_t)weir_mode_data_qlen(w, f, d, slot) * seg + on_way < bdp) {
		tf->out = 0;
		w->pa->st.caught_up++;
		return 1;
	}
	if (now < tf->next_release)
		return 0;
	/* one MSS at the class's rate (the share is water-filled, not rate / flows) */
	cgap = RTE_MIN((seg * c->rate_ticks_per_byte) >> 16, w->tsc_hz / flows);
	fgap = cgap * RTE_MIN(flows, RTE_MAX(w->pa->ring_n, 1u));
	if (tf->out <= 1) {
		if (now < c->pace_next)
			return 0;       /* the flow keeps its tick */
		/* A backlogged class takes no more from a flow that has data
		 * waiting in it, nor from any while the backlog is spread over
		 * its flows (a few packets each: the paced flows' own). A
		 * backlog standing in a few long queues is someone who does
		 * not answer ACK pacing (UDP): a flow with nothing waiting
		 * still gets its ticks, or every TCP flow's ACKs stop and TCP
		 * gets nothing of the class. Ticking past a spread backlog
		 * keeps a class of many small flows at its limit
		 * (docs/results/ack-modes). */
		if (paced_backlogged(lqlen, w->tsc_hz / 1000, cgap, bdp ? on_way - bdp : 0, seg) &&
		    (weir_mode_data_qlen(w, f, d, slot) != 0 ||
		     lqlen <= WEIR_PACED_SPREAD * weir_cbq_leaf_backlogged(w->shaper[d], leaf)))
			return 0;
		c->pace_next = RTE_MAX(c->pace_next + cgap, now - cgap);
	}
	/* An ACK arriving with nothing held banks no credit for a quiet flow;
	 * the watchdog keeps up to one tick of it for a held one. */
	tf->next_release = arrival ? now + fgap : RTE_MAX(tf->next_release + fgap, now - fgap);
	/* Fig. 4 line 03: quench this tick, so the data arriving matches what
	 * the class sends; with the class's queue empty there is nothing to
	 * match. A receiver stretching its ACKs (several data packets a paced
	 * ACK) would make each take as many ticks, and a lone upload paced by
	 * the ACKs it sees would hold below the class with its queue empty
	 * (docs/results/ack-modes). */
	if (tf->out > 1 && lqlen != 0) {
		tf->out--;
		return 0;
	}
	tf->out = 0;
	return 1;
}

/* postack-paced for a pure ACK travelling a: it goes on at once when
 * nothing of its flow is held and its pacing tick is due, else it waits
 * in the ACK store, window clamped as PostACK's, for the watchdog's ticks. */
static enum weir_verdict
paced_ack(struct weir_mode_svc *w, struct weir_flow *f, struct rte_mbuf *m, const struct weir_pkt *p,
	  int a, uint32_t slot, uint32_t leaf, uint32_t held, uint64_t now)
{
	const int d = a ^ 1;

	if (weir_postack_mode_sack_news(w, f, m, p, a, slot, held, false))
		return WEIR_V_PASS;
	/* Behind a frame of its own direction (order); or nothing held, the
	 * flow's queue empty and the class without a backlog: there is room,
	 * and pacing would only slow its start; or the flow is
	 * young (lib/sched/drr.h: served ahead of bulk flows); or its tick is due. */
	if (weir_mode_data_qlen(w, f, a, slot) != 0 ||
	    (held == 0 && weir_mode_young(w, f, d, leaf)) ||
	    (held == 0 && weir_mode_data_qlen(w, f, d, slot) == 0 &&
	     weir_cbq_leaf_qlen(w->shaper[d], leaf) == 0) ||
	    (held == 0 && paced_tick(w, f, d, slot, leaf, now, true))) {
		weir_postack_mode_clamp(w, f, m, p, a, slot, leaf);
		weir_postack_asked(w->pa, d, slot, weir_postack_ack_adv(w->pa, d, slot, p->ack));
		return WEIR_V_PASS;
	}
	weir_postack_mode_clamp(w, f, m, p, a, slot, leaf);
	return weir_mode_hold(w, f, d, slot, m, now);
}

/* Fig. 4 line 13: one more data packet of the flow arrived for the class. */
static void
paced_queued(struct weir_mode_svc *w, const struct weir_flow *f, struct rte_mbuf *m, int d,
	     uint32_t slot)
{
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;

	RTE_SET_USED(f);
	if (p->l4proto == IPPROTO_TCP && p->payload_len > 0)
		w->tcr->f[d][slot].out++;
}

static uint32_t
paced_tick_op(struct weir_mode_svc *w, const struct weir_flow *f, int d, uint32_t slot,
	      uint32_t leaf, uint64_t now, uint32_t held, enum weir_postack_why *why)
{
	RTE_SET_USED(held);
	*why = WEIR_PA_PACED;
	return paced_tick(w, f, d, slot, leaf, now, false);
}

const struct weir_mode_ops weir_mode_paced = {
	.name = "postack-paced",
	.flags = WEIR_MODEF_ACKS | WEIR_MODEF_NO_CUT,
	.ack = paced_ack,
	.queued = paced_queued,
	.dropped = weir_postack_mode_dropped,
	.tick = paced_tick_op,
};
