/* SPDX-License-Identifier: BSD-3-Clause
 * weir: L3 control, the routers' own signalling across the bridge.
 *
 * Routers on both sides of weir keep adjacencies through it (OSPF hellos,
 * BGP keepalives, BFD at 3 x 100 ms, VRRP adverts). Queued behind a full
 * class, a hello or a BFD packet arrives late or not at all, the routers
 * declare a neighbour dead and traffic flaps. So, as L2 control (ARP, LACP),
 * these frames cross ahead of shaping, never queued, with their own count
 * (worker.l3_control; docs/fleet.md).
 *
 * What counts is what a router sends to a neighbour on the same link: the
 * protocol (or port) AND a link-local TTL (hop limit): 1 (OSPF, PIM hellos,
 * eBGP, RIP) or 254..255 (GTSM, RFC 5082: BFD, VRRP, GTSM-protected BGP;
 * a BFD echo comes back with 254). weir is a bridge, so the TTL a router sent
 * is the TTL weir sees. A remote host cannot make its bulk data pass as
 * control by picking port 179 or 3784: its frames arrive with a routed TTL.
 * What a local host could still send this way is bounded by the worker's
 * budget (worker.l3_control_pps, lib/worker/worker.c).
 *
 * IS-IS runs over 802.3/LLC, not IP: frames to its multicast groups count as
 * L3 control too (no TTL to check; they cannot be routed).
 */
#ifndef WEIR_L3CTL_H
#define WEIR_L3CTL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "parse.h"

#define WEIR_L3C_PROTO_EIGRP 88
#define WEIR_L3C_PROTO_OSPF  89
#define WEIR_L3C_PROTO_PIM   103
#define WEIR_L3C_PROTO_VRRP  112    /* VRRP v2/v3 and CARP */

/* TCP: BGP 179, LDP sessions 646. UDP (destination): BFD single-hop 3784,
 * echo 3785, multihop 4784; RIP 520, RIPng 521; LDP discovery 646; HSRP
 * 1985 (v1 and v2 over IPv4), 2029 (HSRP for IPv6). */
static inline bool
weir_l3c_port(const struct weir_pkt *p)
{
	uint16_t d = p->dport;

	if (p->l4proto == 6)
		return p->sport == 179 || d == 179 || p->sport == 646 || d == 646;
	return d == 3784 || d == 3785 || d == 4784 || d == 520 || d == 521 || d == 646 ||
	       d == 1985 || d == 2029;
}

/* A manageable IP frame (weir_pkt_manageable) that is a router's link-local
 * control: its protocol, then its TTL. A few compares for ordinary traffic. */
static inline bool
weir_l3_control(const uint8_t *frame, const struct weir_pkt *p)
{
	uint8_t ttl;

	switch (p->l4proto) {
	case WEIR_L3C_PROTO_EIGRP:
	case WEIR_L3C_PROTO_OSPF:
	case WEIR_L3C_PROTO_PIM:
	case WEIR_L3C_PROTO_VRRP:
		break;
	case 6:         /* TCP */
	case 17:        /* UDP */
		if (p->ipsec != WEIR_IPSEC_NONE || !weir_l3c_port(p))
			return false;
		break;
	default:
		return false;
	}
	/* IPv4 TTL is byte 8 of its header, IPv6's hop limit byte 7. */
	ttl = frame[p->l3_off + (p->l3 == WEIR_L3_IPV4 ? 8 : 7)];
	return ttl == 1 || ttl >= 254;
}

/* A non-IP frame to IS-IS's groups: 01:80:c2:00:00:14/15 (all L1/L2 ISs),
 * 09:00:2b:00:00:04/05 (all ESs/ISs). */
static inline bool
weir_l3_control_l2(const uint8_t *frame)
{
	static const uint8_t l12[5] = { 0x01, 0x80, 0xc2, 0x00, 0x00 };
	static const uint8_t es[5] = { 0x09, 0x00, 0x2b, 0x00, 0x00 };

	return (memcmp(frame, l12, 5) == 0 && (frame[5] == 0x14 || frame[5] == 0x15)) ||
	       (memcmp(frame, es, 5) == 0 && (frame[5] == 0x04 || frame[5] == 0x05));
}

#endif /* WEIR_L3CTL_H */
