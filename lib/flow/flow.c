/* SPDX-License-Identifier: BSD-3-Clause
 * weir: bidirectional flow table on librte_hash.
 *
 * Layout: rte_hash maps a canonical key to a stable slot position (its key
 * store index); struct weir_flow entries live in a parallel array indexed by
 * that position, plus a small per-slot side record (hash signature, liveness,
 * timeout class) that the expiry scan reads without touching the entry's
 * cache line for empty slots. A slot's position never moves while its key is
 * in the table: cuckoo displacement moves bucket references, not keys.
 */
#include <errno.h>
#include <string.h>
#include <netinet/in.h>

#include <rte_common.h>
#include <rte_branch_prediction.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>
#include <rte_lcore.h>

#include "flow.h"

/* The key is hashed and compared as raw bytes: any hole would hold garbage. */
_Static_assert(sizeof(struct weir_flow_key) == 48, "flow key must be 48 bytes, no padding");
_Static_assert(sizeof(struct weir_flow) == RTE_CACHE_LINE_SIZE, "flow entry must be one cache line");

/* Which idle timeout applies to a slot, beside the TCP states. */
enum {
	TO_UDP = WEIR_FS__COUNT,
	TO_OTHER,
	TO__COUNT
};

/* Per-slot record kept outside struct weir_flow (whose layout is public). */
struct flow_slot {
	hash_sig_t sig;         /* kept so deletion need not rehash the key */
	uint8_t live;           /* slot holds a key: the scan skips empty slots */
	uint8_t to_kind;        /* WEIR_FS_* for TCP (state read live), TO_UDP or TO_OTHER */
	uint16_t _pad;
};
#define SLOT_TCP 0xff           /* to_kind: use the flow's TCP state */

struct weir_flow_table {
	struct rte_hash *h;
	struct weir_flow *flows;        /* [capacity], indexed by hash position */
	struct flow_slot *slots;        /* [capacity] */
	uint32_t capacity;
	uint32_t cursor;                /* next slot the expiry scan examines */
	uint64_t timeout_tsc[TO__COUNT];
	size_t bytes_total;             /* heap bytes taken by create, all parts */
	struct weir_flow_stats stats;
};

static const char *const state_names[WEIR_FS__COUNT] = {
	[WEIR_FS_NONE] = "none",
	[WEIR_FS_SYN_SENT] = "syn_sent",
	[WEIR_FS_SYN_RECV] = "syn_recv",
	[WEIR_FS_ESTABLISHED] = "established",
	[WEIR_FS_FIN_WAIT] = "fin_wait",
	[WEIR_FS_CLOSING] = "closing",
	[WEIR_FS_CLOSED] = "closed",
};

const char *
weir_flow_state_name(unsigned int state)
{
	return state < WEIR_FS__COUNT ? state_names[state] : "?";
}

/* Heap bytes in use over every socket: the create-time delta is what the
 * table really costs (buckets, extendable buckets, key store, free-slot rings,
 * our arrays, and the allocator's element headers). */
static size_t
heap_in_use(void)
{
	size_t sum = 0;

	for (unsigned int i = 0; i < rte_socket_count(); i++) {
		struct rte_malloc_socket_stats s;

		if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(i), &s) == 0)
			sum += s.heap_allocsz_bytes;
	}
	return sum;
}

struct weir_flow_table *
weir_flow_table_create(const struct weir_flow_table_conf *conf)
{
	const struct weir_flow_timeouts *to = &conf->timeouts;
	size_t heap_before = heap_in_use();
	struct weir_flow_table *t;

	t = rte_zmalloc_socket("weir_flow_table", sizeof(*t), RTE_CACHE_LINE_SIZE, conf->socket_id);
	if (t == NULL)
		return NULL;

	struct rte_hash_parameters hp = {
		.name = conf->name,
		.entries = conf->capacity,
		.key_len = sizeof(struct weir_flow_key),
		/* The key is 48 bytes, a multiple of 8: CRC32 runs 8 bytes a step. */
		.hash_func = rte_hash_crc,
		.hash_func_init_val = 0x5eed1e55,
		.socket_id = conf->socket_id,
		/* Extendable buckets: every one of `entries` key slots can be used,
		 * so the capacity is exact and an insert fails only when full.
		 * No RW-concurrency flags: the owning worker is the only writer and
		 * the only reader. */
		.extra_flag = RTE_HASH_EXTRA_FLAGS_EXT_TABLE,
	};
	t->h = rte_hash_create(&hp);
	if (t->h == NULL)
		goto fail;
	t->flows = rte_zmalloc_socket("weir_flows", (size_t)conf->capacity * sizeof(struct weir_flow),
				      RTE_CACHE_LINE_SIZE, conf->socket_id);
	t->slots = rte_zmalloc_socket("weir_flow_slots", (size_t)conf->capacity * sizeof(struct flow_slot),
				      RTE_CACHE_LINE_SIZE, conf->socket_id);
	if (t->flows == NULL || t->slots == NULL)
		goto fail;
	t->capacity = conf->capacity;

	/* Seconds to TSC once here, so expiry compares without dividing. */
	const uint64_t hz = conf->tsc_hz;
	t->timeout_tsc[WEIR_FS_NONE] = hz * to->tcp_syn;   /* TCP inserted, not yet tracked */
	t->timeout_tsc[WEIR_FS_SYN_SENT] = hz * to->tcp_syn;
	t->timeout_tsc[WEIR_FS_SYN_RECV] = hz * to->tcp_syn;
	t->timeout_tsc[WEIR_FS_ESTABLISHED] = hz * to->tcp_established;
	t->timeout_tsc[WEIR_FS_FIN_WAIT] = hz * to->tcp_closing;
	t->timeout_tsc[WEIR_FS_CLOSING] = hz * to->tcp_closing;
	t->timeout_tsc[WEIR_FS_CLOSED] = hz * to->tcp_closed;
	t->timeout_tsc[TO_UDP] = hz * to->udp;
	t->timeout_tsc[TO_OTHER] = hz * to->other;

	/* Other threads allocating meanwhile would inflate this; tables are
	 * made at start-up, before workers run. */
	t->bytes_total = heap_in_use() - heap_before;
	return t;
fail:
	weir_flow_table_free(t);
	return NULL;
}

void
weir_flow_table_free(struct weir_flow_table *t)
{
	if (t == NULL)
		return;
	rte_hash_free(t->h);
	rte_free(t->flows);
	rte_free(t->slots);
	rte_free(t);
}

/* Copy an address of `len` (4 or 16) bytes; the key was zeroed. */
static inline void
addr_copy(uint8_t *dst, const uint8_t *src, unsigned int len)
{
	if (len == 4)
		memcpy(dst, src, 4);
	else
		memcpy(dst, src, 16);
}

static inline int
addr_cmp(const uint8_t *a, const uint8_t *b, unsigned int len)
{
	return len == 4 ? memcmp(a, b, 4) : memcmp(a, b, 16);
}

/* ICMP echo request/reply types: the identifier pairs them like a port. */
static inline int
icmp_is_echo(uint8_t proto, uint8_t type)
{
	if (proto == IPPROTO_ICMP)
		return type == 8 || type == 0;
	return type == 128 || type == 129;      /* ICMPv6 */
}

int
weir_flow_key_make(const uint8_t *frame, const struct weir_pkt *p, struct weir_flow_key *key)
{
	const unsigned int alen = p->addr_len;
	const uint8_t *src = frame + p->l3_off + p->saddr_off;
	const uint8_t *dst = src + alen;
	uint16_t sport = p->sport, dport = p->dport;
	int src_lo;

	if (p->l4proto == IPPROTO_ICMP || p->l4proto == IPPROTO_ICMPV6) {
		/* sport holds type<<8 | code; dport the echo identifier. Request
		 * and reply carry the same identifier, so it stands for both
		 * ports; other ICMP messages between two hosts share one flow. */
		if (icmp_is_echo(p->l4proto, (uint8_t)(sport >> 8)))
			sport = dport;
		else
			sport = dport = 0;
	}

	memset(key, 0, sizeof(*key));
	if (unlikely(p->ipsec != WEIR_IPSEC_NONE)) {
		/* An SA is one direction: (source, destination, SPI, VLAN,
		 * and for ESP in UDP its ports), not canonical; the two SAs
		 * of a tunnel pair by their endpoints (flow.h). */
		addr_copy(key->addr_lo, src, alen);
		addr_copy(key->addr_hi, dst, alen);
		key->port_lo = sport;
		key->port_hi = dport;
		key->vlan = (uint16_t)((p->vlan_outer & 0xfff) | WEIR_FK_SA);
		if (p->ipsec == WEIR_IPSEC_NATT) {
			/* sport:dport hold the SPI; the parser checked that
			 * the UDP header at l4_off lies in the frame. */
			const uint8_t *u = frame + p->l4_off;

			key->vlan |= WEIR_FK_NATT;
			key->natt_sport = (uint16_t)(u[0] << 8 | u[1]);
			key->natt_dport = (uint16_t)(u[2] << 8 | u[3]);
		}
		key->proto = p->l4proto;
		key->family = p->l3;
		return 1;
	}
	int c = addr_cmp(src, dst, alen);
	src_lo = c < 0 || (c == 0 && sport <= dport);
	if (src_lo) {
		addr_copy(key->addr_lo, src, alen);
		addr_copy(key->addr_hi, dst, alen);
		key->port_lo = sport;
		key->port_hi = dport;
	} else {
		addr_copy(key->addr_lo, dst, alen);
		addr_copy(key->addr_hi, src, alen);
		key->port_lo = dport;
		key->port_hi = sport;
	}
	key->vlan = p->vlan_outer & 0xfff;
	key->proto = p->l4proto;
	key->family = p->l3;
	return src_lo;
}

/* A slot just taken by rte_hash: reset its entry and side record. */
static inline struct weir_flow *
flow_init(struct weir_flow_table *t, int32_t pos, const struct weir_flow_key *key,
	  hash_sig_t sig, uint64_t now)
{
	struct weir_flow *f = &t->flows[pos];
	struct flow_slot *s = &t->slots[pos];

	memset(f, 0, sizeof(*f));
	f->first_tsc = now;
	f->last_tsc = now;
	f->state = WEIR_FS_NONE;
	/* Unknown until a SYN announces them (mid-stream pickups never learn). */
	f->wscale[0] = f->wscale[1] = WEIR_WSCALE_NONE;
	s->sig = sig;
	s->live = 1;
	s->to_kind = key->proto == IPPROTO_TCP ? SLOT_TCP :
		     key->proto == IPPROTO_UDP ? TO_UDP : TO_OTHER;
	t->stats.inserted++;
	t->stats.active++;
	return f;
}

void
weir_flow_lookup_bulk(struct weir_flow_table *t, const struct weir_flow_key *keys,
		      unsigned int n, uint64_t now, struct weir_flow *out[])
{
	const void *kp[WEIR_FLOW_BULK_MAX];
	hash_sig_t sig[WEIR_FLOW_BULK_MAX];
	int32_t pos[WEIR_FLOW_BULK_MAX];
	uint8_t uidx[WEIR_FLOW_BULK_MAX];       /* packet i's key is unique key uidx[i] */
	uint8_t first[WEIR_FLOW_BULK_MAX];      /* unique key u's first packet */
	unsigned int nu = 0;

	if (unlikely(n == 0))
		return;
	/* A burst often carries runs of one flow (a TCP sender's window, its
	 * ACKs): a packet with the key of the one before it shares its lookup,
	 * so it is neither hashed nor looked up again. Hash once: the
	 * signature serves the lookup, any insert, and the delete at expiry. */
	for (unsigned int i = 0; i < n; i++) {
		if (i > 0 && memcmp(&keys[i], &keys[i - 1], sizeof(keys[i])) == 0) {
			uidx[i] = uidx[i - 1];
			continue;
		}
		uidx[i] = (uint8_t)nu;
		first[nu] = (uint8_t)i;
		kp[nu] = &keys[i];
		sig[nu] = rte_hash_hash(t->h, &keys[i]);
		nu++;
	}
	rte_hash_lookup_with_hash_bulk(t->h, kp, sig, nu, pos);
	t->stats.lookups += n;

	for (unsigned int u = 0; u < nu; u++) {
		int32_t p = pos[u];
		unsigned int i = first[u];

		if (likely(p >= 0)) {
			out[i] = &t->flows[p];
			rte_prefetch0(out[i]);
			continue;
		}
		/* A miss. If an earlier packet of this burst carried the same new
		 * key, add returns that key's position (it searches before taking
		 * a free slot) and the slot is already live: not a new flow. */
		p = rte_hash_add_key_with_hash(t->h, kp[u], sig[u]);
		out[i] = p < 0 ? NULL : t->slots[p].live ? &t->flows[p] : flow_init(t, p, kp[u], sig[u], now);
	}
	for (unsigned int i = 0; i < n; i++) {
		out[i] = out[first[uidx[i]]];
		if (unlikely(out[i] == NULL))
			t->stats.full++;
	}
}

/* Serial-number compare (RFC 1982): a at or after b. */
static inline int
seq_geq(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) >= 0;
}

/* A new connection on a closed 4-tuple: forget the old one's history, and
 * have it classified again as the new flow it is (class_id and shape stay:
 * the worker needs them to find what the old connection still has queued). */
static void
flow_restart(struct weir_flow *f, uint64_t now)
{
	f->policy_epoch = 0;
	f->first_tsc = now;
	f->bytes[0] = f->bytes[1] = 0;
	f->pkts[0] = f->pkts[1] = 0;
	f->fin_seq[0] = f->fin_seq[1] = 0;
	f->flags = 0;
	f->wscale[0] = f->wscale[1] = WEIR_WSCALE_NONE;
	f->mss[0] = f->mss[1] = 0;
	f->state = WEIR_FS_NONE;
}

static void
tcp_track(struct weir_flow *f, const struct weir_pkt *p, enum weir_dir dir)
{
	const uint8_t fl = p->tcp_flags;
	const unsigned int other = dir ^ 1;
	const uint8_t fin_me = dir == WEIR_DIR_OUT ? WEIR_FF_FIN_OUT : WEIR_FF_FIN_IN;
	const uint8_t fin_other = dir == WEIR_DIR_OUT ? WEIR_FF_FIN_IN : WEIR_FF_FIN_OUT;
	const uint8_t acked_other = dir == WEIR_DIR_OUT ? WEIR_FF_FIN_IN_ACKED : WEIR_FF_FIN_OUT_ACKED;

	if (fl & WEIR_TCP_RST) {
		f->state = WEIR_FS_CLOSED;
		return;
	}
	if (fl & WEIR_TCP_SYN) {
		/* The options that matter later (window rewrite, ACK pacing) are
		 * only announced on SYNs; keep the latest per sender. */
		f->wscale[dir] = p->wscale;
		f->mss[dir] = p->mss;
		if (!(fl & WEIR_TCP_ACK)) {
			if (f->state == WEIR_FS_NONE)
				f->state = WEIR_FS_SYN_SENT;
			/* A retransmitted SYN leaves SYN_SENT/SYN_RECV as they are;
			 * a SYN in a live connection is not a new one. */
		} else if (f->state == WEIR_FS_NONE || f->state == WEIR_FS_SYN_SENT) {
			if (f->state == WEIR_FS_NONE)
				f->flags |= WEIR_FF_MIDSTREAM;  /* the SYN went elsewhere */
			f->state = WEIR_FS_SYN_RECV;
		}
		return;
	}

	switch (f->state) {
	case WEIR_FS_NONE:
		/* First packet not a SYN: picked up mid-stream (after a
		 * restart or an eviction, or its opening went to another
		 * worker). */
		f->state = WEIR_FS_ESTABLISHED;
		/* A FIN or RST picked up so is what is left of a connection whose
		 * entry expired, not one split across workers. */
		if (!(fl & (WEIR_TCP_FIN | WEIR_TCP_RST)))
			f->flags |= WEIR_FF_MIDSTREAM;
		break;
	case WEIR_FS_SYN_SENT:  /* SYN+ACK went by another path or was lost */
	case WEIR_FS_SYN_RECV:
		if (fl & WEIR_TCP_ACK)
			f->state = WEIR_FS_ESTABLISHED;
		break;
	case WEIR_FS_CLOSED:
		return;         /* late segments: stay closed until a new SYN */
	default:
		break;
	}

	if ((fl & WEIR_TCP_FIN) && !(f->flags & fin_me) && f->state >= WEIR_FS_ESTABLISHED) {
		/* The FIN takes one sequence number after the payload. */
		f->fin_seq[dir] = p->seq + p->payload_len + 1;
		f->flags |= fin_me;
		f->state = (f->flags & fin_other) ? WEIR_FS_CLOSING : WEIR_FS_FIN_WAIT;
	}
	if ((fl & WEIR_TCP_ACK) && (f->flags & fin_other) && seq_geq(p->ack, f->fin_seq[other]))
		f->flags |= acked_other;
	if ((f->flags & (WEIR_FF_FIN_OUT_ACKED | WEIR_FF_FIN_IN_ACKED)) ==
	    (WEIR_FF_FIN_OUT_ACKED | WEIR_FF_FIN_IN_ACKED))
		f->state = WEIR_FS_CLOSED;
}

void
weir_flow_track(struct weir_flow *f, const struct weir_pkt *p, enum weir_dir dir,
		uint32_t wire_len, uint64_t now)
{
	const int tcp = p->l4proto == IPPROTO_TCP;

	if (tcp && unlikely(f->state == WEIR_FS_CLOSED) &&
	    (p->tcp_flags & (WEIR_TCP_SYN | WEIR_TCP_ACK | WEIR_TCP_RST)) == WEIR_TCP_SYN)
		flow_restart(f, now);

	weir_flow_touch(f, dir, wire_len, now);
	if (tcp) {
		if (unlikely(p->flags & WEIR_PF_TCP_SIGNED))
			f->flags |= WEIR_FF_TCP_SIGNED;
		tcp_track(f, p, dir);
	} else if ((f->flags & (WEIR_FF_SEEN_OUT | WEIR_FF_SEEN_IN)) == (WEIR_FF_SEEN_OUT | WEIR_FF_SEEN_IN))
		f->flags |= WEIR_FF_REPLIED;
}

static inline uint64_t
flow_timeout(const struct weir_flow_table *t, const struct flow_slot *s, const struct weir_flow *f)
{
	return t->timeout_tsc[s->to_kind == SLOT_TCP ? f->state : s->to_kind];
}

/* Hand the flow to the callback, then remove its key (the key pointer the
 * callback sees stays valid until the delete). */
static void
flow_remove(struct weir_flow_table *t, uint32_t pos, weir_flow_evict_cb cb, void *arg)
{
	struct flow_slot *s = &t->slots[pos];
	void *key = NULL;

	if (rte_hash_get_key_with_position(t->h, (int32_t)pos, &key) != 0) {
		s->live = 0;    /* cannot happen while `live` mirrors the hash */
		return;
	}
	if (cb != NULL)
		cb(&t->flows[pos], key, arg);
	rte_hash_del_key_with_hash(t->h, key, s->sig);
	s->live = 0;
	t->stats.expired++;
	t->stats.active--;
}

unsigned int
weir_flow_expire(struct weir_flow_table *t, uint64_t now, unsigned int budget,
		 weir_flow_evict_cb cb, void *arg)
{
	uint32_t pos = t->cursor;
	unsigned int removed = 0;

	if (budget > t->capacity)
		budget = t->capacity;
	for (unsigned int i = 0; i < budget; i++) {
		const struct flow_slot *s = &t->slots[pos];

		if (s->live) {
			const struct weir_flow *f = &t->flows[pos];

			/* `now` may trail a packet's time (clocks read at different
			 * points of the loop): never expire what is not yet idle. */
			if (now > f->last_tsc && now - f->last_tsc > flow_timeout(t, s, f)) {
				flow_remove(t, pos, cb, arg);
				removed++;
			}
		}
		if (++pos == t->capacity)
			pos = 0;
	}
	t->cursor = pos;
	return removed;
}

int
weir_flow_walk(const struct weir_flow_table *t, weir_flow_walk_fn fn, void *arg)
{
	const void *key;
	void *data;
	uint32_t next = 0;
	int32_t pos;

	while ((pos = rte_hash_iterate(t->h, &key, &data, &next)) >= 0) {
		int rc = fn(&t->flows[pos], key, arg);

		if (rc != 0)
			return rc;
	}
	return 0;
}

uint32_t
weir_flow_read_next(const struct weir_flow_table *t, uint32_t from, struct weir_flow *f,
		    struct weir_flow_key *key)
{
	for (uint32_t pos = from; pos < t->capacity; pos++) {
		const uint64_t *src = (const uint64_t *)&t->flows[pos];
		uint64_t *dst = (uint64_t *)f;
		uint64_t first;
		void *k;

		if (!__atomic_load_n(&t->slots[pos].live, __ATOMIC_ACQUIRE))
			continue;
		first = __atomic_load_n(&t->flows[pos].first_tsc, __ATOMIC_ACQUIRE);
		if (rte_hash_get_key_with_position(t->h, (int32_t)pos, &k) != 0)
			continue;
		memcpy(key, k, sizeof(*key));
		for (size_t i = 0; i < sizeof(*f) / sizeof(*dst); i++)
			dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
		/* Everything above is read before the second look. */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (!__atomic_load_n(&t->slots[pos].live, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&t->flows[pos].first_tsc, __ATOMIC_RELAXED) != first ||
		    f->first_tsc != first)
			continue;
		return pos;
	}
	return t->capacity;
}

const struct weir_flow_stats *
weir_flow_table_stats(const struct weir_flow_table *t)
{
	return &t->stats;
}

size_t
weir_flow_table_bytes_per_flow(const struct weir_flow_table *t)
{
	return t->capacity ? t->bytes_total / t->capacity : 0;
}

uint32_t
weir_flow_slot(const struct weir_flow_table *t, const struct weir_flow *f)
{
	return (uint32_t)(f - t->flows);
}

struct weir_flow *
weir_flow_by_slot(struct weir_flow_table *t, uint32_t slot)
{
	return &t->flows[slot];
}

uint32_t
weir_flow_table_capacity(const struct weir_flow_table *t)
{
	return t->capacity;
}
