/* SPDX-License-Identifier: BSD-3-Clause
 * weir: put a changed subscriber set in force — the one function every path
 * that changes subscribers calls (REST PATCH/PUT/DELETE/batch, the files'
 * re-read and upload, Lua).
 *
 * A caller builds the next set beside the one in force (weir_subs_copy,
 * then its additions and replacements), checks it (every problem reported,
 * nothing applied), diffs it against the set in force and hands it here.
 */
#ifndef WEIR_SUBS_APPLY_H
#define WEIR_SUBS_APPLY_H

#include <stddef.h>

#include "subscriber.h"

struct weir_app;

/* subs_apply's refusals (negative): nothing changed either way. */
#define WEIR_SUBS_REFUSED  (-1)         /* the policy refused the set (err says why) */
#define WEIR_SUBS_FULL     (-2)         /* a table is full (the class tree): counted */

/* subs_apply's success when no switch was needed: plans changed in place. */
#define WEIR_SUBS_IN_PLACE 1

/*
 * Put checked set `next` in force (takes ownership of it; d: its diff
 * against the set in force, NULL: made here). WEIR_SUBS_IN_PLACE: plans
 * changed in place on every worker, no switch (counters and queues kept);
 * 0: in force on every worker through a policy switch (or nothing changed:
 * nothing switched). <0: nothing changed, err says why; a full table is
 * WEIR_SUBS_FULL and counted in a->subs_full.
 */
int subs_apply(struct weir_app *a, struct weir_subs *next, const struct weir_sub_diff *d,
	       char *err, size_t errlen);

/* Did diff d change anything? */
static inline bool
subs_diff_any(const struct weir_sub_diff *d)
{
	return d->n[0] + d->n[1] + d->n[2] + d->n[3] != 0 || d->nodes_changed;
}

#endif /* WEIR_SUBS_APPLY_H */
