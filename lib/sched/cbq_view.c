/* SPDX-License-Identifier: BSD-3-Clause
 * weir: reading a class tree (sizes, counters, rates, queue lengths) and the
 * per-flow hooks that reach its queues; cbq.c schedules and changes it.
 */
#include "cbq_int.h"

uint32_t
weir_cbq_class_free_id(const struct weir_cbq *c)
{
	if (c->free_head != WEIR_CBQ_NONE)
		return c->free_head;
	return c->n < c->cap ? c->n : WEIR_CBQ_NONE;
}

uint32_t
weir_cbq_capacity(const struct weir_cbq *c)
{
	return c->cap;
}

size_t
weir_cbq_bytes_per_class(void)
{
	/* The class and its wait-heap slot. */
	return sizeof(struct cbq_class) + sizeof(uint32_t);
}

uint64_t
weir_cbq_visits(const struct weir_cbq *c)
{
	return c->visits;
}

int
weir_cbq_stats(const struct weir_cbq *c, uint32_t cls, struct weir_cbq_stats *out)
{
	const struct cbq_class *k;

	if (cls >= c->n || !c->cls[cls].used)
		return -EINVAL;
	k = &c->cls[cls];
	*out = k->st;
	out->qlen = k->is_leaf ? k->drr.pkts : 0;
	out->qbytes = k->is_leaf ? k->drr.bytes : 0;
	out->backlogged = k->is_leaf ? weir_drr_backlogged(&k->drr) : 0;
	out->drops_aqm = k->st.drops_aqm;
	out->new_flows = k->is_leaf ? k->drr.new_flows : 0;
	out->new_deferred = k->is_leaf ? k->drr.new_deferred : 0;
	out->young_flows = k->is_leaf ? k->drr.young_flows : 0;
	out->young_spent = k->is_leaf ? k->drr.young_spent : 0;
	out->rate_bps = k->rate_bps;
	out->ceil_bps = k->ceil_bps;
	return 0;
}

int
weir_cbq_qm_stats(const struct weir_cbq *c, uint32_t cls, struct weir_qm_stats *out)
{
	if (cls >= c->n || c->cls[cls].qm == NULL)
		return -ENOENT;
	weir_qm_stats(c->cls[cls].qm, out);
	return 0;
}

uint64_t
weir_cbq_rate(const struct weir_cbq *c, uint32_t cls)
{
	return cls < c->n ? c->cls[cls].rate_bps : 0;
}

/* The most cls may send when it borrows: its ceil (at least its rate), at
 * most the root's, the link. */
uint64_t
weir_cbq_ceil(const struct weir_cbq *c, uint32_t cls)
{
	if (cls >= c->n)
		return 0;
	return RTE_MIN(RTE_MAX(c->cls[cls].rate_bps, c->cls[cls].ceil_bps),
		       RTE_MAX(c->cls[0].rate_bps, c->cls[0].ceil_bps));
}

int
weir_cbq_is_leaf(const struct weir_cbq *c, uint32_t cls)
{
	return cls < c->n && c->cls[cls].is_leaf;
}

uint32_t
weir_cbq_backlog(const struct weir_cbq *c)
{
	return c->backlog;
}

uint32_t
weir_cbq_leaf_qlen(const struct weir_cbq *c, uint32_t leaf)
{
	return leaf < c->n && c->cls[leaf].is_leaf ? c->cls[leaf].drr.pkts : 0;
}

uint32_t
weir_cbq_leaf_backlogged(const struct weir_cbq *c, uint32_t leaf)
{
	return leaf < c->n && c->cls[leaf].is_leaf ? weir_drr_backlogged(&c->cls[leaf].drr) : 0;
}

bool
weir_cbq_young(const struct weir_cbq *c, uint32_t leaf, uint32_t qid, uint64_t attained)
{
	return leaf < c->n && c->cls[leaf].is_leaf && attained < c->cls[leaf].drr.young &&
	       qid < c->qt->n && !weir_drr_youth_spent(c->qt, qid);
}

bool
weir_cbq_youth_age(struct weir_cbq *c, uint32_t leaf, uint32_t qid, uint32_t periods)
{
	if (leaf >= c->n || !c->cls[leaf].is_leaf || qid >= c->qt->n ||
	    !weir_drr_youth_age(c->qt, qid, periods))
		return false;
	c->cls[leaf].drr.young_spent++;
	weir_drr_youth_end(&c->cls[leaf].drr, qid);
	return true;
}

uint32_t
weir_cbq_leaf_limit(const struct weir_cbq *c, uint32_t leaf)
{
	return leaf < c->n && c->cls[leaf].is_leaf ? c->cls[leaf].limit : 0;
}

uint32_t
weir_cbq_young_budget(const struct weir_cbq *c, uint32_t leaf)
{
	return leaf < c->n && c->cls[leaf].is_leaf ? (uint32_t)c->cls[leaf].drr.young : 0;
}

void
weir_cbq_flow_new(struct weir_cbq *c, uint32_t qid)
{
	if (qid >= c->qt->n)
		return;
	weir_cbq_flow_rtt(c, qid, 0);
	weir_drr_flow_new(c->qt, qid);
}

void
weir_cbq_flow_rtt(struct weir_cbq *c, uint32_t qid, uint64_t rtt)
{
	if (qid >= c->qt->n)
		return;
	if (c->qt->codel != NULL)
		weir_codel_set_rtt(&c->qt->codel[qid], &c->aqm, rtt);
	weir_drr_set_rtt(c->qt, qid, (uint32_t)RTE_MIN(rtt * 1000 / c->tsc_hz, (uint64_t)UINT16_MAX));
}

struct weir_drr_qtab *
weir_cbq_qtab(struct weir_cbq *c)
{
	return c->qt;
}
