/* SPDX-License-Identifier: BSD-3-Clause
 * weir: deficit round robin over per-flow FIFO queues (the paper's PFQ).
 *
 * Two objects:
 *  - struct weir_drr_qtab: the per-flow queues of one direction, one slot
 *    per flow-table slot (the caller passes the slot index as queue id).
 *    It is shared by every leaf of a class tree, because a flow sits in one
 *    leaf at a time: storage is N x 32 bytes, not leaves x N.
 *  - struct weir_drr: one scheduler (one leaf class) over the queues of the
 *    flows in it: a circular list of the backlogged ones, O(1) to append,
 *    rotate and remove at the head.
 *
 * Packets are chained through weir_mbuf_meta.qnext; a queue is head, tail
 * and a count. Each visit of a backlogged queue adds quantum x weight bytes
 * to its deficit; a queue sends while its deficit is positive (the deficit
 * may end negative by less than one packet and is paid back next round), so
 * over time every backlogged flow gets bytes in proportion to its weight
 * whatever its packet sizes. Bytes are wire bytes: pkt_len + overhead.
 *
 * New flows first (RFC 8290 sec. 4.1, as fq_codel and CAKE do), on by
 * default: a queue that becomes backlogged goes on a second list, served
 * ahead of the others for one quantum, then joins the others' list. A
 * short transfer (a web page, an API call) thus finishes at close to idle
 * speed beside bulk flows, which keep their shares. Two guards: a queue
 * that empties while new stays on the old list until its turn comes round
 * there (a bulk sender cannot be new again by pausing for less than the
 * others take to send a quantum each), and while old flows wait the new
 * list sends at most new_quanta quanta (default 3) between two of their
 * packets, so a flood of new flows (a scan) gets at most about 3/4 of the
 * leaf and old flows keep the rest (counted: new_deferred). A queue whose
 * flow weir clocks (held ACKs, sized windows), or that CoDel has dropped
 * from lately, is not sparse when it empties: it wakes old.
 *
 * Ownership: enqueue returning 0 takes the mbuf; a non-zero return (a drop)
 * leaves it with the caller, who frees it. The drop is counted on the queue
 * it was meant for, never on another flow.
 *
 * Rule for the caller: a queue belongs to one weir_drr at a time. Move a
 * flow to another leaf only when its queue is empty (or drain it first).
 */
#ifndef WEIR_DRR_H
#define WEIR_DRR_H

#include <stdbool.h>
#include <stdint.h>
#include <rte_common.h>
#include <rte_mbuf.h>

#include "mbuf_meta.h"

#define WEIR_DRR_NONE UINT32_MAX
#define WEIR_DRR_OLD 1           /* on the old list, backlogged */
#define WEIR_DRR_NEW 2           /* on the new-flows list, backlogged */
#define WEIR_DRR_IDLE 3          /* emptied while new, on no list: old until the old list's
				  * turn count (struct weir_drr.old_turns) reaches its deficit */
#define WEIR_DRR_IDLE_OLD 4      /* the same, emptied while old */
#define WEIR_DRR_YOUNG_MAX (1u << 30)   /* young budget cap: a deficit stays in int32 */
/* Quanta the new-flows list may send between two packets of waiting old
 * flows (shaping.new_quanta): new flows together get at most n / (n + 1) of
 * the leaf while old ones wait. 3 keeps a short reply close to its idle
 * time beside bulk flows while old flows keep a quarter under a scan. */
#define WEIR_DRR_NEW_QUANTA_DEFAULT 3u
#define WEIR_DRR_NEW_QUANTA_MAX 16u
#define WEIR_DRR_YOUNG_DEFAULT 262144u  /* shaping.young_bytes when not set */

struct weir_codel;
struct weir_codel_params;

/* One flow's queue: 32 bytes, two to a cache line. */
struct weir_drr_q {
	struct rte_mbuf *head;
	struct rte_mbuf *tail;
	int32_t  deficit;       /* bytes this queue may still send this round */
	uint32_t next;          /* next queue in its scheduler's active list */
	uint16_t len;           /* packets queued */
	uint8_t  weight;        /* quantum multiplier, >= 1 */
	uint8_t  listed;        /* WEIR_DRR_OLD, _NEW (on that list), _IDLE, _IDLE_OLD; 0: none */
	uint16_t drops;         /* packets refused or dropped here, saturating at 65535
				 * (a debugging aid: the class counters count every one) */
	/* Its CoDel state is not at rest (an interval above target started,
	 * or dropping). While it is clear, a head packet younger than the
	 * tree's target cannot change that state, and dequeue does not read
	 * it: at 64K flows the separate state array cost a cache miss a
	 * packet. */
	uint8_t  aqm_armed;
	uint8_t  youth;         /* WEIR_DRR_Y_*: its flow's young budget (weir_drr_enqueue_young) */
};

#define WEIR_DRR_Y_BONUS 0x01   /* listed with a young budget beyond its quantum */
#define WEIR_DRR_Y_SPENT 0x02   /* its youth ran out in time: old for the rest of its
				 * flow's life (weir_drr_youth_age) */
#define WEIR_DRR_Y_CODEL 0x04   /* CoDel has dropped from it in its flow's life: a
				 * wake reads its CoDel state (drr_controlled) */
#define WEIR_DRR_Y_AGE_SHIFT 3  /* bits 3-7: periods it was active in while young */
#define WEIR_DRR_Y_AGE_MAX 31u

/* One more packet refused or dropped from q. */
static inline void
weir_drr_count_drop(struct weir_drr_q *q)
{
	q->drops += q->drops != UINT16_MAX;
}

struct weir_drr_qtab {
	uint32_t n;             /* queue ids are 0 .. n-1 */
	uint16_t limit;         /* packets per queue */
	struct weir_codel *codel;       /* [n] CoDel state per queue (lib/sched/codel.h), or NULL */
	/* [n] each queue's flow's round trip in ms (0: unknown, e.g. not TCP),
	 * read only when a queue reaches `limit` (weir_drr_set_rtt). */
	uint16_t *rtt_ms;
	struct weir_drr_q q[];
};

/* Create storage for n queues of at most `limit` packets (<= 65535), zeroed,
 * weight 1. Returns NULL on bad arguments or no memory. */
struct weir_drr_qtab *weir_drr_qtab_create(uint32_t n, uint16_t limit, int socket_id);
void weir_drr_qtab_free(struct weir_drr_qtab *t);

/* Queue qid belongs to a new flow: young again (its budget and age from
 * zero), and not idle: the turn an emptied queue waits for was its last
 * flow's, so a new flow in a slot just freed goes on the new list. */
static inline void
weir_drr_flow_new(struct weir_drr_qtab *t, uint32_t qid)
{
	struct weir_drr_q *q = &t->q[qid];

	q->youth &= WEIR_DRR_Y_BONUS;
	if (q->listed >= WEIR_DRR_IDLE) {
		q->listed = 0;
		q->deficit = 0;
	}
}

/* Has queue qid's flow outlived its youth (weir_drr_youth_age)? */
static inline bool
weir_drr_youth_spent(const struct weir_drr_qtab *t, uint32_t qid)
{
	return (t->q[qid].youth & WEIR_DRR_Y_SPENT) != 0;
}

/*
 * Queue qid's flow, young, was active in one more period (its owner's
 * clock: lib/worker/worker_active.c). Once that makes `periods` (1..31) its youth
 * is spent for good, whatever it has sent. Returns true at that moment.
 */
static inline bool
weir_drr_youth_age(struct weir_drr_qtab *t, uint32_t qid, uint32_t periods)
{
	struct weir_drr_q *q = &t->q[qid];
	const uint8_t keep = WEIR_DRR_Y_BONUS | WEIR_DRR_Y_SPENT | WEIR_DRR_Y_CODEL;
	const uint32_t age = (uint32_t)(q->youth >> WEIR_DRR_Y_AGE_SHIFT) + 1u;

	if (q->youth & WEIR_DRR_Y_SPENT)
		return false;
	if (age >= periods) {
		q->youth = (uint8_t)((q->youth & keep) | WEIR_DRR_Y_SPENT);
		return true;
	}
	q->youth = (uint8_t)((q->youth & keep) | (age << WEIR_DRR_Y_AGE_SHIFT));
	return false;
}

/* Per-flow weight (1..255): the flow's share of its leaf, in quanta per round.
 * Takes effect from the queue's next round. */
static inline void
weir_drr_set_weight(struct weir_drr_qtab *t, uint32_t qid, uint8_t weight)
{
	t->q[qid].weight = weight ? weight : 1;
}

/* One scheduler. Embedded by its owner (a leaf class); no allocation. */
struct weir_drr {
	struct weir_drr_q *q;   /* the shared queue table */
	uint32_t last;          /* tail of the old list (its head is q[last].next) */
	uint32_t new_last;      /* tail of the new-flows list */
	uint32_t n_listed;      /* queues on either list: the backlogged ones */
	uint32_t old_turns;     /* turns the old list's heads have ended (WEIR_DRR_IDLE) */
	uint32_t n_new;         /* of those, queues on the new list */
	uint32_t new_run;       /* bytes the new list sent since an old queue last did */
	uint32_t new_visit;     /* bytes the new list's head sent in its present turn
				 * (zeroed whenever that head changes) */
	uint8_t  sparse;        /* new flows first (1, the default) or plain DRR (0) */
	uint8_t  new_quanta;    /* the new list's bound, quanta per old packet (1..16) */
	uint32_t young;         /* bytes a flow may send from the new list over its life
				 * beyond one quantum per activation; 0: one quantum */
	uint64_t new_flows;     /* queues that went on the new list */
	uint64_t new_deferred;  /* packets an old queue sent because the new list had its fill */
	uint64_t young_flows;   /* of new_flows, those that went on with a young budget */
	uint64_t young_spent;   /* young flows made old by time (weir_drr_youth_age) */
	/* CoDel per flow queue (RFC 8290), NULL = off: the queue table's
	 * state, the owner's parameters. Use weir_drr_dequeue_aqm. */
	struct weir_codel *codel;
	const struct weir_codel_params *aqm;
	uint64_t aqm_drops;     /* packets CoDel dropped */
	uint32_t pkts;          /* packets queued in all queues of this scheduler */
	uint32_t quantum;       /* bytes per round per unit of weight, >= MTU + overhead */
	uint64_t bytes;         /* wire bytes queued */
	uint16_t overhead;      /* added to pkt_len for every packet (0 or 24) */
	uint16_t limit;         /* copy of the table's per-queue limit */
	/* A flow of known round trip may queue up to one bandwidth-delay
	 * product at the leaf's rate when that is more than `limit`
	 * (weir_drr_set_bdp): packets per ms of round trip, << 16, and the
	 * most any queue may hold that way. 0: `limit` for every queue. */
	uint32_t bdp_q16;
	uint16_t bdp_max;
	const uint16_t *rtt_ms; /* the table's */
	/* TSC ticks a full frame takes at the leaf's rate (weir_drr_set_frame_ticks),
	 * 0: unknown. CoDel's round-trip interval is at least what a flow's
	 * share takes to send TCP's smallest window (lib/sched/codel.h). */
	uint32_t frame_ticks;
};

/* Initialise `d` over queue table `t`, new flows first. quantum must be >=
 * the largest wire frame so a round always lets the head queue send
 * (0 = 1538 + overhead). Set d->sparse = 0 for plain DRR. */
void weir_drr_init(struct weir_drr *d, struct weir_drr_qtab *t, uint32_t quantum, uint16_t overhead);

/* Wire length of a packet as the scheduler charges it. */
static inline uint32_t
weir_drr_wire_len(const struct weir_drr *d, const struct rte_mbuf *m)
{
	return rte_pktmbuf_pkt_len(m) + d->overhead;
}

enum weir_drr_rc {
	WEIR_DRR_OK = 0,
	WEIR_DRR_DROP_LIMIT = 1,        /* the flow's queue is full: tail drop */
};

/* Append m to queue qid. Returns WEIR_DRR_OK (m taken) or a drop reason
 * (m not taken, q->drops counted). */
int weir_drr_enqueue(struct weir_drr *d, uint32_t qid, struct rte_mbuf *m);
/* Append without the limit (packets admitted once already: a policy
 * switch moving them into a new tree). */
void weir_drr_append(struct weir_drr *d, uint32_t qid, struct rte_mbuf *m);

/*
 * Young flows (d->young > 0): weir_drr_enqueue for a packet of a flow that
 * has sent `attained` bytes in this direction so far (UINT64_MAX: unknown,
 * treated as old). A queue it makes backlogged goes on the new list with
 * one quantum plus what is left of its young budget (young - attained), so
 * a short transfer is served ahead of bulk flows for all of its first
 * `young` bytes, not only its first quantum: least-attained-service for
 * the head of every flow. The new list's bound (new_quanta quanta between
 * two old packets while old flows wait) still caps all young flows
 * together at about 3/4 of the leaf, and a flow is young only once in its life, so
 * a bulk sender gains one budget per connection and no more.
 *
 * Youth is bounded in time too: a flow active for longer than its owner
 * allows (weir_drr_youth_age) is old for good, whatever it has sent. A
 * young queue that empties leaves the
 * lists at once (an old one stays old until its old-list turn would come): its
 * next packet puts it back on the new list with what is left of its budget,
 * so a short transfer's next flight, a round trip later, does not wait a
 * whole round of the old flows.
 */
int weir_drr_enqueue_young(struct weir_drr *d, uint32_t qid, struct rte_mbuf *m, uint64_t attained);

/*
 * Queue qid's youth has just been spent (weir_drr_youth_age returned true):
 * if it waits on the new list with a young budget, that budget goes and at
 * most one quantum is left, so it joins the old flows after its next turn.
 * The budget was granted when it was listed and a backlogged queue is not
 * listed again: without this, bulk flows that start together keep the new
 * list past the time bound for as long as their budgets last, and a short
 * reply waits among them.
 */
void weir_drr_youth_end(struct weir_drr *d, uint32_t qid);

/*
 * The packet DRR sends next, without taking it (a class scheduler must see
 * its size before it decides to send). Rotates the active list as DRR rules
 * require, so repeated peeks return the same packet. NULL when empty.
 */
struct rte_mbuf *weir_drr_peek(struct weir_drr *d, uint32_t *qid);

/*
 * Take the packet the last peek returned (peeks itself if needed). *qid is
 * its queue and *qlen the packets left in that queue after it was taken:
 * the moment PostACK hooks (release held ACKs when qlen is 0 or 1).
 */
struct rte_mbuf *weir_drr_dequeue(struct weir_drr *d, uint32_t *qid, uint32_t *qlen);

/*
 * weir_drr_dequeue with CoDel on the queue whose turn it is: head packets
 * whose sojourn (now - meta ts, set at enqueue) says the queue stands are
 * dropped into dropped[] (at most max_drop, *n_dropped of them, their
 * queues in dropped_qid[]; the caller frees and counts them) before the
 * packet sent is taken. NULL
 * when nothing is left.
 */
struct rte_mbuf *weir_drr_dequeue_aqm(struct weir_drr *d, uint64_t now, uint32_t *qid,
				      uint32_t *qlen, struct rte_mbuf **dropped,
				      uint32_t *dropped_qid, unsigned int *n_dropped,
				      unsigned int max_drop);

/*
 * The class is full (its limit, not a flow's): rather than refuse the
 * arriving packet, drop from the head of the longest queue, as fq_codel
 * does, so a flood that keeps the class full costs the flooder and not
 * the short and sparse flows arriving beside it. weir_drr_fattest looks at
 * up to `budget` backlogged queues (the lists' heads first: bounded work
 * per overflow) and returns the longest with at least two packets, or
 * WEIR_DRR_NONE. weir_drr_evict takes that queue's head packet (the queue
 * stays on its list; its drops are counted) and returns it to the caller
 * to free.
 */
uint32_t weir_drr_fattest(const struct weir_drr *d, uint32_t budget);
struct rte_mbuf *weir_drr_evict(struct weir_drr *d, uint32_t qid);

/*
 * Take up to `max` packets from the head of queue qid, in order, into out[]
 * (flow end or eviction: the caller frees or forwards them). Returns the
 * count; call again while it returns max. When the queue empties it leaves
 * the active list at once (a walk of the list to find its predecessor: the
 * list is singly linked to keep a queue in 32 bytes, and drains are rare),
 * so the flow may then move to another leaf. *bytes (may be NULL) gets the
 * wire bytes taken.
 */
unsigned int weir_drr_drain(struct weir_drr *d, uint32_t qid, struct rte_mbuf **out,
			    unsigned int max, uint64_t *bytes);

/*
 * Hand queue qid, packets and all, from scheduler `from` to `to` (same
 * queue table): a flow classified anew while packets of it wait. Nothing is
 * copied or reordered; O(packets in the queue) to recount its bytes, plus
 * the unlink walk. A queue with nothing queued still leaves every list of
 * `from` (an emptied new queue waits on its old list). Returns the packets
 * moved; *bytes (may be NULL) their wire bytes.
 */
uint32_t weir_drr_move(struct weir_drr *from, struct weir_drr *to, uint32_t qid, uint64_t *bytes);

/*
 * Per-flow limits that follow the flow's round trip. A fixed `limit` below
 * a path's bandwidth-delay product caps a lone flow below its class: its
 * slow start ends in a burst of tail drops and a window cut below the
 * pipe. So a queue whose flow's round trip is known (its
 * handshake was timed: TCP) may hold up to WEIR_DRR_BDP_QUEUE x that round
 * trip x the leaf's rate, at most `max` (the leaf's limit or its part of
 * the pool); one with none (UDP, a flood) keeps `limit`. Two BDPs because
 * slow start's last round doubles the window and its bursts put more than
 * one BDP in the queue (cwnd 546 against a pipe of 250 measured); with one
 * BDP the flow still lost ~170 frames there, with two none: CoDel, not the
 * limit, then keeps the queue short. Checked only at `limit`: nothing is
 * added to the fast path.
 */
#define WEIR_DRR_BDP_QUEUE 2u
void weir_drr_set_bdp(struct weir_drr *d, uint64_t rate_bps, uint32_t frame_bytes, uint32_t max);
/* Ticks a frame of frame_bytes takes at rate_bps (0: unknown). */
void weir_drr_set_frame_ticks(struct weir_drr *d, uint64_t rate_bps, uint32_t frame_bytes,
			      uint64_t tsc_hz);
/* Queue qid's flow's round trip, ms (0: unknown, a new flow in the slot). */
void weir_drr_set_rtt(struct weir_drr_qtab *t, uint32_t qid, uint32_t rtt_ms);
/* Packets queue qid may hold in scheduler d. */
uint32_t weir_drr_queue_limit(const struct weir_drr *d, uint32_t qid);

static inline uint32_t
weir_drr_qlen(const struct weir_drr_qtab *t, uint32_t qid)
{
	return t->q[qid].len;
}

/* Queues with packets in this scheduler (the backlogged flows). */
static inline uint32_t
weir_drr_backlogged(const struct weir_drr *d)
{
	return d->n_listed;
}

#endif /* WEIR_DRR_H */
