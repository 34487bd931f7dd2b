/* SPDX-License-Identifier: BSD-3-Clause
 * weir: PQM and PQM-PB (the thesis' Algorithm 5.3.1) on a fifo leaf.
 *
 * REM underneath: every interval the price moves by
 *   gamma (in + alpha (b - target) - capacity)
 * (in: what arrived past the penalty test, b: the backlog, capacity: what
 * the leaf sends in an interval, all in packets of pkt_mean bytes), kept
 * >= 0; p = 1 - phi^-price; an arrival of l bytes is dropped with
 * probability p l / pkt_mean (byte mode). A flow REM drops from joins the
 * monitored set: REM's drops fall on flows in proportion to their bytes, so
 * a flood is caught within a few drops, a TCP flow now and then.
 *
 * Only monitored flows have a rate estimate (Eq. 5.6, CSFQ's exponential
 * average with K). The fair rate of a TCP flow at this price is
 *   r_fair = pkt_max / rtt_min * sqrt(3 / 2p)           (Eq. 5.1)
 * an upper bound (the largest packets, the shortest RTT); the thesis
 * prints "l^mean d", the formula needs l / d. A monitored flow whose rate
 * after REM, r (1 - p), is above it loses the arrival. PQM leaves the
 * dropped frame out of the rate (the flow is held near the fair rate, as a
 * fair scheduler would); PQM-PB counts it (a flow that does not slow down
 * stays above the fair rate and loses everything).
 *
 * The set is fixed in size: its keys and rates are packed arrays, found
 * through an open-addressing index twice the set's size (linear probing
 * from a multiplicative hash of the key: one or two probes whatever the
 * size, where a scan of 1,024 keys cost PQM 2.6x a plain fifo), nothing
 * looked up when the set is empty. A sweep
 * every 10 rtt_min (the thesis' "few past round-trip times") lets go of
 * flows that were not penalised since the last one: a TCP flow caught by a
 * REM drop leaves again, a flood stays. A flow to add finding the set full
 * is counted (monitor_full) and not monitored.
 */
#include <math.h>
#include <string.h>

#include <rte_common.h>
#include <rte_malloc.h>

#include "qm_int.h"

int
weir_pqm_init(struct weir_qm *q, int socket_id)
{
	struct weir_pqm *s = &q->pqm;
	const struct weir_qm_params *p = &q->par;

	s->size = p->monitor;
	s->keys = rte_zmalloc_socket("weir_pqm_keys", (size_t)s->size * sizeof(*s->keys),
				     RTE_CACHE_LINE_SIZE, socket_id);
	s->flows = rte_zmalloc_socket("weir_pqm_flows", (size_t)s->size * sizeof(*s->flows),
				      RTE_CACHE_LINE_SIZE, socket_id);
	/* At most half full: a probe sequence always meets an empty slot. */
	s->index_mask = rte_align32pow2(2 * RTE_MAX(s->size, 1u)) - 1;
	s->index_shift = 32 - (uint32_t)rte_bsf32(s->index_mask + 1);
	s->index = rte_zmalloc_socket("weir_pqm_index", (size_t)(s->index_mask + 1) *
				      sizeof(*s->index), RTE_CACHE_LINE_SIZE, socket_id);
	if (s->keys == NULL || s->flows == NULL || s->index == NULL || s->size > UINT16_MAX)
		return -1;
	q->bytes += (uint64_t)s->size * (sizeof(*s->keys) + sizeof(*s->flows)) +
		    (uint64_t)(s->index_mask + 1) * sizeof(*s->index);
	s->hz = (double)q->tsc_hz;
	s->ln_phi = log(p->phi);
	s->k_ticks = (double)p->k_us * 1e-6 * s->hz;
	s->interval = (uint64_t)((double)p->interval_us * 1e-6 * s->hz) + 1;
	s->sweep = (uint64_t)(10.0 * p->rtt_min_us * 1e-6 * s->hz) + 1;
	s->fair = INFINITY;
	weir_pqm_set_rate(q);
	return 0;
}

void
weir_pqm_fini(struct weir_qm *q)
{
	rte_free(q->pqm.keys);
	rte_free(q->pqm.flows);
	rte_free(q->pqm.index);
	q->pqm.keys = NULL;
	q->pqm.flows = NULL;
	q->pqm.index = NULL;
}

void
weir_pqm_set_rate(struct weir_qm *q)
{
	struct weir_pqm *s = &q->pqm;

	s->cap = (double)q->rate_bps / 8 * ((double)s->interval / s->hz) / q->par.pkt_mean;
}

static inline uint32_t
home(const struct weir_pqm *s, uint32_t key)
{
	return (uint32_t)(key * 2654435761u) >> s->index_shift;       /* Knuth's multiplier */
}

static void
index_add(struct weir_pqm *s, uint32_t key, uint32_t entry)
{
	uint32_t h = home(s, key);

	while (s->index[h] != 0)
		h = (h + 1) & s->index_mask;
	s->index[h] = (uint16_t)(entry + 1);
}

/* Let go of flows not penalised since the last sweep (the last entry
 * moves into the hole: the order means nothing), then index the rest
 * again (once per sweep, a few microseconds for 1,024 flows). */
static void
sweep(struct weir_pqm *s)
{
	for (uint32_t i = 0; i < s->n;) {
		if (s->flows[i].penalized == 0) {
			s->n--;
			s->keys[i] = s->keys[s->n];
			s->flows[i] = s->flows[s->n];
			continue;
		}
		s->flows[i].penalized = 0;
		i++;
	}
	memset(s->index, 0, (size_t)(s->index_mask + 1) * sizeof(*s->index));
	for (uint32_t i = 0; i < s->n; i++)
		index_add(s, s->keys[i], i);
}

/* REM's price for the intervals that ended by `now` (cold: once per
 * interval; an idle gap is folded into one step). */
static void
update_price(struct weir_qm *q, uint64_t qbytes, uint64_t now)
{
	struct weir_pqm *s = &q->pqm;
	const struct weir_qm_params *p = &q->par;
	/* The first arrival starts the clock. */
	uint64_t n = s->next_update ? (now - s->next_update) / s->interval + 1 : 1;
	double b = (double)qbytes / p->pkt_mean;
	double step = p->alpha * (b - p->target) - s->cap;

	s->price += p->gamma * ((double)s->in_bytes / p->pkt_mean + step);
	if (n > 1)
		s->price += p->gamma * step * (double)RTE_MIN(n - 1, (uint64_t)1 << 30);
	if (s->price < 0)
		s->price = 0;
	s->in_bytes = 0;
	s->next_update = s->next_update ? s->next_update + n * s->interval : now + s->interval;
	s->prob = 1 - exp(-s->price * s->ln_phi);
	s->fair = s->prob > 0 ? (double)p->pkt_max / (p->rtt_min_us * 1e-6) * sqrt(1.5 / s->prob)
			      : INFINITY;
	if (now >= s->next_sweep) {
		sweep(s);
		s->next_sweep = now + s->sweep;
	}
}

static inline int32_t
find(const struct weir_pqm *s, uint32_t key)
{
	for (uint32_t h = home(s, key);; h = (h + 1) & s->index_mask) {
		uint16_t e = s->index[h];

		if (e == 0)
			return -1;
		if (s->keys[e - 1] == key)
			return e - 1;
	}
}

/* Eq. 5.6: r = (1 - e^-T/K) l / T + e^-T/K r; as T -> 0 it tends to r + l / K. */
static inline double
rate_after(const struct weir_pqm *s, const struct weir_pqm_flow *f, uint32_t len, uint64_t now)
{
	double t = now > f->last ? (double)(now - f->last) : 0;
	double w;

	if (t < 1e-6 * s->k_ticks)
		return f->rate + len * s->hz / s->k_ticks;
	w = exp(-t / s->k_ticks);
	return (1 - w) * len * s->hz / t + w * f->rate;
}

static void
monitor(struct weir_qm *q, uint32_t key, uint64_t now)
{
	struct weir_pqm *s = &q->pqm;

	if (s->n == s->size) {
		q->st.monitor_full++;
		return;
	}
	s->keys[s->n] = key;
	index_add(s, key, s->n);
	/* Rate 0 and penalised once, so it lives to the next sweep's look:
	 * the estimate climbs to the flow's rate within about K. */
	s->flows[s->n] = (struct weir_pqm_flow){ .rate = 0, .last = now, .penalized = 1 };
	s->n++;
	q->st.monitor_added++;
}

enum weir_qm_verdict
weir_pqm_arrive(struct weir_qm *q, struct rte_mbuf *m, uint64_t qbytes, uint64_t now)
{
	struct weir_pqm *s = &q->pqm;
	uint32_t len = rte_pktmbuf_pkt_len(m);
	uint32_t key = 0;
	int32_t i = -1;

	if (unlikely(now >= s->next_update))
		update_price(q, qbytes, now);
	if (s->n > 0) {
		key = weir_qm_flow_key(m);
		i = find(s, key);
	}
	if (i >= 0) {
		struct weir_pqm_flow *f = &s->flows[i];
		double r = rate_after(s, f, len, now);

		if (r * (1 - s->prob) > s->fair) {
			f->penalized++;
			if (q->kind == WEIR_QM_PQM_PB) {
				f->rate = r;
				f->last = now;
			}
			return WEIR_QM_DROP_PENALTY;
		}
		f->rate = r;
		f->last = now;
	}
	s->in_bytes += len;
	if (s->prob > 0 && weir_qm_uniform(q) * q->par.pkt_mean < s->prob * len) {
		if (i < 0) {
			if (s->n == 0)
				key = weir_qm_flow_key(m);
			monitor(q, key, now);
		}
		return WEIR_QM_DROP_EARLY;
	}
	return WEIR_QM_ADMIT;
}
