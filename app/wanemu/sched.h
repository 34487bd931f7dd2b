/* SPDX-License-Identifier: BSD-3-Clause
 * weir-wanemu: a link rate that changes over time (steps or a sine), for
 * experiments where the bandwidth available to TCP moves under it (IP-ABR's
 * 192000/64000 B/s switch, the premature-ACK paper's 1 + 0.5 sin(kt) Mbit/s).
 */
#ifndef WANEMU_SCHED_H
#define WANEMU_SCHED_H

#include <stdint.h>

#define SCHED_MAX_STEPS 16

enum sched_kind { SCHED_NONE = 0, SCHED_STEPS, SCHED_SINE };

struct rate_sched {
	enum sched_kind kind;
	uint64_t t0_ns;                         /* CLOCK_MONOTONIC at start */
	/* steps: rate[i] for dur_ns[i], cycling */
	uint32_t n;
	uint64_t rate[SCHED_MAX_STEPS];
	uint64_t dur_ns[SCHED_MAX_STEPS];
	uint64_t cycle_ns;
	/* sine: base + amp * sin(2 pi t / period) */
	double base, amp;
	uint64_t period_ns;
};

/* Parse "steps:RATE/SECONDS[/RATE/SECONDS...]" or "sine:BASE/AMP/PERIOD_SECONDS"
 * (rates in tc's units, as rate=); `parse_rate` is the cli's. t0 is set to now.
 * Returns 0, or -1 with a reason in `why`. */
int sched_parse(struct rate_sched *s, const char *spec, int (*parse_rate)(const char *, uint64_t *),
		const char **why);

/* The rate in bit/s at CLOCK_MONOTONIC time `now_ns`. */
uint64_t sched_rate(const struct rate_sched *s, uint64_t now_ns);

#endif /* WANEMU_SCHED_H */
