/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the Lua policy front end (policy_lua.h, lua/README.md).
 *
 * The script only declares: weir.link, weir.class and weir.rule copy their
 * table into the same confs the config file fills (lib/classify/policy.h), checking
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
#include "policy_lua_int.h"

/* ---- loading ---- */

/* Protected: set up the sandbox, load the file as text and run it. */
static int
run_script(lua_State *L)
{
	static const luaL_Reg api[] = {
		{ "link", pl_api_link }, { "class", pl_api_class }, { "rule", pl_api_rule },
		{ "subscriber", pl_api_subscriber },
		{ "set_class", pl_api_set_class }, { "every", pl_api_every }, { "at", pl_api_at },
		{ "on_flow", pl_api_on_flow }, { "on_flow_end", pl_api_on_flow_end },
		{ "on_stats", pl_api_on_stats }, { "time", pl_api_time }, { "date", pl_api_date },
		{ NULL, NULL },
	};
	struct weir_lua *x = lua_touserdata(L, 1);

	pl_sandbox_open(L);
	luaL_newlibtable(L, api);
	lua_pushvalue(L, 1);
	luaL_setfuncs(L, api, 1);
	lua_setglobal(L, "weir");
	/* Lua names the file in its messages by a shortened path when the path
	 * is long; learn that name from an empty chunk so pl_report_run can put
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
	pl_start_clock(x);
	lua_sethook(L, pl_sandbox_hook, LUA_MASKCOUNT | LUA_MASKLINE, x->hook_step);
	lua_call(L, 0, 0);
	lua_sethook(L, NULL, 0, 0);
	return 0;
}

/* The script's outcome as one message; status is lua_pcall's. */
void
pl_report_run(lua_State *L, const struct weir_lua *x, int status, char *err, size_t errlen)
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
	weir_subs_free(x->subs);
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

	x->L = lua_newstate(pl_sandbox_alloc, x);
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
	pl_stop_clock();
	if (status != LUA_OK || x->failed) {
		pl_report_run(x->L, x, status, err, errlen);
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
