/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the Lua policy front end (policy_lua.h, lua/README.md).
 *
 * The script only declares: weir.link, weir.class and weir.rule copy their
 * table into the same confs the config file fills (lib/policy.h), checking
 * keys and values there and then so an error names the line of the call.
 * Once the script has finished, the Lua state is closed and the policy
 * builder does the semantic checks; its errors (class i of a tree, rule i)
 * are mapped back to the line each declaration remembered.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "cbq.h"
#include "policy_lua.h"
#include "policy_values.h"

#define MSG_LEN 512
/* Instructions between two budget checks: small enough to stop close to
 * the budget, large enough that the hook costs nothing measurable. */
#define HOOK_COUNT 1000

static const char *const dir_name[WEIR_POLICY_DIRS] = { "outbound", "inbound" };

/* What the script declared, and the sandbox's accounting. */
struct lua_ctx {
	const char *path;
	/* per direction: the link (tree conf) and its classes */
	struct weir_policy_tree_conf tree[WEIR_POLICY_DIRS];
	int link_line[WEIR_POLICY_DIRS];                /* 0: no weir.link for it */
	struct weir_policy_class_conf *classes[WEIR_POLICY_DIRS];
	int *class_line[WEIR_POLICY_DIRS];
	unsigned int n_classes[WEIR_POLICY_DIRS];
	unsigned int cap_classes[WEIR_POLICY_DIRS];
	struct weir_policy_rule_conf *rules;
	int *rule_line;
	unsigned int n_rules;
	unsigned int cap_rules;
	/* The first declaration or budget error. Sticky: a script that
	 * pcall()s a bad declaration must not get a policy without it. */
	bool failed;
	char err[MSG_LEN];
	/* sandbox */
	size_t mem_used;
	size_t mem_limit;
	uint64_t insns;                 /* executed so far, in HOOK_COUNT steps */
	uint64_t insn_limit;
	int hook_step;                  /* instructions per count hook */
	int line;                       /* the line running now (line hook) */
	char short_src[LUA_IDSIZE];     /* how Lua's own messages name the file */
	uint32_t default_limit;
	uint8_t default_mode;
};

/* ---- sandbox ---- */

/* Every allocation of the state goes through here, so the limit covers
 * strings, tables, closures and Lua's own structures alike. */
static void *
sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	struct lua_ctx *x = ud;
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

static struct lua_ctx *
ctx_of(lua_State *L)
{
	return lua_touserdata(L, lua_upvalueindex(1));
}

/* The line hook keeps the running line for errors that carry none (out of
 * memory); the count hook enforces the instruction budget. */
static void
sandbox_hook(lua_State *L, lua_Debug *ar)
{
	struct lua_ctx *x;
	char msg[MSG_LEN];

	/* The allocator's user data is the context: no stack work per line. */
	lua_getallocf(L, (void **)&x);
	if (ar->event == LUA_HOOKLINE) {
		x->line = ar->currentline;
		return;
	}
	if (ar->event != LUA_HOOKCOUNT)
		return;
	x->insns += x->hook_step;
	if (x->insns < x->insn_limit)
		return;
	lua_getinfo(L, "l", ar);
	if (ar->currentline > 0)
		x->line = ar->currentline;
	snprintf(msg, sizeof(msg), "%s:%d: instruction budget exhausted (%llu instructions)",
		 x->path, x->line, (unsigned long long)x->insn_limit);
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
	struct lua_ctx *x = ctx_of(L);
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
		if (lua_rawlen(L, -1) >= outlen)
			decl_fail(L, line, "'%s' is longer than %zu characters", key, outlen - 1);
		snprintf(out, outlen, "%s", lua_tostring(L, -1));
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
grow(lua_State *L, int line, void **arr, int **lines, unsigned int *cap, unsigned int n,
     size_t size)
{
	unsigned int ncap;
	void *a;
	int *l;

	if (n < *cap)
		return;
	ncap = *cap ? *cap * 2 : 16;
	a = realloc(*arr, (size_t)ncap * size);
	if (a == NULL)
		decl_fail(L, line, "out of memory");
	*arr = a;
	l = realloc(*lines, (size_t)ncap * sizeof(int));
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
	struct lua_ctx *x = ctx_of(L);
	int line = caller_line(L);
	struct weir_policy_tree_conf *tc;
	int d;

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
	x->link_line[d] = line;
	return 0;
}

/* weir.class{ dir, name, parent, rate, ceil, prio, limit, quantum, flow_min,
 * admission, fallback, mode }: the config file's class keys, plus dir. */
static int
l_class(lua_State *L)
{
	static const char *const keys[] = { "dir", "name", "parent", "rate", "ceil", "prio",
					    "limit", "quantum", "flow_min", "admission",
					    "fallback", "mode", NULL };
	struct lua_ctx *x = ctx_of(L);
	int line = caller_line(L);
	struct weir_policy_class_conf c = { 0 };
	char admit[16], msg[256];
	int d;

	check_args(L, line, "weir.class", keys);
	d = get_dir(L, line, "weir.class");
	if (x->link_line[d] == 0)
		return decl_fail(L, line, "weir.class: declare weir.link{ dir = \"%s\", rate = ... } "
				 "before its classes", dir_name[d]);
	if (x->n_classes[d] >= WEIR_CBQ_MAX_CLASSES - 1)
		return decl_fail(L, line, "the %s tree has more than %d classes", dir_name[d],
				 WEIR_CBQ_MAX_CLASSES - 1);
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
	if (weir_value_admission(c.name, admit, &c.admit, msg, sizeof(msg)) < 0)
		return decl_fail(L, line, "%s", msg);
	c.prio = (uint8_t)get_int(L, line, "prio", 0, 0, WEIR_CBQ_NUM_PRIO - 1);
	c.limit = (uint32_t)get_int(L, line, "limit", 0, 1, 1 << 24);
	c.quantum = (uint32_t)get_int(L, line, "quantum", 0, 64, 1 << 20);

	grow(L, line, (void **)&x->classes[d], &x->class_line[d], &x->cap_classes[d],
	     x->n_classes[d], sizeof(c));
	x->classes[d][x->n_classes[d]] = c;
	x->class_line[d][x->n_classes[d]] = line;
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

/* weir.rule{ class, weight, proto, src, dst, lan, wan, *_port, vlan, dscp, dir }:
 * appended, so rules match in call order. */
static int
l_rule(lua_State *L)
{
	static const char *const keys[] = { "class", "weight", "proto", "src", "dst", "lan", "wan",
					    "src_port", "dst_port", "lan_port", "wan_port", "vlan",
					    "dscp", "dir", NULL };
	static const char *const side_key[WEIR_CLS__SIDES] = { "src", "dst", "lan", "wan" };
	static const char *const port_key[WEIR_CLS__SIDES] = { "src_port", "dst_port", "lan_port",
							       "wan_port" };
	struct lua_ctx *x = ctx_of(L);
	int line = caller_line(L);
	struct weir_policy_rule_conf rc = { 0 };
	struct weir_classify_rule *m = &rc.match;
	/* Room for "outbound": the classes' dir key takes it, and a rule given
	 * it should hear what a rule's dir means, not that it is too long. */
	char dir[16], msg[256];

	check_args(L, line, "weir.rule", keys);
	if (x->n_rules >= WEIR_CLS_MAX_RULES)
		return decl_fail(L, line, "more than %u rules", WEIR_CLS_MAX_RULES);
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
	get_str(L, line, "weir.rule", "dir", "any", dir, sizeof(dir));
	if (weir_value_rule_dir(dir, &m->dir, msg, sizeof(msg)) < 0)
		decl_fail(L, line, "%s", msg);

	grow(L, line, (void **)&x->rules, &x->rule_line, &x->cap_rules, x->n_rules, sizeof(rc));
	x->rules[x->n_rules] = rc;
	x->rule_line[x->n_rules] = line;
	x->n_rules++;
	return 0;
}

/* Protected: set up the sandbox, load the file as text and run it. */
static int
run_script(lua_State *L)
{
	static const luaL_Reg api[] = {
		{ "link", l_link }, { "class", l_class }, { "rule", l_rule }, { NULL, NULL },
	};
	struct lua_ctx *x = lua_touserdata(L, 1);

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
	x->hook_step = x->insn_limit < HOOK_COUNT ? (int)x->insn_limit : HOOK_COUNT;
	lua_sethook(L, sandbox_hook, LUA_MASKCOUNT | LUA_MASKLINE, x->hook_step);
	lua_call(L, 0, 0);
	lua_sethook(L, NULL, 0, 0);
	return 0;
}

static void
ctx_free(struct lua_ctx *x)
{
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		free(x->classes[d]);
		free(x->class_line[d]);
	}
	free(x->rules);
	free(x->rule_line);
}

/* Map a builder error to the declaration it is about. */
static void
report_build(const struct lua_ctx *x, const struct weir_policy_err *e, char *err, size_t errlen)
{
	int line = 0;

	switch (e->kind) {
	case WEIR_POLICY_ERR_TREE:
		line = x->link_line[e->dir];
		break;
	case WEIR_POLICY_ERR_CLASS:
		if (e->index >= 0 && (unsigned int)e->index < x->n_classes[e->dir])
			line = x->class_line[e->dir][e->index];
		break;
	case WEIR_POLICY_ERR_RULE:
		if (e->index >= 0 && (unsigned int)e->index < x->n_rules)
			line = x->rule_line[e->index];
		snprintf(err, errlen, "%s:%d: rule %d: %s", x->path, line, e->index + 1, e->msg);
		return;
	default:
		break;
	}
	snprintf(err, errlen, "%s:%d: %s", x->path, line, e->msg);
}

/* The script's outcome as one message; status is lua_pcall's. */
static void
report_run(lua_State *L, const struct lua_ctx *x, int status, char *err, size_t errlen)
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
}

struct weir_policy *
weir_policy_lua_load(const char *path, uint32_t epoch, const struct weir_policy_lua_limits *lim,
		     char *err, size_t errlen)
{
	struct lua_ctx *x;
	struct weir_policy_conf pc = { 0 };
	struct weir_policy_err e;
	struct weir_policy *p = NULL;
	lua_State *L;
	int status;

	/* On the heap: lua_newstate keeps a pointer to it for the allocator. */
	x = calloc(1, sizeof(*x));
	if (x == NULL) {
		snprintf(err, errlen, "%s:0: out of memory", path);
		return NULL;
	}
	x->path = path;
	x->mem_limit = lim && lim->mem_bytes ? lim->mem_bytes : WEIR_POLICY_LUA_MEM_DEFAULT;
	x->insn_limit = lim && lim->instructions ? lim->instructions : WEIR_POLICY_LUA_INSNS_DEFAULT;
	x->default_limit = lim && lim->default_limit ? lim->default_limit
						     : WEIR_POLICY_LUA_LIMIT_DEFAULT;
	x->default_mode = lim ? lim->default_mode : WEIR_MODE_POSTACK;
	if (x->default_mode >= WEIR_MODE__COUNT)
		x->default_mode = WEIR_MODE_POSTACK;

	L = lua_newstate(sandbox_alloc, x);
	if (L == NULL) {
		snprintf(err, errlen, "%s:0: cannot create a Lua state within %zu bytes", path,
			 x->mem_limit);
		goto out;
	}
	/* Everything, the library setup included, runs protected: an error
	 * (memory above all) anywhere must come back here, never abort. */
	lua_pushcfunction(L, run_script);
	lua_pushlightuserdata(L, x);
	status = lua_pcall(L, 1, 0, 0);
	if (status != LUA_OK || x->failed) {
		report_run(L, x, status, err, errlen);
		lua_close(L);
		goto out;
	}
	lua_close(L);

	if (x->link_line[0] == 0 && x->link_line[1] == 0) {
		snprintf(err, errlen, "%s:%d: the policy declares no weir.link{ dir = \"outbound\" "
			 "or \"inbound\", rate = ... }: nothing to shape", path,
			 x->n_rules ? x->rule_line[0] : 0);
		goto out;
	}
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		struct weir_policy_tree_conf *tc = &pc.tree[d];

		*tc = x->tree[d];
		tc->classes = x->classes[d];
		tc->n_classes = (uint16_t)x->n_classes[d];
		/* The config file's check, at the link's line. */
		if (tc->n_classes > 0 && tc->default_class[0] == '\0') {
			snprintf(err, errlen, "%s:%d: the %s link has classes, so it needs default = "
				 "\"<class>\" for traffic no rule matches", path, x->link_line[d],
				 dir_name[d]);
			goto out;
		}
	}
	pc.rules = x->rules;
	pc.n_rules = x->n_rules;
	p = weir_policy_build(&pc, epoch, &e);
	if (p == NULL)
		report_build(x, &e, err, errlen);
out:
	ctx_free(x);
	free(x);
	return p;
}
