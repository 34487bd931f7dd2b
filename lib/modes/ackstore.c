/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the ACK store (lib/modes/ackstore.h): a service of the worker that the
 * modes holding or cutting ACKs use (postack, postack-paced, tcr, ipabr,
 * pep, last miles). It keeps no mode's rule and knows no worker: modes
 * decide, the store holds, orders, releases and keeps the window edges.
 */
#include <string.h>
#include <netinet/in.h>

#include <rte_malloc.h>

#include "mbuf_meta.h"
#include "ackstore_int.h"
#include "tcpwin.h"

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

/* ==== Window edges and the handshake's round trips ==== */

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
