/* SPDX-License-Identifier: BSD-3-Clause
 * weir: a worker takes run-time class changes (lib/worker/class_cmd.h).
 */
#include <errno.h>

#include <rte_cycles.h>

#include "class_cmd.h"
#include "worker_int.h"

struct rte_ring *
weir_class_cmd_ring(const char *name, unsigned int count, int socket_id)
{
	return rte_ring_create_elem(name, sizeof(struct weir_class_cmd), count, socket_id,
				    RING_F_SP_ENQ | RING_F_SC_DEQ);
}

int
weir_class_cmd_post(struct rte_ring *r, struct weir_class_cmd *c)
{
	c->req_tsc = rte_rdtsc();
	return rte_ring_sp_enqueue_elem(r, c, sizeof(*c)) == 0 ? 0 : -ENOBUFS;
}

static int
apply(struct weir_cbq *t, const struct weir_class_cmd *c)
{
	switch (c->op) {
	case WEIR_CLASS_SET:
		return weir_cbq_class_set(t, c->cls, &c->conf);
	case WEIR_CLASS_ADD:
		return weir_cbq_class_add(t, c->cls, &c->conf);
	case WEIR_CLASS_REMOVE:
		return weir_cbq_class_remove(t, c->cls);
	default:
		return -EINVAL;
	}
}

/* Up to 64 commands a call: a batch of thousands is spread over loop
 * iterations and traffic keeps moving between them. */
unsigned int
weir_worker_class_cmds(struct weir_worker *w)
{
	struct weir_class_cmd c[64];
	unsigned int n = rte_ring_sc_dequeue_burst_elem(w->conf.class_cmds, c, sizeof(c[0]),
							RTE_DIM(c), NULL);
	struct weir_class_cmd_stats *st = &w->class_cmd_st;

	for (unsigned int i = 0; i < n; i++) {
		struct weir_cbq *t = c[i].dir < WEIR_PORT__COUNT ? w->svc.shaper[c[i].dir] : NULL;
		int rc;

		if (t == NULL || c[i].epoch != w->svc.policy->epoch) {
			st->stale++;
			continue;
		}
		rc = apply(t, &c[i]);
		if (rc != 0) {
			st->failed++;
			st->last_err = rc;
			continue;
		}
		st->applied++;
		/* A blocked tree's next chance may come earlier now. */
		w->next_tsc[c[i].dir] = 0;
		st->lat_last = rte_rdtsc() - c[i].req_tsc;
		if (st->lat_last > st->lat_max)
			st->lat_max = st->lat_last;
	}
	return n;
}

void
weir_worker_class_cmd_stats(const struct weir_worker *w, struct weir_class_cmd_stats *out)
{
	*out = w->class_cmd_st;
}
