/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for the flow table (lib/flow/flow.c) on a real rte_hash under EAL.
 *
 * Frames are built by hand (the headers key_make reads: addresses at
 * l3_off + saddr_off) with the weir_pkt fields parse.h documents, so the test
 * does not depend on the parser. Time is a fake TSC passed as an argument.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_eal.h>
#include <rte_cycles.h>
#include <rte_malloc.h>

#include "synth.h"
#include "unit.h"
#include "flow.h"


/* Fake clock: 1000 ticks a second keeps the arithmetic readable. */
#define HZ 1000ull

static const struct weir_flow_timeouts TIMEOUTS = {
	.tcp_syn = 5, .tcp_established = 100, .tcp_closing = 10,
	.tcp_closed = 2, .udp = 30, .other = 15,
};

static struct synth
tcp4(const char *src, uint16_t sport, const char *dst, uint16_t dport, uint8_t flags)
{
	return (struct synth){ .fam = 4, .src = src, .dst = dst, .sport = sport, .dport = dport,
			    .proto = IPPROTO_TCP, .tcp_flags = flags, .ws = -1 };
}

static int
key_of(const struct synth *d, struct weir_flow_key *k)
{
	uint8_t frame[128];
	struct weir_pkt p;

	synth_build(d, frame, &p);
	return weir_flow_key_make(frame, &p, k);
}

static struct weir_flow *
lookup1(struct weir_flow_table *t, const struct synth *d, uint64_t now)
{
	struct weir_flow_key k;
	struct weir_flow *f = NULL;

	key_of(d, &k);
	weir_flow_lookup_bulk(t, &k, 1, now, &f);
	return f;
}

/* Look up and account one packet, as the worker does. */
static struct weir_flow *
pkt(struct weir_flow_table *t, const struct synth *d, enum weir_dir dir, uint64_t now)
{
	uint8_t frame[128];
	struct weir_pkt p;
	struct weir_flow_key k;
	struct weir_flow *f = NULL;

	synth_build(d, frame, &p);
	weir_flow_key_make(frame, &p, &k);
	weir_flow_lookup_bulk(t, &k, 1, now, &f);
	if (f != NULL)
		weir_flow_track(f, &p, dir, 64u + d->plen, now);
	return f;
}

static struct weir_flow_table *
table(const char *name, uint32_t capacity)
{
	struct weir_flow_table_conf c = {
		.name = name, .capacity = capacity, .socket_id = SOCKET_ID_ANY,
		.tsc_hz = HZ, .timeouts = TIMEOUTS,
	};
	struct weir_flow_table *t = weir_flow_table_create(&c);

	if (t == NULL) {
		fprintf(stderr, "cannot create flow table %s (%u)\n", name, capacity);
		exit(2);
	}
	return t;
}

static int
key_eq(const struct weir_flow_key *a, const struct weir_flow_key *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

static void
test_key_symmetry(void)
{
	struct weir_flow_key a, b;
	struct synth d = tcp4("10.0.0.2", 40000, "192.0.2.9", 443, WEIR_TCP_SYN);
	int lo_a = key_of(&d, &a);
	struct synth r = synth_reverse(d);
	int lo_b = key_of(&r, &b);
	static const uint8_t zero[12];

	CHECK(key_eq(&a, &b), "IPv4 TCP both directions give one key");
	CHECK(lo_a == 1 && lo_b == 0, "lo side: 10.0.0.2 is lower (got %d %d)", lo_a, lo_b);
	CHECK(memcmp(a.addr_lo + 4, zero, 12) == 0 && memcmp(a.addr_hi + 4, zero, 12) == 0,
	      "IPv4 address tail zero");
	CHECK(a.addr_lo[0] == 10 && a.addr_hi[0] == 192, "IPv4 address in the first bytes");
	CHECK(a.port_lo == 40000 && a.port_hi == 443, "ports follow their address");
	CHECK(a.proto == IPPROTO_TCP && a.family == 4 && a.vlan == 0, "proto/family/vlan");

	/* Same address both ends: the port decides the order. */
	d = tcp4("10.0.0.1", 5000, "10.0.0.1", 80, 0);
	r = synth_reverse(d);
	lo_a = key_of(&d, &a);
	lo_b = key_of(&r, &b);
	CHECK(key_eq(&a, &b) && a.port_lo == 80 && lo_a == 0 && lo_b == 1, "equal addresses order by port");

	/* IPv6, addresses differing only in the last byte. */
	d = (struct synth){ .fam = 6, .src = "2001:db8::1:ff", .dst = "2001:db8::1:2", .sport = 53,
			 .dport = 33333, .proto = IPPROTO_UDP, .ws = -1 };
	r = synth_reverse(d);
	lo_a = key_of(&d, &a);
	lo_b = key_of(&r, &b);
	CHECK(key_eq(&a, &b), "IPv6 UDP both directions give one key");
	CHECK(lo_a == 0 && lo_b == 1 && a.addr_lo[15] == 2 && a.port_lo == 33333, "IPv6 order");
	CHECK(a.family == 6 && a.proto == IPPROTO_UDP, "IPv6 family");

	/* Different ports: different flows. */
	d = tcp4("10.0.0.2", 40000, "192.0.2.9", 443, 0);
	key_of(&d, &a);
	d.sport = 40001;
	key_of(&d, &b);
	CHECK(!key_eq(&a, &b), "another source port is another flow");
}

static void
test_key_icmp(void)
{
	struct weir_flow_key a, b;
	struct synth req = { .fam = 4, .src = "10.0.0.2", .dst = "8.8.8.8", .proto = IPPROTO_ICMP,
			  .sport = 8 << 8, .dport = 0x1234, .ws = -1 };
	struct synth rep = { .fam = 4, .src = "8.8.8.8", .dst = "10.0.0.2", .proto = IPPROTO_ICMP,
			  .sport = 0 << 8, .dport = 0x1234, .ws = -1 };

	key_of(&req, &a);
	key_of(&rep, &b);
	CHECK(key_eq(&a, &b), "ICMP echo request and reply: one key");
	CHECK(a.port_lo == 0x1234 && a.port_hi == 0x1234, "identifier on both sides (%x %x)",
	      a.port_lo, a.port_hi);
	rep.dport = 0x1235;
	key_of(&rep, &b);
	CHECK(!key_eq(&a, &b), "another identifier is another flow");

	struct synth unreach = { .fam = 4, .src = "192.0.2.1", .dst = "10.0.0.2", .proto = IPPROTO_ICMP,
			      .sport = 3 << 8 | 1, .dport = 0x5555, .ws = -1 };
	key_of(&unreach, &b);
	CHECK(b.port_lo == 0 && b.port_hi == 0, "non-echo ICMP: ports zero");

	struct synth req6 = { .fam = 6, .src = "2001:db8::2", .dst = "2001:db8::1", .proto = IPPROTO_ICMPV6,
			   .sport = 128 << 8, .dport = 7, .ws = -1 };
	struct synth rep6 = { .fam = 6, .src = "2001:db8::1", .dst = "2001:db8::2", .proto = IPPROTO_ICMPV6,
			   .sport = 129 << 8, .dport = 7, .ws = -1 };
	key_of(&req6, &a);
	key_of(&rep6, &b);
	CHECK(key_eq(&a, &b) && a.port_lo == 7 && a.port_hi == 7, "ICMPv6 echo: one key");
	struct synth ns6 = rep6;
	ns6.sport = 135 << 8;   /* neighbour solicitation */
	key_of(&ns6, &b);
	CHECK(b.port_lo == 0 && b.port_hi == 0, "ICMPv6 non-echo: ports zero");
}

static void
test_key_vlan(void)
{
	struct weir_flow_table *t = table("ft_vlan", 64);
	struct weir_flow_key a, b;
	struct synth d = tcp4("10.0.0.2", 40000, "192.0.2.9", 443, 0);

	d.tagged = 1;
	d.tci = 0xe000 | 100;   /* PCP 7, VID 100 */
	key_of(&d, &a);
	CHECK(a.vlan == 100, "VLAN ID without priority bits (got %u)", a.vlan);
	struct weir_flow *f100 = lookup1(t, &d, 1);
	d.tci = 200;
	key_of(&d, &b);
	struct weir_flow *f200 = lookup1(t, &d, 1);
	CHECK(!key_eq(&a, &b), "different VLANs: different keys");
	CHECK(f100 != NULL && f200 != NULL && f100 != f200, "different VLANs: different entries");
	d.tci = 0x2000 | 100;   /* other priority, same VLAN */
	struct synth r = synth_reverse(d);
	CHECK(lookup1(t, &r, 2) == f100, "reverse direction on VLAN 100 finds the same entry");
	CHECK(weir_flow_table_stats(t)->inserted == 2, "two flows inserted");
	weir_flow_table_free(t);
}

static void
test_bidir_lookup(void)
{
	struct weir_flow_table *t = table("ft_bidir", 64);
	struct synth d = tcp4("10.0.0.2", 40000, "192.0.2.9", 443, 0);
	struct synth r = synth_reverse(d);
	struct weir_flow *f1 = lookup1(t, &d, 10);
	struct weir_flow *f2 = lookup1(t, &r, 20);

	CHECK(f1 != NULL && f1 == f2, "IPv4: both directions map to one entry");
	CHECK(f1 != NULL && f1->first_tsc == 10, "first_tsc set at insert");

	struct synth d6 = { .fam = 6, .src = "2001:db8::10", .dst = "2001:db8:1::1", .sport = 1,
			 .dport = 2, .proto = IPPROTO_TCP, .ws = -1 };
	struct synth r6 = synth_reverse(d6);
	f1 = lookup1(t, &d6, 30);
	f2 = lookup1(t, &r6, 30);
	CHECK(f1 != NULL && f1 == f2, "IPv6: both directions map to one entry");

	const struct weir_flow_stats *s = weir_flow_table_stats(t);
	CHECK(s->inserted == 2 && s->active == 2 && s->lookups == 4 && s->full == 0,
	      "stats ins %lu active %u lookups %lu", (unsigned long)s->inserted, s->active,
	      (unsigned long)s->lookups);
	weir_flow_table_free(t);
}

static void
test_tcp_handshake(void)
{
	struct weir_flow_table *t = table("ft_hs", 64);
	struct synth syn = tcp4("10.0.0.2", 40000, "192.0.2.9", 443, WEIR_TCP_SYN);
	struct synth synack = synth_reverse(syn);
	struct synth ack = syn;

	syn.ws = 7;
	syn.mss = 1460;
	synack.tcp_flags = WEIR_TCP_SYN | WEIR_TCP_ACK;
	synack.ws = 9;
	synack.mss = 1400;
	ack.tcp_flags = WEIR_TCP_ACK;

	struct weir_flow *f = pkt(t, &syn, WEIR_DIR_OUT, 100);
	CHECK(f != NULL && f->state == WEIR_FS_SYN_SENT, "SYN -> syn_sent");
	if (f == NULL)
		goto out;
	CHECK(f->wscale[WEIR_DIR_OUT] == 7 && f->mss[WEIR_DIR_OUT] == 1460, "SYN options recorded");
	CHECK(f->wscale[WEIR_DIR_IN] == WEIR_WSCALE_NONE, "other side unknown until its SYN");
	pkt(t, &syn, WEIR_DIR_OUT, 150);        /* retransmission */
	CHECK(f->state == WEIR_FS_SYN_SENT, "retransmitted SYN stays syn_sent");
	CHECK(pkt(t, &synack, WEIR_DIR_IN, 200) == f && f->state == WEIR_FS_SYN_RECV, "SYN+ACK -> syn_recv");
	CHECK(f->wscale[WEIR_DIR_IN] == 9 && f->mss[WEIR_DIR_IN] == 1400, "SYN+ACK options recorded");
	pkt(t, &ack, WEIR_DIR_OUT, 300);
	CHECK(f->state == WEIR_FS_ESTABLISHED, "ACK -> established (%s)", weir_flow_state_name(f->state));
	ack.plen = 1000;
	pkt(t, &ack, WEIR_DIR_OUT, 400);
	CHECK(f->pkts[WEIR_DIR_OUT] == 4 && f->pkts[WEIR_DIR_IN] == 1, "pkts per dir %u %u",
	      f->pkts[WEIR_DIR_OUT], f->pkts[WEIR_DIR_IN]);
	CHECK(f->bytes[WEIR_DIR_OUT] == 64 * 4 + 1000 && f->bytes[WEIR_DIR_IN] == 64, "bytes per dir");
	CHECK((f->flags & (WEIR_FF_SEEN_OUT | WEIR_FF_SEEN_IN)) == (WEIR_FF_SEEN_OUT | WEIR_FF_SEEN_IN),
	      "both directions seen");
	CHECK(!(f->flags & WEIR_FF_REPLIED), "REPLIED is for non-TCP");
	CHECK(!(f->flags & WEIR_FF_MIDSTREAM), "opened by its SYN: not mid-stream");
	CHECK(f->first_tsc == 100 && f->last_tsc == 400, "timestamps %lu %lu",
	      (unsigned long)f->first_tsc, (unsigned long)f->last_tsc);
out:
	weir_flow_table_free(t);
}

/* A SYN+ACK that opens an entry: the SYN went to another table (another
 * worker): flagged, so every frame of the flow counts as flow_split. */
static void
test_tcp_synack_first(void)
{
	struct weir_flow_table *t = table("ft_sa", 64);
	struct synth sa = tcp4("192.0.2.9", 443, "10.0.0.2", 40000, WEIR_TCP_SYN | WEIR_TCP_ACK);
	struct weir_flow *f = pkt(t, &sa, WEIR_DIR_IN, 1);

	CHECK(f != NULL && f->state == WEIR_FS_SYN_RECV, "SYN+ACK first: syn_recv");
	CHECK(f != NULL && (f->flags & WEIR_FF_MIDSTREAM), "SYN+ACK first: flagged");
	weir_flow_table_free(t);
}

static void
test_tcp_midstream_and_fin(void)
{
	struct weir_flow_table *t = table("ft_fin", 64);
	struct synth out = tcp4("10.0.0.2", 40000, "192.0.2.9", 443, WEIR_TCP_ACK);
	struct synth in = synth_reverse(out);

	out.plen = 100;
	struct weir_flow *f = pkt(t, &out, WEIR_DIR_OUT, 1);
	CHECK(f != NULL && f->state == WEIR_FS_ESTABLISHED, "non-SYN first packet: established");
	if (f == NULL)
		goto out;
	CHECK(f->wscale[0] == WEIR_WSCALE_NONE && f->wscale[1] == WEIR_WSCALE_NONE,
	      "mid-stream: window scale unknown");
	CHECK(f->flags & WEIR_FF_MIDSTREAM, "mid-stream: flagged (its opening was not seen)");

	/* LAN side closes: FIN at seq 1000 with 10 bytes -> FIN occupies 1010. */
	out.tcp_flags = WEIR_TCP_FIN | WEIR_TCP_ACK;
	out.seq = 1000;
	out.plen = 10;
	out.ack = 5000;
	pkt(t, &out, WEIR_DIR_OUT, 2);
	CHECK(f->state == WEIR_FS_FIN_WAIT && (f->flags & WEIR_FF_FIN_OUT), "FIN -> fin_wait");
	CHECK(f->fin_seq[WEIR_DIR_OUT] == 1011, "fin_seq = seq + len + 1 (got %u)", f->fin_seq[WEIR_DIR_OUT]);
	pkt(t, &out, WEIR_DIR_OUT, 3);          /* retransmitted FIN */
	CHECK(f->fin_seq[WEIR_DIR_OUT] == 1011 && f->state == WEIR_FS_FIN_WAIT, "FIN retransmit");

	/* WAN side: an ACK short of the FIN, then its own FIN. */
	in.tcp_flags = WEIR_TCP_ACK;
	in.seq = 5000;
	in.ack = 1010;
	pkt(t, &in, WEIR_DIR_IN, 4);
	CHECK(!(f->flags & WEIR_FF_FIN_OUT_ACKED), "ACK below the FIN does not ack it");
	in.tcp_flags = WEIR_TCP_FIN | WEIR_TCP_ACK;
	pkt(t, &in, WEIR_DIR_IN, 5);
	CHECK(f->state == WEIR_FS_CLOSING && (f->flags & WEIR_FF_FIN_IN), "second FIN -> closing");
	CHECK(f->fin_seq[WEIR_DIR_IN] == 5001, "WAN fin_seq %u", f->fin_seq[WEIR_DIR_IN]);

	/* LAN acks the WAN FIN: one FIN still unacked, not closed yet. */
	out.tcp_flags = WEIR_TCP_ACK;
	out.seq = 1011;
	out.plen = 0;
	out.ack = 5001;
	pkt(t, &out, WEIR_DIR_OUT, 6);
	CHECK(f->state == WEIR_FS_CLOSING && (f->flags & WEIR_FF_FIN_IN_ACKED), "one FIN acked: closing");
	in.tcp_flags = WEIR_TCP_ACK;
	in.seq = 5001;
	in.ack = 1011;
	pkt(t, &in, WEIR_DIR_IN, 7);
	CHECK(f->state == WEIR_FS_CLOSED, "both FINs acked -> closed (%s)", weir_flow_state_name(f->state));

	/* The usual close: FIN, FIN+ACK acking it, last ACK. Sequence numbers
	 * near the wrap check the serial arithmetic. */
	struct synth o2 = tcp4("10.0.0.3", 1111, "192.0.2.9", 443, WEIR_TCP_ACK);
	struct synth i2 = synth_reverse(o2);
	f = pkt(t, &o2, WEIR_DIR_OUT, 10);
	o2.tcp_flags = WEIR_TCP_FIN | WEIR_TCP_ACK;
	o2.seq = 0xfffffff0u;
	o2.plen = 0x20;
	pkt(t, &o2, WEIR_DIR_OUT, 11);
	CHECK(f->fin_seq[WEIR_DIR_OUT] == 0x11, "fin_seq wraps (got %#x)", f->fin_seq[WEIR_DIR_OUT]);
	i2.tcp_flags = WEIR_TCP_ACK;
	i2.seq = 77;
	i2.ack = 0xfffffff8u;   /* numerically above 0x11, but before it in sequence space */
	pkt(t, &i2, WEIR_DIR_IN, 12);
	CHECK(!(f->flags & WEIR_FF_FIN_OUT_ACKED), "ACK before the wrapped FIN does not ack it");
	i2.tcp_flags = WEIR_TCP_FIN | WEIR_TCP_ACK;
	i2.ack = 0x11;
	pkt(t, &i2, WEIR_DIR_IN, 12);
	CHECK(f->state == WEIR_FS_CLOSING, "FIN+ACK -> closing (%s)", weir_flow_state_name(f->state));
	o2.tcp_flags = WEIR_TCP_ACK;
	o2.ack = 78;
	pkt(t, &o2, WEIR_DIR_OUT, 13);
	CHECK(f->state == WEIR_FS_CLOSED, "last ACK -> closed (%s)", weir_flow_state_name(f->state));
out:
	weir_flow_table_free(t);
}

static void
test_tcp_rst_and_reuse(void)
{
	struct weir_flow_table *t = table("ft_rst", 64);
	struct synth out = tcp4("10.0.0.2", 40000, "192.0.2.9", 443, WEIR_TCP_ACK);
	struct synth in = synth_reverse(out);

	out.plen = 500;
	struct weir_flow *f = pkt(t, &out, WEIR_DIR_OUT, 1);
	pkt(t, &in, WEIR_DIR_IN, 2);
	in.tcp_flags = WEIR_TCP_RST;
	pkt(t, &in, WEIR_DIR_IN, 3);
	CHECK(f != NULL && f->state == WEIR_FS_CLOSED, "RST -> closed");
	if (f == NULL)
		goto out;
	pkt(t, &out, WEIR_DIR_OUT, 4);
	CHECK(f->state == WEIR_FS_CLOSED, "late segment keeps closed");
	CHECK(f->pkts[WEIR_DIR_OUT] == 2, "late segment still counted");

	struct synth syn = tcp4("10.0.0.2", 40000, "192.0.2.9", 443, WEIR_TCP_SYN);
	syn.ws = 3;
	CHECK(pkt(t, &syn, WEIR_DIR_OUT, 50) == f, "same 4-tuple, same entry");
	CHECK(f->state == WEIR_FS_SYN_SENT, "SYN on closed restarts (%s)", weir_flow_state_name(f->state));
	CHECK(f->first_tsc == 50 && f->pkts[WEIR_DIR_OUT] == 1 && f->pkts[WEIR_DIR_IN] == 0 &&
	      f->bytes[WEIR_DIR_OUT] == 64, "restart forgets the old connection's counters");
	CHECK(f->flags == WEIR_FF_SEEN_OUT && f->wscale[WEIR_DIR_OUT] == 3, "restart flags %#x", f->flags);
	/* (the restart also forgot that the old connection was picked up
	 * mid-stream: this one was seen from its SYN) */
	CHECK(weir_flow_table_stats(t)->inserted == 1, "no second insert");

	/* A SYN in an established connection is not a new connection. */
	struct synth ack = syn;
	ack.tcp_flags = WEIR_TCP_ACK;
	pkt(t, &ack, WEIR_DIR_OUT, 51);
	CHECK(f->state == WEIR_FS_ESTABLISHED, "ACK after SYN (SYN+ACK unseen) -> established");
	pkt(t, &syn, WEIR_DIR_OUT, 52);
	CHECK(f->state == WEIR_FS_ESTABLISHED && f->pkts[WEIR_DIR_OUT] == 3, "stray SYN ignored");
out:
	weir_flow_table_free(t);
}

static void
test_udp_replied(void)
{
	struct weir_flow_table *t = table("ft_udp", 64);
	struct synth d = { .fam = 4, .src = "10.0.0.2", .dst = "192.0.2.53", .sport = 5353, .dport = 53,
			.proto = IPPROTO_UDP, .ws = -1 };
	struct synth r = synth_reverse(d);
	struct weir_flow *f = pkt(t, &d, WEIR_DIR_OUT, 1);

	CHECK(f != NULL && !(f->flags & WEIR_FF_REPLIED) && f->state == WEIR_FS_NONE, "one way: not replied");
	pkt(t, &d, WEIR_DIR_OUT, 2);
	CHECK(f != NULL && !(f->flags & WEIR_FF_REPLIED), "still one way");
	pkt(t, &r, WEIR_DIR_IN, 3);
	CHECK(f != NULL && (f->flags & WEIR_FF_REPLIED) && f->state == WEIR_FS_NONE, "reply: replied, state none");
	weir_flow_table_free(t);
}

/* Evict callback: count calls per flow, identified by the key's port_lo. */
struct evict_log {
	unsigned int calls[256];
	unsigned int total;
	int bad;                /* callback saw a key/entry that does not match */
};

static void
on_evict(struct weir_flow *f, const struct weir_flow_key *key, void *arg)
{
	struct evict_log *log = arg;

	if (key->port_lo < 256)
		log->calls[key->port_lo]++;
	else
		log->bad = 1;
	/* Tests store port_lo in class_id to check entry and key belong together. */
	if (f->class_id != key->port_lo)
		log->bad = 1;
	log->total++;
}

/* A flow keyed by `id` (port_lo == id), tracked into a state at time `now`. */
static struct weir_flow *
flow_in_state(struct weir_flow_table *t, uint16_t id, uint8_t proto, int state, uint64_t now)
{
	struct synth d = { .fam = 4, .src = "10.0.0.2", .dst = "192.0.2.9", .sport = id, .dport = 60000,
			.proto = proto, .ws = -1 };
	struct synth r = synth_reverse(d);

	struct weir_flow *f;
	switch (state) {
	case WEIR_FS_SYN_SENT:
		d.tcp_flags = WEIR_TCP_SYN;
		f = pkt(t, &d, WEIR_DIR_OUT, now);
		break;
	case WEIR_FS_ESTABLISHED:
		d.tcp_flags = WEIR_TCP_ACK;
		f = pkt(t, &d, WEIR_DIR_OUT, now);
		break;
	case WEIR_FS_FIN_WAIT:
		d.tcp_flags = WEIR_TCP_ACK | WEIR_TCP_FIN;
		f = pkt(t, &d, WEIR_DIR_OUT, now);
		break;
	case WEIR_FS_CLOSED:
		r.tcp_flags = WEIR_TCP_RST;
		f = pkt(t, &r, WEIR_DIR_IN, now);
		break;
	default:
		f = pkt(t, &d, WEIR_DIR_OUT, now);
		break;
	}
	if (f != NULL)
		f->class_id = id;
	return f;
}

static void
test_expiry_per_state(void)
{
	struct weir_flow_table *t = table("ft_exp", 64);
	struct {
		uint16_t id;
		uint8_t proto;
		int state;
		uint32_t timeout;
	} cases[] = {
		{ 1, IPPROTO_TCP, WEIR_FS_SYN_SENT, TIMEOUTS.tcp_syn },
		{ 2, IPPROTO_TCP, WEIR_FS_ESTABLISHED, TIMEOUTS.tcp_established },
		{ 3, IPPROTO_TCP, WEIR_FS_FIN_WAIT, TIMEOUTS.tcp_closing },
		{ 4, IPPROTO_TCP, WEIR_FS_CLOSED, TIMEOUTS.tcp_closed },
		{ 5, IPPROTO_UDP, WEIR_FS_NONE, TIMEOUTS.udp },
		{ 6, IPPROTO_SCTP, WEIR_FS_NONE, TIMEOUTS.other },
	};
	const unsigned int n = RTE_DIM(cases);
	struct evict_log log = { 0 };
	const uint64_t t0 = 1000;

	for (unsigned int i = 0; i < n; i++) {
		struct weir_flow *f = flow_in_state(t, cases[i].id, cases[i].proto, cases[i].state, t0);
		CHECK(f != NULL && f->state == cases[i].state, "case %u in state %s", i,
		      f ? weir_flow_state_name(f->state) : "NULL");
	}
	/* ICMP (other): ports zero, so key it by another address. */
	struct synth icmp = { .fam = 4, .src = "10.9.9.9", .dst = "192.0.2.9", .proto = IPPROTO_ICMP,
			   .sport = 3 << 8, .ws = -1 };
	struct weir_flow *fi = pkt(t, &icmp, WEIR_DIR_IN, t0);
	if (fi != NULL)
		fi->class_id = 0;
	CHECK(weir_flow_table_stats(t)->active == n + 1, "all inserted");

	/* Walk the clock through each timeout: exactly at it nothing goes, one
	 * tick later exactly that state's flows go. */
	for (uint32_t sec = 1; sec <= 100; sec++) {
		unsigned int before = log.total;
		unsigned int got = weir_flow_expire(t, t0 + sec * HZ, 64, on_evict, &log);
		unsigned int got1 = weir_flow_expire(t, t0 + sec * HZ + 1, 64, on_evict, &log);
		unsigned int want = 0;
		for (unsigned int i = 0; i < n; i++)
			want += cases[i].timeout == sec;
		want += TIMEOUTS.other == sec;  /* the ICMP flow */
		CHECK(got == 0, "at exactly %u s nothing expires (got %u)", sec, got);
		CHECK(got1 == want, "just past %u s: %u expire (got %u)", sec, want, got1);
		CHECK(log.total - before == got + got1, "callback per removal");
	}
	for (unsigned int i = 0; i < n; i++)
		CHECK(log.calls[cases[i].id] == 1, "flow %u evicted once (%u)", cases[i].id,
		      log.calls[cases[i].id]);
	CHECK(log.calls[0] == 1, "ICMP flow evicted once");
	CHECK(!log.bad, "callback saw matching key and entry");
	const struct weir_flow_stats *s = weir_flow_table_stats(t);
	CHECK(s->expired == n + 1 && s->active == 0, "expired %lu active %u", (unsigned long)s->expired,
	      s->active);
	/* Activity postpones expiry. */
	struct weir_flow *f = flow_in_state(t, 7, IPPROTO_UDP, WEIR_FS_NONE, 0);
	flow_in_state(t, 7, IPPROTO_UDP, WEIR_FS_NONE, 20 * HZ);
	CHECK(weir_flow_expire(t, 40 * HZ, 64, NULL, NULL) == 0, "recent packet keeps the flow");
	CHECK(weir_flow_expire(t, 50 * HZ + 1, 64, NULL, NULL) == 1, "then it idles out (NULL callback)");
	CHECK(f != NULL, "flow 7 inserted");
	/* A clock behind the flow's last packet never expires it. */
	flow_in_state(t, 8, IPPROTO_UDP, WEIR_FS_NONE, 1000 * HZ);
	CHECK(weir_flow_expire(t, 5, 64, NULL, NULL) == 0, "clock behind last_tsc: kept");
	weir_flow_table_free(t);
}

static void
test_expiry_incremental(void)
{
	struct weir_flow_table *t = table("ft_incr", 64);
	struct evict_log log = { 0 };
	unsigned int sum = 0, calls = 0;

	for (uint16_t id = 10; id < 40; id++)
		flow_in_state(t, id, IPPROTO_UDP, WEIR_FS_NONE, 0);
	/* Budget 16 on 64 slots: a full sweep takes 4 calls, each bounded. */
	for (calls = 0; calls < 4; calls++) {
		unsigned int got = weir_flow_expire(t, 1000 * HZ, 16, on_evict, &log);
		CHECK(got <= 16, "a call removes at most its budget (%u)", got);
		sum += got;
	}
	CHECK(sum == 30, "one sweep in 4 calls removes all 30 (got %u)", sum);
	CHECK(weir_flow_expire(t, 1000 * HZ, 16, on_evict, &log) == 0, "nothing left");
	unsigned int once = 1;
	for (uint16_t id = 10; id < 40; id++)
		once &= log.calls[id] == 1;
	CHECK(once && log.total == 30 && !log.bad, "each flow evicted once (%u calls)", log.total);

	/* Cursor wraps: after 3 calls of 24 slots (72 > 64) a new sweep goes on. */
	for (uint16_t id = 10; id < 20; id++)
		flow_in_state(t, id, IPPROTO_UDP, WEIR_FS_NONE, 0);
	sum = 0;
	for (calls = 0; calls < 3; calls++)
		sum += weir_flow_expire(t, 1000 * HZ, 24, NULL, NULL);
	CHECK(sum == 10, "wrapping sweep finds all 10 (got %u)", sum);

	/* A budget of the whole table sweeps every slot once, from wherever
	 * the cursor is: fill every slot, sweep once with nothing due (moves
	 * the cursor round), then once with everything due. */
	for (uint16_t id = 100; id < 164; id++)
		flow_in_state(t, id, IPPROTO_UDP, WEIR_FS_NONE, 2000 * HZ);
	CHECK(weir_flow_table_stats(t)->active == 64, "table full");
	weir_flow_expire(t, 2000 * HZ + 5, 7, NULL, NULL);      /* cursor off zero */
	CHECK(weir_flow_expire(t, 2000 * HZ + 5, 64, NULL, NULL) == 0, "nothing due");
	CHECK(weir_flow_expire(t, 3000 * HZ, 1000, NULL, NULL) == 64, "one full-budget sweep removes all 64");
	weir_flow_table_free(t);
}

/* Distinct flow number i: addresses 10.x.y.z -> 192.0.2.1, port from i. */
static void
nth_key(uint32_t i, struct weir_flow_key *k)
{
	char src[32];
	struct synth d = { .fam = 4, .dst = "192.0.2.1", .sport = 1024 + (i & 0x3fff), .dport = 80,
			.proto = IPPROTO_TCP, .ws = -1 };

	snprintf(src, sizeof(src), "10.%u.%u.%u", (i >> 14) & 0xff, (i >> 22) & 0xff, 1);
	d.src = src;
	key_of(&d, k);
}

/* Insert flows [from, to) in bursts; returns how many came back NULL. */
static uint32_t
insert_range(struct weir_flow_table *t, uint32_t from, uint32_t to, uint64_t now, struct weir_flow **seen)
{
	struct weir_flow_key keys[WEIR_FLOW_BULK_MAX];
	struct weir_flow *out[WEIR_FLOW_BULK_MAX];
	uint32_t nulls = 0;

	for (uint32_t i = from; i < to;) {
		unsigned int n = 0;
		while (n < WEIR_FLOW_BULK_MAX && i < to)
			nth_key(i++, &keys[n++]);
		weir_flow_lookup_bulk(t, keys, n, now, out);
		for (unsigned int k = 0; k < n; k++) {
			if (out[k] == NULL)
				nulls++;
			else if (seen != NULL)
				seen[i - n + k - from] = out[k];
		}
	}
	return nulls;
}

static int
ptr_cmp(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

static void
test_capacity(uint32_t cap)
{
	char name[32];
	snprintf(name, sizeof(name), "ft_cap%u", cap);
	struct weir_flow_table *t = table(name, cap);
	struct weir_flow **seen = calloc(cap, sizeof(*seen));
	const struct weir_flow_stats *s = weir_flow_table_stats(t);

	CHECK(insert_range(t, 0, cap, 1, seen) == 0, "cap %u: every flow up to capacity inserts", cap);
	qsort(seen, cap, sizeof(*seen), ptr_cmp);
	unsigned int distinct = 1;
	for (uint32_t i = 1; i < cap; i++)
		distinct &= seen[i] != seen[i - 1];
	CHECK(distinct, "cap %u: distinct entries", cap);
	CHECK(s->inserted == cap && s->active == cap && s->full == 0, "cap %u: stats at capacity", cap);

	CHECK(insert_range(t, cap, cap + 1, 2, NULL) == 1, "cap %u: one more flow is refused", cap);
	CHECK(s->full == 1 && s->active == cap, "cap %u: counted as full (%lu)", cap, (unsigned long)s->full);
	CHECK(insert_range(t, cap, cap + 3, 2, NULL) == 3 && s->full == 4, "cap %u: each packet counted", cap);
	CHECK(insert_range(t, 0, cap, 3, NULL) == 0, "cap %u: existing flows still found when full", cap);
	CHECK(s->inserted == cap, "cap %u: lookups of existing flows insert nothing", cap);

	/* Expire everything (TCP in state NONE: syn timeout), then refill with new flows. */
	uint32_t gone = 0;
	for (unsigned int k = 0; k < 4 && gone < cap; k++)
		gone += weir_flow_expire(t, 1000 * HZ, cap, NULL, NULL);
	CHECK(gone == cap && s->active == 0, "cap %u: all expired (%u)", cap, gone);
	CHECK(insert_range(t, cap, 2 * cap, 2000 * HZ, NULL) == 0, "cap %u: after expiry new flows insert", cap);
	CHECK(s->active == cap && insert_range(t, 0, 1, 2000 * HZ, NULL) == 1, "cap %u: full again", cap);
	free(seen);
	weir_flow_table_free(t);
}

static void
test_duplicate_in_burst(void)
{
	struct weir_flow_table *t = table("ft_dup", 16);
	struct weir_flow_key k[6];
	struct weir_flow *out[6];
	const struct weir_flow_stats *s = weir_flow_table_stats(t);

	nth_key(1, &k[0]);
	nth_key(2, &k[1]);
	k[2] = k[0];
	k[3] = k[0];
	k[4] = k[1];
	weir_flow_lookup_bulk(t, k, 5, 7, out);
	CHECK(out[0] != NULL && out[0] == out[2] && out[0] == out[3], "repeats of a new key share its entry");
	CHECK(out[1] != NULL && out[1] == out[4] && out[1] != out[0], "second new key too");
	CHECK(s->inserted == 2 && s->active == 2, "two inserts for two keys (%lu)", (unsigned long)s->inserted);

	/* Track the first packet, then its repeat in the same burst: the
	 * repeat must not have reset the entry. */
	out[0]->pkts[0] = 5;
	weir_flow_lookup_bulk(t, k, 4, 8, out);
	CHECK(out[0]->pkts[0] == 5 && out[0]->first_tsc == 7, "existing entry untouched");

	/* At capacity - 1: the first copy takes the last slot, the second finds
	 * it, a third new key is refused. */
	insert_range(t, 100, 100 + 13, 9, NULL);
	CHECK(s->active == 15, "one slot left (%u)", s->active);
	nth_key(500, &k[0]);
	k[1] = k[0];
	nth_key(501, &k[2]);
	k[3] = k[2];
	k[4] = k[0];
	weir_flow_lookup_bulk(t, k, 5, 10, out);
	CHECK(out[0] != NULL && out[1] == out[0] && out[4] == out[0], "last slot shared by its repeats");
	CHECK(out[2] == NULL && out[3] == NULL && s->full == 2 && s->active == 16,
	      "next new key refused, its repeat too, each packet counted (full %lu)",
	      (unsigned long)s->full);
	weir_flow_table_free(t);
}

struct walk_ctx {
	unsigned int n, stop_after;
	int mismatch;
};

static int
walk_count(const struct weir_flow *f, const struct weir_flow_key *key, void *arg)
{
	struct walk_ctx *c = arg;

	if (f->class_id != key->port_lo)
		c->mismatch = 1;
	c->n++;
	return c->stop_after && c->n == c->stop_after ? 42 : 0;
}

static void
test_walk(void)
{
	struct weir_flow_table *t = table("ft_walk", 64);
	struct walk_ctx c = { 0 };

	CHECK(weir_flow_walk(t, walk_count, &c) == 0 && c.n == 0, "empty table: nothing walked");
	for (uint16_t id = 100; id < 120; id++)
		flow_in_state(t, id, IPPROTO_UDP, WEIR_FS_NONE, id <= 104 ? 0 : 100 * HZ);
	weir_flow_expire(t, 50 * HZ, 64, NULL, NULL);   /* ids 100..104 go */
	c = (struct walk_ctx){ 0 };
	CHECK(weir_flow_walk(t, walk_count, &c) == 0, "walk returns 0 when not stopped");
	CHECK(c.n == 15 && !c.mismatch, "walk visits every live flow once (%u)", c.n);
	c = (struct walk_ctx){ .stop_after = 3 };
	CHECK(weir_flow_walk(t, walk_count, &c) == 42 && c.n == 3, "walk stops on non-zero");
	weir_flow_table_free(t);
}

static void
test_state_names(void)
{
	CHECK(strcmp(weir_flow_state_name(WEIR_FS_ESTABLISHED), "established") == 0, "state name");
	CHECK(strcmp(weir_flow_state_name(WEIR_FS__COUNT), "?") == 0, "out of range name");
}

/* rte_hash's layout (DPDK 22.11 rte_cuckoo_hash.c) for `cap` entries, no
 * RW-concurrency, extendable table: buckets of 8 (64 B each), as many
 * extendable buckets, a key store of cap+1 entries of (8 B pdata + key)
 * rounded to 16, a free-slot ring of pow2(cap+1) uint32, an ext-bucket ring
 * of pow2(buckets+1) uint32; plus our 64 B entry and 8 B side record. */
static size_t
layout_bytes(uint32_t cap)
{
	uint64_t nb = rte_align32pow2(cap) / 8;
	uint64_t key_entry = RTE_ALIGN(8 + sizeof(struct weir_flow_key), 16);

	return nb * 64 * 2 + (uint64_t)(cap + 1) * key_entry + (uint64_t)rte_align32pow2(cap + 1) * 4 +
	       (uint64_t)rte_align32pow2(nb + 1) * 4 + (uint64_t)cap * (64 + 8);
}

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void
report_memory(uint32_t cap)
{
	char name[32];
	double t0 = now_s();

	snprintf(name, sizeof(name), "ft_mem%u", cap);
	struct weir_flow_table *t = table(name, cap);
	double dt = now_s() - t0;
	size_t per = weir_flow_table_bytes_per_flow(t);
	size_t est = layout_bytes(cap);

	printf("memory: capacity %u: %zu bytes/flow measured (heap delta), %.1f by rte_hash layout, "
	       "%.1f MiB total, created in %.2f s\n", cap, per, (double)est / cap,
	       (double)per * cap / (1 << 20), dt);
	/* Measured includes allocator headers and struct rte_hash: a bit above. */
	CHECK(per * cap + cap >= est && per * cap <= est + est / 20 + 65536,
	      "measured %zu bytes/flow vs layout %.1f", per, (double)est / cap);
	weir_flow_table_free(t);
}

/* Informational timings of the per-packet path on this machine (not
 * asserted: the machine is shared and noisy). */
static void
report_speed(void)
{
	enum { CAP = 1 << 17, FLOWS = 100000, BURST = 32, ROUNDS = 20 };
	struct weir_flow_table *t = table("ft_speed", CAP);
	struct weir_flow_key *keys = malloc(sizeof(*keys) * FLOWS);
	struct weir_flow *out[BURST];
	struct weir_pkt p = { .l4proto = IPPROTO_TCP, .tcp_flags = WEIR_TCP_ACK, .l3 = 4 };
	const double ns = 1e9 / rte_get_tsc_hz();
	uint64_t c0, c1, c2, c3, c4;
	unsigned int nulls = 0;

	for (uint32_t i = 0; i < FLOWS; i++)
		nth_key(i, &keys[i]);
	c0 = rte_rdtsc();
	for (uint32_t i = 0; i + BURST <= FLOWS; i += BURST) {
		weir_flow_lookup_bulk(t, &keys[i], BURST, 1, out);
		for (unsigned int k = 0; k < BURST; k++)
			nulls += out[k] == NULL;
	}
	c1 = rte_rdtsc();
	for (unsigned int r = 0; r < ROUNDS; r++) {
		for (uint32_t i = 0; i + BURST <= FLOWS; i += BURST) {
			/* Stride through the table so bursts are not cache-warm neighbours. */
			uint32_t base = (i * 7919u) % (FLOWS - BURST);
			weir_flow_lookup_bulk(t, &keys[base], BURST, 2 + r, out);
			for (unsigned int k = 0; k < BURST; k++)
				weir_flow_track(out[k], &p, (enum weir_dir)(k & 1), 1500, 2 + r);
		}
	}
	c2 = rte_rdtsc();
	const uint32_t inserted = FLOWS / BURST * BURST;
	const uint64_t looked = (uint64_t)ROUNDS * (FLOWS / BURST) * BURST;
	c3 = rte_rdtsc();
	unsigned int gone = weir_flow_expire(t, 1000000 * HZ, CAP, NULL, NULL);
	c4 = rte_rdtsc();
	printf("speed: insert %.1f ns/flow, lookup+track %.1f ns/pkt (bursts of %d, %u flows in a %u table), "
	       "expiry %.1f ns/slot (%u removed)\n", (c1 - c0) * ns / inserted, (c2 - c1) * ns / looked,
	       BURST, inserted, CAP, (c4 - c3) * ns / CAP, gone);
	CHECK(nulls == 0 && gone == inserted, "speed run: all inserted (%u nulls) and expired (%u)", nulls, gone);
	free(keys);
	weir_flow_table_free(t);
}

int
main(int argc, char **argv)
{
	(void)argc;
	unit_eal_init(argv[0], "flow", "512");
	test_key_symmetry();
	test_key_icmp();
	test_key_vlan();
	test_bidir_lookup();
	test_tcp_handshake();
	test_tcp_synack_first();
	test_tcp_midstream_and_fin();
	test_tcp_rst_and_reuse();
	test_udp_replied();
	test_expiry_per_state();
	test_expiry_incremental();
	test_capacity(8);
	test_capacity(1000);
	test_capacity(4096);
	test_duplicate_in_burst();
	test_walk();
	test_state_names();
	report_speed();
	report_memory(4096);
	report_memory(1u << 20);
	report_memory((1u << 20) - 1);

	rte_eal_cleanup();
	return unit_report();
}
