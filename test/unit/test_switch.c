/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for a running worker switching policy (weir_worker_policy_post
 * and _take): queued packets move into the new trees in order and under
 * their flows' new classes, nothing is lost, held ACKs go first, counters
 * start over, and flows with nothing queued are re-classified on their next
 * packet.
 */
#include <stdio.h>

#include <rte_common.h>
#include <rte_eal.h>
#include <rte_malloc.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "unit.h"
#include "rig.h"
#include "ackstore_int.h"
#include "pace_state.h"

#define MBIT 1000000ull

/* Before: web (port 80) and rest; after: a new tree where port 80 goes to
 * "video" under a new inner class and everything else to "bulk". */
static const struct weir_policy_class_conf OLD_CLS[] = {
	{ .name = "web", .rate = 4 * MBIT, .mode = WEIR_MODE_PFQ },
	{ .name = "rest", .rate = 6 * MBIT, .mode = WEIR_MODE_POSTACK },
};
static const struct weir_policy_class_conf NEW_CLS[] = {
	{ .name = "media", .rate = 7 * MBIT },
	{ .name = "video", .parent = "media", .rate = 7 * MBIT, .mode = WEIR_MODE_FIFO },
	{ .name = "bulk", .rate = 3 * MBIT },
};

static struct weir_policy_rule_conf
port_rule(const char *cls, uint16_t port)
{
	struct weir_policy_rule_conf r = { 0 };

	snprintf(r.class_name, sizeof(r.class_name), "%s", cls);
	r.match.port[WEIR_CLS_WAN] = (struct weir_cls_ports){ port, port };
	return r;
}

#define tag_of rig_tag

static uint16_t
port_of(struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);

	return (uint16_t)(f[36] << 8 | f[37]);      /* outbound: the WAN port */
}

/* New trees (flow limit 4) and counters for np, as the management lcore
 * builds them for a worker. */
static void
make_switch(const struct weir_policy *np, struct weir_policy_switch *sw)
{
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		struct weir_cbq_class_conf cc[WEIR_CBQ_MAX_CLASSES];
		struct weir_cbq_conf conf = {
			.socket_id = SOCKET_ID_ANY, .tsc_hz = rte_get_tsc_hz(), .classes = cc,
			.n_queues = CAP + 1 + WEIR_POLICY_QUEUES_EXTRA(np), .flow_limit = 4,
		};

		conf.n_classes = weir_policy_cbq_classes(np, d, 1, 1, cc);
		sw->shaper[d] = weir_cbq_create(&conf);
		sw->cls_ctr[d] = rte_zmalloc(NULL, np->tree[d].n_classes * sizeof(*sw->cls_ctr[d]), 0);
	}
	sw->policy = np;
}

static void
test_switch_moves_queues(void)
{
	struct weir_policy_rule_conf old_rules[1] = { port_rule("web", 80) };
	struct weir_policy_rule_conf new_rules[1] = { port_rule("video", 80) };
	const struct weir_policy_conf oc = {
		.tree = { { .rate = 10 * MBIT, .n_classes = 2, .classes = OLD_CLS, .default_class = "rest" },
			  { .rate = 10 * MBIT, .n_classes = 2, .classes = OLD_CLS, .default_class = "rest" } },
		.n_rules = 1, .rules = old_rules,
	};
	const struct weir_policy_conf nc = {
		.tree = { { .rate = 10 * MBIT, .n_classes = 3, .classes = NEW_CLS, .default_class = "bulk" },
			  { .rate = 10 * MBIT, .n_classes = 3, .classes = NEW_CLS, .default_class = "bulk" } },
		.n_rules = 1, .rules = new_rules,
	};
	struct weir_policy_err e;
	struct weir_policy *np;
	struct weir_policy_switch sw = { 0 };
	struct rig r;
	const uint64_t now = rte_get_tsc_hz();
	uint32_t next_tag[4] = { 0 };
	unsigned int out = 0, bad_order = 0, in_queue = 0;
	const uint16_t ports[4] = { 80, 81, 80, 443 };
	int video, bulk;

	if (rig_make_pa(&r, &oc, "sw_rig", 256) != 0) {
		CHECK(0, "rig");
		return;
	}
	/* Four flows, 12 packets each (the rig's flow limit is 16), nothing
	 * dequeued: all wait. Flow i uses LAN port 5000 + i. */
	for (uint32_t seq = 1; seq <= 12; seq++)
		for (int i = 0; i < 4; i++)
			feed(&r, tcp_frame(0, 1, (uint16_t)(5000 + i), 1, ports[i], ACK, seq, 100), 0, now);
	for (uint16_t c = 0; c < 3; c++)
		in_queue += qlen(&r, 0, c);
	CHECK(in_queue == 48, "48 packets queued under the old policy (%u)", in_queue);
	/* One ACK held against flow 1 (rest is postack, its data is queued). */
	feed(&r, tcp_frame(1, 1, 5001, 1, 81, ACK, 777, 0), 1, now);
	CHECK(r.w->svc.pa != NULL && weir_postack_len(r.w->svc.pa, 0, 1) + weir_postack_len(r.w->svc.pa, 0, 0) +
	      weir_postack_len(r.w->svc.pa, 0, 2) + weir_postack_len(r.w->svc.pa, 0, 3) == 1, "an ACK held");

	np = weir_policy_build(&nc, 2, &e);
	CHECK(np != NULL, "new policy builds");
	video = weir_policy_class_find(np, 0, "video");
	bulk = weir_policy_class_find(np, 0, "bulk");
	make_switch(np, &sw);
	{
		struct weir_policy_switch bad = sw;

		bad.shaper[1] = NULL;
		CHECK(weir_worker_policy_post(r.w, &bad) == -EINVAL, "a switch dropping a tree: refused");
	}
	CHECK(weir_worker_policy_post(r.w, &sw) == 0, "posted");
	CHECK(weir_worker_policy_post(r.w, &sw) == -EBUSY, "a second post waits for the first");
	CHECK(weir_worker_policy_take(r.w) == 1 && r.w->svc.policy == np && r.w->policy_acked == 2,
	      "taken and acknowledged");
	weir_worker_tx(r.w);
	CHECK(r.n_emitted == 1 && tag_of(r.emitted[0]) == 777, "the held ACK went first");
	rig_emitted_free(&r);
	CHECK(r.w->requeued == 48, "48 packets moved, past the new flow limit of 4 (%lu)",
	      r.w->requeued);
	CHECK(qlen(&r, 0, (uint16_t)video) == 24 && qlen(&r, 0, (uint16_t)bulk) == 24,
	      "port 80 now in video (fifo), the rest in bulk (%u, %u)",
	      qlen(&r, 0, (uint16_t)video), qlen(&r, 0, (uint16_t)bulk));
	CHECK(r.w->svc.cls_ctr[0][video].flows == 2 && r.w->svc.cls_ctr[0][bulk].flows == 2,
	      "flows counted in their new classes");
	weir_policy_free(r.p);  /* the old policy: the caller's once acked */
	r.p = np;
	/* Everything comes out, each flow in order. */
	for (uint64_t t = now; t < now + 10 * rte_get_tsc_hz() && out < 48;
	     t += rte_get_tsc_hz() / 1000) {
		struct rte_mbuf *m[32];
		uint16_t n = rig_dequeue(&r, WEIR_PORT_LAN, t, m, 32);

		for (uint16_t i = 0; i < n; i++) {
			int fl = -1;

			for (int k = 0; k < 4; k++) {
				const uint8_t *f = rte_pktmbuf_mtod(m[i], const uint8_t *);

				if ((uint16_t)(f[34] << 8 | f[35]) == 5000 + k && port_of(m[i]) == ports[k])
					fl = k;
			}
			if (fl < 0 || tag_of(m[i]) != ++next_tag[fl])
				bad_order++;
			out++;
		}
		rte_pktmbuf_free_bulk(m, n);
	}
	CHECK(out == 48 && bad_order == 0, "all 48 out, no flow reordered (%u out, %u bad)", out,
	      bad_order);
	/* A flow with nothing queued at the switch is classified on its next
	 * packet under the new policy. */
	feed(&r, tcp_frame(0, 2, 6000, 1, 80, ACK, 1, 100), 0, now);
	CHECK(qlen(&r, 0, (uint16_t)video) == 1, "a new port-80 flow goes to video");
	rig_free(&r);
}

/* The hooks' plumbing: a new flow's event, a command moving it (with what
 * it has queued) to another class, a stale command ignored, the end event
 * with the flow's totals. */
static void
test_flow_events_and_moves(void)
{
	struct weir_policy_rule_conf rules[1] = { port_rule("web", 80) };
	const struct weir_policy_conf pc = {
		.tree = { { .rate = 10 * MBIT, .n_classes = 2, .classes = OLD_CLS, .default_class = "rest" },
			  { .rate = 10 * MBIT, .n_classes = 2, .classes = OLD_CLS, .default_class = "rest" } },
		.n_rules = 1, .rules = rules,
	};
	struct rig r;
	const uint64_t now = rte_get_tsc_hz();
	struct rte_ring *ev = rte_ring_create_elem("t_ev", sizeof(struct weir_flow_event), 64,
						   SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	struct rte_ring *cmd = rte_ring_create_elem("t_cmd", sizeof(struct weir_flow_cmd), 64,
						    SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	struct weir_flow_event e;
	int web, rest, t_rest;

	if (ev == NULL || cmd == NULL || rig_make(&r, &pc, "ev_rig") != 0) {
		CHECK(0, "rig");
		return;
	}
	web = weir_policy_class_find(r.p, 0, "web");
	rest = weir_policy_class_find(r.p, 0, "rest");
	t_rest = weir_policy_target_find(r.p, "rest");
	CHECK(t_rest > 0 && weir_policy_target_find(r.p, "nope") < 0, "every leaf has a target");
	r.w->conf.events = ev;
	r.w->conf.cmds = cmd;
	r.w->conf.new_flow_events = true;
	r.w->conf.end_flow_events = true;
	for (uint32_t seq = 1; seq <= 3; seq++)
		feed(&r, tcp_frame(0, 7, 4321, 9, 80, ACK, seq, 100), 0, now);
	feed(&r, tcp_frame(0, 7, 4322, 9, 443, ACK, 1, 100), 0, now);
	CHECK(rte_ring_count(ev) == 2, "one event per new flow (%u)", rte_ring_count(ev));
	CHECK(rte_ring_sc_dequeue_elem(ev, &e, sizeof(e)) == 0 && e.type == WEIR_FEV_NEW &&
	      e.lan_port == 4321 && e.wan_port == 80 && e.proto == IPPROTO_TCP && e.family == 4 &&
	      e.lan[0] == 10 && e.lan[3] == 7 && e.wan[0] == 192 && e.wan[3] == 9 &&
	      e.init_dir == WEIR_DIR_OUT && r.p->targets[e.target].leaf[0] == (uint32_t)web,
	      "the event: LAN/WAN sides, ports, its class");
	CHECK(qlen(&r, 0, (uint16_t)web) == 3, "3 packets in web");
	{
		struct weir_flow_cmd c = { .slot = e.slot, .target = (uint16_t)t_rest,
					   .epoch = e.epoch, .first_tsc = e.first_tsc + 1 };

		rte_ring_sp_enqueue_elem(cmd, &c, sizeof(c));
		c.first_tsc = e.first_tsc;
		rte_ring_sp_enqueue_elem(cmd, &c, sizeof(c));
	}
	CHECK(weir_worker_cmds(r.w) == 2 && r.w->cmds_stale == 1 && r.w->cmds_applied == 1,
	      "a stale command ignored, the right one applied");
	CHECK(qlen(&r, 0, (uint16_t)web) == 0 && qlen(&r, 0, (uint16_t)rest) == 4,
	      "the flow moved to rest with its 3 packets (%u, %u)", qlen(&r, 0, (uint16_t)web),
	      qlen(&r, 0, (uint16_t)rest));
	CHECK(r.w->svc.cls_ctr[0][web].flows == 0 && r.w->svc.cls_ctr[0][rest].flows == 2,
	      "class flow counts follow");
	rte_ring_sc_dequeue_elem(ev, &e, sizeof(e));
	/* A new policy re-classifies flows by its rules: the hooks are asked
	 * again about the flow they moved, not about the other. */
	{
		struct weir_policy_err pe;
		struct weir_policy *np = weir_policy_build(&pc, 5, &pe);
		struct weir_policy_switch sw = { 0 };

		make_switch(np, &sw);
		CHECK(weir_worker_policy_post(r.w, &sw) == 0 && weir_worker_policy_take(r.w) == 1,
		      "a policy switch");
		weir_policy_free(r.p);
		r.p = np;
		feed(&r, tcp_frame(0, 7, 4321, 9, 80, ACK, 4, 100), 0, now);
		feed(&r, tcp_frame(0, 7, 4322, 9, 443, ACK, 2, 100), 0, now);
		CHECK(rte_ring_count(ev) == 1 && rte_ring_sc_dequeue_elem(ev, &e, sizeof(e)) == 0 &&
		      e.type == WEIR_FEV_NEW && e.lan_port == 4321 && e.epoch == 5,
		      "asked again about the moved flow only");
		web = weir_policy_class_find(r.p, 0, "web");
		rest = weir_policy_class_find(r.p, 0, "rest");
	}
	/* Both flows expire: end events with their totals. */
	{
		struct rte_mbuf *m[8];
		uint16_t n = rig_dequeue(&r, WEIR_PORT_LAN, now + rte_get_tsc_hz(), m, 8);

		rte_pktmbuf_free_bulk(m, n);
	}
	CHECK(weir_worker_expire(r.w, now + 1000 * rte_get_tsc_hz(), 4 * CAP) == 2, "both expire");
	CHECK(rte_ring_count(ev) == 2, "an end event each (%u)", rte_ring_count(ev));
	{
		int found = 0;

		while (rte_ring_sc_dequeue_elem(ev, &e, sizeof(e)) == 0) {
			if (e.type == WEIR_FEV_END && e.lan_port == 4321 && e.wan_port == 80 &&
			    e.lan[3] == 7 && e.wan[3] == 9 && e.pkts[WEIR_DIR_OUT] == 4 &&
			    e.bytes[WEIR_DIR_OUT] == 4 * 154 && e.pkts[WEIR_DIR_IN] == 0 &&
			    r.p->targets[e.target].leaf[0] == (uint32_t)web)
				found++;
		}
		CHECK(found == 1, "the moved flow's end: LAN/WAN sides, 4 packets out, back in web "
		      "by the new policy's rules (no hook answered)");
	}
	rig_free(&r);
	rte_ring_free(ev);
	rte_ring_free(cmd);
}

/* A hook moves a flow into a class that refuses it (flow_min: room for one
 * flow, which another holds) while its queue, new and just emptied, waits on its old
 * leaf's list. Its queue must follow its class even so: once the class
 * admits it (more rate), its next packets are queued there and sent, not
 * held for good in a queue no leaf lists. */
static void
test_refused_move_keeps_queue(void)
{
	static const struct weir_policy_class_conf cls[] = {
		{ .name = "web", .rate = 4 * MBIT, .mode = WEIR_MODE_PFQ },
		{ .name = "rest", .rate = 3 * MBIT, .mode = WEIR_MODE_PFQ },
		{ .name = "voip", .rate = 3 * MBIT, .mode = WEIR_MODE_PFQ, .flow_min = 2 * MBIT,
		  .admit = WEIR_ADMIT_DROP },
	};
	struct weir_policy_rule_conf rules[2] = { port_rule("web", 80), port_rule("voip", 5060) };
	const struct weir_policy_conf pc = {
		.tree = { { .rate = 10 * MBIT, .n_classes = 3, .classes = cls, .default_class = "rest" },
			  { .rate = 10 * MBIT, .n_classes = 3, .classes = cls, .default_class = "rest" } },
		.n_rules = 2, .rules = rules,
	};
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), now = hz;
	struct rte_ring *ev = rte_ring_create_elem("t_ev2", sizeof(struct weir_flow_event), 64,
						   SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	struct rte_ring *cmd = rte_ring_create_elem("t_cmd2", sizeof(struct weir_flow_cmd), 64,
						    SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	struct weir_flow_event e;
	struct rte_mbuf *m[8];
	unsigned int out = 0;
	int voip;

	if (ev == NULL || cmd == NULL || rig_make(&r, &pc, "refuse_rig") != 0) {
		CHECK(0, "rig");
		return;
	}
	voip = weir_policy_class_find(r.p, 0, "voip");
	r.w->conf.events = ev;
	r.w->conf.cmds = cmd;
	r.w->conf.new_flow_events = true;
	/* A call holds voip's one place; one packet in web, sent: the web
	 * flow's queue waits on web's old list, empty. */
	feed(&r, tcp_frame(0, 8, 4000, 9, 5060, ACK, 1, 100), 0, now);
	feed(&r, tcp_frame(0, 7, 4321, 9, 80, ACK, 1, 100), 0, now);
	rte_pktmbuf_free_bulk(m, rig_dequeue(&r, WEIR_PORT_LAN, now, m, 8));
	CHECK(rte_ring_sc_dequeue_elem(ev, &e, sizeof(e)) == 0 &&
	      rte_ring_sc_dequeue_elem(ev, &e, sizeof(e)) == 0 && e.wan_port == 80,
	      "the web flow's event");
	{
		struct weir_flow_cmd c = {
			.slot = e.slot, .target = (uint16_t)weir_policy_target_find(r.p, "voip"),
			.epoch = e.epoch, .first_tsc = e.first_tsc,
		};

		rte_ring_sp_enqueue_elem(cmd, &c, sizeof(c));
	}
	CHECK(weir_worker_cmds(r.w) == 1 && r.w->svc.cls_ctr[0][voip].refused == 1,
	      "moved into voip, which refuses it (%u)", (unsigned int)r.w->svc.cls_ctr[0][voip].refused);
	CHECK(feed(&r, tcp_frame(0, 7, 4321, 9, 80, ACK, 2, 100), 0, now) == 0 &&
	      qlen(&r, 0, (uint16_t)voip) == 0, "refused: its packet is dropped");
	/* The rebalancer (or a reload) gives voip room for one more flow. */
	for (int d = 0; d < WEIR_PORT__COUNT; d++)
		CHECK(weir_cbq_set_rate(r.w->svc.shaper[d], (uint16_t)voip, 4 * MBIT, 4 * MBIT) == 0,
		      "set_rate");
	for (uint32_t seq = 3; seq <= 5; seq++)
		feed(&r, tcp_frame(0, 7, 4321, 9, 80, ACK, seq, 100), 0, now);
	CHECK(qlen(&r, 0, (uint16_t)voip) == 3, "admitted now: 3 packets in voip (%u)",
	      qlen(&r, 0, (uint16_t)voip));
	for (int i = 1; i <= 4; i++) {
		uint16_t n = rig_dequeue(&r, WEIR_PORT_LAN, now + (uint64_t)i * hz, m, 8);

		out += n;
		rte_pktmbuf_free_bulk(m, n);
	}
	CHECK(out == 3 && qlen(&r, 0, (uint16_t)voip) == 0,
	      "voip sent them (%u out, %u still queued)", out, qlen(&r, 0, (uint16_t)voip));
	rig_free(&r);
	rte_ring_free(ev);
	rte_ring_free(cmd);
}

/* 255 switches bring the worker's 8-bit policy generation back to where a
 * flow idle all along was classified: it must not look current then
 * (issue 17 item 7: its class count was decremented where it was never
 * counted, wrapping to 2^32 - 1). */
static void
test_generation_wrap(void)
{
	const struct weir_policy_conf oc = {
		.tree = { { .rate = 10 * MBIT, .n_classes = 2, .classes = OLD_CLS, .default_class = "rest" },
			  { .rate = 10 * MBIT, .n_classes = 2, .classes = OLD_CLS, .default_class = "rest" } },
	};
	struct weir_policy_err e;
	struct rig r;
	const uint64_t now = rte_get_tsc_hz();
	struct rte_mbuf *m[4];
	int rest;

	if (rig_make_pa(&r, &oc, "sw_wrap", 256) != 0) {
		CHECK(0, "rig");
		return;
	}
	feed(&r, tcp_frame(0, 1, 5000, 1, 443, ACK, 1, 100), 0, now);
	rte_pktmbuf_free_bulk(m, rig_dequeue(&r, WEIR_PORT_LAN, now + rte_get_tsc_hz(), m, 4));
	for (uint32_t i = 0; i < 255; i++) {
		struct weir_policy_switch sw = { 0 };
		struct weir_policy *np = weir_policy_build(&oc, 2 + i, &e);

		make_switch(np, &sw);
		if (weir_worker_policy_post(r.w, &sw) != 0 || weir_worker_policy_take(r.w) != 1) {
			CHECK(0, "switch %u", i);
			weir_policy_free(np);
			break;
		}
		weir_policy_free(r.p);
		r.p = np;
	}
	rest = weir_policy_class_find(r.p, 0, "rest");
	feed(&r, tcp_frame(0, 1, 5000, 1, 443, ACK, 101, 100), 0, now);
	CHECK(r.w->svc.cls_ctr[0][rest].flows == 1,
	      "the idle flow counted once after 255 switches (%u)", r.w->svc.cls_ctr[0][rest].flows);
	rig_free(&r);
}

int
main(int argc, char **argv)
{
	RTE_SET_USED(argc);
	unit_eal_init(argv[0], "switch", "256");
	rig_mempool("switch_test");
	test_switch_moves_queues();
	test_flow_events_and_moves();
	test_refused_move_keeps_queue();
	test_generation_wrap();
	rte_eal_cleanup();
	return unit_report();
}
