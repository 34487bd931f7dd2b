/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the REST API's subscribers (docs/subscribers.md).
 *
 * GET /api/v1/subscribers?limit=&offset=&sort=id|bytes|drops: a page of
 * subscribers with their plan in force and both directions' figures from
 * the last stats snapshot; GET /api/v1/subscribers/{id}: one;
 * PATCH /api/v1/subscribers/{id} {download_min, download_max, upload_min,
 * upload_max}: a plan change, switched to as a class PATCH is (every
 * worker at once, queued packets kept in order). A subscriber's figures
 * are its leaf classes' (lib/classify/policy_subs.h: the one mapping).
 */
#include <stdlib.h>
#include <string.h>

#include <rte_log.h>

#include "policy_switch.h"
#include "rest_int.h"
#include "subs_lqos.h"
#include "policy_subs.h"
#include "subs_live.h"

#define SUBS_PAGE_MAX 1000

/* Direction d's figures of subscriber i, from snapshot sd (may be NULL). */
static json_t *
sub_dir_json(const struct weir_policy *p, int d, uint32_t i, const json_t *sd)
{
	char name[WEIR_POLICY_NAME_LEN];
	int k;
	const json_t *cj;
	const struct weir_policy_class *pc;

	weir_subs_class_name(p->subs, i, name);
	k = p->tree[d].n_classes ? weir_policy_class_find(p, d, name) : -1;
	if (k < 0)
		return json_null();
	pc = &p->tree[d].classes[k];
	cj = json_object_get(json_object_get(sd, "classes"), name);
#define F(key) json_integer(json_integer_value(json_object_get(cj, key)))
	return json_pack("{s:s, s:I, s:I, s:o, s:o, s:I, s:o}", "class", name,
		"min_bps", (json_int_t)pc->cbq.rate, "max_bps", (json_int_t)pc->cbq.ceil,
		"bytes", F("bytes"), "pkts", F("pkts"),
		"drops", (json_int_t)(json_integer_value(json_object_get(cj, "drops_flow")) +
				      json_integer_value(json_object_get(cj, "drops_class")) +
				      json_integer_value(json_object_get(cj, "drops_aqm")) +
				      json_integer_value(json_object_get(cj, "drops_pool"))),
		"flows", F("flows"));
#undef F
}

static json_t *
sub_json(const struct weir_policy *p, uint32_t i, const json_t *stats)
{
	const struct weir_subs *s = p->subs;
	const struct weir_sub *u = weir_subs_get(s, i);
	const json_t *sh = json_object_get(stats, "shaping");
	json_t *pfx = json_array(), *o;
	char txt[64];

	for (uint32_t k = 0; k < u->n_prefixes; k++) {
		weir_sub_prefix_text(&weir_subs_prefixes(s)[u->first_prefix + k], txt, sizeof(txt));
		json_array_append_new(pfx, json_string(txt));
	}
	o = json_pack("{s:s, s:s, s:o, s:o, s:b, s:i}", "id", u->id, "name", u->name,
		"parent", u->node == WEIR_SUB_NONE ? json_null()
			: json_string(weir_subs_node(s, u->node)->name),
		"prefixes", pfx, "shaping", !(u->flags & WEIR_SUBF_UNSHAPED), "box", (int)u->box);
	/* download: towards the subscriber, the inbound tree */
	json_object_set_new(o, "download", sub_dir_json(p, WEIR_DIR_IN, i,
							json_object_get(sh, "inbound")));
	json_object_set_new(o, "upload", sub_dir_json(p, WEIR_DIR_OUT, i,
						      json_object_get(sh, "outbound")));
	return o;
}

static bool
no_subs(const struct weir_policy *p, struct rest_reply *r)
{
	if (p != NULL && p->subs != NULL)
		return false;
	rest_reply_error(r, MHD_HTTP_NOT_FOUND, "no subscribers: the config has no 'subscribers'");
	return true;
}

static int64_t
find_or_404(const struct weir_policy *p, const char *id, struct rest_reply *r)
{
	int64_t i = weir_subs_find(p->subs, id);

	if (i < 0)
		rest_reply_error(r, MHD_HTTP_NOT_FOUND, "no subscriber '%.64s'", id);
	return i;
}

struct sort_key {
	int64_t v;
	uint32_t i;
};

static int
key_desc(const void *x, const void *y)
{
	const struct sort_key *a = x, *b = y;

	if (a->v != b->v)
		return a->v > b->v ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

static int64_t
both_dirs(const json_t *o, const char *key)
{
	return json_integer_value(json_object_get(json_object_get(o, "download"), key)) +
	       json_integer_value(json_object_get(json_object_get(o, "upload"), key));
}

void
h_subs(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	const struct weir_policy *p = a->cfg.policy;
	const char *v;
	uint64_t limit = 100, offset = 0;
	const char *sort = "id";
	json_t *stats, *list, **all;
	struct sort_key *keys;
	uint32_t n;

	(void)rq;
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
	if (v != NULL && (!rest_parse_uint(v, SUBS_PAGE_MAX, &limit) || limit == 0)) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "limit must be 1..%d", SUBS_PAGE_MAX);
		return;
	}
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset");
	if (v != NULL && !rest_parse_uint(v, UINT32_MAX, &offset)) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "offset must be a number");
		return;
	}
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "sort");
	if (v != NULL) {
		if (strcmp(v, "id") != 0 && strcmp(v, "bytes") != 0 && strcmp(v, "drops") != 0) {
			rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "sort must be id, bytes or drops");
			return;
		}
		sort = v;
	}
	if (p == NULL || p->subs == NULL) {
		/* No subscribers configured: an empty list, not an error. */
		rest_reply_json(r, json_pack("{s:i, s:I, s:I, s:s, s:[]}", "total", 0,
					"offset", (json_int_t)offset, "limit", (json_int_t)limit,
					"sort", sort, "subscribers"));
		return;
	}
	n = weir_subs_count(p->subs);
	stats = stats_since_reset(a);
	all = calloc((size_t)n + 1, sizeof(*all));
	keys = calloc((size_t)n + 1, sizeof(*keys));
	list = json_array();
	if (all == NULL || keys == NULL || list == NULL) {
		free(all);
		free(keys);
		json_decref(stats);
		json_decref(list);
		rest_reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		all[i] = sub_json(p, i, stats);
		keys[i].i = i;
		keys[i].v = strcmp(sort, "id") == 0 ? 0 : both_dirs(all[i], sort);
	}
	/* Largest first (top-N); "id" keeps the set's order. */
	if (strcmp(sort, "id") != 0)
		qsort(keys, n, sizeof(*keys), key_desc);
	for (uint64_t k = offset; k < n && k < offset + limit; k++)
		json_array_append(list, all[keys[k].i]);
	for (uint32_t i = 0; i < n; i++)
		json_decref(all[i]);
	free(all);
	free(keys);
	json_decref(stats);
	rest_reply_json(r, json_pack("{s:I, s:I, s:I, s:s, s:o}", "total", (json_int_t)n,
				"offset", (json_int_t)offset, "limit", (json_int_t)limit,
				"sort", sort, "subscribers", list));
}

void
h_sub_get(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	const struct weir_policy *p = a->cfg.policy;
	json_t *stats;
	int64_t i;

	(void)c;
	if (no_subs(p, r) || (i = find_or_404(p, rq->sub, r)) < 0)
		return;
	stats = stats_since_reset(a);
	rest_reply_json(r, sub_json(p, (uint32_t)i, stats));
	json_decref(stats);
}

/* The body: rates by direction, 0 = unchanged. 0, or -1 with the reply. */
static int
sub_change(struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r, uint64_t min[2],
	   uint64_t max[2])
{
	static const char *const key[4] = { "download_min", "download_max", "upload_min",
					    "upload_max" };
	uint64_t *out[4] = { &min[WEIR_DIR_IN], &max[WEIR_DIR_IN], &min[WEIR_DIR_OUT],
			     &max[WEIR_DIR_OUT] };
	const char *k;
	json_t *body, *v;
	int rc = 0;

	if (rest_body_object(c, rq, r, &body) < 0)
		return -1;
	if (body == NULL || json_object_size(body) == 0) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "the body must be a JSON object with at least "
			    "one of download_min, download_max, upload_min, upload_max");
		json_decref(body);
		return -1;
	}
	json_object_foreach(body, k, v) {
		int j;

		for (j = 0; j < 4 && strcmp(k, key[j]) != 0; j++)
			;
		if (j == 4) {
			rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "unknown field '%.64s' (download_min, "
				    "download_max, upload_min, upload_max)", k);
			rc = -1;
		} else {
			rc = class_rate(key[j], v, out[j], r);
		}
		if (rc != 0)
			break;
	}
	json_decref(body);
	return rc;
}

/* A plan change: the subscriber's two leaves rebuilt (the policy's own
 * validation) and switched to at once; on any error nothing changes. */
void
h_sub_patch(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	const struct weir_policy *p = a->cfg.policy;
	uint64_t min[2] = { 0 }, max[2] = { 0 };
	struct weir_policy *np = NULL, *step;
	struct weir_policy_err perr;
	char name[WEIR_POLICY_NAME_LEN], err[sizeof(a->reload_error)];
	int64_t i;
	int rc;

	/* The body first, as a class PATCH: a malformed request is 400 whatever it names;
	 * a 422 says which policy stayed in force, as every 422 of a policy does. */
	if (sub_change(c, rq, r, min, max) < 0) {
		if (r->status == MHD_HTTP_UNPROCESSABLE_CONTENT)
			json_object_set_new(json_object_get(r->json, "error"), "epoch",
					    json_integer(p != NULL ? p->epoch : 0));
		return;
	}
	if (no_subs(p, r) || (i = find_or_404(p, rq->sub, r)) < 0)
		return;
	if (rest_switch_busy(a, r))
		return;
	/* A plan change in place first (no switch, counters kept). */
	rc = subs_live_patch(a, (uint32_t)i, min, max, err, sizeof(err));
	if (rc < 0) {
		rest_reply_policy_error(a, r, MHD_HTTP_UNPROCESSABLE_CONTENT, err);
		return;
	}
	if (rc > 0) {
		json_t *stats = stats_since_reset(a), *o;

		p = a->cfg.policy;
		o = sub_json(p, (uint32_t)i, stats);
		json_object_set_new(o, "epoch", json_integer((json_int_t)p->epoch));
		json_object_set_new(o, "in_place", json_true());
		json_decref(stats);
		rest_reply_json(r, o);
		return;
	}
	weir_subs_class_name(p->subs, (uint32_t)i, name);
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		const struct weir_policy *cur = np != NULL ? np : p;
		int k = cur->tree[d].n_classes ? weir_policy_class_find(cur, d, name) : -1;
		struct weir_policy_class_change chg = { .rate = min[d], .ceil = max[d], .mode = -1 };
		const struct weir_policy_class *kc, *pc;
		uint64_t ceil, rate;

		if (k < 0 || (min[d] == 0 && max[d] == 0))
			continue;
		kc = &cur->tree[d].classes[k];
		pc = &cur->tree[d].classes[kc->cbq.parent];
		ceil = max[d] ? max[d] : kc->cbq.ceil;
		rate = min[d] ? min[d] : kc->cbq.rate;
		/* A plan is within its node: refused, not clipped. */
		if (ceil > pc->cbq.ceil || rate > ceil) {
			weir_policy_free(np);
			rest_reply_error(r, MHD_HTTP_UNPROCESSABLE_CONTENT, "%s: %s %.3f Mbit/s above %s "
				    "(%.3f Mbit/s)", d == WEIR_DIR_IN ? "download" : "upload",
				    rate > ceil ? "min" : "max", (rate > ceil ? rate : ceil) / 1e6,
				    rate > ceil ? "its max" : "its parent's",
				    (rate > ceil ? ceil : pc->cbq.ceil) / 1e6);
			json_object_set_new(json_object_get(r->json, "error"), "epoch",
					    json_integer(p->epoch));
			return;
		}
		step = weir_policy_with_class(cur, d, name, &chg, 0, &perr);
		weir_policy_free(np);
		np = step;
		if (np == NULL) {
			rest_reply_policy_error(a, r, MHD_HTTP_UNPROCESSABLE_CONTENT, perr.msg);
			return;
		}
	}
	if (np == NULL) {
		rest_reply_error(r, MHD_HTTP_UNPROCESSABLE_CONTENT, "nothing to change");
		json_object_set_new(json_object_get(r->json, "error"), "epoch",
				    json_integer(p->epoch));
		return;
	}
	rc = weir_policy_apply(a, np, &a->cfg, err, sizeof(err));
	if (rc < 0) {
		weir_policy_free(np);
		rest_reply_policy_error(a, r, MHD_HTTP_UNPROCESSABLE_CONTENT, err);
		return;
	}
	if (rc > 0)
		RTE_LOG(WARNING, USER1, "%s\n", err);
	p = a->cfg.policy;
	RTE_LOG(NOTICE, USER1, "policy %u in force (subscriber %s changed through the API)\n",
		p->epoch, rq->sub);
	{
		json_t *stats = stats_since_reset(a), *o = sub_json(p, (uint32_t)i, stats);

		json_object_set_new(o, "epoch", json_integer((json_int_t)p->epoch));
		json_decref(stats);
		rest_reply_json(r, o);
	}
}

/* Errors text ("FILE:LINE: why\n"...) as a JSON array of lines. */
static json_t *
error_lines(const struct weir_sub_errs *e)
{
	json_t *a = json_array();

	for (const char *p = e->text; p != NULL && *p != '\0';) {
		const char *nl = strchr(p, '\n');
		size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);

		json_array_append_new(a, json_stringn(p, n));
		p += n + (nl != NULL);
	}
	return a;
}

/* The policy in force with subscriber set s in place of its own: the
 * trees' own classes kept, the subscribers' rebuilt. NULL with err. */
static struct weir_policy *
policy_with_subs(const struct weir_app *a, const struct weir_policy *p,
		 const struct weir_subs *s, char *err, size_t errlen)
{
	struct weir_policy_conf pc = p->src.conf;
	struct weir_policy_class_conf *cls[WEIR_POLICY_DIRS] = { NULL, NULL };
	struct weir_policy_err perr;
	struct weir_policy *np = NULL;

	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		struct weir_policy_tree_conf *tc = &pc.tree[d];

		if (tc->rate == 0 || tc->n_classes == 0)
			continue;
		cls[d] = weir_subs_classes(s, d, tc->rate, a->cfg.subs_parent, tc->classes,
					   pc.subs_base[d], tc->mode, err, errlen);
		if (cls[d] == NULL)
			goto out;
		tc->classes = cls[d];
		tc->n_classes = (uint16_t)(pc.subs_base[d] + weir_subs_class_count(s));
	}
	pc.subs = s;
	np = weir_policy_build(&pc, 0, &perr);
	if (np == NULL)
		snprintf(err, errlen, "%s", perr.msg);
out:
	free(cls[0]);
	free(cls[1]);
	return np;
}

/*
 * POST /api/v1/subscribers/reload: read the files again and apply what
 * changed. A file with problems: 422 with every problem, nothing changes.
 * Nothing changed: no switch. Otherwise one switch to the new set (today's
 * trees change only by a switch; the answer says what changed).
 */
void
h_subs_reload(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	const struct weir_policy *p = a->cfg.policy;
	struct weir_sub_errs e = { 0 };
	struct weir_sub_diff d;
	struct weir_subs *s;
	struct weir_policy *np;
	char err[sizeof(a->reload_error)];
	json_t *diff;
	int rc;

	(void)c;
	(void)rq;
	if (p == NULL || p->subs == NULL) {
		/* The route is there; the config has nothing for it to re-read. */
		rest_reply_error(r, MHD_HTTP_CONFLICT, "no subscribers: the config has no 'subscribers'");
		return;
	}
	if (rest_switch_busy(a, r))
		return;
	s = weir_subs_load_lqos(a->cfg.subs_csv, a->cfg.subs_network, a->cfg.subs_box,
				&e);
	if (s == NULL) {
		rest_reply_error(r, MHD_HTTP_UNPROCESSABLE_CONTENT, "%u problems in the subscriber "
			    "files; nothing of them applied", e.n);
		json_object_set_new(json_object_get(r->json, "error"), "problems", error_lines(&e));
		json_object_set_new(json_object_get(r->json, "error"), "epoch",
				    json_integer(p->epoch));
		weir_sub_errs_free(&e);
		return;
	}
	weir_subs_diff(p->subs, s, &d, NULL, NULL);
	diff = json_pack("{s:i, s:i, s:i, s:i, s:i, s:b}", "added", d.n[WEIR_SUB_ADDED],
			 "removed", d.n[WEIR_SUB_REMOVED], "rates", d.n[WEIR_SUB_RATES],
			 "changed", d.n[WEIR_SUB_CHANGED], "unchanged", d.unchanged,
			 "nodes_changed", d.nodes_changed);
	if (d.n[0] + d.n[1] + d.n[2] + d.n[3] == 0 && !d.nodes_changed) {
		weir_subs_free(s);
		rest_reply_json(r, json_pack("{s:b, s:I, s:o}", "switched", 0,
					"epoch", (json_int_t)p->epoch, "diff", diff));
		return;
	}
	/* Plans of existing subscribers change in place (no switch). */
	rc = subs_live_apply(a, p->subs, s, &d, err, sizeof(err));
	if (rc != 0) {
		weir_subs_free(s);      /* the policy holds its own reference when it took it */
		if (rc < 0) {
			json_decref(diff);
			rest_reply_policy_error(a, r, MHD_HTTP_UNPROCESSABLE_CONTENT, err);
			return;
		}
		rest_reply_json(r, json_pack("{s:b, s:b, s:I, s:o}", "switched", 0, "in_place", 1,
					"epoch", (json_int_t)a->cfg.policy->epoch, "diff", diff));
		return;
	}
	np = policy_with_subs(a, p, s, err, sizeof(err));
	weir_subs_free(s);      /* np holds its own reference */
	if (np == NULL) {
		json_decref(diff);
		rest_reply_policy_error(a, r, MHD_HTTP_UNPROCESSABLE_CONTENT, err);
		return;
	}
	rc = weir_policy_apply(a, np, &a->cfg, err, sizeof(err));
	if (rc < 0) {
		weir_policy_free(np);
		json_decref(diff);
		rest_reply_policy_error(a, r, MHD_HTTP_UNPROCESSABLE_CONTENT, err);
		return;
	}
	if (rc > 0)
		RTE_LOG(WARNING, USER1, "%s\n", err);
	RTE_LOG(NOTICE, USER1, "policy %u in force (subscriber files re-read: %u added, %u "
		"removed, %u changed)\n", a->cfg.policy->epoch, d.n[WEIR_SUB_ADDED],
		d.n[WEIR_SUB_REMOVED], d.n[WEIR_SUB_RATES] + d.n[WEIR_SUB_CHANGED]);
	rest_reply_json(r, json_pack("{s:b, s:I, s:o}", "switched", 1,
				"epoch", (json_int_t)a->cfg.policy->epoch, "diff", diff));
}
