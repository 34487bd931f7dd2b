/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for the compiled policy (lib/classify/policy.c) and for what the worker
 * does with it (lib/worker/worker.c): classification into leaves, per-flow weights,
 * admission with both actions and its release, re-classification of a reused
 * 4-tuple with its queue moved in order. (Drains at eviction forward frames,
 * so they need ports: the testbed tests cover them.)
 *
 * Packets are whole Ethernet/IPv4/TCP frames run through weir_worker_process
 * (the real parser, flow table and class trees); time is a fake TSC.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_mbuf.h>

#include "mbuf_meta.h"
#include "policy.h"
#include "unit.h"
#include "worker.h"
#include "rig.h"
#include "ackstore_int.h"
#include "pace_state.h"

/* ---------------- policy build ---------------- */

static void
test_targets(void)
{
	const struct weir_policy_class_conf out[] = {
		{ .name = "staff", .rate = 20000000 },
		{ .name = "gold", .parent = "staff", .rate = 15000000, .ceil = 30000000 },
		{ .name = "bulk", .parent = "staff", .rate = 5000000 },
		{ .name = "guest", .rate = 10000000 },
	};
	const struct weir_policy_class_conf in[] = {
		{ .name = "gold", .rate = 40000000 },
		{ .name = "other", .rate = 10000000 },
	};
	struct weir_policy_rule_conf rules[3] = {
		{ .class_name = "gold" }, { .class_name = "guest", .weight = 4 },
		{ .class_name = "gold", .weight = 4 },
	};
	struct weir_policy_conf pc = {
		.tree = { { .rate = 30000000, .n_classes = 4, .classes = out, .default_class = "guest" },
			  { .rate = 50000000, .n_classes = 2, .classes = in, .default_class = "other" } },
		.n_rules = 3, .rules = rules,
	};
	struct weir_policy_err e;
	struct weir_policy *p = weir_policy_build(&pc, 1, &e);
	struct weir_cbq_class_conf cc[8];

	CHECK(p != NULL, "valid policy builds (%s)", e.msg);
	if (p == NULL)
		return;
	CHECK(p->tree[0].n_classes == 5 && p->tree[1].n_classes == 3, "root + classes per tree");
	CHECK(!p->tree[0].classes[1].is_leaf && p->tree[0].classes[2].is_leaf, "staff is inner");
	CHECK(p->tree[0].classes[3].cbq.ceil == 30000000, "ceil defaults to the parent's ceil");
	CHECK(p->tree[0].classes[1].cbq.ceil == 30000000, "top class ceil defaults to the link");
	/* default, gold/1, guest/4, gold/4 from the rules; then a weight-1 target
	 * for each leaf without one (bulk, guest, other: for policy hooks) */
	CHECK(p->n_targets == 7, "one target per (class, weight): %u", p->n_targets);
	CHECK(weir_policy_target_find(p, "other") >= 4 && weir_policy_target_find(p, "guest") >= 4 &&
	      weir_policy_target_find(p, "gold") == 1 && weir_policy_target_find(p, "staff") < 0,
	      "every leaf can be found by name, inner classes not");
	CHECK(p->targets[0].leaf[0] == 4 && p->targets[0].leaf[1] == 2, "default target");
	CHECK(p->targets[1].leaf[0] == 2 && p->targets[1].leaf[1] == 1, "gold in both trees");
	CHECK(p->targets[2].leaf[0] == 4 && p->targets[2].leaf[1] == 2 && p->targets[2].weight == 4,
	      "guest is outbound only: inbound default, weight kept");
	CHECK(p->targets[3].weight == 4 && p->targets[3].leaf[0] == 2, "gold weight 4");
	CHECK(weir_policy_cbq_classes(p, 0, 1, 2, cc) == 5 && cc[0].rate == 15000000 &&
	      cc[2].rate == 7500000 && cc[2].ceil == 15000000, "worker share: rates halved");
	/* A run-time change to one class: rebuilt and validated like any policy. */
	{
		struct weir_policy_class_change chg = { .rate = 12000000, .ceil = 25000000, .mode = WEIR_MODE_PFQ };
		struct weir_policy *q = weir_policy_with_class(p, 0, "gold", &chg, 2, &e);
		int g = q ? weir_policy_class_find(q, 0, "gold") : -1;

		CHECK(q != NULL && q->epoch == 2 && g > 0 && q->tree[0].classes[g].cbq.rate == 12000000 &&
		      q->tree[0].classes[g].cbq.ceil == 25000000 &&
		      q->tree[0].classes[g].mode == WEIR_MODE_PFQ && q->n_targets == p->n_targets &&
		      weir_classifier_n_rules(q->classifier) == 3, "gold changed, rules kept (%s)", e.msg);
		weir_policy_free(q);
		chg = (struct weir_policy_class_change){ .rate = 25000000, .mode = -1 };
		q = weir_policy_with_class(p, 0, "gold", &chg, 2, &e);
		CHECK(q == NULL && strstr(e.msg, "gold") != NULL, "gold above staff refused: %s", e.msg);
		q = weir_policy_with_class(p, 1, "staff", &chg, 2, &e);
		CHECK(q == NULL && strstr(e.msg, "no class 'staff' in the inbound tree") != NULL,
		      "unknown class: %s", e.msg);
	}
	weir_policy_free(p);
}

/* Build a one-direction policy that must fail; check where it points. */
static void
expect_fail(const char *what, const struct weir_policy_class_conf *cls, uint16_t n,
	    const char *dflt, const struct weir_policy_rule_conf *rules, unsigned int n_rules,
	    enum weir_policy_err_kind kind, int index, const char *needle)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 10000000, .n_classes = n, .classes = cls } },
		.n_rules = n_rules, .rules = rules,
	};
	struct weir_policy_err e;
	struct weir_policy *p;

	snprintf(pc.tree[0].default_class, sizeof(pc.tree[0].default_class), "%s", dflt);
	p = weir_policy_build(&pc, 1, &e);
	CHECK(p == NULL && e.kind == kind && e.index == index && strstr(e.msg, needle) != NULL,
	      "%s: kind %d index %d '%s'", what, e.kind, e.index, e.msg);
	weir_policy_free(p);
}

static void
test_errors(void)
{
	const struct weir_policy_class_conf dup[] = { { .name = "a", .rate = 8000 },
						      { .name = "a", .rate = 8000 } };
	const struct weir_policy_class_conf orphan[] = { { .name = "a", .rate = 8000 },
							 { .name = "b", .parent = "c", .rate = 8000 } };
	const struct weir_policy_class_conf inner[] = { { .name = "p", .rate = 80000 },
							{ .name = "a", .parent = "p", .rate = 8000 } };
	const struct weir_policy_class_conf lowceil[] = { { .name = "a", .rate = 80000, .ceil = 8000 } };
	const struct weir_policy_class_conf toomin[] = { { .name = "a", .rate = 80000, .flow_min = 90000 } };
	const struct weir_policy_class_conf selffb[] = { { .name = "a", .rate = 80000, .flow_min = 8000,
							   .admit = WEIR_ADMIT_FALLBACK, .fallback = "a" } };
	const struct weir_policy_class_conf badname[] = { { .name = "a b", .rate = 8000 } };
	const struct weir_policy_class_conf big[] = { { .name = "p", .rate = 80000 },
						      { .name = "a", .parent = "p", .rate = 90000 } };
	const struct weir_policy_rule_conf r_unknown[] = { { .class_name = "nope" } };
	const struct weir_policy_rule_conf r_inner[] = { { .class_name = "a" }, { .class_name = "p" } };
	struct weir_policy_rule_conf r_bad[2] = { { .class_name = "a" }, { .class_name = "a" } };

	r_bad[1].match.port[WEIR_CLS_WAN] = (struct weir_cls_ports){ 90, 80 };
	expect_fail("duplicate", dup, 2, "a", NULL, 0, WEIR_POLICY_ERR_CLASS, 1, "defined twice");
	expect_fail("orphan", orphan, 2, "a", NULL, 0, WEIR_POLICY_ERR_CLASS, 1, "not defined before");
	expect_fail("inner default", inner, 2, "p", NULL, 0, WEIR_POLICY_ERR_TREE, -1, "must be a leaf");
	expect_fail("no default", dup, 1, "zz", NULL, 0, WEIR_POLICY_ERR_TREE, -1, "not one of");
	expect_fail("ceil < rate", lowceil, 1, "a", NULL, 0, WEIR_POLICY_ERR_CLASS, 0, "below its rate");
	expect_fail("flow_min > rate", toomin, 1, "a", NULL, 0, WEIR_POLICY_ERR_CLASS, 0, "flow_min");
	expect_fail("own fallback", selffb, 1, "a", NULL, 0, WEIR_POLICY_ERR_CLASS, 0, "own fallback");
	expect_fail("bad name", badname, 1, "a", NULL, 0, WEIR_POLICY_ERR_CLASS, 0, "letters");
	expect_fail("child above parent", big, 2, "a", NULL, 0, WEIR_POLICY_ERR_CLASS, 1, "exceeds");
	expect_fail("unknown class", inner, 2, "a", r_unknown, 1, WEIR_POLICY_ERR_RULE, 0, "not defined");
	expect_fail("inner in rule", inner, 2, "a", r_inner, 2, WEIR_POLICY_ERR_RULE, 1, "children");
	expect_fail("bad match", inner, 2, "a", r_bad, 2, WEIR_POLICY_ERR_RULE, 1, "lo > hi");
}

/* ---------------- the worker with a policy ---------------- */

static void
test_classify_and_admit(void)
{
	/* Outbound: voice (3 Mbit/s, >= 1 Mbit/s per flow, drop), video (same,
	 * fallback to bulk), bulk; inbound one default class. */
	const struct weir_policy_class_conf out[] = {
		{ .name = "voice", .rate = 3000000, .flow_min = 1000000 },
		{ .name = "video", .rate = 3000000, .flow_min = 1000000, .admit = WEIR_ADMIT_FALLBACK,
		  .fallback = "bulk" },
		{ .name = "bulk", .rate = 1000000 },
	};
	struct weir_policy_rule_conf rules[2] = { { .class_name = "voice" },
						  { .class_name = "video", .weight = 3 } };
	struct weir_policy_conf pc = {
		.tree = { { .rate = 10000000, .n_classes = 3, .classes = out, .default_class = "bulk" },
			  { .rate = 10000000 } },
		.n_rules = 2, .rules = rules,
	};
	const uint16_t VOICE = 1, VIDEO = 2, BULK = 3;
	struct rig r;
	uint64_t now = rte_get_tsc_hz();
	const struct weir_class_counters *cc;

	rules[0].match.port[WEIR_CLS_WAN] = (struct weir_cls_ports){ 5060, 5060 };
	rules[1].match.port[WEIR_CLS_WAN] = (struct weir_cls_ports){ 8000, 8000 };
	if (rig_make(&r, &pc, "pol_admit") != 0) {
		CHECK(0, "rig");
		return;
	}
	cc = r.w->svc.cls_ctr[0];
	/* Three voice flows fit: 3 x 1 Mbit/s <= 3 Mbit/s. */
	for (int i = 0; i < 3; i++)
		feed(&r, tcp_frame(0, 1, (uint16_t)(1000 + i), 1, 5060, SYN, 0, 0), 0, now);
	CHECK(qlen(&r, 0, VOICE) == 3 && cc[VOICE].flows == 3 && cc[VOICE].admitted == 3,
	      "three voice SYNs queued in voice");
	/* A fourth is refused: its SYN is dropped, counted once per flow. */
	feed(&r, tcp_frame(0, 1, 1003, 1, 5060, SYN, 0, 0), 0, now);
	feed(&r, tcp_frame(0, 1, 1003, 1, 5060, SYN, 0, 0), 0, now + 1);
	CHECK(qlen(&r, 0, VOICE) == 3 && cc[VOICE].refused == 1 &&
	      r.w->svc.ctr.port[WEIR_PORT_LAN].refused == 2, "fourth refused, both SYNs dropped");
	/* Its packets the other way are dropped too (no half-admitted flow). */
	CHECK(feed(&r, tcp_frame(1, 1, 1003, 1, 5060, SYN | ACK, 0, 0), 1, now + 2) == 0 &&
	      r.w->svc.ctr.port[WEIR_PORT_WAN].refused == 1, "refused flow's reply dropped");
	/* One voice flow ends (RST): room again; the next SYN retry gets in. */
	feed(&r, tcp_frame(1, 1, 1000, 1, 5060, RST, 0, 0), 1, now + 3);
	CHECK(cc[VOICE].flows == 2, "RST releases the admission slot");
	feed(&r, tcp_frame(0, 1, 1003, 1, 5060, SYN, 0, 0), 0, now + 4);
	CHECK(cc[VOICE].flows == 3 && cc[VOICE].admitted == 4 && qlen(&r, 0, VOICE) == 4,
	      "retried SYN admitted after a flow left");

	/* video: the fourth flow is diverted to bulk, with bulk's weight 1. */
	for (int i = 0; i < 4; i++)
		feed(&r, tcp_frame(0, 2, (uint16_t)(2000 + i), 1, 8000, SYN, 0, 0), 0, now);
	CHECK(cc[VIDEO].flows == 3 && cc[VIDEO].refused == 1 && cc[VIDEO].diverted == 1 &&
	      cc[BULK].flows == 1 && qlen(&r, 0, BULK) == 1, "fourth video flow diverted to bulk");
	CHECK(r.w->svc.ctr.port[WEIR_PORT_LAN].refused == 2, "diverted flows are not dropped");

	/* Unmatched TCP and non-IP go to the default class; ARP (L2 control)
	 * goes on at once, ahead of shaping (issue 16.3). */
	feed(&r, tcp_frame(0, 3, 3000, 1, 80, SYN, 0, 0), 0, now);
	for (int et = 0; et < 2; et++) {
		struct rte_mbuf *l2 = rte_pktmbuf_alloc(mp);
		uint8_t *f = (uint8_t *)rte_pktmbuf_append(l2, 60);

		memset(f, 0, 60);
		f[12] = et == 0 ? 0x88 : 0x08;  /* 0x88b5: IEEE local experimental */
		f[13] = et == 0 ? 0xb5 : 0x06;
		CHECK(feed(&r, l2, 0, now) == (uint16_t)et, "%s", et ? "ARP sent at once" : "non-IP queued");
	}
	CHECK(qlen(&r, 0, BULK) == 3, "unmatched flow and non-IP in bulk (%u)", qlen(&r, 0, BULK));

	/* Per-flow weight from the rule: video flows weigh 3 in the DRR. */
	{
		struct weir_flow *f[1];
		struct weir_flow_key k;
		struct rte_mbuf *m = tcp_frame(0, 2, 2000, 1, 8000, ACK, 1, 0);
		struct weir_pkt *pk = &weir_mbuf_meta(m)->pkt;

		weir_parse(rte_pktmbuf_mtod(m, uint8_t *), m->data_len, pk);
		weir_flow_key_make(rte_pktmbuf_mtod(m, uint8_t *), pk, &k);
		weir_flow_lookup_bulk(r.ft, &k, 1, now, f);
		CHECK(f[0] != NULL && weir_cbq_qtab(r.w->svc.shaper[0])->q[weir_flow_slot(r.ft, f[0])].weight == 3,
		      "rule weight applied to the flow's queue");
		rte_pktmbuf_free(m);
	}
	/* Everything queued leaves on shutdown (10 out, the RST in), and nothing leaks. */
	CHECK(weir_worker_flush_queues(r.w) == 11, "flush frees every queued frame");
	rig_free(&r);
}

/* A closed 4-tuple reused by a connection the other side opens: a rule on
 * who opened the flow moves it to another class, and what the old
 * connection still had queued moves with it, in order, ahead of the new SYN. */
static void
test_reuse_moves_queue(void)
{
	const struct weir_policy_class_conf out[] = {
		{ .name = "a", .rate = 8000 }, { .name = "b", .rate = 8000 },
	};
	struct weir_policy_rule_conf rules[1] = { { .class_name = "b" } };
	struct weir_policy_conf pc = {
		.tree = { { .rate = 16000, .n_classes = 2, .classes = out, .default_class = "a" },
			  { .rate = 16000 } },
		.n_rules = 1, .rules = rules,
	};
	struct rig r;
	uint64_t now = rte_get_tsc_hz();
	struct weir_cbq_deq d;
	uint32_t seqs[8], n = 0;
	struct rte_mbuf *m;

	rules[0].match.dir = WEIR_CLS_DIR_IN;
	if (rig_make(&r, &pc, "pol_reuse") != 0) {
		CHECK(0, "rig");
		return;
	}
	/* LAN host opens: class a. Two data segments wait (8 kbit/s). */
	feed(&r, tcp_frame(0, 1, 4000, 1, 443, SYN, 100, 0), 0, now);
	feed(&r, tcp_frame(0, 1, 4000, 1, 443, ACK, 101, 100), 0, now);
	feed(&r, tcp_frame(0, 1, 4000, 1, 443, ACK, 201, 100), 0, now);
	feed(&r, tcp_frame(1, 1, 4000, 1, 443, RST, 0, 0), 1, now);
	CHECK(qlen(&r, 0, 1) == 3 && r.w->svc.cls_ctr[0][1].flows == 0, "closed flow's data still queued in a");
	/* The WAN host opens the same 4-tuple: a new flow, class b. */
	feed(&r, tcp_frame(1, 1, 4000, 1, 443, SYN, 900, 0), 1, now + 1);
	feed(&r, tcp_frame(0, 1, 4000, 1, 443, SYN | ACK, 300, 0), 0, now + 1);
	CHECK(qlen(&r, 0, 1) == 0 && qlen(&r, 0, 2) == 4 && r.w->svc.cls_ctr[0][2].flows == 1,
	      "reused 4-tuple re-classified into b, queue moved (a %u, b %u)", qlen(&r, 0, 1),
	      qlen(&r, 0, 2));
	while ((m = weir_cbq_dequeue(r.w->svc.shaper[0], now + 100 * rte_get_tsc_hz(), &d)) != NULL) {
		const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);

		if (n < RTE_DIM(seqs))
			seqs[n++] = (uint32_t)f[38] << 24 | (uint32_t)f[39] << 16 | (uint32_t)f[40] << 8 | f[41];
		rte_pktmbuf_free(m);
	}
	CHECK(n == 4 && seqs[0] == 100 && seqs[1] == 101 && seqs[2] == 201 && seqs[3] == 300,
	      "order kept across the move (%u: %u %u %u %u)", n, seqs[0], seqs[1], seqs[2], seqs[3]);
	rig_free(&r);
}

/* A fifo leaf: one queue for the class, first in first out across flows,
 * bounded by the class limit (not the per-flow one); drained on shutdown. */
static void
test_fifo_leaf(void)
{
	const struct weir_policy_class_conf out[] = {
		{ .name = "q", .rate = 8000, .limit = 20, .mode = WEIR_MODE_FIFO },
	};
	struct weir_policy_conf pc = {
		.tree = { { .rate = 16000, .n_classes = 1, .classes = out, .default_class = "q" },
			  { .rate = 0 } },
	};
	struct rig r;
	uint64_t now = rte_get_tsc_hz();
	struct weir_cbq_deq d;
	struct rte_mbuf *m;
	uint32_t n = 0, in_order = 0;

	if (rig_make(&r, &pc, "pol_fifo") != 0) {
		CHECK(0, "rig");
		return;
	}
	/* 24 packets, flows alternating 1,2,3; per-flow limit is 16, class 20. */
	for (uint32_t i = 0; i < 24; i++)
		feed(&r, tcp_frame(0, 1, (uint16_t)(1000 + i % 3), 1, 80, ACK, i, 10), 0, now);
	CHECK(qlen(&r, 0, 1) == 20 && r.w->svc.ctr.port[0].dropped == 4, "class limit 20 applies (%u)",
	      qlen(&r, 0, 1));
	while ((m = weir_cbq_dequeue(r.w->svc.shaper[0], now + 1000 * rte_get_tsc_hz(), &d)) != NULL) {
		const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);

		in_order += f[41] == n++;
		rte_pktmbuf_free(m);
	}
	CHECK(n == 20 && in_order == 20, "arrival order across flows (%u of %u)", in_order, n);
	for (uint32_t i = 0; i < 5; i++)
		feed(&r, tcp_frame(0, 1, 1000, 1, 80, ACK, i, 10), 0, now);
	CHECK(weir_worker_flush_queues(r.w) == 5, "shutdown drains the fifo");
	rig_free(&r);
}

int
main(int argc, char **argv)
{
	unit_eal_init(argv[0], "policy", "256");
	rig_mempool("pol_mp");
	test_targets();
	test_errors();
	test_classify_and_admit();
	test_reuse_moves_queue();
	test_fifo_leaf();
	CHECK(rte_mempool_in_use_count(mp) == 0, "no mbuf leaked (%u in use)",
	      rte_mempool_in_use_count(mp));
	return unit_report();
}
