/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the config file's `shaping` trees and `rules`, compiled into a
 * policy (lib/classify/policy.h). The policy builder does the semantic checks; this
 * file reads settings and maps the builder's errors back to FILE:LINE.
 * The value syntax (rates, prefixes, ports, ...) is policy_values.c's, shared
 * with the Lua front end.
 */
#include <errno.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_loader.h"
#include "config_policy.h"
#include "ipabr.h"
#include "policy_limits.h"
#include "policy_lua.h"
#include "policy_values.h"
#include "lqos.h"
#include "policy_subs.h"

static const char *const dir_key[WEIR_PORT__COUNT] = { "outbound", "inbound" };

/* What the loader keeps while building: the settings, to point at lines. */
struct policy_src {
	const config_setting_t *tree[WEIR_PORT__COUNT];
	const config_setting_t *class_list[WEIR_PORT__COUNT];
	const config_setting_t *rule_list;
	struct weir_policy_class_conf *classes[WEIR_PORT__COUNT];
	struct weir_policy_rule_conf *rules;
};

static const config_setting_t *
elem(const config_setting_t *list, int i)
{
	return list ? config_setting_get_elem(list, (unsigned int)i) : NULL;
}

/* A setting as a shared policy value. Some keys have always taken only a
 * plain int, not a 64-bit one (6L): int64 keeps that as it was. */
static struct weir_value
value_of(const config_setting_t *s, bool int64)
{
	struct weir_value v = { .type = WEIR_VALUE_OTHER };

	switch (config_setting_type(s)) {
	case CONFIG_TYPE_INT64:
		if (!int64)
			break;
		/* fall through */
	case CONFIG_TYPE_INT:
		v.type = WEIR_VALUE_INT;
		v.i = config_setting_get_int64(s);
		break;
	case CONFIG_TYPE_STRING:
		v.type = WEIR_VALUE_STR;
		v.s = config_setting_get_string(s);
		break;
	default:
		break;
	}
	return v;
}

/* A shared parser's verdict on setting s: its message at s's line. */
static int
value_fail(struct loader *ld, const config_setting_t *s, const char *msg)
{
	return cfg_fail(ld, s, "%s", msg);
}

/* A rate (policy_values.h) named by its full path; absent = 0. */
static int
get_rate(struct loader *ld, const config_setting_t *grp, const char *name, uint64_t *out)
{
	const config_setting_t *s = grp ? config_setting_get_member(grp, name) : NULL;
	struct weir_value v;
	char full[256];
	char msg[256];

	*out = 0;
	if (s == NULL)
		return 0;
	cfg_path(grp, name, full, sizeof(full));
	v = value_of(s, true);
	if (weir_value_rate(full, &v, out, msg, sizeof(msg)) < 0)
		return value_fail(ld, s, msg);
	return 0;
}

/* A shaping mode by name into *mode; def when absent. */
static int
get_mode(struct loader *ld, const config_setting_t *g, uint8_t def, uint8_t *mode)
{
	char name[16];
	char msg[256];

	if (cfg_str(ld, g, "mode", weir_shape_mode_name(def), name, sizeof(name)) < 0)
		return -1;
	if (weir_value_mode(name, mode, msg, sizeof(msg)) < 0)
		return value_fail(ld, config_setting_get_member(g, "mode"), msg);
	return 0;
}

/* A class's `marker = { type = "tbq"; cir = "8mbit"; ... }` (docs/markers.md):
 * each key through the shared parser, its error at the key's line. */
static int
load_marker(struct loader *ld, const config_setting_t *g, struct weir_marker_conf *mc)
{
	char msg[256];

	weir_marker_conf_init(mc);
	if (!config_setting_is_group(g))
		return cfg_fail(ld, g, "'marker' must be a group { type = \"tbq\"; cir = \"8mbit\"; }");
	for (int i = 0; i < config_setting_length(g); i++) {
		const config_setting_t *s = config_setting_get_elem(g, (unsigned int)i);
		struct weir_value v = value_of(s, true);
		char num[32];

		if (config_setting_type(s) == CONFIG_TYPE_BOOL) {
			v.type = WEIR_VALUE_INT;
			v.i = config_setting_get_bool(s);
		} else if (config_setting_type(s) == CONFIG_TYPE_FLOAT) {
			snprintf(num, sizeof(num), "%.6g", config_setting_get_float(s));
			v.type = WEIR_VALUE_STR;
			v.s = num;
		}
		if (weir_value_marker(mc, config_setting_name(s), &v, msg, sizeof(msg)) < 0)
			return value_fail(ld, s, msg);
	}
	if (mc->type == WEIR_MARK_NONE)
		return cfg_fail(ld, g, "'marker' needs a type (\"tb\", \"srtcm\", \"trtcm\", "
				"\"tbq\", \"tbq-ld\", \"arm\" or \"carm\")");
	return 0;
}

/* last_mile = { rate = "56kbit"; rtt = 350; buffer = 3; exempt = true; side = "lan"; };
 * or, in a rule, last_mile = "off" (the flows it matches opt out). */
static int
get_last_mile(struct loader *ld, const config_setting_t *grp, bool rule, struct weir_last_mile *lm)
{
	static const char *const keys[] = { "rate", "rtt", "buffer", "exempt", "side", NULL };
	const config_setting_t *s = config_setting_get_member(grp, "last_mile");
	char side[8];
	bool exempt;
	long long v;

	memset(lm, 0, sizeof(*lm));
	if (s == NULL)
		return 0;
	if (rule && config_setting_type(s) == CONFIG_TYPE_STRING &&
	    strcmp(config_setting_get_string(s), "off") == 0) {
		lm->flags = WEIR_LM_OFF;
		return 0;
	}
	if (!config_setting_is_group(s))
		return cfg_fail(ld, s, "last_mile must be a group { rate = ...; rtt = ...; buffer = ...; }%s",
				rule ? " or \"off\"" : "");
	if (cfg_check_keys(ld, s, keys) < 0 || get_rate(ld, s, "rate", &lm->rate) < 0)
		return -1;
	if (lm->rate == 0)
		return cfg_fail(ld, s, "last_mile needs a rate (the last hop's, e.g. \"56kbit\")");
	if (cfg_int(ld, s, "rtt", -1, 1, 60000, &v) < 0)
		return -1;
	if (v < 0)
		return cfg_fail(ld, s, "last_mile needs rtt (ms, the last mile's round trip)");
	lm->rtt_ms = (uint32_t)v;
	if (cfg_int(ld, s, "buffer", 3, 0, 10000, &v) < 0)
		return -1;
	lm->buffer = (uint16_t)v;
	if (cfg_bool(ld, s, "exempt", true, &exempt) < 0 ||
	    cfg_str(ld, s, "side", "lan", side, sizeof(side)) < 0)
		return -1;
	if (strcmp(side, "lan") != 0 && strcmp(side, "wan") != 0)
		return cfg_fail(ld, config_setting_get_member(s, "side"),
				"last_mile.side must be \"lan\" or \"wan\" (where its hosts are)");
	lm->flags = (uint8_t)((exempt ? WEIR_LM_EXEMPT : 0) | (side[0] == 'w' ? WEIR_LM_WAN : 0));
	return 0;
}

static int
load_class(struct loader *ld, const config_setting_t *s, struct weir_policy_class_conf *c,
	   uint8_t mode)
{
	static const char *const keys[] = { "name", "parent", "rate", "ceil", "prio", "limit",
					    "quantum", "flow_min", "admission", "fallback", "mode",
					    "aqm", "marker", "last_mile", NULL };
	char admit[16];
	char msg[256];
	long long v;

	if (!config_setting_is_group(s))
		return cfg_fail(ld, s, "a class must be a group { name = ...; rate = ...; }");
	if (cfg_check_keys(ld, s, keys) < 0 ||
	    cfg_str(ld, s, "name", NULL, c->name, sizeof(c->name)) < 0 ||
	    cfg_str(ld, s, "parent", "", c->parent, sizeof(c->parent)) < 0 ||
	    get_rate(ld, s, "rate", &c->rate) < 0 || get_rate(ld, s, "ceil", &c->ceil) < 0 ||
	    get_rate(ld, s, "flow_min", &c->flow_min) < 0 ||
	    cfg_str(ld, s, "fallback", "", c->fallback, sizeof(c->fallback)) < 0 ||
	    cfg_str(ld, s, "admission", c->fallback[0] ? "fallback" : "drop", admit, sizeof(admit)) < 0)
		return -1;
	if (config_setting_get_member(s, "rate") == NULL)
		return cfg_fail(ld, s, "class '%s' needs a rate", c->name);
	if (get_mode(ld, s, mode, &c->mode) < 0)
		return -1;
	if (config_setting_get_member(s, "aqm") != NULL) {
		char aqm[16];
		int k;

		if (cfg_str(ld, s, "aqm", "none", aqm, sizeof(aqm)) < 0)
			return -1;
		k = weir_qm_by_name(aqm);
		if (k < 0)
			return value_fail(ld, config_setting_get_member(s, "aqm"),
					  "a class's aqm must be \"none\", \"red\", \"choke\", "
					  "\"pqm\" or \"pqm-pb\" (fifo leaves; docs/pqm.md)");
		if (k != WEIR_QM_NONE && c->mode != WEIR_MODE_FIFO)
			return value_fail(ld, config_setting_get_member(s, "aqm"),
					  "aqm manages a fifo leaf's one queue: the class needs "
					  "mode = \"fifo\"");
		c->qm = (uint8_t)k;
		c->qm_set = 1;
	}
	if (weir_value_admission(c->name, admit, &c->admit, msg, sizeof(msg)) < 0)
		return value_fail(ld, config_setting_get_member(s, "admission"), msg);
	if (cfg_int(ld, s, "prio", 0, 0, WEIR_CBQ_NUM_PRIO - 1, &v) < 0)
		return -1;
	c->prio = (uint8_t)v;
	if (cfg_int(ld, s, "limit", 0, 1, 1 << 24, &v) < 0)
		return -1;
	c->limit = (uint32_t)v;
	if (cfg_int(ld, s, "quantum", 0, 64, 1 << 20, &v) < 0)
		return -1;
	c->quantum = (uint32_t)v;
	if (config_setting_get_member(s, "marker") != NULL &&
	    load_marker(ld, config_setting_get_member(s, "marker"), &c->marker) < 0)
		return -1;
	return get_last_mile(ld, s, false, &c->last_mile);
}

/* shaping.outbound / shaping.inbound: a rate (one default class), or a
 * group with rate, default and classes. */
static int
load_tree(struct loader *ld, const config_setting_t *g, int d, struct weir_config *cfg,
	  struct weir_policy_tree_conf *tc, struct policy_src *src)
{
	static const char *const keys[] = { "rate", "default", "classes", NULL };
	const config_setting_t *s = g ? config_setting_get_member(g, dir_key[d]) : NULL;
	const config_setting_t *list;
	int n;

	src->tree[d] = s;
	/* The class limit keeps queued frames to a quarter of the pool per
	 * direction and worker unless a class says otherwise. */
	tc->default_limit = cfg->mbufs / (4 * cfg->n_workers);
	tc->mode = cfg->shape_mode;
	tc->no_aqm = cfg->shape_no_aqm;
	tc->qm = cfg->shape_qm;
	tc->qm_params = cfg->shape_qm_params;
	tc->young = cfg->shape_young;
	tc->new_quanta = cfg->shape_new_quanta;
	tc->plain = cfg->shape_plain;
	if (s == NULL || !config_setting_is_group(s)) {
		if (get_rate(ld, g, dir_key[d], &tc->rate) < 0)
			return -1;
		cfg->shape_rate[d] = tc->rate;
		return 0;
	}
	if (cfg_check_keys(ld, s, keys) < 0 || get_rate(ld, s, "rate", &tc->rate) < 0 ||
	    cfg_str(ld, s, "default", "", tc->default_class, sizeof(tc->default_class)) < 0)
		return -1;
	if (tc->rate == 0)
		return cfg_fail(ld, s, "'shaping.%s' needs a link rate (rate = \"100mbit\")", dir_key[d]);
	cfg->shape_rate[d] = tc->rate;
	list = config_setting_get_member(s, "classes");
	src->class_list[d] = list;
	if (list == NULL)
		return 0;
	if (!config_setting_is_list(list))
		return cfg_fail(ld, list, "'shaping.%s.classes' must be a list ( {...}, {...} )",
				dir_key[d]);
	n = config_setting_length(list);
	if (n == 0)
		return 0;
	if (n >= WEIR_CBQ_MAX_CLASSES)
		return cfg_fail(ld, list, "'shaping.%s.classes' has %d classes; at most %d", dir_key[d],
				n, WEIR_CBQ_MAX_CLASSES - 1);
	if (tc->default_class[0] == '\0')
		return cfg_fail(ld, s, "'shaping.%s' has classes, so it needs default = \"<class>\" "
				"for traffic no rule matches", dir_key[d]);
	src->classes[d] = calloc((size_t)n, sizeof(*src->classes[d]));
	if (src->classes[d] == NULL)
		return cfg_fail(ld, list, "out of memory");
	for (int i = 0; i < n; i++)
		if (load_class(ld, elem(list, i), &src->classes[d][i], tc->mode) < 0)
			return -1;
	tc->classes = src->classes[d];
	tc->n_classes = (uint16_t)n;
	return 0;
}

/* ---- subscribers ---- */

/* A path as the config names it: relative to the config's directory. */
static int
subs_path(struct loader *ld, const config_setting_t *g, const char *key, const char *cfg_path_,
	 char *out, size_t len)
{
	char rel[4096], dir[4096];

	if (cfg_str(ld, g, key, "", rel, sizeof(rel)) < 0)
		return -1;
	snprintf(dir, sizeof(dir), "%s", cfg_path_);
	if (rel[0] == '\0' || rel[0] == '/')
		snprintf(out, len, "%s", rel);
	else if (snprintf(out, len, "%s/%s", dirname(dir), rel) >= (int)len)
		return cfg_fail(ld, g, "subscribers.%s: path too long", key);
	return 0;
}

/*
 * subscribers = { shaped_devices = "ShapedDevices.csv"; network = "network.json";
 * parent = "CLASS"; }: LibreQoS's files (docs/subscribers.md). Their nodes and
 * subscribers become classes of both trees (under `parent`, "" = the link);
 * a flow's LAN address picks its subscriber before the rules. A file with
 * problems fails the config with every problem as FILE:LINE.
 */
static int
load_subs(struct loader *ld, const config_setting_t *root, struct weir_config *cfg,
	  struct weir_policy_conf *pc, struct policy_src *src, struct weir_subs **out)
{
	static const char *const keys[] = { "shaped_devices", "network", "parent", "box", "max",
					    NULL };
	const config_setting_t *g = cfg_group(ld, root, "subscribers", false);
	char csv[4096], net[4096], parent[WEIR_POLICY_NAME_LEN], err[256];
	struct weir_sub_errs e = { 0 };
	struct weir_subs *s;
	long long box, max;

	*out = NULL;
	if (g == NULL)
		return ld->failed ? -1 : 0;
	if (cfg_check_keys(ld, g, keys) < 0 ||
	    subs_path(ld, g, "shaped_devices", cfg->path, csv, sizeof(csv)) < 0 ||
	    subs_path(ld, g, "network", cfg->path, net, sizeof(net)) < 0 ||
	    cfg_str(ld, g, "parent", "", parent, sizeof(parent)) < 0 ||
	    cfg_int(ld, g, "box", 0, 0, 65535, &box) < 0 ||
	    cfg_int(ld, g, "max", 0, 0, WEIR_POLICY_MAX_CLASSES - 1, &max) < 0)
		return -1;
	if (csv[0] == '\0')
		return cfg_fail(ld, g, "subscribers needs shaped_devices = \"FILE\"");
	s = weir_subs_load_lqos(csv, net, (uint16_t)box, &e);
	if (s == NULL) {
		snprintf(ld->err, ld->errlen, "%s(%u problems in the subscriber files; none of "
			 "them applied)", e.text != NULL ? e.text : "", e.n);
		ld->failed = true;
		weir_sub_errs_free(&e);
		return -1;
	}
	if (max != 0 && weir_subs_count(s) > (uint64_t)max) {
		uint32_t n = weir_subs_count(s);

		weir_subs_free(s);
		return cfg_fail(ld, config_setting_get_member(g, "max"), "subscribers: the files "
				"hold %u subscribers, more than 'subscribers.max' (%lld)", n, max);
	}
	snprintf(cfg->subs_csv, sizeof(cfg->subs_csv), "%s", csv);
	snprintf(cfg->subs_network, sizeof(cfg->subs_network), "%s", net);
	snprintf(cfg->subs_parent, sizeof(cfg->subs_parent), "%s", parent);
	cfg->subs_box = (uint16_t)box;
	cfg->subs_max = (uint32_t)max;
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		struct weir_policy_class_conf *cls;

		if (weir_subs_tree(s, d, &pc->tree[d], parent, &pc->subs_base[d], &cls, err,
				   sizeof(err)) < 0) {
			weir_subs_free(s);
			return cfg_fail(ld, g, "subscribers: %s", err);
		}
		if (cls != NULL) {
			free(src->classes[d]);
			src->classes[d] = cls;
		}
	}
	pc->subs = s;
	*out = s;
	return 0;
}

/* ---- rules ---- */

static int
get_prefix(struct loader *ld, const config_setting_t *r, const char *key, struct weir_cls_prefix *p)
{
	const config_setting_t *s = config_setting_get_member(r, key);
	struct weir_value v;
	char msg[256];

	if (s == NULL)
		return 0;
	v = value_of(s, true);
	if (weir_value_prefix(key, &v, p, msg, sizeof(msg)) < 0)
		return value_fail(ld, s, msg);
	return 0;
}

static int
get_ports(struct loader *ld, const config_setting_t *r, const char *key, struct weir_cls_ports *p)
{
	const config_setting_t *s = config_setting_get_member(r, key);
	struct weir_value v;
	char msg[256];

	if (s == NULL)
		return 0;
	v = value_of(s, true);
	if (weir_value_ports(key, &v, p, msg, sizeof(msg)) < 0)
		return value_fail(ld, s, msg);
	return 0;
}

static int
get_proto(struct loader *ld, const config_setting_t *r, uint8_t *proto)
{
	const config_setting_t *s = config_setting_get_member(r, "proto");
	struct weir_value v;
	char msg[256];

	if (s == NULL)
		return 0;
	v = value_of(s, false);
	if (weir_value_proto(&v, proto, msg, sizeof(msg)) < 0)
		return value_fail(ld, s, msg);
	return 0;
}

/* One DSCP or a list (array or list) of them, each at its own line on error. */
static int
get_dscp(struct loader *ld, const config_setting_t *r, uint64_t *mask)
{
	const config_setting_t *s = config_setting_get_member(r, "dscp");
	char msg[256];
	int n;

	if (s == NULL)
		return 0;
	n = config_setting_is_aggregate(s) ? config_setting_length(s) : 1;
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_is_aggregate(s) ? elem(s, i) : s;
		struct weir_value v = { .type = WEIR_VALUE_OTHER };
		unsigned int d;

		if (e != NULL)
			v = value_of(e, false);
		if (weir_value_dscp(&v, &d, msg, sizeof(msg)) < 0)
			return value_fail(ld, e ? e : s, msg);
		*mask |= 1ull << d;
	}
	if (n == 0) {
		weir_value_dscp_empty(msg, sizeof(msg));
		return value_fail(ld, s, msg);
	}
	return 0;
}

static int
load_rule(struct loader *ld, const config_setting_t *r, struct weir_policy_rule_conf *rc)
{
	static const char *const keys[] = { "class", "weight", "proto", "src", "dst", "lan", "wan",
					    "src_port", "dst_port", "lan_port", "wan_port", "vlan",
					    "dscp", "dir", "spi", "last_mile", NULL };
	static const char *const side_key[WEIR_CLS__SIDES] = { "src", "dst", "lan", "wan" };
	static const char *const port_key[WEIR_CLS__SIDES] = { "src_port", "dst_port", "lan_port",
							       "wan_port" };
	struct weir_classify_rule *m = &rc->match;
	const config_setting_t *s;
	char dir[8];
	char msg[256];
	long long v;

	if (!config_setting_is_group(r))
		return cfg_fail(ld, r, "a rule must be a group { class = \"...\"; ... }");
	if (cfg_check_keys(ld, r, keys) < 0 ||
	    cfg_str(ld, r, "class", NULL, rc->class_name, sizeof(rc->class_name)) < 0 ||
	    cfg_int(ld, r, "weight", 1, 1, 255, &v) < 0)
		return -1;
	rc->weight = (uint8_t)v;
	for (int i = 0; i < WEIR_CLS__SIDES; i++)
		if (get_prefix(ld, r, side_key[i], &m->prefix[i]) < 0 ||
		    get_ports(ld, r, port_key[i], &m->port[i]) < 0)
			return -1;
	if (get_proto(ld, r, &m->proto) < 0 || get_dscp(ld, r, &m->dscp_mask) < 0)
		return -1;
	s = config_setting_get_member(r, "vlan");
	if (s != NULL) {
		struct weir_value vv = value_of(s, false);

		if (weir_value_vlan(&vv, &m->vlan, msg, sizeof(msg)) < 0)
			return value_fail(ld, s, msg);
	}
	s = config_setting_get_member(r, "spi");
	if (s != NULL) {
		struct weir_value vv = value_of(s, true);

		if (weir_value_spi(&vv, &m->spi_lo, &m->spi_hi, msg, sizeof(msg)) < 0)
			return value_fail(ld, s, msg);
	}
	if (get_last_mile(ld, r, true, &rc->last_mile) < 0)
		return -1;
	if (cfg_str(ld, r, "dir", "any", dir, sizeof(dir)) < 0)
		return -1;
	if (weir_value_rule_dir(dir, &m->dir, msg, sizeof(msg)) < 0)
		return value_fail(ld, config_setting_get_member(r, "dir"), msg);
	return 0;
}

static int
load_rules(struct loader *ld, const config_setting_t *root, struct weir_policy_conf *pc,
	   struct policy_src *src)
{
	const config_setting_t *list = config_setting_get_member(root, "rules");
	int n;

	src->rule_list = list;
	if (list == NULL)
		return 0;
	if (!config_setting_is_list(list))
		return cfg_fail(ld, list, "'rules' must be a list ( {...}, {...} )");
	n = config_setting_length(list);
	if ((unsigned int)n > WEIR_CLS_MAX_RULES)
		return cfg_fail(ld, list, "%d rules; at most %u", n, WEIR_CLS_MAX_RULES);
	src->rules = calloc((size_t)n + 1, sizeof(*src->rules));
	if (src->rules == NULL)
		return cfg_fail(ld, list, "out of memory");
	for (int i = 0; i < n; i++)
		if (load_rule(ld, elem(list, i), &src->rules[i]) < 0)
			return -1;
	pc->rules = src->rules;
	pc->n_rules = (unsigned int)n;
	return 0;
}

/* shaping.postack: how much ACK holding may cost. */
static int
load_postack(struct loader *ld, const config_setting_t *g, struct weir_config *cfg)
{
	static const char *const keys[] = { "acks", "ack_limit", "idle_ms", "mbufs", "clamp",
					    "clamp_target_ms", "clamp_margin", NULL };
	const config_setting_t *p = g ? cfg_group(ld, g, "postack", false) : NULL;
	long long v;

	if (ld->failed || (p && cfg_check_keys(ld, p, keys) < 0))
		return -1;
	if (cfg_int(ld, p, "acks", 65536, 64, 1 << 26, &v) < 0)
		return -1;
	cfg->postack_acks = (uint32_t)v;
	if (cfg_int(ld, p, "ack_limit", 1024, 4, 65535, &v) < 0)
		return -1;
	cfg->postack_ack_limit = (uint16_t)v;
	if (cfg_int(ld, p, "idle_ms", 20, 1, 10000, &v) < 0)
		return -1;
	cfg->postack_idle_ms = (uint32_t)v;
	/* The share clamp (docs/postack.md): off by default, because it costs
	 * a flow goodput under random WAN loss, whatever the margin
	 * (docs/results/postack-clamp). */
	if (cfg_bool(ld, p, "clamp", false, &cfg->postack_clamp) < 0)
		return -1;
	if (cfg_int(ld, p, "clamp_target_ms", 5, 0, 10000, &v) < 0)
		return -1;
	cfg->postack_clamp_target_ms = (uint32_t)v;
	/* The margin over share x RTT, a fraction of it: (1 + m) x beta >= 1
	 * keeps a window cut by a loss at the BDP (cubic's beta 0.7). 0.5: as
	 * good as 1 under loss at half its added queue (docs/results/postack-clamp). */
	if (cfg_float(ld, p, "clamp_margin", 0.5, 0.0, 4.0, &cfg->postack_clamp_margin) < 0)
		return -1;
	/* -1: an eighth of the mempool, shared among the workers (main.c). */
	if (cfg_int(ld, p, "mbufs", -1, -1, 1 << 26, &v) < 0)
		return -1;
	cfg->postack_mbufs = v;
	return 0;
}

/* shaping.pep { copies, drain_ms, watermark }: the copies of p-acked data a
 * worker may hold (docs/pep.md "Limits"), how long a stopping worker goes on
 * delivering them before it resets the flows that still lack some, and what
 * the watermark's rate follows: the class's share ("class"), or R's delivery
 * rate as measured, within what the class may borrow ("measured"). */
static int
load_pep(struct loader *ld, const config_setting_t *g, struct weir_config *cfg)
{
	static const char *const keys[] = { "copies", "drain_ms", "watermark", NULL };
	const config_setting_t *p = g ? cfg_group(ld, g, "pep", false) : NULL;
	char wm[16];
	long long v;

	if (ld->failed || (p && cfg_check_keys(ld, p, keys) < 0))
		return -1;
	/* -1: an eighth of the mempool, shared among the workers. */
	if (cfg_int(ld, p, "copies", -1, -1, 1 << 26, &v) < 0)
		return -1;
	if (v >= 0 && v < 16)
		return cfg_fail(ld, config_setting_get_member(p, "copies"),
				"'shaping.pep.copies' must be -1 (auto) or at least 16");
	cfg->pep_copies = v;
	/* A satellite path's recovery takes a few round trips of 0.5-0.7 s;
	 * the service manager's stop timeout (dist/weir.service.in) is 15 s. */
	if (cfg_int(ld, p, "drain_ms", 3000, 0, 10000, &v) < 0)
		return -1;
	cfg->pep_drain_ms = (uint32_t)v;
	if (cfg_str(ld, p, "watermark", "class", wm, sizeof(wm)) < 0)
		return -1;
	if (strcmp(wm, "class") != 0 && strcmp(wm, "measured") != 0)
		return cfg_fail(ld, config_setting_get_member(p, "watermark"),
				"'shaping.pep.watermark' is \"%s\"; expected \"class\" or \"measured\"",
				wm);
	cfg->pep_wm_measured = strcmp(wm, "measured") == 0;
	return 0;
}

/* shaping.ipabr { sws_credit, headroom_us }: the silly-window credit of
 * Eq. 5.4-5.6 in ipabr's windows (docs/ipabr.md), off only to measure what
 * it is worth; and the time added to a flow's round trip in Eq. 4.6. */
static int
load_ipabr(struct loader *ld, const config_setting_t *g, struct weir_config *cfg)
{
	static const char *const keys[] = { "sws_credit", "headroom_us", NULL };
	const config_setting_t *p = g ? cfg_group(ld, g, "ipabr", false) : NULL;
	long long v;

	if (ld->failed || (p && cfg_check_keys(ld, p, keys) < 0))
		return -1;
	if (cfg_int(ld, p, "headroom_us", WEIR_IPABR_HEADROOM_US, 0, 100000, &v) < 0)
		return -1;
	cfg->ipabr_headroom_us = (uint32_t)v;
	return cfg_bool(ld, p, "sws_credit", true, &cfg->ipabr_sws_credit);
}

/* shaping.red { min_th, max_th, max_p, wq } and shaping.pqm { gamma, alpha,
 * phi, target, interval_us, pkt_mean, pkt_max, rtt_min_us, k_us, monitor,
 * seed }: the fifo leaves' queue managers (lib/sched/qm.h, docs/pqm.md). */
static int
load_qm(struct loader *ld, const config_setting_t *g, struct weir_config *cfg)
{
	static const char *const rkeys[] = { "min_th", "max_th", "max_p", "wq", NULL };
	static const char *const pkeys[] = { "gamma", "alpha", "phi", "target", "interval_us",
					     "pkt_mean", "pkt_max", "rtt_min_us", "k_us",
					     "monitor", "seed", NULL };
	static const struct { const char *name; size_t off; long long lo, hi; } ints[] = {
		{ "target", offsetof(struct weir_qm_params, target), 1, 1 << 20 },
		{ "interval_us", offsetof(struct weir_qm_params, interval_us), 100, 1000000 },
		{ "pkt_mean", offsetof(struct weir_qm_params, pkt_mean), 40, 65535 },
		{ "pkt_max", offsetof(struct weir_qm_params, pkt_max), 40, 65535 },
		{ "rtt_min_us", offsetof(struct weir_qm_params, rtt_min_us), 100, 10000000 },
		{ "k_us", offsetof(struct weir_qm_params, k_us), 1000, 10000000 },
		{ "monitor", offsetof(struct weir_qm_params, monitor), 1, WEIR_QM_MONITOR_MAX },
		{ "seed", offsetof(struct weir_qm_params, seed), 1, UINT32_MAX },
	};
	const config_setting_t *r = g ? cfg_group(ld, g, "red", false) : NULL;
	const config_setting_t *p = g ? cfg_group(ld, g, "pqm", false) : NULL;
	struct weir_qm_params *q = &cfg->shape_qm_params;
	const char *why;
	long long v;

	memset(q, 0, sizeof(*q));
	if (ld->failed || (r && cfg_check_keys(ld, r, rkeys) < 0) ||
	    (p && cfg_check_keys(ld, p, pkeys) < 0))
		return -1;
	if (cfg_int(ld, r, "min_th", 0, 1, 1 << 24, &v) < 0)
		return -1;
	q->min_th = (uint32_t)v;
	if (cfg_int(ld, r, "max_th", 0, 2, 1 << 24, &v) < 0)
		return -1;
	q->max_th = (uint32_t)v;
	if (cfg_float(ld, r, "max_p", 0.1, 1e-6, 1.0, &q->max_p) < 0 ||
	    cfg_float(ld, r, "wq", 0.002, 1e-6, 0.999, &q->wq) < 0 ||
	    cfg_float(ld, p, "gamma", 0.005, 1e-9, 100.0, &q->gamma) < 0 ||
	    cfg_float(ld, p, "alpha", 0.1, 1e-9, 100.0, &q->alpha) < 0 ||
	    cfg_float(ld, p, "phi", 1.001, 1.000001, 9.0, &q->phi) < 0)
		return -1;
	for (size_t i = 0; i < RTE_DIM(ints); i++) {
		if (cfg_int(ld, p, ints[i].name, 0, ints[i].lo, ints[i].hi, &v) < 0)
			return -1;
		*(uint32_t *)((char *)q + ints[i].off) = (uint32_t)v;
	}
	why = weir_qm_params_check(q, 0);
	if (why != NULL)
		return cfg_fail(ld, r ? r : p, "%s", why);
	return 0;
}

/* Point a builder error at the setting it is about. */
static int
report(struct loader *ld, const config_setting_t *root, const struct policy_src *src,
       const struct weir_policy_err *e)
{
	const config_setting_t *at = root;

	switch (e->kind) {
	case WEIR_POLICY_ERR_TREE:
		at = src->tree[e->dir];
		break;
	case WEIR_POLICY_ERR_CLASS:
		at = elem(src->class_list[e->dir], e->index);
		break;
	case WEIR_POLICY_ERR_RULE:
		at = elem(src->rule_list, e->index);
		return cfg_fail(ld, at ? at : root, "rule %d: %s", e->index + 1, e->msg);
	default:
		break;
	}
	return cfg_fail(ld, at ? at : root, "%s", e->msg);
}

/* policy = { script = "lua/policy.lua"; instructions = N; memory_mb = N; }:
 * the Lua policy replaces the file's trees and rules (lua/README.md).
 * Returns 1 when there is no script (the file's own policy applies), 0
 * with cfg->policy loaded, -1 on error (a script's error is reported as
 * the script's FILE:LINE). */
static int
load_script(struct loader *ld, const config_setting_t *root, const config_setting_t *shaping,
	    struct weir_config *cfg)
{
	static const char *const keys[] = { "script", "instructions", "memory_mb", "events_per_s",
					    "max_rules", NULL };
	const config_setting_t *pg = cfg_group(ld, root, "policy", false);
	struct weir_policy_lua_limits lim = { 0 };
	char script[sizeof(cfg->policy_script)], dir[sizeof(cfg->path)];
	long long v;

	cfg->policy_script[0] = '\0';
	if (pg == NULL)
		return ld->failed ? -1 : 1;
	if (cfg_check_keys(ld, pg, keys) < 0 || cfg_str(ld, pg, "script", NULL, script,
							  sizeof(script)) < 0)
		return -1;
	if (cfg_int(ld, pg, "instructions", 10000000, 1000, 10000000000LL, &v) < 0)
		return -1;
	cfg->policy_instructions = (uint64_t)v;
	if (cfg_int(ld, pg, "memory_mb", 64, 1, 4096, &v) < 0)
		return -1;
	cfg->policy_memory = (uint64_t)v << 20;
	if (cfg_int(ld, pg, "events_per_s", 10000, 0, 10000000, &v) < 0)
		return -1;
	cfg->policy_events_per_s = (uint32_t)v;
	/* Above the default, every upload and reload stalls the API longer
	 * (policy_limits.h); the operator's choice, not the script's. */
	if (cfg_int(ld, pg, "max_rules", WEIR_LUA_MAX_RULES, 1, WEIR_LUA_MAX_RULES_CEIL, &v) < 0)
		return -1;
	cfg->policy_max_rules = (uint32_t)v;
	for (const char *const *k = (const char *const[]){ "outbound", "inbound", NULL }; *k; k++)
		if (shaping != NULL && config_setting_get_member(shaping, *k) != NULL)
			return cfg_fail(ld, config_setting_get_member(shaping, *k),
					"shaping.%s and policy.script both describe the trees: the "
					"script's weir.link and weir.class replace it", *k);
	if (config_setting_get_member(root, "rules") != NULL)
		return cfg_fail(ld, config_setting_get_member(root, "rules"),
				"'rules' and policy.script both classify: the script's weir.rule "
				"replaces them");
	snprintf(dir, sizeof(dir), "%s", cfg->path);
	if (script[0] == '/')
		snprintf(cfg->policy_script, sizeof(cfg->policy_script), "%s", script);
	else if (snprintf(cfg->policy_script, sizeof(cfg->policy_script), "%s/%s", dirname(dir),
			  script) >= (int)sizeof(cfg->policy_script))
		return cfg_fail(ld, pg, "policy.script: path too long");
	/* A missing script is the config's mistake: its line, not the
	 * script's line 0. */
	if (access(cfg->policy_script, R_OK) != 0)
		return cfg_fail(ld, config_setting_get_member(pg, "script"),
				"policy.script: cannot read %s: %s", cfg->policy_script,
				strerror(errno));
	lim = weir_config_lua_limits(cfg);
	cfg->policy = weir_policy_lua_load(cfg->policy_script, 1, &lim, ld->err, ld->errlen);
	if (cfg->policy == NULL) {
		ld->failed = true;      /* err holds the script's FILE:LINE: message */
		return -1;
	}
	return 0;
}

struct weir_policy_lua_limits
weir_config_lua_limits(const struct weir_config *c)
{
	return (struct weir_policy_lua_limits){
		.mem_bytes = (size_t)c->policy_memory, .instructions = c->policy_instructions,
		.max_rules = c->policy_max_rules,
		.default_limit = c->mbufs / (4 * c->n_workers), .default_mode = c->shape_mode,
		.no_aqm = c->shape_no_aqm, .young = c->shape_young,
		.new_quanta = c->shape_new_quanta, .plain = c->shape_plain,
		.qm = c->shape_qm, .qm_params = c->shape_qm_params,
	};
}

int
cfg_load_policy(struct loader *ld, const config_setting_t *root, struct weir_config *cfg)
{
	static const char *const keys[] = { "outbound", "inbound", "overhead", "flow_limit",
					    "flow_quantum", "mode", "aqm", "young_bytes", "new_quanta", "new_flows", "postack", "red",
					    "pqm", "burst_us", "ipabr", "pep", NULL };
	const config_setting_t *g = cfg_group(ld, root, "shaping", false);
	struct weir_policy_conf pc = { 0 };
	struct policy_src src = { 0 };
	struct weir_policy_err e;
	struct weir_subs *subs = NULL;
	long long v;
	int rc = -1;

	if (ld->failed || (g && cfg_check_keys(ld, g, keys) < 0))
		return -1;
	/* Where a direction is shaped or not, for "needs a restart": its own
	 * setting, else the section without it, else the script, else the top. */
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		const config_setting_t *pg = config_setting_get_member(root, "policy");
		const config_setting_t *at = g ? config_setting_get_member(g, d == WEIR_PORT_LAN
							? "outbound" : "inbound") : NULL;

		if (at == NULL && pg != NULL && config_setting_is_group(pg))
			at = config_setting_get_member(pg, "script");
		if (at == NULL)
			at = g;
		cfg->shaping_line[d] = at != NULL && config_setting_source_line(at) > 0
				       ? (int)config_setting_source_line(at) : 1;
	}
	if (cfg_int(ld, g, "overhead", 24, 0, 64, &v) < 0)
		return -1;
	cfg->shape_overhead = (uint16_t)v;
	if (cfg_int(ld, g, "flow_limit", 128, 2, 65535, &v) < 0)
		return -1;
	cfg->shape_flow_limit = (uint16_t)v;
	if (cfg_int(ld, g, "flow_quantum", 0, 0, 1 << 20, &v) < 0)
		return -1;
	cfg->shape_flow_quantum = (uint32_t)v;
	/* How late a worker may come back without its classes losing tokens
	 * (docs/cbq.md "Burst"): raise it where workers share cores. */
	if (cfg_int(ld, g, "burst_us", 1000, 100, 100000, &v) < 0)
		return -1;
	cfg->shape_burst_us = (uint32_t)v;
	/* 256 KiB: a web object or an API reply beside bulk flows goes at close
	 * to idle speed; 0 = RFC 8290's one quantum per activation. */
	if (cfg_int(ld, g, "young_bytes", WEIR_DRR_YOUNG_DEFAULT, 0, WEIR_DRR_YOUNG_MAX, &v) < 0)
		return -1;
	cfg->shape_young = (uint32_t)v;
	/* New flows together get at most n / (n + 1) of a leaf whose old flows
	 * wait (lib/sched/drr.h): the rest is what a scan leaves the bulk flows. */
	if (cfg_int(ld, g, "new_quanta", WEIR_DRR_NEW_QUANTA_DEFAULT, 1, WEIR_DRR_NEW_QUANTA_MAX, &v) < 0)
		return -1;
	cfg->shape_new_quanta = (uint8_t)v;
	/* false: plain DRR, no new-flows list and no young budgets (to compare
	 * against, or where every flow must have its share from its first packet). */
	{
		bool new_flows;

		if (cfg_bool(ld, g, "new_flows", true, &new_flows) < 0)
			return -1;
		cfg->shape_plain = !new_flows;
	}
	if (get_mode(ld, g, WEIR_MODE_POSTACK, &cfg->shape_mode) < 0 || load_postack(ld, g, cfg) < 0 ||
	    load_ipabr(ld, g, cfg) < 0 || load_pep(ld, g, cfg) < 0)
		return -1;
	{
		char aqm[16];

		if (cfg_str(ld, g, "aqm", "codel", aqm, sizeof(aqm)) < 0)
			return -1;
		/* "codel"/"none": CoDel in pfq and tcr leaves or not; a fifo
		 * queue manager's name makes it the fifo leaves' default and
		 * keeps CoDel in the others (docs/pqm.md). */
		cfg->shape_qm = WEIR_QM_NONE;
		if (strcmp(aqm, "codel") != 0 && strcmp(aqm, "none") != 0) {
			int k = weir_qm_by_name(aqm);

			if (k <= WEIR_QM_NONE)
				return value_fail(ld, config_setting_get_member(g, "aqm"),
						  "aqm must be \"codel\", \"none\", \"red\", "
						  "\"choke\", \"pqm\" or \"pqm-pb\"");
			cfg->shape_qm = (uint8_t)k;
		}
		cfg->shape_no_aqm = strcmp(aqm, "none") == 0;
	}
	if (load_qm(ld, g, cfg) < 0)
		return -1;
	rc = load_script(ld, root, g, cfg);
	if (rc <= 0)
		return rc;      /* the script's policy is in cfg->policy, or an error */
	rc = -1;
	for (int d = 0; d < WEIR_PORT__COUNT; d++)
		if (load_tree(ld, g, d, cfg, &pc.tree[d], &src) < 0)
			goto out;
	if (load_rules(ld, root, &pc, &src) < 0 || load_subs(ld, root, cfg, &pc, &src, &subs) < 0)
		goto out;
	if (pc.tree[0].rate == 0 && pc.tree[1].rate == 0) {
		if (pc.n_rules > 0) {
			cfg_fail(ld, src.rule_list, "'rules' need shaping: give shaping.outbound or "
				 "shaping.inbound a rate");
			goto out;
		}
		rc = 0;         /* a plain bridge: no policy */
		goto out;
	}
	cfg->policy = weir_policy_build(&pc, 1, &e);
	if (cfg->policy == NULL) {
		report(ld, root, &src, &e);
		goto out;
	}
	rc = 0;
out:
	free(src.classes[0]);
	free(src.classes[1]);
	free(src.rules);
	weir_subs_free(subs);   /* the policy holds its own reference */
	return rc;
}
