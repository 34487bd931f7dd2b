/* SPDX-License-Identifier: BSD-3-Clause
 * weir: gathering the workers' TCP measurement (measure.h).
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>

#include "measure.h"

static int
grow(struct weir_meas *m, size_t *cap)
{
	size_t nc = *cap ? *cap * 2 : 1024;
	struct weir_meas_flow *nf = realloc(m->f, nc * sizeof(*nf));

	if (nf == NULL)
		return -ENOMEM;
	m->f = nf;
	*cap = nc;
	return 0;
}

/* Leaf class -> subscriber index of tree d (WEIR_SUB_NONE for other
 * classes), from the policy's one mapping (sub_target); NULL without
 * subscribers or memory (then no flow has one). */
static uint32_t *
leaf_subs(const struct weir_policy *p, int d)
{
	uint32_t *map, n;

	if (p == NULL || p->subs == NULL || p->sub_target == NULL || p->tree[d].n_classes == 0)
		return NULL;
	map = malloc(p->tree[d].n_classes * sizeof(*map));
	if (map == NULL)
		return NULL;
	for (uint32_t k = 0; k < p->tree[d].n_classes; k++)
		map[k] = WEIR_SUB_NONE;
	n = weir_subs_count(p->subs);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t leaf = p->targets[p->sub_target[i]].leaf[d];

		if (leaf < p->tree[d].n_classes)
			map[leaf] = i;
	}
	return map;
}

static uint32_t
flow_sub(uint32_t *const map[2], const int leaf[2])
{
	for (int d = 0; d < 2; d++)
		if (map[d] != NULL && leaf[d] >= 0 && map[d][leaf[d]] != WEIR_SUB_NONE)
			return map[d][leaf[d]];
	return WEIR_SUB_NONE;
}

int
weir_meas_collect(const struct weir_app *a, struct weir_meas *m)
{
	const uint64_t hz = rte_get_tsc_hz(), now = rte_rdtsc();
	double win_s = a->cfg.stats_interval > 1.0 ? a->cfg.stats_interval : 1.0;
	size_t cap = 0;
	uint32_t *map[2] = { leaf_subs(a->cfg.policy, 0), leaf_subs(a->cfg.policy, 1) };
	int rc = 0;

	memset(m, 0, sizeof(*m));
	m->window_us = (uint64_t)(win_s * 1e6);
	for (unsigned int i = 0; i < a->n_workers; i++) {
		const uint32_t n_slots = weir_flow_table_capacity(a->flows[i]);
		struct weir_flow f;
		struct weir_flow_key k;

		for (uint32_t slot = 0; slot < n_slots; slot++) {
			struct weir_meas_flow *mf;
			struct weir_tcp_view t;

			slot = weir_flow_read_next(a->flows[i], slot, &f, &k);
			if (slot >= n_slots)
				break;
			if (k.proto != IPPROTO_TCP || weir_worker_tcp_view(a->workers[i], slot, &f, &t) != 0)
				continue;
			if (m->n == cap && grow(m, &cap) != 0) {
				weir_meas_free(m);
				rc = -ENOMEM;
				goto out;
			}
			mf = &m->f[m->n++];
			mf->worker = i;
			mf->slot = slot;
			mf->key = k;
			mf->lan_hi = (f.shape & WEIR_FSH_LAN_HI) != 0;
			mf->active = now > f.last_tsc ? (double)(now - f.last_tsc) / (double)hz <= win_s : true;
			mf->bytes[0] = f.bytes[0];
			mf->bytes[1] = f.bytes[1];
			mf->t = t;
			for (int d = 0; d < 2; d++) {
				struct weir_flow_view v;

				weir_worker_flow_view(a->workers[i], a->cfg.policy, slot, &f, d, &v);
				mf->leaf[d] = v.leaf;
			}
			mf->sub = flow_sub(map, mf->leaf);
		}
	}
out:
	free(map[0]);
	free(map[1]);
	return rc;
}

void
weir_meas_free(struct weir_meas *m)
{
	free(m->f);
	m->f = NULL;
	m->n = 0;
}

static int
cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return a < b ? -1 : a > b;
}

void
weir_meas_summarise(uint32_t *v, size_t n, struct weir_meas_summary *out)
{
	memset(out, 0, sizeof(*out));
	out->n = (uint32_t)n;
	if (n == 0)
		return;
	qsort(v, n, sizeof(*v), cmp_u32);
	out->min_us = v[0];
	out->median_us = v[(n - 1) / 2];
	/* Nearest rank: the smallest value with 95 % of them at or below it. */
	out->p95_us = v[(n * 95 + 99) / 100 - 1];
}
