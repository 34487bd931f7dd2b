/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the ACK store's layout and inline accessors (lib/modes/ackstore.h). For
 * the data plane only (the worker, the modes, white-box tests): the
 * management side sees the store through lib/worker/worker_view.h.
 */
#ifndef WEIR_ACKSTORE_INT_H
#define WEIR_ACKSTORE_INT_H

#include "ackstore.h"

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
	/* What the ACKs let go (passed or released) asked the sender for
	 * (their advance of the cumulative ACK) within the last round trip to
	 * it: the data on its way (the ACK loop). Two buckets of a
	 * round trip each, the older one counted for the part of it still
	 * inside the last round trip. Bytes. */
	uint32_t ack_hi;        /* highest cumulative ACK of this direction's data seen */
	uint32_t asked[2];      /* [0] the round trip before, [1] this one */
	uint32_t ask_epoch;     /* this one's start, TSC >> WEIR_PA_EPOCH_SHIFT */
	uint32_t rtt_inv;       /* 2^32 / (rtt >> WEIR_PA_EPOCH_SHIFT), saturated: no division per ACK */
	/* Furthest right edge shown to the sender by a packet no mode cuts
	 * (a SYN+ACK, data or a FIN carrying an ACK): the sender may send up
	 * to it whatever re_max says. ipabr's ACK clock (lib/modes/ipabr.c). */
	uint32_t seen_max;
	/* What the flow sent in this direction over its last activity period
	 * (lib/worker/worker_active.c: max-min shares): the low 32 bits of its byte
	 * count at its first data frame of the current period, and the bytes
	 * from its first frame of the period before to that one (valid with
	 * WEIR_PAQ_USE_VALID: it was seen in the period before). */
	uint32_t use_snap;
	uint32_t use;
};

static_assert(sizeof(struct weir_postack_q) == 64, "one cache line per flow direction");

#define WEIR_PAQ_RE_VALID       0x01    /* re_max */
#define WEIR_PAQ_DROP_VALID     0x02    /* drop_seq */
#define WEIR_PAQ_ACK_VALID      0x04    /* ack_hi */
#define WEIR_PAQ_SEEN_VALID     0x08    /* seen_max */
#define WEIR_PAQ_USE_VALID      0x10    /* use */
#define WEIR_PAQ_HEAVY          0x20    /* counted heavy in its class's share (not light) */

#define WEIR_PA_EPOCH_SHIFT     16      /* 22 us units at 3 GHz: 32 bits last 26 h */

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
		pa->q[d][slot].asked[0] = 0;
		pa->q[d][slot].asked[1] = 0;
	}
}

/* The sender of data direction d is `ticks` away (round trip). */
static inline void
weir_postack_set_rtt(struct weir_postack *pa, int d, uint32_t slot, uint64_t ticks)
{
	struct weir_postack_q *q = &pa->q[d][slot];
	uint32_t e;

	q->rtt = ticks > UINT32_MAX ? UINT32_MAX : ticks ? (uint32_t)ticks : 1;
	e = q->rtt >> WEIR_PA_EPOCH_SHIFT;
	q->rtt_inv = e > 1 ? (uint32_t)((1ull << 32) / e) : UINT32_MAX;   /* once per handshake */
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

/* An ACK of direction d's data with cumulative ACK `ack` reaches the
 * gateway: how far it advances the highest one seen (bytes, at most
 * 65535: what a record keeps), which it becomes. ACKs leave in the order
 * they came, so this is also its advance past the last one let go. */
static inline uint32_t
weir_postack_ack_adv(struct weir_postack *pa, int d, uint32_t slot, uint32_t ack)
{
	struct weir_postack_q *q = &pa->q[d][slot];
	uint32_t adv;

	if (!(q->flags & WEIR_PAQ_ACK_VALID)) {
		q->flags |= WEIR_PAQ_ACK_VALID;
		q->ack_hi = ack;
		return 0;
	}
	adv = ack - q->ack_hi;
	if ((int32_t)adv <= 0)
		return 0;
	q->ack_hi = ack;
	return adv > 0xffffu ? 0xffffu : adv;
}

/* An ACK asking direction d's sender for adv bytes went on. */
static inline void
weir_postack_asked(struct weir_postack *pa, int d, uint32_t slot, uint32_t adv)
{
	uint32_t *a = &pa->q[d][slot].asked[1];

	*a = *a + adv < *a ? UINT32_MAX : *a + adv;
}

/* The data asked of direction d's sender within the last round trip to
 * it (bytes; 0 while that round trip is unknown): the bucket of this
 * round trip and the older one's share of the rest of the window (linear:
 * asks spread evenly over it). Rolls the buckets. Not the asks less the
 * data arrived since: a growing window's data arrives unasked among the
 * asked, and with nothing to tell them apart the estimate drifted to 0
 * (docs/results/fct/ack-loop.md). */
static inline uint32_t
weir_postack_on_way(struct weir_postack *pa, int d, uint32_t slot, uint64_t now)
{
	struct weir_postack_q *q = &pa->q[d][slot];
	const uint32_t t = (uint32_t)(now >> WEIR_PA_EPOCH_SHIFT);
	const uint32_t e = RTE_MAX(q->rtt >> WEIR_PA_EPOCH_SHIFT, 1u);
	uint32_t age = t - q->ask_epoch;
	uint64_t frac16;

	if (q->rtt == 0)
		return 0;
	if (age >= e) {
		q->asked[0] = age >= 2 * e ? 0 : q->asked[1];
		q->asked[1] = 0;
		q->ask_epoch = age >= 2 * e ? t : q->ask_epoch + e;
		age = t - q->ask_epoch;
	}
	/* (e - age) / e, 16 bits of fraction */
	frac16 = RTE_MIN(((uint64_t)(e - age) * q->rtt_inv) >> 16, 1ull << 16);
	return (uint32_t)RTE_MIN((uint64_t)q->asked[1] + ((q->asked[0] * frac16) >> 16),
				 (uint64_t)UINT32_MAX);
}

#endif /* WEIR_ACKSTORE_INT_H */
