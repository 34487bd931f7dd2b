/* SPDX-License-Identifier: BSD-3-Clause
 * weir-wanemu: one direction of one emulated WAN path.
 *
 * A frame that survives the loss models is serialised at the link rate (when
 * one is set), then delayed by the path's one-way delay plus jitter. Each
 * frame is stamped with the time it is due (as the paper's wan-emu does) and
 * frames leave in arrival order: a due time is never earlier than the one
 * before it, so jitter never reorders a direction's frames.
 */
#ifndef WANEMU_LINK_H
#define WANEMU_LINK_H

#include <stdbool.h>
#include <stdint.h>

#include "rio.h"
#include "sched.h"

/* Ethernet preamble + SFD (8), FCS (4) and inter-frame gap (12): what a frame
 * occupies on a real wire beyond the bytes a raw socket sees. */
#define WANEMU_WIRE_OVERHEAD 24

/* Frames one direction can hold (serialising + in flight), a power of two:
 * a 150 ms path at 1 Gbit/s holds ~12500 full-size frames. */
#define LINK_RING_CAP (1u << 18)

struct link_params {
	double delay_ms;        /* one-way delay */
	double jitter_ms;       /* uniform +- jitter on the delay */
	double loss_pct;        /* random loss, percent */
	uint32_t ploss;         /* drop every Nth frame (0 = off) */
	uint32_t corrupt;       /* one bit error per this many bytes on average (0 = off):
				 * a frame of len bytes has one bit flipped with probability
				 * len / corrupt, past its Ethernet and IP headers */
	uint64_t rate_bps;      /* 0 = unlimited */
	uint32_t limit;         /* frames waiting for the link before drop-tail */
	bool loss;              /* loss models apply to this direction */
	struct rate_sched sched; /* kind != SCHED_NONE: rate_bps follows it */
	struct rio_params rio;  /* on: two drop precedences in the rate queue (rio.h) */
};

struct link_stats {
	uint64_t rx, tx, tx_bytes;
	uint64_t drop_random, drop_periodic, drop_queue, drop_send;
	uint64_t corrupted;     /* frames sent on with a bit flipped (corrupt=) */
	uint32_t backlog_peak;  /* most frames waiting for the link at once (rate queue) */
	uint32_t inflight_peak; /* most frames held at once (rate queue + delay line) */
};

struct frame {
	uint64_t finish_ns;     /* serialisation done */
	uint64_t due_ns;        /* leaves the emulator */
	uint32_t len;
	uint8_t in;             /* RIO: an In frame */
	uint8_t *data;
};

struct link {
	struct link_params p;
	struct link_stats st;
	struct rio_state rio;
	struct rio_stats rio_st;
	struct frame *q;        /* FIFO ring */
	uint32_t cap, head, tail, serial;  /* serial: first frame still serialising */
	uint64_t last_finish_ns, last_due_ns;
	uint64_t delay_ns, jitter_ns;
	uint64_t count;         /* frames offered, for periodic loss */
	uint8_t corrupt_next;   /* the frame being offered gets a bit error */
	uint64_t *rng;
};

int link_init(struct link *l, const struct link_params *p, uint64_t *rng);
void link_free(struct link *l);

/* Offer a frame received at `now`; copies it. Returns false if dropped. */
bool link_offer(struct link *l, const uint8_t *data, uint32_t len, uint64_t now);

/* The frame at the head if it is due at `now`, else NULL. */
const struct frame *link_due(const struct link *l, uint64_t now);
void link_pop(struct link *l);

/* Due time of the head frame, or UINT64_MAX when empty. */
uint64_t link_next_due(const struct link *l);

uint64_t rng_next(uint64_t *s);

#endif /* WANEMU_LINK_H */
