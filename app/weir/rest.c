/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the management REST API and /metrics on libmicrohttpd.
 *
 * The daemon runs in MHD's "external select" mode with epoll: the
 * management loop waits on its epoll fd and calls MHD_run, which runs the
 * handlers below on the management lcore. A slow or stalled client only
 * holds a connection slot (bounded, and timed out), never the loop.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_log.h>

#include "rest.h"
#include "compile_job.h"
#include "http_limits.h"
#include "ipsec.h"
#include "stats.h"
#include "metrics.h"
#include "policy.h"
#include "policy_values.h"
#include "reload.h"
#include "text.h"
#include "worker_view.h"

#define REST_BODY_MAX (64 * 1024)       /* request bodies above this get 413 */
/* Against connection floods (issue 16.2): a client may hold few slots,
 * must send its headers quickly, and weirctl on the box always finds a
 * slot. A slot costs a socket and a small struct, so there are many. */
#define REST_CONN_LIMIT 256             /* connections open at once */
#define REST_CONN_PER_IP 16             /* of them from one address but loopback */
#define REST_CONN_RESERVED 32           /* of them only for 127.0.0.1 and ::1 */
/* MHD's own limit is higher by this: connections shut to make room
 * (conn_evict) still count until MHD has seen their end. */
#define REST_CONN_SPARE 16
#define REST_HEADER_TIMEOUT_MS 2000     /* accept (or the last reply) to whole headers */
#define REST_REQUEST_TIMEOUT_MS 30000   /* whole headers to the reply (the body) */
#define REST_CONN_TIMEOUT_S 10          /* idle or stalled connections are closed */
#define REST_SCRIPT_MAX (1024 * 1024)   /* largest policy script GET policy returns */
#define REST_UPLOAD_MAX (1024 * 1024)   /* PUT /api/v1/policy: a script, not a JSON document */
#define FLOWS_LIMIT_DEFAULT 100
#define FLOWS_LIMIT_MAX 1000

/* docs/openapi.json, embedded at build time (embed.py). */
extern const char weir_openapi_json[];
extern const size_t weir_openapi_json_len;

/* One open connection, for the deadlines MHD has no option for: its idle
 * timeout restarts at every byte, so a client sending one byte a second
 * would hold its slot for ever. */
struct conn {
	struct conn *next, **pprev;
	int fd;
	struct sockaddr_storage peer;
	uint64_t deadline_ms;           /* CLOCK_MONOTONIC */
	uint64_t waiting_since_ms;      /* accept, or the last reply: waiting for a request */
	bool in_request;                /* its request head is in; not waiting */
	bool watched;                   /* in head_ep: its head is peeked at */
	bool head_done;                 /* the whole head was peeked and passed */
	bool refused;                   /* weir answered a refusal of its head itself */
	size_t head_seen;               /* bytes of the head peeked so far */
	bool shut;                      /* shut down; MHD closes it at its next read */
	bool nul_in_url;                /* a %00 in the URL: refused, not truncated */
};

struct weir_rest {
	struct MHD_Daemon *d;
	struct conn *conns;
	uint64_t log_second, log_suppressed;   /* MHD's log, rate-limited */
	unsigned int log_count;
	int epfd;                       /* MHD's epoll fd, waited on by the management loop */
	int head_ep;                    /* connections whose request head is still coming */
	char peek[WEIR_HTTP_HEAD_MAX + 1];
	char *prev;                     /* the script text before the last upload (rollback) */
	size_t prev_len;
	json_t *baseline;               /* the stats at the last counters reset; NULL = none */
	uint64_t resets;
	char *tls_cert, *tls_key;       /* PEM text MHD reads while it runs; NULL = plain HTTP */
};

/* What a handler answers: a JSON document or a text body. */
struct reply {
	unsigned int status;
	json_t *json;                   /* owned; or */
	char *text;                     /* malloc'ed, with text_len and ctype */
	size_t text_len;
	const char *ctype;
	const char *persistent;         /* static body (the OpenAPI document) */
	size_t persistent_len;
};

/* One request as MHD hands it over in several calls (headers, body
 * chunks, end). */
struct req {
	const struct route *route;
	char *body;
	size_t len;
	bool too_big;
	char allow[32];                 /* the Allow header of a 405 */
	char sub[128];                  /* a prefix route: the URL after its path */
	/* A policy switch under way (compile_job.h): the connection is
	 * suspended until it ends and `answer` is made, then answered. */
	struct MHD_Connection *conn;
	bool suspended, answered;
	struct reply answer;
	struct install *inst;           /* PUT, rollback: what script_install_end needs */
};

typedef void (*handler_fn)(struct weir_app *a, struct MHD_Connection *c, struct req *rq,
			   struct reply *r);

static void req_suspend(struct MHD_Connection *c, struct req *rq);
static void req_resume(struct req *rq);

struct route {
	const char *path;
	const char *method;             /* GET routes answer HEAD too */
	handler_fn fn;
	const char *const *query;       /* query parameters accepted (NULL: none) */
	size_t body_max;                /* 0: REST_BODY_MAX */
	bool prefix;                    /* path is a prefix: .../{direction}/{name} */
};

static size_t
body_max(const struct req *rq)
{
	return rq->route != NULL && rq->route->body_max != 0 ? rq->route->body_max : REST_BODY_MAX;
}

static void
reply_error(struct reply *r, unsigned int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The length of the well-formed UTF-8 sequence (RFC 3629) at s, 0 if it is
 * not one. Stops at the first bad byte, so never reads past a NUL. */
static size_t
utf8_seq(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 1;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 2;
		lo = s[0] == 0xe0 ? 0xa0 : 0x80;        /* overlong */
		hi = s[0] == 0xed ? 0x9f : 0xbf;        /* surrogates */
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 3;
		lo = s[0] == 0xf0 ? 0x90 : 0x80;
		hi = s[0] == 0xf4 ? 0x8f : 0xbf;        /* above U+10FFFF */
	} else {
		return 0;
	}
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i <= n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n + 1;
}

/* in as valid UTF-8 for JSON: each byte of a malformed sequence becomes
 * the text \xHH, and a sequence is never cut (jansson refuses invalid
 * UTF-8, which left error bodies empty: a URL's %ff, a script's bytes). */
static void
utf8_clean(const char *in, char *out, size_t outlen)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0, n;

	while (*s != '\0') {
		n = utf8_seq(s);
		if (n == 0) {
			if (o + 4 >= outlen)
				break;
			snprintf(out + o, outlen - o, "\\x%02x", *s++);
			o += 4;
			continue;
		}
		if (o + n >= outlen)
			break;
		memcpy(out + o, s, n);
		o += n;
		s += n;
	}
	out[o] = '\0';
}

static void
reply_error(struct reply *r, unsigned int status, const char *fmt, ...)
{
	char msg[1024], clean[sizeof(msg) * 4];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	utf8_clean(msg, clean, sizeof(clean));
	json_decref(r->json);
	r->status = status;
	r->json = json_pack("{s:{s:i, s:s}}", "error", "code", (int)status, "message", clean);
}

static void
reply_json(struct reply *r, json_t *j)
{
	r->status = j != NULL ? MHD_HTTP_OK : MHD_HTTP_INTERNAL_SERVER_ERROR;
	r->json = j;
	if (j == NULL)
		reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
}

static const char *const role_name[WEIR_PORT__COUNT] = { "lan", "wan" };
static const char *const dir_name[WEIR_POLICY_DIRS] = { "outbound", "inbound" };

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
static json_t *
stats_since_reset(struct weir_app *a)
{
	json_t *s = weir_stats_json(a);

	if (s != NULL && a->rest->baseline != NULL)
		subtract(s, a->rest->baseline);
	return s;
}

static void
h_counters_reset(struct weir_app *a, struct MHD_Connection *c, struct req *rq, struct reply *r)
{
	json_t *s;

	if (rq->len != 0) {
		reply_error(r, MHD_HTTP_BAD_REQUEST, "reset takes no body");
		return;
	}
	s = weir_stats_json(a);
	if (s == NULL) {
		reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return;
	}
	json_decref(a->rest->baseline);
	a->rest->baseline = s;
	a->rest->resets++;
	reply_json(r, json_pack("{s:O, s:I}", "uptime_s", json_object_get(s, "uptime_s"),
				"resets", (json_int_t)a->rest->resets));
}

/* ---- GET /api/v1/status ---- */

static void
h_status(struct weir_app *a, struct MHD_Connection *c, struct req *rq, struct reply *r)
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
	reply_json(r, o);
}

/* ---- GET /api/v1/classes ---- */

static void
h_classes(struct weir_app *a, struct MHD_Connection *c, struct req *rq, struct reply *r)
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
	reply_json(r, o);
}

/* ---- GET /api/v1/counters ---- */

static void
h_counters(struct weir_app *a, struct MHD_Connection *c, struct req *rq, struct reply *r)
{
	json_t *s = stats_since_reset(a);
	const json_t *b = a->rest->baseline;

	/* Which counters these are: since the start, or since the reset. */
	if (s != NULL)
		json_object_set_new(s, "since_reset_s", b == NULL ? json_null() : json_real(
			json_real_value(json_object_get(s, "uptime_s")) -
			json_real_value(json_object_get(b, "uptime_s"))));
	reply_json(r, s);
}

/* ---- GET /api/v1/ipsec ---- */

/* The SAs and tunnels now, from the start (not since a counters reset). */
static void
h_ipsec(struct weir_app *a, struct MHD_Connection *c, struct req *rq, struct reply *r)
{
	reply_json(r, weir_ipsec_json(a));
}

/* ---- GET /api/v1/flows ---- */

struct flow_filter {
	int cls[WEIR_POLICY_DIRS];      /* class index per direction; -1 = that tree lacks it */
	bool by_class;
	bool by_host;
	uint8_t family;
	uint8_t host[16];
	unsigned int host_bits;
	int port;                       /* -1 = any */
	int proto;                      /* -1 = any */
};

struct flow_walk {
	struct weir_app *a;
	const struct weir_worker *w;
	unsigned int worker;
	const struct flow_filter *flt;
	uint64_t now, hz;
	uint64_t matched;
	uint64_t offset, limit;
	json_t *list;
};

static const char *
proto_name(uint8_t proto)
{
	switch (proto) {
	case IPPROTO_TCP: return "tcp";
	case IPPROTO_UDP: return "udp";
	case IPPROTO_ICMP: return "icmp";
	case IPPROTO_ICMPV6: return "icmpv6";
	case IPPROTO_SCTP: return "sctp";
	default: return NULL;
	}
}

static bool
prefix_match(const uint8_t *addr, const uint8_t *pfx, unsigned int bits)
{
	unsigned int whole = bits / 8, rest = bits % 8;

	if (memcmp(addr, pfx, whole) != 0)
		return false;
	return rest == 0 || ((addr[whole] ^ pfx[whole]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

/* The flow's class in direction d, if it was classified under the policy
 * in force and its worker runs that policy; -1 otherwise. */
static int
flow_class(const struct weir_app *a, const struct weir_worker *w, uint32_t slot,
	   const struct weir_flow *f, int d)
{
	struct weir_flow_view v;

	weir_worker_flow_view(w, a->cfg.policy, slot, f, d, &v);
	return v.leaf;
}

static json_t *
endpoint_json(const struct weir_flow_key *k, bool hi, uint16_t port)
{
	char buf[INET6_ADDRSTRLEN];

	inet_ntop(k->family == 6 ? AF_INET6 : AF_INET, hi ? k->addr_hi : k->addr_lo, buf,
		  sizeof(buf));
	return json_pack("{s:s, s:i}", "addr", buf, "port", (int)port);
}

static json_t *
flow_dir_json(struct flow_walk *fw, const struct weir_flow *f, uint32_t slot, int d)
{
	const struct weir_policy *p = fw->a->cfg.policy;
	struct weir_flow_view v;
	json_t *o = json_pack("{s:I, s:I}", "bytes", (json_int_t)f->bytes[d],
			      "pkts", (json_int_t)f->pkts[d]);

	/* Cheap per-slot reads of the worker's queues: a snapshot. A worker
	 * that has not taken the policy in force yet shows no class. */
	weir_worker_flow_view(fw->w, p, slot, f, d, &v);
	json_object_set_new(o, "class", v.leaf >= 0 ? json_string(p->tree[d].classes[v.leaf].name)
			    : json_null());
	json_object_set_new(o, "mode", v.leaf >= 0 ? json_string(weir_shape_mode_name(
			    p->targets[v.target].mode[d])) : json_null());
	if (v.shaped)
		json_object_set_new(o, "queued_pkts", json_integer(v.queued_pkts));
	if (v.postack) {
		json_object_set_new(o, "acks_held", json_integer(v.acks_held));
		json_object_set_new(o, "rtt_ms", v.rtt_ticks ? json_real((double)v.rtt_ticks * 1e3 /
				    (double)fw->hz) : json_null());
	}
	return o;
}

/* One flow (a copy: weir_flow_read_next) of worker fw->worker's slot:
 * 1 if it matched the filters and was listed, 0 if not listed. */
static int
flow_visit(struct flow_walk *fw, const struct weir_flow *f, const struct weir_flow_key *k,
	   uint32_t slot)
{
	const struct flow_filter *flt = fw->flt;
	bool lan_hi = (f->shape & WEIR_FSH_LAN_HI) != 0;
	const char *pn;
	double age, idle;
	json_t *o;

	if (flt->proto >= 0 && k->proto != flt->proto)
		return 0;
	if (flt->port >= 0 && k->port_lo != flt->port && k->port_hi != flt->port)
		return 0;
	if (flt->by_host && (k->family != flt->family ||
			     (!prefix_match(k->addr_lo, flt->host, flt->host_bits) &&
			      !prefix_match(k->addr_hi, flt->host, flt->host_bits))))
		return 0;
	if (flt->by_class) {
		bool hit = false;

		for (int d = 0; d < WEIR_POLICY_DIRS; d++)
			hit |= flt->cls[d] >= 0 && flow_class(fw->a, fw->w, slot, f, d) == flt->cls[d];
		if (!hit)
			return 0;
	}
	if (fw->matched++ < fw->offset || json_array_size(fw->list) >= fw->limit)
		return 0;       /* counted for "total", not listed */
	pn = proto_name(k->proto);
	age = fw->now > f->first_tsc ? (double)(fw->now - f->first_tsc) / (double)fw->hz : 0.0;
	idle = fw->now > f->last_tsc ? (double)(fw->now - f->last_tsc) / (double)fw->hz : 0.0;
	o = json_pack("{s:i, s:i, s:i, s:o, s:i, s:i, s:o, s:o, s:s, s:s, s:f, s:f, s:o, s:o}",
		"worker", (int)fw->worker, "slot", (int)slot, "family", (int)k->family,
		"proto", pn != NULL ? json_string(pn) : json_integer(k->proto),
		"proto_num", (int)k->proto, "vlan", (int)(k->vlan & WEIR_FK_VLAN_ID),
		"lan", endpoint_json(k, lan_hi, lan_hi ? k->port_hi : k->port_lo),
		"wan", endpoint_json(k, !lan_hi, lan_hi ? k->port_lo : k->port_hi),
		"state", weir_flow_state_name(f->state),
		"opened_by", f->shape & WEIR_FSH_INIT_IN ? "wan" : "lan",
		"age_s", age, "idle_s", idle,
		"out", flow_dir_json(fw, f, slot, WEIR_DIR_OUT),
		"in", flow_dir_json(fw, f, slot, WEIR_DIR_IN));
	/* An IPsec SA: its "ports" are the SPI's halves; name the SA. */
	if (k->vlan & WEIR_FK_SA)
		json_object_set_new(o, "spi", json_integer((json_int_t)weir_flow_key_spi(k)));
	json_array_append_new(fw->list, o);
	return 1;
}

static bool
parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	char *end;

	if (s == NULL || *s < '0' || *s > '9')
		return false;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno == 0 && *end == '\0' && *out <= max;
}

/* 0, or -1 with the 400 reply made. */
static int
flows_filter(struct weir_app *a, struct MHD_Connection *c, struct flow_filter *flt,
	     uint64_t *limit, uint64_t *offset, bool *by_cursor, uint64_t *cursor, struct reply *r)
{
	const char *v;
	uint64_t u;

	memset(flt, 0, sizeof(*flt));
	flt->port = flt->proto = -1;
	*limit = FLOWS_LIMIT_DEFAULT;
	*offset = 0;
	*cursor = 0;
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "cursor");
	*by_cursor = v != NULL;
	if (v != NULL && !parse_uint(v, UINT64_MAX, cursor)) {
		reply_error(r, MHD_HTTP_BAD_REQUEST, "'cursor' must be 0 or a 'next' of an earlier "
			    "listing");
		return -1;
	}
	/* A well-formed position that is in no table (another weir's, or
	 * made up): 422, as the schema cannot say which positions exist. */
	if (v != NULL && ((*cursor >> 32) > a->n_workers ||
			  ((*cursor >> 32) == a->n_workers && (uint32_t)*cursor != 0) ||
			  ((*cursor >> 32) < a->n_workers &&
			   (uint32_t)*cursor > weir_flow_table_capacity(a->flows[*cursor >> 32])))) {
		reply_error(r, MHD_HTTP_UNPROCESSABLE_CONTENT, "'cursor' %s is no position in the "
			    "flow tables: it must be 0 or a 'next' of an earlier listing", v);
		return -1;
	}
	/* With a cursor, offset skips that many matching flows past it, as
	 * it does from the start without one. */
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
	if (v != NULL && (!parse_uint(v, FLOWS_LIMIT_MAX, limit) || *limit == 0)) {
		reply_error(r, MHD_HTTP_BAD_REQUEST, "'limit' must be an integer from 1 to %d",
			    FLOWS_LIMIT_MAX);
		return -1;
	}
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset");
	if (v != NULL && !parse_uint(v, UINT32_MAX, offset)) {
		reply_error(r, MHD_HTTP_BAD_REQUEST, "'offset' must be a non-negative integer");
		return -1;
	}
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "port");
	if (v != NULL) {
		if (!parse_uint(v, 65535, &u)) {
			reply_error(r, MHD_HTTP_BAD_REQUEST, "'port' must be an integer from 0 to 65535");
			return -1;
		}
		flt->port = (int)u;
	}
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "proto");
	if (v != NULL) {
		static const struct { const char *n; int p; } names[] = {
			{ "tcp", IPPROTO_TCP }, { "udp", IPPROTO_UDP }, { "icmp", IPPROTO_ICMP },
			{ "icmpv6", IPPROTO_ICMPV6 }, { "sctp", IPPROTO_SCTP },
		};

		for (size_t i = 0; i < RTE_DIM(names); i++)
			if (strcasecmp(v, names[i].n) == 0)
				flt->proto = names[i].p;
		if (flt->proto < 0) {
			if (!parse_uint(v, 255, &u)) {
				reply_error(r, MHD_HTTP_BAD_REQUEST, "'proto' must be tcp, udp, icmp, "
					    "icmpv6, sctp or a protocol number from 0 to 255");
				return -1;
			}
			flt->proto = (int)u;
		}
	}
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "host");
	if (v != NULL) {
		char addr[INET6_ADDRSTRLEN + 1];
		const char *slash = strchr(v, '/');
		size_t alen = slash != NULL ? (size_t)(slash - v) : strlen(v);
		unsigned int maxbits;

		if (alen >= sizeof(addr))
			goto bad_host;
		memcpy(addr, v, alen);
		addr[alen] = '\0';
		memset(flt->host, 0, sizeof(flt->host));
		if (inet_pton(AF_INET, addr, flt->host) == 1)
			flt->family = 4, maxbits = 32;
		else if (inet_pton(AF_INET6, addr, flt->host) == 1)
			flt->family = 6, maxbits = 128;
		else
			goto bad_host;
		flt->host_bits = maxbits;
		if (slash != NULL) {
			if (!parse_uint(slash + 1, maxbits, &u))
				goto bad_host;
			flt->host_bits = (unsigned int)u;
		}
		flt->by_host = true;
	}
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "class");
	if (v != NULL) {
		bool found = false;

		for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
			flt->cls[d] = a->cfg.policy ? weir_policy_class_find(a->cfg.policy, d, v) : -1;
			found |= flt->cls[d] >= 0;
		}
		/* A class is a resource: one the policy does not have is not
		 * found, as PATCH .../classes/{direction}/{name} says. */
		if (!found) {
			reply_error(r, MHD_HTTP_NOT_FOUND, "no class '%s' in the policy in force", v);
			return -1;
		}
		flt->by_class = true;
	}
	return 0;
bad_host:
	reply_error(r, MHD_HTTP_BAD_REQUEST, "'host' must be an IPv4 or IPv6 address, "
		    "optionally with a /prefix length");
	return -1;
}

/*
 * Two ways to page. limit/offset: every request walks every table to count
 * "total", so paging through n flows costs n/limit whole walks. cursor:
 * start at a position (0, or the "next" of the page before) and walk
 * only until `limit` flows matched; paging through everything is one
 * walk in all, and "total" is not counted. A position is worker << 32 |
 * slot; slots are walked in order, so a flow that lives through the whole
 * paging is listed once. Entries are read as copies (weir_flow_read_next:
 * the torn-entry rule is there).
 */
static void
h_flows(struct weir_app *a, struct MHD_Connection *c, struct req *rq, struct reply *r)
{
	struct flow_filter flt;
	struct flow_walk fw = { .a = a, .flt = &flt, .now = rte_rdtsc(), .hz = rte_get_tsc_hz() };
	bool by_cursor, more = false;
	uint64_t cursor, next = 0;
	unsigned int i;
	uint32_t s0;

	if (flows_filter(a, c, &flt, &fw.limit, &fw.offset, &by_cursor, &cursor, r) < 0)
		return;
	fw.list = json_array();
	i = (unsigned int)(cursor >> 32);
	s0 = (uint32_t)cursor;
	for (; i < a->n_workers; i++, s0 = 0) {
		const uint32_t cap = weir_flow_table_capacity(a->flows[i]);
		struct weir_flow f;
		struct weir_flow_key k;

		fw.w = a->workers[i];
		fw.worker = i;
		for (uint32_t slot = s0; slot < cap; slot++) {
			/* A full cursor page stops here and says where the next
			 * one starts; limit/offset walk on to count "total". */
			if (by_cursor && json_array_size(fw.list) >= fw.limit) {
				next = (uint64_t)i << 32 | slot;
				more = true;
				goto out;
			}
			slot = weir_flow_read_next(a->flows[i], slot, &f, &k);
			if (slot >= cap)
				break;
			flow_visit(&fw, &f, &k, slot);
		}
	}
out:
	if (by_cursor) {
		reply_json(r, json_pack("{s:I, s:I, s:o, s:o}", "cursor", (json_int_t)cursor,
					"limit", (json_int_t)fw.limit,
					"next", more ? json_integer((json_int_t)next) : json_null(),
					"flows", fw.list));
		return;
	}
	reply_json(r, json_pack("{s:I, s:I, s:I, s:o}", "total", (json_int_t)fw.matched,
				"offset", (json_int_t)fw.offset, "limit", (json_int_t)fw.limit,
				"flows", fw.list));
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

static void
h_policy(struct weir_app *a, struct MHD_Connection *c, struct req *rq, struct reply *r)
{
	bool script = a->cfg.policy_script[0] != '\0';

	reply_json(r, json_pack("{s:I, s:s, s:o, s:o, s:o, s:I, s:I, s:o}",
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
static int
body_object(struct MHD_Connection *c, struct req *rq, struct reply *r, json_t **out)
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
		reply_error(r, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
			    "the body must be application/json");
		return -1;
	}
	j = json_loadb(rq->body, rq->len, JSON_REJECT_DUPLICATES, &jerr);
	if (j == NULL) {
		reply_error(r, MHD_HTTP_BAD_REQUEST, "malformed JSON at line %d, column %d: %s",
			    jerr.line, jerr.column, jerr.text);
		return -1;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		reply_error(r, MHD_HTTP_BAD_REQUEST, "the body must be a JSON object");
		return -1;
	}
	*out = j;
	return 0;
}

static void reload_reply(struct weir_app *a, int rc, bool dry_run, const char *err,
			 const char *token_err, struct reply *r);

/* A policy switch at a time (compile_job.h): the second is refused while
 * the first is under way, not queued, since it would replace the first
 * once both were done. true: r holds the refusal. */
static bool
switch_busy(struct weir_app *a, struct reply *r)
{
	if (!weir_compile_job_busy(a))
		return false;
	reply_error(r, MHD_HTTP_CONFLICT, "a policy switch is under way (an upload, reload or "
		    "rollback): try again when it ends");
	json_object_set_new(json_object_get(r->json, "error"), "epoch",
			    json_integer(a->cfg.policy ? a->cfg.policy->epoch : 0));
	return true;
}

/* The reload a request started has ended: answer it. */
static void
reload_done(struct weir_app *a, int rc, void *arg)
{
	struct req *rq = arg;

	reload_reply(a, rc, false, a->reload_error, a->token_error, &rq->answer);
	req_resume(rq);
}

static void
h_policy_reload(struct weir_app *a, struct MHD_Connection *c, struct req *rq, struct reply *r)
{
	char err[sizeof(a->reload_error)], token_err[sizeof(a->token_error)] = "";
	bool dry_run = false;
	const char *key;
	json_t *body, *v;
	int rc;

	if (body_object(c, rq, r, &body) < 0)
		return;
	json_object_foreach(body, key, v) {
		if (strcmp(key, "dry_run") != 0) {
			reply_error(r, MHD_HTTP_BAD_REQUEST, "unknown field '%s'", key);
			json_decref(body);
			return;
		}
		if (!json_is_boolean(v)) {
			reply_error(r, MHD_HTTP_BAD_REQUEST, "'dry_run' must be true or false");
			json_decref(body);
			return;
		}
		dry_run = json_is_true(v);
	}
	json_decref(body);
	if (dry_run) {
		rc = reload_check(a, err, sizeof(err), token_err, sizeof(token_err));
	} else {
		if (switch_busy(a, r))
			return;
		rc = weir_mgmt_reload_start(a, reload_done, rq);
		if (rc > 0) {
			req_suspend(c, rq);
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
	     struct reply *r)
{
	if (rc != 0) {
		reply_error(r, MHD_HTTP_UNPROCESSABLE_CONTENT, "%s", err);
		/* Which policy stayed in force. */
		json_object_set_new(json_object_get(r->json, "error"), "epoch",
				    json_integer(a->cfg.policy ? a->cfg.policy->epoch : 0));
		return;
	}
	/* The policy reloaded; a token file that could not be used is said
	 * here (the token in force stays) rather than failing the reload. */
	reply_json(r, json_pack("{s:I, s:b, s:I}",
		"epoch", (json_int_t)(a->cfg.policy ? a->cfg.policy->epoch : 0),
		"dry_run", dry_run, "reloads", (json_int_t)a->reloads));
	if (r->json != NULL && token_err[0] != '\0')
		json_object_set_new(r->json, "token_error", json_string(token_err));
}

/* ---- PUT /api/v1/policy, POST /api/v1/policy/rollback ---- */

/* The whole file, or NULL (missing, unreadable, or over REST_UPLOAD_MAX). */
static char *
file_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;

	if (f == NULL)
		return NULL;
	buf = malloc(REST_UPLOAD_MAX + 1);
	*len = buf != NULL ? fread(buf, 1, REST_UPLOAD_MAX + 1, f) : 0;
	if (ferror(f) || *len > REST_UPLOAD_MAX) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* data in a new file next to path, with mode, flushed to disk: its name
 * is made by mkstemp, which creates it with O_EXCL, so no existing file or
 * planted symlink is ever written through. 0 with the name in out, or -1
 * with errno and nothing left behind. */
static int
temp_write(const char *path, const char *data, size_t len, mode_t mode, char *out,
	   size_t outlen)
{
	size_t off = 0;
	int fd, e;

	if (snprintf(out, outlen, "%s.upload.XXXXXX", path) >= (int)outlen) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = mkostemp(out, O_CLOEXEC);
	if (fd < 0)
		return -1;
	while (off < len) {
		ssize_t n = write(fd, data + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		off += (size_t)n;
	}
	if (fchmod(fd, mode) != 0 || fsync(fd) != 0)
		goto fail;
	if (close(fd) != 0) {
		e = errno;
		unlink(out);
		errno = e;
		return -1;
	}
	return 0;
fail:
	e = errno;
	close(fd);
	unlink(out);
	errno = e;
	return -1;
}

/* Make the renames in path's directory durable: without it a power cut
 * after the reply can bring the old name back. */
static void
dir_sync(const char *path)
{
	char d[sizeof(((struct weir_config *)0)->policy_script)];
	int fd;

	snprintf(d, sizeof(d), "%s", path);
	fd = open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) != 0)
		RTE_LOG(WARNING, USER1, "rest: cannot sync the directory of %s: %s\n", path,
			strerror(errno));
	if (fd >= 0)
		close(fd);
}

static unsigned int
write_status(int e)
{
	return e == ENOSPC || e == EDQUOT ? MHD_HTTP_INSUFFICIENT_STORAGE
					  : MHD_HTTP_INTERNAL_SERVER_ERROR;
}

/* Every "from" in s becomes "to" (the validation ran on a temp file; the
 * administrator knows the script by its own name). */
static void
str_replace_all(char *s, size_t size, const char *from, const char *to)
{
	char out[1024];
	size_t fl = strlen(from), o = 0;

	for (const char *p = s; *p != '\0' && o + 1 < sizeof(out);) {
		if (strncmp(p, from, fl) == 0) {
			o += (size_t)snprintf(out + o, sizeof(out) - o, "%s", to);
			p += fl;
		} else {
			out[o++] = *p++;
		}
	}
	o = RTE_MIN(o, RTE_MIN(sizeof(out), size) - 1);
	memcpy(s, out, o);
	s[o] = '\0';
}

static void
reply_policy_error(struct weir_app *a, struct reply *r, unsigned int status, const char *msg)
{
	reply_error(r, status, "%s", msg);
	json_object_set_new(json_object_get(r->json, "error"), "epoch",
			    json_integer(a->cfg.policy ? a->cfg.policy->epoch : 0));
}

/* An upload between the script's rename and the end of its switch. */
struct install {
	char path[sizeof(((struct weir_config *)0)->policy_script)];
	char keep[sizeof(((struct weir_config *)0)->policy_script) + 16];
	char prev[sizeof(((struct weir_config *)0)->policy_script) + 16];
	char *old;                      /* the replaced text: the next rollback's */
	size_t old_len;
	/* A rollback's text, taken from a->rest->prev: freed if the switch
	 * is done, put back if not. NULL for a PUT. */
	char *held;
};

static void install_done(struct weir_app *a, int rc, void *arg);
static int script_install_end(struct weir_app *a, struct install *in, int rc, struct reply *r);

/* Put text in place of the policy script and switch to it: checked in the
 * sandbox first (nothing changes if it fails), then renamed over the
 * script, then reloaded so the workers, the hooks' engine and the file
 * agree. The replaced file stays linked as PATH.keep until the switch is
 * done, so putting it back is a rename, which needs no disk space; it then
 * becomes PATH.prev, and its text the one rollback restores. 0, or -1 with
 * r made; or 1: the switch is under way, the connection is suspended and
 * the answer is made when it ends (script_install_end), which then also
 * frees or puts back held (a rollback's text; the caller's otherwise). */
static int
script_install(struct weir_app *a, struct MHD_Connection *c, struct req *rq, const char *text,
	       size_t len, char *held, struct reply *r)
{
	const char *path = a->cfg.policy_script;
	const struct weir_policy_lua_limits lim = weir_config_lua_limits(&a->cfg);
	char tmp[sizeof(a->cfg.policy_script) + 16];
	char err[sizeof(a->reload_error)];
	struct weir_lua *l;
	struct weir_policy *np = NULL;
	struct install *in;
	struct stat st;
	mode_t mode = 0644;
	int e, rc;

	in = calloc(1, sizeof(*in));
	if (in == NULL) {
		reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return -1;
	}
	snprintf(in->path, sizeof(in->path), "%s", path);
	snprintf(in->prev, sizeof(in->prev), "%s.prev", path);
	snprintf(in->keep, sizeof(in->keep), "%s.keep", path);
	if (stat(path, &st) == 0)
		mode = st.st_mode & 0777;
	if (temp_write(path, text, len, mode, tmp, sizeof(tmp)) != 0) {
		e = errno;
		reply_error(r, write_status(e), "cannot write the upload next to %s: %s", path,
			    strerror(e));
		free(in);
		return -1;
	}
	l = weir_lua_open(tmp, &lim, err, sizeof(err));
	if (l != NULL)
		np = weir_lua_compile(l, 0, err, sizeof(err));
	weir_policy_free(np);
	weir_lua_close(l);
	if (np == NULL) {
		unlink(tmp);
		str_replace_all(err, sizeof(err), tmp, path);
		reply_policy_error(a, r, MHD_HTTP_UNPROCESSABLE_CONTENT, err);
		free(in);
		return -1;
	}
	in->old = file_read(path, &in->old_len);
	unlink(in->keep);               /* left by a crash, or planted: never written */
	if (in->old == NULL || link(path, in->keep) != 0 || rename(tmp, path) != 0) {
		e = in->old == NULL ? EIO : errno;
		reply_error(r, write_status(e), "cannot replace %s: %s", path,
			    in->old == NULL ? "cannot read it" : strerror(e));
		unlink(tmp);
		unlink(in->keep);
		free(in->old);
		free(in);
		return -1;
	}
	dir_sync(path);
	rc = weir_mgmt_reload_start(a, install_done, rq);
	if (rc > 0) {
		in->held = held;
		rq->inst = in;
		req_suspend(c, rq);
		return 1;
	}
	return script_install_end(a, in, rc, r);
}

/* The switch of an upload ended (rc as weir_mgmt_reload): keep the new
 * file, or put the old one back; make r. Frees in. 0, or -1. */
static int
script_install_end(struct weir_app *a, struct install *in, int rc, struct reply *r)
{
	char both[sizeof(a->reload_error) + 2 * sizeof(in->keep) + 256];
	const char *path = in->path;
	int e;

	if (rc != 0) {
		/* The script is fine but the switch is not (a change that needs a
		 * restart, or the config file's own error): the old file goes back. */
		if (rename(in->keep, path) == 0) {
			dir_sync(path);
			reply_policy_error(a, r, MHD_HTTP_UNPROCESSABLE_CONTENT, a->reload_error);
		} else {
			/* The rejected script must not be what the next reload or
			 * restart runs: better no script (which fails loudly). */
			e = errno;
			unlink(path);
			dir_sync(path);
			RTE_LOG(ERR, USER1, "rest: cannot put %s back (%s); removed the rejected "
				"upload\n", path, strerror(e));
			if (snprintf(both, sizeof(both), "%s; and the previous script could not be "
				     "put back (%s: %s), so %s was removed: the running policy is "
				     "unchanged, but restore the file (from %s) before the next "
				     "reload or restart", a->reload_error, in->keep, strerror(e), path,
				     in->keep) >= (int)sizeof(both))
				RTE_LOG(ERR, USER1, "rest: %s\n", both);       /* cut in the reply */
			reply_policy_error(a, r, MHD_HTTP_INTERNAL_SERVER_ERROR, both);
		}
		free(in->old);
		if (in->held != NULL)
			a->rest->prev = in->held;
		free(in);
		return -1;
	}
	if (rename(in->keep, in->prev) != 0)
		RTE_LOG(WARNING, USER1, "rest: cannot write %s: %s\n", in->prev, strerror(errno));
	dir_sync(path);
	free(a->rest->prev);
	a->rest->prev = in->old;
	a->rest->prev_len = in->old_len;
	free(in->held);
	reply_json(r, json_pack("{s:I, s:o, s:o, s:I}",
		"epoch", (json_int_t)a->cfg.policy->epoch, "script", weir_json_text(path),
		"previous", weir_json_text(in->prev),
		"reloads", (json_int_t)a->reloads));
	free(in);
	return 0;
}

/* The switch of an upload or rollback a request started has ended. */
static void
install_done(struct weir_app *a, int rc, void *arg)
{
	struct req *rq = arg;
	struct install *in = rq->inst;

	rq->inst = NULL;
	script_install_end(a, in, rc, &rq->answer);
	req_resume(rq);
}

static bool
script_configured(struct weir_app *a, struct reply *r)
{
	if (a->cfg.policy_script[0] != '\0')
		return true;
	reply_error(r, MHD_HTTP_CONFLICT, "the policy comes from %s's shaping and rules, not a "
		    "script: uploads need policy = { script = \"FILE\"; } in the config", a->cfg.path);
	return false;
}

static bool
ctype_is(const char *ct, const char *want)
{
	size_t n = strlen(want);

	return ct != NULL && strncasecmp(ct, want, n) == 0 &&
	       (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

static void
h_policy_put(struct weir_app *a, struct MHD_Connection *c, struct req *rq, struct reply *r)
{
	const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						      MHD_HTTP_HEADER_CONTENT_TYPE);

	if (!script_configured(a, r))
		return;
	if (!ctype_is(ct, "text/x-lua") && !ctype_is(ct, "text/plain")) {
		reply_error(r, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
			    "the body must be a Lua script (text/x-lua or text/plain)");
		return;
	}
	if (rq->len == 0) {
		reply_error(r, MHD_HTTP_BAD_REQUEST, "the body must be a Lua script, not empty");
		return;
	}
	if (switch_busy(a, r))
		return;
	script_install(a, c, rq, rq->body, rq->len, NULL, r);
}

static void
h_policy_rollback(struct weir_app *a, struct MHD_Connection *c, struct req *rq,
		  struct reply *r)
{
	char *text = a->rest->prev;
	int rc;

	if (!script_configured(a, r))
		return;
	/* First: a rollback under way holds the text (prev is NULL). */
	if (switch_busy(a, r))
		return;
	if (text == NULL) {
		reply_error(r, MHD_HTTP_CONFLICT, "no previous script to roll back to: none was "
			    "uploaded since weir started");
		return;
	}
	if (rq->len != 0) {
		reply_error(r, MHD_HTTP_BAD_REQUEST, "rollback takes no body");
		return;
	}
	/* Held here while installing: a success makes the replaced text the
	 * next rollback's, so two rollbacks toggle. Under way (1), the
	 * install's end frees or puts it back. */
	a->rest->prev = NULL;
	rc = script_install(a, c, rq, text, a->rest->prev_len, text, r);
	if (rc == 0)
		free(text);
	else if (rc < 0)
		a->rest->prev = text;
}

/* ---- PATCH /api/v1/classes/{direction}/{name} ---- */

/* A rate field of the body: bit/s as an integer or "20mbit". 0, or -1 with
 * the reply made (400: wrong type or not a rate, 422: a value weir refuses). */
static int
class_rate(const char *key, const json_t *v, uint64_t *out, struct reply *r)
{
	struct weir_value val = { .type = WEIR_VALUE_OTHER };
	char err[256];
	int m;

	if (json_is_integer(v)) {
		val.type = WEIR_VALUE_INT;
		val.i = json_integer_value(v);
	} else if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) <= 1e12 &&
		   json_real_value(v) == (double)(json_int_t)json_real_value(v)) {
		/* 20000000.0 is the integer 20000000 to JSON Schema too. */
		val.type = WEIR_VALUE_INT;
		val.i = (json_int_t)json_real_value(v);
	} else if (json_is_string(v)) {
		val.type = WEIR_VALUE_STR;
		val.s = json_string_value(v);
	} else {
		reply_error(r, MHD_HTTP_BAD_REQUEST, "'%s' must be a rate: bit/s as an integer "
			    "or a string such as \"20mbit\"", key);
		return -1;
	}
	m = weir_value_rate(key, &val, out, err, sizeof(err));
	if (m != 0) {
		/* not a rate at all is malformed; out of range, a value refused */
		reply_error(r, m == -1 ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_UNPROCESSABLE_CONTENT, "%s",
			    err);
		return -1;
	}
	if (*out == 0) {
		reply_error(r, MHD_HTTP_UNPROCESSABLE_CONTENT, "'%s' must be above 0", key);
		return -1;
	}
	return 0;
}

/* The body's change: 0, or -1 with the 400/415/422 reply made. */
static int
class_change(struct MHD_Connection *c, struct req *rq, struct reply *r,
	     struct weir_policy_class_change *chg)
{
	const char *key;
	json_t *body, *v;
	char err[256];
	int rc = 0;

	memset(chg, 0, sizeof(*chg));
	chg->mode = -1;
	if (body_object(c, rq, r, &body) < 0)
		return -1;
	if (body == NULL || json_object_size(body) == 0) {
		reply_error(r, MHD_HTTP_BAD_REQUEST, "the body must be a JSON object with at least "
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
				reply_error(r, MHD_HTTP_BAD_REQUEST, "'mode' must be a string: "
					    "postack, pfq, fifo, tcr, postack-paced, ipabr or pep");
				rc = -1;
			} else if (weir_value_mode(json_string_value(v), &m, err, sizeof(err)) != 0) {
				reply_error(r, MHD_HTTP_UNPROCESSABLE_CONTENT, "%s", err);
				rc = -1;
			} else {
				chg->mode = m;
			}
		} else {
			reply_error(r, MHD_HTTP_BAD_REQUEST, "unknown field '%s' (rate, ceil, mode and "
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
static void
h_class_patch(struct weir_app *a, struct MHD_Connection *c, struct req *rq, struct reply *r)
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
		reply_error(r, MHD_HTTP_NOT_FOUND, "no direction '%.*s' (outbound or inbound)",
			    (int)RTE_MIN(dlen, 64u), rq->sub);
		return;
	}
	if (name != NULL && p != NULL && p->tree[d].n_classes != 0)
		k = weir_policy_class_find(p, d, name + 1);
	if (k < 0) {
		reply_error(r, MHD_HTTP_NOT_FOUND, "no class '%s' in the %s tree in force",
			    name != NULL ? name + 1 : "", dir_name[d]);
		return;
	}
	if (a->cfg.policy_script[0] != '\0') {
		/* A hook's next recompile of the script would undo the change. */
		reply_error(r, MHD_HTTP_CONFLICT, "the policy comes from %s: change the script "
			    "(PUT /api/v1/policy)", a->cfg.policy_script);
		return;
	}
	if (switch_busy(a, r))
		return;
	np = weir_policy_with_class(p, d, name + 1, &chg, 0, &perr);
	if (np == NULL) {
		reply_policy_error(a, r, MHD_HTTP_UNPROCESSABLE_CONTENT, perr.msg);
		return;
	}
	rc = weir_policy_apply(a, np, &a->cfg, err, sizeof(err));
	if (rc < 0) {
		weir_policy_free(np);   /* never posted: still ours */
		reply_policy_error(a, r, MHD_HTTP_UNPROCESSABLE_CONTENT, err);
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
	reply_json(r, json_pack("{s:I, s:s, s:o, s:b}", "epoch", (json_int_t)p->epoch,
				"direction", dir_name[d], "class", class_conf_json(p, d, k),
				"counters_restarted", 1));
}

/* ---- GET /api/v1/openapi.json, GET /metrics ---- */

static void
h_openapi(struct weir_app *a, struct MHD_Connection *c, struct req *rq, struct reply *r)
{
	r->status = MHD_HTTP_OK;
	r->persistent = weir_openapi_json;
	r->persistent_len = weir_openapi_json_len;
	r->ctype = "application/json";
}

static void
h_metrics(struct weir_app *a, struct MHD_Connection *c, struct req *rq, struct reply *r)
{
	r->text = weir_metrics_text(a, &r->text_len);
	if (r->text == NULL) {
		reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return;
	}
	r->status = MHD_HTTP_OK;
	r->ctype = "text/plain; version=0.0.4; charset=utf-8";
}

static const char *const flows_query[] = { "limit", "offset", "cursor", "class", "host", "port",
					   "proto", NULL };

static const struct route routes[] = {
	{ "/api/v1/status", "GET", h_status, NULL },
	{ "/api/v1/classes", "GET", h_classes, NULL },
	{ "/api/v1/classes/", "PATCH", h_class_patch, NULL, 0, true },
	{ "/api/v1/counters", "GET", h_counters, NULL },
	{ "/api/v1/counters/reset", "POST", h_counters_reset, NULL },
	{ "/api/v1/flows", "GET", h_flows, flows_query },
	{ "/api/v1/ipsec", "GET", h_ipsec, NULL },
	{ "/api/v1/policy", "GET", h_policy, NULL },
	{ "/api/v1/policy", "PUT", h_policy_put, NULL, REST_UPLOAD_MAX },
	{ "/api/v1/policy/reload", "POST", h_policy_reload, NULL },
	{ "/api/v1/policy/rollback", "POST", h_policy_rollback, NULL },
	{ "/api/v1/openapi.json", "GET", h_openapi, NULL },
	{ "/metrics", "GET", h_metrics, NULL },
};

/* ---- dispatch ---- */

static enum MHD_Result
send_reply(struct MHD_Connection *c, struct reply *r, const char *allow)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	if (r->json != NULL) {
		char *s = json_dumps(r->json, JSON_COMPACT | JSON_ENSURE_ASCII);

		json_decref(r->json);
		r->json = NULL;
		if (s == NULL)
			return MHD_NO;
		free(r->text);
		r->text = s;
		r->text_len = strlen(s);
		r->ctype = "application/json";
	}
	if (r->persistent != NULL)
		resp = MHD_create_response_from_buffer(r->persistent_len, (void *)r->persistent,
						       MHD_RESPMEM_PERSISTENT);
	else
		resp = MHD_create_response_from_buffer(r->text_len, r->text, MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(r->text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->ctype);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (allow != NULL)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
	if (r->status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"weir\"");
	ret = MHD_queue_response(c, r->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* Compare the whole of both strings whatever they hold: the time taken
 * tells nothing about how much of a guess was right. */
static bool
token_ok(const char *want, const char *auth)
{
	static const char prefix[] = "Bearer ";
	size_t wl = strlen(want), gl;
	unsigned char diff;

	if (auth == NULL || strncasecmp(auth, prefix, sizeof(prefix) - 1) != 0)
		return false;
	auth += sizeof(prefix) - 1;
	gl = strlen(auth);
	diff = wl != gl;
	for (size_t i = 0; i < wl; i++)
		diff |= (unsigned char)(want[i] ^ (i < gl ? auth[i] : 0));
	return diff == 0;
}

struct query_check {
	const char *const *allowed;
	const char *bad;
};

static enum MHD_Result
query_key(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct query_check *qc = cls;

	for (const char *const *k = qc->allowed; k != NULL && *k != NULL; k++)
		if (strcmp(*k, key) == 0)
			return MHD_YES;
	qc->bad = key;
	return MHD_NO;
}

/* Host names the appliance by an IP address (any: a literal cannot be
 * rebound) or as localhost, with an optional port; a DNS name is what a
 * DNS rebinding attack sends. */
static bool
host_ok(const char *host)
{
	char name[64];
	const char *port = NULL;
	unsigned char addr[16];
	size_t n;

	if (host[0] == '[') {
		const char *end = strchr(host, ']');

		if (end == NULL || (size_t)(end - host - 1) >= sizeof(name))
			return false;
		snprintf(name, sizeof(name), "%.*s", (int)(end - host - 1), host + 1);
		if (end[1] == ':')
			port = end + 2;
		else if (end[1] != '\0')
			return false;
		if (inet_pton(AF_INET6, name, addr) != 1)
			return false;
	} else {
		n = strcspn(host, ":");
		if (n >= sizeof(name))
			return false;
		snprintf(name, sizeof(name), "%.*s", (int)n, host);
		if (host[n] == ':')
			port = host + n + 1;
		if (strcasecmp(name, "localhost") != 0 && inet_pton(AF_INET, name, addr) != 1)
			return false;
	}
	return port == NULL || (port[0] != '\0' && strspn(port, "0123456789") == strlen(port));
}

/* The request announces a body: a Content-Length above 0 or chunks. */
static bool
has_body(struct MHD_Connection *c)
{
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_LENGTH);

	if (MHD_lookup_connection_value(c, MHD_HEADER_KIND,
					MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL)
		return true;
	return cl != NULL && strspn(cl, "0") != strlen(cl);
}

/* With no token, a web page in a browser on the box (or, through DNS
 * rebinding, anywhere) must not change anything: state-changing requests
 * must name the appliance by address, come from its own origin if a
 * browser says where from, and POSTs (the one such method a browser sends
 * cross-site without a preflight, which weir never answers) must be JSON.
 * true: r holds the refusal. */
static bool
refuse_cross_site(struct MHD_Connection *c, const char *method, struct reply *r)
{
	const char *host, *origin, *ct;
	size_t sl;

	if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
		return false;
	host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
	origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ORIGIN);
	ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	if (host != NULL && !host_ok(host)) {
		reply_error(r, MHD_HTTP_FORBIDDEN, "without a management token, %s requests must "
			    "name weir by its address or localhost in Host, not '%s' (DNS rebinding)",
			    method, host);
		return true;
	}
	sl = strncasecmp(origin ? origin : "", "http://", 7) == 0 ? 7
	   : strncasecmp(origin ? origin : "", "https://", 8) == 0 ? 8 : 0;
	if (origin != NULL && (host == NULL || sl == 0 || strcasecmp(origin + sl, host) != 0)) {
		reply_error(r, MHD_HTTP_FORBIDDEN, "without a management token, %s requests from "
			    "another origin (%s) are refused (cross-site request)", method, origin);
		return true;
	}
	/* A type other than JSON is what a cross-site form sends, with or
	 * without fields. A POST with neither a type nor a body (curl -X
	 * POST) is not a form: a browser sends one only through fetch or
	 * sendBeacon, which always add the Origin checked above (Fetch
	 * standard: every request whose method is not GET or HEAD). */
	if (strcmp(method, "POST") == 0 && !ctype_is(ct, "application/json") &&
	    (ct != NULL || has_body(c))) {
		reply_error(r, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "without a management token, POST "
			    "requests must have Content-Type: application/json (or, without a body, "
			    "none)");
		return true;
	}
	return false;
}

/* Whatever can be refused from the request line and headers alone is
 * refused before any body is read: a client without the token cannot
 * make us buffer anything. true: r holds the refusal. */
static bool
refuse_early(struct weir_app *a, struct MHD_Connection *c, const char *url, const char *method,
	     struct req *rq, struct reply *r, const char **allow)
{
	const char *cl;
	bool path_known = false;
	struct query_check qc = { 0 };
	uint64_t n;

	if (a->cfg.mgmt_token[0] != '\0' &&
	    !token_ok(a->cfg.mgmt_token, MHD_lookup_connection_value(c, MHD_HEADER_KIND,
								      MHD_HTTP_HEADER_AUTHORIZATION))) {
		reply_error(r, MHD_HTTP_UNAUTHORIZED, "missing or wrong bearer token");
		return true;
	}
	for (size_t i = 0; i < RTE_DIM(routes); i++) {
		size_t pl = strlen(routes[i].path);

		/* A prefix route needs something after its path, and no more
		 * than fits (a class name is short). */
		if (routes[i].prefix ? strncmp(routes[i].path, url, pl) != 0 || url[pl] == '\0' ||
				       strlen(url + pl) >= sizeof(rq->sub)
				     : strcmp(routes[i].path, url) != 0)
			continue;
		if (routes[i].prefix)
			snprintf(rq->sub, sizeof(rq->sub), "%s", url + pl);
		/* One path may take several methods: the Allow header lists them all. */
		snprintf(rq->allow + strlen(rq->allow), sizeof(rq->allow) - strlen(rq->allow),
			 "%s%s", path_known ? ", " : "",
			 strcmp(routes[i].method, "GET") == 0 ? "GET, HEAD" : routes[i].method);
		*allow = rq->allow;
		path_known = true;
		if (strcmp(routes[i].method, method) == 0 ||
		    (strcmp(routes[i].method, "GET") == 0 && strcmp(method, "HEAD") == 0))
			rq->route = &routes[i];
	}
	if (!path_known) {
		*allow = NULL;
		reply_error(r, MHD_HTTP_NOT_FOUND, "no such resource: %s", url);
		return true;
	}
	if (rq->route == NULL) {
		reply_error(r, MHD_HTTP_METHOD_NOT_ALLOWED, "%s is not allowed on %s (use %s)",
			    method, url, *allow);
		return true;
	}
	*allow = NULL;
	if (a->cfg.mgmt_token[0] == '\0' && refuse_cross_site(c, method, r))
		return true;
	/* head_peek refuses these first; a head that came in pieces is
	 * refused here, in the same words. */
	if (MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, NULL, NULL) > WEIR_HTTP_QUERY_MAX) {
		reply_error(r, MHD_HTTP_URI_TOO_LONG, "the URL has more than %d query parameters",
			    WEIR_HTTP_QUERY_MAX);
		return true;
	}
	qc.allowed = rq->route->query;
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, query_key, &qc);
	if (qc.bad != NULL) {
		reply_error(r, MHD_HTTP_BAD_REQUEST, "unknown query parameter '%s'", qc.bad);
		return true;
	}
	cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl != NULL && parse_uint(cl, UINT64_MAX, &n) && n > body_max(rq)) {
		reply_error(r, MHD_HTTP_CONTENT_TOO_LARGE, "the body is over %zu bytes", body_max(rq));
		return true;
	}
	return false;
}

/* ---- connections ---- */

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct conn *
conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *i =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return i != NULL ? i->socket_context : NULL;
}

static void
head_watch(struct weir_rest *r, struct conn *k)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = k };

	k->head_seen = 0;
	k->head_done = false;
	/* Over TLS the socket holds records, not the head: libmicrohttpd's
	 * own answers stay (docs/rest.md). */
	if (r->tls_cert != NULL)
		return;
	if (!k->watched && epoll_ctl(r->head_ep, EPOLL_CTL_ADD, k->fd, &ev) == 0)
		k->watched = true;
}

static void
head_unwatch(struct weir_rest *r, struct conn *k)
{
	if (k->watched)
		epoll_ctl(r->head_ep, EPOLL_CTL_DEL, k->fd, NULL);
	k->watched = false;
}

/* Look at what has come of k's request head before MHD reads it (MHD
 * reads after the management loop's next MHD_run), and answer what breaks
 * weir's limits in JSON (http_limits.c); MHD would answer some of it in
 * HTML and some not at all. A head that comes in pieces is checked whole
 * only as far as its first piece goes; the rest is counted. */
static void
head_peek(struct weir_rest *r, struct conn *k)
{
	struct weir_http_refusal why;
	bool complete;
	ssize_t n;

	if (k->shut || k->refused || k->head_done || k->in_request || !k->watched)
		return;
	n = recv(k->fd, r->peek, sizeof(r->peek), MSG_PEEK | MSG_DONTWAIT);
	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			head_unwatch(r, k);     /* its end: MHD closes it */
		return;
	}
	if (k->head_seen == 0) {
		if (weir_http_head_check(r->peek, (size_t)n, &complete, &why) == 0) {
			k->head_seen = (size_t)n;
			k->head_done = complete;
			if (complete)
				head_unwatch(r, k);
			return;
		}
	} else {
		k->head_seen += (size_t)n;
		if (memmem(r->peek, (size_t)n, "\n\r\n", 3) != NULL ||
		    memmem(r->peek, (size_t)n, "\n\n", 2) != NULL) {
			k->head_done = true;
			head_unwatch(r, k);
			return;
		}
		if (k->head_seen <= WEIR_HTTP_HEAD_MAX)
			return;
		why.status = MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE;
		snprintf(why.msg, sizeof(why.msg), "the request line and headers are over %d "
			 "bytes", WEIR_HTTP_HEAD_MAX);
	}
	weir_http_refuse(k->fd, &why);
	k->refused = true;
	head_unwatch(r, k);
}

static void
on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
	      enum MHD_ConnectionNotificationCode code)
{
	struct weir_rest *r = cls;
	struct conn *k = *socket_context;
	const union MHD_ConnectionInfo *i;

	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (k != NULL) {
			head_unwatch(r, k);
			*k->pprev = k->next;
			if (k->next != NULL)
				k->next->pprev = k->pprev;
			free(k);
		}
		*socket_context = NULL;
		return;
	}
	i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	k = i != NULL ? calloc(1, sizeof(*k)) : NULL;
	*socket_context = k;
	if (k == NULL)
		return;                 /* untracked: MHD's idle timeout still applies */
	k->fd = i->connect_fd;
	i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (i != NULL && i->client_addr != NULL)
		memcpy(&k->peer, i->client_addr, i->client_addr->sa_family == AF_INET6
		       ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	k->waiting_since_ms = mono_ms();
	k->deadline_ms = k->waiting_since_ms + REST_HEADER_TIMEOUT_MS;
	k->next = r->conns;
	k->pprev = &r->conns;
	if (r->conns != NULL)
		r->conns->pprev = &k->next;
	r->conns = k;
	/* A client that sent its request with the handshake: MHD reads it
	 * before the loop runs again, so it is looked at now. */
	head_watch(r, k);
	head_peek(r, k);
}

/* Close what is past its deadline. shutdown, not close: the fd stays
 * MHD's, which sees the end of the stream and cleans up as usual. */
static void
conns_sweep(struct weir_rest *r)
{
	uint64_t now = mono_ms();

	for (struct conn *k = r->conns; k != NULL; k = k->next)
		if (!k->shut && now >= k->deadline_ms) {
			shutdown(k->fd, SHUT_RDWR);
			k->shut = true;
		}
}

static bool
is_loopback(const struct sockaddr *sa)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
	if (sa->sa_family != AF_INET6)
		return false;
	if (IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr))
		return true;
	return memcmp(s6->sin6_addr.s6_addr, v4mapped, 12) == 0 &&
	       memcmp(s6->sin6_addr.s6_addr + 12, (const uint8_t[]){ 127, 0, 0, 1 }, 4) == 0;
}

static bool
same_addr(const struct sockaddr *a, const struct sockaddr_storage *b)
{
	if (a->sa_family != b->ss_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

/* With every slot taken, shut the connection that has waited longest for
 * its request (an idle or trickling one; never one whose request is being
 * served) to make room for a newcomer. A client that sends its request as
 * soon as it connects is then served at once, whatever holds the slots: a
 * local runaway reconnecting as fast as it is closed (127.0.0.1 is not
 * limited per address) can no longer keep the operator waiting for the
 * header deadline. false: every slot is busy with a request. */
static bool
conn_evict(struct weir_rest *r)
{
	struct conn *oldest = NULL;

	for (struct conn *k = r->conns; k != NULL; k = k->next)
		if (!k->shut && !k->in_request &&
		    (oldest == NULL || k->waiting_since_ms < oldest->waiting_since_ms))
			oldest = k;
	if (oldest == NULL)
		return false;
	shutdown(oldest->fd, SHUT_RDWR);
	oldest->shut = true;
	return true;
}

/* Other addresses may hold REST_CONN_PER_IP connections each, and not the
 * last REST_CONN_RESERVED slots: those are for 127.0.0.1 and ::1, where
 * weirctl and local monitoring connect, so neither one address nor a flood
 * from many can lock the box's own administrator out. (MHD's own per-IP
 * limit would count the loopback clients too.) Loopback clients past
 * REST_CONN_LIMIT take the slot of the longest waiting connection. */
static enum MHD_Result
on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	struct weir_rest *r = cls;
	unsigned int same = 0, live = 0;

	for (const struct conn *k = r->conns; k != NULL; k = k->next)
		live += !k->shut;
	if (addrlen == 0 || is_loopback(addr))
		return live < REST_CONN_LIMIT || conn_evict(r) ? MHD_YES : MHD_NO;
	if (live >= REST_CONN_LIMIT - REST_CONN_RESERVED)
		return MHD_NO;
	for (const struct conn *k = r->conns; k != NULL; k = k->next)
		same += !k->shut && same_addr(addr, &k->peer);
	return same < REST_CONN_PER_IP ? MHD_YES : MHD_NO;
}

/* The handler's switch went to the compile job: no answer now, and no
 * deadline while the build runs (MHD's own timeout stops for a suspended
 * connection too). The answer comes from on_request once resumed. */
static void
req_suspend(struct MHD_Connection *c, struct req *rq)
{
	struct conn *k = conn_of(c);

	if (k != NULL)
		k->deadline_ms = UINT64_MAX;
	rq->conn = c;
	rq->suspended = true;
	rq->answer.status = MHD_HTTP_OK;        /* as on_request's reply starts */
	MHD_suspend_connection(c);
}

/* The switch ended with rq->answer made: MHD calls on_request again. */
static void
req_resume(struct req *rq)
{
	struct conn *k = conn_of(rq->conn);

	if (k != NULL)
		k->deadline_ms = mono_ms() + REST_REQUEST_TIMEOUT_MS;
	rq->answered = true;
	MHD_resume_connection(rq->conn);
}

/* MHD decodes %00 into a NUL that would end the name early ("gold%00x"
 * would be "gold"): remember it so the request is refused instead. */
static size_t
on_unescape(void *cls, struct MHD_Connection *c, char *s)
{
	struct conn *k = conn_of(c);

	if (k != NULL && strstr(s, "%00") != NULL)
		k->nul_in_url = true;
	return MHD_http_unescape(s);
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
	   const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct weir_app *a = cls;
	struct req *rq = *con_cls;
	struct reply r = { .status = MHD_HTTP_OK };
	const char *allow = NULL;
	struct conn *k;

	if (rq == NULL) {
		rq = calloc(1, sizeof(*rq));
		if (rq == NULL)
			return MHD_NO;
		*con_cls = rq;
		/* The headers are in: the body gets a deadline of its own. */
		k = conn_of(c);
		if (k != NULL && k->refused)
			return MHD_NO;          /* answered by head_peek */
		if (k != NULL) {
			k->deadline_ms = mono_ms() + REST_REQUEST_TIMEOUT_MS;
			k->in_request = true;
			head_unwatch(a->rest, k);
		}
		if (k != NULL && k->nul_in_url) {
			reply_error(&r, MHD_HTTP_BAD_REQUEST, "the URL has a NUL byte (%%00)");
			return send_reply(c, &r, NULL);
		}
		if (refuse_early(a, c, url, method, rq, &r, &allow))
			return send_reply(c, &r, allow);
		return MHD_YES;         /* the body, if any, comes in the next calls */
	}
	if (rq->answered)               /* resumed after its policy switch */
		return send_reply(c, &rq->answer, NULL);
	if (*upload_data_size != 0) {
		/* Bodies without a Content-Length (chunked) are cut here. */
		if (!rq->too_big && rq->len + *upload_data_size <= body_max(rq)) {
			char *nb = realloc(rq->body, rq->len + *upload_data_size);

			if (nb == NULL)
				return MHD_NO;
			memcpy(nb + rq->len, upload_data, *upload_data_size);
			rq->body = nb;
			rq->len += *upload_data_size;
		} else {
			rq->too_big = true;
		}
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (rq->too_big)
		reply_error(&r, MHD_HTTP_CONTENT_TOO_LARGE, "the body is over %zu bytes",
			    body_max(rq));
	else
		rq->route->fn(a, c, rq, &r);
	if (rq->suspended)              /* answered when its switch ends */
		return MHD_YES;
	return send_reply(c, &r, NULL);
}

static void
on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
	     enum MHD_RequestTerminationCode toe)
{
	struct weir_rest *r = cls;
	struct req *rq = *con_cls;
	struct conn *k = conn_of(c);

	/* A kept-alive connection's next request must come as quickly. */
	if (k != NULL && !k->shut && !k->refused)
		head_watch(r, k);
	if (k != NULL) {
		k->waiting_since_ms = mono_ms();
		k->deadline_ms = k->waiting_since_ms + REST_HEADER_TIMEOUT_MS;
		k->in_request = false;
		k->nul_in_url = false;
	}
	if (rq != NULL) {
		json_decref(rq->answer.json);   /* made but never sent */
		free(rq->body);
		free(rq);
		*con_cls = NULL;
	}
}

/* At most 10 lines a second: a flood makes MHD log every refused
 * connection, and the log must not become the next thing to fill up. */
static void
on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct weir_rest *r = cls;
	uint64_t sec = mono_ms() / 1000;
	char msg[512];

	if (sec != r->log_second) {
		if (r->log_suppressed > 0)
			RTE_LOG(WARNING, USER1, "rest: %" PRIu64 " more messages in the last "
				"seconds not logged\n", r->log_suppressed);
		r->log_second = sec;
		r->log_count = 0;
		r->log_suppressed = 0;
	}
	if (r->log_count++ >= 10) {
		r->log_suppressed++;
		return;
	}
	vsnprintf(msg, sizeof(msg), fmt, ap);
	RTE_LOG(WARNING, USER1, "rest: %s", msg);
}

static void
rest_free(struct weir_rest *r)
{
	if (r->head_ep >= 0)
		close(r->head_ep);
	free(r->prev);
	json_decref(r->baseline);
	free(r->tls_cert);
	free(r->tls_key);
	free(r);
}

/* The PEM text of a file the config loader found readable, NUL-ended. */
static char *
pem_read(const struct weir_config *cfg, const char *key, const char *path, char *err,
	 size_t errlen)
{
	size_t len;
	char *buf = file_read(path, &len);

	if (buf == NULL || len == 0) {
		snprintf(err, errlen, "%s:%d: cannot read 'management.%s' %s: %s", cfg->path,
			 cfg->mgmt_line, key, path, buf == NULL ? "unreadable or over 1 MiB" : "empty");
		free(buf);
		return NULL;
	}
	buf[len] = '\0';               /* file_read leaves a byte for it */
	return buf;
}

/* management.tls_cert and tls_key into r (both or neither: the loader
 * checked). 0, or -1 with err. */
static int
tls_load(const struct weir_config *cfg, struct weir_rest *r, char *err, size_t errlen)
{
	if (cfg->mgmt_tls_cert[0] == '\0')
		return 0;
	if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
		snprintf(err, errlen, "%s:%d: 'management.tls_cert': this libmicrohttpd was built "
			 "without TLS", cfg->path, cfg->mgmt_line);
		return -1;
	}
	r->tls_cert = pem_read(cfg, "tls_cert", cfg->mgmt_tls_cert, err, errlen);
	if (r->tls_cert == NULL)
		return -1;
	r->tls_key = pem_read(cfg, "tls_key", cfg->mgmt_tls_key, err, errlen);
	return r->tls_key != NULL ? 0 : -1;
}

int
weir_rest_start(struct weir_app *a, char *err, size_t errlen)
{
	const struct weir_config *cfg = &a->cfg;
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	const struct sockaddr *sa;
	/* Suspend and resume: a policy switch's request waits for its ACL
	 * build off the loop (compile_job.h) while others are served. */
	unsigned int flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
	struct weir_rest *r;
	const union MHD_DaemonInfo *info;
	struct MHD_OptionItem tls[3] = {
		{ MHD_OPTION_END, 0, NULL }, { MHD_OPTION_END, 0, NULL }, { MHD_OPTION_END, 0, NULL },
	};

	a->rest = NULL;
	if (cfg->mgmt_port == 0)
		return 0;
	if (inet_pton(AF_INET, cfg->mgmt_listen, &s4.sin_addr) == 1) {
		s4.sin_port = htons(cfg->mgmt_port);
		sa = (const struct sockaddr *)&s4;
	} else {
		inet_pton(AF_INET6, cfg->mgmt_listen, &s6.sin6_addr);   /* checked by the loader */
		s6.sin6_port = htons(cfg->mgmt_port);
		sa = (const struct sockaddr *)&s6;
		flags |= MHD_USE_IPv6;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		snprintf(err, errlen, "out of memory starting the REST server");
		return -1;
	}
	r->head_ep = epoll_create1(EPOLL_CLOEXEC);
	if (r->head_ep < 0) {
		snprintf(err, errlen, "cannot start the REST server: epoll: %s", strerror(errno));
		rest_free(r);
		return -1;
	}
	if (tls_load(cfg, r, err, errlen) < 0) {
		rest_free(r);
		return -1;
	}
	if (r->tls_cert != NULL) {
		flags |= MHD_USE_TLS;
		tls[0] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, r->tls_key };
		tls[1] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, r->tls_cert };
	}
	/* The logger first, so MHD's messages about the other options reach it. */
	errno = 0;
	r->d = MHD_start_daemon(flags, cfg->mgmt_port, on_accept, r, on_request, a,
		MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, r,
		MHD_OPTION_SOCK_ADDR, sa,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned int)(REST_CONN_LIMIT + REST_CONN_SPARE),
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)REST_CONN_TIMEOUT_S,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)WEIR_HTTP_MHD_MEMORY,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, r,
		MHD_OPTION_UNESCAPE_CALLBACK, on_unescape, NULL,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, r,
		MHD_OPTION_ARRAY, tls,
		MHD_OPTION_END);
	if (r->d == NULL) {
		snprintf(err, errlen, "%s:%d: cannot serve the REST API on %s port %u: %s "
			 "(management.port = 0 runs without it)", cfg->path, cfg->mgmt_line,
			 cfg->mgmt_listen, cfg->mgmt_port,
			 errno ? strerror(errno) : r->tls_cert != NULL
			 ? "libmicrohttpd failed (is the TLS key the certificate's?)"
			 : "libmicrohttpd failed");
		rest_free(r);
		return -1;
	}
	info = MHD_get_daemon_info(r->d, MHD_DAEMON_INFO_EPOLL_FD);
	if (info == NULL) {
		snprintf(err, errlen, "libmicrohttpd gave no epoll fd");
		MHD_stop_daemon(r->d);
		rest_free(r);
		return -1;
	}
	r->epfd = info->epoll_fd;
	a->rest = r;
	RTE_LOG(NOTICE, USER1, "REST API on %s port %u%s%s\n", cfg->mgmt_listen, cfg->mgmt_port,
		r->tls_cert != NULL ? " (HTTPS)" : "",
		cfg->mgmt_token[0] != '\0' ? " (bearer token required)" : "");
	return 0;
}

void
weir_rest_wait(struct weir_app *a, unsigned int us)
{
	struct weir_rest *r = a->rest;
	uint64_t hz = rte_get_tsc_hz();
	uint64_t end = rte_rdtsc() + (uint64_t)us * hz / 1000000;

	if (r == NULL) {
		usleep(us);
		return;
	}
	while (!a->quit) {
		uint64_t now = rte_rdtsc();
		MHD_UNSIGNED_LONG_LONG mhd_ms;
		struct pollfd pfd[2] = { { .fd = r->epfd, .events = POLLIN },
					 { .fd = r->head_ep, .events = POLLIN } };
		struct epoll_event ev[32];
		int ms, n;

		if (now >= end)
			break;
		/* Round up: a 0 ms wait would spin for the last millisecond. */
		ms = (int)(((end - now) * 1000 + hz - 1) / hz);
		if (MHD_get_timeout(r->d, &mhd_ms) == MHD_YES && mhd_ms < (MHD_UNSIGNED_LONG_LONG)ms)
			ms = (int)mhd_ms;
		/* poll, not epoll_wait: MHD's sockets are edge-triggered, and
		 * taking their events here would hide them from MHD_run. */
		if (poll(pfd, 2, ms) < 0 && errno != EINTR)
			usleep(1000);   /* cannot happen on a valid fd; do not spin */
		/* Heads that came in: checked before MHD_run reads them. */
		n = epoll_wait(r->head_ep, ev, (int)RTE_DIM(ev), 0);
		for (int e = 0; e < n; e++)
			head_peek(r, ev[e].data.ptr);
		MHD_run(r->d);
		conns_sweep(r);
	}
}

void
weir_rest_stop(struct weir_app *a)
{
	if (a->rest == NULL)
		return;
	MHD_stop_daemon(a->rest->d);
	rest_free(a->rest);
	a->rest = NULL;
}
