/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the REST API's GET /api/v1/hosts (per LAN host: traffic, round
 * trips each side, retransmissions; sorted, top N) and GET
 * /api/v1/measure (per class: min/median/p95 round trips and the
 * retransmission ratio; the worst flows by round trip and by
 * retransmissions; with ?by=subscriber the same per subscriber, the worst
 * subscribers by round trip and by retransmission ratio). All from one copy
 * of every measured TCP flow (measure.h, which says what "the last
 * interval" is).
 */
#include "measure.h"
#include "rest_int.h"
#include "subscriber.h"

#define HOSTS_LIMIT_DEFAULT 100
#define TOP_DEFAULT 10
#define TOP_MAX 1000

static const uint8_t *
lan_addr(const struct weir_meas_flow *f)
{
	return f->lan_hi ? f->key.addr_hi : f->key.addr_lo;
}

static int
cmp_host(const void *x, const void *y)
{
	const struct weir_meas_flow *a = x, *b = y;

	if (a->key.family != b->key.family)
		return a->key.family - b->key.family;
	return memcmp(lan_addr(a), lan_addr(b), 16);
}

static json_t *
summary_json(uint32_t *v, size_t n)
{
	struct weir_meas_summary s;

	if (n == 0)
		return json_null();
	weir_meas_summarise(v, n, &s);
	return json_pack("{s:i, s:o, s:o, s:o}", "flows", (int)s.n,
			 "min", json_ms(s.min_us, true), "median", json_ms(s.median_us, true),
			 "p95", json_ms(s.p95_us, true));
}

/* Figures of a group of flows (a host's, a class's). */
struct group {
	uint32_t flows, active;
	uint64_t bytes[2];              /* every flow's */
	uint64_t act_bytes;             /* the active ones' (the ratio's denominator) */
	uint64_t retrans_bytes[2], retrans_segs[2], ooo, dupacks;
	uint32_t *lan, *wan;            /* smoothed round trips sampled in the window */
	size_t n_lan, n_wan;
	uint32_t worst_srtt_us;         /* for sorting hosts */
};

static void
group_add(struct group *g, const struct weir_meas *m, const struct weir_meas_flow *f)
{
	g->flows++;
	g->bytes[0] += f->bytes[0];
	g->bytes[1] += f->bytes[1];
	if (weir_meas_recent(m, &f->t.lan))
		g->lan[g->n_lan++] = f->t.lan.srtt_us;
	if (weir_meas_recent(m, &f->t.wan)) {
		g->wan[g->n_wan++] = f->t.wan.srtt_us;
		g->worst_srtt_us = RTE_MAX(g->worst_srtt_us, f->t.wan.srtt_us + f->t.lan.srtt_us);
	}
	if (!f->active)
		return;
	g->active++;
	g->act_bytes += f->bytes[0] + f->bytes[1];
	g->retrans_bytes[0] += f->t.out.retrans_bytes;
	g->retrans_bytes[1] += f->t.in.retrans_bytes;
	g->retrans_segs[0] += f->t.out.retrans_segs;
	g->retrans_segs[1] += f->t.in.retrans_segs;
	g->ooo += f->t.out.ooo + f->t.in.ooo;
	g->dupacks += f->t.out.dupacks + f->t.in.dupacks;
}

static double
group_ratio(const struct group *g)
{
	return g->act_bytes ? (double)(g->retrans_bytes[0] + g->retrans_bytes[1]) /
		(double)g->act_bytes : 0.0;
}

/* The group's figures; takes g->lan and g->wan (sorts them). */
static json_t *
group_json(struct group *g)
{
	return json_pack("{s:i, s:i, s:I, s:I, s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:f}",
		"tcp_flows", (int)g->flows, "active_flows", (int)g->active,
		"bytes_out", (json_int_t)g->bytes[0], "bytes_in", (json_int_t)g->bytes[1],
		"rtt_lan_ms", summary_json(g->lan, g->n_lan), "rtt_wan_ms", summary_json(g->wan, g->n_wan),
		"retrans_segs_out", (json_int_t)g->retrans_segs[0],
		"retrans_segs_in", (json_int_t)g->retrans_segs[1],
		"retrans_bytes_out", (json_int_t)g->retrans_bytes[0],
		"retrans_bytes_in", (json_int_t)g->retrans_bytes[1],
		"ooo", (json_int_t)g->ooo, "dupacks", (json_int_t)g->dupacks,
		"retrans_ratio", group_ratio(g));
}

struct host_row {
	json_t *o;
	uint64_t bytes, retrans;
	uint32_t rtt_us;
};

enum host_sort { SORT_BYTES, SORT_RTT, SORT_RETRANS };
static enum host_sort sort_key;

static int
cmp_row(const void *x, const void *y)
{
	const struct host_row *a = x, *b = y;
	uint64_t ka = sort_key == SORT_BYTES ? a->bytes : sort_key == SORT_RTT ? a->rtt_us : a->retrans;
	uint64_t kb = sort_key == SORT_BYTES ? b->bytes : sort_key == SORT_RTT ? b->rtt_us : b->retrans;

	return ka > kb ? -1 : ka < kb;  /* largest first */
}

static int
measure_get(struct weir_app *a, struct weir_meas *m, uint32_t **lan, uint32_t **wan,
	    struct rest_reply *r)
{
	if (weir_meas_collect(a, m) != 0)
		goto oom;
	*lan = malloc((m->n + 1) * sizeof(**lan));
	*wan = malloc((m->n + 1) * sizeof(**wan));
	if (*lan != NULL && *wan != NULL)
		return 0;
	free(*lan);
	free(*wan);
	weir_meas_free(m);
oom:
	rest_reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	return -1;
}

void
h_hosts(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	const char *v;
	uint64_t limit = HOSTS_LIMIT_DEFAULT;
	struct weir_meas m;
	uint32_t *lan, *wan;
	struct host_row *rows;
	size_t n_rows = 0;
	json_t *list;

	(void)rq;
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
	if (v != NULL && (!rest_parse_uint(v, FLOWS_LIMIT_MAX, &limit) || limit == 0)) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "'limit' must be an integer from 1 to %d",
			    FLOWS_LIMIT_MAX);
		return;
	}
	sort_key = SORT_BYTES;
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "sort");
	if (v != NULL) {
		if (strcmp(v, "rtt") == 0)
			sort_key = SORT_RTT;
		else if (strcmp(v, "retrans") == 0)
			sort_key = SORT_RETRANS;
		else if (strcmp(v, "bytes") != 0) {
			rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "'sort' must be bytes, rtt or retrans");
			return;
		}
	}
	if (measure_get(a, &m, &lan, &wan, r) < 0)
		return;
	rows = calloc(m.n + 1, sizeof(*rows));
	if (rows == NULL) {
		free(lan), free(wan), weir_meas_free(&m);
		rest_reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return;
	}
	qsort(m.f, m.n, sizeof(*m.f), cmp_host);
	for (size_t i = 0; i < m.n;) {
		struct group g = { .lan = lan, .wan = wan };
		char buf[INET6_ADDRSTRLEN];
		size_t j = i;

		for (; j < m.n && cmp_host(&m.f[i], &m.f[j]) == 0; j++)
			group_add(&g, &m, &m.f[j]);
		inet_ntop(m.f[i].key.family == 6 ? AF_INET6 : AF_INET, lan_addr(&m.f[i]), buf, sizeof(buf));
		rows[n_rows].bytes = g.bytes[0] + g.bytes[1];
		rows[n_rows].retrans = g.retrans_bytes[0] + g.retrans_bytes[1];
		rows[n_rows].rtt_us = g.worst_srtt_us;
		rows[n_rows].o = group_json(&g);
		json_object_set_new(rows[n_rows].o, "addr", json_string(buf));
		n_rows++;
		i = j;
	}
	qsort(rows, n_rows, sizeof(*rows), cmp_row);
	list = json_array();
	for (size_t i = 0; i < n_rows; i++) {
		if (i < limit)
			json_array_append_new(list, rows[i].o);
		else
			json_decref(rows[i].o);
	}
	free(rows), free(lan), free(wan);
	rest_reply_json(r, json_pack("{s:f, s:i, s:s, s:o}", "window_s", (double)m.window_us / 1e6,
				"total", (int)n_rows, "sort", sort_key == SORT_BYTES ? "bytes" :
				sort_key == SORT_RTT ? "rtt" : "retrans", "hosts", list));
	weir_meas_free(&m);
}

/* One of the worst flows. */
static json_t *
worst_json(const struct weir_meas_flow *f)
{
	uint64_t b = f->bytes[0] + f->bytes[1];

	return json_pack("{s:i, s:i, s:o, s:o, s:o, s:o, s:I, s:I, s:f}",
		"worker", (int)f->worker, "slot", (int)f->slot,
		"lan", endpoint_json(&f->key, f->lan_hi, f->lan_hi ? f->key.port_hi : f->key.port_lo),
		"wan", endpoint_json(&f->key, !f->lan_hi, f->lan_hi ? f->key.port_lo : f->key.port_hi),
		"srtt_lan_ms", json_ms(f->t.lan.srtt_us, f->t.lan.samples != 0),
		"srtt_wan_ms", json_ms(f->t.wan.srtt_us, f->t.wan.samples != 0),
		"retrans_segs", (json_int_t)(f->t.out.retrans_segs + f->t.in.retrans_segs),
		"retrans_bytes", (json_int_t)weir_meas_retrans_bytes(f),
		"retrans_ratio", b ? (double)weir_meas_retrans_bytes(f) / (double)b : 0.0);
}

static const struct weir_meas *cmp_m;

static uint64_t
rtt_key(const struct weir_meas_flow *f)
{
	return weir_meas_recent(cmp_m, &f->t.wan) || weir_meas_recent(cmp_m, &f->t.lan) ?
		(uint64_t)f->t.wan.srtt_us + f->t.lan.srtt_us : 0;
}

static int
cmp_rtt(const void *x, const void *y)
{
	uint64_t a = rtt_key(x), b = rtt_key(y);

	return a > b ? -1 : a < b;
}

static int
cmp_retrans(const void *x, const void *y)
{
	uint64_t a = weir_meas_retrans_bytes(x), b = weir_meas_retrans_bytes(y);

	return a > b ? -1 : a < b;
}

static int
cmp_sub(const void *x, const void *y)
{
	const struct weir_meas_flow *a = x, *b = y;

	return a->sub < b->sub ? -1 : a->sub > b->sub;
}

/* One subscriber's figures: a group's, and the median round trip through
 * weir (its flows' LAN side plus WAN side medians) it is ranked by. */
struct sub_row {
	json_t *o;
	uint32_t sub;
	uint64_t rtt_us, retrans;
	double ratio;
};

/* A row per subscriber with a measured flow (m->f sorted by subscriber;
 * rows: m->n + 1 of them). The number of rows. */
static size_t
sub_rows(const struct weir_policy *p, struct weir_meas *m, uint32_t *lan, uint32_t *wan,
	 struct sub_row *rows)
{
	size_t n_rows = 0;

	qsort(m->f, m->n, sizeof(*m->f), cmp_sub);
	for (size_t i = 0; i < m->n && m->f[i].sub != WEIR_SUB_NONE;) {
		struct group g = { .lan = lan, .wan = wan };
		const struct weir_sub *u = weir_subs_get(p->subs, m->f[i].sub);
		struct sub_row *row = &rows[n_rows++];
		size_t j = i;

		for (; j < m->n && m->f[j].sub == m->f[i].sub; j++)
			group_add(&g, m, &m->f[j]);
		row->sub = m->f[i].sub;
		row->ratio = group_ratio(&g);
		row->retrans = g.retrans_bytes[0] + g.retrans_bytes[1];
		row->o = group_json(&g);        /* sorts g.lan and g.wan */
		row->rtt_us = (g.n_lan ? lan[(g.n_lan - 1) / 2] : 0) +
			      (g.n_wan ? wan[(g.n_wan - 1) / 2] : 0);
		json_object_set_new(row->o, "id", json_string(u->id));
		json_object_set_new(row->o, "name", json_string(u->name));
		json_object_set_new(row->o, "rtt_ms", json_ms((uint32_t)row->rtt_us,
							      g.n_lan + g.n_wan != 0));
		i = j;
	}
	return n_rows;
}

static int
cmp_sub_rtt(const void *x, const void *y)
{
	const struct sub_row *a = x, *b = y;

	return a->rtt_us > b->rtt_us ? -1 : a->rtt_us < b->rtt_us;
}

static int
cmp_sub_ratio(const void *x, const void *y)
{
	const struct sub_row *a = x, *b = y;

	if (a->ratio != b->ratio)
		return a->ratio > b->ratio ? -1 : 1;
	return a->retrans > b->retrans ? -1 : a->retrans < b->retrans;
}

/* The top worst of rows by cmp, those with a key (have) only: new
 * references to the rows' objects. */
static json_t *
sub_worst(struct sub_row *rows, size_t n, uint64_t top, int (*cmp)(const void *, const void *),
	  bool by_rtt)
{
	json_t *list = json_array();

	qsort(rows, n, sizeof(*rows), cmp);
	for (size_t i = 0; i < n && i < top; i++) {
		if (by_rtt ? rows[i].rtt_us == 0 : rows[i].retrans == 0)
			break;
		json_array_append(list, rows[i].o);
	}
	return list;
}

/* GET /api/v1/measure?by=subscriber */
static void
measure_subs(struct weir_app *a, uint64_t top, struct rest_reply *r)
{
	const struct weir_policy *p = a->cfg.policy;
	struct weir_meas m;
	uint32_t *lan, *wan;
	struct sub_row *rows;
	size_t n;
	json_t *worst_rtt, *worst_retrans;

	if (p == NULL || p->subs == NULL) {
		rest_reply_error(r, MHD_HTTP_NOT_FOUND, "no subscribers: the config has no 'subscribers'");
		return;
	}
	if (measure_get(a, &m, &lan, &wan, r) < 0)
		return;
	rows = calloc(m.n + 1, sizeof(*rows));
	if (rows == NULL) {
		free(lan), free(wan), weir_meas_free(&m);
		rest_reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return;
	}
	n = sub_rows(p, &m, lan, wan, rows);
	worst_rtt = sub_worst(rows, n, top, cmp_sub_rtt, true);
	worst_retrans = sub_worst(rows, n, top, cmp_sub_ratio, false);
	for (size_t i = 0; i < n; i++)
		json_decref(rows[i].o);
	rest_reply_json(r, json_pack("{s:b, s:f, s:s, s:i, s:i, s:o, s:o}",
		"enabled", a->cfg.tcp_measure, "window_s", (double)m.window_us / 1e6,
		"by", "subscriber", "tcp_flows", (int)m.n, "subscribers", (int)n,
		"worst_rtt", worst_rtt, "worst_retrans", worst_retrans));
	free(rows), free(lan), free(wan);
	weir_meas_free(&m);
}

json_t *
weir_meas_subs_json(struct weir_app *a)
{
	const struct weir_policy *p = a->cfg.policy;
	struct weir_meas m;
	uint32_t *lan = NULL, *wan = NULL;
	struct sub_row *rows = NULL;
	json_t *o = NULL;

	if (p == NULL || p->subs == NULL || weir_meas_collect(a, &m) != 0)
		return NULL;
	lan = malloc((m.n + 1) * sizeof(*lan));
	wan = malloc((m.n + 1) * sizeof(*wan));
	rows = calloc(m.n + 1, sizeof(*rows));
	if (lan != NULL && wan != NULL && rows != NULL) {
		size_t n = sub_rows(p, &m, lan, wan, rows);

		o = json_object();
		for (size_t i = 0; i < n; i++)
			json_object_set_new(o, weir_subs_get(p->subs, rows[i].sub)->id, rows[i].o);
	}
	free(rows), free(lan), free(wan);
	weir_meas_free(&m);
	return o;
}

void
h_measure(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	const struct weir_policy *p = a->cfg.policy;
	const char *v;
	uint64_t top = TOP_DEFAULT;
	struct weir_meas m;
	uint32_t *lan, *wan;
	json_t *classes, *worst_rtt, *worst_retrans;
	struct weir_tcp_totals tot = { 0 };

	(void)rq;
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "top");
	if (v != NULL && !rest_parse_uint(v, TOP_MAX, &top)) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "'top' must be an integer from 0 to %d", TOP_MAX);
		return;
	}
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "by");
	if (v != NULL && strcmp(v, "subscriber") == 0) {
		measure_subs(a, top, r);
		return;
	}
	if (v != NULL && strcmp(v, "class") != 0) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "'by' must be class or subscriber");
		return;
	}
	if (measure_get(a, &m, &lan, &wan, r) < 0)
		return;
	classes = json_object();
	for (int d = 0; p != NULL && d < WEIR_POLICY_DIRS; d++) {
		json_t *list = json_object();

		for (uint16_t cls = 0; cls < p->tree[d].n_classes; cls++) {
			struct group g = { .lan = lan, .wan = wan };

			if (!p->tree[d].classes[cls].is_leaf)
				continue;
			for (size_t i = 0; i < m.n; i++)
				if (m.f[i].leaf[d] == cls)
					group_add(&g, &m, &m.f[i]);
			json_object_set_new(list, p->tree[d].classes[cls].name, group_json(&g));
		}
		json_object_set_new(classes, dir_name[d], list);
	}
	worst_rtt = json_array();
	worst_retrans = json_array();
	cmp_m = &m;
	qsort(m.f, m.n, sizeof(*m.f), cmp_rtt);
	for (size_t i = 0; i < m.n && i < top && rtt_key(&m.f[i]) != 0; i++)
		json_array_append_new(worst_rtt, worst_json(&m.f[i]));
	qsort(m.f, m.n, sizeof(*m.f), cmp_retrans);
	for (size_t i = 0; i < m.n && i < top && weir_meas_retrans_bytes(&m.f[i]) != 0; i++)
		json_array_append_new(worst_retrans, worst_json(&m.f[i]));
	for (unsigned int i = 0; i < a->n_workers; i++) {
		struct weir_tcp_totals t;

		weir_worker_tcp_totals(a->workers[i], &t);
		tot.segs += t.segs, tot.samples += t.samples, tot.retrans_segs += t.retrans_segs;
		tot.ooo += t.ooo, tot.dupacks += t.dupacks;
	}
	rest_reply_json(r, json_pack("{s:b, s:f, s:i, s:{s:I, s:I, s:I, s:I, s:I}, s:o, s:o, s:o}",
		"enabled", a->cfg.tcp_measure, "window_s", (double)m.window_us / 1e6,
		"tcp_flows", (int)m.n,
		"totals", "segs", (json_int_t)tot.segs, "samples", (json_int_t)tot.samples,
		"retrans_segs", (json_int_t)tot.retrans_segs, "ooo", (json_int_t)tot.ooo,
		"dupacks", (json_int_t)tot.dupacks,
		"classes", classes, "worst_rtt", worst_rtt, "worst_retrans", worst_retrans));
	free(lan), free(wan);
	weir_meas_free(&m);
}
