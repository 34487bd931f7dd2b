/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for class rates divided among workers (lib/worker/share.c): the split
 * itself, the mailbox, and two workers' class trees run side by side on a
 * fake clock, rebalanced every 10 ms as the management lcore does, against
 * the static 1/n split.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <rte_common.h>
#include <rte_eal.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "unit.h"
#include "cbq.h"
#include "policy.h"
#include "share.h"
#include "rig.h"

#define HZ 2500000000ull
#define US (HZ / 1000000)
#define MBIT 1000000ull
#define NW 2

/* Link 10 Mbit/s: a 6 (ceil 10) and b 4 (ceil 10). */
static struct weir_policy *
two_class_policy(void)
{
	static const struct weir_policy_class_conf cls[] = {
		{ .name = "a", .rate = 6 * MBIT, .ceil = 10 * MBIT, .mode = WEIR_MODE_PFQ },
		{ .name = "b", .rate = 4 * MBIT, .ceil = 10 * MBIT, .mode = WEIR_MODE_PFQ },
	};
	const struct weir_policy_conf pc = {
		.tree = { { .rate = 10 * MBIT, .n_classes = 2, .classes = cls, .default_class = "b" } },
	};
	struct weir_policy_err e;
	struct weir_policy *p = weir_policy_build(&pc, 7, &e);

	if (p == NULL)
		printf("policy: %s\n", e.msg);
	return p;
}

static double
total(const struct weir_share *s, uint16_t c, int ceil)
{
	double t = 0;

	for (unsigned int w = 0; w < s->n_workers; w++)
		t += (double)(ceil ? weir_share_ceil(s, w, c) : weir_share_rate(s, w, c));
	return t;
}

static void
test_split(void)
{
	struct weir_policy *p = two_class_policy();
	struct weir_share *s;
	int a, b;

	if (p == NULL) {
		CHECK(0, "policy");
		return;
	}
	a = weir_policy_class_find(p, 0, "a");
	b = weir_policy_class_find(p, 0, "b");
	s = weir_share_create(&p->tree[0], NW);
	CHECK(s != NULL, "create");
	CHECK(weir_share_rate(s, 0, 0) == 5 * MBIT && weir_share_rate(s, 1, a) == 3 * MBIT &&
	      weir_share_ceil(s, 1, b) == 5 * MBIT, "nothing sampled: even split");
	/* a: 3 flows backlogged on worker 0, 1 on worker 1; b: 1 on worker 1. */
	for (int i = 0; i < 40; i++) {
		weir_share_sample(s, 0, (uint16_t)a, 3);
		weir_share_sample(s, 1, (uint16_t)a, 1);
		weir_share_sample(s, 0, (uint16_t)b, 0);
		weir_share_sample(s, 1, (uint16_t)b, 1);
	}
	weir_share_split(s);
	for (uint16_t c = 0; c < 3; c++) {
		const struct weir_cbq_class_conf *k = &p->tree[0].classes[c].cbq;

		CHECK(fabs(total(s, c, 0) - (double)k->rate) < 0.001 * (double)k->rate + 16000,
		      "class %u: rates add up to the configured %.0f (%.0f)", c, (double)k->rate,
		      total(s, c, 0));
	}
	CHECK(fabs((double)weir_share_rate(s, 0, (uint16_t)a) / (double)weir_share_rate(s, 1, (uint16_t)a) - 3.0) < 0.1,
	      "a split 3:1 by its flows (%lu : %lu)", weir_share_rate(s, 0, (uint16_t)a),
	      weir_share_rate(s, 1, (uint16_t)a));
	CHECK(weir_share_rate(s, 1, (uint16_t)b) > 0.95 * 4 * MBIT, "b almost all on worker 1 (%lu)",
	      weir_share_rate(s, 1, (uint16_t)b));
	/* Both leaves active: the link follows their guarantees (a 1.5 + b 3.9). */
	CHECK(fabs((double)weir_share_rate(s, 1, 0) - (double)(weir_share_rate(s, 1, (uint16_t)a) +
	      weir_share_rate(s, 1, (uint16_t)b))) < 1000, "link: its children's parts (worker 1 %lu)",
	      weir_share_rate(s, 1, 0));
	for (unsigned int w = 0; w < NW; w++)
		for (uint16_t c = 0; c < 3; c++)
			CHECK(weir_share_ceil(s, w, c) >= weir_share_rate(s, w, c) &&
			      weir_share_rate(s, w, c) >= 8000, "worker %u class %u: valid pair", w, c);
	/* The mailbox carries it. */
	{
		struct weir_share *both[2] = { s, NULL };
		struct weir_share_box *box = rte_zmalloc(NULL, sizeof(*box), 0);

		CHECK(weir_share_moved(box, 7, both, 1), "an empty box: post");
		weir_share_publish(box, 7, both, 1);
		CHECK(box->seq == 2 && box->epoch == 7 && box->n_classes[0] == 3 &&
		      box->n_classes[1] == 0 && box->rate[0][b] == weir_share_rate(s, 1, (uint16_t)b) &&
		      box->ceil[0][0] == weir_share_ceil(s, 1, 0), "published: seq even, values");
		CHECK(!weir_share_moved(box, 7, both, 1) && weir_share_moved(box, 8, both, 1),
		      "the same split: nothing to post; another policy: post");
		weir_share_sample(s, 0, (uint16_t)a, 3);        /* the same demand again */
		weir_share_sample(s, 1, (uint16_t)a, 1);
		weir_share_split(s);
		CHECK(!weir_share_moved(box, 7, both, 1), "a steady demand: nothing posted");
		for (int i = 0; i < 20; i++)
			weir_share_sample(s, 1, (uint16_t)a, 3);
		weir_share_split(s);
		CHECK(weir_share_moved(box, 7, both, 1), "a's demand tripled: post");
		for (int i = 0; i < 40; i++)    /* back to 3:1 for what follows */
			weir_share_sample(s, 1, (uint16_t)a, 1);

		rte_free(box);
	}
	/* b goes idle: its 4 Mbit/s is split where a's demand is (3:1). */
	for (int i = 0; i < 40; i++) {
		weir_share_sample(s, 0, (uint16_t)b, 0);
		weir_share_sample(s, 1, (uint16_t)b, 0);
	}
	weir_share_split(s);
	CHECK(fabs((double)weir_share_rate(s, 1, 0) / (10.0 * MBIT) - 0.25) < 0.02,
	      "b idle: link split 3:1 like a's flows (worker 1 %lu)", weir_share_rate(s, 1, 0));
	weir_share_free(s);
	weir_policy_free(p);
}

/*
 * A tcr leaf (its flows size windows to their part and never queue), as
 * the workers see it. Each 10 ms round, each flow of worker w earns its
 * share of the part in force (the part over the worker's flows, `eff` of
 * it: a window-sized flow) up to what it wants, and sends what it earned
 * in bursts of two segments, as a flow paced to a small share does. Every
 * 200 ms (a worker's activity period) the worker counts each flow heavy
 * (it sent at least half its share) or light (with what it sent); the
 * management lcore samples the last period's counts every round. Returns
 * worker 0's part at the end.
 */
struct use_model {
	double t;
	int round;
	double credit[NW];      /* per flow, bytes earned not yet sent */
	double sent[NW];        /* per flow, bytes this period */
	double share[NW];       /* per flow, bit/s over this period */
	uint32_t heavy[NW], light[NW];
	double light_bps[NW];
};

static double
use_rounds(struct weir_share *s, uint32_t leaf, const uint32_t *flows, const double *want,
	   struct use_model *m, int rounds)
{
	const double eff = 0.97, dt = 0.01, burst = 2 * 1448;
	const int period = 20;

	for (int i = 0; i < rounds; i++) {
		m->t += dt;
		for (unsigned int w = 0; w < NW; w++) {
			double part = (double)weir_share_rate(s, w, leaf);
			double share = flows[w] ? part / flows[w] : 0.0;

			m->credit[w] += RTE_MIN(want[w] / RTE_MAX(flows[w], 1u), eff * share) * dt / 8;
			if (m->credit[w] >= burst || want[w] < 1e6) {
				m->sent[w] += m->credit[w];
				m->credit[w] = 0.0;
			}
			m->share[w] += share / period;
		}
		if (++m->round % period == 0)
			for (unsigned int w = 0; w < NW; w++) {
				const double limit = m->share[w] * period * dt / 8 / 2;

				m->heavy[w] = m->sent[w] >= limit ? flows[w] : 0;
				m->light[w] = flows[w] - m->heavy[w];
				m->light_bps[w] = m->heavy[w] ? 0.0
						  : m->sent[w] * flows[w] * 8 / (period * dt);
				m->sent[w] = m->share[w] = 0.0;
			}
		for (unsigned int w = 0; w < NW; w++) {
			weir_share_sample(s, w, leaf, flows[w]);
			weir_share_sample_use(s, w, leaf, m->heavy[w], m->light[w], m->light_bps[w]);
		}
		weir_share_split(s);
	}
	return (double)weir_share_rate(s, 0, leaf);
}

static void
test_split_by_use(void)
{
	static const struct weir_policy_class_conf cls[] = {
		{ .name = "t", .rate = 10 * MBIT, .mode = WEIR_MODE_TCR },
	};
	const struct weir_policy_conf pc = {
		.tree = { { .rate = 10 * MBIT, .n_classes = 1, .classes = cls, .default_class = "t" } },
	};
	struct weir_policy_err e;
	struct weir_policy *p = weir_policy_build(&pc, 7, &e);
	struct weir_share *s = p ? weir_share_create(&p->tree[0], NW) : NULL;
	const double bulk = 1e12;
	struct use_model m = { 0 };
	double r0;
	uint32_t leaf;

	if (s == NULL) {
		CHECK(0, "share: %s", p ? "" : e.msg);
		weir_policy_free(p);
		return;
	}
	leaf = (uint16_t)weir_policy_class_find(p, 0, "t");
	/* A bulk flow on worker 0, a light connection (10 kbit/s, counted as
	 * sending) on worker 1: counted as flows, 1:1. */
	r0 = use_rounds(s, leaf, (const uint32_t[]){ 1, 1 }, (const double[]){ bulk, 10e3 }, &m, 100);
	CHECK(r0 >= 0.97 * 10 * MBIT, "bulk beside a light flow: worker 0 %.2f of 10 Mbit/s", r0 / 1e6);
	CHECK(weir_share_rate(s, 1, leaf) >= 25000, "the light flow keeps 2.5 times its use (%lu)",
	      (unsigned long)weir_share_rate(s, 1, leaf));
	/* The light flow turns bulk: within 0.3 s each worker has half. */
	r0 = use_rounds(s, leaf, (const uint32_t[]){ 1, 1 }, (const double[]){ bulk, bulk }, &m, 30);
	CHECK(fabs(r0 / (5.0 * MBIT) - 1) < 0.03, "both bulk: worker 0 %.2f of 10 Mbit/s", r0 / 1e6);
	/* 9841703's case: 3 flows on worker 0, one on worker 1, all filling
	 * their parts (none queues): split 3:1 by flows. */
	r0 = use_rounds(s, leaf, (const uint32_t[]){ 3, 1 }, (const double[]){ bulk, bulk }, &m, 100);
	CHECK(fabs(r0 / (7.5 * MBIT) - 1) < 0.02, "3 flows : 1 flow, all bulk: worker 0 %.2f of 10",
	      r0 / 1e6);
	/* An application-limited flow at 1 Mbit/s on worker 1: it gets what it
	 * uses and its headroom, the bulk flow the rest. */
	r0 = use_rounds(s, leaf, (const uint32_t[]){ 1, 1 }, (const double[]){ bulk, 1e6 }, &m, 100);
	CHECK(r0 >= 7.3 * MBIT && weir_share_rate(s, 1, leaf) >= 2.45 * MBIT,
	      "bulk beside 1 Mbit/s: %.2f and %.2f Mbit/s", r0 / 1e6,
	      (double)weir_share_rate(s, 1, leaf) / 1e6);
	CHECK(fabs(total(s, leaf, 0) - 10.0 * MBIT) < 1000, "the parts add up (%.0f)", total(s, leaf, 0));
	/* CI's case (test_postack_per_worker[tcr]): worker 1's part at its
	 * floor (no flow there), then a bulk flow starts on it beside 3 on
	 * worker 0. Paced to the floor it sends two segments every ~0.4 s,
	 * but all it may: heavy. Within 1 s each worker has its flows' part. */
	use_rounds(s, leaf, (const uint32_t[]){ 3, 0 }, (const double[]){ bulk, 0 }, &m, 100);
	CHECK(weir_share_rate(s, 1, leaf) < 0.01 * 10 * MBIT, "no flow on worker 1: %.3f Mbit/s",
	      (double)weir_share_rate(s, 1, leaf) / 1e6);
	r0 = use_rounds(s, leaf, (const uint32_t[]){ 3, 1 }, (const double[]){ bulk, bulk }, &m, 100);
	CHECK(fabs(r0 / (7.5 * MBIT) - 1) < 0.02, "a flow starts at worker 1's floor: worker 0 %.2f "
	      "of 10 (7.5)", r0 / 1e6);
	/* A bulk flow and a light one (10 kbit/s) on worker 0, a bulk flow on
	 * worker 1, as the workers count them: the light one is not a flow's
	 * share (max-min: 5 and 5; by flows it was 6.7 and 3.3). */
	for (int i = 0; i < 100; i++) {
		weir_share_sample(s, 0, leaf, 2);
		weir_share_sample_use(s, 0, leaf, 1, 1, 10e3);
		weir_share_sample(s, 1, leaf, 1);
		weir_share_sample_use(s, 1, leaf, 1, 0, 0.0);
		weir_share_split(s);
	}
	r0 = (double)weir_share_rate(s, 0, leaf);
	CHECK(fabs(r0 / (5.0 * MBIT) - 1) < 0.01, "bulk and light beside bulk: worker 0 %.3f of 10 "
	      "(5 and the light flow's 25 kbit/s)", r0 / 1e6);
	weir_share_free(s);
	weir_policy_free(p);
}

/* A worker picks its rates up from its box between bursts. */
/* A class too small for each worker to get the trees' configured minimum
 * (8 kbit/s) is still served at its rate in total, never more (issue 17
 * item 5: 8 kbit/s on 8 workers was served at 64 kbit/s). */
static void
test_tiny_class(void)
{
	static const struct weir_policy_class_conf cls[] = {
		{ .name = "tiny", .rate = 8000, .mode = WEIR_MODE_PFQ },
		{ .name = "rest", .rate = 10 * MBIT, .mode = WEIR_MODE_PFQ },
	};
	const struct weir_policy_conf pc = {
		.tree = { { .rate = 20 * MBIT, .n_classes = 2, .classes = cls, .default_class = "rest" } },
	};
	struct weir_policy_err e;
	struct weir_policy *p = weir_policy_build(&pc, 7, &e);
	struct weir_share *s = p ? weir_share_create(&p->tree[0], 8) : NULL;
	int tiny = p ? weir_policy_class_find(p, 0, "tiny") : -1;

	if (s == NULL || tiny < 0) {
		CHECK(0, "share");
		return;
	}
	CHECK(total(s, (uint16_t)tiny, 0) <= 8000,
	      "8 kbit/s over 8 workers: %.0f bit/s in all", total(s, (uint16_t)tiny, 0));
	weir_share_sample(s, 3, (uint16_t)tiny, 4);
	weir_share_split(s);
	CHECK(total(s, (uint16_t)tiny, 0) <= 8000 && weir_share_rate(s, 3, (uint16_t)tiny) >= 7000,
	      "demand on one worker: it gets nearly all of it (%lu)",
	      (unsigned long)weir_share_rate(s, 3, (uint16_t)tiny));
	weir_share_free(s);
	weir_policy_free(p);
}

static void
test_worker_applies(void)
{
	static const struct weir_policy_class_conf cls[] = {
		{ .name = "a", .rate = 6 * MBIT, .ceil = 10 * MBIT },
		{ .name = "b", .rate = 4 * MBIT, .ceil = 10 * MBIT },
	};
	const struct weir_policy_conf pc = {
		.tree = { { .rate = 10 * MBIT, .n_classes = 2, .classes = cls, .default_class = "b" } },
	};
	struct weir_share_box *box = rte_zmalloc(NULL, sizeof(*box), 0);
	struct weir_share *s[2] = { NULL, NULL };
	struct weir_cbq_stats st;
	struct rig r;
	uint16_t a;

	if (box == NULL || rig_make(&r, &pc, "share_rig") != 0) {
		CHECK(0, "rig");
		return;
	}
	a = (uint16_t)weir_policy_class_find(r.p, 0, "a");
	r.w->conf.share_box = box;
	s[0] = weir_share_create(&r.p->tree[0], NW);
	for (int i = 0; i < 40; i++)
		weir_share_sample(s[0], 1, a, 2);
	weir_share_split(s[0]);
	weir_share_publish(box, r.p->epoch + 1, s, 1);
	CHECK(weir_worker_share_apply(r.w) == 0, "another policy's rates: ignored");
	weir_share_publish(box, r.p->epoch, s, 1);
	box->seq++;     /* as if a write were under way */
	CHECK(weir_worker_share_apply(r.w) == 0 && r.w->share_seq != box->seq, "mid-write: not yet");
	box->seq++;
	CHECK(weir_worker_share_apply(r.w) == 3 && r.w->share_seq == box->seq,
	      "applied: link, a and b changed");
	CHECK(weir_cbq_stats(r.w->svc.shaper[0], a, &st) == 0 && st.rate_bps == weir_share_rate(s[0], 1, a) &&
	      st.ceil_bps == weir_share_ceil(s[0], 1, a), "a's rate on this worker is its share (%lu)",
	      st.rate_bps);
	CHECK(weir_worker_share_apply(r.w) == 0, "nothing new: nothing changed");
	weir_share_free(s[0]);
	rte_free(box);
	rig_free(&r);
}


/*
 * Issue 36 item 8: a worker that takes a policy switch late. The
 * rebalancer posts the new policy's split while the worker still runs the
 * old one (it ignores it), and posts again only once the split moves by
 * 1/64: the worker must still end up running the split meant for the
 * policy it runs, not the 1/n its new trees were built with. The worker's
 * loop is played as weir_worker_run plays it: take a pending switch, then
 * apply the box if its seq is not the one last handled.
 */
static void
worker_loop_once(struct weir_worker *w)
{
	if (__atomic_load_n(&w->pending, __ATOMIC_ACQUIRE) != NULL)
		weir_worker_policy_take(w);
	if (__atomic_load_n(&w->conf.share_box->seq, __ATOMIC_ACQUIRE) != w->share_seq)
		weir_worker_share_apply(w);
}

static void
test_late_switch(void)
{
	static const struct weir_policy_class_conf cls[] = {
		{ .name = "a", .rate = 6 * MBIT, .ceil = 10 * MBIT },
		{ .name = "b", .rate = 4 * MBIT, .ceil = 10 * MBIT },
	};
	const struct weir_policy_conf pc = {
		.tree = { { .rate = 10 * MBIT, .n_classes = 2, .classes = cls, .default_class = "b" } },
	};
	struct weir_share_box *box = rte_zmalloc(NULL, sizeof(*box), 0);
	struct weir_share *s[2] = { NULL, NULL };
	struct weir_policy_switch sw = { 0 };
	struct weir_cbq_class_conf cc[WEIR_CBQ_MAX_CLASSES];
	struct weir_policy_err e;
	struct weir_policy *np;
	struct weir_cbq_stats st;
	struct rig r;
	uint16_t a;

	if (box == NULL || rig_make(&r, &pc, "late_rig") != 0) {
		CHECK(0, "rig");
		return;
	}
	r.w->conf.share_box = box;
	np = weir_policy_build(&pc, r.p->epoch + 1, &e);
	if (np == NULL) {
		CHECK(0, "policy: %s", e.msg);
		return;
	}
	a = (uint16_t)weir_policy_class_find(np, 0, "a");
	/* The new trees as the management lcore builds them: 1/NW of each
	 * class (lib/classify/policy.h), until the rebalancer says otherwise. */
	{
		const struct weir_cbq_conf conf = {
			.socket_id = SOCKET_ID_ANY, .tsc_hz = rte_get_tsc_hz(), .classes = cc,
			.n_classes = weir_policy_cbq_classes(np, 0, 1, NW, cc),
			.n_queues = CAP + 1 + WEIR_POLICY_QUEUES_EXTRA(np), .flow_limit = 16,
		};

		sw.shaper[0] = weir_cbq_create(&conf);
		sw.cls_ctr[0] = rte_zmalloc(NULL, np->tree[0].n_classes * sizeof(*sw.cls_ctr[0]), 0);
		sw.policy = np;
	}
	/* Demand for a on this worker (worker 1 of NW): most of a is its. */
	s[0] = weir_share_create(&np->tree[0], NW);
	for (int i = 0; i < 40; i++)
		weir_share_sample(s[0], 1, a, 2);
	weir_share_split(s[0]);
	CHECK(weir_worker_policy_post(r.w, &sw) == 0, "switch posted");
	/* The worker's loop reads the box before the switch it posted
	 * reaches it (the switch lands just after this turn's check). */
	__atomic_store_n(&r.w->pending, NULL, __ATOMIC_RELAXED);
	weir_share_publish(box, np->epoch, s, 1);
	worker_loop_once(r.w);
	CHECK(r.w->svc.policy == r.p, "still on the old policy");
	__atomic_store_n(&r.w->pending, &sw, __ATOMIC_RELEASE);
	/* Now it takes the switch; the split has not moved, so nothing new is
	 * posted (weir_share_moved: false). */
	CHECK(!weir_share_moved(box, np->epoch, s, 1), "the rebalancer has nothing new to post");
	for (int k = 0; k < 3; k++)
		worker_loop_once(r.w);
	CHECK(r.w->svc.policy == np, "switch taken");
	CHECK(weir_cbq_stats(r.w->svc.shaper[0], a, &st) == 0 && st.rate_bps == weir_share_rate(s[0], 1, a) &&
	      st.ceil_bps == weir_share_ceil(s[0], 1, a),
	      "a runs this worker's split for the policy it runs: rate %lu (split %lu, 1/n %lu)",
	      st.rate_bps, weir_share_rate(s[0], 1, a), (unsigned long)(6 * MBIT / NW));
	weir_share_free(s[0]);
	rte_free(box);
	rig_free(&r);
	weir_policy_free(np);
}

/* Two workers' trees on one fake clock. Flows 0-2: class a on worker 0;
 * flow 3: a on worker 1; flow 4: b on worker 1. All always backlogged. */
struct two {
	struct weir_cbq *t[NW];
	double bytes[5];
	uint32_t qlen[5];
};

static const unsigned int FLOW_W[5] = { 0, 0, 0, 1, 1 };

static void
run(struct weir_policy *p, int rebalance, double *out_a, double *out_b, double *per_flow)
{
	struct weir_cbq_class_conf cc[WEIR_CBQ_MAX_CLASSES];
	struct weir_share *s = weir_share_create(&p->tree[0], NW);
	uint16_t a = (uint16_t)weir_policy_class_find(p, 0, "a"), b = (uint16_t)weir_policy_class_find(p, 0, "b");
	uint16_t leaf_of[5] = { a, a, a, a, b };
	struct two x = { 0 };
	const uint64_t t_end = 3 * HZ, t_meas = HZ;
	uint64_t next_rb = 0;

	for (unsigned int w = 0; w < NW; w++) {
		const struct weir_cbq_conf conf = {
			.socket_id = SOCKET_ID_ANY, .tsc_hz = HZ,
			.n_classes = weir_policy_cbq_classes(p, 0, 1, NW, cc), .classes = cc,
			.n_queues = 8, .flow_limit = 64,
		};
		x.t[w] = weir_cbq_create(&conf);
	}
	for (uint64_t now = 0; now < t_end; now += 50 * US) {
		for (unsigned int f = 0; f < 5; f++)
			while (x.qlen[f] < 8) {
				struct rte_mbuf *m = unit_tagged_mbuf(mp, f, 0, 1000);

				if (weir_cbq_enqueue(x.t[FLOW_W[f]], leaf_of[f], f, m, now) != 0) {
					rte_pktmbuf_free(m);
					break;
				}
				x.qlen[f]++;
			}
		for (unsigned int w = 0; w < NW; w++) {
			struct weir_cbq_deq d;
			struct rte_mbuf *m;

			while ((m = weir_cbq_dequeue(x.t[w], now, &d)) != NULL) {
				x.qlen[d.queue_id]--;
				if (now >= t_meas)
					x.bytes[d.queue_id] += m->pkt_len;
				rte_pktmbuf_free(m);
			}
		}
		if (rebalance && now >= next_rb) {
			/* What the management lcore does every 10 ms. */
			struct weir_cbq_stats st;

			next_rb = now + 10000 * US;
			for (unsigned int w = 0; w < NW; w++)
				for (uint16_t c = 0; c < p->tree[0].n_classes; c++)
					if (p->tree[0].classes[c].is_leaf && weir_cbq_stats(x.t[w], c, &st) == 0)
						weir_share_sample(s, w, c, st.backlogged);
			weir_share_split(s);
			for (unsigned int w = 0; w < NW; w++)
				for (uint16_t c = 0; c < p->tree[0].n_classes; c++)
					weir_cbq_set_rate(x.t[w], c, weir_share_rate(s, w, c),
							  weir_share_ceil(s, w, c));
		}
	}
	{
		double secs = (double)(t_end - t_meas) / HZ;

		*out_a = (x.bytes[0] + x.bytes[1] + x.bytes[2] + x.bytes[3]) * 8 / secs;
		*out_b = x.bytes[4] * 8 / secs;
		for (unsigned int f = 0; f < 5; f++)
			per_flow[f] = x.bytes[f] * 8 / secs;
	}
	for (unsigned int w = 0; w < NW; w++) {
		struct rte_mbuf *m;
		struct weir_cbq_deq d;

		while ((m = weir_cbq_dequeue(x.t[w], UINT64_MAX / 2, &d)) != NULL)
			rte_pktmbuf_free(m);
		weir_cbq_free(x.t[w]);
	}
	weir_share_free(s);
}

static double
jain4(const double *v)
{
	double s = 0, q = 0;

	for (int i = 0; i < 4; i++) {
		s += v[i];
		q += v[i] * v[i];
	}
	return s * s / (4 * q);
}

static void
test_two_workers(void)
{
	struct weir_policy *p = two_class_policy();
	double a0, b0, a1, b1, f0[5], f1[5];

	if (p == NULL) {
		CHECK(0, "policy");
		return;
	}
	run(p, 0, &a0, &b0, f0);
	run(p, 1, &a1, &b1, f1);
	printf("  static 1/2:  a %.2f b %.2f Mbit/s, a's flows %.2f %.2f %.2f | %.2f (Jain %.3f)\n",
	       a0 / 1e6, b0 / 1e6, f0[0] / 1e6, f0[1] / 1e6, f0[2] / 1e6, f0[3] / 1e6, jain4(f0));
	printf("  rebalanced:  a %.2f b %.2f Mbit/s, a's flows %.2f %.2f %.2f | %.2f (Jain %.3f)\n",
	       a1 / 1e6, b1 / 1e6, f1[0] / 1e6, f1[1] / 1e6, f1[2] / 1e6, f1[3] / 1e6, jain4(f1));
	/* Frame bytes (no overhead configured): the link's 10 Mbit/s is exact. */
	CHECK(fabs(a1 + b1 - 10e6) < 0.02 * 10e6, "rebalanced: link total %.2f Mbit/s", (a1 + b1) / 1e6);
	CHECK(fabs(a1 - 6e6) < 0.05 * 6e6 && fabs(b1 - 4e6) < 0.05 * 4e6,
	      "rebalanced: a %.2f of 6, b %.2f of 4 Mbit/s in total", a1 / 1e6, b1 / 1e6);
	CHECK(jain4(f1) > 0.98, "rebalanced: a's four flows equal across workers (Jain %.3f)", jain4(f1));
	/* The static split gives b its worker's 2 and a the rest: the failure
	 * the rebalancing exists for (kept as a check that the test can fail). */
	CHECK(b0 < 0.6 * 4e6, "static: b gets %.2f of its 4 Mbit/s", b0 / 1e6);
	weir_policy_free(p);
}

int
main(int argc, char **argv)
{
	RTE_SET_USED(argc);
	unit_eal_init(argv[0], "share", "128");
	rig_mempool("share_test");
	test_split();
	test_tiny_class();
	test_split_by_use();
	test_worker_applies();
	test_late_switch();
	test_two_workers();
	rte_eal_cleanup();
	return unit_report();
}
