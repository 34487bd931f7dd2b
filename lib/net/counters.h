/* SPDX-License-Identifier: BSD-3-Clause
 * weir: per-worker counters.
 *
 * Each worker writes only its own block (single writer, plain stores, no
 * atomics on the fast path); the management lcore sums the blocks on read.
 * Aligned 64-bit loads on x86-64 are not torn, so a reader sees each counter
 * either before or after an increment, which is all statistics need.
 */
#ifndef WEIR_COUNTERS_H
#define WEIR_COUNTERS_H

#include <stdint.h>
#include <rte_common.h>

#include "parse.h"

enum weir_port_role {
	WEIR_PORT_LAN = 0,
	WEIR_PORT_WAN = 1,
	WEIR_PORT__COUNT
};

/* What happened to the frames received on one port (counted at the rx side,
 * except tx_pkts/tx_bytes which count what left through the port).
 *
 * Two ways to add them up. By kind, every rx frame is exactly one of
 *   rx_pkts = managed + flow_full + non_ip + l2_control + l3_control + fragments
 *             + malformed
 * and by fate, once nothing is queued, held or waiting to be sent,
 *   rx_pkts = forwarded + tx_full + dropped + refused + malformed_dropped
 *             + l3_control_dropped
 * (a frame a mode creates, never received, would break the second: no mode
 * does today). */
struct weir_port_counters {
	uint64_t rx_pkts;
	uint64_t rx_bytes;
	uint64_t tx_pkts;        /* frames sent out of this port */
	uint64_t tx_bytes;
	uint64_t forwarded;      /* rx frames handed to the other port's tx */
	uint64_t tx_full;        /* rx frames dropped: the other port's tx ring stayed full */
	uint64_t dropped;        /* rx frames dropped: their flow's or class's queue was full */
	uint64_t refused;        /* rx frames dropped: their flow was refused admission */
	uint64_t non_ip;         /* bridged unmanaged: other ethertypes (not L2 control) */
	uint64_t l2_control;     /* ARP, RARP, LLDP, LACP, EAPOL, 01:80:c2:00:00:0X:
				  * sent on at once, ahead of shaping */
	/* Routers' link-local control (OSPF, BGP, BFD, VRRP...: lib/net/l3ctl.h),
	 * with worker.l3_control: sent on at once, ahead of shaping, untracked.
	 * l3_control_dropped: those over worker.l3_control_pps in a shaped
	 * direction, dropped. */
	uint64_t l3_control;
	uint64_t l3_control_dropped;
	uint64_t fragments;      /* IP fragments: shaped per host pair (a pseudo-flow) */
	uint64_t malformed;      /* bridged unmanaged: sum of malformed_by[] */
	uint64_t malformed_dropped; /* of those, dropped over worker.malformed_pps */
	uint64_t flow_full;      /* bridged unmanaged: new flow, flow table full */
	uint64_t managed;        /* frames tracked in a flow */
	uint64_t win_clamped;    /* ACKs whose advertised window PostACK cut */
	uint64_t sack_passed;    /* ACKs with SACK blocks PostACK let through unheld (loss) */
	/* Frames of a TCP flow whose SYN this worker never saw, with several
	 * workers (conf.count_split): the flow is split across workers
	 * (docs/multiworker.md, "flow_split"). Forwarded and shaped as usual. */
	uint64_t flow_split;
	/* IPsec SAs (lib/flow/sa_seq.h): frames of ESP/AH flows tracked, the
	 * sequence numbers they skipped (loss upstream, before weir), filled
	 * late (reordering), repeated, too old to tell, and jumps/wraps.
	 * ipsec_plain: frames of IPsec flows whose leaf's mode would rewrite
	 * or hold (postack, tcr...), shaped per flow as pfq instead. */
	uint64_t ipsec;
	uint64_t ipsec_gaps;
	uint64_t ipsec_late;
	uint64_t ipsec_dup;
	uint64_t ipsec_old;
	uint64_t ipsec_resync;
	uint64_t ipsec_plain;
	uint64_t ipsec_untracked;       /* frames of SAs beyond the worker's records */
	/* Last miles (lib/worker/lastmile.h): segments whose advertised window was
	 * clamped to the last mile's pipe + buffer; frames of flows exempt
	 * from per-flow fairness shaped pfq instead of their leaf's mode. */
	uint64_t lm_clamped;
	uint64_t lm_exempt;
	/* Segments of TCP flows signed by TCP-MD5 or TCP-AO (lib/net/parse.h,
	 * WEIR_PF_TCP_SIGNED): the signature covers the window and the ACK,
	 * so no mode rewrites, holds or answers them; shaped pfq. */
	uint64_t tcp_signed;
	uint64_t malformed_by[WEIR_MAL__COUNT];
} __rte_cache_aligned;

struct weir_worker_counters {
	struct weir_port_counters port[WEIR_PORT__COUNT];
	uint64_t loops;          /* poll iterations */
	uint64_t idle_loops;     /* iterations that received nothing */
	uint64_t sleeps;         /* back-off sleeps taken while idle */
	uint64_t busy_tsc;       /* TSC spent in iterations that moved packets */
} __rte_cache_aligned;

/* Sum of `n` workers' port counters into `out` (zeroed first). */
void weir_counters_sum(const struct weir_worker_counters *const *w, unsigned int n,
		       struct weir_worker_counters *out);

#endif /* WEIR_COUNTERS_H */
