/* SPDX-License-Identifier: BSD-3-Clause
 * weir: last miles' window clamp (lib/lastmile.h).
 */
#include "lastmile.h"
#include "postack.h"
#include "worker.h"

bool
weir_lastmile_clamp(struct weir_worker *w, const struct weir_flow *f, struct rte_mbuf *m,
		    const struct weir_pkt *p, int a, uint32_t slot, const struct weir_policy_target *t)
{
	/* The host behind the last mile sends its ACKs towards the other port:
	 * from the LAN (travelling out) unless it is a WAN host. */
	const int host_a = (t->lm_flags & WEIR_LM_WAN) ? WEIR_DIR_IN : WEIR_DIR_OUT;

	if (a != host_a || w->pa == NULL || !(p->tcp_flags & WEIR_TCP_ACK) ||
	    (p->tcp_flags & (WEIR_TCP_SYN | WEIR_TCP_RST)))
		return false;
	if (!weir_postack_cut_window(w->pa, f, m, p, a, slot, weir_lastmile_limit(t, f->mss[a])))
		return false;
	w->ctr.port[a].lm_clamped++;
	return true;
}
