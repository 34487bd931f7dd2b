/* SPDX-License-Identifier: BSD-3-Clause
 * weir: RED (Floyd & Jacobson 1993) on a fifo leaf, packet mode, as ns-2
 * ran it for the thesis' baselines: an EWMA of the queue at each arrival
 * (decayed over idle time as if small packets had gone by), no drop below
 * min_th, a probability rising linearly to max_p at max_th and spread out
 * by the count since the last drop, every arrival dropped above max_th.
 */
#include "qm_int.h"

void
weir_red_init(struct weir_qm *q, uint32_t limit)
{
	struct weir_red *r = &q->red;
	uint32_t lim = limit ? limit : 300;

	/* The thesis' 100/200 of a 300-packet queue, in proportion. */
	r->min_th = q->par.min_th ? q->par.min_th : RTE_MAX(lim / 3, 1u);
	r->max_th = q->par.max_th ? q->par.max_th : RTE_MAX(2 * lim / 3, (uint32_t)r->min_th + 1);
	r->max_p = q->par.max_p;
	r->wq = q->par.wq;
	r->count = -1;
	weir_red_set_rate(q);
}

void
weir_red_set_rate(struct weir_qm *q)
{
	/* Idle time is counted in packets of pkt_mean at the leaf's rate. */
	q->red.pkt_ticks = (uint64_t)((double)q->par.pkt_mean * 8 * (double)q->tsc_hz /
				      (double)q->rate_bps) + 1;
}

void
weir_red_average(struct weir_qm *q, uint32_t qlen, uint64_t now)
{
	struct weir_red *r = &q->red;

	if (qlen == 0 && r->avg > 0) {
		/* An empty queue: as many zero samples as frames could have
		 * gone in the idle time (one pow per idle period, not per
		 * packet of a busy queue). */
		double idle = now > r->last_left ? (double)(now - r->last_left) / r->pkt_ticks : 0;

		r->avg *= pow(1 - r->wq, idle);
	}
	r->avg += r->wq * ((double)qlen - r->avg);
}

enum weir_qm_verdict
weir_red_decide(struct weir_qm *q)
{
	struct weir_red *r = &q->red;
	double pb, pa;

	if (r->avg < r->min_th) {
		r->count = -1;
		return WEIR_QM_ADMIT;
	}
	if (r->avg >= r->max_th) {
		r->count = 0;
		return WEIR_QM_DROP_FORCED;
	}
	r->count++;
	pb = r->max_p * (r->avg - r->min_th) / (r->max_th - r->min_th);
	/* Uniform spacing of drops (RED's count): pa = pb / (1 - count pb). */
	pa = r->count * pb >= 1 ? 1 : pb / (1 - r->count * pb);
	if (weir_qm_uniform(q) < pa) {
		r->count = 0;
		return WEIR_QM_DROP_EARLY;
	}
	return WEIR_QM_ADMIT;
}
