/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the markers' own token bucket (its rate may change: tbq, arm,
 * carm) and the PI controllers of ARM and CARM (seed 004, Sec. 4.4).
 *
 * CARM: the in-profile (green) bytes are counted over a window T_TSW (1 s),
 * the count is low-pass filtered (rho / (s + rho), Eq. 4.12) and the token
 * rate follows a PI controller on e = A - x_avg, discretised by Tustin in
 * velocity form (Eq. 4.20) and clamped to 0 .. 1.25 A, which is the
 * anti-windup of Eq. 4.21. Gains by Ziegler-Nichols on the plant
 * rho e^{-s T_TSW} / (s + rho) (Eqs. 4.17-4.19, (1 - 1/4n) taken as 1):
 * w0 = (pi/4 + sqrt(pi^2/16 + rho T_TSW)) / T_TSW, T_I = 2 pi / (1.2 w0),
 * K_u = sqrt(1 + (w0/rho)^2), K_C = alpha K_u. (The thesis prints K_u as
 * sqrt(1 + (rho w0)^2) / rho; with its rho = 1 rad/s the two agree.)
 *
 * ARM [25] (Eqs. 4.9-4.11): the same loop on the total (all colours)
 * rate, its integral fed only by positive errors (Eq. 4.10's max[., 0]).
 * The thesis gives ARM [25]'s gains only by reference; weir uses CARM's.
 *
 * The step runs from the worker's loop every h = 1/37.5 s (the thesis'
 * sampling rate): arithmetic only, no syscalls.
 */
#include <math.h>

#include "marker_int.h"

#define CTL_HZ 37.5
#define CTL_RHO 1.0             /* rad/s, the estimator's pole */
#define CTL_MAX 1.25            /* A_max = 1.25 A, A_min = 0 */

void
weir_bucket_init(struct weir_bucket *b, uint64_t rate_bps, uint32_t depth, uint64_t hz,
		 uint64_t now)
{
	b->depth = (uint64_t)depth << 32;
	b->tokens = b->depth;   /* full at start, like rte_meter's */
	b->last = now;
	weir_bucket_set_rate(b, rate_bps, hz);
}

void
weir_bucket_set_rate(struct weir_bucket *b, uint64_t rate_bps, uint64_t hz)
{
	/* bytes per tick << 32 = bit/s << 29 / hz */
	b->rate = (uint64_t)(((unsigned __int128)rate_bps << 29) / hz);
	b->dt_full = b->rate ? b->depth / b->rate + 1 : UINT64_MAX;
}

void
weir_bucket_fill(struct weir_bucket *b, uint64_t now)
{
	uint64_t dt;

	if (now <= b->last)
		return;
	dt = now - b->last;
	b->last = now;
	if (dt >= b->dt_full) {
		b->tokens = b->depth;
		return;
	}
	b->tokens += dt * b->rate;      /* < 2 depth: no overflow (depth <= 2^62) */
	if (b->tokens > b->depth)
		b->tokens = b->depth;
}

uint64_t
weir_bucket_when(const struct weir_bucket *b, uint32_t len, uint64_t now)
{
	uint64_t need = (uint64_t)len << 32;
	uint64_t have = b->tokens;

	if (now > b->last) {
		uint64_t dt = now - b->last;

		have = dt >= b->dt_full ? b->depth : RTE_MIN(b->depth, have + dt * b->rate);
	}
	if (have >= need)
		return now;
	if (b->rate == 0 || need > b->depth)
		return UINT64_MAX;
	return now + (need - have + b->rate - 1) / b->rate;
}

void
weir_rate_ctl_init(struct weir_marker *k, const struct weir_marker_conf *c, uint64_t cir,
		   uint64_t now)
{
	struct weir_rate_ctl *r = &k->ctl;
	const double T = c->window_ms / 1000.0;
	const double w0 = (M_PI / 4 + sqrt(M_PI * M_PI / 16 + CTL_RHO * T)) / T;
	const double ku = sqrt(1 + (w0 / CTL_RHO) * (w0 / CTL_RHO));

	r->A = (double)cir / 8.0;
	r->rt = r->A;
	r->rho = CTL_RHO;
	r->h = 1.0 / CTL_HZ;
	r->ti = 2 * M_PI / (1.2 * w0);
	r->kc = c->alpha_milli / 1000.0 * ku;
	r->count_all = c->type == WEIR_MARK_ARM;
	r->win_ticks = (uint64_t)(T * (double)k->tsc_hz);
	r->h_ticks = (uint64_t)(r->h * (double)k->tsc_hz);
	r->win_end = now + r->win_ticks;
	r->next = now + r->h_ticks;
}

bool
weir_rate_ctl_step(struct weir_marker *k, uint64_t now)
{
	struct weir_rate_ctl *r = &k->ctl;
	const double T = (double)r->win_ticks / (double)k->tsc_hz;
	double x_in, e, d;

	if (now < r->next)
		return false;
	r->next = now - r->next >= r->h_ticks ? now + r->h_ticks : r->next + r->h_ticks;
	x_in = r->x_raw;
	if (now >= r->win_end) {
		/* The counting window closed: its rate is the estimator's new input. */
		r->x_raw = (double)r->win_bytes / T;
		r->win_bytes = 0;
		r->win_end = now - r->win_end >= r->win_ticks ? now + r->win_ticks :
			r->win_end + r->win_ticks;
	}
	/* Tustin of rho / (s + rho), input held between windows. */
	r->xavg = ((2 - r->rho * r->h) * r->xavg + r->rho * r->h * (r->x_raw + x_in)) /
		  (2 + r->rho * r->h);
	e = r->A - r->xavg;
	if (r->count_all)       /* ARM: the integral sees positive errors only */
		d = r->kc * (e - r->e_prev) +
		    r->kc * r->h / (2 * r->ti) * (fmax(e, 0) + fmax(r->e_prev, 0));
	else                    /* CARM, Eq. 4.20 */
		d = r->kc * (1 + r->h / (2 * r->ti)) * e - r->kc * (1 - r->h / (2 * r->ti)) * r->e_prev;
	r->e_prev = e;
	r->rt = fmin(CTL_MAX * r->A, fmax(0.0, r->rt + d));     /* Eq. 4.21 */
	weir_bucket_fill(&k->tb, now);  /* tokens so far at the old rate */
	weir_bucket_set_rate(&k->tb, (uint64_t)(r->rt * 8.0), k->tsc_hz);
	k->ctr.token_rate = (uint64_t)(r->rt * 8.0);
	return true;
}
