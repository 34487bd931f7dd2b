/* SPDX-License-Identifier: BSD-3-Clause
 * weir: dividing class rates among workers (the management lcore's side).
 * Runs every few milliseconds on the management lcore only: doubles and
 * libc allocation are fine here.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mode.h"
#include "share.h"

/* A worker's part of a class may be as small as 1 bit/s (weir_cbq_set_rate
 * takes it): flooring each part at the 8 kbit/s a configured class needs
 * served a class of 8 kbit/s on 8 workers at 64 kbit/s. The parts add up
 * to the class's rate; a worker with next to none of it gets more within
 * one split once its flows show demand. */
#define MIN_RATE WEIR_CBQ_SHARE_MIN

struct weir_share *
weir_share_create(const struct weir_policy_tree *t, unsigned int n_workers)
{
	struct weir_share *s;
	size_t n;

	if (t == NULL || t->n_classes == 0 || n_workers == 0)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	s->tree = t;
	s->n_workers = n_workers;
	s->n_classes = t->n_classes;
	n = (size_t)n_workers * t->n_classes;
	s->x = calloc(n, sizeof(*s->x));
	s->heavy = calloc(n, sizeof(*s->heavy));
	s->nlight = calloc(n, sizeof(*s->nlight));
	s->light = calloc(n, sizeof(*s->light));
	s->by_use = calloc(t->n_classes, sizeof(*s->by_use));
	s->dem = calloc(n, sizeof(*s->dem));
	s->sub = calloc(n, sizeof(*s->sub));
	s->sub_conf = calloc(t->n_classes, sizeof(*s->sub_conf));
	s->rate = calloc(n, sizeof(*s->rate));
	s->ceil = calloc(n, sizeof(*s->ceil));
	if (s->x == NULL || s->heavy == NULL || s->nlight == NULL || s->light == NULL ||
	    s->by_use == NULL || s->dem == NULL || s->sub == NULL || s->sub_conf == NULL ||
	    s->rate == NULL || s->ceil == NULL) {
		weir_share_free(s);
		return NULL;
	}
	/* Flows that size their windows to the part never queue: their
	 * count alone cannot tell a bulk flow from an idle one. */
	for (uint16_t c = 0; c < t->n_classes; c++)
		s->by_use[c] = t->classes[c].is_leaf &&
			       (weir_mode(t->classes[c].mode)->flags & WEIR_MODEF_WINDOW) != 0;
	weir_share_split(s);    /* nothing sampled yet: an even split */
	return s;
}

void
weir_share_free(struct weir_share *s)
{
	if (s == NULL)
		return;
	free(s->x);
	free(s->heavy);
	free(s->nlight);
	free(s->light);
	free(s->by_use);
	free(s->dem);
	free(s->sub);
	free(s->sub_conf);
	free(s->rate);
	free(s->ceil);
	free(s);
}

static inline void
ewma(double *v, double sample)
{
	*v += WEIR_SHARE_GAIN * (sample - *v);
}

void
weir_share_sample(struct weir_share *s, unsigned int w, uint32_t leaf, uint32_t backlogged)
{
	if (w >= s->n_workers || leaf >= s->n_classes)
		return;
	ewma(&s->x[(size_t)w * s->n_classes + leaf], (double)backlogged);
}

void
weir_share_sample_use(struct weir_share *s, unsigned int w, uint32_t leaf, uint32_t heavy,
		      uint32_t light, double light_bps)
{
	size_t i;

	if (w >= s->n_workers || leaf >= s->n_classes || !s->by_use[leaf])
		return;
	i = (size_t)w * s->n_classes + leaf;
	ewma(&s->heavy[i], (double)heavy);
	ewma(&s->nlight[i], (double)light);
	ewma(&s->light[i], light_bps);
}

/*
 * Leaf cls split by use (max-min over flows, water-filling): on each
 * worker its light flows as a group, capped at HEADROOM times what they
 * used, and its heavy flows, uncapped; a group whose cap is below the
 * level times its flows gets its cap, the others divide what is left by
 * flows. When every group is capped (the class is not full) the rest goes
 * by sending flows. Returned as flow counts (*xe, summing to xs) for the
 * split by flows that follows. A light connection (an ssh session, a
 * keep-alive) counted as a flow on worker B took half of a tcr class from
 * a bulk flow on worker A.
 */
static void
use_weights(const struct weir_share *s, uint32_t cls, double xs, double *xe)
{
	const unsigned int nw = s->n_workers;
	const size_t nc = s->n_classes;
	const double rate = (double)s->tree->classes[cls].cbq.rate;
	/* groups: 2w the light flows of worker w, 2w + 1 its heavy ones */
	double cap[2 * RTE_MAX_LCORE], n[2 * RTE_MAX_LCORE], give[2 * RTE_MAX_LCORE];
	bool fixed[2 * RTE_MAX_LCORE], more = true;
	double left = rate, level = 0.0;

	for (unsigned int w = 0; w < nw; w++) {
		const size_t i = w * nc + cls;

		n[2 * w] = s->nlight[i];
		cap[2 * w] = WEIR_SHARE_HEADROOM * s->light[i];
		n[2 * w + 1] = s->heavy[i];
		cap[2 * w + 1] = rate;
		fixed[2 * w] = fixed[2 * w + 1] = false;
		give[2 * w] = give[2 * w + 1] = 0.0;
	}
	while (more) {
		double flows = 0.0;

		more = false;
		for (unsigned int g = 0; g < 2 * nw; g++)
			if (!fixed[g])
				flows += n[g];
		if (flows <= 0.0)
			break;
		level = left / flows;
		for (unsigned int g = 0; g < 2 * nw; g++)
			if (!fixed[g] && cap[g] < level * n[g]) {
				give[g] = cap[g];
				left -= cap[g];
				fixed[g] = more = true;
			}
	}
	for (unsigned int g = 0; g < 2 * nw; g++)
		if (!fixed[g]) {
			give[g] = level * n[g];
			left -= give[g];
		}
	for (unsigned int w = 0; w < nw; w++)
		xe[w] = (give[2 * w] + give[2 * w + 1] + RTE_MAX(left, 0.0) * s->x[w * nc + cls] / xs) /
			rate * xs;
}

static void
set_split(struct weir_share *s, uint32_t cls, const double *frac)
{
	const struct weir_cbq_class_conf *k = &s->tree->classes[cls].cbq;
	uint64_t ceil = k->ceil != 0 ? k->ceil : k->rate;

	for (unsigned int w = 0; w < s->n_workers; w++) {
		size_t i = (size_t)w * s->n_classes + cls;
		uint64_t r = (uint64_t)((double)k->rate * frac[w] + 0.5);
		uint64_t c = (uint64_t)((double)ceil * frac[w] + 0.5);

		s->rate[i] = RTE_MAX(r, MIN_RATE);
		s->ceil[i] = RTE_MAX(c, s->rate[i]);
	}
}

void
weir_share_split(struct weir_share *s)
{
	const unsigned int nw = s->n_workers;
	const uint16_t nc = s->n_classes;
	double frac[RTE_MAX_LCORE];

	if (nw > RTE_DIM(frac))
		return;
	/* dem: demand below a class per worker; sub: the rates its active
	 * children got per worker; sub_conf: their configured sum. */
	memset(s->dem, 0, (size_t)nw * nc * sizeof(*s->dem));
	memset(s->sub, 0, (size_t)nw * nc * sizeof(*s->sub));
	memset(s->sub_conf, 0, (size_t)nc * sizeof(*s->sub_conf));
	/* Children have larger indices than their parents: walking down from
	 * the last class, everything below a class is done when it is split. */
	for (int cls = nc - 1; cls >= 0; cls--) {
		const struct weir_policy_class *pc = &s->tree->classes[cls];
		uint64_t ceil = pc->cbq.ceil != 0 ? pc->cbq.ceil : pc->cbq.rate;
		const double rate = (double)pc->cbq.rate;
		double *dem = &s->dem[cls], *sub = &s->sub[cls];
		bool active;

		if (pc->is_leaf) {
			double xs = 0.0, xe[RTE_MAX_LCORE];

			for (unsigned int w = 0; w < nw; w++)
				xs += s->x[(size_t)w * nc + cls];
			active = xs >= 0.05;
			for (unsigned int w = 0; w < nw; w++)
				xe[w] = s->x[(size_t)w * nc + cls];
			if (active && s->by_use[cls] && rate > 0.0)
				use_weights(s, (uint16_t)cls, xs, xe);
			for (unsigned int w = 0; w < nw; w++) {
				double x = xe[w];

				frac[w] = (x + WEIR_SHARE_FLOOR) / (xs + nw * WEIR_SHARE_FLOOR);
				/* It wants up to its ceiling, where its flows are. */
				dem[(size_t)w * nc] = active ? (double)ceil * x / xs : 0.0;
			}
		} else {
			double dsum = 0.0, conf = s->sub_conf[cls];

			for (unsigned int w = 0; w < nw; w++)
				dsum += dem[(size_t)w * nc];
			active = dsum > 0.0;
			for (unsigned int w = 0; w < nw; w++) {
				double d = active ? (dem[(size_t)w * nc] / dsum + WEIR_SHARE_INNER_FLOOR) /
						    (1.0 + nw * WEIR_SHARE_INNER_FLOOR) : 1.0 / nw;

				/* Each worker's part: what its active children there are
				 * guaranteed, and the rest of the class's rate (what
				 * idle children do not use, and any excess) by demand. */
				if (conf >= rate && conf > 0.0)
					frac[w] = sub[(size_t)w * nc] / conf;
				else
					frac[w] = (sub[(size_t)w * nc] + (rate - conf) * d) / rate;
			}
		}
		set_split(s, (uint16_t)cls, frac);
		if (cls > 0 && active) {
			uint16_t up = pc->cbq.parent;

			s->sub_conf[up] += rate;
			for (unsigned int w = 0; w < nw; w++) {
				s->dem[(size_t)w * nc + up] += dem[(size_t)w * nc];
				s->sub[(size_t)w * nc + up] += (double)s->rate[(size_t)w * nc + cls];
			}
		}
	}
}

void
weir_share_publish(struct weir_share_box *b, uint32_t epoch, struct weir_share *const s[2],
		   unsigned int w)
{
	uint32_t seq = __atomic_load_n(&b->seq, __ATOMIC_RELAXED);

	__atomic_store_n(&b->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	b->epoch = epoch;
	for (int d = 0; d < 2; d++) {
		uint16_t n = s[d] != NULL ? weir_share_box_classes(s[d]->n_classes) : 0;

		b->n_classes[d] = n;
		for (uint16_t c = 0; c < n; c++) {
			__atomic_store_n(&b->rate[d][c], weir_share_rate(s[d], w, c), __ATOMIC_RELAXED);
			__atomic_store_n(&b->ceil[d][c], weir_share_ceil(s[d], w, c), __ATOMIC_RELAXED);
		}
	}
	__atomic_store_n(&b->seq, seq + 2, __ATOMIC_RELEASE);
}

/* Moved by more than 1/64 (1.6 %) of the value in force, or none yet. */
static bool
moved(uint64_t now, uint64_t split)
{
	uint64_t d = now > split ? now - split : split - now;

	return now == 0 || d > now / 64;
}

bool
weir_share_moved(const struct weir_share_box *b, uint32_t epoch, struct weir_share *const s[2],
		 unsigned int w)
{
	if (__atomic_load_n(&b->seq, __ATOMIC_RELAXED) == 0 || b->epoch != epoch)
		return true;
	for (int d = 0; d < 2; d++) {
		uint16_t n = s[d] != NULL ? weir_share_box_classes(s[d]->n_classes) : 0;

		if (b->n_classes[d] != n)
			return true;
		for (uint16_t c = 0; c < n; c++)
			if (moved(b->rate[d][c], weir_share_rate(s[d], w, c)) ||
			    moved(b->ceil[d][c], weir_share_ceil(s[d], w, c)))
				return true;
	}
	return false;
}
