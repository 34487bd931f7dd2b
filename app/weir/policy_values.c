/* SPDX-License-Identifier: BSD-3-Clause
 * weir: policy value parsers shared by the config file and Lua front ends
 * (see policy_values.h). The messages are the ones the config file has
 * always given; test/py/test_config.py pins several of them.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <rte_common.h>

#include "cbq.h"
#include "policy.h"
#include "policy_values.h"

static int
fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

int
weir_value_rate(const char *key, const struct weir_value *v, uint64_t *out, char *err,
		size_t errlen)
{
	static const struct { const char *unit; double mul; } units[] = {
		{ "gbit", 1e9 }, { "mbit", 1e6 }, { "kbit", 1e3 }, { "bit", 1 },
	};
	double r = -1;

	if (v->type == WEIR_VALUE_INT) {
		r = (double)v->i;
	} else if (v->type == WEIR_VALUE_STR) {
		/* Exactly the documented grammar: digits, a decimal fraction, a
		 * unit. strtod alone also takes " 5", "0x10", "1e1", "inf". */
		regex_t re;
		regmatch_t unit[2];
		char *end;
		int m;

		if (regcomp(&re, "^[0-9]+(\\.[0-9]+)?([kmg]?bit)?$", REG_EXTENDED | REG_ICASE) != 0)
			return fail(err, errlen, "'%s': out of memory", key);
		m = regexec(&re, v->s, 2, unit, 0);
		regfree(&re);
		if (m == 0) {
			r = strtod(v->s, &end);
			if (*end != '\0') {
				double mul = 0;

				for (size_t i = 0; i < RTE_DIM(units); i++)
					if (strcasecmp(end, units[i].unit) == 0)
						mul = units[i].mul;
				r *= mul;
			}
		}
	}
	if (!(r >= 0))
		return fail(err, errlen, "'%s' must be a rate like \"20mbit\", \"1.5gbit\", "
			    "\"800kbit\" or bit/s (digits, an optional .fraction, an optional unit "
			    "bit, kbit, mbit or gbit)", key);
	if (r != 0 && (r < (double)WEIR_CBQ_RATE_MIN || r > 100e9)) {
		fail(err, errlen, "'%s' is %.0f bit/s; it must be 0 (unshaped) or between 8kbit "
		     "and 100gbit", key, r);
		return -2;
	}
	*out = (uint64_t)r;
	return 0;
}

static int
parse_prefix(const char *str, struct weir_cls_prefix *p)
{
	char buf[64];
	char *slash;
	long len;

	if (strlen(str) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", str);
	slash = strchr(buf, '/');
	if (slash != NULL)
		*slash = '\0';
	memset(p, 0, sizeof(*p));
	if (inet_pton(AF_INET, buf, p->addr) == 1)
		p->family = 4;
	else if (inet_pton(AF_INET6, buf, p->addr) == 1)
		p->family = 6;
	else
		return -1;
	len = p->family == 4 ? 32 : 128;
	if (slash != NULL) {
		char *end;
		long l = strtol(slash + 1, &end, 10);

		if (*end != '\0' || end == slash + 1 || l < 0 || l > len)
			return -1;
		len = l;
	}
	p->len = (uint8_t)len;
	return 0;
}

int
weir_value_prefix(const char *key, const struct weir_value *v, struct weir_cls_prefix *out,
		  char *err, size_t errlen)
{
	struct weir_cls_prefix p;

	if (v->type != WEIR_VALUE_STR || parse_prefix(v->s, &p) < 0)
		return fail(err, errlen, "'%s' must be an address or prefix like \"10.1.0.0/16\" or "
			    "\"2001:db8::/32\"", key);
	*out = p;
	return 0;
}

int
weir_value_ports(const char *key, const struct weir_value *v, struct weir_cls_ports *out,
		 char *err, size_t errlen)
{
	long long lo = -1, hi = -1;

	if (v->type == WEIR_VALUE_INT) {
		lo = hi = v->i;
	} else if (v->type == WEIR_VALUE_STR) {
		const char *str = v->s;
		char *end;

		lo = strtol(str, &end, 10);
		if (end == str)
			lo = -1;
		else if (*end == '\0')
			hi = lo;
		else if (*end == '-' && end[1] != '\0') {
			const char *h = end + 1;

			hi = strtol(h, &end, 10);
			if (*end != '\0')
				hi = -1;
		}
	}
	if (lo < 1 || hi < lo || hi > 65535)
		return fail(err, errlen, "'%s' must be a port 1-65535 or a range like \"1024-65535\"",
			    key);
	out->lo = (uint16_t)lo;
	out->hi = (uint16_t)hi;
	return 0;
}

int
weir_value_spi(const struct weir_value *v, uint32_t *lo, uint32_t *hi, char *err, size_t errlen)
{
	long long l = -1, h = -1;

	if (v->type == WEIR_VALUE_INT) {
		l = h = v->i;
	} else if (v->type == WEIR_VALUE_STR) {
		const char *str = v->s;
		char *end;

		l = strtoll(str, &end, 0);
		if (end == str || l < 0)
			l = -1;
		else if (*end == '\0')
			h = l;
		else if (*end == '-' && end[1] != '\0') {
			const char *s2 = end + 1;

			h = strtoll(s2, &end, 0);
			if (*end != '\0' || end == s2)
				h = -1;
		}
	}
	if (l < 1 || h < l || h > 0xffffffffLL)
		return fail(err, errlen, "'spi' must be an SPI 1-4294967295 (0x1-0xffffffff) or a range "
			    "like \"0x1000-0x1fff\"");
	*lo = (uint32_t)l;
	*hi = (uint32_t)h;
	return 0;
}

int
weir_value_proto(const struct weir_value *v, uint8_t *out, char *err, size_t errlen)
{
	static const struct { const char *name; uint8_t num; } protos[] = {
		{ "tcp", IPPROTO_TCP }, { "udp", IPPROTO_UDP }, { "icmp", IPPROTO_ICMP },
		{ "icmpv6", IPPROTO_ICMPV6 }, { "sctp", IPPROTO_SCTP }, { "udplite", IPPROTO_UDPLITE },
		{ "gre", IPPROTO_GRE }, { "esp", IPPROTO_ESP }, { "ah", IPPROTO_AH },
	};

	if (v->type == WEIR_VALUE_INT) {
		if (v->i >= 1 && v->i <= 255) {
			*out = (uint8_t)v->i;
			return 0;
		}
	} else if (v->type == WEIR_VALUE_STR) {
		for (size_t i = 0; i < RTE_DIM(protos); i++)
			if (strcasecmp(v->s, protos[i].name) == 0) {
				*out = protos[i].num;
				return 0;
			}
	}
	return fail(err, errlen, "'proto' must be tcp, udp, icmp, icmpv6, sctp, udplite, gre, esp, "
		    "ah or a protocol number 1-255");
}

/* The code point of a DSCP name, or -1. */
static int
dscp_name(const char *n)
{
	if (strcasecmp(n, "BE") == 0 || strcasecmp(n, "CS0") == 0)
		return 0;
	if (strcasecmp(n, "EF") == 0)
		return 46;
	if (strcasecmp(n, "VA") == 0)
		return 44;
	if (strcasecmp(n, "LE") == 0)
		return 1;
	if (strncasecmp(n, "CS", 2) == 0 && n[2] >= '0' && n[2] <= '7' && n[3] == '\0')
		return (n[2] - '0') * 8;
	if (strncasecmp(n, "AF", 2) == 0 && n[2] >= '1' && n[2] <= '4' && n[3] >= '1' && n[3] <= '3' &&
	    n[4] == '\0')
		return (n[2] - '0') * 8 + (n[3] - '0') * 2;
	return -1;
}

int
weir_value_dscp(const struct weir_value *v, unsigned int *out, char *err, size_t errlen)
{
	int d = -1;

	if (v->type == WEIR_VALUE_INT)
		d = v->i >= 0 && v->i <= 63 ? (int)v->i : -1;
	else if (v->type == WEIR_VALUE_STR)
		d = dscp_name(v->s);
	if (d < 0)
		return fail(err, errlen, "'dscp' must be 0-63, a name (EF, AF41, CS1, BE, ...) or a "
			    "list of them");
	*out = (unsigned int)d;
	return 0;
}

int
weir_value_dscp_empty(char *err, size_t errlen)
{
	return fail(err, errlen, "'dscp' is an empty list");
}

int
weir_value_vlan(const struct weir_value *v, uint16_t *out, char *err, size_t errlen)
{
	if (v->type == WEIR_VALUE_STR && strcmp(v->s, "untagged") == 0)
		*out = WEIR_CLS_VLAN_UNTAGGED;
	else if (v->type == WEIR_VALUE_INT && v->i >= 1 && v->i <= 4095)
		*out = (uint16_t)v->i;
	else
		return fail(err, errlen, "'vlan' must be a VLAN ID 1-4095 or \"untagged\"");
	return 0;
}

int
weir_value_rule_dir(const char *name, uint8_t *out, char *err, size_t errlen)
{
	if (strcmp(name, "any") == 0)
		*out = WEIR_CLS_DIR_ANY;
	else if (strcmp(name, "out") == 0)
		*out = WEIR_CLS_DIR_OUT;
	else if (strcmp(name, "in") == 0)
		*out = WEIR_CLS_DIR_IN;
	else
		return fail(err, errlen, "'dir' (who opened the flow) must be \"out\" (a LAN host), "
			    "\"in\" (a WAN host) or \"any\"");
	return 0;
}

int
weir_value_mode(const char *name, uint8_t *out, char *err, size_t errlen)
{
	for (unsigned int m = 0; m < WEIR_MODE__COUNT; m++)
		if (strcmp(name, weir_shape_mode_name(m)) == 0) {
			*out = (uint8_t)m;
			return 0;
		}
	return fail(err, errlen, "'mode' must be \"postack\" (hold ACKs, not data), \"pfq\" "
		    "(per-flow queues only), \"fifo\" (one queue for the class) or \"tcr\" (window "
		    "sizing and ACK pacing), \"postack-paced\" (PostACK as on-off ACK pacing), \"ipabr\" "
		    "(an explicit rate per flow by window, IP-ABR) or \"pep\" (premature ACKs with a watermark)");
}

int
weir_value_admission(const char *class_name, const char *name, uint8_t *out, char *err,
		     size_t errlen)
{
	if (strcmp(name, "drop") == 0)
		*out = WEIR_ADMIT_DROP;
	else if (strcmp(name, "fallback") == 0)
		*out = WEIR_ADMIT_FALLBACK;
	else
		return fail(err, errlen, "class '%s': admission must be \"drop\" or \"fallback\"",
			    class_name);
	return 0;
}

/* An integer key of a marker in [lo, hi]. */
static int
marker_int(const char *key, const struct weir_value *v, long long lo, long long hi,
	   long long *out, char *err, size_t errlen)
{
	if (v->type != WEIR_VALUE_INT || v->i < lo || v->i > hi)
		return fail(err, errlen, "marker '%s' must be an integer %lld .. %lld", key, lo, hi);
	*out = v->i;
	return 0;
}

int
weir_value_marker(struct weir_marker_conf *mc, const char *key, const struct weir_value *v,
		  char *err, size_t errlen)
{
	static const char *const colour[WEIR_COLOURS] = { "green", "yellow", "red" };
	char full[64];
	long long n = 0;

	if (strcmp(key, "type") == 0) {
		int t = v->type == WEIR_VALUE_STR ? weir_marker_type_find(v->s) : -1;

		if (t <= WEIR_MARK_NONE)
			return fail(err, errlen, "marker 'type' must be \"tb\", \"srtcm\", \"trtcm\", "
				    "\"tbq\", \"tbq-ld\", \"arm\" or \"carm\"");
		mc->type = (uint8_t)t;
		return 0;
	}
	if (strcmp(key, "cir") == 0 || strcmp(key, "pir") == 0) {
		snprintf(full, sizeof(full), "marker.%s", key);
		return weir_value_rate(full, v, key[0] == 'c' ? &mc->cir : &mc->pir, err, errlen) < 0 ?
			-1 : 0;
	}
	for (int c = 0; c < WEIR_COLOURS; c++) {
		unsigned int d;

		if (strcmp(key, colour[c]) != 0)
			continue;
		if (weir_value_dscp(v, &d, err, errlen) < 0)
			return fail(err, errlen, "marker '%s' must be a DSCP: 0-63 or a name (AF11, "
				    "CS1, BE, ...)", key);
		mc->dscp[c] = (uint8_t)d;
		return 0;
	}
	if (strcmp(key, "color_aware") == 0 || strcmp(key, "capped") == 0) {
		if (marker_int(key, v, 0, 1, &n, err, errlen) < 0)
			return fail(err, errlen, "marker '%s' must be true or false", key);
		*(key[1] == 'o' ? &mc->color_aware : &mc->capped) = (uint8_t)n;
		return 0;
	}
	if (strcmp(key, "cbs") == 0 || strcmp(key, "ebs") == 0 || strcmp(key, "pbs") == 0) {
		if (marker_int(key, v, 1514, 1 << 30, &n, err, errlen) < 0)
			return -1;
		*(key[0] == 'c' ? &mc->cbs : key[0] == 'e' ? &mc->ebs : &mc->pbs) = (uint32_t)n;
		return 0;
	}
	if (strcmp(key, "queue") == 0 || strcmp(key, "min_thresh") == 0) {
		if (marker_int(key, v, key[0] == 'q' ? 2 : 1, 4096, &n, err, errlen) < 0)
			return -1;
		*(key[0] == 'q' ? &mc->queue : &mc->min_thresh) = (uint32_t)n;
		return 0;
	}
	if (strcmp(key, "rtt_ms") == 0) {
		if (marker_int(key, v, 1, 10000, &n, err, errlen) < 0)
			return -1;
		mc->rtt_us = (uint32_t)n * 1000;
		return 0;
	}
	if (strcmp(key, "window_ms") == 0) {
		if (marker_int(key, v, 100, 10000, &n, err, errlen) < 0)
			return -1;
		mc->window_ms = (uint32_t)n;
		return 0;
	}
	if (strcmp(key, "alpha") == 0) {
		/* A number the front end passed as text ("0.45"); the thesis' 0.45, 0.2, 0.05. */
		char *end = NULL;
		double a = v->type == WEIR_VALUE_STR ? strtod(v->s, &end) :
			   v->type == WEIR_VALUE_INT ? (double)v->i : -1;

		if ((end != NULL && *end != '\0') || !(a >= 0.001 && a <= 1.0))
			return fail(err, errlen, "marker 'alpha' must be a number 0.001 .. 1 "
				    "(K_C = alpha K_u; the thesis uses 0.45, 0.2 and 0.05)");
		mc->alpha_milli = (uint32_t)(a * 1000 + 0.5);
		return 0;
	}
	return fail(err, errlen, "unknown marker key '%s' (type, cir, pir, cbs, ebs, pbs, queue, "
		    "min_thresh, rtt_ms, alpha, window_ms, color_aware, capped, green, yellow, red)",
		    key);
}
