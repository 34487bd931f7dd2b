/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the class tree of one direction (CBQ/HTB-like link sharing).
 *
 * Class 0 is the root: the link, rate = ceil. Every other class names a
 * parent with a smaller index (the array is in tree order). Classes without
 * children are leaves; a leaf owns a DRR over the per-flow queues of its
 * flows (lib/sched/drr.h), and only leaves hold packets.
 *
 * Each class has two token buckets, both in bytes scaled by 2^shift and
 * refilled by (now - last) * rate with rate precomputed per TSC tick (see
 * docs/cbq.md): `rate` (guaranteed) and `ceil` (the most it may take by
 * borrowing). A class is
 *   red     when its ceil bucket is negative: it may not send at all;
 *   green   when its rate bucket is non-negative: it may send on its own;
 *   yellow  otherwise: it may send by borrowing from an ancestor.
 * A leaf sends when nothing on its path to the root is red and it, or the
 * nearest green ancestor (the lender), is green. Green leaves are served
 * before any borrowing; borrowers by priority (lower first), DRR among
 * leaves of one priority. The root's ceil gates every packet, so the link
 * rate holds for the sum whatever the children's settings.
 *
 * Single writer: the owning worker. Time is an argument (a TSC value).
 */
#ifndef WEIR_CBQ_H
#define WEIR_CBQ_H

#include <stdbool.h>
#include <stdint.h>
#include <rte_common.h>
#include <rte_mbuf.h>

#include "drr.h"
#include "qm.h"

/* Classes a tree built from a policy may have (config and Lua trees, and
 * the fixed arrays of their per-class state elsewhere). A tree itself is
 * sized at create time (weir_cbq_conf.capacity) up to WEIR_CBQ_CAPACITY_MAX:
 * class ids are 32-bit everywhere in this API. */
#define WEIR_CBQ_MAX_CLASSES 1024
#define WEIR_CBQ_CAPACITY_MAX (1u << 22)
#define WEIR_CBQ_MAX_DEPTH   8
#define WEIR_CBQ_NUM_PRIO    8
#define WEIR_CBQ_NONE        UINT32_MAX

#define WEIR_CBQ_RATE_MIN    8000ull            /* bit/s, a configured class */
#define WEIR_CBQ_SHARE_MIN   1ull               /* bit/s, a worker's part of one (set_rate) */
#define WEIR_CBQ_RATE_MAX    400000000000ull    /* bit/s */

struct weir_cbq_class_conf {
	uint32_t parent;        /* class index < own index (at create); ignored for class 0 */
	uint8_t  prio;          /* 0 (borrows first) .. WEIR_CBQ_NUM_PRIO-1 */
	uint64_t rate;          /* guaranteed, bit/s */
	uint64_t ceil;          /* bit/s, >= rate; 0 = rate */
	uint32_t limit;         /* leaf: packets queued in the class (all flows); 0 = no class limit */
	uint32_t quantum;       /* leaf: bytes per DRR round among leaves of one prio; 0 = mtu */
	uint8_t fifo;           /* leaf: its flows share one queue (the caller's queue id for
				 * it): only `limit` bounds it, not the per-flow limit */
	uint8_t aqm;            /* leaf: CoDel on each flow queue (lib/sched/codel.h) */
	uint8_t plain;          /* leaf: plain DRR, no new-flows list (lib/sched/drr.h) */
	uint8_t qm;             /* fifo leaf: its queue manager, enum weir_qm_kind (lib/sched/qm.h);
				 * such a leaf never cuts through (the manager sees every
				 * arrival) */
	uint32_t young;         /* leaf: young-flow budget in bytes (weir_drr.young); 0 = none */
	uint8_t new_quanta;     /* leaf: the new-flows list's bound (weir_drr.new_quanta); 0 = default */
	/* Bucket depths in bytes above the rate and the ceiling (HTB's burst
	 * and cburst); 0 = the tree's burst_us at that rate. At least one
	 * full frame either way. */
	uint32_t burst;
	uint32_t cburst;
	/* Time boost: a leaf that was idle (nothing queued) for boost_idle_ms
	 * or more gets boost_ceil bit/s as its ceiling for boost_ms from its
	 * next packet, then its own ceiling again. 0 = none. */
	uint64_t boost_ceil;
	uint32_t boost_ms;
	uint32_t boost_idle_ms;
};

struct weir_cbq_conf {
	int socket_id;
	uint64_t tsc_hz;
	uint32_t n_classes;                     /* classes in `classes` (ids 0..n-1) */
	uint32_t capacity;                      /* ids the tree can ever hold (weir_cbq_class_add);
						 * 0 = n_classes; <= WEIR_CBQ_CAPACITY_MAX */
	const struct weir_cbq_class_conf *classes;
	uint32_t n_queues;                      /* per-flow queue ids 0..n-1 (flow table slots) */
	uint16_t flow_limit;                    /* packets per flow queue */
	uint32_t flow_quantum;                  /* bytes per DRR round per flow weight; 0 = mtu */
	uint16_t overhead;                      /* bytes added per packet: 0, or 24 = preamble+SFD+IFG+FCS */
	uint16_t mtu;                           /* largest frame (pkt_len) expected; 0 = 1518 */
	uint32_t burst_us;                      /* bucket depth as time at the bucket's rate; 0 = 1000 */
	/* Packets the whole tree may hold (its share of the mempool; 0 = no
	 * bound). Leaf limits can add up to more than the pool: without this
	 * one direction's queues could take every mbuf, and nothing, not
	 * even the other direction or ARP, could be received. Past 3/4 of it
	 * a leaf holding more than its equal part is refused; at it, all. */
	uint32_t backlog_limit;
	const struct weir_qm_params *qm_params; /* fifo leaves' queue managers; NULL = defaults */
};

/* Counters of one class. bytes/pkts count what left through the class
 * (a leaf's and all its descendants'); borrowed = bytes sent while the
 * class itself was yellow; lent = bytes a class lent to a descendant. */
struct weir_cbq_stats {
	uint64_t bytes;
	uint64_t pkts;
	uint64_t drops;         /* leaf: refused at enqueue (sum of the four below) */
	uint64_t drops_flow;    /* the flow's queue was full */
	uint64_t drops_class;   /* the class limit was reached */
	uint64_t drops_pool;    /* the tree's backlog_limit (its mempool share) was reached */
	uint64_t drops_qm;      /* the leaf's queue manager refused it (lib/sched/qm.h: why) */
	uint64_t borrowed;
	uint64_t lent;
	uint32_t qlen;          /* leaf: packets queued now */
	uint32_t backlogged;    /* leaf: flows with packets queued now */
	uint64_t new_flows;     /* leaf: queues served from the new-flows list (lib/sched/drr.h) */
	uint64_t new_deferred;  /* leaf: packets old flows sent past waiting new ones (its bound) */
	uint64_t young_flows;   /* leaf: of new_flows, those served with a young budget */
	uint64_t young_spent;   /* leaf: young flows made old by waiting beside others */
	uint64_t drops_aqm;     /* leaf: dropped at dequeue (not in `drops`): by CoDel, or
				 * CHOKe's victims reaching the head */
	uint64_t qbytes;        /* leaf: wire bytes queued now */
	uint64_t rate_bps;      /* as set now (a worker's share, see weir_cbq_set_rate) */
	uint64_t ceil_bps;
};

enum weir_cbq_rc {
	WEIR_CBQ_OK = 0,
	WEIR_CBQ_DROP_FLOW = 1,         /* the flow's queue is at flow_limit */
	WEIR_CBQ_DROP_CLASS = 2,        /* the leaf is at its limit */
	WEIR_CBQ_DROP_BADCLASS = 3,     /* not a leaf, or out of range */
	WEIR_CBQ_DROP_QM = 4,           /* the leaf's queue manager (RED, CHOKe, PQM) */
	WEIR_CBQ_DROP_POOL = 5,         /* the tree is at its backlog_limit */
};

#define WEIR_CBQ_AQM_MAX 8      /* packets one dequeue call may drop by CoDel */

/* What a dequeue found. */
struct weir_cbq_deq {
	/* Packets CoDel or CHOKe dropped on the way (the caller frees and counts
	 * them), with their leaves and flow queues: even when NULL is
	 * returned. */
	uint16_t n_dropped;
	uint32_t dropped_leaf[WEIR_CBQ_AQM_MAX];
	uint32_t dropped_qid[WEIR_CBQ_AQM_MAX];
	struct rte_mbuf *dropped[WEIR_CBQ_AQM_MAX];
	uint32_t leaf;          /* class the packet left from */
	uint32_t queue_id;      /* its flow queue */
	uint32_t qlen;          /* packets left in that flow queue (PostACK's test) */
	uint64_t next_tsc;      /* on NULL: earliest TSC anything may be sendable,
				 * UINT64_MAX when nothing is queued */
};

struct weir_cbq;

struct weir_cbq *weir_cbq_create(const struct weir_cbq_conf *conf);
void weir_cbq_free(struct weir_cbq *c);

/* Queue m in flow queue queue_id of leaf `leaf`. 0: taken; else a drop
 * reason and the caller still owns m (frees it). Counted per class and, for
 * WEIR_CBQ_DROP_FLOW, on the flow's queue. */
int weir_cbq_enqueue(struct weir_cbq *c, uint32_t leaf, uint32_t queue_id,
		     struct rte_mbuf *m, uint64_t now);
/* The same, for a packet of a flow that has sent `attained` bytes in this
 * direction so far (the leaf's young-flow budget, weir_drr_enqueue_young). */
int weir_cbq_enqueue_young(struct weir_cbq *c, uint32_t leaf, uint32_t queue_id,
			   struct rte_mbuf *m, uint64_t now, uint64_t attained);
/* The same; when the leaf is at its limit and it has per-flow queues, the
 * head of its longest queue is dropped instead of m (lib/sched/drr.h,
 * weir_drr_fattest): *evicted (else NULL) is that packet, *evicted_qid its
 * queue, for the caller to count and free; m is then queued (0). */
int weir_cbq_enqueue_evict(struct weir_cbq *c, uint32_t leaf, uint32_t queue_id,
			   struct rte_mbuf *m, uint64_t now, uint64_t attained,
			   struct rte_mbuf **evicted, uint32_t *evicted_qid);

/* Queue m as weir_cbq_enqueue does but past the leaf's and the flow's
 * limits: for packets admitted once already (a policy switch moving them
 * into a new tree). 0, or WEIR_CBQ_DROP_BADCLASS. */
int weir_cbq_requeue(struct weir_cbq *c, uint32_t leaf, uint32_t queue_id, struct rte_mbuf *m);

/* Cut-through: with nothing queued anywhere in the tree, a packet of leaf
 * `leaf` (pkt_len bytes) whose path may pay for it now would be the very next
 * dequeue. Then it is charged as that dequeue would charge it (counters
 * included) and true is returned: the caller sends it without queueing.
 * False: queue it (weir_cbq_enqueue). */
bool weir_cbq_cut_through(struct weir_cbq *c, uint32_t leaf, uint32_t pkt_len, uint64_t now);
/* Nothing queued anywhere in the tree. */
bool weir_cbq_empty(const struct weir_cbq *c);

/* The next packet the tree allows at `now`, or NULL (see out->next_tsc). */
struct rte_mbuf *weir_cbq_dequeue(struct weir_cbq *c, uint64_t now, struct weir_cbq_deq *out);

/* Change a class's rate and ceil (bit/s) at run time, O(1) (two divisions,
 * not per packet). Tokens already earned are kept (clamped to the new
 * bucket). Owning worker only, between bursts. Returns 0 or -EINVAL. */
int weir_cbq_set_rate(struct weir_cbq *c, uint32_t cls, uint64_t rate, uint64_t ceil);

/* Take a flow's packets out of its leaf (flow end, eviction), in order; as
 * weir_drr_drain, class counters kept right. */
unsigned int weir_cbq_drain(struct weir_cbq *c, uint32_t leaf, uint32_t queue_id,
			    struct rte_mbuf **out, unsigned int max);

/* Empty the tree queue by queue, ignoring rates (a policy switch): up to
 * max packets of one flow queue, in order, with its leaf and queue id;
 * 0 when the tree is empty. Start with *leaf = 0 and pass it back. */
unsigned int weir_cbq_drain_next(struct weir_cbq *c, uint32_t *leaf, uint32_t *queue_id,
				 struct rte_mbuf **out, unsigned int max);

/* Move flow queue queue_id with what it holds from leaf `from` to leaf `to`
 * (re-classification), in order, no packet touched. Returns packets moved
 * or -EINVAL. The destination's limit is not applied: they were admitted. */
int weir_cbq_move(struct weir_cbq *c, uint32_t queue_id, uint32_t from, uint32_t to);

int weir_cbq_stats(const struct weir_cbq *c, uint32_t cls, struct weir_cbq_stats *out);
/* A fifo leaf's queue-manager counters: 0, or -ENOENT (no manager). */
int weir_cbq_qm_stats(const struct weir_cbq *c, uint32_t cls, struct weir_qm_stats *out);
int weir_cbq_is_leaf(const struct weir_cbq *c, uint32_t cls);
uint64_t weir_cbq_rate(const struct weir_cbq *c, uint32_t cls);    /* bit/s now, 0 if no such class */
uint64_t weir_cbq_ceil(const struct weir_cbq *c, uint32_t cls);    /* bit/s it may borrow up to */
uint32_t weir_cbq_backlog(const struct weir_cbq *c);       /* packets queued in the tree */
uint32_t weir_cbq_leaf_qlen(const struct weir_cbq *c, uint32_t leaf);      /* packets in a leaf */
uint32_t weir_cbq_leaf_backlogged(const struct weir_cbq *c, uint32_t leaf); /* its flows with packets */
/* Is flow qid, which has sent `attained` bytes, young in leaf `leaf` (within
 * its young-flow budget, and not made old by waiting: lib/sched/drr.h)? */
bool weir_cbq_young(const struct weir_cbq *c, uint32_t leaf, uint32_t qid, uint64_t attained);

/* Young flow qid of leaf `leaf` was active in one more period; true when
 * that made `periods` and its youth is now spent (weir_drr_youth_age),
 * counted in the leaf's young_spent. */
bool weir_cbq_youth_age(struct weir_cbq *c, uint32_t leaf, uint32_t qid, uint32_t periods);

/* Leaf `leaf`'s class limit in packets (0: none, or not a leaf). */
uint32_t weir_cbq_leaf_limit(const struct weir_cbq *c, uint32_t leaf);

/* Leaf `leaf`'s young-flow budget in bytes (0: none, or not a leaf). */
uint32_t weir_cbq_young_budget(const struct weir_cbq *c, uint32_t leaf);
/* Flow queue qid has a new flow (rtt 0) or its round trip was measured
 * (TSC ticks): CoDel's interval for it follows (lib/sched/codel.h). No-op when
 * no leaf of the tree runs CoDel. */
void weir_cbq_flow_rtt(struct weir_cbq *c, uint32_t qid, uint64_t rtt);
/* Queue qid's slot holds a new flow: round trip unknown, young again. */
void weir_cbq_flow_new(struct weir_cbq *c, uint32_t qid);
struct weir_drr_qtab *weir_cbq_qtab(struct weir_cbq *c);   /* per-flow weights, qlen */

/*
 * Run-time changes of one class, by its owning worker between bursts (the
 * management lcore sends them as commands, lib/worker_cmd.h). Nothing
 * queued is dropped or reordered and counters are kept.
 */
/* Change class cls's rate, ceil, burst, cburst, prio, limit, quantum and
 * boost from conf (its parent and the leaf's kind, fifo/aqm/plain/qm/young,
 * stay as created). 0, -EINVAL (no such class, bad figures) . */
int weir_cbq_class_set(struct weir_cbq *c, uint32_t cls, const struct weir_cbq_class_conf *conf);
/* A new leaf with id cls (a free id < capacity) under `parent` (an
 * existing class holding no packets: a leaf parent becomes an inner class).
 * fifo and qm are refused (-ENOTSUP): those leaves are built with the tree.
 * 0, -EINVAL, -EEXIST (cls in use), -EBUSY (the parent holds packets). */
int weir_cbq_class_add(struct weir_cbq *c, uint32_t cls, const struct weir_cbq_class_conf *conf);
/* Remove leaf cls, which must hold no packets (-EBUSY): its id is free
 * again. A parent left with no children is a leaf again. The caller sees to
 * it that no flow still names it (enqueue refuses a free id). */
int weir_cbq_class_remove(struct weir_cbq *c, uint32_t cls);
/* A free id (< capacity), or WEIR_CBQ_NONE. O(1). */
uint32_t weir_cbq_class_free_id(const struct weir_cbq *c);
/* Class ids the tree can hold, and bytes it takes per class (the tree's
 * own state; per-flow queues are weir_drr_qtab's, per flow slot). */
uint32_t weir_cbq_capacity(const struct weir_cbq *c);
size_t weir_cbq_bytes_per_class(void);

/* Leaves the dequeue side has looked at since create (a cost measure for
 * tests and benchmarks: per dequeue it does not grow with idle leaves nor
 * with throttled ones, docs/cbq.md). */
uint64_t weir_cbq_visits(const struct weir_cbq *c);

#endif /* WEIR_CBQ_H */
