/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the REST API's subscribers (docs/subscribers.md).
 *
 * GET /api/v1/subscribers?limit=&offset=&sort=id|bytes|drops|rate: a page
 * of subscribers with their plan in force, both directions' figures from
 * the last stats snapshot and a current rate; GET /api/v1/subscribers/{id}:
 * one; POST /api/v1/subscribers/reload: the files re-read, what changed
 * applied. A subscriber's figures are its leaf classes'
 * (lib/classify/policy_subs.h: the one mapping). Changes: rest_subs_edit.c,
 * rest_subs_upload.c.
 */
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_log.h>

#include "switchover.h"
#include "measure.h"
#include "rest_int.h"
#include "subs_apply.h"
#include "lqos.h"
#include "policy_subs.h"

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

void
rest_sub_devices(const struct weir_subs *s, uint32_t i, json_t **pfx, json_t **macs)
{
	const struct weir_sub *u = weir_subs_get(s, i);
	char txt[64];

	*pfx = json_array();
	*macs = json_array();
	for (uint32_t k = 0; k < u->n_prefixes; k++) {
		weir_sub_prefix_text(&weir_subs_prefixes(s)[u->first_prefix + k], txt, sizeof(txt));
		json_array_append_new(*pfx, json_string(txt));
	}
	for (uint32_t k = 0; k < u->n_macs; k++) {
		const uint8_t *m = weir_subs_macs(s)[u->first_mac + k].addr;

		snprintf(txt, sizeof(txt), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3],
			 m[4], m[5]);
		json_array_append_new(*macs, json_string(txt));
	}
}

json_t *
rest_sub_diff_json(const struct weir_sub_diff *d)
{
	return json_pack("{s:i, s:i, s:i, s:i, s:i, s:b}", "added", d->n[WEIR_SUB_ADDED],
			 "removed", d->n[WEIR_SUB_REMOVED], "rates", d->n[WEIR_SUB_RATES],
			 "changed", d->n[WEIR_SUB_CHANGED], "unchanged", d->unchanged,
			 "nodes_changed", d->nodes_changed);
}

json_t *
rest_sub_json(struct weir_app *a, const struct weir_policy *p, uint32_t i,
	      const json_t *stats)
{
	const struct weir_subs *s = p->subs;
	const struct weir_sub *u = weir_subs_get(s, i);
	const json_t *sh = json_object_get(stats, "shaping");
	json_t *pfx, *macs, *o;

	rest_sub_devices(s, i, &pfx, &macs);
	o = json_pack("{s:s, s:s, s:o, s:o, s:o, s:b, s:i}", "id", u->id, "name", u->name,
		"parent", u->node == WEIR_SUB_NONE ? json_null()
			: json_string(weir_subs_node(s, u->node)->name),
		"prefixes", pfx, "macs", macs, "shaping", !(u->flags & WEIR_SUBF_UNSHAPED),
		"box", (int)u->box);
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

/*
 * Current rates: bits/s each way from the subscribers' byte counters, as the
 * delta between the sample of this request and one at least RATE_MIN_S
 * older (management only: a few counters read per request, nothing per
 * packet). Samples are of one policy (a switch starts the counters over):
 * the first request after a switch or at start has no rate yet (0).
 */
#define RATE_MIN_S 1.0

struct rate_sample {
	uint32_t epoch, n;
	uint64_t tsc;
	int64_t *bytes;                 /* 2 a subscriber: download, upload */
};
static struct rate_sample rate_prev, rate_last;

static void
sample_free(struct rate_sample *x)
{
	free(x->bytes);
	memset(x, 0, sizeof(*x));
}

static int64_t
dir_bytes(const json_t *o, const char *dir)
{
	return json_integer_value(json_object_get(json_object_get(o, dir), "bytes"));
}

/* Rates into every subscriber's download/upload objects (all[0..n)). */
static void
set_rates(const struct weir_policy *p, json_t **all, uint32_t n)
{
	static const char *const dir[2] = { "download", "upload" };
	struct rate_sample now = { .epoch = p->epoch, .n = n, .tsc = rte_rdtsc() };
	const struct rate_sample *base;
	double dt;

	now.bytes = malloc(((size_t)n + 1) * 2 * sizeof(*now.bytes));
	if (now.bytes == NULL)
		return;
	for (uint32_t i = 0; i < n; i++)
		for (int d = 0; d < 2; d++)
			now.bytes[2 * i + d] = dir_bytes(all[i], dir[d]);
	if (rate_last.bytes != NULL && (rate_last.epoch != now.epoch || rate_last.n != n)) {
		sample_free(&rate_prev);
		sample_free(&rate_last);
	}
	if (rate_last.bytes != NULL &&
	    (double)(now.tsc - rate_last.tsc) / rte_get_tsc_hz() >= RATE_MIN_S) {
		sample_free(&rate_prev);
		rate_prev = rate_last;
		rate_last = now;
	} else if (rate_last.bytes == NULL) {
		rate_last = now;
	}
	base = rate_prev.bytes != NULL ? &rate_prev : NULL;
	dt = base != NULL ? (double)(now.tsc - base->tsc) / rte_get_tsc_hz() : 0;
	for (uint32_t i = 0; i < n; i++)
		for (int d = 0; d < 2; d++) {
			json_t *o = json_object_get(all[i], dir[d]);
			int64_t db = base != NULL ? now.bytes[2 * i + d] - base->bytes[2 * i + d] : 0;

			if (json_is_object(o))
				json_object_set_new(o, "rate_bps", json_integer(
					db > 0 && dt > 0 ? (json_int_t)(db * 8 / dt) : 0));
		}
	if (now.bytes != rate_last.bytes)
		free(now.bytes);
}

/* Every subscriber's JSON with its current rates (a new array, n entries). */
static json_t **
all_subs_json(struct weir_app *a, const struct weir_policy *p, const json_t *stats)
{
	uint32_t n = weir_subs_count(p->subs);
	json_t **all = calloc((size_t)n + 1, sizeof(*all));

	if (all == NULL)
		return NULL;
	json_t *tcp = weir_meas_subs_json(a);   /* NULL: no measurement to show */

	for (uint32_t i = 0; i < n; i++) {
		json_t *m = tcp != NULL ? json_object_get(tcp, weir_subs_get(p->subs, i)->id) : NULL;

		all[i] = rest_sub_json(a, p, i, stats);
		if (m != NULL && all[i] != NULL)
			json_object_set(all[i], "tcp", m);
	}
	json_decref(tcp);
	set_rates(p, all, n);
	return all;
}

static void
all_free(json_t **all, uint32_t n)
{
	for (uint32_t i = 0; i < n && all != NULL; i++)
		json_decref(all[i]);
	free(all);
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
		if (strcmp(v, "id") != 0 && strcmp(v, "bytes") != 0 && strcmp(v, "drops") != 0 &&
		    strcmp(v, "rate") != 0) {
			rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "sort must be id, bytes, drops or rate");
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
	all = all_subs_json(a, p, stats);
	keys = calloc((size_t)n + 1, sizeof(*keys));
	list = json_array();
	if (all == NULL || keys == NULL || list == NULL) {
		all_free(all, n);
		free(keys);
		json_decref(stats);
		json_decref(list);
		rest_reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		keys[i].i = i;
		keys[i].v = strcmp(sort, "id") == 0 ? 0 : both_dirs(all[i], strcmp(sort, "rate") == 0
								    ? "rate_bps" : sort);
	}
	/* Largest first (top-N); "id" keeps the set's order. */
	if (strcmp(sort, "id") != 0)
		qsort(keys, n, sizeof(*keys), key_desc);
	for (uint64_t k = offset; k < n && k < offset + limit; k++)
		json_array_append(list, all[keys[k].i]);
	all_free(all, n);
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
	json_t *stats, **all;
	int64_t i;

	(void)c;
	if (no_subs(p, r) || (i = find_or_404(p, rq->sub, r)) < 0)
		return;
	stats = stats_since_reset(a);
	all = all_subs_json(a, p, stats);
	json_decref(stats);
	if (all == NULL) {
		rest_reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return;
	}
	rest_reply_json(r, json_incref(all[i]));
	all_free(all, weir_subs_count(p->subs));
}

/* Errors text ("FILE:LINE: why\n"...) as a JSON array of lines. */
json_t *
rest_sub_error_lines(const struct weir_sub_errs *e)
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
		json_object_set_new(json_object_get(r->json, "error"), "problems", rest_sub_error_lines(&e));
		json_object_set_new(json_object_get(r->json, "error"), "epoch",
				    json_integer(p->epoch));
		weir_sub_errs_free(&e);
		return;
	}
	weir_subs_diff(p->subs, s, &d, NULL, NULL);
	diff = rest_sub_diff_json(&d);
	if (!subs_diff_any(&d)) {
		weir_subs_free(s);
		rest_reply_json(r, json_pack("{s:b, s:I, s:o}", "switched", 0,
					"epoch", (json_int_t)p->epoch, "diff", diff));
		return;
	}
	rc = subs_apply(a, s, &d, err, sizeof(err));
	if (rc < 0) {
		json_decref(diff);
		rest_reply_policy_error(a, r, rc == WEIR_SUBS_FULL ? MHD_HTTP_INSUFFICIENT_STORAGE
					: MHD_HTTP_UNPROCESSABLE_CONTENT, err);
		return;
	}
	rest_reply_json(r, json_pack("{s:b, s:b, s:I, s:o}", "switched", rc != WEIR_SUBS_IN_PLACE,
				"in_place", rc == WEIR_SUBS_IN_PLACE,
				"epoch", (json_int_t)a->cfg.policy->epoch, "diff", diff));
}
