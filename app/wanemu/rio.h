/* SPDX-License-Identifier: BSD-3-Clause
 * weir-wanemu: RIO, a rate queue with two drop precedences (RED with In and
 * Out, Clark and Fang), the DiffServ core the markers of seed 004 are
 * tested against (docs/wanemu.md, docs/markers.md).
 *
 * Each frame is In (its DSCP is one of the in-profile set, default AF11)
 * or Out (any other DSCP). Two RED curves: In frames see the average number
 * of In frames waiting for the link, Out frames the average of all frames,
 * and Out's thresholds are lower, so Out is dropped first and earlier. The
 * averages are EWMAs (weight w_q) updated per arrival, decayed over idle
 * time as RED does; the drop probability between min and max rises to
 * max_p and is spread by RED's count; above max every frame of that
 * precedence is dropped. Non-IP frames are In (ARP must not die first).
 */
#ifndef WANEMU_RIO_H
#define WANEMU_RIO_H

#include <stdbool.h>
#include <stdint.h>

enum { RIO_IN = 0, RIO_OUT = 1 };

struct rio_params {
	bool on;
	double min[2], max[2], maxp[2];         /* packets, packets, probability */
	double wq;                              /* EWMA weight */
	uint64_t in_dscp;                       /* bit d: DSCP d is In */
};

struct rio_state {
	double avg[2];                          /* [RIO_IN] In frames, [RIO_OUT] all frames */
	int64_t count[2];                       /* frames since the last drop, per curve */
	uint32_t qin;                           /* In frames waiting for the link */
};

struct rio_stats {
	uint64_t rx[2];                         /* frames offered, by precedence */
	uint64_t drop[2];                       /* dropped by the RED curves */
};

/* "MININ:MAXIN:PIN:MINOUT:MAXOUT:POUT", e.g. the thesis' 150:300:0.1:50:250:0.15. */
int rio_parse(struct rio_params *p, const char *s, const char **why);
/* "10+12": DSCPs (0-63 or AF11..AF43, EF, BE, CSn) that are In. */
int rio_parse_in(struct rio_params *p, const char *s, const char **why);

/* The precedence of a frame (by its outermost IP header's DSCP). */
int rio_class(const struct rio_params *p, const uint8_t *f, uint32_t len);
/* Drop the arriving frame of precedence c? qlen: frames waiting for the
 * link; idle_s: how long the link has been idle (0 if busy); pkt_s: one
 * typical frame's transmission time. u: uniform in [0, 1). */
bool rio_drop(const struct rio_params *p, struct rio_state *s, int c, uint32_t qlen,
	      double idle_s, double pkt_s, double u);

#endif /* WANEMU_RIO_H */
