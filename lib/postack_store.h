/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the ACK store's layout and inline accessors (lib/postack.h). For
 * the data plane only (the worker, the modes, white-box tests): the
 * management side sees the store through lib/worker_view.h.
 */
#ifndef WEIR_POSTACK_STORE_H
#define WEIR_POSTACK_STORE_H

#include "postack.h"

/* ---- layout (single writer: the owning worker) ---- */

struct weir_postack_q {
	uint32_t head, tail;    /* record indices, WEIR_POSTACK_NONE when empty */
	uint16_t n;
	uint8_t listed;         /* on the watchdog ring */
	uint8_t flags;          /* WEIR_PAQ_*: which of the fields below hold a value */
	/* Round trip from the gateway to this direction's data sender and
	 * back (TSC ticks, 0 = unknown): how long a released ACK takes to
	 * bring data back. Measured on the handshake. */
	uint32_t rtt;
	uint64_t hs_tsc;        /* TSC of this direction's SYN (or SYN+ACK): times the handshake */
	uint32_t re_max;        /* furthest window right edge released to the sender (seq) */
	uint32_t drop_seq;      /* seq of this direction's last data segment the gateway dropped */
};

#define WEIR_PAQ_RE_VALID       0x01    /* re_max */
#define WEIR_PAQ_DROP_VALID     0x02    /* drop_seq */

struct weir_postack_rec;

struct weir_postack {
	struct weir_postack_q *q[2];            /* [d][slot] */
	struct weir_postack_rec *rec;           /* the pool */
	uint32_t free_head;                     /* free list through rec[].next */
	uint32_t n_flows;
	uint32_t n_acks;
	uint16_t ack_limit;
	uint32_t mbuf_cap;
	uint64_t idle_tsc;
	uint64_t rtt_unknown;   /* assumed round trip when the handshake was not seen */
	uint64_t clamp_target;  /* the share clamp's target, ticks */
	uint32_t clamp_margin16;        /* its margin over the BDP, << 16 */
	bool share_clamp;
	struct rte_mempool *mp;
	/* Watchdog ring of (d << 31 | slot) for flows holding ACKs, each at
	 * most once per direction: 2 x n_flows entries. */
	uint32_t *ring;
	uint32_t ring_size, ring_head, ring_n;
	struct weir_postack_stats st;
};

/* A new flow took `slot`: forget what the last one measured. */
static inline void
weir_postack_reset(struct weir_postack *pa, uint32_t slot)
{
	for (int d = 0; d < 2; d++) {
		pa->q[d][slot].rtt = 0;
		pa->q[d][slot].hs_tsc = 0;
		pa->q[d][slot].flags = 0;
	}
}

/* The sender of data direction d is `ticks` away (round trip). */
static inline void
weir_postack_set_rtt(struct weir_postack *pa, int d, uint32_t slot, uint64_t ticks)
{
	pa->q[d][slot].rtt = ticks > UINT32_MAX ? UINT32_MAX : ticks ? (uint32_t)ticks : 1;
}

static inline uint32_t
weir_postack_len(const struct weir_postack *pa, int d, uint32_t slot)
{
	return pa->q[d][slot].n;
}

static inline int
weir_postack_room(const struct weir_postack *pa)
{
	return pa->free_head != WEIR_POSTACK_NONE;
}

/* Round trip to data direction d's sender (the handshake's, or the
 * assumed one), TSC ticks. */
static inline uint64_t
weir_postack_rtt(const struct weir_postack *pa, int d, uint32_t slot)
{
	const struct weir_postack_q *q = &pa->q[d][slot];

	return q->rtt ? q->rtt : pa->rtt_unknown;
}

#endif /* WEIR_POSTACK_STORE_H */
