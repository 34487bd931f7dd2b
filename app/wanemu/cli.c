/* SPDX-License-Identifier: BSD-3-Clause
 * weir-wanemu: command line. Every rejected argument is named in the message
 * and exits 2, so a testbed script fails loudly instead of emulating the
 * wrong WAN.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "emu.h"

#define MAX_DELAY_MS 60000.0    /* a minute: beyond any WAN, and keeps ns maths far from overflow */

static void
usage(FILE *out)
{
	fprintf(out, "usage: weir-wanemu --weir IFACE --path IFACE[,delay=MS][,jitter=MS][,loss=PCT]"
		"[,ploss=N][,corrupt=BYTES][,rate=RATE][,limit=PKTS][,loss_dir=both|to_path|to_weir]\n"
		"              [,sched=steps:RATE/SECS/...|sine:BASE/AMP/PERIOD_SECS][,sched_dir=both|to_path|to_weir] [--path ...]\n"
		"                   [--core RATE-OPTIONS] [--seed N] [--stats FILE] [--stats-interval S]"
		" [--verbose]\n"
		"       path options also rio=MININ:MAXIN:PIN:MINOUT:MAXOUT:POUT,rio_in=DSCP[+DSCP]\n");
}

_Noreturn static void
die_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "weir-wanemu: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	usage(stderr);
	exit(2);
}

/* A finite number >= 0 with nothing after it ("nan", "inf", "5ms" are not). */
static int
parse_num(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return errno == 0 && end != s && *end == '\0' && isfinite(*out) && *out >= 0 ? 0 : -1;
}

static int
parse_uint(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* tc's units: "10mbit", "500kbit", "1gbit", "64000bit" or a bare number are
 * bit/s; "kbps"/"mbps"/"gbps"/"bps" are bytes/s. "0" = unlimited. */
static int
parse_rate(const char *s, uint64_t *bps)
{
	static const struct { const char *sfx; double mul; } units[] = {
		{ "gbit", 1e9 }, { "mbit", 1e6 }, { "kbit", 1e3 }, { "bit", 1 },
		{ "gbps", 8e9 }, { "mbps", 8e6 }, { "kbps", 8e3 }, { "bps", 8 }, { "", 1 },
	};
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || !isfinite(v) || v < 0)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(end, units[i].sfx) == 0) {
			double r = v * units[i].mul;

			/* Below 1 bit/s would round to "unlimited"; above 1 Tbit/s
			 * a frame's serialisation time rounds to 0 anyway. */
			if ((r > 0 && r < 1) || r > 1e12)
				return -1;
			*bps = (uint64_t)r;
			return 0;
		}
	}
	return -1;
}

static void
parse_path(struct emu *e, const char *arg)
{
	struct link_params lp = { .limit = 1000, .loss = true };
	struct link_params to_weir;
	char buf[512], *save = NULL, *tok;
	int loss_to_path = 1, loss_to_weir = 1, sched_to_path = 1, sched_to_weir = 1;
	struct path *p;

	if (e->n_paths == MAX_PATHS)
		die_usage("--path %s: at most %d paths", arg, MAX_PATHS);
	if (strlen(arg) >= sizeof(buf))
		die_usage("--path %s: too long", arg);
	strcpy(buf, arg);
	p = &e->paths[e->n_paths];
	if (buf[0] == ',' || (tok = strtok_r(buf, ",", &save)) == NULL ||
	    strchr(tok, '=') != NULL)
		die_usage("--path %s: must start with an interface name", arg);
	if (strlen(tok) >= IFNAMSIZ)
		die_usage("--path %s: interface name '%s' is too long", arg, tok);
	snprintf(p->ifname, sizeof(p->ifname), "%s", tok);
	while ((tok = strtok_r(NULL, ",", &save)) != NULL) {
		char *key = tok, *val = strchr(tok, '=');
		double d;
		int ok;

		if (val == NULL)
			die_usage("--path %s: option '%s' needs a value (name=value)", arg, tok);
		*val++ = '\0';
		if (strcmp(key, "delay") == 0)
			ok = parse_num(val, &d) == 0 && d <= MAX_DELAY_MS && ((lp.delay_ms = d), 1);
		else if (strcmp(key, "jitter") == 0)
			ok = parse_num(val, &d) == 0 && d <= MAX_DELAY_MS && ((lp.jitter_ms = d), 1);
		else if (strcmp(key, "loss") == 0)
			ok = parse_num(val, &d) == 0 && d <= 100 && ((lp.loss_pct = d), 1);
		else if (strcmp(key, "ploss") == 0)
			/* 1 would drop everything: that is loss=100. */
			ok = parse_uint(val, &lp.ploss) == 0 && lp.ploss != 1;
		else if (strcmp(key, "corrupt") == 0)
			/* one bit error per BYTES on average; directions as loss_dir */
			ok = parse_uint(val, &lp.corrupt) == 0 && lp.corrupt >= 64;
		else if (strcmp(key, "rate") == 0)
			ok = parse_rate(val, &lp.rate_bps) == 0;
		else if (strcmp(key, "sched") == 0) {
			const char *why = NULL;

			if (sched_parse(&lp.sched, val, parse_rate, &why) != 0)
				die_usage("--path %s: bad value for sched: '%s': %s", arg, val, why);
			ok = 1;
		} else if (strcmp(key, "sched_dir") == 0) {
			ok = 1;
			if (strcmp(val, "both") == 0)
				sched_to_path = sched_to_weir = 1;
			else if (strcmp(val, "to_path") == 0)
				sched_to_path = 1, sched_to_weir = 0;
			else if (strcmp(val, "to_weir") == 0)
				sched_to_path = 0, sched_to_weir = 1;
			else
				ok = 0;
		} else if (strcmp(key, "rio") == 0 || strcmp(key, "rio_in") == 0) {
			const char *why = NULL;

			if ((key[3] == '\0' ? rio_parse(&lp.rio, val, &why) :
			     rio_parse_in(&lp.rio, val, &why)) != 0)
				die_usage("--path %s: bad value for %s: '%s': %s", arg, key, val, why);
			ok = 1;
		} else if (strcmp(key, "limit") == 0)
			ok = parse_uint(val, &lp.limit) == 0 && lp.limit >= 1 && lp.limit < LINK_RING_CAP;
		else if (strcmp(key, "loss_dir") == 0) {
			ok = 1;
			if (strcmp(val, "both") == 0)
				loss_to_path = loss_to_weir = 1;
			else if (strcmp(val, "to_path") == 0)
				loss_to_path = 1, loss_to_weir = 0;
			else if (strcmp(val, "to_weir") == 0)
				loss_to_path = 0, loss_to_weir = 1;
			else
				ok = 0;
		} else
			die_usage("--path %s: unknown option '%s'", arg, key);
		if (!ok)
			die_usage("--path %s: bad value for %s: '%s'", arg, key, val);
	}
	if (lp.rio.on && lp.rate_bps == 0 && lp.sched.kind == SCHED_NONE)
		die_usage("--path %s: rio= needs rate= (it manages the queue waiting for the link)", arg);
	if (lp.sched.kind != SCHED_NONE) {
		if (lp.rate_bps != 0)
			die_usage("--path %s: give rate= or sched=, not both", arg);
		lp.rate_bps = sched_rate(&lp.sched, lp.sched.t0_ns);
	}
	to_weir = lp;
	lp.loss = loss_to_path;
	to_weir.loss = loss_to_weir;
	/* A direction without the schedule is unlimited, as without rate=. */
	if (!sched_to_path)
		lp.sched.kind = SCHED_NONE, lp.rate_bps = 0;
	if (!sched_to_weir)
		to_weir.sched.kind = SCHED_NONE, to_weir.rate_bps = 0;
	if (link_init(&p->dir[TO_PATH], &lp, &e->rng) < 0 || link_init(&p->dir[TO_WEIR], &to_weir, &e->rng) < 0) {
		fprintf(stderr, "weir-wanemu: out of memory\n");
		exit(1);
	}
	e->n_paths++;
}

void
emu_parse_args(struct emu *e, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "weir", required_argument, NULL, 'w' }, { "path", required_argument, NULL, 'p' },
		{ "seed", required_argument, NULL, 's' }, { "stats", required_argument, NULL, 'S' },
		{ "stats-interval", required_argument, NULL, 'i' }, { "verbose", no_argument, NULL, 'v' },
		{ "core", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	uint32_t seed;
	double d;
	int c;

	e->rng = 0x9e3779b97f4a7c15ULL;
	e->stats_interval = 1.0;
	opterr = 0;     /* we name the bad argument ourselves */
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		switch (c) {
		case 'w':
			if (optarg[0] == '\0' || strlen(optarg) >= IFNAMSIZ)
				die_usage("--weir %s: bad interface name", optarg);
			snprintf(e->weir_if, sizeof(e->weir_if), "%s", optarg);
			break;
		case 'p':
			parse_path(e, optarg);
			break;
		case 'c': {
			/* The path options on a link every frame from weir crosses
			 * first: read as a path named "core", kept as the core. */
			char opt[600];

			if (e->has_core)
				die_usage("--core %s: given twice", optarg);
			snprintf(opt, sizeof(opt), "core,%s", optarg);
			parse_path(e, opt);
			e->n_paths--;
			e->core = e->paths[e->n_paths].dir[TO_PATH];
			link_free(&e->paths[e->n_paths].dir[TO_WEIR]);
			memset(&e->paths[e->n_paths], 0, sizeof(e->paths[0]));
			e->paths[e->n_paths].fd = -1;
			e->has_core = 1;
			break;
		}
		case 's':
			if (parse_uint(optarg, &seed) != 0)
				die_usage("--seed %s: not an unsigned 32-bit integer", optarg);
			/* Spread small seeds over the state; xorshift needs it nonzero. */
			e->rng = ((uint64_t)seed + 1) * 0x9e3779b97f4a7c15ULL;
			break;
		case 'S':
			if (optarg[0] == '\0' || strlen(optarg) >= PATH_MAX - 8)
				die_usage("--stats %s: bad file name", optarg);
			e->stats_file = optarg;
			break;
		case 'i':
			if (parse_num(optarg, &d) != 0 || d < 0.01 || d > 86400)
				die_usage("--stats-interval %s: must be a number of seconds in [0.01, 86400]", optarg);
			e->stats_interval = d;
			break;
		case 'v':
			e->verbose = 1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			die_usage("%s needs a value", argv[optind - 1]);
			break;
		default:
			die_usage("unknown argument %s", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument %s", argv[optind]);
	if (e->weir_if[0] == '\0')
		die_usage("--weir IFACE is required");
	if (e->n_paths == 0)
		die_usage("at least one --path IFACE[,...] is required");
	for (int i = 0; i < e->n_paths; i++) {
		if (strcmp(e->paths[i].ifname, e->weir_if) == 0)
			die_usage("--path %s: is also the --weir interface", e->paths[i].ifname);
		for (int j = 0; j < i; j++)
			if (strcmp(e->paths[i].ifname, e->paths[j].ifname) == 0)
				die_usage("--path %s: given twice", e->paths[i].ifname);
	}
}
