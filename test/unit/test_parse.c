/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for the parser (lib/net/parse.c): hand-built frames for every
 * protocol it reads and every malformed reason it reports, and a guard-page
 * check that no prefix of a valid frame makes it read past the end.
 */
#include <netinet/in.h>
#include <string.h>
#include <sys/mman.h>

#include "unit.h"
#include "parse.h"

/* A frame under construction. */
struct fb {
	uint8_t b[512];
	unsigned int n;
};

static void
put(struct fb *f, const void *p, unsigned int n)
{
	if (n == 0)     /* callers pass (NULL, 0) for "no options": memcpy's NULL is UB */
		return;
	memcpy(f->b + f->n, p, n);
	f->n += n;
}

static void
put8(struct fb *f, uint8_t v)
{
	put(f, &v, 1);
}

static void
put16(struct fb *f, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };
	put(f, b, 2);
}

static void
put32(struct fb *f, uint32_t v)
{
	put16(f, (uint16_t)(v >> 16));
	put16(f, (uint16_t)v);
}

static void
set16(struct fb *f, unsigned int off, uint16_t v)
{
	f->b[off] = (uint8_t)(v >> 8);
	f->b[off + 1] = (uint8_t)v;
}

static void
eth(struct fb *f, const uint16_t *tags, unsigned int ntags, uint16_t ethertype)
{
	static const uint8_t macs[12] = { 2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2 };

	f->n = 0;
	put(f, macs, 12);
	for (unsigned int i = 0; i < ntags; i++) {
		put16(f, i == 0 && ntags > 1 ? 0x88a8 : 0x8100);
		put16(f, tags[i]);
	}
	put16(f, ethertype);
}

/* IPv4 header with `optlen` option bytes; total length patched by ip4_done. */
static unsigned int
ip4(struct fb *f, uint8_t proto, const uint8_t *opts, unsigned int optlen, uint16_t frag)
{
	unsigned int start = f->n;

	put8(f, (uint8_t)(0x40 | ((20 + optlen) / 4)));
	put8(f, 0xb8);                  /* DSCP 46 (EF) */
	put16(f, 0);
	put16(f, 0x1234);
	put16(f, frag);
	put8(f, 64);
	put8(f, proto);
	put16(f, 0);
	put32(f, 0x0a000001);
	put32(f, 0xc0a80102);
	put(f, opts, optlen);
	return start;
}

static void
ip4_done(struct fb *f, unsigned int start)
{
	set16(f, start + 2, (uint16_t)(f->n - start));
}

static unsigned int
ip6(struct fb *f, uint8_t nh)
{
	static const uint8_t src[16] = { 0xfd, 0x77, [15] = 1 }, dst[16] = { 0xfd, 0x77, [15] = 2 };
	unsigned int start = f->n;

	put32(f, 0x6b800000);           /* traffic class 0xb8: DSCP 46 */
	put16(f, 0);
	put8(f, nh);
	put8(f, 64);
	put(f, src, 16);
	put(f, dst, 16);
	return start;
}

static void
ip6_done(struct fb *f, unsigned int start)
{
	set16(f, start + 4, (uint16_t)(f->n - start - 40));
}

/* TCP header with options; `doff_override` != 0 writes a bogus data offset. */
static void
tcp(struct fb *f, uint8_t flags, const uint8_t *opts, unsigned int optlen)
{
	put16(f, 40000);
	put16(f, 443);
	put32(f, 1000);
	put32(f, 2000);
	put8(f, (uint8_t)(((20 + optlen) / 4) << 4));
	put8(f, flags);
	put16(f, 29200);
	put16(f, 0);
	put16(f, 0);
	put(f, opts, optlen);
}

/* MSS 1460, SACK-permitted, timestamps, NOP, window scale 7 (a real SYN's set). */
static const uint8_t syn_opts[20] = {
	2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
};

static unsigned int
parse(const struct fb *f, struct weir_pkt *p)
{
	return weir_parse(f->b, f->n, p);
}

static void
test_ipv4_tcp_options(void)
{
	struct fb f;
	struct weir_pkt p;
	unsigned int ip;

	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_TCP, NULL, 0, 0x4000);    /* DF set: not a fragment */
	tcp(&f, 0x02, syn_opts, sizeof(syn_opts));
	put(&f, "hello", 5);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE, "malformed %u", p.malformed);
	CHECK(weir_pkt_manageable(&p), "flags %#x", p.flags);
	CHECK(p.l3 == WEIR_L3_IPV4 && p.l3_off == 14 && p.l4_off == 34, "l3 %u off %u/%u", p.l3, p.l3_off, p.l4_off);
	CHECK(p.payload_off == 74 && p.payload_len == 5, "payload %u+%u", p.payload_off, p.payload_len);
	CHECK(p.ip_len == 65 && p.ethertype == 0x0800 && p.dscp == 46, "ip_len %u dscp %u", p.ip_len, p.dscp);
	CHECK(p.l4proto == IPPROTO_TCP && p.sport == 40000 && p.dport == 443, "ports %u %u", p.sport, p.dport);
	CHECK(p.seq == 1000 && p.ack == 2000 && p.win == 29200 && p.tcp_flags == 0x02, "tcp fields");
	CHECK(p.mss == 1460 && p.wscale == 7 && p.sack_ok == 1, "mss %u ws %u sackok %u", p.mss, p.wscale, p.sack_ok);
	CHECK((p.flags & WEIR_PF_TCP_TS) && p.ts_off == 28 && f.b[p.l4_off + p.ts_off + 3] == 1, "ts_off %u", p.ts_off);
	CHECK(p.addr_len == 4 && p.saddr_off == 12 && f.b[p.l3_off + p.saddr_off] == 10, "addr");
	CHECK(p.n_vlan == 0 && p.vlan_outer == 0 && p.vlan_inner == 0, "no vlan");
	/* Exactly these flags: no SACK blocks, no IP options, not a fragment. */
	CHECK(p.flags == (WEIR_PF_L4 | WEIR_PF_TCP_TS), "flags %#x", p.flags);
	CHECK(p.sack_n == 0 && p.sack_off == 0, "sack %u@%u", p.sack_n, p.sack_off);
}

static void
test_tcp_sack_blocks(void)
{
	/* NOP NOP SACK with 2 blocks (18 bytes) */
	const uint8_t opts[20] = { 1, 1, 5, 18, 0, 0, 0, 10, 0, 0, 0, 20, 0, 0, 0, 30, 0, 0, 0, 40 };
	struct fb f;
	struct weir_pkt p;
	unsigned int ip;

	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_TCP, NULL, 0, 0);
	tcp(&f, 0x10, opts, sizeof(opts));
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE, "malformed %u", p.malformed);
	CHECK((p.flags & WEIR_PF_TCP_SACK) && p.sack_n == 2 && p.sack_off == 24, "sack %u@%u", p.sack_n, p.sack_off);
	CHECK(p.wscale == WEIR_WSCALE_NONE && p.mss == 0 && !(p.flags & WEIR_PF_TCP_TS), "absent options");
	CHECK(p.payload_len == 0, "pure ACK");
}

/* NOP NOP TS is taken without the option loop: same result as the loop,
 * and the layout check must not let a wrong length through. */
static void
test_tcp_aligned_timestamps(void)
{
	const uint8_t ts[12] = { 1, 1, 8, 10, 0, 0, 0, 5, 0, 0, 0, 6 };
	const uint8_t ts_eol[16] = { 1, 1, 8, 10, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 0 };
	uint8_t bad[12];
	struct fb f;
	struct weir_pkt p, q;
	unsigned int ip;

	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_TCP, NULL, 0, 0x4000);
	tcp(&f, 0x10, ts, sizeof(ts));
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.flags == (WEIR_PF_L4 | WEIR_PF_TCP_TS) && p.ts_off == 24 &&
	      f.b[p.l4_off + p.ts_off + 3] == 5 && f.b[p.l4_off + p.ts_off + 7] == 6, "ts_off %u flags %#x",
	      p.ts_off, p.flags);
	CHECK(p.mss == 0 && p.wscale == WEIR_WSCALE_NONE && p.sack_ok == 0 && p.sack_n == 0 &&
	      p.payload_off == 14 + 20 + 32 && p.payload_len == 0, "other options absent");

	/* The same options followed by EOL padding go through the loop: equal fields. */
	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_TCP, NULL, 0, 0x4000);
	tcp(&f, 0x10, ts_eol, sizeof(ts_eol));
	ip4_done(&f, ip);
	CHECK(parse(&f, &q) == WEIR_MAL_NONE && q.ts_off == p.ts_off && q.flags == p.flags && q.mss == p.mss &&
	      q.wscale == p.wscale && q.payload_off == p.payload_off + 4, "loop ts_off %u", q.ts_off);

	memcpy(bad, ts, sizeof(bad));
	bad[3] = 11;                    /* TS length 11 in a 12-byte option area */
	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_TCP, NULL, 0, 0x4000);
	tcp(&f, 0x10, bad, sizeof(bad));
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_TCP_OPT, "ts length 11: %s", weir_malformed_name(p.malformed));
}

/* TCP-MD5 (kind 19, RFC 2385) and TCP-AO (kind 29, RFC 5925) sign the
 * segment, window included: the parser flags them (issue 36 item 6). */
static void
test_tcp_signed(void)
{
	/* NOP NOP MD5 (18 bytes: kind, length, 16 digest bytes) */
	uint8_t md5[20] = { 1, 1, 19, 18 };
	/* AO (key ids, 12-byte MAC: 16 bytes) then NOP NOP TS */
	uint8_t ao[28] = { 29, 16, 1, 2, [16] = 1, 1, 8, 10, 0, 0, 0, 5, 0, 0, 0, 6 };
	const uint8_t plain[12] = { 1, 1, 8, 10, 0, 0, 0, 5, 0, 0, 0, 6 };
	struct fb f;
	struct weir_pkt p;
	unsigned int ip;

	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_TCP, NULL, 0, 0);
	tcp(&f, 0x02, md5, sizeof(md5));
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && (p.flags & WEIR_PF_TCP_SIGNED), "md5: flags %#x",
	      p.flags);
	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_TCP, NULL, 0, 0);
	tcp(&f, 0x10, ao, sizeof(ao));
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && (p.flags & WEIR_PF_TCP_SIGNED) &&
	      (p.flags & WEIR_PF_TCP_TS) && p.ts_off == 40, "ao: flags %#x ts_off %u", p.flags, p.ts_off);
	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_TCP, NULL, 0, 0);
	tcp(&f, 0x10, plain, sizeof(plain));
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && !(p.flags & WEIR_PF_TCP_SIGNED), "unsigned: flags %#x",
	      p.flags);
}

static void
test_ipv4_options_and_padding(void)
{
	const uint8_t rr[8] = { 7, 7, 4, 0, 0, 0, 0, 0 };   /* record route, then EOL */
	struct fb f;
	struct weir_pkt p;
	unsigned int ip;

	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_UDP, rr, sizeof(rr), 0);
	put16(&f, 5353);
	put16(&f, 53);
	put16(&f, 12);
	put16(&f, 0);
	put32(&f, 0xdeadbeef);
	ip4_done(&f, ip);
	while (f.n < 60)
		put8(&f, 0);            /* Ethernet padding after a short packet */
	CHECK(parse(&f, &p) == WEIR_MAL_NONE, "malformed %u", p.malformed);
	CHECK((p.flags & WEIR_PF_IP_OPTS) && p.l4_off == 14 + 28, "l4_off %u", p.l4_off);
	CHECK(p.l4proto == IPPROTO_UDP && p.sport == 5353 && p.dport == 53 && p.payload_len == 4,
	      "udp %u>%u len %u", p.sport, p.dport, p.payload_len);
}

static void
test_qinq_ipv6_ext_tcp(void)
{
	const uint16_t tags[2] = { 0x2064, 0x00c8 };         /* PCP 1 VID 100, VID 200 */
	struct fb f;
	struct weir_pkt p;
	unsigned int ip;

	eth(&f, tags, 2, 0x86dd);
	ip = ip6(&f, IPPROTO_HOPOPTS);
	/* hop-by-hop (8 bytes, PadN) -> destination options (16 bytes) -> TCP */
	put8(&f, IPPROTO_DSTOPTS); put8(&f, 0); put8(&f, 1); put8(&f, 4); put32(&f, 0);
	put8(&f, IPPROTO_TCP); put8(&f, 1); put8(&f, 1); put8(&f, 12); put32(&f, 0);
	put32(&f, 0); put32(&f, 0);
	tcp(&f, 0x18, NULL, 0);
	put(&f, "data", 4);
	ip6_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE, "malformed %u", p.malformed);
	CHECK(p.n_vlan == 2 && p.vlan_outer == 0x2064 && p.vlan_inner == 0x00c8, "tags %u %#x %#x",
	      p.n_vlan, p.vlan_outer, p.vlan_inner);
	CHECK(p.l3 == WEIR_L3_IPV6 && p.l3_off == 22 && p.l4_off == 22 + 40 + 24, "off %u %u", p.l3_off, p.l4_off);
	CHECK(p.l4proto == IPPROTO_TCP && p.payload_len == 4 && p.dscp == 46, "tcp payload %u dscp %u",
	      p.payload_len, p.dscp);
	CHECK(p.addr_len == 16 && p.saddr_off == 8 && (p.flags & WEIR_PF_IP_OPTS), "v6 addr");
	CHECK(weir_pkt_manageable(&p), "manageable");
}

static void
test_icmp_echo(void)
{
	struct fb f;
	struct weir_pkt p;
	unsigned int ip;

	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_ICMP, NULL, 0, 0);
	put8(&f, 8); put8(&f, 0); put16(&f, 0); put16(&f, 0x4242); put16(&f, 1);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.sport == 0x0800 && p.dport == 0x4242, "icmp %#x %#x",
	      p.sport, p.dport);

	eth(&f, NULL, 0, 0x86dd);
	ip = ip6(&f, IPPROTO_ICMPV6);
	put8(&f, 129); put8(&f, 0); put16(&f, 0); put16(&f, 0x4343); put16(&f, 1);
	ip6_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.sport == 129 << 8 && p.dport == 0x4343, "icmp6 %#x %#x",
	      p.sport, p.dport);

	/* Not an echo: no identifier. */
	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_ICMP, NULL, 0, 0);
	put8(&f, 3); put8(&f, 4); put16(&f, 0); put32(&f, 1400);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.sport == 0x0304 && p.dport == 0, "unreach");
}

static void
test_non_ip_and_other_proto(void)
{
	struct fb f;
	struct weir_pkt p;
	unsigned int ip;

	eth(&f, NULL, 0, 0x0806);       /* ARP */
	for (int i = 0; i < 28; i++)
		put8(&f, 0);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.l3 == WEIR_L3_OTHER && !weir_pkt_manageable(&p), "arp");

	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, 47, NULL, 0, 0);   /* GRE */
	put32(&f, 0x00000800);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && weir_pkt_manageable(&p) && p.sport == 0 && p.dport == 0,
	      "gre manageable with zero ports");
}

static void
test_fragments(void)
{
	struct fb f;
	struct weir_pkt p;
	unsigned int ip;

	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_UDP, NULL, 0, 0x2000);     /* MF */
	put32(&f, 0); put32(&f, 0);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && (p.flags & WEIR_PF_FRAGMENT) && !weir_pkt_manageable(&p),
	      "v4 first fragment");

	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_UDP, NULL, 0, 0x0010);     /* offset 128 */
	put32(&f, 0);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && (p.flags & WEIR_PF_FRAGMENT), "v4 later fragment");

	eth(&f, NULL, 0, 0x86dd);
	ip = ip6(&f, IPPROTO_FRAGMENT);
	put8(&f, IPPROTO_UDP); put8(&f, 0); put16(&f, 0x0001); put32(&f, 99);   /* M set */
	put32(&f, 0); put32(&f, 0);
	ip6_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && (p.flags & WEIR_PF_FRAGMENT), "v6 fragment");

	/* Atomic fragment (offset 0, no M): a whole packet, parsed through. */
	eth(&f, NULL, 0, 0x86dd);
	ip = ip6(&f, IPPROTO_FRAGMENT);
	put8(&f, IPPROTO_UDP); put8(&f, 0); put16(&f, 0); put32(&f, 99);
	put16(&f, 1); put16(&f, 2); put16(&f, 8); put16(&f, 0);
	ip6_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && !(p.flags & WEIR_PF_FRAGMENT) && weir_pkt_manageable(&p) &&
	      p.sport == 1 && p.dport == 2, "atomic fragment");
}

/* Build a good IPv4/TCP frame, damage it with `mut`, expect `why`. */
static void
expect_malformed(const char *what, unsigned int why, void (*mut)(struct fb *))
{
	struct fb f;
	struct weir_pkt p;
	unsigned int ip;

	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_TCP, NULL, 0, 0);
	tcp(&f, 0x10, syn_opts, sizeof(syn_opts));
	ip4_done(&f, ip);
	mut(&f);
	CHECK(parse(&f, &p) == why && p.malformed == why, "%s: got %s want %s", what,
	      weir_malformed_name(p.malformed), weir_malformed_name(why));
	CHECK(!weir_pkt_manageable(&p), "%s: manageable", what);
}

static void m_trunc_l2(struct fb *f) { f->n = 13; }
static void m_trunc_vlan(struct fb *f) { set16(f, 12, 0x8100); f->n = 16; }
static void m_trunc_l3(struct fb *f) { f->n = 14 + 19; }
static void m_version(struct fb *f) { f->b[14] = 0x65; }
static void m_ihl(struct fb *f) { f->b[14] = 0x44; }
static void m_ihl_past(struct fb *f) { f->b[14] = 0x4f; f->n = 14 + 40; set16(f, 16, 40); }
static void m_iplen_long(struct fb *f) { set16(f, 16, (uint16_t)(f->n - 14 + 1)); }
static void m_iplen_short(struct fb *f) { set16(f, 16, 19); }
static void m_trunc_l4(struct fb *f) { set16(f, 16, 20 + 10); }
static void m_doff_small(struct fb *f) { f->b[14 + 20 + 12] = 0x40; }
static void m_doff_past(struct fb *f) { f->b[14 + 20 + 12] = 0xf0; }
static void m_tcp_opt_len(struct fb *f) { f->b[14 + 20 + 20 + 1] = 0; }      /* MSS length 0 */
static void m_tcp_opt_over(struct fb *f) { f->b[14 + 20 + 20 + 1] = 40; }    /* runs past header */
static void m_tcp_ws_len(struct fb *f) { f->b[14 + 20 + 20 + 18] = 4; }      /* wscale len 4 */

static void
test_malformed_ipv4_tcp(void)
{
	expect_malformed("runt", WEIR_MAL_TRUNC_L2, m_trunc_l2);
	expect_malformed("cut vlan tag", WEIR_MAL_TRUNC_L2, m_trunc_vlan);
	expect_malformed("cut ip header", WEIR_MAL_TRUNC_L3, m_trunc_l3);
	expect_malformed("version 6 in ipv4", WEIR_MAL_IP_VERSION, m_version);
	expect_malformed("ihl 4", WEIR_MAL_IP_IHL, m_ihl);
	expect_malformed("ihl past frame", WEIR_MAL_IP_IHL, m_ihl_past);
	expect_malformed("ip length > frame", WEIR_MAL_IP_LEN, m_iplen_long);
	expect_malformed("ip length < header", WEIR_MAL_IP_LEN, m_iplen_short);
	expect_malformed("tcp cut by ip length", WEIR_MAL_TRUNC_L4, m_trunc_l4);
	expect_malformed("doff 4", WEIR_MAL_TCP_DOFF, m_doff_small);
	expect_malformed("doff past payload", WEIR_MAL_TCP_DOFF, m_doff_past);
	expect_malformed("option length 0", WEIR_MAL_TCP_OPT, m_tcp_opt_len);
	expect_malformed("option past header", WEIR_MAL_TCP_OPT, m_tcp_opt_over);
	expect_malformed("wscale length 4", WEIR_MAL_TCP_OPT, m_tcp_ws_len);
}

static void
test_malformed_other(void)
{
	const uint8_t bad_opt[4] = { 7, 9, 4, 0 };      /* record route claiming 9 bytes in 4 */
	struct fb f;
	struct weir_pkt p;
	unsigned int ip;

	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_UDP, bad_opt, sizeof(bad_opt), 0);
	put16(&f, 1); put16(&f, 2); put16(&f, 8); put16(&f, 0);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_IP_OPT, "ip option: %s", weir_malformed_name(p.malformed));

	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_UDP, NULL, 0, 0);
	put16(&f, 1); put16(&f, 2); put16(&f, 200); put16(&f, 0);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_UDP_LEN, "udp length: %s", weir_malformed_name(p.malformed));

	eth(&f, NULL, 0, 0x86dd);
	ip = ip6(&f, IPPROTO_ROUTING);
	put8(&f, IPPROTO_TCP); put8(&f, 4); put16(&f, 0); put32(&f, 0);        /* claims 40 bytes */
	put32(&f, 0); put32(&f, 0);
	ip6_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_IP6_EXT, "v6 ext: %s", weir_malformed_name(p.malformed));

	eth(&f, NULL, 0, 0x86dd);
	ip = ip6(&f, IPPROTO_TCP);
	tcp(&f, 0x10, NULL, 0);
	ip6_done(&f, ip);
	set16(&f, ip + 4, 0);           /* jumbogram length on Ethernet */
	CHECK(parse(&f, &p) == WEIR_MAL_IP_LEN, "v6 plen 0: %s", weir_malformed_name(p.malformed));

	CHECK(strcmp(weir_malformed_name(WEIR_MAL_TCP_OPT), "tcp_opt") == 0 &&
	      strcmp(weir_malformed_name(999), "unknown") == 0, "names");
	for (unsigned int r = 0; r < WEIR_MAL__COUNT; r++)
		CHECK(strcmp(weir_malformed_name(r), "unknown") != 0, "reason %u has a name", r);
}

static void
test_vlan_depths(void)
{
	const uint16_t tags[9] = { 0xe00a, 20, 30, 40, 50, 60, 70, 80, 90 };
	struct fb f;
	struct weir_pkt p;
	unsigned int ip;

	eth(&f, tags, 1, 0x0800);       /* one 802.1Q tag, PCP 7 VID 10 */
	ip = ip4(&f, IPPROTO_UDP, NULL, 0, 0);
	put16(&f, 1); put16(&f, 2); put16(&f, 8); put16(&f, 0);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.n_vlan == 1 && p.vlan_outer == 0xe00a &&
	      p.vlan_inner == 0 && (p.flags & WEIR_PF_VLAN) && p.l3_off == 18 && p.ethertype == 0x0800,
	      "one tag: n %u outer %#x l3 %u", p.n_vlan, p.vlan_outer, p.l3_off);
	CHECK(p.payload_len == 0 && p.payload_off == 18 + 28, "empty udp %u+%u", p.payload_off, p.payload_len);

	/* Three tags: the parser skips them all but records only two. */
	eth(&f, tags, 3, 0x0800);
	ip = ip4(&f, IPPROTO_UDP, NULL, 0, 0);
	put16(&f, 1); put16(&f, 2); put16(&f, 8); put16(&f, 0);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.n_vlan == 2 && p.vlan_inner == 20 && p.l3_off == 26 &&
	      weir_pkt_manageable(&p), "three tags: n %u l3 %u", p.n_vlan, p.l3_off);

	/* More tags than the parser follows: untrusted. */
	eth(&f, tags, 9, 0x0800);
	for (int i = 0; i < 40; i++)
		put8(&f, 0);
	CHECK(parse(&f, &p) == WEIR_MAL_TRUNC_L2, "nine tags: %s", weir_malformed_name(p.malformed));

	/* A tagged ARP is bridged as non-IP with its tag recorded. */
	eth(&f, tags, 1, 0x0806);
	for (int i = 0; i < 28; i++)
		put8(&f, 0);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.l3 == WEIR_L3_OTHER && p.ethertype == 0x0806 &&
	      p.n_vlan == 1 && p.addr_len == 0 && !(p.flags & WEIR_PF_L4), "tagged arp");
}

static void
test_ipv6_udp_icmp_none(void)
{
	struct fb f;
	struct weir_pkt p;
	unsigned int ip, len;

	eth(&f, NULL, 0, 0x86dd);
	ip = ip6(&f, IPPROTO_UDP);
	put16(&f, 5000); put16(&f, 53); put16(&f, 8 + 6); put16(&f, 0);
	put(&f, "abcdef", 6);
	ip6_done(&f, ip);
	len = f.n;
	while (f.n < len + 8)
		put8(&f, 0xee);         /* padding after the IPv6 packet */
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.l3 == WEIR_L3_IPV6 && p.ethertype == 0x86dd, "v6 udp");
	CHECK(p.ip_len == len - 14 && p.l4_off == 54 && p.payload_off == 62 && p.payload_len == 6,
	      "v6 udp ip_len %u payload %u+%u", p.ip_len, p.payload_off, p.payload_len);
	CHECK(p.sport == 5000 && p.dport == 53 && p.flags == WEIR_PF_L4 && p.dscp == 46, "v6 udp fields");
	CHECK(f.b[p.l3_off + p.saddr_off + 15] == 1 && f.b[p.l3_off + p.saddr_off + p.addr_len + 15] == 2,
	      "v6 saddr/daddr");

	eth(&f, NULL, 0, 0x86dd);       /* ICMPv6 echo request */
	ip = ip6(&f, IPPROTO_ICMPV6);
	put8(&f, 128); put8(&f, 0); put16(&f, 0); put16(&f, 0x4444); put16(&f, 7);
	put32(&f, 0);
	ip6_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.l4proto == IPPROTO_ICMPV6 && p.sport == 128 << 8 &&
	      p.dport == 0x4444 && p.payload_len == 4 && weir_pkt_manageable(&p), "icmp6 echo request");

	eth(&f, NULL, 0, 0x86dd);       /* no next header: an address-pair flow */
	ip = ip6(&f, IPPROTO_NONE);
	put32(&f, 0);
	ip6_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.l4proto == IPPROTO_NONE && p.l4_off == 54 &&
	      p.sport == 0 && p.dport == 0 && weir_pkt_manageable(&p), "v6 no next header");
}

static void
test_fragment_fields(void)
{
	struct fb f;
	struct weir_pkt p;
	unsigned int ip;

	/* A later IPv4 fragment: its first bytes are data, not a UDP header. */
	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_UDP, NULL, 0, 0x2010);     /* MF, offset 128 */
	put32(&f, 0xffffffff); put32(&f, 0xffffffff);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.flags == WEIR_PF_FRAGMENT && p.l4proto == IPPROTO_UDP &&
	      p.l4_off == 34 && p.sport == 0 && p.dport == 0 && p.ip_len == 28, "v4 fragment fields %#x",
	      p.flags);

	/* IPv6 fragment after a hop-by-hop header: l4_off is past the fragment header. */
	eth(&f, NULL, 0, 0x86dd);
	ip = ip6(&f, IPPROTO_HOPOPTS);
	put8(&f, IPPROTO_FRAGMENT); put8(&f, 0); put8(&f, 1); put8(&f, 4); put32(&f, 0);
	put8(&f, IPPROTO_TCP); put8(&f, 0); put16(&f, 0x0008); put32(&f, 7);    /* offset 1, no M */
	put32(&f, 0); put32(&f, 0);
	ip6_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && (p.flags & WEIR_PF_FRAGMENT) && !(p.flags & WEIR_PF_L4) &&
	      p.l4proto == IPPROTO_TCP && p.l4_off == 14 + 40 + 16, "v6 last fragment: l4_off %u", p.l4_off);

	/* A fragment with a broken IP option is malformed, not a fragment. */
	eth(&f, NULL, 0, 0x0800);
	{
		const uint8_t bad[4] = { 0x44, 1, 0, 0 };      /* timestamp option, length 1 */

		ip = ip4(&f, IPPROTO_UDP, bad, sizeof(bad), 0x2000);
	}
	put32(&f, 0); put32(&f, 0);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_IP_OPT, "fragment with bad option: %s", weir_malformed_name(p.malformed));
}

/* IPv6 and UDP forms of the reasons the IPv4/TCP table above triggers. */
static void
test_malformed_ipv6(void)
{
	struct fb f;
	struct weir_pkt p;
	unsigned int ip;

	eth(&f, NULL, 0, 0x86dd);
	ip = ip6(&f, IPPROTO_TCP);
	tcp(&f, 0x10, NULL, 0);
	ip6_done(&f, ip);
	f.n = 14 + 39;
	CHECK(parse(&f, &p) == WEIR_MAL_TRUNC_L3, "v6 header cut: %s", weir_malformed_name(p.malformed));
	f.n = 14 + 40 + 20;
	f.b[14] = 0x45;
	CHECK(parse(&f, &p) == WEIR_MAL_IP_VERSION, "v4 in v6: %s", weir_malformed_name(p.malformed));

	eth(&f, NULL, 0, 0x86dd);
	ip = ip6(&f, IPPROTO_UDP);
	put32(&f, 0);
	ip6_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_TRUNC_L4, "v6 udp cut: %s", weir_malformed_name(p.malformed));

	eth(&f, NULL, 0, 0x86dd);
	ip = ip6(&f, IPPROTO_UDP);
	put16(&f, 1); put16(&f, 2); put16(&f, 7); put16(&f, 0);
	ip6_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_UDP_LEN, "v6 udp len 7: %s", weir_malformed_name(p.malformed));

	/* Nine destination-options headers: more than the parser follows. */
	eth(&f, NULL, 0, 0x86dd);
	ip = ip6(&f, IPPROTO_DSTOPTS);
	for (int i = 0; i < 9; i++) {
		put8(&f, i < 8 ? IPPROTO_DSTOPTS : IPPROTO_UDP); put8(&f, 0); put8(&f, 1); put8(&f, 4);
		put32(&f, 0);
	}
	put16(&f, 1); put16(&f, 2); put16(&f, 8); put16(&f, 0);
	ip6_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_IP6_EXT, "long chain: %s", weir_malformed_name(p.malformed));

	/* Fewer than 8 bytes left for an extension header. */
	eth(&f, NULL, 0, 0x86dd);
	ip = ip6(&f, IPPROTO_FRAGMENT);
	put32(&f, 0);
	ip6_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_IP6_EXT, "short ext: %s", weir_malformed_name(p.malformed));

	/* AH is where the chain stops (what follows is covered by its check);
	 * its length counts 4-byte words minus 2: a length of 4 means 24 bytes. */
	eth(&f, NULL, 0, 0x86dd);
	ip = ip6(&f, IPPROTO_AH);
	put8(&f, IPPROTO_UDP); put8(&f, 4); put16(&f, 0);
	put32(&f, 0x1001); put32(&f, 7);
	for (int i = 0; i < 3; i++)
		put32(&f, 0);
	put16(&f, 1); put16(&f, 2); put16(&f, 8); put16(&f, 0);
	ip6_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.l4_off == 14 + 40 && p.l4proto == IPPROTO_AH &&
	      p.ipsec == WEIR_IPSEC_AH && p.sport == 0 && p.dport == 0x1001 && p.seq == 7,
	      "ah: %s l4_off %u", weir_malformed_name(p.malformed), p.l4_off);

	eth(&f, NULL, 0, 0x0800);       /* IPv4 UDP header cut by the IP length */
	ip = ip4(&f, IPPROTO_UDP, NULL, 0, 0);
	put32(&f, 0);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_TRUNC_L4, "v4 udp cut: %s", weir_malformed_name(p.malformed));
}

/* Every prefix of a valid frame, placed so the byte after it is unmapped:
 * any read past `len` faults and fails the test run. */
static void
test_never_reads_past_end(void)
{
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *mem = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	const uint16_t tags[2] = { 100, 200 };
	struct fb frames[4];
	unsigned int ip, checked = 0;

	CHECK(mem != MAP_FAILED, "mmap");
	if (mem == MAP_FAILED)
		return;
	CHECK(mprotect(mem + page, (size_t)page, PROT_NONE) == 0, "mprotect");

	eth(&frames[0], NULL, 0, 0x0800);
	ip = ip4(&frames[0], IPPROTO_TCP, NULL, 0, 0);
	tcp(&frames[0], 0x02, syn_opts, sizeof(syn_opts));
	ip4_done(&frames[0], ip);
	eth(&frames[1], tags, 2, 0x86dd);
	ip = ip6(&frames[1], IPPROTO_HOPOPTS);
	put8(&frames[1], IPPROTO_TCP); put8(&frames[1], 0); put8(&frames[1], 1); put8(&frames[1], 4);
	put32(&frames[1], 0);
	tcp(&frames[1], 0x10, syn_opts, sizeof(syn_opts));
	ip6_done(&frames[1], ip);
	eth(&frames[2], NULL, 0, 0x0800);
	ip = ip4(&frames[2], IPPROTO_ICMP, NULL, 0, 0);
	put8(&frames[2], 8); put8(&frames[2], 0); put16(&frames[2], 0); put32(&frames[2], 7);
	ip4_done(&frames[2], ip);
	/* IPv6 AH (the chain stops there) over an atomic fragment header and UDP. */
	eth(&frames[3], NULL, 0, 0x86dd);
	ip = ip6(&frames[3], IPPROTO_AH);
	put8(&frames[3], IPPROTO_FRAGMENT); put8(&frames[3], 1); put16(&frames[3], 0); put32(&frames[3], 9);
	put32(&frames[3], 1);
	put8(&frames[3], IPPROTO_UDP); put8(&frames[3], 0); put16(&frames[3], 0); put32(&frames[3], 5);
	put16(&frames[3], 1); put16(&frames[3], 2); put16(&frames[3], 9); put16(&frames[3], 0);
	put8(&frames[3], 'x');
	ip6_done(&frames[3], ip);

	for (unsigned int k = 0; k < RTE_DIM(frames); k++) {
		for (unsigned int len = 0; len <= frames[k].n; len++) {
			uint8_t *at = mem + page - len;
			struct weir_pkt p;

			memcpy(at, frames[k].b, len);
			weir_parse(at, len, &p);
			/* Only the whole frame is valid; every cut is malformed. */
			if (len == frames[k].n)
				CHECK(p.malformed == WEIR_MAL_NONE, "frame %u whole: %s", k,
				      weir_malformed_name(p.malformed));
			else
				CHECK(p.malformed != WEIR_MAL_NONE, "frame %u cut at %u parsed as good", k, len);
			checked++;
		}
	}
	CHECK(checked > 250, "prefixes checked: %u", checked);
	munmap(mem, (size_t)page * 2);
}

/* ESP, AH and ESP in UDP 4500: the SA (SPI) and sequence number are read,
 * nothing past them; bad headers get their reasons. */
static void
test_ipsec(void)
{
	struct fb f;
	struct weir_pkt p;
	unsigned int ip;

	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_ESP, NULL, 0, 0);
	put32(&f, 0xc0ffee01); put32(&f, 42); put32(&f, 0xdeadbeef); put32(&f, 0);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && weir_pkt_manageable(&p) && p.ipsec == WEIR_IPSEC_ESP &&
	      p.l4proto == IPPROTO_ESP && p.sport == 0xc0ff && p.dport == 0xee01 && p.seq == 42 &&
	      p.payload_off == 14 + 20 && p.payload_len == 16 && p.dscp == 46,
	      "esp4: %s ipsec %u seq %u", weir_malformed_name(p.malformed), p.ipsec, p.seq);

	eth(&f, NULL, 0, 0x86dd);
	ip = ip6(&f, IPPROTO_HOPOPTS);
	put8(&f, IPPROTO_ESP); put8(&f, 0); put8(&f, 1); put8(&f, 4); put32(&f, 0);
	put32(&f, 0x200); put32(&f, 0xffffffff); put32(&f, 1);
	ip6_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.ipsec == WEIR_IPSEC_ESP && p.l4_off == 14 + 48 &&
	      p.dport == 0x200 && p.seq == 0xffffffff, "esp6: %s", weir_malformed_name(p.malformed));

	/* AH over TCP in IPv4: the TCP header is never read (no flags, no seq). */
	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_AH, NULL, 0, 0);
	put8(&f, IPPROTO_TCP); put8(&f, 4); put16(&f, 0); put32(&f, 0x300); put32(&f, 5);
	put32(&f, 1); put32(&f, 2); put32(&f, 3);
	tcp(&f, 0x02, NULL, 0);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.ipsec == WEIR_IPSEC_AH && p.tcp_flags == 0 &&
	      p.dport == 0x300 && p.seq == 5 && p.wscale == WEIR_WSCALE_NONE,
	      "ah4 tcp: %s flags %x", weir_malformed_name(p.malformed), p.tcp_flags);

	/* ESP in UDP 4500 (NAT-T); the IKE marker and the keepalive stay UDP. */
	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_UDP, NULL, 0, 0);
	put16(&f, 61000); put16(&f, 4500); put16(&f, 8 + 12); put16(&f, 0);
	put32(&f, 0x400); put32(&f, 9); put32(&f, 0);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.ipsec == WEIR_IPSEC_NATT && p.l4proto == IPPROTO_UDP &&
	      p.dport == 0x400 && p.sport == 0 && p.seq == 9, "natt: %s ipsec %u",
	      weir_malformed_name(p.malformed), p.ipsec);
	set16(&f, 14 + 20 + 8, 0); set16(&f, 14 + 20 + 10, 0);         /* non-ESP marker: IKE */
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.ipsec == WEIR_IPSEC_NONE && p.sport == 61000 &&
	      p.dport == 4500, "ike: %s ipsec %u", weir_malformed_name(p.malformed), p.ipsec);
	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_UDP, NULL, 0, 0);
	put16(&f, 4500); put16(&f, 4500); put16(&f, 9); put16(&f, 0); put8(&f, 0xff);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.ipsec == WEIR_IPSEC_NONE, "keepalive: %s",
	      weir_malformed_name(p.malformed));

	/* Bad input: short headers, SPI 0, a bogus AH length. */
	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_ESP, NULL, 0, 0);
	put32(&f, 0x500); put16(&f, 0);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_IPSEC_SHORT, "esp short: %s", weir_malformed_name(p.malformed));
	eth(&f, NULL, 0, 0x0800);
	ip = ip4(&f, IPPROTO_ESP, NULL, 0, 0);
	put32(&f, 0); put32(&f, 1); put32(&f, 0);
	ip4_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_IPSEC_SPI0 && !weir_pkt_manageable(&p), "esp spi0: %s",
	      weir_malformed_name(p.malformed));
	eth(&f, NULL, 0, 0x86dd);
	ip = ip6(&f, IPPROTO_AH);
	put8(&f, IPPROTO_NONE); put8(&f, 0); put16(&f, 0); put32(&f, 0x600); put32(&f, 1);
	ip6_done(&f, ip);
	CHECK(parse(&f, &p) == WEIR_MAL_IPSEC_SHORT, "ah len 0: %s", weir_malformed_name(p.malformed));
	/* On UDP 4500 a payload too short to be ESP (8 bytes or fewer) is
	 * UDP for the receiver's IKE socket, as IKE is: not malformed. */
	for (unsigned int n = 0; n <= 8; n += 2) {
		eth(&f, NULL, 0, 0x0800);
		ip = ip4(&f, IPPROTO_UDP, NULL, 0, 0);
		put16(&f, 4500); put16(&f, 4500); put16(&f, (uint16_t)(8 + n)); put16(&f, 0);
		for (unsigned int i = 0; i < n; i++)
			put8(&f, (uint8_t)(0x70 + i));
		ip4_done(&f, ip);
		CHECK(parse(&f, &p) == WEIR_MAL_NONE && p.ipsec == WEIR_IPSEC_NONE && p.sport == 4500,
		      "natt %u bytes: %s ipsec %u", n, weir_malformed_name(p.malformed), p.ipsec);
	}
	CHECK(strcmp(weir_malformed_name(WEIR_MAL_IPSEC_SPI0), "ipsec_spi0") == 0, "name");
}

int
main(void)
{
	test_ipsec();
	test_ipv4_tcp_options();
	test_tcp_sack_blocks();
	test_tcp_aligned_timestamps();
	test_tcp_signed();
	test_ipv4_options_and_padding();
	test_qinq_ipv6_ext_tcp();
	test_icmp_echo();
	test_non_ip_and_other_proto();
	test_fragments();
	test_malformed_ipv4_tcp();
	test_malformed_other();
	test_vlan_depths();
	test_ipv6_udp_icmp_none();
	test_fragment_fields();
	test_malformed_ipv6();
	test_never_reads_past_end();
	return unit_report();
}
