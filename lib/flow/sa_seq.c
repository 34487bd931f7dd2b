/* SPDX-License-Identifier: BSD-3-Clause
 * weir: per-SA sequence tracking (lib/flow/sa_seq.h has the rule).
 */
#include <string.h>

#include <errno.h>

#include <rte_branch_prediction.h>
#include <rte_common.h>
#include <rte_malloc.h>

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

struct weir_sa_table *
weir_sa_table_create(uint32_t n_slots, uint32_t cap, int socket_id)
{
	struct weir_sa_table *t;

	if (cap == 0 || cap > UINT16_MAX)
		return NULL;
	t = rte_zmalloc_socket("weir_sa_table", sizeof(*t), RTE_CACHE_LINE_SIZE, socket_id);
	if (t == NULL)
		return NULL;
	t->idx = rte_zmalloc_socket("weir_sa_idx", (size_t)n_slots * sizeof(*t->idx), 0, socket_id);
	t->rec = rte_zmalloc_socket("weir_sa_rec", (size_t)cap * sizeof(*t->rec), RTE_CACHE_LINE_SIZE,
				    socket_id);
	t->free = rte_malloc_socket("weir_sa_free", (size_t)cap * sizeof(*t->free), 0, socket_id);
	if (t->idx == NULL || t->rec == NULL || t->free == NULL) {
		weir_sa_table_free(t);
		return NULL;
	}
	for (uint32_t i = 0; i < cap; i++)
		t->free[i] = (uint16_t)(cap - 1 - i);
	t->n_free = cap;
	t->cap = cap;
	t->n_slots = n_slots;
	return t;
}

void
weir_sa_table_free(struct weir_sa_table *t)
{
	if (t == NULL)
		return;
	rte_free(t->idx);
	rte_free(t->rec);
	rte_free(t->free);
	rte_free(t);
}

int
weir_sa_table_peek(const struct weir_sa_table *t, uint32_t slot, struct weir_sa_seq *out)
{
	uint16_t i;
	const uint64_t *src;
	uint64_t *dst = (uint64_t *)out;

	memset(out, 0, sizeof(*out));
	if (t == NULL || slot >= t->n_slots)
		return -ENOENT;
	i = __atomic_load_n(&t->idx[slot], __ATOMIC_ACQUIRE);
	if (i == 0 || i > t->cap)
		return -ENOENT;
	src = (const uint64_t *)&t->rec[i - 1];
	for (size_t k = 0; k < sizeof(*out) / sizeof(*dst); k++)
		dst[k] = __atomic_load_n(&src[k], __ATOMIC_RELAXED);
	return 0;
}
