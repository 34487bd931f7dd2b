/* SPDX-License-Identifier: BSD-3-Clause
 * weir: TBQ, a token bucket with a packet queue (seed 004, Alg. 4.3.1), and
 * its low-delay variant (Alg. 4.3.2).
 *
 * A frame finding no tokens waits in the queue instead of being marked out
 * of profile; only when the queue is full is the head released red (or,
 * capped, the arriving frame dropped). The low-delay variant also releases
 * the head red with probability (qlen - MinThresh) / (queue - MinThresh)
 * once more than MinThresh frames wait (the instantaneous length, as the
 * thesis does). The thesis releases queued frames by a timer; here the
 * worker's loop calls weir_tbq_release every turn and an arrival releases
 * what tokens allow before it is looked at, so no per-packet timer exists
 * and frames leave in arrival order.
 */
#include "marker_int.h"

static inline void
push(struct weir_marker *k, struct rte_mbuf *m)
{
	uint32_t tail = k->qhead + k->qn;

	if (tail >= k->qcap)
		tail -= k->qcap;
	k->q[tail] = m;
	k->qn++;
	k->ctr.held++;
	k->ctr.qlen = k->qn;
}

static inline struct rte_mbuf *
pop(struct weir_marker *k)
{
	struct rte_mbuf *m = k->q[k->qhead];

	k->qhead = k->qhead + 1 == k->qcap ? 0 : k->qhead + 1;
	k->qn--;
	k->ctr.qlen = k->qn;
	return m;
}

static inline uint32_t
xorshift32(uint32_t *s)
{
	uint32_t x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*s = x;
	return x;
}

/* A frame larger than the bucket can hold never gets its tokens: waiting
 * for them would hold it (and everything behind it) forever. */
static inline bool
too_big(const struct weir_marker *k, uint32_t len)
{
	return ((uint64_t)len << 32) > k->tb.depth;
}

unsigned int
weir_tbq_release(struct weir_marker *k, uint64_t now, const struct weir_markers_out *out)
{
	unsigned int n = 0;

	while (k->qn > 0) {
		uint32_t len = rte_pktmbuf_pkt_len(k->q[k->qhead]);

		if (too_big(k, len))
			weir_marker_emit(k, pop(k), WEIR_RED, out);
		else if (weir_bucket_take(&k->tb, len, now))
			weir_marker_emit(k, pop(k), WEIR_GREEN, out);
		else
			break;
		n++;
	}
	return n;
}

uint64_t
weir_tbq_next(const struct weir_marker *k, uint64_t now)
{
	if (k->qn == 0)
		return UINT64_MAX;
	if (too_big(k, rte_pktmbuf_pkt_len(k->q[k->qhead])))
		return now;
	return weir_bucket_when(&k->tb, rte_pktmbuf_pkt_len(k->q[k->qhead]), now);
}

/* The queue is (or is drawn as) too long: one frame goes out of profile. */
static void
overflow(struct weir_marker *k, struct rte_mbuf *m, const struct weir_markers_out *out)
{
	if (k->capped) {
		/* A rate cap: what waits keeps its place, the newcomer is dropped. */
		k->ctr.dropped++;
		out->drop(out->arg, m);
		return;
	}
	weir_marker_emit(k, pop(k), WEIR_RED, out);
	push(k, m);
}

void
weir_tbq_pass(struct weir_marker *k, struct rte_mbuf *m, uint64_t now,
	      const struct weir_markers_out *out)
{
	weir_tbq_release(k, now, out);
	if (k->qn == 0) {
		if (too_big(k, rte_pktmbuf_pkt_len(m)))
			weir_marker_emit(k, m, WEIR_RED, out);
		else if (weir_bucket_take(&k->tb, rte_pktmbuf_pkt_len(m), now))
			weir_marker_emit(k, m, WEIR_GREEN, out);
		else
			push(k, m);
		return;
	}
	if (k->qn >= k->qcap) {
		overflow(k, m, out);
		return;
	}
	if (k->qn >= k->min_thresh) {   /* tbq-ld only: min_thresh < qcap */
		uint32_t span = k->qcap - k->min_thresh;

		if (xorshift32(&k->rnd) % span < k->qn - k->min_thresh) {
			if (!k->capped)
				k->ctr.early++;
			overflow(k, m, out);
			return;
		}
	}
	push(k, m);
}
