/* SPDX-License-Identifier: BSD-3-Clause
 * weir: what the management lcore may see of a running worker.
 *
 * The management side (app/weir: stats, REST, metrics, telemetry, hooks,
 * the rebalancer) reads workers only through these functions, never
 * struct weir_worker's fields, so the worker's layout can change behind
 * them. Every result is a copy; nothing returned points into the worker.
 *
 * Lifetime rule (quiescent state per worker). A worker replaces and frees
 * its class trees and class counters only while it takes a policy switch,
 * and only the management lcore posts switches. So from the moment a
 * worker has acknowledged policy P's epoch until the management lcore
 * posts the next switch, that worker's trees are P's and stay allocated.
 * The functions that read a tree therefore take the policy the caller
 * indexes with and answer -EAGAIN while the worker has not acknowledged
 * it (a switch in flight, or one a late worker has not taken: it may be
 * freeing the old tree right now, and the old tree's classes are not P's).
 * Call them on the management lcore only, and never across a switch the
 * same call posts.
 *
 * Counters the worker writes as it runs are read with plain aligned loads:
 * each value is whole, but two values may be a packet apart.
 */
#ifndef WEIR_WORKER_VIEW_H
#define WEIR_WORKER_VIEW_H

#include <stdbool.h>
#include <stdint.h>

#include "cbq.h"
#include "counters.h"
#include "flow.h"
#include "policy.h"
#include "ackstore.h"
#include "sa_seq.h"

struct weir_worker;

/* The epoch of the policy the worker runs (acquire: what it freed and
 * stored in taking that policy's switch is visible after this). */
uint32_t weir_worker_policy_acked(const struct weir_worker *w);
/* Management lcore: ask the worker's loop to stop (weir_worker_main then
 * drains, see weir_worker_stopping, and returns). */
void weir_worker_stop(struct weir_worker *w);
/* Does the worker hold a posted switch it has not taken yet? */
bool weir_worker_switch_pending(const struct weir_worker *w);

/* Has the worker acknowledged policy p (its trees are p's and stable)? */
bool weir_worker_view_current(const struct weir_worker *w, const struct weir_policy *p);

/* One class of one direction's tree on one worker. */
struct weir_class_view {
	struct weir_cbq_stats cbq;
	uint32_t flows;         /* leaf: flows counted in it now (admission) */
	uint32_t active;        /* leaf: flows that sent data lately (what shares divide by) */
	uint32_t heavy;         /* of those, the ones using their share (max-min: the rest are light) */
	double light_bps;       /* what the light ones used in their last period, bit/s */
	uint64_t admitted;
	uint64_t refused;
	uint64_t diverted;
	bool has_qm;            /* a fifo leaf with a queue manager: qm valid */
	struct weir_qm_stats qm;
};

/* Class cls of direction dir under policy p. 0; -EAGAIN: the worker has not
 * taken p yet (see the lifetime rule); -ENOENT: dir is unshaped or cls is
 * not one of p's classes there. */
int weir_worker_class_view(const struct weir_worker *w, const struct weir_policy *p, int dir,
			   uint32_t cls, struct weir_class_view *out);
/* The marker counters of class cls (lib/sched/marker.h) on this worker: -ENOENT
 * when the class has none, -EAGAIN while the worker runs another policy. */
int weir_worker_marker_view(const struct weir_worker *w, const struct weir_policy *p, int dir,
			    uint32_t cls, struct weir_marker_counters *out);

/* Data direction dir of the flow in `slot`, whose entry the caller read
 * (*f, a copy: see weir_flow_read). */
struct weir_flow_view {
	int leaf;               /* its leaf class under p; -1: not classified under p yet */
	int target;             /* p's target (f->class_id) when leaf >= 0, else -1 */
	bool shaped;            /* dir has a tree on this worker (queued_pkts valid) */
	bool postack;           /* the worker holds ACKs (acks_held, rtt_ticks valid) */
	uint32_t queued_pkts;   /* data packets of the flow in the tree now */
	uint32_t acks_held;     /* ACKs of dir's data held now */
	uint32_t rtt_ticks;     /* the handshake's round trip to dir's sender; 0 = unknown */
};

/* 0, or -EAGAIN when the worker has not taken p (then only bytes the
 * caller has are valid: out->leaf is -1 and nothing is read of the tree). */
int weir_worker_flow_view(const struct weir_worker *w, const struct weir_policy *p,
			  uint32_t slot, const struct weir_flow *f, int dir,
			  struct weir_flow_view *out);

/* Passive TCP measurement of one flow (lib/worker/tcpmeas.h, docs/measure.md).
 * A side is the path between weir and the host on that side of it: its
 * round trip is weir -> host -> weir (the host's stack and delayed ACKs
 * included, weir's own queues and held ACKs not). */
struct weir_tcp_side_view {
	uint32_t rtt_us;                /* the latest sample, microseconds; 0: none yet */
	uint32_t rtt_min_us;            /* the smallest sample */
	uint32_t srtt_us;               /* smoothed (gain 1/8, as RFC 6298's SRTT) */
	uint32_t samples;               /* samples taken */
	uint64_t sample_age_us;         /* time since the latest sample (UINT64_MAX: none) */
};
/* What one side's host sent (segments travelling away from it). */
struct weir_tcp_sent_view {
	uint32_t retrans_segs;          /* segments starting below the highest sequence seen */
	uint64_t retrans_bytes;         /* their payload bytes */
	uint32_t ooo;                   /* segments that left a hole before them */
	uint32_t dupacks;               /* pure ACKs repeating the ACK number and window */
};
struct weir_tcp_view {
	struct weir_tcp_side_view lan;  /* weir -> LAN host -> weir */
	struct weir_tcp_side_view wan;  /* weir -> WAN host -> weir */
	struct weir_tcp_sent_view out;  /* sent by the LAN host (travelling out) */
	struct weir_tcp_sent_view in;   /* sent by the WAN host (travelling in) */
};

/* The measurement of the TCP flow in `slot`, whose entry the caller read
 * (*f, a copy): 0, or -ENOENT when the worker does not measure
 * (stats.tcp_measure off) or has no record of that flow yet. */
int weir_worker_tcp_view(const struct weir_worker *w, uint32_t slot, const struct weir_flow *f,
			 struct weir_tcp_view *out);

/* The worker's measurement totals (zeros when it does not measure). */
struct weir_tcp_totals {
	uint64_t segs, samples, retrans_segs, ooo, dupacks;
};
void weir_worker_tcp_totals(const struct weir_worker *w, struct weir_tcp_totals *out);

/* The sequence record of the IPsec SA in `slot`, whose entry the caller
 * read (*f, a copy): 0, or -ENOENT when the record is not that flow's (no
 * packet tracked yet, or the slot changed hands). Copied word by word:
 * counters may be a packet apart. */
int weir_worker_sa_view(const struct weir_worker *w, uint32_t slot, const struct weir_flow *f,
			struct weir_sa_seq *out);

/* The worker's PostACK counters (a copy): 0, or -ENOENT without PostACK. */
int weir_worker_postack_stats(const struct weir_worker *w, struct weir_postack_stats *out);

/* The worker as its modes see it (lib/modes/mode_svc.h), for a mode's own
 * copy functions (weir_ipabr_stats_copy, weir_pep_stats_copy): each copies
 * its counters out, as the views here do. */
const struct weir_mode_svc *weir_worker_modes_view(const struct weir_worker *w);

/* The worker's port counters (a copy, for weir_counters_sum). */
void weir_worker_port_counters(const struct weir_worker *w, struct weir_worker_counters *out);

/* The worker's own loop and message counters. */
struct weir_worker_info {
	uint16_t queue;
	uint64_t loops, idle_loops, sleeps, busy_tsc;
	uint32_t rate_updates;          /* share-box updates applied */
	uint32_t policy_acked;          /* epoch of the policy it runs */
	uint64_t policy_switches, requeued;
	uint64_t events_sent, events_dropped, cmds_applied, cmds_stale;
};
void weir_worker_info(const struct weir_worker *w, struct weir_worker_info *out);

/* Which flow events the worker posts (the hooks the script has). Plain
 * flags the worker reads once per new or ending flow: a change applies
 * from the next flow on. No-op for a worker without an event ring. */
void weir_worker_set_flow_events(struct weir_worker *w, bool new_flow, bool end_flow);

/* Packet capture (lib/observe/capture.h). Post tap t (NULL: none) for the worker
 * to take at its next burst; the one it replaces stays in use until
 * weir_worker_cap_taken(w, t) (a worker with no traffic takes it late).
 * The counters are a copy (values may be a frame apart). */
struct weir_cap_tap;
struct weir_cap_counters;
void weir_worker_cap_post(struct weir_worker *w, const struct weir_cap_tap *t);
bool weir_worker_cap_taken(const struct weir_worker *w, const struct weir_cap_tap *t);
void weir_worker_cap_counters(const struct weir_worker *w, struct weir_cap_counters *out);

#endif /* WEIR_WORKER_VIEW_H */
