/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the class tree's private state, shared by cbq.c (the scheduler and
 * its changes) and cbq_view.c (what callers may read of it). Nothing else
 * includes it: struct weir_cbq stays opaque (cbq.h).
 */
#ifndef WEIR_CBQ_INT_H
#define WEIR_CBQ_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "cbq.h"
#include "codel.h"
#include "drr.h"

/*
 * A token bucket in fixed point: tokens are bytes << shift. Each bucket has
 * its own shift, the largest that keeps its whole range (debt floor to
 * burst) under 2^61, so a slow rate keeps many fraction bits (8 kbit/s at a
 * 3 GHz TSC is 3.3e-7 bytes a tick) and a fast one keeps its burst in
 * range. The refill is one multiply: dt is clamped to dt_max, the ticks
 * that fill the bucket from its floor, so dt * rate never overflows and no
 * division is needed per packet.
 */
struct weir_tb {
	int64_t  tokens;        /* bytes << shift; negative = debt */
	int64_t  burst;         /* most tokens it may hold */
	int64_t  floor;         /* most debt it may carry */
	uint64_t rate;          /* (bytes << shift) per TSC tick */
	uint64_t dt_max;        /* ticks from floor to burst */
	uint32_t shift;
};

/* Where a backlogged leaf is (docs/cbq.md, "Only backlogged leaves"). */
enum {
	LS_IDLE = 0,    /* nothing queued: on no list, not in the wait heap */
	LS_LISTED,      /* on its priority's list (and the green list when green);
			 * in the heap when yellow, keyed by when it turns green */
	LS_PARKED,      /* blocked: on no list, in the heap keyed by the earliest
			 * time its path might let it send */
};

struct cbq_class {
	/* Hot: read on every dequeue that looks at this class or a descendant. */
	struct weir_tb tb;      /* guaranteed rate */
	struct weir_tb ctb;     /* ceil */
	uint64_t last;          /* TSC of the last refill */
	uint32_t parent;        /* WEIR_CBQ_NONE for the root */
	uint32_t anext, aprev;  /* its priority's list of unblocked backlogged leaves */
	uint32_t gnext, gprev;  /* of those, the green ones (own rate bucket >= 0) */
	uint32_t hpos;          /* index in the wait heap, WEIR_CBQ_NONE when not in it */
	uint64_t hkey;          /* its key there (TSC) */
	uint64_t hseq;          /* ties of hkey leave in the order they came (DRR's) */
	uint8_t  prio;
	uint8_t  is_leaf;
	uint8_t  state;         /* LS_* (leaves) */
	uint8_t  green;         /* on the green list */
	uint8_t  depth;
	uint8_t  used;          /* the id is a class (weir_cbq_class_add/remove) */
	uint8_t  evict;         /* a full leaf drops from its longest flow queue (not a fifo) */
	uint8_t  boosted;       /* its ceiling is boost_ceil until boost_end */
	int32_t  deficit;       /* DRR among leaves of one priority */
	uint32_t quantum;
	uint32_t limit;
	uint32_t nchild;
	uint64_t boost_end;     /* TSC the boost ends (boosted) */
	struct weir_drr drr;    /* leaves only */
	struct weir_qm *qm;     /* a fifo leaf's queue manager, or NULL */
	/* Cold. */
	uint64_t rate_bps, ceil_bps;
	uint32_t burst, cburst; /* configured depths in bytes, 0 = from burst_us */
	uint64_t boost_ceil;
	uint64_t boost_ticks, boost_idle; /* TSC ticks */
	uint64_t idle_since;    /* TSC its queues last emptied */
	struct weir_cbq_stats st;
} __rte_cache_aligned;

struct weir_cbq {
	uint64_t tsc_hz;
	uint32_t burst_us;
	uint32_t maxpkt;        /* mtu + overhead: the most one packet costs */
	uint16_t overhead;
	uint32_t n;             /* ids 0..n-1 have been used (a high-water mark) */
	uint32_t cap;           /* ids the tree can hold */
	uint32_t free_head;     /* free ids below n, chained through anext */
	uint32_t backlog;       /* packets in all leaves */
	uint32_t backlog_soft;  /* past this, only leaves under their equal part queue */
	uint32_t backlog_hard;  /* at this, nobody (UINT32_MAX: no bound) */
	uint32_t leaf_part;     /* a leaf's equal part of backlog_soft */
	uint32_t fq;            /* per-flow quantum */
	struct weir_codel_params aqm;   /* CoDel's, for leaves with aqm */
	uint32_t alast[WEIR_CBQ_NUM_PRIO];     /* tail of each priority's list */
	uint32_t acount[WEIR_CBQ_NUM_PRIO];
	uint32_t glast[WEIR_CBQ_NUM_PRIO];     /* tail of each priority's green list */
	uint32_t gcount[WEIR_CBQ_NUM_PRIO];
	uint32_t *heap;         /* wait heap of leaf ids, min hkey first */
	uint32_t hn;
	uint8_t  rewake;        /* rates changed: every heap key may be late */
	uint64_t visits;        /* leaves looked at by dequeue */
	uint64_t hseq;          /* heap entries so far */
	struct weir_drr_qtab *qt;
	struct cbq_class cls[];
};

static inline bool
class_ok(const struct weir_cbq *c, uint32_t cls)
{
	return cls < c->n && c->cls[cls].used;
}

#endif /* WEIR_CBQ_INT_H */
