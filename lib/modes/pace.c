/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the ACK pacing clocks (lib/modes/pace.h).
 */
#include "pace.h"
#include "ackstore_int.h"
#include "pace_state.h"
#include "mode_svc.h"

uint64_t
weir_tcr_pace_gap(const struct weir_mode_svc *w, const struct weir_flow *f, int d, uint32_t leaf)
{
	uint64_t gap = ((uint64_t)(f->mss[d ^ 1] ? f->mss[d ^ 1] : 1460) *
			w->cls_ctr[d][leaf].share_ticks_per_byte) >> 16;

	/* A share of a few bit/s would space ACKs hours apart (and `now - gap`
	 * below would wrap): at least one a second. */
	return RTE_MIN(gap, w->tsc_hz);
}

/* Is the flow's next paced ACK due (one per MSS at its class's fair
 * share)? Advances the clock when it is. TCR (starving == 0) lets a late
 * clock keep up to one gap of credit. For a starving PostACK flow holding
 * `starving` ACKs the gap is also at most its data sender's round trip
 * over that count: what it holds goes back within a round trip even when
 * the share is small; a stopped clock (0) starts a gap from now. */
uint32_t
weir_tcr_pace_due(struct weir_mode_svc *w, const struct weir_flow *f, int d, uint32_t slot,
		  uint32_t leaf, uint64_t now, uint32_t starving)
{
	struct weir_tcr_flow *tf = &w->tcr->f[d][slot];
	uint64_t gap = weir_tcr_pace_gap(w, f, d, leaf);
	const int bank = starving == 0;

	if (starving)
		gap = RTE_MIN(gap, weir_postack_rtt(w->pa, d, slot) / starving);
	if (!bank && tf->next_release == 0) {
		tf->next_release = now + gap;   /* first seen starving: a gap from now */
		return 0;
	}
	if (now < tf->next_release)
		return 0;
	tf->next_release = RTE_MAX(tf->next_release + gap, bank && now > gap ? now - gap : now);
	return 1;
}

/*
 * The watchdog's verdict: every held ACK the pacing clock owes by now, up
 * to WEIR_TCR_CATCHUP_US of them. The watchdog looks when the worker comes
 * round, which on a shared core (or after an idle sleep of up to 1 ms) is
 * often later than one gap: releasing one ACK per look, with a single gap
 * of credit, let a late look lose its share's time for good, and a
 * bbr sender, which sets its rate from the delivery rate the ACKs show,
 * then sent below its share. The clock moves by what each ACK
 * asks for (a gap per segment of its advance, at least one: a delayed ACK
 * takes two) and never stays more than one gap of credit behind `now`, so
 * what is owed stays bounded.
 */
uint32_t
weir_tcr_pace_owed(struct weir_mode_svc *w, const struct weir_flow *f, int d, uint32_t slot,
		   uint32_t leaf, uint64_t now, uint32_t held)
{
	struct weir_tcr_flow *tf = &w->tcr->f[d][slot];
	const uint64_t gap = RTE_MAX(weir_tcr_pace_gap(w, f, d, leaf), (uint64_t)1);
	const uint64_t cap = w->tsc_per_us * WEIR_TCR_CATCHUP_US;
	uint64_t from = tf->next_release, n;

	if (now < from || held == 0)
		return 0;
	if (now - from > cap)
		from = now - cap;       /* a clock long stopped: at most the cap owed */
	n = weir_postack_due(w->pa, d, slot, &from, now, gap, w->cls_ctr[d][leaf].share_ticks_per_byte,
			     f->mss[d ^ 1] ? f->mss[d ^ 1] : 1460, held);
	tf->next_release = RTE_MAX(from, now > gap ? now - gap : now);
	/* More held: have the loop awake when the next is due, not after an
	 * idle sleep of up to 1 ms (a gap is 58 us at 200 Mbit/s). */
	if (n < held)
		w->mode_wake = RTE_MIN(w->mode_wake, tf->next_release);
	return (uint32_t)n;
}

