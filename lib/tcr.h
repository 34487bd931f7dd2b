/* SPDX-License-Identifier: BSD-3-Clause
 * weir: TCR, TCP rate control by window sizing and ACK pacing (the prior
 * art PostACK is measured against: the PostACK paper, Sec. 2.4).
 *
 * For a flow in a tcr leaf, every ACK of its data has its advertised
 * window cut to the flow's bandwidth-delay product, BDP_i = BW_i x D_w,
 * with BW_i = the class's rate / its active flows (the fair share) and
 * D_w the flow's round trip, and the ACKs are clocked out one every
 * MSS / BW_i. The ACKs wait in the same compact store PostACK uses
 * (lib/postack.h); the watchdog paces them from its round-robin over the
 * flows holding ACKs, so there is no timer per flow. D_w is the sum of two
 * halves the gateway sees: to the data's sender and back (the handshake)
 * and to its receiver and back (`srtt`: the handshake's, smoothed with
 * EWMA gain 1/8, as TCP's SRTT, by one timed data segment per round trip,
 * from the moment it leaves the gateway towards the receiver to the ACK
 * that covers it).
 *
 * tcr.c is the mode (lib/mode.h) and the per-flow pacing state it shares
 * with PostACK's pacing of starving flows and postack-paced; the per-class
 * figures (bytes per tick and ticks per byte of the fair share, fixed
 * point) are the worker's, recomputed when a class's flow count or rate
 * changes, never per packet.
 */
#ifndef WEIR_TCR_H
#define WEIR_TCR_H

#include <stdint.h>
#include <rte_common.h>

/* Opaque outside the data plane: its layout is lib/tcr_state.h's. */
struct weir_tcr;

struct weir_tcr *weir_tcr_create(uint32_t n_flows, int socket_id);
struct weir_worker;
struct weir_flow;
/* One MSS of the flow's data direction d at its class's fair share on
 * this worker, TSC ticks. */
uint64_t weir_tcr_pace_gap(const struct weir_worker *w, const struct weir_flow *f, int d,
			   uint16_t leaf);
/* Is the next paced ACK of (d, slot) due now? Advances its clock if so
 * (tcr.c says how; `starving` is PostACK's held count, 0 for TCR). */
uint32_t weir_tcr_pace_due(struct weir_worker *w, const struct weir_flow *f, int d, uint32_t slot,
			   uint16_t leaf, uint64_t now, uint32_t starving);
/* How many of the `held` ACKs of (d, slot) the TCR pacing clock owes at
 * `now` (a late look releases what it missed, up to WEIR_TCR_CATCHUP_US of
 * the share's time); advances the clock by that many gaps. */
#define WEIR_TCR_CATCHUP_US 4000
uint32_t weir_tcr_pace_owed(struct weir_worker *w, const struct weir_flow *f, int d, uint32_t slot,
			    uint16_t leaf, uint64_t now, uint32_t held);

/* A TCR window's headroom over the flow's BDP: two segments (in 1/16 of a
 * segment), fewer where the class's queue is short against its flows, and
 * at most what the flow's share sends in WEIR_TCR_MARGIN_MS (lib/tcr.c). */
#define WEIR_TCR_MARGIN16 32u
#define WEIR_TCR_MARGIN_MS 40u
void weir_tcr_free(struct weir_tcr *t);

#endif /* WEIR_TCR_H */
