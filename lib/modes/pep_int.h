/* SPDX-License-Identifier: BSD-3-Clause
 * weir: pep's private state and what its files share (pep.c: the state,
 * the watermark, S's and R's frames and the mode's hooks; pep_frames.c:
 * the frames pep makes and resends; pep_life.c: timers, the end of a flow
 * and of the worker). Names as in pep.c's header.
 */
#ifndef WEIR_PEP_INT_H
#define WEIR_PEP_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_mbuf.h>

#include "pep.h"
#include "tcpwin.h"
#include "mode_svc.h"

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

/* Copies resent at most on one partial ACK (the holes its SACK shows). */
#define PEP_HOLES_BURST 16

/*
 * The delivery rate R's ACKs show: bytes R acknowledged over at least one
 * round trip beyond the gateway, one sample per round trip. The estimate is
 * the largest sample of the current and the previous epoch of
 * PEP_BW_EPOCH samples (a windowed maximum, as BBR's bandwidth filter), so
 * a fall of the path's rate is followed within 2 x PEP_BW_EPOCH round trips
 * and a rise at once. Only samples during which the watermark held the
 * sender back (a segment stored without a p-ACK) age the filter: a sender
 * that sends less than the path carries says nothing of the path. A sample
 * that spans a loss episode is dropped (the hole's bytes arrive at once when
 * it fills). The pipe is full after PEP_BW_FULL samples in a row that grew
 * the estimate by less than a quarter; until then the class's share sets the
 * watermark, as without measurement.
 */
#define PEP_BW_EPOCH 5
#define PEP_BW_FULL 3

struct pep_bw {
	uint64_t t0;            /* TSC the sample began; 0: none running */
	uint64_t max[2];        /* epoch maxima (current, previous), bytes per tick << 32 */
	uint64_t full_bw;       /* the estimate at the last growth by a quarter */
	uint32_t una0;          /* R's ACK when the sample began */
	uint8_t n;              /* pipe-limited samples in the current epoch */
	uint8_t flat;           /* samples in a row without growth by a quarter */
	uint8_t limited;        /* the watermark held S back during this sample */
	uint8_t lossy;          /* a loss episode during this sample */
};

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
	struct pep_bw bw;       /* R's delivery rate (shaping.pep.watermark = "measured") */
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
	bool wm_measured;               /* watermark from R's delivery rate (shaping.pep.watermark) */
	struct weir_pep_stats st;
};

static inline struct pep *
pep_of(const struct weir_mode_svc *w)
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

static inline struct pep_flow *
flow_get(const struct pep *st, int d, uint32_t slot)
{
	uint16_t i = st->idx[d][slot];

	return i ? &st->fl[i - 1] : NULL;
}

static inline uint64_t
rto_of(const struct pep *st, const struct pep_flow *pf)
{
	uint64_t rto = pf->srtt + 4 * pf->rttvar;

	return RTE_MIN(RTE_MAX(rto, st->rto_min), st->rto_max);
}

/* Owes R data S was told arrived. */
static inline bool
owed(const struct pep_flow *pf)
{
	return pf->packed_bytes > 0;
}

static inline int
ack_ws(const struct weir_flow *f, int d)
{
	int ws = weir_ack_wscale(f, d ^ 1);

	return ws < 0 ? 0 : ws;
}

/* pep.c */
void pep_chain_free(struct pep *st, struct pep_flow *pf, uint64_t *why);
void pep_flow_drop(struct pep *st, struct weir_flow *f, struct pep_flow *pf, uint64_t *why);

/* pep_frames.c */
struct rte_mbuf *pep_make_frame(struct pep *st, const struct pep_flow *pf, bool to_s, uint32_t seq,
				uint32_t ack, uint8_t flags, uint16_t win);
void pep_send_pack(struct weir_mode_svc *w, struct pep *st, const struct weir_flow *f,
		   struct pep_flow *pf);
bool pep_retransmit(struct weir_mode_svc *w, struct pep *st, const struct pep_flow *pf,
		    struct pep_rec *r, uint64_t now);
void pep_give_up(struct weir_mode_svc *w, struct pep *st, struct weir_flow *f, struct pep_flow *pf,
		 uint64_t *count);

#endif /* WEIR_PEP_INT_H */
