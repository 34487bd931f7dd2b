/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for the Lua policy front end (app/weir/policy_lua.c): scripts
 * written to a temporary directory compile to the policy the config file
 * would give, every kind of mistake is reported at the script line it is
 * about, and the sandbox holds (no io/os/load, instruction budget, memory
 * limit). No EAL: the policy builder allocates from libc.
 */
#include <arpa/inet.h>
#include <malloc.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "policy.h"
#include "policy_lua.h"
#include "unit.h"

#include "script_file.h"

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
	CHECK(p->tree[0].default_leaf == (uint32_t)b, "default leaf is bulk");
	CHECK(p->tree[1].classes[1].mode == WEIR_MODE_PFQ, "inbound link's mode");
	CHECK(p->tree[1].classes[0].cbq.rate == 30000000, "inbound link rate from a float");
	CHECK(weir_classifier_n_rules(p->classifier) == 4, "4 rules: %u",
	      weir_classifier_n_rules(p->classifier));
	/* default + (gold, 1) + (bulk, 2), then (bulk, 1) and the inbound leaf
	 * (default, 1): every leaf has a weight-1 target for the hooks */
	CHECK(p->n_targets == 5, "targets: %u", p->n_targets);
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
		CHECK(p->tree[0].classes[v].cbq.parent == (uint32_t)s, "voip's parent is staff");
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

/* A fifo class's queue manager: its own aqm, or the config's default
 * (shaping.aqm, passed in the limits) for fifo leaves only. */
static void
test_aqm(void)
{
	static const char text[] =
		"weir.link{ dir = \"outbound\", rate = \"20mbit\", default = \"a\", limit = 94 }\n"
		"weir.class{ dir = \"outbound\", name = \"a\", rate = \"10mbit\", mode = \"fifo\" }\n"
		"weir.class{ dir = \"outbound\", name = \"b\", rate = \"5mbit\", mode = \"fifo\",\n"
		"            aqm = \"choke\" }\n"
		"weir.class{ dir = \"outbound\", name = \"c\", rate = \"5mbit\", mode = \"pfq\" }\n";
	struct weir_policy_lua_limits lim = { .qm = WEIR_QM_PQM_PB,
					      .qm_params = { .min_th = 31, .max_th = 62 } };
	struct weir_policy *p = expect_ok("aqm", text, &lim);

	if (p != NULL) {
		CHECK(p->tree[0].classes[1].cbq.qm == WEIR_QM_PQM_PB, "a: the default pqm-pb");
		CHECK(p->tree[0].classes[2].cbq.qm == WEIR_QM_CHOKE, "b: its own choke");
		CHECK(p->tree[0].classes[3].cbq.qm == WEIR_QM_NONE, "c: pfq has none");
		CHECK(p->tree[0].qm_params.max_th == 62, "parameters carried to the tree");
	}
	weir_policy_free(p);
	expect_error("aqm on pfq", "weir.link{ dir = \"outbound\", rate = 1e7 }\n"
		     "weir.class{ dir = \"outbound\", name = \"x\", rate = 1e6, aqm = \"red\" }\n",
		     NULL, 2, "needs mode = \"fifo\"");
	expect_error("unknown aqm", "weir.link{ dir = \"outbound\", rate = 1e7 }\n"
		     "weir.class{ dir = \"outbound\", name = \"x\", rate = 1e6, mode = \"fifo\",\n"
		     "            aqm = \"blue\" }\n", NULL, 2, "aqm must be");
}

/* IPsec: a rule by SPI (a number, or a range in hex), and its errors. */
static void
test_spi_rules(void)
{
	static const char text[] =
		"weir.link{ dir = \"outbound\", rate = \"10mbit\", default = \"bulk\" }\n"
		"weir.class{ dir = \"outbound\", name = \"vpn\", rate = \"5mbit\", mode = \"pfq\" }\n"
		"weir.class{ dir = \"outbound\", name = \"bulk\", rate = \"5mbit\" }\n"
		"weir.rule{ class = \"vpn\", proto = \"esp\", spi = 0x1001 }\n"
		"weir.rule{ class = \"vpn\", spi = \"0x2000-0x2fff\", dscp = \"EF\" }\n";
	struct weir_policy *p = expect_ok("spi rules", text, NULL);

	if (p != NULL) {
		const struct weir_policy_rule_conf *r = p->src.conf.rules;

		CHECK(p->src.conf.n_rules == 2 && r[0].match.spi_lo == 0x1001 &&
		      r[0].match.spi_hi == 0x1001 && r[1].match.spi_lo == 0x2000 &&
		      r[1].match.spi_hi == 0x2fff, "SPI ranges");
	}
	weir_policy_free(p);
	expect_error("spi 0", LINK BULK "weir.rule{ class = \"bulk\", spi = 0 }\n", NULL, 3,
		     "'spi' must be an SPI 1-4294967295");
	expect_error("spi range backwards", LINK BULK
		     "weir.rule{ class = \"bulk\", spi = \"0x20-0x10\" }\n", NULL, 3,
		     "'spi' must be an SPI");
	expect_error("spi with tcp", LINK BULK
		     "weir.rule{ class = \"bulk\", proto = \"tcp\", spi = 5 }\n", NULL, 3,
		     "only esp and ah have one");
}

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
/* A class's marker table: the config file's keys, the same refusals. */
static void
test_marker(void)
{
	struct weir_policy *p = expect_ok("marker", LINK
		"weir.class{ dir = \"outbound\", name = \"bulk\", rate = \"10mbit\",\n"
		"  marker = { type = \"carm\", cir = \"8mbit\", alpha = 0.45, red = \"AF13\" } }\n",
		NULL);

	if (p != NULL) {
		const struct weir_marker_conf *mc = &p->tree[0].classes[1].marker;

		CHECK(mc->type == WEIR_MARK_CARM && mc->cir == 8000000 && mc->alpha_milli == 450 &&
		      mc->dscp[WEIR_RED] == 14 && mc->dscp[WEIR_GREEN] == 10,
		      "marker read: type %u cir %lu alpha %u", mc->type, (unsigned long)mc->cir,
		      mc->alpha_milli);
		weir_policy_free(p);
	}
	expect_error("marker cir 0", LINK
		     "weir.class{ dir = \"outbound\", name = \"bulk\", rate = \"10mbit\",\n"
		     "  marker = { type = \"tbq\", cir = 0 } }\n",
		     NULL, 2, "needs a contract rate cir above 0");
	expect_error("marker above link", LINK
		     "weir.class{ dir = \"outbound\", name = \"bulk\", rate = \"10mbit\",\n"
		     "  marker = { type = \"tb\", cir = \"50mbit\" } }\n",
		     NULL, 2, "above what the class can send");
	expect_error("marker key", LINK
		     "weir.class{ dir = \"outbound\", name = \"bulk\", rate = \"10mbit\",\n"
		     "  marker = { type = \"tb\", cir = \"5mbit\", colour = 1 } }\n",
		     NULL, 2, "unknown marker key 'colour'");
}

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


static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Issue 16.1: C functions the instruction budget cannot stop. Each of these
 * ran for hours (or for ever) before; now each fails at its line at once. */
static void
test_c_functions_bounded(void)
{
	static const struct {
		const char *what, *text, *needle;
		int line;
	} bad[] = {
		{ "string.find backtracking",
		  LINK BULK "local s = string.rep('a', 30000)\n"
		  "string.find(s, string.rep('a-', 12) .. 'b')\n", "pattern too costly", 4 },
		{ "as a method", LINK BULK "local s = string.rep('a', 30000)\n"
		  "s:match(string.rep('a-', 12) .. 'b')\n", "string.match: pattern too costly", 4 },
		{ "gmatch", LINK BULK "local s = string.rep('a', 30000)\n"
		  "for w in s:gmatch('a*a*a*b') do end\n", "string.gmatch: pattern too costly", 4 },
		{ "gsub", LINK BULK "local s = string.rep('a', 30000)\n"
		  "s:gsub('(a-)(a-)(a-)b', '')\n", "string.gsub: pattern too costly", 4 },
		{ "%b scans", LINK BULK "local s = string.rep('(', 100000)\n"
		  "s:find('%b()%b()')\n", "pattern too costly", 4 },
		{ "plain needle", LINK BULK "local s = string.rep('a', 1 << 24)\n"
		  "s:find(string.rep('a', 1 << 20) .. 'b', 1, true)\n", "pattern too costly", 4 },
		{ "rep of nothing", LINK BULK "\nlocal s = string.rep('', 1e15)\n",
		  "not enough memory", 4 },
		{ "table.move of nils", LINK BULK "table.move({}, 1, 1e15, 2)\n", "table.move", 3 },
		{ "sort of big strings", LINK BULK "local s = ('a'):rep(1 << 24)\n"
		  "local t = {} for i = 1, 200 do t[i] = s end\ntable.sort(t)\n",
		  "table.sort: 200 elements", 5 },
		{ "sort with a C comparator", LINK BULK "table.sort({ 'a', 'b' }, string.upper)\n",
		  "the comparator must be a Lua function", 3 },
	};
	const struct weir_policy_lua_limits lots = { .instructions = 10000000000ull, .time_ms = 300 };
	static volatile sig_atomic_t stop;
	double t0;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t0 = now_s();
		expect_error(bad[i].what, bad[i].text, NULL, bad[i].line, bad[i].needle);
		CHECK(now_s() - t0 < 1, "%s: refused in %.3f s", bad[i].what, now_s() - t0);
	}
	/* Calls allowed one by one still add up to the time limit, which the
	 * count hook and each wrapper check. */
	t0 = now_s();
	expect_error("many allowed calls", LINK BULK "local s = string.rep('a', 3000)\n"
		     "while true do s:find('a-b') end\n", &lots, 4, "time limit exceeded (300 ms)");
	CHECK(now_s() - t0 < 1, "time limit: %.3f s", now_s() - t0);
	/* Slow calls and slow operators: the watchdog's flag is read at each
	 * library call and each line, not only every 1,000 instructions. */
	t0 = now_s();
	expect_error("slow calls", LINK BULK "local s = ('a'):rep(1 << 24)\n"
		     "while true do s:upper() end\n", &lots, 4, "time limit exceeded (300 ms)");
	CHECK(now_s() - t0 < 1, "slow calls: %.3f s", now_s() - t0);
	t0 = now_s();
	expect_error("slow operators", LINK BULK "local s, u = ('a'):rep(1 << 23), ('a'):rep(1 << 23)\n"
		     "while true do local x = s < u; x = s .. u end\n", &lots, 4,
		     "time limit exceeded (300 ms)");
	CHECK(now_s() - t0 < 1, "slow operators: %.3f s", now_s() - t0);
	/* SIGTERM's flag stops even a script with budget to spare. */
	weir_lua_set_stop_flag(&stop);
	stop = 1;
	t0 = now_s();
	expect_error("stop flag", LINK BULK "\nwhile true do end\n", &lots, 1,
		     "stopped: weir is shutting down");
	CHECK(now_s() - t0 < 0.5, "stopped in %.3f s", now_s() - t0);
	weir_lua_set_stop_flag(NULL);
	/* What a policy script does with patterns still works. */
	weir_policy_free(expect_ok("ordinary patterns", LINK BULK
		  "local s = '  tenant-42 = gold  '\n"
		  "local k, v = s:match('^%s*(.-)%s*=%s*(.-)%s*$')\n"
		  "assert(k == 'tenant-42' and v == 'gold')\n"
		  "assert(('10.1.2.3'):find('^10%.') == 1)\n"
		  "assert(select(2, ('a,b,c'):gsub(',', ';')) == 2)\n"
		  "local n = 0; for w in ('x y z'):gmatch('%a+') do n = n + 1 end; assert(n == 3)\n"
		  "local big = string.rep('word ', 20000)\n"
		  "assert(big:find('nope', 1, true) == nil and #big:rep(2, ',') == 200001)\n"
		  "assert(big:match('^(%a+)') == 'word')\n"
		  "assert(#table.move({1, 2, 3}, 1, 3, 2) == 4)\n"
		  "assert(('a]b'):find('[]]') == 2 and ('x.y'):gsub('[%.]', '') == 'xy')\n"
		  "assert(('THE (quick) fox'):match('%f[%a]%a+', 5) == 'quick')\n"
		  "assert(('f(a(b))'):match('%b()') == '(a(b))' and ('abab'):match('(ab)%1') == 'ab')\n"
		  "assert(('[x]'):find('^%[(.-)%]$') == 1 and ('a-b'):find('-', 1, true) == 2)\n"
		  "local t = { 'b', 'c', 'a' }; table.sort(t); assert(t[1] == 'a')\n"
		  "table.sort(t, function(a, b) return a > b end); assert(t[1] == 'c')\n"
		  "assert(tonumber('12') == 12 and tostring(3) == '3' and utf8.len('h\\u{e9}') == 2)\n",
		  NULL));
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

/* ---- the live engine: hooks ---- */

/* 2024-01-01 21:00:00 UTC, a Monday; the tests run with TZ=UTC. */
#define T0 1704142800.0
#define HOUR 3600.0

static struct weir_lua *
open_ok(const char *what, const char *path, double start, const struct weir_policy_lua_limits *lim)
{
	struct weir_policy_lua_limits l = lim != NULL ? *lim : (struct weir_policy_lua_limits){ 0 };
	char err[512] = "";
	struct weir_lua *e;

	l.start_time = start;
	e = weir_lua_open(path, &l, err, sizeof(err));
	CHECK(e != NULL, "%s: opens: %s", what, err);
	return e;
}

/* Compile and return class `name`'s conf in dir (zeroed if it fails). */
static struct weir_cbq_class_conf
compiled(struct weir_lua *e, int dir, const char *name)
{
	struct weir_cbq_class_conf c = { 0 };
	char err[512] = "";
	struct weir_policy *p = weir_lua_compile(e, 3, err, sizeof(err));
	int i;

	CHECK(p != NULL, "compiles: %s", err);
	if (p == NULL)
		return c;
	i = weir_policy_class_find(p, dir, name);
	CHECK(i > 0, "class %s compiled", name);
	if (i > 0)
		c = p->tree[dir].classes[i].cbq;
	weir_policy_free(p);
	return c;
}

static struct weir_lua_flow
flow4(const char *lan, const char *wan, uint8_t proto, uint16_t wan_port)
{
	struct weir_lua_flow f = { .family = AF_INET, .proto = proto, .lan_port = 40000,
				   .wan_port = wan_port };

	inet_pton(AF_INET, lan, f.lan);
	inet_pton(AF_INET, wan, f.wan);
	return f;
}

/* err starts with path:line: and contains needle */
static void
expect_at(const char *what, const char *err, const char *path, int line, const char *needle)
{
	char prefix[160];

	snprintf(prefix, sizeof(prefix), "%s:%d: ", path, line);
	if (getenv("WEIR_TEST_VERBOSE") != NULL)
		printf("%-24s %s\n", what, err);
	CHECK(strncmp(err, prefix, strlen(prefix)) == 0, "%s: at line %d: got '%s'", what, line,
	      err);
	CHECK(strstr(err, needle) != NULL, "%s: message has '%s': got '%s'", what, needle, err);
}

static void
test_every(void)
{
	static const char text[] =
		"weir.link{ dir = 'outbound', rate = '30mbit', default = 'bulk' }\n"
		"weir.class{ dir = 'outbound', name = 'bulk', rate = '10mbit' }\n"
		"local n = 0\n"
		"assert(weir.time() == 1000)\n"
		"weir.every(60, function(now)\n"
		"  n = n + 1\n"
		"  assert(now == weir.time())\n"
		"  weir.set_class{ dir = 'outbound', name = 'bulk', rate = (10 + n) * 1000000 }\n"
		"end)\n"
		"weir.every(0.5, function() end)\n";
	char err[512] = "";
	struct weir_lua *e = open_ok("every", script(text), 1000, NULL);

	if (e == NULL)
		return;
	CHECK(weir_lua_has(e, WEIR_LUA_TIMER) && !weir_lua_has(e, WEIR_LUA_FLOW) &&
	      !weir_lua_has(e, WEIR_LUA_FLOW_END) && !weir_lua_has(e, WEIR_LUA_STATS), "has");
	CHECK(compiled(e, 0, "bulk").rate == 10000000, "10mbit at load");
	CHECK(weir_lua_next_timer(e) == 1000.5, "first due: %f", weir_lua_next_timer(e));
	CHECK(weir_lua_run_timers(e, 1000.4, err, sizeof(err)) == 0, "none due yet");
	CHECK(weir_lua_run_timers(e, 1000.5, err, sizeof(err)) == 1, "the short one");
	/* late: runs once, not 117 times */
	CHECK(weir_lua_run_timers(e, 1059.9, err, sizeof(err)) == 1, "once however late");
	CHECK(weir_lua_next_timer(e) == 1060, "next: %f", weir_lua_next_timer(e));
	CHECK(!weir_lua_dirty(e), "nothing changed yet");
	CHECK(weir_lua_run_timers(e, 1060, err, sizeof(err)) == 1, "the minute one: %s", err);
	CHECK(weir_lua_dirty(e), "set_class made it dirty");
	CHECK(compiled(e, 0, "bulk").rate == 11000000, "11mbit after the first minute");
	CHECK(!weir_lua_dirty(e), "clean after the compile");
	CHECK(weir_lua_run_timers(e, 1120, err, sizeof(err)) == 2, "both at 1120");
	CHECK(compiled(e, 0, "bulk").rate == 12000000, "12mbit after the second");
	CHECK(weir_lua_counters(e)->hook[WEIR_LUA_TIMER].calls == 5 &&
	      weir_lua_counters(e)->hook[WEIR_LUA_TIMER].errors == 0, "counted");
	weir_lua_close(e);
}

static void
test_at(void)
{
	static const char text[] =
		"weir.link{ dir = 'outbound', rate = '30mbit', default = 'bulk' }\n"
		"weir.class{ dir = 'outbound', name = 'bulk', rate = '10mbit' }\n"
		"local d = weir.date()\n"
		"assert(d.year == 2024 and d.month == 1 and d.day == 1 and d.hour == 21 and\n"
		"       d.min == 0 and d.sec == 0 and d.wday == 2 and d.yday == 1, 'date')\n"
		"assert(weir.date(0).year == 1970)\n"
		"weir.at('22:00', function(now)\n"
		"  weir.set_class{ dir = 'outbound', name = 'bulk', rate = '20mbit' }\n"
		"end)\n";
	char err[512] = "";
	struct weir_lua *e = open_ok("at", script(text), T0, NULL);

	if (e == NULL)
		return;
	CHECK(weir_lua_next_timer(e) == T0 + HOUR, "22:00 today");
	CHECK(weir_lua_run_timers(e, T0 + HOUR - 60, err, sizeof(err)) == 0, "not at 21:59");
	CHECK(compiled(e, 0, "bulk").rate == 10000000, "10mbit at 21:59");
	CHECK(weir_lua_run_timers(e, T0 + HOUR + 60, err, sizeof(err)) == 1, "at 22:01: %s", err);
	CHECK(compiled(e, 0, "bulk").rate == 20000000, "20mbit at 22:01");
	CHECK(weir_lua_next_timer(e) == T0 + HOUR + 86400, "22:00 tomorrow");
	weir_lua_close(e);
}

static void
test_schedule_example(void)
{
	const char *path = WEIR_SRC_DIR "/lua/examples/schedule.lua";
	char err[512] = "";
	struct weir_lua *e = open_ok("schedule.lua", path, T0, NULL);

	if (e == NULL)
		return;
	CHECK(compiled(e, 0, "backup").rate == 10000000, "day rate at 21:00");
	CHECK(weir_lua_run_timers(e, T0 + HOUR - 60, err, sizeof(err)) == 0, "21:59: nothing");
	CHECK(weir_lua_run_timers(e, T0 + HOUR + 60, err, sizeof(err)) == 1, "22:01: %s", err);
	CHECK(compiled(e, 0, "backup").rate == 60000000, "night rate at 22:01");
	CHECK(compiled(e, 0, "office").rate == 40000000, "office gives way");
	CHECK(weir_lua_run_timers(e, T0 + 9 * HOUR + 60, err, sizeof(err)) == 1, "06:01");
	CHECK(compiled(e, 0, "backup").rate == 10000000, "day rate again");
	weir_lua_close(e);
	/* loaded in the night: night rates from the start */
	e = open_ok("schedule.lua at 23:30", path, T0 + 2.5 * HOUR, NULL);
	if (e == NULL)
		return;
	CHECK(compiled(e, 0, "backup").rate == 60000000, "night rate when loaded at 23:30");
	weir_lua_close(e);
}

static void
test_on_flow(void)
{
	static const char text[] =
		"weir.link{ dir = 'outbound', rate = '30mbit', default = 'bulk' }\n"
		"weir.class{ dir = 'outbound', name = 'bulk', rate = '10mbit' }\n"
		"weir.class{ dir = 'outbound', name = 'staff', rate = '10mbit' }\n"
		"weir.class{ dir = 'outbound', name = 'penalty', parent = 'staff', rate = 1e6 }\n"
		"weir.link{ dir = 'inbound', rate = '30mbit' }\n"
		"local total = 0\n"
		"weir.on_flow(function(f)\n"
		"  if f.wan_port == 443 then\n"
		"    assert(f.dir == 'inbound' and f.proto == 'tcp' and f.family == 6, 'dir')\n"
		"    assert(f.lan == '2001:db8::5' and f.wan == '2001:db8:1::1', f.lan)\n"
		"    assert(f.lan_port == 40000 and f.vlan == 30 and f.dscp == 46, 'ports')\n"
		"    assert(f.class.outbound == 'bulk' and f.class.inbound == nil, 'class')\n"
		"    return 'bulk'\n"
		"  end\n"
		"  assert(f.dir == 'outbound' and f.family == 4 and f.lan == '10.0.0.5')\n"
		"  if f.proto == 'udp' and f.wan_port == 5000 then return 'penalty' end\n"
		"  if f.wan_port == 6000 then return 'default' end\n"
		"  if f.wan_port == 7000 then return 'nosuch' end\n"
		"  if f.wan_port == 7001 then return 42 end\n"
		"  if f.wan_port == 7002 then return 'staff' end\n"
		"  if f.wan_port == 9999 and total == 3000 then return 'penalty' end\n"
		"  return nil\n"
		"end)\n"
		"weir.on_flow_end(function(f)\n"
		"  assert(f.duration == 2.5 and f.packets_out == 3 and f.packets_in == 4)\n"
		"  total = total + f.bytes_out + f.bytes_in\n"
		"end)\n"
		"weir.on_stats(function(s)\n"
		"  assert(s.now == 5000 and weir.time() == 5000)\n"
		"  local b = s.classes.outbound.bulk\n"
		"  assert(b.bytes == 100 and b.pkts == 2 and b.drops == 1 and b.rate_bps == 8e6)\n"
		"  assert(s.classes.inbound.default.bytes == 50 and next(s.hosts) ~= nil)\n"
		"  local h = s.hosts['10.0.0.5']\n"
		"  assert(h.bytes_out == 6 and h.bytes_in == 7)\n"
		"end)\n";
	const char *path = script(text);
	struct weir_lua *e = open_ok("on_flow", path, 1000, NULL);
	struct weir_lua_flow f = flow4("10.0.0.5", "192.0.2.1", IPPROTO_UDP, 5000), g;
	const struct weir_lua_class_stats out[] = { { .name = "bulk", .bytes = 100, .pkts = 2,
						      .drops = 1, .rate_bps = 8000000 } };
	const struct weir_lua_class_stats in[] = { { .name = "default", .bytes = 50 } };
	struct weir_lua_host_stats host = { .family = AF_INET, .bytes_out = 6, .bytes_in = 7 };
	struct weir_lua_stats s = { .now = 5000, .classes = { out, in }, .n_classes = { 1, 1 },
				    .hosts = &host, .n_hosts = 1 };
	char cls[WEIR_POLICY_NAME_LEN], err[512] = "";

	if (e == NULL)
		return;
	CHECK(weir_lua_has(e, WEIR_LUA_FLOW) && weir_lua_has(e, WEIR_LUA_FLOW_END) &&
	      weir_lua_has(e, WEIR_LUA_STATS) && !weir_lua_has(e, WEIR_LUA_TIMER), "has");
	CHECK(weir_lua_next_timer(e) == INFINITY, "no timers");
	CHECK(weir_lua_on_flow(e, &f, cls, sizeof(cls), err, sizeof(err)) == 1 &&
	      strcmp(cls, "penalty") == 0, "udp 5000 -> penalty: %s", err);
	f.proto = IPPROTO_TCP;
	CHECK(weir_lua_on_flow(e, &f, cls, sizeof(cls), err, sizeof(err)) == 0, "tcp 5000 kept: %s",
	      err);
	f.wan_port = 6000;
	CHECK(weir_lua_on_flow(e, &f, cls, sizeof(cls), err, sizeof(err)) == 1 &&
	      strcmp(cls, "default") == 0, "inbound's one leaf is a class too: %s", err);
	f.wan_port = 7000;
	CHECK(weir_lua_on_flow(e, &f, cls, sizeof(cls), err, sizeof(err)) == -1, "unknown class");
	expect_at("unknown class", err, path, 18, "on_flow returned 'nosuch', which is not a leaf");
	f.wan_port = 7001;
	CHECK(weir_lua_on_flow(e, &f, cls, sizeof(cls), err, sizeof(err)) == -1, "a number");
	expect_at("a number", err, path, 19, "must return a class name or nil, not a number");
	f.wan_port = 7002;
	CHECK(weir_lua_on_flow(e, &f, cls, sizeof(cls), err, sizeof(err)) == -1, "inner class");
	expect_at("inner class", err, path, 20, "'staff', which is not a leaf");

	g = (struct weir_lua_flow){ .dir = 1, .proto = IPPROTO_TCP, .family = AF_INET6,
				    .lan_port = 40000, .wan_port = 443, .vlan = 30, .dscp = 46,
				    .cls = { "bulk", "" } };
	inet_pton(AF_INET6, "2001:db8::5", g.lan);
	inet_pton(AF_INET6, "2001:db8:1::1", g.wan);
	CHECK(weir_lua_on_flow(e, &g, cls, sizeof(cls), err, sizeof(err)) == 1 &&
	      strcmp(cls, "bulk") == 0, "the flow's fields as the hook sees them: %s", err);

	f.wan_port = 9999;
	CHECK(weir_lua_on_flow(e, &f, cls, sizeof(cls), err, sizeof(err)) == 0, "before: %s", err);
	f.bytes[0] = 1000;
	f.bytes[1] = 2000;
	f.packets[0] = 3;
	f.packets[1] = 4;
	f.duration = 2.5;
	CHECK(weir_lua_on_flow_end(e, &f, err, sizeof(err)) == 0, "flow end: %s", err);
	CHECK(weir_lua_on_flow(e, &f, cls, sizeof(cls), err, sizeof(err)) == 1 &&
	      strcmp(cls, "penalty") == 0, "after the flow end: %s", err);

	inet_pton(AF_INET, "10.0.0.5", host.addr);
	CHECK(weir_lua_on_stats(e, &s, err, sizeof(err)) == 0, "stats: %s", err);
	CHECK(weir_lua_counters(e)->hook[WEIR_LUA_FLOW].calls == 9 &&
	      weir_lua_counters(e)->hook[WEIR_LUA_FLOW].errors == 3 &&
	      weir_lua_counters(e)->hook[WEIR_LUA_FLOW_END].calls == 1 &&
	      weir_lua_counters(e)->hook[WEIR_LUA_STATS].calls == 1, "counted");
	weir_lua_close(e);
}

static void
test_quota_example(void)
{
	const char *path = WEIR_SRC_DIR "/lua/examples/quota.lua";
	struct weir_lua *e = open_ok("quota.lua", path, T0, NULL);
	struct weir_lua_flow a = flow4("10.0.0.5", "192.0.2.1", IPPROTO_TCP, 443);
	struct weir_lua_flow b = flow4("10.0.0.6", "192.0.2.1", IPPROTO_TCP, 443);
	struct weir_lua_host_stats hb = { .family = AF_INET, .bytes_out = 1000000000ull,
					  .bytes_in = 9500000000ull };
	struct weir_lua_stats s = { .now = T0 + 60, .hosts = &hb, .n_hosts = 1 };
	char cls[WEIR_POLICY_NAME_LEN], err[512] = "";

	if (e == NULL)
		return;
	CHECK(weir_lua_on_flow(e, &a, cls, sizeof(cls), err, sizeof(err)) == 0, "a fresh host");
	a.bytes[0] = 6000000000ull;
	a.bytes[1] = 3000000000ull;
	CHECK(weir_lua_on_flow_end(e, &a, err, sizeof(err)) == 0, "9 GB: %s", err);
	CHECK(weir_lua_on_flow(e, &a, cls, sizeof(cls), err, sizeof(err)) == 0, "under the quota");
	a.bytes[0] = 1500000000ull;
	a.bytes[1] = 0;
	CHECK(weir_lua_on_flow_end(e, &a, err, sizeof(err)) == 0, "10.5 GB: %s", err);
	CHECK(weir_lua_on_flow(e, &a, cls, sizeof(cls), err, sizeof(err)) == 1 &&
	      strcmp(cls, "slow") == 0, "over the quota: slow");
	CHECK(weir_lua_on_flow(e, &b, cls, sizeof(cls), err, sizeof(err)) == 0, "not b");
	/* b's open flows alone pass the limit */
	inet_pton(AF_INET, "10.0.0.6", hb.addr);
	CHECK(weir_lua_on_stats(e, &s, err, sizeof(err)) == 0, "stats: %s", err);
	CHECK(weir_lua_on_flow(e, &b, cls, sizeof(cls), err, sizeof(err)) == 1 &&
	      strcmp(cls, "slow") == 0, "open flows count");
	/* its flows end without moving more: counted once, not twice */
	b.bytes[0] = 1000000000ull;
	b.bytes[1] = 9500000000ull;
	CHECK(weir_lua_on_flow_end(e, &b, err, sizeof(err)) == 0, "b's flow ends");
	CHECK(weir_lua_on_flow(e, &b, cls, sizeof(cls), err, sizeof(err)) == 1, "still over");
	b.bytes[1] = 0;
	hb.bytes_in = 0;
	hb.bytes_out = 0;
	/* midnight: everyone starts over */
	CHECK(weir_lua_next_timer(e) == T0 + 3 * HOUR, "reset due at midnight");
	CHECK(weir_lua_run_timers(e, T0 + 3 * HOUR, err, sizeof(err)) == 1, "reset: %s", err);
	CHECK(weir_lua_on_flow(e, &a, cls, sizeof(cls), err, sizeof(err)) == 0, "a starts over");
	CHECK(weir_lua_on_flow(e, &b, cls, sizeof(cls), err, sizeof(err)) == 0, "b starts over");
	CHECK(!weir_lua_dirty(e), "the trees never changed");
	weir_lua_close(e);
}

static void
test_hook_errors(void)
{
	static const char text[] =
		"weir.link{ dir = 'outbound', rate = '30mbit', default = 'bulk' }\n"
		"weir.class{ dir = 'outbound', name = 'bulk', rate = '10mbit' }\n"
		"weir.class{ dir = 'outbound', name = 'web', rate = '10mbit' }\n"
		"weir.on_flow(function(f)\n"
		"  if f.wan_port == 1 then\n"
		"    local t = nil; return t.x\n"
		"  elseif f.wan_port == 2 then\n"
		"    while true do end\n"
		"  elseif f.wan_port == 3 then\n"
		"    weir.class{ dir = 'outbound', name = 'x', rate = 1e6 }\n"
		"  elseif f.wan_port == 4 then\n"
		"    weir.set_class{ dir = 'outbound', name = 'web', rate = '5mbit' }\n"
		"    error('changed my mind')\n"
		"  elseif f.wan_port == 5 then\n"
		"    local s = string.rep('x', 1 << 24)\n"
		"  elseif f.wan_port == 6 then\n"
		"    weir.set_class{ dir = 'outbound', name = 'nosuch', rate = '5mbit' }\n"
		"  elseif f.wan_port == 7 then\n"
		"    pcall(function() while true do end end); return 'web'\n"
		"  elseif f.wan_port == 8 then\n"
		"    weir.on_stats(function() end)\n"
		"  elseif f.wan_port == 9 then\n"
		"    pcall(weir.rule, { class = 'web' }); return 'web'\n"
		"  end\n"
		"  return 'web'\n"
		"end)\n"
		"weir.every(1, function() error({}) end)\n"
		"weir.every(2, function()\n"
		"  weir.set_class{ dir = 'outbound', name = 'bulk', rate = 2e6 } end)\n";
	static const struct {
		uint16_t port;
		int line;
		const char *msg;
	} bad[] = {
		{ 1, 6, "attempt to index a nil value" },
		{ 2, 8, "instruction budget exhausted" },
		{ 3, 10, "weir.class is only valid at the top level" },
		{ 4, 13, "changed my mind" },
		{ 5, 15, "not enough memory" },
		{ 6, 17, "the outbound tree has no class 'nosuch'" },
		{ 7, 19, "instruction budget exhausted" },
		{ 8, 21, "weir.on_stats is only valid at the top level" },
		{ 9, 23, "weir.rule is only valid at the top level" },
	};
	const struct weir_policy_lua_limits lim = { .instructions = 100000, .mem_bytes = 4u << 20 };
	const char *path = script(text);
	struct weir_lua *e = open_ok("hook errors", path, 1000, &lim);
	struct weir_lua_flow f = flow4("10.0.0.5", "192.0.2.1", IPPROTO_TCP, 0);
	const struct weir_lua_counters *c;
	char cls[WEIR_POLICY_NAME_LEN], err[512];

	if (e == NULL)
		return;
	c = weir_lua_counters(e);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		f.wan_port = bad[i].port;
		err[0] = '\0';
		CHECK(weir_lua_on_flow(e, &f, cls, sizeof(cls), err, sizeof(err)) == -1,
		      "port %u fails", bad[i].port);
		expect_at(bad[i].msg, err, path, bad[i].line, bad[i].msg);
		CHECK(strcmp(c->last_error, err) == 0, "last_error: %s", c->last_error);
		/* and the state is fine for the next call */
		f.wan_port = 80;
		cls[0] = '\0';
		CHECK(weir_lua_on_flow(e, &f, cls, sizeof(cls), err, sizeof(err)) == 1 &&
		      strcmp(cls, "web") == 0, "after port %u: %s", bad[i].port, err);
	}
	CHECK(c->hook[WEIR_LUA_FLOW].calls == 18 && c->hook[WEIR_LUA_FLOW].errors == 9,
	      "counted: %llu calls %llu errors", (unsigned long long)c->hook[WEIR_LUA_FLOW].calls,
	      (unsigned long long)c->hook[WEIR_LUA_FLOW].errors);
	/* port 4's set_class was undone with its failed call */
	CHECK(!weir_lua_dirty(e), "a failed hook leaves nothing to compile");
	CHECK(compiled(e, 0, "web").rate == 10000000, "web unchanged");
	/* one timer fails, the other still runs */
	CHECK(weir_lua_run_timers(e, 1002, err, sizeof(err)) == -1, "a timer failed");
	expect_at("error({})", err, path, 27, "error raised with a table value");
	CHECK(weir_lua_dirty(e) && compiled(e, 0, "bulk").rate == 2000000, "the other one ran");
	CHECK(c->hook[WEIR_LUA_TIMER].calls == 2 && c->hook[WEIR_LUA_TIMER].errors == 1,
	      "timers counted");
	weir_lua_close(e);
}

static void
test_set_class_compile(void)
{
	static const char text[] =
		"weir.link{ dir = 'outbound', rate = '30mbit', default = 'web' }\n"
		"weir.class{ dir = 'outbound', name = 'staff', rate = '20mbit' }\n"
		"weir.class{ dir = 'outbound', name = 'web', parent = 'staff', rate = '10mbit' }\n"
		"weir.on_stats(function(s)\n"
		"  if s.now == 1 then\n"
		"    weir.set_class{ dir = 'outbound', name = 'web', rate = '25mbit' }\n"
		"  elseif s.now == 2 then\n"
		"    weir.set_class{ dir = 'outbound', name = 'staff', rate = '5mbit' }\n"
		"  elseif s.now == 3 then\n"
		"    weir.set_class{ dir = 'outbound', name = 'web', rate = '15mbit', prio = 2,\n"
		"                    ceil = '20mbit', limit = 300, mode = 'pfq' }\n"
		"  elseif s.now == 4 then\n"
		"    weir.set_class{ dir = 'outbound', name = 'web', flow_min = '20mbit' }\n"
		"  end\n"
		"end)\n";
	const char *path = script(text);
	struct weir_lua *e = open_ok("set_class", path, 1000, NULL);
	struct weir_lua_stats s = { 0 };
	struct weir_policy *p;
	struct weir_cbq_class_conf web;
	char err[512] = "";

	if (e == NULL)
		return;
	CHECK(compiled(e, 0, "web").rate == 10000000, "10mbit at load");
	for (int now = 1; now <= 2; now++) {
		s.now = now;
		CHECK(weir_lua_on_stats(e, &s, err, sizeof(err)) == 0, "hook runs: %s", err);
		CHECK(weir_lua_dirty(e), "dirty");
		p = weir_lua_compile(e, 4, err, sizeof(err));
		CHECK(p == NULL, "the change makes the policy invalid");
		weir_policy_free(p);
		/* web's own change; or staff's, which web's rate then exceeds */
		expect_at("invalid set_class", err, path, now == 1 ? 6 : 8,
			  "class 'web': rate exceeds its parent's ('staff') rate");
		CHECK(!weir_lua_dirty(e), "rolled back");
		CHECK(compiled(e, 0, "web").rate == 10000000, "the last good policy again");
		CHECK(compiled(e, 0, "staff").rate == 20000000, "staff as it was");
	}
	s.now = 3;
	CHECK(weir_lua_on_stats(e, &s, err, sizeof(err)) == 0, "hook runs: %s", err);
	web = compiled(e, 0, "web");
	CHECK(web.rate == 15000000 && web.prio == 2 && web.ceil == 20000000 && web.limit == 300,
	      "every key changed");
	s.now = 4;
	CHECK(weir_lua_on_stats(e, &s, err, sizeof(err)) == 0, "hook runs: %s", err);
	CHECK(weir_lua_compile(e, 5, err, sizeof(err)) == NULL, "flow_min above rate");
	expect_at("flow_min", err, path, 13, "flow_min exceeds the class rate");
	web = compiled(e, 0, "web");
	CHECK(web.rate == 15000000 && web.prio == 2, "back to the last good, not to the load's");
	CHECK(weir_lua_counters(e)->compile_errors == 3, "compile errors counted");
	weir_lua_close(e);
}

static void
test_registration_errors(void)
{
	expect_error("set_class unknown", LINK BULK
		     "weir.set_class{ dir = 'outbound', name = 'gold', rate = 1e6 }\n", NULL, 3,
		     "the outbound tree has no class 'gold'");
	expect_error("set_class bad key", LINK BULK
		     "weir.set_class{ dir = 'outbound', name = 'bulk', parent = 'x' }\n", NULL, 3,
		     "weir.set_class: unknown key 'parent'");
	expect_error("set_class bad rate", LINK BULK
		     "weir.set_class{ dir = 'outbound', name = 'bulk', rate = '1 mile' }\n", NULL, 3,
		     "'rate' must be a rate");
	expect_error("set_class top level, bad result", LINK BULK
		     "weir.class{ dir = 'outbound', name = 'web', rate = 1e6, ceil = '2mbit' }\n"
		     "weir.set_class{ dir = 'outbound', name = 'web', rate = '3mbit' }\n", NULL, 4,
		     "ceil (2000000 bit/s) is below its rate");
	expect_error("every too often", LINK BULK "weir.every(0.01, function() end)\n", NULL, 3,
		     "the period is 0.01 seconds; it must be between 0.1 and a year");
	expect_error("every no function", LINK BULK "weir.every(1)\n", NULL, 3,
		     "weir.every takes seconds and a function");
	expect_error("at bad time", LINK BULK "weir.at('24:00', function() end)\n", NULL, 3,
		     "'24:00' is not a time of day");
	expect_error("at junk", LINK BULK "weir.at('1:00pm', function() end)\n", NULL, 3,
		     "'1:00pm' is not a time of day");
	expect_error("on_flow twice", LINK BULK "weir.on_flow(function() end)\n\n"
		     "weir.on_flow(function() end)\n", NULL, 5,
		     "weir.on_flow: the hook is already set at line 3");
	expect_error("on_stats not a function", LINK BULK "weir.on_stats({})\n", NULL, 3,
		     "weir.on_stats takes a function");
	weir_policy_free(expect_ok("top-level set_class", LINK BULK
		  "weir.set_class{ dir = 'outbound', name = 'bulk', rate = '12mbit' }\n"
		  "weir.at('07:30', function() end)\n"
		  "weir.on_flow_end(function() end)\n", NULL));
}

static void
test_examples(void)
{
	static const char *const names[] = { "paper", "office", "schedule", "quota" };
	struct weir_policy *p;
	char path[256], err[512];
	int i;

	for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
		snprintf(path, sizeof(path), "%s/lua/examples/%s.lua", WEIR_SRC_DIR, names[n]);
		err[0] = '\0';
		p = weir_policy_lua_load(path, 1, NULL, err, sizeof(err));
		CHECK(p != NULL, "%s compiles: %s", names[n], err);
		if (p == NULL)
			continue;
		if (strcmp(names[n], "paper") == 0) {
			i = weir_policy_class_find(p, 0, "ftp");
			CHECK(p->tree[0].classes[0].cbq.rate == 12500000, "paper: 12.5 Mbit/s");
			CHECK(i > 0 && p->tree[0].classes[i].cbq.rate == 3500000 &&
			      p->tree[0].classes[i].flow_min == 1000000 &&
			      p->tree[0].classes[i].admit == WEIR_ADMIT_DROP, "paper: ftp");
			i = weir_policy_class_find(p, 1, "voip");
			CHECK(i > 0 && p->tree[1].classes[i].cbq.rate == 9000000, "paper: voip");
		} else if (strcmp(names[n], "office") == 0) {
			i = weir_policy_class_find(p, 0, "guest");
			CHECK(i > 0 && p->tree[0].classes[i].cbq.ceil == 5000000 &&
			      p->tree[0].classes[i].cbq.rate == 5000000, "office: guest capped");
			i = weir_policy_class_find(p, 1, "voip");
			CHECK(i > 0 && p->tree[1].classes[i].cbq.prio == 0, "office: voip first");
		}
		weir_policy_free(p);
	}
}

static void
test_office_example(void)
{
	const char *path = WEIR_SRC_DIR "/lua/examples/office.lua";
	struct weir_lua *e = open_ok("office.lua", path, T0, NULL);
	struct weir_lua_flow f = flow4("10.0.0.5", "192.0.2.1", IPPROTO_TCP, 443);
	char cls[WEIR_POLICY_NAME_LEN], err[512] = "";
	int moved = 0;

	if (e == NULL)
		return;
	snprintf(f.cls[0], sizeof(f.cls[0]), "web");
	for (int i = 0; i < 25; i++)
		moved += weir_lua_on_flow(e, &f, cls, sizeof(cls), err, sizeof(err)) == 1;
	CHECK(moved == 5 && strcmp(cls, "bulk") == 0, "flows 21-25 go bulk: %d %s", moved, err);
	for (int i = 0; i < 10; i++)
		weir_lua_on_flow_end(e, &f, err, sizeof(err));
	CHECK(weir_lua_on_flow(e, &f, cls, sizeof(cls), err, sizeof(err)) == 0, "room again");
	weir_lua_close(e);
}

/* Issue 16.5: strtod's extras are not rates. */
static void
test_rate_grammar(void)
{
	static const char *const bad[] = { "0x10mbit", "1e1mbit", " 5mbit", "5mbit ", "inf",
					   "nan", "+5mbit", "5.mbit", ".5mbit", "5 mbit", "1e7" };
	char text[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), LINK "weir.class{ dir = 'outbound', name = 'bulk', "
			 "rate = '%s' }\n", bad[i]);
		expect_error(bad[i], text, NULL, 2, "'rate' must be a rate like");
	}
	weir_policy_free(expect_ok("documented rates", LINK
		  "weir.class{ dir = 'outbound', name = 'bulk', rate = '1.5mbit', ceil = '20Mbit' }\n",
		  NULL));
}

/* malloc's bytes in use, big (mmapped) blocks included */
static size_t
heap_used(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/* Issue 17.12: set_class's undo log holds one entry per class and call,
 * within the sandbox's memory, however often a hook loops over it. */
static void
test_undo_log_bounded(void)
{
	static const char text[] =
		"weir.link{ dir = 'outbound', rate = '30mbit', default = 'bulk' }\n"
		"weir.class{ dir = 'outbound', name = 'bulk', rate = '10mbit' }\n"
		"weir.class{ dir = 'outbound', name = 'web', rate = '10mbit' }\n"
		"weir.every(1, function()\n"
		"  for i = 1, 300000 do\n"
		"    weir.set_class{ dir = 'outbound', name = 'bulk', rate = 1000000 + i }\n"
		"  end\n"
		"end)\n"
		"weir.every(3, function()\n"
		"  weir.set_class{ dir = 'outbound', name = 'web', rate = '1mbit' }\n"
		"  weir.set_class{ dir = 'outbound', name = 'web', rate = '2mbit' }\n"
		"  weir.set_class{ dir = 'outbound', name = 'bulk', rate = '3mbit' }\n"
		"  error('undo all three')\n"
		"end)\n";
	const struct weir_policy_lua_limits lim = { .instructions = 1000000000ull,
						    .mem_bytes = 4u << 20, .time_ms = 60000 };
	const char *path = script(text);
	struct weir_lua *e = open_ok("undo log", path, 1000, &lim);
	char err[512] = "";
	size_t before;

	if (e == NULL)
		return;
	before = heap_used();
	CHECK(weir_lua_run_timers(e, 1001, err, sizeof(err)) == 1, "the loop ran: %s", err);
	/* 300,000 logged changes were ~40 MB outside the 4 MB cap */
	CHECK(heap_used() < before + (6u << 20), "heap grew by %zu bytes", heap_used() - before);
	CHECK(compiled(e, 0, "bulk").rate == 1300000, "the last rate stands");
	CHECK(weir_lua_run_timers(e, 1003, err, sizeof(err)) == -1, "the failing one fails");
	CHECK(compiled(e, 0, "web").rate == 10000000 && compiled(e, 0, "bulk").rate == 1300000,
	      "its changes undone, twice-changed web included");
	weir_lua_close(e);
}

/* A thread that runs scripts beside another (the compile job beside the
 * management lcore's hooks) keeps its time limit with its own clock, and
 * neither thread's runs move the other's deadline: the watchdog's one
 * deadline, shared, was cleared by whichever run ended first. */
struct side {
	const char *path;               /* what the side thread runs */
	bool once;                      /* once (the runaway), or until `done` */
	atomic_bool done;               /* set here: stop */
	atomic_bool finished;           /* set by the thread once it stopped */
	char err[512];
	double took;
	unsigned int runs;
};

static const struct weir_policy_lua_limits runaway_lim = {
	.instructions = 10000000000ull, .time_ms = 300,
};

static void *
side_main(void *arg)
{
	struct side *sd = arg;
	double t0 = now_s();

	weir_lua_thread_own_clock();
	do {
		weir_policy_free(weir_policy_lua_load(sd->path, 1, &runaway_lim, sd->err,
						      sizeof(sd->err)));
		sd->runs++;
	} while (!sd->once && !atomic_load(&sd->done));
	sd->took = now_s() - t0;
	atomic_store(&sd->finished, true);
	return NULL;
}

static void
test_time_limits_on_two_threads(void)
{
	const char *runaway = script(LINK BULK "\nwhile true do end\n");
	const char *quick = script(LINK BULK "local t = 0 for i = 1, 1000 do t = t + i end\n");
	struct side sd = { .path = runaway, .once = true };
	char err[512] = "";
	pthread_t t;
	double t0;
	unsigned int quick_runs = 0;

	/* The side thread's runaway, while this thread's runs start and end. */
	atomic_init(&sd.done, false);
	atomic_init(&sd.finished, false);
	CHECK(pthread_create(&t, NULL, side_main, &sd) == 0, "thread");
	t0 = now_s();
	while (!atomic_load(&sd.finished) && now_s() - t0 < 5) {
		weir_policy_free(weir_policy_lua_load(quick, 1, &runaway_lim, err, sizeof(err)));
		quick_runs++;
	}
	pthread_join(t, NULL);
	CHECK(strstr(sd.err, "time limit exceeded (300 ms)") != NULL, "side runaway: '%s'",
	      sd.err);
	CHECK(sd.took < 1.5, "side runaway stopped after %.3f s (%u runs here)", sd.took,
	      quick_runs);

	/* This thread's runaway (the watchdog's), while the side's runs come and go. */
	sd = (struct side){ .path = quick };
	atomic_init(&sd.done, false);
	atomic_init(&sd.finished, false);
	CHECK(pthread_create(&t, NULL, side_main, &sd) == 0, "thread");
	t0 = now_s();
	weir_policy_free(weir_policy_lua_load(runaway, 1, &runaway_lim, err, sizeof(err)));
	t0 = now_s() - t0;
	atomic_store(&sd.done, true);
	pthread_join(t, NULL);
	CHECK(strstr(err, "time limit exceeded (300 ms)") != NULL, "runaway: '%s'", err);
	CHECK(t0 < 1.5, "runaway stopped after %.3f s (%u side runs)", t0, sd.runs);
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
	test_spi_rules();
	test_nested();
	test_aqm();
	test_declaration_errors();
	test_build_errors();
	test_marker();
	test_lua_errors();
	test_limits();
	test_c_functions_bounded();
	test_time_limits_on_two_threads();
	test_shipped_policy();
	/* weir.at and weir.date in a known time zone */
	setenv("TZ", "UTC", 1);
	tzset();
	test_every();
	test_at();
	test_schedule_example();
	test_on_flow();
	test_quota_example();
	test_hook_errors();
	test_set_class_compile();
	test_registration_errors();
	test_examples();
	test_office_example();
	test_undo_log_bounded();
	test_rate_grammar();
	for (unsigned int i = 1; i <= n_scripts; i++) {
		char path[128];

		snprintf(path, sizeof(path), "%s/p%u.lua", tmpdir, i);
		unlink(path);
	}
	rmdir(tmpdir);
	return unit_report();
}
