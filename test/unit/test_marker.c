/* SPDX-License-Identifier: BSD-3-Clause
 * DiffServ markers (lib/marker*.c): the DSCP rewrite (IPv4 checksum stays
 * valid, IPv6 traffic class, nothing past the outer header), srTCM/trTCM
 * on rte_meter, TBQ and its low-delay and capped variants, the ARM/CARM
 * controllers against a synthetic plant, the policy's refusals, and a
 * marker in a worker (synthetic mbufs, fake clock).
 */
#include <math.h>
#include <string.h>

#include <rte_cycles.h>

#include "unit.h"
#include "rig.h"
#include "marker_int.h"
#include "mbuf_meta.h"
#include "worker_view.h"

static uint64_t hz;

/* The one's complement sum of an IPv4 header with its checksum: 0xffff when valid. */
static bool
ip4_cksum_ok(const uint8_t *h)
{
	uint32_t s = 0;
	unsigned int len = (h[0] & 0x0f) * 4u;

	for (unsigned int i = 0; i < len; i += 2)
		s += (uint32_t)h[i] << 8 | h[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return s == 0xffff;
}

static void
ip4_cksum_set(uint8_t *h)
{
	uint32_t s = 0;
	unsigned int len = (h[0] & 0x0f) * 4u;

	h[10] = h[11] = 0;
	for (unsigned int i = 0; i < len; i += 2)
		s += (uint32_t)h[i] << 8 | h[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	h[10] = (uint8_t)(~s >> 8);
	h[11] = (uint8_t)~s;
}

/* A parsed frame: the parse record in the mbuf's private area, as the worker leaves it. */
static void
parse_into(struct rte_mbuf *m)
{
	weir_parse(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, &weir_mbuf_meta(m)->pkt);
}

/* IPv4 TCP frame with a valid header checksum, TOS `tos`, an IP option
 * word when opts, behind a VLAN tag when tagged. */
static struct rte_mbuf *
ip4_frame(uint8_t tos, bool opts, bool tagged, uint8_t proto, uint16_t payload)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
	unsigned int l2 = tagged ? 18 : 14, ihl = opts ? 24 : 20;
	uint16_t len = (uint16_t)(l2 + ihl + 20 + payload);
	uint8_t *f = (uint8_t *)rte_pktmbuf_append(m, len), *ip = f + l2;

	memset(f, 0, len);
	for (uint16_t i = 0; i < len; i++)
		f[i] = (uint8_t)(i * 7 + 3);    /* non-zero bytes everywhere past the headers */
	memset(f, 0, l2 + ihl + 20);
	if (tagged) {
		f[12] = 0x81;
		f[15] = 10;
		f[16] = 0x08;
	} else {
		f[12] = 0x08;
	}
	ip[0] = (uint8_t)(0x40 | ihl / 4);
	ip[1] = tos;
	ip[2] = (uint8_t)((len - l2) >> 8);
	ip[3] = (uint8_t)(len - l2);
	ip[4] = 0x12;
	ip[5] = 0x34;
	ip[8] = 64;
	ip[9] = proto;
	ip[12] = 10; ip[15] = 1;
	ip[16] = 192; ip[17] = 0; ip[18] = 2; ip[19] = 1;
	if (opts)
		ip[20] = 1, ip[21] = 1, ip[22] = 1, ip[23] = 0; /* NOPs, EOL */
	ip[ihl] = 0x0f; ip[ihl + 1] = 0xa0;
	ip[ihl + 3] = 80;
	if (proto == IPPROTO_TCP)
		ip[ihl + 12] = 0x50, ip[ihl + 13] = 0x10;
	else if (proto == IPPROTO_UDP)
		ip[ihl + 4] = (uint8_t)((8 + 12 + payload) >> 8), ip[ihl + 5] = (uint8_t)(8 + 12 + payload);
	ip4_cksum_set(ip);
	parse_into(m);
	return m;
}

static void
test_dscp_ipv4(void)
{
	static const uint8_t toses[] = { 0x00, 0x01, 0x02, 0x03, 0xb8, 0xff, 0x28 };
	bool all_ok = true, ecn_kept = true;
	unsigned int n = 0;

	for (size_t t = 0; t < RTE_DIM(toses); t++)
		for (int variant = 0; variant < 4; variant++)
			for (uint8_t d = 0; d < 64; d++) {
				struct rte_mbuf *m = ip4_frame(toses[t], variant & 1, variant & 2,
							       IPPROTO_TCP, 100);
				const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
				uint8_t *ip = rte_pktmbuf_mtod_offset(m, uint8_t *, p->l3_off);

				all_ok &= weir_marker_set_dscp(m, p, d) && ip4_cksum_ok(ip) &&
					  ip[1] >> 2 == d;
				ecn_kept &= (ip[1] & 3) == (toses[t] & 3);
				n++;
				rte_pktmbuf_free(m);
			}
	CHECK(all_ok, "every rewrite (%u: TOS x options x VLAN x DSCP) left a valid IPv4 "
	      "header checksum and the DSCP asked for", n);
	CHECK(ecn_kept, "the ECN bits are kept");
}

/* ESP (and anything else past the outer header) is never touched: only
 * the TOS byte and the header checksum may differ. */
static void
test_dscp_esp(void)
{
	struct rte_mbuf *m = ip4_frame(0, false, false, IPPROTO_ESP, 200);
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
	uint8_t before[512];
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	unsigned int diff_elsewhere = 0, len = m->data_len;

	memcpy(before, f, len);
	CHECK(weir_marker_set_dscp(m, p, 12), "ESP over IPv4 gets its outer DSCP");
	for (unsigned int i = 0; i < len; i++)
		if (f[i] != before[i] && i != p->l3_off + 1u && i != p->l3_off + 10u &&
		    i != p->l3_off + 11u)
			diff_elsewhere++;
	CHECK(diff_elsewhere == 0, "%u bytes changed outside the TOS and checksum", diff_elsewhere);
	CHECK(ip4_cksum_ok(f + p->l3_off), "checksum valid");
	rte_pktmbuf_free(m);
}

static void
test_dscp_ipv6(void)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
	uint8_t *f = (uint8_t *)rte_pktmbuf_append(m, 14 + 40 + 20);
	const struct weir_pkt *p;
	uint8_t before[80];

	memset(f, 0, 74);
	f[12] = 0x86;
	f[13] = 0xdd;
	f[14] = 0x6a;                   /* version 6, TC high nibble 0xa */
	f[15] = 0xb1;                   /* TC low nibble 0xb (ECN 11), flow label 0x1.... */
	f[16] = 0x23;
	f[17] = 0x45;
	f[19] = 20;
	f[20] = IPPROTO_TCP;
	f[21] = 64;
	f[22] = 0x20; f[23] = 0x01; f[37] = 1;
	f[38] = 0x20; f[39] = 0x01; f[53] = 2;
	f[54 + 12] = 0x50;
	f[54 + 13] = 0x10;
	parse_into(m);
	p = &weir_mbuf_meta(m)->pkt;
	memcpy(before, f, 74);
	CHECK(p->l3 == WEIR_L3_IPV6, "parsed as IPv6");
	CHECK(weir_marker_set_dscp(m, p, 46), "rewritten");
	CHECK((((f[14] & 0x0f) << 4 | f[15] >> 4) >> 2) == 46, "traffic class DSCP is EF");
	CHECK(((f[15] >> 4) & 3) == 3, "ECN kept");
	CHECK((f[15] & 0x0f) == 1 && f[16] == 0x23 && f[17] == 0x45 && (f[14] >> 4) == 6,
	      "version and flow label kept");
	CHECK(memcmp(f + 18, before + 18, 74 - 18) == 0, "nothing past the first 4 bytes changed");
	rte_pktmbuf_free(m);
}

static void
test_dscp_refused(void)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
	uint8_t *f = (uint8_t *)rte_pktmbuf_append(m, 60);
	uint8_t before[60];

	memset(f, 0x5a, 60);
	f[12] = 0x08;
	f[13] = 0x06;                   /* ARP */
	memcpy(before, f, 60);
	parse_into(m);
	CHECK(!weir_marker_set_dscp(m, &weir_mbuf_meta(m)->pkt, 10), "ARP is not rewritten");
	CHECK(memcmp(f, before, 60) == 0, "ARP frame unchanged");
	rte_pktmbuf_free(m);

	/* A parse record claiming IPv4 past the frame (never trusted blindly). */
	m = ip4_frame(0, false, false, IPPROTO_TCP, 0);
	{
		struct weir_pkt p = weir_mbuf_meta(m)->pkt;

		p.l3_off = (uint16_t)(m->data_len - 10);
		CHECK(!weir_marker_set_dscp(m, &p, 10), "a header past the data is not written");
		p = weir_mbuf_meta(m)->pkt;
		p.malformed = WEIR_MAL_IP_IHL;
		CHECK(!weir_marker_set_dscp(m, &p, 10), "a malformed header is not written");
	}
	/* A clone shares its data: not written. */
	{
		struct rte_mbuf *c = rte_pktmbuf_clone(m, mp);

		CHECK(c != NULL && !weir_marker_set_dscp(m, &weir_mbuf_meta(m)->pkt, 10),
		      "a frame with a clone is not written");
		rte_pktmbuf_free(c);
	}
	rte_pktmbuf_free(m);
}

/* ---- markers on a hand-made tree: root + one leaf ---- */

static struct rte_mbuf *sent_q[4096];
static unsigned int n_sent, n_dropped;

static void
cap_send(void *arg, struct rte_mbuf *m)
{
	RTE_SET_USED(arg);
	sent_q[n_sent++] = m;
}

static void
cap_drop(void *arg, struct rte_mbuf *m)
{
	RTE_SET_USED(arg);
	n_dropped++;
	rte_pktmbuf_free(m);
}

static const struct weir_markers_out cap = { cap_send, cap_drop, NULL };

static void
sent_free(void)
{
	for (unsigned int i = 0; i < n_sent; i++)
		rte_pktmbuf_free(sent_q[i]);
	n_sent = 0;
	n_dropped = 0;
}

static struct weir_policy_class tree_cls[2];

static struct weir_markers *
make_markers(struct weir_marker_conf *c, uint64_t now)
{
	struct weir_policy_tree t = { .n_classes = 2, .classes = tree_cls };
	char err[200];
	int e;

	memset(tree_cls, 0, sizeof(tree_cls));
	if (weir_marker_conf_check(c, 100000000000ull, err, sizeof(err)) != 0) {
		printf("conf: %s\n", err);
		return NULL;
	}
	tree_cls[1].marker = *c;
	return weir_markers_create(weir_policy_tree_markers(&t), 1, 1, hz, now, SOCKET_ID_ANY, &e);
}

/* A frame of `len` bytes whose IPv4 ID is seq (order checks), DSCP dscp. */
static struct rte_mbuf *
seq_frame(uint16_t seq, uint16_t len, uint8_t dscp)
{
	struct rte_mbuf *m = ip4_frame((uint8_t)(dscp << 2), false, false, IPPROTO_TCP,
				       (uint16_t)(len - 54));
	uint8_t *ip = rte_pktmbuf_mtod_offset(m, uint8_t *, 14);

	ip[4] = (uint8_t)(seq >> 8);
	ip[5] = (uint8_t)seq;
	ip4_cksum_set(ip);
	parse_into(m);
	return m;
}

static uint16_t
seq_of(struct rte_mbuf *m)
{
	const uint8_t *ip = rte_pktmbuf_mtod_offset(m, const uint8_t *, 14);

	return (uint16_t)(ip[4] << 8 | ip[5]);
}

static uint8_t
dscp_of(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod_offset(m, const uint8_t *, 14)[1] >> 2;
}

static void
test_tb_srtcm_trtcm(uint64_t t0)
{
	struct weir_marker_conf c;
	struct weir_markers *ms;
	struct weir_marker_counters k;
	unsigned int colours[3] = { 0 };

	/* tb: 8 Mbit/s = 1 MB/s, 3000 B: three 1000 B frames at once are green,
	 * the fourth red; 1 ms later one more is green. */
	weir_marker_conf_init(&c);
	c.type = WEIR_MARK_TB;
	c.cir = 8000000;
	c.cbs = 3000;
	ms = make_markers(&c, t0);
	CHECK(ms != NULL, "tb built");
	if (ms == NULL)
		return;
	for (int i = 0; i < 4; i++)
		weir_markers_pass(ms, 1, seq_frame((uint16_t)i, 1000, 0), t0, &cap);
	weir_markers_pass(ms, 1, seq_frame(4, 1000, 0), t0 + hz / 1000 + hz / 100000, &cap);
	CHECK(n_sent == 5, "all five sent (%u)", n_sent);
	for (unsigned int i = 0; i < n_sent; i++)
		colours[dscp_of(sent_q[i]) == 10 ? 0 : dscp_of(sent_q[i]) == 14 ? 2 : 1]++;
	CHECK(dscp_of(sent_q[0]) == 10 && dscp_of(sent_q[2]) == 10 && dscp_of(sent_q[3]) == 14 &&
	      dscp_of(sent_q[4]) == 10, "green green green red green (%u %u %u %u %u)",
	      dscp_of(sent_q[0]), dscp_of(sent_q[1]), dscp_of(sent_q[2]), dscp_of(sent_q[3]),
	      dscp_of(sent_q[4]));
	weir_markers_counters(ms, 1, &k);
	CHECK(k.pkts[WEIR_GREEN] == 4 && k.pkts[WEIR_RED] == 1 && k.pkts[WEIR_YELLOW] == 0 &&
	      k.bytes[WEIR_GREEN] == 4000, "counted per colour (%lu/%lu/%lu)",
	      (unsigned long)k.pkts[0], (unsigned long)k.pkts[1], (unsigned long)k.pkts[2]);
	bool ck = true;

	for (unsigned int i = 0; i < n_sent; i++)
		ck &= ip4_cksum_ok(rte_pktmbuf_mtod_offset(sent_q[i], uint8_t *, 14));
	CHECK(ck, "checksums valid after marking");
	sent_free();
	weir_markers_free(ms, NULL);

	/* srtcm colour-blind: CBS 2000, EBS 2000, 1000 B frames at once:
	 * green green yellow yellow red. */
	weir_marker_conf_init(&c);
	c.type = WEIR_MARK_SRTCM;
	c.cir = 8000000;
	c.cbs = 2000;
	c.ebs = 2000;
	ms = make_markers(&c, t0);
	for (int i = 0; i < 5; i++)
		weir_markers_pass(ms, 1, seq_frame((uint16_t)i, 1000, 0), t0, &cap);
	CHECK(n_sent == 5 && dscp_of(sent_q[0]) == 10 && dscp_of(sent_q[1]) == 10 &&
	      dscp_of(sent_q[2]) == 12 && dscp_of(sent_q[3]) == 12 && dscp_of(sent_q[4]) == 14,
	      "srtcm blind: G G Y Y R");
	sent_free();
	weir_markers_free(ms, NULL);

	/* srtcm colour-aware: a frame arriving yellow (AF12) never goes green. */
	weir_marker_conf_init(&c);
	c.type = WEIR_MARK_SRTCM;
	c.cir = 8000000;
	c.cbs = 2000;
	c.ebs = 2000;
	c.color_aware = 1;
	ms = make_markers(&c, t0);
	weir_markers_pass(ms, 1, seq_frame(0, 1000, 12), t0, &cap);
	weir_markers_pass(ms, 1, seq_frame(1, 1000, 14), t0, &cap);
	weir_markers_pass(ms, 1, seq_frame(2, 1000, 0), t0, &cap);
	CHECK(n_sent == 3 && dscp_of(sent_q[0]) == 12 && dscp_of(sent_q[1]) == 14 &&
	      dscp_of(sent_q[2]) == 10, "srtcm aware: yellow stays yellow, red red, green green "
	      "(%u %u %u)", dscp_of(sent_q[0]), dscp_of(sent_q[1]), dscp_of(sent_q[2]));
	sent_free();
	weir_markers_free(ms, NULL);

	/* trtcm blind: CIR 1 MB/s CBS 2000, PIR 2 MB/s PBS 3000: frames of 1000 B
	 * at once: G G Y R (the peak bucket is empty after three). */
	weir_marker_conf_init(&c);
	c.type = WEIR_MARK_TRTCM;
	c.cir = 8000000;
	c.pir = 16000000;
	c.cbs = 2000;
	c.pbs = 3000;
	ms = make_markers(&c, t0);
	for (int i = 0; i < 4; i++)
		weir_markers_pass(ms, 1, seq_frame((uint16_t)i, 1000, 0), t0, &cap);
	CHECK(n_sent == 4 && dscp_of(sent_q[0]) == 10 && dscp_of(sent_q[1]) == 10 &&
	      dscp_of(sent_q[2]) == 12 && dscp_of(sent_q[3]) == 14, "trtcm blind: G G Y R");
	sent_free();
	weir_markers_free(ms, NULL);

	/* trtcm aware: pre-coloured yellow cannot be green even with tokens. */
	c.color_aware = 1;
	ms = make_markers(&c, t0);
	weir_markers_pass(ms, 1, seq_frame(0, 1000, 12), t0, &cap);
	CHECK(n_sent == 1 && dscp_of(sent_q[0]) == 12, "trtcm aware: yellow stays yellow");
	sent_free();
	weir_markers_free(ms, NULL);
}

/* The rebalancer moves a class's rate on a worker: the marker's part of the
 * contract follows (weir_markers_set_share), its tokens kept. */
static void
test_set_share(uint64_t t0)
{
	struct weir_policy_tree t = { .n_classes = 2, .classes = tree_cls };
	struct weir_marker_conf c;
	struct weir_markers *ms;
	struct weir_marker_counters k;
	char err[200];
	int e;

	/* tb, 8 Mbit/s contract, 3000 B; this worker starts with half of it. */
	weir_marker_conf_init(&c);
	c.type = WEIR_MARK_TB;
	c.cir = 8000000;
	c.cbs = 3000;
	memset(tree_cls, 0, sizeof(tree_cls));
	CHECK(weir_marker_conf_check(&c, 100000000000ull, err, sizeof(err)) == 0, "conf");
	tree_cls[1].marker = c;
	ms = weir_markers_create(weir_policy_tree_markers(&t), 1, 2, hz, t0, SOCKET_ID_ANY, &e);
	CHECK(ms != NULL, "built");
	if (ms == NULL)
		return;
	weir_markers_counters(ms, 1, &k);
	CHECK(k.token_rate == 4000000, "half the contract: %lu", (unsigned long)k.token_rate);
	for (int i = 0; i < 3; i++)
		weir_markers_pass(ms, 1, seq_frame((uint16_t)i, 1000, 0), t0, &cap);
	/* The whole contract now: 1 ms later 1000 B have accrued (500 B at half). */
	CHECK(weir_markers_set_share(ms, &t.classes[1].marker, 1, 1, 1, t0) == 0, "moved");
	weir_markers_pass(ms, 1, seq_frame(3, 1000, 0), t0 + hz / 1000 + hz / 100000, &cap);
	CHECK(n_sent == 4 && dscp_of(sent_q[3]) == 10, "green at the new rate (dscp %u)",
	      n_sent == 4 ? dscp_of(sent_q[3]) : 0);
	weir_markers_counters(ms, 1, &k);
	CHECK(k.token_rate == 8000000 && k.pkts[WEIR_GREEN] == 4, "token rate %lu",
	      (unsigned long)k.token_rate);
	CHECK(weir_markers_set_share(ms, &t.classes[0].marker, 0, 1, 1, t0) == -1 &&
	      weir_markers_set_share(ms, &t.classes[1].marker, 1, 1, 0, t0) == -1, "no marker, no share: refused");
	sent_free();
	weir_markers_free(ms, NULL);

	/* carm: the controller's token rate scales with the part. */
	weir_marker_conf_init(&c);
	c.type = WEIR_MARK_CARM;
	c.cir = 8000000;
	memset(tree_cls, 0, sizeof(tree_cls));
	CHECK(weir_marker_conf_check(&c, 100000000000ull, err, sizeof(err)) == 0, "conf carm");
	tree_cls[1].marker = c;
	ms = weir_markers_create(weir_policy_tree_markers(&t), 1, 1, hz, t0, SOCKET_ID_ANY, &e);
	CHECK(ms != NULL && weir_markers_set_share(ms, &t.classes[1].marker, 1, 1, 4, t0) == 0, "carm moved");
	if (ms != NULL) {
		weir_markers_counters(ms, 1, &k);
		CHECK(k.token_rate == 2000000, "carm token rate %lu", (unsigned long)k.token_rate);
		weir_markers_free(ms, NULL);
	}
}

static void
test_tbq(uint64_t t0)
{
	struct weir_marker_conf c;
	struct weir_markers *ms;
	struct weir_marker_counters k;
	bool in_order = true;
	uint64_t next;

	/* 8 Mbit/s, CBS 3000, queue 4: ten 1000 B frames at once. Three green
	 * at once, four held, then each arrival pushes the head out red. */
	weir_marker_conf_init(&c);
	c.type = WEIR_MARK_TBQ;
	c.cir = 8000000;
	c.cbs = 3000;
	c.queue = 4;
	ms = make_markers(&c, t0);
	CHECK(ms != NULL, "tbq built");
	if (ms == NULL)
		return;
	for (int i = 0; i < 10; i++)
		weir_markers_pass(ms, 1, seq_frame((uint16_t)i, 1000, 0), t0, &cap);
	CHECK(n_sent == 6, "3 green + 3 heads pushed out red (%u)", n_sent);
	CHECK(dscp_of(sent_q[2]) == 10 && dscp_of(sent_q[3]) == 14 && dscp_of(sent_q[5]) == 14,
	      "green then red");
	CHECK(weir_markers_held(ms) == 4, "four held (%u)", weir_markers_held(ms));
	/* No timer: the worker's tick releases; nothing before the tokens accrue. */
	next = weir_markers_next(ms);
	CHECK(next > t0 && next <= t0 + hz / 1000 + 1, "next release within 1 ms (%lu ticks)",
	      (unsigned long)(next - t0));
	CHECK(weir_markers_tick(ms, t0 + hz / 2000, &cap) == 0, "nothing at 0.5 ms");
	CHECK(weir_markers_tick(ms, t0 + 2 * hz / 1000 + hz / 100000, &cap) == 2,
	      "two released green at 2 ms");
	CHECK(weir_markers_tick(ms, t0 + 10 * hz / 1000, &cap) == 2, "the rest at 10 ms");
	CHECK(weir_markers_next(ms) == UINT64_MAX, "nothing left to wake for");
	for (unsigned int i = 0; i < n_sent; i++)
		in_order &= seq_of(sent_q[i]) == i;
	CHECK(n_sent == 10 && in_order, "every frame out once, in arrival order (%u)", n_sent);
	CHECK(dscp_of(sent_q[9]) == 10 && dscp_of(sent_q[6]) == 10, "released frames are green");
	weir_markers_counters(ms, 1, &k);
	CHECK(k.pkts[WEIR_GREEN] == 7 && k.pkts[WEIR_RED] == 3 && k.held == 7 && k.qlen == 0,
	      "counters: 7 green 3 red 7 held (%lu %lu %lu)", (unsigned long)k.pkts[0],
	      (unsigned long)k.pkts[2], (unsigned long)k.held);
	sent_free();
	/* Held frames at free go on red, in order (a policy switch). */
	for (int i = 0; i < 6; i++)
		weir_markers_pass(ms, 1, seq_frame((uint16_t)i, 1000, 0), t0 + 20 * hz / 1000, &cap);
	CHECK(n_sent == 3, "three green with a full bucket (%u)", n_sent);
	sent_free();
	weir_markers_free(ms, &cap);
	CHECK(n_sent == 3 && dscp_of(sent_q[0]) == 14, "held frames released red at free (%u)",
	      n_sent);
	sent_free();

	/* Capped: the arrival at a full queue is dropped, what waits stays. */
	c.capped = 1;
	ms = make_markers(&c, t0);
	for (int i = 0; i < 10; i++)
		weir_markers_pass(ms, 1, seq_frame((uint16_t)i, 1000, 0), t0, &cap);
	weir_markers_counters(ms, 1, &k);
	CHECK(n_sent == 3 && n_dropped == 3 && k.dropped == 3 && k.pkts[WEIR_RED] == 0,
	      "capped: 3 green, 3 dropped, none red (%u %u)", n_sent, n_dropped);
	weir_markers_tick(ms, t0 + hz, &cap);       /* a full bucket: three frames' worth */
	weir_markers_tick(ms, t0 + hz + 2 * hz / 1000, &cap);
	CHECK(n_sent == 7 && seq_of(sent_q[3]) == 3 && seq_of(sent_q[6]) == 6,
	      "the held ones follow in order");
	sent_free();
	weir_markers_free(ms, NULL);

	/* Low delay: queue 40, min_thresh 4, 2000 arrivals at twice the rate:
	 * heads go out early, the queue stays well below full on average. */
	weir_marker_conf_init(&c);
	c.type = WEIR_MARK_TBQ_LD;
	c.cir = 8000000;
	c.cbs = 3000;
	c.queue = 40;
	c.min_thresh = 4;
	ms = make_markers(&c, t0);
	{
		uint64_t qsum = 0;

		for (int i = 0; i < 2000; i++) {
			uint64_t now = t0 + (uint64_t)i * hz / 2000;

			weir_markers_tick(ms, now, &cap);
			weir_markers_pass(ms, 1, seq_frame((uint16_t)i, 1000, 0), now, &cap);
			qsum += weir_markers_held(ms);
			if (n_sent > 3000)
				sent_free();
		}
		weir_markers_counters(ms, 1, &k);
		CHECK(k.early > 0, "early releases (%lu)", (unsigned long)k.early);
		CHECK(qsum / 2000 < 30, "mean queue %lu < 30 of 40", (unsigned long)(qsum / 2000));
		CHECK(k.pkts[WEIR_GREEN] > 900 && k.pkts[WEIR_GREEN] < 1100,
		      "green at the contract: %lu of ~1000", (unsigned long)k.pkts[WEIR_GREEN]);
	}
	sent_free();
	weir_markers_free(ms, NULL);

	/* A frame larger than the bucket never waits for tokens it cannot get:
	 * red at once, and behind held frames it goes red when it reaches the head. */
	weir_marker_conf_init(&c);
	c.type = WEIR_MARK_TBQ;
	c.cir = 8000000;
	c.queue = 4;
	ms = make_markers(&c, t0);
	/* A 1200-byte bucket (below what the config allows: a jumbo frame's case). */
	ms->m[1].tb.depth = ms->m[1].tb.tokens = 1200ull << 32;
	ms->m[1].tb.dt_full = ms->m[1].tb.depth / ms->m[1].tb.rate + 1;
	weir_markers_pass(ms, 1, seq_frame(0, 1000, 0), t0, &cap);     /* green, 200 left */
	weir_markers_pass(ms, 1, seq_frame(1, 1000, 0), t0, &cap);     /* held */
	weir_markers_pass(ms, 1, seq_frame(2, 1400, 0), t0, &cap);     /* > 1200 B: behind 1 */
	CHECK(n_sent == 1 && weir_markers_held(ms) == 2, "one sent, two held (%u, %u)", n_sent,
	      weir_markers_held(ms));
	weir_markers_tick(ms, t0 + 2 * hz / 1000, &cap);
	CHECK(n_sent == 3 && seq_of(sent_q[1]) == 1 && dscp_of(sent_q[1]) == 10 &&
	      seq_of(sent_q[2]) == 2 && dscp_of(sent_q[2]) == 14 && weir_markers_held(ms) == 0,
	      "the big one followed, red, nothing left held (%u)", n_sent);
	CHECK(weir_markers_next(ms) == UINT64_MAX, "nothing to wake for");
	weir_markers_pass(ms, 1, seq_frame(3, 1400, 0), t0 + hz, &cap);
	CHECK(n_sent == 4 && dscp_of(sent_q[3]) == 14 && weir_markers_held(ms) == 0,
	      "alone, it goes red at once");
	sent_free();
	weir_markers_free(ms, NULL);

	/* Eq. 4.8 with n = 1: (A T - sqrt(8 B)) / 2 packets. 8 Mbit/s x 140 ms
	 * = 140000 B = 280 packets of 500 B; B = 20 packets: (280 - 12.65) / 2. */
	CHECK(weir_marker_tbq_queue(8000000, 140000, 10000, 500) == 134, "Eq. 4.8: %u",
	      weir_marker_tbq_queue(8000000, 140000, 10000, 500));
	CHECK(weir_marker_tbq_queue(100000, 1000, 10000, 1500) == 2, "Eq. 4.8 floor");
}

/* The controller against a plant whose green rate is g x the token rate
 * (TCP wasting tokens), each step fed the bytes the plant would send. */
static double
run_plant(struct weir_marker *k, uint64_t *now, double g, double seconds)
{
	const uint64_t step = k->ctl.h_ticks;
	uint64_t end = *now + (uint64_t)(seconds * (double)hz);

	for (; *now < end; *now += step) {
		k->ctl.win_bytes += (uint64_t)(g * k->ctl.rt * (double)step / (double)hz);
		weir_rate_ctl_step(k, *now);
	}
	return k->ctl.rt;
}

static void
test_carm(uint64_t t0)
{
	struct weir_marker_conf c;
	struct weir_markers *ms;
	struct weir_marker *k;
	uint64_t now = t0;
	double A, rt, peak = 0;

	weir_marker_conf_init(&c);
	c.type = WEIR_MARK_CARM;
	c.cir = 8000000;
	c.alpha_milli = 200;
	ms = make_markers(&c, t0);
	CHECK(ms != NULL, "carm built");
	if (ms == NULL)
		return;
	k = &ms->m[1];
	A = k->ctl.A;
	/* Ziegler-Nichols with T_TSW = 1 s, rho = 1: w0 = 2.056, T_I = 2.547, K_u = 2.287. */
	CHECK(fabs(k->ctl.ti - 2.547) < 0.01 && fabs(k->ctl.kc / 0.2 - 2.287) < 0.01,
	      "gains T_I %.3f K_u %.3f", k->ctl.ti, k->ctl.kc / 0.2);
	rt = run_plant(k, &now, 0.9, 120);
	CHECK(fabs(0.9 * rt / A - 1) < 0.02, "green rate at the contract: %.3f A (token rate %.3f A)",
	      0.9 * rt / A, rt / A);
	/* Under-provisioned: the plant cannot deliver; the rate stops at 1.25 A. */
	for (int i = 0; i < 60; i++) {
		run_plant(k, &now, 0.5, 1);
		peak = fmax(peak, k->ctl.rt);
	}
	CHECK(peak <= 1.25 * A + 1 && peak > 1.24 * A, "anti-windup: at most 1.25 A (%.4f A)",
	      peak / A);
	/* Capacity returns: no windup to unwind, back to the contract quickly. */
	rt = run_plant(k, &now, 1.0, 25);
	CHECK(fabs(rt / A - 1) < 0.05, "back at A within 25 s: %.3f A", rt / A);
	weir_markers_free(ms, NULL);

	/* ARM on the total rate: a plant sending 1.5 x the token rate in all
	 * colours (an over-provisioned core) drives ARM's token rate down
	 * towards A / 1.5: in-profile below the contract (the thesis' point). */
	c.type = WEIR_MARK_ARM;
	ms = make_markers(&c, t0);
	k = &ms->m[1];
	now = t0;
	rt = run_plant(k, &now, 1.5, 120);
	CHECK(rt < 0.9 * A, "ARM's token rate falls below the contract: %.3f A", rt / A);
	weir_markers_free(ms, NULL);
}

/* ---- the policy's refusals ---- */

static void
test_policy_refusals(void)
{
	struct weir_policy_class_conf cls[2];
	struct weir_policy_conf pc = {
		.tree = { { .rate = 10000000, .n_classes = 1, .classes = cls, .default_class = "a" },
			  { .rate = 10000000 } },
	};
	struct weir_policy_err e;
	struct weir_policy *p;

	memset(cls, 0, sizeof(cls));
	snprintf(cls[0].name, sizeof(cls[0].name), "a");
	cls[0].rate = 5000000;
	weir_marker_conf_init(&cls[0].marker);
	cls[0].marker.type = WEIR_MARK_TBQ;
	p = weir_policy_build(&pc, 1, &e);
	CHECK(p == NULL && e.kind == WEIR_POLICY_ERR_CLASS && strstr(e.msg, "cir") != NULL,
	      "contract 0 refused: %s", e.msg);
	weir_policy_free(p);
	cls[0].marker.cir = 20000000;
	p = weir_policy_build(&pc, 1, &e);
	CHECK(p == NULL && strstr(e.msg, "above what the class can send") != NULL,
	      "contract above the link refused: %s", e.msg);
	weir_policy_free(p);
	cls[0].ceil = 6000000;
	cls[0].marker.cir = 7000000;
	p = weir_policy_build(&pc, 1, &e);
	CHECK(p == NULL && strstr(e.msg, "ceil") != NULL, "contract above the ceil refused: %s",
	      e.msg);
	weir_policy_free(p);
	/* A class that borrows (ceil above rate) may mark: the contract is
	 * checked against what it can reach. */
	cls[0].ceil = 0;
	cls[0].marker.cir = 8000000;
	p = weir_policy_build(&pc, 1, &e);
	CHECK(p != NULL && p->tree[0].classes[1].marker.queue >= 2,
	      "a borrowing class marks with cir up to its ceil (queue %u from Eq. 4.8)",
	      p ? p->tree[0].classes[1].marker.queue : 0);
	weir_policy_free(p);
	/* A marker on an inner class: refused. */
	pc.tree[0].n_classes = 2;
	snprintf(cls[1].name, sizeof(cls[1].name), "b");
	snprintf(cls[1].parent, sizeof(cls[1].parent), "a");
	cls[1].rate = 1000000;
	snprintf(pc.tree[0].default_class, sizeof(pc.tree[0].default_class), "b");
	p = weir_policy_build(&pc, 1, &e);
	CHECK(p == NULL && strstr(e.msg, "has children") != NULL, "marker on an inner class: %s",
	      e.msg);
	weir_policy_free(p);
	/* Keys of another type. */
	{
		struct weir_marker_conf c;
		char err[200];

		weir_marker_conf_init(&c);
		c.type = WEIR_MARK_TB;
		c.cir = 1000000;
		c.queue = 10;
		CHECK(weir_marker_conf_check(&c, 10000000, err, sizeof(err)) < 0,
		      "queue on a tb refused");
		c.queue = 0;
		c.cbs = 100;
		CHECK(weir_marker_conf_check(&c, 10000000, err, sizeof(err)) < 0 &&
		      strstr(err, "cbs") != NULL, "a bucket below one frame refused: %s", err);
	}
}

/* ---- in a worker: marked where frames leave the tree ---- */

static void
test_worker(void)
{
	uint64_t t0;
	struct weir_policy_class_conf cls[1];
	struct weir_policy_conf pc = {
		.tree = { { .rate = 100000000, .n_classes = 1, .classes = cls, .default_class = "m" },
			  { .rate = 100000000 } },
	};
	struct rig r;
	bool ok = true, order = true;
	unsigned int n_up = 0, greens = 0, reds = 0;

	memset(cls, 0, sizeof(cls));
	snprintf(cls[0].name, sizeof(cls[0].name), "m");
	cls[0].rate = 100000000;
	cls[0].mode = WEIR_MODE_PFQ;
	weir_marker_conf_init(&cls[0].marker);
	cls[0].marker.type = WEIR_MARK_TBQ;
	cls[0].marker.cir = 8000000;
	cls[0].marker.cbs = 3028;
	cls[0].marker.queue = 8;
	rig_cut_through = true;
	if (rig_make(&r, &pc, "mk_w") != 0) {
		CHECK(0, "rig");
		return;
	}
	rig_cut_through = false;
	/* The fake clock starts after the worker (and its markers' clocks) exist:
	 * on a loaded machine making the rig can take longer than any fixed lead. */
	t0 = rte_rdtsc() + hz;
	feed(&r, tcp_frame(0, 1, 4000, 1, 80, SYN, 0, 0), 0, t0);
	/* 40 data frames of 1054 B in 4 ms (2x the contract): order and colours. */
	for (int i = 1; i <= 40; i++) {
		uint64_t now = t0 + (uint64_t)i * hz / 10000;
		struct rte_mbuf *m = tcp_frame(0, 1, 4000, 1, 80, ACK, (uint32_t)i, 1000);

		ip4_cksum_set(rte_pktmbuf_mtod_offset(m, uint8_t *, 14));
		weir_worker_process(r.w, &m, 1, WEIR_PORT_LAN, now);
		weir_worker_dequeue(r.w, WEIR_PORT_LAN, now, 32);
		weir_worker_tx(r.w);
	}
	for (int i = 0; i < 100; i++) {
		weir_worker_dequeue(r.w, WEIR_PORT_LAN, t0 + hz / 100 + (uint64_t)i * hz / 1000, 32);
		weir_worker_tx(r.w);
	}
	for (unsigned int i = 0; i < r.n_emitted; i++) {
		uint8_t *ip = rte_pktmbuf_mtod_offset(r.emitted[i], uint8_t *, 14);
		uint32_t tag = rig_tag(r.emitted[i]);

		if (r.emitted_to[i] != WEIR_PORT_WAN)
			continue;
		ok &= ip4_cksum_ok(ip);
		greens += ip[1] >> 2 == 10;
		reds += ip[1] >> 2 == 14;
		if (tag != 0)
			order &= tag == ++n_up;
	}
	CHECK(n_up == 40 && order, "all 40 data frames out once, in order (%u)", n_up);
	CHECK(ok, "every IPv4 checksum valid after the rewrite");
	CHECK(greens + reds == 40 && reds > 0 && greens > 8,
	      "coloured green %u / red %u", greens, reds);
	{
		struct weir_marker_counters k;

		CHECK(weir_worker_marker_view(r.w, r.p, WEIR_PORT_LAN, 1, &k) == 0 &&
		      k.pkts[WEIR_GREEN] == greens + 1 && k.pkts[WEIR_RED] == reds,
		      "the view's counters match the frames (and the SYN, green)");
		CHECK(r.w->svc.ctr.port[WEIR_PORT_LAN].forwarded == 41, "forwarded counted once each "
		      "(%lu)", (unsigned long)r.w->svc.ctr.port[WEIR_PORT_LAN].forwarded);
	}
	rig_free(&r);
}

/* ---- IPsec SAs through a marked leaf (issue 36.9c) ---- */

/* The bytes an AH ICV covers, as the receiver computes it: the frame past
 * the Ethernet header with the fields RFC 4302 (3.3.3.1) calls mutable
 * zeroed: IPv4 TOS (DSCP, ECN), flags and fragment offset, TTL, header
 * checksum; IPv6 traffic class, flow label, hop limit. */
static void
icv_view(const uint8_t *f, unsigned int len, bool v6, uint8_t *out)
{
	memcpy(out, f + 14, len - 14);
	if (v6) {
		out[0] &= 0xf0;
		out[1] = out[2] = out[3] = 0;
		out[7] = 0;
	} else {
		out[1] = 0;
		out[6] = out[7] = out[8] = 0;
		out[10] = out[11] = 0;
	}
}

/* An SA's frames (ESP, AH over TCP, ESP in UDP 4500, AH over IPv6) in a
 * postack leaf with a token-bucket marker: the leaf's mode gives way to
 * pfq (counted ipsec.plain), the marker still colours every frame and
 * writes the code point into the outer header, and nothing an SA's
 * integrity check covers changes: ESP covers nothing of the outer header,
 * AH zeroes the DS field for its ICV. So each frame's ICV view and its
 * bytes past the IP header are unchanged, its IPv4 checksum valid. */
static void
test_worker_ipsec(void)
{
	struct weir_policy_class_conf cls[1];
	struct weir_policy_conf pc = {
		.tree = { { .rate = 100000000, .n_classes = 1, .classes = cls, .default_class = "m" },
			  { .rate = 100000000 } },
	};
	enum { N = 4 };
	struct rte_mbuf *in[N];
	uint8_t before[N][256], view0[256], view1[256];
	unsigned int len[N], l4[N], marked = 0, intact = 0, cks = 0;
	bool v6[N] = { false, false, false, true };
	uint64_t t0;
	struct rig r;

	memset(cls, 0, sizeof(cls));
	snprintf(cls[0].name, sizeof(cls[0].name), "m");
	cls[0].rate = 100000000;
	cls[0].mode = WEIR_MODE_POSTACK;
	weir_marker_conf_init(&cls[0].marker);
	cls[0].marker.type = WEIR_MARK_TB;
	cls[0].marker.cir = 8000000;
	cls[0].marker.cbs = 3028;
	rig_cut_through = true;
	if (rig_make_pa(&r, &pc, "mk_ipsec", 256) != 0) {
		CHECK(0, "rig");
		return;
	}
	rig_cut_through = false;
	t0 = rte_rdtsc() + hz;
	in[0] = ip4_frame(0xba, false, false, IPPROTO_ESP, 100);        /* EF, ECN 2 */
	in[1] = ip4_frame(0xb9, true, false, IPPROTO_AH, 40);           /* EF, ECN 1 */
	in[2] = ip4_frame(0xb8, false, true, IPPROTO_UDP, 60);
	{
		uint8_t *f = rte_pktmbuf_mtod(in[1], uint8_t *), *ah = f + 14 + 24;
		uint8_t *u = rte_pktmbuf_mtod(in[2], uint8_t *) + 18 + 20;

		ah[0] = IPPROTO_TCP;
		ah[1] = 4;                      /* 24 bytes: SPI, sequence, 12 of ICV */
		ah[2] = ah[3] = 0;
		memset(ah + 4, 0, 8);
		ah[7] = 0x55;                   /* SPI 0x55, sequence 1 */
		ah[11] = 1;
		ip4_cksum_set(f + 14);
		u[0] = 0x11; u[1] = 0x94;       /* 4500 > 4500 */
		u[2] = 0x11; u[3] = 0x94;
		u[8] = 0; u[9] = 0; u[10] = 0x20; u[11] = 0x01;        /* SPI 0x2001 */
		u[12] = 0; u[13] = 0; u[14] = 0; u[15] = 1;
		parse_into(in[1]);
		parse_into(in[2]);
	}
	{
		struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
		uint8_t *f = (uint8_t *)rte_pktmbuf_append(m, 14 + 40 + 24 + 20);

		memset(f, 0, 14 + 40 + 24 + 20);
		f[12] = 0x86; f[13] = 0xdd;
		f[14] = 0x6b; f[15] = 0x91; f[16] = 0x23; f[17] = 0x45;  /* EF, ECN 1, flow label */
		f[19] = 24 + 20;
		f[20] = IPPROTO_AH;
		f[21] = 64;
		f[22] = 0x20; f[23] = 0x01; f[37] = 1;
		f[38] = 0x20; f[39] = 0x01; f[53] = 2;
		f[54] = IPPROTO_TCP; f[55] = 4; f[61] = 0x77; f[65] = 1;
		for (int i = 0; i < 12; i++)
			f[66 + i] = (uint8_t)(0xa0 + i);
		f[78 + 12] = 0x50; f[78 + 13] = 0x10; f[78 + 14] = 0xff; f[78 + 15] = 0xff;
		parse_into(m);
		in[3] = m;
	}
	for (int i = 0; i < N; i++) {
		const struct weir_pkt *p = &weir_mbuf_meta(in[i])->pkt;

		CHECK(p->ipsec != WEIR_IPSEC_NONE, "frame %d parsed as an SA (%u)", i, p->ipsec);
		len[i] = in[i]->data_len;
		l4[i] = p->l4_off;
		memcpy(before[i], rte_pktmbuf_mtod(in[i], uint8_t *), len[i]);
	}
	for (int i = 0; i < N; i++) {
		struct rte_mbuf *m = in[i];

		weir_worker_process(r.w, &m, 1, WEIR_PORT_LAN, t0 + (uint64_t)i);
		weir_worker_dequeue(r.w, WEIR_PORT_LAN, t0 + (uint64_t)i, 32);
		weir_worker_tx(r.w);
	}
	CHECK(r.n_emitted == N, "every SA frame out: %u", r.n_emitted);
	for (unsigned int i = 0; i < r.n_emitted && i < N; i++) {
		const uint8_t *f = rte_pktmbuf_mtod(r.emitted[i], const uint8_t *);
		unsigned int l3 = i == 2 ? 18 : 14;
		uint8_t dscp = v6[i] ? (uint8_t)(((f[14] & 0x0f) << 2) | (f[15] >> 6)) : f[l3 + 1] >> 2;
		uint8_t ecn = v6[i] ? (f[15] >> 4) & 3 : f[l3 + 1] & 3;
		uint8_t ecn0 = v6[i] ? (before[i][15] >> 4) & 3 : before[i][l3 + 1] & 3;

		/* Every frame came in EF (46): green is AF11 (10), red AF13 (14). */
		marked += (dscp == 10 || dscp == 14) && ecn == ecn0;
		cks += v6[i] || ip4_cksum_ok(f + l3);
		/* The ICV view from the IP header on (a tag before it is not IP's). */
		icv_view(f + l3 - 14, len[i] - (l3 - 14), v6[i], view1);
		icv_view(before[i] + l3 - 14, len[i] - (l3 - 14), v6[i], view0);
		intact += r.emitted[i]->data_len == len[i] &&
			  memcmp(view0, view1, len[i] - l3) == 0 &&
			  memcmp(f + l4[i], before[i] + l4[i], len[i] - l4[i]) == 0;
	}
	CHECK(marked == N, "the marker's code point written, ECN kept: %u of %u", marked, N);
	CHECK(cks == N, "IPv4 checksums valid: %u of %u", cks, N);
	CHECK(intact == N, "nothing an SA's ICV covers changed: %u of %u", intact, N);
	CHECK(r.w->svc.ctr.port[WEIR_PORT_LAN].ipsec == N && r.w->svc.ctr.port[WEIR_PORT_LAN].ipsec_plain == N,
	      "SA frames shaped pfq in the postack leaf: %lu of %lu",
	      (unsigned long)r.w->svc.ctr.port[WEIR_PORT_LAN].ipsec_plain,
	      (unsigned long)r.w->svc.ctr.port[WEIR_PORT_LAN].ipsec);
	{
		struct weir_marker_counters k;

		CHECK(weir_worker_marker_view(r.w, r.p, WEIR_PORT_LAN, 1, &k) == 0 &&
		      k.pkts[WEIR_GREEN] + k.pkts[WEIR_RED] == N && k.not_ip == 0,
		      "coloured and rewritten, not counted not_rewritten");
	}
	rig_free(&r);
}

int
main(int argc, char **argv)
{
	uint64_t t0;

	RTE_SET_USED(argc);
	unit_eal_init(argv[0], "marker", "256");
	rig_mempool("mk_mp");
	hz = rte_get_tsc_hz();
	t0 = rte_rdtsc() + hz;  /* past rte_meter's own start time */
	test_dscp_ipv4();
	test_dscp_esp();
	test_dscp_ipv6();
	test_dscp_refused();
	test_tb_srtcm_trtcm(t0);
	test_set_share(t0);
	test_tbq(t0);
	test_carm(t0);
	test_policy_refusals();
	test_worker();
	test_worker_ipsec();
	CHECK(rte_mempool_in_use_count(mp) == 0, "no mbuf leaked (%u in use)",
	      rte_mempool_in_use_count(mp));
	return unit_report();
}
