/* SPDX-License-Identifier: BSD-3-Clause
 * weir: L2-L4 parsing. Every read is bounds-checked against the frame length
 * (or the IP length when that is shorter); a frame that fails a check gets a
 * malformed reason and parsing stops there.
 */
#include <string.h>
#include <netinet/in.h>

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>

#include "parse.h"

#define ETH_HLEN 14
#define VLAN_HLEN 4
#define MAX_TAGS 8              /* tags skipped before giving up (QinQinQ...) */
#define MAX_IP6_EXT 8           /* extension headers followed before giving up */

#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_IPV6 0x86dd
#define ETHERTYPE_VLAN 0x8100
#define ETHERTYPE_QINQ 0x88a8
#define ETHERTYPE_QINQ_OLD 0x9100

#ifndef IPPROTO_UDPLITE
#define IPPROTO_UDPLITE 136
#endif
#ifndef IPPROTO_SCTP
#define IPPROTO_SCTP 132
#endif
#ifndef IPPROTO_MH
#define IPPROTO_MH 135
#endif

static const char *const malformed_names[WEIR_MAL__COUNT] = {
	[WEIR_MAL_NONE] = "none",
	[WEIR_MAL_TRUNC_L2] = "trunc_l2",
	[WEIR_MAL_TRUNC_L3] = "trunc_l3",
	[WEIR_MAL_IP_VERSION] = "ip_version",
	[WEIR_MAL_IP_IHL] = "ip_ihl",
	[WEIR_MAL_IP_LEN] = "ip_len",
	[WEIR_MAL_IP_OPT] = "ip_opt",
	[WEIR_MAL_IP6_EXT] = "ip6_ext",
	[WEIR_MAL_TRUNC_L4] = "trunc_l4",
	[WEIR_MAL_TCP_DOFF] = "tcp_doff",
	[WEIR_MAL_TCP_OPT] = "tcp_opt",
	[WEIR_MAL_UDP_LEN] = "udp_len",
	[WEIR_MAL_IPSEC_SHORT] = "ipsec_short",
	[WEIR_MAL_IPSEC_SPI0] = "ipsec_spi0",
};

const char *
weir_malformed_name(unsigned int reason)
{
	return reason < WEIR_MAL__COUNT ? malformed_names[reason] : "unknown";
}

/* Unaligned big-endian loads: frames start at any offset after tags. */
static inline uint16_t
rd16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return rte_be_to_cpu_16(v);
}

static inline uint32_t
rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return rte_be_to_cpu_32(v);
}

static inline unsigned int
fail(struct weir_pkt *p, enum weir_malformed why)
{
	p->malformed = (uint8_t)why;
	return why;
}

/* IPv4 options: EOL and NOP are one byte; every other option carries a
 * length >= 2 that must stay inside the header. */
static int
ipv4_options_ok(const uint8_t *o, unsigned int len)
{
	unsigned int i = 0;

	while (i < len) {
		if (o[i] == 0)                  /* EOL: the rest is padding */
			return 1;
		if (o[i] == 1) {                /* NOP */
			i++;
			continue;
		}
		if (i + 1 >= len || o[i + 1] < 2 || i + o[i + 1] > len)
			return 0;
		i += o[i + 1];
	}
	return 1;
}

/* TCP options: record MSS, window scale, SACK-permitted, SACK blocks and
 * timestamps, and flag a signature (TCP-MD5, TCP-AO); reject any length
 * that is wrong for its kind or overruns. */
static int
tcp_options(const uint8_t *tcp, unsigned int hlen, struct weir_pkt *p)
{
	unsigned int i = 20;

	/* Almost every segment of an established connection carries exactly
	 * NOP NOP TS (RFC 7323 appendix A layout): take it without the loop. */
	if (likely(hlen == 32 && rd32(tcp + 20) == 0x0101080a)) {
		p->ts_off = 24;
		p->flags |= WEIR_PF_TCP_TS;
		return 1;
	}
	while (i < hlen) {
		uint8_t kind = tcp[i], olen;

		if (kind == 0)
			break;
		if (kind == 1) {
			i++;
			continue;
		}
		if (i + 1 >= hlen)
			return 0;
		olen = tcp[i + 1];
		if (olen < 2 || i + olen > hlen)
			return 0;
		switch (kind) {
		case 2:         /* MSS */
			if (olen != 4)
				return 0;
			p->mss = rd16(tcp + i + 2);
			break;
		case 3:         /* window scale */
			if (olen != 3)
				return 0;
			p->wscale = tcp[i + 2];
			break;
		case 4:         /* SACK permitted */
			if (olen != 2)
				return 0;
			p->sack_ok = 1;
			break;
		case 5:         /* SACK blocks: 8 bytes each, at most 4 fit */
			if ((olen - 2) % 8 != 0 || olen == 2)
				return 0;
			p->sack_off = (uint8_t)(i + 2);
			p->sack_n = (uint8_t)((olen - 2) / 8);
			p->flags |= WEIR_PF_TCP_SACK;
			break;
		case 8:         /* timestamps */
			if (olen != 10)
				return 0;
			p->ts_off = (uint8_t)(i + 2);
			p->flags |= WEIR_PF_TCP_TS;
			break;
		case 19:        /* TCP-MD5 signature (RFC 2385) */
		case 29:        /* TCP-AO (RFC 5925) */
			p->flags |= WEIR_PF_TCP_SIGNED;
			break;
		default:
			break;
		}
		i += olen;
	}
	return 1;
}

/* The SPI and sequence number at `h` (ESP's first 8 bytes, AH's bytes 4-11):
 * the SA is the flow; the SPI goes where ports would. */
static unsigned int
ipsec_sa(const uint8_t *h, struct weir_pkt *p, enum weir_ipsec kind)
{
	uint32_t spi = rd32(h);

	if (spi == 0)
		return fail(p, WEIR_MAL_IPSEC_SPI0);
	p->ipsec = (uint8_t)kind;
	p->sport = (uint16_t)(spi >> 16);
	p->dport = (uint16_t)spi;
	p->seq = rd32(h + 4);
	return WEIR_MAL_NONE;
}

/* UDP to or from port 4500 (RFC 3948). Only ESP there is an SA, told
 * apart as a receiving stack tells it (Linux's ESP-in-UDP receive does the
 * same): more than the 8 bytes of SPI and sequence number, and a first
 * word that is not the zero non-ESP marker of IKE. Everything else is UDP
 * for the receiver's IKE socket, so ordinary UDP here, never malformed:
 * IKE, the 1-byte 0xff NAT keepalive, and payloads too short to be ESP
 * (ESP has at least its 2-byte trailer past the sequence number). */
static void
natt(const uint8_t *frame, uint32_t l4, struct weir_pkt *p)
{
	const uint8_t *u = frame + l4 + 8;

	if (p->payload_len <= 8 || rd32(u) == 0)
		return;
	ipsec_sa(u, p, WEIR_IPSEC_NATT);        /* the SPI is not 0: cannot fail */
}

/* L4 header at `l4` with `avail` bytes of IP payload in the frame. */
static unsigned int
parse_l4(const uint8_t *frame, uint32_t l4, uint32_t avail, struct weir_pkt *p)
{
	const uint8_t *h = frame + l4;

	p->l4_off = (uint16_t)l4;
	switch (p->l4proto) {
	case IPPROTO_TCP: {
		unsigned int doff;

		if (avail < 20)
			return fail(p, WEIR_MAL_TRUNC_L4);
		doff = (unsigned int)(h[12] >> 4) * 4;
		if (doff < 20 || doff > avail)
			return fail(p, WEIR_MAL_TCP_DOFF);
		p->sport = rd16(h);
		p->dport = rd16(h + 2);
		p->seq = rd32(h + 4);
		p->ack = rd32(h + 8);
		p->tcp_flags = h[13];
		p->win = rd16(h + 14);
		if (doff > 20 && !tcp_options(h, doff, p))
			return fail(p, WEIR_MAL_TCP_OPT);
		p->payload_off = (uint16_t)(l4 + doff);
		p->payload_len = (uint16_t)(avail - doff);
		break;
	}
	case IPPROTO_UDP:
	case IPPROTO_UDPLITE: {
		uint16_t ulen;

		if (avail < 8)
			return fail(p, WEIR_MAL_TRUNC_L4);
		ulen = rd16(h + 4);
		/* UDP-Lite's field is a checksum coverage, not a length. */
		if (p->l4proto == IPPROTO_UDP && (ulen < 8 || ulen > avail))
			return fail(p, WEIR_MAL_UDP_LEN);
		p->sport = rd16(h);
		p->dport = rd16(h + 2);
		p->payload_off = (uint16_t)(l4 + 8);
		p->payload_len = (uint16_t)((p->l4proto == IPPROTO_UDP ? ulen : avail) - 8);
		if (unlikely(p->l4proto == IPPROTO_UDP &&
			     (p->sport == WEIR_NATT_PORT || p->dport == WEIR_NATT_PORT)))
			natt(frame, l4, p);
		break;
	}
	case IPPROTO_ESP:
		if (avail < 8)
			return fail(p, WEIR_MAL_IPSEC_SHORT);
		if (ipsec_sa(h, p, WEIR_IPSEC_ESP) != WEIR_MAL_NONE)
			return p->malformed;
		p->payload_off = (uint16_t)l4;
		p->payload_len = (uint16_t)avail;
		break;
	case IPPROTO_AH: {
		/* Length in 4-byte words minus 2; SPI and sequence at 4..11. */
		uint32_t hlen;

		if (avail < 12)
			return fail(p, WEIR_MAL_IPSEC_SHORT);
		hlen = ((uint32_t)h[1] + 2) * 4;
		if (hlen < 12 || hlen > avail)
			return fail(p, WEIR_MAL_IPSEC_SHORT);
		if (ipsec_sa(h + 4, p, WEIR_IPSEC_AH) != WEIR_MAL_NONE)
			return p->malformed;
		p->payload_off = (uint16_t)l4;
		p->payload_len = (uint16_t)avail;
		break;
	}
	case IPPROTO_SCTP:
		if (avail < 12)
			return fail(p, WEIR_MAL_TRUNC_L4);
		p->sport = rd16(h);
		p->dport = rd16(h + 2);
		p->payload_off = (uint16_t)(l4 + 12);
		p->payload_len = (uint16_t)(avail - 12);
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6: {
		uint8_t type;

		if (avail < 8)
			return fail(p, WEIR_MAL_TRUNC_L4);
		type = h[0];
		p->sport = (uint16_t)(type << 8 | h[1]);
		/* Echo request/reply carry an identifier that pairs them. */
		if (p->l4proto == IPPROTO_ICMP ? (type == 8 || type == 0) : (type == 128 || type == 129))
			p->dport = rd16(h + 4);
		p->payload_off = (uint16_t)(l4 + 8);
		p->payload_len = (uint16_t)(avail - 8);
		break;
	}
	default:
		/* GRE and other tunnels: a flow per address pair. */
		p->payload_off = (uint16_t)l4;
		p->payload_len = (uint16_t)avail;
		break;
	}
	p->flags |= WEIR_PF_L4;
	return WEIR_MAL_NONE;
}

static unsigned int
parse_ipv4(const uint8_t *frame, uint32_t len, uint32_t l3, struct weir_pkt *p)
{
	const uint8_t *ip = frame + l3;
	unsigned int ihl, tot;
	uint16_t frag;

	if (len - l3 < 20)
		return fail(p, WEIR_MAL_TRUNC_L3);
	if ((ip[0] >> 4) != 4)
		return fail(p, WEIR_MAL_IP_VERSION);
	ihl = (unsigned int)(ip[0] & 0x0f) * 4;
	if (ihl < 20 || ihl > len - l3)
		return fail(p, WEIR_MAL_IP_IHL);
	tot = rd16(ip + 2);
	/* Shorter frames than the IP length are truncated; longer ones carry
	 * Ethernet padding, which is fine. */
	if (tot < ihl || tot > len - l3)
		return fail(p, WEIR_MAL_IP_LEN);
	p->l3 = WEIR_L3_IPV4;
	p->ip_len = (uint16_t)tot;
	p->dscp = ip[1] >> 2;
	p->l4proto = ip[9];
	p->addr_len = 4;
	p->saddr_off = 12;
	if (ihl > 20) {
		p->flags |= WEIR_PF_IP_OPTS;
		if (!ipv4_options_ok(ip + 20, ihl - 20))
			return fail(p, WEIR_MAL_IP_OPT);
	}
	frag = rd16(ip + 6);
	if (frag & 0x3fff) {            /* MF set or a non-zero offset */
		p->flags |= WEIR_PF_FRAGMENT;
		p->l4_off = (uint16_t)(l3 + ihl);
		return WEIR_MAL_NONE;
	}
	return parse_l4(frame, l3 + ihl, tot - ihl, p);
}

/* AH is not followed: what comes after it (TCP...) is covered by its
 * integrity check, so the packet is the SA's and nothing may read it as a
 * TCP segment to rewrite. */
static int
ip6_is_ext(uint8_t nh)
{
	return nh == IPPROTO_HOPOPTS || nh == IPPROTO_ROUTING || nh == IPPROTO_DSTOPTS ||
	       nh == IPPROTO_FRAGMENT || nh == IPPROTO_MH;
}

static unsigned int
parse_ipv6(const uint8_t *frame, uint32_t len, uint32_t l3, struct weir_pkt *p)
{
	const uint8_t *ip = frame + l3;
	uint32_t plen, off, end;
	uint8_t nh;

	if (len - l3 < 40)
		return fail(p, WEIR_MAL_TRUNC_L3);
	if ((ip[0] >> 4) != 6)
		return fail(p, WEIR_MAL_IP_VERSION);
	plen = rd16(ip + 4);
	/* A zero payload length means a jumbogram, which Ethernet cannot carry. */
	if (plen == 0 || plen > len - l3 - 40)
		return fail(p, WEIR_MAL_IP_LEN);
	p->l3 = WEIR_L3_IPV6;
	p->ip_len = (uint16_t)(plen + 40);
	p->dscp = (uint8_t)(((ip[0] & 0x0f) << 2) | (ip[1] >> 6));
	p->addr_len = 16;
	p->saddr_off = 8;
	nh = ip[6];
	off = l3 + 40;
	end = l3 + 40 + plen;

	for (unsigned int n = 0; ip6_is_ext(nh); n++) {
		uint32_t hlen;

		if (n == MAX_IP6_EXT || end - off < 8)
			return fail(p, WEIR_MAL_IP6_EXT);
		p->flags |= WEIR_PF_IP_OPTS;
		if (nh == IPPROTO_FRAGMENT) {
			uint16_t fo = rd16(frame + off + 2);

			nh = frame[off];
			/* An atomic fragment (offset 0, no MF) is a whole packet. */
			if (fo & 0xfff9) {
				p->l4proto = nh;
				p->flags |= WEIR_PF_FRAGMENT;
				p->l4_off = (uint16_t)(off + 8);
				return WEIR_MAL_NONE;
			}
			off += 8;
			continue;
		}
		hlen = ((uint32_t)frame[off + 1] + 1) * 8;
		if (hlen > end - off)
			return fail(p, WEIR_MAL_IP6_EXT);
		nh = frame[off];
		off += hlen;
	}
	p->l4proto = nh;
	if (nh == IPPROTO_NONE) {
		p->l4_off = p->payload_off = (uint16_t)off;
		p->flags |= WEIR_PF_L4;
		return WEIR_MAL_NONE;
	}
	return parse_l4(frame, off, end - off, p);
}

/* ARP, RARP, LLDP, slow protocols (LACP, marker), EAPOL; and anything to
 * 01:80:c2:00:00:00-0f, the group 802.1D bridges never forward (STP's
 * BPDUs are 802.3 frames with a length, not an ethertype). */
static inline int
is_l2_control(const uint8_t *frame, uint16_t et)
{
	static const uint8_t reserved[5] = { 0x01, 0x80, 0xc2, 0x00, 0x00 };

	return et == 0x0806 || et == 0x8035 || et == 0x88cc || et == 0x8809 || et == 0x888e ||
	       (memcmp(frame, reserved, sizeof(reserved)) == 0 && (frame[5] & 0xf0) == 0);
}

unsigned int
weir_parse(const uint8_t *frame, uint32_t len, struct weir_pkt *p)
{
	uint32_t off = ETH_HLEN;
	uint16_t et;

	memset(p, 0, sizeof(*p));
	p->wscale = WEIR_WSCALE_NONE;
	if (unlikely(len < ETH_HLEN))
		return fail(p, WEIR_MAL_TRUNC_L2);
	/* Frames beyond 64 KiB cannot be described by 16-bit offsets. */
	if (unlikely(len > UINT16_MAX))
		len = UINT16_MAX;
	et = rd16(frame + 12);

	for (unsigned int tags = 0; et == ETHERTYPE_VLAN || et == ETHERTYPE_QINQ ||
				    et == ETHERTYPE_QINQ_OLD; tags++) {
		if (tags == MAX_TAGS || len - off < VLAN_HLEN)
			return fail(p, WEIR_MAL_TRUNC_L2);
		if (tags == 0)
			p->vlan_outer = rd16(frame + off);
		else if (tags == 1)
			p->vlan_inner = rd16(frame + off);
		if (p->n_vlan < 2)
			p->n_vlan++;
		p->flags |= WEIR_PF_VLAN;
		et = rd16(frame + off + 2);
		off += VLAN_HLEN;
	}
	p->ethertype = et;
	p->l3_off = (uint16_t)off;

	if (likely(et == ETHERTYPE_IPV4))
		return parse_ipv4(frame, len, off, p);
	if (et == ETHERTYPE_IPV6)
		return parse_ipv6(frame, len, off, p);
	/* Not IP. Only here, off the IP path, is the frame looked at for L2
	 * control (the link's own signalling, never to be queued). */
	if (is_l2_control(frame, et))
		p->flags |= WEIR_PF_L2_CONTROL;
	return WEIR_MAL_NONE;
}
