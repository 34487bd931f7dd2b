/* SPDX-License-Identifier: BSD-3-Clause
 * weir: packet captures (captures.h, docs/capture.md).
 *
 * Taps. The filters of the running captures are one tap, posted to every
 * worker; starting or ending a capture posts a new one. A replaced tap (and
 * the BPF programs of captures that ended with it) is freed only once every
 * worker has taken its successor: a worker may be in the middle of a burst
 * with it. Each capture has a slot (a bit in the records) from the tap that
 * first carried it on; records of older taps are not its.
 *
 * Writing. At each wake the rings are drained (a bounded number of records
 * per worker) and each capture's records are written with one writev: the
 * file is a local file in the page cache, so a write is a copy, not a wait
 * on the disk. The management lcore never waits for a worker or a ring.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <rte_bpf.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_pcapng.h>
#include <rte_pdump.h>
#include <rte_ring_elem.h>

#include "capture.h"
#include "captures.h"
#include "policy.h"
#include "policy_subs.h"
#include "worker_view.h"

#define CAPTURES_KEPT 16                /* running and ended captures listed at once */
#define DRAIN_PER_WAKE 1024             /* records taken from each ring per wake */
#define SNAP_MIN 64
#define SNAP_MAX 2048                   /* one copy-pool segment */
#define SNAP_DEFAULT 256
#define PKTS_MAX 10000000ull
#define PKTS_DEFAULT 10000ull
#define SECONDS_MAX 86400.0
#define SECONDS_DEFAULT 60.0
#define BYTES_DEFAULT (16ull << 20)
#define COMMENT_MAX 160                 /* bytes of a packet's comment */
#define RETIRED_MAX 64

struct capture {
	bool used, running;
	uint32_t id;
	int slot;
	uint16_t gen_from;              /* records of taps from this generation on are its */
	char end_reason[160];
	json_t *filter_json;            /* as asked */
	char cls[64];                   /* the class filter's name ("" = none) */
	bool cls_missing;               /* the policy in force has no such class */
	struct weir_cap_filter filter;
	uint64_t max_pkts, max_bytes;
	double max_s;
	uint32_t snap;
	uint64_t pkts, bytes;           /* written */
	uint64_t pkts_by[WEIR_PORT__COUNT];
	uint64_t verdicts[WEIR_CAPV__COUNT];
	uint64_t lost_base[WEIR_MAX_WORKERS], lost;
	uint64_t start_tsc, end_tsc;
	int64_t start_ns;
	uint64_t remove_tsc;            /* ended: its file is removed then */
	char path[4200];
	rte_pcapng_t *pc;
};

struct retired {
	struct weir_cap_tap *tap;
	const struct rte_bpf *bpf[CAPTURES_KEPT];
};

struct weir_captures {
	struct capture c[CAPTURES_KEPT];
	uint32_t next_id;
	uint16_t gen;
	uint32_t epoch;                 /* of the policy the tap's classes are of */
	struct rte_mempool *copy_pool, *epb_pool;
	struct rte_ring *ring[WEIR_MAX_WORKERS];
	struct weir_cap_tap *tap;       /* posted (NULL: none) */
	struct retired retired[RETIRED_MAX];
	unsigned int n_retired;
	const struct rte_bpf *orphan[CAPTURES_KEPT];    /* of ended captures, for the next retire */
	bool dir_ok;
	bool repost;                    /* a tap is owed (the retired list was full) */
	bool stopping;                  /* the workers have stopped: nothing to wait for */
	bool pdump;
	uint64_t started, refused, records, stray;
};

static struct capture *
by_id(struct weir_captures *k, const char *id)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(id, &end, 10);
	if (*id == '\0' || *end != '\0' || errno != 0 || v > UINT32_MAX)
		return NULL;
	for (int i = 0; i < CAPTURES_KEPT; i++)
		if (k->c[i].used && k->c[i].id == v)
			return &k->c[i];
	return NULL;
}

/* ---- taps ---- */

static void
free_bpfs(const struct rte_bpf **b, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		if (b[i] != NULL)
			rte_bpf_destroy((struct rte_bpf *)(uintptr_t)b[i]);
		b[i] = NULL;
	}
}

/* Leaf index of class `name` in direction d under p, WEIR_CBQ_NONE if none. */
static uint32_t
leaf_of(const struct weir_policy *p, int d, const char *name)
{
	int k = p != NULL ? weir_policy_class_find(p, d, name) : -1;

	return k >= 0 && p->tree[d].classes[k].is_leaf ? (uint32_t)k : WEIR_CBQ_NONE;
}

/* Post a tap of the running captures' filters (none: NULL); the old one
 * and the programs of captures that ended are retired. */
static void
post_tap(struct weir_app *a)
{
	struct weir_captures *k = a->captures;
	const struct weir_policy *p = a->cfg.policy;
	struct weir_cap_tap *t = NULL;
	unsigned int n = 0;

	/* Workers that have not taken the last taps yet: this one waits
	 * (ended captures' frames are not written meanwhile). */
	if (k->n_retired >= RETIRED_MAX && !k->stopping) {
		k->repost = true;
		return;
	}
	k->repost = false;
	for (int i = 0; i < CAPTURES_KEPT; i++)
		n += k->c[i].used && k->c[i].running;
	k->gen++;
	if (n > 0) {
		t = calloc(1, sizeof(*t));
		if (t == NULL)
			return;         /* the old tap stays: captures go on as they were */
		t->gen = k->gen;
		for (int i = 0; i < CAPTURES_KEPT; i++) {
			struct capture *c = &k->c[i];
			struct weir_cap_filter *f;

			if (!c->used || !c->running)
				continue;
			f = &t->filter[t->n];
			*f = c->filter;
			if (c->cls[0] != '\0') {
				for (int d = 0; d < WEIR_PORT__COUNT; d++)
					f->cls[d] = leaf_of(p, d, c->cls);
				c->cls_missing = f->cls[0] == WEIR_CBQ_NONE && f->cls[1] == WEIR_CBQ_NONE;
			}
			t->slot[t->n++] = (uint8_t)c->slot;
			t->snap = RTE_MAX(t->snap, c->snap);
		}
	}
	k->epoch = p != NULL ? p->epoch : 0;
	if (k->stopping) {
		free_bpfs(k->orphan, CAPTURES_KEPT);
		free(k->tap);
	} else if (k->tap != NULL || k->orphan[0] != NULL) {
		struct retired *r = &k->retired[k->n_retired++];

		r->tap = k->tap;
		memcpy(r->bpf, k->orphan, sizeof(r->bpf));
		memset(k->orphan, 0, sizeof(k->orphan));
	}
	k->tap = t;
	for (unsigned int i = 0; i < a->n_workers; i++)
		weir_worker_cap_post(a->workers[i], t);
}

/* Free what no worker uses any more: every tap before the one posted, once
 * every worker has taken that one. */
static void
retire(struct weir_app *a)
{
	struct weir_captures *k = a->captures;

	if (k->n_retired == 0)
		return;
	for (unsigned int i = 0; i < a->n_workers; i++)
		if (!weir_worker_cap_taken(a->workers[i], k->tap))
			return;
	for (unsigned int r = 0; r < k->n_retired; r++) {
		free_bpfs(k->retired[r].bpf, CAPTURES_KEPT);
		free(k->retired[r].tap);
	}
	k->n_retired = 0;
}

/* ---- the files ---- */

/* Append a comment option (opt_comment, code 1) to the Enhanced Packet
 * Block rte_pcapng_copy made, and set its original length: DPDK 22.11's
 * rte_pcapng_copy takes no comment and records the copy's length. The
 * block is one segment (the pool's data room is made for it). */
static int
epb_note(struct rte_mbuf *epb, uint32_t orig_len, const char *text)
{
	uint8_t *b = rte_pktmbuf_mtod(epb, uint8_t *);
	uint32_t total = rte_pktmbuf_pkt_len(epb), cap_len, off, end;
	uint16_t tl = (uint16_t)strnlen(text, COMMENT_MAX);
	uint32_t add = 4 + RTE_ALIGN(tl, 4u);
	uint8_t *o;

	if (!rte_pktmbuf_is_contiguous(epb) || total < 32)
		return -1;
	memcpy(&cap_len, b + 20, 4);
	memcpy(b + 24, &orig_len, 4);
	/* Find where the options end: at opt_endofopt, or the trailer. */
	off = 28 + RTE_ALIGN(cap_len, 4u);
	end = total - 4;
	while (off + 4 <= end) {
		uint16_t code, len;

		memcpy(&code, b + off, 2);
		memcpy(&len, b + off + 2, 2);
		if (code == 0)
			break;
		off += 4 + RTE_ALIGN(len, 4u);
	}
	if (off > end)
		return -1;
	/* Cut there; add the comment, opt_endofopt and the trailer. */
	if (rte_pktmbuf_trim(epb, (uint16_t)(total - off)) != 0)
		return -1;
	o = (uint8_t *)rte_pktmbuf_append(epb, (uint16_t)(add + 4 + 4));
	if (o == NULL)
		return -1;
	b = rte_pktmbuf_mtod(epb, uint8_t *);
	total = rte_pktmbuf_pkt_len(epb);
	{
		uint16_t code = 1, zero = 0;

		memset(o, 0, add + 8);
		memcpy(o, &code, 2);
		memcpy(o + 2, &tl, 2);
		memcpy(o + 4, text, tl);
		memcpy(o + add, &zero, 2);
		memcpy(o + add + 2, &zero, 2);
		memcpy(o + add + 4, &total, 4);
		memcpy(b + 4, &total, 4);
	}
	return 0;
}

static void
verdict_text(const struct weir_app *a, const struct weir_cap_rec *r, char *out, size_t len)
{
	const struct weir_policy *p = a->cfg.policy;
	const char *dir = r->dir == WEIR_PORT_LAN ? "outbound" : "inbound";
	const char *cls = NULL;

	if (p != NULL && r->cls != WEIR_CBQ_NONE && r->cls < p->tree[r->dir].n_classes)
		cls = p->tree[r->dir].classes[r->cls].name;
	if (cls != NULL)
		snprintf(out, len, "weir: %s; class %s (%s), target %u", weir_cap_verdict_name(
				 (enum weir_cap_verdict)r->verdict), cls, dir, r->target);
	else
		snprintf(out, len, "weir: %s; %s, unshaped", weir_cap_verdict_name(
				 (enum weir_cap_verdict)r->verdict), dir);
}

static uint64_t
lost_now(const struct weir_app *a, const struct capture *c)
{
	uint64_t lost = 0;

	for (unsigned int i = 0; i < a->n_workers; i++) {
		struct weir_cap_counters cc;

		weir_worker_cap_counters(a->workers[i], &cc);
		lost += cc.lost[c->slot] - c->lost_base[i];
	}
	return lost;
}

static int64_t
wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* End capture c: statistics blocks, the file closed, its removal timed. */
static void
end_capture(struct weir_app *a, struct capture *c, const char *why)
{
	struct weir_captures *k = a->captures;

	if (!c->running)
		return;
	c->lost = lost_now(a, c);
	c->running = false;
	c->end_tsc = rte_rdtsc();
	snprintf(c->end_reason, sizeof(c->end_reason), "%s", why);
	if (c->pc != NULL) {
		char note[128];

		snprintf(note, sizeof(note), "weir: %s; %" PRIu64 " frames not copied", why, c->lost);
		for (int r = 0; r < WEIR_PORT__COUNT; r++)
			rte_pcapng_write_stats(c->pc, a->ports.id[r], r == 0 ? note : NULL,
					       (uint64_t)c->start_ns, (uint64_t)wall_ns(),
					       c->pkts_by[r], r == 0 ? c->lost : UINT64_MAX);
		rte_pcapng_close(c->pc);
		c->pc = NULL;
	}
	c->remove_tsc = c->end_tsc + (uint64_t)a->cfg.capture_keep_s * rte_get_tsc_hz();
	/* Its program may be in use by a worker until the next tap is taken
	 * (at most one per listed capture waits here). */
	for (int b = 0; b < CAPTURES_KEPT && c->filter.bpf != NULL; b++)
		if (k->orphan[b] == NULL) {
			k->orphan[b] = c->filter.bpf;
			c->filter.bpf = NULL;
		}
	c->slot = -1;
	post_tap(a);
	RTE_LOG(INFO, USER1, "capture %u ended (%s): %" PRIu64 " frames, %" PRIu64 " bytes\n",
		c->id, why, c->pkts, c->bytes);
}

static void
forget(struct capture *c)
{
	if (c->path[0] != '\0')
		unlink(c->path);
	json_decref(c->filter_json);
	weir_cap_filter_free(&c->filter);
	memset(c, 0, sizeof(*c));
}

/* Write record r to capture c (if its limits allow), as block epb. */
static void
write_one(struct weir_app *a, struct capture *c, const struct weir_cap_rec *r, unsigned int wi)
{
	struct weir_captures *k = a->captures;
	struct rte_mbuf *epb;
	char note[COMMENT_MAX + 1];
	ssize_t n;

	if (c->pkts >= c->max_pkts) {
		end_capture(a, c, "packet limit");
		return;
	}
	epb = rte_pcapng_copy(a->ports.id[r->dir], wi, r->m, k->epb_pool, c->snap, r->tsc,
			      RTE_PCAPNG_DIRECTION_IN);
	if (epb == NULL) {
		c->lost_base[0]--;      /* counted lost like a copy the worker could not make */
		return;
	}
	verdict_text(a, r, note, sizeof(note));
	if (epb_note(epb, r->orig_len, note) != 0) {
		rte_pktmbuf_free(epb);
		c->lost_base[0]--;
		return;
	}
	if (c->bytes + rte_pktmbuf_pkt_len(epb) > c->max_bytes) {
		rte_pktmbuf_free(epb);
		end_capture(a, c, "byte limit");
		return;
	}
	n = rte_pcapng_write_packets(c->pc, &epb, 1);
	/* DPDK 22.11's writer leaves the blocks to the caller (its header
	 * says they are freed; its code and dpdk-dumpcap free them after). */
	rte_pktmbuf_free(epb);
	if (n < 0) {
		char why[160];

		snprintf(why, sizeof(why), "cannot write %.100s: %s", c->path, strerror(errno));
		end_capture(a, c, why);
		return;
	}
	c->bytes += (uint64_t)n;
	c->pkts++;
	c->pkts_by[r->dir & 1]++;
	c->verdicts[r->verdict < WEIR_CAPV__COUNT ? r->verdict : 0]++;
	if (c->pkts >= c->max_pkts)
		end_capture(a, c, "packet limit");
}

static void
drain(struct weir_app *a)
{
	struct weir_captures *k = a->captures;

	for (unsigned int i = 0; i < a->n_workers; i++) {
		struct weir_cap_rec recs[64];
		unsigned int left = DRAIN_PER_WAKE, n;

		while (k->ring[i] != NULL && left > 0 && (n = rte_ring_sc_dequeue_burst_elem(k->ring[i], recs,
				sizeof(recs[0]), RTE_MIN(left, RTE_DIM(recs)), NULL)) > 0) {
			left -= n;
			for (unsigned int j = 0; j < n; j++) {
				bool used = false;

				for (int s = 0; s < CAPTURES_KEPT; s++) {
					struct capture *c = &k->c[s];

					if (!c->used || !c->running || !(recs[j].mask & (1u << c->slot)) ||
					    (int16_t)(recs[j].gen - c->gen_from) < 0)
						continue;
					write_one(a, c, &recs[j], i);
					used = true;
				}
				k->records++;
				k->stray += !used;
				rte_pktmbuf_free(recs[j].m);
			}
		}
	}
}

void
weir_captures_poll(struct weir_app *a)
{
	struct weir_captures *k = a->captures;
	uint64_t now = rte_rdtsc(), hz = rte_get_tsc_hz();

	if (k == NULL)
		return;
	drain(a);
	for (int i = 0; i < CAPTURES_KEPT; i++) {
		struct capture *c = &k->c[i];

		if (!c->used)
			continue;
		if (c->running && (double)(now - c->start_tsc) >= c->max_s * (double)hz)
			end_capture(a, c, "time limit");
		if (!c->running && now >= c->remove_tsc)
			forget(c);      /* abandoned: its file goes after capture.keep */
	}
	/* A class filter names a class: after a policy switch, find it again. */
	if (k->repost || (k->tap != NULL && a->cfg.policy != NULL &&
			  a->cfg.policy->epoch != k->epoch))
		post_tap(a);
	retire(a);
}

/* ---- the API ---- */

/* A JSON number that is an integer (340.0 is one to JSON Schema too): 0, or -1. */
static int
json_int_of(const json_t *v, json_int_t *out)
{
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	if (json_is_real(v) && json_real_value(v) >= -9e15 && json_real_value(v) <= 9e15 &&
	    json_real_value(v) == (double)(json_int_t)json_real_value(v)) {
		*out = (json_int_t)json_real_value(v);
		return 0;
	}
	return -1;
}

static int
json_uint(const json_t *o, const char *key, uint64_t def, uint64_t max, uint64_t *out, char *msg,
	  size_t msglen, unsigned int *status)
{
	const json_t *v = json_object_get(o, key);
	json_int_t i;

	*out = def;
	if (v == NULL)
		return 0;
	if (json_int_of(v, &i) < 0 || i < 1) {
		snprintf(msg, msglen, "'%s' must be a positive integer", key);
		*status = 400;
		return -1;
	}
	if ((uint64_t)i > max) {
		snprintf(msg, msglen, "'%s' is %" PRIu64 "; at most %" PRIu64 " is allowed", key,
			 (uint64_t)i, max);
		*status = 422;
		return -1;
	}
	*out = (uint64_t)i;
	return 0;
}

/* The filter object into c (class name kept for resolution). */
static unsigned int
parse_filter(struct weir_app *a, const json_t *f, struct capture *c, char *msg, size_t msglen)
{
	const char *key;
	const json_t *v;

	if (f == NULL)
		return 0;
	if (!json_is_object(f)) {
		snprintf(msg, msglen, "'filter' must be an object");
		return 400;
	}
	json_object_foreach((json_t *)(uintptr_t)f, key, v) {
		char val[512], err[512];
		/* Ports are numbers, the protocol a name or a number, the rest text. */
		const bool num = strcmp(key, "port") == 0 || strcmp(key, "peer_port") == 0;
		const bool either = strcmp(key, "proto") == 0;
		json_int_t i;

		if ((num || either) && json_int_of(v, &i) == 0)
			snprintf(val, sizeof(val), "%" JSON_INTEGER_FORMAT, i);
		else if (json_is_string(v) && !num && json_string_length(v) < sizeof(val) &&
			 strlen(json_string_value(v)) == json_string_length(v))
			snprintf(val, sizeof(val), "%s", json_string_value(v));
		else {
			snprintf(msg, msglen, "filter '%.64s' must be %s", key,
				 num ? "an integer" : either ? "a name or an integer" :
				 "a string (at most 511 bytes, no NUL)");
			return 400;
		}
		if (strcmp(key, "class") == 0) {
			const struct weir_policy *p = a->cfg.policy;

			if (p == NULL) {
				snprintf(msg, msglen, "filter 'class': no direction is shaped");
				return 422;
			}
			if (leaf_of(p, 0, val) == WEIR_CBQ_NONE && leaf_of(p, 1, val) == WEIR_CBQ_NONE) {
				snprintf(msg, msglen, "filter 'class': no leaf class '%.64s' in the policy "
					 "in force", val);
				return 422;
			}
			snprintf(c->cls, sizeof(c->cls), "%.63s", val);
			c->filter.match |= WEIR_CAPF_CLASS;
			continue;
		}
		/* A subscriber is its leaf classes (one name in both trees:
		 * policy_subs.h), so its filter is theirs, found again by name
		 * after a policy switch as a class filter is. */
		if (strcmp(key, "subscriber") == 0) {
			const struct weir_policy *p = a->cfg.policy;
			int64_t i = p != NULL && p->subs != NULL ? weir_subs_find(p->subs, val) : -1;
			char name[WEIR_POLICY_NAME_LEN];

			if (json_object_get(f, "class") != NULL) {
				snprintf(msg, msglen, "filter: 'class' and 'subscriber' cannot be combined");
				return 400;
			}
			if (i < 0) {
				snprintf(msg, msglen, "filter 'subscriber': no subscriber '%.64s'", val);
				return 422;
			}
			weir_subs_class_name(p->subs, (uint32_t)i, name);
			snprintf(c->cls, sizeof(c->cls), "%.63s", name);
			c->filter.match |= WEIR_CAPF_CLASS;
			continue;
		}
		if (weir_cap_filter_set(&c->filter, key, val, err, sizeof(err)) < 0) {
			snprintf(msg, msglen, "filter: %s", err);
			return strncmp(err, "unknown", 7) == 0 ? 400 : 422;
		}
	}
	return 0;
}

static json_t *
capture_json(const struct weir_app *a, const struct capture *c)
{
	const uint64_t hz = rte_get_tsc_hz(), now = rte_rdtsc();
	char url[96];
	json_t *v = json_object();

	snprintf(url, sizeof(url), "/api/v1/captures/%u/pcapng", c->id);
	for (int i = 1; i < WEIR_CAPV__COUNT; i++)
		json_object_set_new(v, weir_cap_verdict_name((enum weir_cap_verdict)i),
				    json_integer((json_int_t)c->verdicts[i]));
	json_error_t je;
	json_t *o = json_pack_ex(&je, 0, "{s:I, s:s, s:s, s:O, s:{s:I, s:I, s:f, s:I}, s:I, s:I, "
				 "s:I, s:o, s:f, s:f, s:s, s:s, s:b}",
		"id", (json_int_t)c->id,
		"state", c->running ? "running" : "ended",
		"end_reason", c->end_reason,
		"filter", c->filter_json,
		"limits", "max_packets", (json_int_t)c->max_pkts, "max_bytes", (json_int_t)c->max_bytes,
			  "max_seconds", c->max_s, "snaplen", (json_int_t)c->snap,
		"packets", (json_int_t)c->pkts,
		"bytes", (json_int_t)c->bytes,
		"lost", (json_int_t)(c->running ? lost_now(a, c) : c->lost),
		"verdicts", v,
		"duration_s", (double)((c->running ? now : c->end_tsc) - c->start_tsc) / (double)hz,
		"removed_in_s", c->running ? -1.0 : (double)(c->remove_tsc - RTE_MIN(now, c->remove_tsc)) /
						     (double)hz,
		"file", c->path,
		"download", url,
		"class_missing", c->cls_missing);
	if (o == NULL)
		RTE_LOG(ERR, USER1, "capture_json: %s\n", je.text);
	return o;
}

/* A slot for a new capture: a free entry, or the oldest ended one. */
static struct capture *
new_entry(struct weir_captures *k)
{
	struct capture *old = NULL;

	for (int i = 0; i < CAPTURES_KEPT; i++) {
		if (!k->c[i].used)
			return &k->c[i];
		if (!k->c[i].running && (old == NULL || k->c[i].id < old->id))
			old = &k->c[i];
	}
	if (old != NULL)
		forget(old);
	return old;
}

unsigned int
weir_captures_start(struct weir_app *a, const json_t *req, json_t **out, char *msg,
		    size_t msglen)
{
	static const char *const keys[] = { "filter", "max_packets", "max_bytes", "max_seconds",
					    "snaplen", NULL };
	struct weir_captures *k = a->captures;
	struct capture nc = { .slot = -1 }, *c;
	unsigned int status = 0, running = 0;
	bool slot_used[WEIR_CAP_MAX] = { false };
	const char *key;
	const json_t *v;
	uint64_t secs;
	struct utsname un;
	char os[200];
	int fd;

	if (k == NULL || !k->dir_ok) {
		snprintf(msg, msglen, "captures are off (the capture directory %s could not be made)",
			 a->cfg.capture_dir);
		return 503;
	}
	json_object_foreach((json_t *)(uintptr_t)req, key, v) {
		bool known = false;

		for (int i = 0; keys[i] != NULL; i++)
			known |= strcmp(keys[i], key) == 0;
		if (!known) {
			snprintf(msg, msglen, "unknown field '%.64s' (filter, max_packets, max_bytes, "
				 "max_seconds, snaplen)", key);
			return 400;
		}
	}
	for (int i = 0; i < CAPTURES_KEPT; i++)
		if (k->c[i].used && k->c[i].running) {
			running++;
			slot_used[k->c[i].slot] = true;
		}
	if (running >= WEIR_CAP_MAX || k->n_retired >= RETIRED_MAX) {
		snprintf(msg, msglen, "%u captures are running, the most weir runs at once; stop "
			 "one first (DELETE /api/v1/captures/ID)", running);
		k->refused++;
		return 409;
	}
	{
		uint64_t snap;

		if (json_uint(req, "max_packets", PKTS_DEFAULT, PKTS_MAX, &nc.max_pkts, msg, msglen,
			      &status) < 0 ||
		    json_uint(req, "max_bytes", RTE_MIN(BYTES_DEFAULT, a->cfg.capture_max_bytes),
			      a->cfg.capture_max_bytes, &nc.max_bytes, msg, msglen, &status) < 0 ||
		    json_uint(req, "max_seconds", (uint64_t)SECONDS_DEFAULT, (uint64_t)SECONDS_MAX,
			      &secs, msg, msglen, &status) < 0 ||
		    json_uint(req, "snaplen", SNAP_DEFAULT, SNAP_MAX, &snap, msg, msglen,
			      &status) < 0) {
			k->refused++;
			return status;
		}
		if (snap < SNAP_MIN) {
			snprintf(msg, msglen, "'snaplen' must be at least %d", SNAP_MIN);
			k->refused++;
			return 422;
		}
		nc.snap = (uint32_t)snap;
		nc.max_s = (double)secs;
	}
	status = parse_filter(a, json_object_get(req, "filter"), &nc, msg, msglen);
	if (status != 0) {
		weir_cap_filter_free(&nc.filter);
		k->refused++;
		return status;
	}
	c = new_entry(k);
	if (c == NULL) {
		weir_cap_filter_free(&nc.filter);
		snprintf(msg, msglen, "no room for another capture");
		return 409;
	}
	nc.used = nc.running = true;
	nc.id = ++k->next_id;
	for (int s = 0; s < WEIR_CAP_MAX; s++)
		if (!slot_used[s]) {
			nc.slot = s;
			break;
		}
	nc.filter_json = json_object_get(req, "filter") != NULL ?
		json_deep_copy(json_object_get(req, "filter")) : json_object();
	snprintf(nc.path, sizeof(nc.path), "%s/weir-capture-%u.pcapng", a->cfg.capture_dir, nc.id);
	fd = open(nc.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	uname(&un);
	snprintf(os, sizeof(os), "%s %s", un.sysname, un.release);
	nc.pc = fd < 0 ? NULL : rte_pcapng_fdopen(fd, os, NULL, "weir " WEIR_VERSION,
						  "weir capture");
	if (nc.pc == NULL) {
		snprintf(msg, msglen, "cannot create %s: %s", nc.path,
			 fd < 0 ? strerror(errno) : rte_strerror(rte_errno));
		if (fd >= 0) {
			close(fd);
			unlink(nc.path);
		}
		json_decref(nc.filter_json);
		weir_cap_filter_free(&nc.filter);
		return 500;
	}
	for (unsigned int i = 0; i < a->n_workers; i++) {
		struct weir_cap_counters cc;

		weir_worker_cap_counters(a->workers[i], &cc);
		nc.lost_base[i] = cc.lost[nc.slot];
	}
	nc.start_tsc = rte_rdtsc();
	nc.start_ns = wall_ns();
	*c = nc;
	post_tap(a);
	c->gen_from = k->gen;
	k->started++;
	*out = capture_json(a, c);
	return 201;
}

json_t *
weir_captures_list(struct weir_app *a)
{
	struct weir_captures *k = a->captures;
	json_t *l = json_array();

	for (int i = 0; k != NULL && i < CAPTURES_KEPT; i++)
		if (k->c[i].used)
			json_array_append_new(l, capture_json(a, &k->c[i]));
	return json_pack("{s:o, s:{s:i, s:I, s:i, s:i, s:I}}", "captures", l,
			 "limits", "running_max", WEIR_CAP_MAX, "max_bytes",
			 (json_int_t)a->cfg.capture_max_bytes, "snaplen_max", SNAP_MAX,
			 "listed_max", CAPTURES_KEPT, "keep_s", (json_int_t)a->cfg.capture_keep_s);
}

unsigned int
weir_captures_get(struct weir_app *a, const char *id, json_t **out)
{
	struct capture *c = a->captures != NULL ? by_id(a->captures, id) : NULL;

	if (c == NULL)
		return 404;
	*out = capture_json(a, c);
	return 200;
}

unsigned int
weir_captures_stop(struct weir_app *a, const char *id, bool remove, json_t **out)
{
	struct capture *c = a->captures != NULL ? by_id(a->captures, id) : NULL;

	if (c == NULL)
		return 404;
	drain(a);       /* what the workers copied so far is in the file */
	end_capture(a, c, "stopped");
	*out = capture_json(a, c);
	if (remove) {
		json_object_set_new(*out, "state", json_string("deleted"));
		forget(c);
	}
	return 200;
}

unsigned int
weir_captures_file(struct weir_app *a, const char *id, int *fd, uint64_t *len, char *msg,
		   size_t msglen)
{
	struct capture *c = a->captures != NULL ? by_id(a->captures, id) : NULL;
	struct stat st;

	if (c == NULL)
		return 404;
	if (c->running) {
		snprintf(msg, msglen, "capture %u is still running: stop it (POST "
			 "/api/v1/captures/%u/stop) or wait for its limit", c->id, c->id);
		return 409;
	}
	*fd = open(c->path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0 || fstat(*fd, &st) != 0) {
		snprintf(msg, msglen, "cannot read %s: %s", c->path, strerror(errno));
		if (*fd >= 0)
			close(*fd);
		return 500;
	}
	*len = (uint64_t)st.st_size;
	return 200;
}

json_t *
weir_captures_json(const struct weir_app *a)
{
	const struct weir_captures *k = a->captures;
	uint64_t copied = 0, nombuf = 0, ring = 0;
	unsigned int running = 0;

	if (k == NULL)
		return json_null();
	for (unsigned int i = 0; i < a->n_workers; i++) {
		struct weir_cap_counters cc;

		weir_worker_cap_counters(a->workers[i], &cc);
		copied += cc.copied;
		nombuf += cc.lost_nombuf;
		ring += cc.lost_ring;
	}
	for (int i = 0; i < CAPTURES_KEPT; i++)
		running += k->c[i].used && k->c[i].running;
	return json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:b}",
			 "running", (int)running, "started", (json_int_t)k->started,
			 "refused", (json_int_t)k->refused, "copied", (json_int_t)copied,
			 "lost_pool_empty", (json_int_t)nombuf, "lost_ring_full", (json_int_t)ring,
			 "records", (json_int_t)k->records, "pdump", k->pdump);
}

/* ---- life ---- */

int
weir_captures_init(struct weir_app *a, char *err, size_t errlen)
{
	struct weir_captures *k = calloc(1, sizeof(*k));
	const int socket = (int)rte_socket_id();

	if (k == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	a->captures = k;
	k->copy_pool = rte_pktmbuf_pool_create("weir_cap_copies", a->cfg.capture_pool, 32, 0,
					       RTE_MBUF_DEFAULT_BUF_SIZE, socket);
	k->epb_pool = rte_pktmbuf_pool_create("weir_cap_blocks", 255, 0, 0,
					      (uint16_t)(rte_pcapng_mbuf_size(SNAP_MAX) + COMMENT_MAX +
							 64 + RTE_PKTMBUF_HEADROOM), socket);
	if (k->copy_pool == NULL || k->epb_pool == NULL) {
		snprintf(err, errlen, "%s: cannot create the capture pools (%u copies): %s (raise "
			 "EAL memory, -m, or lower capture.pool)", a->cfg.path, a->cfg.capture_pool,
			 rte_strerror(rte_errno));
		return -1;
	}
	for (unsigned int i = 0; i < a->cfg.n_workers; i++) {
		char name[RTE_RING_NAMESIZE];

		snprintf(name, sizeof(name), "weir_cap_%u", i);
		k->ring[i] = rte_ring_create_elem(name, sizeof(struct weir_cap_rec),
						  a->cfg.capture_ring,
						  (int)rte_lcore_to_socket_id(a->cfg.worker_lcores[i]),
						  RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (k->ring[i] == NULL) {
			snprintf(err, errlen, "cannot create the capture rings: %s",
				 rte_strerror(rte_errno));
			return -1;
		}
	}
	k->dir_ok = mkdir(a->cfg.capture_dir, 0700) == 0 || errno == EEXIST;
	if (!k->dir_ok)
		RTE_LOG(WARNING, USER1, "cannot create the capture directory %s: %s; captures are "
			"off\n", a->cfg.capture_dir, strerror(errno));
	if (a->cfg.capture_pdump) {
		if (rte_pdump_init() != 0) {
			snprintf(err, errlen, "%s: capture.pdump: rte_pdump_init failed: %s (it needs "
				 "EAL's multi-process support: no --in-memory or --no-shconf)",
				 a->cfg.path, rte_strerror(rte_errno));
			return -1;
		}
		k->pdump = true;
	}
	return 0;
}

void
weir_captures_worker_conf(struct weir_app *a, unsigned int i, struct weir_worker_conf *wc)
{
	if (a->captures == NULL)
		return;
	wc->cap_ring = a->captures->ring[i];
	wc->cap_pool = a->captures->copy_pool;
}

void
weir_captures_free(struct weir_app *a)
{
	struct weir_captures *k = a->captures;

	if (k == NULL)
		return;
	drain(a);
	k->stopping = true;
	for (int i = 0; i < CAPTURES_KEPT; i++)
		if (k->c[i].used) {
			end_capture(a, &k->c[i], "weir stopped");
			/* Kept for the operator, not removed at exit. */
			json_decref(k->c[i].filter_json);
			weir_cap_filter_free(&k->c[i].filter);
		}
	/* The workers have stopped: nothing uses a tap now. */
	for (unsigned int i = 0; i < a->n_workers; i++)
		weir_worker_cap_post(a->workers[i], NULL);
	for (unsigned int r = 0; r < k->n_retired; r++) {
		free_bpfs(k->retired[r].bpf, CAPTURES_KEPT);
		free(k->retired[r].tap);
	}
	free_bpfs(k->orphan, CAPTURES_KEPT);
	free(k->tap);
	for (unsigned int i = 0; i < WEIR_MAX_WORKERS; i++) {
		if (k->ring[i] == NULL)
			continue;
		{
			struct weir_cap_rec r;

			while (rte_ring_sc_dequeue_elem(k->ring[i], &r, sizeof(r)) == 0)
				rte_pktmbuf_free(r.m);
		}
		rte_ring_free(k->ring[i]);
	}
	if (k->pdump)
		rte_pdump_uninit();
	rte_mempool_free(k->copy_pool);
	rte_mempool_free(k->epb_pool);
	free(k);
	a->captures = NULL;
}
