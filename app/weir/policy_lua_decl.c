/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the declaration API of a Lua policy (policy_lua.c): weir.link,
 * weir.class and weir.rule copy their table into the confs the config file
 * fills, checking keys and values at the call's line; weir.set_class edits
 * a declared class from a hook with an undo log; weir.every, weir.at and
 * weir.on_* register hooks; weir.time and weir.date.
 */
#include "policy_lua_int.h"

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
	struct weir_lua *x = pl_ctx_of(L);
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

	if (pl_ctx_of(L)->in_hook)
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
int
pl_api_link(lua_State *L)
{
	static const char *const keys[] = { "dir", "rate", "default", "limit", "mode", NULL };
	struct weir_lua *x = pl_ctx_of(L);
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

/* The first problem of e without its "FILE:LINE: " (the declaration's line
 * is the one reported). */
static const char *
errs_reason(const struct weir_sub_errs *e, char *buf, size_t len)
{
	const char *t = e->text != NULL ? e->text : "a bad subscriber", *m = strstr(t, ": ");

	snprintf(buf, len, "%s", m != NULL ? m + 2 : t);
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

/* down = { min = RATE, max = RATE } / up = { ... } into c's direction d. */
static void
get_plan(lua_State *L, int line, const char *key, struct weir_sub_conf *c, int d)
{
	static const char *const mk[2] = { "min", "max" };
	char msg[256];

	if (field(L, key) != LUA_TTABLE)
		decl_fail(L, line, "weir.subscriber: '%s' must be a table { min = RATE, max = RATE }",
			  key);
	for (int k = 0; k < 2; k++) {
		struct weir_value v;

		lua_pushstring(L, mk[k]);
		lua_rawget(L, -2);
		v = to_value(L, -1);
		if (lua_type(L, -1) == LUA_TNIL && k == 1)
			decl_fail(L, line, "weir.subscriber: '%s' needs max", key);
		if (lua_type(L, -1) != LUA_TNIL &&
		    weir_value_rate(mk[k], &v, k ? &c->max[d] : &c->min[d], msg, sizeof(msg)) < 0)
			decl_fail(L, line, "weir.subscriber: %s.%s", key, msg);
		lua_pop(L, 1);
	}
	lua_pop(L, 1);
}

/* The strings of list field key (absent: none) onto subscriber i. */
static void
get_devices(lua_State *L, int line, const char *key, uint32_t i)
{
	struct weir_lua *x = pl_ctx_of(L);
	struct weir_sub_errs e = { 0 };
	char why[MSG_LEN];
	int t = field(L, key);

	if (t != LUA_TNIL && t != LUA_TTABLE)
		decl_fail(L, line, "weir.subscriber: '%s' must be a list of strings", key);
	for (lua_Integer k = 1; t == LUA_TTABLE && lua_rawgeti(L, -1, k) != LUA_TNIL; k++) {
		int rc;

		if (lua_type(L, -1) != LUA_TSTRING)
			decl_fail(L, line, "weir.subscriber: '%s'[%lld] must be a string", key,
				  (long long)k);
		rc = key[0] == 'p'
			? weir_subs_add_prefix_text(x->subs, i, lua_tostring(L, -1), 0, line, &e)
			: weir_subs_add_mac_text(x->subs, i, lua_tostring(L, -1), 0, line, &e);
		if (rc != 0) {
			errs_reason(&e, why, sizeof(why));
			weir_sub_errs_free(&e);
			decl_fail(L, line, "weir.subscriber: %s", why);
		}
		lua_pop(L, 1);
	}
	lua_pop(L, 1);
}

/*
 * weir.subscriber{ id, name, parent, down = {min, max}, up = {min, max},
 * prefixes = {...}, macs = {...}, shaping, box }: one subscriber (circuit)
 * of weir's own form, a leaf of each tree as a file's subscriber is. The
 * set is checked as a whole at compile (a prefix of two subscribers, a
 * parent unknown: FILE:LINE of the declaration).
 */
int
pl_api_subscriber(lua_State *L)
{
	static const char *const keys[] = { "id", "name", "parent", "down", "up", "prefixes",
					    "macs", "shaping", "box", NULL };
	struct weir_lua *x = pl_ctx_of(L);
	int line = caller_line(L);
	char id[WEIR_SUB_ID_LEN], name[WEIR_SUB_ID_LEN], parent[WEIR_SUB_ID_LEN], why[MSG_LEN];
	struct weir_sub_conf c = { .id = id, .name = name, .parent = parent };
	struct weir_sub_errs e = { 0 };
	int64_t i;

	top_level_only(L, line, "weir.subscriber");
	check_args(L, line, "weir.subscriber", keys);
	get_str(L, line, "weir.subscriber", "id", NULL, id, sizeof(id));
	get_str(L, line, "weir.subscriber", "name", id, name, sizeof(name));
	get_str(L, line, "weir.subscriber", "parent", "", parent, sizeof(parent));
	get_plan(L, line, "down", &c, WEIR_SUB_DOWN);
	get_plan(L, line, "up", &c, WEIR_SUB_UP);
	c.box = (uint16_t)get_int(L, line, "box", 0, 0, 65535);
	if (field(L, "shaping") != LUA_TNIL && lua_type(L, -1) != LUA_TBOOLEAN)
		decl_fail(L, line, "weir.subscriber: 'shaping' must be true or false");
	c.flags = lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1) ? WEIR_SUBF_UNSHAPED : 0;
	lua_pop(L, 1);
	if (x->subs == NULL) {
		x->subs = weir_subs_new();
		if (x->subs == NULL || weir_subs_file(x->subs, x->path) != 0)
			return decl_fail(L, line, "weir.subscriber: out of memory");
	}
	if (weir_subs_find(x->subs, id) >= 0)
		return decl_fail(L, line, "weir.subscriber: '%s' declared twice", id);
	i = weir_subs_add(x->subs, &c, 0, (uint32_t)line, &e);
	if (i < 0) {
		errs_reason(&e, why, sizeof(why));
		weir_sub_errs_free(&e);
		return decl_fail(L, line, "weir.subscriber: %s", why);
	}
	get_devices(L, line, "prefixes", (uint32_t)i);
	get_devices(L, line, "macs", (uint32_t)i);
	return 0;
}

/* weir.class{ dir, name, parent, rate, ceil, prio, limit, quantum, flow_min,
 * admission, fallback, mode, marker }: the config file's class keys, plus dir. */
int
pl_api_class(lua_State *L)
{
	static const char *const keys[] = { "dir", "name", "parent", "rate", "ceil", "prio",
					    "limit", "quantum", "flow_min", "admission",
					    "fallback", "mode", "aqm", "marker", "last_mile", NULL };
	struct weir_lua *x = pl_ctx_of(L);
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
int
pl_api_rule(lua_State *L)
{
	static const char *const keys[] = { "class", "weight", "proto", "src", "dst", "lan", "wan",
					    "src_port", "dst_port", "lan_port", "wan_port", "vlan",
					    "dscp", "dir", "spi", "last_mile", NULL };
	static const char *const side_key[WEIR_CLS__SIDES] = { "src", "dst", "lan", "wan" };
	static const char *const port_key[WEIR_CLS__SIDES] = { "src_port", "dst_port", "lan_port",
							       "wan_port" };
	struct weir_lua *x = pl_ctx_of(L);
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
int
pl_api_set_class(lua_State *L)
{
	static const char *const keys[] = { "dir", "name", "rate", "ceil", "prio", "limit",
					    "flow_min", "mode", NULL };
	struct weir_lua *x = pl_ctx_of(L);
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
			struct undo *u = pl_sandbox_alloc(x, x->undo, x->cap_undo * sizeof(*u),
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
	struct weir_lua *x = pl_ctx_of(L);

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
int
pl_api_every(lua_State *L)
{
	struct weir_lua *x = pl_ctx_of(L);
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
double
pl_next_daily(double after, int minute)
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
int
pl_api_at(lua_State *L)
{
	struct weir_lua *x = pl_ctx_of(L);
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
	return add_timer(L, line, 0, h * 60 + m, pl_next_daily(x->now, h * 60 + m));
}

static int
set_hook(lua_State *L, enum weir_lua_hook h, const char *fn)
{
	struct weir_lua *x = pl_ctx_of(L);
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

int
pl_api_on_flow(lua_State *L)
{
	return set_hook(L, WEIR_LUA_FLOW, "weir.on_flow");
}

int
pl_api_on_flow_end(lua_State *L)
{
	return set_hook(L, WEIR_LUA_FLOW_END, "weir.on_flow_end");
}

int
pl_api_on_stats(lua_State *L)
{
	return set_hook(L, WEIR_LUA_STATS, "weir.on_stats");
}

/* weir.time(): the `now` of the running call, or of the last one. */
int
pl_api_time(lua_State *L)
{
	lua_pushnumber(L, pl_ctx_of(L)->now);
	return 1;
}

/* weir.date([t]): os.date("*t", t) without os: the local calendar time. */
int
pl_api_date(lua_State *L)
{
	static const char *const f[] = { "year", "month", "day", "hour", "min", "sec", "wday",
					 "yday" };
	double now = luaL_optnumber(L, 1, pl_ctx_of(L)->now);
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
