/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the per-slot records of passive TCP measurement (tcpmeas.h).
 */
#include <errno.h>

#include <rte_malloc.h>

#include "tcpmeas.h"

struct weir_tcpm_table *
weir_tcpm_table_create(uint32_t n_slots, int socket_id)
{
	struct weir_tcpm_table *t;

	t = rte_zmalloc_socket("weir_tcpm", sizeof(*t), RTE_CACHE_LINE_SIZE, socket_id);
	if (t == NULL)
		return NULL;
	t->rec = rte_zmalloc_socket("weir_tcpm_rec", (size_t)n_slots * sizeof(*t->rec),
				    RTE_CACHE_LINE_SIZE, socket_id);
	if (t->rec == NULL) {
		rte_free(t);
		return NULL;
	}
	t->n_slots = n_slots;
	return t;
}

void
weir_tcpm_table_free(struct weir_tcpm_table *t)
{
	if (t == NULL)
		return;
	rte_free(t->rec);
	rte_free(t);
}

int
weir_tcpm_peek(const struct weir_tcpm_table *t, uint32_t slot, uint64_t owner,
	       struct weir_tcpm *out)
{
	const volatile uint64_t *src;
	uint64_t *dst = (uint64_t *)out;

	memset(out, 0, sizeof(*out));
	if (t == NULL || slot >= t->n_slots)
		return -ENOENT;
	src = (const volatile uint64_t *)&t->rec[slot];
	/* Whole 8-byte words, each as the worker left it. */
	for (size_t i = 0; i < sizeof(*out) / 8; i++)
		dst[i] = src[i];
	return out->owner == owner && owner != 0 ? 0 : -ENOENT;
}
