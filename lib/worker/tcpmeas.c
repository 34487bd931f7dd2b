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

	memset(out, 0, sizeof(*out));
	if (t == NULL || slot >= t->n_slots)
		return -ENOENT;
	src = (const volatile uint64_t *)&t->rec[slot];
	/* Whole 8-byte words, each as the worker left it (memcpy: the
	 * record's fields are 32-bit, and a uint64_t store into them would
	 * break the aliasing rule). */
	for (size_t i = 0; i < sizeof(*out) / 8; i++) {
		uint64_t v = src[i];

		memcpy((uint8_t *)out + 8 * i, &v, 8);
	}
	return out->d[0].owner == (uint32_t)owner && owner != 0 ? 0 : -ENOENT;
}
