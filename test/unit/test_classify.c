/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for the flow classifier (lib/classify/classify.c).
 *
 * Frames are built by hand with the weir_pkt fields parse.h documents (as
 * test_flow does), so the test does not depend on the parser. EAL is set up
 * only because the classifier allocates with rte_malloc on a NUMA socket.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_common.h>
#include <rte_eal.h>
#include <rte_memory.h>

#include "synth.h"
#include "unit.h"
#include "classify.h"

/* A rule's address from text. */
static void
parse_addr(int fam, const char *s, uint8_t out[16])
{
	memset(out, 0, 16);
	if (inet_pton(fam == 4 ? AF_INET : AF_INET6, s, out) != 1) {
		fprintf(stderr, "bad test address %s\n", s);
		exit(2);
	}
}

static struct synth
tcp(int fam, const char *src, uint16_t sport, const char *dst, uint16_t dport, uint8_t flags)
{
	return (struct synth){ .fam = fam, .src = src, .dst = dst, .sport = sport, .dport = dport,
			    .proto = IPPROTO_TCP, .tcp_flags = flags, .ws = -1 };
}

static struct weir_classifier *
build_cls(const struct weir_classify_rule *r, unsigned int n, uint16_t def)
{
	char err[256];
	struct weir_classifier *c = weir_classifier_build(r, n, def, err, sizeof(err));

	if (c == NULL) {
		fprintf(stderr, "classifier build failed: %s\n", err);
		exit(2);
	}
	return c;
}

static uint16_t
cls(const struct weir_classifier *c, const struct synth *d, enum weir_dir dir)
{
	uint8_t frame[128];
	struct weir_pkt p;

	synth_build(d, frame, &p);
	return weir_classify(c, frame, &p, dir);
}

static struct weir_cls_prefix
pfx(int fam, const char *addr, unsigned int len)
{
	struct weir_cls_prefix px = { .family = (uint8_t)fam, .len = (uint8_t)len };

	parse_addr(fam, addr, px.addr);
	return px;
}

/* Clear the bits past len so the prefix is valid. */
static void
mask_prefix(struct weir_cls_prefix *px)
{
	for (unsigned int b = px->len; b < 128; b++)
		px->addr[b / 8] &= (uint8_t)~(0x80u >> (b % 8));
}

static void
flip_bit(uint8_t a[16], unsigned int b)
{
	a[b / 8] ^= (uint8_t)(0x80u >> (b % 8));
}

/* A rule on the WAN side's prefix /len of `base`: the base itself matches,
 * flipping the last bit inside the prefix does not, flipping the first bit
 * past it does. Checked from both directions of the flow. */
static void
check_prefix(int fam, const char *base, unsigned int len)
{
	const unsigned int max = fam == 4 ? 32 : 128;
	struct weir_classify_rule r = { .class_id = 7 };
	struct weir_classifier *c;
	uint8_t a[16];
	char s[INET6_ADDRSTRLEN];
	const char *lan = fam == 4 ? "10.0.0.2" : "fd00::2";

	r.prefix[WEIR_CLS_WAN] = pfx(fam, base, len);
	mask_prefix(&r.prefix[WEIR_CLS_WAN]);
	c = build_cls(&r, 1, 1);

	struct synth d = tcp(fam, lan, 40000, base, 443, WEIR_TCP_SYN);
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 7, "IPv%d /%u: base matches out", fam, len);
	struct synth rd = synth_reverse(d);
	CHECK(cls(c, &rd, WEIR_DIR_IN) == 7, "IPv%d /%u: base matches in", fam, len);

	if (len > 0) {
		parse_addr(fam, base, a);
		flip_bit(a, len - 1);
		inet_ntop(fam == 4 ? AF_INET : AF_INET6, a, s, sizeof(s));
		d.dst = s;
		CHECK(cls(c, &d, WEIR_DIR_OUT) == 1, "IPv%d /%u: %s (last prefix bit flipped) misses",
		      fam, len, s);
	}
	if (len < max) {
		parse_addr(fam, base, a);
		flip_bit(a, len);
		inet_ntop(fam == 4 ? AF_INET : AF_INET6, a, s, sizeof(s));
		d.dst = s;
		CHECK(cls(c, &d, WEIR_DIR_OUT) == 7, "IPv%d /%u: %s (first host bit flipped) matches",
		      fam, len, s);
	}
	/* A prefix names its family: the other family never matches, even /0. */
	struct synth other = fam == 4 ? tcp(6, "fd00::2", 1, "2001:db8::1", 2, 0)
				   : tcp(4, "10.0.0.2", 1, "203.0.113.1", 2, 0);
	CHECK(cls(c, &other, WEIR_DIR_OUT) == 1, "IPv%d /%u rule misses the other family", fam, len);
	weir_classifier_free(c);
}

static void
test_prefixes(void)
{
	static const unsigned int lens4[] = { 0, 1, 24, 32 };
	static const unsigned int lens6[] = { 0, 1, 24, 32, 64, 127, 128 };

	for (unsigned int i = 0; i < RTE_DIM(lens4); i++)
		check_prefix(4, "203.0.113.77", lens4[i]);
	for (unsigned int i = 0; i < RTE_DIM(lens6); i++)
		check_prefix(6, "2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff", lens6[i]);
	/* Prefix on the LAN side too: both must hold. */
	struct weir_classify_rule r = { .class_id = 3 };
	r.prefix[WEIR_CLS_LAN] = pfx(4, "10.0.0.0", 8);
	r.prefix[WEIR_CLS_WAN] = pfx(4, "203.0.113.0", 24);
	struct weir_classifier *c = build_cls(&r, 1, 0);
	struct synth d = tcp(4, "10.9.9.9", 1234, "203.0.113.5", 80, 0);
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 3, "lan and wan prefixes both hold");
	d.src = "192.168.1.1";
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 0, "lan prefix fails");
	weir_classifier_free(c);
}

static void
test_ports(void)
{
	struct weir_classify_rule r[3] = { { .class_id = 5 }, { .class_id = 6 }, { .class_id = 9 } };
	struct weir_classifier *c;
	struct synth d = tcp(4, "10.0.0.2", 40000, "198.51.100.1", 0, 0);

	r[0].port[WEIR_CLS_WAN] = (struct weir_cls_ports){ 1000, 2000 };
	r[1].port[WEIR_CLS_LAN] = (struct weir_cls_ports){ 65535, 65535 };
	r[2].port[WEIR_CLS_WAN] = (struct weir_cls_ports){ 0, 65535 };  /* "has ports" */
	c = build_cls(r, 3, 1);
	d.dport = 999;
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 9, "999 is below 1000..2000");
	d.dport = 1000;
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 5, "1000 is the low edge");
	d.dport = 2000;
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 5, "2000 is the high edge");
	d.dport = 2001;
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 9, "2001 is above");
	d.sport = 65535;
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 6, "lan port 65535 (top edge)");
	/* The WAN port of an inbound packet is its source port. */
	struct synth rd = synth_reverse(d);
	rd.sport = 1500;
	rd.dport = 40000;
	CHECK(cls(c, &rd, WEIR_DIR_IN) == 5, "inbound: wan port is the source port");
	/* ICMP has no ports: port conditions never hold, even 0..65535. */
	struct synth icmp = d;
	icmp.proto = IPPROTO_ICMP;
	icmp.sport = 8 << 8;
	icmp.dport = 1500;      /* echo identifier, not a port */
	CHECK(cls(c, &icmp, WEIR_DIR_OUT) == 1, "ICMP identifier is not a port");
	struct synth udp = d;
	udp.proto = IPPROTO_UDP;
	udp.sport = 5;
	udp.dport = 1000;
	CHECK(cls(c, &udp, WEIR_DIR_OUT) == 5, "UDP has ports");
	weir_classifier_free(c);
}

static void
test_proto(void)
{
	struct weir_classify_rule r[2] = { { .proto = IPPROTO_UDP, .class_id = 2 },
					   { .proto = IPPROTO_ICMPV6, .class_id = 3 } };
	struct weir_classifier *c = build_cls(r, 2, 1);
	struct synth d = tcp(4, "10.0.0.2", 1, "198.51.100.1", 53, 0);

	CHECK(cls(c, &d, WEIR_DIR_OUT) == 1, "TCP is not UDP");
	d.proto = IPPROTO_UDP;
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 2, "UDP");
	struct synth i6 = tcp(6, "fd00::1", 128 << 8, "2001:db8::1", 7, 0);
	i6.proto = IPPROTO_ICMPV6;
	CHECK(cls(c, &i6, WEIR_DIR_OUT) == 3, "ICMPv6");
	weir_classifier_free(c);
}

static void
test_vlan(void)
{
	struct weir_classify_rule r[2] = { { .vlan = 100, .class_id = 2 },
					   { .vlan = WEIR_CLS_VLAN_UNTAGGED, .class_id = 3 } };
	struct weir_classifier *c = build_cls(r, 2, 1);
	struct synth d = tcp(4, "10.0.0.2", 1, "198.51.100.1", 80, 0);

	CHECK(cls(c, &d, WEIR_DIR_OUT) == 3, "untagged");
	d.tagged = 1;
	d.tci = (5 << 13) | 100;        /* priority bits do not matter */
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 2, "VLAN 100 with PCP 5");
	d.tci = 101;
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 1, "VLAN 101 matches neither");
	d.tci = 3 << 13;                /* priority-tagged: VLAN ID 0 */
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 3, "priority tag counts as untagged");
	weir_classifier_free(c);

	struct weir_classify_rule any = { .class_id = 4 };
	c = build_cls(&any, 1, 1);
	d.tci = 4095;
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 4, "vlan 0 in a rule means any");
	weir_classifier_free(c);
}

static void
test_dscp(void)
{
	struct weir_classify_rule r[2] = {
		{ .dscp_mask = (1ull << 46) | (1ull << 10), .class_id = 2 },   /* EF, AF11 */
		{ .dscp_mask = 1ull << 0 | 1ull << 63, .class_id = 3 },
	};
	struct weir_classifier *c = build_cls(r, 2, 1);
	struct synth d = tcp(4, "10.0.0.2", 1, "198.51.100.1", 80, 0);

	d.dscp = 46;
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 2, "EF in the set");
	d.dscp = 10;
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 2, "AF11 in the set");
	d.dscp = 0;
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 3, "DSCP 0 (bit 0)");
	d.dscp = 63;
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 3, "DSCP 63 (bit 63)");
	d.dscp = 34;
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 1, "AF41 in neither set");
	weir_classifier_free(c);
}

static void
test_direction(void)
{
	struct weir_classify_rule r[2] = { { .dir = WEIR_CLS_DIR_OUT, .class_id = 2 },
					   { .dir = WEIR_CLS_DIR_IN, .class_id = 3 } };
	struct weir_classifier *c = build_cls(r, 2, 1);
	struct synth syn = tcp(4, "10.0.0.2", 40000, "198.51.100.1", 80, WEIR_TCP_SYN);
	struct synth synack = synth_reverse(syn);

	synack.tcp_flags = WEIR_TCP_SYN | WEIR_TCP_ACK;
	CHECK(cls(c, &syn, WEIR_DIR_OUT) == 2, "SYN from the LAN: opened out");
	CHECK(cls(c, &synack, WEIR_DIR_IN) == 2, "SYN+ACK from the WAN: still opened out");
	struct synth in_syn = tcp(4, "198.51.100.1", 5555, "10.0.0.2", 22, WEIR_TCP_SYN);
	CHECK(cls(c, &in_syn, WEIR_DIR_IN) == 3, "SYN from the WAN: opened in");
	struct synth in_synack = synth_reverse(in_syn);
	in_synack.tcp_flags = WEIR_TCP_SYN | WEIR_TCP_ACK;
	CHECK(cls(c, &in_synack, WEIR_DIR_OUT) == 3, "SYN+ACK from the LAN: opened in");
	/* Non-TCP and mid-stream TCP: the first packet's sender is the opener. */
	struct synth ack = synth_reverse(syn);
	ack.tcp_flags = WEIR_TCP_ACK;
	CHECK(cls(c, &ack, WEIR_DIR_IN) == 3, "mid-stream inbound ACK: taken as opened in");
	weir_classifier_free(c);
}

static void
test_first_match_and_default(void)
{
	struct weir_classify_rule r[3] = { { .proto = IPPROTO_TCP, .class_id = 10 },
					   { .class_id = 20 },
					   { .proto = IPPROTO_TCP, .class_id = 30 } };
	r[0].port[WEIR_CLS_DST] = (struct weir_cls_ports){ 443, 443 };
	struct weir_classifier *c = build_cls(r, 3, 99);
	struct synth d = tcp(4, "10.0.0.2", 1, "198.51.100.1", 443, 0);
	struct weir_cls_tuple t;
	uint8_t frame[128];
	struct weir_pkt p;

	CHECK(cls(c, &d, WEIR_DIR_OUT) == 10, "first rule wins");
	d.dport = 80;
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 20, "catch-all before the later TCP rule");
	synth_build(&d, frame, &p);
	weir_classify_tuple_make(frame, &p, WEIR_DIR_OUT, &t);
	CHECK(weir_classify_rule_index(c, &t) == 1, "rule index 1");
	CHECK(weir_classifier_n_rules(c) == 3 && weir_classifier_default(c) == 99, "accessors");
	weir_classifier_free(c);

	c = build_cls(NULL, 0, 42);
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 42, "no rules: default class");
	CHECK(weir_classify_rule_index(c, &t) == -1, "no rules: no index");
	weir_classifier_free(c);

	struct weir_classify_rule none = { .proto = IPPROTO_UDP, .class_id = 1 };
	c = build_cls(&none, 1, 7);
	CHECK(cls(c, &d, WEIR_DIR_OUT) == 7, "nothing matches: default class");
	/* A frame the worker would not manage is never classified by a rule. */
	synth_build(&d, frame, &p);
	p.flags |= WEIR_PF_FRAGMENT;
	CHECK(weir_classify(c, frame, &p, WEIR_DIR_OUT) == 7, "fragment: default class");
	weir_classifier_free(c);
	weir_classifier_free(NULL);
}

/* The example both ways: written with lan/wan sides, and with
 * src/dst (the initiating packet's), for an outbound and an inbound flow. */
static void
test_both_directions(void)
{
	struct weir_classify_rule r[4] = { { .class_id = 2 }, { .class_id = 3 },
					   { .class_id = 4 }, { .class_id = 5 } };
	struct weir_classifier *c;

	r[0].prefix[WEIR_CLS_WAN] = pfx(4, "203.0.113.0", 24);
	r[0].port[WEIR_CLS_WAN] = (struct weir_cls_ports){ 443, 443 };
	r[1].prefix[WEIR_CLS_DST] = pfx(6, "2001:db8::", 32);
	r[1].port[WEIR_CLS_DST] = (struct weir_cls_ports){ 443, 443 };
	r[2].prefix[WEIR_CLS_SRC] = pfx(4, "198.51.100.0", 24);
	r[2].port[WEIR_CLS_DST] = (struct weir_cls_ports){ 22, 22 };
	r[3].prefix[WEIR_CLS_LAN] = pfx(4, "10.0.0.0", 8);
	r[3].port[WEIR_CLS_LAN] = (struct weir_cls_ports){ 8000, 8080 };
	c = build_cls(r, 4, 1);

	struct synth syn = tcp(4, "10.0.0.2", 40000, "203.0.113.9", 443, WEIR_TCP_SYN);
	struct synth rep = synth_reverse(syn);
	rep.tcp_flags = WEIR_TCP_ACK;
	CHECK(cls(c, &syn, WEIR_DIR_OUT) == 2, "lan/wan rule: outbound SYN");
	CHECK(cls(c, &rep, WEIR_DIR_IN) == 2, "lan/wan rule: inbound reply, even mid-stream");

	struct synth syn6 = tcp(6, "fd00::2", 40000, "2001:db8::9", 443, WEIR_TCP_SYN);
	struct synth synack6 = synth_reverse(syn6);
	synack6.tcp_flags = WEIR_TCP_SYN | WEIR_TCP_ACK;
	struct synth ack6 = synth_reverse(syn6);
	ack6.tcp_flags = WEIR_TCP_ACK;
	CHECK(cls(c, &syn6, WEIR_DIR_OUT) == 3, "src/dst rule: outbound SYN");
	CHECK(cls(c, &synack6, WEIR_DIR_IN) == 3, "src/dst rule: inbound SYN+ACK names the opener");
	CHECK(cls(c, &ack6, WEIR_DIR_IN) == 1,
	      "src/dst rule: inbound mid-stream ACK is taken as the opener (documented)");

	/* A flow opened from the WAN (ssh to a LAN host). */
	struct synth in = tcp(4, "198.51.100.7", 5555, "10.0.0.2", 22, WEIR_TCP_SYN);
	struct synth in_rep = synth_reverse(in);
	in_rep.tcp_flags = WEIR_TCP_SYN | WEIR_TCP_ACK;
	CHECK(cls(c, &in, WEIR_DIR_IN) == 4, "src/dst rule: inbound SYN");
	CHECK(cls(c, &in_rep, WEIR_DIR_OUT) == 4, "src/dst rule: outbound SYN+ACK");

	/* A LAN server on 8080: the LAN side port, either direction first. */
	struct synth srv = tcp(4, "192.0.2.50", 3333, "10.1.2.3", 8080, WEIR_TCP_SYN);
	struct synth srv_rep = synth_reverse(srv);
	srv_rep.tcp_flags = WEIR_TCP_ACK;
	CHECK(cls(c, &srv, WEIR_DIR_IN) == 5, "lan port rule: inbound");
	CHECK(cls(c, &srv_rep, WEIR_DIR_OUT) == 5, "lan port rule: outbound reply");

	/* Re-classification on a later packet: the flow's remembered initiator
	 * overrides the guess, so src/dst rules give the first answer again. */
	uint8_t frame[128];
	struct weir_pkt p;
	struct weir_cls_tuple t;
	synth_build(&ack6, frame, &p);
	weir_classify_tuple_make(frame, &p, WEIR_DIR_IN, &t);
	t.init_dir = WEIR_DIR_OUT;
	CHECK(weir_classify_tuple(c, &t) == 3, "tuple with the remembered initiator");
	weir_classifier_free(c);
}

/* Build a one-rule classifier that must fail; the message names the index
 * and contains `what`. */
static void
check_invalid(const struct weir_classify_rule *bad, const char *what)
{
	struct weir_classify_rule r[3] = { { .class_id = 1 }, { .class_id = 2 }, *bad };
	char err[256] = "untouched";
	struct weir_classifier *c = weir_classifier_build(r, 3, 0, err, sizeof(err));

	CHECK(c == NULL, "rejected: %s", what);
	CHECK(strncmp(err, "rule 2: ", 8) == 0 && strstr(err, what) != NULL,
	      "message '%s' names rule 2 and '%s'", err, what);
	weir_classifier_free(c);
}

static void
test_invalid(void)
{
	struct weir_classify_rule b;
	char err[128];

	b = (struct weir_classify_rule){ 0 };
	b.prefix[WEIR_CLS_DST] = pfx(4, "10.0.0.0", 33);
	check_invalid(&b, "dst prefix: length 33 > 32");
	b = (struct weir_classify_rule){ 0 };
	b.prefix[WEIR_CLS_WAN] = pfx(6, "2001:db8::", 129);
	check_invalid(&b, "wan prefix: length 129 > 128");
	b = (struct weir_classify_rule){ 0 };
	b.prefix[WEIR_CLS_SRC] = pfx(4, "10.1.2.3", 8);
	check_invalid(&b, "src prefix: address has bits set past /8");
	b = (struct weir_classify_rule){ 0 };
	b.prefix[WEIR_CLS_LAN] = pfx(6, "2001:db8::1", 127);
	check_invalid(&b, "bits set past /127");
	b = (struct weir_classify_rule){ 0 };
	b.prefix[WEIR_CLS_LAN].family = 5;
	check_invalid(&b, "family 5");
	b = (struct weir_classify_rule){ 0 };
	b.prefix[WEIR_CLS_LAN].len = 8;
	check_invalid(&b, "lan prefix has a length or address but no family");
	b = (struct weir_classify_rule){ 0 };
	b.prefix[WEIR_CLS_LAN] = pfx(4, "10.0.0.0", 8);
	b.prefix[WEIR_CLS_WAN] = pfx(6, "2001:db8::", 32);
	check_invalid(&b, "mixes IPv4 and IPv6");
	b = (struct weir_classify_rule){ 0 };
	b.port[WEIR_CLS_WAN] = (struct weir_cls_ports){ 2000, 1000 };
	check_invalid(&b, "wan port range 2000..1000 has lo > hi");
	b = (struct weir_classify_rule){ .proto = IPPROTO_ICMP };
	b.port[WEIR_CLS_DST] = (struct weir_cls_ports){ 1, 1 };
	check_invalid(&b, "protocol 1, which has no ports");
	b = (struct weir_classify_rule){ .dir = 3 };
	check_invalid(&b, "direction 3");
	b = (struct weir_classify_rule){ .vlan = 4096 };
	check_invalid(&b, "VLAN ID 4096");

	CHECK(weir_classifier_build(NULL, 2, 0, err, sizeof(err)) == NULL &&
	      strstr(err, "no rule array") != NULL, "NULL rules: %s", err);
	/* err is optional. */
	CHECK(weir_classifier_build(&b, 1, 0, NULL, 0) == NULL, "no err buffer");
}

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Rules like a real policy: a /24 WAN prefix and a port per rule (what most
 * rules of a large list look like). Timed: packets that match no rule (the
 * whole list is scanned: the worst case) and packets matching the last rule. */
static void
report_speed(unsigned int n_rules)
{
	struct weir_classify_rule *r = calloc(n_rules, sizeof(*r));
	enum { NPKT = 256 };
	static uint8_t frames[NPKT][128];
	static struct weir_pkt pk[NPKT];
	char dst[32];
	unsigned int iters = 2000000 / n_rules + 1000;
	volatile unsigned int sink = 0;

	srand(n_rules);
	for (unsigned int i = 0; i < n_rules; i++) {
		snprintf(dst, sizeof(dst), "%u.%u.%u.0", 1 + i / 256 % 200, i % 256, 7);
		r[i].prefix[WEIR_CLS_WAN] = pfx(4, dst, 24);
		r[i].port[WEIR_CLS_WAN] = (struct weir_cls_ports){ 1000 + i, 1000 + i };
		r[i].proto = IPPROTO_TCP;
		r[i].class_id = (uint16_t)(i + 2);
	}
	struct weir_classifier *c = build_cls(r, n_rules, 1);

	/* Matching the last rule must still work at every size. */
	snprintf(dst, sizeof(dst), "%u.%u.%u.9", 1 + (n_rules - 1) / 256 % 200, (n_rules - 1) % 256, 7);
	struct synth last = tcp(4, "10.0.0.2", 40000, dst, (uint16_t)(1000 + n_rules - 1), WEIR_TCP_SYN);
	CHECK(cls(c, &last, WEIR_DIR_OUT) == n_rules + 1, "%u rules: the last rule matches", n_rules);

	for (int pass = 0; pass < 2; pass++) {
		for (unsigned int k = 0; k < NPKT; k++) {
			struct synth d = last;
			char a[32];

			if (pass == 0) {  /* no match: random address, a port no rule has */
				snprintf(a, sizeof(a), "%u.%u.%u.%u", 201 + rand() % 50, rand() % 256,
					 rand() % 256, rand() % 256);
				d.dst = a;
				d.dport = 443;
			}
			synth_build(&d, frames[k], &pk[k]);
		}
		double t0 = now_ns();
		for (unsigned int it = 0; it < iters; it++)
			for (unsigned int k = 0; k < NPKT; k += 16)
				sink += weir_classify(c, frames[k], &pk[k], WEIR_DIR_OUT);
		double ns = (now_ns() - t0) / ((double)iters * (NPKT / 16));
		printf("classify: %4u rules, %s: %.1f ns per classification (%s)\n", n_rules,
		       pass == 0 ? "no match (full scan)" : "last rule matches  ", ns,
		       weir_classifier_accelerated(c) ? "ACL" : "scan");
		if (pass == 1 && !weir_classifier_accelerated(c)) {
			char err[128];

			if (weir_classifier_accelerate(c, SOCKET_ID_ANY, err, sizeof(err)) == 1) {
				CHECK(cls(c, &last, WEIR_DIR_OUT) == n_rules + 1,
				      "%u rules, ACL: the last rule matches", n_rules);
				pass = -1;      /* both passes again, through the tries */
			}
		}
	}
	(void)sink;
	weir_classifier_free(c);
	free(r);
}

/* ---- the ACL form against the scan ---- */

static const char *const V4_POOL[] = { "10.0.0.1", "10.0.0.2", "10.0.1.7", "10.9.0.3",
				       "192.0.2.1", "192.0.2.77", "198.51.100.5", "203.0.113.9" };
static const char *const V6_POOL[] = { "2001:db8::1", "2001:db8::2", "2001:db8:1::7",
				       "2001:db8:ff::3", "fd00::1", "fd00:1::5", "2001:db8::8:1",
				       "fe80::9" };
static const uint16_t PORT_POOL[] = { 22, 53, 80, 443, 5000, 5001, 5060, 8080 };

static int
rnd(int n)
{
	return rand() % n;
}

static struct weir_cls_prefix
rnd_prefix(int fam)
{
	struct weir_cls_prefix px = pfx(fam, fam == 4 ? V4_POOL[rnd(8)] : V6_POOL[rnd(8)], 0);

	px.len = (uint8_t)(fam == 4 ? 8 + rnd(25) : 16 + rnd(113));
	mask_prefix(&px);
	return px;
}

static void
rnd_rule(struct weir_classify_rule *r, uint16_t id)
{
	static const uint8_t protos[] = { 0, 0, IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP };
	int fam = rnd(3) == 0 ? 0 : (rnd(2) ? 4 : 6);

	memset(r, 0, sizeof(*r));
	r->class_id = id;
	r->proto = protos[rnd(5)];
	for (int s = 0; s < WEIR_CLS__SIDES; s++) {
		if (fam != 0 && rnd(10) < 3)
			r->prefix[s] = rnd_prefix(fam);
		if (r->proto != IPPROTO_ICMP && rnd(10) < 2) {
			uint16_t lo = PORT_POOL[rnd(8)];

			r->port[s] = (struct weir_cls_ports){ lo, (uint16_t)(lo + rnd(3) * rnd(3000)) };
		}
	}
	if (rnd(5) == 0)
		r->dscp_mask = ((uint64_t)rand() << 32 | (uint64_t)rand()) & (rnd(2) ? 0xff00ff00ffull : ~0ull);
	if (rnd(10) == 0)
		r->vlan = rnd(3) == 0 ? WEIR_CLS_VLAN_UNTAGGED : (uint16_t)(10 * (1 + rnd(2)));
	r->dir = (uint8_t)rnd(3);
}

static void
rnd_tuple(struct weir_cls_tuple *t)
{
	static const uint8_t protos[] = { IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP };
	int fam = rnd(2) ? 4 : 6;
	uint8_t a[16];

	memset(t, 0, sizeof(*t));
	t->family = (uint8_t)fam;
	for (int side = 0; side < 2; side++) {
		uint64_t w[2] = { 0, 0 };

		memset(a, 0, sizeof(a));
		parse_addr(fam, fam == 4 ? V4_POOL[rnd(8)] : V6_POOL[rnd(8)], a);
		for (int k = 0; k < 16; k++)
			w[k / 8] = w[k / 8] << 8 | a[k];
		t->addr[side][0] = w[0];
		t->addr[side][1] = w[1];
	}
	t->proto = protos[rnd(3)];
	t->has_ports = t->proto != IPPROTO_ICMP;
	t->port[0] = rnd(2) ? PORT_POOL[rnd(8)] : (uint16_t)(1024 + rnd(60000));
	t->port[1] = rnd(2) ? PORT_POOL[rnd(8)] : (uint16_t)rnd(65536);
	t->vlan = rnd(3) == 0 ? (uint16_t)(10 * rnd(3)) : 0;
	t->dscp = (uint8_t)(rnd(2) ? rnd(64) : 0);
	t->init_dir = (uint8_t)rnd(2);
}

/* Random rules and tuples: the ACL tries must pick exactly the rule the
 * first-match scan picks, every time. */
static void
test_acl_matches_scan(void)
{
	enum { NR = 400, NT = 200000 };
	struct weir_classify_rule *r = calloc(NR, sizeof(*r));
	unsigned int diff = 0, matched = 0;
	struct weir_classifier *c;
	char err[256];

	srand(7);
	for (unsigned int i = 0; i < NR; i++)
		rnd_rule(&r[i], (uint16_t)(i + 1));
	c = build_cls(r, NR, 0);
	CHECK(weir_classifier_accelerate(c, SOCKET_ID_ANY, err, sizeof(err)) == 1 &&
	      weir_classifier_accelerated(c), "400 rules: ACL built (%s)", err);
	for (unsigned int k = 0; k < NT; k++) {
		struct weir_cls_tuple t;
		int a, b;

		rnd_tuple(&t);
		a = weir_classify_scan(c, &t);
		b = weir_classify_rule_index(c, &t);
		matched += a >= 0;
		if (a != b && diff++ < 5)
			printf("  differ: scan %d acl %d (fam %u proto %u dir %u vlan %u dscp %u ports %u/%u)\n",
			       a, b, t.family, t.proto, t.init_dir, t.vlan, t.dscp, t.port[0], t.port[1]);
	}
	CHECK(diff == 0, "ACL == scan on %u random tuples (%u matched a rule, %u differ)", NT,
	      matched, diff);
	CHECK(matched > NT / 10, "the tuples exercise the rules (%u matched)", matched);
	weir_classifier_free(c);
	/* Below the threshold nothing is built. */
	c = build_cls(r, 8, 0);
	CHECK(weir_classifier_accelerate(c, SOCKET_ID_ANY, err, sizeof(err)) == 0 &&
	      !weir_classifier_accelerated(c), "8 rules: the scan stays");
	weir_classifier_free(c);
	free(r);
}

int
main(int argc, char **argv)
{
	(void)argc;
	unit_eal_init(argv[0], "classify", "256");
	test_prefixes();
	test_ports();
	test_proto();
	test_vlan();
	test_dscp();
	test_direction();
	test_first_match_and_default();
	test_both_directions();
	test_invalid();
	test_acl_matches_scan();
	report_speed(10);
	report_speed(100);
	report_speed(1000);

	rte_eal_cleanup();
	return unit_report();
}
