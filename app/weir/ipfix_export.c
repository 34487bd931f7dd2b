/* SPDX-License-Identifier: BSD-3-Clause
 * weir: IPFIX export (ipfix_export.h). Records are built by lib/observe/ipfix.c;
 * this file decides when and sends them.
 *
 * Counts are deltas (octetDeltaCount): a long flow is reported every
 * active timeout with what it did since its last report, and once more
 * when it ends with the rest, so a collector's sum over a flow's records
 * is the flow's total. What was reported of each live flow is kept per
 * worker and slot (40 bytes a slot), checked against the flow's first_tsc
 * (a slot is reused by later flows).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_log.h>
#include <rte_ring_elem.h>

#include "config_export.h"
#include "ipfix.h"
#include "ipfix_export.h"
#include "text.h"
#include "subscriber.h"
#include "worker_view.h"

/* Flow slots the active-timeout scan reads per worker and wake: a scan of
 * a million-flow table is spread over wakes, not one long stop. */
#define SCAN_SLICE 8192

struct reported {
	uint64_t first_tsc;     /* the flow these are of (0: none) */
	uint64_t bytes[2];      /* by enum weir_dir, reported so far */
	uint32_t pkts[2];
};

struct weir_ipfix {
	int fd;
	uint32_t seq;                   /* data records sent before the next message */
	uint64_t hz, tsc0;
	int64_t wall0_ms;               /* Unix ms at tsc0 */
	uint64_t next_templates, next_scan;
	bool scanning;
	uint32_t scan_pos[WEIR_MAX_WORKERS];
	struct reported *rep[WEIR_MAX_WORKERS];
	uint32_t cap[WEIR_MAX_WORKERS];
	struct weir_ipfix_msg msg;
	/* Policy target -> subscriber index (WEIR_SUB_NONE: none) of the
	 * policy of epoch sub_epoch; rebuilt when the policy changes. */
	uint32_t *target_sub;
	uint32_t sub_epoch;
	/* counters */
	uint64_t records, active_records, messages, templates, send_errors, bytes_sent;
	int last_errno;
};

static int64_t
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t
tsc_ms(const struct weir_ipfix *x, uint64_t tsc)
{
	int64_t d = (int64_t)(tsc - x->tsc0);

	return (uint64_t)(x->wall0_ms + d / (int64_t)(x->hz / 1000));
}

static void
send_msg(struct weir_ipfix *x, struct weir_app *a)
{
	size_t len;

	if (x->msg.len <= 16)
		return;
	len = weir_ipfix_msg_end(&x->msg, (uint32_t)(wall_ms() / 1000), x->seq,
				 a->cfg.ipfix_domain);
	x->seq += x->msg.records;       /* RFC 7011: counts data records, sent or not */
	if (send(x->fd, x->msg.buf, len, MSG_DONTWAIT) != (ssize_t)len) {
		x->send_errors++;
		x->last_errno = errno;
	} else {
		x->messages++;
		x->bytes_sent += len;
	}
	weir_ipfix_msg_begin(&x->msg, a->cfg.ipfix_pen);
}

static void
add_record(struct weir_ipfix *x, struct weir_app *a, const struct weir_ipfix_flow *f)
{
	if (weir_ipfix_msg_record(&x->msg, f) < 0) {
		send_msg(x, a);
		(void)weir_ipfix_msg_record(&x->msg, f);
	}
	x->records++;
}

/* Target -> subscriber of policy p (its one mapping, sub_target, turned
 * round); false without subscribers or memory. */
static bool
target_subs(struct weir_ipfix *x, const struct weir_policy *p)
{
	uint32_t *map, n;

	if (p->subs == NULL || p->sub_target == NULL)
		return false;
	if (x->target_sub != NULL && x->sub_epoch == p->epoch)
		return true;
	free(x->target_sub);
	x->target_sub = map = malloc(((size_t)p->n_targets + 1) * sizeof(*map));
	if (map == NULL)
		return false;
	for (uint32_t t = 0; t < p->n_targets; t++)
		map[t] = WEIR_SUB_NONE;
	n = weir_subs_count(p->subs);
	for (uint32_t i = 0; i < n; i++)
		if (p->sub_target[i] < p->n_targets)
			map[p->sub_target[i]] = i;
	x->sub_epoch = p->epoch;
	return true;
}

/* The class of target t under the policy in force (outbound leaf, else
 * inbound), and its subscriber if it is one's. */
static void
class_of(struct weir_ipfix *x, const struct weir_app *a, uint32_t epoch, uint16_t t,
	 struct weir_ipfix_flow *r)
{
	const struct weir_policy *p = a->cfg.policy;

	if (p == NULL || epoch != p->epoch || t >= p->n_targets)
		return;
	r->class_id = t;
	if (target_subs(x, p) && x->target_sub[t] != WEIR_SUB_NONE)
		snprintf(r->subscriber, sizeof(r->subscriber), "%s",
			 weir_subs_get(p->subs, x->target_sub[t])->id);
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		uint32_t leaf = p->targets[t].leaf[d];

		if (leaf != WEIR_CBQ_NONE) {
			snprintf(r->class_name, sizeof(r->class_name), "%s",
				 p->tree[d].classes[leaf].name);
			return;
		}
	}
}

/* Fill r's endpoints and counts from the LAN/WAN view of a flow; `init_in`
 * says the WAN side opened it (then it is the forward direction's source). */
static void
endpoints(struct weir_ipfix_flow *r, bool init_in, const uint8_t *lan, uint16_t lan_port,
	  const uint8_t *wan, uint16_t wan_port, const uint64_t bytes[2], const uint64_t pkts[2])
{
	const int fwd = init_in ? WEIR_DIR_IN : WEIR_DIR_OUT;

	memcpy(r->src, init_in ? wan : lan, 16);
	memcpy(r->dst, init_in ? lan : wan, 16);
	r->sport = init_in ? wan_port : lan_port;
	r->dport = init_in ? lan_port : wan_port;
	r->octets = bytes[fwd];
	r->packets = pkts[fwd];
	r->rev_octets = bytes[fwd ^ 1];
	r->rev_packets = pkts[fwd ^ 1];
}

/* The TCP measurement of the flow in slot of worker wi that began at
 * first_tsc, if the worker has it: smoothed round trips each side, the
 * segments each way sent again (the flow's totals so far). */
static void
measured(const struct weir_app *a, unsigned int wi, uint32_t slot, uint64_t first_tsc,
	 bool init_in, struct weir_ipfix_flow *r)
{
	struct weir_flow f = { .first_tsc = first_tsc };
	struct weir_tcp_view t;

	if (r->proto != IPPROTO_TCP || weir_worker_tcp_view(a->workers[wi], slot, &f, &t) != 0)
		return;
	r->has_meas = true;
	r->rtt_lan_us = t.lan.srtt_us;
	r->rtt_wan_us = t.wan.srtt_us;
	r->retrans_pkts = init_in ? t.in.retrans_segs : t.out.retrans_segs;
	r->rev_retrans_pkts = init_in ? t.out.retrans_segs : t.in.retrans_segs;
}

/* What of flow (first_tsc, totals) is not reported yet; updates the mark. */
static void
delta(struct reported *rp, uint64_t first_tsc, const uint64_t bytes[2], const uint32_t pkts[2],
      uint64_t db[2], uint64_t dp[2], bool end)
{
	const bool known = rp != NULL && rp->first_tsc == first_tsc;

	for (int d = 0; d < 2; d++) {
		db[d] = bytes[d] - (known ? rp->bytes[d] : 0);
		dp[d] = pkts[d] - (known ? rp->pkts[d] : 0);
	}
	if (rp == NULL)
		return;
	if (end) {
		if (known)
			rp->first_tsc = 0;
		return;
	}
	rp->first_tsc = first_tsc;
	memcpy(rp->bytes, bytes, sizeof(rp->bytes));
	memcpy(rp->pkts, pkts, sizeof(rp->pkts));
}

void
weir_ipfix_flow_end(struct weir_app *a, unsigned int wi, const struct weir_flow_event *ev)
{
	struct weir_ipfix *x = a->ipfix;
	/* A TCP flow that saw a FIN or RST ended; the rest went idle. */
	struct weir_ipfix_flow r = { .family = ev->family, .proto = ev->proto,
				     .end_reason = ev->proto == IPPROTO_TCP &&
				     ev->state >= WEIR_FS_FIN_WAIT ? WEIR_IPFIX_END_FLOW :
				     WEIR_IPFIX_END_IDLE };
	uint64_t db[2], dp[2];

	if (x == NULL || ev->type != WEIR_FEV_END)
		return;
	delta(ev->slot < x->cap[wi] ? &x->rep[wi][ev->slot] : NULL, ev->first_tsc, ev->bytes,
	      ev->pkts, db, dp, true);
	endpoints(&r, ev->init_dir == WEIR_DIR_IN, ev->lan, ev->lan_port, ev->wan, ev->wan_port,
		  db, dp);
	r.start_ms = tsc_ms(x, ev->first_tsc);
	r.end_ms = tsc_ms(x, ev->last_tsc);
	measured(a, wi, ev->slot, ev->first_tsc, ev->init_dir == WEIR_DIR_IN, &r);
	class_of(x, a, ev->epoch, ev->target, &r);
	add_record(x, a, &r);
}

/* One live flow read by the scan: a record if it is older than the active
 * timeout (or weir stops: forced) and did something since its last report. */
static void
scan_flow(struct weir_app *a, unsigned int wi, uint32_t slot, const struct weir_flow *f,
	  const struct weir_flow_key *k, uint64_t now, bool forced)
{
	struct weir_ipfix *x = a->ipfix;
	const int hi = !!(f->shape & WEIR_FSH_LAN_HI);
	struct weir_ipfix_flow r = { .family = k->family, .proto = k->proto,
				     .end_reason = forced ? WEIR_IPFIX_END_FORCED :
				     WEIR_IPFIX_END_ACTIVE };
	uint64_t db[2], dp[2];
	struct reported *rp = &x->rep[wi][slot];

	if (!forced && now - f->first_tsc < (uint64_t)a->cfg.ipfix_active_s * x->hz)
		return;
	if (rp->first_tsc == f->first_tsc && rp->bytes[0] == f->bytes[0] &&
	    rp->bytes[1] == f->bytes[1])
		return;         /* nothing new since its last report */
	delta(rp, f->first_tsc, f->bytes, f->pkts, db, dp, false);
	endpoints(&r, f->shape & WEIR_FSH_INIT_IN, hi ? k->addr_hi : k->addr_lo,
		  hi ? k->port_hi : k->port_lo, hi ? k->addr_lo : k->addr_hi,
		  hi ? k->port_lo : k->port_hi, db, dp);
	r.start_ms = tsc_ms(x, f->first_tsc);
	r.end_ms = tsc_ms(x, f->last_tsc);
	measured(a, wi, slot, f->first_tsc, f->shape & WEIR_FSH_INIT_IN, &r);
	if (f->policy_epoch != 0 && a->cfg.policy != NULL)
		class_of(x, a, a->cfg.policy->epoch, f->class_id, &r);
	add_record(x, a, &r);
	x->active_records++;
}

/* A slice of the scan of every worker's table; false when it is done. */
static bool
scan_slice(struct weir_app *a, uint64_t now)
{
	struct weir_ipfix *x = a->ipfix;
	bool more = false;

	for (unsigned int i = 0; i < a->n_workers; i++) {
		uint32_t end = x->scan_pos[i] + SCAN_SLICE;

		while (x->scan_pos[i] < x->cap[i] && x->scan_pos[i] < end) {
			struct weir_flow f;
			struct weir_flow_key k;
			uint32_t s = weir_flow_read_next(a->flows[i], x->scan_pos[i], &f, &k);

			if (s >= x->cap[i] || s >= end) {
				x->scan_pos[i] = RTE_MIN(s, end);
				break;
			}
			scan_flow(a, i, s, &f, &k, now, false);
			x->scan_pos[i] = s + 1;
		}
		more |= x->scan_pos[i] < x->cap[i];
	}
	return more;
}

void
weir_ipfix_poll(struct weir_app *a)
{
	struct weir_ipfix *x = a->ipfix;
	uint64_t now = rte_rdtsc();

	if (x == NULL)
		return;
	if (now >= x->next_templates) {
		/* In a message of their own, ahead of the records that need them. */
		send_msg(x, a);
		if (weir_ipfix_msg_templates(&x->msg) == 0) {
			x->templates++;
			send_msg(x, a);
		}
		x->next_templates = now + (uint64_t)a->cfg.ipfix_template_s * x->hz;
	}
	if (!x->scanning && now >= x->next_scan) {
		x->scanning = true;
		memset(x->scan_pos, 0, sizeof(x->scan_pos));
		x->next_scan = now + (uint64_t)a->cfg.ipfix_active_s * x->hz;
	}
	if (x->scanning)
		x->scanning = scan_slice(a, now);
	send_msg(x, a);
}

void
weir_ipfix_flush(struct weir_app *a)
{
	struct weir_ipfix *x = a->ipfix;
	uint64_t now = rte_rdtsc();

	if (x == NULL)
		return;
	for (unsigned int i = 0; i < a->n_workers; i++) {
		struct weir_flow_event ev;
		struct weir_flow f;
		struct weir_flow_key k;

		/* Ends the hooks did not take yet, then every flow still live. */
		while (a->ev_ring[i] != NULL &&
		       rte_ring_sc_dequeue_elem(a->ev_ring[i], &ev, sizeof(ev)) == 0)
			weir_ipfix_flow_end(a, i, &ev);
		for (uint32_t s = weir_flow_read_next(a->flows[i], 0, &f, &k); s < x->cap[i];
		     s = weir_flow_read_next(a->flows[i], s + 1, &f, &k))
			scan_flow(a, i, s, &f, &k, now, true);
	}
	send_msg(x, a);
}

int
weir_ipfix_init(struct weir_app *a, char *err, size_t errlen)
{
	struct weir_ipfix *x;
	struct sockaddr_storage ss;
	socklen_t len;

	if (!a->cfg.ipfix)
		return 0;
	if (weir_collector_parse(a->cfg.ipfix_collector, &ss, &len, err, errlen) < 0)
		return -1;
	x = calloc(1, sizeof(*x));
	if (x == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	x->fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	/* connect: a UDP socket's destination, no packet sent; later sends
	 * report the collector's ICMP refusals as errors, counted. */
	if (x->fd < 0 || connect(x->fd, (struct sockaddr *)&ss, len) != 0) {
		snprintf(err, errlen, "%s:%d: export.ipfix: cannot open a socket to %s: %s",
			 a->cfg.path, a->cfg.ipfix_line, a->cfg.ipfix_collector, strerror(errno));
		if (x->fd >= 0)
			close(x->fd);
		free(x);
		return -1;
	}
	for (unsigned int i = 0; i < a->n_workers; i++) {
		x->cap[i] = weir_flow_table_capacity(a->flows[i]);
		x->rep[i] = calloc(x->cap[i], sizeof(*x->rep[i]));
		if (x->rep[i] == NULL) {
			snprintf(err, errlen, "export.ipfix: out of memory for %u flows", x->cap[i]);
			a->ipfix = x;
			weir_ipfix_free(a);
			return -1;
		}
	}
	x->hz = rte_get_tsc_hz();
	x->tsc0 = rte_rdtsc();
	x->wall0_ms = wall_ms();
	x->next_scan = x->tsc0 + (uint64_t)a->cfg.ipfix_active_s * x->hz;
	weir_ipfix_msg_begin(&x->msg, a->cfg.ipfix_pen);
	a->ipfix = x;
	RTE_LOG(NOTICE, USER1, "exporting IPFIX to %s (templates every %u s, active timeout %u s)\n",
		a->cfg.ipfix_collector, a->cfg.ipfix_template_s, a->cfg.ipfix_active_s);
	return 0;
}

json_t *
weir_ipfix_json(const struct weir_app *a)
{
	const struct weir_ipfix *x = a->ipfix;

	if (x == NULL)
		return json_null();
	return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s}",
			 "collector", a->cfg.ipfix_collector,
			 "records", (json_int_t)x->records,
			 "active_records", (json_int_t)x->active_records,
			 "messages", (json_int_t)x->messages,
			 "templates", (json_int_t)x->templates,
			 "bytes", (json_int_t)x->bytes_sent,
			 "send_errors", (json_int_t)x->send_errors,
			 "last_error", x->send_errors > 0 ? strerror(x->last_errno) : "");
}

void
weir_ipfix_free(struct weir_app *a)
{
	struct weir_ipfix *x = a->ipfix;

	if (x == NULL)
		return;
	if (x->fd >= 0)
		close(x->fd);
	for (unsigned int i = 0; i < WEIR_MAX_WORKERS; i++)
		free(x->rep[i]);
	free(x->target_sub);
	free(x);
	a->ipfix = NULL;
}
