/* SPDX-License-Identifier: BSD-3-Clause
 * weir: DiffServ edge markers (marker.h): configuration, the per-class
 * dispatch, colour counters and the DSCP rewrite. TBQ is marker_tbq.c, the
 * rate-adapting bucket and the ARM/CARM controllers marker_rate.c.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <rte_malloc.h>

#include "cksum.h"
#include "marker_int.h"
#include "mbuf_meta.h"

#define FRAME_MAX 1514u         /* a bucket smaller than a full frame never lets one through */
#define QUEUE_MAX 4096u
#define DEPTH_MAX (1u << 30)

static const char *const type_names[WEIR_MARK__COUNT] = {
	[WEIR_MARK_NONE] = "none", [WEIR_MARK_TB] = "tb", [WEIR_MARK_SRTCM] = "srtcm",
	[WEIR_MARK_TRTCM] = "trtcm", [WEIR_MARK_TBQ] = "tbq", [WEIR_MARK_TBQ_LD] = "tbq-ld",
	[WEIR_MARK_ARM] = "arm", [WEIR_MARK_CARM] = "carm",
};

const char *
weir_marker_type_name(unsigned int type)
{
	return type < WEIR_MARK__COUNT ? type_names[type] : "?";
}

int
weir_marker_type_find(const char *name)
{
	for (int i = 0; i < WEIR_MARK__COUNT; i++)
		if (strcmp(name, type_names[i]) == 0)
			return i;
	return -1;
}

void
weir_marker_conf_init(struct weir_marker_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->dscp[WEIR_GREEN] = 10;       /* AF11 */
	c->dscp[WEIR_YELLOW] = 12;      /* AF12 */
	c->dscp[WEIR_RED] = 14;         /* AF13 */
	c->rtt_us = 100000;
	c->alpha_milli = 200;
	c->window_ms = 1000;
}

uint32_t
weir_marker_tbq_queue(uint64_t cir, uint32_t rtt_us, uint32_t cbs, uint32_t mtu)
{
	double at = (double)cir / 8.0 * rtt_us / 1e6 / mtu;     /* A T, packets */
	double bp = (at - sqrt(8.0 * cbs / mtu)) / 2.0;

	if (!(bp >= 2.0))
		return 2;
	return bp > QUEUE_MAX ? QUEUE_MAX : (uint32_t)lround(bp);
}

static int
bad(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int
bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static int
check_depth(const char *key, uint32_t v, char *err, size_t errlen)
{
	if (v < FRAME_MAX || v > DEPTH_MAX)
		return bad(err, errlen, "marker %s must be %u .. %u bytes (at least one full frame)",
			   key, FRAME_MAX, DEPTH_MAX);
	return 0;
}

int
weir_marker_conf_check(struct weir_marker_conf *c, uint64_t ceil, char *err, size_t errlen)
{
	const unsigned int t = c->type;
	const bool tbq = t == WEIR_MARK_TBQ || t == WEIR_MARK_TBQ_LD;

	if (t == WEIR_MARK_NONE)
		return 0;
	if (t >= WEIR_MARK__COUNT)
		return bad(err, errlen, "unknown marker type %u", t);
	if (c->cir == 0)
		return bad(err, errlen, "marker %s needs a contract rate cir above 0",
			   type_names[t]);
	if (c->cir > ceil)
		return bad(err, errlen, "marker cir (%llu bit/s) is above what the class can send "
			   "(its ceil, %llu bit/s): the contract could never be met",
			   (unsigned long long)c->cir, (unsigned long long)ceil);
	if (t == WEIR_MARK_TRTCM) {
		if (c->pir < c->cir)
			return bad(err, errlen, "marker trtcm needs pir >= cir");
		if (c->pir > ceil)
			return bad(err, errlen, "marker pir (%llu bit/s) is above the class's ceil "
				   "(%llu bit/s)", (unsigned long long)c->pir,
				   (unsigned long long)ceil);
	} else if (c->pir != 0) {
		return bad(err, errlen, "marker pir is for trtcm only");
	}
	if (c->color_aware && t != WEIR_MARK_SRTCM && t != WEIR_MARK_TRTCM)
		return bad(err, errlen, "marker color_aware is for srtcm and trtcm only");
	if (c->capped && !tbq)
		return bad(err, errlen, "marker capped is for tbq and tbq-ld only");
	for (int i = 0; i < WEIR_COLOURS; i++)
		if (c->dscp[i] > 63)
			return bad(err, errlen, "marker DSCP %u is not 0..63", c->dscp[i]);
	/* Default depth: 10 ms at the contract rate, at least two full frames. */
	if (c->cbs == 0) {
		uint64_t d = c->cir / 8 / 100;

		c->cbs = (uint32_t)RTE_MIN(RTE_MAX(d, 2ull * FRAME_MAX), (uint64_t)DEPTH_MAX);
	}
	if (check_depth("cbs", c->cbs, err, errlen) < 0)
		return -1;
	if (t == WEIR_MARK_SRTCM) {
		if (c->ebs == 0)
			c->ebs = c->cbs;
		if (check_depth("ebs", c->ebs, err, errlen) < 0)
			return -1;
	} else if (c->ebs != 0) {
		return bad(err, errlen, "marker ebs is for srtcm only");
	}
	if (t == WEIR_MARK_TRTCM) {
		if (c->pbs == 0)
			c->pbs = c->cbs;
		if (check_depth("pbs", c->pbs, err, errlen) < 0)
			return -1;
	} else if (c->pbs != 0) {
		return bad(err, errlen, "marker pbs is for trtcm only");
	}
	if (tbq) {
		if (c->rtt_us == 0 || c->rtt_us > 10000000)
			return bad(err, errlen, "marker rtt must be 1us .. 10s");
		if (c->queue == 0)
			c->queue = weir_marker_tbq_queue(c->cir, c->rtt_us, c->cbs, FRAME_MAX);
		if (c->queue < 2 || c->queue > QUEUE_MAX)
			return bad(err, errlen, "marker queue must be 2 .. %u packets", QUEUE_MAX);
		if (t == WEIR_MARK_TBQ_LD) {
			if (c->min_thresh == 0)
				c->min_thresh = c->queue / 4;
			if (c->min_thresh >= c->queue)
				return bad(err, errlen, "marker min_thresh (%u) must be below queue (%u)",
					   c->min_thresh, c->queue);
		} else if (c->min_thresh != 0) {
			return bad(err, errlen, "marker min_thresh is for tbq-ld only");
		}
	} else if (c->queue != 0 || c->min_thresh != 0) {
		return bad(err, errlen, "marker queue and min_thresh are for tbq and tbq-ld only");
	}
	if (t == WEIR_MARK_ARM || t == WEIR_MARK_CARM) {
		if (c->alpha_milli == 0 || c->alpha_milli > 1000)
			return bad(err, errlen, "marker alpha must be 0.001 .. 1");
		if (c->window_ms < 100 || c->window_ms > 10000)
			return bad(err, errlen, "marker window must be 100ms .. 10s");
	}
	return 0;
}

/* ---- the DSCP rewrite ---- */

bool
weir_marker_set_dscp(struct rte_mbuf *m, const struct weir_pkt *p, uint8_t dscp)
{
	uint8_t *h;

	/* A header the parser did not trust is not ours to patch. */
	if ((p->l3 != WEIR_L3_IPV4 && p->l3 != WEIR_L3_IPV6) || p->malformed != WEIR_MAL_NONE)
		return false;
	/* A clone shares its data: writing it would change the other copy. */
	if (!RTE_MBUF_DIRECT(m) || rte_mbuf_refcnt_read(m) != 1)
		return false;
	h = rte_pktmbuf_mtod_offset(m, uint8_t *, p->l3_off);
	if (p->l3 == WEIR_L3_IPV4) {
		uint8_t word[2];
		uint16_t nw;

		if ((uint32_t)p->l3_off + 20 > m->data_len || (h[0] >> 4) != 4)
			return false;
		word[0] = h[0];
		word[1] = (uint8_t)((dscp << 2) | (h[1] & 3));  /* ECN kept */
		if (word[1] == h[1])
			return true;
		memcpy(&nw, word, 2);
		weir_cksum_set16(h, h + 10, nw);
		return true;
	}
	if ((uint32_t)p->l3_off + 40 > m->data_len || (h[0] >> 4) != 6)
		return false;
	/* Traffic class: the low nibble of byte 0 and the high one of byte 1. */
	{
		uint8_t tc = (uint8_t)((dscp << 2) | ((h[1] >> 4) & 3));

		h[0] = (uint8_t)((h[0] & 0xf0) | (tc >> 4));
		h[1] = (uint8_t)((h[1] & 0x0f) | ((tc & 0x0f) << 4));
	}
	return true;
}

void
weir_marker_emit(struct weir_marker *k, struct rte_mbuf *m, enum weir_colour c,
		 const struct weir_markers_out *out)
{
	uint32_t len = rte_pktmbuf_pkt_len(m);

	k->ctr.pkts[c]++;
	k->ctr.bytes[c] += len;
	if (k->ctl.count_all || c == WEIR_GREEN)
		k->ctl.win_bytes += len;
	if (!weir_marker_set_dscp(m, &weir_mbuf_meta(m)->pkt, k->dscp[c]))
		k->ctr.not_ip++;
	out->send(out->arg, m);
}

/* ---- per class ---- */

static int
setup_one(struct weir_marker *k, const struct weir_marker_conf *c, uint64_t cir, uint64_t pir,
	  uint64_t hz, uint64_t now, int socket_id)
{
	k->type = c->type;
	k->color_aware = c->color_aware;
	k->capped = c->capped;
	memcpy(k->dscp, c->dscp, sizeof(k->dscp));
	k->tsc_hz = hz;
	k->ctr.token_rate = cir;
	k->rnd = 0x9e3779b9u;
	switch (c->type) {
	case WEIR_MARK_TB:
	case WEIR_MARK_SRTCM: {
		struct rte_meter_srtcm_params sp = {
			.cir = cir / 8, .cbs = c->cbs, .ebs = c->type == WEIR_MARK_TB ? 0 : c->ebs,
		};

		if (rte_meter_srtcm_profile_config(&k->srp, &sp) != 0 ||
		    rte_meter_srtcm_config(&k->sr, &k->srp) != 0)
			return -EINVAL;
		break;
	}
	case WEIR_MARK_TRTCM: {
		struct rte_meter_trtcm_params tp = {
			.cir = cir / 8, .pir = pir / 8, .cbs = c->cbs, .pbs = c->pbs,
		};

		if (rte_meter_trtcm_profile_config(&k->trp, &tp) != 0 ||
		    rte_meter_trtcm_config(&k->tr, &k->trp) != 0)
			return -EINVAL;
		break;
	}
	case WEIR_MARK_TBQ:
	case WEIR_MARK_TBQ_LD:
		weir_bucket_init(&k->tb, cir, c->cbs, hz, now);
		k->qcap = c->queue;
		k->min_thresh = c->type == WEIR_MARK_TBQ_LD ? c->min_thresh : c->queue;
		k->q = rte_zmalloc_socket("weir_tbq", (size_t)k->qcap * sizeof(*k->q),
					  RTE_CACHE_LINE_SIZE, socket_id);
		if (k->q == NULL)
			return -ENOMEM;
		break;
	case WEIR_MARK_ARM:
	case WEIR_MARK_CARM:
		weir_bucket_init(&k->tb, cir, c->cbs, hz, now);
		weir_rate_ctl_init(k, c, cir, now);
		break;
	default:
		break;
	}
	return 0;
}

/* A worker's part of a contract: never 0 (rte_meter refuses it). */
static inline uint64_t
part(uint64_t rate, uint64_t num, uint64_t den)
{
	return RTE_MAX((uint64_t)((unsigned __int128)rate * num / den), 8000ull);
}

int
weir_markers_set_share(struct weir_markers *ms, const struct weir_marker_conf *c, uint32_t cls,
		       uint64_t num, uint64_t den, uint64_t now)
{
	struct weir_marker *k;
	uint64_t cir, pir;

	if (ms == NULL || cls >= ms->n || den == 0 || ms->m[cls].type == WEIR_MARK_NONE)
		return -1;
	k = &ms->m[cls];
	cir = part(c->cir, num, den);
	pir = RTE_MAX(part(c->pir, num, den), cir);
	switch (k->type) {
	case WEIR_MARK_TB:
	case WEIR_MARK_SRTCM: {
		/* A new profile only: the meter's run-time state (its tokens) stays. */
		struct rte_meter_srtcm_params sp = {
			.cir = cir / 8, .cbs = c->cbs, .ebs = k->type == WEIR_MARK_TB ? 0 : c->ebs,
		};

		if (rte_meter_srtcm_profile_config(&k->srp, &sp) != 0)
			return -1;
		k->ctr.token_rate = cir;
		break;
	}
	case WEIR_MARK_TRTCM: {
		struct rte_meter_trtcm_params tp = {
			.cir = cir / 8, .pir = pir / 8, .cbs = c->cbs, .pbs = c->pbs,
		};

		if (rte_meter_trtcm_profile_config(&k->trp, &tp) != 0)
			return -1;
		k->ctr.token_rate = cir;
		break;
	}
	case WEIR_MARK_TBQ:
	case WEIR_MARK_TBQ_LD:
		weir_bucket_fill(&k->tb, now);
		weir_bucket_set_rate(&k->tb, cir, k->tsc_hz);
		k->ctr.token_rate = cir;
		break;
	case WEIR_MARK_ARM:
	case WEIR_MARK_CARM: {
		struct weir_rate_ctl *r = &k->ctl;
		const double a = (double)cir / 8.0;

		/* The controller's state is in bytes/s of the old part. */
		if (r->A > 0)
			r->rt *= a / r->A;
		r->A = a;
		weir_bucket_fill(&k->tb, now);
		weir_bucket_set_rate(&k->tb, (uint64_t)(r->rt * 8.0), k->tsc_hz);
		k->ctr.token_rate = (uint64_t)(r->rt * 8.0);
		break;
	}
	default:
		break;
	}
	return 0;
}

struct weir_markers *
weir_markers_create(struct weir_marker_confs confs, uint64_t num, uint64_t den, uint64_t hz,
		    uint64_t now, int socket_id, int *err)
{
	struct weir_markers *ms;
	uint16_t n_mark = 0;

	*err = 0;
	for (uint16_t i = 0; i < confs.n; i++)
		n_mark += weir_marker_confs_at(confs, i)->type != WEIR_MARK_NONE;
	if (n_mark == 0 || den == 0)
		return NULL;
	ms = rte_zmalloc_socket("weir_markers", sizeof(*ms) + confs.n * sizeof(ms->m[0]),
				RTE_CACHE_LINE_SIZE, socket_id);
	if (ms == NULL) {
		*err = -ENOMEM;
		return NULL;
	}
	ms->n = confs.n;
	ms->next = UINT64_MAX;
	for (uint16_t i = 0; i < confs.n; i++) {
		const struct weir_marker_conf *c = weir_marker_confs_at(confs, i);
		/* The worker's share of the contract. */
		uint64_t cir = part(c->cir, num, den);
		uint64_t pir = RTE_MAX(part(c->pir, num, den), cir);
		int rc;

		if (c->type == WEIR_MARK_NONE)
			continue;
		rc = setup_one(&ms->m[i], c, cir, pir, hz, now, socket_id);
		if (rc != 0) {
			*err = rc;
			weir_markers_free(ms, NULL);
			return NULL;
		}
		if (c->type == WEIR_MARK_TBQ || c->type == WEIR_MARK_TBQ_LD)
			ms->n_tbq++;
		if (c->type == WEIR_MARK_ARM || c->type == WEIR_MARK_CARM) {
			ms->n_ctl++;
			ms->next = RTE_MIN(ms->next, ms->m[i].ctl.next);
		}
	}
	return ms;
}

void
weir_markers_free(struct weir_markers *ms, const struct weir_markers_out *out)
{
	if (ms == NULL)
		return;
	for (uint16_t i = 0; i < ms->n; i++) {
		struct weir_marker *k = &ms->m[i];

		while (k->qn > 0) {
			struct rte_mbuf *m = k->q[k->qhead];

			k->qhead = k->qhead + 1 == k->qcap ? 0 : k->qhead + 1;
			k->qn--;
			if (out != NULL)
				weir_marker_emit(k, m, WEIR_RED, out);
			else
				rte_pktmbuf_free(m);
		}
		rte_free(k->q);
	}
	rte_free(ms);
}

/* The colour a colour-aware meter is told the frame already has. */
static inline enum rte_color
pre_colour(const struct weir_marker *k, const struct rte_mbuf *m)
{
	uint8_t d = weir_mbuf_meta((struct rte_mbuf *)(uintptr_t)m)->pkt.dscp;

	if (d == k->dscp[WEIR_RED])
		return RTE_COLOR_RED;
	if (d == k->dscp[WEIR_YELLOW])
		return RTE_COLOR_YELLOW;
	return RTE_COLOR_GREEN;
}

static inline enum weir_colour
from_rte(enum rte_color c)
{
	return c == RTE_COLOR_GREEN ? WEIR_GREEN : c == RTE_COLOR_YELLOW ? WEIR_YELLOW : WEIR_RED;
}

void
weir_markers_pass(struct weir_markers *ms, uint32_t cls, struct rte_mbuf *m, uint64_t now,
		  const struct weir_markers_out *out)
{
	struct weir_marker *k;
	uint32_t len = rte_pktmbuf_pkt_len(m);
	enum weir_colour c;

	if (unlikely(cls >= ms->n) || (k = &ms->m[cls])->type == WEIR_MARK_NONE) {
		out->send(out->arg, m);
		return;
	}
	switch (k->type) {
	case WEIR_MARK_TB:
		c = from_rte(rte_meter_srtcm_color_blind_check(&k->sr, &k->srp, now, len));
		break;
	case WEIR_MARK_SRTCM:
		c = from_rte(k->color_aware ?
			     rte_meter_srtcm_color_aware_check(&k->sr, &k->srp, now, len,
							       pre_colour(k, m)) :
			     rte_meter_srtcm_color_blind_check(&k->sr, &k->srp, now, len));
		break;
	case WEIR_MARK_TRTCM:
		c = from_rte(k->color_aware ?
			     rte_meter_trtcm_color_aware_check(&k->tr, &k->trp, now, len,
							       pre_colour(k, m)) :
			     rte_meter_trtcm_color_blind_check(&k->tr, &k->trp, now, len));
		break;
	case WEIR_MARK_TBQ:
	case WEIR_MARK_TBQ_LD:
		weir_tbq_pass(k, m, now, out);
		ms->next = RTE_MIN(ms->next, weir_tbq_next(k, now));
		return;
	default:        /* arm, carm */
		c = weir_bucket_take(&k->tb, len, now) ? WEIR_GREEN : WEIR_RED;
		break;
	}
	weir_marker_emit(k, m, c, out);
}

unsigned int
weir_markers_tick(struct weir_markers *ms, uint64_t now, const struct weir_markers_out *out)
{
	unsigned int n = 0;
	uint64_t next = UINT64_MAX;

	if (now < ms->next)
		return 0;
	for (uint16_t i = 0; i < ms->n; i++) {
		struct weir_marker *k = &ms->m[i];

		switch (k->type) {
		case WEIR_MARK_TBQ:
		case WEIR_MARK_TBQ_LD:
			n += weir_tbq_release(k, now, out);
			next = RTE_MIN(next, weir_tbq_next(k, now));
			break;
		case WEIR_MARK_ARM:
		case WEIR_MARK_CARM:
			weir_rate_ctl_step(k, now);
			next = RTE_MIN(next, k->ctl.next);
			break;
		default:
			break;
		}
	}
	ms->next = next;
	return n;
}

uint64_t
weir_markers_next(const struct weir_markers *ms)
{
	return ms != NULL ? ms->next : UINT64_MAX;
}

uint32_t
weir_markers_held(const struct weir_markers *ms)
{
	uint32_t n = 0;

	if (ms == NULL)
		return 0;
	for (uint16_t i = 0; i < ms->n; i++)
		n += ms->m[i].qn;
	return n;
}

int
weir_markers_counters(const struct weir_markers *ms, uint32_t cls,
		      struct weir_marker_counters *out)
{
	memset(out, 0, sizeof(*out));
	if (ms == NULL || cls >= ms->n)
		return -1;
	*out = ms->m[cls].ctr;
	return 0;
}
