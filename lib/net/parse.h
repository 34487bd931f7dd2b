/* SPDX-License-Identifier: BSD-3-Clause
 * weir: L2-L4 packet parsing.
 *
 * The parser reads one contiguous buffer (an mbuf's first segment) and fills a
 * compact meta-data record that every later stage uses instead of touching the
 * headers again. It never reads past `len`. A frame it cannot fully trust is
 * given a `malformed` reason; the rule for such frames is simple and stated
 * once here: they are not managed (no flow) and are counted per reason by
 * the caller. Fragments are not malformed but are unmanaged too
 * (no L4 header to key on in non-first fragments), flagged WEIR_PF_FRAGMENT.
 * What the worker does with each kind (L2 control ahead of shaping, fragments
 * per host pair, malformed frames rate-limited) is in lib/worker/worker.c and the
 * README's "What the bridge does with each frame".
 */
#ifndef WEIR_PARSE_H
#define WEIR_PARSE_H

#include <stdint.h>
#include <stddef.h>

/* Why a frame is not trusted. Order is part of the counters' ABI: append only. */
enum weir_malformed {
	WEIR_MAL_NONE = 0,
	WEIR_MAL_TRUNC_L2,      /* shorter than Ethernet header or a VLAN tag */
	WEIR_MAL_TRUNC_L3,      /* IP header does not fit in the frame */
	WEIR_MAL_IP_VERSION,    /* version field disagrees with the ethertype */
	WEIR_MAL_IP_IHL,        /* IPv4 IHL < 5 or past the frame */
	WEIR_MAL_IP_LEN,        /* IP total/payload length < header or > frame */
	WEIR_MAL_IP_OPT,        /* IPv4 option with a bogus length */
	WEIR_MAL_IP6_EXT,       /* IPv6 extension header chain runs past the packet */
	WEIR_MAL_TRUNC_L4,      /* L4 header does not fit in the IP payload */
	WEIR_MAL_TCP_DOFF,      /* TCP data offset < 5 or past the IP payload */
	WEIR_MAL_TCP_OPT,       /* TCP option with a bogus length */
	WEIR_MAL_UDP_LEN,       /* UDP length < 8 or > IP payload */
	WEIR_MAL_IPSEC_SHORT,   /* ESP/AH header (SPI + sequence) cut, or AH length bogus */
	WEIR_MAL_IPSEC_SPI0,    /* ESP/AH with SPI 0 (reserved, never on the wire: RFC 4303) */
	WEIR_MAL__COUNT
};

/* Name of a malformed reason for counters and logs ("trunc_l2", ...). */
const char *weir_malformed_name(unsigned int reason);

enum weir_l3 {
	WEIR_L3_OTHER = 0,      /* ARP, LLDP, anything not IP: bridged unmanaged */
	WEIR_L3_IPV4 = 4,
	WEIR_L3_IPV6 = 6,
};

/* weir_pkt.flags */
#define WEIR_PF_VLAN       0x01  /* at least one 802.1Q/802.1ad tag */
#define WEIR_PF_FRAGMENT   0x02  /* IPv4 MF/offset or IPv6 fragment header */
#define WEIR_PF_L4         0x04  /* IP header valid and L4 fields valid for the protocol:
                                  * ports for TCP/UDP/SCTP/UDPLite, type/id for ICMP,
                                  * zero ports for protocols without them (GRE...);
                                  * ESP/AH: the SPI (see weir_pkt.ipsec) */
#define WEIR_PF_IP_OPTS    0x08  /* IPv4 options or IPv6 extension headers present */
#define WEIR_PF_TCP_TS     0x10  /* TCP timestamp option present (ts_off valid) */
#define WEIR_PF_TCP_SACK   0x20  /* TCP SACK blocks present (sack_off/sack_n valid) */
#define WEIR_PF_L2_CONTROL 0x40  /* not IP, an L2 control frame: ARP, RARP, LLDP, slow
                                  * protocols (LACP), EAPOL, or any frame to the IEEE
                                  * reserved group 01:80:c2:00:00:0X (STP, ...) */
#define WEIR_PF_TCP_SIGNED 0x80  /* TCP-MD5 (option 19, RFC 2385) or TCP-AO (29, RFC 5925):
                                  * the segment is signed, its window and ACK included */

/* TCP flags as on the wire (byte 13 of the TCP header). */
#define WEIR_TCP_FIN 0x01
#define WEIR_TCP_SYN 0x02
#define WEIR_TCP_RST 0x04
#define WEIR_TCP_PSH 0x08
#define WEIR_TCP_ACK 0x10
#define WEIR_TCP_URG 0x20
#define WEIR_TCP_ECE 0x40
#define WEIR_TCP_CWR 0x80

#define WEIR_WSCALE_NONE 0xff

/* weir_pkt.ipsec: an IPsec packet, whose SA (SPI) is its flow. Every byte
 * past the IP header is covered by the SA's integrity check (and for AH the
 * IP header's immutable fields too): nothing may rewrite it. */
enum weir_ipsec {
	WEIR_IPSEC_NONE = 0,
	WEIR_IPSEC_ESP = 1,     /* IP protocol 50 */
	WEIR_IPSEC_AH = 2,      /* IP protocol 51 (IPv6: where the extension chain meets it) */
	WEIR_IPSEC_NATT = 3,    /* ESP in UDP port 4500 (RFC 3948); l4proto is UDP */
};
#define WEIR_NATT_PORT 4500

/*
 * Parse result. Offsets are from the start of the frame. Addresses are not
 * copied: the flow module reads them at l3_off (saddr/daddr offsets below).
 * Kept at 48 bytes so it fits the mbuf private area with room to spare.
 */
struct weir_pkt {
	uint16_t l3_off;        /* start of the IP header (after tags) */
	uint16_t l4_off;        /* start of the L4 header (after IP options/ext headers) */
	uint16_t payload_off;   /* start of L4 payload */
	uint16_t payload_len;   /* L4 payload bytes per the IP length (not the frame) */
	uint16_t ip_len;        /* IP header + payload, from the IP length field */
	uint16_t ethertype;     /* innermost ethertype, host order */
	uint16_t vlan_outer;    /* TCI of the first tag, host order (0 if none) */
	uint16_t vlan_inner;    /* TCI of the second tag (QinQ), host order */
	uint8_t  n_vlan;        /* number of tags seen (0..2; more is WEIR_MAL_TRUNC_L2 if cut) */
	uint8_t  l3;            /* enum weir_l3 */
	uint8_t  l4proto;       /* IPPROTO_*, the final next-header for IPv6 */
	uint8_t  malformed;     /* enum weir_malformed */
	uint8_t  flags;         /* WEIR_PF_* */
	uint8_t  dscp;          /* DSCP (6 bits) from TOS/traffic class */
	uint8_t  tcp_flags;     /* WEIR_TCP_* */
	uint8_t  wscale;        /* window scale option, WEIR_WSCALE_NONE if absent */
	uint16_t sport, dport;  /* host order; ICMP: type/code in sport, id in dport */
	uint32_t seq, ack;      /* TCP, host order */
	uint16_t win;           /* TCP raw advertised window, host order */
	uint16_t mss;           /* MSS option, 0 if absent */
	uint8_t  sack_ok;       /* SACK-permitted option present */
	uint8_t  sack_n;        /* number of SACK blocks (0..4) */
	uint8_t  sack_off;      /* offset of first SACK block from l4_off */
	uint8_t  ts_off;        /* offset of TSval from l4_off (TSecr follows) */
	uint8_t  addr_len;      /* 4 or 16 (0 if not IP) */
	uint8_t  saddr_off;     /* offset of the source address from l3_off */
	uint8_t  ipsec;         /* enum weir_ipsec; then seq is the ESP/AH sequence number,
				 * sport:dport the SPI's high:low halves, and the IPsec
				 * header (SPI, seq) starts at payload_off */
	/* Set by the worker, not the parser (which zeroes them): */
	uint8_t  plain : 1;     /* no mode but pfq/fifo may act on this frame (a last
				 * mile's exempt flow) */
	uint8_t  clocked : 1;   /* its sender is clocked by ACKs weir holds or windows it
				 * sizes: its queue waking is not a sparse flow (lib/sched/drr.h) */
	uint8_t  tcp_signed : 1; /* of a TCP flow signed by TCP-MD5/AO (WEIR_FF_TCP_SIGNED):
				 * no mode but pfq/fifo acts on it, nothing rewrites,
				 * holds or answers it */
	uint8_t  lm_cut : 1;    /* a last mile cut this ACK's window (then `win` is the
				 * window it wrote); settled once its mode had its say
				 * (lib/worker/worker_ack.c) */
	uint8_t  l3_control : 1; /* a router's link-local control (lib/net/l3ctl.h): sent on
				 * ahead of shaping, never tracked as a flow */
};

/*
 * Parse `len` bytes at `frame`. Always fills `*p` (zeroed first); returns
 * p->malformed (0 on success). Never reads frame[len] or beyond.
 * Destination address is at l3_off + saddr_off + addr_len.
 */
unsigned int weir_parse(const uint8_t *frame, uint32_t len, struct weir_pkt *p);

/* True when later stages may manage the frame (key it to a flow): IP, not
 * malformed, not a fragment, L4 parsed. */
static inline int
weir_pkt_manageable(const struct weir_pkt *p)
{
	return p->malformed == WEIR_MAL_NONE && (p->flags & (WEIR_PF_L4 | WEIR_PF_FRAGMENT)) == WEIR_PF_L4;
}

#endif /* WEIR_PARSE_H */
