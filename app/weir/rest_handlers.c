/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the REST API's handlers for status, classes (GET, PATCH), counters
 * (GET, reset), ipsec, policy (GET, reload), openapi.json and /metrics.
 */
#include "rest_int.h"

/* ---- counters since POST /api/v1/counters/reset ---- */

/* Integer keys of the stats JSON that are levels, not running totals: a
 * reset leaves them alone. Every other integer counts up. */
static const char *const gauge_keys[] = {
	"rate_bps", "ceil_bps", "worker_rate_bps", "worker_ceil_bps", "flow_min_bps", "prio",
	"queued_pkts", "queued_bytes", "backlogged_flows", "flows", "flows_active", "flows_sending",
	"flows_heavy",
	"active",
	"capacity", "acks_held", "acks_held_peak", "records", "bytes_per_ack", "epoch", "lcore",
	"queue", "total", "in_use", "switch_prepare_us", "switch_take_us",
	/* IPsec SAs (ipsec.c): what identifies them, and the SA counts. */
	"spi", "top", "vlan", "worker", "sas", "sas_active", "sas_listed", "sport", "dport",
	"a_port", "b_port",
};

static bool
is_gauge(const char *key)
{
	for (size_t i = 0; i < RTE_DIM(gauge_keys); i++)
		if (strcmp(gauge_keys[i], key) == 0)
			return true;
	return false;
}

static void subtract(json_t *cur, const json_t *base);

static void
subtract_value(json_t *cur, const char *key, json_t *v, const json_t *b)
{
	json_int_t now, then;

	if (b == NULL)
		return;         /* new since the reset (a class, a worker): all of it counts */
	if (json_is_object(v) || json_is_array(v)) {
		subtract(v, b);
		return;
	}
	if (!json_is_integer(v) || !json_is_integer(b) || (key != NULL && is_gauge(key)))
		return;
	now = json_integer_value(v);
	then = json_integer_value(b);
	/* Smaller than at the reset: it restarted since (a class tree rebuilt
	 * by a policy switch), so all of it is newer than the reset. */
	if (now >= then)
		json_integer_set(v, now - then);
}

/* cur -= base, key by key and index by index, for the counters only. */
static void
subtract(json_t *cur, const json_t *base)
{
	const char *key;
	json_t *v;
	size_t i;

	if (json_is_object(cur) && json_is_object(base)) {
		json_object_foreach(cur, key, v)
			subtract_value(cur, key, v, json_object_get(base, key));
	} else if (json_is_array(cur) && json_is_array(base)) {
		json_array_foreach(cur, i, v)
			subtract_value(cur, NULL, v, json_array_get(base, i));
	}
}

/* The stats snapshot with the counters counted from the last reset. */
json_t *
stats_since_reset(struct weir_app *a)
{
	json_t *s = weir_stats_json(a);

	if (s != NULL && a->rest->baseline != NULL)
		subtract(s, a->rest->baseline);
	return s;
}

void
rest_h_counters_reset(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	json_t *s;

	if (rq->len != 0) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "reset takes no body");
		return;
	}
	s = weir_stats_json(a);
	if (s == NULL) {
		rest_reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return;
	}
	json_decref(a->rest->baseline);
	a->rest->baseline = s;
	a->rest->resets++;
	rest_reply_json(r, json_pack("{s:O, s:I}", "uptime_s", json_object_get(s, "uptime_s"),
				"resets", (json_int_t)a->rest->resets));
}

/* ---- GET /api/v1/status ---- */

void
rest_h_status(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	json_t *s = weir_stats_json(a);
	json_t *ports = json_object(), *workers = json_array(), *o;
	json_t *sp = json_object_get(s, "ports"), *sw = json_object_get(s, "workers");

	for (int role = 0; role < WEIR_PORT__COUNT; role++) {
		const json_t *p = json_object_get(sp, role_name[role]);
		struct rte_eth_link link = { 0 };
		json_t *lj;

		/* Never blocks: the management loop must not wait on a PHY. */
		if (!a->ports.started[role] ||
		    rte_eth_link_get_nowait(a->ports.id[role], &link) != 0)
			memset(&link, 0, sizeof(link));
		lj = json_pack("{s:b, s:I, s:s, s:b}", "up", link.link_status == RTE_ETH_LINK_UP,
			"speed_mbps", (json_int_t)(link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN
						   ? 0 : link.link_speed),
			"duplex", link.link_duplex == RTE_ETH_LINK_FULL_DUPLEX ? "full" : "half",
			"autoneg", link.link_autoneg == RTE_ETH_LINK_AUTONEG);
		json_object_set_new(ports, role_name[role], json_pack(
			"{s:o, s:i, s:o, s:O, s:O, s:O, s:O, s:I}",
			"device", weir_json_text(a->cfg.port[role].device),
			"port_id", (int)a->ports.id[role],
			"link", lj,
			"rx", json_object_get(p, "rx"), "tx", json_object_get(p, "tx"),
			"rx_bytes", json_object_get(p, "rx_bytes"),
			"tx_bytes", json_object_get(p, "tx_bytes"),
			"dropped", json_integer_value(json_object_get(p, "tx_full")) +
				   json_integer_value(json_object_get(p, "dropped")) +
				   json_integer_value(json_object_get(p, "refused"))));
	}
	for (size_t i = 0; i < json_array_size(sw); i++) {
		const json_t *w = json_array_get(sw, i);

		json_array_append_new(workers, json_pack("{s:i, s:O, s:O, s:O}", "id", (int)i,
			"lcore", json_object_get(w, "lcore"), "busy_s", json_object_get(w, "busy_s"),
			"flows_active", json_object_get(w, "flows_active")));
	}
	o = json_pack("{s:s, s:O, s:o, s:o, s:{s:O, s:O}, s:O, s:{s:I, s:s}, s:b}",
		"version", WEIR_VERSION, "uptime_s", json_object_get(s, "uptime_s"),
		"ports", ports, "workers", workers,
		"flows", "active", json_object_get(json_object_get(s, "flows"), "active"),
			 "capacity", json_object_get(json_object_get(s, "flows"), "capacity"),
		"mbufs", json_object_get(s, "mbufs"),
		"policy", "epoch", (json_int_t)(a->cfg.policy ? a->cfg.policy->epoch : 0),
			  "source", a->cfg.policy_script[0] != '\0' ? "script" : "config",
		"shaping", a->cfg.policy != NULL);
	json_decref(s);
	rest_reply_json(r, o);
}

/* ---- GET /api/v1/classes ---- */

void
rest_h_classes(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	const struct weir_policy *p = a->cfg.policy;
	json_t *s = stats_since_reset(a);
	json_t *o = json_object();

	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		const json_t *sd = json_object_get(json_object_get(s, "shaping"), dir_name[d]);
		const struct weir_policy_tree *t;
		json_t *list;

		if (p == NULL || p->tree[d].n_classes == 0 || !json_is_object(sd)) {
			json_object_set_new(o, dir_name[d], json_null());
			continue;
		}
		t = &p->tree[d];
		list = json_array();
		for (uint16_t k = 1; k < t->n_classes; k++) {
			const struct weir_policy_class *pc = &t->classes[k];
			/* The counters the stats snapshot computed for this class,
			 * with what the tree says about it. */
			json_t *cj = json_deep_copy(json_object_get(json_object_get(sd, "classes"),
								   pc->name));

			if (cj == NULL)
				cj = json_object();
			json_object_set_new(cj, "name", json_string(pc->name));
			json_object_set_new(cj, "parent", pc->cbq.parent == 0 ? json_null()
					    : json_string(t->classes[pc->cbq.parent].name));
			json_object_set_new(cj, "leaf", json_boolean(pc->is_leaf));
			json_object_set_new(cj, "mode", pc->is_leaf
					    ? json_string(weir_shape_mode_name(pc->mode)) : json_null());
			json_array_append_new(list, cj);
		}
		json_object_set_new(o, dir_name[d], json_pack("{s:O, s:O, s:O, s:O, s:O, s:O, s:o}",
			"rate_bps", json_object_get(sd, "rate_bps"),
			"default", json_object_get(sd, "default"),
			"bytes", json_object_get(sd, "bytes"), "pkts", json_object_get(sd, "pkts"),
			"queued_pkts", json_object_get(sd, "queued_pkts"),
			"queued_bytes", json_object_get(sd, "queued_bytes"),
			"classes", list));
	}
	json_object_set_new(o, "epoch", json_integer(p ? p->epoch : 0));
	json_decref(s);
	rest_reply_json(r, o);
}

/* ---- GET /api/v1/counters ---- */

void
rest_h_counters(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	json_t *s = stats_since_reset(a);
	const json_t *b = a->rest->baseline;

	/* Which counters these are: since the start, or since the reset. */
	if (s != NULL)
		json_object_set_new(s, "since_reset_s", b == NULL ? json_null() : json_real(
			json_real_value(json_object_get(s, "uptime_s")) -
			json_real_value(json_object_get(b, "uptime_s"))));
	rest_reply_json(r, s);
}

/* ---- GET /api/v1/ipsec ---- */

/* The SAs and tunnels now, from the start (not since a counters reset). */
void
rest_h_ipsec(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	rest_reply_json(r, weir_ipsec_json(a));
}


/* ---- GET /api/v1/policy, POST /api/v1/policy/reload ---- */

static json_t *
script_text(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	size_t n;
	json_t *j;

	if (f == NULL)
		return json_null();
	buf = malloc(REST_SCRIPT_MAX);
	n = buf != NULL ? fread(buf, 1, REST_SCRIPT_MAX, f) : 0;
	fclose(f);
	/* Not UTF-8 (or too long to return whole): say so with null. */
	j = buf != NULL && n < REST_SCRIPT_MAX ? json_stringn(buf, n) : NULL;
	free(buf);
	return j != NULL ? j : json_null();
}

void
rest_h_policy(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	bool script = a->cfg.policy_script[0] != '\0';

	rest_reply_json(r, json_pack("{s:I, s:s, s:o, s:o, s:o, s:I, s:I, s:o}",
		"epoch", (json_int_t)(a->cfg.policy ? a->cfg.policy->epoch : 0),
		"source", script ? "script" : "config",
		"config", weir_json_text(a->cfg.path),
		"script", script ? weir_json_text(a->cfg.policy_script) : json_null(),
		"script_text", script ? script_text(a->cfg.policy_script) : json_null(),
		"reloads", (json_int_t)a->reloads, "reload_failures", (json_int_t)a->reload_failures,
		"last_error", weir_json_text(a->reload_error)));
	if (r->json != NULL)
		json_object_set_new(r->json, "token_error", weir_json_text(a->token_error));
}

/* Check the config file (and its script) as a reload would, changing
 * nothing; token_err: what a reload would say of the token file. */
static int
reload_check(struct weir_app *a, char *err, size_t errlen, char *token_err, size_t token_errlen)
{
	struct weir_config nc;
	int rc = 0;

	if (weir_config_load_reload(a->cfg.path, &nc, err, errlen) < 0)
		return -1;
	snprintf(token_err, token_errlen, "%s", nc.mgmt_token_error);
	for (int d = 0; d < WEIR_POLICY_DIRS && a->cfg.policy != NULL; d++) {
		bool now = a->cfg.policy->tree[d].n_classes != 0;
		bool then = nc.policy != NULL && nc.policy->tree[d].n_classes != 0;

		if (now != then) {
			snprintf(err, errlen, "%.300s:%d: shaping the %s direction or not needs a "
				 "restart", nc.path, nc.shaping_line[d], dir_name[d]);
			rc = -1;
			break;
		}
	}
	if (a->cfg.policy == NULL) {
		snprintf(err, errlen, "%.300s:%d: turning shaping on or off needs a restart", nc.path,
			 nc.shaping_line[WEIR_PORT_LAN]);
		rc = -1;
	}
	weir_config_free(&nc);
	return rc;
}

/* Parse the request body: absent, or a JSON object of known fields of the
 * right types. 0, or -1 with the 400/415 reply made. */
int
rest_body_object(struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r, json_t **out)
{
	const char *ct;
	json_error_t jerr;
	json_t *j;

	*out = NULL;
	if (rq->len == 0)
		return 0;
	ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	if (ct == NULL || strncasecmp(ct, "application/json", 16) != 0 ||
	    (ct[16] != '\0' && ct[16] != ';' && ct[16] != ' ')) {
		rest_reply_error(r, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
			    "the body must be application/json");
		return -1;
	}
	j = json_loadb(rq->body, rq->len, JSON_REJECT_DUPLICATES, &jerr);
	if (j == NULL) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "malformed JSON at line %d, column %d: %s",
			    jerr.line, jerr.column, jerr.text);
		return -1;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "the body must be a JSON object");
		return -1;
	}
	*out = j;
	return 0;
}

static void reload_reply(struct weir_app *a, int rc, bool dry_run, const char *err,
			 const char *token_err, struct rest_reply *r);

/* A policy switch at a time (compile_job.h): the second is refused while
 * the first is under way, not queued, since it would replace the first
 * once both were done. true: r holds the refusal. */
bool
rest_switch_busy(struct weir_app *a, struct rest_reply *r)
{
	if (!weir_compile_job_busy(a))
		return false;
	rest_reply_error(r, MHD_HTTP_CONFLICT, "a policy switch is under way (an upload, reload or "
		    "rollback): try again when it ends");
	json_object_set_new(json_object_get(r->json, "error"), "epoch",
			    json_integer(a->cfg.policy ? a->cfg.policy->epoch : 0));
	return true;
}

/* The reload a request started has ended: answer it. */
static void
reload_done(struct weir_app *a, int rc, void *arg)
{
	struct rest_req *rq = arg;

	reload_reply(a, rc, false, a->reload_error, a->token_error, &rq->answer);
	rest_req_resume(rq);
}

void
rest_h_policy_reload(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	char err[sizeof(a->reload_error)], token_err[sizeof(a->token_error)] = "";
	bool dry_run = false;
	const char *key;
	json_t *body, *v;
	int rc;

	if (rest_body_object(c, rq, r, &body) < 0)
		return;
	json_object_foreach(body, key, v) {
		if (strcmp(key, "dry_run") != 0) {
			rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "unknown field '%s'", key);
			json_decref(body);
			return;
		}
		if (!json_is_boolean(v)) {
			rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "'dry_run' must be true or false");
			json_decref(body);
			return;
		}
		dry_run = json_is_true(v);
	}
	json_decref(body);
	if (dry_run) {
		rc = reload_check(a, err, sizeof(err), token_err, sizeof(token_err));
	} else {
		if (rest_switch_busy(a, r))
			return;
		rc = weir_mgmt_reload_start(a, reload_done, rq);
		if (rc > 0) {
			rest_req_suspend(c, rq);
			return;
		}
		snprintf(err, sizeof(err), "%s", a->reload_error);
		snprintf(token_err, sizeof(token_err), "%s", a->token_error);
	}
	reload_reply(a, rc, dry_run, err, token_err, r);
}

/* The answer of a reload or its dry run: rc, err and token_err as reload_check's. */
static void
reload_reply(struct weir_app *a, int rc, bool dry_run, const char *err, const char *token_err,
	     struct rest_reply *r)
{
	if (rc != 0) {
		rest_reply_error(r, MHD_HTTP_UNPROCESSABLE_CONTENT, "%s", err);
		/* Which policy stayed in force. */
		json_object_set_new(json_object_get(r->json, "error"), "epoch",
				    json_integer(a->cfg.policy ? a->cfg.policy->epoch : 0));
		return;
	}
	/* The policy reloaded; a token file that could not be used is said
	 * here (the token in force stays) rather than failing the reload. */
	rest_reply_json(r, json_pack("{s:I, s:b, s:I}",
		"epoch", (json_int_t)(a->cfg.policy ? a->cfg.policy->epoch : 0),
		"dry_run", dry_run, "reloads", (json_int_t)a->reloads));
	if (r->json != NULL && token_err[0] != '\0')
		json_object_set_new(r->json, "token_error", json_string(token_err));
}


/* ---- PATCH /api/v1/classes/{direction}/{name} ---- */

/* A rate field of the body: bit/s as an integer or "20mbit". 0, or -1 with
 * the reply made (400: wrong type or not a rate, 422: a value weir refuses). */
bool
rest_rate_value(const json_t *v, struct weir_value *val)
{
	if (json_is_integer(v)) {
		val->type = WEIR_VALUE_INT;
		val->i = json_integer_value(v);
	} else if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) <= 1e12 &&
		   json_real_value(v) == (double)(json_int_t)json_real_value(v)) {
		/* 20000000.0 is the integer 20000000 to JSON Schema too. */
		val->type = WEIR_VALUE_INT;
		val->i = (json_int_t)json_real_value(v);
	} else if (json_is_string(v)) {
		val->type = WEIR_VALUE_STR;
		val->s = json_string_value(v);
	} else {
		return false;
	}
	return true;
}

int
class_rate(const char *key, const json_t *v, uint64_t *out, struct rest_reply *r)
{
	struct weir_value val = { .type = WEIR_VALUE_OTHER };
	char err[256];
	int m;

	if (!rest_rate_value(v, &val)) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "'%s' must be a rate: bit/s as an integer "
			    "or a string such as \"20mbit\"", key);
		return -1;
	}
	m = weir_value_rate(key, &val, out, err, sizeof(err));
	if (m != 0) {
		/* not a rate at all is malformed; out of range, a value refused */
		rest_reply_error(r, m == -1 ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_UNPROCESSABLE_CONTENT, "%s",
			    err);
		return -1;
	}
	if (*out == 0) {
		rest_reply_error(r, MHD_HTTP_UNPROCESSABLE_CONTENT, "'%s' must be above 0", key);
		return -1;
	}
	return 0;
}

/* The body's change: 0, or -1 with the 400/415/422 reply made. */
static int
class_change(struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r,
	     struct weir_policy_class_change *chg)
{
	const char *key;
	json_t *body, *v;
	char err[256];
	int rc = 0;

	memset(chg, 0, sizeof(*chg));
	chg->mode = -1;
	if (rest_body_object(c, rq, r, &body) < 0)
		return -1;
	if (body == NULL || json_object_size(body) == 0) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "the body must be a JSON object with at least "
			    "one of rate, ceil, mode, contract");
		json_decref(body);
		return -1;
	}
	json_object_foreach(body, key, v) {
		if (strcmp(key, "rate") == 0) {
			rc = class_rate("rate", v, &chg->rate, r);
		} else if (strcmp(key, "ceil") == 0) {
			rc = class_rate("ceil", v, &chg->ceil, r);
		} else if (strcmp(key, "contract") == 0) {
			rc = class_rate("contract", v, &chg->contract, r);
		} else if (strcmp(key, "mode") == 0) {
			uint8_t m;

			if (!json_is_string(v)) {
				rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "'mode' must be a string: "
					    "postack, pfq, fifo, tcr, postack-paced, ipabr or pep");
				rc = -1;
			} else if (weir_value_mode(json_string_value(v), &m, err, sizeof(err)) != 0) {
				rest_reply_error(r, MHD_HTTP_UNPROCESSABLE_CONTENT, "%s", err);
				rc = -1;
			} else {
				chg->mode = m;
			}
		} else {
			rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "unknown field '%s' (rate, ceil, mode and "
				    "a marker's contract can be changed)", key);
			rc = -1;
		}
		if (rc != 0)
			break;
	}
	json_decref(body);
	return rc;
}

static json_t *
class_conf_json(const struct weir_policy *p, int d, int k)
{
	const struct weir_policy_tree *t = &p->tree[d];
	const struct weir_policy_class *pc = &t->classes[k];
	json_t *o = json_pack("{s:s, s:o, s:b, s:o, s:I, s:I, s:i}", "name", pc->name,
		"parent", pc->cbq.parent == 0 ? json_null() : json_string(t->classes[pc->cbq.parent].name),
		"leaf", pc->is_leaf,
		"mode", pc->is_leaf ? json_string(weir_shape_mode_name(pc->mode)) : json_null(),
		"rate_bps", (json_int_t)pc->cbq.rate, "ceil_bps", (json_int_t)pc->cbq.ceil,
		"prio", (int)pc->cbq.prio);

	if (o != NULL && pc->marker.type != WEIR_MARK_NONE)
		json_object_set_new(o, "marker", json_pack("{s:s, s:I, s:I}", "type",
			weir_marker_type_name(pc->marker.type), "cir_bps", (json_int_t)pc->marker.cir,
			"cbs", (json_int_t)pc->marker.cbs));
	return o;
}

/* Rebuild the policy with one class changed and switch to it as a reload
 * does: atomically, every worker at once, nothing changed on any error. */
void
rest_h_class_patch(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	const struct weir_policy *p = a->cfg.policy;
	struct weir_policy_class_change chg;
	struct weir_policy_err perr;
	struct weir_policy *np;
	char err[sizeof(a->reload_error)];
	const char *name = strchr(rq->sub, '/');
	int rc;
	size_t dlen = name != NULL ? (size_t)(name - rq->sub) : strlen(rq->sub);
	int d, k = -1;

	if (class_change(c, rq, r, &chg) < 0) {
		/* Which policy stayed in force, as with every 422 of a policy. */
		if (r->status == MHD_HTTP_UNPROCESSABLE_CONTENT)
			json_object_set_new(json_object_get(r->json, "error"), "epoch",
					    json_integer(p != NULL ? p->epoch : 0));
		return;
	}
	for (d = 0; d < WEIR_POLICY_DIRS; d++)
		if (strlen(dir_name[d]) == dlen && strncmp(rq->sub, dir_name[d], dlen) == 0)
			break;
	if (d == WEIR_POLICY_DIRS) {
		rest_reply_error(r, MHD_HTTP_NOT_FOUND, "no direction '%.*s' (outbound or inbound)",
			    (int)RTE_MIN(dlen, 64u), rq->sub);
		return;
	}
	if (name != NULL && p != NULL && p->tree[d].n_classes != 0)
		k = weir_policy_class_find(p, d, name + 1);
	if (k < 0) {
		rest_reply_error(r, MHD_HTTP_NOT_FOUND, "no class '%s' in the %s tree in force",
			    name != NULL ? name + 1 : "", dir_name[d]);
		return;
	}
	if (a->cfg.policy_script[0] != '\0') {
		/* A hook's next recompile of the script would undo the change. */
		rest_reply_error(r, MHD_HTTP_CONFLICT, "the policy comes from %s: change the script "
			    "(PUT /api/v1/policy)", a->cfg.policy_script);
		return;
	}
	if (rest_switch_busy(a, r))
		return;
	np = weir_policy_with_class(p, d, name + 1, &chg, 0, &perr);
	if (np == NULL) {
		rest_reply_policy_error(a, r, MHD_HTTP_UNPROCESSABLE_CONTENT, perr.msg);
		return;
	}
	rc = weir_policy_apply(a, np, &a->cfg, err, sizeof(err));
	if (rc < 0) {
		weir_policy_free(np);   /* never posted: still ours */
		rest_reply_policy_error(a, r, MHD_HTTP_UNPROCESSABLE_CONTENT, err);
		return;
	}
	/* rc > 0: in force, a worker takes it late (err says which). */
	if (rc > 0)
		RTE_LOG(WARNING, USER1, "%s\n", err);
	p = a->cfg.policy;
	k = weir_policy_class_find(p, d, name + 1);
	RTE_LOG(NOTICE, USER1, "policy %u in force (%s class %s changed through the API)\n",
		p->epoch, dir_name[d], name + 1);
	/* The class trees are new: every class's counters start over. */
	rest_reply_json(r, json_pack("{s:I, s:s, s:o, s:b}", "epoch", (json_int_t)p->epoch,
				"direction", dir_name[d], "class", class_conf_json(p, d, k),
				"counters_restarted", 1));
}

/* ---- GET /api/v1/openapi.json, GET /metrics ---- */

void
rest_h_openapi(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	r->status = MHD_HTTP_OK;
	r->persistent = weir_openapi_json;
	r->persistent_len = weir_openapi_json_len;
	r->ctype = "application/json";
}

void
rest_h_metrics(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	r->text = weir_metrics_text(a, &r->text_len);
	if (r->text == NULL) {
		rest_reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return;
	}
	r->status = MHD_HTTP_OK;
	r->ctype = "text/plain; version=0.0.4; charset=utf-8";
}
