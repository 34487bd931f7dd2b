/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the Lua policy front end. An administrator's script declares the
 * class trees and rules through the global table `weir` (lua/README.md);
 * this runs it in a sandbox and compiles the declarations into the same
 * struct weir_policy the config file's `shaping` and `rules` produce.
 *
 * The script runs in a fresh Lua state of its own: no io, os, load,
 * require, debug; bounded memory and a bounded number of VM instructions,
 * so a bad or hostile policy can neither touch the box nor hang the
 * management lcore (it is re-run on SIGHUP). weir_policy_lua_load compiles
 * and discards the state; weir_lua_open keeps it for the script's hooks.
 */
#ifndef WEIR_APP_POLICY_LUA_H
#define WEIR_APP_POLICY_LUA_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

#define WEIR_POLICY_LUA_MEM_DEFAULT     (64u << 20)     /* bytes */
#define WEIR_POLICY_LUA_INSNS_DEFAULT   10000000ull     /* VM instructions */
#define WEIR_POLICY_LUA_LIMIT_DEFAULT   4096u           /* leaf limit, packets */
#define WEIR_POLICY_LUA_TIME_DEFAULT_MS 2000u           /* wall clock per run or hook call */
/* Worst-case steps one string pattern call may take (find, match, gmatch,
 * gsub; ~2.5 ns each, so ~0.25 s): C code the instruction budget cannot
 * stop is refused before it starts rather than interrupted. */
#define WEIR_POLICY_LUA_MATCH_STEPS     100000000.0

/* Every field's 0 means its default; a NULL limits pointer means all defaults. */
struct weir_policy_lua_limits {
	size_t mem_bytes;               /* the Lua state's memory, all allocations */
	uint64_t instructions;          /* VM instructions the script may execute */
	uint32_t time_ms;               /* wall clock one run or hook call may take */
	uint32_t max_rules;             /* weir.rule calls (policy_limits.h) */
	/* What the config file knows and the script does not: the leaf limit
	 * when neither weir.link{limit} nor the class sets one (the config path
	 * uses a quarter of the mbufs per worker), and the links' default mode
	 * (the config's shaping.mode; 0 is postack anyway). */
	uint32_t default_limit;
	uint8_t default_mode;           /* enum weir_shape_mode */
	uint8_t no_aqm;                 /* the config's shaping.aqm = "none" */
	uint8_t qm;                     /* its fifo queue manager (shaping.aqm = "pqm"...) */
	struct weir_qm_params qm_params;        /* shaping.red / shaping.pqm */
	uint32_t young;                 /* the config's shaping.young_bytes */
	uint8_t new_quanta;             /* the config's shaping.new_quanta */
	uint8_t plain;                  /* the config's shaping.new_flows = false */
	/* The `now` clock (UNIX time, seconds) when the script is loaded:
	 * timers count from it and weir.time() gives it until the first
	 * hook. 0 = the real time. */
	double start_time;
};

/*
 * Run the script at path and compile what it declared. NULL on error, with
 * "FILE:LINE: message" in err: the line of the weir.link/class/rule call a
 * problem is about (policy builder errors included), Lua's own position for
 * syntax and runtime errors, the running line for the instruction budget
 * and the memory limit. A script that declares no weir.link is an error:
 * there is nothing to shape (a plain bridge needs no policy).
 */
/*
 * A flag (the signal handler's quit) that stops any running script or hook
 * at its next budget check with an error: SIGTERM must not wait for a
 * script. NULL: none.
 */
void weir_lua_set_stop_flag(volatile const sig_atomic_t *flag);

/*
 * Scripts run one at a time per thread. A thread other than the management
 * lcore that runs them (the compile job's) calls this first: its runs then
 * keep their time limit by reading the clock, not through the watchdog
 * the management lcore's hooks use.
 */
void weir_lua_thread_own_clock(void);

struct weir_policy *weir_policy_lua_load(const char *path, uint32_t epoch,
					 const struct weir_policy_lua_limits *lim,
					 char *err, size_t errlen);

/*
 * The live engine (issue #5). The script stays loaded on the management
 * lcore: its top level declares the trees and rules and may register hooks
 * (weir.every/at, weir.on_flow, weir.on_flow_end, weir.on_stats) that the C
 * side calls later. Hooks change the trees only through weir.set_class,
 * which marks the engine dirty; the caller then compiles and switches.
 *
 * Every hook call runs in the same sandbox with an instruction budget of
 * its own (lim->instructions) and the state's one memory limit. A failing
 * call returns -1 with "FILE:LINE: message" in err, is counted, and undoes
 * the set_class calls it made; the state stays usable for the next call.
 * Single-threaded: one lcore owns a struct weir_lua.
 */
struct weir_lua;

enum weir_lua_hook {
	WEIR_LUA_TIMER = 0,     /* weir.every, weir.at */
	WEIR_LUA_FLOW,          /* weir.on_flow */
	WEIR_LUA_FLOW_END,      /* weir.on_flow_end */
	WEIR_LUA_STATS,         /* weir.on_stats */
	WEIR_LUA__HOOKS
};

/* A flow as the hooks see it. Addresses are in network order; an IPv4
 * address takes the first 4 bytes. */
struct weir_lua_flow {
	uint8_t dir;                    /* who opened it: 0 a LAN host (outbound), 1 the WAN */
	uint8_t proto;                  /* IP protocol number */
	uint8_t family;                 /* AF_INET or AF_INET6 */
	uint8_t dscp;                   /* 0-63, of the packet that opened it */
	uint16_t vlan;                  /* outer VLAN ID, 0 when untagged */
	uint16_t lan_port, wan_port;    /* 0 for protocols without ports */
	uint8_t lan[16], wan[16];
	/* The leaf of each direction's tree it was classified into ("": none). */
	char cls[WEIR_POLICY_DIRS][WEIR_POLICY_NAME_LEN];
	/* weir_lua_on_flow_end only; [0] is LAN -> WAN, [1] WAN -> LAN. */
	uint64_t bytes[WEIR_POLICY_DIRS];
	uint64_t packets[WEIR_POLICY_DIRS];
	double duration;                /* seconds */
};

struct weir_lua_class_stats {
	char name[WEIR_POLICY_NAME_LEN];
	uint64_t bytes, pkts, drops;    /* since the class tree was built */
	uint64_t rate_bps;              /* its current rate estimate */
};

/* A LAN host: the bytes of its flows open now, each since it began (what
 * flows that ended moved is in their on_flow_end). */
struct weir_lua_host_stats {
	uint8_t family;                 /* AF_INET or AF_INET6 */
	uint8_t addr[16];
	uint64_t bytes_out, bytes_in;   /* LAN -> WAN, WAN -> LAN */
};

struct weir_lua_stats {
	double now;                     /* UNIX time, seconds */
	const struct weir_lua_class_stats *classes[WEIR_POLICY_DIRS];
	unsigned int n_classes[WEIR_POLICY_DIRS];
	const struct weir_lua_host_stats *hosts;
	unsigned int n_hosts;
};

struct weir_lua_counters {
	struct {
		uint64_t calls;
		uint64_t errors;        /* Lua errors, budget and memory included */
	} hook[WEIR_LUA__HOOKS];
	uint64_t compiles;
	uint64_t compile_errors;
	char last_error[512];           /* the last hook or compile error, "" if none */
};

/* Load the script at path and run its top level (declarations, hook
 * registration). NULL on error, with "FILE:LINE: message" in err. */
struct weir_lua *weir_lua_open(const char *path, const struct weir_policy_lua_limits *lim,
			       char *err, size_t errlen);

/* Compile what is declared now. On failure (NULL, err naming the line of
 * the declaration or of the weir.set_class call at fault) the declarations
 * return to those of the last good compile, so the next compile gives that
 * policy again rather than the same error. */
struct weir_policy *weir_lua_compile(struct weir_lua *l, uint32_t epoch, char *err,
				     size_t errlen);

/* A hook's change: compile as weir_lua_compile, but on success leave the
 * change pending (still dirty, not yet the last good one) until the
 * caller has the policy in force and calls weir_lua_commit. A switch that
 * fails thus leaves the change to be tried again, not forgotten while the
 * script believes it made. */
struct weir_policy *weir_lua_compile_change(struct weir_lua *l, uint32_t epoch, char *err,
					    size_t errlen);
void weir_lua_commit(struct weir_lua *l);

/* Whether a hook changed a class since the last compile. */
bool weir_lua_dirty(const struct weir_lua *l);

/* The earliest time a timer is due (the `now` clock), INFINITY if none. */
double weir_lua_next_timer(const struct weir_lua *l);

/* Run every timer due at now once, in registration order. Returns how many
 * ran, or -1 if one failed (err has the first failure; the others ran). */
int weir_lua_run_timers(struct weir_lua *l, double now, char *err, size_t errlen);

/* The same within a time budget (seconds of CLOCK_MONOTONIC from the call,
 * INFINITY: none): once it is spent no further timer starts (at least one
 * does); those left stay due, *more (if not NULL) says so, and the next
 * call starts with them. The management lcore thus counts timers in its
 * wake's budget like flow events. */
int weir_lua_run_timers_for(struct weir_lua *l, double now, double budget_s, bool *more,
			    char *err, size_t errlen);

/* A new flow. 1 with a class name in cls to move the flow there (a leaf of
 * at least one direction's tree; each direction resolves it as a rule's
 * class: that leaf, else its default), 0 to keep it where it is, -1 on a
 * hook error (the flow stays). 0 without a hook. */
int weir_lua_on_flow(struct weir_lua *l, const struct weir_lua_flow *f, char *cls, size_t clslen,
		     char *err, size_t errlen);

/* A flow ended; 0, or -1 on a hook error. */
int weir_lua_on_flow_end(struct weir_lua *l, const struct weir_lua_flow *f, char *err,
			 size_t errlen);

/* Periodic statistics; 0, or -1 on a hook error. */
int weir_lua_on_stats(struct weir_lua *l, const struct weir_lua_stats *s, char *err,
		      size_t errlen);

/* Whether the script registered a hook of this kind (so the C side can
 * leave events it would ignore in the workers). */
bool weir_lua_has(const struct weir_lua *l, enum weir_lua_hook h);

const struct weir_lua_counters *weir_lua_counters(const struct weir_lua *l);

void weir_lua_close(struct weir_lua *l);

#endif /* WEIR_APP_POLICY_LUA_H */
