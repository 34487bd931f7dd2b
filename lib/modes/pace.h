/* SPDX-License-Identifier: BSD-3-Clause
 * weir: ACK pacing clocks, one per flow and data direction, over the
 * pacing state (lib/modes/pace_state.h): one MSS at the flow's fair share of its
 * class a step. The modes that let held ACKs go on a clock use them: tcr
 * (every ACK), postack (a starving flow's), postack-paced. The per-class
 * figures are the worker's (w->cls_ctr[d][leaf]), never computed per
 * packet.
 */
#ifndef WEIR_PACE_H
#define WEIR_PACE_H

#include <stdint.h>

struct weir_mode_svc;
struct weir_flow;

/* One MSS of the flow's data direction d at its class's fair share on
 * this worker, TSC ticks. */
uint64_t weir_tcr_pace_gap(const struct weir_mode_svc *w, const struct weir_flow *f, int d,
			   uint32_t leaf);
/* Is the next paced ACK of (d, slot) due now? Advances its clock if so
 * (pace.c says how; `starving` is PostACK's held count, 0 for TCR). */
uint32_t weir_tcr_pace_due(struct weir_mode_svc *w, const struct weir_flow *f, int d, uint32_t slot,
			   uint32_t leaf, uint64_t now, uint32_t starving);
/* How many of the `held` ACKs of (d, slot) the TCR pacing clock owes at
 * `now` (a late look releases what it missed, up to WEIR_TCR_CATCHUP_US of
 * the share's time); advances the clock by that many gaps. */
#define WEIR_TCR_CATCHUP_US 4000
uint32_t weir_tcr_pace_owed(struct weir_mode_svc *w, const struct weir_flow *f, int d, uint32_t slot,
			    uint32_t leaf, uint64_t now, uint32_t held);

#endif /* WEIR_PACE_H */
