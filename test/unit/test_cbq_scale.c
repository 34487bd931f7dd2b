/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests of the class tree at ISP scale (lib/sched/cbq.c), on a fake TSC:
 * 100,000 leaves under three levels of nodes, run-time changes of one
 * class (set, add, remove), bursts and time boosts.
 *
 * Cost is counted, not timed: weir_cbq_visits() is the number of leaves
 * dequeue looked at, so "cost does not grow with idle leaves" is an exact
 * comparison between a tree of 100,000 leaves and one holding only the
 * active ones, under the same traffic.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_common.h>
#include <rte_eal.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "unit.h"
#include "cbq.h"

#define HZ 2500000000ull        /* a 2.5 GHz TSC */
#define US (HZ / 1000000)
#define MS (HZ / 1000)
#define MBIT 1000000ull
#define OVH 24u
#define FRAME 1514u

#define SITES 10u
#define APS 10u                 /* per site */
#define GROUPS 10u              /* per access point */
#define NODES (1u + SITES + SITES * APS + SITES * APS * GROUPS)        /* 1,111 */
#define LEAVES 100000u
#define PER_GROUP (LEAVES / (SITES * APS * GROUPS))                     /* 100 */
#define MAXF 4096u

static struct rte_mempool *mp;

/* A tree of `leaves` leaves spread evenly under 1,000 groups of 3 levels of
 * nodes, each leaf rate..ceil; the ids of leaf j of group g are
 * NODES + g * per + j. */
static struct weir_cbq *
mk_tree(uint32_t per, uint64_t rate, uint64_t ceil, uint32_t spare)
{
	uint32_t n = NODES + SITES * APS * GROUPS * per, i = 0, g;
	struct weir_cbq_class_conf *cl = calloc(n, sizeof(*cl));
	struct weir_cbq *c;

	cl[i++] = (struct weir_cbq_class_conf){ .rate = 40000 * MBIT };
	for (g = 0; g < SITES; g++)
		cl[i++] = (struct weir_cbq_class_conf){ .parent = 0, .rate = 4000 * MBIT };
	for (g = 0; g < SITES * APS; g++)
		cl[i++] = (struct weir_cbq_class_conf){ .parent = 1 + g / APS, .rate = 400 * MBIT };
	for (g = 0; g < SITES * APS * GROUPS; g++)
		cl[i++] = (struct weir_cbq_class_conf){ .parent = 1 + SITES + g / GROUPS,
							 .rate = 40 * MBIT };
	for (g = 0; g < SITES * APS * GROUPS; g++)
		for (uint32_t j = 0; j < per; j++)
			cl[i++] = (struct weir_cbq_class_conf){
				.parent = 1 + SITES + SITES * APS + g, .rate = rate, .ceil = ceil };
	struct weir_cbq_conf conf = {
		.socket_id = SOCKET_ID_ANY, .tsc_hz = HZ, .n_classes = n, .classes = cl,
		.capacity = n + spare, .n_queues = MAXF, .flow_limit = 64, .overhead = OVH,
		.mtu = FRAME,
	};
	c = weir_cbq_create(&conf);
	free(cl);
	if (c == NULL) {
		printf("weir_cbq_create (%u classes) failed\n", n);
		exit(2);
	}
	return c;
}

/* Traffic: flow f of leaf leaf_of[f] kept backlogged (two packets queued). */
struct load {
	struct weir_cbq *c;
	uint64_t now;
	uint32_t nf;
	uint32_t leaf_of[MAXF];
	uint8_t busy[MAXF];
	uint32_t seq_in[MAXF], seq_out[MAXF];
	double bytes[MAXF];     /* wire bytes in the window */
	uint64_t pkts;          /* dequeued in the window */
	uint64_t reorder, drops;
};

static void
push(struct load *l, uint32_t f)
{
	struct rte_mbuf *m = unit_tagged_mbuf(mp, f, l->seq_in[f], FRAME);

	if (weir_cbq_enqueue(l->c, l->leaf_of[f], f, m, l->now) != 0) {
		rte_pktmbuf_free(m);
		l->drops++;
		return;
	}
	l->seq_in[f]++;
}

static void
add_flow(struct load *l, uint32_t leaf)
{
	uint32_t f = l->nf++;

	l->leaf_of[f] = leaf;
	l->busy[f] = 1;
	push(l, f);
	push(l, f);
}

/* Run the worker's loop from l->now to `end`, counting from `from`. */
static void
run(struct load *l, uint64_t from, uint64_t end)
{
	struct weir_cbq_deq d;

	while (l->now < end) {
		unsigned int k;

		for (k = 0; k < 32; k++) {
			struct rte_mbuf *m = weir_cbq_dequeue(l->c, l->now, &d);
			struct unit_tag t;

			for (unsigned int x = 0; x < d.n_dropped; x++)
				rte_pktmbuf_free(d.dropped[x]);
			if (m == NULL)
				break;
			t = unit_tag_of(m);
			if (t.seq != l->seq_out[t.flow])
				l->reorder++;
			l->seq_out[t.flow] = t.seq + 1;
			if (l->now >= from) {
				l->bytes[t.flow] += rte_pktmbuf_pkt_len(m) + OVH;
				l->pkts++;
			}
			rte_pktmbuf_free(m);
			if (l->busy[t.flow])
				push(l, t.flow);
		}
		if (k == 0)
			l->now = RTE_MIN(RTE_MAX(d.next_tsc, l->now + 1), end);
		else
			l->now += 2 * US;
	}
}

static double
mbps(double bytes, uint64_t ticks)
{
	return bytes * 8.0 / ((double)ticks / HZ) / 1e6;
}

static void
reset_window(struct load *l)
{
	memset(l->bytes, 0, sizeof(l->bytes));
	l->pkts = 0;
}

/* Every flow's rate within 2 % of want (Mbit/s); the worst error. */
static double
worst_err(const struct load *l, uint32_t f0, uint32_t n, uint64_t T, double want)
{
	double worst = 0;

	for (uint32_t f = f0; f < f0 + n; f++)
		worst = RTE_MAX(worst, fabs(mbps(l->bytes[f], T) - want) / want);
	return worst;
}

/* 1,000 active leaves, one in each group, each held by its own ceiling
 * (2 Mbit/s, rate 1): in a tree of 100,000 leaves, and in one with only
 * those 1,000. Rates right in both; dequeue looks at exactly as many
 * leaves in both: the 99,000 idle ones cost nothing. */
static void
test_idle_leaves_cost_nothing(void)
{
	static struct load big, small;
	uint64_t T = HZ, vb, vs;
	double eb, es;
	struct load *l[2] = { &big, &small };

	big.c = mk_tree(PER_GROUP, 1 * MBIT, 2 * MBIT, 0);
	small.c = mk_tree(1, 1 * MBIT, 2 * MBIT, 0);
	CHECK(weir_cbq_capacity(big.c) == NODES + LEAVES, "capacity %u", weir_cbq_capacity(big.c));
	for (uint32_t g = 0; g < SITES * APS * GROUPS; g++) {
		add_flow(&big, NODES + g * PER_GROUP + (g * 37) % PER_GROUP);
		add_flow(&small, NODES + g);
	}
	for (int x = 0; x < 2; x++) {
		run(l[x], 0, HZ / 4);
		reset_window(l[x]);
	}
	vb = weir_cbq_visits(big.c);
	vs = weir_cbq_visits(small.c);
	run(&big, big.now, big.now + T);
	run(&small, small.now, small.now + T);
	vb = weir_cbq_visits(big.c) - vb;
	vs = weir_cbq_visits(small.c) - vs;
	eb = worst_err(&big, 0, big.nf, T, 2.0);
	es = worst_err(&small, 0, small.nf, T, 2.0);
	printf("  1,000 active of 100,000 leaves: worst rate error %.4f (1,000 of 1,000: %.4f); "
	       "leaves looked at per packet %.3f (%.3f); %" PRIu64 " packets\n",
	       eb, es, (double)vb / big.pkts, (double)vs / small.pkts, big.pkts);
	CHECK(eb < 0.02 && es < 0.02, "every active leaf at its ceiling within 2 %%: %.4f %.4f", eb, es);
	CHECK(big.reorder == 0 && small.reorder == 0 && big.drops == 0, "no reorder, no drop");
	CHECK(big.pkts > 0 && (double)vb / big.pkts <= 1.02 * (double)vs / small.pkts + 0.01,
	      "idle leaves are not looked at: %.3f against %.3f a packet",
	      (double)vb / big.pkts, (double)vs / small.pkts);
	CHECK((double)vb / big.pkts <= 4.0, "a few leaves a packet, not the backlogged ones: %.3f",
	      (double)vb / big.pkts);
	for (int x = 0; x < 2; x++) {
		memset(l[x]->busy, 0, sizeof(l[x]->busy));
		run(l[x], l[x]->now, l[x]->now + HZ / 10);
		CHECK(weir_cbq_backlog(l[x]->c) == 0, "drained");
		weir_cbq_free(l[x]->c);
	}
}

/* 4,000 active leaves, 4 in each of 1,000 groups whose 40 Mbit/s... held
 * below: 40 groups hold 100 busy leaves each beside the others' idle ones;
 * each group's leaves share it (rate 0.1, ceil 10: borrowing), and the
 * cost per packet does not grow with the 100,000 leaves. */
static void
test_borrowing_at_scale(void)
{
	static struct load l;
	uint64_t T = 2 * HZ, v;
	double e;
	uint32_t n = 0;

	l.c = mk_tree(PER_GROUP, MBIT / 10, 10 * MBIT, 0);
	/* Groups 0, 25, 50, ...: 40 of them, all 100 leaves busy: 0.4 Mbit/s each. */
	for (uint32_t g = 0; g < SITES * APS * GROUPS; g += 25)
		for (uint32_t j = 0; j < PER_GROUP; j++, n++)
			add_flow(&l, NODES + g * PER_GROUP + j);
	run(&l, 0, HZ / 2);
	reset_window(&l);
	v = weir_cbq_visits(l.c);
	run(&l, l.now, l.now + T);
	v = weir_cbq_visits(l.c) - v;
	e = worst_err(&l, 0, n, T, 0.4);
	printf("  %u borrowing leaves in 40 full groups: worst error %.4f, leaves looked at per "
	       "packet %.2f\n", n, e, (double)v / l.pkts);
	CHECK(e < 0.02, "each leaf its part of its group within 2 %%: %.4f", e);
	CHECK(l.reorder == 0 && l.drops == 0, "no reorder, no drop");
	memset(l.busy, 0, sizeof(l.busy));
	run(&l, l.now, l.now + HZ / 10);
	weir_cbq_free(l.c);
}

/* Memory: 100,000 leaves and 1,000,000 per-flow queue heads within 256 MB. */
static void
test_memory(void)
{
	size_t per = weir_cbq_bytes_per_class();
	size_t total = (size_t)(NODES + LEAVES) * per + 1000000u * sizeof(struct weir_drr_q);

	printf("  %zu bytes a class, %zu a flow queue: 100,000 leaves + 1M flows = %.1f MB a "
	       "direction\n", per, sizeof(struct weir_drr_q), total / 1e6);
	CHECK(2 * total < 256u << 20, "both directions of one worker within 256 MB: %zu", 2 * total);
}

/* A class changed, added and removed on the run: nothing queued dropped or
 * reordered, counters kept, the new figures in force at once. */
static void
test_live_change(void)
{
	static struct load l;
	uint64_t T = HZ;
	struct weir_cbq_stats st0, st1;
	struct weir_cbq_class_conf cc = { .rate = 1 * MBIT, .ceil = 6 * MBIT };
	uint32_t a = NODES + 5, b = NODES + 7, fresh, q0;
	double ra, rb;

	l.c = mk_tree(PER_GROUP, 1 * MBIT, 2 * MBIT, 10);
	add_flow(&l, a);
	add_flow(&l, b);
	run(&l, 0, HZ / 2);
	CHECK(weir_cbq_stats(l.c, a, &st0) == 0 && st0.qlen > 0, "a is backlogged");
	q0 = st0.qlen;
	CHECK(weir_cbq_class_set(l.c, a, &cc) == 0, "set a to 1..6 Mbit/s");
	CHECK(weir_cbq_stats(l.c, a, &st1) == 0 && st1.qlen == q0 && st1.pkts == st0.pkts &&
	      st1.bytes == st0.bytes && st1.ceil_bps == 6 * MBIT, "queue and counters kept");
	reset_window(&l);
	run(&l, l.now, l.now + T);
	ra = mbps(l.bytes[0], T);
	rb = mbps(l.bytes[1], T);
	printf("  live change: a %.4f Mbit/s (6), b %.4f (2)\n", ra, rb);
	CHECK(fabs(ra - 6) / 6 < 0.02 && fabs(rb - 2) / 2 < 0.02, "a at 6, b at 2: %.4f %.4f", ra, rb);
	CHECK(l.reorder == 0 && l.drops == 0, "no reorder, no drop");

	/* A new leaf under a's group, then traffic through it. */
	fresh = weir_cbq_class_free_id(l.c);
	cc = (struct weir_cbq_class_conf){ .parent = 1 + SITES + SITES * APS, .rate = 3 * MBIT };
	CHECK(fresh == NODES + LEAVES, "the first spare id (%u)", fresh);
	CHECK(weir_cbq_class_add(l.c, fresh, &cc) == 0 && weir_cbq_is_leaf(l.c, fresh), "added");
	CHECK(weir_cbq_class_add(l.c, fresh, &cc) == -EEXIST, "added twice");
	add_flow(&l, fresh);
	reset_window(&l);
	run(&l, l.now, l.now + T);
	ra = mbps(l.bytes[2], T);
	printf("  added leaf: %.4f Mbit/s (3)\n", ra);
	CHECK(fabs(ra - 3) / 3 < 0.02, "the new leaf at its rate: %.4f", ra);
	CHECK(weir_cbq_class_remove(l.c, fresh) == -EBUSY, "a busy leaf stays");
	l.busy[2] = 0;
	run(&l, l.now, l.now + HZ / 10);
	CHECK(weir_cbq_class_remove(l.c, fresh) == 0 && !weir_cbq_is_leaf(l.c, fresh) &&
	      weir_cbq_stats(l.c, fresh, &st0) == -EINVAL, "an idle leaf goes");
	CHECK(weir_cbq_class_free_id(l.c) == fresh, "its id is free again");
	{
		struct rte_mbuf *m = unit_tagged_mbuf(mp, 3, 0, FRAME);

		CHECK(weir_cbq_enqueue(l.c, fresh, 3, m, l.now) == WEIR_CBQ_DROP_BADCLASS,
		      "a removed id takes nothing");
		rte_pktmbuf_free(m);
	}
	/* A leaf under a leaf: that leaf becomes a node (it was idle). */
	cc.parent = NODES + 9;
	CHECK(weir_cbq_class_add(l.c, NODES + LEAVES + 1, &cc) == 0 && !weir_cbq_is_leaf(l.c, NODES + 9),
	      "a leaf parent becomes a node");
	CHECK(weir_cbq_class_remove(l.c, NODES + LEAVES + 1) == 0 && weir_cbq_is_leaf(l.c, NODES + 9),
	      "and a leaf again without children");
	cc.parent = a;
	CHECK(weir_cbq_class_add(l.c, NODES + LEAVES + 2, &cc) == -EBUSY, "not under a busy leaf");
	memset(l.busy, 0, sizeof(l.busy));
	run(&l, l.now, l.now + HZ / 10);
	weir_cbq_free(l.c);
}

/* Burst (cburst in bytes) and time boost of one leaf. */
static void
test_burst_boost(void)
{
	static struct load l;
	struct weir_cbq_class_conf cl[] = {
		{ .rate = 1000 * MBIT },
		{ .parent = 0, .rate = 2 * MBIT, .burst = 100000, .cburst = 100000 },
		{ .parent = 0, .rate = 2 * MBIT, .boost_ceil = 8 * MBIT, .boost_ms = 500,
		  .boost_idle_ms = 1000 },
	};
	struct weir_cbq_conf conf = {
		.socket_id = SOCKET_ID_ANY, .tsc_hz = HZ, .n_classes = 3, .classes = cl,
		.n_queues = MAXF, .flow_limit = 256, .overhead = OVH, .mtu = FRAME,
	};
	double sent = 0, r;
	struct weir_cbq_deq d;
	struct rte_mbuf *m;

	l.c = weir_cbq_create(&conf);
	CHECK(l.c != NULL, "created");
	if (l.c == NULL)
		return;
	/* Leaf 1 idle long enough to fill: 100 KB leave at one instant. */
	l.now = 10 * HZ;
	for (int k = 0; k < 200; k++) {
		struct rte_mbuf *p = unit_tagged_mbuf(mp, 0, l.seq_in[0]++, FRAME);

		if (weir_cbq_enqueue(l.c, 1, 0, p, l.now) != 0)
			rte_pktmbuf_free(p);
	}
	while ((m = weir_cbq_dequeue(l.c, l.now, &d)) != NULL) {
		sent += rte_pktmbuf_pkt_len(m) + OVH;
		rte_pktmbuf_free(m);
	}
	printf("  burst: %.0f bytes at once (100000 configured)\n", sent);
	CHECK(sent >= 100000 && sent <= 100000 + 2 * (FRAME + OVH), "the burst: %.0f", sent);
	{
		struct rte_mbuf *out[256];
		unsigned int n = weir_cbq_drain(l.c, 1, 0, out, 256);

		rte_pktmbuf_free_bulk(out, n);
	}
	/* Leaf 2: its first 500 ms at 8 Mbit/s, then 2. */
	l.leaf_of[1] = 2;
	l.busy[1] = 1;
	l.nf = 2;
	push(&l, 1);
	push(&l, 1);
	reset_window(&l);
	run(&l, l.now, l.now + 500 * MS);
	r = mbps(l.bytes[1], 500 * MS);
	printf("  boost: %.3f Mbit/s for its 500 ms (8)", r);
	CHECK(fabs(r - 8) / 8 < 0.03, "boosted: %.3f", r);
	reset_window(&l);
	run(&l, l.now, l.now + HZ);
	r = mbps(l.bytes[1], HZ);
	printf(", then %.3f (2)\n", r);
	CHECK(fabs(r - 2) / 2 < 0.02, "back to the plan: %.3f", r);
	l.busy[1] = 0;
	run(&l, l.now, l.now + HZ / 10);
	weir_cbq_free(l.c);
}

int
main(int argc, char **argv)
{
	RTE_SET_USED(argc);
	unit_eal_init(argv[0], "cbq_scale", "1024");
	mp = rte_pktmbuf_pool_create("cbq_scale", 16383, 256, WEIR_MBUF_PRIV_SIZE,
				     RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
	if (mp == NULL) {
		printf("mempool failed\n");
		return 1;
	}
	test_memory();
	test_idle_leaves_cost_nothing();
	test_borrowing_at_scale();
	test_live_change();
	test_burst_boost();
	rte_eal_cleanup();
	return unit_report();
}
