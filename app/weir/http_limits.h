/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the REST API's limits on a request head, checked on the socket
 * before libmicrohttpd parses it (http_limits.c).
 */
#ifndef WEIR_APP_HTTP_LIMITS_H
#define WEIR_APP_HTTP_LIMITS_H

#include <stdbool.h>
#include <stddef.h>

#define WEIR_HTTP_URL_MAX 8192          /* request target: path and query */
#define WEIR_HTTP_QUERY_MAX 64          /* query parameters */
#define WEIR_HTTP_HEAD_MAX 16384        /* request line and headers */
/* libmicrohttpd's per-connection memory (it defaults to 32 KiB): room for
 * a head of WEIR_HTTP_HEAD_MAX with WEIR_HTTP_QUERY_MAX parameters and its
 * headers parsed, so weir's limits, not its, are the ones a client meets. */
#define WEIR_HTTP_MHD_MEMORY (128 * 1024)

struct weir_http_refusal {
	unsigned int status;            /* 400, 413, 414, 431 or 505 */
	char msg[160];
};

/* Check the start of a request head (buf[0..len) from its first byte).
 * 1: refused, *r says why; 0: nothing wrong so far, *complete tells
 * whether the whole head (up to its empty line) was in buf. */
int weir_http_head_check(const char *buf, size_t len, bool *complete,
			 struct weir_http_refusal *r);
/* Send r as weir's JSON error, with Connection: close. Never blocks: a
 * client that does not read its socket loses the answer, not weir time. */
void weir_http_refuse(int fd, const struct weir_http_refusal *r);

#endif /* WEIR_APP_HTTP_LIMITS_H */
