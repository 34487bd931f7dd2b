/* SPDX-License-Identifier: BSD-3-Clause
 * weir: what the files of the Lua policy front end share (policy_lua.c,
 * policy_lua_sandbox.c, policy_lua_decl.c, policy_lua_compile.c,
 * policy_lua_hooks.c): the state of one script and the functions one file
 * calls in another. Private: policy_lua.h is the interface.
 */
#ifndef WEIR_POLICY_LUA_INT_H
#define WEIR_POLICY_LUA_INT_H


#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "cbq.h"
#include "lua_errtext.h"
#include "policy_limits.h"
#include "policy_lua.h"
#include "policy_values.h"
#include "subscriber.h"

#define MSG_LEN 512
/* Instructions between two budget checks: small enough to stop close to
 * the budget, large enough that the hook costs nothing measurable. */
#define HOOK_COUNT 1000

static const char *const dir_name[WEIR_POLICY_DIRS] = { "outbound", "inbound" };

/* Where a class came from: its weir.class line, and the line of the last
 * weir.set_class that changed it since the last compile (0: none), which a
 * compile error is then about. */
struct class_line {
	int decl;
	int set;
	uint64_t undo_call;             /* the hook call that logged it (undo_gen) */
};

/* A class as it was before a set_class of the running hook call. */
struct undo {
	int dir;
	unsigned int index;
	struct weir_policy_class_conf conf;
	int set;
};

struct timer {
	int ref;                        /* the function, in the registry */
	int line;                       /* of weir.every / weir.at */
	double period;                  /* weir.every: seconds; weir.at: 0 */
	int minute;                     /* weir.at: minute of the local day */
	double due;
};

/* What the script declared, its hooks, and the sandbox's accounting. */
struct weir_lua {
	char *path;
	lua_State *L;
	/* per direction: the link (tree conf) and its classes */
	struct weir_policy_tree_conf tree[WEIR_POLICY_DIRS];
	int link_line[WEIR_POLICY_DIRS];                /* 0: no weir.link for it */
	struct weir_policy_class_conf *classes[WEIR_POLICY_DIRS];
	struct class_line *class_line[WEIR_POLICY_DIRS];
	/* the classes as last compiled (or as the top level left them) */
	struct weir_policy_class_conf *good[WEIR_POLICY_DIRS];
	int last_set_line;              /* of any set_class since the last compile */
	bool dirty;
	unsigned int n_classes[WEIR_POLICY_DIRS];
	unsigned int cap_classes[WEIR_POLICY_DIRS];
	struct weir_policy_rule_conf *rules;
	int *rule_line;
	unsigned int n_rules;
	unsigned int cap_rules;
	unsigned int max_rules;         /* policy_limits.h */
	/* The first declaration or budget error. Sticky: a script that
	 * pcall()s a bad declaration must not get a policy without it. */
	bool failed;
	char err[MSG_LEN];
	/* sandbox */
	size_t mem_used;
	size_t mem_limit;
	uint64_t insns;                 /* executed so far, in HOOK_COUNT steps */
	uint64_t insn_limit;
	double time_limit;              /* seconds per run or hook call */
	double deadline;                /* CLOCK_MONOTONIC, of the running one */
	int hook_step;                  /* instructions per count hook */
	int line;                       /* the line running now (line hook) */
	char short_src[LUA_IDSIZE];     /* how Lua's own messages name the file */
	uint32_t default_limit;
	uint8_t default_mode;
	uint8_t no_aqm;
	uint8_t qm;
	struct weir_qm_params qm_params;
	uint32_t young;
	uint8_t new_quanta;
	uint8_t plain;
	/* hooks */
	bool in_hook;                   /* a hook is running: no declarations */
	double now;                     /* weir.time() */
	struct undo *undo;              /* the running hook call's set_class calls */
	unsigned int n_undo, cap_undo;
	uint64_t undo_gen;              /* counts hook calls (never wraps): one undo
					 * entry per class and call */
	struct timer *timers;
	unsigned int n_timers, cap_timers;
	unsigned int timer_next;        /* where a wake's time budget stopped the timers */
	int hook_ref[WEIR_LUA__HOOKS];  /* LUA_NOREF: none (TIMER unused) */
	int hook_line[WEIR_LUA__HOOKS];
	struct weir_lua_counters cnt;
	/* weir.subscriber declarations (docs/subscribers.md): checked at the
	 * first compile, then shared with the policies built from it. NULL:
	 * none. */
	struct weir_subs *subs;
};

/* policy_lua_sandbox.c: the allocator, the instruction budget and the time
 * limit, the bounded libraries. */
void *pl_sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
struct weir_lua *pl_ctx_of(lua_State *L);
void pl_sandbox_hook(lua_State *L, lua_Debug *ar);
void pl_sandbox_open(lua_State *L);
double pl_mono_now(void);
void pl_start_clock(struct weir_lua *x);
void pl_stop_clock(void);

/* policy_lua_decl.c: the weir.* functions a script calls. */
int pl_api_link(lua_State *L);
int pl_api_class(lua_State *L);
int pl_api_rule(lua_State *L);
int pl_api_subscriber(lua_State *L);
int pl_api_set_class(lua_State *L);
int pl_api_every(lua_State *L);
int pl_api_at(lua_State *L);
int pl_api_on_flow(lua_State *L);
int pl_api_on_flow_end(lua_State *L);
int pl_api_on_stats(lua_State *L);
int pl_api_time(lua_State *L);
int pl_api_date(lua_State *L);
double pl_next_daily(double after, int minute);

/* policy_lua.c: loading. */
void pl_report_run(lua_State *L, const struct weir_lua *x, int status, char *err, size_t errlen);

#endif
