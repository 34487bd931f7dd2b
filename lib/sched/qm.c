/* SPDX-License-Identifier: BSD-3-Clause
 * weir: a fifo leaf's queue manager, one object per leaf (lib/sched/qm.h). This
 * file is the dispatch, the parameters and the flow key; the algorithms
 * are lib/sched/red.c, lib/sched/choke.c and lib/sched/pqm.c.
 */
#include <string.h>

#include <rte_hash_crc.h>
#include <rte_malloc.h>

#include "mbuf_meta.h"
#include "qm_int.h"

static const char *const qm_names[WEIR_QM__COUNT] = {
	[WEIR_QM_NONE] = "none",
	[WEIR_QM_RED] = "red",
	[WEIR_QM_CHOKE] = "choke",
	[WEIR_QM_PQM] = "pqm",
	[WEIR_QM_PQM_PB] = "pqm-pb",
};

const char *
weir_qm_name(unsigned int kind)
{
	return kind < WEIR_QM__COUNT ? qm_names[kind] : NULL;
}

int
weir_qm_by_name(const char *name)
{
	for (int i = 0; i < WEIR_QM__COUNT; i++)
		if (strcmp(name, qm_names[i]) == 0)
			return i;
	return -1;
}

void
weir_qm_params_defaults(struct weir_qm_params *p)
{
	/* RED as ns-2 and the CHOKe paper ran it; REM as in its paper and
	 * the thesis (gamma 0.005, alpha 0.1, phi 1.001, 2 ms updates, a
	 * 20-packet target); PQM's bounds as the thesis' 30 ms / 1000 B. */
	if (p->max_p == 0)
		p->max_p = 0.1;
	if (p->wq == 0)
		p->wq = 0.002;
	if (p->gamma == 0)
		p->gamma = 0.005;
	if (p->alpha == 0)
		p->alpha = 0.1;
	if (p->phi == 0)
		p->phi = 1.001;
	if (p->target == 0)
		p->target = 20;
	if (p->interval_us == 0)
		p->interval_us = 2000;
	if (p->pkt_mean == 0)
		p->pkt_mean = 1000;
	if (p->pkt_max == 0)
		p->pkt_max = 1000;
	if (p->rtt_min_us == 0)
		p->rtt_min_us = 30000;
	if (p->k_us == 0)
		p->k_us = 100000;
	if (p->monitor == 0)
		p->monitor = 64;
	if (p->seed == 0)
		p->seed = 0x9e3779b9u;
}

const char *
weir_qm_params_check(const struct weir_qm_params *in, uint32_t limit)
{
	struct weir_qm_params p = *in;

	weir_qm_params_defaults(&p);
	if (p.min_th != 0 && p.max_th != 0 && p.min_th >= p.max_th)
		return "min_th must be below max_th";
	if (limit != 0 && p.max_th > limit)
		return "max_th is above the class limit: RED would never see it";
	if (!(p.max_p > 0 && p.max_p <= 1))
		return "max_p must be in (0, 1]";
	if (!(p.wq > 0 && p.wq < 1))
		return "wq must be in (0, 1)";
	if (!(p.gamma > 0 && p.gamma < 1000))
		return "gamma must be positive";
	if (!(p.alpha > 0 && p.alpha < 1000))
		return "alpha must be positive";
	if (!(p.phi > 1 && p.phi < 10))
		return "phi must be above 1 (p = 1 - phi^-price)";
	if (p.monitor > WEIR_QM_MONITOR_MAX)
		return "monitor is at most 1024 flows";
	if (p.pkt_mean < 40 || p.pkt_max < 40 || p.pkt_mean > 65535 || p.pkt_max > 65535)
		return "pkt_mean and pkt_max must be 40 .. 65535 bytes";
	if (p.interval_us > 1000000 || p.rtt_min_us > 10000000 || p.k_us > 10000000)
		return "interval (<= 1 s), rtt_min (<= 10 s) and K (<= 10 s) are too large";
	return NULL;
}

uint32_t
weir_qm_flow_key(const struct rte_mbuf *m)
{
	const struct weir_pkt *p = &weir_mbuf_meta((struct rte_mbuf *)(uintptr_t)m)->pkt;
	const uint8_t *a;
	uint32_t h = ((uint32_t)p->sport << 16 | p->dport) ^ ((uint32_t)p->l4proto << 8);

	/* Frames without addresses (not IP) share one key: they are not
	 * flows, and a fifo class rarely sees them. The parser checked that
	 * the addresses lie in the first segment. */
	if (p->addr_len == 0)
		return h;
	a = rte_pktmbuf_mtod(m, const uint8_t *) + p->l3_off + p->saddr_off;
	return rte_hash_crc(a, 2u * p->addr_len, h);
}

struct weir_qm *
weir_qm_create(enum weir_qm_kind kind, const struct weir_qm_params *p, uint64_t rate_bps,
	       uint32_t limit, uint64_t tsc_hz, int socket_id)
{
	struct weir_qm *q;

	if (kind <= WEIR_QM_NONE || kind >= WEIR_QM__COUNT || tsc_hz == 0 || rate_bps == 0 ||
	    (p != NULL && weir_qm_params_check(p, limit) != NULL))
		return NULL;
	q = rte_zmalloc_socket("weir_qm", sizeof(*q), RTE_CACHE_LINE_SIZE, socket_id);
	if (q == NULL)
		return NULL;
	q->kind = (uint8_t)kind;
	if (p != NULL)
		q->par = *p;
	weir_qm_params_defaults(&q->par);
	q->rng = ((uint64_t)q->par.seed << 32) | (q->par.seed ^ 0x5bd1e995u);
	q->tsc_hz = tsc_hz;
	q->rate_bps = rate_bps;
	q->bytes = sizeof(*q);
	weir_red_init(q, limit);
	if ((kind == WEIR_QM_CHOKE && weir_choke_init(q, limit, socket_id) < 0) ||
	    ((kind == WEIR_QM_PQM || kind == WEIR_QM_PQM_PB) && weir_pqm_init(q, socket_id) < 0)) {
		weir_qm_free(q);
		return NULL;
	}
	return q;
}

void
weir_qm_free(struct weir_qm *q)
{
	if (q == NULL)
		return;
	weir_choke_fini(q);
	weir_pqm_fini(q);
	rte_free(q);
}

static inline void
count(struct weir_qm *q, enum weir_qm_verdict v)
{
	switch (v) {
	case WEIR_QM_DROP_EARLY:
		q->st.drops_early++;
		break;
	case WEIR_QM_DROP_FORCED:
		q->st.drops_forced++;
		break;
	case WEIR_QM_DROP_CHOKE:
		q->st.drops_choke++;
		break;
	case WEIR_QM_DROP_PENALTY:
		q->st.drops_penalty++;
		break;
	default:
		break;
	}
}

enum weir_qm_verdict
weir_qm_arrive(struct weir_qm *q, struct rte_mbuf *m, uint32_t qlen, uint64_t qbytes, uint64_t now)
{
	enum weir_qm_verdict v;

	/* Victims still queued are gone as far as the load goes. */
	qlen -= RTE_MIN(qlen, q->choke.doomed);
	switch (q->kind) {
	case WEIR_QM_RED:
		weir_red_average(q, qlen, now);
		v = weir_red_decide(q);
		break;
	case WEIR_QM_CHOKE:
		v = weir_choke_arrive(q, m, qlen, now);
		break;
	default:
		v = weir_pqm_arrive(q, m, qbytes, now);
		break;
	}
	if (v != WEIR_QM_ADMIT)
		count(q, v);
	return v;
}

void
weir_qm_queued(struct weir_qm *q, struct rte_mbuf *m)
{
	if (q->kind == WEIR_QM_CHOKE)
		weir_choke_queued(q, m);
}

bool
weir_qm_left(struct weir_qm *q, struct rte_mbuf *m, uint64_t now)
{
	if (now > q->red.last_left)     /* RED's idle time starts at the last departure */
		q->red.last_left = now;
	return q->kind == WEIR_QM_CHOKE && weir_choke_left(q, m);
}

void
weir_qm_set_rate(struct weir_qm *q, uint64_t rate_bps)
{
	if (rate_bps == 0)
		return;
	q->rate_bps = rate_bps;
	weir_red_set_rate(q);
	if (q->kind == WEIR_QM_PQM || q->kind == WEIR_QM_PQM_PB)
		weir_pqm_set_rate(q);
}

void
weir_qm_stats(const struct weir_qm *q, struct weir_qm_stats *out)
{
	*out = q->st;
	out->avg = q->red.avg;
	out->price = q->pqm.price;
	out->prob = q->pqm.prob;
	out->fair_bps = isinf(q->pqm.fair) ? 0 : q->pqm.fair * 8;
	out->monitored = q->pqm.n;
	out->monitor_size = q->pqm.size;
	out->state_bytes = q->bytes;
}
