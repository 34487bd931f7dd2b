/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the frames pep makes (p-ACKs, RSTs) and resends from its copies. See pep_int.h.
 */
#include <inttypes.h>
#include <string.h>

#include <netinet/in.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ip.h>
#include <rte_log.h>
#include <rte_tcp.h>

#include "mbuf_meta.h"
#include "pep_int.h"

/* ---- made frames ---- */

/*
 * A TCP segment between S and R made from the template: to S (from R) or
 * to R (from S), no payload, IPv4 without options (DF, TTL 64) or IPv6
 * (hop limit 64), checksums computed whole. A p-ACK to S carries a
 * timestamp option when the flow uses them: R's latest TSval, S's latest
 * TSval echoed (S times its round trip to the gateway: that is the point).
 */
struct rte_mbuf *
pep_make_frame(struct pep *st, const struct pep_flow *pf, bool to_s, uint32_t seq, uint32_t ack,
	   uint8_t flags, uint16_t win)
{
	const struct pep_tmpl *t = &pf->t;
	const bool ts = to_s && t->ts && !(flags & WEIR_TCP_RST);
	const uint16_t tcp_len = (uint16_t)(20 + (ts ? 12 : 0));
	const uint16_t ip_len = (uint16_t)((t->v6 ? 40 : 20) + tcp_len);
	struct rte_mbuf *m = rte_pktmbuf_alloc(st->mp);
	struct rte_tcp_hdr *tcp;
	uint8_t *fr, *ip;

	if (m == NULL) {
		st->st.nombuf++;
		return NULL;
	}
	fr = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(t->l2_len + ip_len));
	if (fr == NULL) {
		rte_pktmbuf_free(m);
		st->st.nombuf++;
		return NULL;
	}
	memcpy(fr, t->l2, t->l2_len);
	if (to_s) {                     /* swap the MACs */
		memcpy(fr, t->l2 + 6, 6);
		memcpy(fr + 6, t->l2, 6);
	}
	ip = fr + t->l2_len;
	memset(ip, 0, ip_len);
	tcp = (struct rte_tcp_hdr *)(ip + (t->v6 ? 40 : 20));
	if (t->v6) {
		struct rte_ipv6_hdr *h = (struct rte_ipv6_hdr *)ip;

		h->vtc_flow = rte_cpu_to_be_32(6u << 28);
		h->payload_len = rte_cpu_to_be_16(tcp_len);
		h->proto = IPPROTO_TCP;
		h->hop_limits = 64;
		memcpy(h->src_addr, to_s ? t->r_addr : t->s_addr, 16);
		memcpy(h->dst_addr, to_s ? t->s_addr : t->r_addr, 16);
	} else {
		struct rte_ipv4_hdr *h = (struct rte_ipv4_hdr *)ip;

		h->version_ihl = 0x45;
		h->total_length = rte_cpu_to_be_16(ip_len);
		h->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
		h->time_to_live = 64;
		h->next_proto_id = IPPROTO_TCP;
		memcpy(&h->src_addr, to_s ? t->r_addr : t->s_addr, 4);
		memcpy(&h->dst_addr, to_s ? t->s_addr : t->r_addr, 4);
	}
	tcp->src_port = rte_cpu_to_be_16(to_s ? t->r_port : t->s_port);
	tcp->dst_port = rte_cpu_to_be_16(to_s ? t->s_port : t->r_port);
	tcp->sent_seq = rte_cpu_to_be_32(seq);
	tcp->recv_ack = rte_cpu_to_be_32(ack);
	tcp->data_off = (uint8_t)((tcp_len / 4) << 4);
	tcp->tcp_flags = flags;
	tcp->rx_win = rte_cpu_to_be_16(win);
	if (ts) {
		uint8_t *o = (uint8_t *)(tcp + 1);
		uint32_t v = rte_cpu_to_be_32(pf->r_tsval), e = rte_cpu_to_be_32(t->s_tsval);

		o[0] = 1;       /* NOP NOP TS(10) */
		o[1] = 1;
		o[2] = 8;
		o[3] = 10;
		memcpy(o + 4, &v, 4);
		memcpy(o + 8, &e, 4);
	}
	if (t->v6) {
		tcp->cksum = rte_ipv6_udptcp_cksum((struct rte_ipv6_hdr *)ip, tcp);
	} else {
		struct rte_ipv4_hdr *h = (struct rte_ipv4_hdr *)ip;

		h->hdr_checksum = rte_ipv4_cksum(h);
		tcp->cksum = rte_ipv4_udptcp_cksum(h, tcp);
	}
	return m;
}

/* The window a p-ACK acknowledging `ack` shows S: up to R's own right
 * edge and no more than the maximum buffer past what R acknowledged (so
 * what S may send fits the gateway's buffer), never left of an edge
 * already shown (RFC 7323 sec. 2.4). Raw, in R's window scale. */
static uint16_t
pack_window(struct pep_flow *pf, uint32_t ack, int ws)
{
	uint32_t target = pf->redge, limit = pf->real_una + pf->maxbuf, raw;

	if (seq_gt(target, limit))
		target = limit;
	if (seq_gt(pf->shown, target))
		target = pf->shown;
	if (!seq_gt(target, ack))
		return 0;
	raw = RTE_MIN((target - ack + (1u << ws) - 1) >> ws, 0xffffu);
	if (seq_gt(ack + (raw << ws), pf->shown))
		pf->shown = ack + (raw << ws);
	return (uint16_t)raw;
}

/* Send S an ACK for everything up to una (out of port d: towards S). */
void
pep_send_pack(struct weir_mode_svc *w, struct pep *st, const struct weir_flow *f, struct pep_flow *pf)
{
	uint16_t win = pack_window(pf, pf->una, ack_ws(f, pf->d));
	uint8_t fl = (uint8_t)(WEIR_TCP_ACK | ((pf->flags & F_ECE) ? WEIR_TCP_ECE : 0));
	struct rte_mbuf *m = pep_make_frame(st, pf, true, pf->t.s_ack, pf->una, fl, win);

	if (m == NULL)
		return;
	weir_worker_out(w, pf->d, m);
	st->st.pack_sent++;
}

/* ---- retransmission from the copies ---- */

/*
 * A retransmission carries the original's TSval, raised to R's TS.Recent
 * (its highest TSecr) when that is past it. It leaves straight to R, past
 * the originals still queued here and on the path: a TSval newer than
 * theirs would move TS.Recent past them once it filled the hole, and PAWS
 * (RFC 7323 sec. 5) would discard every one of them, each then a hole
 * recovered one a round trip. Below TS.Recent (S resent something itself with
 * a newer TSval) the copy itself would be discarded. The TCP checksum is
 * computed whole: rare, and the option may sit at any alignment.
 */
static void
restamp(struct rte_mbuf *m, const struct weir_pkt *p, uint32_t floor)
{
	uint8_t *fr = rte_pktmbuf_mtod(m, uint8_t *);
	struct rte_tcp_hdr *tcp = (struct rte_tcp_hdr *)(fr + p->l4_off);
	uint32_t be = rte_cpu_to_be_32(floor);

	if (!(p->flags & WEIR_PF_TCP_TS) || !seq_gt(floor, rd32(fr + p->l4_off + p->ts_off)))
		return;
	memcpy(fr + p->l4_off + p->ts_off, &be, 4);
	tcp->cksum = 0;
	if (p->l3 == WEIR_L3_IPV6)
		tcp->cksum = rte_ipv6_udptcp_cksum((struct rte_ipv6_hdr *)(fr + p->l3_off), tcp);
	else
		tcp->cksum = rte_ipv4_udptcp_cksum((struct rte_ipv4_hdr *)(fr + p->l3_off), tcp);
}

bool
pep_retransmit(struct weir_mode_svc *w, struct pep *st, const struct pep_flow *pf, struct pep_rec *r,
	   uint64_t now)
{
	struct rte_mbuf *m;

	if (r->m == NULL)
		return false;
	m = rte_pktmbuf_copy(r->m, st->mp, 0, UINT32_MAX);
	if (m == NULL) {
		st->st.nombuf++;
		return false;
	}
	if (pf->flags & F_RTSECR)
		restamp(m, &weir_mbuf_meta(r->m)->pkt, pf->r_tsecr);
	r->fl |= R_RETX | R_EVER_RETX;
	r->sent = now;
	/* Straight to R, past the class queue: a segment the path lost (one
	 * per duplicate ACK, at most PEP_HOLES_BURST per partial ACK), and the
	 * original already paid its way through the class. */
	weir_worker_out(w, pf->d ^ 1, m);
	return true;
}

/* RSTs to both sides (S from R, R from S) and the copies dropped: R has
 * gone silent (or reset) while S believes data was delivered. `count` is
 * the reason's counter. */
void
pep_give_up(struct weir_mode_svc *w, struct pep *st, struct weir_flow *f, struct pep_flow *pf,
	    uint64_t *count)
{
	struct rte_mbuf *m;

	/* Rare, and an operator wants to know which flow and where it stood. */
	RTE_LOG(NOTICE, USER1, "pep: giving up on a flow (dir %d, port %u -> %u): R acked %u, "
		"S told %u, copies %u..%u (%u, %u bytes p-acked), %u timeouts, srtt %" PRIu64 " us\n",
		pf->d, pf->t.s_port, pf->t.r_port, pf->real_una, pf->una,
		pf->head != NONE ? st->rec[pf->head].seq : 0, pf->next_seq, pf->n, pf->packed_bytes,
		pf->retries, pf->srtt / w->tsc_per_us);
	m = pep_make_frame(st, pf, true, pf->t.s_ack, pf->una, WEIR_TCP_RST | WEIR_TCP_ACK, 0);
	if (m != NULL) {
		weir_worker_out(w, pf->d, m);
		st->st.rst_sent++;
	}
	m = pep_make_frame(st, pf, false, pf->real_una, pf->t.s_ack, WEIR_TCP_RST | WEIR_TCP_ACK, 0);
	if (m != NULL) {
		weir_worker_out(w, pf->d ^ 1, m);
		st->st.rst_sent++;
	}
	(*count)++;
	pf->flags |= F_DRAIN;
	pep_chain_free(st, pf, &st->st.ended_copies);
	RTE_SET_USED(f);
}
