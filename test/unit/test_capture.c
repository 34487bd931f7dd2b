/* SPDX-License-Identifier: BSD-3-Clause
 * Capture: filter parsing (what the REST API hands lib/observe/capture.c), matching
 * real frames (addresses, ports, prefixes, BPF through rte_bpf), and a
 * worker with a tap: the copies on its ring carry the verdicts, a class
 * filter follows a new flow's class, a full ring or empty pool is counted
 * and never stops the frames.
 */
#include <inttypes.h>
#include <string.h>

#include <rte_ring_elem.h>

#include "unit.h"
#include "rig.h"
#include "capture.h"
#include "worker_view.h"

static int
set(struct weir_cap_filter *f, const char *k, const char *v, char *err)
{
	return weir_cap_filter_set(f, k, v, err, 256);
}

static void
test_parse(void)
{
	struct weir_cap_filter f = { 0 };
	char err[256];

	CHECK(set(&f, "host", "10.0.0.0/8", err) == 0 && f.host_len == 8 && f.family == 4 &&
	      f.host[0] == 10 && (f.match & WEIR_CAPF_HOST), "v4 prefix");
	CHECK(set(&f, "peer", "2001:db8::1", err) < 0 && strstr(err, "family") != NULL,
	      "mixed families refused: %s", err);
	CHECK(set(&f, "peer", "192.0.2.7", err) == 0 && f.peer_len == 32, "v4 peer");
	CHECK(set(&f, "host", "10.0.0.0/33", err) < 0 && strstr(err, "prefix") != NULL,
	      "prefix too long: %s", err);
	CHECK(set(&f, "host", "10.0.0.1/", err) < 0, "empty length");
	CHECK(set(&f, "host", "example.com", err) < 0, "names are not addresses");
	CHECK(set(&f, "port", "0", err) < 0 && set(&f, "port", "65536", err) < 0 &&
	      set(&f, "port", "80x", err) < 0, "bad ports refused");
	CHECK(set(&f, "port", "443", err) == 0 && f.port == 443, "port");
	CHECK(set(&f, "peer_port", "5201", err) == 0 && f.pport == 5201, "peer port");
	CHECK(set(&f, "proto", "UDP", err) == 0 && f.proto == IPPROTO_UDP, "proto by name");
	CHECK(set(&f, "proto", "47", err) == 0 && f.proto == 47, "proto by number");
	CHECK(set(&f, "proto", "tcpx", err) < 0 && set(&f, "proto", "256", err) < 0,
	      "bad protocols refused");
	CHECK(set(&f, "direction", "wan", err) == 0 && f.dir == 1, "direction");
	CHECK(set(&f, "direction", "up", err) < 0, "bad direction");
	CHECK(set(&f, "colour", "red", err) < 0 && strstr(err, "unknown") != NULL, "unknown key");
	CHECK(set(&f, "bpf", "tcp port and", err) < 0 && strstr(err, "bpf") != NULL,
	      "a filter that does not parse: %s", err);
	CHECK(set(&f, "bpf", "tcp dst port 80", err) == 0 && f.bpf != NULL &&
	      (f.match & WEIR_CAPF_BPF), "bpf compiles: %s", err);
	weir_cap_filter_free(&f);
	CHECK(f.match == 0 && f.bpf == NULL, "freed");
	memset(&f, 0, sizeof(f));
	CHECK(set(&f, "host", "2001:db8::/32", err) == 0 && f.family == 6 && f.host_len == 32,
	      "v6 prefix");
}

/* The parser's record for a whole frame. */
static struct weir_pkt *
parsed(struct rte_mbuf *m)
{
	struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;

	weir_parse(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, p);
	return p;
}

static void
test_match(void)
{
	struct weir_cap_filter f = { 0 };
	struct rte_mbuf *out = tcp_frame(0, 5, 4000, 9, 80, ACK, 1, 10);     /* 10.0.0.5:4000 -> 192.0.2.9:80 */
	struct rte_mbuf *back = tcp_frame(1, 5, 4000, 9, 80, ACK, 1, 10);
	struct rte_mbuf *other = tcp_frame(0, 6, 4000, 9, 81, ACK, 1, 10);
	struct weir_pkt *po = parsed(out), *pb = parsed(back), *px = parsed(other);
	char err[256];

	set(&f, "host", "10.0.0.5", err);
	set(&f, "port", "4000", err);
	set(&f, "peer", "192.0.2.0/24", err);
	set(&f, "peer_port", "80", err);
	set(&f, "proto", "tcp", err);
	CHECK(weir_cap_filter_match(&f, out, po, 0, WEIR_CBQ_NONE), "5-tuple, out");
	CHECK(weir_cap_filter_match(&f, back, pb, 1, WEIR_CBQ_NONE), "5-tuple, back");
	CHECK(!weir_cap_filter_match(&f, other, px, 0, WEIR_CBQ_NONE), "another host");
	set(&f, "proto", "udp", err);
	CHECK(!weir_cap_filter_match(&f, out, po, 0, WEIR_CBQ_NONE), "another protocol");
	weir_cap_filter_free(&f);

	set(&f, "bpf", "src host 10.0.0.5 and tcp dst port 80", err);
	CHECK(weir_cap_filter_match(&f, out, po, 0, WEIR_CBQ_NONE), "bpf takes the frame");
	CHECK(!weir_cap_filter_match(&f, back, pb, 1, WEIR_CBQ_NONE), "bpf is directional");
	CHECK(!weir_cap_filter_match(&f, other, px, 0, WEIR_CBQ_NONE), "bpf refuses another");
	weir_cap_filter_free(&f);

	f.match = WEIR_CAPF_CLASS;
	f.cls[0] = 2;
	f.cls[1] = WEIR_CBQ_NONE;
	CHECK(weir_cap_filter_match(&f, out, po, 0, 2) && !weir_cap_filter_match(&f, out, po, 0, 1) &&
	      !weir_cap_filter_match(&f, back, pb, 1, 2), "class by direction");
	CHECK(weir_cap_filter_match(&f, out, po, 0, WEIR_CAP_CLS_ANY),
	      "an unclassified flow passes until its class is known");
	rte_pktmbuf_free(out);
	rte_pktmbuf_free(back);
	rte_pktmbuf_free(other);
}

/* A worker with a tap of one class: every frame of that class and no
 * other is on the ring, with its verdict, and the frames went on all the
 * same. */
static void
test_worker_tap(void)
{
	const struct weir_policy_class_conf out[] = {
		{ .name = "web", .rate = 1000000 },
		{ .name = "bulk", .rate = 1000000 },
	};
	struct weir_policy_rule_conf rules[1] = { { .class_name = "web" } };
	struct weir_policy_conf pc = {
		.tree = { { .rate = 2000000, .n_classes = 2, .classes = out, .default_class = "bulk" },
			  { .rate = 0 } },
		.n_rules = 1, .rules = rules,
	};
	struct rte_mempool *cp = rte_pktmbuf_pool_create("cap_copies", 63, 0, 0, 2048,
							 SOCKET_ID_ANY);
	struct rte_ring *ring = rte_ring_create_elem("cap_ring", sizeof(struct weir_cap_rec), 16,
						     SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	struct weir_cap_tap tap = { .gen = 7, .n = 1, .slot = { 2 }, .snap = 64 };
	struct weir_cap_rec rec[32];
	struct weir_cap_counters cc;
	struct rig r;
	const uint64_t now = rte_get_tsc_hz();
	unsigned int n, web = 0, queued = 0, bad = 0;
	int web_leaf;

	rules[0].match.port[WEIR_CLS_WAN] = (struct weir_cls_ports){ 80, 80 };
	if (cp == NULL || ring == NULL || rig_make(&r, &pc, "cap_tap") != 0) {
		CHECK(0, "rig");
		return;
	}
	web_leaf = weir_policy_class_find(r.p, 0, "web");
	tap.filter[0].match = WEIR_CAPF_CLASS;
	tap.filter[0].cls[0] = (uint32_t)web_leaf;
	tap.filter[0].cls[1] = WEIR_CBQ_NONE;
	r.w->conf.cap_ring = ring;
	r.w->conf.cap_pool = cp;
	weir_worker_cap_post(r.w, &tap);
	/* 4 frames to port 80 (web, a new flow: its class known only after
	 * classification), 4 to port 81 (bulk). */
	for (int i = 0; i < 4; i++) {
		feed(&r, tcp_frame(0, 1, 4000, 1, 80, ACK, (uint32_t)i * 100, 100), 0, now);
		feed(&r, tcp_frame(0, 1, 4001, 1, 81, ACK, (uint32_t)i * 100, 100), 0, now);
	}
	CHECK(weir_worker_cap_taken(r.w, &tap), "the worker took the tap");
	n = rte_ring_sc_dequeue_burst_elem(ring, rec, sizeof(rec[0]), RTE_DIM(rec), NULL);
	for (unsigned int i = 0; i < n; i++) {
		const uint8_t *b = rte_pktmbuf_mtod(rec[i].m, const uint8_t *);

		web += rec[i].cls == (uint32_t)web_leaf;
		queued += rec[i].verdict == WEIR_CAPV_QUEUED || rec[i].verdict == WEIR_CAPV_FORWARDED;
		/* The copy is cut at the snap length: its port read from the bytes. */
		bad += rec[i].mask != (1u << 2) || rec[i].gen != 7 || (b[36] << 8 | b[37]) != 80 ||
		       rec[i].orig_len != 14 + 40 + 100 || rte_pktmbuf_pkt_len(rec[i].m) != 64;
		rte_pktmbuf_free(rec[i].m);
	}
	CHECK(n == 4 && web == 4 && queued == 4 && bad == 0,
	      "the class's 4 frames, snapped, queued or sent (%u, %u, %u, %u)", n, web, queued, bad);
	/* The ring holds 15: a flood of the class is cut there, counted. */
	for (int i = 0; i < 20; i++)
		feed(&r, tcp_frame(0, 1, 4000, 1, 80, ACK, 1000 + (uint32_t)i * 100, 100), 0, now);
	weir_worker_cap_counters(r.w, &cc);
	CHECK(cc.copied == 4 + 15 && cc.lost_ring == 5 && cc.lost[2] == 5,
	      "ring full: counted lost (%" PRIu64 ", %" PRIu64 ")", cc.copied, cc.lost_ring);
	CHECK(r.w->svc.ctr.port[WEIR_PORT_LAN].rx_pkts == 28, "every frame was taken in");
	/* The flow's queue holds 16: of the 20, 12 were queued and 8 dropped; the
	 * ring took the first 15, so 3 of them carry the drop. */
	{
		unsigned int drops = 0, q = 0;

		n = rte_ring_sc_dequeue_burst_elem(ring, rec, sizeof(rec[0]), RTE_DIM(rec), NULL);
		for (unsigned int i = 0; i < n; i++) {
			drops += rec[i].verdict == WEIR_CAPV_DROP_QUEUE;
			q += rec[i].verdict == WEIR_CAPV_QUEUED;
			rte_pktmbuf_free(rec[i].m);
		}
		CHECK(n == 15 && q == 12 && drops == 3 && r.w->svc.ctr.port[WEIR_PORT_LAN].dropped == 8,
		      "verdicts of a full queue (%u, %u, %u, %" PRIu64 ")", n, q, drops,
		      r.w->svc.ctr.port[WEIR_PORT_LAN].dropped);
	}
	weir_worker_cap_post(r.w, NULL);
	feed(&r, tcp_frame(0, 1, 4000, 1, 80, ACK, 9000, 100), 0, now);
	CHECK(weir_worker_cap_taken(r.w, NULL) && rte_ring_count(ring) == 0, "tap removed");
	rig_free(&r);
	CHECK(rte_mempool_in_use_count(cp) == 0, "every copy back in its pool");
	rte_ring_free(ring);
	rte_mempool_free(cp);
}

int
main(int argc, char **argv)
{
	unit_eal_init(argv[0], "capture", "256");
	rig_mempool("cap_mbufs");
	test_parse();
	test_match();
	test_worker_tap();
	return unit_report();
}
