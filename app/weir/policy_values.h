/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the value syntax of policy settings (rates, prefixes, ports,
 * protocols, DSCP, VLAN, shaping modes, admission), shared by the config
 * file (config_policy.c) and the Lua front end (policy_lua.c) so that one
 * policy written either way means the same and is refused with the same
 * words.
 *
 * Each parser takes a value already read by its front end, fills *out and
 * returns 0, or writes a message (without FILE:LINE, which only the front
 * end knows) into err and returns -1. `key` is how the message names the
 * setting ("shaping.outbound.rate" in the config file, "rate" in Lua).
 */
#ifndef WEIR_APP_POLICY_VALUES_H
#define WEIR_APP_POLICY_VALUES_H

#include <stddef.h>
#include <stdint.h>

#include "classify.h"

/* A setting's value as a front end read it. */
enum weir_value_type {
	WEIR_VALUE_INT = 0,     /* an integer (libconfig int, Lua integer or integral float) */
	WEIR_VALUE_STR,         /* a string */
	WEIR_VALUE_OTHER,       /* anything else: always the wrong type */
};

struct weir_value {
	enum weir_value_type type;
	int64_t i;              /* WEIR_VALUE_INT */
	const char *s;          /* WEIR_VALUE_STR */
};

/* "20mbit", "1.5gbit", "800kbit", "64000bit" or an integer of bit/s; 0 is
 * allowed (unshaped / unset), otherwise 8kbit .. 100gbit. Strings follow
 * exactly [0-9]+(.[0-9]+)?(bit|kbit|mbit|gbit)?, the unit in any case.
 * -1: not a rate; -2: a rate out of range (err says which). */
int weir_value_rate(const char *key, const struct weir_value *v, uint64_t *out,
		    char *err, size_t errlen);

/* "10.1.0.0/16", "2001:db8::/32" or one address. Host bits past the length
 * are left for the classifier to refuse (its message names the rule). */
int weir_value_prefix(const char *key, const struct weir_value *v, struct weir_cls_prefix *out,
		      char *err, size_t errlen);

/* A port 1-65535 (integer or string) or a range "1024-65535". */
int weir_value_ports(const char *key, const struct weir_value *v, struct weir_cls_ports *out,
		     char *err, size_t errlen);

/* tcp, udp, icmp, icmpv6, sctp, udplite, gre, esp, ah (any case) or 1-255. */
/* An IPsec SPI or a range "lo-hi" (decimal or 0x hex), 1..2^32-1. */
int weir_value_spi(const struct weir_value *v, uint32_t *lo, uint32_t *hi, char *err, size_t errlen);
int weir_value_proto(const struct weir_value *v, uint8_t *out, char *err, size_t errlen);

/* One DSCP: 0-63 or a name (BE, EF, VA, LE, CS0-CS7, AF11-AF43); *out is
 * the code point. Lists are the front end's business (their syntax differs). */
int weir_value_dscp(const struct weir_value *v, unsigned int *out, char *err, size_t errlen);
/* The message for an empty DSCP list. */
int weir_value_dscp_empty(char *err, size_t errlen);

/* An outer VLAN ID 1-4095 or "untagged" (WEIR_CLS_VLAN_UNTAGGED). */
int weir_value_vlan(const struct weir_value *v, uint16_t *out, char *err, size_t errlen);

/* A rule's "dir" (who opened the flow): "out", "in" or "any" (enum weir_cls_dir). */
int weir_value_rule_dir(const char *name, uint8_t *out, char *err, size_t errlen);

/* "postack", "pfq", "fifo", "tcr", "postack-paced" or "ipabr" (enum weir_shape_mode). */
int weir_value_mode(const char *name, uint8_t *out, char *err, size_t errlen);

/* "drop" or "fallback" (enum weir_admit_action); class names the class in the message. */
int weir_value_admission(const char *class_name, const char *name, uint8_t *out,
			 char *err, size_t errlen);

/* One key of a class's `marker` group into mc (which the front end set up
 * with weir_marker_conf_init): type, cir, pir, cbs, ebs, pbs, queue,
 * min_thresh, rtt_ms, alpha, window_ms, color_aware, capped, green,
 * yellow, red (docs/markers.md). Booleans come as integers 0/1, a
 * fractional alpha as a string. The policy builder checks the whole. */
struct weir_marker_conf;
int weir_value_marker(struct weir_marker_conf *mc, const char *key, const struct weir_value *v,
		      char *err, size_t errlen);

#endif /* WEIR_APP_POLICY_VALUES_H */
