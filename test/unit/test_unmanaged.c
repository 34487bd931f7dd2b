/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests: frames weir does not manage as a connection (issue 16.3).
 * L2 control goes on ahead of shaping; IP fragments queue per host pair
 * (a pseudo-flow), in order, classified by their addresses; malformed
 * frames pass at worker.malformed_pps at most. Before, all of them shared
 * the default class's one unmanaged queue, and a burst of garbage or one
 * host's fragments pushed ARP and everyone else's fragments out of it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_mbuf.h>

#include "unit.h"
#include "rig.h"

static struct rte_mbuf *
raw_frame(uint16_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
	uint8_t *f;

	if (m == NULL) {
		printf("mempool exhausted\n");
		exit(2);
	}
	f = (uint8_t *)rte_pktmbuf_append(m, len);
	memset(f, 0, len);
	return m;
}

/* A 60-byte frame to `dst` (NULL: a unicast MAC) with ethertype (or 802.3
 * length) et, VLAN-tagged when tci != 0. */
static struct rte_mbuf *
l2_frame(const uint8_t *dst, uint16_t et, uint16_t tci)
{
	static const uint8_t ucast[6] = { 0x02, 0, 0, 0, 0, 1 };
	struct rte_mbuf *m = raw_frame(60);
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	unsigned int off = 12;

	memcpy(f, dst != NULL ? dst : ucast, 6);
	f[6] = 0x02;
	f[11] = 2;
	if (tci != 0) {
		f[12] = 0x81;
		f[14] = (uint8_t)(tci >> 8);
		f[15] = (uint8_t)tci;
		off = 16;
	}
	f[off] = (uint8_t)(et >> 8);
	f[off + 1] = (uint8_t)et;
	return m;
}

/* An IPv4 fragment from 10.0.0.<lan> to 192.0.2.<wan>: IP ID id, offset
 * off8 (8-byte units), MF as given, 64 bytes of payload. */
static struct rte_mbuf *
frag4(uint8_t lan, uint8_t wan, uint8_t proto, uint16_t id, uint16_t off8, int mf)
{
	const uint16_t len = 14 + 20 + 64;
	struct rte_mbuf *m = raw_frame(len);
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	uint16_t fo = (uint16_t)((mf ? 0x2000 : 0) | off8);

	f[12] = 0x08;
	f[14] = 0x45;
	f[16] = (uint8_t)((len - 14) >> 8);
	f[17] = (uint8_t)(len - 14);
	f[18] = (uint8_t)(id >> 8);
	f[19] = (uint8_t)id;
	f[20] = (uint8_t)(fo >> 8);
	f[21] = (uint8_t)fo;
	f[22] = 64;
	f[23] = proto;
	f[26] = 10;
	f[29] = lan;
	f[30] = 192;
	f[32] = 2;
	f[33] = wan;
	/* A first fragment's bytes where a TCP header would be: ports 9/9, SYN. */
	f[35] = 9;
	f[37] = 9;
	f[46] = 0x50;
	f[47] = SYN;
	return m;
}

static uint16_t
ip_id(const struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);

	return (uint16_t)(f[18] << 8 | f[19]);
}

static uint8_t
ip_src_last(const struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod(m, const uint8_t *)[29];
}

/* The flow entry a frame is keyed to (NULL if none). */
static struct weir_flow *
flow_of(struct rig *r, struct rte_mbuf *m, uint64_t now, struct weir_flow_key *k)
{
	struct weir_pkt p;
	struct weir_flow *f = NULL;
	const struct weir_flow_stats *st = weir_flow_table_stats(r->ft);
	uint64_t before = st->inserted;

	weir_parse(rte_pktmbuf_mtod(m, uint8_t *), m->data_len, &p);
	weir_flow_key_make(rte_pktmbuf_mtod(m, uint8_t *), &p, k);
	weir_flow_lookup_bulk(r->ft, k, 1, now, &f);
	if (st->inserted != before)
		return NULL;    /* it was not there: the lookup inserted it */
	return f;
}

/* Dequeue everything direction 0 lets go by `until`, into out[]. */
static unsigned int
drain_out(struct rig *r, uint64_t from, uint64_t until, struct rte_mbuf **out, unsigned int max)
{
	unsigned int n = 0;

	for (uint64_t t = from; t <= until && n < max; t += rte_get_tsc_hz() / 100) {
		r->w->next_tsc[WEIR_PORT_LAN] = 0;
		n += rig_dequeue(r, WEIR_PORT_LAN, t, out + n, (uint16_t)RTE_MIN(max - n, 32u));
	}
	return n;
}

/* ARP and the other L2 control frames go on at once, even when the default
 * class's unmanaged queue is full of other non-IP frames. */
static void
test_l2_control_ahead(void)
{
	static const uint8_t stp[6] = { 0x01, 0x80, 0xc2, 0x00, 0x00, 0x00 };
	static const uint8_t lacp[6] = { 0x01, 0x80, 0xc2, 0x00, 0x00, 0x02 };
	static const uint8_t r0e[6] = { 0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e };
	static const uint8_t r10[6] = { 0x01, 0x80, 0xc2, 0x00, 0x00, 0x10 };
	struct weir_policy_conf pc = {
		.tree = { { .rate = 100000 }, { .rate = 0 } },
	};
	const struct weir_port_counters *lan;
	struct rig r;
	const uint64_t now = rte_get_tsc_hz();
	uint32_t leaf;
	unsigned int went = 0;

	if (rig_make(&r, &pc, "um_l2") != 0) {
		CHECK(0, "rig");
		return;
	}
	lan = &r.w->svc.ctr.port[WEIR_PORT_LAN];
	leaf = r.p->tree[0].default_leaf;
	for (int i = 0; i < 40; i++)
		feed(&r, l2_frame(NULL, 0x88b5, 0), 0, now);
	CHECK(qlen(&r, 0, leaf) == 16 && lan->dropped == 24 && lan->non_ip == 40,
	      "other non-IP queues in the default class, dropped when full (%u, %" PRIu64 ")",
	      qlen(&r, 0, leaf), lan->dropped);
	went += feed(&r, l2_frame(NULL, 0x0806, 0), 0, now);          /* ARP */
	went += feed(&r, l2_frame(NULL, 0x8035, 0), 0, now);          /* RARP */
	went += feed(&r, l2_frame(r0e, 0x88cc, 0), 0, now);           /* LLDP */
	went += feed(&r, l2_frame(lacp, 0x8809, 0), 0, now);          /* LACP */
	went += feed(&r, l2_frame(NULL, 0x888e, 0), 0, now);          /* EAPOL */
	went += feed(&r, l2_frame(stp, 0x0026, 0), 0, now);           /* STP: 802.3 length */
	went += feed(&r, l2_frame(r0e, 0x88b5, 0), 0, now);           /* any type to the group */
	went += feed(&r, l2_frame(NULL, 0x0806, 100), 0, now);        /* tagged ARP */
	CHECK(went == 8 && lan->l2_control == 8 && lan->non_ip == 40 && qlen(&r, 0, leaf) == 16 &&
	      lan->dropped == 24 && lan->forwarded == 8,
	      "L2 control sent at once, ahead of a full queue (%u went, l2_control %" PRIu64 ")",
	      went, lan->l2_control);
	CHECK(feed(&r, l2_frame(r10, 0x88b5, 0), 0, now) == 0 && lan->non_ip == 41 &&
	      lan->dropped == 25, "01:80:c2:00:00:10 is not reserved: non-IP, queued (dropped)");
	/* Inbound is unshaped: ARP goes on as everything does. */
	CHECK(feed(&r, l2_frame(NULL, 0x0806, 0), 1, now) == 1 &&
	      r.w->svc.ctr.port[WEIR_PORT_WAN].l2_control == 1, "unshaped direction: counted too");
	CHECK(lan->rx_pkts == lan->managed + lan->flow_full + lan->non_ip + lan->l2_control +
	      lan->fragments + lan->malformed, "kinds add up to rx");
	CHECK(lan->rx_pkts == lan->forwarded + lan->tx_full + lan->dropped + lan->refused +
	      lan->malformed_dropped + qlen(&r, 0, leaf), "fates add up to rx");
	rig_free(&r);
}

/* Fragments: one queue per host pair (one host's flood fills its own
 * queue, not another's), in order, classified by the addresses (a rule
 * with ports never matches them), no TCP tracking. */
static void
test_fragments_per_host_pair(void)
{
	const struct weir_policy_class_conf out[] = {
		{ .name = "gold", .rate = 1000000 },
		{ .name = "voice", .rate = 1000000 },
		{ .name = "bulk", .rate = 1000000 },
	};
	struct weir_policy_rule_conf rules[2] = { { .class_name = "gold" },
						  { .class_name = "voice" } };
	struct weir_policy_conf pc = {
		.tree = { { .rate = 3000000, .n_classes = 3, .classes = out, .default_class = "bulk" },
			  { .rate = 0 } },
		.n_rules = 2, .rules = rules,
	};
	const uint16_t GOLD = 1, VOICE = 2, BULK = 3;
	const struct weir_port_counters *lan;
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), now = hz;
	struct rte_mbuf *o[128];
	struct weir_flow_key k1, k3;
	struct weir_flow *f1, *f3;
	struct rte_mbuf *probe;
	unsigned int n, in_order = 1, n1 = 0, n3 = 0;
	uint16_t last1 = 0, last3 = 0;

	rules[0].match.prefix[WEIR_CLS_LAN] = (struct weir_cls_prefix){
		.family = 4, .len = 32, .addr = { 10, 0, 0, 2 } };
	rules[1].match.port[WEIR_CLS_WAN] = (struct weir_cls_ports){ 1, 65535 };
	if (rig_make(&r, &pc, "um_frag") != 0) {
		CHECK(0, "rig");
		return;
	}
	lan = &r.w->svc.ctr.port[WEIR_PORT_LAN];
	/* Host 1 floods 40 UDP fragments (ids 1..40); host 3's three come after. */
	for (uint16_t i = 1; i <= 40; i++)
		feed(&r, frag4(1, 1, IPPROTO_UDP, i, 0, 1), 0, now);
	for (uint16_t i = 1; i <= 3; i++)
		feed(&r, frag4(3, 1, IPPROTO_UDP, (uint16_t)(100 + i), (uint16_t)(i - 1) * 8, i < 3), 0, now);
	CHECK(lan->fragments == 43 && lan->managed == 0 && lan->dropped == 24,
	      "43 fragments counted as fragments, host 1's queue full (dropped %" PRIu64 ")",
	      lan->dropped);
	probe = frag4(1, 1, IPPROTO_UDP, 1, 0, 1);
	f1 = flow_of(&r, probe, now, &k1);
	rte_pktmbuf_free(probe);
	probe = frag4(3, 1, IPPROTO_UDP, 1, 0, 1);
	f3 = flow_of(&r, probe, now, &k3);
	rte_pktmbuf_free(probe);
	CHECK(f1 != NULL && f3 != NULL && f1 != f3 && k1.port_lo == 0 && k1.port_hi == 0 &&
	      k1.proto == IPPROTO_UDP, "one pseudo-flow per host pair, ports 0");
	CHECK(f1 != NULL && f3 != NULL && f1->pkts[0] == 40 && f3->pkts[0] == 3 &&
	      f1->state == WEIR_FS_NONE,
	      "pseudo-flows count packets (%u, %u)", f1 ? f1->pkts[0] : 0, f3 ? f3->pkts[0] : 0);
	CHECK(f3 != NULL && weir_drr_qlen(weir_cbq_qtab(r.w->svc.shaper[0]), weir_flow_slot(r.ft, f3)) == 3 &&
	      qlen(&r, 0, BULK) == 19 && qlen(&r, 0, VOICE) == 0,
	      "host 3's fragments all queued, in bulk: the port rule does not match them (%u)",
	      qlen(&r, 0, BULK));
	/* Host 2 is gold by its address. */
	feed(&r, frag4(2, 1, IPPROTO_UDP, 7, 0, 1), 0, now);
	CHECK(qlen(&r, 0, GOLD) == 1, "classified by address");
	/* A whole UDP packet with ports of host 1 is another flow: voice. */
	{
		struct rte_mbuf *m = frag4(1, 1, IPPROTO_UDP, 1000, 0, 0);
		uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);

		f[38] = 0;
		f[39] = 64;     /* UDP length: the whole IP payload */
		feed(&r, m, 0, now);
		CHECK(qlen(&r, 0, VOICE) == 1 && lan->managed == 1, "a whole datagram: its own flow");
	}
	/* A TCP fragment that looks like a SYN: no TCP state is tracked. */
	feed(&r, frag4(4, 1, IPPROTO_TCP, 5, 0, 1), 0, now);
	probe = frag4(4, 1, IPPROTO_TCP, 5, 0, 1);
	f1 = flow_of(&r, probe, now, &k1);
	rte_pktmbuf_free(probe);
	CHECK(f1 != NULL && f1->state == WEIR_FS_NONE && f1->pkts[0] == 1 && lan->managed == 1,
	      "TCP fragments: a pseudo-flow without TCP state");
	/* Everything comes out, each host's fragments in order. */
	n = drain_out(&r, now, now + 3 * hz, o, RTE_DIM(o));
	for (unsigned int i = 0; i < n; i++) {
		uint8_t src = ip_src_last(o[i]);

		if (src == 1 && ip_id(o[i]) <= 40) {
			in_order &= ip_id(o[i]) > last1;
			last1 = ip_id(o[i]);
			n1++;
		} else if (src == 3) {
			in_order &= ip_id(o[i]) > last3;
			last3 = ip_id(o[i]);
			n3++;
		}
	}
	rte_pktmbuf_free_bulk(o, n);
	CHECK(n == 16 + 3 + 1 + 1 + 1 && n1 == 16 && n3 == 3 && in_order,
	      "all sent, each host pair's fragments in order (%u: %u + %u)", n, n1, n3);
	CHECK(lan->rx_pkts == lan->forwarded + lan->tx_full + lan->dropped + lan->refused +
	      lan->malformed_dropped, "fates add up to rx once drained");
	rig_free(&r);
}

/* Malformed frames: at most malformed_pps a second (a bucket of one
 * second's worth), the rest dropped and counted; 0 = no limit. */
static void
test_malformed_rate(void)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 100000000 }, { .rate = 0 } },
	};
	const struct weir_port_counters *lan;
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), now = 10 * hz;
	struct rte_mbuf *o[64];
	unsigned int n;
	uint32_t leaf;

	for (int limited = 1; limited >= 0; limited--) {
		rig_malformed_pps = limited ? 10 : 0;
		n = (unsigned int)rig_make(&r, &pc, limited ? "um_mal" : "um_mal0");
		rig_malformed_pps = 0;
		if (n != 0) {
			CHECK(0, "rig");
			return;
		}
		lan = &r.w->svc.ctr.port[WEIR_PORT_LAN];
		leaf = r.p->tree[0].default_leaf;
		for (int i = 0; i < 14; i++) {
			struct rte_mbuf *m = frag4(1, 1, IPPROTO_UDP, 1, 0, 0);

			rte_pktmbuf_mtod(m, uint8_t *)[14] = 0x44;      /* IHL 4 */
			feed(&r, m, 0, now);
		}
		if (limited) {
			CHECK(lan->malformed == 14 && lan->malformed_dropped == 4 && qlen(&r, 0, leaf) == 10,
			      "10 a second: 10 queued, 4 dropped (%" PRIu64 ", %u)",
			      lan->malformed_dropped, qlen(&r, 0, leaf));
			/* Half a second later: five more tokens. */
			for (int i = 0; i < 8; i++) {
				struct rte_mbuf *m = raw_frame(8);       /* shorter than Ethernet */

				feed(&r, m, 0, now + hz / 2);
			}
			CHECK(lan->malformed == 22 && lan->malformed_dropped == 7 &&
			      lan->malformed_by[WEIR_MAL_TRUNC_L2] == 8,
			      "refilled at the rate (%" PRIu64 ")", lan->malformed_dropped);
			/* Inbound is unshaped: transparent, nothing limited. */
			n = 0;
			for (int i = 0; i < 20; i++)
				n += feed(&r, raw_frame(8), 1, now + hz / 2);
			CHECK(n == 20 && r.w->svc.ctr.port[WEIR_PORT_WAN].malformed_dropped == 0,
			      "an unshaped direction passes every malformed frame (%u)", n);
		} else {
			CHECK(lan->malformed == 14 && lan->malformed_dropped == 0 && qlen(&r, 0, leaf) == 14,
			      "0 = no limit");
		}
		n = drain_out(&r, now + hz / 2, now + hz, o, RTE_DIM(o));
		rte_pktmbuf_free_bulk(o, n);
		CHECK(lan->rx_pkts == lan->forwarded + lan->tx_full + lan->dropped + lan->refused +
		      lan->malformed_dropped, "fates add up to rx (%u sent)", n);
		rig_free(&r);
	}
}

/* An IPv4 frame 10.0.0.1 -> 10.0.0.2 of protocol proto with TTL ttl; TCP
 * and UDP get ports sport/dport (TCP: an ACK, no options), 20 bytes of
 * payload: a frame the parser takes as manageable. */
static struct rte_mbuf *
ip4_ttl(uint8_t proto, uint8_t ttl, uint16_t sport, uint16_t dport)
{
	const uint16_t l4 = proto == 6 ? 20 : proto == 17 ? 8 : 0;
	const uint16_t len = (uint16_t)(14 + 20 + l4 + 20);
	struct rte_mbuf *m = raw_frame(len);
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);

	f[0] = 0x02;
	f[5] = 2;
	f[6] = 0x02;
	f[11] = 1;
	f[12] = 0x08;
	f[14] = 0x45;
	f[16] = (uint8_t)((len - 14) >> 8);
	f[17] = (uint8_t)(len - 14);
	f[22] = ttl;
	f[23] = proto;
	f[26] = 10;
	f[29] = 1;
	f[30] = 10;
	f[33] = 2;
	if (l4 != 0) {
		f[34] = (uint8_t)(sport >> 8);
		f[35] = (uint8_t)sport;
		f[36] = (uint8_t)(dport >> 8);
		f[37] = (uint8_t)dport;
	}
	if (proto == 6) {
		f[46] = 0x50;
		f[47] = ACK;
	} else if (proto == 17) {
		f[38] = 0;
		f[39] = 8 + 20;
	}
	return m;
}

/* The same in IPv6, fe80::1 -> ff02::5 with hop limit hl. */
static struct rte_mbuf *
ip6_hl(uint8_t proto, uint8_t hl, uint16_t sport, uint16_t dport)
{
	const uint16_t l4 = proto == 6 ? 20 : proto == 17 ? 8 : 0;
	const uint16_t plen = (uint16_t)(l4 + 20);
	struct rte_mbuf *m = raw_frame((uint16_t)(14 + 40 + plen));
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	uint8_t *ip = f + 14, *t = ip + 40;

	f[0] = 0x33;
	f[1] = 0x33;
	f[5] = 5;
	f[6] = 0x02;
	f[11] = 1;
	f[12] = 0x86;
	f[13] = 0xdd;
	ip[0] = 0x60;
	ip[4] = (uint8_t)(plen >> 8);
	ip[5] = (uint8_t)plen;
	ip[6] = proto;
	ip[7] = hl;
	ip[8] = 0xfe;
	ip[9] = 0x80;
	ip[23] = 1;
	ip[24] = 0xff;
	ip[25] = 0x02;
	ip[39] = 5;
	if (l4 != 0) {
		t[0] = (uint8_t)(sport >> 8);
		t[1] = (uint8_t)sport;
		t[2] = (uint8_t)(dport >> 8);
		t[3] = (uint8_t)dport;
	}
	if (proto == 6) {
		t[12] = 0x50;
		t[13] = ACK;
	} else if (proto == 17) {
		t[5] = 8 + 20;
	}
	return m;
}

/* Routers' link-local control (lib/net/l3ctl.h) goes on at once, ahead of a
 * full default class, counted; the same protocols with a routed TTL are
 * ordinary traffic; a budget bounds it in a shaped direction; off, nothing
 * is control. */
static void
test_l3_control(void)
{
	static const uint8_t isis[6] = { 0x01, 0x80, 0xc2, 0x00, 0x00, 0x14 };
	struct weir_policy_conf pc = {
		.tree = { { .rate = 100000 }, { .rate = 0 } },
	};
	const struct weir_port_counters *lan;
	struct rig r;
	const uint64_t now = rte_get_tsc_hz();
	uint16_t leaf;
	unsigned int went = 0;

	rig_l3_control = true;
	rig_l3_control_pps = 10;
	if (rig_make(&r, &pc, "um_l3") != 0) {
		CHECK(0, "rig");
		return;
	}
	lan = &r.w->svc.ctr.port[WEIR_PORT_LAN];
	leaf = r.p->tree[0].default_leaf;
	for (int i = 0; i < 20; i++)
		feed(&r, l2_frame(NULL, 0x88b5, 0), 0, now);
	went += feed(&r, ip4_ttl(89, 1, 0, 0), 0, now);                /* OSPF hello */
	went += feed(&r, ip4_ttl(17, 255, 49152, 3784), 0, now);       /* BFD */
	went += feed(&r, ip4_ttl(17, 254, 49152, 3785), 0, now);       /* BFD echo, back */
	went += feed(&r, ip4_ttl(6, 1, 40000, 179), 0, now);           /* eBGP */
	went += feed(&r, ip4_ttl(6, 255, 179, 40000), 0, now);         /* GTSM BGP */
	went += feed(&r, ip4_ttl(112, 255, 0, 0), 0, now);             /* VRRP */
	went += feed(&r, l2_frame(isis, 0x05dc, 0), 0, now);           /* IS-IS: 802.3 */
	CHECK(went == 7 && lan->l3_control == 7 && lan->forwarded == 7 && lan->non_ip == 20 &&
	      qlen(&r, 0, leaf) == 16,
	      "L3 control sent at once, ahead of a full default class (%u went, l3_control %"
	      PRIu64 ")", went, lan->l3_control);
	CHECK(lan->managed == 0 && weir_flow_table_stats(r.ft)->inserted == 0,
	      "L3 control is not tracked as a flow");
	went = 0;
	went += feed(&r, ip4_ttl(6, 64, 40001, 179), 0, now);          /* a routed TTL */
	went += feed(&r, ip4_ttl(17, 63, 40001, 3784), 0, now);
	went += feed(&r, ip4_ttl(89, 2, 0, 0), 0, now);
	went += feed(&r, ip4_ttl(17, 255, 40001, 53), 0, now);         /* not a control port */
	CHECK(went == 0 && lan->l3_control == 7 && lan->managed == 4,
	      "the same ports with a routed TTL, and other ports, are ordinary traffic (%u went, "
	      "managed %" PRIu64 ")", went, lan->managed);
	/* IPv6: OSPFv3 hellos (hop limit 1), BFD (255); BGP with a routed hop limit is not. */
	went = feed(&r, ip6_hl(89, 1, 0, 0), 0, now) + feed(&r, ip6_hl(17, 255, 49153, 3784), 0, now);
	CHECK(went == 2 && lan->l3_control == 9, "IPv6 control by its hop limit (%u went)", went);
	CHECK(feed(&r, ip6_hl(6, 64, 40002, 179), 0, now) == 0 && lan->l3_control == 9 &&
	      lan->managed == 5, "IPv6 BGP with a routed hop limit is ordinary traffic");
	/* The budget: 10 a second, 9 taken; within the same instant 1 more. */
	went = 0;
	for (int i = 0; i < 6; i++)
		went += feed(&r, ip4_ttl(17, 255, 49152, 3784), 0, now);
	CHECK(went == 1 && lan->l3_control == 15 && lan->l3_control_dropped == 5,
	      "over worker.l3_control_pps: dropped, counted (%u went, %" PRIu64 " dropped)", went,
	      lan->l3_control_dropped);
	CHECK(feed(&r, ip4_ttl(17, 255, 49152, 3784), 0, now + rte_get_tsc_hz()) == 1,
	      "a second later the budget is back");
	/* Inbound is unshaped: no budget, counted too. */
	went = 0;
	for (int i = 0; i < 20; i++)
		went += feed(&r, ip4_ttl(89, 1, 0, 0), 1, now);
	CHECK(went == 20 && r.w->svc.ctr.port[WEIR_PORT_WAN].l3_control == 20 &&
	      r.w->svc.ctr.port[WEIR_PORT_WAN].l3_control_dropped == 0, "unshaped direction: no budget");
	CHECK(lan->rx_pkts == lan->managed + lan->flow_full + lan->non_ip + lan->l2_control +
	      lan->l3_control + lan->fragments + lan->malformed, "kinds add up to rx");
	rig_free(&r);

	rig_l3_control = false;
	if (rig_make(&r, &pc, "um_l3off") != 0) {
		CHECK(0, "rig");
		return;
	}
	lan = &r.w->svc.ctr.port[WEIR_PORT_LAN];
	went = feed(&r, ip4_ttl(89, 1, 0, 0), 0, now) + feed(&r, ip4_ttl(6, 1, 40000, 179), 0, now) +
	       feed(&r, l2_frame(isis, 0x05dc, 0), 0, now);
	CHECK(went == 0 && lan->l3_control == 0 && lan->managed == 2 && lan->non_ip == 1,
	      "worker.l3_control = false: ordinary traffic (%u went)", went);
	rig_free(&r);
	rig_l3_control_pps = 0;
}

int
main(int argc, char **argv)
{
	RTE_SET_USED(argc);
	unit_eal_init(argv[0], "unmanaged", "256");
	rig_mempool("um_mp");
	test_l2_control_ahead();
	test_fragments_per_host_pair();
	test_malformed_rate();
	test_l3_control();
	CHECK(rte_mempool_in_use_count(mp) == 0, "no mbuf leaked (%u in use)",
	      rte_mempool_in_use_count(mp));
	return unit_report();
}
