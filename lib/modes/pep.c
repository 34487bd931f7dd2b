/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the pep mode, premature ACKs with a dynamic watermark. See pep.h
 * and docs/pep.md. This file: the state, the watermark, S's and R's frames
 * and the mode's hooks; pep_frames.c makes and resends frames, pep_life.c
 * runs the timers and ends flows and the worker (pep_int.h).
 *
 * Names: for one flow's pep state, d is the data direction; S is its
 * sender (its frames arrive on port d and leave through port d ^ 1), R the
 * receiver (its ACKs travel a = d ^ 1 and leave through port d). A "p-ACK"
 * is an ACK the gateway makes for R; a "real" ACK is R's own.
 *
 * Per flow, the copies form one chain of records in sequence order, up to
 * next_seq; a segment that passed uncopied (a cap, the buffer full) leaves
 * a gap that S, never told it arrived, recovers itself. Its first records
 * are p-acked (S was told they arrived: only ever contiguous with what S
 * was acknowledged), the rest are stored. A record whose data R SACKed
 * keeps its place with its mbuf freed.
 */
#include <inttypes.h>
#include <string.h>

#include <netinet/in.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_log.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_tcp.h>

#include "mbuf_meta.h"
#include "mode.h"
#include "pep_int.h"
#include "ackstore_int.h"

/* ---- state ---- */

/* Everything pep_init allocated (any of it may be NULL), and st itself. */
static void
pep_state_free(struct pep *st)
{
	rte_free(st->idx[0]);
	rte_free(st->idx[1]);
	rte_free(st->fl);
	rte_free(st->free_fl);
	rte_free(st->active);
	rte_free(st->lost);
	rte_free(st->rec);
	rte_free(st);
}

static int
pep_init(struct weir_mode_svc *w, uint32_t n_flows, int socket_id)
{
	struct pep *st;
	uint32_t cap;

	if (w->pa == NULL)
		return 0;       /* no ACK control at all: pep stays off (never p-acks) */
	st = rte_zmalloc_socket("weir_pep", sizeof(*st), RTE_CACHE_LINE_SIZE, socket_id);
	if (st == NULL)
		return -ENOMEM;
	/* The copies come from the worker's mempool, bounded by a budget of
	 * their own (shaping.pep.copies), which the config reserves beside
	 * PostACK's kept ACKs: receive keeps the rest. */
	cap = w->conf.pep_copies ? w->conf.pep_copies : w->pa->mp->size / 8;
	st->st.copy_cap = RTE_MAX(cap, 16u);
	st->flow_cap = RTE_MAX(st->st.copy_cap / 4, 16u);
	st->n_rec = 2 * st->st.copy_cap;
	st->n_flows = n_flows;
	st->mp = w->pa->mp;
	st->rto_min = w->tsc_hz / 1000000 * WEIR_PEP_RTO_MIN_US;
	st->rto_max = w->tsc_hz / 1000000 * WEIR_PEP_RTO_MAX_US;
	st->rtt_unknown = w->tsc_hz / 5;
	st->wm_measured = w->conf.pep_wm_measured;
	for (int d = 0; d < 2; d++)
		st->idx[d] = rte_zmalloc_socket("weir_pep_idx", n_flows * sizeof(uint16_t), 0, socket_id);
	st->fl = rte_zmalloc_socket("weir_pep_fl", WEIR_PEP_MAX_FLOWS * sizeof(*st->fl),
				    RTE_CACHE_LINE_SIZE, socket_id);
	st->free_fl = rte_malloc_socket("weir_pep_free", WEIR_PEP_MAX_FLOWS * sizeof(uint16_t), 0,
					socket_id);
	st->active = rte_malloc_socket("weir_pep_act", WEIR_PEP_MAX_FLOWS * sizeof(uint16_t), 0,
				       socket_id);
	st->lost = rte_malloc_socket("weir_pep_lost", WEIR_PEP_MAX_FLOWS * sizeof(uint16_t), 0,
				     socket_id);
	st->rec = rte_malloc_socket("weir_pep_rec", st->n_rec * sizeof(*st->rec), RTE_CACHE_LINE_SIZE,
				    socket_id);
	if (st->idx[0] == NULL || st->idx[1] == NULL || st->fl == NULL || st->free_fl == NULL ||
	    st->active == NULL || st->lost == NULL || st->rec == NULL) {
		pep_state_free(st);
		return -ENOMEM;
	}
	for (uint16_t i = 0; i < WEIR_PEP_MAX_FLOWS; i++)
		st->free_fl[i] = (uint16_t)(WEIR_PEP_MAX_FLOWS - 1 - i);
	st->n_free = WEIR_PEP_MAX_FLOWS;
	for (uint32_t i = 0; i < st->n_rec; i++)
		st->rec[i].next = i + 1 < st->n_rec ? i + 1 : NONE;
	st->free_rec = 0;
	w->mode_state[WEIR_MODE_PEP] = st;
	return 0;
}

static void
pep_fini(struct weir_mode_svc *w)
{
	struct pep *st = pep_of(w);

	if (st == NULL)
		return;
	weir_pep_flush(w);
	pep_state_free(st);
	w->mode_state[WEIR_MODE_PEP] = NULL;
}

/* Take flow index i off the lost list (rare: a flow ended with a resend due). */
static void
lost_unlist(struct pep *st, uint16_t i)
{
	for (uint16_t k = 0; k < st->n_lost; k++)
		if (st->lost[k] == i) {
			st->lost[k] = st->lost[--st->n_lost];
			return;
		}
}

/* Give every copy of pf back; `why` counts them. */
void
pep_chain_free(struct pep *st, struct pep_flow *pf, uint64_t *why)
{
	uint32_t r = pf->head;

	while (r != NONE) {
		struct pep_rec *rec = &st->rec[r];
		uint32_t next = rec->next;

		if (rec->m != NULL) {
			rte_pktmbuf_free(rec->m);
			st->st.copies--;
			(*why)++;
		}
		rec->next = st->free_rec;
		st->free_rec = r;
		r = next;
	}
	pf->head = pf->tail = pf->pk = pf->stamp = pf->unq = NONE;
	if (pf->flags & F_LOST) {
		lost_unlist(st, (uint16_t)(pf - st->fl));
		pf->flags &= (uint16_t)~F_LOST;
	}
	pf->n = pf->copies = 0;
	pf->bytes = pf->packed_bytes = 0;
	pf->rto_at = 0;
}

/* Forget pf (its copies first); the flow loses its flag when neither
 * direction has state. */
void
pep_flow_drop(struct pep *st, struct weir_flow *f, struct pep_flow *pf, uint64_t *why)
{
	uint16_t i = (uint16_t)(pf - st->fl);
	uint16_t last;

	pep_chain_free(st, pf, why);
	st->idx[pf->d][pf->slot] = 0;
	last = st->active[--st->n_active];
	st->active[pf->pos] = last;
	st->fl[last].pos = pf->pos;
	st->free_fl[st->n_free++] = i;
	st->st.active = st->n_active;
	if (f != NULL && st->idx[0][pf->slot] == 0 && st->idx[1][pf->slot] == 0)
		f->shape &= (uint8_t)~WEIR_FSH_PEP;
}

static void
pep_reset(struct weir_mode_svc *w, uint32_t slot)
{
	struct pep *st = pep_of(w);

	if (st == NULL)
		return;
	for (int d = 0; d < 2; d++) {
		struct pep_flow *pf = flow_get(st, d, slot);

		if (pf != NULL)         /* the worker ends flows first: only defensive */
			pep_flow_drop(st, NULL, pf, &st->st.ended_copies);
	}
}

/* A SYN (or SYN+ACK) of S under pep: the flow is eligible from its start.
 * The template is this frame's headers. */
static struct pep_flow *
flow_new(struct weir_mode_svc *w, struct pep *st, struct weir_flow *f, int d, uint32_t slot,
	 struct rte_mbuf *m, const struct weir_pkt *p)
{
	const uint8_t *fr = rte_pktmbuf_mtod(m, const uint8_t *);
	struct pep_flow *pf;
	uint64_t rtt;
	uint16_t i;

	if (p->l3_off > TMPL_L2_MAX || (p->flags & WEIR_PF_IP_OPTS))
		return NULL;    /* headers a made frame would have to copy: not for pep */
	if (st->n_free == 0) {
		st->st.flows_full++;
		return NULL;
	}
	i = st->free_fl[--st->n_free];
	pf = &st->fl[i];
	memset(pf, 0, sizeof(*pf));
	pf->head = pf->tail = pf->pk = pf->stamp = pf->unq = NONE;
	pf->d = (uint8_t)d;
	pf->slot = slot;
	pf->una = pf->real_una = pf->last_real = pf->next_seq = p->seq + 1;
	memcpy(pf->t.l2, fr, p->l3_off);
	pf->t.l2_len = (uint8_t)p->l3_off;
	pf->t.v6 = p->l3 == WEIR_L3_IPV6;
	memcpy(pf->t.s_addr, fr + p->l3_off + p->saddr_off, p->addr_len);
	memcpy(pf->t.r_addr, fr + p->l3_off + p->saddr_off + p->addr_len, p->addr_len);
	pf->t.s_port = p->sport;
	pf->t.r_port = p->dport;
	rtt = weir_postack_rtt(w->pa, d ^ 1, slot);
	pf->srtt = rtt;
	pf->rttvar = rtt / 2;
	pf->pos = st->n_active;
	st->active[st->n_active++] = i;
	st->idx[d][slot] = (uint16_t)(i + 1);
	st->st.flows++;
	st->st.active = st->n_active;
	f->shape |= WEIR_FSH_PEP;
	return pf;
}

/* ---- the watermark ---- */

/*
 * Watermark = the flow's share of its class now (rate / active flows,
 * which follows rate changes and the flows that come and go) x the lowest
 * round trip measured beyond the gateway, plus an eighth and two segments
 * (the slack TCR found a window needs to carry its rate), in bytes. The
 * maximum buffer is twice that. Both are bounded by the flow's copy cap.
 */
static uint64_t
bw_estimate(const struct pep_bw *b)
{
	return RTE_MAX(b->max[0], b->max[1]);
}

/* R acknowledged up to r at now (past real_una): end the sample when it
 * spans a round trip, and begin the next. */
static void
bw_sample(struct pep_flow *pf, uint32_t r, uint64_t now)
{
	struct pep_bw *b = &pf->bw;
	uint64_t span = now - b->t0, s, est;

	if (b->t0 == 0 || pf->min_rtt == 0 || span < pf->min_rtt) {
		if (b->t0 == 0) {
			b->t0 = now;
			b->una0 = pf->real_una;
		}
		return;
	}
	s = (((uint64_t)(r - b->una0)) << 32) / span;
	if (!b->lossy && (b->limited || s > bw_estimate(b))) {
		b->max[0] = RTE_MAX(b->max[0], s);
		if (b->limited && ++b->n >= PEP_BW_EPOCH) {
			b->max[1] = b->max[0];
			b->max[0] = 0;
			b->n = 0;
		}
		est = bw_estimate(b);
		if (est >= b->full_bw + b->full_bw / 4) {
			b->full_bw = est;
			b->flat = 0;
		} else if (b->limited && b->flat < PEP_BW_FULL) {
			b->flat++;
		}
	}
	b->t0 = now;
	b->una0 = r;
	b->limited = 0;
	b->lossy = (pf->flags & F_RECOVERY) != 0;
}

/* The rate the watermark carries: the flow's share of its class, or, once
 * R's delivery rate is known (the pipe full), that rate and a quarter more
 * to find a rise, within the flow's share of what the class may borrow. */
static uint64_t
wm_rate(const struct weir_mode_svc *w, const struct pep *st, const struct pep_flow *pf,
	uint32_t leaf)
{
	const struct weir_class_counters *c = &w->cls_ctr[pf->d][leaf];
	uint64_t est = bw_estimate(&pf->bw);

	if (!st->wm_measured || pf->bw.flat < PEP_BW_FULL || est == 0)
		return c->share_bytes_per_tick;
	return RTE_MIN(est + est / 4, RTE_MAX(c->ceil_share_bytes_per_tick, c->share_bytes_per_tick));
}

static void
update_wm(const struct weir_mode_svc *w, const struct pep *st, struct pep_flow *pf, uint32_t leaf)
{
	uint64_t rate = wm_rate(w, st, pf, leaf);
	uint64_t rtt = pf->min_rtt ? pf->min_rtt : pf->srtt ? pf->srtt : st->rtt_unknown;
	uint64_t bdp = (uint64_t)(((unsigned __int128)rate * rtt) >> 32);
	uint64_t seg = pf->mss ? pf->mss : 1460;
	uint64_t cap = (uint64_t)st->flow_cap * seg / 2;
	uint64_t wm = bdp + bdp / 8 + 2 * seg;
	/* What S may send past R's ACK beyond the watermark is on its way
	 * too: when the class is not the bottleneck it goes on at once and
	 * queues downstream (a maximum of twice the watermark overflowed a
	 * 50-frame bottleneck queue with cubic senders in the experiments);
	 * when the class is, it waits in the flow's queue here, and must stay
	 * within half its limit or the class drops originals the gateway then
	 * recovers itself. A quarter of the watermark, within both. */
	uint64_t q = (uint64_t)weir_cbq_qtab(w->shaper[pf->d])->limit * seg / 2;

	wm = RTE_MIN(wm, cap);
	pf->wm = (uint32_t)wm;
	pf->maxbuf = (uint32_t)(wm + RTE_MIN(wm / 4 + seg, q));
}

/* p-ACK stored segments, in order, while the p-acked bytes stay within the
 * watermark and R's window; one p-ACK for all of them. */
static unsigned int
release(struct weir_mode_svc *w, struct pep *st, const struct weir_flow *f, struct pep_flow *pf)
{
	unsigned int n = 0;

	if (pf->flags & F_DRAIN)
		return 0;
	while (pf->pk != NONE) {
		struct pep_rec *r = &st->rec[pf->pk];
		uint32_t end = r->seq + r->len;

		if (seq_gt(r->seq, pf->una) || pf->packed_bytes + r->len > pf->wm ||
		    seq_gt(end, pf->redge) || (r->fl & R_GONE) || pf->pk == pf->unq)
			break;
		r->fl |= R_PACKED;
		pf->packed_bytes += r->len;
		if (seq_gt(end, pf->una))
			pf->una = end;
		pf->pk = r->next;
		n++;
	}
	if (n > 0) {
		st->st.packed += n;
		pep_send_pack(w, st, f, pf);
	}
	return n;
}

/* ---- resets ----
 *
 * A RST ends pep's state only when it is in the window of the end it is
 * sent to (RFC 793 sec. 3.4; RFC 5961 makes endpoints ignore the rest):
 * a stale or spoofed RST the endpoint ignores must not free copies of data
 * S was told arrived. Out of window it passes untouched, counted, and the
 * state stays. In window, no data S was told of may be lost silently:
 * - S reset while R still lacks p-acked data: S's RST is held back (R
 *   would drop the connection and the data with it); the copies are
 *   delivered, then R gets a RST at its own next sequence number. If R
 *   stays silent the timeouts give up as for any flow.
 * - R reset: what it lacked can never arrive, so S, told it did, gets a
 *   RST of the gateway's at its next sequence number beside R's own.
 */

static bool
sender_reset(struct pep *st, struct weir_flow *f, struct pep_flow *pf, const struct weir_pkt *p)
{
	uint32_t edge = seq_gt(pf->shown, pf->redge) ? pf->shown : pf->redge;

	if (!(pf->flags & F_REDGE) || seq_gt(pf->real_una, p->seq) || seq_gt(p->seq, edge)) {
		st->st.rst_ignored++;
		return false;
	}
	if (!owed(pf)) {
		pep_flow_drop(st, f, pf, &st->st.ended_copies);
		return false;
	}
	if (!(pf->flags & F_SRST))
		st->st.rst_held++;
	pf->flags |= F_SRST | F_DRAIN;  /* no more copies or p-ACKs: S is gone */
	return true;
}

/* R's copies all delivered after S reset: R's RST now, state gone. */
static void
sender_reset_done(struct weir_mode_svc *w, struct pep *st, struct weir_flow *f, struct pep_flow *pf)
{
	struct rte_mbuf *m = pep_make_frame(st, pf, false, pf->real_una, pf->t.s_ack,
					WEIR_TCP_RST | WEIR_TCP_ACK, 0);

	if (m != NULL) {
		weir_worker_out(w, pf->d ^ 1, m);
		st->st.rst_sent++;
	}
	pep_flow_drop(st, f, pf, &st->st.ended_copies);
}

static bool
receiver_reset(struct weir_mode_svc *w, struct pep *st, struct weir_flow *f, struct pep_flow *pf,
	       const struct weir_pkt *p)
{
	if ((pf->flags & F_SEDGE) &&
	    (seq_gt(pf->t.s_ack, p->seq) || seq_gt(p->seq, pf->t.s_edge))) {
		st->st.rst_ignored++;
		return false;
	}
	if (owed(pf))
		pep_give_up(w, st, f, pf, &st->st.r_resets);  /* S hears it too, at its rcv_nxt */
	pep_flow_drop(st, f, pf, &st->st.ended_copies);
	return false;
}

/* ---- S's frames ---- */

/* A frame of S (any TCP frame travelling d): the template follows S's
 * latest ACK number and timestamp; a RST ends the state. */
static bool
from_sender(struct pep *st, struct weir_flow *f, struct pep_flow *pf, struct rte_mbuf *m,
	    const struct weir_pkt *p)
{
	const uint8_t *tcp = rte_pktmbuf_mtod_offset(m, const uint8_t *, p->l4_off);

	if (p->tcp_flags & WEIR_TCP_RST)
		return sender_reset(st, f, pf, p);
	if (p->tcp_flags & WEIR_TCP_CWR)
		pf->flags &= (uint16_t)~F_ECE;   /* S reacted: R stops echoing too (RFC 3168) */
	if (p->tcp_flags & WEIR_TCP_ACK) {
		int ws = weir_ack_wscale(f, pf->d);

		pf->t.s_ack = p->ack;
		pf->t.s_edge = p->ack + ((uint32_t)p->win << ((p->tcp_flags & WEIR_TCP_SYN) || ws < 0 ?
							      0 : ws));
		pf->flags |= F_SEDGE;
	}
	if (p->flags & WEIR_PF_TCP_TS) {
		uint32_t tsecr = rd32(tcp + p->ts_off + 4);

		pf->t.ts = 1;
		pf->t.s_tsval = rd32(tcp + p->ts_off);
		/* S echoes R's latest TSval: before R's first ACK, a p-ACK's own. */
		if (!(pf->flags & F_RTS) || seq_gt(tsecr, pf->r_tsval)) {
			pf->r_tsval = tsecr;
			pf->flags |= F_RTS;
		}
	}
	return false;
}

/* A data segment of S about to enter its leaf (mode pep): copy it and
 * p-ack it while the buffer is under the watermark, copy it without a
 * p-ACK up to the maximum, let it pass uncopied beyond. */
static void
copy_segment(struct weir_mode_svc *w, struct pep *st, struct weir_flow *f, struct pep_flow *pf,
	     struct rte_mbuf *m, const struct weir_pkt *p, uint32_t leaf, uint64_t now)
{
	const uint32_t seq = p->seq, len = p->payload_len, end = seq + len;
	struct pep_rec *r;
	struct rte_mbuf *c;
	uint32_t ri;

	/* IP options or IPv6 extension headers: a copy is resent with its
	 * TCP checksum recomputed from the fixed header's length and next
	 * header, right only without them. Such segments pass uncopied. */
	if ((p->tcp_flags & (WEIR_TCP_FIN | WEIR_TCP_URG | WEIR_TCP_RST | WEIR_TCP_SYN |
			     WEIR_TCP_ACK)) != WEIR_TCP_ACK || p->payload_len == 0 ||
	    m->nb_segs != 1 || (p->flags & WEIR_PF_IP_OPTS)) {
		st->st.not_packable++;
		return;
	}
	if (pf->n == 0) {
		if (seq_gt(pf->una, seq)) {
			st->st.not_packable++;  /* S resending what it was told arrived */
			return;
		}
		pf->next_seq = seq;
	} else if (seq_gt(pf->next_seq, seq)) {
		st->st.not_packable++;  /* S resending: its copy, if any, is here already */
		return;
	}
	if (!(pf->flags & F_REDGE) || seq_gt(end, pf->redge)) {
		st->st.not_packable++;  /* past R's window: R would drop it */
		return;
	}
	if (pf->mss == 0) {
		uint64_t hs = weir_postack_measured_rtt(w->pa, pf->d ^ 1, pf->slot);

		pf->mss = f->mss[pf->d ^ 1] ? f->mss[pf->d ^ 1] : 1460;
		/* The handshake timed R's side once the SYN was answered: the
		 * first round trip beyond the gateway, queues still empty. */
		if (hs != 0) {
			pf->srtt = pf->min_rtt = hs;
			pf->rttvar = hs / 2;
		}
	}
	update_wm(w, st, pf, leaf);
	if (pf->bytes + len > pf->maxbuf) {
		st->st.buf_full++;
		pf->bw.limited = 1;
		return;
	}
	if (pf->copies >= st->flow_cap) {
		st->st.flow_cap++;
		return;
	}
	if (st->st.copies >= st->st.copy_cap || st->free_rec == NONE) {
		st->st.pool_cap++;
		return;
	}
	c = rte_pktmbuf_copy(m, st->mp, 0, UINT32_MAX);
	if (c == NULL) {
		st->st.nombuf++;
		return;
	}
	weir_mbuf_meta(c)->pkt = *p;    /* where its headers are, for a retransmission */
	ri = st->free_rec;
	r = &st->rec[ri];
	st->free_rec = r->next;
	*r = (struct pep_rec){ .m = c, .sent = now, .seq = seq, .next = NONE, .len = (uint16_t)len };
	if (pf->tail != NONE)
		st->rec[pf->tail].next = ri;
	else
		pf->head = ri;
	pf->tail = ri;
	if (pf->pk == NONE)
		pf->pk = ri;
	if (pf->stamp == NONE)
		pf->stamp = ri;
	pf->n++;
	pf->copies++;
	pf->bytes += len;
	pf->next_seq = end;
	pf->unq = ri;
	st->st.copies++;
	st->st.copied++;
	if (st->st.copies > st->st.peak_copies)
		st->st.peak_copies = st->st.copies;
	if (pf->rto_at == 0)
		pf->rto_at = now + rto_of(st, pf);
	/* The p-ACK waits for the class to take the original (pep_queued). */
}

/* ---- R's frames ---- */

static void
rtt_sample(struct pep_flow *pf, uint64_t v)
{
	if (pf->min_rtt == 0 || v < pf->min_rtt)
		pf->min_rtt = v;
	/* RFC 6298: rttvar = 3/4 rttvar + 1/4 |srtt - s|, srtt = 7/8 srtt + 1/8 s */
	if (pf->srtt == 0) {
		pf->srtt = v;
		pf->rttvar = v / 2;
		return;
	}
	pf->rttvar = (pf->rttvar * 3 + (pf->srtt > v ? pf->srtt - v : v - pf->srtt)) / 4;
	pf->srtt = (pf->srtt * 7 + v) / 8;
}

/* R acknowledged everything below ack: free those copies (one round-trip
 * sample from the newest one sent once). */
static void
purge(struct pep *st, struct pep_flow *pf, uint32_t ack, uint64_t now)
{
	uint64_t sample = 0;

	while (pf->head != NONE) {
		uint32_t ri = pf->head;
		struct pep_rec *r = &st->rec[ri];

		if (seq_gt(r->seq + r->len, ack))
			break;
		if ((r->fl & (R_SENT | R_EVER_RETX)) == R_SENT && now > r->sent)
			sample = now - r->sent;
		if (r->fl & R_PACKED)
			pf->packed_bytes -= r->len;
		if (r->m != NULL) {
			rte_pktmbuf_free(r->m);
			pf->bytes -= r->len;
			pf->copies--;
			st->st.copies--;
			st->st.purged++;
		}
		if (pf->pk == ri)
			pf->pk = r->next;
		if (pf->stamp == ri)
			pf->stamp = r->next;
		if (pf->unq == ri)
			pf->unq = NONE;
		pf->head = r->next;
		if (pf->head == NONE)
			pf->tail = NONE;
		r->next = st->free_rec;
		st->free_rec = ri;
		pf->n--;
	}
	if (sample)
		rtt_sample(pf, sample);
}

/* SACK blocks of R's ACK: free the copies they cover whole. */
static void
sack_mark(struct pep *st, struct pep_flow *pf, struct rte_mbuf *m, const struct weir_pkt *p)
{
	const uint8_t *b = rte_pktmbuf_mtod_offset(m, const uint8_t *, p->l4_off + p->sack_off);

	for (unsigned int i = 0; i < p->sack_n; i++) {
		uint32_t l = rd32(b + 8 * i), rr = rd32(b + 8 * i + 4);

		if (!seq_gt(rr, pf->real_una))
			continue;       /* D-SACK or old */
		if (seq_gt(rr, pf->sack_hi))
			pf->sack_hi = rr;
		for (uint32_t ri = pf->head; ri != NONE; ri = st->rec[ri].next) {
			struct pep_rec *r = &st->rec[ri];

			if (seq_le(rr, r->seq))
				break;
			if (r->m == NULL || seq_gt(l, r->seq) || seq_gt(r->seq + r->len, rr))
				continue;
			rte_pktmbuf_free(r->m);
			r->m = NULL;
			r->fl |= R_SACKED;
			pf->bytes -= r->len;
			pf->copies--;
			st->st.copies--;
			st->st.sacked++;
		}
	}
}

/* Loss beyond the gateway: retransmit up to `budget` copies R still lacks
 * that were not retransmitted in the last round trip (with SACK: only below
 * the highest SACKed byte, holes; without: only the one R names). */
static void
recover(struct weir_mode_svc *w, struct pep *st, struct pep_flow *pf, bool sack, unsigned int budget,
	uint64_t now)
{
	unsigned int n = 0;

	if (!(pf->flags & F_RECOVERY)) {
		pf->flags |= F_RECOVERY;
		pf->bw.lossy = 1;
		pf->recover = pf->next_seq;
		for (uint32_t ri = pf->head; ri != NONE; ri = st->rec[ri].next)
			st->rec[ri].fl &= (uint8_t)~R_RETX;
	}
	for (uint32_t ri = pf->head; ri != NONE; ri = st->rec[ri].next) {
		struct pep_rec *r = &st->rec[ri];

		if (sack && !seq_gt(pf->sack_hi, r->seq))
			break;
		/* Without SACK only the hole R names, and only if it is a copy
		 * (not a gap of segments S owns) that left a round trip ago:
		 * copies are made as segments enter the class, so the chain
		 * runs ahead of what is on the wire, and a partial ACK names
		 * the next segment in flight as often as a lost one. */
		if (!sack && (r->seq != pf->real_una || !(r->fl & R_SENT) ||
			      now - r->sent < pf->srtt))
			break;
		if (r->fl & R_GONE)
			continue;       /* S's to resend: it was never told of it */
		if (!(r->fl & R_SENT))
			break;          /* still queued here (or resent from the poll): R cannot lack it yet */
		/* A resend R still lacks a round trip later was lost too (R's
		 * duplicates still name it): again now, not at the backed-off
		 * timeout, which stalls the flow for seconds on a long path. */
		if (r->m == NULL ||
		    ((r->fl & R_RETX) && now - r->sent < pf->srtt + pf->rttvar))
			continue;
		if (r->fl & R_RETX)
			st->st.retx_again++;
		if (!pep_retransmit(w, st, pf, r, now))
			return;
		st->st.fast_retx++;
		if (++n >= budget || !sack)
			return;
	}
}

/* Is the mode still pep for the flow's data direction? (A reload may have
 * taken it away: then the flow drains.) */
static inline bool
mode_on(const struct weir_mode_svc *w, const struct weir_flow *f, int d, uint32_t *leaf)
{
	const struct weir_policy_target *t;

	if (f->class_gen != w->gen8 || f->class_id >= w->policy->n_targets)
		return false;
	t = &w->policy->targets[f->class_id];
	*leaf = t->leaf[d];
	return t->mode[d] == WEIR_MODE_PEP && *leaf != WEIR_CBQ_NONE;
}

/*
 * A frame of R (travelling a = d ^ 1). Its ACK frees the copies it covers
 * (cumulative and SACK); it is dropped when S already had that news from
 * a p-ACK (it acknowledges no more than una; a first ACK at una is the
 * news S already has, a repeat of it a duplicate S must see, unless the
 * gateway holds the missing segment and recovers it itself). An ACK past
 * una goes on, its window bounded to the gateway's buffer. Frames with
 * data, FIN or SYN always go on. Returns true when taken (dropped).
 */
static bool
from_receiver(struct weir_mode_svc *w, struct pep *st, struct weir_flow *f, struct pep_flow *pf,
	      struct rte_mbuf *m, const struct weir_pkt *p, uint64_t now)
{
	const int d = pf->d, ws = ack_ws(f, d);
	const bool pure = (p->tcp_flags & (WEIR_TCP_SYN | WEIR_TCP_FIN | WEIR_TCP_RST | WEIR_TCP_URG |
					   WEIR_TCP_ACK)) == WEIR_TCP_ACK && p->payload_len == 0;
	const uint8_t *tcp = rte_pktmbuf_mtod_offset(m, const uint8_t *, p->l4_off);
	const uint32_t r = p->ack;
	uint32_t edge, shown_before;
	uint32_t leaf = WEIR_CBQ_NONE;
	bool take = false, ece_new = false;
	uint64_t dummy = 0;

	if (p->tcp_flags & WEIR_TCP_RST)
		return receiver_reset(w, st, f, pf, p);
	if (!(p->tcp_flags & WEIR_TCP_ACK))
		return false;
	pf->heard = now;
	if (p->flags & WEIR_PF_TCP_TS) {
		uint32_t e = rd32(tcp + p->ts_off + 4);

		pf->r_tsval = rd32(tcp + p->ts_off);
		if (!(pf->flags & F_RTSECR) || seq_gt(e, pf->r_tsecr))
			pf->r_tsecr = e;
		pf->flags |= F_RTS | F_RTSECR;
	}
	/* A SYN's window is never scaled (RFC 7323). R's latest edge, even
	 * one left of an earlier (a receiver may shrink its window, and a
	 * zero window must stop p-ACKs at once); not an older ACK's. */
	edge = r + ((uint32_t)p->win << ((p->tcp_flags & WEIR_TCP_SYN) ? 0 : ws));
	if (!(pf->flags & F_REDGE) || !seq_gt(pf->real_una, r)) {
		pf->redge = edge;
		pf->flags |= F_REDGE;
	}
	if (p->tcp_flags & WEIR_TCP_SYN)
		return false;
	/* R's congestion echo must reach S even when this ACK is taken:
	 * p-ACKs carry it until S's CWR (one goes now if none would). */
	if ((p->tcp_flags & WEIR_TCP_ECE) && !(pf->flags & F_ECE)) {
		pf->flags |= F_ECE;
		ece_new = true;
	}
	if (!mode_on(w, f, d, &leaf))
		pf->flags |= F_DRAIN;
	else
		update_wm(w, st, pf, leaf);
	if (p->flags & WEIR_PF_TCP_SACK)
		sack_mark(st, pf, m, p);
	if (seq_gt(r, pf->real_una)) {
		if (st->wm_measured)
			bw_sample(pf, r, now);
		purge(st, pf, r, now);
		pf->real_una = r;
		pf->retries = 0;
		pf->dups = 0;
		pf->rto_at = pf->n ? now + rto_of(st, pf) : 0;
		if ((pf->flags & F_RECOVERY) && !seq_gt(pf->recover, r)) {
			pf->flags &= (uint16_t)~F_RECOVERY;
			pf->sack_hi = r;
		} else if (pf->flags & F_RECOVERY) {
			/* A partial ACK: the hole it names, and with SACK every
			 * hole below R's highest SACKed byte (up to a burst):
			 * those segments left the path lost, so their resends put
			 * back no more than it held. One hole a round trip
			 * (NewReno) stalls S a round trip per segment a burst
			 * lost: S waits on the full buffer, so no duplicates come
			 * to clock the rest. */
			recover(w, st, pf, seq_gt(pf->sack_hi, r), PEP_HOLES_BURST, now);
		}
	} else if (pure && r == pf->real_una && p->win == pf->last_win && pf->n > 0 &&
		   seq_gt(pf->next_seq, r)) {
		/* A duplicate (a window update is not one, RFC 5681). */
		if (pf->dups < UINT8_MAX)
			pf->dups++;
		if (p->sack_n > 0 && seq_gt(pf->sack_hi, r))
			recover(w, st, pf, true, 1, now);
		else if (pf->dups >= 3)
			recover(w, st, pf, false, 1, now);
	}
	shown_before = pf->shown;
	if (seq_gt(r, pf->una)) {
		pf->una = r;
		if (pure) {
			/* R's own window, bounded to the buffer past what it acked. */
			uint32_t limit = pf->real_una + pf->maxbuf;

			if (!(pf->flags & F_DRAIN) && pf->maxbuf != 0 && seq_gt(pf->shown, limit))
				limit = pf->shown;
			if (!(pf->flags & F_DRAIN) && pf->maxbuf != 0 && seq_gt(edge, limit)) {
				uint32_t raw = RTE_MIN((limit - r + (1u << ws) - 1) >> ws, 0xffffu);

				weir_ack_set_win(m, p, (uint16_t)raw);
				edge = r + (raw << ws);
			}
			if (seq_gt(edge, pf->shown))
				pf->shown = edge;
		}
		st->st.real_passed++;
	} else if (pure) {
		/* R still lacks the segment at r: a copy here covers it? Not
		 * one the class dropped before its p-ACK (R_GONE, no mbuf):
		 * that hole is S's, and R's duplicates are how S learns of it
		 * without its backed-off timeout (seen: 35 s stalls). */
		const struct pep_rec *h = pf->head != NONE ? &st->rec[pf->head] : NULL;
		bool covered = h != NULL && seq_le(h->seq, r) && h->m != NULL;

		if (seq_gt(pf->una, r) || covered || r != pf->last_real)
			take = true;
		else
			st->st.real_passed++;
	}
	pf->last_real = r;
	pf->last_win = p->win;
	if (release(w, st, f, pf) == 0 && take) {
		/* Dropped, and no p-ACK went: S must still hear of a window R
		 * opened, and of congestion R echoed. */
		uint32_t target = pf->redge, limit = pf->real_una + pf->maxbuf;

		if (seq_gt(target, limit))
			target = limit;
		if (!(pf->flags & F_DRAIN) &&
		    (seq_gt(target, pf->shown + pf->mss) || (pf->shown == shown_before &&
							     seq_gt(target, pf->shown) && pf->n == 0))) {
			pep_send_pack(w, st, f, pf);
			st->st.win_updates++;
		} else if (ece_new) {
			pep_send_pack(w, st, f, pf);
			st->st.ece_sent++;
		}
	}
	if (take) {
		rte_pktmbuf_free(m);
		st->st.real_dropped++;
	}
	if ((pf->flags & F_SRST) && !owed(pf))
		sender_reset_done(w, st, f, pf);
	else if ((pf->flags & F_DRAIN) && pf->n == 0 && !seq_gt(pf->una, pf->real_una))
		pep_flow_drop(st, f, pf, &dummy);
	return take;
}

bool
weir_pep_packet(struct weir_mode_svc *w, struct weir_flow *f, struct rte_mbuf *m,
		const struct weir_pkt *p, int a, uint32_t slot, uint64_t now)
{
	struct pep *st = pep_of(w);
	struct pep_flow *pf;

	if (st == NULL) {
		f->shape &= (uint8_t)~WEIR_FSH_PEP;
		return false;
	}
	if ((pf = flow_get(st, a, slot)) != NULL && from_sender(st, f, pf, m, p)) {
		rte_pktmbuf_free(m);    /* S's RST, held back (sender_reset) */
		return true;
	}
	if ((pf = flow_get(st, a ^ 1, slot)) != NULL)
		return from_receiver(w, st, f, pf, m, p, now);
	return false;
}

/* ---- the mode's hooks ---- */

static enum weir_verdict
pep_enqueue(struct weir_mode_svc *w, struct weir_flow *f, struct rte_mbuf *m, int d, uint32_t leaf,
	    uint64_t now)
{
	struct pep *st = pep_of(w);
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
	uint32_t slot;
	struct pep_flow *pf;

	if (st == NULL || p->l4proto != IPPROTO_TCP)
		return WEIR_V_PASS;
	slot = weir_flow_slot(w->flows, f);
	pf = flow_get(st, d, slot);
	if (p->tcp_flags & WEIR_TCP_SYN) {
		/* Only a flow whose handshake the mode saw: never one that
		 * began before it was enabled. */
		if (pf == NULL && !(p->tcp_flags & WEIR_TCP_RST) && f->pkts[d] == 1)
			flow_new(w, st, f, d, slot, m, p);
		return WEIR_V_PASS;
	}
	if (pf == NULL || p->payload_len == 0 || (pf->flags & F_DRAIN))
		return WEIR_V_PASS;
	if (weir_ack_wscale(f, d ^ 1) < 0) {
		pf->flags |= F_DRAIN;   /* the handshake was not seen whole */
		return WEIR_V_PASS;
	}
	copy_segment(w, st, f, pf, m, p, leaf, now);
	return WEIR_V_PASS;
}

/* The class took S's segment: its copy may be p-acked now. */
static void
pep_queued(struct weir_mode_svc *w, const struct weir_flow *f, struct rte_mbuf *m, int d,
	   uint32_t slot)
{
	struct pep *st = pep_of(w);
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
	struct pep_flow *pf;
	uint32_t ri;

	if (st == NULL || (pf = flow_get(st, d, slot)) == NULL || (ri = pf->unq) == NONE ||
	    st->rec[ri].seq != p->seq)
		return;
	pf->unq = NONE;
	release(w, st, f, pf);
	if (!(st->rec[ri].fl & R_PACKED)) {
		st->st.withheld++;
		pf->bw.limited = 1;
	}
}

/* The class refused S's segment (queue full), evicted it from a full leaf
 * or its AQM dropped it. Not p-acked yet: S owns it, the copy goes (R_GONE
 * keeps its place so no p-ACK passes it). p-acked: the copy goes to R
 * from the next poll (resend_lost), not at the timeout: every hole behind
 * it would wait for that too. */
static void
pep_dropped(struct weir_mode_svc *w, const struct weir_flow *f, struct rte_mbuf *m, int d)
{
	struct pep *st = pep_of(w);
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
	struct pep_flow *pf;

	if (st == NULL || p->payload_len == 0 ||
	    (pf = flow_get(st, d, weir_flow_slot(w->flows, f))) == NULL)
		return;
	for (uint32_t ri = pf->stamp; ri != NONE; ri = st->rec[ri].next) {
		struct pep_rec *r = &st->rec[ri];

		if (seq_gt(r->seq, p->seq))
			return;
		if (r->seq != p->seq)
			continue;
		if (pf->unq == ri)
			pf->unq = NONE;
		if (r->m == NULL)
			return;
		if (r->fl & R_PACKED) {
			/* S was told it arrived: nobody else will resend it. */
			r->fl |= R_LOST;
			if (!(pf->flags & F_LOST)) {
				pf->flags |= F_LOST;
				st->lost[st->n_lost++] = (uint16_t)(pf - st->fl);
			}
			return;
		}
		rte_pktmbuf_free(r->m);
		r->m = NULL;
		r->fl |= R_GONE;
		pf->bytes -= r->len;
		pf->copies--;
		st->st.copies--;
		st->st.class_dropped++;
		return;
	}
}

/* S's segment left the class tree: the exact time for its round trip. */
static void
pep_sent(struct weir_mode_svc *w, struct rte_mbuf *m, int d, uint32_t slot, uint32_t leaf,
	 uint32_t qlen, uint64_t now)
{
	struct pep *st = pep_of(w);
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
	struct pep_flow *pf;

	RTE_SET_USED(leaf);
	RTE_SET_USED(qlen);
	if (st == NULL || p->payload_len == 0 || (pf = flow_get(st, d, slot)) == NULL)
		return;
	/* Originals leave in order; one whose copy was never made or whose
	 * original was dropped is stepped over (a few at most). */
	for (unsigned int k = 0; k < 4 && pf->stamp != NONE; k++) {
		struct pep_rec *r = &st->rec[pf->stamp];

		if (seq_gt(r->seq, p->seq))
			return;
		pf->stamp = r->next;
		if (r->seq == p->seq) {
			r->sent = now;
			r->fl |= R_SENT;
			if (pf->head != NONE && &st->rec[pf->head] == r)
				pf->rto_at = now + rto_of(st, pf);
			return;
		}
	}
}

bool
weir_pep_stats_copy(const struct weir_mode_svc *w, struct weir_pep_stats *out)
{
	const struct pep *st = pep_of(w);

	if (st == NULL)
		return false;
	*out = st->st;
	return true;
}

size_t
weir_pep_bytes_per_flow(void)
{
	return sizeof(struct pep_flow) + 2 * sizeof(uint16_t);
}

size_t
weir_pep_bytes_per_copy(void)
{
	return sizeof(struct pep_rec) * 2;      /* the record pool is twice the copy cap */
}

uint32_t
weir_pep_watermark(const struct weir_mode_svc *w, int d, uint32_t slot)
{
	const struct pep *st = pep_of(w);
	const struct pep_flow *pf = st ? flow_get(st, d, slot) : NULL;

	return pf ? pf->wm : 0;
}

uint64_t
weir_pep_delivery_bps(const struct weir_mode_svc *w, int d, uint32_t slot)
{
	const struct pep *st = pep_of(w);
	const struct pep_flow *pf = st ? flow_get(st, d, slot) : NULL;

	if (pf == NULL || pf->bw.flat < PEP_BW_FULL)
		return 0;
	return (uint64_t)(((unsigned __int128)bw_estimate(&pf->bw) * w->tsc_hz * 8) >> 32);
}

uint32_t
weir_pep_buffered(const struct weir_mode_svc *w, int d, uint32_t slot)
{
	const struct pep *st = pep_of(w);
	const struct pep_flow *pf = st ? flow_get(st, d, slot) : NULL;

	return pf ? pf->bytes : 0;
}

const struct weir_mode_ops weir_mode_pep = {
	.name = "pep",
	/* Every data segment must pass the enqueue hook (no cut-through);
	 * the ACK store must exist (its handshake timing, ACK control). */
	.flags = WEIR_MODEF_ACKS | WEIR_MODEF_NO_CUT,
	.init = pep_init,
	.fini = pep_fini,
	.reset = pep_reset,
	.enqueue = pep_enqueue,
	.queued = pep_queued,
	.sent = pep_sent,
	.dropped = pep_dropped,
	.kept_packet = weir_pep_packet,
	.kept_end = weir_pep_end,
	.poll = weir_pep_poll,
	.drain_begin = weir_pep_drain_begin,
	.owed = weir_pep_owed,
	.give_up_all = weir_pep_give_up_all,
	.flush = weir_pep_flush,
};
