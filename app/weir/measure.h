/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the management lcore's gathering of the workers' TCP measurement
 * (lib/worker/tcpmeas.h through weir_worker_tcp_view) for the REST API's hosts
 * and measure listings and /metrics: every measured TCP flow copied once,
 * then summarised per LAN host, per class, and the worst flows.
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
#include "worker_view.h"

struct weir_meas_flow {
	uint32_t worker, slot;
	struct weir_flow_key key;
	bool lan_hi;                    /* the LAN endpoint is key.addr_hi */
	bool active;                    /* a packet in the window */
	int leaf[2];                    /* its class per direction (enum weir_dir); -1: none */
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

#endif /* WEIR_MEASURE_H */
