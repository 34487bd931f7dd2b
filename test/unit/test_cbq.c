/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for the class tree (lib/sched/cbq.c) with a fake TSC and real mbufs.
 *
 * The simulator plays a worker: it keeps the chosen flows backlogged (a
 * packet refills its flow's queue as soon as one leaves), dequeues up to a
 * burst at each instant, and moves the clock by a jittered loop time, or to
 * the next_tsc the tree gives back when it is blocked. Rates are measured
 * over a window after a warm-up, so the initial full buckets do not count.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "unit.h"
#include "cbq.h"


#define HZ 2500000000ull        /* a 2.5 GHz TSC */
#define US (HZ / 1000000)
#define MBIT 1000000ull
#define OVH 24u

static struct rte_mempool *mp;


#define MAXF 1024

/* A simulated workload. */
struct sim {
	struct weir_cbq *c;
	uint64_t now;
	uint16_t leaf_of[MAXF];         /* flow -> leaf */
	uint8_t  busy[MAXF];            /* keep this flow backlogged */
	uint16_t size[MAXF];            /* its frame size (pkt_len) */
	uint32_t seq_in[MAXF], seq_out[MAXF];
	double   fbytes[MAXF];          /* wire bytes in the window, per flow */
	double   cbytes[WEIR_CBQ_MAX_CLASSES];
	uint64_t reorder;
	unsigned int nf;
	int jitter_us;
	unsigned int burst;             /* packets a loop iteration may take */
};

static struct rte_mbuf *
mk(uint32_t flow, uint32_t seq, uint16_t len)
{
	return unit_tagged_mbuf(mp, flow, seq, len);
}

static int
sim_push(struct sim *s, uint32_t f)
{
	struct rte_mbuf *m = mk(f, s->seq_in[f], s->size[f]);
	int rc = weir_cbq_enqueue(s->c, s->leaf_of[f], f, m, s->now);

	if (rc != 0)
		rte_pktmbuf_free(m);
	else
		s->seq_in[f]++;
	return rc;
}

static void
sim_flow(struct sim *s, uint32_t f, uint32_t leaf, uint16_t size, int busy)
{
	unsigned int i;

	s->leaf_of[f] = leaf;
	s->size[f] = size;
	s->busy[f] = busy;
	if (f >= s->nf)
		s->nf = f + 1;
	for (i = 0; busy && i < 4; i++)
		sim_push(s, f);
}

static void
sim_start(struct sim *s, struct weir_cbq *c)
{
	memset(s, 0, sizeof(*s));
	s->c = c;
	s->now = 1000 * HZ;     /* not zero: the tree must not care where time starts */
	s->jitter_us = 20;
	s->burst = 32;
}

/* Run until `until`; count what leaves at or after `from`. */
static void
sim_run(struct sim *s, uint64_t from, uint64_t until)
{
	struct weir_cbq_deq d = { .next_tsc = UINT64_MAX };
	struct rte_mbuf *m = NULL;
	unsigned int k;

	while (s->now < until) {
		for (k = 0; k < s->burst; k++) {
			struct unit_tag t;

			m = weir_cbq_dequeue(s->c, s->now, &d);
			if (m == NULL)
				break;
			t = *rte_pktmbuf_mtod(m, struct unit_tag *);
			if (t.flow != d.queue_id || t.seq != s->seq_out[t.flow] ||
			    d.qlen != weir_drr_qlen(weir_cbq_qtab(s->c), d.queue_id))
				s->reorder++;
			s->seq_out[t.flow] = t.seq + 1;
			if (s->now >= from) {
				s->fbytes[t.flow] += rte_pktmbuf_pkt_len(m) + OVH;
				s->cbytes[d.leaf] += rte_pktmbuf_pkt_len(m) + OVH;
			}
			rte_pktmbuf_free(m);
			if (s->busy[t.flow])
				sim_push(s, t.flow);
		}
		if (m == NULL && d.next_tsc == UINT64_MAX)
			s->now = until;
		else if (m == NULL && d.next_tsc > s->now)
			s->now = d.next_tsc + (uint64_t)(rand() % (s->jitter_us + 1)) * US / 4;
		else
			s->now += 1 + (uint64_t)(rand() % (s->jitter_us + 1)) * US;
	}
}

static double
mbps(double bytes, uint64_t ticks)
{
	return bytes * 8.0 / ((double)ticks / HZ) / 1e6;
}

static double
relerr(double got, double want)
{
	return fabs(got - want) / want;
}

static void
sim_drain_all(struct sim *s)
{
	unsigned int f, n;
	struct rte_mbuf *out[64];

	for (f = 0; f < s->nf; f++)
		while ((n = weir_cbq_drain(s->c, s->leaf_of[f], f, out, RTE_DIM(out))) > 0)
			rte_pktmbuf_free_bulk(out, n);
}

static struct weir_cbq *
mkcbq(const struct weir_cbq_class_conf *cl, uint16_t n, uint16_t flow_limit)
{
	struct weir_cbq_conf conf = {
		.socket_id = SOCKET_ID_ANY, .tsc_hz = HZ, .n_classes = n, .classes = cl,
		.n_queues = MAXF, .flow_limit = flow_limit, .overhead = OVH, .mtu = 1514,
	};
	struct weir_cbq *c = weir_cbq_create(&conf);

	if (c == NULL) {
		printf("weir_cbq_create failed\n");
		exit(2);
	}
	return c;
}

static const uint16_t SIZES[] = { 1514, 64, 590, 1000, 1514, 300, 1400, 128 };

/* Two classes 20 and 10 Mbit/s under a 30 Mbit/s root, both saturated. */
static void
test_two_classes_exact(void)
{
	struct weir_cbq_class_conf cl[] = {
		{ .rate = 30 * MBIT },
		{ .parent = 0, .rate = 20 * MBIT, .ceil = 30 * MBIT },
		{ .parent = 0, .rate = 10 * MBIT, .ceil = 30 * MBIT },
	};
	static struct sim s;
	uint64_t t0, T = 20 * HZ;
	unsigned int f;
	double a, b;
	struct weir_cbq_stats st0, st1, st2;

	sim_start(&s, mkcbq(cl, 3, 64));
	for (f = 0; f < 8; f++)
		sim_flow(&s, f, 1 + (f & 1), SIZES[f], 1);
	t0 = s.now + HZ;
	sim_run(&s, t0, t0 + T);
	a = mbps(s.cbytes[1], T);
	b = mbps(s.cbytes[2], T);
	printf("  20+10 under 30: %.4f + %.4f Mbit/s\n", a, b);
	CHECK(relerr(a, 20) < 0.001 && relerr(b, 10) < 0.001, "%.4f %.4f", a, b);
	CHECK(s.reorder == 0, "reorder %lu", (unsigned long)s.reorder);
	weir_cbq_stats(s.c, 0, &st0);
	weir_cbq_stats(s.c, 1, &st1);
	weir_cbq_stats(s.c, 2, &st2);
	CHECK(st0.bytes == st1.bytes + st2.bytes && st0.pkts == st1.pkts + st2.pkts, "root sums");
	CHECK(st1.qlen > 0 && st1.drops == 0, "qlen %u drops %lu", st1.qlen, (unsigned long)st1.drops);
	sim_drain_all(&s);
	CHECK(weir_cbq_backlog(s.c) == 0, "drained");
	weir_cbq_free(s.c);
}

/* B idle: A rises to its ceil; then with ceil below the link, to that ceil. */
static void
test_borrow(void)
{
	struct weir_cbq_class_conf cl[] = {
		{ .rate = 30 * MBIT },
		{ .parent = 0, .rate = 20 * MBIT, .ceil = 30 * MBIT },
		{ .parent = 0, .rate = 10 * MBIT, .ceil = 30 * MBIT },
	};
	static struct sim s;
	uint64_t t0, T = 10 * HZ;
	struct weir_cbq_stats st;
	double a;

	sim_start(&s, mkcbq(cl, 3, 64));
	sim_flow(&s, 0, 1, 1514, 1);
	sim_flow(&s, 1, 1, 200, 1);
	t0 = s.now + HZ;
	sim_run(&s, t0, t0 + T);
	a = mbps(s.cbytes[1], T);
	weir_cbq_stats(s.c, 1, &st);
	printf("  borrow: A alone %.4f Mbit/s (ceil 30), borrowed %.1f%%\n", a,
	       100.0 * st.borrowed / st.bytes);
	CHECK(relerr(a, 30) < 0.001, "%.4f", a);
	CHECK(st.borrowed > 0, "borrowed counted");
	sim_drain_all(&s);
	weir_cbq_free(s.c);

	cl[1].ceil = 25 * MBIT;
	sim_start(&s, mkcbq(cl, 3, 64));
	sim_flow(&s, 0, 1, 1514, 1);
	t0 = s.now + HZ;
	sim_run(&s, t0, t0 + T);
	a = mbps(s.cbytes[1], T);
	printf("  borrow: A alone %.4f Mbit/s (ceil 25)\n", a);
	CHECK(relerr(a, 25) < 0.001, "%.4f", a);
	sim_drain_all(&s);
	weir_cbq_free(s.c);
}

/* Excess goes to the lower priority number first. */
static void
test_priority(void)
{
	struct weir_cbq_class_conf cl[] = {
		{ .rate = 30 * MBIT },
		{ .parent = 0, .rate = 5 * MBIT, .ceil = 30 * MBIT, .prio = 1 },
		{ .parent = 0, .rate = 5 * MBIT, .ceil = 30 * MBIT, .prio = 0 },
		{ .parent = 0, .rate = 5 * MBIT, .ceil = 30 * MBIT, .prio = 1 },
	};
	static struct sim s;
	uint64_t t0, T = 10 * HZ;
	double a, b, c;

	sim_start(&s, mkcbq(cl, 4, 64));
	sim_flow(&s, 0, 1, 1514, 1);
	sim_flow(&s, 1, 2, 700, 1);
	sim_flow(&s, 2, 3, 1514, 1);
	t0 = s.now + HZ;
	sim_run(&s, t0, t0 + T);
	a = mbps(s.cbytes[1], T);
	b = mbps(s.cbytes[2], T);
	c = mbps(s.cbytes[3], T);
	printf("  prio: prio1 %.4f, prio0 %.4f, prio1 %.4f Mbit/s\n", a, b, c);
	CHECK(relerr(a, 5) < 0.001 && relerr(b, 20) < 0.001 && relerr(c, 5) < 0.001,
	      "%.4f %.4f %.4f", a, b, c);
	sim_drain_all(&s);
	weir_cbq_free(s.c);
}

/* A two-level tree: inner P (20, ceil 30) with P1, P2 (10, ceil 20); Q (10, ceil 30). */
static void
test_hierarchy(void)
{
	struct weir_cbq_class_conf cl[] = {
		{ .rate = 30 * MBIT },
		{ .parent = 0, .rate = 20 * MBIT, .ceil = 30 * MBIT },         /* 1: P */
		{ .parent = 0, .rate = 10 * MBIT, .ceil = 30 * MBIT },         /* 2: Q */
		{ .parent = 1, .rate = 10 * MBIT, .ceil = 20 * MBIT },         /* 3: P1 */
		{ .parent = 1, .rate = 10 * MBIT, .ceil = 20 * MBIT },         /* 4: P2 */
	};
	static struct sim s;
	uint64_t t0, T = 10 * HZ;
	double p1, p2, q;

	sim_start(&s, mkcbq(cl, 5, 64));
	CHECK(!weir_cbq_is_leaf(s.c, 1) && weir_cbq_is_leaf(s.c, 3), "leaves");
	CHECK(weir_cbq_enqueue(s.c, 1, 0, NULL, s.now) == WEIR_CBQ_DROP_BADCLASS, "inner refuses");
	sim_flow(&s, 0, 3, 1514, 1);
	sim_flow(&s, 1, 4, 400, 1);
	sim_flow(&s, 2, 2, 1514, 1);
	t0 = s.now + HZ;
	sim_run(&s, t0, t0 + T);
	p1 = mbps(s.cbytes[3], T);
	p2 = mbps(s.cbytes[4], T);
	q = mbps(s.cbytes[2], T);
	printf("  tree all busy: P1 %.4f P2 %.4f Q %.4f\n", p1, p2, q);
	CHECK(relerr(p1, 10) < 0.001 && relerr(p2, 10) < 0.001 && relerr(q, 10) < 0.001, "all");

	/* Q goes idle: P may take 30, but P1 and P2 stop at their ceil of 20
	 * each... they share P's 30 by DRR among equal priority: 15 + 15. */
	s.busy[2] = 0;
	memset(s.cbytes, 0, sizeof(s.cbytes));
	t0 = s.now + HZ;
	sim_run(&s, t0, t0 + T);
	p1 = mbps(s.cbytes[3], T);
	p2 = mbps(s.cbytes[4], T);
	printf("  tree Q idle: P1 %.4f P2 %.4f (sum %.4f)\n", p1, p2, p1 + p2);
	CHECK(relerr(p1 + p2, 30) < 0.001, "sum %.4f", p1 + p2);
	CHECK(relerr(p1, 15) < 0.01 && relerr(p2, 15) < 0.01, "%.4f %.4f", p1, p2);
	CHECK(s.reorder == 0, "order");
	sim_drain_all(&s);
	weir_cbq_free(s.c);
}

/* Flows of one leaf, mixed sizes, saturated: DRR fairness; then weights. */
static void
test_flow_fairness(void)
{
	struct weir_cbq_class_conf cl[] = {
		{ .rate = 100 * MBIT },
		{ .parent = 0, .rate = 10 * MBIT, .ceil = 10 * MBIT },
	};
	static struct sim s;
	uint64_t t0, T = 20 * HZ;
	double x[32], sum = 0, sum2 = 0, j, r;
	unsigned int f;

	sim_start(&s, mkcbq(cl, 2, 64));
	for (f = 0; f < 32; f++)
		sim_flow(&s, f, 1, SIZES[f % RTE_DIM(SIZES)] - (f % 5) * 7, 1);
	t0 = s.now + HZ;
	sim_run(&s, t0, t0 + T);
	for (f = 0; f < 32; f++) {
		x[f] = s.fbytes[f];
		sum += x[f];
		sum2 += x[f] * x[f];
	}
	j = sum * sum / (32 * sum2);
	printf("  32 flows mixed sizes in 10 Mbit/s: Jain %.6f, class %.4f Mbit/s\n", j, mbps(sum, T));
	CHECK(j >= 0.99, "jain %.6f", j);
	CHECK(relerr(mbps(sum, T), 10) < 0.001, "class rate");
	CHECK(s.reorder == 0, "order");
	sim_drain_all(&s);
	weir_cbq_free(s.c);

	sim_start(&s, mkcbq(cl, 2, 64));
	weir_drr_set_weight(weir_cbq_qtab(s.c), 1, 3);
	sim_flow(&s, 0, 1, 1514, 1);
	sim_flow(&s, 1, 1, 200, 1);
	t0 = s.now + HZ;
	sim_run(&s, t0, t0 + T);
	r = s.fbytes[1] / s.fbytes[0];
	printf("  weight 3 vs 1: ratio %.4f\n", r);
	CHECK(relerr(r, 3) < 0.01, "%.4f", r);
	sim_drain_all(&s);
	weir_cbq_free(s.c);
}

/* A flow over its limit loses its own packets; others keep theirs. */
static void
test_limits(void)
{
	struct weir_cbq_class_conf cl[] = {
		{ .rate = 10 * MBIT },
		{ .parent = 0, .rate = 10 * MBIT, .limit = 30 },
	};
	static struct sim s;
	struct weir_cbq_stats st;
	struct weir_drr_qtab *qt;
	unsigned int i, rc_flow = 0, rc_class = 0;

	sim_start(&s, mkcbq(cl, 2, 8));
	qt = weir_cbq_qtab(s.c);
	sim_flow(&s, 7, 1, 1000, 0);
	sim_flow(&s, 9, 1, 1000, 0);
	sim_flow(&s, 11, 1, 1000, 0);
	for (i = 0; i < 20; i++)
		rc_flow += sim_push(&s, 7) == WEIR_CBQ_DROP_FLOW;
	for (i = 0; i < 5; i++)
		sim_push(&s, 9);
	CHECK(rc_flow == 12 && qt->q[7].drops == 12 && qt->q[9].drops == 0,
	      "flow drops %u/%u", rc_flow, qt->q[7].drops);
	for (i = 0; i < 8; i++)
		sim_push(&s, 11);
	/* 8 + 5 + 8 = 21 queued; class limit 30 not reached */
	for (i = 0; i < 20; i++) {                 /* 20 new flows, 1 packet each */
		sim_flow(&s, 1000 - 1 - i, 1, 1000, 0);
		sim_push(&s, 1000 - 1 - i);
	}
	weir_cbq_stats(s.c, 1, &st);
	CHECK(st.qlen == 30, "qlen %u", st.qlen);
	CHECK(st.drops_flow == 12 && st.drops_class == 11, "flow %lu class %lu",
	      (unsigned long)st.drops_flow, (unsigned long)st.drops_class);
	for (i = 0; i < 20; i++)
		rc_class += qt->q[1000 - 1 - i].drops;
	CHECK(rc_class == 11 && qt->q[7].drops == 12 && qt->q[9].drops == 0 && qt->q[11].drops == 0,
	      "class drops on the arriving flows: %u", rc_class);
	sim_drain_all(&s);
	weir_cbq_free(s.c);
}

/* A full leaf with per-flow queues drops the head of its longest queue
 * (weir_cbq_enqueue_evict), so a flood keeping the class full costs the
 * flooder, not a flow arriving beside it; a fifo leaf's arrival pays. */
static void
test_evict(void)
{
	struct weir_cbq_class_conf cl[] = {
		{ .rate = 10 * MBIT },
		{ .parent = 0, .rate = 10 * MBIT, .limit = 10 },
		{ .parent = 0, .rate = 10 * MBIT, .limit = 10, .fifo = 1 },
	};
	struct weir_cbq *c = mkcbq(cl, 3, 64);
	struct weir_drr_qtab *qt = weir_cbq_qtab(c);
	struct rte_mbuf *ev, *out[16];
	uint32_t evq = 0, seq_flood = 0;
	unsigned int n, evicted = 0;
	int rc;

	for (uint32_t i = 0; i < 9; i++)
		CHECK(weir_cbq_enqueue(c, 1, 5, mk(5, seq_flood++, 1000), 0) == 0, "flood queued");
	CHECK(weir_cbq_enqueue(c, 1, 6, mk(6, 0, 100), 0) == 0, "10th queued");
	/* Full: a new flow's packet is taken, the flood's head dropped. */
	for (uint32_t i = 0; i < 3; i++) {
		rc = weir_cbq_enqueue_evict(c, 1, 7, mk(7, i, 100), 0, 0, &ev, &evq);
		if (rc == 0 && ev != NULL && evq == 5 && unit_tag_of(ev).seq == evicted) {
			evicted++;
			rte_pktmbuf_free(ev);
		}
	}
	CHECK(evicted == 3 && qt->q[5].drops == 3 && qt->q[7].drops == 0 && qt->q[5].len == 6 &&
	      qt->q[7].len == 3, "the longest queue's head pays (%u evicted, flood %u left)",
	      evicted, qt->q[5].len);
	/* The flood's own arrival, it being the longest: it pays itself. */
	rc = weir_cbq_enqueue_evict(c, 1, 5, mk(5, seq_flood, 1000), 0, UINT64_MAX, &ev, &evq);
	CHECK(rc == WEIR_CBQ_DROP_CLASS && ev == NULL && qt->q[5].drops == 4, "own arrival refused");
	/* Order kept: the flood's survivors leave in sequence from 3. */
	n = weir_cbq_drain(c, 1, 5, out, RTE_DIM(out));
	CHECK(n == 6 && unit_tag_of(out[0]).seq == 3 && unit_tag_of(out[5]).seq == 8, "in order");
	rte_pktmbuf_free_bulk(out, n);
	while ((n = weir_cbq_drain(c, 1, 6, out, RTE_DIM(out))) > 0)
		rte_pktmbuf_free_bulk(out, n);
	while ((n = weir_cbq_drain(c, 1, 7, out, RTE_DIM(out))) > 0)
		rte_pktmbuf_free_bulk(out, n);
	/* A fifo leaf: the arrival pays. */
	for (uint32_t i = 0; i < 10; i++)
		weir_cbq_enqueue(c, 2, 100, mk(8, i, 1000), 0);
	rc = weir_cbq_enqueue_evict(c, 2, 100, mk(9, 0, 100), 0, 0, &ev, &evq);
	CHECK(rc == WEIR_CBQ_DROP_CLASS && ev == NULL, "fifo: the arrival pays");
	while ((n = weir_cbq_drain(c, 2, 100, out, RTE_DIM(out))) > 0)
		rte_pktmbuf_free_bulk(out, n);
	weir_cbq_free(c);
}

/* The pool-share bound (a tree's backlog_limit, its part of the mempool)
 * follows the same rule: past its part, the leaf's longest queue pays, not
 * a flow arriving beside a flood; the flood's own arrival is refused. */
static void
test_pool_evict(void)
{
	struct weir_cbq_class_conf cl[] = {
		{ .rate = 10 * MBIT },
		{ .parent = 0, .rate = 5 * MBIT, .ceil = 10 * MBIT },
		{ .parent = 0, .rate = 5 * MBIT, .ceil = 10 * MBIT },
	};
	struct weir_cbq_conf conf = {
		.socket_id = SOCKET_ID_ANY, .tsc_hz = HZ, .n_classes = 3, .classes = cl,
		.n_queues = MAXF, .flow_limit = 64, .overhead = OVH, .mtu = 1514,
		.backlog_limit = 16,    /* soft bound 12, 6 a leaf */
	};
	struct weir_cbq *c = weir_cbq_create(&conf);
	struct weir_drr_qtab *qt;
	struct weir_cbq_stats st;
	struct rte_mbuf *ev, *out[32];
	uint32_t evq = 0;
	unsigned int n;
	int rc;

	if (c == NULL) {
		CHECK(0, "create");
		return;
	}
	qt = weir_cbq_qtab(c);
	for (uint32_t i = 0; i < 12; i++)
		weir_cbq_enqueue(c, 1, 5, mk(5, i, 1000), 0);
	/* Leaf 1 holds 12, past its part of 6 at the soft bound. */
	rc = weir_cbq_enqueue_evict(c, 1, 7, mk(7, 0, 100), 0, 0, &ev, &evq);
	CHECK(rc == 0 && ev != NULL && evq == 5 && unit_tag_of(ev).seq == 0 && qt->q[7].len == 1,
	      "a new flow's packet is taken, the flood's head pays (rc %d)", rc);
	if (ev != NULL)
		rte_pktmbuf_free(ev);
	rc = weir_cbq_enqueue_evict(c, 1, 5, mk(5, 12, 1000), 0, UINT64_MAX, &ev, &evq);
	CHECK(rc == WEIR_CBQ_DROP_POOL && ev == NULL, "the flood's own arrival refused: %d", rc);
	CHECK(weir_cbq_stats(c, 1, &st) == 0 && st.drops_pool == 2 && st.drops_class == 0,
	      "counted pool: %lu", (unsigned long)st.drops_pool);
	/* The other leaf, under its part, still queues. */
	CHECK(weir_cbq_enqueue_evict(c, 2, 9, mk(9, 0, 100), 0, 0, &ev, &evq) == 0 && ev == NULL,
	      "a leaf under its part queues");
	static const uint32_t held[][2] = { { 1, 5 }, { 1, 7 }, { 2, 9 } };

	for (unsigned int i = 0; i < RTE_DIM(held); i++)
		while ((n = weir_cbq_drain(c, (uint16_t)held[i][0], held[i][1], out,
					   RTE_DIM(out))) > 0)
			rte_pktmbuf_free_bulk(out, n);
	weir_cbq_free(c);
}

/* Extremes of the rate range, each exact. */
static void
test_extreme_rates(void)
{
	struct weir_cbq_class_conf cl[] = {
		{ .rate = 100000 * MBIT },
		{ .parent = 0, .rate = 8000, .ceil = 8000 },
		{ .parent = 0, .rate = 99000 * MBIT, .ceil = 100000 * MBIT },
	};
	static struct sim s;
	uint64_t t0, T;
	double a, b;

	/* 100 Gbit/s: 99 G guaranteed + the 1 G nobody else uses */
	sim_start(&s, mkcbq(cl, 3, 64));
	s.jitter_us = 2;
	s.burst = 1024;         /* ~2 us of 100 Gbit/s in 64-byte frames */
	sim_flow(&s, 0, 2, 1514, 1);
	sim_flow(&s, 1, 2, 64, 1);
	T = HZ / 20;
	t0 = s.now + HZ / 100;
	sim_run(&s, t0, t0 + T);
	b = mbps(s.cbytes[2], T);
	printf("  100 Gbit/s: %.3f Mbit/s\n", b);
	CHECK(relerr(b, 100000) < 0.001, "%.3f", b);
	sim_drain_all(&s);
	weir_cbq_free(s.c);

	/* 8 kbit/s, 100-byte frames, for 1000 s of fake time */
	sim_start(&s, mkcbq(cl, 3, 64));
	sim_flow(&s, 0, 1, 76, 1);      /* + 24 overhead = 100 wire bytes */
	T = 1000 * HZ;
	t0 = s.now + 10 * HZ;
	sim_run(&s, t0, t0 + T);
	a = mbps(s.cbytes[1], T) * 1000;
	printf("  8 kbit/s: %.4f kbit/s\n", a);
	CHECK(relerr(a, 8) < 0.001, "%.4f", a);
	sim_drain_all(&s);
	weir_cbq_free(s.c);
}

/* Cut-through charges exactly what enqueue + dequeue on an empty tree would:
 * twin trees, one sending by weir_cbq_cut_through, the other queueing each
 * packet and dequeuing it at once, agree on what may go at every instant and
 * on every class's counters (borrowed and lent included). */
static void
test_cut_through(void)
{
	struct weir_cbq_class_conf cl[] = {
		{ .rate = 10 * MBIT },
		{ .parent = 0, .rate = 2 * MBIT, .ceil = 10 * MBIT },   /* borrows */
		{ .parent = 0, .rate = 8 * MBIT, .ceil = 8 * MBIT },
	};
	struct weir_cbq *a = mkcbq(cl, 3, 64), *b = mkcbq(cl, 3, 64);
	uint64_t now = HZ, sent_a = 0, sent_b = 0;
	int same = 1;

	for (unsigned int round = 0; round < 2000; round++) {
		uint32_t leaf = 1 + (uint16_t)(round % 3 == 0);
		uint16_t len = SIZES[round % RTE_DIM(SIZES)];
		unsigned int na = 0, nb = 0;
		struct weir_cbq_deq d;

		while (na < 64 && weir_cbq_cut_through(a, leaf, len, now))
			na++;
		while (nb < 64) {
			struct rte_mbuf *m = mk(0, nb, len);

			if (weir_cbq_enqueue(b, leaf, 0, m, now) != 0) {
				rte_pktmbuf_free(m);
				break;
			}
			m = weir_cbq_dequeue(b, now, &d);
			if (m == NULL) {
				struct rte_mbuf *out[1];

				if (weir_cbq_drain(b, leaf, 0, out, 1) == 1)
					rte_pktmbuf_free(out[0]);
				break;
			}
			rte_pktmbuf_free(m);
			nb++;
		}
		same &= na == nb;
		sent_a += na;
		sent_b += nb;
		now += (uint64_t)(rand() % 2000) * US;
	}
	CHECK(same && sent_a == sent_b && sent_a > 2000, "same packets allowed (%" PRIu64 " / %" PRIu64 ")",
	      sent_a, sent_b);
	for (uint16_t i = 0; i < 3; i++) {
		struct weir_cbq_stats sa, sb;

		weir_cbq_stats(a, i, &sa);
		weir_cbq_stats(b, i, &sb);
		CHECK(sa.bytes == sb.bytes && sa.pkts == sb.pkts && sa.borrowed == sb.borrowed &&
		      sa.lent == sb.lent, "class %u counters equal (%" PRIu64 " / %" PRIu64 " bytes)", i,
		      sa.bytes, sb.bytes);
	}
	/* A packet queued: nothing cuts through, whatever the tokens. */
	{
		struct rte_mbuf *m = mk(1, 0, 100), *out[1];

		now += 10 * HZ;
		CHECK(weir_cbq_enqueue(a, 2, 1, m, now) == 0 && !weir_cbq_cut_through(a, 1, 100, now),
		      "no cut-through past a backlog");
		if (weir_cbq_drain(a, 2, 1, out, 1) == 1)
			rte_pktmbuf_free(out[0]);
	}
	weir_cbq_free(a);
	weir_cbq_free(b);
}

/* set_rate at run time takes effect; next_tsc is sane. */
static void
test_set_rate(void)
{
	struct weir_cbq_class_conf cl[] = {
		{ .rate = 30 * MBIT },
		{ .parent = 0, .rate = 20 * MBIT, .ceil = 20 * MBIT },
		{ .parent = 0, .rate = 10 * MBIT, .ceil = 10 * MBIT },
	};
	static struct sim s;
	uint64_t t0, T = 10 * HZ;
	struct weir_cbq_deq d;
	double a, b;

	sim_start(&s, mkcbq(cl, 3, 64));
	sim_flow(&s, 0, 1, 1514, 1);
	sim_flow(&s, 1, 2, 1514, 1);
	t0 = s.now + HZ;
	sim_run(&s, t0, t0 + T);
	CHECK(relerr(mbps(s.cbytes[1], T), 20) < 0.001, "before");
	CHECK(weir_cbq_set_rate(s.c, 1, 5 * MBIT, 5 * MBIT) == 0, "set");
	CHECK(weir_cbq_set_rate(s.c, 2, 25 * MBIT, 25 * MBIT) == 0, "set");
	CHECK(weir_cbq_set_rate(s.c, 2, 25 * MBIT, 1 * MBIT) != 0, "ceil < rate refused");
	CHECK(weir_cbq_set_rate(s.c, 2, 0, 0) != 0, "0 bit/s refused");
	memset(s.cbytes, 0, sizeof(s.cbytes));
	t0 = s.now + HZ;
	sim_run(&s, t0, t0 + T);
	a = mbps(s.cbytes[1], T);
	b = mbps(s.cbytes[2], T);
	printf("  set_rate 20/10 -> 5/25: %.4f %.4f Mbit/s\n", a, b);
	CHECK(relerr(a, 5) < 0.001 && relerr(b, 25) < 0.001, "%.4f %.4f", a, b);
	/* blocked now: the tree says when to come back, in the future, and
	 * something is sendable then */
	while (weir_cbq_dequeue(s.c, s.now, &d) != NULL)
		;
	CHECK(d.next_tsc > s.now && d.next_tsc < s.now + HZ / 100, "next in %lu ticks",
	      (unsigned long)(d.next_tsc - s.now));
	{
		struct rte_mbuf *m = weir_cbq_dequeue(s.c, d.next_tsc, &d);

		CHECK(m != NULL, "sendable at next_tsc");
		rte_pktmbuf_free(m);
	}
	sim_drain_all(&s);
	CHECK(weir_cbq_dequeue(s.c, s.now, &d) == NULL && d.next_tsc == UINT64_MAX, "idle");
	weir_cbq_free(s.c);
}

/* Cycles per packet, enqueue + dequeue, 1K flows over 16 leaves, never rate-limited. */
static void
bench(void)
{
	struct weir_cbq_class_conf cl[17];
	struct weir_cbq *c;
	struct rte_mbuf *m[1024];
	struct weir_cbq_deq d;
	uint64_t t, cyc = 0, now = HZ, pkts = 0;
	unsigned int i, r, n;

	cl[0] = (struct weir_cbq_class_conf){ .rate = 400000 * MBIT };
	for (i = 1; i < 17; i++)
		cl[i] = (struct weir_cbq_class_conf){ .parent = 0, .rate = 20000 * MBIT,
						      .ceil = 400000 * MBIT, .prio = i % 4 };
	c = mkcbq(cl, 17, 64);
	for (r = 0; r < 200; r++) {
		for (i = 0; i < 1024; i++)
			m[i] = mk(i, 0, 64 + (i % 23) * 64);
		t = rte_rdtsc();
		for (i = 0; i < 1024; i++)
			weir_cbq_enqueue(c, 1 + (i & 15), (i * 7) & 1023, m[i], now);
		for (n = 0; n < 1024; n++) {
			m[n] = weir_cbq_dequeue(c, now, &d);
			if (m[n] == NULL)
				break;
		}
		cyc += rte_rdtsc() - t;
		pkts += n;
		rte_pktmbuf_free_bulk(m, n);
		now += HZ / 1000;
	}
	printf("  bench: %.1f cycles/packet enqueue+dequeue (1K flows, 16 leaves, %lu pkts)\n",
	       (double)cyc / pkts, (unsigned long)pkts);
	CHECK(pkts == 200 * 1024, "all out: %lu", (unsigned long)pkts);
	weir_cbq_free(c);
}

int
main(int argc, char **argv)
{
	RTE_SET_USED(argc);
	srand(1);
	unit_eal_init(argv[0], "cbq", "256");
	mp = rte_pktmbuf_pool_create("cbq_test", 16383, 0, WEIR_MBUF_PRIV_SIZE,
				     RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
	if (mp == NULL) {
		printf("mempool failed\n");
		return 1;
	}
	test_two_classes_exact();
	test_borrow();
	test_priority();
	test_hierarchy();
	test_flow_fairness();
	test_limits();
	test_evict();
	test_pool_evict();
	test_extreme_rates();
	test_set_rate();
	test_cut_through();
	bench();
	rte_eal_cleanup();
	return unit_report();
}
