/* SPDX-License-Identifier: BSD-3-Clause
 * weir: DiffServ edge markers, a per-class feature (seed 004, docs/markers.md).
 *
 * A leaf class may carry a marker besides its mode. The marker sits where
 * the class's frames leave the class tree (dequeue or cut-through), so a
 * class shapes first and marks what it sends: with ceil = the link it only
 * marks. Each frame gets a colour (green = in profile, yellow, red = out of
 * profile), its DSCP is rewritten to the colour's code point and it is
 * counted per colour. Only the outermost IP header's DS field is written
 * (IPv4: header checksum patched incrementally; IPv6: traffic class), so
 * ESP and AH payloads and anything inside a tunnel are never touched.
 *
 * Markers: tb (a classical token bucket: srTCM with EBS 0), srtcm and trtcm
 * (RFC 2697/2698 on rte_meter, colour-blind or colour-aware), tbq (token
 * bucket with a packet queue, Alg. 4.3.1), tbq-ld (low-delay TBQ, Alg.
 * 4.3.2), arm and carm (a token rate set by a PI controller from the
 * measured total / in-profile rate, Sec. 4.4).
 *
 * TBQ holds frames; they are released by the worker's dequeue call
 * (weir_markers_tick, every loop turn, no timers), so a held frame waits at
 * most until tokens for it accrue or the queue fills behind it. Frames a
 * marker releases go to the worker's out-array in the order they entered
 * the marker: a flow is never reordered. The controllers of arm and carm
 * run from the same call every sampling interval h (pure arithmetic).
 */
#ifndef WEIR_MARKER_H
#define WEIR_MARKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rte_mbuf.h>
#include <rte_meter.h>

enum weir_marker_type {
	WEIR_MARK_NONE = 0,
	WEIR_MARK_TB,           /* token bucket, two colours */
	WEIR_MARK_SRTCM,        /* RFC 2697 */
	WEIR_MARK_TRTCM,        /* RFC 2698 */
	WEIR_MARK_TBQ,          /* token bucket and a queue (Alg. 4.3.1) */
	WEIR_MARK_TBQ_LD,       /* low-delay TBQ (Alg. 4.3.2) */
	WEIR_MARK_ARM,          /* active rate management [25]: PI on the total rate */
	WEIR_MARK_CARM,         /* continuous ARM (Sec. 4.4): PI on the green rate */
	WEIR_MARK__COUNT
};

enum weir_colour { WEIR_GREEN = 0, WEIR_YELLOW = 1, WEIR_RED = 2, WEIR_COLOURS = 3 };

const char *weir_marker_type_name(unsigned int type);
int weir_marker_type_find(const char *name);    /* -1: unknown */

/* What a front end describes (part of a class's config). */
struct weir_marker_conf {
	uint8_t type;                   /* enum weir_marker_type; NONE = no marker */
	uint8_t color_aware;            /* srtcm/trtcm: the incoming DSCP pre-colours */
	uint8_t capped;                 /* tbq: drop instead of marking red */
	uint8_t dscp[WEIR_COLOURS];     /* code points written per colour */
	uint64_t cir;                   /* contract (committed) rate, bit/s */
	uint64_t pir;                   /* trtcm peak rate, bit/s */
	uint32_t cbs, ebs, pbs;         /* bucket depths, bytes */
	uint32_t queue;                 /* tbq: packets held at most; 0 = Eq. 4.8 */
	uint32_t min_thresh;            /* tbq-ld: early release above this many held */
	uint32_t rtt_us;                /* tbq: the aggregate's RTT T_a for Eq. 4.8 */
	uint32_t alpha_milli;           /* arm/carm: K_C = alpha K_u, alpha x 1000 */
	uint32_t window_ms;             /* arm/carm: rate counting window T_TSW */
};

/* Defaults a front end starts from (type NONE). */
void weir_marker_conf_init(struct weir_marker_conf *c);
/* Fill what depends on the type (bucket depths, queue by Eq. 4.8) and
 * check; `ceil` is what the class can send at most (bit/s). 0, or -1 with
 * a message naming the problem. */
int weir_marker_conf_check(struct weir_marker_conf *c, uint64_t ceil, char *err, size_t errlen);
/* Eq. 4.8 with n = 1 (the marker does not know the flow count):
 * B_P = (A T - sqrt(8 B)) / 2 packets of `mtu` bytes, at least 2. */
uint32_t weir_marker_tbq_queue(uint64_t cir, uint32_t rtt_us, uint32_t cbs, uint32_t mtu);

/* Per class, per worker: what the management side reads. */
struct weir_marker_counters {
	uint64_t pkts[WEIR_COLOURS], bytes[WEIR_COLOURS];
	uint64_t held;          /* tbq: frames that waited in the queue */
	uint64_t early;         /* tbq-ld: heads released red before the queue was full */
	uint64_t dropped;       /* tbq capped: dropped instead of marked red */
	uint64_t not_ip;        /* coloured but not rewritten: not IP or not writable */
	uint64_t token_rate;    /* bit/s the bucket fills at now (arm/carm move it) */
	uint32_t qlen;          /* tbq: held now */
	uint32_t _pad;
};

/* The markers of one direction of one worker: one per class (index of the
 * policy tree; a class without a marker has type NONE). */
struct weir_markers;

struct weir_markers_out {
	/* Where released frames go (the worker's out-array of the other
	 * port), and frames a capped TBQ drops (the worker frees and counts). */
	void (*send)(void *arg, struct rte_mbuf *m);
	void (*drop)(void *arg, struct rte_mbuf *m);
	void *arg;
};

/* The contracts of one class tree, class by class: class i's is at
 * first + i * stride bytes (a class record of the policy embeds its own;
 * policy.h's weir_policy_tree_markers gives a tree's). The markers know
 * contracts, not policies. */
struct weir_marker_confs {
	const struct weir_marker_conf *first;
	size_t stride;
	uint16_t n;
};

static inline const struct weir_marker_conf *
weir_marker_confs_at(struct weir_marker_confs c, uint16_t i)
{
	return (const struct weir_marker_conf *)((const char *)c.first + (size_t)i * c.stride);
}

/* NULL when no class of the tree has a marker (or on failure: *err < 0).
 * The contract rates are scaled by num/den (the worker's share). */
struct weir_markers *weir_markers_create(struct weir_marker_confs c, uint64_t num, uint64_t den,
					 uint64_t tsc_hz, uint64_t now, int socket_id, int *err);
/* The worker's share of class cls's contract c is now num/den of it (the
 * multi-worker rebalancer moved the class's rate on this worker): the
 * meters' and buckets' rates follow, their tokens kept; a controller keeps
 * its token rate in proportion. 0, or -1 for a class without a marker. */
int weir_markers_set_share(struct weir_markers *ms, const struct weir_marker_conf *c, uint32_t cls,
			   uint64_t num, uint64_t den, uint64_t now);
/* Release every held frame red (in order) through out, then free. */
void weir_markers_free(struct weir_markers *ms, const struct weir_markers_out *out);

/* Frame m of class cls left the class tree at `now`: colour and send it,
 * hold it (tbq), or drop it (capped tbq). A class without a marker sends
 * it untouched. */
void weir_markers_pass(struct weir_markers *ms, uint32_t cls, struct rte_mbuf *m, uint64_t now,
		       const struct weir_markers_out *out);
/* Every loop turn: release held frames whose tokens have accrued, run the
 * controllers that are due. Returns frames released. */
unsigned int weir_markers_tick(struct weir_markers *ms, uint64_t now,
			       const struct weir_markers_out *out);
/* The next TSC a tick has something to do (UINT64_MAX: nothing). */
uint64_t weir_markers_next(const struct weir_markers *ms);
/* Frames held by every class (for the worker's flush). */
uint32_t weir_markers_held(const struct weir_markers *ms);
/* Counters of class cls (zeros for a class without a marker): 0 or -1. */
int weir_markers_counters(const struct weir_markers *ms, uint32_t cls,
			  struct weir_marker_counters *out);

/* Write DSCP `dscp` into the outermost IP header of m (parse result p):
 * true if written. The ECN bits are kept; an IPv4 header checksum is
 * patched (RFC 1624), so a valid one stays valid. */
struct weir_pkt;
bool weir_marker_set_dscp(struct rte_mbuf *m, const struct weir_pkt *p, uint8_t dscp);

#endif /* WEIR_MARKER_H */
