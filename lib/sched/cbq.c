/* SPDX-License-Identifier: BSD-3-Clause
 * weir: class tree of one direction. See cbq.h for the model and
 * docs/cbq.md for the token arithmetic.
 */
#include <errno.h>
#include <string.h>

#include <rte_malloc.h>

#include "cbq.h"
#include "cbq_int.h"

static inline int64_t
tb_bytes(int64_t fp, uint32_t shift)
{
	/* Shift the magnitude so negative values round towards zero portably. */
	return fp >= 0 ? (int64_t)((uint64_t)fp >> shift) : -(int64_t)((uint64_t)-fp >> shift);
}

/* Set up (or re-set, keeping earned tokens) a bucket for `bps` bit/s.
 * Cold path: the divisions here run once per configuration change. */
static void
tb_setup(struct weir_tb *b, uint64_t bps, uint64_t hz, uint32_t burst_us, uint32_t maxpkt, int keep,
	 uint32_t depth)
{
	uint64_t burst_bytes, range;
	int64_t old_bytes = keep ? tb_bytes(b->tokens, b->shift) : 0;
	uint32_t s;
	unsigned __int128 r;

	/* Depth: burst_us of traffic at this rate, at least one full packet
	 * (so even 8 kbit/s can pass a 1518-byte frame), see docs/cbq.md. */
	burst_bytes = depth ? depth : (uint64_t)(((unsigned __int128)bps * burst_us) / 8000000u);
	if (burst_bytes < maxpkt)
		burst_bytes = maxpkt;
	range = 2 * burst_bytes + 2 * (uint64_t)maxpkt;
	for (s = 48; s > 0; s--) {
		r = (((unsigned __int128)bps << s) + 4 * hz) / (8 * (unsigned __int128)hz);
		if (((unsigned __int128)range << s) < ((unsigned __int128)1 << 61) &&
		    r < ((unsigned __int128)1 << 60))
			break;
	}
	b->shift = s;
	b->rate = (uint64_t)((((unsigned __int128)bps << s) + 4 * hz) / (8 * (unsigned __int128)hz));
	if (b->rate == 0)
		b->rate = 1;
	b->burst = (int64_t)(burst_bytes << s);
	b->floor = -(int64_t)((burst_bytes + maxpkt) << s);
	b->dt_max = (uint64_t)(b->burst - b->floor) / b->rate + 1;
	/* A new bucket starts full; a re-rated one keeps what it had. */
	if (!keep)
		old_bytes = (int64_t)burst_bytes;
	if (old_bytes > (int64_t)burst_bytes)
		old_bytes = (int64_t)burst_bytes;
	if (old_bytes < -(int64_t)(burst_bytes + maxpkt))
		old_bytes = -(int64_t)(burst_bytes + maxpkt);
	b->tokens = old_bytes >= 0 ? (int64_t)((uint64_t)old_bytes << s)
				   : -(int64_t)((uint64_t)-old_bytes << s);
}

static inline void
tb_fill(struct weir_tb *b, uint64_t dt)
{
	int64_t t;

	if (unlikely(dt >= b->dt_max)) {
		b->tokens = b->burst;
		return;
	}
	t = b->tokens + (int64_t)(dt * b->rate);
	b->tokens = t > b->burst ? b->burst : t;
}

static inline void
tb_charge(struct weir_tb *b, uint32_t bytes)
{
	int64_t t = b->tokens - (int64_t)((uint64_t)bytes << b->shift);

	b->tokens = t < b->floor ? b->floor : t;
}

/* Ticks until the bucket is non-negative (0 if it is). Division: used only
 * when nothing can be sent, to tell the worker when to come back. */
static inline uint64_t
tb_wait(const struct weir_tb *b)
{
	if (b->tokens >= 0)
		return 0;
	return ((uint64_t)-b->tokens + b->rate - 1) / b->rate;
}

static inline void
class_refill(struct cbq_class *k, uint64_t now)
{
	uint64_t dt;

	if (now <= k->last)
		return;         /* same instant (or a TSC from another core behind) */
	dt = now - k->last;
	k->last = now;
	tb_fill(&k->tb, dt);
	tb_fill(&k->ctb, dt);
}

static void
class_set_buckets(struct weir_cbq *c, struct cbq_class *k, uint64_t rate, uint64_t ceil, int keep)
{
	k->rate_bps = rate;
	k->ceil_bps = ceil;
	tb_setup(&k->tb, rate, c->tsc_hz, c->burst_us, c->maxpkt, keep, k->burst);
	tb_setup(&k->ctb, k->boosted ? RTE_MAX(ceil, k->boost_ceil) : ceil, c->tsc_hz, c->burst_us,
		 c->maxpkt, keep, k->cburst);
}

/* A leaf's per-flow queues may hold a bandwidth-delay product at its
 * ceiling for flows of known round trip (lib/sched/drr.h: a lone flow far away
 * fills its class), at most the leaf's limit and its part of the pool. */
static void
leaf_set_bdp(struct weir_cbq *c, struct cbq_class *k)
{
	uint32_t max = k->limit ? k->limit : UINT16_MAX;

	if (!k->is_leaf || !k->evict)
		return;         /* fifo: one shared queue, the leaf's limit only */
	weir_drr_set_bdp(&k->drr, k->ceil_bps, c->maxpkt, RTE_MIN(max, c->leaf_part));
	weir_drr_set_frame_ticks(&k->drr, k->ceil_bps, c->maxpkt, c->tsc_hz);
}

static int
rate_ok(uint64_t rate, uint64_t ceil, uint64_t min)
{
	return rate >= min && rate <= WEIR_CBQ_RATE_MAX && ceil >= rate && ceil <= WEIR_CBQ_RATE_MAX;
}

/* Fill class k from conf: its buckets and, for a leaf, its scheduler.
 * fq: the per-flow quantum. -EINVAL on figures out of range. */
static int
class_init(struct weir_cbq *c, struct cbq_class *k, const struct weir_cbq_class_conf *cc,
	   uint64_t ceil, uint32_t fq)
{
	if (!rate_ok(cc->rate, ceil, WEIR_CBQ_RATE_MIN) || cc->prio >= WEIR_CBQ_NUM_PRIO ||
	    (cc->boost_ceil != 0 && cc->boost_ceil > WEIR_CBQ_RATE_MAX))
		return -EINVAL;
	k->is_leaf = 1;         /* until a child names it */
	k->used = 1;
	k->prio = cc->prio;
	k->limit = cc->limit;
	k->quantum = cc->quantum ? cc->quantum : c->maxpkt;
	if (k->quantum < c->maxpkt)
		return -EINVAL;
	k->anext = k->aprev = k->gnext = k->gprev = WEIR_CBQ_NONE;
	k->hpos = WEIR_CBQ_NONE;
	k->burst = cc->burst;
	k->cburst = cc->cburst;
	k->boost_ceil = cc->boost_ceil;
	k->boost_ticks = (uint64_t)cc->boost_ms * (c->tsc_hz / 1000);
	k->boost_idle = (uint64_t)cc->boost_idle_ms * (c->tsc_hz / 1000);
	class_set_buckets(c, k, cc->rate, ceil, 0);
	weir_drr_init(&k->drr, c->qt, fq, c->overhead);
	if (cc->fifo)
		k->drr.limit = UINT16_MAX;
	k->evict = !cc->fifo;
	k->drr.sparse = !cc->plain;
	if (cc->new_quanta)
		k->drr.new_quanta = RTE_MIN(cc->new_quanta, WEIR_DRR_NEW_QUANTA_MAX);
	k->drr.young = cc->plain || cc->fifo ? 0 : RTE_MIN(cc->young, WEIR_DRR_YOUNG_MAX);
	if (cc->aqm) {
		k->drr.codel = c->qt->codel;
		k->drr.aqm = &c->aqm;
	}
	return 0;
}

struct weir_cbq *
weir_cbq_create(const struct weir_cbq_conf *conf)
{
	struct weir_cbq *c;
	uint32_t i, n = conf->n_classes;
	uint32_t cap = conf->capacity ? conf->capacity : n;
	uint32_t mtu = conf->mtu ? conf->mtu : 1518;
	uint32_t fq;

	if (n == 0 || cap < n || cap > WEIR_CBQ_CAPACITY_MAX || conf->classes == NULL ||
	    conf->tsc_hz < 1000000 || conf->flow_limit == 0)
		return NULL;
	c = rte_zmalloc_socket("weir_cbq", sizeof(*c) + (size_t)cap * sizeof(c->cls[0]),
			       RTE_CACHE_LINE_SIZE, conf->socket_id);
	if (c == NULL)
		return NULL;
	c->tsc_hz = conf->tsc_hz;
	c->burst_us = conf->burst_us ? conf->burst_us : 1000;
	c->overhead = conf->overhead;
	c->maxpkt = mtu + conf->overhead;
	c->n = n;
	c->cap = cap;
	c->free_head = WEIR_CBQ_NONE;
	for (i = 0; i < WEIR_CBQ_NUM_PRIO; i++)
		c->alast[i] = c->glast[i] = WEIR_CBQ_NONE;
	c->heap = rte_malloc_socket("weir_cbq_heap", (size_t)cap * sizeof(*c->heap), 0,
				    conf->socket_id);
	if (c->heap == NULL)
		goto fail;
	c->qt = weir_drr_qtab_create(conf->n_queues, conf->flow_limit, conf->socket_id);
	if (c->qt == NULL)
		goto fail;
	fq = conf->flow_quantum ? conf->flow_quantum : c->maxpkt;
	if (fq < c->maxpkt)
		goto fail;      /* a round must let any packet through */
	c->fq = fq;
	/* RFC 8289's defaults: 5 ms target, 100 ms interval. */
	c->aqm.target = conf->tsc_hz / 200;
	c->aqm.interval = conf->tsc_hz / 10;
	for (i = 0; i < n && c->qt->codel == NULL; i++)
		if (conf->classes[i].aqm) {
			c->qt->codel = rte_zmalloc_socket("weir_codel",
				(size_t)c->qt->n * sizeof(*c->qt->codel), RTE_CACHE_LINE_SIZE,
				conf->socket_id);
			if (c->qt->codel == NULL)
				goto fail;
		}

	for (i = 0; i < n; i++) {
		const struct weir_cbq_class_conf *cc = &conf->classes[i];
		struct cbq_class *k = &c->cls[i];
		uint64_t ceil = cc->ceil ? cc->ceil : cc->rate;

		if (i == 0) {
			k->parent = WEIR_CBQ_NONE;
			ceil = cc->rate;        /* the link: nothing to borrow from */
		} else {
			if (cc->parent >= i)
				goto fail;
			k->parent = cc->parent;
			k->depth = c->cls[cc->parent].depth + 1;
			if (k->depth >= WEIR_CBQ_MAX_DEPTH)
				goto fail;
			c->cls[cc->parent].is_leaf = 0;
			c->cls[cc->parent].nchild++;
		}
		if (class_init(c, k, cc, ceil, fq) != 0)
			goto fail;
	}
	/* Queue managers once the tree is known: only a fifo leaf has one. */
	for (i = 1; i < n; i++) {
		const struct weir_cbq_class_conf *cc = &conf->classes[i];
		struct cbq_class *k = &c->cls[i];

		if (cc->qm == WEIR_QM_NONE)
			continue;
		if (!k->is_leaf || !cc->fifo)
			goto fail;
		k->qm = weir_qm_create((enum weir_qm_kind)cc->qm, conf->qm_params, k->ceil_bps,
				       cc->limit, conf->tsc_hz, conf->socket_id);
		if (k->qm == NULL)
			goto fail;
	}
	c->backlog_hard = conf->backlog_limit ? conf->backlog_limit : UINT32_MAX;
	c->backlog_soft = conf->backlog_limit ? conf->backlog_limit - conf->backlog_limit / 4 : UINT32_MAX;
	{
		uint32_t leaves = 0;

		for (i = 0; i < n; i++)
			leaves += c->cls[i].is_leaf;
		c->leaf_part = c->backlog_soft / RTE_MAX(leaves, 1u);
	}
	for (i = 0; i < n; i++)
		leaf_set_bdp(c, &c->cls[i]);
	return c;
fail:
	weir_cbq_free(c);
	return NULL;
}

void
weir_cbq_free(struct weir_cbq *c)
{
	if (c == NULL)
		return;
	for (uint32_t i = 0; i < c->n; i++)
		weir_qm_free(c->cls[i].qm);
	weir_drr_qtab_free(c->qt);
	rte_free(c->heap);
	rte_free(c);
}

/*
 * The wait heap: a binary min-heap of leaf ids by hkey, each leaf's
 * position kept in it (hpos) so a leaf can leave it from anywhere.
 */
/* a before b in the heap: earlier key, or the same key and in first. */
static inline bool
heap_lt(const struct cbq_class *a, const struct cbq_class *b)
{
	return a->hkey < b->hkey || (a->hkey == b->hkey && a->hseq < b->hseq);
}

static inline void
heap_set(struct weir_cbq *c, uint32_t pos, uint32_t id)
{
	c->heap[pos] = id;
	c->cls[id].hpos = pos;
}

static void
heap_up(struct weir_cbq *c, uint32_t pos)
{
	uint32_t id = c->heap[pos];
	const struct cbq_class *k = &c->cls[id];

	while (pos > 0) {
		uint32_t up = (pos - 1) / 2;

		if (!heap_lt(k, &c->cls[c->heap[up]]))
			break;
		heap_set(c, pos, c->heap[up]);
		pos = up;
	}
	heap_set(c, pos, id);
}

static void
heap_down(struct weir_cbq *c, uint32_t pos)
{
	uint32_t id = c->heap[pos];
	const struct cbq_class *k = &c->cls[id];

	for (;;) {
		uint32_t l = 2 * pos + 1, m;

		if (l >= c->hn)
			break;
		m = l + 1 < c->hn && heap_lt(&c->cls[c->heap[l + 1]], &c->cls[c->heap[l]]) ? l + 1 : l;
		if (!heap_lt(&c->cls[c->heap[m]], k))
			break;
		heap_set(c, pos, c->heap[m]);
		pos = m;
	}
	heap_set(c, pos, id);
}

static void
heap_push(struct weir_cbq *c, uint32_t id, uint64_t key)
{
	c->cls[id].hkey = key;
	c->cls[id].hseq = c->hseq++;
	heap_set(c, c->hn++, id);
	heap_up(c, c->hn - 1);
}

static void
heap_del(struct weir_cbq *c, uint32_t id)
{
	uint32_t pos = c->cls[id].hpos, last;

	c->cls[id].hpos = WEIR_CBQ_NONE;
	last = c->heap[--c->hn];
	if (pos == c->hn)
		return;
	heap_set(c, pos, last);
	heap_up(c, pos);
	heap_down(c, c->cls[last].hpos);
}

/* Append leaf i to a circular list (prio list or green list). */
#define LIST_ADD(c, i, nx, pv, tail, count) do {                               \
	struct cbq_class *k_ = &(c)->cls[i];                                   \
	uint32_t last_ = (c)->tail[k_->prio];                                  \
	if (last_ == WEIR_CBQ_NONE) {                                          \
		k_->nx = k_->pv = (i);                                         \
	} else {                                                               \
		uint32_t first_ = (c)->cls[last_].nx;                          \
		k_->pv = last_;                                                \
		k_->nx = first_;                                               \
		(c)->cls[last_].nx = (i);                                      \
		(c)->cls[first_].pv = (i);                                     \
	}                                                                      \
	(c)->tail[k_->prio] = (i);                                             \
	(c)->count[k_->prio]++;                                                \
} while (0)

#define LIST_DEL(c, i, nx, pv, tail, count) do {                               \
	struct cbq_class *k_ = &(c)->cls[i];                                   \
	if (k_->nx == (i)) {                                                   \
		(c)->tail[k_->prio] = WEIR_CBQ_NONE;                           \
	} else {                                                               \
		(c)->cls[k_->pv].nx = k_->nx;                                  \
		(c)->cls[k_->nx].pv = k_->pv;                                  \
		if ((c)->tail[k_->prio] == (i))                                \
			(c)->tail[k_->prio] = k_->pv;                          \
	}                                                                      \
	k_->nx = k_->pv = WEIR_CBQ_NONE;                                       \
	(c)->count[k_->prio]--;                                                \
} while (0)

static inline void
green_add(struct weir_cbq *c, uint32_t i)
{
	LIST_ADD(c, i, gnext, gprev, glast, gcount);
	c->cls[i].green = 1;
}

static inline void
green_del(struct weir_cbq *c, uint32_t i)
{
	LIST_DEL(c, i, gnext, gprev, glast, gcount);
	c->cls[i].green = 0;
}

/* A listed leaf's colour from its own rate bucket as of its last refill:
 * green goes on the green list; yellow waits in the heap for the tick its
 * bucket turns non-negative (exact: a yellow leaf's own bucket is charged
 * only by its own sends, and it sends only by borrowing, which does not). */
static void
leaf_colour(struct weir_cbq *c, uint32_t i)
{
	struct cbq_class *k = &c->cls[i];

	if (k->tb.tokens >= 0) {
		if (k->hpos != WEIR_CBQ_NONE)
			heap_del(c, i);
		if (!k->green)
			green_add(c, i);
	} else {
		if (k->green)
			green_del(c, i);
		if (k->hpos == WEIR_CBQ_NONE)
			heap_push(c, i, k->last + tb_wait(&k->tb));
	}
}

/* Put backlogged leaf i on its lists (it was idle or parked). */
static void
leaf_list(struct weir_cbq *c, uint32_t i)
{
	struct cbq_class *k = &c->cls[i];

	LIST_ADD(c, i, anext, aprev, alast, acount);
	k->state = LS_LISTED;
	leaf_colour(c, i);
}

/* Take leaf i off every list and out of the heap. */
static void
leaf_unlist(struct weir_cbq *c, uint32_t i)
{
	struct cbq_class *k = &c->cls[i];

	if (k->hpos != WEIR_CBQ_NONE)
		heap_del(c, i);
	if (k->state == LS_LISTED) {
		if (k->green)
			green_del(c, i);
		LIST_DEL(c, i, anext, aprev, alast, acount);
	}
	k->state = LS_IDLE;
}

/* Leaf i emptied at `now`. */
static inline void
leaf_emptied(struct weir_cbq *c, uint32_t i, uint64_t now)
{
	leaf_unlist(c, i);
	c->cls[i].idle_since = now;
}

/* Leaf i cannot send now: off the lists until `at`, the earliest its path
 * might let it (a lower bound: other leaves' sends only take tokens). */
static void
leaf_park(struct weir_cbq *c, uint32_t i, uint64_t at)
{
	struct cbq_class *k = &c->cls[i];

	if (k->green)
		green_del(c, i);
	LIST_DEL(c, i, anext, aprev, alast, acount);
	k->state = LS_PARKED;
	if (k->hpos != WEIR_CBQ_NONE)
		heap_del(c, i);
	heap_push(c, i, at);
}

/* Its time boost ends or begins (a leaf that idled long enough). Cold. */
static void
leaf_boost(struct weir_cbq *c, struct cbq_class *k, uint8_t on, uint64_t now)
{
	k->boosted = on;
	k->boost_end = now + k->boost_ticks;
	class_set_buckets(c, k, k->rate_bps, k->ceil_bps, 1);
	leaf_set_bdp(c, k);
}

/* Heap entries due at `now`: parked leaves go back on their lists, yellow
 * ones that turned green on the green list. After a rate change every key
 * may be late, so all are due once. */
static void
wake_due(struct weir_cbq *c, uint64_t now)
{
	if (unlikely(c->rewake)) {
		c->rewake = 0;
		for (uint32_t x = 0; x < c->hn; x++)
			c->cls[c->heap[x]].hkey = 0;
		for (uint32_t x = c->hn / 2; x-- > 0;)
			heap_down(c, x);        /* ties go by arrival: heapify again */
	}
	while (c->hn != 0 && c->cls[c->heap[0]].hkey <= now) {
		uint32_t i = c->heap[0];
		struct cbq_class *k = &c->cls[i];

		heap_del(c, i);
		class_refill(k, now);
		if (k->state == LS_PARKED)
			leaf_list(c, i);
		else
			leaf_colour(c, i);
	}
}

/* A packet joined leaf `leaf`: count it, and list the leaf. */
static inline void
leaf_queued(struct weir_cbq *c, uint32_t leaf, uint64_t now)
{
	struct cbq_class *k = &c->cls[leaf];

	c->backlog++;
	if (k->state == LS_IDLE) {
		k->deficit = (int32_t)k->quantum;
		if (now != 0) {
			if (unlikely(k->boosted) && now >= k->boost_end)
				leaf_boost(c, k, 0, now);
			if (unlikely(k->boost_ticks != 0) && !k->boosted &&
			    now - k->idle_since >= k->boost_idle)
				leaf_boost(c, k, 1, now);
			class_refill(k, now);
		}
		leaf_list(c, leaf);
	}
}

int
weir_cbq_enqueue(struct weir_cbq *c, uint32_t leaf, uint32_t queue_id, struct rte_mbuf *m,
		 uint64_t now)
{
	return weir_cbq_enqueue_young(c, leaf, queue_id, m, now, UINT64_MAX);
}

/* How many backlogged queues a full leaf looks at for the longest. */
#define WEIR_CBQ_EVICT_SCAN 32

int
weir_cbq_enqueue_young(struct weir_cbq *c, uint32_t leaf, uint32_t queue_id, struct rte_mbuf *m,
		       uint64_t now, uint64_t attained)
{
	return weir_cbq_enqueue_evict(c, leaf, queue_id, m, now, attained, NULL, NULL);
}

int
weir_cbq_enqueue_evict(struct weir_cbq *c, uint32_t leaf, uint32_t queue_id, struct rte_mbuf *m,
		       uint64_t now, uint64_t attained, struct rte_mbuf **evicted,
		       uint32_t *evicted_qid)
{
	struct cbq_class *k;

	/* First: the caller reads *evicted whatever the verdict (a queue
	 * manager's or a bad class's refusal included). */
	if (evicted != NULL)
		*evicted = NULL;
	if (unlikely(leaf >= c->n || !c->cls[leaf].is_leaf || queue_id >= c->qt->n))
		return WEIR_CBQ_DROP_BADCLASS;
	k = &c->cls[leaf];
	weir_mbuf_meta(m)->ts = now;    /* CoDel's sojourn starts here */
	if (k->qm != NULL &&
	    weir_qm_arrive(k->qm, m, k->drr.pkts, k->drr.bytes, now) != WEIR_QM_ADMIT) {
		weir_drr_count_drop(&c->qt->q[queue_id]);
		k->st.drops++;
		k->st.drops_qm++;
		return WEIR_CBQ_DROP_QM;
	}
	/* Two bounds, one rule. The pool's share nearly spent: the leaf that
	 * holds more than its part pays, so a flood in one class cannot make
	 * another drop before the hard bound. The leaf at its own limit pays.
	 * Either way the leaf's longest queue pays (unless that is the
	 * arriving packet's own, or no queue has two): its head goes and the
	 * arrival is queued, so a flood cannot starve the leaf's other flows
	 * (fq_codel's rule). A fifo leaf's arrival pays, as the paper's CBQ. */
	const bool pool = unlikely(c->backlog >= c->backlog_soft) &&
			  (c->backlog >= c->backlog_hard || k->drr.pkts >= c->leaf_part);

	if (pool || unlikely(k->limit && k->drr.pkts >= k->limit)) {
		uint32_t v = evicted != NULL && k->evict && k->drr.pkts > 0 ?
			     weir_drr_fattest(&k->drr, WEIR_CBQ_EVICT_SCAN) : WEIR_DRR_NONE;

		k->st.drops++;
		if (pool)
			k->st.drops_pool++;
		else
			k->st.drops_class++;
		if (v == WEIR_DRR_NONE || v == queue_id ||
		    (*evicted = weir_drr_evict(&k->drr, v)) == NULL) {
			weir_drr_count_drop(&c->qt->q[queue_id]);
			return pool ? WEIR_CBQ_DROP_POOL : WEIR_CBQ_DROP_CLASS;
		}
		*evicted_qid = v;
		c->backlog--;
	}
	if (unlikely(weir_drr_enqueue_young(&k->drr, queue_id, m, attained) != WEIR_DRR_OK)) {
		k->st.drops++;
		k->st.drops_flow++;
		return WEIR_CBQ_DROP_FLOW;
	}
	if (k->qm != NULL)
		weir_qm_queued(k->qm, m);
	leaf_queued(c, leaf, now);
	return WEIR_CBQ_OK;
}

int
weir_cbq_requeue(struct weir_cbq *c, uint32_t leaf, uint32_t queue_id, struct rte_mbuf *m)
{
	if (unlikely(leaf >= c->n || !c->cls[leaf].is_leaf || queue_id >= c->qt->n))
		return WEIR_CBQ_DROP_BADCLASS;
	weir_drr_append(&c->cls[leaf].drr, queue_id, m);
	if (c->cls[leaf].qm != NULL)
		weir_qm_queued(c->cls[leaf].qm, m);
	leaf_queued(c, leaf, 0);
	return WEIR_CBQ_OK;
}

/*
 * Who may pay for a packet of leaf i now: the leaf itself when green, else
 * the nearest green ancestor; WEIR_CBQ_NONE when a class on the path is red
 * (ceil spent) or nobody on it is green. Refills the path's buckets.
 */
static inline uint32_t
find_lender(struct weir_cbq *c, uint32_t i, uint64_t now)
{
	uint32_t lender = WEIR_CBQ_NONE;
	uint32_t j;

	for (j = i; j != WEIR_CBQ_NONE; j = c->cls[j].parent) {
		struct cbq_class *k = &c->cls[j];

		class_refill(k, now);
		if (k->ctb.tokens < 0)
			return WEIR_CBQ_NONE;
		if (lender == WEIR_CBQ_NONE && k->tb.tokens >= 0)
			lender = j;
	}
	return lender;
}

/* Charge a sent packet along the path. As in HTB, classes below the lender
 * are borrowing: their rate buckets are not charged (borrowed bytes do not
 * use up the guarantee); the lender and everything above it are. Every
 * class pays in its ceil bucket. */
static inline void
charge_path(struct weir_cbq *c, uint32_t i, uint32_t lender, uint32_t wl)
{
	int below = i != lender;
	uint32_t j;

	for (j = i; j != WEIR_CBQ_NONE; j = c->cls[j].parent) {
		struct cbq_class *k = &c->cls[j];

		if (j == lender) {
			below = 0;
			if (j != i)
				k->st.lent += wl;
		}
		if (below)
			k->st.borrowed += wl;
		else
			tb_charge(&k->tb, wl);
		tb_charge(&k->ctb, wl);
		k->st.bytes += wl;
		k->st.pkts++;
	}
}

/* Earliest TSC leaf i might send: no red class on its path, and some green. */
static uint64_t
leaf_ready_at(struct weir_cbq *c, uint32_t i, uint64_t now)
{
	uint64_t red = 0, green = UINT64_MAX;
	uint32_t j;

	for (j = i; j != WEIR_CBQ_NONE; j = c->cls[j].parent) {
		const struct cbq_class *k = &c->cls[j];
		uint64_t w = tb_wait(&k->ctb), g = tb_wait(&k->tb);

		if (w > red)
			red = w;
		if (g < green)
			green = g;
	}
	return now + RTE_MAX(red, green);
}

bool
weir_cbq_empty(const struct weir_cbq *c)
{
	return c->backlog == 0;
}

bool
weir_cbq_cut_through(struct weir_cbq *c, uint32_t leaf, uint32_t pkt_len, uint64_t now)
{
	uint32_t lender;

	/* An empty tree has no other leaf to serve first, no deficit to honour
	 * and no flow of this leaf ahead: enqueue + dequeue would pick this
	 * packet with this lender (pass 0 if the leaf is green, else pass 1). */
	if (c->backlog != 0 || unlikely(leaf >= c->n || !c->cls[leaf].is_leaf) ||
	    c->cls[leaf].qm != NULL)
		return false;
	lender = find_lender(c, leaf, now);
	if (lender == WEIR_CBQ_NONE)
		return false;
	charge_path(c, leaf, lender, pkt_len + c->overhead);
	return true;
}

/* The head frame m of leaf i left its queue: if it was CHOKe's victim,
 * it goes to out->dropped[] (the caller frees and counts it) and the next
 * one is taken, until a live frame comes (returned) or the leaf is empty
 * (NULL). With out->dropped[] full a victim is sent after all (rare: eight
 * victims in a row). */
static struct rte_mbuf *
skip_victims(struct weir_cbq *c, uint32_t i, struct rte_mbuf *m, uint64_t now,
	     struct weir_cbq_deq *out, uint32_t *qid, uint32_t *qlen)
{
	struct cbq_class *k = &c->cls[i];

	while (weir_qm_left(k->qm, m, now) && out->n_dropped < WEIR_CBQ_AQM_MAX) {
		uint32_t j = out->n_dropped++;

		out->dropped[j] = m;
		out->dropped_qid[j] = *qid;
		out->dropped_leaf[j] = i;
		k->st.drops_aqm++;
		c->backlog--;
		if (k->drr.pkts == 0)
			return NULL;
		m = weir_drr_dequeue(&k->drr, qid, qlen);
	}
	return m;
}

/* Take the next packet of leaf i, which may send with `lender` paying.
 * NULL when CoDel or CHOKe emptied it (the leaf is then idle). */
static struct rte_mbuf *
leaf_send(struct weir_cbq *c, uint32_t i, uint32_t lender, uint64_t now, struct weir_cbq_deq *out)
{
	struct cbq_class *k = &c->cls[i];
	struct rte_mbuf *m;
	uint32_t qid, qlen, wl;

	if (k->drr.aqm != NULL) {
		unsigned int nd, j = out->n_dropped;

		m = weir_drr_dequeue_aqm(&k->drr, now, &qid, &qlen, out->dropped + j,
					 out->dropped_qid + j, &nd, WEIR_CBQ_AQM_MAX - j);
		if (unlikely(nd != 0)) {
			for (; nd > 0; nd--, j++)
				out->dropped_leaf[j] = i;
			k->st.drops_aqm += j - out->n_dropped;
			c->backlog -= j - out->n_dropped;
			out->n_dropped = (uint16_t)j;
		}
	} else {
		m = weir_drr_dequeue(&k->drr, &qid, &qlen);
		if (k->qm != NULL)
			m = skip_victims(c, i, m, now, out, &qid, &qlen);
	}
	if (m == NULL) {
		leaf_emptied(c, i, now);
		return NULL;
	}
	wl = rte_pktmbuf_pkt_len(m) + c->overhead;
	k->deficit -= (int32_t)wl;
	charge_path(c, i, lender, wl);
	c->backlog--;
	if (k->drr.pkts == 0)
		leaf_emptied(c, i, now);
	else if (k->green && k->tb.tokens < 0)
		leaf_colour(c, i);      /* it spent its own rate: yellow */
	if (unlikely(k->boosted) && now >= k->boost_end)
		leaf_boost(c, k, 0, now);
	out->leaf = i;
	out->queue_id = qid;
	out->qlen = qlen;
	out->next_tsc = now;
	return m;
}

/* Leaf i got a quantum: to the tail of its lists, both, so the green list
 * keeps the order of the whole one (one DRR order for both passes). */
static inline void
leaf_rotate(struct weir_cbq *c, uint32_t i)
{
	struct cbq_class *k = &c->cls[i];

	if (k->anext != i) {
		LIST_DEL(c, i, anext, aprev, alast, acount);
		LIST_ADD(c, i, anext, aprev, alast, acount);
	}
	if (k->green && k->gnext != i) {
		LIST_DEL(c, i, gnext, gprev, glast, gcount);
		LIST_ADD(c, i, gnext, gprev, glast, gcount);
	}
}

/*
 * One pass over a priority's list: pass 0 walks the green list (leaves
 * within their own rate), pass 1 the whole list (leaves that may borrow).
 * DRR among the leaves walked: one whose deficit is spent gets a quantum
 * and goes to the tail. A leaf that cannot send at all is parked in the
 * heap until its path could let it, so it is not looked at again before;
 * a leaf found yellow in pass 0 leaves the green list. Each leaf is met at
 * most twice before one sends or all are parked.
 */
static struct rte_mbuf *
prio_pass(struct weir_cbq *c, unsigned int pass, unsigned int p, uint64_t now,
	  struct weir_cbq_deq *out)
{
	uint32_t *tail = pass == 0 ? &c->glast[p] : &c->alast[p];
	uint32_t steps = 2u * (pass == 0 ? c->gcount[p] : c->acount[p]) + 1;

	while (*tail != WEIR_CBQ_NONE && steps-- > 0) {
		uint32_t i = pass == 0 ? c->cls[*tail].gnext : c->cls[*tail].anext;
		struct cbq_class *k = &c->cls[i];
		uint32_t lender;
		struct rte_mbuf *m;

		c->visits++;
		lender = find_lender(c, i, now);
		if (lender == WEIR_CBQ_NONE) {
			leaf_park(c, i, leaf_ready_at(c, i, now));
			continue;
		}
		if (pass == 0 && lender != i) {
			leaf_colour(c, i);      /* its own rate is spent (a re-rate) */
			continue;
		}
		if (k->deficit <= 0) {
			k->deficit += (int32_t)k->quantum;
			leaf_rotate(c, i);
			continue;
		}
		m = leaf_send(c, i, lender, now, out);
		if (m != NULL)
			return m;
	}
	return NULL;
}

struct rte_mbuf *
weir_cbq_dequeue(struct weir_cbq *c, uint64_t now, struct weir_cbq_deq *out)
{
	struct cbq_class *root = &c->cls[0];
	unsigned int pass, p;
	uint64_t next;

	out->n_dropped = 0;
	if (c->backlog == 0) {
		out->next_tsc = UINT64_MAX;
		return NULL;
	}
	/* The link's ceiling is on every path: while it is spent nothing may
	 * go, and no leaf is looked at. */
	class_refill(root, now);
	if (root->ctb.tokens < 0) {
		out->next_tsc = now + RTE_MAX(tb_wait(&root->ctb), (uint64_t)1);
		return NULL;
	}
	wake_due(c, now);
	/* Pass 0 serves leaves within their own rate, pass 1 lets them borrow;
	 * so every guarantee is met before any excess is shared. */
	for (pass = 0; pass < 2; pass++)
		for (p = 0; p < WEIR_CBQ_NUM_PRIO; p++) {
			struct rte_mbuf *m;

			if ((pass == 0 ? c->glast[p] : c->alast[p]) == WEIR_CBQ_NONE)
				continue;
			m = prio_pass(c, pass, p, now, out);
			if (m != NULL)
				return m;
		}
	/* Nothing may go now: every listed leaf was parked, so the heap's
	 * first key is when something could. */
	next = UINT64_MAX;
	for (p = 0; p < WEIR_CBQ_NUM_PRIO; p++)
		if (c->alast[p] != WEIR_CBQ_NONE)
			next = now + 1;         /* CoDel emptied some: look again */
	if (c->hn != 0 && c->cls[c->heap[0]].hkey < next)
		next = c->cls[c->heap[0]].hkey;
	out->next_tsc = next > now ? next : now + 1;
	return NULL;
}

int
weir_cbq_set_rate(struct weir_cbq *c, uint32_t cls, uint64_t rate, uint64_t ceil)
{
	struct cbq_class *k;

	if (!class_ok(c, cls))
		return -EINVAL;
	if (ceil == 0 || cls == 0)
		ceil = rate;
	/* A worker's part of a class (lib/worker/share.c) may be far below what a
	 * configured class needs. */
	if (!rate_ok(rate, ceil, WEIR_CBQ_SHARE_MIN))
		return -EINVAL;
	k = &c->cls[cls];
	/* Only a faster bucket can make a heap key late. */
	if (rate > k->rate_bps || ceil > k->ceil_bps)
		c->rewake = 1;
	/* Tokens held now are kept (re-scaled, clamped); the ticks since the
	 * class's last refill are credited at the new rate. */
	class_set_buckets(c, k, rate, ceil, 1);
	leaf_set_bdp(c, k);
	if (k->qm != NULL)
		weir_qm_set_rate(k->qm, ceil);
	return 0;
}

int
weir_cbq_class_set(struct weir_cbq *c, uint32_t cls, const struct weir_cbq_class_conf *cc)
{
	struct cbq_class *k;
	uint64_t ceil;

	if (!class_ok(c, cls) || cc == NULL || cc->prio >= WEIR_CBQ_NUM_PRIO ||
	    (cc->quantum != 0 && cc->quantum < c->maxpkt) || cc->boost_ceil > WEIR_CBQ_RATE_MAX)
		return -EINVAL;
	ceil = cls == 0 || cc->ceil == 0 ? cc->rate : cc->ceil;
	if (!rate_ok(cc->rate, ceil, WEIR_CBQ_SHARE_MIN))
		return -EINVAL;
	k = &c->cls[cls];
	/* A new priority: the leaf goes to the tail of the other list (its
	 * packets and flows' order untouched). */
	if (cc->prio != k->prio && k->state == LS_LISTED) {
		leaf_unlist(c, cls);
		k->prio = cc->prio;
		leaf_list(c, cls);
	}
	k->prio = cc->prio;
	k->limit = cc->limit;
	k->quantum = cc->quantum ? cc->quantum : c->maxpkt;
	k->burst = cc->burst;
	k->cburst = cc->cburst;
	k->boost_ceil = cc->boost_ceil;
	k->boost_ticks = (uint64_t)cc->boost_ms * (c->tsc_hz / 1000);
	k->boost_idle = (uint64_t)cc->boost_idle_ms * (c->tsc_hz / 1000);
	if (k->boost_ticks == 0)
		k->boosted = 0;
	return weir_cbq_set_rate(c, cls, cc->rate, ceil);
}

int
weir_cbq_class_add(struct weir_cbq *c, uint32_t cls, const struct weir_cbq_class_conf *cc)
{
	struct cbq_class *k, *pk;
	uint64_t ceil;
	int rc;

	if (cc == NULL || cls == 0 || cls >= c->cap || !class_ok(c, cc->parent))
		return -EINVAL;
	if (cls < c->n && c->cls[cls].used)
		return -EEXIST;
	if (cc->fifo || cc->qm != WEIR_QM_NONE || (cc->aqm && c->qt->codel == NULL))
		return -ENOTSUP;
	pk = &c->cls[cc->parent];
	if (pk->depth + 1 >= WEIR_CBQ_MAX_DEPTH)
		return -EINVAL;
	if (pk->is_leaf && (pk->drr.pkts != 0 || cc->parent == 0 || pk->qm != NULL))
		return -EBUSY;
	ceil = cc->ceil ? cc->ceil : cc->rate;
	k = &c->cls[cls];
	/* Out of the free chain (ids below n) before it is overwritten. */
	if (cls < c->n) {
		uint32_t *pp = &c->free_head;

		while (*pp != cls)
			pp = &c->cls[*pp].anext;
		*pp = k->anext;
	}
	memset(k, 0, sizeof(*k));
	rc = class_init(c, k, cc, ceil, c->fq);
	if (rc != 0) {
		k->used = 0;
		k->is_leaf = 0;
		if (cls < c->n) {
			k->anext = c->free_head;
			c->free_head = cls;
		}
		return rc;
	}
	k->parent = cc->parent;
	k->depth = pk->depth + 1;
	k->last = pk->last;
	pk->is_leaf = 0;
	pk->nchild++;
	if (cls >= c->n) {
		/* Ids between the old high-water mark and cls are free. */
		for (uint32_t x = c->n; x < cls; x++) {
			c->cls[x].anext = c->free_head;
			c->cls[x].hpos = WEIR_CBQ_NONE;
			c->free_head = x;
		}
		c->n = cls + 1;
	}
	leaf_set_bdp(c, k);
	return 0;
}

int
weir_cbq_class_remove(struct weir_cbq *c, uint32_t cls)
{
	struct cbq_class *k;

	if (cls == 0 || !class_ok(c, cls) || !c->cls[cls].is_leaf)
		return -EINVAL;
	k = &c->cls[cls];
	if (k->drr.pkts != 0 || k->state != LS_IDLE)
		return -EBUSY;
	if (--c->cls[k->parent].nchild == 0)
		c->cls[k->parent].is_leaf = 1;  /* a class without children is a leaf */
	weir_qm_free(k->qm);
	memset(k, 0, sizeof(*k));
	k->hpos = WEIR_CBQ_NONE;
	k->anext = c->free_head;
	c->free_head = cls;
	return 0;
}

unsigned int
weir_cbq_drain_next(struct weir_cbq *c, uint32_t *leaf, uint32_t *queue_id, struct rte_mbuf **out,
		    unsigned int max)
{
	for (uint32_t i = *leaf; i < c->n; i++) {
		struct cbq_class *k = &c->cls[i];
		uint32_t qid;

		if (!k->is_leaf || k->drr.pkts == 0 || weir_drr_peek(&k->drr, &qid) == NULL)
			continue;
		*leaf = i;
		*queue_id = qid;
		return weir_cbq_drain(c, i, qid, out, max);
	}
	return 0;
}

unsigned int
weir_cbq_drain(struct weir_cbq *c, uint32_t leaf, uint32_t queue_id, struct rte_mbuf **out,
	       unsigned int max)
{
	struct cbq_class *k;
	unsigned int n;

	if (leaf >= c->n || !c->cls[leaf].is_leaf || queue_id >= c->qt->n)
		return 0;
	k = &c->cls[leaf];
	n = weir_drr_drain(&k->drr, queue_id, out, max, NULL);
	c->backlog -= n;
	/* Keep CHOKe's ring in step (a victim drained goes with the rest). */
	for (unsigned int x = 0; k->qm != NULL && x < n; x++)
		(void)weir_qm_left(k->qm, out[x], 0);
	if (k->state != LS_IDLE && k->drr.pkts == 0)
		leaf_emptied(c, leaf, k->last);
	return n;
}

int
weir_cbq_move(struct weir_cbq *c, uint32_t queue_id, uint32_t from, uint32_t to)
{
	struct cbq_class *kf, *kt;
	uint64_t bytes;
	uint32_t n;

	if (from >= c->n || to >= c->n || !c->cls[from].is_leaf || !c->cls[to].is_leaf ||
	    queue_id >= c->qt->n)
		return -EINVAL;
	kf = &c->cls[from];
	kt = &c->cls[to];
	n = weir_drr_move(&kf->drr, &kt->drr, queue_id, &bytes);
	if (n == 0)
		return 0;
	if (kf->state != LS_IDLE && kf->drr.pkts == 0)
		leaf_emptied(c, from, kf->last);
	if (kt->state == LS_IDLE) {
		kt->deficit = (int32_t)kt->quantum;
		leaf_list(c, to);
	}
	return (int)n;
}
