/* SPDX-License-Identifier: BSD-3-Clause
 * weir: pep's timers, the end of a flow's state, the worker's stop and shutdown. See pep_int.h.
 */
#include <inttypes.h>
#include <string.h>

#include <netinet/in.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ip.h>
#include <rte_log.h>
#include <rte_tcp.h>

#include "mbuf_meta.h"
#include "pep_int.h"

void
weir_pep_end(struct weir_mode_svc *w, struct weir_flow *f, uint32_t slot)
{
	struct pep *st = pep_of(w);

	if (st == NULL)
		return;
	for (int d = 0; d < 2; d++) {
		struct pep_flow *pf = flow_get(st, d, slot);

		if (pf == NULL)
			continue;
		if (pf->packed_bytes > 0)
			pep_give_up(w, st, f, pf, &st->st.give_ups);  /* S was told of data R never acked */
		pep_flow_drop(st, f, pf, &st->st.ended_copies);
	}
	f->shape &= (uint8_t)~WEIR_FSH_PEP;
}

/* Copies whose p-acked originals the class dropped, straight to R as
 * every recovery is (sent counts as the original's departure), at most
 * `budget`; a flow with more stays listed. */
static unsigned int
resend_lost(struct weir_mode_svc *w, struct pep *st, uint64_t now, unsigned int budget)
{
	unsigned int sent = 0;

	while (st->n_lost > 0 && sent < budget) {
		struct pep_flow *pf = &st->fl[st->lost[st->n_lost - 1]];
		bool more = false;

		for (uint32_t ri = pf->head; ri != NONE; ri = st->rec[ri].next) {
			struct pep_rec *r = &st->rec[ri];

			if (!(r->fl & R_LOST))
				continue;
			if (sent == budget) {
				more = true;
				break;
			}
			r->fl = (uint8_t)((r->fl & ~R_LOST) | R_SENT);
			if (pep_retransmit(w, st, pf, r, now)) {
				st->st.lost_resent++;
				sent++;
			}
		}
		if (more)
			break;
		pf->flags &= (uint16_t)~F_LOST;
		st->n_lost--;
	}
	return sent;
}

unsigned int
weir_pep_poll(struct weir_mode_svc *w, uint64_t now, uint64_t *wake)
{
	struct pep *st = pep_of(w);
	unsigned int sent = 0;

	if (st == NULL || st->n_active == 0)
		return 0;
	if (unlikely(st->n_lost > 0))
		sent += resend_lost(w, st, now, POLL_BUDGET);
	for (unsigned int k = 0; k < POLL_BUDGET && st->n_active > 0; k++) {
		struct pep_flow *pf;
		struct weir_flow *f;

		if (st->rr >= st->n_active)
			st->rr = 0;
		pf = &st->fl[st->active[st->rr++]];
		f = weir_flow_by_slot(w->flows, pf->slot);
		if (pf->n == 0 && (f->state == WEIR_FS_CLOSED || (pf->flags & F_DRAIN))) {
			pep_flow_drop(st, f, pf, &st->st.ended_copies);
			continue;
		}
		if (pf->rto_at == 0 || now < pf->rto_at)
			continue;
		/* Give up only on a receiver that is silent: nothing from R
		 * since the first of these timeouts. One that still sends
		 * (duplicates: its path is congested, the copies are being
		 * lost again) is retried at the longest timeout for as long
		 * as it answers: a receiver still talking is not gone. */
		if (pf->retries >= WEIR_PEP_RETRIES && pf->heard < pf->first_to) {
			if (pf->packed_bytes > 0) {
				pep_give_up(w, st, f, pf, &st->st.give_ups);
				sent += 2;
			} else {
				/* Only stored copies: S still owns that data. */
				pf->flags |= F_DRAIN;
				pep_chain_free(st, pf, &st->st.ended_copies);
			}
			continue;
		}
		if (pf->retries == 0)
			pf->first_to = now;
		if (pf->retries >= WEIR_PEP_RETRIES) {
			/* R answered meanwhile: it must now stay silent for three
			 * more (longest) timeouts before the flow is given up. */
			pf->first_to = now;
			pf->retries = WEIR_PEP_RETRIES - 3;
		}
		pf->retries++;
		pf->flags |= F_RECOVERY;
		pf->bw.lossy = 1;
		pf->recover = pf->next_seq;
		for (uint32_t ri = pf->head; ri != NONE; ri = st->rec[ri].next) {
			if (st->rec[ri].m != NULL) {
				if (pep_retransmit(w, st, pf, &st->rec[ri], now)) {
					st->st.rto_retx++;
					sent++;
				}
				break;
			}
		}
		pf->rto_at = now + RTE_MIN(rto_of(st, pf) << pf->retries, st->rto_max);
	}
	if (st->n_active > 0)
		*wake = RTE_MIN(*wake, now + w->tsc_hz / 1000);
	return sent;
}

void
weir_pep_drain_begin(struct weir_mode_svc *w)
{
	struct pep *st = pep_of(w);

	for (uint16_t k = 0; st != NULL && k < st->n_active; k++)
		st->fl[st->active[k]].flags |= F_DRAIN;
}

bool
weir_pep_owed(const struct weir_mode_svc *w)
{
	const struct pep *st = pep_of(w);

	for (uint16_t k = 0; st != NULL && k < st->n_active; k++)
		if (owed(&st->fl[st->active[k]]))
			return true;
	return false;
}

unsigned int
weir_pep_give_up_all(struct weir_mode_svc *w)
{
	struct pep *st = pep_of(w);
	unsigned int n = 0;

	for (uint16_t k = 0; st != NULL && k < st->n_active; k++) {
		struct pep_flow *pf = &st->fl[st->active[k]];

		if (!owed(pf))
			continue;
		pep_give_up(w, st, weir_flow_by_slot(w->flows, pf->slot), pf, &st->st.drain_resets);
		n++;
	}
	return n;
}

unsigned int
weir_pep_flush(struct weir_mode_svc *w)
{
	struct pep *st = pep_of(w);
	uint64_t before;

	if (st == NULL)
		return 0;
	before = st->st.flushed;
	while (st->n_active > 0) {
		struct pep_flow *pf = &st->fl[st->active[0]];

		/* Only when the worker never ran its stop drain (tests, a
		 * failed start): the loop delivers or resets first. */
		if (owed(pf)) {
			st->st.flushed_owed++;
			RTE_LOG(WARNING, USER1, "pep: a flow's p-acked data dropped at shutdown "
				"without a reset (port %u -> %u, %u bytes)\n", pf->t.s_port,
				pf->t.r_port, pf->packed_bytes);
		}
		pep_flow_drop(st, w->flows != NULL ? weir_flow_by_slot(w->flows, pf->slot) : NULL, pf,
			  &st->st.flushed);
	}
	return (unsigned int)(st->st.flushed - before);
}
