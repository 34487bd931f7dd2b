/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for issue 42's bounds on a Lua policy (app/weir/policy_limits.h,
 * lua_errtext.c, policy_lua.c): what a script may declare is refused at the
 * line that goes over it, timers stop when a wake's time budget is spent
 * and resume at the next call, a name holding "\0" is refused rather than
 * cut, and heap addresses never reach an error message. No EAL.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lua_errtext.h"
#include "policy.h"
#include "policy_limits.h"
#include "policy_lua.h"
#include "unit.h"

#define LINK "weir.link{ dir = \"outbound\", rate = \"30mbit\", default = \"bulk\" }\n"
#define BULK "weir.class{ dir = \"outbound\", name = \"bulk\", rate = \"10mbit\" }\n"

#include "script_file.h"

/* text must fail at `line` with needle in the message; the message is
 * returned for further checks. */
static void
expect_error(const char *what, const char *text, int line, const char *needle, char *err,
	     size_t errlen)
{
	const char *path = script(text);
	char prefix[160];
	struct weir_policy *p;

	err[0] = '\0';
	p = weir_policy_lua_load(path, 1, NULL, err, errlen);
	snprintf(prefix, sizeof(prefix), "%s:%d: ", path, line);
	CHECK(p == NULL, "%s: refused", what);
	CHECK(strncmp(err, prefix, strlen(prefix)) == 0, "%s: at line %d: got '%s'", what, line,
	      err);
	CHECK(strstr(err, needle) != NULL, "%s: message has '%s': got '%s'", what, needle, err);
	weir_policy_free(p);
}

static bool
has_hex_address(const char *s)
{
	for (const char *p = strstr(s, "0x"); p != NULL; p = strstr(p + 2, "0x"))
		if (p[2] != '\0' && strchr("0123456789abcdefABCDEF", p[2]) != NULL)
			return true;
	return false;
}

/* Item 1: the loop of a million rules stops at the first rule over
 * the limit, at its line, at once; the limit itself compiles. */
static void
test_rules(void)
{
	char err[512], text[1024];
	struct weir_policy *p;

	expect_error("a million rules", LINK BULK
		     "for i = 1, 1e6 do\n"
		     "  weir.rule{ class = \"bulk\", wan_port = i % 65535 + 1 }\n"
		     "end\n", 4, "more than 4096 rules", err, sizeof(err));
	snprintf(text, sizeof(text), LINK BULK
		 "for i = 1, %u do weir.rule{ class = \"bulk\", wan_port = i %% 65535 + 1 } end\n",
		 WEIR_LUA_MAX_RULES);
	p = weir_policy_lua_load(script(text), 1, NULL, err, sizeof(err));
	CHECK(p != NULL, "%u rules compile: %s", WEIR_LUA_MAX_RULES, err);
	weir_policy_free(p);
}

/* Item 2: timers per policy. */
static void
test_timer_count(void)
{
	char err[512], text[1024];
	struct weir_policy *p;

	expect_error("a million timers", LINK BULK
		     "local function f() end\n"
		     "for i = 1, 1e6 do\n"
		     "  if i % 2 == 0 then weir.at(\"12:00\", f) else weir.every(0.1, f) end\n"
		     "end\n", 5, "more than 256 timers", err, sizeof(err));
	snprintf(text, sizeof(text), LINK BULK
		 "for i = 1, %u do weir.every(0.1, function() end) end\n", WEIR_LUA_MAX_TIMERS);
	p = weir_policy_lua_load(script(text), 1, NULL, err, sizeof(err));
	CHECK(p != NULL, "%u timers load: %s", WEIR_LUA_MAX_TIMERS, err);
	weir_policy_free(p);
}

/* Item 2: a wake's budget counts every timer. Ten timers of ~2 ms each
 * under a 1 ms budget: one runs per call, the others stay due and the next
 * call goes on with them, so all ten have run once after ten calls. */
static void
test_timer_budget(void)
{
	static const char text[] = LINK BULK
		"for k = 1, 10 do\n"
		"  weir.every(1, function()\n"
		"    local t = 0\n"
		"    for i = 1, 200000 do t = t + i end\n"
		"  end)\n"
		"end\n";
	const struct weir_policy_lua_limits lim = { .start_time = 1000 };
	char err[512] = "";
	struct weir_lua *e = weir_lua_open(script(text), &lim, err, sizeof(err));
	unsigned int calls = 0, total = 0, stopped = 0;
	bool more = true;

	CHECK(e != NULL, "opens: %s", err);
	if (e == NULL)
		return;
	while (more && calls < 20) {
		int n = weir_lua_run_timers_for(e, 1001, 0.001, &more, err, sizeof(err));

		CHECK(n >= 1, "call %u ran some: %d %s", calls, n, err);
		total += n > 0 ? (unsigned int)n : 0;
		stopped += more;
		calls++;
		if (more)
			CHECK(weir_lua_next_timer(e) <= 1001, "those left stay due");
	}
	CHECK(total == 10, "each timer once: %u in %u calls", total, calls);
	CHECK(stopped >= 5, "the budget stopped the calls: %u of %u", stopped, calls);
	CHECK(weir_lua_next_timer(e) == 1002, "all done until 1002: %f", weir_lua_next_timer(e));
	CHECK(weir_lua_counters(e)->hook[WEIR_LUA_TIMER].errors == 0, "no errors: %s",
	      weir_lua_counters(e)->last_error);
	/* Without a budget, every due timer in one call (as before). */
	CHECK(weir_lua_run_timers_for(e, 1002, INFINITY, &more, err, sizeof(err)) == 10 && !more,
	      "all ten at once: %s", err);
	weir_lua_close(e);
}

/* Item 5: "a\0b" is not the name "a". */
static void
test_nul_names(void)
{
	static const char flow[] = LINK BULK
		"weir.on_flow(function(f) return \"bulk\\0x\" end)\n";
	struct weir_lua_flow f = { .proto = 6, .family = 2 };
	char err[512], cls[64];
	struct weir_lua *e;

	expect_error("class name", LINK BULK
		     "weir.class{ dir = \"outbound\", name = \"a\\0b\", rate = \"1mbit\" }\n", 3,
		     "'name' holds a NUL byte", err, sizeof(err));
	expect_error("rule's class", LINK BULK "weir.rule{ class = \"bulk\\0\" }\n", 3,
		     "'class' holds a NUL byte", err, sizeof(err));
	e = weir_lua_open(script(flow), NULL, err, sizeof(err));
	CHECK(e != NULL, "opens: %s", err);
	if (e == NULL)
		return;
	CHECK(weir_lua_on_flow(e, &f, cls, sizeof(cls), err, sizeof(err)) == -1 &&
	      strstr(err, "NUL") != NULL, "on_flow's \"bulk\\0x\" refused: %s", err);
	weir_lua_close(e);
}

/* Item 4: Lua's "function: 0x55df45795180" in an error message. */
static void
test_addresses_hidden(void)
{
	static const char timer[] = LINK BULK
		"weir.every(1, function() error(\"bad: \" .. tostring({}) .. \" \" .. "
		"tostring(print or error)) end)\n";
	const struct weir_policy_lua_limits lim = { .start_time = 1000 };
	char err[512], s[128];
	struct weir_lua *e;

	expect_error("top level", LINK BULK
		     "local f = function() end\n"
		     "error(\"cannot use \" .. tostring(f))\n", 4, "function: <address>", err,
		     sizeof(err));
	CHECK(!has_hex_address(err), "no address: %s", err);
	expect_error("a declaration's key", LINK BULK
		     "weir.rule{ class = \"bulk\", [tostring({})] = 1 }\n", 3, "table: <address>",
		     err, sizeof(err));
	CHECK(!has_hex_address(err), "no address: %s", err);
	e = weir_lua_open(script(timer), &lim, err, sizeof(err));
	CHECK(e != NULL, "opens: %s", err);
	if (e != NULL) {
		CHECK(weir_lua_run_timers(e, 1001, err, sizeof(err)) == -1, "fails");
		CHECK(strstr(err, "table: <address> function: ") != NULL &&
		      !has_hex_address(err), "hook error: %s", err);
		CHECK(!has_hex_address(weir_lua_counters(e)->last_error), "counters: %s",
		      weir_lua_counters(e)->last_error);
		weir_lua_close(e);
	}
	snprintf(s, sizeof(s), "spi 0x1F, thread: 0xabc, userdata: 0X1 end");
	CHECK(weir_lua_hide_addresses(s, sizeof(s)) == 2 &&
	      strcmp(s, "spi 0x1F, thread: <address>, userdata: <address> end") == 0,
	      "only Lua's: %s", s);
}

int
main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/weir-policy-limits.XXXXXX");
	if (mkdtemp(tmpdir) == NULL) {
		printf("mkdtemp failed\n");
		return 2;
	}
	test_rules();
	test_timer_count();
	test_timer_budget();
	test_nul_names();
	test_addresses_hidden();
	for (unsigned int i = 1; i <= n_scripts; i++) {
		char path[128];

		snprintf(path, sizeof(path), "%s/p%u.lua", tmpdir, i);
		unlink(path);
	}
	rmdir(tmpdir);
	return unit_report();
}
