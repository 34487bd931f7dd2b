/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the REST API's connections (rest_http.c serves their requests).
 * Each connection is accounted from accept to close: its peer, a deadline
 * for its request head (read ahead of libmicrohttpd through an epoll fd,
 * so a head too large or too slow is refused before MHD buffers it), the
 * per-client limits and the slots kept for clients on the box itself.
 */
#include "rest_int.h"

uint64_t
rest_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct conn *
rest_conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *i =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return i != NULL ? i->socket_context : NULL;
}

void
rest_head_watch(struct weir_rest *r, struct conn *k)
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

void
rest_head_unwatch(struct weir_rest *r, struct conn *k)
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
void
rest_head_peek(struct weir_rest *r, struct conn *k)
{
	struct weir_http_refusal why;
	bool complete;
	ssize_t n;

	if (k->shut || k->refused || k->head_done || k->in_request || !k->watched)
		return;
	n = recv(k->fd, r->peek, sizeof(r->peek), MSG_PEEK | MSG_DONTWAIT);
	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			rest_head_unwatch(r, k);     /* its end: MHD closes it */
		return;
	}
	if (k->head_seen == 0) {
		if (weir_http_head_check(r->peek, (size_t)n, &complete, &why) == 0) {
			k->head_seen = (size_t)n;
			k->head_done = complete;
			if (complete)
				rest_head_unwatch(r, k);
			return;
		}
	} else {
		k->head_seen += (size_t)n;
		if (memmem(r->peek, (size_t)n, "\n\r\n", 3) != NULL ||
		    memmem(r->peek, (size_t)n, "\n\n", 2) != NULL) {
			k->head_done = true;
			rest_head_unwatch(r, k);
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
	rest_head_unwatch(r, k);
}

void
rest_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
	      enum MHD_ConnectionNotificationCode code)
{
	struct weir_rest *r = cls;
	struct conn *k = *socket_context;
	const union MHD_ConnectionInfo *i;

	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (k != NULL) {
			rest_head_unwatch(r, k);
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
	k->waiting_since_ms = rest_mono_ms();
	k->deadline_ms = k->waiting_since_ms + REST_HEADER_TIMEOUT_MS;
	k->next = r->conns;
	k->pprev = &r->conns;
	if (r->conns != NULL)
		r->conns->pprev = &k->next;
	r->conns = k;
	/* A client that sent its request with the handshake: MHD reads it
	 * before the loop runs again, so it is looked at now. */
	rest_head_watch(r, k);
	rest_head_peek(r, k);
}

/* Close what is past its deadline. shutdown, not close: the fd stays
 * MHD's, which sees the end of the stream and cleans up as usual. */
void
rest_conns_sweep(struct weir_rest *r)
{
	uint64_t now = rest_mono_ms();

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
enum MHD_Result
rest_on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
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

