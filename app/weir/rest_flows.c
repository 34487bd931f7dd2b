/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the REST API's GET /api/v1/flows: the flow tables walked with a
 * filter, a limit and a cursor.
 */
#include "rest_int.h"

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

const char *
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

json_t *
endpoint_json(const struct weir_flow_key *k, bool hi, uint16_t port)
{
	char buf[INET6_ADDRSTRLEN];

	inet_ntop(k->family == 6 ? AF_INET6 : AF_INET, hi ? k->addr_hi : k->addr_lo, buf,
		  sizeof(buf));
	return json_pack("{s:s, s:i}", "addr", buf, "port", (int)port);
}

/* Microseconds as milliseconds, null for "no sample". */
json_t *
json_ms(uint32_t us, bool have)
{
	return have ? json_real((double)us / 1000.0) : json_null();
}

/* What the LAN (d OUT) or WAN host sent, as measured (lib/worker/tcpmeas.h). */
static void
tcp_sent_json(json_t *o, const struct weir_tcp_sent_view *s)
{
	json_object_set_new(o, "retrans_segs", json_integer(s->retrans_segs));
	json_object_set_new(o, "retrans_bytes", json_integer((json_int_t)s->retrans_bytes));
	json_object_set_new(o, "ooo", json_integer(s->ooo));
	json_object_set_new(o, "dupacks", json_integer(s->dupacks));
}

/* The flow's round trips each side of weir (null: no sample yet). */
static void
tcp_rtt_json(json_t *o, const struct weir_tcp_view *t)
{
	json_object_set_new(o, "rtt_lan_ms", json_ms(t->lan.rtt_us, t->lan.samples != 0));
	json_object_set_new(o, "rtt_wan_ms", json_ms(t->wan.rtt_us, t->wan.samples != 0));
	json_object_set_new(o, "rtt_lan_min_ms", json_ms(t->lan.rtt_min_us, t->lan.samples != 0));
	json_object_set_new(o, "rtt_wan_min_ms", json_ms(t->wan.rtt_min_us, t->wan.samples != 0));
	json_object_set_new(o, "srtt_lan_ms", json_ms(t->lan.srtt_us, t->lan.samples != 0));
	json_object_set_new(o, "srtt_wan_ms", json_ms(t->wan.srtt_us, t->wan.samples != 0));
	json_object_set_new(o, "rtt_lan_samples", json_integer(t->lan.samples));
	json_object_set_new(o, "rtt_wan_samples", json_integer(t->wan.samples));
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
	/* A measured TCP flow (stats.tcp_measure): round trips each side, and
	 * what each host sent again, in its direction's object. */
	if (k->proto == IPPROTO_TCP) {
		struct weir_tcp_view t;

		if (weir_worker_tcp_view(fw->w, slot, f, &t) == 0) {
			tcp_rtt_json(o, &t);
			tcp_sent_json(json_object_get(o, "out"), &t.out);
			tcp_sent_json(json_object_get(o, "in"), &t.in);
		}
	}
	/* An IPsec SA: its "ports" are the SPI's halves; name the SA. */
	if (k->vlan & WEIR_FK_SA)
		json_object_set_new(o, "spi", json_integer((json_int_t)weir_flow_key_spi(k)));
	json_array_append_new(fw->list, o);
	return 1;
}

bool
rest_parse_uint(const char *s, uint64_t max, uint64_t *out)
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
	     uint64_t *limit, uint64_t *offset, bool *by_cursor, uint64_t *cursor, struct rest_reply *r)
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
	if (v != NULL && !rest_parse_uint(v, UINT64_MAX, cursor)) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "'cursor' must be 0 or a 'next' of an earlier "
			    "listing");
		return -1;
	}
	/* A well-formed position that is in no table (another weir's, or
	 * made up): 422, as the schema cannot say which positions exist. */
	if (v != NULL && ((*cursor >> 32) > a->n_workers ||
			  ((*cursor >> 32) == a->n_workers && (uint32_t)*cursor != 0) ||
			  ((*cursor >> 32) < a->n_workers &&
			   (uint32_t)*cursor > weir_flow_table_capacity(a->flows[*cursor >> 32])))) {
		rest_reply_error(r, MHD_HTTP_UNPROCESSABLE_CONTENT, "'cursor' %s is no position in the "
			    "flow tables: it must be 0 or a 'next' of an earlier listing", v);
		return -1;
	}
	/* With a cursor, offset skips that many matching flows past it, as
	 * it does from the start without one. */
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
	if (v != NULL && (!rest_parse_uint(v, FLOWS_LIMIT_MAX, limit) || *limit == 0)) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "'limit' must be an integer from 1 to %d",
			    FLOWS_LIMIT_MAX);
		return -1;
	}
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset");
	if (v != NULL && !rest_parse_uint(v, UINT32_MAX, offset)) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "'offset' must be a non-negative integer");
		return -1;
	}
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "port");
	if (v != NULL) {
		if (!rest_parse_uint(v, 65535, &u)) {
			rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "'port' must be an integer from 0 to 65535");
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
			if (!rest_parse_uint(v, 255, &u)) {
				rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "'proto' must be tcp, udp, icmp, "
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
			if (!rest_parse_uint(slash + 1, maxbits, &u))
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
			rest_reply_error(r, MHD_HTTP_NOT_FOUND, "no class '%s' in the policy in force", v);
			return -1;
		}
		flt->by_class = true;
	}
	return 0;
bad_host:
	rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "'host' must be an IPv4 or IPv6 address, "
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
void
rest_h_flows(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
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
		rest_reply_json(r, json_pack("{s:I, s:I, s:o, s:o}", "cursor", (json_int_t)cursor,
					"limit", (json_int_t)fw.limit,
					"next", more ? json_integer((json_int_t)next) : json_null(),
					"flows", fw.list));
		return;
	}
	rest_reply_json(r, json_pack("{s:I, s:I, s:I, s:o}", "total", (json_int_t)fw.matched,
				"offset", (json_int_t)fw.offset, "limit", (json_int_t)fw.limit,
				"flows", fw.list));
}
