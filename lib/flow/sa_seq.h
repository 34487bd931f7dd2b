/* SPDX-License-Identifier: BSD-3-Clause
 * weir: per-SA sequence tracking of IPsec flows (ESP/AH, seed 002 ch. 4).
 *
 * weir cannot read an SA's payload, but every ESP/AH packet carries the
 * SA's 32-bit sequence number in the clear, one higher per packet sent
 * (RFC 4303 3.3.3). A gap in what reaches weir is loss upstream of it
 * (between the sender and weir); a number that arrives after higher ones
 * is reordering. An SA is one flow, one direction; its record comes from
 * a small table of the worker that owns the flow (struct weir_sa_table):
 * SAs are few beside flows, so the table costs 2 bytes a flow slot plus
 * 64 a record, not 64 a slot.
 *
 * The rule per packet, against `top` (the highest number seen) and a
 * 64-number window of what arrived below it:
 *   seq == top + 1            in order
 *   top + 1 < seq <= top + J  a gap: seq - top - 1 numbers missing (`gaps`,
 *                             what SPEP's detector counts as lost)
 *   top - 64 < seq <= top     below the expected one: the thesis' rule
 *                             (Sec. 4.3.1) holds, it never counts as a
 *                             loss; a number not seen yet is `late` (it
 *                             was counted in a gap: lost = gaps - late),
 *                             one seen already a `dup` (a replay)
 *   top - J <= seq <= top-64  `old`: too late to tell, top stays; but
 *                             WEIR_SA_OLD_RUN of them in a row are a
 *                             jump back (resync at the last one)
 *   anything else             a jump (`resync`): far forward (more than J),
 *                             far back, or round the 32-bit wrap; the
 *                             sender restarted or its counter wrapped
 *                             (extended sequence numbers): start over
 *                             from it, counting no loss
 * Sequence number 0 is never sent (the counter starts at 1 and an SA is
 * re-keyed before it wraps): counted `zero`, then treated as a jump.
 */
#ifndef WEIR_SA_SEQ_H
#define WEIR_SA_SEQ_H

#include <stdint.h>
#include <string.h>

/* Forward jumps up to this many numbers are gaps; more is a resync (a
 * burst of 2^16 lost packets is a dead path, not a loss figure). */
#define WEIR_SA_JUMP_MAX 65536u
#define WEIR_SA_WINDOW 64u
#define WEIR_SA_OLD_RUN 4u

struct weir_sa_seq {
	uint64_t owner;         /* first_tsc of the flow this record is for */
	uint64_t window;        /* bit i: top - i arrived (bit 0: top itself) */
	uint64_t pkts;          /* packets tracked */
	uint64_t gaps;          /* numbers skipped when a higher one arrived */
	uint64_t late;          /* numbers below top that filled a gap (reordered) */
	uint32_t dup;           /* numbers seen twice within the window */
	uint32_t old_run;       /* consecutive `old` packets (a jump back) */
	uint32_t old;           /* numbers below the window: too late to tell */
	uint32_t resync;        /* jumps, wraps, restarts */
	uint32_t zero;          /* sequence number 0 */
	uint32_t top;           /* highest number seen */
};

/* What one packet was, for the caller's per-worker totals. */
enum weir_sa_verdict {
	WEIR_SA_IN_ORDER = 0,
	WEIR_SA_GAP,
	WEIR_SA_LATE,
	WEIR_SA_DUP,
	WEIR_SA_OLD,
	WEIR_SA_RESYNC,
};

/* Account sequence number seq of the SA whose flow began at `owner`
 * (a record of another flow is reset first). */
enum weir_sa_verdict weir_sa_seq_track(struct weir_sa_seq *s, uint64_t owner, uint32_t seq);

/* Losses upstream still unaccounted for: gaps minus the late arrivals
 * that filled them. */
static inline uint64_t
weir_sa_seq_lost(const struct weir_sa_seq *s)
{
	return s->gaps > s->late ? s->gaps - s->late : 0;
}

/* Records for the SAs among a worker's flows: an index per flow slot (0:
 * none) into `cap` records. A flow takes one on its first ESP/AH frame and
 * gives it back when it ends; with none free its sequence numbers are not
 * tracked (counted `untracked` by the caller). Owner lcore only; the
 * management side reads copies (weir_sa_table_peek, may be a packet
 * apart). */
#define WEIR_SA_TABLE_CAP 4096u

struct weir_sa_table {
	uint16_t *idx;                  /* [flow slot]: record + 1, or 0 */
	struct weir_sa_seq *rec;        /* [cap] */
	uint16_t *free;                 /* stack of free record numbers */
	uint32_t n_free, cap, n_slots;
};

struct weir_sa_table *weir_sa_table_create(uint32_t n_slots, uint32_t cap, int socket_id);
void weir_sa_table_free(struct weir_sa_table *t);

/* The record of slot's SA, taken now if it has none; NULL: none free. */
static inline struct weir_sa_seq *
weir_sa_table_get(struct weir_sa_table *t, uint32_t slot)
{
	uint16_t i = t->idx[slot];

	if (i == 0) {
		if (t->n_free == 0)
			return NULL;
		i = (uint16_t)(t->free[--t->n_free] + 1);
		memset(&t->rec[i - 1], 0, sizeof(t->rec[0]));
		__atomic_store_n(&t->idx[slot], i, __ATOMIC_RELEASE);
	}
	return &t->rec[i - 1];
}

/* Slot's flow ended: its record (if any) goes back. */
static inline void
weir_sa_table_put(struct weir_sa_table *t, uint32_t slot)
{
	uint16_t i = t->idx[slot];

	if (i == 0)
		return;
	__atomic_store_n(&t->idx[slot], 0, __ATOMIC_RELEASE);
	t->free[t->n_free++] = (uint16_t)(i - 1);
}

/* Management side: a copy of slot's record, if it has one (0 / -ENOENT). */
int weir_sa_table_peek(const struct weir_sa_table *t, uint32_t slot, struct weir_sa_seq *out);

#endif /* WEIR_SA_SEQ_H */
