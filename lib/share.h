/* SPDX-License-Identifier: BSD-3-Clause
 * weir: one class tree's rates shared among several workers.
 *
 * Each worker owns a private copy of every class tree (no locks, no shared
 * token state on the fast path), so with n workers a class's configured
 * rate must be divided among the copies. A static 1/n is exact only when
 * flows spread evenly; instead the management lcore re-divides every
 * class every few milliseconds by where its demand is:
 *
 *  - demand of a leaf on a worker = how many of its flows there have data
 *    queued (DRR's backlogged list), smoothed (EWMA, gain 1/4 per sample).
 *    A flow held back by its worker's share queues, so it gains weight and
 *    pulls rate towards itself; an idle connection weighs nothing.
 *  - a leaf's rate and ceiling are split in proportion to that weight plus
 *    a small floor per worker (WEIR_SHARE_FLOOR flows), so a new flow on a
 *    worker with none can start before the next split.
 *  - a leaf whose mode sizes windows to the worker's part (tcr, ipabr)
 *    counts its flows while they send, queued or not, since they never
 *    queue: there a worker also reports what its flows sent (smoothed, bit/s).
 *    A worker that used less than half its part is not limited by it: it
 *    is given 2.5 times what it used, no more than its flows' fair share; the
 *    limited workers split the rest by their flows (water-filling). So an
 *    idle or light connection counted on one worker does not hold half the
 *    class away from a bulk flow on another.
 *  - an inner class (and the link) gives each worker what its active
 *    children there were given, and splits the rest of its rate (what idle
 *    children leave, and any excess over the children's sum) by the demand
 *    of the active leaves below, each counted at its ceiling (what it could
 *    use), with a 1 % floor per worker; a subtree idle everywhere is split
 *    evenly. Children asking more than their parent are scaled down.
 *
 * The totals over workers stay the configured rates (up to rounding and the
 * 8 kbit/s minimum per copy). Workers pick new rates up from a per-worker
 * mailbox (seqlock-style) between bursts; see docs/multiworker.md.
 */
#ifndef WEIR_SHARE_H
#define WEIR_SHARE_H

#include <stdbool.h>
#include <stdint.h>
#include <rte_common.h>

#include "cbq.h"
#include "policy.h"

#define WEIR_SHARE_FLOOR 0.02           /* flows a leaf counts on every worker */
#define WEIR_SHARE_INNER_FLOOR 0.01     /* share of an inner class each worker keeps */
#define WEIR_SHARE_GAIN 0.25            /* EWMA gain per sample */
#define WEIR_SHARE_LIMITED 0.5          /* used this much of its part: limited by it */
#define WEIR_SHARE_HEADROOM 2.5         /* a worker not limited is given this times its use:
                                         * above 1 / LIMITED, so the floors do not tip it over */

/* The management lcore's view of one direction's tree over n workers. */
struct weir_share {
	const struct weir_policy_tree *tree;
	unsigned int n_workers;
	uint16_t n_classes;
	double *x;              /* [w * n_classes + cls] smoothed backlogged flows (leaves) */
	double *used;           /* [w * n_classes + cls] smoothed bit/s sent (by_use leaves) */
	uint64_t *sent;         /* [w * n_classes + cls] the leaf's byte counter last sampled */
	double *sent_at;        /* [w * n_classes + cls] when, in seconds; < 0: not yet */
	bool *by_use;           /* [cls] a leaf split by what its workers use (WEIR_MODEF_WINDOW) */
	double *dem;            /* [w * n_classes + cls] scratch: demand */
	double *sub;            /* [w * n_classes + cls] scratch: active children's rates */
	double *sub_conf;       /* [cls] scratch: active children's configured rates */
	uint64_t *rate;         /* [w * n_classes + cls] the last split */
	uint64_t *ceil;
};

struct weir_share *weir_share_create(const struct weir_policy_tree *t, unsigned int n_workers);
void weir_share_free(struct weir_share *s);

/* One sample of leaf `leaf`'s backlogged flows on worker w. */
void weir_share_sample(struct weir_share *s, unsigned int w, uint16_t leaf, uint32_t backlogged);

/* One sample of what leaf `leaf` sent on worker w: its byte counter (the
 * tree's, running) at time `now` in seconds. Only leaves split by use
 * (by_use) keep it; the first sample, or a counter that went back (a new
 * tree), only sets the reference. */
void weir_share_sample_sent(struct weir_share *s, unsigned int w, uint16_t leaf, uint64_t bytes,
			    double now);

/* Recompute every class's per-worker rate and ceiling from the samples. */
void weir_share_split(struct weir_share *s);

static inline uint64_t
weir_share_rate(const struct weir_share *s, unsigned int w, uint16_t cls)
{
	return s->rate[(size_t)w * s->n_classes + cls];
}

static inline uint64_t
weir_share_ceil(const struct weir_share *s, unsigned int w, uint16_t cls)
{
	return s->ceil[(size_t)w * s->n_classes + cls];
}

/*
 * A worker's mailbox: the management lcore writes both directions' rates
 * for one policy epoch; the worker applies them between bursts. seq is odd
 * while a write is in progress; a reader that sees seq change under it
 * tries again on its next loop (each class's pair is applied on its own,
 * so a partly applied set is still a valid set of rates).
 */
struct weir_share_box {
	uint32_t seq;
	uint32_t epoch;
	uint16_t n_classes[2];
	uint64_t rate[2][WEIR_CBQ_MAX_CLASSES];
	uint64_t ceil[2][WEIR_CBQ_MAX_CLASSES];
} __rte_cache_aligned;

/* Publish s[dir]'s split for worker w into its box (s[dir] may be NULL:
 * that direction is unshaped). */
void weir_share_publish(struct weir_share_box *b, uint32_t epoch, struct weir_share *const s[2],
			unsigned int w);

/* Whether s[dir]'s split for worker w differs from what its box holds by
 * enough to post (1/64 of a class's rate or ceiling): the EWMA moves a
 * little every round, and each post costs the worker a pass over its
 * classes. The management lcore is the box's only writer. */
bool weir_share_moved(const struct weir_share_box *b, uint32_t epoch,
		      struct weir_share *const s[2], unsigned int w);

#endif /* WEIR_SHARE_H */
