/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the Lua policy's sandbox (policy_lua.c): the allocator with its
 * memory limit, the instruction budget, the time limit (the watchdog or the
 * thread's own clock), the stop flag, and the libraries a script gets with
 * their bounded functions.
 */
#include "policy_lua_int.h"

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

double
pl_mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A run (the top level or one hook call) starts: watch its deadline. */
void
pl_start_clock(struct weir_lua *x)
{
	x->deadline = pl_mono_now() + x->time_limit;
	if (own_clock)
		return;
	pthread_once(&wd_once, wd_start);
	atomic_store(&wd_deadline, mono_ns() + (uint64_t)(x->time_limit * 1e9));
}

void
pl_stop_clock(void)
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
	       : pl_mono_now() >= x->deadline;
}

static bool
stopping(void)
{
	return stop_flag != NULL && *stop_flag;
}

/* Every allocation of the state goes through here, so the limit covers
 * strings, tables, closures and Lua's own structures alike. */
void *
pl_sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
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

struct weir_lua *
pl_ctx_of(lua_State *L)
{
	return lua_touserdata(L, lua_upvalueindex(1));
}

/* The line hook keeps the running line for errors that carry none (out of
 * memory); the count hook enforces the instruction budget. */
void
pl_sandbox_hook(lua_State *L, lua_Debug *ar)
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
	lua_sethook(L, pl_sandbox_hook, LUA_MASKCOUNT, 1);
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
 * calling Lua line, which pl_report_run maps to the whole path). */
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

void
pl_sandbox_open(lua_State *L)
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
