/* SPDX-License-Identifier: BSD-3-Clause
 * weir: what a mode may use of the worker it runs on.
 *
 * A mode sees the worker only as this: the flow table, the class trees
 * and the policy in force, the class counters and shares the worker
 * computes, the ACK store and the pacing state, its own per-worker state,
 * the clock, the worker's counters, and the few settings modes read. The
 * worker embeds it (struct weir_worker's `svc`) and hands &w->svc to every
 * hook; the rest of the worker (its rings, buckets, policy switches,
 * capture, out-arrays) is out of a mode's reach. The worker writes these
 * fields; a mode reads them and writes only what is its own: mode_state,
 * the ACK store, the pacing state, mode_wake (lowered, never raised), a
 * class's pace_next, and the counters it keeps (win_clamped, sack_passed).
 *
 * The worker's services below are functions, not fields: frames leave only
 * through the worker's out-arrays, ACKs are held and released only through
 * it, so a mode cannot reorder a flow.
 */
#ifndef WEIR_MODE_SVC_H
#define WEIR_MODE_SVC_H

#include <stdbool.h>
#include <stdint.h>
#include <rte_mbuf.h>

#include "counters.h"
#include "flow.h"
#include "policy.h"
#include "ackstore.h"

struct weir_cbq;
struct weir_tcr;        /* the pacing state, lib/modes/pace_state.h */

/* Per class of one direction's tree, on one worker (single writer). Frames
 * without a flow (non-IP other than L2 control, malformed, new flows with
 * the table full) go to the default class, in one queue id past the flow
 * slots. */
struct weir_class_counters {
	uint32_t flows;         /* flows classified here and not ended (admission counts these) */
	uint32_t _pad;
	uint64_t admitted;      /* flows classified into this class */
	uint64_t refused;       /* flows refused admission by this class */
	uint64_t diverted;      /* of those, flows sent to the fallback class */
	/* Flows that sent data in this class within the last activity
	 * period or the one before (idle connections do not count): what a
	 * per-flow share divides the class's rate by. */
	uint32_t active;
	uint32_t active_cur;    /* flows seen in the current period */
	/* Of those, the young ones (their leaf's young budget not yet sent
	 * when counted): a young flow is ahead of others only while some
	 * active flow is not (weir_mode_young). */
	uint32_t young;
	uint32_t young_cur;
	uint64_t period_end;    /* TSC the current period ends */
	uint64_t rtt_max;       /* largest round trip of a flow counted this period: the next one's length */
	uint8_t period;         /* its number, as flows mark it (never 0) */
	/* Periods a young flow may be active in before it is old whatever it
	 * has sent (weir_drr_youth_age); set at each period's start. */
	uint8_t young_periods;
	uint8_t _pad8[6];
	/* Max-min shares (lib/worker/worker_active.c): of the active flows, the
	 * heavy ones (used at least half their share in their last period,
	 * or not measured yet), and the bytes the light ones used in theirs;
	 * carried from the last period, and this period's own counts. */
	uint32_t heavy;
	uint32_t heavy_cur;
	uint64_t light_bytes;
	uint64_t light_bytes_cur;
	uint64_t period_len;    /* ticks of the current period */
	uint64_t light_limit;   /* bytes in a period below which a flow is light */
	/* The class's per-flow share on this worker: water-filled, what the
	 * light flows use is theirs and the heavy flows divide the rest
	 * (never less than rate / active flows), fixed point, recomputed at
	 * each period's start and when the counts or the rate change. */
	uint64_t share_bytes_per_tick;  /* << 32 */
	uint64_t share_ticks_per_byte;  /* << 16 */
	uint64_t rate_ticks_per_byte;   /* the class's own rate, << 16 (postack-paced's class clock) */
	/* The same for the class's ceil: what a flow may get when the class
	 * borrows (PostACK's window clamp must not stop that). */
	uint64_t ceil_share_bytes_per_tick;     /* << 32 */
	/* TCR's headroom per flow over its BDP (lib/modes/tcr.c): in sixteenths of
	 * a segment, two segments, less where the flows' two each would fill
	 * more than half the class's queue limit; and in bytes, what the share
	 * sends in WEIR_TCR_MARGIN_MS. The smaller applies. */
	uint32_t tcr_margin16;
	uint32_t tcr_margin_bytes;
	/* postack-paced: TSC the class's next paced ACK may go. The flows'
	 * own ticks alone fire together (they start together, with one
	 * gap), and their data would then arrive as a burst of n packets. */
	uint64_t pace_next;
};

/* The worker's settings modes read (copied from struct weir_worker_conf at
 * create; lib/worker/worker.h says what each means). */
struct weir_mode_conf {
	uint32_t pep_copies;
	bool pep_wm_measured;
	bool ipabr_no_sws_credit;
	uint32_t ipabr_headroom_us;
};

struct weir_mode_svc {
	struct weir_flow_table *flows;
	/* Per direction (the rx port's role): NULL = bridged unshaped. */
	struct weir_cbq *shaper[WEIR_PORT__COUNT];
	const struct weir_policy *policy;
	struct weir_class_counters *cls_ctr[WEIR_PORT__COUNT];   /* [class], NULL if unshaped */
	struct weir_postack *pa;               /* the ACK store (NULL: none) */
	struct weir_tcr *tcr;                  /* with pa: the pacing state */
	void *mode_state[WEIR_MODE__COUNT];    /* a mode's own per-worker state, by its enum */
	uint64_t mode_wake;                    /* TSC a mode's timer wants the loop awake by */
	uint64_t tsc_per_us;
	uint64_t tsc_hz;
	uint8_t gen8;                          /* policy generation flows' class_gen refer to */
	struct weir_mode_conf conf;
	struct weir_worker_counters ctr;
};

enum weir_verdict {
	WEIR_V_PASS = 0,        /* the frame goes on as the worker would send it */
	WEIR_V_TAKEN = 1,       /* the mode owns the frame now */
	WEIR_V_DROP = 2,        /* the worker frees it and counts it dropped */
};

/* ---- what the worker offers modes (weir_worker_out: lib/worker/worker.c; the
 * rest: lib/worker/worker_ack.c) ---- */

/* Hand frame m to the out-array of port `to` (sent by the loop's transmit
 * point, after everything handed over before it), counted as forwarded
 * from the other port. */
void weir_worker_out(struct weir_mode_svc *w, int to, struct rte_mbuf *m);
/* Release up to max ACKs held for data direction d of slot (all: UINT32_MAX)
 * into the out-array, oldest first; returns how many. */
unsigned int weir_mode_release(struct weir_mode_svc *w, int d, uint32_t slot, uint32_t max,
			       enum weir_postack_why why);
/* Hold ACK m (travelling opposite to data direction d); when the store is
 * full what is held goes first and m after it. Returns the verdict. */
enum weir_verdict weir_mode_hold(struct weir_mode_svc *w, struct weir_flow *f, int d,
				 uint32_t slot, struct rte_mbuf *m, uint64_t now);
/* Is flow f young in data direction d (within its leaf's young-flow budget,
 * lib/sched/drr.h) beside an active flow that is not? DRR serves it ahead of bulk
 * flows; a mode that holds or paces ACKs lets it run too, or the head start
 * would be taken back. Among young flows only, nobody is ahead. */
bool weir_mode_young(const struct weir_mode_svc *w, const struct weir_flow *f, int d,
		     uint32_t leaf);
/* Frames of slot waiting in direction d's class tree (for a fifo leaf, any
 * frame in its shared queue: the flow's own cannot be told apart). */
uint32_t weir_mode_data_qlen(const struct weir_mode_svc *w, const struct weir_flow *f, int d,
			     uint32_t slot);

#endif /* WEIR_MODE_SVC_H */
