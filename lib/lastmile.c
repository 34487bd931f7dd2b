/* SPDX-License-Identifier: BSD-3-Clause
 * weir: last miles' window clamp (lib/lastmile.h).
 */
#include "lastmile.h"
#include "mbuf_meta.h"
#include "postack.h"
#include "tcpwin.h"
#include "worker.h"
#include "worker_int.h"

bool
weir_lastmile_clamp(struct weir_worker *w, const struct weir_flow *f, struct rte_mbuf *m,
		    const struct weir_pkt *p, int a, uint32_t slot, const struct weir_policy_target *t)
{
	/* The host behind the last mile sends its ACKs towards the other port:
	 * from the LAN (travelling out) unless it is a WAN host. */
	const int host_a = (t->lm_flags & WEIR_LM_WAN) ? WEIR_DIR_IN : WEIR_DIR_OUT;

	const uint32_t limit = weir_lastmile_limit(t, f->mss[a]);

	if (a != host_a || w->pa == NULL || (p->tcp_flags & WEIR_TCP_RST))
		return false;
	if (p->tcp_flags & WEIR_TCP_SYN) {
		/* A SYN's window is never scaled (RFC 7323 2.2): cut it as it is,
		 * so even the sender's first flight fits the last hop. No mode
		 * cuts a SYN: this cut is final. */
		if (p->win <= limit)
			return false;
		weir_ack_set_win(m, p, (uint16_t)RTE_MIN(limit, (uint32_t)UINT16_MAX));
		w->ctr.port[a].lm_clamped++;
		return true;
	}
	if (!(p->tcp_flags & WEIR_TCP_ACK) || !weir_postack_cut_unnoted(w->pa, f, m, p, a, slot, limit))
		return false;
	/* Not final: the mode's own cut may go lower (never higher: it starts
	 * from the window on the frame). Every later reader of the ACK (the
	 * mode's cut and notes) sees the last mile's window; the worker counts
	 * it and notes its edge once the mode is done, if it is still the
	 * window the ACK leaves with (weir_wk_lm_settle). */
	weir_mbuf_meta(m)->pkt.win = weir_ack_win(m, p);
	weir_mbuf_meta(m)->pkt.lm_cut = 1;
	return true;
}
