/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the pep mode, premature ACKs with a dynamic watermark. See pep.h
 * and docs/pep.md.
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
#include "pep.h"
#include "postack_store.h"
#include "tcpwin.h"
#include "worker.h"
#include "worker_int.h"

#define NONE UINT32_MAX
#define POLL_BUDGET 32          /* flows one poll looks at */
#define TMPL_L2_MAX 22          /* Ethernet + two VLAN tags */

/* pep_rec.fl */
#define R_PACKED 0x01           /* S was p-acked for it */
#define R_RETX   0x02           /* retransmitted in the current recovery episode */
#define R_SACKED 0x04           /* R SACKed it: mbuf freed, place kept */
#define R_SENT   0x08           /* its original left the class tree (sent is exact) */
#define R_EVER_RETX 0x10        /* retransmitted at all: no RTT sample (Karn) */
#define R_GONE   0x20           /* the class dropped its original before a p-ACK: S's to resend */
#define R_LOST   0x40           /* the class dropped its original after the p-ACK: weir's to resend */

struct pep_rec {
	struct rte_mbuf *m;     /* the copy; NULL once SACKed */
	uint64_t sent;          /* TSC the original (or its last retransmission) left */
	uint32_t seq;
	uint32_t next;          /* record index, NONE at the tail */
	uint16_t len;
	uint8_t fl;
	uint8_t _pad[5];
};

/* How to make frames between S and R: from S's own frames. */
struct pep_tmpl {
	uint8_t l2[TMPL_L2_MAX];        /* S's frame up to the IP header (MACs, tags, ethertype) */
	uint8_t l2_len;
	uint8_t v6;
	uint8_t ts;                     /* the flow uses timestamps */
	uint8_t s_addr[16], r_addr[16];
	uint16_t s_port, r_port;        /* host order */
	uint32_t s_ack;                 /* S's latest ACK: R's next sequence number */
	uint32_t s_edge;                /* S's window's right edge (s_ack + its window) */
	uint32_t s_tsval;               /* S's latest TSval (a p-ACK echoes it) */
};

/* pep_flow.flags */
#define F_DRAIN    0x01         /* no more copies or p-ACKs: mode gone, given up, or never eligible */
#define F_RECOVERY 0x02         /* a loss episode runs until real_una reaches `recover` */
#define F_REDGE    0x04         /* redge is known */
#define F_RTS      0x08         /* r_tsval is known */
#define F_SEDGE    0x10         /* s_ack and s_edge are known (S has sent an ACK) */
#define F_SRST     0x20         /* S reset while R still owed p-acked data: R's RST waits */
#define F_LOST     0x40         /* has R_LOST records: on the lost list */
#define F_ECE      0x80         /* R echoed congestion (ECE) since S's last CWR: p-ACKs carry it */
#define F_RTSECR   0x100        /* r_tsecr is known */

struct pep_flow {
	uint32_t head, tail;    /* the chain */
	uint32_t pk;            /* first record not p-acked, NONE: all are */
	uint32_t stamp;         /* first record whose original has not been seen leaving */
	uint32_t una;           /* the highest ACK S has been shown (p-ACK or R's) */
	uint32_t real_una;      /* R's highest cumulative ACK */
	uint32_t last_real;     /* R's previous ACK number (duplicates) */
	uint32_t next_seq;      /* end of the chain */
	uint32_t redge;         /* R's furthest right window edge */
	uint32_t shown;         /* right edge shown to S (never moves left) */
	uint32_t r_tsval;       /* R's latest TSval */
	uint32_t r_tsecr;       /* R's highest TSecr: its TS.Recent, S's TSval it keeps */
	uint32_t recover;       /* loss episode ends when R acks this */
	uint32_t sack_hi;       /* highest SACKed sequence number in the episode */
	uint16_t last_win;      /* R's previous raw window (a duplicate repeats it) */
	uint16_t _pad16;
	uint32_t unq;           /* the record whose original is being queued: not p-ackable yet */
	uint32_t bytes;         /* bytes of the copies held (SACKed ones not) */
	uint32_t packed_bytes;  /* bytes p-acked and not yet acked by R */
	uint32_t wm, maxbuf;    /* watermark and maximum buffer, bytes */
	/* gateway -> R -> gateway, TSC ticks: 64 bits, as every tick quantity
	 * here (2 s is 4.6e9 ticks at 2.3 GHz, more than 32 bits hold). */
	uint64_t srtt, rttvar, min_rtt;
	uint64_t rto_at;        /* 0: timer off */
	uint64_t heard;         /* TSC of R's latest ACK */
	uint64_t first_to;      /* TSC of the first timeout without progress since */
	uint32_t slot;
	/* Records in the chain and those with an mbuf: up to the flow cap,
	 * a quarter of shaping.pep.copies (up to 2^26): 16 bits wrapped. */
	uint32_t n;
	uint32_t copies;
	uint16_t mss;
	uint16_t pos;           /* in the active list */
	uint16_t flags;
	uint8_t d;
	uint8_t dups;
	uint8_t retries;
	struct pep_tmpl t;
};

_Static_assert(sizeof(((struct pep_flow *)0)->copies) * 8 >= 24,
	       "a flow's copies reach a quarter of shaping.pep.copies' 2^26");

struct pep {
	uint16_t *idx[2];               /* [d][slot]: flow index + 1, 0 = none */
	struct pep_flow *fl;            /* WEIR_PEP_MAX_FLOWS */
	uint16_t *free_fl;              /* stack of free flow indices */
	uint16_t n_free;
	uint16_t *active;               /* flow indices with state */
	uint16_t n_active, rr;
	uint16_t *lost;                 /* flow indices with F_LOST: resent first at the next poll */
	uint16_t n_lost;
	struct pep_rec *rec;
	uint32_t n_rec, free_rec;
	uint32_t flow_cap;              /* copies one flow may hold */
	uint32_t n_flows;
	struct rte_mempool *mp;
	uint64_t rto_min, rto_max, rtt_unknown;
	struct weir_pep_stats st;
};

static inline struct pep *
pep_of(const struct weir_worker *w)
{
	return w->mode_state[WEIR_MODE_PEP];
}

static inline bool
seq_le(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) <= 0;
}

static inline bool
seq_gt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

static inline uint32_t
rd32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* ---- state ---- */

static int
pep_init(struct weir_worker *w, uint32_t n_flows, int socket_id)
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
		rte_free(st->idx[0]);
		rte_free(st->idx[1]);
		rte_free(st->fl);
		rte_free(st->free_fl);
		rte_free(st->active);
		rte_free(st->lost);
		rte_free(st->rec);
		rte_free(st);
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
pep_fini(struct weir_worker *w)
{
	struct pep *st = pep_of(w);

	if (st == NULL)
		return;
	weir_pep_flush(w);
	rte_free(st->idx[0]);
	rte_free(st->idx[1]);
	rte_free(st->fl);
	rte_free(st->free_fl);
	rte_free(st->active);
	rte_free(st->lost);
	rte_free(st->rec);
	rte_free(st);
	w->mode_state[WEIR_MODE_PEP] = NULL;
}

static inline struct pep_flow *
flow_get(const struct pep *st, int d, uint32_t slot)
{
	uint16_t i = st->idx[d][slot];

	return i ? &st->fl[i - 1] : NULL;
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
static void
chain_free(struct pep *st, struct pep_flow *pf, uint64_t *why)
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
static void
flow_drop(struct pep *st, struct weir_flow *f, struct pep_flow *pf, uint64_t *why)
{
	uint16_t i = (uint16_t)(pf - st->fl);
	uint16_t last;

	chain_free(st, pf, why);
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
pep_reset(struct weir_worker *w, uint32_t slot)
{
	struct pep *st = pep_of(w);

	if (st == NULL)
		return;
	for (int d = 0; d < 2; d++) {
		struct pep_flow *pf = flow_get(st, d, slot);

		if (pf != NULL)         /* the worker ends flows first: only defensive */
			flow_drop(st, NULL, pf, &st->st.ended_copies);
	}
}

static uint64_t
rto_of(const struct pep *st, const struct pep_flow *pf)
{
	uint64_t rto = pf->srtt + 4 * pf->rttvar;

	return RTE_MIN(RTE_MAX(rto, st->rto_min), st->rto_max);
}

/* A SYN (or SYN+ACK) of S under pep: the flow is eligible from its start.
 * The template is this frame's headers. */
static struct pep_flow *
flow_new(struct weir_worker *w, struct pep *st, struct weir_flow *f, int d, uint32_t slot,
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

/* ---- made frames ---- */

/*
 * A TCP segment between S and R made from the template: to S (from R) or
 * to R (from S), no payload, IPv4 without options (DF, TTL 64) or IPv6
 * (hop limit 64), checksums computed whole. A p-ACK to S carries a
 * timestamp option when the flow uses them: R's latest TSval, S's latest
 * TSval echoed (S times its round trip to the gateway: that is the point).
 */
static struct rte_mbuf *
make_frame(struct pep *st, const struct pep_flow *pf, bool to_s, uint32_t seq, uint32_t ack,
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

static inline int
ack_ws(const struct weir_flow *f, int d)
{
	int ws = weir_ack_wscale(f, d ^ 1);

	return ws < 0 ? 0 : ws;
}

/* Send S an ACK for everything up to una (out of port d: towards S). */
static void
send_pack(struct weir_worker *w, struct pep *st, const struct weir_flow *f, struct pep_flow *pf)
{
	uint16_t win = pack_window(pf, pf->una, ack_ws(f, pf->d));
	uint8_t fl = (uint8_t)(WEIR_TCP_ACK | ((pf->flags & F_ECE) ? WEIR_TCP_ECE : 0));
	struct rte_mbuf *m = make_frame(st, pf, true, pf->t.s_ack, pf->una, fl, win);

	if (m == NULL)
		return;
	weir_worker_out(w, pf->d, m);
	st->st.pack_sent++;
}

/* ---- the watermark ---- */

/*
 * Watermark = the flow's share of its class now (rate / active flows,
 * which follows rate changes and the flows that come and go) x the lowest
 * round trip measured beyond the gateway, plus an eighth and two segments
 * (the slack TCR found a window needs to carry its rate), in bytes. The
 * maximum buffer is twice that. Both are bounded by the flow's copy cap.
 */
static void
update_wm(const struct weir_worker *w, const struct pep *st, struct pep_flow *pf, uint16_t leaf)
{
	uint64_t rate = w->cls_ctr[pf->d][leaf].share_bytes_per_tick;
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
release(struct weir_worker *w, struct pep *st, const struct weir_flow *f, struct pep_flow *pf)
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
		send_pack(w, st, f, pf);
	}
	return n;
}

/* ---- retransmission from the copies ---- */

/*
 * A retransmission carries the original's TSval, raised to R's TS.Recent
 * (its highest TSecr) when that is past it. It leaves straight to R, past
 * the originals still queued here and on the path: a TSval newer than
 * theirs would move TS.Recent past them once it filled the hole, and PAWS
 * (RFC 7323 sec. 5) would discard every one of them, each then a hole
 * recovered one a round trip (seen: 600 ms path, 3 % loss, 20 MB at one
 * segment a round trip). Below TS.Recent (S resent something itself with
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

static bool
retransmit(struct weir_worker *w, struct pep *st, const struct pep_flow *pf, struct pep_rec *r,
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
	/* Straight to R, past the class queue: one frame per loss event,
	 * and the original already paid its way through the class. */
	weir_worker_out(w, pf->d ^ 1, m);
	return true;
}

/* RSTs to both sides (S from R, R from S) and the copies dropped: R has
 * gone silent while S believes data was delivered. */
static void
give_up(struct weir_worker *w, struct pep *st, struct weir_flow *f, struct pep_flow *pf)
{
	struct rte_mbuf *m;

	/* Rare, and an operator wants to know which flow and where it stood. */
	RTE_LOG(NOTICE, USER1, "pep: giving up on a flow (dir %d, port %u -> %u): R acked %u, "
		"S told %u, copies %u..%u (%u, %u bytes p-acked), %u timeouts, srtt %" PRIu64 " us\n",
		pf->d, pf->t.s_port, pf->t.r_port, pf->real_una, pf->una,
		pf->head != NONE ? st->rec[pf->head].seq : 0, pf->next_seq, pf->n, pf->packed_bytes,
		pf->retries, pf->srtt / w->tsc_per_us);
	m = make_frame(st, pf, true, pf->t.s_ack, pf->una, WEIR_TCP_RST | WEIR_TCP_ACK, 0);
	if (m != NULL) {
		weir_worker_out(w, pf->d, m);
		st->st.rst_sent++;
	}
	m = make_frame(st, pf, false, pf->real_una, pf->t.s_ack, WEIR_TCP_RST | WEIR_TCP_ACK, 0);
	if (m != NULL) {
		weir_worker_out(w, pf->d ^ 1, m);
		st->st.rst_sent++;
	}
	st->st.give_ups++;
	pf->flags |= F_DRAIN;
	chain_free(st, pf, &st->st.ended_copies);
	RTE_SET_USED(f);
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

/* Owes R data S was told arrived. */
static inline bool
owed(const struct pep_flow *pf)
{
	return pf->packed_bytes > 0;
}

static bool
sender_reset(struct pep *st, struct weir_flow *f, struct pep_flow *pf, const struct weir_pkt *p)
{
	uint32_t edge = seq_gt(pf->shown, pf->redge) ? pf->shown : pf->redge;

	if (!(pf->flags & F_REDGE) || seq_gt(pf->real_una, p->seq) || seq_gt(p->seq, edge)) {
		st->st.rst_ignored++;
		return false;
	}
	if (!owed(pf)) {
		flow_drop(st, f, pf, &st->st.ended_copies);
		return false;
	}
	if (!(pf->flags & F_SRST))
		st->st.rst_held++;
	pf->flags |= F_SRST | F_DRAIN;  /* no more copies or p-ACKs: S is gone */
	return true;
}

/* R's copies all delivered after S reset: R's RST now, state gone. */
static void
sender_reset_done(struct weir_worker *w, struct pep *st, struct weir_flow *f, struct pep_flow *pf)
{
	struct rte_mbuf *m = make_frame(st, pf, false, pf->real_una, pf->t.s_ack,
					WEIR_TCP_RST | WEIR_TCP_ACK, 0);

	if (m != NULL) {
		weir_worker_out(w, pf->d ^ 1, m);
		st->st.rst_sent++;
	}
	flow_drop(st, f, pf, &st->st.ended_copies);
}

static bool
receiver_reset(struct weir_worker *w, struct pep *st, struct weir_flow *f, struct pep_flow *pf,
	       const struct weir_pkt *p)
{
	if ((pf->flags & F_SEDGE) &&
	    (seq_gt(pf->t.s_ack, p->seq) || seq_gt(p->seq, pf->t.s_edge))) {
		st->st.rst_ignored++;
		return false;
	}
	if (owed(pf))
		give_up(w, st, f, pf);  /* S hears it from the gateway too, at its rcv_nxt */
	flow_drop(st, f, pf, &st->st.ended_copies);
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
copy_segment(struct weir_worker *w, struct pep *st, struct weir_flow *f, struct pep_flow *pf,
	     struct rte_mbuf *m, const struct weir_pkt *p, uint16_t leaf, uint64_t now)
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

/* Loss beyond the gateway: retransmit the first copy R still lacks that
 * was not retransmitted in this episode (with SACK: only below the
 * highest SACKed byte, a hole). */
static void
recover_one(struct weir_worker *w, struct pep *st, struct pep_flow *pf, bool sack, uint64_t now)
{
	if (!(pf->flags & F_RECOVERY)) {
		pf->flags |= F_RECOVERY;
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
		 * timeout (3 % loss beyond lost one resend in 33, and each
		 * stalled the flow for seconds). */
		if (r->m == NULL ||
		    ((r->fl & R_RETX) && now - r->sent < pf->srtt + pf->rttvar))
			continue;
		if (r->fl & R_RETX)
			st->st.retx_again++;
		if (retransmit(w, st, pf, r, now))
			st->st.fast_retx++;
		return;
	}
}

/* Is the mode still pep for the flow's data direction? (A reload may have
 * taken it away: then the flow drains.) */
static inline bool
mode_on(const struct weir_worker *w, const struct weir_flow *f, int d, uint16_t *leaf)
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
from_receiver(struct weir_worker *w, struct pep *st, struct weir_flow *f, struct pep_flow *pf,
	      struct rte_mbuf *m, const struct weir_pkt *p, uint64_t now)
{
	const int d = pf->d, ws = ack_ws(f, d);
	const bool pure = (p->tcp_flags & (WEIR_TCP_SYN | WEIR_TCP_FIN | WEIR_TCP_RST | WEIR_TCP_URG |
					   WEIR_TCP_ACK)) == WEIR_TCP_ACK && p->payload_len == 0;
	const uint8_t *tcp = rte_pktmbuf_mtod_offset(m, const uint8_t *, p->l4_off);
	const uint32_t r = p->ack;
	uint32_t edge, shown_before;
	uint16_t leaf = WEIR_CBQ_NONE;
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
		purge(st, pf, r, now);
		pf->real_una = r;
		pf->retries = 0;
		pf->dups = 0;
		pf->rto_at = pf->n ? now + rto_of(st, pf) : 0;
		if ((pf->flags & F_RECOVERY) && !seq_gt(pf->recover, r)) {
			pf->flags &= (uint16_t)~F_RECOVERY;
			pf->sack_hi = r;
		} else if (pf->flags & F_RECOVERY) {
			recover_one(w, st, pf, false, now);    /* a partial ACK: the next hole */
		}
	} else if (pure && r == pf->real_una && p->win == pf->last_win && pf->n > 0 &&
		   seq_gt(pf->next_seq, r)) {
		/* A duplicate (a window update is not one, RFC 5681). */
		if (pf->dups < UINT8_MAX)
			pf->dups++;
		if (p->sack_n > 0 && seq_gt(pf->sack_hi, r))
			recover_one(w, st, pf, true, now);
		else if (pf->dups >= 3)
			recover_one(w, st, pf, false, now);
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
			send_pack(w, st, f, pf);
			st->st.win_updates++;
		} else if (ece_new) {
			send_pack(w, st, f, pf);
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
		flow_drop(st, f, pf, &dummy);
	return take;
}

bool
weir_pep_packet(struct weir_worker *w, struct weir_flow *f, struct rte_mbuf *m,
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
pep_enqueue(struct weir_worker *w, struct weir_flow *f, struct rte_mbuf *m, int d, uint16_t leaf,
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
pep_queued(struct weir_worker *w, const struct weir_flow *f, struct rte_mbuf *m, int d,
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
	if (!(st->rec[ri].fl & R_PACKED))
		st->st.withheld++;
}

/* The class refused S's segment (queue full), evicted it from a full leaf
 * or its AQM dropped it. Not p-acked yet: S owns it, the copy goes (R_GONE
 * keeps its place so no p-ACK passes it). p-acked: the copy goes to R
 * from the next poll (resend_lost), not at the timeout: every hole behind
 * it would wait for that too. */
static void
pep_dropped(struct weir_worker *w, const struct weir_flow *f, struct rte_mbuf *m, int d)
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
pep_sent(struct weir_worker *w, struct rte_mbuf *m, int d, uint32_t slot, uint16_t leaf,
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

void
weir_pep_end(struct weir_worker *w, struct weir_flow *f, uint32_t slot)
{
	struct pep *st = pep_of(w);

	if (st == NULL)
		return;
	for (int d = 0; d < 2; d++) {
		struct pep_flow *pf = flow_get(st, d, slot);

		if (pf == NULL)
			continue;
		if (pf->packed_bytes > 0)
			give_up(w, st, f, pf);  /* S was told of data R never acknowledged */
		flow_drop(st, f, pf, &st->st.ended_copies);
	}
	f->shape &= (uint8_t)~WEIR_FSH_PEP;
}

/* Copies whose p-acked originals the class dropped, straight to R as
 * every recovery is (sent counts as the original's departure), at most
 * `budget`; a flow with more stays listed. */
static unsigned int
resend_lost(struct weir_worker *w, struct pep *st, uint64_t now, unsigned int budget)
{
	unsigned int sent = 0;

	while (st->n_lost > 0 && sent < budget) {
		struct pep_flow *pf = &st->fl[st->lost[st->n_lost - 1]];
		bool more = false;

		for (uint32_t ri = pf->head; ri != NONE; ri = st->rec[ri].next) {
			struct pep_rec *r = &st->rec[ri];

			if (!(r->fl & R_LOST))
				continue;
			if (sent == budget) {
				more = true;
				break;
			}
			r->fl = (uint8_t)((r->fl & ~R_LOST) | R_SENT);
			if (retransmit(w, st, pf, r, now)) {
				st->st.lost_resent++;
				sent++;
			}
		}
		if (more)
			break;
		pf->flags &= (uint16_t)~F_LOST;
		st->n_lost--;
	}
	return sent;
}

unsigned int
weir_pep_poll(struct weir_worker *w, uint64_t now, uint64_t *wake)
{
	struct pep *st = pep_of(w);
	unsigned int sent = 0;

	if (st == NULL || st->n_active == 0)
		return 0;
	if (unlikely(st->n_lost > 0))
		sent += resend_lost(w, st, now, POLL_BUDGET);
	for (unsigned int k = 0; k < POLL_BUDGET && st->n_active > 0; k++) {
		struct pep_flow *pf;
		struct weir_flow *f;

		if (st->rr >= st->n_active)
			st->rr = 0;
		pf = &st->fl[st->active[st->rr++]];
		f = weir_flow_by_slot(w->flows, pf->slot);
		if (pf->n == 0 && (f->state == WEIR_FS_CLOSED || (pf->flags & F_DRAIN))) {
			flow_drop(st, f, pf, &st->st.ended_copies);
			continue;
		}
		if (pf->rto_at == 0 || now < pf->rto_at)
			continue;
		/* Give up only on a receiver that is silent: nothing from R
		 * since the first of these timeouts. One that still sends
		 * (duplicates: its path is congested, the copies are being
		 * lost again) is retried at the longest timeout for as long
		 * as it answers (a flow reset while R talked was seen with
		 * cubic over a 0.5 Mbit/s trough). */
		if (pf->retries >= WEIR_PEP_RETRIES && pf->heard < pf->first_to) {
			if (pf->packed_bytes > 0) {
				give_up(w, st, f, pf);
				sent += 2;
			} else {
				/* Only stored copies: S still owns that data. */
				pf->flags |= F_DRAIN;
				chain_free(st, pf, &st->st.ended_copies);
			}
			continue;
		}
		if (pf->retries == 0)
			pf->first_to = now;
		if (pf->retries >= WEIR_PEP_RETRIES) {
			/* R answered meanwhile: it must now stay silent for three
			 * more (longest) timeouts before the flow is given up. */
			pf->first_to = now;
			pf->retries = WEIR_PEP_RETRIES - 3;
		}
		pf->retries++;
		pf->flags |= F_RECOVERY;
		pf->recover = pf->next_seq;
		for (uint32_t ri = pf->head; ri != NONE; ri = st->rec[ri].next) {
			if (st->rec[ri].m != NULL) {
				if (retransmit(w, st, pf, &st->rec[ri], now)) {
					st->st.rto_retx++;
					sent++;
				}
				break;
			}
		}
		pf->rto_at = now + RTE_MIN(rto_of(st, pf) << pf->retries, st->rto_max);
	}
	if (st->n_active > 0)
		*wake = RTE_MIN(*wake, now + w->tsc_hz / 1000);
	return sent;
}

void
weir_pep_drain_begin(struct weir_worker *w)
{
	struct pep *st = pep_of(w);

	for (uint16_t k = 0; st != NULL && k < st->n_active; k++)
		st->fl[st->active[k]].flags |= F_DRAIN;
}

bool
weir_pep_owed(const struct weir_worker *w)
{
	const struct pep *st = pep_of(w);

	for (uint16_t k = 0; st != NULL && k < st->n_active; k++)
		if (owed(&st->fl[st->active[k]]))
			return true;
	return false;
}

unsigned int
weir_pep_give_up_all(struct weir_worker *w)
{
	struct pep *st = pep_of(w);
	unsigned int n = 0;

	for (uint16_t k = 0; st != NULL && k < st->n_active; k++) {
		struct pep_flow *pf = &st->fl[st->active[k]];

		if (!owed(pf))
			continue;
		give_up(w, st, weir_flow_by_slot(w->flows, pf->slot), pf);
		st->st.drain_resets++;
		n++;
	}
	return n;
}

unsigned int
weir_pep_flush(struct weir_worker *w)
{
	struct pep *st = pep_of(w);
	uint64_t before;

	if (st == NULL)
		return 0;
	before = st->st.flushed;
	while (st->n_active > 0) {
		struct pep_flow *pf = &st->fl[st->active[0]];

		/* Only when the worker never ran its stop drain (tests, a
		 * failed start): the loop delivers or resets first. */
		if (owed(pf)) {
			st->st.flushed_owed++;
			RTE_LOG(WARNING, USER1, "pep: a flow's p-acked data dropped at shutdown "
				"without a reset (port %u -> %u, %u bytes)\n", pf->t.s_port,
				pf->t.r_port, pf->packed_bytes);
		}
		flow_drop(st, w->flows != NULL ? weir_flow_by_slot(w->flows, pf->slot) : NULL, pf,
			  &st->st.flushed);
	}
	return (unsigned int)(st->st.flushed - before);
}

bool
weir_pep_stats_copy(const struct weir_worker *w, struct weir_pep_stats *out)
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
weir_pep_watermark(const struct weir_worker *w, int d, uint32_t slot)
{
	const struct pep *st = pep_of(w);
	const struct pep_flow *pf = st ? flow_get(st, d, slot) : NULL;

	return pf ? pf->wm : 0;
}

uint32_t
weir_pep_buffered(const struct weir_worker *w, int d, uint32_t slot)
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
