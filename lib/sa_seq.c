/* SPDX-License-Identifier: BSD-3-Clause
 * weir: per-SA sequence tracking (lib/sa_seq.h has the rule).
 */
#include <string.h>

#include <rte_branch_prediction.h>

#include "sa_seq.h"

static void
start(struct weir_sa_seq *s, uint32_t seq)
{
	s->top = seq;
	s->window = 1;
}

enum weir_sa_verdict
weir_sa_seq_track(struct weir_sa_seq *s, uint64_t owner, uint32_t seq)
{
	uint32_t ahead, behind;

	if (unlikely(s->owner != owner)) {
		/* The slot's first packet of this SA: nothing to compare with. */
		memset(s, 0, sizeof(*s));
		s->owner = owner;
		s->pkts = 1;
		if (seq == 0)
			s->zero++;
		start(s, seq);
		return WEIR_SA_IN_ORDER;
	}
	s->pkts++;
	if (unlikely(seq == 0)) {
		s->old_run = 0;
		s->zero++;
		s->resync++;
		start(s, seq);
		return WEIR_SA_RESYNC;
	}
	ahead = seq - s->top;           /* modulo 2^32 */
	if (likely(ahead == 1)) {
		s->old_run = 0;
		s->top = seq;
		s->window = s->window << 1 | 1;
		return WEIR_SA_IN_ORDER;
	}
	if (ahead != 0 && ahead <= WEIR_SA_JUMP_MAX) {
		s->old_run = 0;
		s->gaps += ahead - 1;
		s->top = seq;
		s->window = ahead >= 64 ? 1 : s->window << ahead | 1;
		return WEIR_SA_GAP;
	}
	behind = s->top - seq;
	if (behind < WEIR_SA_WINDOW) {
		uint64_t bit = 1ull << behind;

		s->old_run = 0;
		/* Below the expected number: never a loss (thesis Sec. 4.3.1). */
		if (s->window & bit) {
			s->dup++;
			return WEIR_SA_DUP;
		}
		s->window |= bit;
		s->late++;
		return WEIR_SA_LATE;
	}
	if (behind <= WEIR_SA_JUMP_MAX) {
		s->old++;
		if (++s->old_run < WEIR_SA_OLD_RUN)
			return WEIR_SA_OLD;
	}
	s->old_run = 0;
	s->resync++;
	start(s, seq);
	return WEIR_SA_RESYNC;
}
