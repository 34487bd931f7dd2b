/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the postack mode's rules that postack-paced applies too
 * (lib/modes/postack_mode.c): the window clamp, SACK news, the own-drop mark and
 * the sender's BDP. For the two modes' files only.
 */
#ifndef WEIR_POSTACK_MODE_H
#define WEIR_POSTACK_MODE_H

#include <stdbool.h>
#include <stdint.h>
#include <rte_mbuf.h>

#include "ackstore_int.h"
#include "mode_svc.h"

/* PostACK's window clamp with the share clamp off: ACK m cut to the hold
 * window. */
void weir_postack_mode_clamp(struct weir_mode_svc *w, const struct weir_flow *f, struct rte_mbuf *m,
			     const struct weir_pkt *p, int a, uint32_t slot, uint32_t leaf);
/* The tree dropped data frame m of direction d: remember the hole (the
 * own-drop mark) so the SACK that reports it is not taken for news. */
void weir_postack_mode_dropped(struct weir_mode_svc *w, const struct weir_flow *f, struct rte_mbuf *m,
			       int d);
/* Does ACK p (travelling a) bring SACK news of a loss beyond the gateway?
 * Then what the flow holds goes ahead of it and it passes (true). */
bool weir_postack_mode_sack_news(struct weir_mode_svc *w, const struct weir_flow *f,
				 const struct rte_mbuf *m, const struct weir_pkt *p, int a,
				 uint32_t slot, uint32_t held, bool noted);

/* The sender's BDP for flow f in data direction d: its share x the
 * sender's round trip (the handshake's; 0 when unknown), bytes. */
static inline uint64_t
weir_postack_mode_bdp(const struct weir_mode_svc *w, int d, uint32_t slot, uint32_t leaf)
{
	return (w->cls_ctr[d][leaf].share_bytes_per_tick * (uint64_t)w->pa->q[d][slot].rtt) >> 32;
}

#endif /* WEIR_POSTACK_MODE_H */
