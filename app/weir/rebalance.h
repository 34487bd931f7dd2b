/* SPDX-License-Identifier: BSD-3-Clause
 * weir: class rates divided among workers by demand (docs/multiworker.md).
 */
#ifndef WEIR_REBALANCE_H
#define WEIR_REBALANCE_H

#include "app.h"

/* Allocate the shares and mailboxes (none with a single worker or no
 * shaping). Before the workers start; -1 when out of memory. */
int weir_rebalance_init(struct weir_app *a);
/* One round: sample, split, publish. Management lcore. */
void weir_rebalance(struct weir_app *a);
void weir_rebalance_free(struct weir_app *a);
/* The policy changed: start the shares over for its trees. */
void weir_rebalance_policy(struct weir_app *a);

#endif /* WEIR_REBALANCE_H */
