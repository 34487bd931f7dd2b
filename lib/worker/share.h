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
 *    queue. There each worker also reports how its flows used their shares
 *    in its last activity period (lib/worker/worker_active.c): the heavy ones (at
 *    least half their share) and the light ones with what they used. The
 *    light flows of a worker are given 2.5 times what they used, no more
 *    than the heavy flows' level; the heavy flows everywhere split the rest
 *    evenly (water-filling). So an idle or light connection counted on one
 *    worker does not hold half the class away from a bulk flow on another,
 *    and a flow held to a small part is still heavy: it uses all of it.
 *    (The use is sampled by the worker, not by the management lcore every
 *    10 ms: a flow paced to a small part reads zero between its bursts
 *    there, and its worker's part would stay at the floor.)
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
#define WEIR_SHARE_HEADROOM 2.5         /* light flows are given this times their use: above
                                         * 2, as a worker counts a flow light below half its
                                         * share, so what they are given keeps them light */

/* The management lcore's view of one direction's tree over n workers. */
struct weir_share {
	const struct weir_policy_tree *tree;
	unsigned int n_workers;
	uint16_t n_classes;
	double *x;              /* [w * n_classes + cls] smoothed backlogged flows (leaves) */
	/* by_use leaves, [w * n_classes + cls], smoothed as x: */
	double *heavy;          /* flows using at least half their share */
	double *nlight;         /* the other sending flows */
	double *light;          /* bit/s the light ones used */
	bool *by_use;           /* [cls] a leaf split by how its flows use it (WEIR_MODEF_WINDOW) */
	double *dem;            /* [w * n_classes + cls] scratch: demand */
	double *sub;            /* [w * n_classes + cls] scratch: active children's rates */
	double *sub_conf;       /* [cls] scratch: active children's configured rates */
	uint64_t *rate;         /* [w * n_classes + cls] the last split */
	uint64_t *ceil;
};

struct weir_share *weir_share_create(const struct weir_policy_tree *t, unsigned int n_workers);
void weir_share_free(struct weir_share *s);

/* One sample of leaf `leaf`'s backlogged flows on worker w. */
void weir_share_sample(struct weir_share *s, unsigned int w, uint32_t leaf, uint32_t backlogged);

/* One sample of how leaf `leaf`'s sending flows on worker w used their
 * shares in its last period: `heavy` of them used at least half, the
 * `light` others used `light_bps` together. Kept for by_use leaves only. */
void weir_share_sample_use(struct weir_share *s, unsigned int w, uint32_t leaf, uint32_t heavy,
			   uint32_t light, double light_bps);

/* Recompute every class's per-worker rate and ceiling from the samples. */
void weir_share_split(struct weir_share *s);

static inline uint64_t
weir_share_rate(const struct weir_share *s, unsigned int w, uint32_t cls)
{
	return s->rate[(size_t)w * s->n_classes + cls];
}

static inline uint64_t
weir_share_ceil(const struct weir_share *s, unsigned int w, uint32_t cls)
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

/* Classes of a tree of n the box carries: the first WEIR_CBQ_MAX_CLASSES
 * (the config's own classes and the first nodes). The others (a large
 * subscriber set's leaves) keep the even split their trees were built
 * with: re-dividing every subscriber's leaf every 10 ms is what subscriber
 * affinity (all of one subscriber's flows on one worker) is meant to make
 * needless. */
static inline uint16_t
weir_share_box_classes(uint16_t n)
{
	return n < WEIR_CBQ_MAX_CLASSES ? n : WEIR_CBQ_MAX_CLASSES;
}

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
