/* SPDX-License-Identifier: BSD-3-Clause
 * weir: passive measurement of every TCP flow (docs/measure.md).
 *
 * weir sits between the LAN and the WAN and sees every segment of a
 * connection both ways, so it can time each side of itself apart: the
 * LAN side (weir -> LAN host -> weir) and the WAN side (weir -> WAN
 * host -> weir), as pping does at a tap.
 *
 * Round trips, by what the connection carries:
 * - TCP timestamps (RFC 7323): the first time weir sees a TSval travelling
 *   d is remembered (one outstanding value a direction); the first segment
 *   travelling the other way that echoes it (TSecr) completes a sample of
 *   the round trip to that segment's sender. A later TSecr (the receiver
 *   echoed a newer value: ours was passed over) drops the outstanding
 *   value so a new one can be taken.
 * - Without timestamps: one data segment (or SYN) a direction is timed by
 *   the sequence number just past it; the first ACK the other way that
 *   covers it completes a sample. A retransmission that overlaps a timed
 *   segment cancels it (Karn: an ACK cannot say which copy it answers).
 * The handshake is timed either way (SYN -> SYN/ACK: the round trip to
 * the answering host; SYN/ACK -> ACK: to the opener). No value is taken
 * from a retransmitted segment.
 * A sample completed by a segment travelling OUT (from the LAN) is the
 * LAN side's round trip, one travelling IN the WAN side's: rtt[d] below is
 * the round trip to direction d's sender.
 *
 * Per direction of travel d (d's sender: the LAN host for OUT):
 * - a retransmission is a data segment (or SYN/FIN) whose sequence range
 *   starts below the highest seen (`nxt`): counted with its payload bytes;
 *   a segment reordered upstream of weir that fills a hole counts too;
 * - out of order is a data segment that starts above `nxt`: a hole before
 *   it, lost or reordered between its sender and weir;
 * - a duplicate ACK is a pure ACK (no data, SYN, FIN or RST) with the same
 *   ACK number and window as the ACK before it travelling d.
 *
 * Cost: one cache line per flow slot touched by every segment (the hot
 * line: what each segment compares and moves on), and a second line (the
 * cold one, in an array of its own so no adjacent-line prefetch pulls it
 * in) written only on the rare paths: a retransmission, a hole, a
 * completed sample, every 65536th duplicate ACK. A few compares and
 * stores a segment; no division, no allocation. Times are the TSC shifted
 * right by WEIR_TCPM_SHIFT (1024 ticks, about 0.3-1 us; 32 bits wrap after
 * 20 minutes or more). Records belong to a flow by its first_tsc (a slot
 * reused by a new flow starts over).
 */
#ifndef WEIR_TCPMEAS_H
#define WEIR_TCPMEAS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_branch_prediction.h>
#include <rte_common.h>

#include "parse.h"

#define WEIR_TCPM_SHIFT 10

/* weir_tcpm_dir.flags */
#define WEIR_TCPM_NXT   0x01    /* nxt is valid (a segment was seen travelling d) */
#define WEIR_TCPM_ACK   0x02    /* ack/win are valid (an ACK was seen travelling d) */
#define WEIR_TCPM_TS    0x04    /* d's sender uses timestamps (seq timing is off) */
#define WEIR_TCPM_SEEN  0x08    /* tsval holds the highest TSval seen */
#define WEIR_TCPM_LEFT  0x10    /* the probe's first frame has left weir (probe_at is then) */

/* The hot line, per direction of travel d: what every segment travelling
 * d (or the other way, for the probe) compares and moves on. 28 bytes. */
struct weir_tcpm_hdir {
	uint32_t nxt;           /* just past the highest sequence number seen */
	uint32_t ack;           /* the last ACK number seen */
	uint32_t probe;         /* outstanding TSval, or without timestamps the sequence
				 * number just past the timed segment */
	uint32_t probe_at;      /* when it was first seen (WEIR_TCPM_SHIFT units); 0: none */
	uint32_t tsval;         /* the highest TSval seen */
	uint32_t rtt_at;        /* when the latest sample was taken (units) */
	uint16_t win;           /* the last ACK's raw window */
	uint8_t  flags;         /* WEIR_TCPM_* */
	uint8_t  pad;
};

/* One cache line a flow slot, touched by every segment. */
struct weir_tcpm_hot {
	struct weir_tcpm_hdir d[2];     /* by enum weir_dir of the segments */
	/* The low 32 bits of the first_tsc of the flow the record is of (a
	 * new flow in the slot starts over). */
	uint32_t owner;
	/* Duplicate ACKs travelling d, the low 16 bits: a wrap carries into
	 * the cold line's count. */
	uint16_t dup16[2];
} __rte_cache_aligned;

/* The cold line, per direction d: counts and round-trip figures, written
 * only on the rare paths. 32 bytes. */
struct weir_tcpm_cdir {
	uint32_t retrans_bytes; /* payload bytes of retransmitted segments (wraps at 4 GiB) */
	uint32_t retrans_segs;
	uint32_t ooo;           /* segments that left a hole before them */
	uint32_t dupacks;       /* duplicate ACKs, less dup16 (multiples of 65536) */
	uint32_t samples;       /* round-trip samples to d's sender */
	uint32_t rtt_last;      /* the latest sample (units); 0: none yet */
	uint32_t rtt_min;       /* the smallest sample (units); 0: none yet */
	uint32_t srtt8;         /* smoothed sample x 8 (gain 1/8, as RFC 6298's SRTT) */
};
struct weir_tcpm_cold {
	struct weir_tcpm_cdir d[2];
} __rte_cache_aligned;
_Static_assert(sizeof(struct weir_tcpm_hot) == 64, "one hot cache line a flow slot");
_Static_assert(sizeof(struct weir_tcpm_cold) == 64, "one cold cache line a flow slot");

/* A record as the management side reads it: both lines of a direction in
 * one, duplicate ACKs whole. */
struct weir_tcpm_dir {
	uint32_t nxt, ack, probe, probe_at, tsval, rtt_at;
	uint16_t win;
	uint8_t  flags;
	uint32_t retrans_bytes, retrans_segs, ooo, dupacks, samples, rtt_last, rtt_min, srtt8;
};
struct weir_tcpm {
	struct weir_tcpm_dir d[2];
	uint32_t owner;
};

/* Per-worker totals (summed into the counters). */
struct weir_tcpm_stats {
	uint64_t segs;          /* TCP segments measured */
	uint64_t samples;       /* round-trip samples taken */
	uint64_t retrans_segs;
	uint64_t ooo;
	uint64_t dupacks;
};

static inline uint32_t
weir_tcpm_time(uint64_t tsc)
{
	/* Never 0: 0 marks "no outstanding probe". */
	return (uint32_t)(tsc >> WEIR_TCPM_SHIFT) | 1;
}

/* a is after b in 32-bit sequence space. */
static inline bool
weir_tcpm_after(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

static inline void
weir_tcpm_sample(struct weir_tcpm_hdir *h, struct weir_tcpm_cdir *c, uint32_t at, uint32_t now,
		 struct weir_tcpm_stats *st)
{
	uint32_t r = now - at;

	if (r == 0)
		r = 1;
	c->rtt_last = r;
	h->rtt_at = now;
	if (c->rtt_min == 0 || r < c->rtt_min)
		c->rtt_min = r;
	if (c->samples == 0)
		c->srtt8 = r << 3;
	else
		c->srtt8 += r - (c->srtt8 >> 3);
	c->samples++;
	st->samples++;
}

static inline uint32_t
weir_tcpm_rd32(const uint8_t *b)
{
	uint32_t v;

	memcpy(&v, b, 4);
	return rte_be_to_cpu_32(v);
}

/* The records of a worker's flows, one per flow slot (a worker without
 * one does not measure). Owner lcore writes; management reads copies. */
struct weir_tcpm_table {
	uint32_t n_slots;
	struct weir_tcpm_hot *hot;      /* [n_slots] */
	struct weir_tcpm_cold *cold;    /* [n_slots] */
};
struct weir_tcpm_table *weir_tcpm_table_create(uint32_t n_slots, int socket_id);
void weir_tcpm_table_free(struct weir_tcpm_table *t);

static inline struct weir_tcpm_hot *
weir_tcpm_hot(struct weir_tcpm_table *t, uint32_t slot)
{
	return &t->hot[slot];
}

/* Segment p travelling d of the flow in `slot` of t (owner: the flow's
 * first_tsc), at `now`, its TCP header at tcp. Only the hot line unless
 * something rare happens. */
static __rte_always_inline void
weir_tcpm_segment(struct weir_tcpm_table *t, uint32_t slot, uint64_t owner,
		  const struct weir_pkt *p, const uint8_t *tcp, int d, uint64_t now_tsc,
		  struct weir_tcpm_stats *st)
{
	struct weir_tcpm_hot *r = &t->hot[slot];
	struct weir_tcpm_hdir *s = &r->d[d], *o = &r->d[d ^ 1];
	struct weir_tcpm_cold *c = &t->cold[slot];
	const uint8_t fl = p->tcp_flags;
	const uint32_t now = weir_tcpm_time(now_tsc);
	uint32_t len = p->payload_len + !!(fl & WEIR_TCP_SYN) + !!(fl & WEIR_TCP_FIN);
	uint32_t end = p->seq + len;
	bool retrans = false;

	if (unlikely(r->owner != (uint32_t)owner)) {
		memset(r, 0, sizeof(*r));
		memset(c, 0, sizeof(*c));
		r->owner = (uint32_t)owner;
	}
	st->segs++;
	if (unlikely(fl & WEIR_TCP_RST))
		return;
	/* Sequence: retransmission, hole, or the next in order. */
	if (len != 0) {
		if (likely(s->flags & WEIR_TCPM_NXT)) {
			if (unlikely(weir_tcpm_after(s->nxt, p->seq))) {
				retrans = true;
				c->d[d].retrans_segs++;
				c->d[d].retrans_bytes += p->payload_len;
				st->retrans_segs++;
			} else if (unlikely(p->seq != s->nxt)) {
				c->d[d].ooo++;
				st->ooo++;
			}
			if (weir_tcpm_after(end, s->nxt))
				s->nxt = end;
		} else {
			s->nxt = end;
			s->flags |= WEIR_TCPM_NXT;
		}
	}
	/* ACK: duplicates, and a sample when it covers the other way's timed
	 * segment (no timestamps). */
	if (fl & WEIR_TCP_ACK) {
		if (likely(s->flags & WEIR_TCPM_ACK)) {
			if (unlikely(p->ack == s->ack && len == 0 && p->win == s->win)) {
				if (unlikely(++r->dup16[d] == 0))
					c->d[d].dupacks += 1u << 16;
				st->dupacks++;
			}
		} else {
			s->flags |= WEIR_TCPM_ACK;
		}
		s->ack = p->ack;
		s->win = p->win;
		if (!(o->flags & WEIR_TCPM_TS) && o->probe_at != 0 &&
		    !weir_tcpm_after(o->probe, p->ack)) {
			weir_tcpm_sample(s, &c->d[d], o->probe_at, now, st);
			o->probe_at = 0;
		}
	}
	if (p->flags & WEIR_PF_TCP_TS) {
		uint32_t tsval = weir_tcpm_rd32(tcp + p->ts_off);
		uint32_t tsecr = weir_tcpm_rd32(tcp + p->ts_off + 4);

		s->flags |= WEIR_TCPM_TS;
		/* The other way's outstanding TSval echoed: the round trip to
		 * this segment's sender. A newer echo: it was passed over. */
		if (o->probe_at != 0 && (o->flags & WEIR_TCPM_TS) && (fl & WEIR_TCP_ACK)) {
			if (tsecr == o->probe) {
				weir_tcpm_sample(s, &c->d[d], o->probe_at, now, st);
				o->probe_at = 0;
			} else if (weir_tcpm_after(tsecr, o->probe)) {
				o->probe_at = 0;
			}
		}
		/* A TSval first seen now (the segment before had another): a
		 * value first seen while another was outstanding is not taken
		 * later, or its echo, made by its first segment, would come
		 * early. */
		/* Highest only: a sender pacing by departure times (Linux's
		 * EDT) stamps new data ahead of the clock, and a retransmission
		 * sent meanwhile carries an older value; the value after it is
		 * not new. */
		if (!(s->flags & WEIR_TCPM_SEEN) || weir_tcpm_after(tsval, s->tsval)) {
			if (s->probe_at == 0 && !retrans) {
				s->probe = tsval;
				s->probe_at = now;
				s->flags &= (uint8_t)~WEIR_TCPM_LEFT;
			}
			s->tsval = tsval;
			s->flags |= WEIR_TCPM_SEEN;
		}
		return;
	}
	if (s->flags & WEIR_TCPM_TS)
		return;
	/* No timestamps: time one segment at a time; Karn for the rest. */
	if (unlikely(retrans) && s->probe_at != 0 && weir_tcpm_after(s->probe, p->seq))
		s->probe_at = 0;
	else if (len != 0 && !retrans && s->probe_at == 0) {
		s->probe = end;
		s->probe_at = now;
		s->flags &= (uint8_t)~WEIR_TCPM_LEFT;
	}
}

/* Frame p of the flow whose hot line is r leaves weir travelling d at now,
 * from a class tree (queued or cut through) or the ACKs weir held: the
 * round trip is the far host's, so the outstanding probe starts when its
 * first frame leaves (later frames with the same TSval do not move it). */
static inline void
weir_tcpm_departed(struct weir_tcpm_hot *r, const struct weir_pkt *p, const uint8_t *tcp, int d,
		   uint64_t now_tsc)
{
	struct weir_tcpm_hdir *s = &r->d[d];

	if (s->probe_at == 0 || (s->flags & WEIR_TCPM_LEFT))
		return;
	if (p->flags & WEIR_PF_TCP_TS) {
		if (weir_tcpm_rd32(tcp + p->ts_off) != s->probe)
			return;
	} else if (p->seq + p->payload_len != s->probe || p->payload_len == 0) {
		return;
	}
	s->probe_at = weir_tcpm_time(now_tsc);
	s->flags |= WEIR_TCPM_LEFT;
}

/* Management side: a copy of slot's record, whichever flow's it is.
 * Copied word by word: figures may be a segment apart. */
void weir_tcpm_read(const struct weir_tcpm_table *t, uint32_t slot, struct weir_tcpm *out);

/* As weir_tcpm_read if the record is of the flow that began at owner (0),
 * else -ENOENT. */
int weir_tcpm_peek(const struct weir_tcpm_table *t, uint32_t slot, uint64_t owner,
		   struct weir_tcpm *out);

#endif /* WEIR_TCPMEAS_H */
