/* SPDX-License-Identifier: BSD-3-Clause
 * weir: a worker's DiffServ markers (lib/sched/marker.h): built per direction from
 * the policy in force, at creation and at each policy switch. Frames leave
 * a marker through the worker's out-array, counted forwarded there; a
 * capped TBQ's drops are counted dropped.
 */
#include <rte_cycles.h>

#include "mode.h"
#include "worker_int.h"

static void
send_lan(void *arg, struct rte_mbuf *m)
{
	struct weir_worker *w = arg;

	weir_worker_out(&w->svc, WEIR_PORT_WAN, m);         /* LAN's frames leave through the WAN */
}

static void
send_wan(void *arg, struct rte_mbuf *m)
{
	struct weir_worker *w = arg;

	weir_worker_out(&w->svc, WEIR_PORT_LAN, m);
}

static void
drop_lan(void *arg, struct rte_mbuf *m)
{
	struct weir_worker *w = arg;

	w->svc.ctr.port[WEIR_PORT_LAN].dropped++;
	rte_pktmbuf_free(m);
}

static void
drop_wan(void *arg, struct rte_mbuf *m)
{
	struct weir_worker *w = arg;

	w->svc.ctr.port[WEIR_PORT_WAN].dropped++;
	rte_pktmbuf_free(m);
}

int
weir_wk_markers_build(struct weir_worker *w, int socket_id)
{
	const uint64_t now = rte_rdtsc();

	w->mk_out[WEIR_PORT_LAN] = (struct weir_markers_out){ send_lan, drop_lan, w };
	w->mk_out[WEIR_PORT_WAN] = (struct weir_markers_out){ send_wan, drop_wan, w };
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		const struct weir_policy_tree *t = &w->svc.policy->tree[d];
		struct weir_cbq_stats st;
		int err;

		w->markers[d] = NULL;
		if (w->svc.shaper[d] == NULL || weir_cbq_stats(w->svc.shaper[d], 0, &st) != 0)
			continue;
		/* This worker's share: its tree's link rate over the policy's. */
		w->markers[d] = weir_markers_create(weir_policy_tree_markers(t), st.rate_bps, t->classes[0].cbq.rate,
						    w->svc.tsc_hz, now, socket_id, &err);
		if (err != 0)
			return err;
	}
	return 0;
}

void
weir_wk_markers_release(struct weir_worker *w)
{
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		weir_markers_free(w->markers[d], &w->mk_out[d]);
		w->markers[d] = NULL;
	}
}

unsigned int
weir_wk_markers_drop(struct weir_worker *w)
{
	unsigned int n = 0;

	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		uint32_t held = weir_markers_held(w->markers[d]);

		w->svc.ctr.port[d].dropped += held;
		n += held;
		weir_markers_free(w->markers[d], NULL);
		w->markers[d] = NULL;
	}
	return n;
}
