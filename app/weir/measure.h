/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the management lcore's gathering of the workers' TCP measurement
 * (lib/worker/tcpmeas.h through weir_worker_tcp_view) for the REST API's hosts
 * and measure listings and /metrics: every measured TCP flow copied once,
 * then summarised per LAN host, per class, per subscriber, and the worst
 * flows. A flow's subscriber is the one whose leaf class it is in (either
 * direction: a policy hook may have moved it out of one).
 *
 * "The last interval" is the window: max(stats.interval, 1 s). Round-trip
 * figures of a group are over its flows with a sample in the window (each
 * flow's smoothed round trip, one value a flow); retransmission figures
 * over its flows that sent anything in the window (their whole lives).
 */
#ifndef WEIR_MEASURE_H
#define WEIR_MEASURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "app.h"
#include "subscriber.h"
#include "worker_view.h"

struct weir_meas_flow {
	uint32_t worker, slot;
	struct weir_flow_key key;
	bool lan_hi;                    /* the LAN endpoint is key.addr_hi */
	bool active;                    /* a packet in the window */
	int leaf[2];                    /* its class per direction (enum weir_dir); -1: none */
	uint32_t sub;                   /* its subscriber (index), WEIR_SUB_NONE: none */
	uint64_t bytes[2];              /* wire bytes per direction */
	struct weir_tcp_view t;
};

struct weir_meas {
	struct weir_meas_flow *f;       /* malloc'ed */
	size_t n;
	uint64_t window_us;
};

/* Copy every measured TCP flow of every worker. 0, or -ENOMEM. */
int weir_meas_collect(const struct weir_app *a, struct weir_meas *m);
void weir_meas_free(struct weir_meas *m);

/* Was side s sampled within the window? */
static inline bool
weir_meas_recent(const struct weir_meas *m, const struct weir_tcp_side_view *s)
{
	return s->samples != 0 && s->sample_age_us <= m->window_us;
}

/* min, median and 95th percentile of n values (sorted in place). */
struct weir_meas_summary {
	uint32_t n;
	uint32_t min_us, median_us, p95_us;
};
void weir_meas_summarise(uint32_t *v, size_t n, struct weir_meas_summary *out);

/* Retransmitted payload bytes of flow f (both ways). */
static inline uint64_t
weir_meas_retrans_bytes(const struct weir_meas_flow *f)
{
	return f->t.out.retrans_bytes + f->t.in.retrans_bytes;
}

/* (rest_measure.c) Every subscriber with a measured TCP flow: an object
 * keyed by subscriber id, each the figures GET /api/v1/measure?by=subscriber
 * gives a subscriber (round trips each side, retransmissions and their
 * ratio over the last interval). NULL without subscribers or memory. One
 * copy of every flow: call it once per request, not per subscriber. */
json_t *weir_meas_subs_json(struct weir_app *a);

#endif /* WEIR_MEASURE_H */
