/* SPDX-License-Identifier: BSD-3-Clause
 * weir: TCR, TCP rate control by window sizing and ACK pacing (the prior
 * art PostACK is measured against: the PostACK paper, Sec. 2.4).
 *
 * For a flow in a tcr leaf, every ACK of its data has its advertised
 * window cut to the flow's bandwidth-delay product, BDP_i = BW_i x D_w,
 * with BW_i = the class's rate / its active flows (the fair share) and
 * D_w the flow's round trip, and the ACKs are clocked out one every
 * MSS / BW_i. The ACKs wait in the same compact store PostACK uses
 * (lib/modes/ackstore.h); the watchdog paces them from its round-robin over the
 * flows holding ACKs, so there is no timer per flow. D_w is the sum of two
 * halves the gateway sees: to the data's sender and back (the handshake)
 * and to its receiver and back (`srtt`: the handshake's, smoothed with
 * EWMA gain 1/8, as TCP's SRTT, by one timed data segment per round trip,
 * from the moment it leaves the gateway towards the receiver to the ACK
 * that covers it).
 *
 * tcr.c is the mode (lib/modes/mode.h). The per-flow pacing state is a service
 * it shares with PostACK's pacing of starving flows and postack-paced
 * (lib/modes/pace_state.h), and so are the clocks over it (lib/modes/pace.h); the per-class
 * figures (bytes per tick and ticks per byte of the fair share, fixed
 * point) are the worker's, recomputed when a class's flow count or rate
 * changes, never per packet.
 */
#include <netinet/in.h>

#include "mbuf_meta.h"
#include "mode.h"
#include "pace.h"
#include "ackstore_int.h"
#include "tcpwin.h"
#include "pace_state.h"
#include "mode_svc.h"

/*
 * The round trip a TCR window is sized for, D_w: the data's whole loop,
 * sender to receiver and back. The gateway sees it in two halves: to the
 * receiver and back (the ACK's sender: srtt, from the handshake, then
 * smoothed by data/ACK samples) and to the sender and back (the handshake
 * of direction d). An upload's first half is the WAN, a download's the
 * LAN; taking only the sampled half made a download's window one segment
 * (a 1 MB download took 19 s). 0: not known yet.
 */
static inline uint64_t
tcr_rtt(const struct weir_mode_svc *w, const struct weir_tcr_flow *tf, int d, uint32_t slot)
{
	return tf->srtt == 0 ? 0 : (uint64_t)tf->srtt + w->pa->q[d][slot].rtt;
}

/*
 * TCR for a pure ACK travelling a (Sec. 2.4): its window is cut to the
 * flow's BDP (its share of the class x D_w), and it leaves no sooner than
 * MSS / share after the flow's previous ACK; early ones wait in the ACK
 * store and the watchdog ring clocks them out. Two departures from the
 * paper's TCR, for flows to fill their share: the window is the
 * BDP plus an eighth plus up to two segments (a window of exactly rate x
 * RTT cannot carry the rate once any queueing adds to the RTT; the bounds
 * are below), and the share
 * divides the class among its active flows. The right edge never moves
 * left (RFC 7323 sec. 2.4) when the share shrinks.
 */
static enum weir_verdict
tcr_ack(struct weir_mode_svc *w, struct weir_flow *f, struct rte_mbuf *m, const struct weir_pkt *p,
	int a, uint32_t slot, uint32_t leaf, uint32_t held, uint64_t now)
{
	const int d = a ^ 1;
	const struct weir_class_counters *c = &w->cls_ctr[d][leaf];
	struct weir_tcr_flow *tf = &w->tcr->f[d][slot];
	uint32_t seg = f->mss[a] ? f->mss[a] : 1460;
	const bool young = weir_mode_young(w, f, d, leaf);
	uint64_t rtt;

	if (tf->srtt == 0)
		tf->srtt = w->pa->q[a][slot].rtt;       /* the receiver's side, from the handshake */
	weir_tcr_on_ack(w->tcr, d, slot, p->ack, now);
	rtt = tcr_rtt(w, tf, d, slot);
	/* A young flow is served ahead of the bulk ones (lib/sched/drr.h): its
	 * window follows its share only once it has sent its budget. */
	if (rtt != 0 && !young) {
		uint64_t bdp = (rtt * c->share_bytes_per_tick) >> 32;
		/* Headroom: two segments each, however small the BDP, for
		 * a receiver ACKs every second segment and a window of one
		 * waits for its delayed ACK (4 uploads on the testbed's short
		 * path, test_postack_per_worker[tcr]). Bounded twice:
		 *  - by half the class's queue limit over its flows: 32 flows
		 *    of Fig. 8 (780 B shares, a pipe of 17 segments) had ~80
		 *    segments in flight into a 9-packet queue;
		 *  - by what the share sends in 40 ms, the receiver's
		 *    delayed-ACK timer: a share slower than two segments in
		 *    that long spaces ACKs further apart than the timer
		 *    anyway, and each segment more is an ACK held here a gap
		 *    longer, past the senders' retransmission timers
		 *    (docs/results/ack-modes).
		 * Never below one segment, TCR's own floor. */
		const uint64_t margin = RTE_MIN(((uint64_t)seg * c->tcr_margin16) >> 4,
						(uint64_t)c->tcr_margin_bytes);
		uint64_t limit = RTE_MAX(bdp + bdp / 8 + margin, (uint64_t)seg);

		if (weir_postack_cut_window(w->pa, f, m, p, a, slot,
					    (uint32_t)RTE_MIN(limit, (uint64_t)INT32_MAX)))
			w->ctr.port[a].win_clamped++;
	}
	/* The clock runs on what ACKs ask for, not on their count: a delayed
	 * ACK asks for two segments, and one gap per ACK let a class of 32
	 * small shares (Fig. 8) send at up to twice its rate. A held ACK's
	 * advance is taken when it is stored. */
	if (weir_mode_data_qlen(w, f, a, slot) != 0) {
		weir_postack_ack_adv(w->pa, d, slot, p->ack);
		return WEIR_V_PASS;     /* behind a frame of its own direction: keep order */
	}
	if (held == 0 && (young || now >= tf->next_release)) {
		tf->next_release = now + weir_postack_charge(weir_tcr_pace_gap(w, f, d, leaf),
							     c->share_ticks_per_byte,
							     weir_postack_ack_adv(w->pa, d, slot, p->ack),
							     seg);
		return WEIR_V_PASS;
	}
	/* Nothing of the flow waits and its class has no backlog: there is
	 * room, and pacing would only slow its start. The window
	 * cut above still bounds it to its share. */
	if (held == 0 && weir_mode_data_qlen(w, f, d, slot) == 0 &&
	    weir_cbq_leaf_qlen(w->shaper[d], leaf) == 0) {
		weir_postack_ack_adv(w->pa, d, slot, p->ack);
		return WEIR_V_PASS;
	}
	return weir_mode_hold(w, f, d, slot, m, now);
}

/* A data segment left: time it to its ACK (the round-trip sample). */
static void
tcr_sent(struct weir_mode_svc *w, struct rte_mbuf *m, int d, uint32_t slot, uint32_t leaf,
	 uint32_t qlen, uint64_t now)
{
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;

	RTE_SET_USED(leaf);
	RTE_SET_USED(qlen);
	if (p->l4proto == IPPROTO_TCP && p->payload_len > 0)
		weir_tcr_on_data(w->tcr, d, slot, p->seq + p->payload_len, now);
}

static uint32_t
tcr_tick(struct weir_mode_svc *w, const struct weir_flow *f, int d, uint32_t slot, uint32_t leaf,
	 uint64_t now, uint32_t held, enum weir_postack_why *why)
{
	*why = WEIR_PA_PACED;
	return weir_tcr_pace_owed(w, f, d, slot, leaf, now, held);
}

const struct weir_mode_ops weir_mode_tcr = {
	.name = "tcr",
	.flags = WEIR_MODEF_ACKS | WEIR_MODEF_WINDOW,
	.ack = tcr_ack,
	.sent = tcr_sent,
	.tick = tcr_tick,
};
