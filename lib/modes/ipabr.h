/* SPDX-License-Identifier: BSD-3-Clause
 * weir: IP-ABR, an explicit rate per TCP flow through its advertised
 * window (seed 000, chapters 4-5). docs/ipabr.md says what and why.
 *
 * Per leaf class and worker: the bandwidth available to the class now
 * (Eq. 4.3: the link as set now, less what higher-priority leaves were
 * measured to send, at least the class's rate, at most the ceilings on its
 * path), divided among the flows that sent data lately in proportion to
 * their rules' weights. Per flow and data direction: the round trip on both
 * sides of the gateway, each smoothed by the min-tracking filter of
 * Eq. 4.7, and the silly-window credit of Eq. 5.4-5.6. Every ACK of the
 * flow's data has its window cut to Eq. 4.6's Wnd_opt (never raised).
 *
 * The layout is here for the mode (lib/modes/ipabr.c), the white-box unit tests
 * and weir-bench; the management side reads nothing of it.
 */
#ifndef WEIR_IPABR_H
#define WEIR_IPABR_H

#include <stdint.h>
#include <rte_common.h>

#include "cbq.h"

/* Eq. 4.7's weights, as shifts: a sample below the average moves it by
 * 3/4 (0.6 <= wt < 1), one above by 1/512 (wt <= 0.002). */
#define WEIR_IPABR_DOWN_NUM 3
#define WEIR_IPABR_DOWN_SHIFT 2
#define WEIR_IPABR_UP_SHIFT 9

#define WEIR_IPABR_LOOK_MS 200          /* how often the tree is measured */
#define WEIR_IPABR_NOACK_SEGS 64        /* data segments without an ACK: asymmetric */
/* Time added to a flow's round trip in Eq. 4.6 (shaping.ipabr.headroom_us). */
#define WEIR_IPABR_HEADROOM_US 1000

/* Flow flags. */
#define WEIR_IPABR_SND_VALID 0x01       /* snd_max holds a sequence number */
#define WEIR_IPABR_ACK_SEEN 0x02        /* an ACK of this direction's data passed */
#define WEIR_IPABR_NOACK 0x04           /* counted as asymmetric (once) */
#define WEIR_IPABR_SUB_MSS 0x08         /* allocation below one segment per RTT: paced */
#define WEIR_IPABR_LATE 0x10            /* at its first ACK, young beside grown-up flows */
#define WEIR_IPABR_LIGHT 0x20           /* counted light in its class's period (max-min) */
#define WEIR_IPABR_FULL 0x40            /* sent up to weir's edge since its last count */
#define WEIR_IPABR_CUT 0x80             /* its last ACK's window was weir's (cut) */

/* One flow's data direction: one cache line. */
struct weir_ipabr_flow {
	uint64_t rtt_right;     /* gateway -> receiver -> gateway, filtered, TSC; 0 unknown */
	uint64_t rtt_left;      /* gateway -> sender -> gateway, filtered, TSC; 0 unknown */
	uint64_t sample_tsc;    /* when the timed segment left; 0 = none timed */
	uint64_t left_tsc;      /* when an ACK opened the window past left_seq; 0 = none */
	uint64_t next_release;  /* below one segment per RTT: when the next ACK may go */
	uint32_t sample_seq;    /* an ACK at or past this ends the right-side sample */
	uint32_t left_seq;      /* new data past this ends the left-side sample */
	uint32_t snd_max;       /* highest sequence end seen leaving (retransmission test) */
	uint32_t credit;        /* Eq. 5.5: bytes carried to the next window */
	uint16_t seg;           /* largest payload seen: the sender's segment */
	uint16_t ratio16;       /* seg / its frame's bytes, << 16 (Eq. 4.6's data_size/MTU) */
	uint8_t flags;          /* WEIR_IPABR_* */
	uint8_t mark;           /* the class period it was last counted active in */
	uint8_t weight;         /* its rule's weight, as counted in the class */
	uint8_t noack;          /* data segments sent before any ACK (saturates) */
};

static_assert(sizeof(struct weir_ipabr_flow) == 64, "one cache line per flow direction");

/* Per leaf class of one direction, on one worker. */
struct weir_ipabr_class {
	uint64_t avail_bpt;     /* available to the class, bytes per tick << 32 */
	uint64_t unit_bpt;      /* per unit of weight: avail / wsum */
	uint64_t period_end;    /* TSC the class's activity period ends */
	uint64_t rtt_max;       /* largest round trip used this period (sets its length) */
	uint32_t wsum;          /* weights of the flows active now */
	uint32_t wsum_cur;      /* weights of the flows seen this period */
	/* Max-min (water-filling) among them: the weights of the heavy flows
	 * (used half their allocation or more in their last period, or not
	 * measured), and the bytes the light ones used in theirs (the worker's
	 * measure, lib/worker/worker_active.c: per its period of light_len ticks). */
	uint32_t wheavy;
	uint32_t wheavy_cur;
	uint64_t light;
	uint64_t light_cur;
	uint64_t light_len;
	uint32_t name_hash;     /* of its name: kept across a policy switch by name */
	uint8_t period;         /* its number (never 0) */
	uint8_t _pad[3];
};

/* Per direction's tree, on one worker. */
struct weir_ipabr_dir {
	const void *policy;     /* the policy the figures below are of */
	uint64_t next_tsc;      /* next measurement of the tree */
	uint64_t last_tsc;
	uint64_t prio_bpt[WEIR_CBQ_NUM_PRIO];    /* leaves' measured rate by prio, bytes/tick << 32 */
	uint16_t n_cls;         /* classes of that policy's tree */
	uint64_t leaf_bytes[WEIR_CBQ_MAX_CLASSES];      /* each leaf's bytes at the last look */
	uint64_t leaf_bpt[WEIR_CBQ_MAX_CLASSES];        /* its measured rate, bytes/tick << 32 */
	struct weir_ipabr_class cls[WEIR_CBQ_MAX_CLASSES];
};

struct weir_ipabr_stats {
	uint64_t windows;       /* ACKs whose window Eq. 4.6 set (cut or not) */
	uint64_t cut;           /* of those, rewritten */
	uint64_t rtt_right;     /* round-trip samples taken, receiver side */
	uint64_t rtt_left;      /* sender side (ACK clock) */
	uint64_t karn;          /* samples abandoned: the timed segment was retransmitted */
	uint64_t young;         /* ACKs of late young flows sized to the class (new-flows list) */
	uint64_t left_unseen;   /* sender-side samples abandoned: it sent past every edge seen */
	uint64_t sub_mss;       /* ACKs of flows allocated below a segment per RTT (paced) */
	uint64_t unknown;       /* ACKs passed untouched: handshake (scale) or round trip unknown */
	uint64_t no_ack;        /* flows whose ACKs were never seen (asymmetric): pfq */
	uint64_t bad_weight;    /* ACKs of flows with weight 0: pfq */
};

struct weir_ipabr {
	struct weir_ipabr_flow *f[2];   /* [data direction][flow slot]; NULL until a
					 * policy has an ipabr class (ipabr_prepare) */
	uint32_t n_flows;
	int socket_id;
	struct weir_ipabr_stats st;
	struct weir_ipabr_dir dir[2];
	struct weir_ipabr_class old[WEIR_CBQ_MAX_CLASSES];     /* scratch of a policy switch */
};

/* The mode's counters on the worker w (lib/worker/worker_view.h's
 * weir_worker_modes_view): a copy, zeros when w has no ipabr state. */
struct weir_mode_svc;
void weir_ipabr_stats_copy(const struct weir_mode_svc *w, struct weir_ipabr_stats *out);

/* Bytes of per-flow state (both directions). */
static inline size_t
weir_ipabr_bytes_per_flow(void)
{
	return 2 * sizeof(struct weir_ipabr_flow);
}

/* Eq. 4.7 on *avg with sample s (TSC ticks). */
static inline void
weir_ipabr_filter(uint64_t *avg, uint64_t s)
{
	if (*avg == 0)
		*avg = s;
	else if (s < *avg)
		*avg -= ((*avg - s) * WEIR_IPABR_DOWN_NUM) >> WEIR_IPABR_DOWN_SHIFT;
	else
		*avg += (s - *avg) >> WEIR_IPABR_UP_SHIFT;
}

#endif /* WEIR_IPABR_H */
