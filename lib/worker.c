/* SPDX-License-Identifier: BSD-3-Clause */
#include <assert.h>
#include <errno.h>
#include <sys/prctl.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>

#include "cksum.h"
#include "mbuf_meta.h"
#include "worker.h"

/* Empty polls before the first back-off sleep: long enough that a busy link
 * never sleeps between bursts, short enough to give the core away quickly. */
#define IDLE_SPINS 512
/* Times a partly sent tx burst is retried before the rest counts as tx_full. */
#define TX_RETRIES 16

/* The LAN port's frames travel out towards the WAN, and the other way round. */
static_assert((int)WEIR_PORT_LAN == (int)WEIR_DIR_OUT && (int)WEIR_PORT_WAN == (int)WEIR_DIR_IN,
	      "port role doubles as the packet's direction");

/* Policy epochs as flows store them: 16 bits, never 0 (0 = unclassified). */
static inline uint16_t
epoch16(uint32_t epoch)
{
	return (uint16_t)(epoch % 0xffff + 1);
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
	 * whose trees the shapers must have been built from. */
	if (shaped && (flows == NULL || pol == NULL))
		return NULL;
	for (int d = 0; shaped && d < WEIR_PORT__COUNT; d++)
		if ((shaper[d] != NULL) != (pol->tree[d].n_classes != 0))
			return NULL;
	w = rte_zmalloc_socket("weir_worker", sizeof(*w), RTE_CACHE_LINE_SIZE, socket_id);
	if (w == NULL)
		return NULL;
	w->conf = *conf;
	w->flows = flows;
	w->tsc_hz = rte_get_tsc_hz();
	w->tsc_per_us = RTE_MAX(w->tsc_hz / 1000000, (uint64_t)1);
	if (conf->postack != NULL && !shaped) {
		rte_free(w);
		return NULL;    /* ACKs are held against a class tree's data queues */
	}
	if (shaped) {
		w->policy = pol;
		w->pa = conf->postack;
		if (w->pa != NULL) {
			w->tcr = weir_tcr_create(weir_flow_table_capacity(flows), socket_id);
			if (w->tcr == NULL) {
				rte_free(w);
				return NULL;
			}
		}
		w->epoch16 = epoch16(pol->epoch);
		w->policy_acked = pol->epoch;
		w->gen8 = 1;
		w->unmanaged_qid = weir_flow_table_capacity(flows);
		for (int d = 0; d < WEIR_PORT__COUNT; d++) {
			w->shaper[d] = shaper[d];
			if (shaper[d] == NULL)
				continue;
			w->cls_ctr[d] = rte_zmalloc_socket("weir_class_ctr",
				pol->tree[d].n_classes * sizeof(*w->cls_ctr[d]), RTE_CACHE_LINE_SIZE,
				socket_id);
			if (w->cls_ctr[d] == NULL) {
				rte_free(w->cls_ctr[0]);
				rte_free(w);
				return NULL;
			}
		}
	}
	return w;
}

void
weir_worker_free(struct weir_worker *w)
{
	if (w == NULL)
		return;
	weir_worker_flush_queues(w);
	weir_postack_free(w->pa);
	weir_tcr_free(w->tcr);
	weir_cbq_free(w->shaper[0]);
	weir_cbq_free(w->shaper[1]);
	rte_free(w->cls_ctr[0]);
	rte_free(w->cls_ctr[1]);
	rte_free(w);
}

/* Count why a frame is bridged unmanaged; returns true if it is manageable. */
static inline bool
classify_unmanaged(struct weir_port_counters *pc, const struct weir_pkt *p)
{
	if (likely(weir_pkt_manageable(p)))
		return true;
	if (p->malformed != WEIR_MAL_NONE) {
		pc->malformed++;
		pc->malformed_by[p->malformed]++;
	} else if (p->flags & WEIR_PF_FRAGMENT) {
		pc->fragments++;
	} else {
		pc->non_ip++;
	}
	return false;
}

static void send_burst(struct weir_worker *w, enum weir_port_role to, struct rte_mbuf **pkts,
		       uint16_t n);

/* The leaf flow f is shaped in, direction d (its target's). */
/* The flow's leaf in direction d; WEIR_CBQ_NONE when it was classified
 * under an earlier policy (its packets were moved at the switch, and the
 * flow is re-classified on its next packet). */
static inline uint16_t
flow_leaf(const struct weir_worker *w, const struct weir_flow *f, int d)
{
	if (unlikely(f->class_gen != w->gen8 || f->class_id >= w->policy->n_targets))
		return WEIR_CBQ_NONE;
	return w->policy->targets[f->class_id].leaf[d];
}


/* Send frames the worker releases on its own (held ACKs) out of port `to`,
 * counted as forwarded from the other port. */
static void
emit(struct weir_worker *w, enum weir_port_role to, struct rte_mbuf **pkts, unsigned int n)
{
	if (n == 0)
		return;
	w->ctr.port[to ^ 1].forwarded += n;
	if (w->conf.emit != NULL) {
		w->conf.emit(w->conf.emit_arg, to, pkts, (uint16_t)n);
		return;
	}
	send_burst(w, to, pkts, (uint16_t)n);
}

/* Release every ACK held for data direction d of slot, in order. They
 * travel the other way, so they leave through port d. */
static void
postack_flush(struct weir_worker *w, int d, uint32_t slot)
{
	struct rte_mbuf *acks[WEIR_BURST_MAX];
	unsigned int n;

	while ((n = weir_postack_release(w->pa, d, slot, acks, WEIR_BURST_MAX, WEIR_PA_FLUSH)) > 0) {
		emit(w, (enum weir_port_role)d, acks, n);
		if (n < WEIR_BURST_MAX)
			break;
	}
}

static inline void
postack_flush_flow(struct weir_worker *w, uint32_t slot)
{
	for (int d = 0; d < WEIR_PORT__COUNT; d++)
		if (weir_postack_len(w->pa, d, slot) > 0)
			postack_flush(w, d, slot);
}

static inline uint32_t
data_qlen(const struct weir_worker *w, int d, uint32_t slot)
{
	return w->shaper[d] != NULL ? weir_drr_qlen(weir_cbq_qtab(w->shaper[d]), slot) : 0;
}

/*
 * How far each side is, from the handshake as the gateway sees it: the
 * SYN+ACK comes back one round trip to the responder after the SYN, the
 * initiator's first pure ACK (its second packet) one round trip to the
 * initiator after the SYN+ACK. Data direction a's sender is the side that
 * sends in direction a: the responder for the SYN+ACK's direction, the
 * initiator for the SYN's. Only handshake packets touch the ACK store's
 * per-flow state here (it is cold for everything else).
 */
static inline void
postack_handshake(struct weir_postack *pa, const struct weir_flow *f, const struct weir_pkt *p,
		  int a, uint32_t slot, uint64_t now)
{
	const uint8_t syn_ack = p->tcp_flags & (WEIR_TCP_SYN | WEIR_TCP_ACK | WEIR_TCP_RST);
	struct weir_postack_q *q = pa->q[a], *o = pa->q[a ^ 1];

	if (likely(!(syn_ack & WEIR_TCP_SYN) && f->pkts[a] != 2))
		return;
	if (syn_ack == WEIR_TCP_SYN) {
		q[slot].hs_tsc = now;
	} else if (syn_ack == (WEIR_TCP_SYN | WEIR_TCP_ACK)) {
		if (o[slot].hs_tsc != 0)
			weir_postack_set_rtt(pa, a, slot, now - o[slot].hs_tsc);
		q[slot].hs_tsc = now;
	} else if (syn_ack == WEIR_TCP_ACK && p->payload_len == 0 && q[slot].rtt == 0 &&
		   o[slot].rtt != 0) {
		weir_postack_set_rtt(pa, a, slot, now - o[slot].hs_tsc);
	}
}

static inline bool
seq_lt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

/*
 * PostACK's window clamp (issue: receivers advertise megabytes, and every
 * byte of window a sender may use beyond its share ends up as ACKs held
 * here). A held ACK's window is cut so the sender may have at most
 * ack_limit segments outstanding past it: the ACKs for them, the most that
 * can then wait here, stay within ack_limit. The right edge never moves
 * left of one already released (RFC 7323 sec. 2.4: do not shrink the
 * window). Needs both SYNs seen (window scales are only known from them);
 * the TCP checksum is patched (RFC 1624), IPv4 and IPv6 alike.
 */
/* The window scale of ACKs travelling a, or -1 when the handshake was not
 * seen (the scale is known only from both SYNs). */
static inline int
ack_wscale(const struct weir_flow *f, int a)
{
	if (f->mss[0] == 0 || f->mss[1] == 0)
		return -1;
	return f->wscale[a] != WEIR_WSCALE_NONE && f->wscale[a ^ 1] != WEIR_WSCALE_NONE ?
	       RTE_MIN(f->wscale[a], (uint8_t)14) : 0;
}

/* Remember the furthest right edge the data sender of direction d has
 * been shown (an ACK travelling a = d ^ 1 that goes on). */
static inline void
postack_note_edge(struct weir_worker *w, const struct weir_flow *f, const struct weir_pkt *p,
		  int a, uint32_t slot)
{
	struct weir_postack_q *q = &w->pa->q[a ^ 1][slot];
	int shift = ack_wscale(f, a);
	uint32_t edge = p->ack + ((uint32_t)p->win << (shift < 0 ? 0 : shift));

	if (shift >= 0 && (!(q->flags & WEIR_PAQ_RE_VALID) || seq_lt(q->re_max, edge))) {
		q->re_max = edge;
		q->flags |= WEIR_PAQ_RE_VALID;
	}
}

/*
 * PostACK's window clamp (issue: receivers advertise megabytes, and every
 * byte of window a sender may use beyond its share ends up as ACKs held
 * here). A held ACK's window is cut so the sender may have at most
 * ack_limit segments outstanding past it: the ACKs for them, the most that
 * can then wait here, stay within ack_limit. The right edge never moves
 * left of one already shown to the sender (RFC 7323 sec. 2.4: do not
 * shrink the window). Needs both SYNs seen (window scales are only known
 * from them); the TCP checksum is patched (RFC 1624), IPv4 and IPv6 alike.
 */
static void
postack_clamp(struct weir_worker *w, const struct weir_flow *f, struct rte_mbuf *m,
	      const struct weir_pkt *p, int a, int d, uint32_t slot)
{
	struct weir_postack_q *q = &w->pa->q[d][slot];
	int shift = ack_wscale(f, a);
	uint32_t edge, limit_edge, win;
	uint8_t *tcp;

	if (shift < 0)
		return;
	edge = p->ack + ((uint32_t)p->win << shift);
	/* f->mss[a]: what the ACK's sender said it can receive, the segment
	 * size the data sender uses. */
	limit_edge = p->ack + (uint32_t)w->pa->ack_limit * f->mss[a];
	if ((q->flags & WEIR_PAQ_RE_VALID) && seq_lt(limit_edge, q->re_max))
		limit_edge = q->re_max;
	if (!seq_lt(limit_edge, edge)) {
		postack_note_edge(w, f, p, a, slot);
		return;
	}
	/* Round up: the new edge is at or past the limit, never short of it. */
	win = (limit_edge - p->ack + (1u << shift) - 1) >> shift;
	win = RTE_MIN(win, 0xffffu);
	tcp = rte_pktmbuf_mtod_offset(m, uint8_t *, p->l4_off);
	weir_cksum_set16(tcp + 14, tcp + 16, rte_cpu_to_be_16((uint16_t)win));
	if (seq_lt(q->re_max, p->ack + (win << shift)) || !(q->flags & WEIR_PAQ_RE_VALID))
		q->re_max = p->ack + (win << shift);
	q->flags |= WEIR_PAQ_RE_VALID;
	w->ctr.port[a].win_clamped++;
}

/* Hold ACK m for (d, slot); when the store is full, release what is held
 * and let m go on after it. Returns true when held. */
static bool
hold_ack(struct weir_worker *w, struct weir_flow *f, int d, uint32_t slot, struct rte_mbuf *m,
	 uint64_t now, struct rte_mbuf **out, unsigned int n_out)
{
	unsigned int evicted;

	f->shape |= (uint8_t)WEIR_FSH_HELD(d);
	if (weir_postack_hold(w->pa, d, slot, m, now, out + n_out, &evicted) == 0) {
		emit(w, (enum weir_port_role)d, out, n_out);
		postack_flush(w, d, slot);
		return false;
	}
	emit(w, (enum weir_port_role)d, out, n_out + evicted);
	return true;
}

/*
 * TCR for a pure ACK travelling a (Sec. 2.4): its window is cut to the
 * flow's BDP (fair share x WAN round trip, at least one segment), and it
 * leaves no sooner than MSS / share after the flow's previous ACK; early
 * ones wait in the ACK store and the watchdog ring clocks them out.
 */
static bool
tcr_ack(struct weir_worker *w, struct weir_flow *f, struct rte_mbuf *m, const struct weir_pkt *p,
	int a, uint32_t slot, uint64_t now, uint32_t held)
{
	const int d = a ^ 1;
	const struct weir_class_counters *c = &w->cls_ctr[d][flow_leaf(w, f, d)];
	struct weir_tcr_flow *tf = &w->tcr->f[d][slot];
	int shift = ack_wscale(f, a);
	uint32_t seg = f->mss[a] ? f->mss[a] : 1460;
	struct rte_mbuf *out[2];

	weir_tcr_on_ack(w->tcr, d, slot, p->ack, now);
	if (tf->srtt == 0)
		tf->srtt = w->pa->q[WEIR_DIR_IN][slot].rtt;     /* the WAN side's, from the handshake */
	if (shift >= 0 && tf->srtt != 0) {
		uint64_t bdp = RTE_MAX(((uint64_t)tf->srtt * c->share_bytes_per_tick) >> 32, (uint64_t)seg);
		uint64_t win = (bdp + (1u << shift) - 1) >> shift;

		if (win < p->win) {
			uint8_t *tcp = rte_pktmbuf_mtod_offset(m, uint8_t *, p->l4_off);

			weir_cksum_set16(tcp + 14, tcp + 16, rte_cpu_to_be_16((uint16_t)win));
			w->ctr.port[a].win_clamped++;
		}
	}
	if (data_qlen(w, a, slot) != 0)
		return false;   /* behind a frame of its own direction: keep order */
	if (held == 0 && now >= tf->next_release) {
		tf->next_release = now + ((seg * c->share_ticks_per_byte) >> 16);
		return false;
	}
	return hold_ack(w, f, d, slot, m, now, out, 0);
}

/* One MSS at the class's fair share on this worker, TSC ticks. */
static inline uint64_t
pace_gap(const struct weir_worker *w, const struct weir_flow *f, int d, uint16_t leaf)
{
	return ((uint64_t)(f->mss[d ^ 1] ? f->mss[d ^ 1] : 1460) *
		w->cls_ctr[d][leaf].share_ticks_per_byte) >> 16;
}

/* Is the flow's next paced ACK due (one per MSS at its class's fair
 * share)? Advances the clock when it is. TCR (starving == 0) lets a late
 * clock keep up to one gap of credit. For a starving PostACK flow holding
 * `starving` ACKs the gap is also at most its data sender's round trip
 * over that count: what it holds goes back within a round trip even when
 * the share (which counts idle flows too) is small; a stopped clock (0)
 * starts a gap from now. */
static inline uint32_t
pace_due(struct weir_worker *w, const struct weir_flow *f, int d, uint32_t slot, uint16_t leaf,
	 uint64_t now, uint32_t starving)
{
	struct weir_tcr_flow *tf = &w->tcr->f[d][slot];
	uint64_t gap = pace_gap(w, f, d, leaf);
	const int bank = starving == 0;

	if (starving)
		gap = RTE_MIN(gap, weir_postack_rtt(w->pa, d, slot) / starving);
	if (!bank && tf->next_release == 0) {
		tf->next_release = now + gap;   /* first seen starving: a gap from now */
		return 0;
	}
	if (now < tf->next_release)
		return 0;
	tf->next_release = RTE_MAX(tf->next_release + gap, bank ? now - gap : now);
	return 1;
}

#define WEIR_PACED_BACKLOG 4u      /* packets a postack-paced class may have queued, at least */

/*
 * postack-paced: the paper's first efficient PostACK (Sec. 3.2, Fig. 4),
 * an on-off variant of ACK pacing. Each flow's ACKs leave one per MSS at
 * its share of the class, and a flow that sent more than one data packet
 * for an ACK (slow start, delayed ACKs) has its next ticks skipped, one
 * per extra packet (`out`, Fig. 4's i.out), so the data arriving for the
 * class matches what it sends and each flow gets its share in packets.
 * Two departures from Fig. 4, both measured (docs/postack.md):
 *  - the share is the class rate over the flows holding ACKs (at most the
 *    class's flows), not over every live flow: counting idle connections
 *    is what makes TCR slow, and a paced flow is one holding ACKs;
 *  - a class clock spaces all releases one MSS at the class rate apart,
 *    and none is made while the class has a few packets queued (or a
 *    millisecond of them): the flows' ticks alone fire together and leave
 *    the backlog a random walk (open loop).
 * The pace does not follow borrowing. Returns 1 when an ACK may go now.
 */
/* Has the class WEIR_PACED_BACKLOG packets queued plus a millisecond's
 * worth (ms_ticks / cgap, cgap the ticks of one MSS at its rate)? Compared
 * as qlen - B >= ms / cgap, i.e. ms < (qlen - B + 1) x cgap: no division
 * per tick. */
static inline bool
paced_backlogged(const struct weir_cbq *sh, uint16_t leaf, uint64_t ms_ticks, uint64_t cgap)
{
	uint32_t qlen = weir_cbq_leaf_qlen(sh, leaf);

	return qlen >= WEIR_PACED_BACKLOG &&
	       ms_ticks < (uint64_t)(qlen - WEIR_PACED_BACKLOG + 1) * (cgap | 1);
}

static inline uint32_t
paced_tick(struct weir_worker *w, const struct weir_flow *f, int d, uint32_t slot, uint16_t leaf,
	   uint64_t now, bool arrival)
{
	struct weir_tcr_flow *tf = &w->tcr->f[d][slot];
	struct weir_class_counters *c = &w->cls_ctr[d][leaf];
	const uint32_t flows = c->flows ? c->flows : 1;
	uint64_t cgap, fgap;

	if (now < tf->next_release)
		return 0;
	cgap = pace_gap(w, f, d, leaf) / flows;
	fgap = cgap * RTE_MIN(flows, RTE_MAX(w->pa->ring_n, 1u));
	if (tf->out <= 1) {
		if (now < c->pace_next)
			return 0;       /* the flow keeps its tick */
		if (w->shaper[d] != NULL && paced_backlogged(w->shaper[d], leaf, w->tsc_hz / 1000, cgap))
			return 0;
		c->pace_next = RTE_MAX(c->pace_next + cgap, now - cgap);
	}
	/* An ACK arriving with nothing held banks no credit for a quiet flow;
	 * the watchdog keeps up to one tick of it for a held one. */
	tf->next_release = arrival ? now + fgap : RTE_MAX(tf->next_release + fgap, now - fgap);
	if (tf->out > 1) {
		tf->out--;      /* Fig. 4 line 03: quench this tick */
		return 0;
	}
	tf->out = 0;
	return 1;
}

/* postack-paced for a pure ACK travelling a: it goes on at once when
 * nothing of its flow is held and its pacing tick is due, else it
 * waits in the ACK store, window clamped as PostACK's, for the watchdog's
 * ticks. */
static bool
paced_ack(struct weir_worker *w, struct weir_flow *f, struct rte_mbuf *m, const struct weir_pkt *p,
	  int a, uint32_t slot, uint64_t now, uint32_t held, uint16_t leaf)
{
	const int d = a ^ 1;
	struct rte_mbuf *out[2];

	if (data_qlen(w, a, slot) != 0 || (held == 0 && paced_tick(w, f, d, slot, leaf, now, true))) {
		postack_note_edge(w, f, p, a, slot);
		return false;   /* behind a frame of its own direction (order), or due */
	}
	postack_clamp(w, f, m, p, a, d, slot);
	return hold_ack(w, f, d, slot, m, now, out, 0);
}

/* The watchdog's verdict on a flow holding ACKs: TCR releases one when its
 * pacing clock says so; PostACK all of them once the data has stopped, and
 * one per fair-share gap while its data queue is empty. */
static uint32_t
ring_decide(void *arg, int d, uint32_t slot, uint64_t now, uint32_t held,
	    enum weir_postack_why *why)
{
	struct weir_worker *w = arg;
	const struct weir_flow *f = weir_flow_by_slot(w->flows, slot);
	const struct weir_policy_target *t = &w->policy->targets[f->class_id];

	if (t->mode[d] == WEIR_MODE_TCR && t->leaf[d] != WEIR_CBQ_NONE) {
		*why = WEIR_PA_PACED;
		/* Keep the clock, but do not bank credit while nothing was held. */
		return pace_due(w, f, d, slot, t->leaf[d], now, 0);
	}
	if (t->mode[d] == WEIR_MODE_PACED && t->leaf[d] != WEIR_CBQ_NONE) {
		*why = WEIR_PA_PACED;
		return paced_tick(w, f, d, slot, t->leaf[d], now, false);
	}
	if (data_qlen(w, d, slot) != 0) {
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
	if (t->mode[d] != WEIR_MODE_POSTACK || t->leaf[d] == WEIR_CBQ_NONE)
		return 0;
	*why = WEIR_PA_PACED;
	return pace_due(w, f, d, slot, t->leaf[d], now, held);
}

/* A D-SACK (RFC 2883): the first block reports data received twice, below
 * the cumulative ACK; it answers a spurious retransmission, not a hole. */
static inline bool
dsack(const struct rte_mbuf *m, const struct weir_pkt *p)
{
	const unaligned_uint32_t *left =
		rte_pktmbuf_mtod_offset(m, const unaligned_uint32_t *, p->l4_off + p->sack_off);

	return seq_lt(rte_be_to_cpu_32(*left), p->ack);
}

/* Did this gateway drop data of direction d at or past `hole` (the
 * cumulative ACK of an ACK reporting a hole)? Then the loss is its own. */
static inline bool
own_drop(const struct weir_postack *pa, int d, uint32_t slot, uint32_t hole)
{
	const struct weir_postack_q *q = &pa->q[d][slot];

	return (q->flags & WEIR_PAQ_DROP_VALID) && !seq_lt(q->drop_seq, hole);
}

/*
 * PostACK for a TCP packet of flow f travelling in direction a; its ACKs
 * answer data direction d = a ^ 1. A pure ACK is held (returns true: the
 * packet is taken) while the flow's data waits in its queue of direction
 * d or ACKs of it are held already (order); when the data queue is empty
 * the oldest held one is released first (the rule's qlen == 0 case: the
 * sender must not stall). Anything else (data, SYN, FIN, RST) first
 * releases what is held, so nothing overtakes a held ACK; FIN and RST
 * release both directions' (the connection is ending).
 * A held ACK is never behind a frame of its own direction still in the
 * class tree: it is held only while that queue is empty.
 */
static bool
postack_packet(struct weir_worker *w, struct weir_flow *f, struct rte_mbuf *m, enum weir_dir a,
	       uint64_t now)
{
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
	const struct weir_policy_target *t = &w->policy->targets[f->class_id];
	const int d = a ^ 1;
	const uint32_t slot = weir_flow_slot(w->flows, f);
	struct rte_mbuf *out[2];
	unsigned int n_out = 0;
	uint32_t held;

	postack_handshake(w->pa, f, p, a, slot, now);
	/* The flow entry says whether ACKs may be held: the store is not
	 * touched for flows that never held any. */
	held = 0;
	if (f->shape & WEIR_FSH_HELD(d)) {
		held = weir_postack_len(w->pa, d, slot);
		if (held == 0)
			f->shape &= (uint8_t)~WEIR_FSH_HELD(d);
	}
	if ((p->tcp_flags & (WEIR_TCP_SYN | WEIR_TCP_FIN | WEIR_TCP_RST | WEIR_TCP_URG |
			     WEIR_TCP_ACK)) != WEIR_TCP_ACK || p->payload_len > 0) {
		if (held > 0)
			postack_flush(w, d, slot);
		if ((p->tcp_flags & (WEIR_TCP_FIN | WEIR_TCP_RST)) && (f->shape & WEIR_FSH_HELD(a)))
			postack_flush(w, a, slot);
		return false;
	}
	if (t->leaf[d] == WEIR_CBQ_NONE)
		return false;
	if (t->mode[d] == WEIR_MODE_TCR)
		return tcr_ack(w, f, m, p, a, slot, now, held);
	if (t->mode[d] != WEIR_MODE_POSTACK && t->mode[d] != WEIR_MODE_PACED)
		return false;
	if ((p->flags & WEIR_PF_TCP_SACK) && !dsack(m, p) && !own_drop(w->pa, d, slot, p->ack)) {
		/* SACK blocks: the receiver holds data past a hole (RFC 2018), a
		 * loss the sender has to hear of now. Held behind the flow's
		 * ACK queue, the news would wait as long as that queue takes to
		 * drain (seconds at a few KB/s) while the hole stalls delivery.
		 * What is held goes first (order), then this one, and so on for
		 * each ACK until the hole is filled; the sender's own loss
		 * response keeps the data it sends meanwhile in check. Not when
		 * the hole is one this gateway made (own_drop): the flow is over
		 * its share, and a burst of released ACKs would bring a burst
		 * of data into a full queue (32 flows: 10 % retransmitted). */
		if (held > 0)
			postack_flush(w, d, slot);
		postack_note_edge(w, f, p, a, slot);
		w->ctr.port[a].sack_passed++;
		return false;
	}
	if (t->mode[d] == WEIR_MODE_PACED)
		return paced_ack(w, f, m, p, a, slot, now, held, t->leaf[d]);
	if (data_qlen(w, a, slot) != 0 || (held == 0 && data_qlen(w, d, slot) == 0)) {
		/* Earlier frames of this direction still queued (keep order), or
		 * the flow is not over its share: it goes on; note its window. */
		postack_note_edge(w, f, p, a, slot);
		return false;
	}
	if (held > 0 && data_qlen(w, d, slot) == 0)
		n_out = weir_postack_release(w->pa, d, slot, out, 1, WEIR_PA_RULE);
	postack_clamp(w, f, m, p, a, d, slot);
	return hold_ack(w, f, d, slot, m, now, out, n_out);
}

/* ---- classification and admission (once per flow, not per packet) ---- */

/* TCR's fair share of leaf `leaf` on this worker, as bytes per TSC tick
 * (<< 32) and ticks per byte (<< 16): the divisions happen here, when a
 * flow joins or leaves or the worker's rate changes, not per ACK. */
static void
share_update(struct weir_worker *w, int d, uint16_t leaf)
{
	struct weir_class_counters *c = &w->cls_ctr[d][leaf];
	uint64_t share = weir_cbq_rate(w->shaper[d], leaf) / RTE_MAX(c->flows, 1u);

	if (share == 0)
		share = 1;
	c->share_bytes_per_tick = (uint64_t)(((unsigned __int128)share << 32) / (8 * w->tsc_hz));
	c->share_ticks_per_byte = (uint64_t)(((unsigned __int128)8 * w->tsc_hz << 16) / share);
}

/* Add delta to the flow counts of the flow's classes. */
static void
flow_count(struct weir_worker *w, const struct weir_flow *f, int32_t delta)
{
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		uint16_t leaf = flow_leaf(w, f, d);

		if (leaf != WEIR_CBQ_NONE) {
			w->cls_ctr[d][leaf].flows += (uint32_t)delta;
			share_update(w, d, leaf);
		}
	}
}

static inline void
flow_uncount(struct weir_worker *w, struct weir_flow *f)
{
	if (f->shape & WEIR_FSH_COUNTED) {
		if (f->class_gen == w->gen8)    /* else counted in counters since replaced */
			flow_count(w, f, -1);
		f->shape &= (uint8_t)~WEIR_FSH_COUNTED;
	}
}

/* May one more flow join `leaf` without pushing its per-flow share below
 * the class's flow_min? The class's rate here is this worker's share of it
 * (what its tree is set to), so (n + 1) x flow_min <= rate: no division. */
static inline bool
leaf_admits(const struct weir_worker *w, int d, uint16_t leaf)
{
	const struct weir_policy_class *k = &w->policy->tree[d].classes[leaf];

	return k->flow_min == 0 ||
	       (uint64_t)(w->cls_ctr[d][leaf].flows + 1) * k->flow_min <=
	       weir_cbq_rate(w->shaper[d], leaf);
}

/* Put flow f in target `target` (moving anything it has queued), or apply
 * the refusing class's admission action. Returns false when the flow is
 * refused: its packets are dropped until a later packet finds room. */
static bool
admit_flow(struct weir_worker *w, struct weir_flow *f, uint16_t target)
{
	const struct weir_policy *pol = w->policy;
	uint32_t slot = weir_flow_slot(w->flows, f);
	uint16_t old[WEIR_PORT__COUNT] = { flow_leaf(w, f, 0), flow_leaf(w, f, 1) };

	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		uint16_t leaf = pol->targets[target].leaf[d];
		const struct weir_policy_class *k;

		if (leaf == WEIR_CBQ_NONE || leaf_admits(w, d, leaf))
			continue;
		k = &pol->tree[d].classes[leaf];
		if (!(f->shape & WEIR_FSH_REFUSED))
			w->cls_ctr[d][leaf].refused++;  /* once per flow, not per retry */
		if (k->admit == WEIR_ADMIT_FALLBACK) {
			w->cls_ctr[d][leaf].diverted++;
			target = k->fallback_target;    /* not admission-checked: the way out */
			break;
		}
		f->class_id = target;
		f->class_gen = w->gen8;
		f->shape |= WEIR_FSH_REFUSED;
		return false;
	}
	f->class_id = target;
	f->class_gen = w->gen8;
	f->shape = (uint8_t)((f->shape & ~WEIR_FSH_REFUSED) | WEIR_FSH_COUNTED);
	flow_count(w, f, 1);
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		uint16_t leaf = flow_leaf(w, f, d);

		if (leaf == WEIR_CBQ_NONE)
			continue;
		w->cls_ctr[d][leaf].admitted++;
		/* Packets of it still waiting (a reused 4-tuple, a policy
		 * change) follow it, in order, ahead of this one; ACKs held
		 * against its old class go now. */
		if (old[d] != leaf && old[d] != WEIR_CBQ_NONE) {
			weir_cbq_move(w->shaper[d], slot, old[d], leaf);
			if (w->pa != NULL && weir_postack_len(w->pa, d, slot) > 0)
				postack_flush(w, d, slot);
		}
		weir_drr_set_weight(weir_cbq_qtab(w->shaper[d]), slot, pol->targets[target].weight);
	}
	return true;
}

/* ---- flow events for the policy hooks (once per flow, never per packet) ---- */

/* May one more event go now? A token bucket of one second's worth. */
static bool
event_budget(struct weir_worker *w, uint64_t now)
{
	const uint64_t cap = (uint64_t)w->conf.events_per_s << 20;

	if (w->conf.events_per_s == 0)
		return true;
	if (now - w->ev_tsc >= w->tsc_hz)
		w->ev_tokens = cap;
	else
		w->ev_tokens = RTE_MIN(cap, w->ev_tokens + (uint64_t)((unsigned __int128)(now - w->ev_tsc) *
								       cap / w->tsc_hz));
	w->ev_tsc = now;
	if (w->ev_tokens < (1u << 20))
		return false;
	w->ev_tokens -= 1u << 20;
	return true;
}

static void
event_post(struct weir_worker *w, const struct weir_flow_event *ev, uint64_t now)
{
	if (!event_budget(w, now) ||
	    rte_ring_sp_enqueue_elem(w->conf.events, (void *)(uintptr_t)ev, sizeof(*ev)) != 0) {
		w->events_dropped++;
		return;
	}
	w->events_sent++;
}

static inline void
put_be64(uint8_t *b, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		b[i] = (uint8_t)v;
}

/* A new flow, classified: tell the hooks, and remember which side of its
 * key is the LAN (for its end event). */
static void
event_new(struct weir_worker *w, struct weir_flow *f, const struct weir_cls_tuple *t,
	  const uint8_t *frame, const struct weir_pkt *p)
{
	struct weir_flow_event ev = {
		.type = WEIR_FEV_NEW, .init_dir = t->init_dir, .proto = t->proto,
		.family = t->family, .dscp = t->dscp, .vlan = t->vlan,
		.lan_port = t->port[0], .wan_port = t->port[1],
		.slot = weir_flow_slot(w->flows, f), .target = f->class_id,
		.epoch = w->policy->epoch, .first_tsc = f->first_tsc, .last_tsc = f->last_tsc,
	};
	struct weir_flow_key key;

	put_be64(ev.lan, t->addr[0][0]);
	put_be64(ev.lan + 8, t->addr[0][1]);
	put_be64(ev.wan, t->addr[1][0]);
	put_be64(ev.wan + 8, t->addr[1][1]);
	if (w->conf.end_flow_events && !(f->shape & WEIR_FSH_LAN_HI) &&
	    weir_flow_key_make(frame, p, &key) == 0 &&
	    memcmp(key.addr_hi, ev.lan, 16) == 0 && memcmp(key.addr_lo, ev.lan, 16) != 0)
		f->shape |= WEIR_FSH_LAN_HI;
	if (w->conf.new_flow_events)
		event_post(w, &ev, f->last_tsc);
}

/* A flow leaves the table: its totals for the hooks. */
static void
event_end(struct weir_worker *w, struct weir_flow *f, const struct weir_flow_key *key)
{
	const int hi = !!(f->shape & WEIR_FSH_LAN_HI);
	struct weir_flow_event ev = {
		.type = WEIR_FEV_END, .init_dir = (f->shape & WEIR_FSH_INIT_IN) ? WEIR_DIR_IN : WEIR_DIR_OUT,
		.proto = key->proto, .family = key->family, .vlan = key->vlan,
		.lan_port = hi ? key->port_hi : key->port_lo, .wan_port = hi ? key->port_lo : key->port_hi,
		.slot = weir_flow_slot(w->flows, f), .target = f->class_id,
		.epoch = f->class_gen == w->gen8 ? w->policy->epoch : 0,
		.first_tsc = f->first_tsc, .last_tsc = f->last_tsc,
		.bytes = { f->bytes[0], f->bytes[1] }, .pkts = { f->pkts[0], f->pkts[1] },
	};

	memcpy(ev.lan, hi ? key->addr_hi : key->addr_lo, 16);
	memcpy(ev.wan, hi ? key->addr_lo : key->addr_hi, 16);
	event_post(w, &ev, rte_rdtsc());
}

/* Classify a new flow (or one whose policy changed) by this packet. */
static bool
classify_flow(struct weir_worker *w, struct weir_flow *f, const uint8_t *frame,
	      const struct weir_pkt *p, enum weir_dir dir)
{
	struct weir_cls_tuple t;

	weir_classify_tuple_make(frame, p, dir, &t);
	if (f->policy_epoch == 0) {
		if (w->pa != NULL) {
			weir_postack_reset(w->pa, weir_flow_slot(w->flows, f));
			weir_tcr_reset(w->tcr, weir_flow_slot(w->flows, f));
		}
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

	flow_uncount(w, f);
	f->shape &= (uint8_t)~(WEIR_FSH_REFUSED | (first ? WEIR_FSH_LAN_HI | WEIR_FSH_HOOKED : 0));
	f->policy_epoch = w->epoch16;
	ok = admit_flow(w, f, weir_classify_tuple(w->policy->classifier, &t));
	/* The hooks hear of every new flow, and again of a flow they moved
	 * when a new policy re-classified it by its rules (their decision
	 * was for the old one). */
	if (w->conf.events != NULL && (first || (f->shape & WEIR_FSH_HOOKED)))
		event_new(w, f, &t, frame, p);
	return ok;
}

/* Shaping state of a managed packet's flow after tracking it: classify
 * when new, retry admission when refused, release the flow's admission
 * slot when the connection has ended. Returns false to drop the packet. */
static inline bool
shape_flow(struct weir_worker *w, struct weir_flow *f, struct rte_mbuf *m, enum weir_dir dir)
{
	bool ok = true;

	if (unlikely(f->policy_epoch != w->epoch16))
		ok = classify_flow(w, f, rte_pktmbuf_mtod(m, const uint8_t *),
				   &weir_mbuf_meta(m)->pkt, dir);
	else if (unlikely(f->shape & WEIR_FSH_REFUSED))
		ok = admit_flow(w, f, f->class_id);
	if (unlikely(f->state == WEIR_FS_CLOSED))
		flow_uncount(w, f);     /* RST or both FINs acked: room for a new flow */
	return ok;
}

/* The queue a frame of flow f (NULL: without a flow) waits in, in target
 * t's leaf of direction d: its flow's, the shared one of frames without a
 * flow, or a fifo leaf's one queue (past the flow slots). */
static inline uint32_t
shaped_qid(const struct weir_worker *w, const struct weir_policy_target *t, int d,
	   const struct weir_flow *f)
{
	if (unlikely(t->mode[d] == WEIR_MODE_FIFO))
		return w->unmanaged_qid + 1 + t->leaf[d];
	return f != NULL ? weir_flow_slot(w->flows, f) : w->unmanaged_qid;
}

/* The gateway dropped a data segment of f travelling d: remember its seq,
 * so a SACK reporting that hole is known to be this gateway's (own_drop). */
static inline void
note_drop(struct weir_worker *w, const struct weir_flow *f, int d, const struct weir_pkt *p)
{
	struct weir_postack_q *q;

	if (p->l4proto != IPPROTO_TCP || p->payload_len == 0)
		return;
	q = &w->pa->q[d][weir_flow_slot(w->flows, f)];
	if (!(q->flags & WEIR_PAQ_DROP_VALID) || seq_lt(q->drop_seq, p->seq)) {
		q->drop_seq = p->seq;
		q->flags |= WEIR_PAQ_DROP_VALID;
	}
}

/* What sending frame m of queue qid in leaf `leaf` of direction dir sets off,
 * qlen of its flow's frames still queued: PostACK's release rule (Fig. 14:
 * with at most one more of its data packets queued, the flow gets one held
 * ACK back) and TCR's round-trip sample. Released ACKs go to acks[];
 * returns how many. */
static inline uint16_t
on_sent(struct weir_worker *w, enum weir_port_role dir, struct rte_mbuf *m, uint16_t leaf,
	uint32_t qid, uint32_t qlen, struct rte_mbuf **acks, uint64_t now)
{
	uint8_t mode;

	if (w->pa == NULL || qid >= w->unmanaged_qid)
		return 0;
	mode = w->policy->tree[dir].classes[leaf].mode;
	if (mode == WEIR_MODE_POSTACK && qlen <= 1 && weir_postack_len(w->pa, dir, qid) > 0)
		return (uint16_t)weir_postack_release(w->pa, dir, qid, acks, 1, WEIR_PA_RULE);
	if (mode == WEIR_MODE_TCR) {
		const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;

		if (p->l4proto == IPPROTO_TCP && p->payload_len > 0)
			weir_tcr_on_data(w->tcr, dir, qid, p->seq + p->payload_len, now);
	}
	return 0;
}

/* Queue a burst in its direction's class tree: each frame in its flow's
 * queue in its flow's leaf (frames without a flow share one queue in the
 * default class). A full queue drops the arriving frame of that flow only,
 * counted as dropped; frames already dealt with (refused, held) are
 * skipped. Nothing leaves here but, with cut_through, the frames an empty
 * tree lets go at once: returned compacted in order, to send now. */
static uint16_t
enqueue_shaped(struct weir_worker *w, enum weir_port_role from, struct rte_mbuf **pkts,
	       struct weir_flow *const *pkt_flow, uint64_t taken, uint16_t n, uint64_t now)
{
	struct weir_cbq *sh = w->shaper[from];
	struct weir_port_counters *pc = &w->ctr.port[from];
	struct rte_mbuf *acks[WEIR_BURST_MAX];
	uint16_t sent = 0, n_acks = 0;
	bool queued = false;

	for (uint16_t i = 0; i < n; i++) {
		const struct weir_flow *f = pkt_flow[i];
		const struct weir_policy_target *t = &w->policy->targets[f ? f->class_id : 0];
		uint32_t qid = shaped_qid(w, t, from, f);
		uint16_t leaf = t->leaf[from];  /* targets[0]: the default class */

		if (unlikely(taken & (1ull << i)))
			continue;
		/* Once one frame is queued the tree is not empty, so every later
		 * frame of the burst queues behind it: no flow is reordered. */
		if (w->conf.cut_through && t->mode[from] != WEIR_MODE_PACED &&
		    weir_cbq_cut_through(sh, leaf, rte_pktmbuf_pkt_len(pkts[i]), now)) {
			n_acks += on_sent(w, from, pkts[i], leaf, qid, 0, acks + n_acks, now);
			pkts[sent++] = pkts[i];
			continue;
		}
		queued = true;
		if (unlikely(weir_cbq_enqueue(sh, leaf, qid, pkts[i], now) != 0)) {
			if (w->pa != NULL && f != NULL)
				note_drop(w, f, from, &weir_mbuf_meta(pkts[i])->pkt);
			rte_pktmbuf_free(pkts[i]);
			pc->dropped++;
		} else if (unlikely(t->mode[from] == WEIR_MODE_PACED) && f != NULL &&
			   w->tcr != NULL && weir_mbuf_meta(pkts[i])->pkt.l4proto == IPPROTO_TCP &&
			   weir_mbuf_meta(pkts[i])->pkt.payload_len > 0) {
			w->tcr->f[from][qid].out++;     /* Fig. 4 line 13 */
		}
	}
	if (queued)
		w->next_tsc[from] = 0;  /* new backlog: ask the tree on the next turn */
	pc->forwarded += sent;
	emit(w, from, acks, n_acks);    /* they travel the other way: out of port from */
	return sent;
}

/* Unshaped direction: leave out the frames already dealt with (refused,
 * held), keep the rest in order. */
static uint16_t
compact_taken(struct rte_mbuf **pkts, uint64_t taken, uint16_t n)
{
	uint16_t k = 0;

	for (uint16_t i = 0; i < n; i++)
		if (!(taken & (1ull << i)))
			pkts[k++] = pkts[i];
	return k;
}

/* With a large table the ACK store's entry and the data queue's length
 * are cache misses for every pure ACK; ask for them for the whole burst
 * before the first is needed. */
static inline void
prefetch_ack_state(const struct weir_worker *w, struct rte_mbuf **pkts, const uint16_t *idx,
		   struct weir_flow *const *flows, uint16_t n, enum weir_port_role from)
{
	const int d = from ^ 1;
	const struct weir_drr_qtab *qt = w->shaper[d] != NULL ? weir_cbq_qtab(w->shaper[d]) : NULL;

	for (uint16_t k = 0; k < n; k++) {
		const struct weir_pkt *p = &weir_mbuf_meta(pkts[idx[k]])->pkt;
		uint32_t slot;

		if (flows[k] == NULL || p->l4proto != IPPROTO_TCP || p->payload_len != 0)
			continue;
		slot = weir_flow_slot(w->flows, flows[k]);
		rte_prefetch0(&w->pa->q[d][slot]);
		if (qt != NULL)
			rte_prefetch0(&qt->q[slot]);
	}
}

uint16_t
weir_worker_process(struct weir_worker *w, struct rte_mbuf **pkts, uint16_t n,
		    enum weir_port_role from, uint64_t now)
{
	struct weir_port_counters *pc = &w->ctr.port[from];
	struct weir_flow_key keys[WEIR_BURST_MAX];
	struct weir_flow *flows[WEIR_BURST_MAX];
	struct weir_flow *pkt_flow[WEIR_BURST_MAX];     /* per packet, NULL if none */
	uint16_t managed_idx[WEIR_BURST_MAX];
	uint16_t n_managed = 0;
	uint64_t bytes = 0;
	uint64_t taken = 0;     /* bit i: pkts[i] is dealt with (refused and freed, or held) */

	for (uint16_t i = 0; i < n && i < 4; i++)
		rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void *));

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
		const uint8_t *frame = rte_pktmbuf_mtod(m, const uint8_t *);

		if (i + 4 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 4], void *));
		bytes += m->pkt_len;
		pkt_flow[i] = NULL;
		/* Headers are parsed in the first segment only: a frame whose
		 * headers straddle segments reads as truncated (unmanaged). */
		weir_parse(frame, m->data_len, p);
		if (classify_unmanaged(pc, p) && w->flows != NULL) {
			weir_flow_key_make(frame, p, &keys[n_managed]);
			managed_idx[n_managed++] = i;
		}
	}
	pc->rx_pkts += n;
	pc->rx_bytes += bytes;

	if (n_managed > 0) {
		weir_flow_lookup_bulk(w->flows, keys, n_managed, now, flows);
		if (w->pa != NULL)
			prefetch_ack_state(w, pkts, managed_idx, flows, n_managed, from);
		for (uint16_t k = 0; k < n_managed; k++) {
			struct rte_mbuf *m = pkts[managed_idx[k]];
			struct weir_flow *f = flows[k];

			if (unlikely(f == NULL)) {
				pc->flow_full++;
				continue;
			}
			weir_flow_track(f, &weir_mbuf_meta(m)->pkt, (enum weir_dir)from, m->pkt_len, now);
			pc->managed++;
			if (w->policy != NULL && !shape_flow(w, f, m, (enum weir_dir)from)) {
				taken |= 1ull << managed_idx[k];
				rte_pktmbuf_free(m);
				pc->refused++;
				continue;
			}
			if (w->pa != NULL && weir_mbuf_meta(m)->pkt.l4proto == IPPROTO_TCP &&
			    postack_packet(w, f, m, (enum weir_dir)from, now)) {
				taken |= 1ull << managed_idx[k];
				continue;
			}
			pkt_flow[managed_idx[k]] = f;
		}
	}
	if (w->shaper[from] != NULL)
		return enqueue_shaped(w, from, pkts, pkt_flow, taken, n, now);
	if (unlikely(taken != 0))
		n = compact_taken(pkts, taken, n);
	pc->forwarded += n;
	return n;
}

uint16_t
weir_worker_dequeue(struct weir_worker *w, enum weir_port_role dir, uint64_t now,
		    struct rte_mbuf **pkts, uint16_t max)
{
	struct weir_cbq *sh = w->shaper[dir];
	struct rte_mbuf *acks[WEIR_BURST_MAX];
	struct weir_cbq_deq d;
	uint16_t n = 0, n_acks = 0;

	/* Clocked by dequeue: nothing is asked of the tree before the time it
	 * said something could go, or after it said it is empty. */
	if (sh == NULL || now < w->next_tsc[dir])
		return 0;
	while (n < max) {
		struct rte_mbuf *m = weir_cbq_dequeue(sh, now, &d);

		if (m == NULL) {
			w->next_tsc[dir] = d.next_tsc;
			break;
		}
		pkts[n++] = m;
		n_acks += on_sent(w, dir, m, d.leaf, d.queue_id, d.qlen, acks + n_acks, now);
	}
	w->ctr.port[dir].forwarded += n;
	emit(w, dir, acks, n_acks);     /* they travel the other way: out of port dir */
	return n;
}

/* Send n frames out of port role `to`; what the ring will not take after a
 * few retries is freed and counted against the receiving port's tx_full. */
static inline void
send_burst(struct weir_worker *w, enum weir_port_role to, struct rte_mbuf **pkts, uint16_t n)
{
	struct weir_port_counters *out = &w->ctr.port[to];
	uint16_t sent = 0;
	uint64_t bytes = 0;

	for (unsigned int tries = 0; sent < n && tries <= TX_RETRIES; tries++)
		sent += rte_eth_tx_burst(w->conf.port_id[to], w->conf.queue, pkts + sent, n - sent);
	for (uint16_t i = 0; i < sent; i++)
		bytes += pkts[i]->pkt_len;
	out->tx_pkts += sent;
	out->tx_bytes += bytes;
	if (unlikely(sent < n)) {
		struct weir_port_counters *in = &w->ctr.port[to ^ 1];

		in->tx_full += n - sent;
		in->forwarded -= n - sent;
		rte_pktmbuf_free_bulk(pkts + sent, n - sent);
	}
}

static inline uint16_t
poll_port(struct weir_worker *w, enum weir_port_role from, uint64_t now)
{
	struct rte_mbuf *pkts[WEIR_BURST_MAX];
	uint16_t n, fwd;

	n = rte_eth_rx_burst(w->conf.port_id[from], w->conf.queue, pkts, w->conf.burst);
	if (n == 0)
		return 0;
	fwd = weir_worker_process(w, pkts, n, from, now);
	if (fwd > 0)
		send_burst(w, (enum weir_port_role)(from ^ 1), pkts, fwd);
	return n;
}

/* Send what the shaper of direction `dir` lets go now. */
static inline uint16_t
pull_shaped(struct weir_worker *w, enum weir_port_role dir, uint64_t now)
{
	struct rte_mbuf *pkts[WEIR_BURST_MAX];
	uint16_t n = weir_worker_dequeue(w, dir, now, pkts, w->conf.burst);

	if (n > 0)
		send_burst(w, (enum weir_port_role)(dir ^ 1), pkts, n);
	return n;
}

/* Empty flow f's queue (f NULL: the queue of frames without a flow) in both
 * directions' shapers, in order: the frames are sent on (forward) or freed
 * and counted as dropped. Returns how many. */
static unsigned int
drain_queue(struct weir_worker *w, const struct weir_flow *f, bool forward)
{
	struct rte_mbuf *pkts[WEIR_BURST_MAX];
	unsigned int n, total = 0;
	uint32_t qid = f != NULL ? weir_flow_slot(w->flows, f) : w->unmanaged_qid;

	for (int dir = 0; dir < WEIR_PORT__COUNT; dir++) {
		uint16_t leaf;

		if (w->shaper[dir] == NULL)
			continue;
		leaf = f != NULL ? flow_leaf(w, f, dir) : w->policy->tree[dir].default_leaf;
		if (leaf == WEIR_CBQ_NONE)
			continue;       /* classified under an earlier policy: nothing queued */
		while ((n = weir_cbq_drain(w->shaper[dir], leaf, qid, pkts, WEIR_BURST_MAX)) > 0) {
			total += n;
			if (forward) {
				w->ctr.port[dir].forwarded += n;
				send_burst(w, (enum weir_port_role)(dir ^ 1), pkts, (uint16_t)n);
			} else {
				w->ctr.port[dir].dropped += n;
				rte_pktmbuf_free_bulk(pkts, n);
			}
		}
	}
	return total;
}

/* Expiry hands over a flow before its slot is reused: whatever it still has
 * queued leaves now (a queue never outlives its flow, and nothing is held
 * forever), ahead of the shaper, in order. */
static void
evict_flow(struct weir_flow *f, const struct weir_flow_key *key, void *arg)
{
	struct weir_worker *w = arg;

	if (w->policy == NULL)
		return;
	if (w->pa != NULL)
		postack_flush_flow(w, weir_flow_slot(w->flows, f));
	drain_queue(w, f, true);
	flow_uncount(w, f);
	if (w->conf.end_flow_events && f->policy_epoch != 0)
		event_end(w, f, key);
	f->first_tsc = 0;       /* a late hook command for this slot must not match */
}

unsigned int
weir_worker_expire(struct weir_worker *w, uint64_t now, unsigned int budget)
{
	return weir_flow_expire(w->flows, now, budget, evict_flow, w);
}

static int
free_flow_queue(const struct weir_flow *f, const struct weir_flow_key *key, void *arg)
{
	struct weir_worker *w = arg;

	RTE_SET_USED(key);
	drain_queue(w, f, false);
	return 0;
}

unsigned int
weir_worker_flush_queues(struct weir_worker *w)
{
	uint64_t before = w->ctr.port[0].dropped + w->ctr.port[1].dropped;

	if (w->shaper[0] == NULL && w->shaper[1] == NULL)
		return 0;
	weir_flow_walk(w->flows, free_flow_queue, w);
	drain_queue(w, NULL, false);
	/* The shared queues of fifo leaves. */
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		struct rte_mbuf *pkts[WEIR_BURST_MAX];
		unsigned int n;

		for (uint16_t c = 1; w->shaper[d] != NULL && c < w->policy->tree[d].n_classes; c++)
			while ((n = weir_cbq_drain(w->shaper[d], c, w->unmanaged_qid + 1 + c, pkts,
						   WEIR_BURST_MAX)) > 0) {
				w->ctr.port[d].dropped += n;
				rte_pktmbuf_free_bulk(pkts, n);
			}
	}
	return (unsigned int)(w->ctr.port[0].dropped + w->ctr.port[1].dropped - before);
}

unsigned int
weir_worker_postack_idle(struct weir_worker *w, uint64_t now)
{
	struct rte_mbuf *out[WEIR_BURST_MAX], *by_dir[WEIR_PORT__COUNT][WEIR_BURST_MAX];
	uint8_t dir_of[WEIR_BURST_MAX];
	unsigned int n, k[WEIR_PORT__COUNT] = { 0, 0 };

	if (w->pa == NULL || w->pa->ring_n == 0)
		return 0;
	n = weir_postack_watchdog(w->pa, now, 8, ring_decide, w, out, dir_of, WEIR_BURST_MAX);
	for (unsigned int i = 0; i < n; i++)
		by_dir[dir_of[i]][k[dir_of[i]]++] = out[i];
	for (int d = 0; d < WEIR_PORT__COUNT; d++)
		emit(w, (enum weir_port_role)d, by_dir[d], k[d]);
	return n;
}

/* Longest sleep allowed now: the back-off cap, cut short when a shaper has
 * frames that become sendable sooner. */
static inline uint32_t
sleep_cap_us(const struct weir_worker *w, uint64_t now)
{
	uint64_t wake = RTE_MIN(w->shaper[0] ? w->next_tsc[0] : UINT64_MAX,
				w->shaper[1] ? w->next_tsc[1] : UINT64_MAX);

	/* Held ACKs need the watchdog to look now and then. */
	if (w->pa != NULL && w->pa->ring_n > 0)
		wake = RTE_MIN(wake, now + 1000 * w->tsc_per_us);
	if (wake == UINT64_MAX)
		return w->conf.idle_sleep_us;
	if (wake <= now)
		return 0;
	/* Idle path only: a division here costs nothing that matters. */
	return (uint32_t)RTE_MIN((wake - now) / w->tsc_per_us, (uint64_t)w->conf.idle_sleep_us);
}

/* Grow the idle sleep 1, 2, 4 ... up to `cap` microseconds: the first packet
 * after a pause waits at most one sleep, and a long-idle worker wakes only a
 * few thousand times a second. */
static inline void
idle_backoff(struct weir_worker *w, uint32_t cap, uint32_t *idle, uint32_t *sleep_us)
{
	if (cap == 0 || ++*idle < IDLE_SPINS) {
		rte_pause();
		return;
	}
	rte_delay_us_sleep(RTE_MIN(*sleep_us, cap));
	w->ctr.sleeps++;
	if (*sleep_us < w->conf.idle_sleep_us)
		*sleep_us = RTE_MIN(*sleep_us * 2, w->conf.idle_sleep_us);
}

/* ---- policy switches (rare: between bursts, not per packet) ---- */

int
weir_worker_policy_post(struct weir_worker *w, struct weir_policy_switch *sw)
{
	struct weir_policy_switch *none = NULL;

	if (w->policy == NULL || sw == NULL || sw->policy == NULL)
		return -EINVAL;
	for (int d = 0; d < WEIR_PORT__COUNT; d++)
		if ((sw->shaper[d] != NULL) != (w->shaper[d] != NULL) ||
		    (sw->shaper[d] != NULL) != (sw->policy->tree[d].n_classes != 0) ||
		    (sw->shaper[d] != NULL && sw->cls_ctr[d] == NULL))
			return -EINVAL;
	if (!__atomic_compare_exchange_n(&w->pending, &none, sw, false, __ATOMIC_RELEASE,
					 __ATOMIC_RELAXED))
		return -EBUSY;
	return 0;
}

static void
flush_holder(void *arg, int d, uint32_t slot)
{
	postack_flush(arg, d, slot);
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
	weir_flow_lookup_bulk(w->flows, &key, 1, rte_rdtsc(), &f);
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
		classify_flow(w, f, rte_pktmbuf_mtod(m, const uint8_t *), &weir_mbuf_meta(m)->pkt,
			      (enum weir_dir)d);
	t = &w->policy->targets[f != NULL ? f->class_id : WEIR_TARGET_DEFAULT];
	if (t->leaf[d] == WEIR_CBQ_NONE ||
	    weir_cbq_requeue(w->shaper[d], t->leaf[d], shaped_qid(w, t, d, f), m) != 0) {
		w->ctr.port[d].forwarded++;     /* no class for it: it goes on unshaped */
		send_burst(w, (enum weir_port_role)(d ^ 1), &m, 1);
		return;
	}
	w->requeued++;
}

static void
requeue_tree(struct weir_worker *w, int d, struct weir_cbq *old)
{
	struct rte_mbuf *pkts[WEIR_BURST_MAX];
	uint16_t leaf = 0;
	uint32_t qid;
	unsigned int n;

	while ((n = weir_cbq_drain_next(old, &leaf, &qid, pkts, WEIR_BURST_MAX)) > 0) {
		struct weir_flow *f = qid < w->unmanaged_qid ? weir_flow_by_slot(w->flows, qid) : NULL;

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
	if (w->pa != NULL)
		weir_postack_for_each_holder(w->pa, flush_holder, w);
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		old[d] = w->shaper[d];
		old_ctr[d] = w->cls_ctr[d];
		w->shaper[d] = sw->shaper[d];
		w->cls_ctr[d] = sw->cls_ctr[d];
		w->next_tsc[d] = 0;
	}
	w->policy = sw->policy;
	w->epoch16 = epoch16(sw->policy->epoch);
	/* Every flow's class_id is now of an older generation: re-classified
	 * (and counted again) on its next packet, or right below if it has
	 * packets waiting. */
	w->gen8 = (uint8_t)(w->gen8 == UINT8_MAX ? 1 : w->gen8 + 1);
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		if (old[d] != NULL) {
			requeue_tree(w, d, old[d]);
			weir_cbq_free(old[d]);
		}
		rte_free(old_ctr[d]);
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

		if (c[i].slot >= w->unmanaged_qid || c[i].epoch != w->policy->epoch ||
		    c[i].target >= w->policy->n_targets ||
		    (f = weir_flow_by_slot(w->flows, c[i].slot))->first_tsc != c[i].first_tsc ||
		    f->first_tsc == 0) {
			w->cmds_stale++;
			continue;
		}
		if (f->class_id != c[i].target || f->class_gen != w->gen8) {
			flow_uncount(w, f);
			f->shape &= (uint8_t)~WEIR_FSH_REFUSED;
			admit_flow(w, f, c[i].target);  /* moves what it has queued, in order */
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
	if (b->epoch != w->policy->epoch) {
		w->share_seq = seq;     /* for another policy: not ours to apply */
		return 0;
	}
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		struct weir_cbq *sh = w->shaper[d];
		uint16_t n = b->n_classes[d];
		struct weir_cbq_stats st;

		if (sh == NULL || n != w->policy->tree[d].n_classes)
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
				changed++;
				if (w->policy->tree[d].classes[c].is_leaf)
					share_update(w, d, c);
			}
		}
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&b->seq, __ATOMIC_RELAXED) == seq)
		w->share_seq = seq;
	return changed;
}

int
weir_worker_main(void *arg)
{
	struct weir_worker *w = arg;
	uint32_t idle = 0, sleep_us = 1;

	w->lcore_id = rte_lcore_id();
	/* Linux's default 50 us timer slack would make every short back-off
	 * sleep 50 us longer than asked; ask for precise wake-ups instead. */
	prctl(PR_SET_TIMERSLACK, 1UL);

	while (!w->stop) {
		uint64_t now = rte_rdtsc();
		uint16_t got;

		got = poll_port(w, WEIR_PORT_LAN, now);
		got += poll_port(w, WEIR_PORT_WAN, now);
		got += pull_shaped(w, WEIR_PORT_LAN, now);
		got += pull_shaped(w, WEIR_PORT_WAN, now);
		got += weir_worker_postack_idle(w, now);
		if (unlikely(__atomic_load_n(&w->pending, __ATOMIC_ACQUIRE) != NULL))
			weir_worker_policy_take(w);
		if (w->conf.cmds != NULL && !rte_ring_empty(w->conf.cmds))
			got += weir_worker_cmds(w);
		if (w->conf.share_box != NULL &&
		    __atomic_load_n(&w->conf.share_box->seq, __ATOMIC_ACQUIRE) != w->share_seq)
			weir_worker_share_apply(w);
		w->ctr.loops++;
		if (got > 0) {
			idle = 0;
			sleep_us = 1;
			w->ctr.busy_tsc += rte_rdtsc() - now;
			/* Bounded expiry work rides along with traffic, so a
			 * busy worker still reclaims idle flows. */
			if (w->flows != NULL && (w->ctr.loops & 63) == 0)
				weir_worker_expire(w, now, w->conf.expire_budget);
			continue;
		}
		w->ctr.idle_loops++;
		if (w->flows != NULL)
			weir_worker_expire(w, now, w->conf.expire_budget);
		idle_backoff(w, sleep_cap_us(w, now), &idle, &sleep_us);
	}
	return 0;
}
