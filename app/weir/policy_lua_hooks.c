/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the Lua policy's hook runtime (policy_lua.c): on_flow, on_flow_end,
 * on_stats and the timers, each call with a fresh budget and its set_class
 * calls undone if it fails.
 */
#include "policy_lua_int.h"

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
	pl_start_clock(x);
	lua_sethook(L, pl_sandbox_hook, LUA_MASKCOUNT | LUA_MASKLINE, x->hook_step);
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
	pl_stop_clock();
	/* after a runaway hook it still fires at every instruction */
	lua_sethook(L, NULL, 0, 0);
	x->in_hook = false;
	if (status == LUA_OK && !x->failed)
		return 0;
	pl_report_run(L, x, status, x->cnt.last_error, sizeof(x->cnt.last_error));
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
	const double t0 = pl_mono_now();
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
		if (ran > 0 && pl_mono_now() - t0 >= budget_s) {
			x->timer_next = i;
			if (more != NULL)
				*more = true;
			break;
		}
		/* Once per call however late: a management lcore that was busy
		 * for minutes must not run a minute timer a hundred times. */
		if (t->minute >= 0) {
			t->due = pl_next_daily(now, t->minute);
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
