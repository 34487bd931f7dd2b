/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for per-flow DRR (lib/sched/drr.c) with real mbufs from a mempool.
 * A packet carries (flow, sequence) in its data so order can be checked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_eal.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "unit.h"
#include "codel.h"
#include "drr.h"


static struct rte_mempool *mp;


static struct rte_mbuf *
mk(uint32_t flow, uint32_t seq, uint16_t len)
{
	struct rte_mbuf *m = unit_tagged_mbuf(mp, flow, seq, len);

	weir_mbuf_meta(m)->pkt.clocked = 0;     /* a recycled mbuf's would linger */
	return m;
}

static double
jain(const double *x, unsigned int n)
{
	double s = 0, s2 = 0;
	unsigned int i;

	for (i = 0; i < n; i++) {
		s += x[i];
		s2 += x[i] * x[i];
	}
	return s * s / (n * s2);
}

/* Keep every flow backlogged; count bytes each gets. Flow i sends sizes[i % ns]. */
static void
run_saturated(struct weir_drr *d, unsigned int nf, const uint16_t *sizes, unsigned int ns,
	      unsigned int rounds, double *bytes, uint32_t *seq)
{
	unsigned int i, r;
	uint32_t qid, qlen;

	for (i = 0; i < nf; i++)
		for (r = 0; r < 4; r++)
			CHECK(weir_drr_enqueue(d, i, mk(i, seq[i]++, sizes[i % ns])) == 0, "enq");
	for (r = 0; r < rounds; r++) {
		struct rte_mbuf *m = weir_drr_dequeue(d, &qid, &qlen);
		struct unit_tag t = unit_tag_of(m);

		bytes[t.flow] += rte_pktmbuf_pkt_len(m) + d->overhead;
		rte_pktmbuf_free(m);
		weir_drr_enqueue(d, qid, mk(qid, seq[qid]++, sizes[qid % ns]));
	}
	/* Empty everything. */
	while ((void)0, d->pkts) {
		struct rte_mbuf *m = weir_drr_dequeue(d, &qid, &qlen);

		rte_pktmbuf_free(m);
	}
}

static void
test_basic_order(void)
{
	struct weir_drr_qtab *t = weir_drr_qtab_create(16, 100, SOCKET_ID_ANY);
	struct weir_drr d;
	uint32_t qid, qlen, next[3] = { 0, 0, 0 }, i;
	struct rte_mbuf *m;
	int ok = 1;

	weir_drr_init(&d, t, 1500, 0);
	CHECK(weir_drr_peek(&d, &qid) == NULL, "empty peek");
	for (i = 0; i < 30; i++)
		weir_drr_enqueue(&d, i % 3, mk(i % 3, i / 3, 100 + 300 * (i % 3)));
	CHECK(d.pkts == 30 && d.n_listed == 3, "pkts %u listed %u", d.pkts, d.n_listed);
	/* peek is idempotent and dequeue takes what peek showed */
	m = weir_drr_peek(&d, &qid);
	CHECK(weir_drr_peek(&d, &i) == m && i == qid, "peek twice");
	CHECK(weir_drr_dequeue(&d, &i, &qlen) == m && i == qid && qlen == 9, "deq = peek, qlen %u", qlen);
	next[unit_tag_of(m).flow]++;
	rte_pktmbuf_free(m);
	while ((m = weir_drr_dequeue(&d, &qid, &qlen)) != NULL) {
		struct unit_tag tg = unit_tag_of(m);

		if (tg.flow != qid || tg.seq != next[qid] || qlen != 9 - next[qid])
			ok = 0;
		next[qid]++;
		rte_pktmbuf_free(m);
	}
	CHECK(ok, "per-flow FIFO order and qlen after dequeue");
	CHECK(next[0] == 10 && next[1] == 10 && next[2] == 10, "all out");
	CHECK(d.pkts == 0 && d.bytes == 0 && d.n_listed == 0 && d.last == WEIR_DRR_NONE, "empty");
	weir_drr_qtab_free(t);
}

static void
test_fair_mixed(void)
{
	/* 64 flows, sizes 64..1500 mixed per flow; equal weight -> equal bytes. */
	static const uint16_t sizes[] = { 64, 1500, 576, 1000, 40, 1280, 300, 1460 };
	struct weir_drr_qtab *t = weir_drr_qtab_create(64, 64, SOCKET_ID_ANY);
	struct weir_drr d;
	double bytes[64] = { 0 };
	uint32_t seq[64] = { 0 };
	double j;

	weir_drr_init(&d, t, 0, 24);
	run_saturated(&d, 64, sizes, RTE_DIM(sizes), 200000, bytes, seq);
	j = jain(bytes, 64);
	printf("  drr mixed sizes: 64 flows, Jain %.6f (min %.0f max %.0f bytes)\n", j, bytes[1], bytes[0]);
	CHECK(j >= 0.99, "jain %.6f", j);
	weir_drr_qtab_free(t);
}

static void
test_weights(void)
{
	static const uint16_t sizes[] = { 1500, 64, 700 };
	struct weir_drr_qtab *t = weir_drr_qtab_create(3, 64, SOCKET_ID_ANY);
	struct weir_drr d;
	double bytes[3] = { 0 }, r1, r2;
	uint32_t seq[3] = { 0 };

	weir_drr_set_weight(t, 0, 1);
	weir_drr_set_weight(t, 1, 2);
	weir_drr_set_weight(t, 2, 4);
	weir_drr_init(&d, t, 1538, 24);
	run_saturated(&d, 3, sizes, RTE_DIM(sizes), 300000, bytes, seq);
	r1 = bytes[1] / bytes[0];
	r2 = bytes[2] / bytes[0];
	printf("  drr weights 1:2:4 -> 1:%.4f:%.4f\n", r1, r2);
	CHECK(r1 > 1.99 && r1 < 2.01 && r2 > 3.98 && r2 < 4.02, "ratios %.4f %.4f", r1, r2);
	weir_drr_qtab_free(t);
}

static void
test_limit_drops(void)
{
	struct weir_drr_qtab *t = weir_drr_qtab_create(8, 5, SOCKET_ID_ANY);
	struct weir_drr d;
	uint32_t i, qid, qlen, seen = 0;
	unsigned int refused = 0;
	struct rte_mbuf *m;

	weir_drr_init(&d, t, 0, 0);
	for (i = 0; i < 12; i++) {
		m = mk(3, i, 200);
		if (weir_drr_enqueue(&d, 3, m) != WEIR_DRR_OK) {
			rte_pktmbuf_free(m);    /* a drop stays the caller's */
			refused++;
		}
	}
	for (i = 0; i < 4; i++)
		CHECK(weir_drr_enqueue(&d, 5, mk(5, i, 200)) == 0, "flow 5 not affected");
	CHECK(refused == 7 && t->q[3].drops == 7, "refused %u drops %u", refused, t->q[3].drops);
	CHECK(t->q[5].drops == 0 && weir_drr_qlen(t, 5) == 4, "other flow untouched");
	/* the packets kept are the first five (tail drop) */
	while ((m = weir_drr_dequeue(&d, &qid, &qlen)) != NULL) {
		if (qid == 3)
			CHECK(unit_tag_of(m).seq == seen++, "seq");
		rte_pktmbuf_free(m);
	}
	CHECK(seen == 5, "kept %u", seen);
	weir_drr_qtab_free(t);
}

static void
test_drain(void)
{
	struct weir_drr_qtab *t = weir_drr_qtab_create(8, 100, SOCKET_ID_ANY);
	struct weir_drr d;
	struct rte_mbuf *out[4], *m;
	uint32_t i, qid, qlen, got = 0;
	uint64_t b;
	unsigned int n;
	int ok = 1;

	weir_drr_init(&d, t, 0, 0);
	for (i = 0; i < 10; i++) {
		weir_drr_enqueue(&d, 1, mk(1, i, 100));
		weir_drr_enqueue(&d, 2, mk(2, i, 100));
		weir_drr_enqueue(&d, 4, mk(4, i, 100));
	}
	/* drain the middle one in pieces of 4 */
	while ((n = weir_drr_drain(&d, 2, out, 4, &b)) > 0) {
		CHECK(b == n * 100u, "bytes");
		for (i = 0; i < n; i++) {
			if (unit_tag_of(out[i]).seq != got++)
				ok = 0;
			rte_pktmbuf_free(out[i]);
		}
	}
	CHECK(ok && got == 10, "drained in order, %u", got);
	CHECK(d.n_listed == 2 && t->q[2].listed == 0 && d.pkts == 20, "unlinked: listed %u", d.n_listed);
	/* the queue can be reused (a new flow in the same slot) */
	weir_drr_enqueue(&d, 2, mk(2, 100, 100));
	got = 0;
	while ((m = weir_drr_dequeue(&d, &qid, &qlen)) != NULL) {
		got++;
		rte_pktmbuf_free(m);
	}
	CHECK(got == 21, "rest %u", got);
	/* drain the tail element of the list */
	weir_drr_enqueue(&d, 1, mk(1, 0, 100));
	weir_drr_enqueue(&d, 4, mk(4, 0, 100));
	CHECK(weir_drr_drain(&d, 4, out, 4, NULL) == 1, "drain last");
	rte_pktmbuf_free(out[0]);
	m = weir_drr_dequeue(&d, &qid, &qlen);
	CHECK(m != NULL && qid == 1 && weir_drr_backlogged(&d) == 0, "list ok");
	rte_pktmbuf_free(m);
	CHECK(weir_drr_dequeue(&d, &qid, &qlen) == NULL && d.last == WEIR_DRR_NONE &&
	      d.new_last == WEIR_DRR_NONE && d.n_listed == 0, "lists empty");
	weir_drr_qtab_free(t);
}

/* Flow tag of the next packet dequeued (UINT32_MAX: none); frees it. */
static uint32_t
next_flow(struct weir_drr *d)
{
	uint32_t qid, qlen;
	struct rte_mbuf *m = weir_drr_dequeue(d, &qid, &qlen);
	uint32_t fl;

	if (m == NULL)
		return UINT32_MAX;
	fl = unit_tag_of(m).flow;
	rte_pktmbuf_free(m);
	return fl;
}

/* New flows first (RFC 8290): a queue that becomes backlogged is served
 * ahead of the old ones for one quantum; one that empties and comes back
 * before its turn on the old list is not new again; a stream of new flows
 * gets at most new_quanta quanta between two packets of an old one
 * (issue 23). */
static void
test_new_flows(void)
{
	struct weir_drr_qtab *t = weir_drr_qtab_create(64, 100, SOCKET_ID_ANY);
	struct weir_drr d;
	uint32_t got[8];
	int ok = 1;

	weir_drr_init(&d, t, 1500, 0);
	/* Bulk flow 0: its first quantum (two 1000-byte packets) as a new
	 * flow, then it is an old one. */
	for (uint32_t i = 0; i < 60; i++)
		weir_drr_enqueue(&d, 0, mk(0, i, 1000));
	CHECK(next_flow(&d) == 0 && next_flow(&d) == 0 && d.new_flows == 1, "bulk's first quantum");
	/* Flow 1 arrives with two packets: both go before the bulk's next. */
	weir_drr_enqueue(&d, 1, mk(1, 0, 1000));
	weir_drr_enqueue(&d, 1, mk(1, 1, 1000));
	for (int i = 0; i < 3; i++)
		got[i] = next_flow(&d);
	CHECK(got[0] == 1 && got[1] == 1 && got[2] == 0, "the new flow first (%u %u %u)",
	      got[0], got[1], got[2]);
	CHECK(weir_drr_backlogged(&d) == 1 && t->q[1].listed == WEIR_DRR_IDLE,
	      "flow 1 emptied: idle, old until its turn on the old list");
	/* It comes back at once: an old flow, behind the bulk's turn. */
	weir_drr_enqueue(&d, 1, mk(1, 2, 1000));
	CHECK(d.new_flows == 2 && t->q[1].listed == WEIR_DRR_OLD, "not new again (%lu)",
	      (unsigned long)d.new_flows);
	for (int i = 0; i < 4; i++)
		got[i] = next_flow(&d);
	CHECK(got[0] == 0 && got[3] != UINT32_MAX && (got[1] == 1 || got[2] == 1 || got[3] == 1),
	      "round robin with the bulk (%u %u %u %u)", got[0], got[1], got[2], got[3]);
	/* Flow 5 wakes, sends its packet, and comes back only after the
	 * bulk, the one old flow, has had its turn: new again (RFC 8290: its
	 * entry on the old list came up empty and left). */
	while (next_flow(&d) == 1)
		;
	weir_drr_enqueue(&d, 5, mk(5, 0, 1000));
	CHECK(next_flow(&d) == 5 && t->q[5].listed == WEIR_DRR_IDLE, "flow 5 sent, idle");
	for (int i = 0; i < 3; i++)
		CHECK(next_flow(&d) == 0, "the bulk's turn");
	{
		const uint64_t nf = d.new_flows;

		weir_drr_enqueue(&d, 5, mk(5, 1, 1000));
		CHECK(d.new_flows == nf + 1 && t->q[5].listed == WEIR_DRR_NEW && next_flow(&d) == 5,
		      "after its turn: new again");
	}
	/* A scan: 30 new one-packet flows at once. The bulk still sends one
	 * packet per new_quanta quanta (1: two 1000-byte packets, the
	 * default 3: five) of theirs. */
	while (next_flow(&d) == 1)
		;
	CHECK(d.new_quanta == WEIR_DRR_NEW_QUANTA_DEFAULT, "default bound %u", d.new_quanta);
	for (uint32_t nq = 1; nq <= 3; nq += 2) {
		const int period = nq == 1 ? 3 : 6;
		const uint64_t deferred0 = d.new_deferred;

		d.new_quanta = (uint8_t)nq;
		while (next_flow(&d) != 0)
			;       /* the bound counts from an old packet */
		for (uint32_t k = 0, q0 = nq == 1 ? 2 : 32; k < 30; k++)
			weir_drr_enqueue(&d, q0 + k, mk(q0 + k, 0, 1000));
		for (int i = 0; i < 3 * period; i++) {
			uint32_t fl = next_flow(&d);

			ok &= (i % period == period - 1) == (fl == 0);
		}
		CHECK(ok && d.new_deferred - deferred0 == 3,
		      "new flows take at most %u/%u (deferred %lu)", nq, nq + 1,
		      (unsigned long)(d.new_deferred - deferred0));
		while (d.n_new > 0)
			next_flow(&d);
	}
	while (next_flow(&d) != UINT32_MAX)
		;
	CHECK(d.pkts == 0 && d.n_listed == 0, "empty");
	/* Plain DRR when asked. */
	d.sparse = 0;
	for (uint32_t i = 0; i < 4; i++)
		weir_drr_enqueue(&d, 0, mk(0, i, 1000));
	weir_drr_enqueue(&d, 1, mk(1, 0, 1000));
	CHECK(next_flow(&d) == 0 && next_flow(&d) == 0 && next_flow(&d) == 1, "sparse = 0: plain DRR");
	while (next_flow(&d) != UINT32_MAX)
		;
	weir_drr_qtab_free(t);
}

/* Young flows that start together share the new list a quantum each, not
 * one whole budget after another (issue 23 item 4: 32 bulk flows starting
 * together on a 1.5 Mbit/s class were served one at a time for the first
 * 44 s, 256 KiB each; every flow's queue emptied at each of its turns, so
 * its CoDel never dropped, and slow start left 2,800 packets queued). */
static void
test_young_together(void)
{
	struct weir_drr_qtab *t = weir_drr_qtab_create(64, 200, SOCKET_ID_ANY);
	struct weir_drr d;
	uint32_t sent[4] = { 0 }, fl;

	weir_drr_init(&d, t, 1500, 0);
	d.young = 100000;
	for (uint32_t i = 0; i < 60; i++)
		for (uint32_t q = 0; q < 4; q++)
			weir_drr_enqueue_young(&d, q, mk(q, i, 1000), 0);
	/* 40 packets: each flow 10 (a quantum is 1.5 packets: 8-12). */
	for (int i = 0; i < 40; i++) {
		fl = next_flow(&d);
		CHECK(fl < 4, "a young flow sends (%u)", fl);
		sent[fl]++;
	}
	for (uint32_t q = 0; q < 4; q++)
		CHECK(sent[q] >= 8 && sent[q] <= 12, "young flow %u sent %u of 40: %u %u %u %u", q,
		      sent[q], sent[0], sent[1], sent[2], sent[3]);
	while (next_flow(&d) != UINT32_MAX)
		;
	weir_drr_qtab_free(t);
}

/* Bulk flows 0 and 1 (bulk packets each) and flow 2 (4 packets), all of
 * 1000 bytes, start together; serve until flow 2 has emptied. Each sends
 * two on the new list (a 1500-byte quantum), then it is old: flow 2 sends
 * its last two in its old turn. */
static void
bulk_beside_flow2(struct weir_drr *d, const struct weir_drr_qtab *t, uint32_t bulk)
{
	for (uint32_t i = 0; i < bulk; i++)
		for (uint32_t q = 0; q < 2; q++)
			weir_drr_enqueue(d, q, mk(q, i, 1000));
	for (uint32_t i = 0; i < 4; i++)
		weir_drr_enqueue(d, 2, mk(2, i, 1000));
	for (unsigned int n = 0; n < 20 && t->q[2].len != 0; n++)
		next_flow(d);
}

/* An old queue that empties is old until its next turn would have come
 * (WEIR_DRR_IDLE_OLD): a bulk flow whose queue runs dry between two of its
 * packets wakes at the old list's tail with a quantum, not on the new
 * list; one that stays away for a round of the old list is new again. */
static void
test_old_queue_wakes_old(void)
{
	struct weir_drr_qtab *t = weir_drr_qtab_create(8, 100, SOCKET_ID_ANY);
	struct weir_drr d;
	uint64_t nf;
	unsigned int n;

	weir_drr_init(&d, t, 1500, 0);
	bulk_beside_flow2(&d, t, 40);
	CHECK(t->q[2].len == 0 && t->q[2].listed == WEIR_DRR_IDLE_OLD,
	      "flow 2 emptied while old: idle (%u)", t->q[2].listed);
	/* Back at once: old, no new flow counted, and it sends within the
	 * next round (a quantum at its turn), behind the bulk flows. */
	nf = d.new_flows;
	weir_drr_enqueue(&d, 2, mk(2, 4, 1000));
	CHECK(d.new_flows == nf && t->q[2].listed == WEIR_DRR_OLD, "back before its turn: old");
	/* A round: each bulk flow a quantum (one or two 1000-byte packets). */
	for (n = 0; n < 5 && next_flow(&d) != 2; n++)
		;
	CHECK(n < 5, "served within a round (after %u)", n);
	/* Emptied again; away while both bulk flows take a turn: new. */
	CHECK(t->q[2].len == 0 && t->q[2].listed == WEIR_DRR_IDLE_OLD, "idle while old (%u)",
	      t->q[2].listed);
	for (int i = 0; i < 6; i++)
		next_flow(&d);
	nf = d.new_flows;
	weir_drr_enqueue(&d, 2, mk(2, 5, 1000));
	CHECK(d.new_flows == nf + 1 && t->q[2].listed == WEIR_DRR_NEW && next_flow(&d) == 2,
	      "after its turn: new again, first");
	/* Emptied while old again, then its flow ends and a new flow takes
	 * the slot at once: new, not the last flow's idle turn. */
	weir_drr_enqueue(&d, 2, mk(2, 6, 1000));
	for (n = 0; n < 8 && t->q[2].len != 0; n++)
		next_flow(&d);
	CHECK(t->q[2].len == 0 && t->q[2].listed == WEIR_DRR_IDLE_OLD, "idle again (%u)",
	      t->q[2].listed);
	weir_drr_flow_new(t, 2);
	nf = d.new_flows;
	weir_drr_enqueue(&d, 2, mk(2, 7, 1000));
	CHECK(d.new_flows == nf + 1 && t->q[2].listed == WEIR_DRR_NEW,
	      "a new flow in the slot: new (%u)", t->q[2].listed);
	while (next_flow(&d) != UINT32_MAX)
		;
	weir_drr_qtab_free(t);
}

/* A young flow taken off the new list mid-turn (its flow ended: drain)
 * leaves its successor a whole turn of its own: the bytes the new list's
 * head has sent in its turn are counted from zero whenever the head
 * changes, not carried over to the next flow. */
static void
test_young_turn_after_drain(void)
{
	struct weir_drr_qtab *t = weir_drr_qtab_create(8, 200, SOCKET_ID_ANY);
	struct weir_drr d;
	struct rte_mbuf *out[16];
	unsigned int n;

	weir_drr_init(&d, t, 1500, 0);
	d.young = 100000;
	for (uint32_t i = 0; i < 6; i++)
		for (uint32_t q = 0; q < 3; q++)
			weir_drr_enqueue_young(&d, q, mk(q, i, 1000), 0);
	CHECK(next_flow(&d) == 0, "flow 0 first");
	/* Flow 0 ends with 1,000 bytes of its 1,500 turn sent. */
	n = weir_drr_drain(&d, 0, out, 16, NULL);
	CHECK(n == 5, "drained %u", n);
	rte_pktmbuf_free_bulk(out, n);
	/* Flow 1: a whole quantum, two 1,000-byte packets, then flow 2. */
	CHECK(next_flow(&d) == 1, "flow 1 next");
	CHECK(next_flow(&d) == 1, "flow 1 keeps its turn for a quantum");
	CHECK(next_flow(&d) == 2, "then flow 2");
	while (next_flow(&d) != UINT32_MAX)
		;
	weir_drr_qtab_free(t);
}

/* Young flows (lib/sched/drr.h): a flow that has sent less than d.young bytes
 * stays on the new list for the rest of its budget, not one quantum, still
 * at most about 3/4 of the leaf while old flows wait; a flow past its
 * budget (or of unknown age) gets one quantum, as before. */
static void
test_young(void)
{
	struct weir_drr_qtab *t = weir_drr_qtab_create(64, 200, SOCKET_ID_ANY);
	struct weir_drr d;
	uint32_t young_sent = 0, bulk_sent = 0, fl;

	weir_drr_init(&d, t, 1500, 0);
	d.young = 20000;
	/* Bulk flow 0, past its budget: one quantum from the new list. */
	for (uint32_t i = 0; i < 100; i++)
		weir_drr_enqueue_young(&d, 0, mk(0, i, 1000), 1000000);
	CHECK(next_flow(&d) == 0 && next_flow(&d) == 0 && d.young_flows == 0, "old: no budget");
	/* Flow 1 has sent 5000 bytes: 15000 left plus one quantum, so about
	 * 17 of its 1000-byte packets go from the new list, five (the bound's
	 * three quanta) to each of the bulk's, before it joins the old flows. */
	for (uint32_t i = 0; i < 40; i++)
		weir_drr_enqueue_young(&d, 1, mk(1, i, 1000), 5000 + 1000 * i);
	CHECK(d.young_flows == 1, "young budget given (%lu)", (unsigned long)d.young_flows);
	while (young_sent < 17) {
		fl = next_flow(&d);
		young_sent += fl == 1;
		bulk_sent += fl == 0;
	}
	/* The bound: three quanta (here 4.5 packets, so 5) of the new list
	 * between two of the old flows' packets. */
	CHECK(bulk_sent >= 3 && bulk_sent <= 4, "budget at about 3/4 of the leaf: young %u bulk %u",
	      young_sent, bulk_sent);
	/* Budget spent: round robin, one quantum (1.5 packets) each. */
	young_sent = bulk_sent = 0;
	for (int i = 0; i < 12; i++) {
		fl = next_flow(&d);
		young_sent += fl == 1;
		bulk_sent += fl == 0;
	}
	CHECK(young_sent == 6 && bulk_sent == 6, "then fair: young %u bulk %u", young_sent, bulk_sent);
	/* Unknown age (UINT64_MAX, weir_drr_enqueue) is old. */
	while (next_flow(&d) != UINT32_MAX)
		;
	weir_drr_enqueue(&d, 2, mk(2, 0, 1000));
	CHECK(d.young_flows == 1, "unknown age: no budget");
	while (next_flow(&d) != UINT32_MAX)
		;
	weir_drr_qtab_free(t);
}

/* A young flow qid arrives with 60 packets beside backlogged old ones: of
 * the next 40 packets, how many are its own (the new list's bound lets it
 * take 3 of every 4). */
static uint32_t
late_young_turns(struct weir_drr *d, uint32_t qid)
{
	uint32_t late = 0;

	for (uint32_t i = 0; i < 60; i++)
		weir_drr_enqueue_young(d, qid, mk(qid, i, 1000), 1000 * i);
	for (uint32_t i = 0; i < 40; i++)
		late += next_flow(d) == qid;
	return late;
}

/* Youth bounded in time (weir_drr_youth_age): a young flow active in more
 * periods than its owner allows is old for good, however little it has
 * sent, and gets one quantum from the new list like any old flow; a new
 * flow in its slot is young again. By bytes alone, 64 bulk flows that
 * started together stayed young for 7 s, and a 100 KB reply was one
 * young flow in 65 (issue 23 item 3). */
static void
test_young_age(void)
{
	enum { NF = 8, BUDGET = 100000 };
	struct weir_drr_qtab *t = weir_drr_qtab_create(NF + 2, 400, SOCKET_ID_ANY);
	struct weir_drr d;
	uint32_t late;

	weir_drr_init(&d, t, 1500, 0);
	d.young = BUDGET;
	for (uint32_t q = 0; q < NF; q++) {
		for (uint32_t p = 1; p < 4; p++)
			CHECK(!weir_drr_youth_age(t, q, 4), "flow %u: young after %u periods", q, p);
		CHECK(weir_drr_youth_age(t, q, 4) && weir_drr_youth_spent(t, q), "flow %u: old at 4", q);
		CHECK(!weir_drr_youth_age(t, q, 4), "spent once only");
	}
	/* The 8 spent flows, backlogged, and a late young one: it goes ahead,
	 * 3 of every 4 packets (the new list's bound). */
	for (uint32_t q = 0; q < NF; q++) {
		for (uint32_t i = 0; i < 40; i++)
			weir_drr_enqueue_young(&d, q, mk(q, i, 1000), 1000);
		CHECK(d.q[q].deficit == 1500, "spent: one quantum (%d)", d.q[q].deficit);
	}
	CHECK(d.young_flows == 0, "no budget for spent flows");
	for (uint32_t i = 0; i < 2 * NF; i++)
		CHECK(next_flow(&d) < NF, "their quanta from the new list");
	late = late_young_turns(&d, NF);
	CHECK(late >= 28, "the late young flow ahead of the old ones: %u of 40", late);
	while (next_flow(&d) != UINT32_MAX)
		;
	weir_drr_flow_new(t, 0);
	CHECK(!weir_drr_youth_spent(t, 0) && !weir_drr_youth_age(t, 0, 2), "new flow: young again");
	weir_drr_enqueue_young(&d, 0, mk(0, 0, 1000), 0);
	CHECK(d.q[0].deficit == 1500 + BUDGET, "new flow: a budget (%d)", d.q[0].deficit);
	while (next_flow(&d) != UINT32_MAX)
		;
	/* The age counts to WEIR_DRR_Y_AGE_MAX (31) periods. */
	weir_drr_flow_new(t, 1);
	for (uint32_t p = 1; p < WEIR_DRR_Y_AGE_MAX; p++)
		CHECK(!weir_drr_youth_age(t, 1, WEIR_DRR_Y_AGE_MAX), "young at %u of 31", p);
	CHECK(weir_drr_youth_age(t, 1, WEIR_DRR_Y_AGE_MAX), "old at 31");
	weir_drr_qtab_free(t);
}

/* Flows whose youth ends while they wait on the new list (backlogged, so
 * never listed again) lose their budget there and join the old flows after
 * one more quantum: 64 bulk flows that started together kept 256 KiB each
 * on the new list for 6.7 s, and a late 100 KB reply waited among them. */
static void
test_youth_end_backlogged(void)
{
	enum { NF = 8, BUDGET = 100000 };
	struct weir_drr_qtab *t = weir_drr_qtab_create(NF + 2, 400, SOCKET_ID_ANY);
	struct weir_drr d;
	uint32_t late;

	weir_drr_init(&d, t, 1500, 0);
	d.young = BUDGET;
	for (uint32_t q = 0; q < NF; q++)
		for (uint32_t i = 0; i < 300; i++)
			weir_drr_enqueue_young(&d, q, mk(q, i, 1000), 0);
	for (uint32_t i = 0; i < 4 * NF; i++)
		next_flow(&d);
	for (uint32_t q = 0; q < NF; q++)
		CHECK(d.q[q].listed == WEIR_DRR_NEW && d.q[q].deficit > 1500,
		      "flow %u young, backlogged, on the new list (%u, %d)", q, d.q[q].listed,
		      d.q[q].deficit);
	/* Their youth runs out in time (the owner's clock). */
	for (uint32_t q = 0; q < NF; q++) {
		CHECK(weir_drr_youth_age(t, q, 1), "flow %u spent", q);
		weir_drr_youth_end(&d, q);
		CHECK(d.q[q].deficit <= 1500, "flow %u: one quantum left (%d)", q, d.q[q].deficit);
	}
	for (uint32_t i = 0; i < 4 * NF; i++)
		next_flow(&d);
	for (uint32_t q = 0; q < NF; q++)
		CHECK(d.q[q].listed == WEIR_DRR_OLD, "flow %u: old now (%u)", q, d.q[q].listed);
	/* A late young flow is ahead of them: 3 of every 4 packets. */
	late = late_young_turns(&d, NF);
	CHECK(late >= 28, "the late young flow ahead of the spent ones: %u of 40", late);
	/* Not on the new list, or no budget: nothing to take. */
	weir_drr_youth_end(&d, 0);
	CHECK(d.q[0].listed == WEIR_DRR_OLD, "an old queue stays as it is");
	while (next_flow(&d) != UINT32_MAX)
		;
	weir_drr_qtab_free(t);
}

/* A packet whose sender weir clocks (pkt.clocked: ACKs its mode holds,
 * windows it sizes) does not make its waking queue sparse: it joins the
 * old flows, unless young. Else every packet of 64 paced downloads was a
 * new flow, and a 100 KB reply shared the new list with them (postack-paced,
 * issue 23 item 3). */
static struct rte_mbuf *
mk_clocked(uint32_t flow, uint32_t seq, uint16_t len, bool clocked)
{
	struct rte_mbuf *m = mk(flow, seq, len);

	weir_mbuf_meta(m)->pkt.clocked = clocked ? 1 : 0;
	return m;
}

static void
test_clocked(void)
{
	struct weir_drr_qtab *t = weir_drr_qtab_create(8, 100, SOCKET_ID_ANY);
	struct weir_drr d;
	uint32_t got[3];

	weir_drr_init(&d, t, 1500, 0);
	d.young = 20000;
	for (uint32_t i = 0; i < 40; i++)
		weir_drr_enqueue_young(&d, 0, mk(0, i, 1000), 1000000);
	for (int i = 0; i < 3; i++)
		CHECK(next_flow(&d) == 0, "bulk's first quantum, then old");
	/* Old and clocked: an old flow, in turn with the bulk. */
	weir_drr_enqueue_young(&d, 1, mk_clocked(1, 0, 1000, true), 1000000);
	CHECK(t->q[1].listed == WEIR_DRR_OLD, "clocked: on the old list (%u)", t->q[1].listed);
	/* Old, not clocked: sparse, ahead of both. */
	weir_drr_enqueue_young(&d, 2, mk_clocked(2, 0, 1000, false), 1000000);
	CHECK(t->q[2].listed == WEIR_DRR_NEW && next_flow(&d) == 2, "not clocked: new, first");
	for (int i = 0; i < 3; i++)
		got[i] = next_flow(&d);
	CHECK(got[0] == 1 || got[1] == 1 || got[2] == 1, "clocked: in turn with the bulk (%u %u %u)",
	      got[0], got[1], got[2]);
	/* Young and clocked: young first. */
	weir_drr_enqueue_young(&d, 3, mk_clocked(3, 0, 1000, true), 0);
	CHECK(t->q[3].listed == WEIR_DRR_NEW && next_flow(&d) == 3, "young: new, first");
	/* The same queue, old, waking with an unclocked packet (its ACKs no
	 * longer held): sparse again. Nothing of the earlier packet stays. */
	while (next_flow(&d) != UINT32_MAX)
		;
	d.young = 0;
	weir_drr_enqueue_young(&d, 1, mk_clocked(1, 1, 1000, false), 1000000);
	CHECK(t->q[1].listed == WEIR_DRR_NEW, "unclocked: new (%u)", t->q[1].listed);
	while (next_flow(&d) != UINT32_MAX)
		;
	weir_drr_qtab_free(t);
}

/* A young flow's queue that empties leaves the lists, and its next packet
 * (a slow start's next flight) is on the new list ahead of the old flows,
 * not behind a whole round of them (RFC 8290's rule for an old flow that
 * empties: it stays old until its turn on the old list would come). */
static void
test_young_refill(void)
{
	enum { NF = 16 };
	struct weir_drr_qtab *t = weir_drr_qtab_create(NF + 2, 400, SOCKET_ID_ANY);
	struct weir_drr d;
	uint32_t seq[NF] = { 0 };

	weir_drr_init(&d, t, 1500, 0);
	d.young = 100000;
	for (uint32_t q = 0; q < NF; q++)
		for (uint32_t i = 0; i < 20; i++)
			weir_drr_enqueue_young(&d, q, mk(q, seq[q]++, 1000), 1000000);
	for (uint32_t i = 0; i < 3 * NF; i++)
		CHECK(next_flow(&d) < NF, "bulk");
	/* A flight of two, sent at once, then another. */
	for (int flight = 0; flight < 2; flight++) {
		uint32_t before = 0;

		weir_drr_enqueue_young(&d, NF, mk(NF, 2 * flight, 1000), 2000 * flight);
		weir_drr_enqueue_young(&d, NF, mk(NF, 2 * flight + 1, 1000), 2000 * flight + 1000);
		while (next_flow(&d) != NF)
			before++;
		CHECK(before <= 1, "flight %d: %u bulk packets before it", flight, before);
		CHECK(next_flow(&d) == NF, "flight %d: both", flight);
		CHECK(d.q[NF].listed == 0, "emptied young queue off the lists (%u)", d.q[NF].listed);
	}
	while (next_flow(&d) != UINT32_MAX)
		;
	CHECK(d.pkts == 0 && d.n_listed == 0 && d.n_new == 0, "empty");
	weir_drr_qtab_free(t);
}

/* CoDel per flow queue (RFC 8289/8290): a queue whose sojourn time stays
 * above target for an interval loses packets from its head, fewer apart
 * while it stands, in order for the rest; a queue served at once loses
 * nothing (issue 23 item 4). Time in ticks of the test's own: target 5,
 * interval 100. */
static void
test_codel(void)
{
	struct weir_drr_qtab *t = weir_drr_qtab_create(4, 200, SOCKET_ID_ANY);
	const struct weir_codel_params par = { .target = 5, .interval = 100 };
	struct rte_mbuf *dropped[8];
	uint32_t dqid[8], qid, qlen, next = 0, n_drop = 0;
	unsigned int nd;
	struct weir_drr d;
	int order = 1;

	t->codel = rte_zmalloc(NULL, 4 * sizeof(*t->codel), 0);
	weir_drr_init(&d, t, 1500, 0);
	d.codel = t->codel;
	d.aqm = &par;
	/* Flow 0: 60 packets at time 0, one sent every 10 ticks. */
	for (uint32_t i = 0; i < 60; i++) {
		struct rte_mbuf *m = mk(0, i, 1000);

		weir_mbuf_meta(m)->ts = 0;
		weir_drr_enqueue(&d, 0, m);
	}
	for (uint64_t now = 0; d.pkts > 0; now += 10) {
		struct rte_mbuf *m = weir_drr_dequeue_aqm(&d, now, &qid, &qlen, dropped, dqid, &nd, 8);

		for (unsigned int i = 0; i < nd; i++) {
			order &= dqid[i] == 0 && unit_tag_of(dropped[i]).seq == next++;
			rte_pktmbuf_free(dropped[i]);
		}
		n_drop += nd;
		if (m != NULL) {
			order &= unit_tag_of(m).seq == next++;
			rte_pktmbuf_free(m);
		}
	}
	CHECK(n_drop >= 2 && n_drop < 20 && d.aqm_drops == n_drop && order,
	      "a standing queue loses %u packets from its head, the rest in order", n_drop);
	CHECK(t->q[0].youth & WEIR_DRR_Y_CODEL, "its queue is flagged as dropped from");
	/* Flow 1: each packet sent as it comes: sojourn 0, nothing dropped. */
	for (uint64_t now = 1000; now < 3000; now += 10) {
		struct rte_mbuf *m = mk(1, 0, 1000);

		weir_mbuf_meta(m)->ts = now;
		weir_drr_enqueue(&d, 1, m);
		m = weir_drr_dequeue_aqm(&d, now + 1, &qid, &qlen, dropped, dqid, &nd, 8);
		rte_pktmbuf_free(m);
		n_drop += nd;
	}
	CHECK(d.aqm_drops == n_drop && t->codel[1].dropping == 0, "a queue served at once: no drops");
	/* A flow whose round trip is 3x the interval: target and interval
	 * scale with it. A queue standing at 8 ticks (above the tree's 5,
	 * below 3 x 5) for 1000 ticks loses nothing; unscaled it does. */
	for (uint32_t q = 2; q < 4; q++) {
		uint64_t before = d.aqm_drops;

		weir_codel_set_rtt(&t->codel[q], &par, 0);
		if (q == 3)
			weir_codel_set_rtt(&t->codel[q], &par, 300);
		for (uint64_t now = 5000; now < 6000; now += 4) {
			struct rte_mbuf *m = mk(q, 0, 1000);

			weir_mbuf_meta(m)->ts = now;
			weir_drr_enqueue(&d, q, m);
			if (now >= 5008) {
				m = weir_drr_dequeue_aqm(&d, now, &qid, &qlen, dropped, dqid, &nd, 8);
				for (unsigned int i = 0; i < nd; i++)
					rte_pktmbuf_free(dropped[i]);
				rte_pktmbuf_free(m);
			}
		}
		while ((rte_pktmbuf_free(weir_drr_dequeue_aqm(&d, 6000, &qid, &qlen, dropped, dqid,
							    &nd, 8)), d.pkts > 0))
			for (unsigned int i = 0; i < nd; i++)
				rte_pktmbuf_free(dropped[i]);
		if (q == 2)
			CHECK(d.aqm_drops > before, "8-tick queue, 5-tick target: drops (%lu)",
			      (unsigned long)(d.aqm_drops - before));
		else
			CHECK(t->codel[q].scale == 12 &&
			      t->codel[q].tscale == 4 * 300 / WEIR_CODEL_TARGET_RTT / 5 &&
			      d.aqm_drops == before,
			      "round trip 300: scale %u, target %u/4 x 5, no drops (%lu)",
			      t->codel[q].scale, t->codel[q].tscale,
			      (unsigned long)(d.aqm_drops - before));
	}
	weir_codel_set_rtt(&t->codel[3], &par, 0);
	CHECK(t->codel[3].scale == 0 && t->codel[3].count == 0, "a new flow: cleared");
	weir_drr_qtab_free(t);
}

/* The dequeue leaves a queue's CoDel state unread while it is at rest and
 * the head is younger than the tree's target (aqm_armed clear). That must
 * not change a single decision: the same random load through two trees,
 * one of them made to read the state at every dequeue (aqm_armed forced),
 * sends and drops the same packets in the same order. */
static void
test_codel_at_rest(void)
{
	enum { NQ = 6, STEPS = 40000 };
	const struct weir_codel_params par = { .target = 5, .interval = 100 };
	struct weir_drr_qtab *t[2];
	struct weir_drr d[2];
	uint32_t seq = 0, sent[2] = { 0, 0 }, drops[2] = { 0, 0 }, same = 1, fast = 0;
	uint64_t rnd = 12345;

	for (int k = 0; k < 2; k++) {
		t[k] = weir_drr_qtab_create(NQ, 400, SOCKET_ID_ANY);
		t[k]->codel = rte_zmalloc(NULL, NQ * sizeof(*t[k]->codel), 0);
		weir_drr_init(&d[k], t[k], 1500, 0);
		d[k].codel = t[k]->codel;
		d[k].aqm = &par;
		weir_codel_set_rtt(&t[k]->codel[4], &par, 300);
		weir_codel_set_rtt(&t[k]->codel[5], &par, 40);
	}
	for (uint64_t now = 0; now < STEPS; now++) {
		rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t r = (uint32_t)(rnd >> 33);
		/* Arrivals come in phases, so queues stand, drain and rest. */
		unsigned int load = (now / 2000) % 3;

		if (r % 8 < 2 + 2 * load) {
			uint32_t q = (r >> 8) % NQ, s = seq++;

			for (int k = 0; k < 2; k++) {
				struct rte_mbuf *m = mk(q, s, 1000);

				weir_mbuf_meta(m)->ts = now;
				if (weir_drr_enqueue(&d[k], q, m) != 0)
					rte_pktmbuf_free(m);
			}
		}
		if (now % 3 != 0)
			continue;
		for (int k = 0; k < 2; k++) {
			struct rte_mbuf *dropped[8], *m;
			uint32_t dqid[8], qid, qlen;
			unsigned int nd;

			if (k == 1)
				for (uint32_t q = 0; q < NQ; q++)
					t[1]->q[q].aqm_armed = 1;
			else
				for (uint32_t q = 0; q < NQ; q++)
					fast += t[0]->q[q].len > 0 && !t[0]->q[q].aqm_armed;
			m = weir_drr_dequeue_aqm(&d[k], now, &qid, &qlen, dropped, dqid, &nd, 8);
			for (unsigned int i = 0; i < nd; i++) {
				struct unit_tag g = unit_tag_of(dropped[i]);

				drops[k] = drops[k] * 31 + g.seq * 7 + g.flow;
				rte_pktmbuf_free(dropped[i]);
			}
			if (m != NULL) {
				struct unit_tag g = unit_tag_of(m);

				sent[k] = sent[k] * 31 + g.seq * 7 + g.flow + qlen;
				rte_pktmbuf_free(m);
			}
		}
		same &= sent[0] == sent[1] && drops[0] == drops[1];
	}
	CHECK(same && d[0].aqm_drops == d[1].aqm_drops && d[0].aqm_drops > 10 && fast > 1000,
	      "CoDel at rest unread: the same %lu drops and sends as reading it always (%u fast)",
	      (unsigned long)d[0].aqm_drops, fast);
	for (int k = 0; k < 2; k++) {
		struct rte_mbuf *out[64];
		uint64_t b;

		for (uint32_t q = 0; q < NQ; q++)
			while (weir_drr_qlen(t[k], q) > 0) {
				unsigned int n = weir_drr_drain(&d[k], q, out, 64, &b);

				rte_pktmbuf_free_bulk(out, n);
			}
		weir_drr_qtab_free(t[k]);
	}
}

/* A flow moved to another leaf while its queue, new and just emptied, waits
 * on the first leaf's old list (IDLE): its next packets, queued in the
 * second leaf, must be served there. (A hook's move right after a flow's
 * first packets left it stuck: the second leaf never listed the queue.) */
static void
test_move_idle(void)
{
	struct weir_drr_qtab *t = weir_drr_qtab_create(8, 100, SOCKET_ID_ANY);
	struct weir_drr a, b;
	struct rte_mbuf *m;
	uint32_t qid, qlen, got = 0, i;
	uint64_t bytes = 1;
	int ok = 1;

	weir_drr_init(&a, t, 0, 0);
	weir_drr_init(&b, t, 0, 0);
	/* Flow 1 old and backlogged in a (so a's list outlives flow 3's turn),
	 * flow 3 new: one packet, sent, its queue now IDLE on a's old list. */
	for (i = 0; i < 4; i++)
		weir_drr_enqueue(&a, 1, mk(1, i, 1000));
	for (i = 0; i < 4; i++)
		rte_pktmbuf_free(weir_drr_dequeue(&a, &qid, &qlen));
	for (i = 0; i < 4; i++)
		weir_drr_enqueue(&a, 1, mk(1, 4 + i, 1000));
	weir_drr_enqueue(&a, 3, mk(3, 0, 100));
	while ((m = weir_drr_dequeue(&a, &qid, &qlen)) != NULL && qid != 3)
		rte_pktmbuf_free(m);
	CHECK(m != NULL && qid == 3 && t->q[3].listed == WEIR_DRR_IDLE,
	      "flow 3 idle, old in a until its turn (listed %u)", t->q[3].listed);
	rte_pktmbuf_free(m);
	/* The move finds nothing queued, and must still take it off a's list. */
	CHECK(weir_drr_move(&a, &b, 3, &bytes) == 0 && bytes == 0, "nothing to move");
	CHECK(t->q[3].listed == 0 && weir_drr_backlogged(&a) == 1,
	      "a's no longer (listed %u, a backlogged %u)", t->q[3].listed, weir_drr_backlogged(&a));
	for (i = 0; i < 5; i++)
		weir_drr_enqueue(&b, 3, mk(3, 1 + i, 100));
	CHECK(weir_drr_backlogged(&b) == 1, "listed in b (%u)", weir_drr_backlogged(&b));
	while ((m = weir_drr_dequeue(&b, &qid, &qlen)) != NULL) {
		if (qid != 3 || unit_tag_of(m).seq != 1 + got)
			ok = 0;
		got++;
		rte_pktmbuf_free(m);
	}
	CHECK(ok && got == 5 && b.pkts == 0 && b.n_listed == 0, "b served flow 3 in order: %u", got);
	while ((m = weir_drr_dequeue(&a, &qid, &qlen)) != NULL) {
		ok &= qid == 1;
		rte_pktmbuf_free(m);
	}
	CHECK(ok && a.pkts == 0 && a.n_listed == 0, "a emptied cleanly");
	weir_drr_qtab_free(t);
}

/* CoDel for a flow of known round trip (issue 23): its target is at least
 * a quarter of the round trip, and a queue that stands is dropped from no
 * sooner than its sender can have answered the last drop (twice the round
 * trip plus the sojourn), where a queue of unknown flow follows RFC 8289's
 * sqrt law. */
static void
test_codel_answer(void)
{
	const struct weir_codel_params par = { .target = 5, .interval = 100 };
	struct weir_codel known, unknown;
	uint32_t n_known = 0, n_unknown = 0;
	uint64_t last = 0, min_gap = UINT64_MAX;

	weir_codel_set_rtt(&unknown, &par, 0);
	weir_codel_set_rtt(&known, &par, 100);
	CHECK(known.scale == 4 && known.tscale == 4 * 100 / WEIR_CODEL_TARGET_RTT / 5,
	      "rtt 100: scale %u tscale %u",
	      known.scale, known.tscale);
	/* Sojourn 20: above the tree's target, below rtt / WEIR_CODEL_TARGET_RTT. */
	for (uint64_t now = 1; now < 2000; now++)
		n_known += weir_codel_drop(&known, &par, 20, 10, now, 0);
	CHECK(n_known == 0, "sojourn under the round trip's target: %u drops", n_known);
	/* A queue standing at sojourn 200 for 5000 ticks. */
	for (uint64_t now = 10000; now < 15000; now++) {
		n_unknown += weir_codel_drop(&unknown, &par, 200, 10, now, 0);
		if (weir_codel_drop(&known, &par, 200, 10, now, 0)) {
			n_known++;
			if (last != 0 && now - last < min_gap)
				min_gap = now - last;
			last = now;
		}
	}
	CHECK(n_unknown > 100, "unknown flow: the sqrt law (%u drops)", n_unknown);
	CHECK(n_known >= 10 && n_known <= 17 && min_gap >= 400,
	      "known flow: %u drops, at least %lu apart (2 x rtt + sojourn = 400)", n_known,
	      (unsigned long)min_gap);
}

/* A flow in its sawtooth (dropped from within 16 tree intervals) on a path
 * shorter than the tree's interval enters dropping after its own round trip
 * above target, not after the tree's interval (issue 23 item 4), or after
 * what its share takes to send TCP's smallest window if that is longer (at
 * most the tree's); a flow of unknown round trip, or one not dropped from
 * lately, keeps the tree's. */
static void
test_codel_sawtooth(void)
{
	const struct weir_codel_params par = { .target = 5, .interval = 100 };
	/* k: 0 a 20-tick path (target 10, interval 20); 1 unknown round trip;
	 * 2 the 20-tick path, its episodes 2000 apart; 3 and 4 the 20-tick
	 * path with a share floor of 60 and of 500. */
	const uint64_t floor[5] = { 0, 0, 0, 60, 500 };
	struct weir_codel c[5] = { { 0 } };
	uint64_t first[5][2] = { { 0 } };

	for (int k = 0; k < 5; k++)
		weir_codel_set_rtt(&c[k], &par, k == 1 ? 0 : 20);
	CHECK(codel_rtt_interval(&c[0], &par) == 20, "rtt 20: interval %lu",
	      (unsigned long)codel_rtt_interval(&c[0], &par));
	for (int k = 0; k < 5; k++) {
		/* Two episodes of a queue standing at sojourn 50, the second
		 * 50 ticks after the first drains (k = 2: 2000, past 16
		 * intervals): when does each first drop? */
		uint64_t t0 = 1000;

		for (int e = 0; e < 2; e++) {
			for (uint64_t now = t0; now < t0 + 300 && first[k][e] == 0; now++)
				if (weir_codel_drop(&c[k], &par, 50, 10, now, floor[k]))
					first[k][e] = now - t0;
			weir_codel_drop(&c[k], &par, 0, 10, t0 + 301, floor[k]);  /* drained */
			t0 += 301 + (k == 2 ? 2000 : 50);
		}
	}
	for (int k = 0; k < 5; k++)
		CHECK(first[k][0] == 100, "k %d, first episode: the tree's interval (%lu)", k,
		      (unsigned long)first[k][0]);
	CHECK(first[0][1] == 20, "in its sawtooth: its round trip (%lu)",
	      (unsigned long)first[0][1]);
	CHECK(first[1][1] == 100 && first[2][1] == 100,
	      "unknown round trip, or dropped long ago: the tree's (%lu %lu)",
	      (unsigned long)first[1][1], (unsigned long)first[2][1]);
	CHECK(first[3][1] == 60 && first[4][1] == 100,
	      "a share floor of 60: 60; of 500: the tree's 100 (%lu %lu)",
	      (unsigned long)first[3][1], (unsigned long)first[4][1]);
}

/* Serve until flow 2 has emptied, then six packets more: past its turn. */
static void
serve_past_turn(struct weir_drr *d, const struct weir_drr_qtab *t)
{
	for (unsigned int n = 0; n < 8 && t->q[2].len != 0; n++)
		next_flow(d);
	for (int i = 0; i < 6; i++)
		next_flow(d);
}

/* Flow 2's packet seq arrives, stamped at `ts` as cbq stamps it. */
static void
wake_flow2(struct weir_drr *d, uint32_t seq, uint64_t ts)
{
	struct rte_mbuf *m = mk(2, seq, 1000);

	weir_mbuf_meta(m)->ts = ts;
	weir_drr_enqueue(d, 2, m);
}

/* A bulk flow CoDel keeps a packet deep empties its queue often; when it
 * wakes after its turn it is old still while CoDel has dropped from it
 * lately, so it does not take the new list's turns from a young transfer
 * (issue 23). Not dropped from for 16 intervals, it may be sparse again. */
static void
test_controlled_wakes_old(void)
{
	struct weir_drr_qtab *t = weir_drr_qtab_create(8, 100, SOCKET_ID_ANY);
	const struct weir_codel_params par = { .target = 5, .interval = 100 };
	struct weir_drr d;
	uint64_t nf;

	t->codel = rte_zmalloc(NULL, 8 * sizeof(*t->codel), 0);
	weir_drr_init(&d, t, 1500, 0);
	d.codel = t->codel;
	d.aqm = &par;
	bulk_beside_flow2(&d, t, 60);
	serve_past_turn(&d, t);
	CHECK(t->q[2].len == 0 && t->q[2].listed == WEIR_DRR_IDLE_OLD, "flow 2 idle (%u)",
	      t->q[2].listed);
	/* CoDel dropped from it at 1000 (its state says so, the flag not
	 * yet): the wake does not read the state, new. */
	t->codel[2].count = 2;
	t->codel[2].drop_next = 1000;
	nf = d.new_flows;
	wake_flow2(&d, 3, 1400);
	CHECK(d.new_flows == nf + 1 && t->q[2].listed == WEIR_DRR_NEW, "unflagged: new (%u)",
	      t->q[2].listed);
	serve_past_turn(&d, t);
	/* Flagged as dequeue_codel flags a drop; it wakes at 1500: old. */
	t->q[2].youth |= WEIR_DRR_Y_CODEL;
	nf = d.new_flows;
	wake_flow2(&d, 4, 1500);
	CHECK(d.new_flows == nf && t->q[2].listed == WEIR_DRR_OLD,
	      "dropped from lately: old (%u)", t->q[2].listed);
	serve_past_turn(&d, t);
	/* Wakes at 2700, 17 intervals after its last drop: new. */
	wake_flow2(&d, 5, 2700);
	CHECK(d.new_flows == nf + 1 && t->q[2].listed == WEIR_DRR_NEW &&
	      !(t->q[2].youth & WEIR_DRR_Y_CODEL),
	      "not dropped from for 16 intervals: new, unflagged (%u)", t->q[2].listed);
	while (next_flow(&d) != UINT32_MAX)
		;
	weir_drr_qtab_free(t);
}

/* A queue of known round trip may hold two bandwidth-delay products at the
 * leaf's rate beyond `limit` (issue 23: a lone cubic download at 150 ms,
 * 20 Mbit/s, BDP ~250 frames, carried 0.78 of its class with 128); one of
 * unknown round trip (UDP, a flood) keeps `limit`; the cap holds. */
static void
test_rtt_limit(void)
{
	struct weir_drr_qtab *t = weir_drr_qtab_create(8, 128, SOCKET_ID_ANY);
	struct weir_drr d;
	uint32_t qid, qlen, kept[3] = { 0 };
	struct rte_mbuf *m;

	weir_drr_init(&d, t, 0, 24);
	CHECK(weir_drr_queue_limit(&d, 1) == 128, "no rate: the limit");
	weir_drr_set_bdp(&d, 20000000, 1542, 1000);
	weir_drr_set_rtt(t, 1, 150);    /* far TCP flow: 2 x 20e6 x 0.15 / 8 / 1542 = 486 */
	weir_drr_set_rtt(t, 2, 10);     /* near: its BDP (16) is below the limit */
	CHECK(weir_drr_queue_limit(&d, 1) == 486, "150 ms: %u", weir_drr_queue_limit(&d, 1));
	CHECK(weir_drr_queue_limit(&d, 2) == 128, "10 ms: %u", weir_drr_queue_limit(&d, 2));
	CHECK(weir_drr_queue_limit(&d, 0) == 128, "unknown: %u", weir_drr_queue_limit(&d, 0));
	/* A 1542-byte frame at 20 Mbit/s: 616.8 us, in ticks of a 1 GHz TSC. */
	weir_drr_set_frame_ticks(&d, 20000000, 1542, 1000000000);
	CHECK(d.frame_ticks == 616800, "frame ticks %u", d.frame_ticks);
	weir_drr_set_frame_ticks(&d, 0, 1542, 1000000000);
	CHECK(d.frame_ticks == 0, "no rate: unknown (%u)", d.frame_ticks);
	for (uint32_t f = 0; f < 3; f++)
		for (uint32_t i = 0; i < 600; i++) {
			m = mk(f, i, 1500);
			if (weir_drr_enqueue(&d, f, m) != WEIR_DRR_OK)
				rte_pktmbuf_free(m);
			else
				kept[f]++;
		}
	CHECK(kept[0] == 128 && kept[1] == 486 && kept[2] == 128,
	      "kept %u %u %u", kept[0], kept[1], kept[2]);
	CHECK(t->q[1].drops == 600 - 486 && t->q[0].drops == 600 - 128, "drops counted");
	/* The cap: 20 Gbit/s x 150 ms would be ~243,000 frames. */
	weir_drr_set_bdp(&d, 20000000000ull, 1542, 300);
	CHECK(weir_drr_queue_limit(&d, 1) == 300, "capped: %u", weir_drr_queue_limit(&d, 1));
	/* A new flow in the slot starts from the limit again. */
	weir_drr_set_rtt(t, 1, 0);
	CHECK(weir_drr_queue_limit(&d, 1) == 128, "reset: %u", weir_drr_queue_limit(&d, 1));
	while ((m = weir_drr_dequeue(&d, &qid, &qlen)) != NULL)
		rte_pktmbuf_free(m);
	weir_drr_qtab_free(t);
}

int
main(int argc, char **argv)
{
	RTE_SET_USED(argc);
	unit_eal_init(argv[0], "drr", "256");
	mp = rte_pktmbuf_pool_create("drr_test", 8191, 0, WEIR_MBUF_PRIV_SIZE,
				     RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
	if (mp == NULL) {
		printf("mempool failed\n");
		return 1;
	}
	test_basic_order();
	test_fair_mixed();
	test_weights();
	test_limit_drops();
	test_drain();
	test_move_idle();
	test_new_flows();
	test_young();
	test_young_together();
	test_young_turn_after_drain();
	test_old_queue_wakes_old();
	test_young_age();
	test_young_refill();
	test_clocked();
	test_youth_end_backlogged();
	test_codel();
	test_codel_at_rest();
	test_codel_answer();
	test_codel_sawtooth();
	test_controlled_wakes_old();
	test_rtt_limit();
	rte_eal_cleanup();
	return unit_report();
}
