/* SPDX-License-Identifier: BSD-3-Clause
 * weir: one class's marker state, shared by lib/marker*.c only.
 */
#ifndef WEIR_MARKER_INT_H
#define WEIR_MARKER_INT_H

#include "marker.h"
#include "parse.h"

/* A token bucket whose rate may change (tbq, arm, carm): tokens in bytes
 * << 32, rate in bytes per TSC tick << 32. */
struct weir_bucket {
	uint64_t tokens;
	uint64_t depth;
	uint64_t rate;
	uint64_t last;
	uint64_t dt_full;       /* ticks that fill an empty bucket: caps dt x rate */
};

/* The PI controller of arm / carm (Sec. 4.4), run every h seconds. */
struct weir_rate_ctl {
	double A;               /* contract, bytes/s */
	double rt;              /* token rate r_T, bytes/s */
	double kc, ti, h, rho;  /* gain, integral time, sampling interval, filter pole */
	double x_raw, x_raw_prev;       /* counted rate of the last window, and the one before */
	double xavg;            /* low-pass filtered estimate */
	double e_prev;
	uint64_t win_bytes;     /* counted in the current window (green or all) */
	uint64_t win_end;       /* TSC the counting window closes */
	uint64_t win_ticks;
	uint64_t h_ticks;
	uint64_t next;          /* TSC of the next controller step */
	bool count_all;         /* arm: all colours; carm: green only */
};

struct weir_marker {
	uint8_t type;
	uint8_t color_aware;
	uint8_t capped;
	uint8_t dscp[WEIR_COLOURS];
	uint64_t tsc_hz;
	struct rte_meter_srtcm_profile srp;
	struct rte_meter_srtcm sr;
	struct rte_meter_trtcm_profile trp;
	struct rte_meter_trtcm tr;
	struct weir_bucket tb;
	/* tbq: a ring of held frames */
	struct rte_mbuf **q;
	uint32_t qcap, qhead, qn, min_thresh;
	uint32_t rnd;           /* tbq-ld's uniform draws (xorshift32) */
	struct weir_rate_ctl ctl;
	struct weir_marker_counters ctr;
};

struct weir_markers {
	uint16_t n;
	uint16_t n_tbq;         /* classes that may hold frames */
	uint16_t n_ctl;         /* classes with a controller */
	uint64_t next;          /* earliest TSC a tick has work */
	struct weir_marker m[];
};

/* marker.c: colour frame m green/yellow/red: counted, DSCP rewritten, sent. */
void weir_marker_emit(struct weir_marker *k, struct rte_mbuf *m, enum weir_colour c,
		      const struct weir_markers_out *out);

/* marker_rate.c */
void weir_bucket_init(struct weir_bucket *b, uint64_t rate_bps, uint32_t depth, uint64_t hz,
		      uint64_t now);
void weir_bucket_set_rate(struct weir_bucket *b, uint64_t rate_bps, uint64_t hz);
void weir_bucket_fill(struct weir_bucket *b, uint64_t now);
static inline bool
weir_bucket_take(struct weir_bucket *b, uint32_t len, uint64_t now)
{
	uint64_t need = (uint64_t)len << 32;

	weir_bucket_fill(b, now);
	if (b->tokens < need)
		return false;
	b->tokens -= need;
	return true;
}
/* TSC at which the bucket holds len bytes' worth (now if it does). */
uint64_t weir_bucket_when(const struct weir_bucket *b, uint32_t len, uint64_t now);
void weir_rate_ctl_init(struct weir_marker *k, const struct weir_marker_conf *c, uint64_t cir,
			uint64_t now);
/* A controller step if due; true if it ran. */
bool weir_rate_ctl_step(struct weir_marker *k, uint64_t now);

/* marker_tbq.c */
void weir_tbq_pass(struct weir_marker *k, struct rte_mbuf *m, uint64_t now,
		   const struct weir_markers_out *out);
unsigned int weir_tbq_release(struct weir_marker *k, uint64_t now,
			      const struct weir_markers_out *out);
/* TSC the head may go (UINT64_MAX: empty). */
uint64_t weir_tbq_next(const struct weir_marker *k, uint64_t now);

#endif /* WEIR_MARKER_INT_H */
