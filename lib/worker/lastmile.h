/* SPDX-License-Identifier: BSD-3-Clause
 * weir: last miles (seed 002 ch. 3; docs/lastmile.md). A flow whose policy
 * target has a last mile (lib/classify/policy.h, struct weir_last_mile) has the
 * window its last-mile host advertises clamped to that link's pipe plus
 * its buffer; an exempt one is left out of weir's per-flow fairness. The
 * clamp itself is the worker's ACK control (lib/worker/worker_ack.c, lm_clamp):
 * it runs before any mode, on the ACK store's window cut.
 */
#ifndef WEIR_LASTMILE_H
#define WEIR_LASTMILE_H

#include <stdbool.h>
#include <stdint.h>
#include <rte_mbuf.h>

#include "flow.h"
#include "parse.h"
#include "policy.h"

/*
 * Fairness exemption, for every per-flow fairness scheme of the worker:
 * true when flow f (classified under the worker's policy) is to be left
 * alone. The worker already keeps exempt flows from ACK modes (no `ack`
 * hook call: no PostACK holding, TCR sizing or pacing, IP-ABR allocation
 * through the ACK), from enqueue/sent hooks (shaped as pfq) and from the
 * class's active-flow count. A scheme that allocates per flow by other
 * means (IP-ABR's allocation table) should skip these flows too.
 */
static inline bool
weir_lastmile_exempt(const struct weir_policy *p, const struct weir_flow *f)
{
	return f->class_id < p->n_targets && (p->targets[f->class_id].lm_flags & WEIR_LM_EXEMPT);
}

/* Bytes a full segment takes on the last hop beyond its MSS: IP and TCP
 * headers (40) and an allowance for link framing (Ethernet or PPP plus
 * preamble and gap, or a modem's) of 40. */
#define WEIR_LM_SEG_OVERHEAD 80
/* TCP options in a full segment (timestamps), which leave MSS - 12 of data. */
#define WEIR_LM_SEG_OPTIONS 12

/* The window limit in bytes for a receiver that announced MSS mss (0:
 * 1460): as many segments as the pipe holds, each taking mss + 80 bytes
 * of the last hop, plus the buffer's packets (at least one), each
 * carrying mss - 12 bytes of data. No more than the last hop can hold,
 * so a sender whose window reaches it never overflows the buffer; the
 * thesis' "slightly above" (Sec. 3.2.4) overflows it every round trip
 * once cwnd is at the clamp. */
static inline uint32_t
weir_lastmile_limit(const struct weir_policy_target *t, uint16_t mss)
{
	const uint32_t seg = mss > WEIR_LM_SEG_OPTIONS ? mss : 1460;
	const uint32_t segs = t->lm_pipe / (seg + WEIR_LM_SEG_OVERHEAD) + t->lm_buffer;

	return (segs ? segs : 1) * (seg - WEIR_LM_SEG_OPTIONS);
}

#endif /* WEIR_LASTMILE_H */
