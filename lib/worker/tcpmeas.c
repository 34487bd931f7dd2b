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
	t->hot = rte_zmalloc_socket("weir_tcpm_hot", (size_t)n_slots * sizeof(*t->hot),
				    RTE_CACHE_LINE_SIZE, socket_id);
	t->cold = rte_zmalloc_socket("weir_tcpm_cold", (size_t)n_slots * sizeof(*t->cold),
				     RTE_CACHE_LINE_SIZE, socket_id);
	if (t->hot == NULL || t->cold == NULL) {
		weir_tcpm_table_free(t);
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
	rte_free(t->hot);
	rte_free(t->cold);
	rte_free(t);
}

/* Whole 8-byte words of a line, each as the worker left it (memcpy: the
 * record's fields are narrower, and a uint64_t store into them would break
 * the aliasing rule). */
static void
copy_line(void *dst, const void *src, size_t len)
{
	const volatile uint64_t *s = src;

	for (size_t i = 0; i < len / 8; i++) {
		uint64_t v = s[i];

		memcpy((uint8_t *)dst + 8 * i, &v, 8);
	}
}

void
weir_tcpm_read(const struct weir_tcpm_table *t, uint32_t slot, struct weir_tcpm *out)
{
	struct weir_tcpm_hot h;
	struct weir_tcpm_cold c;

	copy_line(&h, &t->hot[slot], sizeof(h));
	copy_line(&c, &t->cold[slot], sizeof(c));
	memset(out, 0, sizeof(*out));
	out->owner = h.owner;
	for (int d = 0; d < 2; d++) {
		struct weir_tcpm_dir *o = &out->d[d];

		o->nxt = h.d[d].nxt;
		o->ack = h.d[d].ack;
		o->probe = h.d[d].probe;
		o->probe_at = h.d[d].probe_at;
		o->tsval = h.d[d].tsval;
		o->rtt_at = h.d[d].rtt_at;
		o->win = h.d[d].win;
		o->flags = h.d[d].flags;
		o->retrans_bytes = c.d[d].retrans_bytes;
		o->retrans_segs = c.d[d].retrans_segs;
		o->ooo = c.d[d].ooo;
		o->dupacks = c.d[d].dupacks + h.dup16[d];
		o->samples = c.d[d].samples;
		o->rtt_last = c.d[d].rtt_last;
		o->rtt_min = c.d[d].rtt_min;
		o->srtt8 = c.d[d].srtt8;
	}
}

int
weir_tcpm_peek(const struct weir_tcpm_table *t, uint32_t slot, uint64_t owner,
	       struct weir_tcpm *out)
{
	memset(out, 0, sizeof(*out));
	if (t == NULL || slot >= t->n_slots)
		return -ENOENT;
	weir_tcpm_read(t, slot, out);
	return out->owner == (uint32_t)owner && owner != 0 ? 0 : -ENOENT;
}
