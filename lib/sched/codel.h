/* SPDX-License-Identifier: BSD-3-Clause
 * weir: CoDel (RFC 8289) for one queue, as fq_codel runs it per flow queue
 * (RFC 8290): a packet's sojourn time is measured at dequeue; once it has
 * stayed above `target` for a whole `interval`, packets are dropped from
 * the head, the next one interval / sqrt(count) after the last, until the
 * sojourn time falls below target again. A queue of one packet is never
 * dropped from (it cannot be a standing queue). Times are TSC ticks; the
 * caller passes `now`. 24 bytes a queue.
 *
 * The interval should be on the order of the flow's round trip (RFC 8289
 * sec. 4.3): at 100 ms a lone flow on a 150 ms path is dropped before its
 * window reaches the pipe, and used half of its class. fq_codel cannot
 * know a flow's round trip; weir times every TCP handshake, so each
 * queue may scale the tree's target and interval by its own flow's
 * (weir_codel_set_rtt), keeping target at the same fraction of interval;
 * on a shorter path a flow in its sawtooth takes its round trip as
 * interval too (codel_sawtooth).
 */
#ifndef WEIR_CODEL_H
#define WEIR_CODEL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

struct weir_codel {
	uint64_t first_above;   /* when sojourn stayed above target an interval; 0 = it is below */
	uint64_t drop_next;     /* dropping: when the next drop is due */
	uint32_t count;         /* drops in this dropping state (the control law's n) */
	uint8_t dropping;
	uint8_t scale;          /* target and interval x scale / 4 (0 or <= 4: as given) */
	uint8_t tscale;         /* target x tscale / 4 instead, when more (weir_codel_set_rtt) */
	uint8_t _pad;
};

#define WEIR_CODEL_SCALE_ONE 4u
#define WEIR_CODEL_SCALE_MAX 255u      /* 64 x the interval: 6.4 s at 100 ms */
#define WEIR_CODEL_TARGET_RTT 2u        /* target >= round trip / this (weir_codel_set_rtt) */

struct weir_codel_params {
	uint64_t target;        /* ticks: 5 ms by default */
	uint64_t interval;      /* ticks: 100 ms by default */
};

/* interval / sqrt(count): drops come closer together while the queue stays
 * (cold: at most once per drop, never per packet). */
static inline uint64_t
weir_codel_control_law(const struct weir_codel_params *p, uint64_t t, uint32_t count)
{
	return t + (uint64_t)((double)p->interval / sqrt((double)(count ? count : 1)));
}

/* Sojourn above target for an interval (RFC 8289 sec. 5.4's ok_to_drop)? */
static inline bool
weir_codel_above(struct weir_codel *c, const struct weir_codel_params *p, uint64_t sojourn,
		 uint32_t qlen, uint64_t now)
{
	if (sojourn < p->target || qlen <= 1) {
		c->first_above = 0;
		return false;
	}
	if (c->first_above == 0) {
		c->first_above = now + p->interval;
		return false;
	}
	return now >= c->first_above;
}

/*
 * A queue whose flow's round trip is known (one TCP flow: weir_codel_set_rtt)
 * is not dropped from again before its sender can have answered this drop:
 * twice its round trip plus the time the queue behind the
 * dropped packet still takes to drain (its sojourn). RFC 8289's law
 * (interval / sqrt(count)) is for queues whose flows it cannot know; on a
 * long path a slow start's overshoot stands for a round trip and more, and
 * drops at that law landed in three windows in a row: a lone cubic
 * download at 150 ms cut its window 585 -> 458 -> 224 -> 156 segments (the
 * pipe is ~250) and took ~8 s to grow back. One flow answers one
 * drop per round trip with one cut: more drops in that time only cut more.
 */
static inline void
codel_answer_floor(struct weir_codel *c, const struct weir_codel_params *base, uint64_t sojourn,
		   uint64_t now)
{
	/* tscale is half the round trip in quarters of the tree's target, so
	 * tscale x target is twice the round trip (at least 20 ms at 5 ms).
	 * Twice, not once: the target is half the round trip, and the 150 ms
	 * fill below was measured with this floor. */
	const uint64_t answer = (uint64_t)c->tscale * base->target + sojourn;

	if (c->scale != 0 && c->drop_next < now + answer)
		c->drop_next = now + answer;
}

/*
 * A flow CoDel has dropped from lately (within 16 tree intervals) is in its
 * sawtooth, past its slow start. On a path shorter than the tree's interval
 * it is given its own round trip as interval (at least twice the tree's
 * target): a sender answers a drop in one round trip, and 100 ms on a 10 ms
 * path let each of 8 cubic flows' queues stand for ten round trips between
 * dropping states (senders' RTT 2.3x the path). A slow
 * start keeps the tree's interval: its overshoot drains within it, and
 * dropping from it cost an idle 100 KB transfer 68 -> 77 ms.
 */
static inline bool
codel_sawtooth(const struct weir_codel *c, const struct weir_codel_params *base, uint64_t now)
{
	return c->count != 0 && now < c->drop_next + 16 * base->interval;
}

/* The scaled target's inverse: the round trip, at least 2x the tree's target. */
static inline uint64_t
codel_rtt_interval(const struct weir_codel *c, const struct weir_codel_params *base)
{
	uint8_t ts = c->tscale > WEIR_CODEL_SCALE_ONE ? c->tscale : WEIR_CODEL_SCALE_ONE;

	return WEIR_CODEL_TARGET_RTT * base->target * ts / WEIR_CODEL_SCALE_ONE;
}

/*
 * The round-trip interval is at least what the flow's share of its leaf
 * takes to send this many frames, TCP's smallest window: a flow at that
 * window cannot shorten its queue any further, and dropping from it sooner
 * only costs it a retransmission timeout (the runs that chose two frames:
 * docs/results/fct/README.md).
 */
#define WEIR_CODEL_SHARE_FRAMES 2u

/*
 * Should the head packet (sojourn ticks old, qlen packets in its queue) be
 * dropped now? Advances the state machine (RFC 8289 sec. 5.5's dequeue):
 * enter dropping when above target for an interval, drop again each time
 * drop_next comes, leave when the sojourn falls below target. share_floor:
 * the shortest round-trip interval the flow's share allows (ticks; see
 * WEIR_CODEL_SHARE_FRAMES), 0 for none.
 */
static inline bool
weir_codel_drop(struct weir_codel *c, const struct weir_codel_params *base, uint64_t sojourn,
		uint32_t qlen, uint64_t now, uint64_t share_floor)
{
	struct weir_codel_params scaled;
	const struct weir_codel_params *p = base;
	bool above;

	if (c->scale > WEIR_CODEL_SCALE_ONE || c->tscale > WEIR_CODEL_SCALE_ONE) {
		uint8_t ts = c->tscale > c->scale ? c->tscale : c->scale;
		uint8_t is = c->scale > WEIR_CODEL_SCALE_ONE ? c->scale : WEIR_CODEL_SCALE_ONE;

		scaled.target = base->target * ts / WEIR_CODEL_SCALE_ONE;
		scaled.interval = base->interval * is / WEIR_CODEL_SCALE_ONE;
		p = &scaled;
	}
	if (c->scale != 0 && c->scale <= WEIR_CODEL_SCALE_ONE && codel_sawtooth(c, base, now)) {
		uint64_t iv = codel_rtt_interval(c, base);

		if (iv < share_floor)
			iv = share_floor;
		if (iv < base->interval) {
			if (p != &scaled) {
				scaled = *base;
				p = &scaled;
			}
			scaled.interval = iv;
		}
	}
	above = weir_codel_above(c, p, sojourn, qlen, now);

	if (c->dropping) {
		if (!above) {
			c->dropping = 0;
			return false;
		}
		if (now < c->drop_next)
			return false;
		c->count++;
		c->drop_next = weir_codel_control_law(p, c->drop_next, c->count);
		codel_answer_floor(c, base, sojourn, now);
		return true;
	}
	if (!above)
		return false;
	c->dropping = 1;
	/* Back soon after the last dropping state: start near its rate. */
	c->count = c->count > 2 && now - c->drop_next < 16 * p->interval ? c->count - 2 : 1;
	c->drop_next = weir_codel_control_law(p, now, c->count);
	codel_answer_floor(c, base, sojourn, now);
	return true;
}

/* rtt in quarters of base, 1x .. WEIR_CODEL_SCALE_MAX / 4. */
static inline uint8_t
codel_quarters(uint64_t rtt, uint64_t base)
{
	uint64_t q = (WEIR_CODEL_SCALE_ONE * rtt + base - 1) / base;

	return (uint8_t)(q < WEIR_CODEL_SCALE_ONE ? WEIR_CODEL_SCALE_ONE :
			 q > WEIR_CODEL_SCALE_MAX ? WEIR_CODEL_SCALE_MAX : q);
}

/*
 * A new flow in the queue (rtt 0: not known, the state cleared), or its
 * round trip measured: an interval of at least that, in quarters of the
 * given one, and a target of at least half of it (WEIR_CODEL_TARGET_RTT).
 *
 * Why a half: after a drop cubic sends 0.7 of its window, so a lone flow
 * keeps its link busy only if its queue held (1 - 0.7) / 0.7 = 0.43 of its
 * round trip's worth; at a flow's share of N that is still 0.43 of its
 * round trip in sojourn time. RFC 8289's 5 ms is that for a 12 ms path; at
 * 150 ms (7.5 ms scaled) a lone cubic flow carried 0.75-0.79 of its 20
 * Mbit/s class, cut to 0.7 and growing back for ~6 s each time. A quarter
 * of the round trip (37.5 ms) carried 0.87-0.99 (0.87 in 3 of 4 runs), half
 * of it 0.997-0.998 in 4 of 4, side by side. The sender's round
 * trip stays within 1.5x the path's plus the time to drop (4 uploads at 40
 * ms: 65 ms smoothed against 56 with a quarter and 95 without CoDel). Up
 * to a 10 ms path the target stays RFC 8289's 5 ms.
 */
static inline void
weir_codel_set_rtt(struct weir_codel *c, const struct weir_codel_params *p, uint64_t rtt)
{
	if (rtt == 0) {
		*c = (struct weir_codel){ 0 };
		return;
	}
	c->scale = codel_quarters(rtt, p->interval);
	c->tscale = codel_quarters(rtt / WEIR_CODEL_TARGET_RTT, p->target);
}

#endif /* WEIR_CODEL_H */
