/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the REST API's subscriber changes (docs/subscribers.md).
 *
 * PUT /api/v1/subscribers/{id} (create or replace one), DELETE
 * /api/v1/subscribers/{id}, PATCH /api/v1/subscribers/{id} (any fields of
 * one, the rest kept) and POST /api/v1/subscribers (a batch of such objects
 * and deletions, all or nothing). Each builds the next set beside the one
 * in force (weir_subs_copy, then the request's items), checks it the way a
 * file is checked, and hands it to subs_apply(); a request with a problem
 * changes nothing and says what was wrong with every item: an unknown
 * subscriber 404, a prefix another subscriber holds 409 (naming it), a rate
 * above its parent's or a min above its max 422, a full table 507.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_common.h>

#include "policy_subs.h"
#include "policy_values.h"
#include "rest_int.h"
#include "subs_apply.h"

/* The file name a request's items carry in the set: problems read
 * "request:K: why" with K the item's number from 1. */
#define REQ_FILE "request"
#define BATCH_MAX 100000

/* One item of a request: a whole subscriber, or a deletion. Strings point
 * into the request's JSON. */
struct sub_item {
	const char *id;
	bool del;
	struct weir_sub_conf c;
	const json_t *prefixes, *macs;  /* arrays of strings, or NULL */
	unsigned int status;            /* 0, or this item's refusal */
	char why[300];
};

static unsigned int
item_fail(struct sub_item *it, unsigned int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static unsigned int
item_fail(struct sub_item *it, unsigned int status, const char *fmt, ...)
{
	va_list ap;

	if (it->status != 0)
		return it->status;
	va_start(ap, fmt);
	vsnprintf(it->why, sizeof(it->why), fmt, ap);
	va_end(ap);
	it->status = status;
	return status;
}

static const char *const rate_key[4] = { "download_min", "download_max", "upload_min",
					 "upload_max" };

static unsigned int
item_rate(struct sub_item *it, int j, const json_t *v)
{
	struct weir_value val = { .type = WEIR_VALUE_OTHER };
	uint64_t *out = j < 2 ? (j == 0 ? &it->c.min[WEIR_SUB_DOWN] : &it->c.max[WEIR_SUB_DOWN])
			      : (j == 2 ? &it->c.min[WEIR_SUB_UP] : &it->c.max[WEIR_SUB_UP]);
	char err[256];
	int m;

	if (!rest_rate_value(v, &val))
		return item_fail(it, MHD_HTTP_BAD_REQUEST, "'%s' must be a rate: bit/s as an "
				 "integer or a string such as \"20mbit\"", rate_key[j]);
	m = weir_value_rate(rate_key[j], &val, out, err, sizeof(err));
	if (m != 0)
		return item_fail(it, m == -1 ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_UNPROCESSABLE_CONTENT,
				 "%s", err);
	return 0;
}

static unsigned int
item_strings(struct sub_item *it, const char *key, const json_t *v, const json_t **out)
{
	size_t k;
	const json_t *x;

	if (!json_is_array(v))
		return item_fail(it, MHD_HTTP_BAD_REQUEST, "'%s' must be an array of strings", key);
	json_array_foreach(v, k, x)
		if (!json_is_string(x))
			return item_fail(it, MHD_HTTP_BAD_REQUEST, "'%s'[%zu] must be a string", key,
					 k);
	*out = v;
	return 0;
}

/* One field of an item. */
static unsigned int
item_field(struct sub_item *it, const char *k, const json_t *v, bool batch)
{
	for (int j = 0; j < 4; j++)
		if (strcmp(k, rate_key[j]) == 0)
			return item_rate(it, j, v);
	if (strcmp(k, "id") == 0)
		return json_is_string(v) ? 0 : item_fail(it, MHD_HTTP_BAD_REQUEST,
							 "'id' must be a string");
	if (strcmp(k, "delete") == 0) {
		if (!batch || !json_is_boolean(v))
			return item_fail(it, MHD_HTTP_BAD_REQUEST, "'delete' is a batch item's "
					 "boolean (DELETE /api/v1/subscribers/{id} deletes one)");
		it->del = json_is_true(v);
		return 0;
	}
	if (strcmp(k, "name") == 0 || strcmp(k, "parent") == 0) {
		if (!json_is_string(v) && !(json_is_null(v) && k[0] == 'p'))
			return item_fail(it, MHD_HTTP_BAD_REQUEST, "'%s' must be a string", k);
		if (k[0] == 'n')
			it->c.name = json_string_value(v);
		else
			it->c.parent = json_is_null(v) ? "" : json_string_value(v);
		return 0;
	}
	if (strcmp(k, "shaping") == 0) {
		if (!json_is_boolean(v))
			return item_fail(it, MHD_HTTP_BAD_REQUEST, "'shaping' must be true or false");
		it->c.flags = json_is_true(v) ? 0 : WEIR_SUBF_UNSHAPED;
		return 0;
	}
	if (strcmp(k, "box") == 0) {
		double b = json_is_integer(v) ? (double)json_integer_value(v)
			   : json_is_real(v) ? json_real_value(v) : -1;

		if (b < 0 || b > UINT16_MAX || b != (double)(uint16_t)b)
			return item_fail(it, json_is_number(v) ? MHD_HTTP_UNPROCESSABLE_CONTENT
					 : MHD_HTTP_BAD_REQUEST, "'box' must be 0..65535");
		it->c.box = (uint16_t)b;
		return 0;
	}
	if (strcmp(k, "prefixes") == 0)
		return item_strings(it, k, v, &it->prefixes);
	if (strcmp(k, "macs") == 0)
		return item_strings(it, k, v, &it->macs);
	if (strcmp(k, "burst") == 0 || strcmp(k, "cburst") == 0 || strcmp(k, "boost") == 0)
		/* Known, and refused rather than ignored: the plan would not be what
		 * was asked for. */
		return item_fail(it, MHD_HTTP_UNPROCESSABLE_CONTENT, "'%s': bursts and boosts "
				 "are not in the subscriber model yet", k);
	return item_fail(it, MHD_HTTP_BAD_REQUEST, "unknown field '%.64s' (id, name, parent, "
			 "download_min, download_max, upload_min, upload_max, shaping, box, "
			 "prefixes, macs%s)", k, batch ? ", delete" : "");
}

/* o into *it; url_id: the id the URL names (NULL in a batch). */
static void
item_parse(const json_t *o, const char *url_id, struct sub_item *it)
{
	const char *k;
	const json_t *v, *id;

	memset(it, 0, sizeof(*it));
	it->c.parent = "";
	if (!json_is_object(o)) {
		item_fail(it, MHD_HTTP_BAD_REQUEST, "an item must be a JSON object");
		return;
	}
	id = json_object_get(o, "id");
	it->id = url_id != NULL ? url_id : json_string_value(id);
	if (it->id == NULL) {
		item_fail(it, MHD_HTTP_BAD_REQUEST, "an item needs its 'id'");
		return;
	}
	if (url_id != NULL && json_is_string(id) && strcmp(json_string_value(id), url_id) != 0) {
		item_fail(it, MHD_HTTP_UNPROCESSABLE_CONTENT, "'id' '%.64s' is not the URL's '%.64s'",
			  json_string_value(id), url_id);
		return;
	}
	json_object_foreach((json_t *)(uintptr_t)o, k, v)
		if (item_field(it, k, v, url_id == NULL) != 0)
			return;
	it->c.id = it->id;
	if (it->c.name == NULL)
		it->c.name = it->id;
}

/* The ceiling of what subscriber conf c would hang from, in direction sd
 * of the policy in force: its node's class, the config's `parent` class or
 * the link. 0: unknown (the set's check names an unknown parent). */
static uint64_t
parent_cap(const struct weir_app *a, const struct weir_policy *p, const struct weir_subs *cur,
	   const struct weir_sub_conf *c, int sd)
{
	const int pd = sd == WEIR_SUB_DOWN ? WEIR_DIR_IN : WEIR_DIR_OUT;
	char name[WEIR_POLICY_NAME_LEN];
	int64_t n = -1;
	int k;

	if (c->parent[0] != '\0') {
		n = weir_subs_node_find(cur, c->parent);
		if (n < 0)
			return 0;
		if (weir_subs_node(cur, (uint32_t)n)->is_virtual)
			n = weir_subs_node(cur, (uint32_t)n)->real_parent == WEIR_SUB_NONE
				? -1 : (int64_t)weir_subs_node(cur, (uint32_t)n)->real_parent;
	}
	if (n >= 0)
		weir_subs_node_class_name(cur, (uint32_t)n, name);
	else
		snprintf(name, sizeof(name), "%s", a->cfg.subs_parent);
	k = name[0] != '\0' && p->tree[pd].n_classes ? weir_policy_class_find(p, pd, name) : -1;
	return k >= 0 ? p->tree[pd].classes[k].cbq.ceil : p->src.conf.tree[pd].rate;
}

/* A plan is within its parent: refused, not clipped. */
static void
item_within_parent(const struct weir_app *a, const struct weir_policy *p, struct sub_item *it)
{
	static const char *const dname[2] = { "download", "upload" };

	if (it->del || it->status != 0 || (it->c.flags & WEIR_SUBF_UNSHAPED))
		return;
	for (int d = 0; d < 2; d++) {
		uint64_t cap = parent_cap(a, p, p->subs, &it->c, d);

		if (it->c.min[d] > it->c.max[d] && it->c.max[d] != 0)
			item_fail(it, MHD_HTTP_UNPROCESSABLE_CONTENT, "%s min %.3f Mbit/s above its "
				  "max %.3f", dname[d], it->c.min[d] / 1e6, it->c.max[d] / 1e6);
		else if (cap != 0 && it->c.max[d] > cap)
			item_fail(it, MHD_HTTP_UNPROCESSABLE_CONTENT, "%s max %.3f Mbit/s above its "
				  "parent's (%.3f Mbit/s)", dname[d], it->c.max[d] / 1e6, cap / 1e6);
	}
}

/* What the copy of the set in force needs to put each item in its place. */
struct next_ctx {
	struct sub_item *it;
	uint32_t *rep;                  /* [subscriber in force]: replacing item + 1, 0 none */
	uint8_t *placed;                /* [item]: added already */
	struct weir_sub_errs *e;
};

/* Item k into set t (its devices too), from the request's item k + 1. */
static void
add_item(struct weir_subs *t, struct sub_item *it, uint32_t k, struct weir_sub_errs *e)
{
	const uint16_t f = weir_subs_file(t, REQ_FILE);
	const json_t *x;
	size_t j;
	int64_t i;

	i = weir_subs_add(t, &it->c, f, k + 1, e);
	if (i < 0)
		return;
	json_array_foreach(it->prefixes, j, x)
		weir_subs_add_prefix_text(t, (uint32_t)i, json_string_value(x), f, k + 1, e);
	json_array_foreach(it->macs, j, x)
		weir_subs_add_mac_text(t, (uint32_t)i, json_string_value(x), f, k + 1, e);
}

static bool
keep_unnamed(void *arg, uint32_t i)
{
	return ((const struct next_ctx *)arg)->rep[i] == 0;
}

/* A replaced subscriber's replacement where it stood (a deletion: nothing). */
static void
place_item(void *arg, struct weir_subs *t, uint32_t i)
{
	struct next_ctx *x = arg;
	uint32_t k = x->rep[i] - 1;

	if (x->it[k].del || x->it[k].status != 0)
		return;
	add_item(t, &x->it[k], k, x->e);
	x->placed[k] = 1;
}

/* Problems of set e ("request:K: why" lines) onto their items: a prefix
 * another subscriber holds is 409, a full table 507, the rest 422. */
static void
items_from_errs(const struct weir_sub_errs *e, struct sub_item *it, uint32_t n)
{
	const size_t pl = strlen(REQ_FILE ":");

	for (const char *t = e->text; t != NULL && *t != '\0';) {
		const char *nl = strchr(t, '\n'), *why;
		size_t len = nl != NULL ? (size_t)(nl - t) : strlen(t);
		char line[600], *end = line;
		unsigned long k = 0;
		unsigned int st = MHD_HTTP_UNPROCESSABLE_CONTENT;

		if (strncmp(t, REQ_FILE ":", pl) == 0)
			k = strtoul(t + pl, &end, 10);
		else
			end = (char *)(uintptr_t)t;
		why = k >= 1 && k <= n && strncmp(end, ": ", 2) == 0 ? end + 2 : t;
		snprintf(line, sizeof(line), "%.*s", (int)len, t);
		if (strstr(line, "is already circuit") != NULL)
			st = MHD_HTTP_CONFLICT;
		else if (strstr(line, "more than") != NULL)
			st = MHD_HTTP_INSUFFICIENT_STORAGE;
		if (k >= 1 && k <= n)
			item_fail(&it[k - 1], st, "%.*s", (int)(len - (size_t)(why - t)), why);
		else
			item_fail(&it[0], st, "%.*s", (int)len, t);
		t += len + (nl != NULL);
	}
}

/*
 * The next set: the one in force with items it[0..n) applied. NULL when an
 * item is refused (each refused item's status and why set).
 */
static struct weir_subs *
next_set(struct weir_app *a, struct sub_item *it, uint32_t n)
{
	const struct weir_policy *p = a->cfg.policy;
	const struct weir_subs *cur = p->subs;
	struct weir_sub_errs e = { 0 };
	struct weir_subs *next = NULL;
	struct next_ctx x = { .it = it, .e = &e };
	bool bad = false;

	x.rep = calloc((size_t)weir_subs_count(cur) + 1, sizeof(*x.rep));
	x.placed = calloc((size_t)n + 1, 1);
	if (x.rep == NULL || x.placed == NULL) {
		item_fail(&it[0], MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		goto out;
	}
	for (uint32_t k = 0; k < n; k++) {
		int64_t i = it[k].status == 0 ? weir_subs_find(cur, it[k].id) : -1;

		for (uint32_t j = 0; j < k && it[k].status == 0; j++)
			if (strcmp(it[j].id, it[k].id) == 0)
				item_fail(&it[k], MHD_HTTP_UNPROCESSABLE_CONTENT, "subscriber '%.64s' is "
					  "item %u too", it[k].id, j);
		if (i >= 0)
			x.rep[i] = k + 1;
		else if (it[k].del)
			item_fail(&it[k], MHD_HTTP_NOT_FOUND, "no subscriber '%.64s'", it[k].id);
		item_within_parent(a, p, &it[k]);
		bad |= it[k].status != 0;
	}
	/* The others are still checked, so every bad item is reported. A
	 * replacement takes its subscriber's place; new ones go at the end. */
	next = weir_subs_copy(cur, keep_unnamed, place_item, &x, &e);
	if (next == NULL)
		goto errs;
	for (uint32_t k = 0; k < n; k++)
		if (!it[k].del && it[k].status == 0 && !x.placed[k])
			add_item(next, &it[k], k, &e);
	if (weir_subs_check(next, &e) == 0 && e.n == 0 && !bad)
		goto out;
errs:
	if (e.n_full != 0)
		a->subs_full++;
	items_from_errs(&e, it, n);
	weir_subs_free(next);
	next = NULL;
out:
	weir_sub_errs_free(&e);
	free(x.rep);
	free(x.placed);
	return next;
}

static void
reply_epoch(const struct weir_app *a, struct rest_reply *r)
{
	json_object_set_new(json_object_get(r->json, "error"), "epoch",
			    json_integer(a->cfg.policy ? a->cfg.policy->epoch : 0));
}

/* The refusal of a request whose items it[0..n) have problems: one item's
 * own status and reason; a batch's, every bad item with its index. */
static void
reply_items(const struct weir_app *a, struct rest_reply *r, const struct sub_item *it,
	    uint32_t n, bool batch)
{
	unsigned int st = 0;
	uint32_t bad = 0;
	json_t *probs = json_array();

	for (uint32_t k = 0; k < n; k++) {
		if (it[k].status == 0)
			continue;
		bad++;
		st = st == 0 || st == it[k].status ? it[k].status : MHD_HTTP_UNPROCESSABLE_CONTENT;
		json_array_append_new(probs, json_pack("{s:I, s:s?, s:i, s:s}", "index",
						       (json_int_t)k, "id", it[k].id, "status",
						       (int)it[k].status, "reason", it[k].why));
	}
	if (!batch) {
		rest_reply_error(r, st, "%s", it[0].why);
		json_decref(probs);
	} else {
		rest_reply_error(r, st, "%u of %u items refused; nothing applied", bad, n);
		json_object_set_new(json_object_get(r->json, "error"), "problems", probs);
	}
	reply_epoch(a, r);
}

/* Diff next against the set in force and put it in force: subs_apply's
 * answer (WEIR_SUBS_IN_PLACE, 0: done); <0: r holds the refusal and nothing
 * changed. */
static int
apply(struct weir_app *a, struct weir_subs *next, struct weir_sub_diff *d, struct rest_reply *r)
{
	char err[sizeof(a->reload_error)];
	int rc;

	weir_subs_diff(a->cfg.policy->subs, next, d, NULL, NULL);
	rc = subs_apply(a, next, d, err, sizeof(err));
	if (rc >= 0)
		return rc;
	rest_reply_policy_error(a, r, rc == WEIR_SUBS_FULL ? MHD_HTTP_INSUFFICIENT_STORAGE
				: MHD_HTTP_UNPROCESSABLE_CONTENT, err);
	return rc;
}

/* Nothing to change without subscribers in the config: 409 as the
 * re-read (a PATCH names one, so 404 as before). */
static bool
no_subs_status(const struct weir_app *a, struct rest_reply *r, unsigned int status)
{
	if (a->cfg.policy != NULL && a->cfg.policy->subs != NULL)
		return false;
	rest_reply_error(r, status, "no subscribers: the config has no 'subscribers'");
	return true;
}
#define no_subs(a, r) no_subs_status(a, r, MHD_HTTP_CONFLICT)

/* One subscriber as it now is, with the epoch. */
static void
reply_sub(struct weir_app *a, struct rest_reply *r, const char *id, unsigned int status,
	  bool in_place)
{
	const struct weir_policy *p = a->cfg.policy;
	int64_t i = weir_subs_find(p->subs, id);
	json_t *stats = stats_since_reset(a), *o = rest_sub_json(a, p, (uint32_t)i, stats);

	json_decref(stats);
	json_object_set_new(o, "epoch", json_integer((json_int_t)p->epoch));
	json_object_set_new(o, "in_place", json_boolean(in_place));
	rest_reply_json(r, o);
	r->status = status;
}

/* PUT/PATCH's common end: one item into force. */
static void
put_one(struct weir_app *a, struct rest_reply *r, struct sub_item *it, bool created_ok)
{
	struct weir_subs *next;
	struct weir_sub_diff d;
	bool existed = weir_subs_find(a->cfg.policy->subs, it->id) >= 0;
	int rc;

	if (it->status != 0 || (next = next_set(a, it, 1)) == NULL) {
		reply_items(a, r, it, 1, false);
		return;
	}
	if ((rc = apply(a, next, &d, r)) < 0)
		return;
	reply_sub(a, r, it->id, !existed && created_ok ? MHD_HTTP_CREATED : MHD_HTTP_OK,
		  rc == WEIR_SUBS_IN_PLACE);
}

/* PUT /api/v1/subscribers/{id}: create or replace one subscriber whole. */
void
h_sub_put(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	struct sub_item it;
	json_t *body;

	if (rest_body_object(c, rq, r, &body) < 0)
		return;
	if (body == NULL) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "the body must be a subscriber: a JSON "
				 "object with at least download_max and upload_max");
		return;
	}
	if (no_subs(a, r) || rest_switch_busy(a, r)) {
		json_decref(body);
		return;
	}
	item_parse(body, rq->sub, &it);
	put_one(a, r, &it, true);
	json_decref(body);
}

/* The subscriber in force as a PUT body (a PATCH's starting point). */
static json_t *
sub_as_item(const struct weir_subs *s, uint32_t i)
{
	const struct weir_sub *u = weir_subs_get(s, i);
	json_t *pfx, *macs;

	rest_sub_devices(s, i, &pfx, &macs);
	return json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:b, s:i, s:o, s:o}", "id", u->id,
			 "name", u->name, "parent", u->node == WEIR_SUB_NONE ? ""
			 : weir_subs_node(s, u->node)->name,
			 "download_min", (json_int_t)u->min[WEIR_SUB_DOWN],
			 "download_max", (json_int_t)u->max[WEIR_SUB_DOWN],
			 "upload_min", (json_int_t)u->min[WEIR_SUB_UP],
			 "upload_max", (json_int_t)u->max[WEIR_SUB_UP],
			 "shaping", !(u->flags & WEIR_SUBF_UNSHAPED), "box", (int)u->box,
			 "prefixes", pfx, "macs", macs);
}

/* PATCH /api/v1/subscribers/{id}: the fields given, the rest kept. */
void
h_sub_patch(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	struct sub_item it;
	json_t *body, *cur;
	int64_t i;

	/* The body first, as a class PATCH: a malformed request is 400 whatever
	 * it names. */
	if (rest_body_object(c, rq, r, &body) < 0)
		return;
	if (body == NULL || json_object_size(body) == 0) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "the body must be a JSON object with at least "
				 "one field (download_min, download_max, upload_min, upload_max, ...)");
		json_decref(body);
		return;
	}
	item_parse(body, rq->sub, &it);
	if (it.status != 0) {
		reply_items(a, r, &it, 1, false);
		json_decref(body);
		return;
	}
	if (no_subs_status(a, r, MHD_HTTP_NOT_FOUND) || rest_switch_busy(a, r)) {
		json_decref(body);
		return;
	}
	i = weir_subs_find(a->cfg.policy->subs, rq->sub);
	if (i < 0) {
		rest_reply_error(r, MHD_HTTP_NOT_FOUND, "no subscriber '%.64s'", rq->sub);
		json_decref(body);
		return;
	}
	cur = sub_as_item(a->cfg.policy->subs, (uint32_t)i);
	json_object_update(cur, body);
	json_decref(body);
	item_parse(cur, rq->sub, &it);
	put_one(a, r, &it, false);
	json_decref(cur);
}

/* DELETE /api/v1/subscribers/{id}. */
void
h_sub_delete(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
	     struct rest_reply *r)
{
	struct sub_item it = { .id = rq->sub, .del = true };
	struct weir_subs *next;
	struct weir_sub_diff d;

	(void)c;
	if (no_subs(a, r) || rest_switch_busy(a, r))
		return;
	if ((next = next_set(a, &it, 1)) == NULL) {
		reply_items(a, r, &it, 1, false);
		return;
	}
	if (apply(a, next, &d, r) < 0)
		return;
	rest_reply_json(r, json_pack("{s:s, s:b, s:I}", "id", rq->sub, "deleted", 1, "epoch",
				     (json_int_t)a->cfg.policy->epoch));
}

/* The body of a batch: a JSON array (or {"items": [...]}). */
static json_t *
batch_body(struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_TYPE);
	json_error_t jerr;
	json_t *j, *items;

	if (!rest_ctype_is(ct, "application/json")) {
		rest_reply_error(r, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "the body must be application/json");
		return NULL;
	}
	j = json_loadb(rq->body, rq->len, JSON_REJECT_DUPLICATES, &jerr);
	if (j == NULL) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "malformed JSON at line %d, column %d: %s",
				 jerr.line, jerr.column, jerr.text);
		return NULL;
	}
	items = json_is_array(j) ? j : json_object_get(j, "items");
	if (!json_is_array(items) || json_array_size(items) == 0 ||
	    json_array_size(items) > BATCH_MAX || (json_is_object(j) && json_object_size(j) != 1)) {
		json_decref(j);
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "the body must be a JSON array of 1..%d "
				 "subscribers and deletions ({\"id\": ..., \"delete\": true})",
				 BATCH_MAX);
		return NULL;
	}
	json_incref(items);
	json_decref(j);
	return items;
}

/* POST /api/v1/subscribers: a batch, all or nothing. */
void
h_subs_batch(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
	     struct rest_reply *r)
{
	json_t *items = batch_body(c, rq, r), *x;
	struct sub_item *it;
	struct weir_subs *next = NULL;
	struct weir_sub_diff d;
	uint32_t n;
	size_t k;
	bool bad = false;
	int rc;

	if (items == NULL)
		return;
	if (no_subs(a, r) || rest_switch_busy(a, r)) {
		json_decref(items);
		return;
	}
	n = (uint32_t)json_array_size(items);
	it = calloc(n, sizeof(*it));
	if (it == NULL) {
		json_decref(items);
		rest_reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return;
	}
	json_array_foreach(items, k, x) {
		item_parse(x, NULL, &it[k]);
		bad |= it[k].status != 0;
	}
	if (bad || (next = next_set(a, it, n)) == NULL)
		reply_items(a, r, it, n, true);
	else if ((rc = apply(a, next, &d, r)) >= 0)
		rest_reply_json(r, json_pack("{s:I, s:b, s:i, s:o}", "epoch",
					     (json_int_t)a->cfg.policy->epoch, "in_place",
					     rc == WEIR_SUBS_IN_PLACE, "items", (int)n,
					     "diff", rest_sub_diff_json(&d)));
	free(it);
	json_decref(items);
}
