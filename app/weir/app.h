/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the appliance's process-wide state, owned by the management lcore.
 */
#ifndef WEIR_APP_H
#define WEIR_APP_H

#include <signal.h>
#include <jansson.h>
#include <rte_mempool.h>

#include "config.h"
#include "ports.h"
#include "share.h"
#include "policy_lua.h"
#include "worker.h"

struct weir_rest;
struct weir_compile_job;
struct weir_captures;
struct weir_ipfix;

struct weir_app {
	struct weir_config cfg;
	struct weir_ports ports;
	struct rte_mempool *mp;
	struct weir_worker *workers[WEIR_MAX_WORKERS];
	struct weir_flow_table *flows[WEIR_MAX_WORKERS];
	unsigned int n_workers;
	uint64_t start_tsc;
	/* Class rates divided among workers (NULL with one worker). */
	struct weir_share *share[WEIR_PORT__COUNT];
	struct weir_share_box *share_box[WEIR_MAX_WORKERS];
	uint64_t rebalances;            /* new rates posted to a worker (only when they moved) */
	uint64_t reloads;               /* policies switched to while running */
	uint64_t reload_failures;
	uint64_t switch_prepare_us;     /* last switch: ACL tries and trees built */
	uint64_t switch_take_us;        /* last switch: posted until every worker took it */
	char reload_error[512];         /* why the last reload failed ("" = it did not) */
	char token_error[1100];          /* why the last reload kept the old token ("" = it did not) */
	/* How long a switch waits for every worker to take it (0 = 5 s). A
	 * worker that takes longer takes it late: the new policy is in force
	 * anyway, and what the late worker still uses waits in `retire`. */
	uint32_t switch_wait_us;
	uint64_t switches_late;         /* switches some worker took after the wait */
	/* The previous policy and the posted switch array of a switch some
	 * worker had not taken when the wait ended: freed by
	 * weir_reload_retire() once every worker acknowledged `epoch`. At most
	 * one: no switch is posted while a worker holds one. */
	struct {
		struct weir_policy *policy;
		struct weir_policy_switch *sw;
		uint32_t epoch;
	} retire;
	volatile sig_atomic_t reload;   /* SIGHUP: re-read the policy */
	/* The Lua policy's live engine and its hooks (hooks.c); NULL without
	 * policy.script. */
	struct weir_lua *lua;
	struct rte_ring *ev_ring[WEIR_MAX_WORKERS];
	struct rte_ring *cmd_ring[WEIR_MAX_WORKERS];
	/* Run-time class changes, one ring per worker (subs_live.c). */
	struct rte_ring *class_ring[WEIR_MAX_WORKERS];
	uint64_t hook_errors;           /* hooks, recompiles and switches that failed */
	char hook_error[512];
	uint64_t hook_log_tsc;
	uint32_t hook_budget_us;        /* Lua time per management wake (0 = 5 ms, hooks.c) */
	unsigned int hook_next;         /* the worker whose events go first next wake */
	uint64_t hook_wakes_full;       /* wakes that left events for the next one */
	uint64_t hook_moves;            /* flows on_flow sent to another class */
	uint64_t hook_moves_dropped;    /* a worker's command ring was full */
	/* Subscriber changes refused because a table was full (the class tree,
	 * the set's subscribers or nodes): subs_apply.h. */
	uint64_t subs_full;
	struct weir_rest *rest;         /* the REST API's server (rest_http.c); NULL = none */
	/* A policy being compiled off the loop (compile_job.c); NULL = none. */
	struct weir_compile_job *compile_job;
	struct weir_captures *captures; /* packet captures (captures.c); NULL = none */
	struct weir_ipfix *ipfix;       /* IPFIX export (ipfix_export.c); NULL = none */
	volatile sig_atomic_t quit;
};

#endif /* WEIR_APP_H */
