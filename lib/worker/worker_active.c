/* SPDX-License-Identifier: BSD-3-Clause
 * weir: which flows of a class are active on this worker, and the per-flow
 * share that follows (the rate and ceil over them, as PostACK, TCR and
 * postack-paced read it). The per-packet check is weir_wk_note_active
 * (worker_int.h); the rest runs once per flow and period.
 */
#include <rte_common.h>

#include "cbq.h"
#include "ackstore_int.h"
#include "pace_state.h"
#include "worker.h"
#include "worker_int.h"

/*
 * Max-min per-flow shares (water-filling). A light connection (an ssh
 * session, a keep-alive, a 10 Hz ping-pong) counted as a whole active
 * flow would let a window-sizing mode (tcr, ipabr) cut a bulk flow beside
 * it to half its class (docs/results/young-active). So each
 * counted flow is light (it used less than half the share in its last
 * period: not limited by it) or heavy (it used more, or was not measured
 * yet); the light ones keep what they use and the heavy ones divide the
 * rest. Every flow's window and pace follow the same level, a light one's
 * too, so a light flow that turns bulk can use the level at once (the
 * class is over-subscribed meanwhile, DRR shares the excess); its use over
 * a whole period is known as the next one starts, so within two periods
 * it is heavy, or light with that use, which the level then leaves it. A
 * bulk flow that falls below half its share for a period only raises the
 * others' level for that period. Light flows' bytes are not taken back
 * when one ends; they count until the period after next.
 */

/* The water level of `rate` (bit/s): what the light flows leave, over the
 * heavy ones; at least the equal share (max-min never gives less). */
static uint64_t
water_level(const struct weir_class_counters *c, uint64_t rate, uint64_t light)
{
	const uint32_t active = RTE_MAX(c->active, 1u);
	const uint32_t heavy = RTE_MAX(RTE_MIN(c->heavy, c->active), 1u);

	return RTE_MAX((rate > light ? rate - light : 0) / heavy, rate / active);
}

/* The per-flow share of leaf `leaf` on this worker, as bytes per TSC tick
 * (<< 32) and ticks per byte (<< 16), and its ceil's (PostACK's clamp):
 * the divisions happen here, when the counts or the worker's rate change
 * and once a period, not per ACK. A share is at least 1 bit/s; the
 * pacing arithmetic stays bounded by the gap clamp in tcr.c. */
void
weir_wk_share_update(struct weir_worker *w, int d, uint32_t leaf)
{
	struct weir_class_counters *c = &w->svc.cls_ctr[d][leaf];
	const uint64_t rate = weir_cbq_rate(w->svc.shaper[d], leaf);
	const uint64_t light = weir_class_light_bps(w, c);
	uint64_t share = water_level(c, rate, light);
	uint32_t limit;

	if (share == 0)
		share = 1;
	c->share_bytes_per_tick = (uint64_t)(((unsigned __int128)share << 32) / (8 * w->svc.tsc_hz));
	c->share_ticks_per_byte = (uint64_t)(((unsigned __int128)8 * w->svc.tsc_hz << 16) / share);
	c->rate_ticks_per_byte = (uint64_t)(((unsigned __int128)8 * w->svc.tsc_hz << 16) / RTE_MAX(rate, 1u));
	/* half of what the share sends in a period */
	c->light_limit = (uint64_t)(((unsigned __int128)c->share_bytes_per_tick * c->period_len) >> 33);
	share = RTE_MAX(water_level(c, weir_cbq_ceil(w->svc.shaper[d], leaf), light), share);
	c->ceil_share_bytes_per_tick = (uint64_t)(((unsigned __int128)share << 32) / (8 * w->svc.tsc_hz));
	/* Half the class's queue over its flows, at most two segments each;
	 * and what the share sends in WEIR_TCR_MARGIN_MS */
	c->tcr_margin_bytes = (uint32_t)RTE_MIN(
		((unsigned __int128)c->share_bytes_per_tick * (w->svc.tsc_hz / 1000 * WEIR_TCR_MARGIN_MS)) >> 32,
		(unsigned __int128)UINT32_MAX);
	limit = weir_cbq_leaf_limit(w->svc.shaper[d], leaf);
	c->tcr_margin16 = limit == 0 ? WEIR_TCR_MARGIN16 :
			  (uint32_t)RTE_MIN((uint64_t)WEIR_TCR_MARGIN16,
					    8ull * limit / RTE_MAX(c->active, 1u));
}

/*
 * Which flows a share divides among: the ones that sent
 * data in the class within the last activity period or the one before,
 * not every connection counted in it (an idle ssh session or HTTP
 * keep-alive would take a share it never uses). One compare per data
 * packet: a flow marks the period it was last seen in; a period rolls on
 * the first packet after it ends. Admission (flow_min) still counts every
 * admitted flow: it reserves, where a share divides what is there now.
 */

/*
 * A period is at least two round trips (handshake, both sides) of the
 * flows counted in the last one, at most 4 s: a flow
 * whose window is cut to its share sends one burst per round trip, so a
 * period shorter than the round trip misses most such flows, and the
 * share of the few counted (up to a whole class's BDP) would be written
 * into their windows, which no later ACK may take back (RFC 7323 2.4). Two
 * round trips: the queue the window's target allows adds to the base.
 * ipabr's periods follow its own measured round trips (lib/modes/ipabr.c).
 */
/* The period before the current one (periods count 1..WEIR_ACTIVE_ONCE - 1). */
static inline uint8_t
period_prev(const struct weir_class_counters *c)
{
	return c->period == 1 ? WEIR_ACTIVE_ONCE - 1 : (uint8_t)(c->period - 1);
}

/* A count carried from the last period less one flow, never below what
 * the current period has counted itself. */
static inline uint32_t
carried_less_one(uint32_t carried, uint32_t cur)
{
	return RTE_MAX(carried > 0 ? carried - 1 : 0, cur);
}

/*
 * Youth bounded in time: a young flow (lib/sched/drr.h) active in more periods
 * than this is old, whatever it has sent. At least WEIR_YOUNG_PERIODS (so
 * at least 0.8 s and 8 round trips of the class's slowest flow: a 256 KiB
 * slow start takes ~6), and twice what the budget takes at the class's
 * rate. By bytes alone, many bulk flows that start together in a small
 * class stay young for seconds, and a short reply beside them is one young
 * flow among all of them (docs/results/young-active). Periods in which
 * a flow is idle do not count, so a keep-alive connection stays young
 * until it has sent its budget.
 */
#define WEIR_YOUNG_PERIODS 4u

static uint8_t
young_periods(struct weir_worker *w, int d, uint32_t leaf, uint64_t p)
{
	const uint64_t rate = weir_cbq_rate(w->svc.shaper[d], leaf);
	const uint64_t young = weir_cbq_young_budget(w->svc.shaper[d], leaf);
	unsigned __int128 n;

	if (rate == 0 || p == 0)
		return WEIR_DRR_Y_AGE_MAX;
	/* ceil(2 x young x 8 bits / rate, in periods of p ticks) */
	n = ((unsigned __int128)16 * young * w->svc.tsc_hz + (unsigned __int128)rate * p - 1) /
	    ((unsigned __int128)rate * p);
	return (uint8_t)RTE_MIN(RTE_MAX(n, (unsigned __int128)WEIR_YOUNG_PERIODS),
				(unsigned __int128)WEIR_DRR_Y_AGE_MAX);
}

void
weir_wk_period_roll(struct weir_worker *w, struct weir_class_counters *c, int d, uint32_t leaf,
	    uint64_t now)
{
	const uint64_t p = RTE_MIN(RTE_MAX(w->svc.tsc_hz / 1000 * WEIR_ACTIVE_PERIOD_MS, 2 * c->rtt_max),
				   4 * w->svc.tsc_hz);
	const bool quiet = now >= c->period_end + p;    /* quiet a whole period */

	c->active = quiet ? 0 : c->active_cur;
	c->heavy = quiet ? 0 : c->heavy_cur;
	c->light_bytes = quiet ? 0 : c->light_bytes_cur;
	c->young = RTE_MIN(c->young_cur, c->active);
	c->young_cur = 0;
	c->period = (uint8_t)(c->period >= WEIR_ACTIVE_ONCE - 1 ? 1 : c->period + 1);
	c->active_cur = 0;
	c->heavy_cur = 0;
	c->light_bytes_cur = 0;
	c->rtt_max = 0;
	c->period_end = now + p;
	c->period_len = p;
	c->young_periods = young_periods(w, d, leaf, p);
	/* the light flows' use moves every period: a few divisions a class */
	weir_wk_share_update(w, d, leaf);
}

/* Flow f's first data frame in this period: what it sent since its first
 * frame in the last one, when it was seen there (else unknown). A
 * subtraction per flow and period, from the flow table's own count. */
static inline void
use_note(struct weir_worker *w, const struct weir_flow *f, int d, uint32_t slot, bool seen_prev)
{
	struct weir_postack_q *q = &w->svc.pa->q[d][slot];
	const uint32_t b = (uint32_t)f->bytes[d];

	q->use = b - q->use_snap;
	q->use_snap = b;
	if (seen_prev)
		q->flags |= WEIR_PAQ_USE_VALID;
	else
		q->flags &= (uint8_t)~WEIR_PAQ_USE_VALID;
}

/* Count flow `slot` heavy or light in this period (true: heavy). Without
 * the ACK store every flow is heavy: the equal share. */
static inline bool
use_count(struct weir_worker *w, struct weir_class_counters *c, int d, uint32_t slot)
{
	struct weir_postack_q *q;

	if (w->svc.pa == NULL)
		return true;
	q = &w->svc.pa->q[d][slot];
	if ((q->flags & WEIR_PAQ_USE_VALID) && q->use < c->light_limit) {
		q->flags &= (uint8_t)~WEIR_PAQ_HEAVY;
		c->light_bytes_cur += q->use;
		return false;
	}
	q->flags |= WEIR_PAQ_HEAVY;
	c->heavy_cur++;
	return true;
}

/* Was flow `slot` counted heavy (its last count)? */
static inline bool
use_heavy(const struct weir_worker *w, int d, uint32_t slot)
{
	return w->svc.pa == NULL || (w->svc.pa->q[d][slot].flags & WEIR_PAQ_HEAVY);
}

/* A count that grew past the carried one: re-divide at each new flow up
 * to 64, then each time it grew by 1/32. */
static inline bool
count_grew(uint32_t cur, uint32_t carried)
{
	return cur > carried && (cur <= 64 || cur - carried >= carried >> 5);
}

/* A data frame of flow f in leaf `leaf` of direction d, the first of the
 * current period (weir_wk_note_active's slow path: twice a flow and period). */
void
weir_wk_active_mark(struct weir_worker *w, struct weir_class_counters *c, struct weir_flow *f,
		    int d, uint32_t leaf)
{
	/* A flow's first data frame in a period only marks it; the second
	 * counts it. One frame (a DNS query, an ICMPv6 router solicitation, a
	 * keep-alive) would take a whole share for a period, halving a lone
	 * bulk flow's window. The two frames may be a period apart: a flow
	 * of a few packets a period (many flows in a small class) would be
	 * missed whenever one fell out, the share divided among too few and
	 * the pacing clocks run fast (docs/results/young-active). A flow seen in the
	 * last period (once or counted) counts on its first frame in this one.
	 * So does a TCP connection whose handshake weir timed: it is a
	 * connection, not a stray frame, and a flow paced to a small share
	 * may send one frame every other period (Fig. 8's 32 TCR flows: 0.17
	 * of segments resent, 0.02 with the rule off at 42d23b2). */
	const uint8_t prev = period_prev(c);
	const uint8_t m = f->active_mark[d];
	const uint32_t slot = weir_flow_slot(w->svc.flows, f);
	const bool seen_prev = m == prev || m == (prev | WEIR_ACTIVE_ONCE);
	const bool conn = w->svc.pa != NULL && (w->svc.pa->q[0][slot].rtt | w->svc.pa->q[1][slot].rtt) != 0;
	bool grew = false;

	if (w->svc.pa != NULL && m != (c->period | WEIR_ACTIVE_ONCE))
		use_note(w, f, d, slot, seen_prev);
	if (m != (c->period | WEIR_ACTIVE_ONCE) && !seen_prev && !conn) {
		f->active_mark[d] = (uint8_t)(c->period | WEIR_ACTIVE_ONCE);
		return;
	}
	f->active_mark[d] = c->period;
	if (w->svc.pa != NULL) {
		const uint64_t rtt = (uint64_t)w->svc.pa->q[0][slot].rtt + w->svc.pa->q[1][slot].rtt;

		c->rtt_max = RTE_MAX(c->rtt_max, rtt);
	}
	if (weir_cbq_young(w->svc.shaper[d], leaf, slot, f->bytes[d]) &&
	    !weir_cbq_youth_age(w->svc.shaper[d], leaf, slot,
				RTE_MAX(c->young_periods, WEIR_YOUNG_PERIODS)) &&
	    ++c->young_cur > c->young)
		c->young = c->young_cur;
	/* A share is a few divisions: when thousands of flows wake in one
	 * period (a start, a busy hour) re-divide at each new flow only up to
	 * 64, then each time the count grew by 1/32 (shares at most 3 % too
	 * large until then); the period's end sets the exact count. The same
	 * for the heavy ones (a light flow turned bulk, or a new one). */
	if (count_grew(++c->active_cur, c->active)) {
		c->active = c->active_cur;
		grew = true;
	}
	if (use_count(w, c, d, slot) && count_grew(c->heavy_cur, c->heavy)) {
		c->heavy = c->heavy_cur;
		grew = true;
	}
	if (grew)
		weir_wk_share_update(w, d, leaf);
}

/* Flow f leaves leaf `leaf` of direction d (it ended, expired, or moved):
 * it no longer takes a share there. It was counted in this period's flows
 * (mark == period) or in the last one's, which the current count carries;
 * the carried count loses one, never below this period's own. Else a
 * closed connection keeps its share for up to two periods, and a download
 * fetched right after another from the same host gets half the class for
 * its first period (docs/results/young-active). */
void
weir_wk_active_forget(struct weir_worker *w, struct weir_flow *f, int d, uint32_t leaf)
{
	struct weir_class_counters *c = &w->svc.cls_ctr[d][leaf];
	const uint8_t m = f->active_mark[d];
	const uint32_t slot = weir_flow_slot(w->svc.flows, f);
	uint32_t active, heavy = c->heavy;

	f->active_mark[d] = 0;          /* no period is 0: counted afresh wherever it goes */
	if (m != c->period && m != period_prev(c))
		return;                 /* not counted, or only seen once */
	if (m == c->period && c->active_cur > 0)
		c->active_cur--;
	if (weir_cbq_young(w->svc.shaper[d], leaf, slot, f->bytes[d])) {
		if (m == c->period && c->young_cur > 0)
			c->young_cur--;
		c->young = carried_less_one(c->young, c->young_cur);
	}
	if (use_heavy(w, d, slot)) {
		if (m == c->period && c->heavy_cur > 0)
			c->heavy_cur--;
		heavy = carried_less_one(c->heavy, c->heavy_cur);
	}
	active = carried_less_one(c->active, c->active_cur);
	if (active != c->active || heavy != c->heavy) {
		c->active = active;
		c->heavy = heavy;
		weir_wk_share_update(w, d, leaf);
	}
}
