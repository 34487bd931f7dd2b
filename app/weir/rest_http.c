/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the management REST API and /metrics on libmicrohttpd: the HTTP
 * side. The daemon runs in MHD's "external select" mode with epoll: the
 * management loop waits on its epoll fd and calls MHD_run, which runs the
 * handlers (rest_handlers.c, rest_flows.c, rest_script.c) on the management
 * lcore. A slow or stalled client only holds a connection slot (bounded,
 * and timed out), never the loop. Here: JSON replies and errors, the routes,
 * the origin, host and token checks, the connection accounting with its
 * per-client limits and the local clients' reserved slots, TLS, start/stop.
 */
#include "rest_int.h"

static size_t
body_max(const struct rest_req *rq)
{
	return rq->route != NULL && rq->route->body_max != 0 ? rq->route->body_max : REST_BODY_MAX;
}

void
rest_reply_error(struct rest_reply *r, unsigned int status, const char *fmt, ...)
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

void
rest_reply_error(struct rest_reply *r, unsigned int status, const char *fmt, ...)
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

void
rest_reply_json(struct rest_reply *r, json_t *j)
{
	r->status = j != NULL ? MHD_HTTP_OK : MHD_HTTP_INTERNAL_SERVER_ERROR;
	r->json = j;
	if (j == NULL)
		rest_reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
}

/* ---- dispatch ---- */

static const char *const flows_query[] = { "limit", "offset", "cursor", "class", "host", "port",
					   "proto", NULL };

static const char *const hosts_query[] = { "limit", "sort", NULL };
static const char *const measure_query[] = { "top", "by", NULL };
static const char *const subs_query[] = { "limit", "offset", "sort", NULL };
static const char *const dry_run_query[] = { "dry_run", NULL };

static const struct route routes[] = {
	{ "/api/v1/status", "GET", rest_h_status, NULL },
	{ "/api/v1/classes", "GET", rest_h_classes, NULL },
	{ "/api/v1/classes/", "PATCH", rest_h_class_patch, NULL, 0, true },
	{ "/api/v1/counters", "GET", rest_h_counters, NULL },
	{ "/api/v1/subscribers", "GET", h_subs, subs_query },
	{ "/api/v1/subscribers/reload", "POST", h_subs_reload, NULL },
	{ "/api/v1/subscribers/", "GET", h_sub_get, NULL, 0, true },
	{ "/api/v1/subscribers/", "PATCH", h_sub_patch, NULL, 0, true },
	{ "/api/v1/subscribers/", "PUT", h_sub_put, NULL, 0, true },
	{ "/api/v1/subscribers/", "DELETE", h_sub_delete, NULL, 0, true },
	{ "/api/v1/subscribers", "POST", h_subs_batch, NULL, REST_SUBS_UPLOAD_MAX },
	{ "/api/v1/subscribers", "PUT", h_subs_upload_csv, dry_run_query, REST_SUBS_UPLOAD_MAX },
	{ "/api/v1/subscribers/network", "PUT", h_subs_upload_network, dry_run_query,
	  REST_SUBS_UPLOAD_MAX },
	{ "/api/v1/counters/reset", "POST", rest_h_counters_reset, NULL },
	{ "/api/v1/flows", "GET", rest_h_flows, flows_query },
	{ "/api/v1/hosts", "GET", h_hosts, hosts_query },
	{ "/api/v1/measure", "GET", h_measure, measure_query },
	{ "/api/v1/ipsec", "GET", rest_h_ipsec, NULL },
	{ "/api/v1/policy", "GET", rest_h_policy, NULL },
	{ "/api/v1/policy", "PUT", rest_h_policy_put, NULL, REST_UPLOAD_MAX },
	{ "/api/v1/policy/reload", "POST", rest_h_policy_reload, NULL },
	{ "/api/v1/policy/rollback", "POST", rest_h_policy_rollback, NULL },
	{ "/api/v1/openapi.json", "GET", rest_h_openapi, NULL },
	{ "/api/v1/captures", "GET", h_captures_list, NULL },
	{ "/api/v1/captures", "POST", h_captures_post, NULL },
	{ "/api/v1/captures/", "GET", h_capture_get, NULL, 0, true, "" },
	{ "/api/v1/captures/", "DELETE", h_capture_delete, NULL, 0, true, "" },
	{ "/api/v1/captures/", "GET", h_capture_get, NULL, 0, true, "/pcapng" },
	{ "/api/v1/captures/", "POST", h_capture_post, NULL, 0, true, "/stop" },
	{ "/metrics", "GET", rest_h_metrics, NULL },
	{ "/dashboard", "GET", h_dashboard, NULL },
	{ "/dashboard/", "GET", h_dashboard, NULL },
	{ "/dashboard/", "GET", h_dashboard, NULL, 0, true },
};

static enum MHD_Result
send_reply(struct MHD_Connection *c, struct rest_reply *r, const char *allow)
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
	if (r->file)
		resp = MHD_create_response_from_fd64(r->file_len, r->file_fd);
	else if (r->persistent != NULL)
		resp = MHD_create_response_from_buffer(r->persistent_len, (void *)r->persistent,
						       MHD_RESPMEM_PERSISTENT);
	else
		resp = MHD_create_response_from_buffer(r->text_len, r->text, MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(r->text);
		return MHD_NO;
	}
	if (r->status != MHD_HTTP_NOT_MODIFIED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->ctype);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
				r->cache_control != NULL ? r->cache_control : "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	if (r->etag != NULL)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, r->etag);
	if (r->csp != NULL) {
		MHD_add_response_header(resp, "Content-Security-Policy", r->csp);
		MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
	}
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
refuse_cross_site(struct MHD_Connection *c, const char *method, struct rest_reply *r)
{
	const char *host, *origin, *ct;
	size_t sl;

	if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
		return false;
	host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
	origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ORIGIN);
	ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	if (host != NULL && !host_ok(host)) {
		rest_reply_error(r, MHD_HTTP_FORBIDDEN, "without a management token, %s requests must "
			    "name weir by its address or localhost in Host, not '%s' (DNS rebinding)",
			    method, host);
		return true;
	}
	sl = strncasecmp(origin ? origin : "", "http://", 7) == 0 ? 7
	   : strncasecmp(origin ? origin : "", "https://", 8) == 0 ? 8 : 0;
	if (origin != NULL && (host == NULL || sl == 0 || strcasecmp(origin + sl, host) != 0)) {
		rest_reply_error(r, MHD_HTTP_FORBIDDEN, "without a management token, %s requests from "
			    "another origin (%s) are refused (cross-site request)", method, origin);
		return true;
	}
	/* A type other than JSON is what a cross-site form sends, with or
	 * without fields. A POST with neither a type nor a body (curl -X
	 * POST) is not a form: a browser sends one only through fetch or
	 * sendBeacon, which always add the Origin checked above (Fetch
	 * standard: every request whose method is not GET or HEAD). */
	if (strcmp(method, "POST") == 0 && !rest_ctype_is(ct, "application/json") &&
	    (ct != NULL || has_body(c))) {
		rest_reply_error(r, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "without a management token, POST "
			    "requests must have Content-Type: application/json (or, without a body, "
			    "none)");
		return true;
	}
	return false;
}

/* A prefix route's rest of the URL against its suffix (struct route). */
static bool
suffix_matches(const char *suffix, const char *rest)
{
	const char *slash = strchr(rest, '/');

	if (suffix == NULL)
		return true;
	if (suffix[0] == '\0')
		return slash == NULL;
	return slash != NULL && slash != rest && strcmp(slash, suffix) == 0;
}

/* Whatever can be refused from the request line and headers alone is
 * refused before any body is read: a client without the token cannot
 * make us buffer anything. true: r holds the refusal. */
static bool
refuse_early(struct weir_app *a, struct MHD_Connection *c, const char *url, const char *method,
	     struct rest_req *rq, struct rest_reply *r, const char **allow)
{
	const char *cl;
	bool path_known = false;
	struct query_check qc = { 0 };
	uint64_t n;

	/* The dashboard's files are the page's code, the same for everyone:
	 * a browser cannot send a bearer token when it opens a URL, and the
	 * page sends it with every API request it makes. */
	bool page_file = dashboard_path(url) &&
		      (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0);

	if (a->cfg.mgmt_token[0] != '\0' && !page_file &&
	    !token_ok(a->cfg.mgmt_token, MHD_lookup_connection_value(c, MHD_HEADER_KIND,
								      MHD_HTTP_HEADER_AUTHORIZATION))) {
		rest_reply_error(r, MHD_HTTP_UNAUTHORIZED, "missing or wrong bearer token");
		return true;
	}
	/* A path of its own (/api/v1/subscribers/reload) is not also a
	 * prefix route's item (/api/v1/subscribers/{id}). */
	bool exact = false;

	for (size_t i = 0; i < RTE_DIM(routes); i++)
		exact |= !routes[i].prefix && strcmp(routes[i].path, url) == 0;
	for (size_t i = 0; i < RTE_DIM(routes); i++) {
		size_t pl = strlen(routes[i].path);

		if (exact && routes[i].prefix)
			continue;
		/* A prefix route needs something after its path, and no more
		 * than fits (a class name is short). */
		if (routes[i].prefix ? strncmp(routes[i].path, url, pl) != 0 || url[pl] == '\0' ||
				       strlen(url + pl) >= sizeof(rq->sub) ||
				       !suffix_matches(routes[i].suffix, url + pl)
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
		rest_reply_error(r, MHD_HTTP_NOT_FOUND, "no such resource: %s", url);
		return true;
	}
	if (rq->route == NULL) {
		rest_reply_error(r, MHD_HTTP_METHOD_NOT_ALLOWED, "%s is not allowed on %s (use %s)",
			    method, url, *allow);
		return true;
	}
	*allow = NULL;
	if (a->cfg.mgmt_token[0] == '\0' && refuse_cross_site(c, method, r))
		return true;
	/* head_peek refuses these first; a head that came in pieces is
	 * refused here, in the same words. */
	if (MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, NULL, NULL) > WEIR_HTTP_QUERY_MAX) {
		rest_reply_error(r, MHD_HTTP_URI_TOO_LONG, "the URL has more than %d query parameters",
			    WEIR_HTTP_QUERY_MAX);
		return true;
	}
	qc.allowed = rq->route->query;
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, query_key, &qc);
	if (qc.bad != NULL) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "unknown query parameter '%s'", qc.bad);
		return true;
	}
	cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl != NULL && rest_parse_uint(cl, UINT64_MAX, &n) && n > body_max(rq)) {
		rest_reply_error(r, MHD_HTTP_CONTENT_TOO_LARGE, "the body is over %zu bytes", body_max(rq));
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
void
rest_req_suspend(struct MHD_Connection *c, struct rest_req *rq)
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
void
rest_req_resume(struct rest_req *rq)
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
	struct rest_req *rq = *con_cls;
	struct rest_reply r = { .status = MHD_HTTP_OK };
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
			rest_reply_error(&r, MHD_HTTP_BAD_REQUEST, "the URL has a NUL byte (%%00)");
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
		rest_reply_error(&r, MHD_HTTP_CONTENT_TOO_LARGE, "the body is over %zu bytes",
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
	struct rest_req *rq = *con_cls;
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
	char *buf = rest_file_read(path, &len);

	if (buf == NULL || len == 0) {
		snprintf(err, errlen, "%s:%d: cannot read 'management.%s' %s: %s", cfg->path,
			 cfg->mgmt_line, key, path, buf == NULL ? "unreadable or over 1 MiB" : "empty");
		free(buf);
		return NULL;
	}
	buf[len] = '\0';               /* rest_file_read leaves a byte for it */
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
