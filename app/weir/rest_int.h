/* SPDX-License-Identifier: BSD-3-Clause
 * weir: what the files of the REST API share (rest_http.c, rest_handlers.c,
 * rest_flows.c, rest_script.c): a connection, a request, a reply, the
 * routes' handlers. Private: rest.h is the interface.
 */
#ifndef WEIR_REST_INT_H
#define WEIR_REST_INT_H
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
/* Subscribers' files and batches: 100,000 subscribers' rows. */
#define REST_SUBS_UPLOAD_MAX (64 * 1024 * 1024)
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
struct rest_reply {
	unsigned int status;
	json_t *json;                   /* owned; or */
	char *text;                     /* malloc'ed, with text_len and ctype */
	size_t text_len;
	const char *ctype;
	const char *persistent;         /* static body (the OpenAPI document) */
	size_t persistent_len;
	/* The dashboard's files (rest_dashboard.c); NULL: none, and the
	 * default Cache-Control: no-store. */
	const char *etag;
	const char *cache_control;
	const char *csp;                /* Content-Security-Policy */
	bool file;                      /* body: file_len bytes of file_fd (closed by MHD) */
	int file_fd;
	uint64_t file_len;
};

/* One request as MHD hands it over in several calls (headers, body
 * chunks, end). */
struct rest_req {
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
	struct rest_reply answer;
	struct install *inst;           /* PUT, rollback: what script_install_end needs */
};

typedef void (*rest_handler_fn)(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
			   struct rest_reply *r);

struct route {
	const char *path;
	const char *method;             /* GET routes answer HEAD too */
	rest_handler_fn fn;
	const char *const *query;       /* query parameters accepted (NULL: none) */
	size_t body_max;                /* 0: REST_BODY_MAX */
	bool prefix;                    /* path is a prefix: .../{direction}/{name} */
	/* A prefix route's rest: NULL anything; "" one segment (no '/');
	 * "/x" one segment and then "/x" (.../{id}/x). */
	const char *suffix;
};

static const char *const role_name[WEIR_PORT__COUNT] = { "lan", "wan" };
static const char *const dir_name[WEIR_POLICY_DIRS] = { "outbound", "inbound" };

/* rest_http.c: replies, suspending a request for a policy switch. */
void rest_reply_error(struct rest_reply *r, unsigned int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void rest_reply_json(struct rest_reply *r, json_t *j);
void rest_req_suspend(struct MHD_Connection *c, struct rest_req *rq);
void rest_req_resume(struct rest_req *rq);

/* rest_handlers.c: GET status, classes, counters, ipsec, policy, openapi.json,
 * metrics; POST counters/reset, policy/reload; PATCH classes. */
void rest_h_status(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
void rest_h_classes(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
void rest_h_class_patch(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
void rest_h_counters(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
void rest_h_counters_reset(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
		      struct rest_reply *r);
void rest_h_ipsec(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
void rest_h_policy(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
void rest_h_policy_reload(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
		     struct rest_reply *r);
void rest_h_openapi(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
void rest_h_metrics(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
int rest_body_object(struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r, json_t **out);
json_t *stats_since_reset(struct weir_app *a);
int class_rate(const char *key, const json_t *v, uint64_t *out, struct rest_reply *r);
/* A JSON rate (bit/s as an integer, an integral number, or "20mbit") as a
 * policy value for weir_value_rate; false: not a rate's type at all. */
bool rest_rate_value(const json_t *v, struct weir_value *val);

/* rest_subs.c: GET subscribers (paged, sorted), GET and PATCH one. */
void h_subs(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
void h_sub_get(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
/* Subscriber i's prefixes and MACs as two new JSON arrays of strings. */
void rest_sub_devices(const struct weir_subs *s, uint32_t i, json_t **pfx, json_t **macs);
/* What a change of the subscriber set changed (weir_subs_diff) as JSON. */
json_t *rest_sub_diff_json(const struct weir_sub_diff *d);
/* One subscriber's JSON (plan in force, figures from stats); problems as lines. */
json_t *rest_sub_json(struct weir_app *a, const struct weir_policy *p, uint32_t i,
		      const json_t *stats);
struct weir_sub_errs;
json_t *rest_sub_error_lines(const struct weir_sub_errs *e);
/* rest_subs_edit.c: PUT, PATCH, DELETE one subscriber; POST a batch. */
void h_sub_put(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
void h_sub_patch(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
void h_sub_delete(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
		  struct rest_reply *r);
void h_subs_batch(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
		  struct rest_reply *r);
/* rest_subs_upload.c: PUT the subscriber files (ShapedDevices.csv, network.json). */
void h_subs_upload_csv(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
		       struct rest_reply *r);
void h_subs_upload_network(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
			   struct rest_reply *r);
void h_subs_reload(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
		   struct rest_reply *r);
bool rest_switch_busy(struct weir_app *a, struct rest_reply *r);

/* rest_captures.c: POST/GET captures, GET/DELETE captures/{id}, GET
 * captures/{id}/pcapng, POST captures/{id}/stop. */
void h_captures_post(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
		     struct rest_reply *r);
void h_captures_list(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
		     struct rest_reply *r);
void h_capture_get(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
void h_capture_post(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
		    struct rest_reply *r);
void h_capture_delete(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
		      struct rest_reply *r);

/* rest_flows.c: GET flows. */
void rest_h_flows(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
bool rest_parse_uint(const char *s, uint64_t max, uint64_t *out);
const char *proto_name(uint8_t proto);
json_t *endpoint_json(const struct weir_flow_key *k, bool hi, uint16_t port);
json_t *json_ms(uint32_t us, bool have);

/* rest_measure.c: GET hosts, measure (TCP round trips and retransmissions
 * aggregated per LAN host, per class, worst flows). */
void h_hosts(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
void h_measure(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);

/* rest_dashboard.c: GET /dashboard/ and its files, served without the token. */
void h_dashboard(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
bool dashboard_path(const char *url);

/* rest_script.c: PUT policy, POST policy/rollback: installing a script. */
void rest_h_policy_put(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r);
void rest_h_policy_rollback(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
		       struct rest_reply *r);
void rest_reply_policy_error(struct weir_app *a, struct rest_reply *r, unsigned int status,
			const char *msg);
bool rest_ctype_is(const char *ct, const char *want);
/* data in a new file beside path (path.upload.XXXXXX, mode), flushed: 0
 * with its name in out, or -1 with errno and nothing left. */
int rest_temp_write(const char *path, const char *data, size_t len, mode_t mode, char *out,
		    size_t outlen);
/* Make the renames in path's directory durable. */
void rest_dir_sync(const char *path);
char *rest_file_read(const char *path, size_t *len);

#endif
