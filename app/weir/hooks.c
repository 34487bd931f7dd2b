/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the Lua policy's hooks on the management lcore.
 *
 * Workers never run Lua. A worker with hooks to feed posts an event when it
 * classifies a new flow and when a flow leaves its table (lib/worker/worker.h:
 * struct weir_flow_event, one ring per worker, rate-limited there); this
 * file hands them to the script's on_flow / on_flow_end, and an on_flow
 * that names another class is sent back as a command (struct
 * weir_flow_cmd) the worker applies between bursts: the flow moves with
 * what it has queued, nothing else stops. Timers and on_stats run here
 * too; a hook that changes a class (weir.set_class) has the policy
 * recompiled and switched like a reload. A failing or runaway hook is
 * cut off by the engine, counted and logged; the policy in force stays.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_ring.h>

#include "hooks.h"
#include "ipfix_export.h"
#include "policy_lua.h"
#include "switchover.h"
#include "text.h"
#include "worker_view.h"

#define EV_RING 4096            /* events per worker waiting for the management lcore */
#define CMD_RING 1024
/* Time in hooks per management wake (every 10 ms): the rest of the wake is
 * REST's and the stats'. Counted in time, not events: one on_flow may use
 * its whole instruction budget. A call started is finished (the engine's
 * instruction budget bounds it); events not reached wait in their ring. */
#define HOOK_BUDGET_US 5000
#define EV_BURST 1              /* events taken at a time: the time is checked between calls */

static double
wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void
hook_failed(struct weir_app *a, const char *what, const char *err)
{
	a->hook_errors++;
	/* Cut on a character boundary: the message ends up in JSON. */
	weir_utf8_copy(a->hook_error, sizeof(a->hook_error), err);
	/* Logged at most once a second: a hook failing on every flow must not
	 * flood the log. */
	if (rte_rdtsc() - a->hook_log_tsc >= rte_get_tsc_hz()) {
		a->hook_log_tsc = rte_rdtsc();
		RTE_LOG(ERR, USER1, "policy %s failed (%" PRIu64 " so far): %s\n", what,
			a->hook_errors, a->hook_error);        /* the repaired text */
	}
}

/* Flow-end events serve the on_flow_end hook and the IPFIX export. */
static bool
want_end_events(const struct weir_app *a)
{
	return a->cfg.ipfix || (a->lua != NULL && weir_lua_has(a->lua, WEIR_LUA_FLOW_END));
}

static void
set_event_flags(struct weir_app *a)
{
	for (unsigned int i = 0; i < a->n_workers; i++)
		if (a->workers[i] != NULL)
			weir_worker_set_flow_events(a->workers[i],
				a->lua != NULL && weir_lua_has(a->lua, WEIR_LUA_FLOW),
				want_end_events(a));
}

int
weir_hooks_init(struct weir_app *a, char *err, size_t errlen)
{
	const struct weir_config *c = &a->cfg;
	struct weir_policy_lua_limits lim = weir_config_lua_limits(c);
	struct weir_policy *p;

	if (c->policy_script[0] == '\0' && !c->ipfix)
		return 0;
	if (c->policy_script[0] != '\0') {
		a->lua = weir_lua_open(c->policy_script, &lim, err, errlen);
		if (a->lua == NULL)
			return -1;
		/* The engine's own compile is the policy in force, so what its
		 * hooks change later is relative to exactly that. */
		p = weir_lua_compile(a->lua, 1, err, errlen);
		if (p == NULL)
			return -1;
		weir_policy_free(a->cfg.policy);
		a->cfg.policy = p;
	}
	for (unsigned int i = 0; i < c->n_workers; i++) {
		char name[RTE_RING_NAMESIZE];

		snprintf(name, sizeof(name), "weir_ev_%u", i);
		a->ev_ring[i] = rte_ring_create_elem(name, sizeof(struct weir_flow_event), EV_RING,
						     (int)rte_lcore_to_socket_id(c->worker_lcores[i]),
						     RING_F_SP_ENQ | RING_F_SC_DEQ);
		snprintf(name, sizeof(name), "weir_cmd_%u", i);
		a->cmd_ring[i] = rte_ring_create_elem(name, sizeof(struct weir_flow_cmd), CMD_RING,
						      (int)rte_lcore_to_socket_id(c->worker_lcores[i]),
						      RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (a->ev_ring[i] == NULL || a->cmd_ring[i] == NULL) {
			snprintf(err, errlen, "cannot create the policy hooks' rings: %s",
				 rte_strerror(rte_errno));
			return -1;
		}
	}
	return 0;
}

void
weir_hooks_worker_conf(struct weir_app *a, unsigned int i, struct weir_worker_conf *wc)
{
	if (a->ev_ring[i] == NULL)
		return;
	wc->events = a->ev_ring[i];
	wc->cmds = a->cmd_ring[i];
	wc->new_flow_events = a->lua != NULL && weir_lua_has(a->lua, WEIR_LUA_FLOW);
	wc->end_flow_events = want_end_events(a);
	wc->events_per_s = a->cfg.policy_events_per_s;
}

/* Recompile after a hook changed a class, and switch to it. */
static void
apply_if_dirty(struct weir_app *a)
{
	char err[512];
	struct weir_policy *p;
	int rc;

	if (!weir_lua_dirty(a->lua))
		return;
	p = weir_lua_compile_change(a->lua, 0, err, sizeof(err));
	if (p == NULL) {
		hook_failed(a, "change", err);
		return;
	}
	rc = weir_policy_apply(a, p, &a->cfg, err, sizeof(err));
	if (rc < 0) {
		/* Not in force: the change stays pending and is tried again at
		 * the next wake (a worker still holding a late switch is the
		 * usual cause; apply refuses that before building anything). */
		weir_policy_free(p);    /* never posted: still ours */
		hook_failed(a, "switch", err);
		return;
	}
	weir_lua_commit(a->lua);
	if (rc > 0)             /* in force; a worker takes it late */
		hook_failed(a, "switch", err);
	RTE_LOG(NOTICE, USER1, "policy %u in force (changed by a hook)\n", a->cfg.policy->epoch);
}

static void
flow_of_event(const struct weir_app *a, const struct weir_flow_event *ev, double tsc_hz,
	      struct weir_lua_flow *f)
{
	const struct weir_policy *p = a->cfg.policy;

	memset(f, 0, sizeof(*f));
	f->dir = ev->init_dir;
	f->proto = ev->proto;
	f->family = ev->family == 6 ? AF_INET6 : AF_INET;
	f->dscp = ev->dscp;
	f->vlan = ev->vlan;
	f->lan_port = ev->lan_port;
	f->wan_port = ev->wan_port;
	memcpy(f->lan, ev->lan, 16);
	memcpy(f->wan, ev->wan, 16);
	if (ev->epoch == p->epoch && ev->target < p->n_targets)
		for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
			uint32_t leaf = p->targets[ev->target].leaf[d];

			if (leaf != WEIR_CBQ_NONE)
				snprintf(f->cls[d], sizeof(f->cls[d]), "%s", p->tree[d].classes[leaf].name);
		}
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		f->bytes[d] = ev->bytes[d];
		f->packets[d] = ev->pkts[d];
	}
	f->duration = ev->last_tsc > ev->first_tsc ? (double)(ev->last_tsc - ev->first_tsc) / tsc_hz : 0;
}

static void
new_flow(struct weir_app *a, unsigned int wi, const struct weir_flow_event *ev, double hz)
{
	struct weir_lua_flow f;
	char cls[WEIR_POLICY_NAME_LEN], err[512];
	int rc, t;

	flow_of_event(a, ev, hz, &f);
	rc = weir_lua_on_flow(a->lua, &f, cls, sizeof(cls), err, sizeof(err));
	if (rc < 0) {
		hook_failed(a, "on_flow", err);
		return;
	}
	if (rc == 0 || ev->epoch != a->cfg.policy->epoch)
		return;
	t = weir_policy_target_find(a->cfg.policy, cls);
	if (t < 0) {
		char msg[512];

		snprintf(msg, sizeof(msg), "%.300s: on_flow returned '%.64s', which is no leaf class",
			 a->cfg.policy_script, cls);
		hook_failed(a, "on_flow", msg);
		return;
	}
	if (t == ev->target)
		return;
	{
		const struct weir_flow_cmd c = {
			.slot = ev->slot, .target = (uint16_t)t, .epoch = ev->epoch,
			.first_tsc = ev->first_tsc,
		};

		if (rte_ring_sp_enqueue_elem(a->cmd_ring[wi], (void *)(uintptr_t)&c, sizeof(c)) == 0)
			a->hook_moves++;
		else
			a->hook_moves_dropped++;
	}
}

static void
flow_event(struct weir_app *a, unsigned int wi, const struct weir_flow_event *ev, double hz)
{
	char err[512];

	if (ev->type == WEIR_FEV_NEW) {
		if (a->lua != NULL)
			new_flow(a, wi, ev, hz);
	} else {
		struct weir_lua_flow f;

		weir_ipfix_flow_end(a, wi, ev);
		if (a->lua == NULL || !weir_lua_has(a->lua, WEIR_LUA_FLOW_END))
			return;

		flow_of_event(a, ev, hz, &f);
		if (weir_lua_on_flow_end(a->lua, &f, err, sizeof(err)) < 0)
			hook_failed(a, "on_flow_end", err);
	}
}

void
weir_hooks_poll(struct weir_app *a)
{
	const double hz = (double)rte_get_tsc_hz();
	const uint64_t t0 = rte_rdtsc();
	const uint64_t budget = (uint64_t)(a->hook_budget_us != 0 ? a->hook_budget_us :
					   HOOK_BUDGET_US) * rte_get_tsc_hz() / 1000000;
	unsigned int got;
	char err[512];

	if (a->lua == NULL && a->ev_ring[0] == NULL)
		return;
	/* Timers first: they are due at a time; events can wait. They share
	 * the wake's budget: a policy with many short timers would otherwise
	 * keep the management lcore in Lua for whole seconds. Timers left
	 * when it is spent run at the next wake, and the wake counts as over
	 * budget like one that left events waiting. */
	if (a->lua != NULL && wall_now() >= weir_lua_next_timer(a->lua)) {
		bool more = false;

		if (weir_lua_run_timers_for(a->lua, wall_now(), (double)budget / hz, &more, err,
					    sizeof(err)) < 0)
			hook_failed(a, "timer", err);
		if (more) {
			a->hook_wakes_full++;
			goto done;
		}
	}
	/* One event from each worker in turn, starting where the last wake
	 * stopped, until the rings are empty or the time is used up: one
	 * worker's flood of new flows cannot starve the others' hooks. A wake
	 * thus lasts the timers, the budget, at most one call more (bounded
	 * by the instruction budget) and a switch if a hook changed a class. */
	do {
		got = 0;
		for (unsigned int k = 0; k < a->n_workers; k++) {
			unsigned int i = (a->hook_next + k) % a->n_workers;
			struct weir_flow_event ev[EV_BURST];
			unsigned int n;

			if (rte_rdtsc() - t0 >= budget) {
				a->hook_next = i;
				for (unsigned int j = 0; j < a->n_workers; j++)
					if (a->ev_ring[j] != NULL && !rte_ring_empty(a->ev_ring[j])) {
						a->hook_wakes_full++;
						break;
					}
				goto done;
			}
			if (a->ev_ring[i] == NULL)
				continue;
			n = rte_ring_sc_dequeue_burst_elem(a->ev_ring[i], ev, sizeof(ev[0]),
							   RTE_DIM(ev), NULL);
			for (unsigned int e = 0; e < n; e++)
				flow_event(a, i, &ev[e], hz);
			got += n;
		}
	} while (got > 0);
done:
	if (a->lua != NULL)
		apply_if_dirty(a);
}

/* ---- on_stats ---- */

struct host_acc {
	struct weir_lua_host_stats *h;
	size_t n, cap;
};

static int
host_cmp(const void *x, const void *y)
{
	const struct weir_lua_host_stats *a = x, *b = y;

	return a->family != b->family ? (int)a->family - (int)b->family : memcmp(a->addr, b->addr, 16);
}

/* One row per live classified flow (its LAN host's address); merged
 * after sorting. f and key are copies (weir_flow_read_next: a flow whose
 * slot changed hands during the read is skipped, never torn). */
static int
host_of_flow(const struct weir_flow *f, const struct weir_flow_key *key, struct host_acc *acc)
{
	const int hi = !!(f->shape & WEIR_FSH_LAN_HI);
	struct weir_lua_host_stats *h;

	if (f->policy_epoch == 0)
		return 0;
	if (acc->n == acc->cap) {
		size_t cap = acc->cap ? acc->cap * 2 : 1024;
		void *p = realloc(acc->h, cap * sizeof(*acc->h));

		if (p == NULL)
			return -1;
		acc->h = p;
		acc->cap = cap;
	}
	h = &acc->h[acc->n++];
	h->family = key->family == 6 ? AF_INET6 : AF_INET;
	memcpy(h->addr, hi ? key->addr_hi : key->addr_lo, 16);
	h->bytes_out = f->bytes[WEIR_DIR_OUT];
	h->bytes_in = f->bytes[WEIR_DIR_IN];
	return 0;
}

void
weir_hooks_stats(struct weir_app *a)
{
	const struct weir_policy *p = a->cfg.policy;
	struct weir_lua_class_stats *cls[WEIR_POLICY_DIRS] = { NULL, NULL };
	struct weir_lua_stats s = { .now = wall_now() };
	struct host_acc acc = { 0 };
	char err[512];

	if (a->lua == NULL || !weir_lua_has(a->lua, WEIR_LUA_STATS) || p == NULL)
		return;
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		uint16_t n = p->tree[d].n_classes;

		if (n == 0)
			continue;
		cls[d] = calloc(n, sizeof(*cls[d]));
		if (cls[d] == NULL)
			goto out;
		for (uint16_t c = 0; c < n; c++) {
			snprintf(cls[d][c].name, sizeof(cls[d][c].name), "%s", p->tree[d].classes[c].name);
			for (unsigned int i = 0; i < a->n_workers; i++) {
				struct weir_class_view v;

				/* A worker still on the previous policy: left out. */
				if (weir_worker_class_view(a->workers[i], p, d, c, &v) != 0)
					continue;
				cls[d][c].bytes += v.cbq.bytes;
				cls[d][c].pkts += v.cbq.pkts;
				cls[d][c].drops += v.cbq.drops;
				cls[d][c].rate_bps += v.cbq.rate_bps;
			}
		}
		s.classes[d] = cls[d];
		s.n_classes[d] = n;
	}
	for (unsigned int i = 0; i < a->n_workers; i++) {
		const uint32_t cap = weir_flow_table_capacity(a->flows[i]);
		struct weir_flow f;
		struct weir_flow_key k;

		for (uint32_t s = 0; (s = weir_flow_read_next(a->flows[i], s, &f, &k)) < cap; s++)
			if (host_of_flow(&f, &k, &acc) != 0)
				goto out;
	}
	if (acc.n > 0) {
		size_t m = 0;

		qsort(acc.h, acc.n, sizeof(*acc.h), host_cmp);
		for (size_t k = 1; k < acc.n; k++) {
			if (host_cmp(&acc.h[m], &acc.h[k]) == 0) {
				acc.h[m].bytes_out += acc.h[k].bytes_out;
				acc.h[m].bytes_in += acc.h[k].bytes_in;
			} else {
				acc.h[++m] = acc.h[k];
			}
		}
		s.hosts = acc.h;
		s.n_hosts = (unsigned int)(m + 1);
	}
	if (weir_lua_on_stats(a->lua, &s, err, sizeof(err)) < 0)
		hook_failed(a, "on_stats", err);
	apply_if_dirty(a);
out:
	free(acc.h);
	free(cls[0]);
	free(cls[1]);
}

void
weir_hooks_replace(struct weir_app *a, struct weir_lua *l)
{
	weir_lua_close(a->lua);
	a->lua = l;
	set_event_flags(a);
}

void
weir_hooks_free(struct weir_app *a)
{
	weir_lua_close(a->lua);
	a->lua = NULL;
	for (unsigned int i = 0; i < WEIR_MAX_WORKERS; i++) {
		rte_ring_free(a->ev_ring[i]);
		rte_ring_free(a->cmd_ring[i]);
		a->ev_ring[i] = a->cmd_ring[i] = NULL;
	}
}
