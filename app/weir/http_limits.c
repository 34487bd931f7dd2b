/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the REST API's limits on a request head.
 *
 * libmicrohttpd 0.9.75 answers what it refuses itself (a malformed or
 * too large Content-Length, an HTTP version other than 1.0 and 1.1, a
 * head larger than its memory) with fixed HTML pages, and a head whose
 * parsed parameters do not fit its memory with no answer at all; it has
 * no hook to replace those. So rest_http.c peeks at each request head on the
 * socket before libmicrohttpd reads it, checks it here against weir's own
 * limits, which are smaller than libmicrohttpd's (WEIR_HTTP_MHD_MEMORY),
 * and answers a refusal itself in weir's JSON form.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "http_limits.h"

static int
refuse(struct weir_http_refusal *r, unsigned int status, const char *msg)
{
	r->status = status;
	snprintf(r->msg, sizeof(r->msg), "%s", msg);
	return 1;
}

/* The request line: METHOD SP TARGET SP HTTP/x.y (no CR, no LF). */
static int
check_request_line(const char *s, size_t n, struct weir_http_refusal *r)
{
	const char *sp1 = memchr(s, ' ', n), *sp2, *q;
	size_t tlen, params = 0;

	if (sp1 == NULL || sp1 == s)
		return refuse(r, 400, "malformed request line: METHOD TARGET HTTP/1.1 expected");
	sp2 = memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - s));
	if (sp2 == NULL || sp2 == sp1 + 1 || memchr(sp2 + 1, ' ', n - (size_t)(sp2 + 1 - s)))
		return refuse(r, 400, "malformed request line: METHOD TARGET HTTP/1.1 expected");
	tlen = (size_t)(sp2 - sp1 - 1);
	if (tlen > WEIR_HTTP_URL_MAX)
		return refuse(r, 414, "the URL is over 8192 bytes");
	q = memchr(sp1 + 1, '?', tlen);
	if (q != NULL && q + 1 < sp2) {
		params = 1;
		for (const char *p = q + 1; p < sp2; p++)
			params += *p == '&';
	}
	if (params > WEIR_HTTP_QUERY_MAX)
		return refuse(r, 414, "the URL has more than 64 query parameters");
	n -= (size_t)(sp2 + 1 - s);
	s = sp2 + 1;
	if (n != 8 || strncmp(s, "HTTP/", 5) != 0 || s[5] < '0' || s[5] > '9' || s[6] != '.' ||
	    s[7] < '0' || s[7] > '9')
		return refuse(r, 400, "malformed request line: the version must be HTTP/1.1 or "
			      "HTTP/1.0");
	if (s[5] != '1' || (s[7] != '0' && s[7] != '1'))
		return refuse(r, 505, "only HTTP/1.1 and HTTP/1.0 are served");
	return 0;
}

/* One header line (no CR, no LF). */
static int
check_header(const char *s, size_t n, struct weir_http_refusal *r)
{
	static const char cl[] = "content-length";
	const char *colon = memchr(s, ':', n);
	const char *v, *end = s + n;
	uint64_t len = 0;

	if (n > 0 && (s[0] == ' ' || s[0] == '\t'))
		return 0;               /* a folded line: libmicrohttpd's rules */
	if (colon == NULL || colon == s)
		return refuse(r, 400, "malformed header line: NAME: VALUE expected");
	if ((size_t)(colon - s) != sizeof(cl) - 1 || strncasecmp(s, cl, sizeof(cl) - 1) != 0)
		return 0;
	for (v = colon + 1; v < end && (*v == ' ' || *v == '\t'); v++)
		;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (v == end)
		return refuse(r, 400, "Content-Length must be a number of bytes (digits only)");
	for (const char *p = v; p < end; p++) {
		if (*p < '0' || *p > '9')
			return refuse(r, 400, "Content-Length must be a number of bytes (digits only)");
		/* Past 2^64 - 1: more than any body weir takes. */
		if (len > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return refuse(r, 413, "Content-Length is over the largest body weir takes");
		len = len * 10 + (uint64_t)(*p - '0');
	}
	return 0;
}

int
weir_http_head_check(const char *buf, size_t len, bool *complete, struct weir_http_refusal *r)
{
	const char *p = buf, *end = buf + len, *nl;
	size_t n;

	*complete = false;
	/* Empty lines before the request line are allowed (RFC 9112 2.2). */
	while (p < end && (*p == '\r' || *p == '\n'))
		p++;
	nl = memchr(p, '\n', (size_t)(end - p));
	if (nl == NULL)
		return (size_t)(end - p) > WEIR_HTTP_URL_MAX + 32
		       ? refuse(r, 414, "the URL is over 8192 bytes") : 0;
	n = (size_t)(nl - p);
	if (check_request_line(p, n > 0 && p[n - 1] == '\r' ? n - 1 : n, r))
		return 1;
	for (p = nl + 1; p < end; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			break;
		if ((size_t)(nl + 1 - buf) > WEIR_HTTP_HEAD_MAX)
			return refuse(r, 431, "the request line and headers are over 16384 bytes");
		n = (size_t)(nl - p);
		if (n > 0 && p[n - 1] == '\r')
			n--;
		if (n == 0) {
			*complete = true;
			return 0;
		}
		if (check_header(p, n, r))
			return 1;
	}
	return len > WEIR_HTTP_HEAD_MAX
	       ? refuse(r, 431, "the request line and headers are over 16384 bytes") : 0;
}

static const char *
reason(unsigned int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

void
weir_http_refuse(int fd, const struct weir_http_refusal *r)
{
	char body[256], out[512];
	int bl, ol;

	/* The messages are weir's own ASCII text, with no quote or backslash. */
	bl = snprintf(body, sizeof(body), "{\"error\":{\"code\":%u,\"message\":\"%s\"}}",
		      r->status, r->msg);
	ol = snprintf(out, sizeof(out), "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
		      "Cache-Control: no-store\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		      r->status, reason(r->status), bl, body);
	if (ol > 0 && (size_t)ol < sizeof(out))
		(void)!send(fd, out, (size_t)ol, MSG_NOSIGNAL | MSG_DONTWAIT);
	/* Nothing more goes out: libmicrohttpd's own answer, if it tries one,
	 * fails and it closes the connection. */
	shutdown(fd, SHUT_WR);
}
