/* SPDX-License-Identifier: BSD-3-Clause
 * weir: ACK queues for PostACK. See postack.h for the model.
 */
#include <string.h>

#include <rte_malloc.h>

#include "mbuf_meta.h"
#include "postack_store.h"
#include "tcr_state.h"

/* One held ACK: 128 bytes, two to a cache line pair. `len` 0 marks an
 * ACK kept as an mbuf (it did not fit, or is chained). */
struct weir_postack_rec {
	uint32_t next;
	uint16_t len;
	uint16_t adv;           /* how far the ACK moved the cumulative ACK (bytes, saturated) */
	union {
		uint8_t bytes[WEIR_POSTACK_REC_BYTES];
		struct rte_mbuf *m;
	};
};

static_assert(sizeof(struct weir_postack_rec) == 128, "a record is two half lines");

#define RING_DIR_BIT 31u

struct weir_postack *
weir_postack_create(const struct weir_postack_conf *c)
{
	struct weir_postack *pa;

	if (c->n_flows == 0 || c->n_flows >= (1u << RING_DIR_BIT) || c->n_acks == 0 ||
	    c->n_acks >= WEIR_POSTACK_NONE || c->ack_limit == 0 || c->mp == NULL || c->tsc_hz == 0)
		return NULL;
	pa = rte_zmalloc_socket("weir_postack", sizeof(*pa), RTE_CACHE_LINE_SIZE, c->socket_id);
	if (pa == NULL)
		return NULL;
	pa->n_flows = c->n_flows;
	pa->n_acks = c->n_acks;
	pa->ack_limit = c->ack_limit;
	pa->mbuf_cap = c->mbuf_cap;
	pa->idle_tsc = c->tsc_hz / 1000000 * c->idle_us;
	pa->rtt_unknown = c->tsc_hz / 1000000 * (c->rtt_unknown_us ? c->rtt_unknown_us : 200000);
	pa->share_clamp = c->share_clamp;
	pa->clamp_target = c->tsc_hz / 1000000 * c->clamp_target_us;
	pa->clamp_margin16 = c->clamp_margin16;
	pa->mp = c->mp;
	pa->ring_size = 2 * c->n_flows;
	/* Each queue array is made empty as soon as it exists: the free
	 * routine walks them, whichever allocation below fails. */
	for (int d = 0; d < 2; d++) {
		pa->q[d] = rte_malloc_socket("weir_postack_q", (size_t)c->n_flows * sizeof(*pa->q[d]),
					     RTE_CACHE_LINE_SIZE, c->socket_id);
		for (uint32_t i = 0; pa->q[d] != NULL && i < c->n_flows; i++)
			pa->q[d][i] = (struct weir_postack_q){ .head = WEIR_POSTACK_NONE,
							       .tail = WEIR_POSTACK_NONE };
	}
	pa->rec = rte_malloc_socket("weir_postack_rec", (size_t)c->n_acks * sizeof(*pa->rec),
				    RTE_CACHE_LINE_SIZE, c->socket_id);
	pa->ring = rte_malloc_socket("weir_postack_ring", (size_t)pa->ring_size * sizeof(*pa->ring),
				     RTE_CACHE_LINE_SIZE, c->socket_id);
	if (pa->q[0] == NULL || pa->q[1] == NULL || pa->rec == NULL || pa->ring == NULL) {
		weir_postack_free(pa);
		return NULL;
	}
	for (uint32_t i = 0; i < c->n_acks; i++)
		pa->rec[i].next = i + 1 < c->n_acks ? i + 1 : WEIR_POSTACK_NONE;
	pa->free_head = 0;
	return pa;
}

void
weir_postack_free(struct weir_postack *pa)
{
	if (pa == NULL)
		return;
	/* Records holding mbufs give them back. */
	for (int d = 0; d < 2 && pa->q[d] != NULL && pa->rec != NULL; d++)
		for (uint32_t s = 0; s < pa->n_flows; s++)
			for (uint32_t r = pa->q[d][s].head; r != WEIR_POSTACK_NONE; r = pa->rec[r].next)
				if (pa->rec[r].len == 0)
					rte_pktmbuf_free(pa->rec[r].m);
	rte_free(pa->q[0]);
	rte_free(pa->q[1]);
	rte_free(pa->rec);
	rte_free(pa->ring);
	rte_free(pa);
}

static inline void
ring_add(struct weir_postack *pa, int d, uint32_t slot)
{
	struct weir_postack_q *q = &pa->q[d][slot];

	if (q->listed)
		return;
	q->listed = 1;
	/* Cannot overflow: each (d, slot) is listed at most once. */
	pa->ring[(pa->ring_head + pa->ring_n++) % pa->ring_size] = (uint32_t)d << RING_DIR_BIT | slot;
}

/* Put a ring entry taken off the ring back at its tail. */
static inline void
ring_add_entry(struct weir_postack *pa, uint32_t e)
{
	ring_add(pa, (int)(e >> RING_DIR_BIT), e & ~(1u << RING_DIR_BIT));
}

/* Take the oldest record of q out of the queue; returns its index. */
static inline uint32_t
pop_rec(struct weir_postack *pa, struct weir_postack_q *q)
{
	uint32_t r = q->head;

	q->head = pa->rec[r].next;
	if (q->head == WEIR_POSTACK_NONE)
		q->tail = WEIR_POSTACK_NONE;
	q->n--;
	return r;
}

static inline void
free_rec(struct weir_postack *pa, uint32_t r)
{
	pa->rec[r].next = pa->free_head;
	pa->free_head = r;
	pa->st.in_use--;
}

/* The mbuf for the ACK in record r (rebuilt from its bytes), or NULL when
 * the pool has none (the record is left as it was). */
static inline struct rte_mbuf *
rec_mbuf(struct weir_postack *pa, uint32_t r)
{
	struct weir_postack_rec *rec = &pa->rec[r];
	struct rte_mbuf *m;
	char *p;

	if (rec->len == 0)
		return rec->m;
	m = rte_pktmbuf_alloc(pa->mp);
	if (unlikely(m == NULL))
		return NULL;
	p = rte_pktmbuf_append(m, rec->len);
	memcpy(p, rec->bytes, rec->len);
	return m;
}

int
weir_postack_hold(struct weir_postack *pa, int d, uint32_t slot, struct rte_mbuf *m,
		  uint64_t now, struct rte_mbuf **out, unsigned int *n_out)
{
	struct weir_postack_q *q = &pa->q[d][slot];
	struct weir_postack_rec *rec;
	uint32_t r;

	RTE_SET_USED(now);
	*n_out = 0;
	if (unlikely(q->n >= pa->ack_limit)) {
		/* Bounded per flow: the oldest goes, in order, before the newest
		 * is added. If no mbuf is free it stays and the new one is not
		 * held (the caller forwards it, after the queue: see worker.c). */
		if (weir_postack_release(pa, d, slot, out, 1, WEIR_PA_RULE) == 0)
			return 0;
		*n_out = 1;
		pa->st.released--;
		pa->st.evicted++;
	}
	if (unlikely(pa->free_head == WEIR_POSTACK_NONE)) {
		pa->st.pool_full++;
		return 0;
	}
	r = pa->free_head;
	rec = &pa->rec[r];
	pa->free_head = rec->next;
	rec->next = WEIR_POSTACK_NONE;
	/* What it asks the sender for, counted when it goes (release). */
	rec->adv = (uint16_t)weir_postack_ack_adv(pa, d, slot, weir_mbuf_meta(m)->pkt.ack);
	if (pa->st.mbufs < pa->mbuf_cap) {
		rec->len = 0;
		rec->m = m;
		pa->st.kept_mbuf++;
		pa->st.mbufs++;
	} else if (likely(m->nb_segs == 1 && m->data_len <= WEIR_POSTACK_REC_BYTES)) {
		rec->len = m->data_len;
		memcpy(rec->bytes, rte_pktmbuf_mtod(m, const void *), m->data_len);
		rte_pktmbuf_free(m);
	} else {
		rec->len = 0;
		rec->m = m;
		pa->st.as_mbuf++;
		pa->st.mbufs++;
	}
	if (q->tail == WEIR_POSTACK_NONE)
		q->head = r;
	else
		pa->rec[q->tail].next = r;
	q->tail = r;
	q->n++;
	pa->st.held++;
	if (++pa->st.in_use > pa->st.peak)
		pa->st.peak = pa->st.in_use;
	ring_add(pa, d, slot);
	return 1;
}

unsigned int
weir_postack_release(struct weir_postack *pa, int d, uint32_t slot, struct rte_mbuf **out,
		     unsigned int max, enum weir_postack_why why)
{
	struct weir_postack_q *q = &pa->q[d][slot];
	unsigned int n = 0;

	while (n < max && q->n > 0) {
		struct rte_mbuf *m = rec_mbuf(pa, q->head);

		if (unlikely(m == NULL)) {
			pa->st.nombuf++;
			break;
		}
		if (pa->rec[q->head].len == 0)
			pa->st.mbufs--;
		weir_postack_asked(pa, d, slot, pa->rec[q->head].adv);
		free_rec(pa, pop_rec(pa, q));
		out[n++] = m;
	}
	if (why == WEIR_PA_RULE)
		pa->st.released += n;
	else if (why == WEIR_PA_FLUSH)
		pa->st.flushed += n;
	else if (why == WEIR_PA_IDLE)
		pa->st.idle_released += n;
	else
		pa->st.paced += n;
	return n;
}

unsigned int
weir_postack_due(const struct weir_postack *pa, int d, uint32_t slot, uint64_t *clock,
		 uint64_t now, uint64_t gap, uint64_t tpb16, uint32_t seg, unsigned int max)
{
	const struct weir_postack_q *q = &pa->q[d][slot];
	uint32_t r = q->head;
	unsigned int n = 0;

	while (n < max && r != WEIR_POSTACK_NONE && *clock <= now) {
		*clock += weir_postack_charge(gap, tpb16, pa->rec[r].adv, seg);
		r = pa->rec[r].next;
		n++;
	}
	return n;
}

int
weir_postack_idle(const struct weir_postack *pa, int d, uint32_t slot, uint64_t now,
		  uint64_t last)
{
	return now - last >= pa->idle_tsc + 2 * weir_postack_rtt(pa, d, slot);
}

unsigned int
weir_postack_watchdog(struct weir_postack *pa, uint64_t now, unsigned int budget,
		      weir_postack_decide_fn decide, void *arg, struct rte_mbuf **out,
		      uint8_t *dir_of, unsigned int max)
{
	unsigned int n = 0, n_later = 0;
	uint32_t later[WEIR_POSTACK_WATCH_MAX];

	/* One look per flow per call. A flow that released something goes
	 * behind the ones that did not, so when several are due and only one
	 * may go (postack-paced's class clock), they take turns: put back in
	 * the order looked at, the ring's first flow won every time and the
	 * last one starved (one of 8 flows at a sixth of its share). */
	budget = RTE_MIN(RTE_MIN(budget, pa->ring_n), (unsigned int)WEIR_POSTACK_WATCH_MAX);
	while (budget-- > 0 && pa->ring_n > 0 && n < max) {
		uint32_t e = pa->ring[pa->ring_head];
		int d = (int)(e >> RING_DIR_BIT);
		uint32_t slot = e & ~(1u << RING_DIR_BIT);
		struct weir_postack_q *q = &pa->q[d][slot];
		unsigned int k;

		pa->ring_head = (pa->ring_head + 1) % pa->ring_size;
		pa->ring_n--;
		q->listed = 0;
		if (q->n == 0)
			continue;       /* released by the rule meanwhile: drop the entry */
		enum weir_postack_why why = WEIR_PA_IDLE;
		uint32_t want = decide(arg, d, slot, now, q->n, &why);

		k = 0;
		if (want > 0) {
			k = weir_postack_release(pa, d, slot, out + n, RTE_MIN(max - n, want), why);
			for (unsigned int i = 0; i < k; i++)
				dir_of[n + i] = (uint8_t)d;
			n += k;
		}
		if (q->n == 0)
			continue;
		if (k > 0)
			later[n_later++] = e;
		else
			ring_add_entry(pa, e);  /* look again on the next lap */
	}
	for (unsigned int i = 0; i < n_later; i++)
		ring_add_entry(pa, later[i]);
	return n;
}

unsigned int
weir_postack_drop_all(struct weir_postack *pa, int d)
{
	unsigned int n = 0;

	if (pa == NULL)
		return 0;
	/* Every slot, not the watchdog's ring: nothing held may be missed. */
	for (uint32_t s = 0; s < pa->n_flows; s++) {
		struct weir_postack_q *q = &pa->q[d][s];

		while (q->n > 0) {
			uint32_t r = pop_rec(pa, q);

			if (pa->rec[r].len == 0) {
				rte_pktmbuf_free(pa->rec[r].m);
				pa->st.mbufs--;
			}
			free_rec(pa, r);
			n++;
		}
	}
	return n;
}

void
weir_postack_for_each_holder(struct weir_postack *pa, void (*fn)(void *arg, int d, uint32_t slot),
			     void *arg)
{
	uint32_t n = pa->ring_n;

	for (uint32_t i = 0, k = pa->ring_head; i < n; i++, k = (k + 1) % pa->ring_size) {
		uint32_t e = pa->ring[k];
		int d = (int)(e >> RING_DIR_BIT);
		uint32_t slot = e & ~(1u << RING_DIR_BIT);

		if (pa->q[d][slot].n > 0)
			fn(arg, d, slot);
	}
}

const struct weir_postack_stats *
weir_postack_stats(const struct weir_postack *pa)
{
	return &pa->st;
}

uint32_t
weir_postack_held(const struct weir_postack *pa, int d, uint32_t slot)
{
	return weir_postack_len(pa, d, slot);
}

uint32_t
weir_postack_measured_rtt(const struct weir_postack *pa, int d, uint32_t slot)
{
	return pa->q[d][slot].rtt;
}

size_t
weir_postack_bytes_per_ack(void)
{
	return sizeof(struct weir_postack_rec);
}

/* ==== The modes: postack and postack-paced ==== */

#include <netinet/in.h>

#include "mode.h"
#include "tcpwin.h"
#include "worker.h"
#include "worker_int.h"

/*
 * How far each side is, from the handshake as the gateway sees it: the
 * SYN+ACK comes back one round trip to the responder after the SYN, the
 * initiator's first pure ACK (its second packet) one round trip to the
 * initiator after the SYN+ACK. Data direction a's sender is the side that
 * sends in direction a: the responder for the SYN+ACK's direction, the
 * initiator for the SYN's. Only handshake packets touch the ACK store's
 * per-flow state here (it is cold for everything else).
 */
void
weir_postack_track(struct weir_postack *pa, const struct weir_flow *f, const struct weir_pkt *p,
		   int a, uint32_t slot, uint64_t now)
{
	const uint8_t syn_ack = p->tcp_flags & (WEIR_TCP_SYN | WEIR_TCP_ACK | WEIR_TCP_RST);
	struct weir_postack_q *q = pa->q[a], *o = pa->q[a ^ 1];

	if (!(syn_ack & WEIR_TCP_SYN) && f->pkts[a] != 2)
		return;         /* the worker calls only for handshake packets; cheap if not */
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

void
weir_postack_note_edge(struct weir_postack *pa, const struct weir_flow *f, const struct weir_pkt *p,
		       int a, uint32_t slot)
{
	struct weir_postack_q *q = &pa->q[a ^ 1][slot];
	int shift = weir_ack_wscale(f, a);
	uint32_t edge = p->ack + ((uint32_t)p->win << (shift < 0 ? 0 : shift));

	if (shift >= 0 && (!(q->flags & WEIR_PAQ_RE_VALID) || weir_seq_lt(q->re_max, edge))) {
		q->re_max = edge;
		q->flags |= WEIR_PAQ_RE_VALID;
	}
}

void
weir_postack_note_seen(struct weir_postack *pa, const struct weir_flow *f, const struct weir_pkt *p,
		       int a, uint32_t slot)
{
	struct weir_postack_q *q = &pa->q[a ^ 1][slot];
	const bool syn = p->tcp_flags & WEIR_TCP_SYN;   /* RFC 7323 2.2: a SYN's window is not scaled */
	const int shift = syn ? 0 : weir_ack_wscale(f, a);
	uint32_t edge;

	if (shift < 0)
		return;
	edge = p->ack + ((uint32_t)p->win << shift);
	if (!(q->flags & WEIR_PAQ_SEEN_VALID) || weir_seq_lt(q->seen_max, edge)) {
		q->seen_max = edge;
		q->flags |= WEIR_PAQ_SEEN_VALID;
	}
}

/*
 * Cut the window of ACK m (travelling a, the flow's handshake seen) so the
 * data sender may have at most `limit` bytes outstanding past its
 * cumulative ACK, but never move the right edge left of one already shown
 * to the sender (RFC 7323 sec. 2.4: do not shrink the window); with
 * `note`, note the edge it leaves with. The cut starts from the window on
 * the frame (weir_ack_win), not the parsed one: when two cut one ACK (a
 * last mile's, then its mode's) the smaller limit wins whatever the order.
 * Returns true when the window was rewritten (TCP checksum patched, RFC
 * 1624).
 */
static bool
cut_window(struct weir_postack *pa, const struct weir_flow *f, struct rte_mbuf *m,
	   const struct weir_pkt *p, int a, uint32_t slot, uint32_t limit, bool note)
{
	struct weir_postack_q *q = &pa->q[a ^ 1][slot];
	int shift = weir_ack_wscale(f, a);
	uint32_t edge, limit_edge, win;

	if (shift < 0)
		return false;
	edge = p->ack + ((uint32_t)weir_ack_win(m, p) << shift);
	limit_edge = p->ack + limit;
	if ((q->flags & WEIR_PAQ_RE_VALID) && weir_seq_lt(limit_edge, q->re_max))
		limit_edge = q->re_max;
	if (!weir_seq_lt(limit_edge, edge)) {
		if (note)
			weir_postack_note_edge(pa, f, p, a, slot);
		return false;
	}
	/* Round up: the new edge is at or past the limit, never short of it. */
	win = (limit_edge - p->ack + (1u << shift) - 1) >> shift;
	win = RTE_MIN(win, 0xffffu);
	weir_ack_set_win(m, p, (uint16_t)win);
	if (!note)
		return true;
	if (weir_seq_lt(q->re_max, p->ack + (win << shift)) || !(q->flags & WEIR_PAQ_RE_VALID))
		q->re_max = p->ack + (win << shift);
	q->flags |= WEIR_PAQ_RE_VALID;
	return true;
}

bool
weir_postack_cut_window(struct weir_postack *pa, const struct weir_flow *f, struct rte_mbuf *m,
			const struct weir_pkt *p, int a, uint32_t slot, uint32_t limit)
{
	return cut_window(pa, f, m, p, a, slot, limit, true);
}

bool
weir_postack_cut_unnoted(struct weir_postack *pa, const struct weir_flow *f, struct rte_mbuf *m,
			 const struct weir_pkt *p, int a, uint32_t slot, uint32_t limit)
{
	return cut_window(pa, f, m, p, a, slot, limit, false);
}

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
 * flow whose BDP is above ack_limit segments was window-limited whenever a
 * held ACK set its edge (1,024 x 1,448 bytes over 150 ms is 79 Mbit/s);
 * measured, a lone download in a 200 Mbit/s class at 150 ms read 0.92-0.95
 * of it with most held ACKs evicted. Frame bytes, not payload: a bound, 4 %
 * loose, and no division per ACK. Round trip unknown: ack_limit segments.
 * f->mss[a]: what the ACK's sender said it can receive, the segment size
 * the data sender uses.
 */
static uint32_t
postack_hold_window(const struct weir_worker *w, const struct weir_flow *f, int a, uint32_t slot,
		    uint16_t leaf)
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
static void
postack_clamp(struct weir_worker *w, const struct weir_flow *f, struct rte_mbuf *m,
	      const struct weir_pkt *p, int a, uint32_t slot, uint16_t leaf)
{
	if (weir_postack_cut_window(w->pa, f, m, p, a, slot, postack_hold_window(w, f, a, slot, leaf)))
		w->ctr.port[a].win_clamped++;
}

uint32_t
weir_postack_share_window(uint64_t share_bpt, uint64_t rtt, uint64_t target, uint32_t seg,
			  uint32_t margin16)
{
	const uint32_t ratio16 = weir_win_ratio16(seg);
	const uint64_t bdp = RTE_MIN(weir_win_bdp(share_bpt, rtt, ratio16), (uint64_t)INT32_MAX);
	const uint64_t wnd = bdp + (bdp * margin16 >> 16) +
			     RTE_MAX(2 * (uint64_t)seg,
				     RTE_MIN(weir_win_bdp(share_bpt, target, ratio16), (uint64_t)INT32_MAX));

	return (uint32_t)RTE_MIN(wnd, (uint64_t)INT32_MAX);
}

uint32_t
weir_postack_young_window(uint32_t clamp_window, uint32_t young, uint32_t active)
{
	return RTE_MAX(clamp_window, young / RTE_MAX(active, 1u));
}

/*
 * postack's share clamp (issue 19 item 5). Holding ACKs bounds the data
 * queued here, not the sender's window: nothing is dropped, so cwnd grew
 * until ack_limit and the socket buffers stopped it, and the delay moved
 * into the senders (8 cubic flows, 20 Mbit/s, 5 ms: their srtt 1.9 s; the
 * satellite case 14-17 s), and held ACKs released at the end let them
 * dump those windows into the queues. So every ACK of the flow's data,
 * passed or held, advertises at most its share of the class (of its ceil:
 * borrowing stays possible) times the path's round trip, both sides of the
 * gateway from the handshake (as ipabr starts from), plus a target of
 * max(2 MSS, share x clamp_target): 2 MSS so a delayed ACK (every second
 * segment) leaves the window-limited sender something to send, share x
 * 5 ms so the class's standing queue is its rate x 5 ms (CoDel's target)
 * whatever the flow count. share x RTT is raised by clamp_margin (a
 * fraction of it) so a loss's multiplicative decrease leaves the window at
 * the BDP or above, not the link idle (docs/results/postack-clamp). The
 * same Eq. 4.6 arithmetic as ipabr (lib/tcpwin.h), at most the hold window
 * (postack_hold_window). A young flow gets the larger of that and the young
 * budget divided among the class's active flows (weir_postack_young_window):
 * a lone short transfer keeps its head start, 32 flows starting together
 * in a 1.5 Mbit/s class do not each get 256 KiB of window (43 s of their
 * share). A flow whose round trip or window scale is unknown is left
 * alone, counted. Returns true when it applied: the ACK's edge is then
 * noted (a later note from its unrewritten window would undo the cut).
 */
static bool
postack_share_clamp(struct weir_worker *w, const struct weir_flow *f, struct rte_mbuf *m,
		    const struct weir_pkt *p, int a, uint32_t slot, uint16_t leaf)
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
static void
postack_dropped(struct weir_worker *w, const struct weir_flow *f, struct rte_mbuf *m, int d)
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
 * full queue (32 flows: 10 % retransmitted). Nor for a D-SACK. Returns
 * true when the ACK is such news and goes on.
 */
static bool
sack_news(struct weir_worker *w, const struct weir_flow *f, const struct rte_mbuf *m,
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

/* The sender's BDP for flow f in data direction d: its share x the
 * sender's round trip (the handshake's; 0 when unknown), bytes. */
static inline uint64_t
postack_bdp(const struct weir_worker *w, int d, uint32_t slot, uint16_t leaf)
{
	return (w->cls_ctr[d][leaf].share_bytes_per_tick * (uint64_t)w->pa->q[d][slot].rtt) >> 32;
}

/*
 * Is flow f over its share in data direction d, with qlen of its packets
 * queued? Fig. 14's rule says yes from one packet on: right for a sender
 * beside the gateway, whose data is back a moment after its ACK goes. A
 * sender a round trip away (a download's, across the WAN) cannot refill
 * the queue before the share drains it, so holding its ACKs from one
 * queued packet on leaves the class idle (issue 23: a lone 1 MB download
 * 33 % slower than pfq). And gating on the queue alone closes a loop
 * whose delay is that round trip (issue 23 cells 2 and 4,
 * docs/results/fct/ack-loop.md): releases stop while the queue is long, a
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
postack_over(const struct weir_worker *w, const struct weir_flow *f, int d, uint32_t slot,
	     uint16_t leaf, uint32_t qlen, uint64_t now)
{
	const uint64_t seg = f->mss[d ^ 1] ? f->mss[d ^ 1] : 1460;
	const uint64_t bdp = postack_bdp(w, d, slot, leaf);

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
postack_ack(struct weir_worker *w, struct weir_flow *f, struct rte_mbuf *m,
	    const struct weir_pkt *p, int a, uint32_t slot, uint16_t leaf, uint32_t held,
	    uint64_t now)
{
	const int d = a ^ 1;
	const bool clamped = postack_share_clamp(w, f, m, p, a, slot, leaf);
	bool over;

	if (sack_news(w, f, m, p, a, slot, held, clamped))
		return WEIR_V_PASS;
	if (weir_mode_data_qlen(w, f, a, slot) != 0)
		goto pass;      /* earlier frames of this direction still queued: keep order */
	/* A young flow is served ahead of the bulk ones (lib/drr.h) at more
	 * than its share: holding it to its share's BDP would cap its slow
	 * start at a few segments beside bulk flows (issue 23 item 3). */
	if (held == 0 && weir_mode_young(w, f, d, leaf))
		goto pass;
	over = postack_over(w, f, d, slot, leaf, weir_mode_data_qlen(w, f, d, slot), now);
	if (held == 0 && !over)
		goto pass;      /* not over its share: it goes on */
	if (held > 0 && !over)
		weir_mode_release(w, d, slot, 1, WEIR_PA_RULE);
	if (!clamped)
		postack_clamp(w, f, m, p, a, slot, leaf);
	return weir_mode_hold(w, f, d, slot, m, now);
pass:
	if (!clamped)
		postack_clamp(w, f, m, p, a, slot, leaf);
	weir_postack_asked(w->pa, d, slot, weir_postack_ack_adv(w->pa, d, slot, p->ack));
	return WEIR_V_PASS;
}

/* The release rule (Fig. 14): a data packet sent with at most one more of
 * its flow's queued behind it gets one held ACK back; for a far sender,
 * while what is queued behind it (less one) and on its way is within its
 * room (postack_over). */
static void
postack_sent(struct weir_worker *w, struct rte_mbuf *m, int d, uint32_t slot, uint16_t leaf,
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
postack_tick(struct weir_worker *w, const struct weir_flow *f, int d, uint32_t slot, uint16_t leaf,
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
	.dropped = postack_dropped,
	.tick = postack_tick,
};

/* ---- postack-paced ---- */

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
paced_tick(struct weir_worker *w, const struct weir_flow *f, int d, uint32_t slot, uint16_t leaf,
	   uint64_t now, bool arrival)
{
	struct weir_tcr_flow *tf = &w->tcr->f[d][slot];
	struct weir_class_counters *c = &w->cls_ctr[d][leaf];
	const uint32_t flows = c->active ? c->active : 1;
	const uint32_t seg = f->mss[d ^ 1] ? f->mss[d ^ 1] : 1460;
	const int64_t bdp = (int64_t)postack_bdp(w, d, slot, leaf);
	const int64_t on_way = bdp ? (int64_t)weir_postack_on_way(w->pa, d, slot, now) : 0;
	const uint32_t lqlen = weir_cbq_leaf_qlen(w->shaper[d], leaf);
	uint64_t cgap, fgap;

	/* A far sender (two segments of BDP or more) whose own data queued
	 * and on its way falls short of its BDP: a round trip from now its
	 * share runs dry whatever the clocks say (they only ever lose time: a
	 * late look at the flow is not made up). An ACK goes now; what it
	 * asks for counts on its way at once, so this stops as soon as enough
	 * is asked for. The flow's own queue, not the class's: beside other
	 * flows' packets the class queue hid a flow's empty pipe, and 8
	 * downloads filled 0.73-0.85 of a 200 Mbit/s class (0.97 now) for
	 * about 4 packets more queued a flow (docs/postack.md). */
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
		 * still gets its ticks, or every TCP flow's ACKs stopped (TCP
		 * got 0.000 of the class, issue 17 item 4). Ticking past a
		 * spread backlog kept Fig. 8's class of 32 flows at its limit
		 * (24 of 27 packets, 21 % retransmitted; 6 and 5 % before). */
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
	 * match. A receiver stretching its ACKs (3.3 data packets a paced
	 * ACK) made each take as many ticks, and a lone bbr upload, paced by
	 * the ACKs it saw, held
	 * at 0.83-0.85 of a 200 Mbit/s class with the queue empty and ~80
	 * ACKs held here (0.95-0.96 since). */
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
paced_ack(struct weir_worker *w, struct weir_flow *f, struct rte_mbuf *m, const struct weir_pkt *p,
	  int a, uint32_t slot, uint16_t leaf, uint32_t held, uint64_t now)
{
	const int d = a ^ 1;

	if (sack_news(w, f, m, p, a, slot, held, false))
		return WEIR_V_PASS;
	/* Behind a frame of its own direction (order); or nothing held, the
	 * flow's queue empty and the class without a backlog: there is room,
	 * and pacing would only slow its start (issue 23); or the flow is
	 * young (lib/drr.h: served ahead of bulk flows); or its tick is due. */
	if (weir_mode_data_qlen(w, f, a, slot) != 0 ||
	    (held == 0 && weir_mode_young(w, f, d, leaf)) ||
	    (held == 0 && weir_mode_data_qlen(w, f, d, slot) == 0 &&
	     weir_cbq_leaf_qlen(w->shaper[d], leaf) == 0) ||
	    (held == 0 && paced_tick(w, f, d, slot, leaf, now, true))) {
		postack_clamp(w, f, m, p, a, slot, leaf);
		weir_postack_asked(w->pa, d, slot, weir_postack_ack_adv(w->pa, d, slot, p->ack));
		return WEIR_V_PASS;
	}
	postack_clamp(w, f, m, p, a, slot, leaf);
	return weir_mode_hold(w, f, d, slot, m, now);
}

/* Fig. 4 line 13: one more data packet of the flow arrived for the class. */
static void
paced_queued(struct weir_worker *w, const struct weir_flow *f, struct rte_mbuf *m, int d,
	     uint32_t slot)
{
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;

	RTE_SET_USED(f);
	if (p->l4proto == IPPROTO_TCP && p->payload_len > 0)
		w->tcr->f[d][slot].out++;
}

static uint32_t
paced_tick_op(struct weir_worker *w, const struct weir_flow *f, int d, uint32_t slot,
	      uint16_t leaf, uint64_t now, uint32_t held, enum weir_postack_why *why)
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
	.dropped = postack_dropped,
	.tick = paced_tick_op,
};
