/* SPDX-License-Identifier: BSD-3-Clause
 * weir-bench-hooks: how many new flows a second the management lcore can
 * decide in Lua (issue #5's benchmark). Runs a script's on_flow over
 * synthetic flows from 1,000 LAN hosts, in the engine weir uses
 * (app/weir/policy_lua.c: sandbox, per-call instruction budget), and
 * reports calls per second for an empty hook, for the example
 * (a host's 20th concurrent flow goes to a penalty class, counted in a Lua
 * table and released on flow end) and for lua/examples/quota.lua.
 *
 *     weir-bench-hooks [--flows N] [REPO_DIR]
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy_lua.h"

static const char *const HEAD =
	"weir.link{ dir = \"outbound\", rate = \"100mbit\", default = \"bulk\" }\n"
	"weir.class{ dir = \"outbound\", name = \"bulk\", rate = \"90mbit\" }\n"
	"weir.class{ dir = \"outbound\", name = \"penalty\", rate = \"1mbit\" }\n";

static const struct {
	const char *name, *body;
} CASES[] = {
	{ "empty on_flow", "weir.on_flow(function(f) end)\n" },
	{ "20th concurrent flow of a host -> penalty",
	  "local open = {}\n"
	  "weir.on_flow(function(f)\n"
	  "  local n = (open[f.lan] or 0) + 1\n"
	  "  open[f.lan] = n\n"
	  "  if n >= 20 then return \"penalty\" end\n"
	  "end)\n"
	  "weir.on_flow_end(function(f)\n"
	  "  local n = open[f.lan]\n"
	  "  if n then open[f.lan] = n > 1 and n - 1 or nil end\n"
	  "end)\n" },
};

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void
bench(const char *name, const char *path, unsigned int n)
{
	char err[512], cls[64];
	struct weir_lua *l = weir_lua_open(path, NULL, err, sizeof(err));
	unsigned int moved = 0;
	double t0;

	if (l == NULL) {
		fprintf(stderr, "%s: %s\n", name, err);
		exit(1);
	}
	t0 = now_s();
	for (unsigned int i = 0; i < n; i++) {
		struct weir_lua_flow f = {
			.dir = 0, .proto = 6, .family = AF_INET, .lan_port = (uint16_t)(1024 + i % 60000),
			.wan_port = 443, .lan = { 10, 0, (uint8_t)(i % 1000 / 250), (uint8_t)(i % 250) },
			.wan = { 192, 0, 2, (uint8_t)(i % 200) },
		};
		int rc;

		snprintf(f.cls[0], sizeof(f.cls[0]), "bulk");
		rc = weir_lua_on_flow(l, &f, cls, sizeof(cls), err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "%s: %s\n", name, err);
			exit(1);
		}
		moved += rc == 1;
		/* Every other flow ends (as many open as end, in steady state). */
		if (i % 2 == 1 && weir_lua_has(l, WEIR_LUA_FLOW_END))
			weir_lua_on_flow_end(l, &f, err, sizeof(err));
	}
	printf("%-45s %10.0f new flows/s  (%u moved)\n", name, n / (now_s() - t0), moved);
	weir_lua_close(l);
}

int
main(int argc, char **argv)
{
	unsigned int n = 200000;
	const char *repo = ".";
	char path[4096];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--flows") == 0 && i + 1 < argc)
			n = (unsigned int)strtoul(argv[++i], NULL, 10);
		else
			repo = argv[i];
	}
	for (size_t c = 0; c < sizeof(CASES) / sizeof(CASES[0]); c++) {
		FILE *fh;

		snprintf(path, sizeof(path), "/tmp/weir-bench-hooks-%zu.lua", c);
		fh = fopen(path, "w");
		if (fh == NULL)
			return 1;
		fprintf(fh, "%s%s", HEAD, CASES[c].body);
		fclose(fh);
		bench(CASES[c].name, path, n);
		remove(path);
	}
	snprintf(path, sizeof(path), "%s/lua/examples/quota.lua", repo);
	bench("lua/examples/quota.lua", path, n);
	return 0;
}
