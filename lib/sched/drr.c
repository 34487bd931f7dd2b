/* SPDX-License-Identifier: BSD-3-Clause
 * weir: deficit round robin over per-flow queues. See drr.h for the model.
 */
#include <string.h>

#include <rte_malloc.h>

#include "codel.h"
#include "drr.h"

/* Largest Ethernet frame without FCS, with one VLAN tag: the default quantum. */
#define WEIR_DRR_DEFAULT_QUANTUM 1518u

struct weir_drr_qtab *
weir_drr_qtab_create(uint32_t n, uint16_t limit, int socket_id)
{
	struct weir_drr_qtab *t;
	uint32_t i;

	if (n == 0 || n >= WEIR_DRR_NONE || limit == 0)
		return NULL;
	t = rte_zmalloc_socket("weir_drr_qtab", sizeof(*t) + (size_t)n * sizeof(t->q[0]),
			       RTE_CACHE_LINE_SIZE, socket_id);
	if (t == NULL)
		return NULL;
	t->n = n;
	t->limit = limit;
	t->rtt_ms = rte_zmalloc_socket("weir_drr_rtt", (size_t)n * sizeof(t->rtt_ms[0]),
				       RTE_CACHE_LINE_SIZE, socket_id);
	if (t->rtt_ms == NULL) {
		rte_free(t);
		return NULL;
	}
	for (i = 0; i < n; i++) {
		t->q[i].weight = 1;
		t->q[i].next = WEIR_DRR_NONE;
	}
	return t;
}

void
weir_drr_qtab_free(struct weir_drr_qtab *t)
{
	if (t != NULL) {
		rte_free(t->codel);
		rte_free(t->rtt_ms);
	}
	rte_free(t);
}

void
weir_drr_init(struct weir_drr *d, struct weir_drr_qtab *t, uint32_t quantum, uint16_t overhead)
{
	memset(d, 0, sizeof(*d));
	d->q = t->q;
	d->rtt_ms = t->rtt_ms;
	d->last = WEIR_DRR_NONE;
	d->new_last = WEIR_DRR_NONE;
	d->sparse = 1;
	d->new_quanta = WEIR_DRR_NEW_QUANTA_DEFAULT;
	d->overhead = overhead;
	d->limit = t->limit;
	d->quantum = quantum ? quantum : WEIR_DRR_DEFAULT_QUANTUM + overhead;
}

/* The tail of the list a queue in state `which` is on. */
static inline uint32_t *
list_tail(struct weir_drr *d, uint8_t which)
{
	return which == WEIR_DRR_NEW ? &d->new_last : &d->last;
}

/* Append queue qid at the tail of list `which`. */
static inline void
drr_list_append(struct weir_drr *d, uint32_t qid, uint8_t which)
{
	struct weir_drr_q *q = &d->q[qid];
	uint32_t *last = list_tail(d, which);

	if (*last == WEIR_DRR_NONE) {
		q->next = qid;          /* a list of one points at itself */
	} else {
		q->next = d->q[*last].next;
		d->q[*last].next = qid;
	}
	*last = qid;
	q->listed = which;
	d->n_listed++;
	d->n_new += which == WEIR_DRR_NEW;
}

/* Unlink `qid` whose predecessor in its circular list is `prev`. */
static inline void
drr_list_unlink(struct weir_drr *d, uint32_t prev, uint32_t qid)
{
	struct weir_drr_q *q = &d->q[qid];
	uint32_t *last = list_tail(d, q->listed);

	/* The new list's head leaves (its predecessor is the new list's tail;
	 * no old-list queue can be that): its successor's turn starts afresh. */
	if (prev == d->new_last)
		d->new_visit = 0;
	if (prev == qid) {
		*last = WEIR_DRR_NONE;
	} else {
		d->q[prev].next = q->next;
		if (*last == qid)
			*last = prev;
	}
	d->n_new -= q->listed == WEIR_DRR_NEW;
	q->youth &= (uint8_t)~WEIR_DRR_Y_BONUS;    /* reckoned again when next listed new */
	q->next = WEIR_DRR_NONE;
	q->listed = 0;
	d->n_listed--;
}

/* Is q on a list (old or new)? An emptied queue (IDLE, IDLE_OLD) is on none. */
static inline bool
on_list(const struct weir_drr_q *q)
{
	return q->listed == WEIR_DRR_OLD || q->listed == WEIR_DRR_NEW;
}

/* Take listed queue qid off its list: a walk to find its predecessor (the
 * lists are singly linked to keep a queue in 32 bytes; this is rare). */
static void
drr_list_remove(struct weir_drr *d, uint32_t qid)
{
	uint32_t prev = *list_tail(d, d->q[qid].listed);

	while (d->q[prev].next != qid)
		prev = d->q[prev].next;
	drr_list_unlink(d, prev, qid);
}

void
weir_drr_set_bdp(struct weir_drr *d, uint64_t rate_bps, uint32_t frame_bytes, uint32_t max)
{
	uint64_t q16;

	if (frame_bytes == 0) {
		d->bdp_q16 = 0;
		return;
	}
	/* Frames per ms at rate_bps, in 1/65536ths (cold: once per rate). */
	q16 = (((unsigned __int128)rate_bps) << 16) / (8000u * (uint64_t)frame_bytes);
	d->bdp_q16 = (uint32_t)RTE_MIN(q16, (uint64_t)UINT32_MAX);
	d->bdp_max = (uint16_t)RTE_MIN(max, (uint32_t)UINT16_MAX);
}

void
weir_drr_set_frame_ticks(struct weir_drr *d, uint64_t rate_bps, uint32_t frame_bytes,
			 uint64_t tsc_hz)
{
	uint64_t t;

	if (rate_bps == 0 || frame_bytes == 0) {
		d->frame_ticks = 0;
		return;
	}
	t = (uint64_t)(((unsigned __int128)frame_bytes * 8u * tsc_hz) / rate_bps);
	d->frame_ticks = (uint32_t)RTE_MIN(t, (uint64_t)UINT32_MAX);
}

void
weir_drr_set_rtt(struct weir_drr_qtab *t, uint32_t qid, uint32_t rtt_ms)
{
	if (qid < t->n)
		t->rtt_ms[qid] = (uint16_t)RTE_MIN(rtt_ms, (uint32_t)UINT16_MAX);
}

uint32_t
weir_drr_queue_limit(const struct weir_drr *d, uint32_t qid)
{
	uint64_t bdp;

	if (d->bdp_q16 == 0 || d->rtt_ms == NULL || d->rtt_ms[qid] == 0)
		return d->limit;
	bdp = ((uint64_t)d->rtt_ms[qid] * d->bdp_q16 * WEIR_DRR_BDP_QUEUE) >> 16;
	bdp = RTE_MIN(bdp, (uint64_t)d->bdp_max);
	return RTE_MAX((uint32_t)bdp, (uint32_t)d->limit);
}

static void drr_append(struct weir_drr *d, uint32_t qid, struct rte_mbuf *m, uint32_t bonus);

int
weir_drr_enqueue(struct weir_drr *d, uint32_t qid, struct rte_mbuf *m)
{
	return weir_drr_enqueue_young(d, qid, m, UINT64_MAX);
}

int
weir_drr_enqueue_young(struct weir_drr *d, uint32_t qid, struct rte_mbuf *m, uint64_t attained)
{
	struct weir_drr_q *q = &d->q[qid];

	if (unlikely(q->len >= d->limit) && q->len >= weir_drr_queue_limit(d, qid)) {
		weir_drr_count_drop(q);
		return WEIR_DRR_DROP_LIMIT;
	}
	drr_append(d, qid, m, attained < d->young ? (uint32_t)(d->young - attained) : 0);
	return WEIR_DRR_OK;
}

void
weir_drr_youth_end(struct weir_drr *d, uint32_t qid)
{
	struct weir_drr_q *q = &d->q[qid];
	const int32_t quantum = (int32_t)(d->quantum * q->weight);

	if (q->listed != WEIR_DRR_NEW || !(q->youth & WEIR_DRR_Y_BONUS))
		return;
	q->youth &= (uint8_t)~WEIR_DRR_Y_BONUS;  /* if it empties now: an old flow's rule */
	if (q->deficit > quantum)
		q->deficit = quantum;
}

void
weir_drr_append(struct weir_drr *d, uint32_t qid, struct rte_mbuf *m)
{
	drr_append(d, qid, m, 0);
}

/* The young budget queue q goes on the new list with (young <= 2^30: no
 * overflow): what is left of it by its bytes, none once its youth is spent. */
static inline uint32_t
young_bonus(struct weir_drr *d, struct weir_drr_q *q, uint32_t bonus)
{
	/* Unlisted, so its BONUS bit is clear (drr_list_unlink). */
	if (bonus == 0 || (q->youth & WEIR_DRR_Y_SPENT))
		return 0;
	d->young_flows++;
	q->youth |= WEIR_DRR_Y_BONUS;
	return bonus;
}

/*
 * Is queue qid's flow one CoDel controls: dropped from lately, in its
 * sawtooth (codel_sawtooth)? Such a flow has stood above its share, so it
 * is not sparse when its queue runs dry: CoDel keeps it about a packet deep,
 * and a bulk flow waking on the new list each time its queue empties would
 * take a young transfer's turns (docs/results/young-active). A sparse flow
 * never stands above the target, so it is never dropped from and keeps the
 * new list. m, the waking packet, is stamped at enqueue: now.
 */
static inline bool
drr_controlled(const struct weir_drr *d, struct weir_drr_q *q, uint32_t qid,
	       struct rte_mbuf *m)
{
	/* The flag first: at 64K flows reading every waking queue's CoDel
	 * state cost a cache miss a wake (weir-bench +pfq 1.19x). */
	if (!(q->youth & WEIR_DRR_Y_CODEL))
		return false;
	if (d->codel != NULL && codel_sawtooth(&d->codel[qid], d->aqm, weir_mbuf_meta(m)->ts))
		return true;
	q->youth &= (uint8_t)~WEIR_DRR_Y_CODEL;        /* out of its sawtooth: no more reads */
	return false;
}

static void
drr_append(struct weir_drr *d, uint32_t qid, struct rte_mbuf *m, uint32_t bonus)
{
	struct weir_drr_q *q = &d->q[qid];

	weir_mbuf_meta(m)->qnext = NULL;
	if (q->head == NULL)
		q->head = m;
	else
		weir_mbuf_meta(q->tail)->qnext = m;
	q->tail = m;
	q->len++;
	d->pkts++;
	d->bytes += weir_drr_wire_len(d, m);
	if (unlikely(q->listed >= WEIR_DRR_IDLE)) {
		const bool was_old = q->listed == WEIR_DRR_IDLE_OLD;

		q->listed = 0;
		if ((int32_t)(d->old_turns - (uint32_t)q->deficit) < 0) {
			/* Back before its turn on the old list came: an old
			 * flow still, at the old list's tail. One that emptied
			 * while new has had its quantum there: its next comes
			 * from its next turn (no credit for the wake). One
			 * that emptied while old had its turn: a quantum, as
			 * any flow that joins the old list. */
			q->deficit = was_old ? (int32_t)(d->quantum * q->weight) : 0;
			drr_list_append(d, qid, WEIR_DRR_OLD);
			return;
		}
	}
	if (!q->listed) {
		/* A newly backlogged flow starts with one round's worth, so it
		 * sends at its first visit; empty flows keep no credit. */
		uint8_t which = WEIR_DRR_OLD;

		if (d->sparse) {
			bonus = young_bonus(d, q, bonus);
			/* An old flow whose sender weir clocks (held ACKs,
			 * sized windows) empties its queue between packets by
			 * design: it is not sparse, or every packet of a
			 * paced download would be a new flow's and a short
			 * reply would share the new list with them all
			 * (docs/results/young-active). The waking packet says, so the
			 * queue keeps no state for it. Nor is one CoDel has
			 * dropped from lately (drr_controlled). */
			if (bonus != 0 ||
			    (!weir_mbuf_meta(m)->pkt.clocked && !drr_controlled(d, q, qid, m)))
				which = WEIR_DRR_NEW;
		} else {
			bonus = 0;
		}
		q->deficit = (int32_t)(d->quantum * q->weight + bonus);
		drr_list_append(d, qid, which);
		d->new_flows += which == WEIR_DRR_NEW;
	}
}

/* Old queues with packets. */
static inline uint32_t
old_backlogged(const struct weir_drr *d)
{
	return d->n_listed - d->n_new;
}

/* Bytes the new list may send between two old packets while old flows wait. */
static inline uint32_t
new_bound(const struct weir_drr *d)
{
	return d->quantum * d->new_quanta;
}

/* Serve the new list now? Not while old flows wait and the new list has
 * sent its bound since one of them last did. */
static inline bool
new_turn(const struct weir_drr *d)
{
	return d->new_last != WEIR_DRR_NONE && (old_backlogged(d) == 0 || d->new_run < new_bound(d));
}

/* weir_drr_peek, inlined into the dequeues: a call a packet, and its
 * register saves, showed in the per-packet cost (callgrind,
 * docs/results/bench/newflows-codel.md). */
static inline struct rte_mbuf *
drr_peek(struct weir_drr *d, uint32_t *qid)
{
	uint32_t id;
	struct weir_drr_q *q;

	/* Every step either returns or moves a queue on (a new one to the old
	 * list, an old one to the tail with one more quantum, an emptied one
	 * off), and a quantum is at least one frame: the loop ends within one
	 * pass over both lists (normally at once), amortised O(1) a packet. */
	for (;;) {
		if (new_turn(d)) {
			id = d->q[d->new_last].next;
			q = &d->q[id];
			/* Young flows take turns, a quantum each: their budgets
			 * put them ahead of old flows, not of each other. Served
			 * one whole budget after another, flows that start
			 * together would each wait for all the others' budgets
			 * and empty their queue at each turn, which keeps their
			 * CoDel from ever dropping while slow start queues
			 * (docs/results/young-active).
			 * A lone young flow is not held. */
			if (q->deficit > 0 && d->new_visit >= d->quantum * q->weight &&
			    q->next != id) {
				d->new_last = id;       /* rotate: the head becomes the tail */
				d->new_visit = 0;
				continue;
			}
			if (q->deficit > 0)
				break;
			/* Its quantum spent: it joins the old flows, with the next. */
			drr_list_unlink(d, d->new_last, id);
			q->deficit += (int32_t)(d->quantum * q->weight);
			drr_list_append(d, id, WEIR_DRR_OLD);
			continue;
		}
		if (d->last == WEIR_DRR_NONE)
			return NULL;
		id = d->q[d->last].next;
		q = &d->q[id];
		if (q->deficit > 0)
			break;
		q->deficit += (int32_t)(d->quantum * q->weight);
		d->last = id;   /* rotate: the head becomes the tail */
		d->old_turns++;
	}
	*qid = id;
	return q->head;
}

struct rte_mbuf *
weir_drr_peek(struct weir_drr *d, uint32_t *qid)
{
	return drr_peek(d, qid);
}

/* Take packet m (wl wire bytes) off the head of queue id, which the last
 * peek returned: the head of its list. A queue that empties leaves its
 * list. Unless new and young, it is an old flow until the turn it would
 * have had at the old list's tail has come (RFC 8290 sec. 4.2 moves a new
 * one there), so pausing briefly does not make a flow new again. That turn is
 * a count of the old list's turns, kept in the idle queue's deficit: two
 * list operations fewer per flow that wakes. */
static inline void
pop_head(struct weir_drr *d, uint32_t id, struct rte_mbuf *m, uint32_t wl)
{
	struct weir_drr_q *q = &d->q[id];

	q->head = weir_mbuf_meta(m)->qnext;
	if (q->head == NULL)
		q->tail = NULL;
	q->len--;
	d->pkts--;
	d->bytes -= wl;
	if (q->len != 0)
		return;
	if (q->listed == WEIR_DRR_NEW) {
		const bool young = q->youth & WEIR_DRR_Y_BONUS;

		drr_list_unlink(d, d->new_last, id);
		if (young) {
			/* Off the lists: its next packet puts it back on the new
			 * list with what is left of its budget. */
			q->deficit = 0;
			return;
		}
		q->listed = WEIR_DRR_IDLE;
	} else {
		/* An old queue that empties is old too until its next turn
		 * would have come: a bulk flow whose queue runs dry between
		 * two of its packets (CoDel keeps it short, or its sender
		 * paused for less than a round of the old list) is not a new
		 * flow, and does not take the new list's turns from one.
		 * RFC 8290 makes it new at its next packet. */
		drr_list_unlink(d, d->last, id);        /* the head: its predecessor is the tail */
		d->old_turns++;
		q->listed = WEIR_DRR_IDLE_OLD;
	}
	q->deficit = (int32_t)(d->old_turns + old_backlogged(d));
}

/* Send m, the head of queue id that peek returned: charge its deficit and
 * the new list's bound, and take it off. Returns the packets left. */
static inline uint32_t
drr_take(struct weir_drr *d, uint32_t id, struct rte_mbuf *m)
{
	struct weir_drr_q *q = &d->q[id];
	const uint32_t wl = weir_drr_wire_len(d, m);

	q->deficit -= (int32_t)wl;
	if (q->listed == WEIR_DRR_NEW) {
		/* Only what it sends while old flows wait counts to its bound. */
		d->new_run = old_backlogged(d) ? d->new_run + wl : 0;
		d->new_visit += wl;
	} else {
		if (d->new_last != WEIR_DRR_NONE && d->new_run >= new_bound(d))
			d->new_deferred++;
		d->new_run = 0;
	}
	pop_head(d, id, m, wl);
	return q->len;
}

struct rte_mbuf *
weir_drr_dequeue(struct weir_drr *d, uint32_t *qid, uint32_t *qlen)
{
	uint32_t id;
	struct rte_mbuf *m = drr_peek(d, &id);

	if (m == NULL)
		return NULL;
	*qlen = drr_take(d, id, m);
	*qid = id;
	return m;
}

/* dequeue_aqm when the head's queue needs CoDel's verdict: its state is not
 * at rest, or its head has waited past the target (rare, out of line). */
static __rte_noinline struct rte_mbuf *
dequeue_codel(struct weir_drr *d, uint64_t now, uint32_t *qid, uint32_t *qlen,
	      struct rte_mbuf **dropped, uint32_t *dropped_qid, unsigned int *n_dropped,
	      unsigned int max_drop)
{
	*n_dropped = 0;
	for (;;) {
		uint32_t id;
		struct rte_mbuf *m = drr_peek(d, &id);
		struct weir_drr_q *q;
		struct weir_codel *c;
		uint64_t ts, sojourn;
		bool drop;

		if (m == NULL)
			return NULL;
		q = &d->q[id];
		ts = weir_mbuf_meta(m)->ts;
		sojourn = now > ts ? now - ts : 0;
		/* At rest and below the tree's target (no queue's is lower) or
		 * alone: CoDel would leave its state as it is and not drop. */
		if (*n_dropped < max_drop &&
		    (q->aqm_armed || (sojourn >= d->aqm->target && q->len > 1))) {
			c = &d->codel[id];
			drop = weir_codel_drop(c, d->aqm, sojourn, q->len, now,
					       (uint64_t)WEIR_CODEL_SHARE_FRAMES * d->n_listed *
					       d->frame_ticks);
			q->aqm_armed = c->first_above != 0 || c->dropping;
		} else {
			drop = false;
		}
		if (!drop) {
			*qlen = drr_take(d, id, m);
			*qid = id;
			return m;
		}
		/* Dropped from the head: the flow's sender hears of the queue a
		 * round trip sooner than from the tail. Not charged to its deficit. */
		pop_head(d, id, m, weir_drr_wire_len(d, m));
		weir_drr_count_drop(q);
		q->youth |= WEIR_DRR_Y_CODEL;
		d->aqm_drops++;
		dropped_qid[*n_dropped] = id;
		dropped[(*n_dropped)++] = m;
	}
}

struct rte_mbuf *
weir_drr_dequeue_aqm(struct weir_drr *d, uint64_t now, uint32_t *qid, uint32_t *qlen,
		     struct rte_mbuf **dropped, uint32_t *dropped_qid, unsigned int *n_dropped,
		     unsigned int max_drop)
{
	uint32_t id;
	struct rte_mbuf *m = drr_peek(d, &id);
	const struct weir_drr_q *q;

	*n_dropped = 0;
	if (m == NULL)
		return NULL;
	q = &d->q[id];
	/* The common case, in line: CoDel at rest and the head not yet past
	 * the tree's target (no queue's is lower), or alone in its queue. */
	if (likely(!q->aqm_armed) &&
	    (q->len <= 1 || now < weir_mbuf_meta(m)->ts + d->aqm->target)) {
		*qlen = drr_take(d, id, m);
		*qid = id;
		return m;
	}
	return dequeue_codel(d, now, qid, qlen, dropped, dropped_qid, n_dropped, max_drop);
}

/* Walk a circular list from its head: up to *budget queues. */
static inline void
fattest_in(const struct weir_drr *d, uint32_t last, uint32_t *budget, uint32_t *best,
	   uint16_t *best_len)
{
	uint32_t id;

	if (last == WEIR_DRR_NONE)
		return;
	id = d->q[last].next;
	for (;;) {
		if (*budget == 0)
			return;
		(*budget)--;
		if (d->q[id].len > *best_len) {
			*best_len = d->q[id].len;
			*best = id;
		}
		if (id == last)
			return;
		id = d->q[id].next;
	}
}

uint32_t
weir_drr_fattest(const struct weir_drr *d, uint32_t budget)
{
	uint32_t best = WEIR_DRR_NONE;
	uint16_t best_len = 1;          /* a queue of one would leave its list */

	fattest_in(d, d->last, &budget, &best, &best_len);
	fattest_in(d, d->new_last, &budget, &best, &best_len);
	return best;
}

struct rte_mbuf *
weir_drr_evict(struct weir_drr *d, uint32_t qid)
{
	struct weir_drr_q *q = &d->q[qid];
	struct rte_mbuf *m = q->head;

	if (m == NULL || q->len < 2)
		return NULL;
	q->head = weir_mbuf_meta(m)->qnext;
	q->len--;
	weir_drr_count_drop(q);
	d->pkts--;
	d->bytes -= weir_drr_wire_len(d, m);
	return m;
}

unsigned int
weir_drr_drain(struct weir_drr *d, uint32_t qid, struct rte_mbuf **out, unsigned int max,
	       uint64_t *bytes)
{
	struct weir_drr_q *q = &d->q[qid];
	uint64_t b = 0;
	unsigned int n = 0;

	while (n < max && q->head != NULL) {
		struct rte_mbuf *m = q->head;

		q->head = weir_mbuf_meta(m)->qnext;
		out[n++] = m;
		b += weir_drr_wire_len(d, m);
	}
	if (q->head == NULL)
		q->tail = NULL;
	q->len -= n;
	d->pkts -= n;
	d->bytes -= b;
	if (bytes != NULL)
		*bytes = b;
	if (q->len == 0 && on_list(q)) {
		drr_list_remove(d, qid);
		q->deficit = 0;
	}
	return n;
}

uint32_t
weir_drr_move(struct weir_drr *from, struct weir_drr *to, uint32_t qid, uint64_t *bytes)
{
	struct weir_drr_q *q = &from->q[qid];
	uint64_t b = 0;

	if (from == to)
		return 0;
	/* Off every list of `from`. An emptied queue (IDLE, IDLE_OLD) is on none;
	 * its turn count is `from`'s, so in `to` it starts afresh. */
	if (on_list(q))
		drr_list_remove(from, qid);
	q->listed = 0;
	if (q->len == 0) {
		q->deficit = 0;
		if (bytes != NULL)
			*bytes = 0;
		return 0;
	}
	for (struct rte_mbuf *m = q->head; m != NULL; m = weir_mbuf_meta(m)->qnext)
		b += weir_drr_wire_len(from, m);
	from->pkts -= q->len;
	from->bytes -= b;
	to->pkts += q->len;
	to->bytes += b;
	q->deficit = (int32_t)(to->quantum * q->weight);
	drr_list_append(to, qid, WEIR_DRR_OLD);
	if (bytes != NULL)
		*bytes = b;
	return q->len;
}
