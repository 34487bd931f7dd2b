/* SPDX-License-Identifier: BSD-3-Clause
 * Synthetic packets for tests of the modules that sit after the parser (flow,
 * classify): the frame bytes those modules read (tags, addresses) and the
 * weir_pkt record the parser would have filled, built from a short spec.
 */
#ifndef WEIR_TEST_SYNTH_H
#define WEIR_TEST_SYNTH_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

/* What the parser would have found in one packet. */
struct synth {
	int fam;                /* 4 or 6 */
	const char *src, *dst;
	uint16_t sport, dport;  /* ICMP: type<<8|code, identifier */
	uint8_t proto;
	uint16_t tci;           /* outer VLAN TCI, used when tagged */
	int tagged;
	uint8_t tcp_flags;
	uint8_t dscp;
	uint32_t seq, ack;
	uint16_t plen;
	int ws;                 /* window scale option, -1 = absent */
	uint16_t mss;
};

/* The same packet seen travelling the other way. */
static inline struct synth
synth_reverse(struct synth d)
{
	const char *a = d.src;
	uint16_t port = d.sport;

	d.src = d.dst;
	d.dst = a;
	d.sport = d.dport;
	d.dport = port;
	return d;
}

/* Lay out Ethernet [+ 802.1Q] + the IP header's version, protocol and
 * addresses in `frame` (128 bytes), and the parse record for `d`. */
static inline void
synth_build(const struct synth *d, uint8_t *frame, struct weir_pkt *p)
{
	unsigned int off = 12, alen = d->fam == 4 ? 4 : 16;
	uint8_t *ip;

	memset(frame, 0, 128);
	memset(p, 0, sizeof(*p));
	if (d->tagged) {
		frame[off] = 0x81;
		frame[off + 2] = d->tci >> 8;
		frame[off + 3] = d->tci & 0xff;
		off += 4;
		p->flags |= WEIR_PF_VLAN;
		p->n_vlan = 1;
		p->vlan_outer = d->tci;
	}
	frame[off] = d->fam == 4 ? 0x08 : 0x86;
	frame[off + 1] = d->fam == 4 ? 0x00 : 0xdd;
	p->ethertype = d->fam == 4 ? 0x0800 : 0x86dd;
	p->l3_off = (uint16_t)(off + 2);
	ip = frame + p->l3_off;
	if (d->fam == 4) {
		ip[0] = 0x45;
		ip[9] = d->proto;
		p->saddr_off = 12;
		p->l4_off = p->l3_off + 20;
	} else {
		ip[0] = 0x60;
		ip[6] = d->proto;
		p->saddr_off = 8;
		p->l4_off = p->l3_off + 40;
	}
	if (inet_pton(d->fam == 4 ? AF_INET : AF_INET6, d->src, ip + p->saddr_off) != 1 ||
	    inet_pton(d->fam == 4 ? AF_INET : AF_INET6, d->dst, ip + p->saddr_off + alen) != 1) {
		fprintf(stderr, "bad test address %s / %s\n", d->src, d->dst);
		exit(2);
	}
	p->addr_len = (uint8_t)alen;
	p->l3 = (uint8_t)d->fam;
	p->l4proto = d->proto;
	p->flags |= WEIR_PF_L4;
	p->sport = d->sport;
	p->dport = d->dport;
	p->tcp_flags = d->tcp_flags;
	p->dscp = d->dscp;
	p->seq = d->seq;
	p->ack = d->ack;
	p->payload_len = d->plen;
	p->wscale = d->ws < 0 ? WEIR_WSCALE_NONE : (uint8_t)d->ws;
	p->mss = d->mss;
}

#endif /* WEIR_TEST_SYNTH_H */
