/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the Lua policy front end (policy_lua.h, lua/README.md).
 *
 * The script only declares: weir.link, weir.class and weir.rule copy their
 * table into the same confs the config file fills (lib/policy.h), checking
 * keys and values there and then so an error names the line of the call.
 * Once the script's top level has finished, the policy builder does the
 * semantic checks; its errors (class i of a tree, rule i) are mapped back to
 * the line each declaration remembered.
 *
 * The state then stays open for the script's hooks (weir_lua_open). Hooks
 * may not declare; weir.set_class edits a declared class in place, with an
 * undo log so a failing hook call leaves nothing behind, and a copy of the
 * classes as last compiled so a failing compile leaves nothing behind
 * either.
 */
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
};

/* ---- sandbox ---- */

static volatile const sig_atomic_t *stop_flag;

void
weir_lua_set_stop_flag(volatile const sig_atomic_t *flag)
{
	stop_flag = flag;
}

/*
 * The watchdog: a thread that marks the running script or hook call
 * expired once it is past its deadline. The hooks and the wrapped library
 * functions then only read one word, cheap enough to check at every line
 * and every library call, where reading the clock would cost; starting and
 * ending a run (hundreds of thousands of on_flow calls a second) is one
 * store each, never a wake-up. The watchdog's scripts run one at a time
 * (the management lcore; a unit test), so one deadline; a thread beside
 * them reads its own clock (own_clock below).
 */
#define WD_TICK_NS 10000000L            /* the watchdog's resolution: 10 ms */
#define WD_EXPIRED UINT64_MAX

static pthread_once_t wd_once = PTHREAD_ONCE_INIT;
static bool wd_ok;                      /* the thread runs */
/* CLOCK_MONOTONIC ns of the running run's deadline, 0 (none) or
 * WD_EXPIRED; deadlines of successive runs differ, so the thread's
 * compare-and-swap never expires a run it did not look at. */
static _Atomic uint64_t wd_deadline;
/* A thread that runs scripts beside the management lcore (the compile
 * job's, compile_job.c) times its runs by the clock itself, per state: the
 * watchdog's one deadline is the management lcore's hooks'. A clock read
 * (~25 ns) at every check costs a loading script little. */
static _Thread_local bool own_clock;

void
weir_lua_thread_own_clock(void)
{
	own_clock = true;
}

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *
wd_main(void *arg)
{
	const struct timespec tick = { 0, WD_TICK_NS };

	(void)arg;
	for (;;) {
		uint64_t d = atomic_load(&wd_deadline);

		if (d != 0 && d != WD_EXPIRED && mono_ns() >= d)
			atomic_compare_exchange_strong(&wd_deadline, &d, WD_EXPIRED);
		nanosleep(&tick, NULL);
	}
	return NULL;
}

static void
wd_start(void)
{
	pthread_t t;

	wd_ok = pthread_create(&t, NULL, wd_main, NULL) == 0;
	if (wd_ok)
		pthread_detach(t);
}

static double
mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A run (the top level or one hook call) starts: watch its deadline. */
static void
start_clock(struct weir_lua *x)
{
	x->deadline = mono_now() + x->time_limit;
	if (own_clock)
		return;
	pthread_once(&wd_once, wd_start);
	atomic_store(&wd_deadline, mono_ns() + (uint64_t)(x->time_limit * 1e9));
}

static void
stop_clock(void)
{
	if (!own_clock)
		atomic_store(&wd_deadline, 0);
}

/* Past the deadline (by the clock itself if the watchdog could not start,
 * or on a thread with its own clock). */
static bool
expired(const struct weir_lua *x)
{
	return !own_clock && wd_ok
	       ? atomic_load_explicit(&wd_deadline, memory_order_relaxed) == WD_EXPIRED
	       : mono_now() >= x->deadline;
}

static bool
stopping(void)
{
	return stop_flag != NULL && *stop_flag;
}

/* Every allocation of the state goes through here, so the limit covers
 * strings, tables, closures and Lua's own structures alike. */
static void *
sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	struct weir_lua *x = ud;
	size_t old = ptr != NULL ? osize : 0;   /* osize is a type tag when ptr is NULL */
	void *p;

	if (nsize == 0) {
		free(ptr);
		x->mem_used -= old;
		return NULL;
	}
	/* Only growth is refused: Lua may rely on a shrink succeeding. */
	if (nsize > old && x->mem_used - old + nsize > x->mem_limit)
		return NULL;
	p = realloc(ptr, nsize);
	if (p == NULL)
		return NULL;
	x->mem_used = x->mem_used - old + nsize;
	return p;
}

static struct weir_lua *
ctx_of(lua_State *L)
{
	return lua_touserdata(L, lua_upvalueindex(1));
}

/* The line hook keeps the running line for errors that carry none (out of
 * memory); the count hook enforces the instruction budget. */
static void
sandbox_hook(lua_State *L, lua_Debug *ar)
{
	struct weir_lua *x;
	char msg[MSG_LEN];

	/* The allocator's user data is the context: no stack work per line. */
	lua_getallocf(L, (void **)&x);
	/* The time limit and SIGTERM's flag at every line too: a few
	 * instructions on big strings can take milliseconds each. */
	if (ar->event == LUA_HOOKLINE) {
		x->line = ar->currentline;
		if (!expired(x) && !stopping())
			return;
	} else if (ar->event == LUA_HOOKCOUNT) {
		x->insns += x->hook_step;
		if (x->insns < x->insn_limit && !expired(x) && !stopping())
			return;
	} else {
		return;
	}
	lua_getinfo(L, "l", ar);
	if (ar->currentline > 0)
		x->line = ar->currentline;
	if (x->insns >= x->insn_limit)
		snprintf(msg, sizeof(msg), "%s:%d: instruction budget exhausted (%llu instructions)",
			 x->path, x->line, (unsigned long long)x->insn_limit);
	else if (stopping())
		snprintf(msg, sizeof(msg), "%s:%d: stopped: weir is shutting down", x->path,
			 x->line);
	else
		snprintf(msg, sizeof(msg), "%s:%d: time limit exceeded (%.0f ms)", x->path,
			 x->line, x->time_limit * 1e3);
	if (!x->failed) {
		x->failed = true;
		snprintf(x->err, sizeof(x->err), "%s", msg);
	}
	/* From now on every instruction fails, so a pcall in the script can
	 * catch the error but never run on. */
	lua_sethook(L, sandbox_hook, LUA_MASKCOUNT, 1);
	lua_pushstring(L, msg);
	lua_error(L);
}

/* Only what cannot reach the file system, the process or the interpreter. */
static const char *const safe_globals[] = {
	"assert", "error", "ipairs", "pairs", "next", "pcall", "select", "tonumber", "tostring",
	"type", "string", "table", "math", "utf8", "_G", "_VERSION", NULL,
};

static bool
is_safe_global(const char *name)
{
	for (const char *const *g = safe_globals; *g != NULL; g++)
		if (strcmp(*g, name) == 0)
			return true;
	return false;
}


/* ---- bounded C functions ----
 *
 * The count hook cannot run inside a C function, so the library functions
 * whose work a script controls without allocating (the memory cap bounds
 * the rest) are wrapped: each checks the clock and the stop flag, and is
 * refused before it starts when its worst case is too much work. The
 * bounds depend only on the arguments, so `weir --check` and the running
 * appliance agree on every script.
 */

static int lib_fail(lua_State *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* luaL_error with printf's formats (lua_pushfstring has no %zu or %g). */
static int
lib_fail(lua_State *L, const char *fmt, ...)
{
	char msg[MSG_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return luaL_error(L, "%s", msg);
}

/* Raise "FILE:LINE: fn: ..." from a wrapper (luaL_error's position is the
 * calling Lua line, which report_run maps to the whole path). */
static int
guard(lua_State *L, struct weir_lua *x, const char *fn)
{
	if (stopping())
		return lib_fail(L, "%s: stopped: weir is shutting down", fn);
	if (expired(x))
		return lib_fail(L, "%s: time limit exceeded (%.0f ms)", fn, x->time_limit * 1e3);
	return 0;
}

/* The pattern's shape as far as backtracking goes: repetition items (*, +,
 * -) can each take any length, '?' doubles, %b and back references scan
 * the subject again. Malformed patterns are left for Lua to reject. */
struct pat_shape {
	unsigned int items, rep, opt, scan;
	bool anchored;
};

static struct pat_shape
pat_shape(const char *p, size_t m, bool anchor_ok)
{
	struct pat_shape sh = { 0 };
	size_t i = 0, end;

	if (anchor_ok && m > 0 && p[0] == '^') {
		sh.anchored = true;
		i = 1;
	}
	while (i < m) {
		if (p[i] == '(' || p[i] == ')' || (p[i] == '$' && i + 1 == m)) {
			i++;
			continue;
		}
		if (p[i] == '%' && i + 1 < m && p[i + 1] == 'b') {
			sh.scan++;
			i += 4;
			continue;
		}
		if (p[i] == '%' && i + 1 < m && p[i + 1] == 'f') {
			i += 2;
			if (i < m && p[i] == '[') {
				i++;
				do {
					if (i < m && p[i] == '%')
						i++;
					i++;
				} while (i < m && p[i] != ']');
				i++;
			}
			continue;
		}
		if (p[i] == '%' && i + 1 < m && p[i + 1] >= '0' && p[i + 1] <= '9') {
			sh.scan++;
			i += 2;
			continue;
		}
		if (p[i] == '%') {
			end = i + 2;
		} else if (p[i] == '[') {
			end = i + 1;
			if (end < m && p[end] == '^')
				end++;
			do {                    /* a ']' first is a member */
				if (end < m && p[end] == '%')
					end++;
				end++;
			} while (end < m && p[end] != ']');
			end++;
		} else {
			end = i + 1;
		}
		sh.items++;
		if (end < m && (p[end] == '*' || p[end] == '+' || p[end] == '-')) {
			sh.rep++;
			end++;
		} else if (end < m && p[end] == '?') {
			sh.opt++;
			end++;
		}
		i = end;
	}
	return sh;
}

/* C(n + k, k) in floating point: the ways k repetition items can share at
 * most n bytes, i.e. the backtracking paths of one anchored attempt. */
static double
ways(double n, unsigned int k)
{
	double w = 1;

	for (unsigned int i = 1; i <= k && w < 1e300; i++)
		w = w * (n + i) / i;
	return w;
}

/* Refuse a pattern call whose worst case exceeds WEIR_POLICY_LUA_MATCH_STEPS. */
static void
check_pattern(lua_State *L, const char *fn, bool plain_ok, bool anchor_ok)
{
	struct weir_lua *x;
	size_t n, m;
	const char *p;
	double steps;

	lua_getallocf(L, (void **)&x);
	guard(L, x, fn);
	if (lua_type(L, 1) != LUA_TSTRING && lua_type(L, 1) != LUA_TNUMBER)
		return;                 /* Lua's own argument error follows */
	if (lua_type(L, 2) != LUA_TSTRING && lua_type(L, 2) != LUA_TNUMBER)
		return;
	lua_tolstring(L, 1, &n);
	p = lua_tolstring(L, 2, &m);
	if (plain_ok && lua_toboolean(L, 4)) {
		/* memchr and memcmp: at most every position times the needle,
		 * some 16 bytes a step */
		steps = ((double)n + 1) * ((double)m / 16 + 1);
	} else {
		struct pat_shape sh = pat_shape(p, m, anchor_ok);

		/* an unanchored search is an anchored one at each start: one
		 * more item that takes any length */
		steps = sh.anchored ? ways((double)n, sh.rep) : ways((double)n, sh.rep + 1);
		steps *= (double)(sh.items + 1) * ldexp(1, (int)(sh.opt < 1000 ? sh.opt : 1000)) *
			 (1 + (double)sh.scan * (double)n);
	}
	if (steps > WEIR_POLICY_LUA_MATCH_STEPS)
		lib_fail(L, "%s: pattern too costly for a %zu-byte subject (worst case %.2g "
			   "steps, at most %.0f; a pattern with fewer repetition items (* + - ?) "
			   "or a shorter subject)", fn, n, steps, WEIR_POLICY_LUA_MATCH_STEPS);
}

/* Run the wrapped library function (upvalue 1, a C function without
 * upvalues of its own) in this frame: no second call, and its argument
 * errors name the function as the script called it. */
static int
call_wrapped(lua_State *L)
{
	return lua_tocfunction(L, lua_upvalueindex(1))(L);
}

static int
b_find(lua_State *L)
{
	check_pattern(L, "string.find", true, true);
	return call_wrapped(L);
}

static int
b_match(lua_State *L)
{
	check_pattern(L, "string.match", false, true);
	return call_wrapped(L);
}

/* The whole iteration is bounded at once: gmatch's iterator is Lua's. */
static int
b_gmatch(lua_State *L)
{
	check_pattern(L, "string.gmatch", false, false);
	return call_wrapped(L);
}

/* Each replacement is built within the memory cap; a function replacement
 * runs under the count hook. */
static int
b_gsub(lua_State *L)
{
	check_pattern(L, "string.gsub", false, true);
	return call_wrapped(L);
}

/* string.rep("", 1e15) loops 1e15 times and allocates nothing. */
static int
b_rep(lua_State *L)
{
	struct weir_lua *x;
	size_t l = 0, lsep = 0;
	lua_Integer n = lua_tointeger(L, 2);

	lua_getallocf(L, (void **)&x);
	guard(L, x, "string.rep");
	if (lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TNUMBER)
		lua_tolstring(L, 1, &l);
	if (lua_type(L, 3) == LUA_TSTRING || lua_type(L, 3) == LUA_TNUMBER)
		lua_tolstring(L, 3, &lsep);
	if (n > 0 && (double)n * (double)(l + lsep + 1) > (double)x->mem_limit)
		return lib_fail(L, "string.rep: not enough memory for %lld copies (the policy "
				  "script may use %zu bytes)", (long long)n, x->mem_limit);
	return call_wrapped(L);
}

/* table.move({}, 1, 1e15, 2) loops over nils and allocates nothing: no
 * table within the memory cap has more slots than mem_limit / 16. */
static int
b_move(lua_State *L)
{
	struct weir_lua *x;
	lua_Integer f = lua_tointeger(L, 2), e = lua_tointeger(L, 3);

	lua_getallocf(L, (void **)&x);
	guard(L, x, "table.move");
	if (e >= f && (double)e - (double)f + 1 > (double)(x->mem_limit / 16))
		return lib_fail(L, "table.move: %.0f elements exceed what the policy's memory "
				  "(%zu bytes) can hold", (double)e - (double)f + 1, x->mem_limit);
	return call_wrapped(L);
}

/* table.sort runs its comparisons in C: without a comparator they are
 * string comparisons as long as the strings; a comparator must be Lua
 * code (which the hooks watch), not a C function such as string.upper
 * on big strings. */
static int
b_sort(lua_State *L)
{
	struct weir_lua *x;
	double n, maxlen = 0, steps;

	lua_getallocf(L, (void **)&x);
	guard(L, x, "table.sort");
	if (lua_type(L, 1) != LUA_TTABLE)
		return call_wrapped(L);         /* Lua's own argument error */
	if (!lua_isnoneornil(L, 2) && (lua_type(L, 2) != LUA_TFUNCTION || lua_iscfunction(L, 2)))
		return lib_fail(L, "table.sort: the comparator must be a Lua function");
	n = (double)lua_rawlen(L, 1);
	if (lua_isnoneornil(L, 2))
		for (lua_Integer i = 1; i <= (lua_Integer)n; i++) {
			if (lua_rawgeti(L, 1, i) == LUA_TSTRING && (double)lua_rawlen(L, -1) > maxlen)
				maxlen = (double)lua_rawlen(L, -1);
			lua_pop(L, 1);
		}
	steps = n * (log2(n + 1) + 1) * (1 + maxlen / 16);
	if (steps > WEIR_POLICY_LUA_MATCH_STEPS)
		return lib_fail(L, "table.sort: %.0f elements of up to %.0f bytes are too costly to "
				"compare (worst case %.2g steps, at most %.0f)", n, maxlen, steps,
				WEIR_POLICY_LUA_MATCH_STEPS);
	return call_wrapped(L);
}

/* Every other library function: the time limit and the stop flag at each
 * call, so a loop of calls that are slow on big strings (string.upper,
 * tonumber, utf8.len ...) stops in time. Upvalue 2 is its name. */
static int
b_guarded(lua_State *L)
{
	struct weir_lua *x;

	lua_getallocf(L, (void **)&x);
	if (stopping() || expired(x))
		guard(L, x, lua_tostring(L, lua_upvalueindex(2)));
	return call_wrapped(L);
}

static void
wrap_rest(lua_State *L, const char *lib)
{
	if (lib != NULL)
		lua_getglobal(L, lib);
	else
		lua_pushglobaltable(L);
	lua_pushnil(L);
	while (lua_next(L, -2) != 0) {
		/* a C function, not a closure made here (those have upvalues) */
		bool plain = lua_tocfunction(L, -1) != NULL && lua_type(L, -2) == LUA_TSTRING;

		if (plain && lua_getupvalue(L, -1, 1) != NULL) {
			lua_pop(L, 1);
			plain = false;
		}
		if (plain) {
			lua_pushfstring(L, "%s%s%s", lib ? lib : "", lib ? "." : "", lua_tostring(L, -2));
			lua_pushcclosure(L, b_guarded, 2);
			lua_pushvalue(L, -2);
			lua_insert(L, -2);
			/* replacing an existing key's value during next() is allowed */
			lua_rawset(L, -4);
		} else {
			lua_pop(L, 1);
		}
	}
	lua_pop(L, 1);
}

static void
wrap(lua_State *L, const char *lib, const char *name, lua_CFunction fn)
{
	lua_getglobal(L, lib);
	lua_getfield(L, -1, name);
	lua_pushcclosure(L, fn, 1);
	lua_setfield(L, -2, name);
	lua_pop(L, 1);
}

static void
sandbox_open(lua_State *L)
{
	luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
	luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
	luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
	luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
	luaL_requiref(L, LUA_UTF8LIBNAME, luaopen_utf8, 1);
	lua_pop(L, 5);
	/* Clearing a field during next() is allowed; adding one is not. */
	lua_pushglobaltable(L);
	lua_pushnil(L);
	while (lua_next(L, -2) != 0) {
		lua_pop(L, 1);
		if (lua_type(L, -1) != LUA_TSTRING || !is_safe_global(lua_tostring(L, -1))) {
			lua_pushvalue(L, -1);
			lua_pushnil(L);
			lua_rawset(L, -4);
		}
	}
	lua_pop(L, 1);
	/* string.dump turns functions into bytecode; strings' methods are the
	 * same table, so this removes ("x"):dump too. */
	lua_getglobal(L, LUA_STRLIBNAME);
	lua_pushnil(L);
	lua_setfield(L, -2, "dump");
	lua_pop(L, 1);
	wrap(L, LUA_STRLIBNAME, "find", b_find);
	wrap(L, LUA_STRLIBNAME, "match", b_match);
	wrap(L, LUA_STRLIBNAME, "gmatch", b_gmatch);
	wrap(L, LUA_STRLIBNAME, "gsub", b_gsub);
	wrap(L, LUA_STRLIBNAME, "rep", b_rep);
	wrap(L, LUA_TABLIBNAME, "move", b_move);
	wrap(L, LUA_TABLIBNAME, "sort", b_sort);
	wrap_rest(L, LUA_STRLIBNAME);
	wrap_rest(L, LUA_TABLIBNAME);
	wrap_rest(L, LUA_UTF8LIBNAME);
	lua_pushglobaltable(L);
	for (const char *const *g = (const char *const[]){ "tonumber", "tostring", NULL }; *g; g++) {
		lua_getfield(L, -1, *g);
		lua_pushstring(L, *g);
		lua_pushcclosure(L, b_guarded, 2);
		lua_setfield(L, -2, *g);
	}
	lua_pop(L, 1);
}

/* ---- declarations ---- */

/* The script line that called the running weir.* function: the nearest Lua
 * frame (a pcall(weir.class, t) puts a C frame in between). */
static int
caller_line(lua_State *L)
{
	lua_Debug ar;

	for (int level = 1; lua_getstack(L, level, &ar); level++)
		if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0)
			return ar.currentline;
	return 0;
}

static int decl_fail(lua_State *L, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Raise "FILE:LINE: message" from a declaration, and remember the first. */
static int
decl_fail(lua_State *L, int line, const char *fmt, ...)
{
	struct weir_lua *x = ctx_of(L);
	char msg[MSG_LEN];
	int off;
	va_list ap;

	off = snprintf(msg, sizeof(msg), "%s:%d: ", x->path, line);
	if (off > 0 && (size_t)off < sizeof(msg)) {
		va_start(ap, fmt);
		vsnprintf(msg + off, sizeof(msg) - off, fmt, ap);
		va_end(ap);
	}
	if (!x->failed) {
		x->failed = true;
		snprintf(x->err, sizeof(x->err), "%s", msg);
	}
	lua_pushstring(L, msg);
	return lua_error(L);
}

/* Declarations and hook registration belong to the script's top level: a
 * hook that could add classes or rules would change what the running
 * policy means behind the administrator's back; it edits with set_class. */
static void
top_level_only(lua_State *L, int line, const char *fn)
{
	bool decl = strcmp(fn, "weir.link") == 0 || strcmp(fn, "weir.class") == 0 ||
		    strcmp(fn, "weir.rule") == 0;

	if (ctx_of(L)->in_hook)
		decl_fail(L, line, "%s is only valid at the top level of the script, not in a "
			  "hook%s", fn, decl ? " (hooks change classes with weir.set_class)" : "");
}

/* One table argument whose keys are all in `keys`. */
static void
check_args(lua_State *L, int line, const char *fn, const char *const *keys)
{
	if (lua_gettop(L) != 1 || lua_type(L, 1) != LUA_TTABLE)
		decl_fail(L, line, "%s takes one table: %s{ key = value, ... }", fn, fn);
	lua_pushnil(L);
	while (lua_next(L, 1) != 0) {
		const char *k;
		bool ok = false;

		lua_pop(L, 1);
		if (lua_type(L, -1) != LUA_TSTRING)
			decl_fail(L, line, "%s: every entry must be key = value", fn);
		k = lua_tostring(L, -1);
		for (const char *const *a = keys; *a != NULL; a++)
			ok |= strcmp(*a, k) == 0;
		if (!ok)
			decl_fail(L, line, "%s: unknown key '%s'", fn, k);
	}
}

/* Push the argument's field key without metamethods (the script has no
 * setmetatable, but a declaration should run no script code anyway). */
static int
field(lua_State *L, const char *key)
{
	lua_pushstring(L, key);
	return lua_rawget(L, 1);
}

/* The value at idx as the shared parsers see it. Integral floats (1e6)
 * count as integers; other floats have no meaning in a policy. */
static struct weir_value
to_value(lua_State *L, int idx)
{
	struct weir_value v = { .type = WEIR_VALUE_OTHER };
	int isint;

	if (lua_type(L, idx) == LUA_TNUMBER) {
		v.i = (int64_t)lua_tointegerx(L, idx, &isint);
		if (isint)
			v.type = WEIR_VALUE_INT;
	} else if (lua_type(L, idx) == LUA_TSTRING) {
		v.type = WEIR_VALUE_STR;
		v.s = lua_tostring(L, idx);
	}
	return v;
}

/* A string field into out; def NULL: required. */
static void
get_str(lua_State *L, int line, const char *fn, const char *key, const char *def, char *out,
	size_t outlen)
{
	int t = field(L, key);

	if (t == LUA_TNIL) {
		if (def == NULL)
			decl_fail(L, line, "%s: missing key '%s'", fn, key);
		snprintf(out, outlen, "%s", def);
	} else if (t != LUA_TSTRING) {
		decl_fail(L, line, "'%s' must be a string", key);
	} else {
		size_t len;
		const char *s = lua_tolstring(L, -1, &len);

		if (len >= outlen)
			decl_fail(L, line, "'%s' is longer than %zu characters", key, outlen - 1);
		/* A Lua string may hold "\0"; C would see only what precedes it
		 * ("a\0b" as "a"), a name other than the one written. */
		if (memchr(s, '\0', len) != NULL)
			decl_fail(L, line, "'%s' holds a NUL byte (\\0)", key);
		memcpy(out, s, len);
		out[len] = '\0';
	}
	lua_pop(L, 1);
}

static long long
get_int(lua_State *L, int line, const char *key, long long def, long long min, long long max)
{
	struct weir_value v;
	long long r = def;

	if (field(L, key) != LUA_TNIL) {
		v = to_value(L, -1);
		if (v.type != WEIR_VALUE_INT)
			decl_fail(L, line, "'%s' must be an integer", key);
		r = v.i;
		if (r < min || r > max)
			decl_fail(L, line, "'%s' is %lld; it must be between %lld and %lld", key, r,
				  min, max);
	}
	lua_pop(L, 1);
	return r;
}

/* A rate field; absent = 0. Returns whether it was present. */
static bool
get_rate(lua_State *L, int line, const char *key, uint64_t *out)
{
	char msg[256];
	bool present = field(L, key) != LUA_TNIL;

	*out = 0;
	if (present) {
		struct weir_value v = to_value(L, -1);

		if (weir_value_rate(key, &v, out, msg, sizeof(msg)) < 0)
			decl_fail(L, line, "%s", msg);
	}
	lua_pop(L, 1);
	return present;
}

static int
get_dir(lua_State *L, int line, const char *fn)
{
	char dir[16];

	get_str(L, line, fn, "dir", NULL, dir, sizeof(dir));
	for (int d = 0; d < WEIR_POLICY_DIRS; d++)
		if (strcmp(dir, dir_name[d]) == 0)
			return d;
	return decl_fail(L, line, "%s: 'dir' must be \"outbound\" (LAN -> WAN) or \"inbound\"", fn);
}

static uint8_t
get_mode(lua_State *L, int line, uint8_t def)
{
	char name[16], msg[256];
	uint8_t mode;

	get_str(L, line, "", "mode", weir_shape_mode_name(def), name, sizeof(name));
	if (weir_value_mode(name, &mode, msg, sizeof(msg)) < 0)
		decl_fail(L, line, "%s", msg);
	return mode;
}

/* Make room for one more declaration in *arr and *lines (cap entries
 * each); raise on failure. Each array is stored back as soon as it has
 * moved, so the context never points at freed memory across the longjmp. */
static void
grow(lua_State *L, int line, void **arr, void **lines, unsigned int *cap, unsigned int n,
     size_t size, size_t line_size)
{
	unsigned int ncap;
	void *a, *l;

	if (n < *cap)
		return;
	ncap = *cap ? *cap * 2 : 16;
	a = realloc(*arr, (size_t)ncap * size);
	if (a == NULL)
		decl_fail(L, line, "out of memory");
	*arr = a;
	l = realloc(*lines, (size_t)ncap * line_size);
	if (l == NULL)
		decl_fail(L, line, "out of memory");
	*lines = l;
	*cap = ncap;
}

/* weir.link{ dir, rate, default, limit, mode }: the root of dir's tree. */
static int
l_link(lua_State *L)
{
	static const char *const keys[] = { "dir", "rate", "default", "limit", "mode", NULL };
	struct weir_lua *x = ctx_of(L);
	int line = caller_line(L);
	struct weir_policy_tree_conf *tc;
	int d;

	top_level_only(L, line, "weir.link");
	check_args(L, line, "weir.link", keys);
	d = get_dir(L, line, "weir.link");
	if (x->link_line[d] != 0)
		return decl_fail(L, line, "the %s link is already declared at line %d", dir_name[d],
				 x->link_line[d]);
	tc = &x->tree[d];
	if (!get_rate(L, line, "rate", &tc->rate) || tc->rate == 0)
		return decl_fail(L, line, "the %s link needs a rate (rate = \"100mbit\")",
				 dir_name[d]);
	get_str(L, line, "weir.link", "default", "", tc->default_class, sizeof(tc->default_class));
	tc->default_limit = (uint32_t)get_int(L, line, "limit", x->default_limit, 1, 1 << 24);
	tc->mode = get_mode(L, line, x->default_mode);
	tc->no_aqm = x->no_aqm;
	tc->qm = x->qm;
	tc->qm_params = x->qm_params;
	tc->young = x->young;
	tc->new_quanta = x->new_quanta;
	tc->plain = x->plain;
	x->link_line[d] = line;
	return 0;
}

/* A class's marker = { type = "tbq", cir = "8mbit", ... } (docs/markers.md):
 * each key through the shared parser. */
static void
get_marker(lua_State *L, int line, struct weir_marker_conf *mc)
{
	char msg[256];

	if (field(L, "marker") == LUA_TNIL) {
		lua_pop(L, 1);
		return;
	}
	weir_marker_conf_init(mc);
	if (lua_type(L, -1) != LUA_TTABLE)
		decl_fail(L, line, "'marker' must be a table { type = \"tbq\", cir = \"8mbit\" }");
	lua_pushnil(L);
	while (lua_next(L, -2) != 0) {
		struct weir_value v;
		char num[32];

		if (lua_type(L, -2) != LUA_TSTRING)
			decl_fail(L, line, "'marker' keys must be names (type, cir, ...)");
		v = to_value(L, -1);
		if (lua_type(L, -1) == LUA_TBOOLEAN) {
			v.type = WEIR_VALUE_INT;
			v.i = lua_toboolean(L, -1);
		} else if (lua_type(L, -1) == LUA_TNUMBER && v.type != WEIR_VALUE_INT) {
			snprintf(num, sizeof(num), "%.6g", (double)lua_tonumber(L, -1));
			v.type = WEIR_VALUE_STR;
			v.s = num;
		}
		if (weir_value_marker(mc, lua_tostring(L, -2), &v, msg, sizeof(msg)) < 0)
			decl_fail(L, line, "%s", msg);
		lua_pop(L, 1);
	}
	lua_pop(L, 1);
	if (mc->type == WEIR_MARK_NONE)
		decl_fail(L, line, "'marker' needs a type (\"tb\", \"srtcm\", \"trtcm\", \"tbq\", "
			  "\"tbq-ld\", \"arm\" or \"carm\")");
}

/* last_mile = { rate = "56kbit", rtt = 350, buffer = 3, exempt = true, side = "lan" },
 * or, in a rule, "off" (the flows it matches opt out). */
static void
get_last_mile(lua_State *L, int line, bool rule, struct weir_last_mile *lm)
{
	static const char *const keys[] = { "rate", "rtt", "buffer", "exempt", "side", NULL };
	struct weir_value v;
	char msg[256];
	int t = field(L, "last_mile"), tab;

	memset(lm, 0, sizeof(*lm));
	if (t == LUA_TNIL) {
		lua_pop(L, 1);
		return;
	}
	if (rule && t == LUA_TSTRING && strcmp(lua_tostring(L, -1), "off") == 0) {
		lm->flags = WEIR_LM_OFF;
		lua_pop(L, 1);
		return;
	}
	if (t != LUA_TTABLE)
		decl_fail(L, line, "'last_mile' must be a table { rate = ..., rtt = ..., buffer = ... }%s",
			  rule ? " or \"off\"" : "");
	tab = lua_gettop(L);
	lua_pushnil(L);
	while (lua_next(L, tab) != 0) {
		bool known = false;

		for (int i = 0; keys[i] != NULL; i++)
			known |= lua_type(L, -2) == LUA_TSTRING && strcmp(lua_tostring(L, -2), keys[i]) == 0;
		if (!known)
			decl_fail(L, line, "last_mile: unknown key '%s'",
				  lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?");
		lua_pop(L, 1);
	}
	lua_pushstring(L, "rate");
	lua_rawget(L, tab);
	v = to_value(L, -1);
	if (lua_isnil(L, -1) || weir_value_rate("last_mile.rate", &v, &lm->rate, msg, sizeof(msg)) < 0 ||
	    lm->rate == 0)
		decl_fail(L, line, "last_mile needs a rate (the last hop's, e.g. \"56kbit\")");
	lua_pop(L, 1);
	lua_pushstring(L, "rtt");
	lua_rawget(L, tab);
	v = to_value(L, -1);
	if (v.type != WEIR_VALUE_INT || v.i < 1 || v.i > 60000)
		decl_fail(L, line, "last_mile needs rtt: an integer 1..60000 (ms, its round trip)");
	lm->rtt_ms = (uint32_t)v.i;
	lua_pop(L, 1);
	lua_pushstring(L, "buffer");
	lua_rawget(L, tab);
	v = to_value(L, -1);
	if (!lua_isnil(L, -1) && (v.type != WEIR_VALUE_INT || v.i < 0 || v.i > 10000))
		decl_fail(L, line, "last_mile.buffer must be an integer 0..10000 (packets)");
	lm->buffer = lua_isnil(L, -1) ? 3 : (uint16_t)v.i;
	lua_pop(L, 1);
	lua_pushstring(L, "exempt");
	lua_rawget(L, tab);
	if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
		decl_fail(L, line, "last_mile.exempt must be true or false");
	lm->flags = (lua_isnil(L, -1) || lua_toboolean(L, -1)) ? WEIR_LM_EXEMPT : 0;
	lua_pop(L, 1);
	lua_pushstring(L, "side");
	lua_rawget(L, tab);
	if (!lua_isnil(L, -1)) {
		const char *side = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";

		if (strcmp(side, "wan") == 0)
			lm->flags |= WEIR_LM_WAN;
		else if (strcmp(side, "lan") != 0)
			decl_fail(L, line, "last_mile.side must be \"lan\" or \"wan\" (where its hosts are)");
	}
	lua_pop(L, 2);
}

/* weir.class{ dir, name, parent, rate, ceil, prio, limit, quantum, flow_min,
 * admission, fallback, mode, marker }: the config file's class keys, plus dir. */
static int
l_class(lua_State *L)
{
	static const char *const keys[] = { "dir", "name", "parent", "rate", "ceil", "prio",
					    "limit", "quantum", "flow_min", "admission",
					    "fallback", "mode", "aqm", "marker", "last_mile", NULL };
	struct weir_lua *x = ctx_of(L);
	int line = caller_line(L);
	struct weir_policy_class_conf c = { 0 };
	char admit[16], msg[256];
	int d;

	top_level_only(L, line, "weir.class");
	check_args(L, line, "weir.class", keys);
	d = get_dir(L, line, "weir.class");
	if (x->link_line[d] == 0)
		return decl_fail(L, line, "weir.class: declare weir.link{ dir = \"%s\", rate = ... } "
				 "before its classes", dir_name[d]);
	if (x->n_classes[d] >= WEIR_LUA_MAX_CLASSES)
		return decl_fail(L, line, "the %s tree has more than %d classes", dir_name[d],
				 WEIR_LUA_MAX_CLASSES);
	get_str(L, line, "weir.class", "name", NULL, c.name, sizeof(c.name));
	get_str(L, line, "weir.class", "parent", "", c.parent, sizeof(c.parent));
	if (!get_rate(L, line, "rate", &c.rate))
		return decl_fail(L, line, "class '%s' needs a rate", c.name);
	get_rate(L, line, "ceil", &c.ceil);
	get_rate(L, line, "flow_min", &c.flow_min);
	get_str(L, line, "weir.class", "fallback", "", c.fallback, sizeof(c.fallback));
	get_str(L, line, "weir.class", "admission", c.fallback[0] ? "fallback" : "drop", admit,
		sizeof(admit));
	c.mode = get_mode(L, line, x->tree[d].mode);
	lua_getfield(L, 1, "aqm");
	if (!lua_isnil(L, -1)) {
		char aqm[16];
		int k;

		lua_pop(L, 1);
		get_str(L, line, "weir.class", "aqm", "none", aqm, sizeof(aqm));
		k = weir_qm_by_name(aqm);
		if (k < 0)
			return decl_fail(L, line, "class '%s': aqm must be \"none\", \"red\", "
					 "\"choke\", \"pqm\" or \"pqm-pb\"", c.name);
		if (k != WEIR_QM_NONE && c.mode != WEIR_MODE_FIFO)
			return decl_fail(L, line, "class '%s': aqm \"%s\" manages a fifo leaf's one "
					 "queue: it needs mode = \"fifo\"", c.name, aqm);
		c.qm = (uint8_t)k;
		c.qm_set = 1;
	} else {
		lua_pop(L, 1);
	}
	if (weir_value_admission(c.name, admit, &c.admit, msg, sizeof(msg)) < 0)
		return decl_fail(L, line, "%s", msg);
	c.prio = (uint8_t)get_int(L, line, "prio", 0, 0, WEIR_CBQ_NUM_PRIO - 1);
	c.limit = (uint32_t)get_int(L, line, "limit", 0, 1, 1 << 24);
	c.quantum = (uint32_t)get_int(L, line, "quantum", 0, 64, 1 << 20);
	get_marker(L, line, &c.marker);
	get_last_mile(L, line, false, &c.last_mile);

	grow(L, line, (void **)&x->classes[d], (void **)&x->class_line[d], &x->cap_classes[d],
	     x->n_classes[d], sizeof(c), sizeof(struct class_line));
	x->classes[d][x->n_classes[d]] = c;
	x->class_line[d][x->n_classes[d]] = (struct class_line){ .decl = line };
	x->n_classes[d]++;
	return 0;
}

/* A rule's dscp: one value or an array of them. */
static uint64_t
get_dscp(lua_State *L, int line)
{
	uint64_t mask = 0;
	char msg[256];
	unsigned int d;

	if (field(L, "dscp") == LUA_TNIL) {
		lua_pop(L, 1);
		return 0;
	}
	if (lua_type(L, -1) == LUA_TTABLE) {
		lua_Integer n = (lua_Integer)lua_rawlen(L, -1), entries = 0;

		lua_pushnil(L);
		while (lua_next(L, -2) != 0) {
			lua_pop(L, 1);
			entries++;
		}
		if (entries == 0) {
			weir_value_dscp_empty(msg, sizeof(msg));
			decl_fail(L, line, "%s", msg);
		}
		/* {1, 2, x = 3}: not a list; let the value parser say what is expected */
		if (entries != n) {
			struct weir_value bad = { .type = WEIR_VALUE_OTHER };

			weir_value_dscp(&bad, &d, msg, sizeof(msg));
			decl_fail(L, line, "%s", msg);
		}
		for (lua_Integer i = 1; i <= n; i++) {
			struct weir_value v;

			lua_rawgeti(L, -1, i);
			v = to_value(L, -1);
			if (weir_value_dscp(&v, &d, msg, sizeof(msg)) < 0)
				decl_fail(L, line, "%s", msg);
			mask |= 1ull << d;
			lua_pop(L, 1);
		}
	} else {
		struct weir_value v = to_value(L, -1);

		if (weir_value_dscp(&v, &d, msg, sizeof(msg)) < 0)
			decl_fail(L, line, "%s", msg);
		mask = 1ull << d;
	}
	lua_pop(L, 1);
	return mask;
}

/* weir.rule{ class, weight, proto, src, dst, lan, wan, *_port, vlan, dscp, dir, spi }:
 * appended, so rules match in call order. */
static int
l_rule(lua_State *L)
{
	static const char *const keys[] = { "class", "weight", "proto", "src", "dst", "lan", "wan",
					    "src_port", "dst_port", "lan_port", "wan_port", "vlan",
					    "dscp", "dir", "spi", "last_mile", NULL };
	static const char *const side_key[WEIR_CLS__SIDES] = { "src", "dst", "lan", "wan" };
	static const char *const port_key[WEIR_CLS__SIDES] = { "src_port", "dst_port", "lan_port",
							       "wan_port" };
	struct weir_lua *x = ctx_of(L);
	int line = caller_line(L);
	struct weir_policy_rule_conf rc = { 0 };
	struct weir_classify_rule *m = &rc.match;
	/* Room for "outbound": the classes' dir key takes it, and a rule given
	 * it should hear what a rule's dir means, not that it is too long. */
	char dir[16], msg[256];

	top_level_only(L, line, "weir.rule");
	check_args(L, line, "weir.rule", keys);
	/* Before anything else of the call: a runaway loop stops at its first
	 * rule over the limit (policy_limits.h). */
	if (x->n_rules >= x->max_rules)
		return decl_fail(L, line, "more than %u rules: a policy may declare at most %u "
				 "(policy.max_rules; lua/README.md, Limits)", x->max_rules,
				 x->max_rules);
	get_str(L, line, "weir.rule", "class", NULL, rc.class_name, sizeof(rc.class_name));
	rc.weight = (uint8_t)get_int(L, line, "weight", 1, 1, 255);
	for (int i = 0; i < WEIR_CLS__SIDES; i++) {
		struct weir_value v;

		if (field(L, side_key[i]) != LUA_TNIL) {
			v = to_value(L, -1);
			if (weir_value_prefix(side_key[i], &v, &m->prefix[i], msg, sizeof(msg)) < 0)
				decl_fail(L, line, "%s", msg);
		}
		lua_pop(L, 1);
		if (field(L, port_key[i]) != LUA_TNIL) {
			v = to_value(L, -1);
			if (weir_value_ports(port_key[i], &v, &m->port[i], msg, sizeof(msg)) < 0)
				decl_fail(L, line, "%s", msg);
		}
		lua_pop(L, 1);
	}
	if (field(L, "proto") != LUA_TNIL) {
		struct weir_value v = to_value(L, -1);

		if (weir_value_proto(&v, &m->proto, msg, sizeof(msg)) < 0)
			decl_fail(L, line, "%s", msg);
	}
	lua_pop(L, 1);
	m->dscp_mask = get_dscp(L, line);
	if (field(L, "vlan") != LUA_TNIL) {
		struct weir_value v = to_value(L, -1);

		if (weir_value_vlan(&v, &m->vlan, msg, sizeof(msg)) < 0)
			decl_fail(L, line, "%s", msg);
	}
	lua_pop(L, 1);
	if (field(L, "spi") != LUA_TNIL) {
		struct weir_value v = to_value(L, -1);

		if (weir_value_spi(&v, &m->spi_lo, &m->spi_hi, msg, sizeof(msg)) < 0)
			decl_fail(L, line, "%s", msg);
	}
	lua_pop(L, 1);
	get_last_mile(L, line, true, &rc.last_mile);
	get_str(L, line, "weir.rule", "dir", "any", dir, sizeof(dir));
	if (weir_value_rule_dir(dir, &m->dir, msg, sizeof(msg)) < 0)
		decl_fail(L, line, "%s", msg);

	grow(L, line, (void **)&x->rules, (void **)&x->rule_line, &x->cap_rules, x->n_rules,
	     sizeof(rc), sizeof(int));
	x->rules[x->n_rules] = rc;
	x->rule_line[x->n_rules] = line;
	x->n_rules++;
	return 0;
}

/* ---- changing classes from hooks ---- */

static int
class_index(const struct weir_lua *x, int d, const char *name)
{
	for (unsigned int i = 0; i < x->n_classes[d]; i++)
		if (strcmp(x->classes[d][i].name, name) == 0)
			return (int)i;
	return -1;
}

/* A rate key of set_class: the class's own value when absent. */
static void
set_rate(lua_State *L, int line, const char *key, uint64_t *inout)
{
	uint64_t v;

	if (get_rate(L, line, key, &v))
		*inout = v;
}

/* weir.set_class{ dir, name, rate, ceil, prio, limit, flow_min, mode }:
 * the given keys of a declared class. Values are checked here, the tree as
 * a whole at the next compile (which names this line if it fails). */
static int
l_set_class(lua_State *L)
{
	static const char *const keys[] = { "dir", "name", "rate", "ceil", "prio", "limit",
					    "flow_min", "mode", NULL };
	struct weir_lua *x = ctx_of(L);
	int line = caller_line(L);
	struct weir_policy_class_conf c, *old;
	char name[WEIR_POLICY_NAME_LEN];
	int d, i;

	check_args(L, line, "weir.set_class", keys);
	d = get_dir(L, line, "weir.set_class");
	get_str(L, line, "weir.set_class", "name", NULL, name, sizeof(name));
	i = class_index(x, d, name);
	if (i < 0)
		return decl_fail(L, line, "weir.set_class: the %s tree has no class '%s' "
				 "(weir.class declares classes)", dir_name[d], name);
	old = &x->classes[d][i];
	c = *old;
	set_rate(L, line, "rate", &c.rate);
	set_rate(L, line, "ceil", &c.ceil);
	set_rate(L, line, "flow_min", &c.flow_min);
	c.prio = (uint8_t)get_int(L, line, "prio", c.prio, 0, WEIR_CBQ_NUM_PRIO - 1);
	c.limit = (uint32_t)get_int(L, line, "limit", c.limit, 1, 1 << 24);
	c.mode = get_mode(L, line, c.mode);
	/* A timer that restates the current rate every minute must not cost
	 * a recompile and a switch every minute. */
	if (c.rate == old->rate && c.ceil == old->ceil && c.flow_min == old->flow_min &&
	    c.prio == old->prio && c.limit == old->limit && c.mode == old->mode)
		return 0;
	/* Only a class's first change in a hook call is logged: undoing that
	 * one restores it, so the log never holds more entries than there are
	 * classes, however often a hook loops over set_class. Its memory
	 * counts against the sandbox's cap all the same. */
	if (x->in_hook && x->class_line[d][i].undo_call != x->undo_gen) {
		if (x->n_undo == x->cap_undo) {
			unsigned int ncap = x->cap_undo ? x->cap_undo * 2 : 8;
			struct undo *u = sandbox_alloc(x, x->undo, x->cap_undo * sizeof(*u),
						       ncap * sizeof(*u));

			if (u == NULL)
				return decl_fail(L, line, "not enough memory for weir.set_class's "
						 "undo log (the policy script may use %zu bytes)",
						 x->mem_limit);
			x->undo = u;
			x->cap_undo = ncap;
		}
		x->class_line[d][i].undo_call = x->undo_gen;
		x->undo[x->n_undo++] = (struct undo){ .dir = d, .index = (unsigned int)i,
						      .conf = *old,
						      .set = x->class_line[d][i].set };
	}
	*old = c;
	x->class_line[d][i].set = line;
	x->last_set_line = line;
	x->dirty = true;
	return 0;
}

/* ---- hook registration ---- */

static int
add_timer(lua_State *L, int line, double period, int minute, double due)
{
	struct weir_lua *x = ctx_of(L);

	if (x->n_timers >= WEIR_LUA_MAX_TIMERS)
		return decl_fail(L, line, "more than %u timers (weir.every and weir.at together): "
				 "a policy may register at most %u (lua/README.md, Limits)",
				 WEIR_LUA_MAX_TIMERS, WEIR_LUA_MAX_TIMERS);
	if (x->n_timers == x->cap_timers) {
		unsigned int ncap = x->cap_timers ? x->cap_timers * 2 : 8;
		struct timer *t = realloc(x->timers, ncap * sizeof(*t));

		if (t == NULL)
			return decl_fail(L, line, "out of memory");
		x->timers = t;
		x->cap_timers = ncap;
	}
	lua_pushvalue(L, 2);
	x->timers[x->n_timers++] = (struct timer){ .ref = luaL_ref(L, LUA_REGISTRYINDEX),
						  .line = line, .period = period,
						  .minute = minute, .due = due };
	return 0;
}

/* weir.every(seconds, fn): fn(now) every `seconds`, the first time
 * `seconds` after the load. */
static int
l_every(lua_State *L)
{
	struct weir_lua *x = ctx_of(L);
	int line = caller_line(L);
	double s;

	top_level_only(L, line, "weir.every");
	if (lua_gettop(L) != 2 || lua_type(L, 1) != LUA_TNUMBER || lua_type(L, 2) != LUA_TFUNCTION)
		return decl_fail(L, line, "weir.every takes seconds and a function: "
				 "weir.every(60, function(now) ... end)");
	s = lua_tonumber(L, 1);
	/* Also refuses NaN. A shorter period would keep the management lcore
	 * in Lua for little gain. */
	if (!(s >= 0.1 && s <= 366 * 86400.0))
		return decl_fail(L, line, "weir.every: the period is %g seconds; it must be "
				 "between 0.1 and a year", s);
	return add_timer(L, line, s, -1, x->now + s);
}

/* The first time after `after` that the local clock reads `minute` (of
 * the day): mktime does the calendar and the daylight saving changes. */
static double
next_daily(double after, int minute)
{
	time_t t = (time_t)floor(after), due = 0;
	struct tm tm;

	if (localtime_r(&t, &tm) == NULL)
		return INFINITY;
	/* Today, else tomorrow; a day without that minute (a DST jump over
	 * it) gives mktime's normalised time, still after `after`. */
	for (int day = 0; day < 3; day++) {
		struct tm d = tm;

		d.tm_mday += day;
		d.tm_hour = minute / 60;
		d.tm_min = minute % 60;
		d.tm_sec = 0;
		d.tm_isdst = -1;
		due = mktime(&d);
		if (due != (time_t)-1 && (double)due > after)
			return (double)due;
	}
	return INFINITY;
}

/* weir.at("HH:MM", fn): fn(now) daily when the local clock reads HH:MM. */
static int
l_at(lua_State *L)
{
	struct weir_lua *x = ctx_of(L);
	int line = caller_line(L);
	int h, m, n = 0;
	const char *s;

	top_level_only(L, line, "weir.at");
	if (lua_gettop(L) != 2 || lua_type(L, 1) != LUA_TSTRING || lua_type(L, 2) != LUA_TFUNCTION)
		return decl_fail(L, line, "weir.at takes a time and a function: "
				 "weir.at(\"22:00\", function(now) ... end)");
	s = lua_tostring(L, 1);
	if (sscanf(s, "%2d:%2d%n", &h, &m, &n) != 2 || s[n] != '\0' || h < 0 || h > 23 || m < 0 ||
	    m > 59)
		return decl_fail(L, line, "weir.at: '%s' is not a time of day \"HH:MM\" "
				 "(00:00-23:59)", s);
	return add_timer(L, line, 0, h * 60 + m, next_daily(x->now, h * 60 + m));
}

static int
set_hook(lua_State *L, enum weir_lua_hook h, const char *fn)
{
	struct weir_lua *x = ctx_of(L);
	int line = caller_line(L);

	top_level_only(L, line, fn);
	if (lua_gettop(L) != 1 || lua_type(L, 1) != LUA_TFUNCTION)
		return decl_fail(L, line, "%s takes a function: %s(function(...) ... end)", fn, fn);
	/* One hook per event: a second one would silently replace the first. */
	if (x->hook_ref[h] != LUA_NOREF)
		return decl_fail(L, line, "%s: the hook is already set at line %d", fn,
				 x->hook_line[h]);
	x->hook_ref[h] = luaL_ref(L, LUA_REGISTRYINDEX);
	x->hook_line[h] = line;
	return 0;
}

static int
l_on_flow(lua_State *L)
{
	return set_hook(L, WEIR_LUA_FLOW, "weir.on_flow");
}

static int
l_on_flow_end(lua_State *L)
{
	return set_hook(L, WEIR_LUA_FLOW_END, "weir.on_flow_end");
}

static int
l_on_stats(lua_State *L)
{
	return set_hook(L, WEIR_LUA_STATS, "weir.on_stats");
}

/* weir.time(): the `now` of the running call, or of the last one. */
static int
l_time(lua_State *L)
{
	lua_pushnumber(L, ctx_of(L)->now);
	return 1;
}

/* weir.date([t]): os.date("*t", t) without os: the local calendar time. */
static int
l_date(lua_State *L)
{
	static const char *const f[] = { "year", "month", "day", "hour", "min", "sec", "wday",
					 "yday" };
	double now = luaL_optnumber(L, 1, ctx_of(L)->now);
	time_t t;
	struct tm tm;
	int v[8];

	if (!(now >= 0 && now < 1e15))
		return luaL_argerror(L, 1, "not a UNIX time");
	t = (time_t)floor(now);
	if (localtime_r(&t, &tm) == NULL)
		return luaL_argerror(L, 1, "not a representable time");
	v[0] = tm.tm_year + 1900;
	v[1] = tm.tm_mon + 1;
	v[2] = tm.tm_mday;
	v[3] = tm.tm_hour;
	v[4] = tm.tm_min;
	v[5] = tm.tm_sec;
	v[6] = tm.tm_wday + 1;
	v[7] = tm.tm_yday + 1;
	lua_createtable(L, 0, 9);
	for (int i = 0; i < 8; i++) {
		lua_pushinteger(L, v[i]);
		lua_setfield(L, -2, f[i]);
	}
	lua_pushboolean(L, tm.tm_isdst > 0);
	lua_setfield(L, -2, "isdst");
	return 1;
}

/* ---- loading ---- */

/* Protected: set up the sandbox, load the file as text and run it. */
static int
run_script(lua_State *L)
{
	static const luaL_Reg api[] = {
		{ "link", l_link }, { "class", l_class }, { "rule", l_rule },
		{ "set_class", l_set_class }, { "every", l_every }, { "at", l_at },
		{ "on_flow", l_on_flow }, { "on_flow_end", l_on_flow_end },
		{ "on_stats", l_on_stats }, { "time", l_time }, { "date", l_date },
		{ NULL, NULL },
	};
	struct weir_lua *x = lua_touserdata(L, 1);

	sandbox_open(L);
	luaL_newlibtable(L, api);
	lua_pushvalue(L, 1);
	luaL_setfuncs(L, api, 1);
	lua_setglobal(L, "weir");
	/* Lua names the file in its messages by a shortened path when the path
	 * is long; learn that name from an empty chunk so report_run can put
	 * the whole path back. */
	lua_pushfstring(L, "@%s", x->path);
	if (luaL_loadbufferx(L, "", 0, lua_tostring(L, -1), "t") == LUA_OK) {
		lua_Debug ar;

		lua_getinfo(L, ">S", &ar);
		snprintf(x->short_src, sizeof(x->short_src), "%s", ar.short_src);
	} else {
		lua_pop(L, 1);
	}
	lua_pop(L, 1);
	/* Text only: a bytecode chunk can crash the VM (it is not verified). */
	if (luaL_loadfilex(L, x->path, "t") != LUA_OK)
		return lua_error(L);
	start_clock(x);
	lua_sethook(L, sandbox_hook, LUA_MASKCOUNT | LUA_MASKLINE, x->hook_step);
	lua_call(L, 0, 0);
	lua_sethook(L, NULL, 0, 0);
	return 0;
}

/* The script's outcome as one message; status is lua_pcall's. */
static void
report_run(lua_State *L, const struct weir_lua *x, int status, char *err, size_t errlen)
{
	if (x->failed) {
		snprintf(err, errlen, "%s", x->err);
	} else if (status == LUA_ERRMEM) {
		snprintf(err, errlen, "%s:%d: not enough memory (the policy script may use %zu bytes)",
			 x->path, x->line, x->mem_limit);
	} else if (lua_type(L, -1) == LUA_TSTRING) {
		const char *msg = lua_tostring(L, -1);
		size_t n = strlen(x->short_src);

		/* Lua's syntax and runtime errors carry its FILE:LINE already,
		 * FILE possibly shortened; a file that cannot be opened or is
		 * bytecode has no position. */
		if (n > 0 && strncmp(msg, x->short_src, n) == 0 && msg[n] == ':')
			snprintf(err, errlen, "%s%s", x->path, msg + n);
		else
			snprintf(err, errlen, "%s:%d: %s", x->path, x->line, msg);
	} else {
		snprintf(err, errlen, "%s:%d: error raised with a %s value instead of a message",
			 x->path, x->line, luaL_typename(L, -1));
	}
	/* Every message of a run or a hook passes here on its way to the log
	 * and the API (reload_error, hook errors, PUT's 422): a script's
	 * tostring(f) must not show API clients where the heap is. */
	weir_lua_hide_addresses(err, errlen);
}

void
weir_lua_close(struct weir_lua *x)
{
	if (x == NULL)
		return;
	if (x->L != NULL)
		lua_close(x->L);
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		free(x->classes[d]);
		free(x->class_line[d]);
		free(x->good[d]);
	}
	free(x->rules);
	free(x->rule_line);
	free(x->undo);
	free(x->timers);
	free(x->path);
	free(x);
}

struct weir_lua *
weir_lua_open(const char *path, const struct weir_policy_lua_limits *lim, char *err, size_t errlen)
{
	struct weir_lua *x;
	struct timespec ts;
	int status;

	/* On the heap: lua_newstate keeps a pointer to it for the allocator. */
	x = calloc(1, sizeof(*x));
	if (x == NULL || (x->path = strdup(path)) == NULL) {
		snprintf(err, errlen, "%s:0: out of memory", path);
		free(x);
		return NULL;
	}
	x->mem_limit = lim && lim->mem_bytes ? lim->mem_bytes : WEIR_POLICY_LUA_MEM_DEFAULT;
	x->insn_limit = lim && lim->instructions ? lim->instructions : WEIR_POLICY_LUA_INSNS_DEFAULT;
	x->hook_step = x->insn_limit < HOOK_COUNT ? (int)x->insn_limit : HOOK_COUNT;
	x->max_rules = lim && lim->max_rules ? lim->max_rules : WEIR_LUA_MAX_RULES;
	if (x->max_rules > WEIR_LUA_MAX_RULES_CEIL)
		x->max_rules = WEIR_LUA_MAX_RULES_CEIL;
	x->time_limit = (lim && lim->time_ms ? lim->time_ms : WEIR_POLICY_LUA_TIME_DEFAULT_MS) / 1e3;
	x->default_limit = lim && lim->default_limit ? lim->default_limit
						     : WEIR_POLICY_LUA_LIMIT_DEFAULT;
	x->default_mode = lim ? lim->default_mode : WEIR_MODE_POSTACK;
	x->no_aqm = lim ? lim->no_aqm : 0;
	x->qm = lim ? lim->qm : 0;
	if (lim)
		x->qm_params = lim->qm_params;
	x->young = lim ? lim->young : WEIR_DRR_YOUNG_DEFAULT;
	x->new_quanta = lim ? lim->new_quanta : WEIR_DRR_NEW_QUANTA_DEFAULT;
	x->plain = lim ? lim->plain : 0;
	if (x->default_mode >= WEIR_MODE__COUNT)
		x->default_mode = WEIR_MODE_POSTACK;
	if (lim && lim->start_time > 0) {
		x->now = lim->start_time;
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		x->now = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
	}
	for (int h = 0; h < WEIR_LUA__HOOKS; h++)
		x->hook_ref[h] = LUA_NOREF;

	x->L = lua_newstate(sandbox_alloc, x);
	if (x->L == NULL) {
		snprintf(err, errlen, "%s:0: cannot create a Lua state within %zu bytes", path,
			 x->mem_limit);
		goto fail;
	}
	/* Everything, the library setup included, runs protected: an error
	 * (memory above all) anywhere must come back here, never abort. */
	lua_pushcfunction(x->L, run_script);
	lua_pushlightuserdata(x->L, x);
	status = lua_pcall(x->L, 1, 0, 0);
	stop_clock();
	if (status != LUA_OK || x->failed) {
		report_run(x->L, x, status, err, errlen);
		goto fail;
	}
	lua_settop(x->L, 0);
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		size_t n = x->n_classes[d] * sizeof(*x->good[d]);

		if (n == 0)
			continue;
		x->good[d] = malloc(n);
		if (x->good[d] == NULL) {
			snprintf(err, errlen, "%s:0: out of memory", path);
			goto fail;
		}
		memcpy(x->good[d], x->classes[d], n);
	}
	return x;
fail:
	weir_lua_close(x);
	return NULL;
}

/* Map a builder error to the declaration it is about: the set_class that
 * made it fail if there was one since the last compile (the last good
 * compile had the same declarations without it). */
static void
report_build(const struct weir_lua *x, const struct weir_policy_err *e, char *err, size_t errlen)
{
	int line = 0;

	switch (e->kind) {
	case WEIR_POLICY_ERR_TREE:
		line = x->link_line[e->dir];
		break;
	case WEIR_POLICY_ERR_CLASS:
		if (e->index >= 0 && (unsigned int)e->index < x->n_classes[e->dir]) {
			const struct class_line *cl = &x->class_line[e->dir][e->index];

			line = cl->set ? cl->set : cl->decl;
		}
		break;
	case WEIR_POLICY_ERR_RULE:
		if (e->index >= 0 && (unsigned int)e->index < x->n_rules)
			line = x->rule_line[e->index];
		if (x->last_set_line != 0)
			line = x->last_set_line;
		snprintf(err, errlen, "%s:%d: rule %d: %s", x->path, line, e->index + 1, e->msg);
		return;
	default:
		break;
	}
	if (x->last_set_line != 0 && (e->kind != WEIR_POLICY_ERR_CLASS || line == 0 ||
				      line == x->class_line[e->dir][e->index].decl))
		line = x->last_set_line;
	snprintf(err, errlen, "%s:%d: %s", x->path, line, e->msg);
}

/* The classes as compiled become the ones to return to; or, after a
 * failure, the classes return to them. */
static void
settle(struct weir_lua *x, bool good)
{
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		size_t n = x->n_classes[d] * sizeof(*x->good[d]);

		if (n == 0)
			continue;
		if (good)
			memcpy(x->good[d], x->classes[d], n);
		else
			memcpy(x->classes[d], x->good[d], n);
		for (unsigned int i = 0; i < x->n_classes[d]; i++)
			x->class_line[d][i].set = 0;
	}
	x->last_set_line = 0;
	x->dirty = false;
}

static struct weir_policy *
compile(struct weir_lua *x, uint32_t epoch, char *err, size_t errlen)
{
	struct weir_policy_conf pc = { 0 };
	struct weir_policy_err e;
	struct weir_policy *p;

	if (x->link_line[0] == 0 && x->link_line[1] == 0) {
		snprintf(err, errlen, "%s:%d: the policy declares no weir.link{ dir = \"outbound\" "
			 "or \"inbound\", rate = ... }: nothing to shape", x->path,
			 x->n_rules ? x->rule_line[0] : 0);
		return NULL;
	}
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		struct weir_policy_tree_conf *tc = &pc.tree[d];

		*tc = x->tree[d];
		tc->classes = x->classes[d];
		tc->n_classes = (uint16_t)x->n_classes[d];
		/* The config file's check, at the link's line. */
		if (tc->n_classes > 0 && tc->default_class[0] == '\0') {
			snprintf(err, errlen, "%s:%d: the %s link has classes, so it needs default = "
				 "\"<class>\" for traffic no rule matches", x->path,
				 x->link_line[d], dir_name[d]);
			return NULL;
		}
	}
	pc.rules = x->rules;
	pc.n_rules = x->n_rules;
	p = weir_policy_build(&pc, epoch, &e);
	if (p == NULL)
		report_build(x, &e, err, errlen);
	return p;
}

struct weir_policy *
weir_lua_compile_change(struct weir_lua *x, uint32_t epoch, char *err, size_t errlen)
{
	char msg[MSG_LEN];
	struct weir_policy *p = compile(x, epoch, msg, sizeof(msg));

	x->cnt.compiles++;
	if (p == NULL) {
		x->cnt.compile_errors++;
		snprintf(x->cnt.last_error, sizeof(x->cnt.last_error), "%s", msg);
		snprintf(err, errlen, "%s", msg);
		settle(x, false);
	}
	return p;
}

void
weir_lua_commit(struct weir_lua *x)
{
	settle(x, true);
}

struct weir_policy *
weir_lua_compile(struct weir_lua *x, uint32_t epoch, char *err, size_t errlen)
{
	struct weir_policy *p = weir_lua_compile_change(x, epoch, err, errlen);

	if (p != NULL)
		weir_lua_commit(x);
	return p;
}

struct weir_policy *
weir_policy_lua_load(const char *path, uint32_t epoch, const struct weir_policy_lua_limits *lim,
		     char *err, size_t errlen)
{
	struct weir_lua *x = weir_lua_open(path, lim, err, errlen);
	struct weir_policy *p;

	if (x == NULL)
		return NULL;
	p = weir_lua_compile(x, epoch, err, errlen);
	weir_lua_close(x);
	return p;
}

/* ---- calling hooks ---- */

struct call {
	struct weir_lua *x;
	enum weir_lua_hook kind;
	int ref;
	int line;                       /* where the hook was registered */
	double now;                     /* WEIR_LUA_TIMER */
	const struct weir_lua_flow *flow;
	bool flow_end;
	const struct weir_lua_stats *stats;
};

static void
set_int(lua_State *L, const char *k, lua_Integer v)
{
	lua_pushinteger(L, v);
	lua_setfield(L, -2, k);
}

static void
set_str(lua_State *L, const char *k, const char *v)
{
	lua_pushstring(L, v);
	lua_setfield(L, -2, k);
}

static void
push_addr(lua_State *L, uint8_t family, const uint8_t *a)
{
	char buf[INET6_ADDRSTRLEN];

	if (inet_ntop(family == AF_INET6 ? AF_INET6 : AF_INET, a, buf, sizeof(buf)) == NULL)
		buf[0] = '\0';
	lua_pushstring(L, buf);
}

static void
push_flow(lua_State *L, const struct weir_lua_flow *f, bool end)
{
	lua_createtable(L, 0, end ? 17 : 12);
	set_str(L, "dir", dir_name[f->dir ? 1 : 0]);
	switch (f->proto) {
	case IPPROTO_TCP:
		set_str(L, "proto", "tcp");
		break;
	case IPPROTO_UDP:
		set_str(L, "proto", "udp");
		break;
	case IPPROTO_ICMP:
		set_str(L, "proto", "icmp");
		break;
	case IPPROTO_ICMPV6:
		set_str(L, "proto", "icmpv6");
		break;
	default:
		set_int(L, "proto", f->proto);
		break;
	}
	set_int(L, "family", f->family == AF_INET6 ? 6 : 4);
	push_addr(L, f->family, f->lan);
	lua_setfield(L, -2, "lan");
	push_addr(L, f->family, f->wan);
	lua_setfield(L, -2, "wan");
	set_int(L, "lan_port", f->lan_port);
	set_int(L, "wan_port", f->wan_port);
	set_int(L, "vlan", f->vlan);
	set_int(L, "dscp", f->dscp);
	lua_createtable(L, 0, WEIR_POLICY_DIRS);
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		char name[WEIR_POLICY_NAME_LEN];

		/* not trusting the C side to have terminated it */
		snprintf(name, sizeof(name), "%.*s", (int)sizeof(f->cls[d]), f->cls[d]);
		if (name[0] != '\0')
			set_str(L, dir_name[d], name);
	}
	lua_setfield(L, -2, "class");
	if (!end)
		return;
	set_int(L, "bytes_out", (lua_Integer)f->bytes[0]);
	set_int(L, "bytes_in", (lua_Integer)f->bytes[1]);
	set_int(L, "packets_out", (lua_Integer)f->packets[0]);
	set_int(L, "packets_in", (lua_Integer)f->packets[1]);
	lua_pushnumber(L, f->duration);
	lua_setfield(L, -2, "duration");
}

static void
push_stats(lua_State *L, const struct weir_lua_stats *s)
{
	lua_createtable(L, 0, 3);
	lua_pushnumber(L, s->now);
	lua_setfield(L, -2, "now");
	lua_createtable(L, 0, WEIR_POLICY_DIRS);
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		lua_createtable(L, 0, (int)s->n_classes[d]);
		for (unsigned int i = 0; i < s->n_classes[d]; i++) {
			const struct weir_lua_class_stats *c = &s->classes[d][i];

			lua_createtable(L, 0, 4);
			set_int(L, "bytes", (lua_Integer)c->bytes);
			set_int(L, "pkts", (lua_Integer)c->pkts);
			set_int(L, "drops", (lua_Integer)c->drops);
			set_int(L, "rate_bps", (lua_Integer)c->rate_bps);
			lua_pushlstring(L, c->name, strnlen(c->name, sizeof(c->name)));
			lua_insert(L, -2);
			lua_rawset(L, -3);
		}
		lua_setfield(L, -2, dir_name[d]);
	}
	lua_setfield(L, -2, "classes");
	lua_createtable(L, 0, (int)s->n_hosts);
	for (unsigned int i = 0; i < s->n_hosts; i++) {
		const struct weir_lua_host_stats *h = &s->hosts[i];

		push_addr(L, h->family, h->addr);
		lua_createtable(L, 0, 2);
		set_int(L, "bytes_out", (lua_Integer)h->bytes_out);
		set_int(L, "bytes_in", (lua_Integer)h->bytes_in);
		lua_rawset(L, -3);
	}
	lua_setfield(L, -2, "hosts");
}

/* A name a rule could send a flow to: a leaf of direction d's tree. */
static bool
is_leaf(const struct weir_lua *x, int d, const char *name)
{
	bool found = false;

	if (x->link_line[d] == 0)
		return false;
	if (x->n_classes[d] == 0)
		return strcmp(name, "default") == 0;
	for (unsigned int i = 0; i < x->n_classes[d]; i++) {
		if (strcmp(x->classes[d][i].parent, name) == 0)
			return false;
		found |= strcmp(x->classes[d][i].name, name) == 0;
	}
	return found;
}

/* Protected: build the hook's argument and run it with a fresh budget. */
static int
call_protected(lua_State *L)
{
	struct call *c = lua_touserdata(L, 1);
	struct weir_lua *x = c->x;

	lua_rawgeti(L, LUA_REGISTRYINDEX, c->ref);
	switch (c->kind) {
	case WEIR_LUA_TIMER:
		lua_pushnumber(L, c->now);
		break;
	case WEIR_LUA_FLOW:
	case WEIR_LUA_FLOW_END:
		push_flow(L, c->flow, c->flow_end);
		break;
	default:
		push_stats(L, c->stats);
		break;
	}
	x->insns = 0;
	x->line = c->line;
	start_clock(x);
	lua_sethook(L, sandbox_hook, LUA_MASKCOUNT | LUA_MASKLINE, x->hook_step);
	lua_call(L, 1, 1);
	lua_sethook(L, NULL, 0, 0);
	if (c->kind == WEIR_LUA_FLOW) {
		const char *name;
		size_t len;

		if (lua_isnil(L, -1) || (lua_isboolean(L, -1) && !lua_toboolean(L, -1)))
			return 0;
		if (lua_type(L, -1) != LUA_TSTRING)
			return luaL_error(L, "on_flow must return a class name or nil, not a %s",
					  luaL_typename(L, -1));
		name = lua_tolstring(L, -1, &len);
		/* "bulk\0x" is not the class bulk (C would read it so). */
		if (memchr(name, '\0', len) != NULL)
			return luaL_error(L, "on_flow returned a name holding a NUL byte (\\0)");
		if (!is_leaf(x, 0, name) && !is_leaf(x, 1, name))
			return luaL_error(L, "on_flow returned '%s', which is not a leaf class of "
					  "either direction", name);
	}
	return 1;
}

/* Run one hook. 0 with its result on the stack (the caller clears it), or
 * -1 with the error reported, counted, and its set_class calls undone. */
static int
call_hook(struct weir_lua *x, struct call *c, char *err, size_t errlen)
{
	lua_State *L = x->L;
	bool dirty = x->dirty;
	int set_line = x->last_set_line, status;

	c->x = x;
	x->cnt.hook[c->kind].calls++;
	x->failed = false;
	x->n_undo = 0;
	x->undo_gen++;                  /* from 1: a class's undo_call starts at 0 */
	x->in_hook = true;
	lua_settop(L, 0);
	lua_pushcfunction(L, call_protected);
	lua_pushlightuserdata(L, c);
	status = lua_pcall(L, 1, 1, 0);
	stop_clock();
	/* after a runaway hook it still fires at every instruction */
	lua_sethook(L, NULL, 0, 0);
	x->in_hook = false;
	if (status == LUA_OK && !x->failed)
		return 0;
	report_run(L, x, status, x->cnt.last_error, sizeof(x->cnt.last_error));
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s", x->cnt.last_error);
	x->cnt.hook[c->kind].errors++;
	while (x->n_undo > 0) {
		const struct undo *u = &x->undo[--x->n_undo];

		x->classes[u->dir][u->index] = u->conf;
		x->class_line[u->dir][u->index].set = u->set;
	}
	x->dirty = dirty;
	x->last_set_line = set_line;
	x->failed = false;
	lua_settop(L, 0);
	return -1;
}

double
weir_lua_next_timer(const struct weir_lua *x)
{
	double t = INFINITY;

	for (unsigned int i = 0; i < x->n_timers; i++)
		if (x->timers[i].due < t)
			t = x->timers[i].due;
	return t;
}

int
weir_lua_run_timers(struct weir_lua *x, double now, char *err, size_t errlen)
{
	return weir_lua_run_timers_for(x, now, INFINITY, NULL, err, errlen);
}

int
weir_lua_run_timers_for(struct weir_lua *x, double now, double budget_s, bool *more, char *err,
			size_t errlen)
{
	const double t0 = mono_now();
	const unsigned int n = x->n_timers, first = n ? x->timer_next % n : 0;
	int ran = 0;
	bool failed = false;

	if (more != NULL)
		*more = false;
	x->now = now;
	/* From where the last wake's budget stopped, so the timers after a
	 * slow one are not the ones always left for later. */
	for (unsigned int k = 0; k < n; k++) {
		const unsigned int i = (first + k) % n;
		struct timer *t = &x->timers[i];
		struct call c = { .kind = WEIR_LUA_TIMER, .ref = t->ref, .line = t->line,
				  .now = now };

		if (!(t->due <= now))
			continue;
		/* The budget counts every call: this one and the rest wait for
		 * the next wake, still due (a call started is finished; one
		 * always runs, so a wake whose budget is gone still moves on). */
		if (ran > 0 && mono_now() - t0 >= budget_s) {
			x->timer_next = i;
			if (more != NULL)
				*more = true;
			break;
		}
		/* Once per call however late: a management lcore that was busy
		 * for minutes must not run a minute timer a hundred times. */
		if (t->minute >= 0) {
			t->due = next_daily(now, t->minute);
		} else {
			t->due += t->period;
			if (t->due <= now)
				t->due = now + t->period;
		}
		if (call_hook(x, &c, failed ? NULL : err, errlen) < 0)
			failed = true;
		lua_settop(x->L, 0);
		ran++;
	}
	return failed ? -1 : ran;
}

int
weir_lua_on_flow(struct weir_lua *x, const struct weir_lua_flow *f, char *cls, size_t clslen,
		 char *err, size_t errlen)
{
	struct call c = { .kind = WEIR_LUA_FLOW, .ref = x->hook_ref[WEIR_LUA_FLOW],
			  .line = x->hook_line[WEIR_LUA_FLOW], .flow = f };
	int r = 0;

	if (c.ref == LUA_NOREF)
		return 0;
	if (call_hook(x, &c, err, errlen) < 0)
		return -1;
	if (lua_type(x->L, -1) == LUA_TSTRING) {
		snprintf(cls, clslen, "%s", lua_tostring(x->L, -1));
		r = 1;
	}
	lua_settop(x->L, 0);
	return r;
}

int
weir_lua_on_flow_end(struct weir_lua *x, const struct weir_lua_flow *f, char *err, size_t errlen)
{
	struct call c = { .kind = WEIR_LUA_FLOW_END, .ref = x->hook_ref[WEIR_LUA_FLOW_END],
			  .line = x->hook_line[WEIR_LUA_FLOW_END], .flow = f, .flow_end = true };
	int r;

	if (c.ref == LUA_NOREF)
		return 0;
	r = call_hook(x, &c, err, errlen);
	lua_settop(x->L, 0);
	return r;
}

int
weir_lua_on_stats(struct weir_lua *x, const struct weir_lua_stats *s, char *err, size_t errlen)
{
	struct call c = { .kind = WEIR_LUA_STATS, .ref = x->hook_ref[WEIR_LUA_STATS],
			  .line = x->hook_line[WEIR_LUA_STATS], .stats = s };
	int r;

	x->now = s->now;
	if (c.ref == LUA_NOREF)
		return 0;
	r = call_hook(x, &c, err, errlen);
	lua_settop(x->L, 0);
	return r;
}

bool
weir_lua_dirty(const struct weir_lua *x)
{
	return x->dirty;
}

bool
weir_lua_has(const struct weir_lua *x, enum weir_lua_hook h)
{
	if (h == WEIR_LUA_TIMER)
		return x->n_timers > 0;
	return h < WEIR_LUA__HOOKS && x->hook_ref[h] != LUA_NOREF;
}

const struct weir_lua_counters *
weir_lua_counters(const struct weir_lua *x)
{
	return &x->cnt;
}
