/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for the Lua policy front end (app/weir/policy_lua.c): scripts
 * written to a temporary directory compile to the policy the config file
 * would give, every kind of mistake is reported at the script line it is
 * about, and the sandbox holds (no io/os/load, instruction budget, memory
 * limit). No EAL: the policy builder allocates from libc.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy.h"
#include "policy_lua.h"
#include "unit.h"

static char tmpdir[64];
static unsigned int n_scripts;

/* Write text to a new file in tmpdir; the path stays valid until exit. */
static const char *
script(const char *text)
{
	static char paths[64][128];
	char *path = paths[n_scripts++ % 64];
	FILE *f;

	snprintf(path, 128, "%s/p%u.lua", tmpdir, n_scripts);
	f = fopen(path, "w");
	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
		printf("cannot write %s\n", path);
		exit(2);
	}
	return path;
}

/* Load text expecting failure at `line` with `needle` in the message. */
static void
expect_error(const char *what, const char *text, const struct weir_policy_lua_limits *lim,
	     int line, const char *needle)
{
	const char *path = script(text);
	char err[512] = "", prefix[160];
	struct weir_policy *p = weir_policy_lua_load(path, 1, lim, err, sizeof(err));

	snprintf(prefix, sizeof(prefix), "%s:%d: ", path, line);
	if (getenv("WEIR_TEST_VERBOSE") != NULL)  /* to read the messages as users will */
		printf("%-24s %s\n", what, err);
	CHECK(p == NULL, "%s: refused", what);
	CHECK(strncmp(err, prefix, strlen(prefix)) == 0, "%s: at line %d: got '%s'", what, line,
	      err);
	CHECK(strstr(err, needle) != NULL, "%s: message has '%s': got '%s'", what, needle, err);
	weir_policy_free(p);
}

static struct weir_policy *
expect_ok(const char *what, const char *text, const struct weir_policy_lua_limits *lim)
{
	char err[512] = "";
	struct weir_policy *p = weir_policy_lua_load(script(text), 7, lim, err, sizeof(err));

	CHECK(p != NULL, "%s: compiles: %s", what, err);
	return p;
}

static void
test_two_classes(void)
{
	static const char text[] =
		"-- two classes out, one default leaf in\n"
		"weir.link{ dir = \"outbound\", rate = \"30mbit\", default = \"bulk\", limit = 500 }\n"
		"weir.class{ dir = \"outbound\", name = \"gold\", rate = \"20mbit\", prio = 0 }\n"
		"weir.class{ dir = \"outbound\", name = \"bulk\", rate = 10000000, prio = 1,\n"
		"            mode = \"fifo\", flow_min = 1e6, fallback = \"gold\" }\n"
		"weir.link{ dir = \"inbound\", rate = 30e6, mode = \"pfq\" }\n"
		"for _, port in ipairs({ \"5201-5204\", 443 }) do\n"
		"  weir.rule{ class = \"gold\", proto = \"tcp\", wan_port = port }\n"
		"end\n"
		"weir.rule{ class = \"bulk\", dscp = { \"EF\", \"AF41\", 8 }, lan = \"10.0.0.0/8\",\n"
		"           dir = \"out\", weight = 2, vlan = \"untagged\" }\n"
		"weir.rule{ class = \"gold\", wan = \"2001:db8::/32\", src_port = 1024 }\n";
	struct weir_policy *p = expect_ok("two classes", text, NULL);
	const struct weir_policy_class *gold, *bulk;
	int g, b;

	if (p == NULL)
		return;
	CHECK(p->epoch == 7, "epoch %u", p->epoch);
	CHECK(p->tree[0].n_classes == 3, "root + 2 classes outbound: %u", p->tree[0].n_classes);
	CHECK(p->tree[1].n_classes == 2, "root + default inbound: %u", p->tree[1].n_classes);
	g = weir_policy_class_find(p, 0, "gold");
	b = weir_policy_class_find(p, 0, "bulk");
	CHECK(g == 1 && b == 2, "classes in declaration order: gold %d bulk %d", g, b);
	CHECK(weir_policy_class_find(p, 1, "default") == 1, "inbound has its default leaf");
	CHECK(weir_policy_class_find(p, 1, "gold") < 0, "no gold inbound");
	if (g < 0 || b < 0)
		goto out;
	gold = &p->tree[0].classes[g];
	bulk = &p->tree[0].classes[b];
	CHECK(gold->cbq.rate == 20000000 && gold->cbq.parent == 0, "gold: 20mbit under the link");
	CHECK(gold->cbq.ceil == 30000000, "ceil defaults to the link: %llu",
	      (unsigned long long)gold->cbq.ceil);
	CHECK(gold->cbq.limit == 500, "the link's limit is the classes' default: %u",
	      gold->cbq.limit);
	CHECK(bulk->cbq.rate == 10000000 && bulk->cbq.prio == 1, "bulk: 10mbit prio 1");
	CHECK(bulk->mode == WEIR_MODE_FIFO && gold->mode == WEIR_MODE_POSTACK, "modes");
	CHECK(bulk->flow_min == 1000000 && bulk->admit == WEIR_ADMIT_FALLBACK,
	      "flow_min as a number; fallback implies admission = fallback");
	CHECK(p->tree[0].default_leaf == b, "default leaf is bulk");
	CHECK(p->tree[1].classes[1].mode == WEIR_MODE_PFQ, "inbound link's mode");
	CHECK(p->tree[1].classes[0].cbq.rate == 30000000, "inbound link rate from a float");
	CHECK(weir_classifier_n_rules(p->classifier) == 4, "4 rules: %u",
	      weir_classifier_n_rules(p->classifier));
	/* default + (gold, 1) + (bulk, 2) */
	CHECK(p->n_targets == 3, "targets: %u", p->n_targets);
out:
	weir_policy_free(p);
}

static void
test_nested(void)
{
	static const char text[] =
		"weir.link{ dir = \"outbound\", rate = \"30mbit\", default = \"web\" }\n"
		"weir.class{ dir = \"outbound\", name = \"staff\", rate = \"20mbit\" }\n"
		"weir.class{ dir = \"outbound\", name = \"voip\", parent = \"staff\", rate = \"2mbit\",\n"
		"            ceil = \"2mbit\", flow_min = \"100kbit\", admission = \"drop\" }\n"
		"weir.class{ dir = \"outbound\", name = \"web\", parent = \"staff\", rate = \"18mbit\" }\n"
		"weir.rule{ class = \"voip\", proto = \"udp\", wan_port = \"5060-5061\", dscp = \"EF\" }\n";
	struct weir_policy *p = expect_ok("nested", text, NULL);
	int s, v;

	if (p == NULL)
		return;
	s = weir_policy_class_find(p, 0, "staff");
	v = weir_policy_class_find(p, 0, "voip");
	CHECK(s == 1 && v == 2, "staff %d voip %d", s, v);
	if (s == 1 && v == 2) {
		CHECK(p->tree[0].classes[v].cbq.parent == s, "voip's parent is staff");
		CHECK(!p->tree[0].classes[s].is_leaf && p->tree[0].classes[v].is_leaf,
		      "staff inner, voip leaf");
		CHECK(p->tree[0].classes[v].cbq.ceil == 2000000, "voip ceil");
		CHECK(p->tree[0].classes[v].cbq.limit == WEIR_POLICY_LUA_LIMIT_DEFAULT,
		      "leaf limit defaults without link limit: %u", p->tree[0].classes[v].cbq.limit);
	}
	CHECK(p->tree[1].n_classes == 0, "inbound not declared: unshaped");
	weir_policy_free(p);
}

#define LINK "weir.link{ dir = \"outbound\", rate = \"30mbit\", default = \"bulk\" }\n"
#define BULK "weir.class{ dir = \"outbound\", name = \"bulk\", rate = \"10mbit\" }\n"

static void
test_declaration_errors(void)
{
	expect_error("unknown key", LINK BULK
		     "weir.class{ dir = \"outbound\", name = \"x\", rate = 1e6, colour = 1 }\n",
		     NULL, 3, "weir.class: unknown key 'colour'");
	expect_error("bad rate", LINK "\n" BULK
		     "weir.class{ dir = \"outbound\", name = \"x\",\n  rate = \"20furlongs\" }\n",
		     NULL, 4, "'rate' must be a rate like \"20mbit\"");
	expect_error("rate range", LINK "weir.class{ dir = \"outbound\", name = \"x\", rate = 1 }\n",
		     NULL, 2, "'rate' is 1 bit/s; it must be 0 (unshaped) or between");
	expect_error("wrong type", LINK "weir.class{ dir = \"outbound\", name = 5, rate = 1e6 }\n",
		     NULL, 2, "'name' must be a string");
	expect_error("prio range", LINK BULK
		     "weir.class{ dir = \"outbound\", name = \"x\", rate = 1e6, prio = 9 }\n",
		     NULL, 3, "'prio' is 9; it must be between 0 and 7");
	expect_error("missing rate", LINK "weir.class{ dir = \"outbound\", name = \"x\" }\n",
		     NULL, 2, "class 'x' needs a rate");
	expect_error("bad admission", LINK
		     "weir.class{ dir = \"outbound\", name = \"b\", rate = 1e6, admission = \"maybe\" }\n",
		     NULL, 2, "class 'b': admission must be \"drop\" or \"fallback\"");
	expect_error("bad mode", LINK "weir.class{ dir = \"outbound\", name = \"b\", rate = 1e6,"
		     " mode = \"red\" }\n", NULL, 2, "'mode' must be \"postack\"");
	expect_error("bad dir", "weir.link{ dir = \"up\", rate = 1e6 }\n", NULL, 1,
		     "'dir' must be \"outbound\"");
	expect_error("link twice", LINK "\n" LINK, NULL, 3, "already declared at line 1");
	expect_error("link without rate", "weir.link{ dir = \"inbound\" }\n", NULL, 1,
		     "the inbound link needs a rate");
	expect_error("class before link", BULK LINK, NULL, 1, "before its classes");
	expect_error("positional", LINK "weir.class{ \"gold\" }\n", NULL, 2,
		     "every entry must be key = value");
	expect_error("not a table", LINK "weir.rule(\"gold\")\n", NULL, 2, "takes one table");
	expect_error("bad prefix", LINK BULK "weir.rule{ class = \"bulk\", lan = \"10.0.0.0/33\" }\n",
		     NULL, 3, "'lan' must be an address or prefix");
	expect_error("bad ports", LINK BULK "weir.rule{ class = \"bulk\", wan_port = \"5204-5201\" }\n",
		     NULL, 3, "'wan_port' must be a port 1-65535");
	expect_error("bad proto", LINK BULK "weir.rule{ class = \"bulk\", proto = \"tcpp\" }\n",
		     NULL, 3, "'proto' must be tcp, udp");
	expect_error("bad dscp in a list", LINK BULK
		     "weir.rule{ class = \"bulk\", dscp = { \"EF\", \"AF51\" } }\n",
		     NULL, 3, "'dscp' must be 0-63, a name");
	expect_error("empty dscp list", LINK BULK "weir.rule{ class = \"bulk\", dscp = {} }\n",
		     NULL, 3, "'dscp' is an empty list");
	expect_error("bad vlan", LINK BULK "weir.rule{ class = \"bulk\", vlan = 4096 }\n",
		     NULL, 3, "'vlan' must be a VLAN ID 1-4095");
	expect_error("bad rule dir", LINK BULK "weir.rule{ class = \"bulk\", dir = \"up\" }\n",
		     NULL, 3, "'dir' (who opened the flow)");
	expect_error("class dir in a rule", LINK BULK
		     "weir.rule{ class = \"bulk\", dir = \"outbound\" }\n",
		     NULL, 3, "'dir' (who opened the flow) must be \"out\"");
	expect_error("weight", LINK BULK "weir.rule{ class = \"bulk\", weight = 1.5 }\n",
		     NULL, 3, "'weight' must be an integer");
	expect_error("rule without class", LINK BULK "weir.rule{ proto = \"udp\" }\n",
		     NULL, 3, "weir.rule: missing key 'class'");
	/* A script that catches its own bad declaration still gets no policy. */
	expect_error("swallowed by pcall", LINK BULK
		     "local ok = pcall(weir.class, { dir = \"outbound\", name = \"x\", rate = \"?\" })\n"
		     "assert(not ok)\n", NULL, 3, "'rate' must be a rate");
	expect_error("no link", "weir.rule{ class = \"bulk\" }\n", NULL, 1, "declares no weir.link");
}

/* What only the policy builder can check, at the declaration's line. */
static void
test_build_errors(void)
{
	expect_error("unknown parent", LINK BULK
		     "weir.class{ dir = \"outbound\", name = \"web\", parent = \"staff\", rate = 1e6 }\n",
		     NULL, 3, "class 'web': parent 'staff' is not defined before it");
	expect_error("child above parent", LINK
		     "weir.class{ dir = \"outbound\", name = \"staff\", rate = \"10mbit\" }\n"
		     "weir.class{ dir = \"outbound\", name = \"bulk\", parent = \"staff\", rate = \"5mbit\" }\n"
		     "weir.class{ dir = \"outbound\", name = \"web\", parent = \"staff\",\n"
		     "            rate = \"12mbit\" }\n",
		     NULL, 4, "class 'web': rate exceeds its parent's ('staff') rate");
	expect_error("ceil below rate", LINK BULK
		     "weir.class{ dir = \"outbound\", name = \"g\", rate = \"20mbit\", ceil = \"5mbit\" }\n",
		     NULL, 3, "ceil (5000000 bit/s) is below its rate");
	expect_error("defined twice", LINK BULK "\n" BULK, NULL, 4, "class 'bulk' is defined twice");
	expect_error("unknown class in rule", LINK BULK
		     "weir.rule{ class = \"bulk\" }\n"
		     "weir.rule{ class = \"silver\" }\n",
		     NULL, 4, "rule 2: class 'silver' is not defined in either direction");
	expect_error("host bits", LINK BULK "weir.rule{ class = \"bulk\", lan = \"10.1.0.0/8\" }\n",
		     NULL, 3, "rule 1: lan prefix: address has bits set past /8");
	expect_error("default not a class",
		     "weir.link{ dir = \"outbound\", rate = \"30mbit\", default = \"blk\" }\n" BULK,
		     NULL, 1, "outbound: default class 'blk' is not one of its classes");
	expect_error("classes without default",
		     "weir.link{ dir = \"outbound\", rate = \"30mbit\" }\n" BULK,
		     NULL, 1, "needs default = ");
}

static void
test_lua_errors(void)
{
	char err[512];
	char path[128];

	expect_error("syntax", LINK "\nweir.class{ dir = \"outbound\" name = \"x\" }\n", NULL, 3,
		     "'}' expected");
	expect_error("runtime", LINK BULK "local t = nil\nt.x = 1\n", NULL, 4,
		     "attempt to index a nil value");
	expect_error("error()", LINK "error(\"no policy today\")\n", NULL, 2, "no policy today");
	expect_error("os is gone", LINK "os.execute(\"touch /tmp/weir-pwned\")\n", NULL, 2,
		     "attempt to index a nil value (global 'os')");
	expect_error("io is gone", LINK BULK "local f = io.open(\"/etc/passwd\")\n", NULL, 3,
		     "attempt to index a nil value (global 'io')");
	expect_error("load is gone", LINK "load(\"x = 1\")()\n", NULL, 2,
		     "attempt to call a nil value (global 'load')");
	expect_error("string.dump is gone", LINK "local s = string.dump(print)\n", NULL, 2,
		     "attempt to call a nil value (field 'dump')");
	/* Everything else that reaches outside the script is absent too. */
	weir_policy_free(expect_ok("sandbox globals",
		  "for _, n in ipairs({ 'io', 'os', 'load', 'loadfile', 'dofile', 'require',\n"
		  "    'package', 'debug', 'collectgarbage', 'print', 'setmetatable',\n"
		  "    'rawset', 'coroutine' }) do\n"
		  "  assert(_G[n] == nil, n)\n"
		  "end\n"
		  "assert((\"x\").dump == nil)\n"
		  "assert(string.format('%d', 3) == '3' and math.max(1, 2) == 2 and utf8.char(65) == 'A')\n"
		  "assert(table.concat({ 'a', 'b' }) == 'ab' and select('#', 1, 2) == 2)\n"
		  "weir.link{ dir = 'inbound', rate = '1mbit' }\n", NULL));
	expect_error("bytecode refused", "\x1bLua\x54\x00 not really bytecode", NULL, 0,
		     "attempt to load a binary chunk");

	/* Lua shortens long paths in its messages; the loader gives them whole. */
	{
		static const char text[] = "weir.link{ dir = 'inbound', rate = 1e6 }\nlocal x = #nil\n";
		char longp[200], want[256];
		FILE *f;

		snprintf(longp, sizeof(longp), "%s/a-policy-file-name-longer-than-lua-idsize-allows"
			 "-in-its-messages.lua", tmpdir);
		f = fopen(longp, "w");
		CHECK(f != NULL && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", longp);
		CHECK(weir_policy_lua_load(longp, 1, NULL, err, sizeof(err)) == NULL, "long path");
		snprintf(want, sizeof(want), "%s:2: attempt to get length", longp);
		CHECK(strncmp(err, want, strlen(want)) == 0, "long path kept whole: %s", err);
		unlink(longp);
	}

	snprintf(path, sizeof(path), "%s/missing.lua", tmpdir);
	CHECK(weir_policy_lua_load(path, 1, NULL, err, sizeof(err)) == NULL, "missing file refused");
	CHECK(strncmp(err, path, strlen(path)) == 0 && strstr(err, ":0: cannot open") != NULL,
	      "missing file: %s", err);
}

static void
test_limits(void)
{
	const struct weir_policy_lua_limits small_mem = { .mem_bytes = 4u << 20 };
	const struct weir_policy_lua_limits few_insns = { .instructions = 100000 };

	expect_error("infinite loop", LINK "local n = 0\nwhile true do n = n + 1 end\n", NULL, 3,
		     "instruction budget exhausted");
	expect_error("loop under pcall", LINK
		     "while true do pcall(function() while true do end end) end\n", &few_insns, 2,
		     "instruction budget exhausted");
	expect_error("huge table", LINK "local t = {}\nfor i = 1, 1e9 do t[i] = i end\n", &small_mem,
		     3, "not enough memory");
	expect_error("huge string", LINK "\nlocal s = string.rep('x', 1 << 30)\n", NULL, 3,
		     "not enough memory");
	/* A budget big enough for an ordinary policy is not in the way. */
	weir_policy_free(expect_ok("small loop", LINK BULK
		  "for i = 1, 1000 do local x = tostring(i) end\n", &few_insns));
}

static void
test_shipped_policy(void)
{
	char err[512] = "";
	struct weir_policy *p = weir_policy_lua_load(WEIR_SRC_DIR "/lua/policy.lua", 1, NULL, err,
						     sizeof(err));

	CHECK(p != NULL, "lua/policy.lua compiles: %s", err);
	if (p == NULL)
		return;
	CHECK(weir_policy_class_find(p, 0, "voip") > 0 && weir_policy_class_find(p, 0, "bulk") > 0,
	      "the documented example's classes");
	CHECK(weir_classifier_n_rules(p->classifier) == 4, "its four rules");
	weir_policy_free(p);
}

int
main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/weir-policy-lua.XXXXXX");
	if (mkdtemp(tmpdir) == NULL) {
		printf("mkdtemp failed\n");
		return 2;
	}
	test_two_classes();
	test_nested();
	test_declaration_errors();
	test_build_errors();
	test_lua_errors();
	test_limits();
	test_shipped_policy();
	for (unsigned int i = 1; i <= n_scripts; i++) {
		char path[128];

		snprintf(path, sizeof(path), "%s/p%u.lua", tmpdir, i);
		unlink(path);
	}
	rmdir(tmpdir);
	return unit_report();
}
