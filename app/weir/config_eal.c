/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the config's `eal` list checked before DPDK sees it.
 *
 * rte_eal_init reports a bad value with its own message and no line of
 * the config, and only at start (--check never calls it). So the options
 * weir knows are checked here with their value forms, and anything that
 * is neither a known option, an option's value nor a plausible long
 * option of another DPDK version is refused with the item's FILE:LINE.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config_loader.h"
#include "config_eal.h"

/* What a value must look like. */
enum eal_val {
	V_NONE,         /* a flag: no value */
	V_UINT,         /* a decimal count above 0 (-m, -n, -r) */
	V_INDEX,        /* a decimal number from 0 (--main-lcore) */
	V_CORELIST,     /* 0-3,5 */
	V_HEX,          /* 0xff or ff (-c, --base-virtaddr) */
	V_LCORES,       /* --lcores' map: digits , - @ ( ) */
	V_UINTLIST,     /* 1024,1024 (--socket-mem, --socket-limit) */
	V_NAME,         /* a file prefix: no '/', not empty */
	V_STRING,       /* anything not empty that is not an option (--vdev, -a, paths) */
	V_CHOICE,       /* one of choices */
	V_OPT_CHOICE,   /* the flag alone, or =one of choices (--syslog, --huge-unlink) */
};

struct eal_opt {
	const char *name;               /* "-m" or "--file-prefix" */
	enum eal_val val;
	const char *choices;            /* V_CHOICE, V_OPT_CHOICE: "a|b|c" */
};

static const struct eal_opt eal_opts[] = {
	{ "-l", V_CORELIST, NULL }, { "-c", V_HEX, NULL }, { "--lcores", V_LCORES, NULL },
	{ "--main-lcore", V_INDEX, NULL }, { "-s", V_HEX, NULL }, { "-S", V_CORELIST, NULL },
	{ "-m", V_UINT, NULL }, { "-n", V_UINT, NULL }, { "-r", V_UINT, NULL },
	{ "--socket-mem", V_UINTLIST, NULL }, { "--socket-limit", V_UINTLIST, NULL },
	{ "--file-prefix", V_NAME, NULL }, { "--huge-dir", V_STRING, NULL },
	{ "--proc-type", V_CHOICE, "primary|secondary|auto" },
	{ "--iova-mode", V_CHOICE, "pa|va" }, { "--vfio-intr", V_CHOICE, "legacy|msi|msix" },
	{ "--vdev", V_STRING, NULL }, { "-a", V_STRING, NULL }, { "--allow", V_STRING, NULL },
	{ "-b", V_STRING, NULL }, { "--block", V_STRING, NULL }, { "-d", V_STRING, NULL },
	{ "--log-level", V_STRING, NULL }, { "--mbuf-pool-ops-name", V_STRING, NULL },
	{ "--base-virtaddr", V_HEX, NULL }, { "--vfio-vf-token", V_STRING, NULL },
	{ "--force-max-simd-bitwidth", V_INDEX, NULL },
	{ "--trace", V_STRING, NULL }, { "--trace-dir", V_STRING, NULL },
	{ "--trace-bufsz", V_STRING, NULL }, { "--trace-mode", V_CHOICE, "overwrite|discard" },
	{ "--syslog", V_OPT_CHOICE, "auth|cron|daemon|ftp|kern|lpr|mail|news|syslog|user|uucp|"
	  "local0|local1|local2|local3|local4|local5|local6|local7" },
	{ "--huge-unlink", V_OPT_CHOICE, "existing|always|never" },
	{ "--no-huge", V_NONE, NULL }, { "--no-pci", V_NONE, NULL }, { "--no-hpet", V_NONE, NULL },
	{ "--no-shconf", V_NONE, NULL }, { "--in-memory", V_NONE, NULL },
	{ "--legacy-mem", V_NONE, NULL }, { "--single-file-segments", V_NONE, NULL },
	{ "--match-allocations", V_NONE, NULL }, { "--create-uio-dev", V_NONE, NULL },
	{ "--no-telemetry", V_NONE, NULL }, { "--telemetry", V_NONE, NULL },
	{ "--huge-worker-stack", V_OPT_CHOICE, NULL }, { "-v", V_NONE, NULL },
};

static const struct eal_opt *
opt_find(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(eal_opts) / sizeof(eal_opts[0]); i++)
		if (strlen(eal_opts[i].name) == len && strncmp(eal_opts[i].name, name, len) == 0)
			return &eal_opts[i];
	return NULL;
}

/* A decimal integer from min to max: digits only (no sign, suffix or
 * space, which DPDK's strtoull would take or misread). */
static bool
num_ok(const char *s, size_t len, uint64_t min, uint64_t max)
{
	uint64_t v = 0;

	if (len == 0 || len > 19)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	return v >= min && v <= max;
}

static bool
uint_ok(const char *s, size_t len, uint64_t max)
{
	return num_ok(s, len, 1, max);
}

static bool
chars_ok(const char *s, const char *set)
{
	return s[0] != '\0' && strspn(s, set) == strlen(s);
}

/* 0-3,5: numbers or ranges of numbers, comma-separated. */
static bool
corelist_ok(const char *s)
{
	const char *p = s;

	while (*p != '\0') {
		size_t n = strspn(p, "0123456789");

		if (n == 0 || n > 4)
			return false;
		p += n;
		if (*p == '-') {
			n = strspn(++p, "0123456789");
			if (n == 0 || n > 4)
				return false;
			p += n;
		}
		if (*p == ',' && p[1] != '\0')
			p++;
		else if (*p != '\0')
			return false;
	}
	return p != s;
}

static bool
choice_ok(const char *choices, const char *v)
{
	size_t n = strlen(v);

	for (const char *c = choices; c != NULL && *c != '\0';) {
		size_t cl = strcspn(c, "|");

		if (cl == n && strncmp(c, v, n) == 0)
			return true;
		c += cl + (c[cl] == '|');
	}
	return false;
}

/* The message for a value of o that is not of its form, NULL if it is. */
static const char *
value_problem(const struct eal_opt *o, const char *v)
{
	switch (o->val) {
	case V_UINT:
		/* -m in MB (at most 16 TiB), -n/-r a few channels/ranks, lcores. */
		return uint_ok(v, strlen(v), strcmp(o->name, "-m") == 0 ? 16u << 20 : 1u << 16)
		       ? NULL : "a whole number above 0 (no sign, unit or suffix)";
	case V_INDEX:
		return num_ok(v, strlen(v), 0, 1u << 16) ? NULL : "a whole number (no sign or suffix)";
	case V_CORELIST:
		return corelist_ok(v) ? NULL : "a list of lcores such as 0-3,5";
	case V_HEX:
		return chars_ok(strncasecmp(v, "0x", 2) == 0 ? v + 2 : v, "0123456789abcdefABCDEF")
		       ? NULL : "a hexadecimal mask such as 0x3";
	case V_LCORES:
		return chars_ok(v, "0123456789,-@()") ? NULL : "an lcore map such as 0@(0-1),1@1";
	case V_UINTLIST:
		for (const char *p = v;; p++) {
			size_t n = strcspn(p, ",");

			if (!uint_ok(p, n, 1u << 24) && !(n == 1 && *p == '0'))
				return "megabytes per socket, comma-separated, such as 1024,1024";
			p += n;
			if (*p == '\0')
				return NULL;
		}
	case V_NAME:
		return v[0] != '\0' && v[0] != '-' && strchr(v, '/') == NULL ? NULL
		       : "a name without '/'";
	case V_STRING:
		return v[0] != '\0' && v[0] != '-' ? NULL : "a value, not empty or an option";
	case V_CHOICE:
	case V_OPT_CHOICE:
		return o->choices == NULL || choice_ok(o->choices, v) ? NULL : o->choices;
	case V_NONE:
		break;
	}
	return "no value";
}

int
cfg_check_eal(struct loader *ld, const config_setting_t *eal)
{
	int n = config_setting_length(eal);

	for (int i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(eal, i);
		const char *arg = config_setting_get_string(s), *v = NULL, *p;
		const struct eal_opt *o;
		size_t nl;

		if (arg[0] != '-' || arg[1] == '\0')
			return cfg_fail(ld, s, "'eal' item %d '%s' is not an EAL option (an option's "
					"value follows its option)", i + 1, arg);
		if (arg[1] == '-') {
			/* --name or --name=value */
			p = strchr(arg, '=');
			nl = p != NULL ? (size_t)(p - arg) : strlen(arg);
			v = p != NULL ? p + 1 : NULL;
		} else {
			/* -m 128, or -m128 (getopt's attached form) */
			nl = 2;
			v = arg[2] != '\0' ? arg + 2 : NULL;
		}
		o = opt_find(arg, nl);
		if (o == NULL) {
			/* A long option of another DPDK version goes through (its
			 * value with it, if one follows); an unknown short one is
			 * a typo or a stray value such as "-1mbit". */
			if (arg[1] != '-' || !isalpha((unsigned char)arg[2]))
				return cfg_fail(ld, s, "'eal' item %d '%s' is not an EAL option", i + 1,
						arg);
			if (v == NULL && i + 1 < n &&
			    config_setting_get_string(config_setting_get_elem(eal, i + 1))[0] != '-')
				i++;
			continue;
		}
		if (o->val == V_NONE || (o->val == V_OPT_CHOICE && v == NULL)) {
			if (v != NULL)
				return cfg_fail(ld, s, "'eal' item %d: %.*s takes no value", i + 1,
						(int)nl, arg);
			continue;
		}
		if (v == NULL) {
			if (i + 1 >= n)
				return cfg_fail(ld, s, "'eal' item %d: %s needs a value", i + 1, arg);
			s = config_setting_get_elem(eal, ++i);
			v = config_setting_get_string(s);
		}
		p = value_problem(o, v);
		if (p != NULL)
			return cfg_fail(ld, s, "'eal' item %d: %.*s '%s' must be %s", i + 1, (int)nl, arg,
					v, p);
	}
	return 0;
}
